"""What an adjoint rule writes the backward code with.

A rule is ``rule(e, inst, dys) -> list`` (swir.autodiff.rules): ``inst`` is a
forward instruction, ``dys`` the adjoints of its results (None: zero, never
materialised) and the answer one adjoint per operand (None: zero, or not
wanted: ``e.wants(i)`` says whether operand i needs one). The rule reads
forward values through ``e.primal(v)``, which gives the saved value or, under
checkpointing, a recomputation of it placed in the backward code.
"""

from __future__ import annotations

from typing import Any, Callable

from swir.ir.builder import Builder
from swir.ir.core import Dense, DenseSlot, Instruction, Value
from swir.ir.types import ScalarType, TensorType


class AdjointError(Exception):
    """A gradient that cannot be built (an op or an attribute without a rule)."""


class Emitter:
    def __init__(self, builder: Builder, primal: Callable[[Value], Value],
                 wanted: Callable[[Value], bool]) -> None:
        self.b = builder
        self._primal = primal
        self._wanted = wanted
        self.inst: Instruction | None = None   # the forward instruction being reversed

    # -- what the rule is asked ------------------------------------------------
    def wants(self, i: int) -> bool:
        """Whether operand ``i`` of the instruction being reversed needs an adjoint."""
        return self._wanted(self.inst.args[i])

    def primal(self, v: Value) -> Value:
        """The forward value ``v`` in the backward code (saved or recomputed)."""
        return self._primal(v)

    def arg(self, i: int) -> Value:
        return self.primal(self.inst.args[i])

    def result(self, i: int = 0) -> Value:
        return self.primal(self.inst.results[i])

    # -- building ----------------------------------------------------------------
    def op(self, name: str, *args: Value, **attrs: Any) -> Value:
        return self.b.create(name, *args, attrs=_lists(attrs))

    def ops(self, name: str, *args: Value, **attrs: Any) -> list[Value]:
        return list(self.b.create_inst(name, *args, attrs=_lists(attrs)).results)

    def const(self, value: float, like: Value | TensorType) -> Value:
        """A splat constant of ``like``'s type (a tensor type, or a value's)."""
        t = like if isinstance(like, TensorType) else like.type
        return self.b.create("const", DenseSlot(Dense(_number(value, t.element))), types=[t])

    def scalar(self, value: float, like: Value) -> Value:
        """A one-element constant of ``like``'s element type, broadcasting to anything."""
        return self.const(value, TensorType((), like.type.element))

    def scale(self, v: Value, factor: float) -> Value:
        return v if factor == 1 else self.op("mul", v, self.scalar(factor, v))

    def reshape(self, v: Value, shape: tuple[int, ...]) -> Value:
        return v if v.type.shape == tuple(shape) else self.op("reshape", v, shape=shape)

    def transpose(self, v: Value, perm: tuple[int, ...]) -> Value:
        if tuple(perm) == tuple(range(len(perm))):
            return v
        return self.op("transpose", v, perm=perm)

    def sum(self, v: Value, axes: tuple[int, ...], keepdims: bool = True) -> Value:
        if not axes:
            return v
        return self.op("reduce_sum", v, axes=axes, keepdims=keepdims)

    def unbroadcast(self, dy: Value, shape: tuple[int, ...]) -> Value:
        """``dy``, of a broadcast result's shape, summed back to an operand's ``shape``."""
        out = dy.type.shape
        lead = len(out) - len(shape)
        axes = tuple(range(lead)) + tuple(
            lead + i for i, n in enumerate(shape) if n == 1 and out[lead + i] != 1)
        return self.reshape(self.sum(dy, axes), shape)

    def select(self, cond: Value, a: Value, b: Value) -> Value:
        return self.op("select", cond, a, b)

    def where_positive(self, x: Value, dy: Value) -> Value:
        """dy where x > 0, else 0."""
        zero = self.scalar(0.0, dy)
        return self.select(self.op("gt", x, self.scalar(0.0, x)), dy, zero)


def _number(value: float, element: ScalarType) -> float | int:
    return float(value) if element.is_float else int(value)


def _lists(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in attrs.items()}
