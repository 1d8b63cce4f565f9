"""Graph-stage gradient ops: what the adjoint rules of -differentiate emit
where an op's gradient is not a composition of other ops (issue 45).

The pooling gradients take the forward op's attributes (max_pool2d's and
avg_pool2d's own ``Attr`` objects, with their checks) and shape rule
(``pool_shape``), and are windowed reductions for -fuse like the pools: each
input element sums the gradients of the windows that cover it. Their results carry no gradient of their own (``differentiable =
False``: second-order gradients are out of scope).

They are not ``channel_wise`` in -distribute's sense (a result channel computed
from the same channel of operand 0 alone): max_pool2d_grad reads dy too, and
avg_pool2d_grad's ``input_shape`` names the whole channel count.
"""

from __future__ import annotations

from swir.ir.core import Instruction
from swir.ir.types import TensorType, Type
from swir.ops.graph import AVG_POOL2D, GRAPH, MAX_POOL2D, pool_shape
from swir.ops.registry import Attr, Category, OpDef, OpError, Operands, register
from swir.ops.util import (attr, check_arity, check_float, check_positive, check_rank,
                           check_same_element, shape_text, tensor_arg)


def _infer_max_pool2d_grad(inst: Instruction) -> list[Type]:
    check_arity(inst)
    x, dy = tensor_arg(inst, 0), tensor_arg(inst, 1)
    check_rank(x, 4, "input (N x C x H x W)")
    check_float(x, "input")
    check_same_element([x, dy], ["input", "dy"])
    _gradient_of(dy, pool_shape(inst, x.shape, is_avg=False), "max_pool2d", "x", x.shape)
    return [x]


def _infer_avg_pool2d_grad(inst: Instruction) -> list[Type]:
    check_arity(inst)
    dy = tensor_arg(inst, 0)
    check_rank(dy, 4, "dy (N x C x OH x OW)")
    check_float(dy, "dy")
    shape = tuple(attr(inst, "input_shape", 4))
    _gradient_of(dy, pool_shape(inst, shape, is_avg=True), "avg_pool2d", "input_shape", shape)
    return [TensorType(shape, dy.element)]


def _gradient_of(dy: TensorType, pooled: tuple[int, ...], op: str, what: str,
                 shape: tuple[int, ...]) -> None:
    if dy.shape != pooled:
        raise OpError(f"dy is {shape_text(dy.shape)} but {op} of {what} {shape_text(shape)} "
                      f"gives {shape_text(pooled)}")


def _grad_op(name: str, summary: str, operands: Operands, infer,
             attrs: tuple[Attr, ...]) -> OpDef:
    return register(OpDef(name, summary, stages=GRAPH, operands=operands, attrs=attrs,
                          infer=infer, category=Category.REDUCTION, differentiable=False))


MAX_POOL2D_GRAD = _grad_op(
    "max_pool2d_grad", "Gradient of max_pool2d: each window's dy goes to the input element "
                       "holding its maximum (the first in row-major order; the last NaN; "
                       "never padding).",
    Operands(("x", "dy"), "the pooled input and the gradient of the pooled result"),
    _infer_max_pool2d_grad, MAX_POOL2D.attrs)
AVG_POOL2D_GRAD = _grad_op(
    "avg_pool2d_grad", "Gradient of avg_pool2d: each window spreads dy / its divisor over "
                       "its elements inside the input.",
    Operands(("dy",), "the gradient of the pooled result"), _infer_avg_pool2d_grad,
    AVG_POOL2D.attrs + (Attr("input_shape", "ints", required=True,
                             doc="[N, C, H, W] of the pooled input, each > 0",
                             check=check_positive),))
