"""The verifier: is this module well formed at its stage?

Checks, in the order a reader meets them:

* symbols: globals and buffers have types legal at the stage and initializers
  that fit them; functions' kinds and targets are legal at the stage;
* structure: function bodies end every block with a terminator; structured
  regions (loop, if, kernel bodies) are single blocks; terminators come last;
* SSA: every value is defined once (by construction) and its definition
  dominates each use, across blocks (dominator tree per region) and into nested
  regions; values never escape the region that defines them;
* ops: known, legal at the module's stage, arity, attributes (required, known,
  well typed), result types equal to the op's result-type rule, the op's own
  checks, block arguments against branch operands;
* index expressions (loop stage and later): every value in a subscript or loop
  bound is a loop variable or an index symbol (affine), and every access stays
  inside its buffer for all iterations (interval analysis, tightened by
  enclosing ``if`` guards);
* LDM: the LDM buffers live at once in a kernel fit ``ldm_size`` (module
  attribute; default: the LDM of the module's target, swir/target.py).

Errors are collected (one per instruction) and raised together.
"""

from __future__ import annotations

from typing import Any

from swir.analysis.calling import all_written_params, writes_global
from swir.analysis.dominance import dominator_sets
from swir.diagnostics import Diagnostic, Location
from swir.ir.affine import Expr
from swir.ir.core import (STAGES, Access, Apply, ArrayInit, Block, BlockArgument, Constraint, Dense, FileInit,
                          FuncParam, Function, Global, Instruction, Module, Range, Region,
                          Result, Value, slot_values)
from swir.ir.constants import contents_shape, contents_type
from swir.ir.dtypes import dtype_of
from swir.ir.carried import carried_error, replicated_ports
from swir.ir.gradient import GradientError, gradient_decl, is_gradient
from swir.ir.module_attrs import MODULE_ATTRS
from swir.ir.types import (INDEX, MAX_BYTES, BufType, LDMType, ShapedType,
                             TensorType, Type, size_error)
from swir.limits import deep_recursion
from swir.ops import CALL, CHUNK, CONST, COPY_IN, CPE_ID, DYN_INDEX, FUSED, IF, RETURN
from swir.ops.collective import HOST_FORM_OF
from swir.ops.registry import OpError, all_ops, lookup

COLLECTIVES = (*HOST_FORM_OF, *HOST_FORM_OF.values())
from swir.ops.util import check_dense, value_ref
from swir.target import target_of
from swir.verifier.bounds import IndexBounds, TooComplex

MAX_ERRORS = 20
# Ops whose index results are affine symbols (usable in subscripts).
_SYMBOL_OPS = (CPE_ID, CHUNK, CONST, DYN_INDEX)

# Every arena offset is a multiple of this (-mem-plan's align is at least it).


class VerificationError(Exception):
    """One or more verifier diagnostics."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        super().__init__("\n".join(d.render() for d in diagnostics))
        self.diagnostics = diagnostics


def verify(module: Module) -> None:
    """Raise VerificationError listing every problem found (up to MAX_ERRORS)."""
    try:
        with deep_recursion():
            errors = _Verifier(module).run()
    except RecursionError:
        errors = [Diagnostic("module is nested too deeply to verify", module.loc)]
    if errors:
        raise VerificationError(errors)


def _legal_type(t: Type, stage: str) -> str | None:
    """Why ``t`` is not legal at ``stage``, or None."""
    too_large = size_error(t)
    if too_large:
        return too_large
    if isinstance(t, TensorType) and stage != "graph":
        return f"tensor type {t} is not legal at the {stage} stage (use buf<...>)"
    if isinstance(t, BufType) and stage == "graph":
        return f"buffer type {t} is not legal at the graph stage (use a tensor)"
    if isinstance(t, LDMType) and stage not in ("buffered", "dma"):
        return f"LDM type {t} is only legal at the buffered and dma stages"
    return None


class _ModuleChecks:
    """The reporting every check shares, and the checks of the module's
    attributes (ranks, split) and globals."""

    def __init__(self, module: Module) -> None:
        self.m = module
        self.errors: list[Diagnostic] = []
        self.func: Function | None = None   # the function being checked

    # -- reporting -------------------------------------------------------------------------
    def error(self, message: str, loc: Location | None, where: str = "") -> None:
        if len(self.errors) >= MAX_ERRORS:
            return
        if loc is None and where:
            message = f"{where}: {message}"
        self.errors.append(Diagnostic(message, loc))

    def op_error(self, inst: Instruction, message: str) -> None:
        fn = f"@{self.func.name}" if self.func else "?"
        self.error(f"'{inst.opname}' op {message}", inst.loc, where=f"in {fn}")

    # -- module ------------------------------------------------------------------------------
    def module_attributes(self) -> bool:
        """Each module attribute by its definition (swir/ir/module_attrs.py); one
        written together with another is checked once the other is legal.
        Whether ``ranks`` is legal (the checks of the ranks build on it)."""
        bad: set[str] = set()
        for a in MODULE_ATTRS.values():
            why = None if a.together_with in bad else a.error(self.m.attrs)
            if why:
                self.error(why, self.m.loc)
                bad.add(a.name)
        return "ranks" not in bad

    def ranks(self) -> None:
        """``{ranks = N, split = "data" | "model"}`` (-distribute): the ranks that run
        the module, and how they share it; each per-rank global and each collective
        is for those N ranks."""
        m = self.m
        n = m.attr("ranks")
        for g in m.globals:
            k = g.attrs.get("ranks")
            if k is not None and k != n:
                self.error(f"holds slices for {k!r} ranks; the module runs on {n}", g.loc,
                           f"@{g.name}")
        if m.attrs.get("split") == "data":
            self.batched_ports()
        for inst in m.walk():
            if not inst.isa(*COLLECTIVES):
                continue
            if inst.attrs.get("ranks") != n:
                self.error(f"'{inst.opname}' op gathers from {inst.attrs.get('ranks')!r} ranks; "
                           f"the module runs on {n}", inst.loc)
            region = inst.parent.parent if inst.parent is not None else None
            owner = getattr(region, "parent", None)
            if isinstance(owner, Instruction) and owner.isa(FUSED):
                self.error(f"'{inst.opname}' op in a fused group: a collective is a host MPI "
                           "call between kernels, not part of one", inst.loc)

    def batched_ports(self) -> None:
        """A data split cuts every parameter and result of the program's
        functions along its leading axis (the batch): each must have one. Of
        a training step (``carried``), only the data parameters are cut: the
        carried state and the loss are every rank's whole."""
        called = {i.args[0].callee for i in self.m.walk() if i.isa(CALL)}
        for f in self.m.functions:
            if f.name in called or f.kind != "func" or f.target == "cpe":
                continue
            whole_params, whole_results = replicated_ports(f)
            ports = [(f"parameter %{p.name}", p.type) for i, p in enumerate(f.params)
                     if i not in whole_params] + \
                [(f"result {i}", t) for i, t in enumerate(f.result_types)
                 if i not in whole_results]
            for what, t in ports:
                if not isinstance(t, ShapedType) or t.rank == 0:
                    self.error(f"split = \"data\" cuts every parameter and result along its "
                               f"leading axis; {what} of @{f.name} ({t}) has none", f.loc)

    def global_(self, g: Global) -> None:
        where = f"@{g.name}"
        why = _legal_type(g.type, self.m.stage)
        if why:
            self.error(why, g.loc, where)
        if not isinstance(g.type, ShapedType):
            self.error(f"a {g.kind} must have a tensor or buffer type, not {g.type}", g.loc, where)
            return
        if isinstance(g.type, LDMType):
            self.error("globals live in main memory; LDM buffers are made by ldm_alloc",
                       g.loc, where)
        if g.kind == "buffer":
            if g.init is not None:
                self.error("a buffer has no initializer; use 'global' for constant data",
                           g.loc, where)
            if self.m.stage == "graph":
                self.error("'buffer' declarations appear from the loop stage on", g.loc, where)
            self._buffer_offset(g, where)
        elif g.init is None:
            self.error("a global needs an initializer (file ... offset N or dense<...>)",
                       g.loc, where)
        elif isinstance(g.init, FileInit) and g.init.offset < 0:
            self.error("file offset must be non-negative", g.loc, where)
        elif isinstance(g.init, FileInit) and g.init.offset + g.type.bytes > MAX_BYTES:
            self.error("the data ends past swir's limit of 2^62 bytes (file offset "
                       f"{g.init.offset}, {g.type.bytes} bytes)", g.loc, where)
        elif isinstance(g.init, ArrayInit):
            a = g.init.array
            want = contents_shape(g)
            if tuple(a.shape) != want or a.dtype != dtype_of(g.type.element):
                per_rank = f" ({want[0]} slices of it)" if want != g.type.shape else ""
                self.error(f"computed contents are {a.dtype} {list(a.shape)}, not "
                           f"{g.type}{per_rank}",
                           g.loc, where)
        elif isinstance(g.init, Dense):
            try:
                check_dense(g.init, contents_type(g))
            except OpError as e:
                self.error(str(e), g.loc, where)

    def _buffer_offset(self, g: Global, where: str) -> None:
        """``{offset = N}``: the buffer's byte offset in the module's arena."""
        if "offset" not in g.attrs:
            return
        off = g.attrs["offset"]
        if not isinstance(off, int) or isinstance(off, bool) or off < 0:
            self.error(f"arena offset must be a non-negative integer, got {off!r}", g.loc, where)
        elif off + g.type.bytes > MAX_BYTES:
            self.error("the buffer ends past swir's limit of 2^62 bytes (arena offset "
                       f"{off}, {g.type.bytes} bytes)", g.loc, where)
        elif off % (block := target_of(self.m.attrs).write_block):
            self.error(f"arena offset {off} is not a multiple of {block} bytes (every "
                       "buffer starts on a 32-byte block: the CPEs' DMA writes are kept to "
                       "whole blocks, and the alignment counts assume it)", g.loc, where)

    def _outputs_attr(self, f: Function, where: str) -> None:
        """``attributes {outputs = N}``: the last N parameters are result buffers."""
        n = f.attrs["outputs"]
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= len(f.params):
            self.error(f"'outputs' must be an integer in [0, {len(f.params)}], got {n!r}",
                       f.loc, where)
        elif not all(isinstance(p.type, BufType) for p in f.params[len(f.params) - n:]):
            self.error("'outputs' parameters must be buffers", f.loc, where)


    def _gradient(self, f: Function, where: str) -> None:
        """A gradient declaration (swir/ir/gradient.py) matches its function."""
        if self.m.stage != "graph":
            self.error("gradient declarations appear at the graph stage", f.loc, where)
            return
        try:
            gradient_decl(f, self.m)
        except GradientError as e:
            self.error(str(e), f.loc, where)


class _Verifier(_ModuleChecks):
    def __init__(self, module: Module) -> None:
        super().__init__(module)
        self.pos: dict[int, int] = {}      # id(instruction) -> index in its block
        self.doms: dict[int, dict[int, set[int]]] = {}  # id(region) -> dominators
        self.index = IndexBounds()   # the loops and guards around the instruction
        self.context = _Context(module)
        # the ops with checks of a whole function (verify_function)
        self.function_checks = [d for d in all_ops()
                                if d.verify_function is not None and module.stage in d.stages]

    # -- module ------------------------------------------------------------------------------
    def run(self) -> list[Diagnostic]:
        m = self.m
        if m.stage not in STAGES:
            self.error(f"unknown stage '{m.stage}'", m.loc)
            return self.errors
        if self.module_attributes():
            self.ranks()
        for g in m.globals:
            self.global_(g)
        for f in m.functions:
            self.func = f
            self.function(f)
        return self.errors

    def function(self, f: Function) -> None:
        where = f"@{f.name}"
        stage = self.m.stage
        if f.kind not in ("func", "kernel"):
            self.error(f"unknown function kind '{f.kind}'", f.loc, where)
        if f.kind == "kernel" and stage == "graph":
            self.error("kernels appear from the loop stage on", f.loc, where)
        if f.kind == "kernel" and f.result_types:
            self.error("a kernel returns nothing; it writes its buffer arguments", f.loc, where)
        if "outputs" in f.attrs:
            self._outputs_attr(f, where)
        if is_gradient(f):
            self._gradient(f, where)
        if "carried" in f.attrs:
            why = carried_error(f, self.m, graph=self.m.stage == "graph")
            if why:
                self.error(why, f.loc, where)
        if f.target is not None and stage != "dma":
            self.error(f"'{f.target}' functions appear at the dma stage", f.loc, where)
        if f.target == "cpe" and f.kind != "kernel":
            self.error("a cpe function must be a kernel", f.loc, where)
        for t in [p.type for p in f.params] + list(f.result_types):
            why = _legal_type(t, stage)
            if why:
                self.error(why, f.loc, where)
        if f.body is None:
            return
        self.pos.clear()
        self._index_positions(f.body)
        structured = f.kind == "kernel"
        self.region(f.body, structured=structured, is_function_body=True)
        for d in self.function_checks:
            why = d.verify_function(f, self.context)
            if why:
                self.error(why, f.loc, where)

    def _index_positions(self, region: Region) -> None:
        for b in region.blocks:
            for i, inst in enumerate(b.instructions):
                self.pos[id(inst)] = i
                for r in inst.regions:
                    self._index_positions(r)

    # -- structure -----------------------------------------------------------------------------
    def region(self, region: Region, structured: bool, is_function_body: bool = False) -> None:
        if not region.blocks:
            if is_function_body:
                self.error("function body has no blocks", self.func.loc if self.func else None)
            return
        if structured and len(region.blocks) != 1:
            self.error("a structured region (kernel, loop or if body) has a single block",
                       region.blocks[1].loc)
        entry = region.blocks[0]
        if is_function_body and entry.args:
            self.error("the entry block takes no arguments; parameters are in the signature",
                       entry.loc)
        for b in region.blocks:
            self.block(b, structured, is_function_body)

    def block(self, b: Block, structured: bool, is_function_body: bool) -> None:
        for i, inst in enumerate(b.instructions):
            d = inst.opdef
            last = i == len(b.instructions) - 1
            if d is not None and d.terminator:
                if not last:
                    self.op_error(inst, "is a terminator and must end its block")
                    continue
                owner = b.parent.parent
                ends_owner = d.ends is not None and isinstance(owner, Instruction) and \
                    owner.isa(d.ends)
                if structured and not ends_owner and \
                        (not inst.isa(RETURN) or not is_function_body):
                    self.op_error(inst, "cannot end a structured region")
                    continue
            self.instruction(inst)
        if not structured:
            t = b.instructions[-1] if b.instructions else None
            if t is None or t.opdef is None or not t.opdef.terminator:
                label = f"'{b.label}" if b.label else "a block"
                self.error(f"block {label} does not end with a terminator "
                           "(return, br or cond_br)", (t.loc if t else b.loc),
                           f"in @{self.func.name}" if self.func else "")

    # -- instructions ---------------------------------------------------------------------
    def instruction(self, inst: Instruction) -> None:
        n_before = len(self.errors)
        d = lookup(inst.opname)
        if d is None:
            self.op_error(inst, "is not a known op")
            return
        if self.m.stage not in d.stages:
            legal = ", ".join(s for s in STAGES if s in d.stages)
            self.op_error(inst, f"is not legal at the {self.m.stage} stage (legal at: {legal})")
            return
        lo, hi = d.num_args
        n = len(inst.args)
        if n < lo or (hi is not None and n > hi):
            want = str(lo) if lo == hi else (f"at least {lo}" if hi is None else f"{lo} to {hi}")
            self.op_error(inst, f"takes {want} operand(s), got {n}")
            return
        if d.arrow != (inst.arrow is not None):
            self.op_error(inst, "is written SRC -> DST" if d.arrow else "takes no '->'")
            return
        min_regions = d.num_regions if d.min_regions is None else d.min_regions
        if not min_regions <= len(inst.regions) <= d.num_regions:
            self.op_error(inst, f"needs {d.num_regions} region(s), got {len(inst.regions)}")
            return
        why = _context_error(d.context, self.func, self.m.stage)
        if why:
            self.op_error(inst, why)
            return
        if not self.attributes(inst, d):
            return
        for r in inst.results:
            why = _legal_type(r.type, self.m.stage)
            if why:
                self.op_error(inst, why)
                return
        if not self.operands(inst):
            return
        try:
            if d.infer is not None:
                inferred = d.infer(inst)
                declared = [r.type for r in inst.results]
                if inferred != declared:
                    self.op_error(inst, f"result type {_types(declared)} does not match the "
                                        f"inferred {_types(inferred)}")
                    return
            elif inst.results:
                self.op_error(inst, "has no results")
                return
            if d.verify is not None:
                d.verify(inst)
        except OpError as e:
            self.op_error(inst, str(e))
            return
        if self.m.stage != "graph" and len(self.errors) == n_before:
            self.bounds(inst, d)
        if d.verify_in_context is not None:
            why = d.verify_in_context(inst, self.context)
            if why:
                self.op_error(inst, why)
        self.nested(inst, d)

    def nested(self, inst: Instruction, d: Any) -> None:
        """Verify regions, tracking loop variable ranges and if-guards."""
        if d.syntax == "loop" and inst.regions and inst.regions[0].blocks:
            body = inst.regions[0]
            iv = body.blocks[0].args[0] if body.blocks[0].args else None
            if iv is not None:
                lb, ub = (a if isinstance(a, Expr) else Expr.of(a) for a in inst.args[:2])
                self.index.loop_bounds[id(iv)] = (lb, ub, len(self.index.loop_bounds))
            self.region(body, structured=True)
            if iv is not None:
                del self.index.loop_bounds[id(iv)]
            return
        if inst.isa(IF):
            guards = self.index.guards_of(inst)
            for i, r in enumerate(inst.regions):
                self.index.guards.append(guards if i == 0 else self.index.negated_guards(inst))
                self.region(r, structured=True)
                self.index.guards.pop()
            return
        for r in inst.regions:
            self.region(r, structured=True)

    def attributes(self, inst: Instruction, d: Any) -> bool:
        for a in d.attrs:
            if a.required and a.name not in inst.attrs:
                self.op_error(inst, f"needs attribute '{a.name}'")
                return False
        for name, value in inst.attrs.items():
            spec = d.attr(name)
            if spec is None:
                known = ", ".join(d.attr_names) or "none"
                self.op_error(inst, f"has unknown attribute '{name}' (known: {known})")
                return False
            why = _attr_kind_error(spec.kind, value)
            if why:
                self.op_error(inst, f"attribute '{name}' {why}")
                return False
        return True

    # -- SSA ---------------------------------------------------------------------------------------
    def operands(self, inst: Instruction) -> bool:
        for s in inst.args:
            for v in slot_values(s):
                why = self.dominance(v, inst)
                if why:
                    self.op_error(inst, why)
                    return False
            if isinstance(s, (Expr, Access, Constraint)):
                why = self.affine(s, inst)
                if why:
                    self.op_error(inst, why)
                    return False
        return True

    def dominance(self, v: Value, user: Instruction) -> str | None:
        if isinstance(v, Global):
            if v.module is not self.m:
                return f"uses @{v.name}, which is not in this module"
            return None
        if isinstance(v, FuncParam):
            return None if v.owner is self.func else f"uses %{v.name}, a parameter of another function"
        if isinstance(v, Result):
            def_block, def_pos = v.owner.parent, self.pos.get(id(v.owner))
            if def_block is None or def_pos is None:
                return f"uses %{v.name}, whose definition is not in this function"
        elif isinstance(v, BlockArgument):
            def_block, def_pos = v.owner, -1
        else:
            return f"uses %{v.name}, which is not defined by any instruction or block"
        # Climb from the user to the instruction that sits in def_block's region.
        inst: Instruction | None = user
        while inst is not None and inst.parent is not None and \
                inst.parent.parent is not def_block.parent:
            region = inst.parent.parent
            owner = region.parent if region is not None else None
            inst = owner if isinstance(owner, Instruction) else None
        if inst is None or inst.parent is None:
            return f"uses %{v.name} outside the region that defines it"
        if inst.parent is def_block:
            if isinstance(v, Result) and self.pos[id(inst)] <= def_pos:
                return f"uses %{v.name} before its definition"
            return None
        if not self._dominates(def_block, inst.parent):
            return f"uses %{v.name}, whose definition does not dominate this use"
        return None

    def _dominates(self, a: Block, b: Block) -> bool:
        region = a.parent
        doms = self.doms.get(id(region))
        if doms is None:
            doms = self.doms[id(region)] = dominator_sets(region)
        return id(a) in doms.get(id(b), set())

    # -- index expressions ---------------------------------------------------------------------------
    def affine(self, s: Expr | Access | Constraint, inst: Instruction) -> str | None:
        values = s.values()
        if isinstance(s, Access):
            next(values)  # the buffer itself
        for v in values:
            if v.type != INDEX:
                return f"index expression uses %{v.name} of type {v.type}; indices are index"
            if not _is_affine_symbol(v):
                return (f"index expression is not affine: %{v.name} is neither a loop "
                        "variable nor an index symbol")
        return None

    def bounds(self, inst: Instruction, d: Any) -> None:
        """Every subscript in range over the loops and guards around inst, and
        the op's own checks of the values its subscripts take."""
        self.index.reset_budget()
        try:
            why = None
            padded = inst.isa(COPY_IN) and inst.attrs.get("fill") is not None
            for s in inst.args:
                if isinstance(s, Access) and not padded:   # a padded copy may leave %A
                    why = why or self._access_bounds(s, inst, d)
            if why is None and d.verify_ranges is not None:
                why = d.verify_ranges(inst, self.index)
        except TooComplex:
            why = "index expressions too complex to bound statically"
        if why:
            self.op_error(inst, why)

    def _access_bounds(self, acc: Access, inst: Instruction, d: Any) -> str | None:
        t = acc.base.type
        if not isinstance(t, ShapedType):
            return None
        name = value_ref(acc.base)
        for dim, (ix, size) in enumerate(zip(acc.indices, t.shape)):
            if isinstance(ix, Range):
                lo, hi = self.index.bounds(ix.lo), self.index.bounds(ix.hi)
                if lo is None or hi is None:
                    return f"cannot bound subscript {dim} of {name} statically"
                if lo[0] < 0 or hi[1] > size:
                    return (f"region [{lo[0]}, {hi[1]}) in dimension {dim} of {name} is "
                            f"outside [0, {size})")
                continue
            r = self.index.bounds(ix)
            if r is None:
                return f"cannot bound subscript {dim} of {name} statically"
            if r[0] < 0 or r[1] >= size:
                return (f"subscript {dim} of {name} ranges over [{r[0]}, {r[1]}], outside "
                        f"[0, {size - 1}]")
        if d.verify_access is not None:
            return d.verify_access(inst, acc, t, self.index)
        return None


class _Context:
    """What the ops' checks ask of the module (swir.ops.registry.VerifyContext),
    computed here, where the module-wide analyses may be imported."""

    def __init__(self, module: Module) -> None:
        self.m = module
        self.stage = module.stage
        self.ldm_bytes = module_attr_ldm(module)
        # each function's written parameters (calling.all_written_params), found
        # at the first question about one: a fixpoint over the module
        self.written: dict[int, set[int]] | None = None

    def cpe_writes_global(self, g: Global) -> bool:
        return _cpe_writes_global(self.m, g)

    def param_writer(self, f: Function, index: int) -> str | None:
        if self.written is None:
            self.written = all_written_params(self.m)
        return _param_writer(self.m, f, index, set(), self.written)


def _param_writer(m: Module, f: Function, index: int, seen: set[int],
                  written: dict[int, set[int]]) -> str | None:
    """The name of a function of the kernel run that writes f's parameter
    ``index``: f itself, or a cpe function calling f that writes (or whose
    callers write) what it passes there; None if none does (``written``:
    calling.all_written_params of the module)."""
    if index in written.get(id(f), set()):
        return f.name
    seen.add(id(f))
    for g in m.functions:
        if g.target != "cpe" or g.body is None or id(g) in seen:
            continue
        for call in g.walk():
            app = call.args[0] if call.isa(CALL) and call.args else None
            if not isinstance(app, Apply) or app.callee != f.name or index >= len(app.args):
                continue
            a = app.args[index]
            if isinstance(a, FuncParam) and a.owner is g:
                found = _param_writer(m, g, a.index, seen, written)
                if found is not None:
                    return found
            elif isinstance(a, Global) and a.kind != "global" and _cpe_writes_global(m, a):
                return g.name
    return None


def _cpe_writes_global(m: Module, g: Global) -> bool:
    """Whether any cpe function writes the buffer global directly."""
    return writes_global((f for f in m.functions if f.target == "cpe"), g)


def _context_error(context: str | None, f: Function | None, stage: str) -> str | None:
    """Is an op with this context legal in function f?"""
    if context is None or f is None:
        return None
    if context == "host":
        return "cannot appear in a cpe kernel (it runs on the MPE)" if f.target == "cpe" else None
    if f.kind != "kernel":
        return "can only appear in a kernel (it runs on a CPE)"
    if context == "cpe" and stage == "dma" and f.target != "cpe":
        return "can only appear in a cpe kernel at the dma stage (it runs on a CPE)"
    return None


def _is_affine_symbol(v: Value) -> bool:
    if isinstance(v, BlockArgument):
        region = v.owner.parent
        owner = region.parent if region is not None else None
        d = owner.opdef if isinstance(owner, Instruction) else None
        return d is not None and d.syntax == "loop"
    if isinstance(v, FuncParam):
        return True
    if isinstance(v, Result):
        return v.owner.isa(*_SYMBOL_OPS)
    return False


def _attr_kind_error(kind: str, v: Any) -> str | None:
    is_int = isinstance(v, int) and not isinstance(v, bool)
    ok = {
        "int": is_int,
        "float": (is_int or isinstance(v, float)),
        "bool": isinstance(v, bool),
        "str": isinstance(v, str) and type(v) is str,
        "type": isinstance(v, Type),
        "ints": isinstance(v, tuple) and all(isinstance(x, int) and not isinstance(x, bool)
                                             for x in v),
        "floats": isinstance(v, tuple) and all(isinstance(x, (int, float)) and
                                               not isinstance(x, bool) for x in v),
        "symbol": type(v).__name__ == "SymbolRef",
        "dense": isinstance(v, Dense),
        "any": True,
    }.get(kind, True)
    if ok:
        return None
    article = {"int": "an integer", "float": "a number", "bool": "true or false",
               "str": "a string", "type": "a type", "ints": "a list of integers",
               "floats": "a list of numbers", "symbol": "a symbol (@name)",
               "dense": "a dense<...> literal"}[kind]
    return f"must be {article}"


def _types(ts: list[Type]) -> str:
    return ", ".join(map(str, ts)) if ts else "(none)"


def module_attr_ldm(module: Module) -> int:
    """The LDM bytes per CPE the module was planned for: its ``ldm_size``,
    else its target's (swir/ir/module_attrs.py)."""
    return module.attr("ldm_size")

