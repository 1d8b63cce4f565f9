"""The adjoint rule of every differentiable graph op (the ADJOINT hook),
checked complete when this module loads, as the interpreter's kernels are.

Each rule writes the operands' adjoints with graph ops only, so the backward
code is ordinary graph code that every later pass fuses, plans and lowers.
The convolutions' gradients are convolutions and products (JAX's transpose
rules): the input gradient of conv2d is a conv_transpose2d with the same
attributes; the weight gradient one matmul per kernel tap (with groups, a
grouped conv2d with the batch as its channels). Ties follow
PyTorch: max / min split the adjoint between equal operands, reduce_max /
reduce_min share it among the tied elements, relu and abs give 0 at 0.
"""

from __future__ import annotations

import math

from swir.autodiff.emitter import AdjointError, Emitter
from swir.ir.core import Instruction, Value
from swir.lowering.composite import batch_statistics, one_hot
from swir.ops import elementwise as E
from swir.ops import graph as G
from swir.ops import training as T
from swir.ops.registry import ADJOINT
from swir.ops.util import attr, normalise_axes, normalise_axis

Adjoints = list  # one Value | None per operand


def _rule(*ops):
    return ADJOINT.register(*ops)


# -- element-wise ----------------------------------------------------------------------

def _binary(e: Emitter, da: Value | None, db: Value | None) -> Adjoints:
    a, b = e.inst.args
    return [None if da is None or not e.wants(0) else e.unbroadcast(da, a.type.shape),
            None if db is None or not e.wants(1) else e.unbroadcast(db, b.type.shape)]


@_rule(E.ADD)
def _add(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    return _binary(e, dys[0], dys[0])


@_rule(E.SUB)
def _sub(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    return _binary(e, dys[0], e.op("neg", dys[0]) if e.wants(1) else None)


@_rule(E.MUL)
def _mul(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    dy = dys[0]
    return _binary(e, e.op("mul", dy, e.arg(1)) if e.wants(0) else None,
                   e.op("mul", dy, e.arg(0)) if e.wants(1) else None)


@_rule(E.DIV)
def _div(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    dy = dys[0]
    da = e.op("div", dy, e.arg(1)) if e.wants(0) else None
    db = None
    if e.wants(1):   # -dy * a / b^2 = -(dy * y) / b
        db = e.op("neg", e.op("div", e.op("mul", dy, e.result()), e.arg(1)))
    return _binary(e, da, db)


@_rule(E.POW)
def _pow(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    dy, a, b = dys[0], e.arg(0), e.arg(1)
    da = db = None
    if e.wants(0):   # b * a^(b - 1)
        bm1 = e.op("sub", b, e.scalar(1.0, b))
        da = e.op("mul", dy, e.op("mul", b, e.op("pow", a, bm1)))
    if e.wants(1):   # a^b * log(a); PyTorch's 0 where a == 0 (log 0 = -inf)
        zero = e.scalar(0.0, a)
        term = e.op("mul", e.result(), e.op("log", a))
        db = e.op("mul", dy, e.select(e.op("eq", a, zero), zero, term))
    return _binary(e, da, db)


def _tie_weights(e: Emitter, wins, a: Value, b: Value) -> tuple[Value, Value]:
    """PyTorch's maximum / minimum: the adjoint to the winner, halved on a tie."""
    one, half, zero = e.scalar(1.0, a), e.scalar(0.5, a), e.scalar(0.0, a)
    tie = e.op("eq", a, b)
    wa = e.select(tie, half, e.select(e.op(wins, a, b), one, zero))
    wb = e.select(tie, half, e.select(e.op(wins, b, a), one, zero))
    return wa, wb


@_rule(E.MAX, E.MIN)
def _max_min(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    wa, wb = _tie_weights(e, "gt" if inst.isa(E.MAX) else "lt", e.arg(0), e.arg(1))
    return _binary(e, e.op("mul", dys[0], wa), e.op("mul", dys[0], wb))


@_rule(E.SELECT)
def _select(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    dy, c = dys[0], e.arg(0)
    zero = e.scalar(0.0, dy)
    _, a, b = inst.args
    da = e.unbroadcast(e.select(c, dy, zero), a.type.shape) if e.wants(1) else None
    db = e.unbroadcast(e.select(c, zero, dy), b.type.shape) if e.wants(2) else None
    return [None, da, db]


def _unary(fn):
    """A rule dx = fn(e, dy, x, y) for a one-operand op."""
    def rule(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
        return [fn(e, dys[0], e.arg(0), lambda: e.result())]
    return rule


_SQRT_2_OVER_PI = 2.0 / math.sqrt(math.pi)
_UNARY = {
    E.NEG: lambda e, dy, x, y: e.op("neg", dy),
    E.ABS: lambda e, dy, x, y: e.op("sub", e.where_positive(x, dy),
                                    e.where_positive(e.op("neg", x), dy)),
    E.EXP: lambda e, dy, x, y: e.op("mul", dy, y()),
    E.LOG: lambda e, dy, x, y: e.op("div", dy, x),
    E.SQRT: lambda e, dy, x, y: e.op("div", e.scale(dy, 0.5), y()),
    E.RSQRT: lambda e, dy, x, y: e.op("mul", e.scale(dy, -0.5),
                                      e.op("mul", y(), e.op("mul", y(), y()))),
    E.RECIPROCAL: lambda e, dy, x, y: e.op("neg", e.op("mul", dy, e.op("mul", y(), y()))),
    E.TANH: lambda e, dy, x, y: e.op("mul", dy, e.op("sub", e.scalar(1.0, x),
                                                     e.op("mul", y(), y()))),
    E.SIGMOID: lambda e, dy, x, y: e.op("mul", dy, e.op("mul", y(), e.op(
        "sub", e.scalar(1.0, x), y()))),
    E.ERF: lambda e, dy, x, y: e.op("mul", e.scale(dy, _SQRT_2_OVER_PI),
                                    e.op("exp", e.op("neg", e.op("mul", x, x)))),
    E.ERFC: lambda e, dy, x, y: e.op("mul", e.scale(dy, -_SQRT_2_OVER_PI),
                                     e.op("exp", e.op("neg", e.op("mul", x, x)))),
    E.RELU: lambda e, dy, x, y: e.where_positive(x, dy),
    G.LEAKY_RELU: lambda e, dy, x, y: e.select(
        e.op("gt", x, e.scalar(0.0, x)), dy,
        e.scale(dy, attr(e.inst, "alpha"))),
}
for _op, _fn in _UNARY.items():
    _rule(_op)(_unary(_fn))


@_rule(E.CAST)
def _cast(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    return [e.op("cast", dys[0], to=inst.args[0].type.element)]


@_rule(G.CLIP)
def _clip(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    """PyTorch's clamp: the adjoint passes where min <= x <= max."""
    dy, x = dys[0], e.arg(0)
    inside = None
    for bound, cmp in (("min", "ge"), ("max", "le")):
        value = inst.attrs.get(bound)
        if value is not None:
            test = e.op(cmp, x, e.scalar(value, x))
            inside = test if inside is None else e.op("and", inside, test)
    return [dy if inside is None else e.select(inside, dy, e.scalar(0.0, dy))]


@_rule(G.GELU)
def _gelu(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    dy, x = dys[0], e.arg(0)
    if attr(inst, "approximate") == "tanh":
        return [e.op("mul", dy, _gelu_tanh_slope(e, x))]
    # Phi(x) + x phi(x): Phi = (1 + erf(x / sqrt 2)) / 2, phi = exp(-x^2 / 2) / sqrt(2 pi)
    cdf = e.scale(e.op("add", e.scalar(1.0, x), e.op("erf", e.scale(x, 1 / math.sqrt(2)))), 0.5)
    pdf = e.scale(e.op("exp", e.scale(e.op("mul", x, x), -0.5)), 1 / math.sqrt(2 * math.pi))
    return [e.op("mul", dy, e.op("add", cdf, e.op("mul", x, pdf)))]


def _gelu_tanh_slope(e: Emitter, x: Value) -> Value:
    """d/dx of x (1 + tanh(b (x + k x^3))) / 2, b = sqrt(2 / pi), k = 0.044715."""
    b, k = math.sqrt(2 / math.pi), 0.044715
    x2 = e.op("mul", x, x)
    inner = e.scale(e.op("add", x, e.scale(e.op("mul", x2, x), k)), b)
    t = e.op("tanh", inner)
    one = e.scalar(1.0, x)
    left = e.scale(e.op("add", one, t), 0.5)
    slope = e.scale(e.op("add", one, e.scale(x2, 3 * k)), b)
    right = e.op("mul", e.scale(x, 0.5), e.op("mul", e.op("sub", one, e.op("mul", t, t)), slope))
    return e.op("add", left, right)


# -- linear algebra --------------------------------------------------------------------

@_rule(G.MATMUL)
def _matmul(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    """numpy.matmul: 1-D operands promoted to matrices, batch dims broadcast."""
    a, b = inst.args
    a2 = e.reshape(e.arg(0), (1,) + a.type.shape) if a.type.rank == 1 else e.arg(0)
    b2 = e.reshape(e.arg(1), b.type.shape + (1,)) if b.type.rank == 1 else e.arg(1)
    out = _matmul_shape(a2.type.shape, b2.type.shape)
    dy = e.reshape(dys[0], out)
    da = db = None
    if e.wants(0):
        da = e.unbroadcast(e.op("matmul", dy, e.transpose(b2, _swap_last(b2.type.rank))),
                           a2.type.shape)
        da = e.reshape(da, a.type.shape)
    if e.wants(1):
        db = e.unbroadcast(e.op("matmul", e.transpose(a2, _swap_last(a2.type.rank)), dy),
                           b2.type.shape)
        db = e.reshape(db, b.type.shape)
    return [da, db]


def _matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    batch = E.broadcast_shapes(a[:-2], b[:-2])
    return batch + (a[-2], b[-1])


def _swap_last(rank: int) -> tuple[int, ...]:
    return tuple(range(rank - 2)) + (rank - 1, rank - 2)


def _conv_attrs(inst: Instruction) -> dict:
    return {"stride": attr(inst, "stride", 2), "pad": attr(inst, "pad", 4),
            "dilation": attr(inst, "dilation", 2), "groups": attr(inst, "groups")}


def _channel_sum(e: Emitter, dy: Value) -> Value:
    """A bias's adjoint: dy summed over every axis but the channels (1)."""
    return e.sum(dy, tuple(a for a in range(dy.type.rank) if a != 1), keepdims=False)


@_rule(G.CONV2D)
def _conv2d(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    dy, x, w = dys[0], inst.args[0], inst.args[1]
    a = _conv_attrs(inst)
    dx = dw = db = None
    if e.wants(0):
        dx = _conv_input_grad(e, dy, e.arg(1), x.type.shape, a)
    if e.wants(1):
        dw = conv_weight_grad(e, e.arg(0), dy, w.type.shape, a)
    if len(inst.args) > 2 and e.wants(2):
        db = _channel_sum(e, dy)
    return [dx, dw, db][:len(inst.args)]


def _conv_input_grad(e: Emitter, dy: Value, w: Value, x_shape, a: dict) -> Value:
    """conv2d's input gradient: the transposed convolution of dy by the same
    weight, output_padding giving back the rows and columns the stride skipped."""
    out_pad = []
    for axis in (0, 1):
        s, d, k = a["stride"][axis], a["dilation"][axis], w.type.shape[2 + axis]
        p = a["pad"][axis] + a["pad"][axis + 2]
        n_out = dy.type.shape[2 + axis]
        out_pad.append(x_shape[2 + axis] - ((n_out - 1) * s - p + d * (k - 1) + 1))
    if all(op < max(s, d) for op, s, d in zip(out_pad, a["stride"], a["dilation"])):
        return e.op("conv_transpose2d", dy, w, output_padding=tuple(out_pad), **a)
    # An output_padding conv_transpose2d refuses (a stride smaller than both
    # dilation and kernel overlap): the full transposed conv, then pad.
    full = e.op("conv_transpose2d", dy, w, **a)
    extra = [x_shape[2 + i] - full.type.shape[2 + i] for i in (0, 1)]
    return e.op("pad", full, pads=(0, 0, 0, 0, 0, 0, extra[0], extra[1]))


def conv_weight_grad(e: Emitter, x: Value, dy: Value, w_shape, a: dict) -> Value:
    """conv2d's weight gradient: one matrix product per kernel tap without
    groups and strides, a grouped convolution otherwise. (A strided tap is a
    strided slice, whose DMA -insert-dma lets run past the end of the input
    under some plans: docs/training.md, "Not built".)"""
    if a["groups"] == 1 and tuple(a["stride"]) == (1, 1):
        return _tap_products(e, x, dy, w_shape, a)
    return _batch_channel_conv(e, x, dy, w_shape, a)


def _tap_products(e: Emitter, x: Value, dy: Value, w_shape, a: dict) -> Value:
    """dW[:, :, i, j] = dy (O x K) times the input rows tap (i, j) meets (K x C),
    K = N Ho Wo: each tap's input is a strided slice of the padded input, and
    the products are matmuls (swir's best-planned kernels), not a convolution
    whose window is the whole output plane."""
    n, c, h, wd = x.type.shape
    o, _, kh, kw = w_shape
    ho, wo = dy.type.shape[2:]
    (s0, s1), (d0, d1), pad = a["stride"], a["dilation"], a["pad"]
    k = n * ho * wo
    dy_t = e.reshape(e.transpose(dy, (1, 0, 2, 3)), (o, k))             # O x K
    xp = x if not any(pad) else e.op("pad", x, pads=(0, 0, pad[0], pad[1], 0, 0, pad[2], pad[3]))
    x_t = e.transpose(xp, (0, 2, 3, 1))                                  # N x Hp x Wp x C
    taps = []
    for i in range(kh):
        for j in range(kw):
            rows = e.op("slice", x_t, starts=(i * d0, j * d1),
                        ends=(i * d0 + (ho - 1) * s0 + 1, j * d1 + (wo - 1) * s1 + 1),
                        axes=(1, 2), steps=(s0, s1))                     # N x Ho x Wo x C
            taps.append(e.reshape(e.op("matmul", dy_t, e.reshape(rows, (k, c))), (o, c, 1)))
    grads = e.op("concat", *taps, axis=2) if len(taps) > 1 else taps[0]
    return e.reshape(grads, w_shape)


def _batch_channel_conv(e: Emitter, x: Value, dy: Value, w_shape, a: dict) -> Value:
    """dW[o, c, i, j] = sum over n, h, w of dy[n, o, h, w] x[n, c', h s + i d - t, ...]
    as one grouped conv2d: the input is x with its batch as channels (Cg x G*N
    x H x W), the weight dy the same way (G*Og x N x Ho x Wo), the stride and
    dilation swapped; the result (Cg x G*Og x kH' x kW', kH' >= kH) is cut to
    kH x kW and put back in OIHW order."""
    g = a["groups"]
    n, c, h, wd = x.type.shape
    o, cg, kh, kw = w_shape
    og = o // g
    xs = e.reshape(e.transpose(e.reshape(x, (n, g, cg, h, wd)), (2, 1, 0, 3, 4)),
                   (cg, g * n, h, wd))
    ho, wo = dy.type.shape[2:]
    ws = e.reshape(e.transpose(e.reshape(dy, (n, g, og, ho, wo)), (1, 2, 0, 3, 4)),
                   (g * og, n, ho, wo))
    full = e.op("conv2d", xs, ws, stride=a["dilation"], dilation=a["stride"], pad=a["pad"],
                groups=g)
    if full.type.shape[2:] != (kh, kw):
        full = e.op("slice", full, starts=(0, 0), ends=(kh, kw), axes=(2, 3))
    back = e.transpose(e.reshape(full, (cg, g, og, kh, kw)), (1, 2, 0, 3, 4))
    return e.reshape(back, w_shape)


@_rule(G.CONV_TRANSPOSE2D)
def _conv_transpose2d(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    """y = conv_transpose2d(x, w) is the input gradient of conv2d(y) by w, so
    dx = conv2d(dy, w) and dw = conv2d's weight gradient with dy as its input."""
    dy, x, w = dys[0], inst.args[0], inst.args[1]
    a = _conv_attrs(inst)
    dx = dw = db = None
    if e.wants(0):
        dx = e.op("conv2d", dy, e.arg(1), **a)
        if dx.type.shape != x.type.shape:   # output_padding rows no window reads
            dx = e.op("slice", dx, starts=(0, 0), ends=x.type.shape[2:], axes=(2, 3))
    if e.wants(1):
        dw = conv_weight_grad(e, dy, e.arg(0), w.type.shape, a)
    if len(inst.args) > 2 and e.wants(2):
        db = _channel_sum(e, dy)
    return [dx, dw, db][:len(inst.args)]


# -- pooling and normalisation ------------------------------------------------------------

_MAX_POOL_ATTRS = ("kernel", "stride", "pad", "dilation", "ceil_mode")
_AVG_POOL_ATTRS = ("kernel", "stride", "pad", "ceil_mode", "count_include_pad")


@_rule(G.MAX_POOL2D)
def _max_pool2d(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    attrs = {k: attr(inst, k) for k in _MAX_POOL_ATTRS}
    return [e.op("max_pool2d_grad", e.arg(0), dys[0], **attrs)]


@_rule(G.AVG_POOL2D)
def _avg_pool2d(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    attrs = {k: attr(inst, k) for k in _AVG_POOL_ATTRS}
    return [e.op("avg_pool2d_grad", dys[0], input_shape=inst.args[0].type.shape, **attrs)]


@_rule(G.GLOBAL_AVG_POOL2D)
def _global_avg_pool2d(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    shape = inst.args[0].type.shape
    return [e.op("expand", e.scale(dys[0], 1 / (shape[2] * shape[3])), shape=shape)]


@_rule(G.BATCH_NORM)
def _batch_norm(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    """Inference batch_norm: y = (x - mean) r scale + bias, r = 1 / sqrt(var + eps)."""
    dy = dys[0]
    x, scale, _, mean, var = (e.arg(i) for i in range(5))
    ch = _channel_shape(x.type.shape)
    r = e.op("rsqrt", e.op("add", var, e.scalar(attr(inst, "epsilon"), var)))
    r_c, scale_c = e.reshape(r, ch), e.reshape(scale, ch)
    centred = e.op("sub", x, e.reshape(mean, ch)) if e.wants(1) or e.wants(4) else None
    out: Adjoints = [None] * 5
    if e.wants(0):
        out[0] = e.op("mul", dy, e.op("mul", scale_c, r_c))
    if e.wants(1):
        out[1] = _channel_sum(e, e.op("mul", dy, e.op("mul", centred, r_c)))
    if e.wants(2):
        out[2] = _channel_sum(e, dy)
    if e.wants(3):
        out[3] = e.op("neg", e.op("mul", _channel_sum(e, dy), e.op("mul", scale, r)))
    if e.wants(4):   # d r / d var = -r^3 / 2
        s = _channel_sum(e, e.op("mul", dy, centred))
        r3 = e.op("mul", r, e.op("mul", r, r))
        out[4] = e.op("mul", e.op("mul", s, scale), e.scale(r3, -0.5))
    return out


def _channel_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (1, shape[1]) + (1,) * (len(shape) - 2)


@_rule(G.LAYER_NORM)
def _layer_norm(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    """x_hat = (x - mean) r over axes [axis, rank); y = x_hat scale (+ bias);
    dx = r (g - mean(g) - x_hat mean(g x_hat)), g = dy scale."""
    dy, x, scale = dys[0], e.arg(0), e.arg(1)
    axes = tuple(range(normalise_axis(attr(inst, "axis"), x.type.rank), x.type.rank))
    mean = e.op("reduce_mean", x, axes=axes, keepdims=True)
    centred = e.op("sub", x, mean)
    var = e.op("reduce_mean", e.op("mul", centred, centred), axes=axes, keepdims=True)
    r = e.op("rsqrt", e.op("add", var, e.scalar(attr(inst, "epsilon"), var)))
    x_hat = e.op("mul", centred, r)
    out: Adjoints = [None] * len(inst.args)
    if e.wants(0):
        g = e.op("mul", dy, scale)
        mg = e.op("reduce_mean", g, axes=axes, keepdims=True)
        mgx = e.op("reduce_mean", e.op("mul", g, x_hat), axes=axes, keepdims=True)
        inner = e.op("sub", e.op("sub", g, mg), e.op("mul", x_hat, mgx))
        out[0] = e.op("mul", r, inner)
    if e.wants(1):
        out[1] = e.unbroadcast(e.op("mul", dy, x_hat), inst.args[1].type.shape)
    if len(inst.args) > 2 and e.wants(2):
        out[2] = e.unbroadcast(dy, inst.args[2].type.shape)
    return out


@_rule(G.SOFTMAX)
def _softmax(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    dy, y = dys[0], e.result()
    axis = normalise_axis(attr(inst, "axis"), y.type.rank)
    dot = e.sum(e.op("mul", dy, y), (axis,))
    return [e.op("mul", y, e.op("sub", dy, dot))]


@_rule(G.LOG_SOFTMAX)
def _log_softmax(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    dy, y = dys[0], e.result()
    axis = normalise_axis(attr(inst, "axis"), y.type.rank)
    return [e.op("sub", dy, e.op("mul", e.op("exp", y), e.sum(dy, (axis,))))]


# -- reductions ----------------------------------------------------------------------

def _reduced_axes(inst: Instruction) -> tuple[int, ...]:
    rank = inst.args[0].type.rank
    axes = attr(inst, "axes")
    return tuple(normalise_axes(axes, rank, "axes")) if axes else tuple(range(rank))


def _kept(e: Emitter, inst: Instruction, v: Value) -> Value:
    """A reduction's result (or adjoint) with the reduced axes kept as size 1."""
    shape = inst.args[0].type.shape
    axes = _reduced_axes(inst)
    return e.reshape(v, tuple(1 if i in axes else n for i, n in enumerate(shape)))


@_rule(G.REDUCE_SUM, G.REDUCE_MEAN)
def _reduce_sum_mean(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    shape = inst.args[0].type.shape
    dy = _kept(e, inst, dys[0])
    if inst.isa(G.REDUCE_MEAN):
        dy = e.scale(dy, 1 / math.prod(shape[a] for a in _reduced_axes(inst)))
    return [e.op("expand", dy, shape=shape)]


@_rule(G.REDUCE_MAX, G.REDUCE_MIN)
def _reduce_max_min(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    """The adjoint shared evenly among the elements equal to the result."""
    x = e.arg(0)
    hit = e.op("eq", x, _kept(e, inst, e.result()))
    weight = e.op("cast", hit, to=x.type.element)
    count = e.op("reduce_sum", weight, axes=_reduced_axes(inst), keepdims=True)
    return [e.op("mul", e.op("div", weight, count), _kept(e, inst, dys[0]))]


@_rule(G.REDUCE_PROD)
def _reduce_prod(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    """prod / x: not defined where an element is 0 (PyTorch's rule for zeros
    is not built; the docs say so)."""
    x = e.arg(0)
    ratio = e.op("div", _kept(e, inst, e.result()), x)
    return [e.op("mul", ratio, _kept(e, inst, dys[0]))]


# -- shapes -------------------------------------------------------------------------

@_rule(G.RESHAPE, G.FLATTEN, G.SQUEEZE, G.UNSQUEEZE)
def _same_elements(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    return [e.reshape(dys[0], inst.args[0].type.shape)]


@_rule(G.TRANSPOSE)
def _transpose(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    perm = attr(inst, "perm")
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    return [e.transpose(dys[0], tuple(inverse))]


@_rule(G.EXPAND)
def _expand(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    return [e.unbroadcast(dys[0], inst.args[0].type.shape)]


@_rule(G.CONCAT)
def _concat(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    rank = inst.results[0].type.rank
    axis = normalise_axis(attr(inst, "axis"), rank)
    out, start = [], 0
    for i, v in enumerate(inst.args):
        size = v.type.shape[axis]
        out.append(e.op("slice", dys[0], starts=(start,), ends=(start + size,), axes=(axis,))
                   if e.wants(i) else None)
        start += size
    return out


@_rule(G.SPLIT)
def _split(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    parts = [dy if dy is not None else e.const(0.0, r.type)
             for dy, r in zip(dys, inst.results)]
    axis = normalise_axis(attr(inst, "axis"), inst.args[0].type.rank)
    return [e.op("concat", *parts, axis=axis) if len(parts) > 1 else parts[0]]


@_rule(G.SLICE)
def _slice(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    """The slice's elements put back in place, zeros around them: a pad, with a
    positive step first spread out (each element followed by step - 1 zeros)."""
    shape = inst.args[0].type.shape
    n = len(attr(inst, "starts"))
    dx = dys[0]
    begin, end = [0] * len(shape), [0] * len(shape)
    for a, s, t, st in zip(normalise_axes(attr(inst, "axes", n), len(shape), "axes"),
                           attr(inst, "starts", n), attr(inst, "ends", n), attr(inst, "steps", n)):
        if st < 0:
            raise AdjointError("the gradient of a slice with a negative step is not built")
        taken = G.slice_bounds(shape[a], s, t, st)
        if st > 1:
            dx = _spread(e, dx, a, st)
        begin[a] = taken.start
        end[a] = shape[a] - taken.start - dx.type.shape[a]
        if end[a] < 0:   # the spread's last zeros run past the end
            cut = list(dx.type.shape)
            cut[a] += end[a]
            dx = e.op("slice", dx, starts=(0,), ends=(cut[a],), axes=(a,))
            end[a] = 0
    if any(begin) or any(end):
        dx = e.op("pad", dx, pads=tuple(begin + end))
    return [dx]


def _spread(e: Emitter, v: Value, axis: int, step: int) -> Value:
    """Each element of ``axis`` followed by ``step - 1`` zeros."""
    shape = v.type.shape
    col = e.reshape(v, shape[:axis + 1] + (1,) + shape[axis + 1:])
    rank = len(shape) + 1
    pads = [0] * (2 * rank)
    pads[rank + axis + 1] = step - 1
    wide = e.op("pad", col, pads=tuple(pads))
    return e.reshape(wide, shape[:axis] + (shape[axis] * step,) + shape[axis + 1:])


@_rule(G.PAD)
def _pad(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    if attr(inst, "mode") != "constant":
        raise AdjointError(f"the gradient of a '{attr(inst, 'mode')}' pad is not built "
                           "(only mode \"constant\")")
    shape = inst.args[0].type.shape
    pads = attr(inst, "pads")
    return [e.op("slice", dys[0], starts=tuple(pads[:len(shape)]),
                 ends=tuple(p + n for p, n in zip(pads, shape)),
                 axes=tuple(range(len(shape))))]


@_rule(G.RESIZE_NEAREST)
def _resize_nearest(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    """Integer scales: each input element is copied to a scale-sized block, so
    its adjoint is the block's sum."""
    scales = attr(inst, "scales")
    if any(s != int(s) or s < 1 for s in scales):
        raise AdjointError("the gradient of resize_nearest is built for whole-number "
                           f"scales only, not {list(scales)}")
    shape = inst.args[0].type.shape
    blocks = tuple(d for n, s in zip(shape, scales) for d in (n, int(s)))
    split = e.reshape(dys[0], blocks)
    summed = e.sum(split, tuple(2 * i + 1 for i in range(len(shape))), keepdims=False)
    return [e.reshape(summed, shape)]


# -- training ops ----------------------------------------------------------------------

@_rule(T.SOFTMAX_CROSS_ENTROPY)
def _cross_entropy(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    """(softmax(logits) - one_hot(labels)) / N, times the loss's adjoint."""
    logits, labels = e.arg(0), e.arg(1)
    n, c = logits.type.shape
    diff = e.op("sub", e.op("softmax", logits, axis=1), one_hot(e, labels, c, logits))
    return [e.op("mul", diff, e.scale(dys[0], 1.0 / n)), None]


@_rule(T.MSE_LOSS)
def _mse(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    d = e.op("sub", e.arg(0), e.arg(1))
    dp = e.op("mul", d, e.scale(dys[0], 2.0 / d.type.num_elements))
    return [dp if e.wants(0) else None, e.op("neg", dp) if e.wants(1) else None]


@_rule(T.BATCH_NORM_TRAIN)
def _batch_norm_train(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    """dx = scale r (dy - mean(dy) - x_hat mean(dy x_hat)), the means over each
    channel's values; the running statistics carry no gradient."""
    dy = dys[0]
    out: Adjoints = [None] * 5
    if dy is None:
        return out
    x = e.arg(0)
    c = x.type.shape[1]
    ch = (1, c) + (1,) * (x.type.rank - 2)
    axes = tuple(a for a in range(x.type.rank) if a != 1)
    mean, _, r = batch_statistics(e, x, attr(inst, "epsilon"))
    x_hat = e.op("mul", e.op("sub", x, mean), r)
    if e.wants(0):
        m_dy = e.op("reduce_mean", dy, axes=axes, keepdims=True)
        m_dyx = e.op("reduce_mean", e.op("mul", dy, x_hat), axes=axes, keepdims=True)
        inner = e.op("sub", e.op("sub", dy, m_dy), e.op("mul", x_hat, m_dyx))
        out[0] = e.op("mul", e.op("mul", e.reshape(e.arg(1), ch), r), inner)
    if e.wants(1):
        out[1] = _channel_sum(e, e.op("mul", dy, x_hat))
    if e.wants(2):
        out[2] = _channel_sum(e, dy)
    return out


@_rule(G.GATHER)
def _gather(e: Emitter, inst: Instruction, dys: list) -> Adjoints:
    raise AdjointError("the gradient of gather's data needs a scatter-add, which swir does "
                       "not have yet")


ADJOINT.check_complete()
