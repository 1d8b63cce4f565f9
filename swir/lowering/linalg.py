"""matmul, conv2d and conv_transpose2d: output loops around reduction loops,
accumulating through the output buffer (TVM's plain IR).

A padded convolution is one kernel with two loop nests: a pad nest writes the
zero-padded input into a scratch buffer (:func:`swir.lowering.padding.emit_pad`),
then the guard-free compute nest reads it. conv_transpose2d is the same
compute nest over its zero-inserted input (see :func:`lower_conv_transpose2d`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from swir.ir.affine import Expr
from swir.ir.core import Instruction, Value
from swir.lowering.kernel import KernelBuilder, broadcast_index
from swir.lowering.padding import copy_box, emit_pad, fill_box
from swir.lowering.rule import lowering
from swir.ops.graph import CONV2D, CONV_TRANSPOSE2D, MATMUL
from swir.ops.util import attr


@lowering(MATMUL, inputs=("A", "B"), outputs=("C",))
def lower_matmul(k: KernelBuilder, inst: Instruction, ins: list[Value],
                 outs: list[Value]) -> None:
    """numpy.matmul: C[..., m, n] = sum_k A[..., m, k] * B[..., k, n]; batch
    dimensions broadcast; a 1-D operand has no m (or n) dimension."""
    a, b = ins
    (c,) = outs
    out_shape = inst.results[0].type.shape
    a_shape, b_shape = inst.args[0].type.shape, inst.args[1].type.shape
    kdim = a_shape[-1]
    nbatch = len(out_shape) - (len(a_shape) > 1) - (len(b_shape) > 1)
    names = [f"b{d}" for d in range(nbatch)] + ["x"] * (len(a_shape) > 1) + \
        ["y"] * (len(b_shape) > 1)
    zero = k.const(0.0 if c.type.element.is_float else 0, c.type.element)
    with k.loops(out_shape, names) as ivs:
        idx = [Expr.of(v) for v in ivs]
        batch = idx[:nbatch]

        def side(shape: tuple[int, ...], inner: list[Expr]) -> list[Expr]:
            if len(shape) == 1:
                return inner
            return broadcast_index(shape[:-2], batch, out_shape[:nbatch]) + inner

        m = [idx[nbatch]] if len(a_shape) > 1 else []
        n = [idx[-1]] if len(b_shape) > 1 else []

        def term(rivs: list[Value]) -> Value:
            kk = Expr.of(rivs[0])
            av = k.load(a, side(a_shape, m + [kk]))
            bv = k.load(b, side(b_shape, [kk] + n))
            return k.op("mul", av, bv)

        k.reduce(c, idx, zero, [kdim], ["k"], term)


# -- convolution -------------------------------------------------------------------

@dataclass(frozen=True)
class Channels:
    """The channel subscripts of one product of a convolution: ``ic`` the input
    channel within its group, ``c_in`` the input channel, ``c_out`` the output
    channel, ``oc`` the output channel within its group."""
    ic: Expr
    c_in: Expr
    c_out: Expr
    oc: Expr


# The weight subscript of a product, from its channels and kernel tap (kh, kw).
WeightIndex = Callable[[Channels, Expr, Expr], list[Expr]]


def conv_nest(k: KernelBuilder, src: Value, w: Value, bias: Value | None, out: Value,
              groups: int, cg: int, kernel_hw: tuple[int, int], stride: list[int],
              dilation: list[int], weight_index: WeightIndex) -> None:
    """The guard-free compute nest of a convolution over an already padded
    ``src`` (N x groups*cg x ...): ``out[n, oc, oh, ow] = sum over ic, kh, kw of
    src[n, ic', sH*oh + dH*kh, sW*ow + dW*kw] * w[weight_index(...)]`` (+ bias
    in the finalize step). Channel arithmetic stays affine without floordiv:

    - ``groups == 1``: loops n, oc, oh, ow; input channel ic;
    - one input and one output channel per group (depthwise, multiplier 1):
      loops n, c, oh, ow; the input channel is the output channel, no ic loop;
    - otherwise the groups are a loop: n, g, oc, oh, ow with output channel
      ``og*g + oc`` and input channel ``cg*g + ic``.

    Reduction loops of extent 1 (ic with one channel per group, a 1-wide
    kernel axis) are left out, their index being 0."""
    n, o, oh, ow = out.type.shape
    og = o // groups
    kh, kw = kernel_hw
    elem = out.type.element
    zero = k.const(0.0 if elem.is_float else 0, elem)
    if groups == 1:
        extents, names = [n, o, oh, ow], ["n", "oc", "oh", "ow"]
    elif cg == 1 and og == 1:
        extents, names = [n, o, oh, ow], ["n", "c", "oh", "ow"]
    else:
        extents, names = [n, groups, og, oh, ow], ["n", "g", "oc", "oh", "ow"]
    red = [(e, nm) for e, nm in ((cg, "ic"), (kh, "kh"), (kw, "kw")) if e > 1]
    with k.loops(extents, names) as ivs:
        iv = [Expr.of(v) for v in ivs]
        if len(iv) == 5:
            b_, g, oc, y, x = iv
            c_out, oc_in_group, c_base = g * og + oc, oc, g * cg
        else:
            b_, c_out, y, x = iv
            oc_in_group = c_out if groups == 1 else Expr.of(0)
            c_base = Expr.of(0) if groups == 1 else c_out
        idx = [b_, c_out, y, x]

        def term(rivs: list[Value]) -> Value:
            r = dict(zip((nm for _, nm in red), (Expr.of(v) for v in rivs)))
            ic, p, q = (r.get(nm, Expr.of(0)) for nm in ("ic", "kh", "kw"))
            xv = k.load(src, [b_, c_base + ic, y * stride[0] + p * dilation[0],
                              x * stride[1] + q * dilation[1]])
            wv = k.load(w, weight_index(Channels(ic, c_base + ic, c_out, oc_in_group), p, q))
            return k.op("mul", xv, wv)

        finalize = None
        if bias is not None:
            finalize = lambda v: k.op("add", v, k.load(bias, [c_out]))
        k.reduce(out, idx, zero, [e for e, _ in red], [nm for _, nm in red], term,
                 finalize=finalize)


def padded_input(k: KernelBuilder, x: Value, pad: list[int],
                 fill: float | bool | Value = 0.0,
                 extra: tuple[int, int] = (0, 0)) -> Value:
    """``x`` itself, or a scratch copy padded by [top, left, bottom, right] (and
    ``extra`` more rows / columns at the bottom / right) with ``fill``."""
    after = [pad[2] + extra[0], pad[3] + extra[1]]
    if not any(pad[:2]) and not any(after):
        return x
    shape = x.type.shape
    padded = (shape[0], shape[1], shape[2] + pad[0] + after[0], shape[3] + pad[1] + after[1])
    p = k.scratch(padded, x.type.element, "P")
    emit_pad(k, x, shape, p, [0, 0, pad[0], pad[1]], [0, 0] + after, "constant", fill)
    return p


@lowering(CONV2D, inputs=("X", "W", "B"), outputs=("Y",))
def lower_conv2d(k: KernelBuilder, inst: Instruction, ins: list[Value],
                 outs: list[Value]) -> None:
    """ONNX Conv: a zero-pad nest into scratch ``P`` when there is padding,
    then :func:`conv_nest` with ``w[oc, ic, kh, kw]``."""
    x, w = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    groups = attr(inst, "groups")
    _, cg, kh, kw = w.type.shape
    src = padded_input(k, x, attr(inst, "pad"))
    conv_nest(k, src, w, bias, outs[0], groups, cg, (kh, kw),
              attr(inst, "stride"), attr(inst, "dilation"),
              lambda ch, p, q: [ch.c_out, ch.ic, p, q])


@lowering(CONV_TRANSPOSE2D, inputs=("X", "W", "B"), outputs=("Y",))
def lower_conv_transpose2d(k: KernelBuilder, inst: Instruction, ins: list[Value],
                           outs: list[Value]) -> None:
    """ONNX ConvTranspose as a gather: a convolution (stride 1, the same
    dilation) with the flipped kernel ``w[ic, oc, kH-1-kh, kW-1-kw]`` over the
    zero-inserted input ``Z``, built in a scratch buffer by two guard-free nests:
    a zero fill, then the strided placement
    ``Z[n, c, sH*ih + dH*(kH-1) - top, ...] = x[n, c, ih, ...]``.

    ``Z`` is OH + dH*(kH-1) rows high (likewise wide): output row oh reads rows
    oh .. oh + dH*(kH-1). The crop (pads) and output_padding are folded into
    the placement offset and the size of ``Z``; input rows whose every tap
    lands in the cropped border are not placed (the placement loop covers
    only the input rows that reach an output), so every nest is in bounds.
    Cost: the compute nest multiplies the inserted zeros too (sH*sW times the
    useful products), the price of a conv-shaped, guard-free nest."""
    x, w = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    groups = attr(inst, "groups")
    stride = attr(inst, "stride")
    pad = attr(inst, "pad")
    dilation = attr(inst, "dilation")
    n, c, h, wd = x.type.shape
    kh, kw = w.type.shape[2:]
    out_h, out_w = outs[0].type.shape[2:]
    zshape, src_lo, dst_lo, extents = [n, c], [0, 0], [0, 0], [n, c]
    for size, k_, s, d, p0, out in ((h, kh, stride[0], dilation[0], pad[0], out_h),
                                    (wd, kw, stride[1], dilation[1], pad[1], out_w)):
        span = d * (k_ - 1)
        zshape.append(out + span)
        lo = -(-max(0, p0 - span) // s)               # first input row placed
        hi = min(size - 1, (out - 1 + p0) // s)       # last input row placed
        src_lo.append(lo)
        dst_lo.append(lo * s + span - p0)
        extents.append(hi - lo + 1)
    elem = x.type.element
    z = k.scratch(tuple(zshape), elem, "Z")
    fill_box(k, k.const(0.0 if elem.is_float else 0, elem), z, [0] * 4, zshape)
    copy_box(k, x, src_lo, z, dst_lo, extents, dst_step=[1, 1] + stride,
             names=["n", "c", "ih", "iw"])
    cg = c // groups
    conv_nest(k, z, w, bias, outs[0], groups, cg, (kh, kw), [1, 1], dilation,
              lambda ch, p, q: [ch.c_in, ch.oc, (kh - 1) - p, (kw - 1) - q])
