"""The reverse sweep: a gradient function's body from its declaration.

The body is the primal function's forward code (copied), then the backward
code: starting from the seed (1, or the seed argument), the instructions are
walked in reverse and each one's rule (swir.autodiff.rules) turns its
results' adjoints into its operands' adjoints, which are summed per value
(Relax's adjoint map). Only *active* values get adjoints: float values that
depend on a ``wrt`` argument and that the differentiated result depends on,
so no zero is ever materialised and no rule runs for code off the path.

Checkpointing (``recompute``): by default every forward value a rule reads
is kept from the forward code ("none"). With "cheap", the values of element-
wise, broadcast and injective ops are recomputed in the backward code from
their operands instead, so what the backward keeps alive are the results of
the convolutions, products, poolings and reductions (the checkpoints).
"""

from __future__ import annotations

from typing import Callable

from swir.autodiff.emitter import AdjointError, Emitter
from swir.autodiff import rules  # noqa: F401  (the rules, checked complete)
from swir.ir.builder import Builder
from swir.ir.clone import clone
from swir.ir.core import Block, Dense, DenseSlot, Function, Instruction, Region, Value
from swir.ir.gradient import GRADIENT_ATTRS, GradientDecl
from swir.ir.types import TensorType
from swir.ops.registry import ADJOINT, Category

RECOMPUTE = ("none", "cheap")
_CHEAP = (Category.ELEMENTWISE, Category.BROADCAST, Category.INJECTIVE)


class GradientFailure(Exception):
    """The gradient cannot be built; ``inst`` is where (or None: the declaration)."""

    def __init__(self, message: str, inst: Instruction | None = None) -> None:
        super().__init__(message)
        self.inst = inst


def differentiate(g: Function, decl: GradientDecl, recompute: str = "none") -> None:
    """Write g's body: @of's forward code, then its gradient (g is the declaration)."""
    f = decl.of
    body = _straight_line(f)
    entry = Block("entry")
    b = Builder(entry)
    mapping: dict = dict(zip(f.params, g.params))
    forward = clone(b, body[:-1], mapping)
    ret = body[-1]
    y = mapping.get(ret.args[decl.output], ret.args[decl.output])
    wrt = [g.params[i] for i in decl.wrt]
    active = _active_values(forward, y, wrt, f)
    seed = g.params[-1] if decl.seedable else None
    adjoints = _reverse(b, forward, y, seed, active, recompute)
    results = [mapping.get(ret.args[k], ret.args[k]) for k in decl.keeping]
    # An argument the rules gave nothing (training batch_norm's running
    # statistics feed only its other results): its gradient is zero.
    results += [adjoints[p] if p in adjoints else b.create(
        "const", DenseSlot(Dense(0.0)), types=[p.type]) for p in wrt]
    b.create_inst("return", *results)
    g.set_body(Region([entry]))
    for a in GRADIENT_ATTRS:
        g.attrs.pop(a, None)
    _drop_dead(entry)


def _straight_line(f: Function) -> list[Instruction]:
    if f.body is None:
        raise GradientFailure(f"@{f.name} has no body to differentiate")
    if len(f.body.blocks) != 1:
        raise GradientFailure(f"@{f.name} branches: -differentiate takes one basic block")
    insts = f.body.blocks[0].instructions
    for inst in insts[:-1]:
        d = inst.opdef
        if inst.regions or d is None or d.category in (Category.OTHER, Category.COLLECTIVE):
            raise GradientFailure(f"'{inst.opname}' cannot be differentiated (-differentiate "
                                  "takes graph ops before -fuse, without calls)", inst)
    return insts


def _differentiable(inst: Instruction) -> bool:
    d = inst.opdef
    return d.differentiable and ADJOINT.of(d) is not None


def _carries(v: Value) -> bool:
    return isinstance(v.type, TensorType) and v.type.element.is_float


def _depends(forward: list[Instruction], start: list[Value], through_all: bool) -> set[int]:
    """ids of the values that depend on ``start`` (through differentiable ops
    and float values only, unless ``through_all``)."""
    seen = {id(v) for v in start}
    for inst in forward:
        if any(id(a) in seen for a in inst.operands) and (through_all or _differentiable(inst)):
            seen.update(id(r) for r in inst.results if through_all or _carries(r))
    return seen


def _active_values(forward: list[Instruction], y: Value, wrt: list[Value],
                   f: Function) -> set[int]:
    """ids of the active values; each wrt argument must reach y."""
    needed = {id(y)}
    for inst in reversed(forward):
        if any(id(r) in needed for r in inst.results):
            needed.update(id(a) for a in inst.operands)
    varied = _depends(forward, wrt, through_all=False)
    for p in wrt:
        if id(y) not in _depends(forward, [p], through_all=False):
            raise GradientFailure(_no_path(forward, y, p, f))
    return varied & needed


def _no_path(forward: list[Instruction], y: Value, p: Value, f: Function) -> str:
    name = f"argument {p.index} (%{p.name})"
    if id(y) not in _depends(forward, [p], through_all=True):
        return (f"the result of @{f.name} does not depend on {name}: its gradient is zero "
                "(leave it out of 'wrt')")
    reach = _depends(forward, [p], through_all=True)
    blocker = next((i for i in forward if not _differentiable(i)
                    and any(id(a) in reach for a in i.operands)), None)
    via = f"'{blocker.opname}', which is not differentiable" if blocker is not None \
        else "integer values, which carry no gradient"
    return f"the result of @{f.name} depends on {name} only through {via}"


def _reverse(b: Builder, forward: list[Instruction], y: Value, seed: Value | None,
             active: set[int], recompute: str) -> dict[Value, Value]:
    adjoints: dict[Value, Value] = {}
    e = Emitter(b, _primal_reader(b, recompute), lambda v: id(v) in active)
    adjoints[y] = seed if seed is not None else e.const(1.0, y.type)
    for inst in reversed(forward):
        dys = [adjoints.get(r) for r in inst.results]
        if all(d is None for d in dys) or not any(id(a) in active for a in inst.operands):
            continue
        e.inst = inst
        try:
            outs = ADJOINT.of(inst.opdef)(e, inst, dys)
        except AdjointError as err:
            raise GradientFailure(str(err), inst) from None
        for v, d in zip(inst.args, outs):
            if d is None or id(v) not in active:
                continue
            if d.type != v.type:   # a rule's bug, caught here rather than in the verifier
                raise AssertionError(f"adjoint rule of '{inst.opname}' gave {d.type} "
                                     f"for an operand of type {v.type}")
            adjoints[v] = e.op("add", adjoints[v], d) if v in adjoints else d
    return adjoints


def _primal_reader(b: Builder, recompute: str) -> Callable[[Value], Value]:
    """How rules read forward values: as they are, or (``cheap``) the cheap
    ones recomputed once in the backward code."""
    if recompute == "none":
        return lambda v: v
    made: dict[Value, Value] = {}

    def read(v: Value) -> Value:
        owner = getattr(v, "owner", None)
        if not isinstance(owner, Instruction) or owner.opdef.category not in _CHEAP:
            return v
        if v not in made:
            mapping = {a: read(a) for a in owner.operands}
            clone(b, [owner], mapping)
            made.update((r, mapping[r]) for r in owner.results)
        return made[v]
    return read


def _drop_dead(block: Block) -> None:
    """Forward code the results and the backward do not use."""
    for inst in reversed(list(block.instructions)):
        d = inst.opdef
        if d is not None and d.pure and not d.terminator and \
                not any(r.has_uses for r in inst.results):
            inst.erase()
