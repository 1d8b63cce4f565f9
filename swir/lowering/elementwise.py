"""Element-wise ops (numpy broadcasting) and the element-wise composites
(clip, leaky_relu, gelu, batch_norm): one loop nest over the output, one store
per element. :func:`elementwise_epilogue` turns a chain of such ops into the
epilogue a fused kernel applies (the fusion hook)."""

from __future__ import annotations

from collections.abc import Sequence

from swir.ir.affine import Expr
from swir.ir.core import Instruction, Value
from swir.ir.dtypes import dtype_of, to_dtype  # (the graph kernel's conversion)
from swir.ir.types import F64, ScalarType, TensorType
from swir.lowering.kernel import Epilogue, KernelBuilder, broadcast_index, loop_names
from swir.lowering.rule import OpLowering, share_with_scalar_forms
from swir.ops.graph import BATCH_NORM, CLIP, GELU, LEAKY_RELU
from swir.ops.registry import SCALAR_FORM, Hook
from swir.ops.util import attr

# The scalar form of an element-wise graph op that is not itself an op of loop
# bodies (a composite), in loop-stage ops: ``expand(k, inst, vals, elem)``.
EXPANSION = Hook("scalar expansion",
                 lambda op: SCALAR_FORM in op.traits and "loop" not in op.stages)


def operand_value(k: KernelBuilder, param: Value, out_idx: Sequence[Expr],
                  out_shape: tuple[int, ...]) -> Value:
    """An operand's element at an output position: scalar parameters are used
    as they are, buffers are loaded with numpy broadcasting."""
    if isinstance(param.type, ScalarType):
        return param
    return k.load(param, broadcast_index(param.type.shape, out_idx, out_shape)
                  if param.type.shape != (1,) or out_shape else [0])


def apply_scalar(k: KernelBuilder, inst: Instruction, vals: list[Value]) -> Value:
    """The scalar form of element-wise graph op ``inst`` on ``vals``."""
    if "loop" in inst.opdef.stages:  # the op itself computes on scalars in loop bodies
        return k.op(inst.opname, *vals, **inst.attrs)  # cast's 'to' is the result element
    return EXPANSION.of(inst.opdef)(k, inst, vals, _element(inst.results[0].type))


def _element(t) -> ScalarType:
    return t.element if isinstance(t, TensorType) else t


@EXPANSION.register(CLIP)
def _clip(k: KernelBuilder, inst: Instruction, vals: list[Value], elem: ScalarType) -> Value:
    x = vals[0]
    for bound, op in (("min", "max"), ("max", "min")):
        if inst.attrs.get(bound) is not None:
            v = to_dtype(inst.attrs[bound], dtype_of(elem)).item()
            x = k.op(op, x, k.const(v if elem.is_float else int(v), elem))
    return x


def _wide(k: KernelBuilder, x: Value, elem: ScalarType) -> Value:
    return x if elem == F64 else k.op("cast", x, to=F64)


def _narrow(k: KernelBuilder, x: Value, elem: ScalarType) -> Value:
    return x if elem == F64 else k.op("cast", x, to=elem)


@EXPANSION.register(LEAKY_RELU)
def _leaky_relu(k: KernelBuilder, inst: Instruction, vals: list[Value],
                elem: ScalarType) -> Value:
    alpha = k.const(attr(inst, "alpha"), elem)
    zero = k.const(0.0, elem)
    neg = k.op("mul", alpha, vals[0])
    return k.op("select", k.op("ge", vals[0], zero), vals[0], neg)


@EXPANSION.register(GELU)
def _gelu(k: KernelBuilder, inst: Instruction, vals: list[Value], elem: ScalarType) -> Value:
    """In f64 like the graph kernel: x / (1 + exp(-2z)) for the tanh form,
    0.5 x (1 + erf(|x| / sqrt 2)), or 0.5 x erfc(|x| / sqrt 2) for x < 0."""
    w = _wide(k, vals[0], elem)
    c = lambda v: k.const(v, F64)
    if attr(inst, "approximate") == "tanh":
        cube = k.op("mul", k.op("mul", k.op("mul", c(0.044715), w), w), w)
        z = k.op("mul", c(0.7978845608028654), k.op("add", w, cube))
        den = k.op("add", c(1.0), k.op("exp", k.op("mul", c(-2.0), z)))
        return _narrow(k, k.op("div", w, den), elem)
    # For x < 0, 1 + erf(x / sqrt 2) = erfc(|x| / sqrt 2): no cancellation.
    a = k.op("mul", k.op("abs", w), c(0.7071067811865476))
    half_x = k.op("mul", c(0.5), w)
    tail = k.op("mul", half_x, k.op("erfc", a))
    body = k.op("mul", half_x, k.op("add", c(1.0), k.op("erf", a)))
    return _narrow(k, k.op("select", k.op("lt", w, c(0.0)), tail, body), elem)


@EXPANSION.register(BATCH_NORM)
def _batch_norm(k: KernelBuilder, inst: Instruction, vals: list[Value],
                elem: ScalarType) -> Value:
    """(x - mean) * scale / sqrt(var + eps) + bias, in f64 like the graph kernel."""
    x, scale, bias, mean, var = (_wide(k, v, elem) for v in vals)
    eps = k.const(attr(inst, "epsilon"), F64)
    factor = k.op("div", scale, k.op("sqrt", k.op("add", var, eps)))
    return _narrow(k, k.op("add", k.op("mul", k.op("sub", x, mean), factor), bias), elem)


def operands_at(k: KernelBuilder, inst: Instruction, ins: list[Value], idx: list[Expr],
                shape: tuple[int, ...]) -> list[Value]:
    """The operands of element-wise ``inst`` at output position ``idx``; an
    entry of ``ins`` that is already a scalar (a fused group's running value)
    is used as it is."""
    if inst.isa(BATCH_NORM):
        # scale, bias, mean, var are per channel (axis 1).
        ch = [idx[1]] if len(idx) > 1 else [Expr.of(0)]
        return [operand_value(k, ins[0], idx, shape)] + [k.load(p, ch) for p in ins[1:]]
    return [operand_value(k, p, idx, shape) for p in ins]


def lower_elementwise(k: KernelBuilder, inst: Instruction, ins: list[Value],
                      outs: list[Value]) -> None:
    shape = inst.results[0].type.shape
    with k.loops(shape, loop_names(len(shape))) as ivs:
        idx = [Expr.of(v) for v in ivs]
        v = apply_scalar(k, inst, operands_at(k, inst, ins, idx, shape))
        k.finish(v, outs[0], idx)


ELEMENTWISE_RULE = share_with_scalar_forms(OpLowering(lower_elementwise))  # every SCALAR_FORM op's


def elementwise_epilogue(chain: list[tuple[Instruction, int, list[Value]]]) -> Epilogue:
    """The epilogue of a fused group: ``chain`` lists element-wise graph ops in
    order, each with the operand position the running value takes and the
    kernel values of its other operands (broadcast against the output)."""
    def epilogue(k: KernelBuilder, idx: list[Expr], value: Value) -> Value:
        for inst, pos, others in chain:
            ins = list(others)
            ins.insert(pos, value)
            value = apply_scalar(k, inst, operands_at(k, inst, ins, idx,
                                                      inst.results[0].type.shape))
        return value
    return epilogue

