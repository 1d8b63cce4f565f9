"""-simplify: algebraic simplification of graph-stage ops.

Every rewrite gives the same bits for every input (exceptions noted), so the
pass needs no fast-math licence. ``c`` is a *small* compile-time constant: a
``const`` or a ``global`` with a ``dense<...>`` literal or computed contents,
of at most MAX_CONSTANT_ELEMENTS elements (weights in a sidecar file are
never read). "Splat v" means every element has exactly the bits of v in the
element type, so -0.0 and +0.0 are different constants.

Neutral operands (only when the result type equals x's type, so a constant
that broadcasts x to a larger shape keeps the op):

- ``x * 1``, ``1 * x``, ``x / 1`` → ``x``.
- ``x + (-0.0)``, ``(-0.0) + x``, ``x - (+0.0)`` → ``x``. ``x + (+0.0)`` and
  ``x - (-0.0)`` are kept for floats: they turn -0.0 into +0.0. Integers
  (i1 too, where add is "or") have one zero, so ``x + 0``, ``0 + x`` and
  ``x - 0`` go.

Multiplying and dividing by constants:

- ``x * (-1)``, ``(-1) * x`` → ``neg x`` (result type equals x's type). NaN
  operands may come out with the other sign bit.
- ``x / c`` → ``x * (1/c)`` for a float c whose every element is a finite
  power of two (either sign) whose reciprocal the element type represents
  (not overflowing, subnormals allowed): then both are the correct rounding
  of the same real number. The reciprocal is a new ``const`` of c's type,
  just before the ``div``. Integer division is never rewritten.

Data movement (each pair reads x directly; the inner op goes when unused):

- ``transpose(transpose(x, p), q)`` → ``transpose(x, r)``, ``r[i] = p[q[i]]``;
  a transpose whose permutation is the identity → ``x``.
- ``reshape``, ``flatten``, ``squeeze``, ``unsqueeze`` of one of them →
  ``reshape x {shape = <final shape>}``; any of them whose result type equals
  its input type → ``x`` (row-major order is unchanged).

Casts:

- ``cast x {to = T}`` with x of type T → ``x``.
- ``cast(cast(x, A), B)`` → ``cast(x, B)`` only when the inner cast is a
  widening within one kind (f16 → f32 → f64; i1 → i8 → ... → i64), which keeps
  every value, so the outer cast sees the same number. (A float-to-integer
  outer cast of an out-of-range value is undefined in C either way.)

Unary pairs (bit-exact, NaNs included):

- ``neg(neg x)`` → ``x``; ``relu(relu x)`` → ``relu x``;
  ``abs(abs x)`` → ``abs x``; ``abs(neg x)`` → ``abs x``.

Rewrites run to a fixpoint over a worklist, in nested regions (fused groups)
too; each is local to one block. An instruction whose result is unused is
skipped (dead code is -dce's). The rewritten instruction is erased, with the
operand definitions that become unused through it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from swir.ir.builder import Builder
from swir.ir.constants import constant_value, is_constant
from swir.ir.core import (
    Dense,
    DenseSlot,
    FileInit,
    Global,
    Instruction,
    Literal,
    Module,
    Value,
)
from swir.ir.types import ScalarType, ShapedType, Type
from swir.ops import (ABS, CAST, DIV, FLATTEN, MUL, NEG, RELU, RESHAPE, SQUEEZE, TRANSPOSE,
                      UNSQUEEZE)
from swir.ops.registry import OpDef, all_ops
from swir.ops.util import attr
from swir.passes.manager import AnalysisManager, Pass

# Larger constants are weights, not identities: never read them.
MAX_CONSTANT_ELEMENTS = 1024

RESHAPES = (RESHAPE, FLATTEN, SQUEEZE, UNSQUEEZE)

# A rewrite: None, or (statistic, the value that replaces the instruction's result).
Rewrite = tuple[str, Value] | None


@dataclass
class Simplify(Pass):
    name = "simplify"
    summary = ("Algebraic simplification: drop neutral operands, compose transposes, "
               "reshapes and casts (graph stage)")
    stages = ("graph",)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._created: list[Instruction] = []  # by the rewrite being applied

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        rules = self._rules()
        worklist = _Worklist(module.walk())
        changed = False
        while worklist:
            inst = worklist.pop()
            if inst.parent is None or inst.opdef not in rules or not _simple(inst) \
                    or not inst.result.has_uses:
                continue  # erased meanwhile, nothing to try, or dead (for -dce)
            self._created = []
            hit = _first(rules[inst.opdef], inst)
            if hit is None:
                continue
            stat, new = hit
            self.bump(stat)
            inst.result.replace_all_uses_with(new)
            worklist.extend(self._created)
            worklist.extend(new.users)  # their operand changed: another rule may fit now
            self._erase_dead(inst)
            changed = True
        return changed

    def _rules(self) -> dict[OpDef, list[Callable[[Instruction], Rewrite]]]:
        rules: dict[OpDef, list[Callable[[Instruction], Rewrite]]] = {
            op: [_neutral_operand] for op in all_ops() if op.right_identity is not None}
        rules[MUL] = rules[MUL] + [self._negation]
        rules[DIV] = rules[DIV] + [self._reciprocal]
        rules.update({TRANSPOSE: [self._transpose], CAST: [self._cast],
                      NEG: [self._unary_pair], RELU: [self._unary_pair],
                      ABS: [self._unary_pair]})
        for op in RESHAPES:
            rules[op] = [self._reshape]
        return rules

    def _erase_dead(self, inst: Instruction) -> None:
        """Erase inst and the definitions of its operands left unused (as -dce)."""
        stack = [inst]
        while stack:
            dead = stack.pop()
            if dead.parent is None or not _erasable(dead):
                continue
            stack.extend(_producers(dead))
            dead.erase()
            self.bump("instructions erased")

    def _build(self, before: Instruction, opname: str, *args: Any, attrs: dict | None = None,
               types: list[Type] | None = None, name: str | None = None) -> Value:
        """A new instruction just before ``before``, queued for further rewrites."""
        new = Builder(before.parent, before=before).create_inst(
            opname, *args, attrs=attrs, types=types, names=[name])
        self._created.append(new)
        self.bump("instructions created")
        return new.result

    # -- rewrites --------------------------------------------------------------------
    def _negation(self, inst: Instruction) -> Rewrite:
        x = _operand_beside_splat(inst, -1.0, both_sides=True)
        if x is None:
            return None
        return "multiplications by -1 made negations", \
            self._build(inst, "neg", x, name=inst.result.name)

    def _reciprocal(self, inst: Instruction) -> Rewrite:
        x, c = inst.operands
        inverse = _exact_reciprocal(_small_constant(c))
        if inverse is None:
            return None
        scale = self._build(inst, "const", _constant_slot(inverse, c.type), types=[c.type],
                            name=f"{c.name}_recip" if c.name else None)
        return "divisions made multiplications", \
            self._build(inst, "mul", x, scale, name=inst.result.name)

    def _transpose(self, inst: Instruction) -> Rewrite:
        x = inst.operands[0]
        perm = _perm(inst)
        inner = _defined_by(x, (TRANSPOSE,))
        if inner is not None:
            inner_perm = _perm(inner)
            perm = [inner_perm[p] for p in perm]
            x = inner.operands[0]
        stat = "transposes composed" if inner is not None else "identity transposes removed"
        if perm == list(range(len(perm))):
            return stat, x
        if inner is None:
            return None
        return stat, self._build(inst, "transpose", x, attrs={"perm": tuple(perm)},
                                 name=inst.result.name)

    def _reshape(self, inst: Instruction) -> Rewrite:
        x, out = inst.operands[0], inst.result.type
        if x.type == out:
            return "no-op reshapes removed", x
        inner = _defined_by(x, RESHAPES)
        if inner is None:
            return None
        source = inner.operands[0]
        if source.type == out:
            return "reshapes composed", source
        assert isinstance(out, ShapedType)
        return "reshapes composed", self._build(
            inst, "reshape", source, attrs={"shape": out.shape}, name=inst.result.name)

    def _cast(self, inst: Instruction) -> Rewrite:
        x, out = inst.operands[0], inst.result.type
        if x.type == out:
            return "no-op casts removed", x
        inner = _defined_by(x, (CAST,))
        if inner is None or not _widens(inner.operands[0].type, x.type):
            return None
        source = inner.operands[0]
        if source.type == out:
            return "casts composed", source
        return "casts composed", self._build(
            inst, "cast", source, attrs={"to": inst.attrs["to"]}, name=inst.result.name)

    def _unary_pair(self, inst: Instruction) -> Rewrite:
        x = inst.operands[0]
        inner = _defined_by(x, (NEG, RELU, ABS))
        if inner is None:
            return None
        if inst.isa(NEG) and inner.isa(NEG):
            return "unary pairs folded", inner.operands[0]
        if inst.isa(RELU, ABS) and inner.isa(inst.opdef):
            return "unary pairs folded", x
        if inst.isa(ABS) and inner.isa(NEG):
            return "unary pairs folded", self._build(inst, "abs", inner.operands[0],
                                                     name=inst.result.name)
        return None


class _Worklist:
    """Instructions to visit, first in first out, each queued at most once."""

    def __init__(self, insts: Iterable[Instruction]) -> None:
        self._queue: deque[Instruction] = deque()
        self._queued: set[int] = set()
        self.extend(insts)

    def __bool__(self) -> bool:
        return bool(self._queue)

    def extend(self, insts: Iterable[Instruction]) -> None:
        for inst in insts:
            if id(inst) not in self._queued:
                self._queued.add(id(inst))
                self._queue.append(inst)

    def pop(self) -> Instruction:
        inst = self._queue.popleft()
        self._queued.discard(id(inst))
        return inst


# -- rewrites that need no new instructions ------------------------------------------

def _neutral_operand(inst: Instruction) -> Rewrite:
    op = inst.opdef
    x = _operand_beside_splat(inst, op.right_identity, both_sides=False)
    if x is None and op.left_identity is not None:
        x = _operand_beside_splat(inst, op.left_identity, both_sides=True)
    return None if x is None else ("neutral operations removed", x)


def _operand_beside_splat(inst: Instruction, value: float, both_sides: bool) -> Value | None:
    """The operand x of ``x OP c`` (or, with both_sides, ``c OP x``) when c is a
    splat of value and the result has x's type (c does not broadcast x)."""
    a, b = inst.operands
    pairs = [(a, b), (b, a)] if both_sides else [(a, b)]
    for x, c in pairs:
        if x.type == inst.result.type and _is_splat_of(_small_constant(c), value):
            return x
    return None


# -- helpers --------------------------------------------------------------------------

def _first(rules: list[Callable[[Instruction], Rewrite]], inst: Instruction) -> Rewrite:
    for rule in rules:
        hit = rule(inst)
        if hit is not None:
            return hit
    return None


def _simple(inst: Instruction) -> bool:
    """One result, operands all plain values: the shape every rewrite expects."""
    return len(inst.results) == 1 and all(isinstance(s, Value) for s in inst.args)


def _erasable(inst: Instruction) -> bool:
    d = inst.opdef
    return (d is not None and d.pure and not d.terminator and not inst.regions
            and not any(r.has_uses for r in inst.results))


def _producers(inst: Instruction) -> list[Instruction]:
    owners = (getattr(v, "owner", None) for v in inst.operands)
    return [o for o in owners if isinstance(o, Instruction)]


def _defined_by(v: Value, ops: tuple[OpDef, ...]) -> Instruction | None:
    """The instruction defining v if it is one of ops (in the simple form)."""
    owner = getattr(v, "owner", None)
    if isinstance(owner, Instruction) and owner.isa(*ops) and _simple(owner):
        return owner
    return None


def _perm(inst: Instruction) -> list[int]:
    return attr(inst, "perm")


def _widens(source: Type, target: Type) -> bool:
    """Whether casting source to target keeps every value: same kind, no narrower."""
    a, b = _element(source), _element(target)
    if "index" in (a.name, b.name) or a.is_float != b.is_float:
        return False
    return _bits(a) <= _bits(b)


def _bits(t: ScalarType) -> int:
    return 1 if t.name == "i1" else 8 * t.bytes


def _element(t: Type) -> ScalarType:
    return t.element if isinstance(t, ShapedType) else t  # type: ignore[return-value]


def _small_constant(v: Value) -> np.ndarray | None:
    """The contents of v if it is a small compile-time constant (a weight file is
    never read: its contents are data, not an identity)."""
    if not is_constant(v) or (isinstance(v, Global) and isinstance(v.init, FileInit)):
        return None
    size = v.type.num_elements if isinstance(v.type, ShapedType) else 1
    if size > MAX_CONSTANT_ELEMENTS:
        return None
    return constant_value(v)


def _is_splat_of(a: np.ndarray | None, value: float) -> bool:
    """Every element of a has exactly the bits of value in a's type."""
    if a is None or a.size == 0:
        return False
    want = np.asarray(value).astype(a.dtype)
    unsigned = f"u{a.dtype.itemsize}"
    return bool((a.reshape(-1).view(unsigned) == want.reshape(1).view(unsigned)).all())


def _exact_reciprocal(c: np.ndarray | None) -> np.ndarray | None:
    """1/c in c's type when it is exact for every element: c a finite power of
    two whose reciprocal the type represents, both normal numbers (the C may
    run with subnormals flushed to zero); else None."""
    if c is None or c.dtype.kind != "f" or c.size == 0:
        return None
    wide = c.astype(np.float64)
    if not np.isfinite(wide).all() or not (np.abs(np.frexp(wide)[0]) == 0.5).all():
        return None  # zero, inf, nan or not a power of two
    with np.errstate(over="ignore", divide="ignore"):
        inverse = 1.0 / wide  # exact in f64, unless it overflows to inf
        narrow = inverse.astype(c.dtype)
    if not np.isfinite(narrow).all() or not (narrow.astype(np.float64) == inverse).all():
        return None  # the reciprocal overflows the element type
    tiny = np.finfo(c.dtype).tiny
    if (np.abs(c) < tiny).any() or (np.abs(narrow) < tiny).any():
        return None  # subnormal: hardware that flushes them to zero would differ
    return narrow


def _constant_slot(a: np.ndarray, t: Type) -> DenseSlot | Literal:
    """A ``const`` operand holding a (of type t): a splat, nested lists, or a scalar."""
    if not isinstance(t, ShapedType):
        return Literal(a.reshape(-1)[0].item())
    flat = a.reshape(-1)
    if _is_splat_of(a, flat[0]):
        return DenseSlot(Dense(flat[0].item()))
    return DenseSlot(Dense(_nested(a.tolist())))


def _nested(v: Any) -> Any:
    return tuple(_nested(x) for x in v) if isinstance(v, list) else v
