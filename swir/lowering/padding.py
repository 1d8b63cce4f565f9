"""The graph ``pad`` op, and :func:`emit_pad`, the padding every windowed op
(conv2d, conv_transpose2d, the pools) uses.

Padding is exact and needs no guards: a padded operand is materialised by a
*pad nest* into a buffer (the op's output, or a scratch buffer a convolution
or pool then reads), and every nest is rectangular with in-bounds affine
subscripts, so the LDM planner and DMA insertion see pure affine regions.

- ``constant``: a fill nest over the whole padded buffer, then an interior
  copy nest ``dst[i + before] = src[i]``. (When the pad op's output goes
  through a fused epilogue the fill covers only the border, as disjoint
  boxes, so that each element's final value is finished exactly once.)
- ``edge``: one nest, ``dst[i] = src[max(0, min(i - before, n - 1))]``.
- ``reflect``: one nest with the reflected subscript of ``j = i - before``,
  ``min(|j|, 2(n - 1) - j)`` with ``|j| = max(j, -j)``; exact because ONNX
  requires each reflect pad to be smaller than its axis (one reflection).
  (Written ``min(max(j, -j, 0), 2(n - 1) - j, n - 1)``: see
  :func:`reflect_index`.)

A clamp or reflection is written only on the sides that are padded, so an
unpadded axis reads ``src[i]``.
"""

from __future__ import annotations

from collections.abc import Sequence

from swir.ir.affine import Expr
from swir.ir.core import Instruction, Value
from swir.ir.dtypes import dtype_of, to_dtype  # (the graph kernel's conversion)
from swir.ir.types import ScalarType
from swir.lowering.kernel import KernelBuilder, loop_names
from swir.lowering.rule import lowering
from swir.ops.graph import PAD
from swir.ops.util import attr


def named_const(k: KernelBuilder, value: float | bool, elem: ScalarType,
                name: str) -> Value:
    """``k.const`` under a readable name: the builder calls non-zero constants
    ``%c``, which would clash with (and rename) a channel loop ``%c``."""
    v = k.const(value, elem)
    if v.name == "c":
        v.name = name
    return v


def fill_value(k: KernelBuilder, value: float | bool | Value, elem: ScalarType) -> Value:
    """``value`` as a constant of ``elem``, converted as the graph ``pad``
    kernel converts its ``value`` attribute (as by ``cast``, saturating)."""
    if isinstance(value, Value):
        return value
    v = to_dtype(value, dtype_of(elem)).item()
    if elem.is_float:
        return named_const(k, float(v), elem, "fill")
    return named_const(k, v if isinstance(v, bool) else int(v), elem, "fill")


def copy_box(k: KernelBuilder, src: Value, src_lo: Sequence[int], dst: Value,
             dst_lo: Sequence[int], extents: Sequence[int],
             dst_step: Sequence[int] | None = None, finish: bool = False,
             names: Sequence[str] | None = None) -> None:
    """One guard-free nest ``dst[dst_lo + step*i] = src[src_lo + i]`` for ``i``
    in the box ``extents`` (a strided placement when ``dst_step`` is given:
    conv_transpose2d's zero-inserted input)."""
    if any(e <= 0 for e in extents):
        return
    step = list(dst_step) if dst_step is not None else [1] * len(extents)
    with k.loops(extents, names or loop_names(len(extents))) as ivs:
        v = k.load(src, [Expr.of(i) + lo for i, lo in zip(ivs, src_lo)])
        idx = [Expr.of(i) * s + lo for i, s, lo in zip(ivs, step, dst_lo)]
        (k.finish if finish else k.store)(v, dst, idx)


def fill_box(k: KernelBuilder, value: Value, dst: Value, lo: Sequence[int],
             extents: Sequence[int], finish: bool = False) -> None:
    """One nest ``dst[lo + i] = value`` over the box ``extents``."""
    if any(e <= 0 for e in extents):
        return
    with k.loops(extents, loop_names(len(extents))) as ivs:
        idx = [Expr.of(i) + o for i, o in zip(ivs, lo)]
        (k.finish if finish else k.store)(value, dst, idx)


def border_boxes(shape: Sequence[int], before: Sequence[int], after: Sequence[int]
                 ) -> list[tuple[list[int], list[int]]]:
    """The padded box minus the interior as disjoint boxes (lo, extents): for
    axis a, the slabs before and after the interior along a, interior along
    the axes before a and whole along the axes after it."""
    full = [n + b + e for n, b, e in zip(shape, before, after)]
    boxes = []
    for a in range(len(shape)):
        for lo_a, ext_a in ((0, before[a]), (before[a] + shape[a], after[a])):
            if ext_a == 0:
                continue
            lo = [before[b] for b in range(a)] + [lo_a] + [0] * (len(shape) - a - 1)
            ext = list(shape[:a]) + [ext_a] + full[a + 1:]
            boxes.append((lo, ext))
    return boxes


def clamp_index(i: Expr, n: int, before: int, after: int) -> Expr:
    """``edge`` padding: the source index of padded index ``i``."""
    j = i - before
    if before:
        j = Expr.minmax("max", [j, 0])
    if after:
        j = Expr.minmax("min", [j, n - 1])
    return j


def reflect_index(i: Expr, n: int, before: int, after: int) -> Expr:
    """``reflect`` padding (numpy: the edge is not repeated): the source index
    of padded index ``i``, for pads smaller than ``n``: with ``j = i - before``,
    ``|j| = max(j, -j)`` reflects the start and ``2(n - 1) - j`` the end. The
    bounds 0 and n - 1 never change the value (|j| >= 0, and the reflection
    lies in the axis); they let the verifier's interval analysis, which does
    not see that j and -j are correlated, prove the subscript in bounds."""
    j = i - before
    r = Expr.minmax("max", [j, -j, 0]) if before else j
    if after:
        # 2(n-1) - j >= |j| for j < 0, because before <= n - 1.
        r = Expr.minmax("min", [r, 2 * (n - 1) - j, n - 1])
    return r


def emit_pad(k: KernelBuilder, src: Value, src_shape: Sequence[int], dst: Value,
             pads_before: Sequence[int], pads_after: Sequence[int], mode: str,
             value: float | bool | Value = 0.0, finish: bool = False) -> None:
    """Write ``src`` (shape ``src_shape``) padded into ``dst``, whose shape is
    ``src_shape + pads_before + pads_after``: guard-free nests (module
    docstring). ``value`` is the ``constant`` fill (a number converted to the
    element type, or a scalar value). With ``finish`` the final value of each
    ``dst`` element goes through :meth:`KernelBuilder.finish` exactly once
    (``dst`` is the op's output); otherwise plain stores (a scratch buffer)."""
    shape = list(src_shape) or [1]
    before = list(pads_before) or [0] * len(shape)
    after = list(pads_after) or [0] * len(shape)
    full = [n + b + e for n, b, e in zip(shape, before, after)]
    if mode == "constant" or not any(before) and not any(after):
        if any(before) or any(after):
            fill = fill_value(k, value, dst.type.element)
            if finish and k.epilogue is not None:
                for lo, ext in border_boxes(shape, before, after):
                    fill_box(k, fill, dst, lo, ext, finish=True)
            else:
                fill_box(k, fill, dst, [0] * len(full), full)
        copy_box(k, src, [0] * len(shape), dst, before, shape, finish=finish)
        return
    if mode not in ("edge", "reflect"):
        raise ValueError(f"pad mode {mode!r}")
    index = clamp_index if mode == "edge" else reflect_index
    with k.loops(full, loop_names(len(full))) as ivs:
        idx = [Expr.of(i) for i in ivs]
        v = k.load(src, [index(i, n, b, e) for i, n, b, e in zip(idx, shape, before, after)])
        (k.finish if finish else k.store)(v, dst, idx)


@lowering(PAD)
def lower_pad(k: KernelBuilder, inst: Instruction, ins: list[Value],
              outs: list[Value]) -> None:
    """ONNX Pad (numpy modes constant / reflect / edge), see :func:`emit_pad`."""
    shape = inst.args[0].type.shape
    r = len(shape)
    pads = [int(p) for p in inst.attrs["pads"]]
    emit_pad(k, ins[0], shape, outs[0], pads[:r], pads[r:], attr(inst, "mode"),
             inst.opdef.attr_value(inst.attrs, "value"),  # as written: an int stays exact
             finish=True)
