"""Writing graph-stage code op by op (``g.op("mul", a, b)``, splat constants,
reshapes, sums back to a broadcast operand's shape): what the adjoint rules
(swir.autodiff) and the composite ops' decompositions (swir.lowering.composite)
write their graph code with."""

from __future__ import annotations

from typing import Any

from swir.ir.builder import Builder
from swir.ir.core import Dense, DenseSlot, Value
from swir.ir.types import ScalarType, TensorType


class GraphBuilder:
    def __init__(self, builder: Builder) -> None:
        self.b = builder

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
