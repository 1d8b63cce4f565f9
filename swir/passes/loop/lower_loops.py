"""-lower-loops: graph stage → loop stage.

Every tensor op becomes a call of a ``kernel`` whose body is loop nests with
affine loads and stores (the rules are in :mod:`swir.lowering`). Tensors
become buffers: function parameters stay parameters, tensor results become
output parameters (``attributes {outputs = N}``: the last N), weights become
``buf`` globals, tensor constants become ``dense`` globals, and every other
tensor is a ``buffer`` that memory planning (-mem-plan, run at the end)
places in the arena. The host function keeps the graph function's control
flow and calls the kernels in the original (dependence) order.

A result that the function's only ``return`` returns is written straight
into its output parameter; other returned values (parameters, globals, the
same value twice, or several returns) and tensors passed to block arguments
are copied by a copy kernel. Kernels that would be identical (same op,
operand and result types, attributes) are emitted once and called twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from swir.diagnostics import Diagnostic
from swir.ir.builder import Builder
from swir.ir.core import (
    Apply,
    Block,
    DenseSlot,
    Function,
    Global,
    Instruction,
    Module,
    Region,
    Successor,
    Value,
)
from swir.ir.fused import body, structural_key
from swir.ir.types import TensorType, Type
from swir.lowering import OpLowering, param_names, rule_for
from swir.lowering.composite import decompose_all
from swir.lowering.kernel import KernelBuilder, buffer_type, loop_names
from swir.ops import BR, CALL, COND_BR, CONST, FUSED, RETURN, YIELD
from swir.ops.collective import HOST_FORM_OF
from swir.passes.manager import AnalysisManager, Pass, PassContext, PassFailure, option


def is_tensor(v: Value) -> bool:
    return isinstance(v.type, TensorType)


@dataclass
class LowerLoops(Pass):
    name = "lower-loops"
    summary = "Lower graph ops to loop-nest kernels over planned buffers (graph -> loop)"
    stages = ("graph",)

    mem_plan: bool = option(True, "plan the arena of intermediate buffers afterwards (-mem-plan)")
    share_kernels: bool = option(True, "emit identical kernels once")

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        decomposed = decompose_all(module)
        if decomposed:
            self.bump("composite ops decomposed", decomposed)
        ModuleLowering(module, self).run()
        if self.mem_plan:
            from swir.passes.loop.mem_plan import MemPlan
            plan = MemPlan().enter(self.context or PassContext(self.target))
            plan.run(module, analyses)
            for k, v in plan.statistics.items():
                self.bump(k, v)
        return True


class ModuleLowering:
    def __init__(self, module: Module, p: LowerLoops) -> None:
        self.m = module
        self.p = p
        self.kernels: dict[tuple, Function] = {}
        self.extras: dict[str, list[Type | Global]] = {}  # kernel name -> its extra params
        self.counters: dict[str, int] = {}
        self.globals: dict[Global, Global] = {}  # graph-stage symbol -> loop-stage symbol

    def run(self) -> None:
        old = list(self.m.items)
        funcs = [f for f in old if isinstance(f, Function)]
        reject_recursion(funcs)
        for item in old:
            self.m.remove(item)
        # New symbols for the loop stage; the graph instructions keep seeing
        # the tensor-typed originals (the rules read shapes from them).
        for g in (i for i in old if isinstance(i, Global)):
            self.globals[g] = Global(g.name, buffer_type(g.type), g.kind, g.init,
                                     attrs=dict(g.attrs), loc=g.loc)
            self.m.add(self.globals[g])
        lowered = [FunctionLowering(self, f) for f in funcs]
        for fl in lowered:
            self.m.add(fl.new)
        for fl in lowered:
            fl.lower_body()
        self.m.stage = "loop"
        self.m.items.sort(key=_item_order)


    # -- symbols ----------------------------------------------------------------------
    def unique(self, base: str) -> str:
        return self.m.unique_name(base if base and not base[0].isdigit() else f"t{base}")

    def buffer(self, t: Type, base: str) -> Global:
        return Builder.global_(self.m, self.unique(base), buffer_type(t), kind="buffer")

    # -- kernels ------------------------------------------------------------------------
    def kernel(self, inst: Instruction) -> tuple[Function, list[Type | Global]]:
        """The kernel computing ``inst`` and its extra parameters (scratch buffer
        types, constant tables); shared with an earlier identical instruction."""
        key = (inst.opname, tuple(str(v.type) for v in inst.operands),
               tuple(str(r.type) for r in inst.results), tuple(sorted(inst.attrs.items())),
               structural_key(inst) if inst.isa(FUSED) else None)
        if self.p.share_kernels and key in self.kernels:
            f = self.kernels[key]
            return f, self.extras[f.name]
        low = rule_for(inst.opname)
        if low is None:
            raise PassFailure([Diagnostic(f"-lower-loops has no rule for '{inst.opname}'",
                                          inst.loc)])
        f, extras = self.build_kernel(inst, low)
        self.kernels[key] = f
        return f, extras

    def build_kernel(self, inst: Instruction, low: OpLowering
                     ) -> tuple[Function, list[Type | Global]]:
        ins = list(inst.operands)
        names = param_names(low, len(ins), len(inst.results))
        base = inst.opname
        if inst.isa(FUSED):
            names = fused_param_names(inst)
            base = fused_kernel_name(inst)
        types = [buffer_type(v.type) for v in ins] + [buffer_type(r.type) for r in inst.results]
        n = self.counters.get(base, 0)
        self.counters[base] = n + 1
        k = KernelBuilder(self.m, self.unique(f"{base}_{n}"), list(zip(names, types)))
        params = k.params
        low.rule(k, inst, params[:len(ins)], params[len(ins):])
        k.close()
        self.extras[k.function.name] = k.extras
        return k.function, k.extras

    def copy_kernel(self, t: Type) -> Function:
        key = ("copy", str(t))
        f = self.kernels.get(key)
        if f is None:
            n = self.counters.get("copy", 0)
            self.counters["copy"] = n + 1
            bt = buffer_type(t)
            k = KernelBuilder(self.m, self.unique(f"copy_{n}"), [("X", bt), ("Y", bt)])
            with k.loops(bt.shape, loop_names(bt.rank)) as ivs:
                k.store(k.load(k.params[0], ivs), k.params[1], ivs)
            f = self.kernels[key] = k.function
            self.extras[f.name] = []
        return f


class FunctionLowering:
    """One graph function → its loop-stage host function."""

    def __init__(self, ml: ModuleLowering, old: Function) -> None:
        self.ml = ml
        self.old = old
        params = [buffer_type(p.type) for p in old.params]
        names = [p.name for p in old.params]
        tensor_results = [t for t in old.result_types if isinstance(t, TensorType)]
        out_names = self._out_names(len(tensor_results), {n for n in names if n})
        self.new = Function(old.name, params + [buffer_type(t) for t in tensor_results],
                            [t for t in old.result_types if not isinstance(t, TensorType)],
                            kind=old.kind, param_names=names + out_names,
                            attrs=dict(old.attrs), loc=old.loc)
        if tensor_results:
            self.new.attrs["outputs"] = len(tensor_results)
        self.outs = self.new.params[len(params):]
        self.map: dict[Value, Value] = {p: q for p, q in zip(old.params, self.new.params)}

    @staticmethod
    def _out_names(n: int, taken: set[str]) -> list[str]:
        names = ["out"] if n == 1 else [f"out{i}" for i in range(n)]
        return [nm if nm not in taken else f"{nm}_" for nm in names]

    # -- body ----------------------------------------------------------------------------
    def lower_body(self) -> None:
        if self.old.body is None:
            return
        blocks = self.old.body.blocks
        self.blocks: dict[Block, Block] = {}
        self.phis: dict[Block, list[Value | None]] = {}
        new_blocks = []
        for ob in blocks:
            nb = Block(ob.label)
            self.blocks[ob] = nb
            self.phis[ob] = []
            for a in ob.args:
                if is_tensor(a):
                    buf = self.ml.buffer(a.type, f"{self.old.name}_{a.name or 'arg'}")
                    self.map[a] = buf
                    self.phis[ob].append(buf)
                else:
                    self.map[a] = nb.add_argument(a.type, a.name)
                    self.phis[ob].append(None)
            new_blocks.append(nb)
        self.new.set_body(Region(new_blocks))
        self.direct = self._direct_outputs()
        for ob in blocks:
            b = Builder(self.blocks[ob])
            for inst in ob.instructions:
                self.lower_inst(b, inst)

    def _direct_outputs(self) -> dict[Value, Value]:
        """Values the only ``return`` returns, computed here: written in place."""
        returns = [i for i in self.old.walk() if i.isa(RETURN)]
        if len(returns) != 1:
            return {}
        direct: dict[Value, Value] = {}
        tensors = [v for v in returns[0].operands if is_tensor(v)]
        for v, out in zip(tensors, self.outs):
            defined_here = hasattr(v, "owner") and isinstance(v.owner, Instruction)
            if defined_here and v not in direct:
                direct[v] = out
        return direct

    def result_buffer(self, r: Value) -> Value:
        buf = self.direct.get(r) or self.ml.buffer(r.type, r.name or "t")
        self.map[r] = buf
        return buf

    def lower_inst(self, b: Builder, inst: Instruction) -> None:
        if inst.isa(CONST) and inst.results and is_tensor(inst.results[0]):
            slot = inst.args[0]
            assert isinstance(slot, DenseSlot)
            g = Builder.global_(self.ml.m, self.ml.unique(inst.results[0].name or "cst"),
                                buffer_type(inst.results[0].type), init=slot.dense)
            self.map[inst.results[0]] = g
        elif inst.isa(CALL):
            self.lower_call(b, inst)
        elif inst.isa(RETURN):
            self.lower_return(b, inst)
        elif inst.isa(BR, COND_BR):
            self.lower_branch(b, inst)
        elif inst.opdef in HOST_FORM_OF:       # a collective: a host MPI call, not a kernel
            b.create_inst(HOST_FORM_OF[inst.opdef].name, self.value(inst.args[0]),
                          self.result_buffer(inst.results[0]), attrs=dict(inst.attrs))
        elif any(is_tensor(v) for v in list(inst.operands) + list(inst.results)):
            kernel, extras = self.ml.kernel(inst)
            args = [self.value(v) for v in inst.operands]
            args += [self.result_buffer(r) for r in inst.results]
            args += [e if isinstance(e, Global) else
                     self.ml.buffer(e, f"{kernel.name}_{p.name}")
                     for e, p in zip(extras, kernel.params[-len(extras):] if extras else [])]
            b.create_inst("call", Apply(kernel.name, tuple(args)))
        else:
            new = b.create_inst(inst.opname, *[self.slot(a) for a in inst.args],
                                types=[r.type for r in inst.results], attrs=dict(inst.attrs),
                                names=[r.name for r in inst.results])
            for r, nr in zip(inst.results, new.results):
                self.map[r] = nr

    def slot(self, a):
        if isinstance(a, Value):
            return self.value(a)
        return a.substitute(self.map) if hasattr(a, "substitute") else a

    def value(self, v: Value) -> Value:
        if isinstance(v, Global):
            return self.ml.globals[v]
        return self.map[v]

    def lower_call(self, b: Builder, inst: Instruction) -> None:
        app = inst.args[0]
        assert isinstance(app, Apply)
        args = [self.value(a) for a in app.args]
        args += [self.result_buffer(r) for r in inst.results if is_tensor(r)]
        scalars = [r for r in inst.results if not is_tensor(r)]
        new = b.create_inst("call", Apply(app.callee, tuple(args)),
                            types=[r.type for r in scalars], names=[r.name for r in scalars])
        for r, nr in zip(scalars, new.results):
            self.map[r] = nr

    def copy(self, b: Builder, src: Value, dst: Value) -> None:
        if src is dst:
            return
        k = self.ml.copy_kernel(dst.type)
        b.create_inst("call", Apply(k.name, (src, dst)))

    def lower_return(self, b: Builder, inst: Instruction) -> None:
        tensors = [v for v in inst.operands if is_tensor(v)]
        for v, out in zip(tensors, self.outs):
            self.copy(b, self.value(v), out)
        b.create_inst("return", *[self.value(v) for v in inst.operands if not is_tensor(v)])

    def lower_branch(self, b: Builder, inst: Instruction) -> None:
        """Tensor block arguments are buffers the branch copies into. A ``br``
        copies before branching; each edge of a ``cond_br`` that passes tensors
        gets a block of its own holding that edge's copies, so only the taken
        edge copies."""
        slots = []
        for s in inst.args:
            if not isinstance(s, Successor):
                slots.append(self.slot(s))
                continue
            target = self.blocks[s.block]
            scalars = tuple(self.value(v) for v, dst in zip(s.args, self.phis[s.block])
                            if dst is None)
            moves = self.moves(s)
            if moves and not inst.isa(BR):
                edge = Block(f"{target.label or 'bb'}_edge")
                self.new.body.add_block(edge)
                eb = Builder(edge)
                self.parallel_copy(eb, moves, self.phis[s.block])
                eb.create_inst("br", Successor(target, scalars))
                slots.append(Successor(edge, ()))
                continue
            self.parallel_copy(b, moves, self.phis[s.block])
            slots.append(Successor(target, scalars))
        b.create_inst(inst.opname, *slots)

    def moves(self, s: Successor) -> list[tuple[Value, Value]]:
        return [(self.value(v), dst) for v, dst in zip(s.args, self.phis[s.block])
                if dst is not None and self.value(v) is not dst]

    def parallel_copy(self, b: Builder, moves: list[tuple[Value, Value]],
                      phis: list[Value | None]) -> None:
        """Copy each source to its block-argument buffer, as if all at once:
        through temporaries when a source is itself one of those buffers."""
        if any(src in phis for src, _ in moves):
            staged = []
            for src, dst in moves:
                tmp = self.ml.buffer(dst.type, "phi_tmp")
                self.copy(b, src, tmp)
                staged.append((tmp, dst))
            moves = staged
        for src, dst in moves:
            self.copy(b, src, dst)

def reject_recursion(funcs: list[Function]) -> None:
    """Every tensor gets one static buffer, so a function that can call itself
    would overwrite its caller's tensors: refuse, at the call that closes the
    cycle."""
    calls = {f.name: [(i, i.args[0].callee) for i in f.walk() if i.isa(CALL)]
             for f in funcs}
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done

    def visit(name: str) -> None:
        state[name] = 1
        for inst, callee in calls.get(name, []):
            if state.get(callee) == 1:
                raise PassFailure([Diagnostic(
                    f"-lower-loops: @{name} calls @{callee} recursively; recursion is not "
                    "supported (every tensor is lowered to one static buffer)", inst.loc)])
            if callee in calls and callee not in state:
                visit(callee)
        state[name] = 2
    for f in funcs:
        if f.name not in state:
            visit(f.name)


def fused_kernel_name(inst: Instruction) -> str:
    """``conv2d_add_relu``: the group's ops in order, each once, at most four."""
    ops = list(dict.fromkeys(i.opname for i in body(inst).instructions if not i.isa(YIELD)))
    return "_".join(ops[:4])


def fused_param_names(inst: Instruction) -> list[str]:
    """The region's argument names without the ``_in`` that -fuse adds, then Y..."""
    names = [(a.name or f"X{k}").removesuffix("_in") for k, a in enumerate(body(inst).args)]
    outs = ["Y"] if len(inst.results) == 1 else [f"Y{k}" for k in range(len(inst.results))]
    return names + outs


def _item_order(item: Global | Function) -> int:
    """Canonical layout: constant data, buffers, kernels, then host functions
    (a stable sort keeps creation order within each group)."""
    if isinstance(item, Global):
        return 0 if item.kind == "global" else 1
    return 2 if item.kind == "kernel" else 3
