"""A fused group becomes ONE kernel: its *master* op's rule, with the
element-wise ops after the master applied to each output element before it
is stored (the epilogue), and the element-wise or transpose ops before it
computed where the master reads them (the prologue: TVM's inlined injective
producers). No intermediate of the group touches main memory.

How a group's region splits (docs/passes.md, -fuse): walking back from the
yielded value, every element-wise op that continues a single running value
of its own shape belongs to the epilogue; the op reached then is the master;
every other op of the region is prologue and must be computable per element
(element-wise, or a transpose: a pure index map).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from swir.diagnostics import Diagnostic
from swir.ir.affine import Expr
from swir.ir.core import Global, Instruction, Value
from swir.ir.fused import body
from swir.lowering.elementwise import apply_scalar, elementwise_epilogue, operands_at
from swir.lowering.kernel import KernelBuilder, buffer_type
from swir.lowering.rule import lowering, rule_for
from swir.ops import TRANSPOSE, YIELD
from swir.ops.graph import FUSED
from swir.ops.registry import INLINABLE, SCALAR_FORM
from swir.ops.util import attr_or_default


@dataclass
class GroupPlan:
    master: Instruction
    prologue: list[Instruction]           # in region order
    epilogue: list[tuple[Instruction, int]]  # (op, operand position of the running value)


def plan_group(inst: Instruction) -> GroupPlan:
    """Split a fused region into prologue, master and epilogue, or refuse."""
    region = body(inst)
    ops = [i for i in region.instructions if not i.isa(YIELD)]
    members = {id(i) for i in ops}
    internal = lambda v: id(getattr(v, "owner", None)) in members
    yielded = region.instructions[-1].operands
    if len(yielded) != 1 or not internal(yielded[0]):
        raise _refuse(inst, "a fused group lowers to one kernel when it yields one value "
                            "computed in the group")
    v = yielded[0]
    epilogue: list[tuple[Instruction, int]] = []
    while True:
        op = v.owner
        step = _running_operand(op, internal)
        if step is None:
            break
        epilogue.append((op, step))
        v = op.operands[step]
    master = v.owner
    epilogue.reverse()
    chained = {id(master)} | {id(op) for op, _ in epilogue}
    prologue = [i for i in ops if id(i) not in chained]
    for p in prologue:
        if INLINABLE not in p.opdef.traits or len(p.results) != 1:
            raise _refuse(inst, f"'{p.opname}' cannot be computed inside the "
                                f"'{master.opname}' kernel (only element-wise ops and "
                                "transposes are inlined)")
    return GroupPlan(master, prologue, epilogue)


def _running_operand(op: Instruction, internal: Callable[[Value], bool]) -> int | None:
    """The position of the single group-computed operand an element-wise op
    continues (same shape as its result, used only here), or None."""
    if SCALAR_FORM not in op.opdef.traits:
        return None
    inside = [k for k, v in enumerate(op.operands) if internal(v)]
    if len(inside) != 1:
        return None
    k = inside[0]
    v = op.operands[k]
    if getattr(v.type, "shape", None) != getattr(op.results[0].type, "shape", None):
        return None
    if len(v.uses) != 1 or not op.opdef.may_run_through(k):
        return None
    return k


def _refuse(inst: Instruction, why: str) -> Diagnostic:
    return Diagnostic(f"-lower-loops: {why}", inst.loc)


@lowering(FUSED)
def lower_fused(k: KernelBuilder, inst: Instruction, ins: list[Value],
                outs: list[Value]) -> None:
    plan = plan_group(inst)
    source: dict[Value, Value] = dict(zip(body(inst).args, ins))
    for op in [*plan.prologue, plan.master, *(e for e, _ in plan.epilogue)]:
        for v in op.operands:
            if isinstance(v, Global) and v not in source:
                source[v] = _global_param(k, v)
    for p in plan.prologue:
        placeholder = Value(buffer_type(p.results[0].type), p.results[0].name)
        k.inline[placeholder] = _producer(p, [source[v] for v in p.operands])
        source[p.results[0]] = placeholder
    chain = []
    for op, pos in plan.epilogue:
        others = [source[v] for n, v in enumerate(op.operands) if n != pos]
        chain.append((op, pos, others))
    if chain:
        k.epilogue = elementwise_epilogue(chain)
    master = rule_for(plan.master.opname)
    if master is None:
        raise _refuse(inst, f"no rule for '{plan.master.opname}'")
    master.rule(k, plan.master, [source[v] for v in plan.master.operands], outs)


def _global_param(k: KernelBuilder, g: Global) -> Value:
    """A global the region names directly: passed to the kernel as a parameter."""
    lowered = k.module.lookup(g.name)
    assert isinstance(lowered, Global)
    k.extras.append(lowered)
    return k.function.add_param(lowered.type, g.name)


def _producer(op: Instruction, ins: list[Value]
              ) -> Callable[[KernelBuilder, list[Expr]], Value]:
    """The element of ``op``'s result at a subscript, from its inputs."""
    shape = op.results[0].type.shape
    if op.isa(TRANSPOSE):
        perm = attr_or_default(op, "perm")

        def transposed(k: KernelBuilder, idx: list[Expr]) -> Value:
            src: list[Expr] = [Expr.of(0)] * len(perm)
            for out_axis, in_axis in enumerate(perm):
                src[in_axis] = idx[out_axis]
            return k.load(ins[0], src)
        return transposed

    def elementwise(k: KernelBuilder, idx: list[Expr]) -> Value:
        return apply_scalar(k, op, operands_at(k, op, ins, idx, shape))
    return elementwise
