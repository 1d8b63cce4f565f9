"""max_pool2d, avg_pool2d and global_avg_pool2d: loops n, c, oh, ow around the
window loops kh, kw, reducing through the output buffer.

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
from swir.lowering.padding import named_const
from swir.lowering.rule import lowering
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
                 finalize: Callable[[list[Expr]], Callable[[Value], Value]] | None = None
                 ) -> None:
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
                 combine=combine, finalize=finalize(idx) if finalize else None)


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
