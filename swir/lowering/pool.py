"""max_pool2d, avg_pool2d and global_avg_pool2d: loops n, c, oh, ow around the
window loops kh, kw, reducing through the output buffer; and their gradients
max_pool2d_grad and avg_pool2d_grad, gathers (see :func:`_gather_nest`).

A pool with padding (or a ceil-mode window that runs past the end padding)
is one kernel with two loop nests: a pad nest writes the padded input into a
scratch buffer ``P`` (:func:`swir.lowering.padding.emit_pad`), then the
guard-free window nest reads it. Max pools pad with the lowest value (-inf
for floats), so padding never wins and an all-padding window gives -inf as
the graph kernel does; average pools pad with 0 and divide by the divisor the
graph kernel uses: a compile-time table ``D[oh, ow]`` when it varies with the
position (count_include_pad = false with padding, ceil-mode overhang), the
constant window size otherwise.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from swir.ir.affine import Expr
from swir.ir.core import Instruction, Value
from swir.ir.dtypes import dtype_of
from swir.ir.dtypes import lowest as lowest_value  # (the graph kernels pad with it too)
from swir.lowering.kernel import KernelBuilder
from swir.lowering.linalg import padded_input
from swir.ir.types import I32
from swir.lowering.padding import fill_box, named_const
from swir.lowering.rule import lowering
from swir.ops.gradients import AVG_POOL2D_GRAD, MAX_POOL2D_GRAD
from swir.ops.graph import AVG_POOL2D, GLOBAL_AVG_POOL2D, MAX_POOL2D
from swir.ops.semantics import pool_counts  # (the graph kernel's divisor)
from swir.ops.util import attr


def _overhang(size: int, out: int, k: int, s: int, d: int, p0: int, p1: int) -> int:
    """Rows (columns) a ceil-mode window reaches past the end padding: the
    graph kernel pads them too (``_padded``)."""
    need = (out - 1) * s + d * (k - 1) + 1
    return max(0, need - size - p0 - p1)


def _window_nest(k: KernelBuilder, src: Value, out: Value, kernel_hw: list[int],
                 stride: list[int], dilation: list[int], init: Value, combine: str,
                 finalize: Callable[[list[Expr]], Callable[[Value], Value]] | None = None,
                 output: bool = True) -> None:
    """``out[n, c, oh, ow] = combine over kh, kw of src[n, c, sH*oh + dH*kh,
    sW*ow + dW*kw]``, then ``finalize(out subscript)`` applied to the sum;
    window axes of extent 1 have no loop."""
    red = [(e, nm) for e, nm in zip(kernel_hw, ("kh", "kw")) if e > 1]
    with k.loops(out.type.shape, ["n", "c", "oh", "ow"]) as ivs:
        n, c, y, x = (Expr.of(v) for v in ivs)
        idx = [n, c, y, x]

        def term(rivs: list[Value]) -> Value:
            r = dict(zip((nm for _, nm in red), (Expr.of(v) for v in rivs)))
            p, q = r.get("kh", Expr.of(0)), r.get("kw", Expr.of(0))
            return k.load(src, [n, c, y * stride[0] + p * dilation[0],
                                x * stride[1] + q * dilation[1]])

        k.reduce(out, idx, init, [e for e, _ in red], [nm for _, nm in red], term,
                 combine=combine, finalize=finalize(idx) if finalize else None, output=output)


def _pool_attrs(inst: Instruction, dilated: bool):
    kern = attr(inst, "kernel")
    stride = attr(inst, "stride")
    pad = attr(inst, "pad")
    dilation = attr(inst, "dilation") if dilated else [1, 1]
    return kern, stride, pad, dilation


def _extra(x: Value, out: Value, kern, stride, pad, dilation) -> tuple[int, int]:
    (h, w), (oh, ow) = x.type.shape[2:], out.type.shape[2:]
    return (_overhang(h, oh, kern[0], stride[0], dilation[0], pad[0], pad[2]),
            _overhang(w, ow, kern[1], stride[1], dilation[1], pad[1], pad[3]))


@lowering(MAX_POOL2D)
def lower_max_pool2d(k: KernelBuilder, inst: Instruction, ins: list[Value],
                     outs: list[Value]) -> None:
    """ONNX MaxPool: pad with the lowest value, then a max over the window
    starting from it (so the result is bit-identical to the graph kernel)."""
    (x,), (y,) = ins, outs
    kern, stride, pad, dilation = _pool_attrs(inst, dilated=True)
    low = lowest_value(dtype_of(x.type.element))
    low = bool(low) if isinstance(low, (bool, np.bool_)) else \
        float(low) if x.type.element.is_float else int(low)
    lowest = named_const(k, low, x.type.element, "lowest")
    src = padded_input(k, x, pad, lowest, _extra(x, y, kern, stride, pad, dilation))
    _window_nest(k, src, y, kern, stride, dilation, lowest, "max")


def divisor_table(h: int, w: int, oh: int, ow: int, kern: list[int], stride: list[int],
                  pad: list[int], include_pad: bool) -> np.ndarray:
    """Per output position, the graph kernel's divisor (``pool_counts``)."""
    ch = pool_counts(h, oh, kern[0], stride[0], pad[0], pad[2], include_pad)
    cw = pool_counts(w, ow, kern[1], stride[1], pad[1], pad[3], include_pad)
    return ch[:, None] * cw[None, :]


@lowering(AVG_POOL2D)
def lower_avg_pool2d(k: KernelBuilder, inst: Instruction, ins: list[Value],
                     outs: list[Value]) -> None:
    """ONNX AveragePool: pad with 0, sum the window, divide by the window
    size, or by ``D[oh, ow]`` (a compile-time table) when the divisor varies."""
    (x,), (y,) = ins, outs
    kern, stride, pad, dilation = _pool_attrs(inst, dilated=False)
    elem = x.type.element
    h, w = x.type.shape[2:]
    oh, ow = y.type.shape[2:]
    table = divisor_table(h, w, oh, ow, kern, stride, pad,
                          attr(inst, "count_include_pad"))
    src = padded_input(k, x, pad, 0.0, _extra(x, y, kern, stride, pad, dilation))
    if (table == table.flat[0]).all():
        div = named_const(k, float(table.flat[0]), elem, "size")
        finalize = lambda idx: lambda v: k.op("div", v, div)
    else:
        d = k.table(table.astype(dtype_of(elem)), elem, "D")
        finalize = lambda idx: lambda v: k.op("div", v, k.load(d, idx[2:]))
    _window_nest(k, src, y, kern, stride, dilation, k.const(0.0, elem), "add", finalize)


@lowering(GLOBAL_AVG_POOL2D)
def lower_global_avg_pool2d(k: KernelBuilder, inst: Instruction, ins: list[Value],
                            outs: list[Value]) -> None:
    """ONNX GlobalAveragePool: ``y[n, c, 0, 0] = sum over h, w of x / (H*W)``."""
    (x,), (y,) = ins, outs
    n, c, h, w = x.type.shape
    elem = x.type.element
    div = named_const(k, float(h * w), elem, "size")
    red = [(e, nm) for e, nm in ((h, "h"), (w, "w")) if e > 1]
    with k.loops([n, c], ["n", "c"]) as ivs:
        idx = [Expr.of(v) for v in ivs] + [Expr.of(0), Expr.of(0)]

        def term(rivs: list[Value]) -> Value:
            r = dict(zip((nm for _, nm in red), (Expr.of(v) for v in rivs)))
            return k.load(x, idx[:2] + [r.get("h", Expr.of(0)), r.get("w", Expr.of(0))])

        k.reduce(y, idx, k.const(0.0, elem), [e for e, _ in red], [nm for _, nm in red],
                 term, finalize=lambda v: k.op("div", v, div))


# -- gradients -------------------------------------------------------------------------
#
# A window's gradient lands on several input elements, and an input element takes
# the gradients of several windows: written as a scatter, CPEs sharing the windows
# would race on the input elements. So each input element gathers instead, as
# conv_transpose2d does: the windows' values are first placed in a scratch plane
# ``Z`` with the zero insertion of a transposed convolution, window (oh, ow) at
# row ``sH*oh + span - top`` (span = dH*(kH-1), likewise for columns), so that
# the element (h, w) meets the window that covers it at tap (kh, kw) at
# ``Z[h + span - dH*kh, w + ...]``. Every window starts inside the input or its
# top / left padding (the shape rule's pad and ceil-mode limits), so ``Z``,
# (H + span) x (W + span), holds them all and every nest is guard-free.

def _plane(x_shape: tuple[int, ...], span: list[int]) -> tuple[int, ...]:
    n, c, h, w = x_shape
    return (n, c, h + span[0], w + span[1])


def _taps(kernel_hw: list[int], rivs: list[Value]) -> tuple[Expr, Expr]:
    """The kernel tap (kh, kw) of a window loop's variables (axes of extent 1
    have no loop)."""
    it = iter(rivs)
    return tuple(Expr.of(next(it)) if e > 1 else Expr.of(0) for e in kernel_hw)


def _tap_loops(kernel_hw: list[int]) -> tuple[list[int], list[str]]:
    red = [(e, nm) for e, nm in zip(kernel_hw, ("kh", "kw")) if e > 1]
    return [e for e, _ in red], [nm for _, nm in red]


def _gather_nest(k: KernelBuilder, out: Value, span: list[int], dilation: list[int],
                 kernel_hw: list[int], term: Callable[[list[Expr], Expr, Expr], Value]
                 ) -> None:
    """``out[n, c, h, w] = sum over kh, kw of term(Z subscript, kh, kw)``, the
    Z subscript being ``[n, c, h + span - dH*kh, w + span - dW*kw]``."""
    elem = out.type.element
    extents, names = _tap_loops(kernel_hw)
    with k.loops(out.type.shape, ["n", "c", "h", "w"]) as ivs:
        n, c, y, x = idx = [Expr.of(v) for v in ivs]

        def summand(rivs: list[Value]) -> Value:
            p, q = _taps(kernel_hw, rivs)
            at = [n, c, y + span[0] - p * dilation[0], x + span[1] - q * dilation[1]]
            return term(at, p, q)

        k.reduce(out, idx, k.const(0.0, elem), extents, names, summand)


def _first_inside(size: int, out: int, k: int, s: int, d: int, p0: int) -> np.ndarray:
    """Per window along one axis, its first tap inside the input (-1: none, a
    window of padding only)."""
    rows = np.arange(out)[:, None] * s - p0 + np.arange(k)[None, :] * d
    inside = (rows >= 0) & (rows < size)
    return np.where(inside.any(axis=1), inside.argmax(axis=1), -1)


def _first_table(x_shape, out_hw, kern, stride, dilation, pad) -> np.ndarray:
    """Per window, the flat tap (kh*kW + kw) of its first element inside the
    input, or -1: where PyTorch's scan starts."""
    fh = _first_inside(x_shape[2], out_hw[0], kern[0], stride[0], dilation[0], pad[0])
    fw = _first_inside(x_shape[3], out_hw[1], kern[1], stride[1], dilation[1], pad[1])
    flat = fh[:, None] * kern[1] + fw[None, :]
    return np.where((fh[:, None] < 0) | (fw[None, :] < 0), -1, flat).astype(np.int32)


def _tap_table(k: KernelBuilder, kern: list[int]) -> Callable[[Expr, Expr], Value]:
    """kh*kW + kw as an i32 value: a load of the compile-time table ``T[kh,
    kw]`` (one load where a cast, a multiply and an add would be)."""
    table = k.table(np.arange(kern[0] * kern[1], dtype=np.int32).reshape(kern), I32, "T")
    return lambda p, q: k.load(table, [p, q])


@lowering(MAX_POOL2D_GRAD, inputs=("X", "DY"), outputs=("DX",))
def lower_max_pool2d_grad(k: KernelBuilder, inst: Instruction, ins: list[Value],
                          outs: list[Value]) -> None:
    """PyTorch's scan (the graph kernel's rule) as reductions of one output
    each, so -ldm-plan can tile and spread every nest: ``P`` = x padded with
    -inf (as max_pool2d); ``best`` = the window's maximum (NaN if it has one);
    ``W`` = its winning flat tap (:func:`_winner`); then ``W`` and dy placed in
    the Z layout (``M``, -1 between windows; ``G``, 0), and the gather
    ``dx[n, c, h, w] = sum over kh, kw of (M == kh*kW + kw ? G : 0)``."""
    (x, dy), (dx,) = ins, outs
    kern, stride, pad, dilation = _pool_attrs(inst, dilated=True)
    elem = x.type.element
    span = [dilation[a] * (kern[a] - 1) for a in range(2)]
    plane = _plane(x.type.shape, span)
    lowest = named_const(k, float("-inf"), elem, "ninf")
    zero = k.const(0.0, elem)
    src = padded_input(k, x, pad, lowest, _extra(x, dy, kern, stride, pad, dilation))
    best = k.scratch(dy.type.shape, elem, "best")
    _window_nest(k, src, best, kern, stride, dilation, lowest, "max", output=False)
    flat_tap = _tap_table(k, kern)
    won = _winner(k, src, best, flat_tap, dy.type.shape, kern, stride, dilation, pad,
                  x.type.shape)
    winner, grads = k.scratch(plane, I32, "M"), k.scratch(plane, elem, "G")
    # One nest fills both planes and one places both (a spawn's Para, which the
    # LDM holds beside the buffers, grows with every nest's parameters).
    with k.loops(plane, ["n", "c", "h", "w"]) as ivs:
        k.store(named_const(k, -1, I32, "none"), winner, ivs)
        k.store(zero, grads, ivs)
    with k.loops(dy.type.shape, ["n", "c", "oh", "ow"]) as ivs:
        n, c, y, x_ = idx = [Expr.of(v) for v in ivs]
        at = [n, c, y * stride[0] + span[0] - pad[0], x_ * stride[1] + span[1] - pad[1]]
        k.store(k.load(won, idx), winner, at)
        k.store(k.load(dy, idx), grads, at)

    def term(at: list[Expr], p: Expr, q: Expr) -> Value:
        hit = k.op("eq", k.load(winner, at), flat_tap(p, q))
        return k.op("select", hit, k.load(grads, at), zero)

    _gather_nest(k, dx, span, dilation, kern, term)


def _winner(k: KernelBuilder, src: Value, best: Value,
            flat_tap: Callable[[Expr, Expr], Value], shape: tuple[int, ...],
            kern: list[int], stride: list[int], dilation: list[int], pad: list[int],
            x_shape: tuple[int, ...]) -> Value:
    """``W[n, c, oh, ow]``: the flat tap PyTorch's scan ends on — the last NaN,
    else the first element equal to a maximum above -inf, else the first
    element inside the input (table ``F``; -1 for a window of padding only).
    One max-reduction of a key: taps + tap for a NaN, taps-1 - tap for a
    maximum, -1 otherwise (taps = kH*kW), decoded by the finalisation."""
    taps = kern[0] * kern[1]
    out = k.scratch(shape, I32, "W")
    first = k.table(_first_table(x_shape, shape[2:], kern, stride, dilation, pad), I32, "F")
    none, count = named_const(k, -1, I32, "none"), named_const(k, taps, I32, "taps")
    last = named_const(k, taps - 1, I32, "last_tap")
    lowest = named_const(k, float("-inf"), src.type.element, "ninf")
    extents, names = _tap_loops(kern)
    with k.loops(shape, ["n", "c", "oh", "ow"]) as ivs:
        n, c, y, x = idx = [Expr.of(v) for v in ivs]
        m = k.load(best, idx)

        def key(rivs: list[Value]) -> Value:
            p, q = _taps(kern, rivs)
            v = k.load(src, [n, c, y * stride[0] + p * dilation[0],
                             x * stride[1] + q * dilation[1]])
            tap = flat_tap(p, q)
            is_max = k.op("and", k.op("eq", v, m), k.op("gt", v, lowest))
            ranked = k.op("select", is_max, k.op("sub", last, tap), none)
            return k.op("select", k.op("ne", v, v), k.op("add", count, tap), ranked)

        def decode(v: Value) -> Value:
            from_max = k.op("select", k.op("ge", v, k.const(0, I32)), k.op("sub", last, v),
                            k.load(first, [y, x]))
            return k.op("select", k.op("ge", v, count), k.op("sub", v, count), from_max)

        k.reduce(out, idx, none, extents, names, key, combine="max", finalize=decode,
                 output=False)
    return out


@lowering(AVG_POOL2D_GRAD, inputs=("DY",), outputs=("DX",))
def lower_avg_pool2d_grad(k: KernelBuilder, inst: Instruction, ins: list[Value],
                          outs: list[Value]) -> None:
    """``Z`` = 0, then each window's ``dy / divisor`` (the forward's divisor:
    the constant window size or the table ``D``) placed in it; then the gather
    ``dx[n, c, h, w] = sum over kh, kw of Z[n, c, h + kH-1 - kh, w + kW-1 - kw]``."""
    (dy,), (dx,) = ins, outs
    kern, stride, pad, dilation = _pool_attrs(inst, dilated=False)
    elem = dy.type.element
    h, w = dx.type.shape[2:]
    oh, ow = dy.type.shape[2:]
    table = divisor_table(h, w, oh, ow, kern, stride, pad, attr(inst, "count_include_pad"))
    span = [kern[0] - 1, kern[1] - 1]
    plane = _plane(dx.type.shape, span)
    z = k.scratch(plane, elem, "Z")
    fill_box(k, k.const(0.0, elem), z, [0] * 4, plane)
    if (table == table.flat[0]).all():
        size = named_const(k, float(table.flat[0]), elem, "size")
        divisor = lambda y, x: size
    else:
        d = k.table(table.astype(dtype_of(elem)), elem, "D")
        divisor = lambda y, x: k.load(d, [y, x])
    with k.loops(dy.type.shape, ["n", "c", "oh", "ow"]) as ivs:
        n, c, y, x = [Expr.of(v) for v in ivs]
        share = k.op("div", k.load(dy, [n, c, y, x]), divisor(y, x))
        k.store(share, z, [n, c, y * stride[0] + span[0] - pad[0],
                           x * stride[1] + span[1] - pad[1]])
    _gather_nest(k, dx, span, dilation, kern, lambda at, p, q: k.load(z, at))
