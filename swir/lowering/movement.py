"""Data movement: transpose, reshape, flatten, squeeze, unsqueeze, concat,
split, slice, gather, resize_nearest, expand.

Each is a copy kernel: one loop nest per output (split) or per input (concat),
one load and one store (through ``KernelBuilder.finish``) per output element,
affine subscripts that stay in bounds for every iteration. Only gather reads
a data-dependent subscript (``dyn_index`` of the loaded index), and
resize_nearest one taken from a compile-time table when no affine form
provably reproduces the graph kernel's f64 index arithmetic.

Loop names: ``n c h w`` for rank-4 iteration spaces, else ``i<axis>``;
transpose names its output loops after the input axes they walk, gather names
the loops over the index tensor ``j0, j1, ...``.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from swir.ir.affine import Expr
from swir.ir.core import Instruction, Value
from swir.ir.types import I32
from swir.lowering.kernel import KernelBuilder, broadcast_index, loop_names
from swir.lowering.rule import lowering
from swir.ops.graph import (CONCAT, EXPAND, FLATTEN, GATHER, RESHAPE, RESIZE_NEAREST, SLICE,
                            SPLIT, SQUEEZE, TRANSPOSE, UNSQUEEZE, slice_bounds)
from swir.ops.util import attr, normalise_axes, normalise_axis


def _shape(v: Value) -> tuple[int, ...]:
    return tuple(v.type.shape)


def _exprs(vs: Sequence[Value | Expr | int]) -> list[Expr]:
    return [Expr.of(v) for v in vs]


# -- transpose ---------------------------------------------------------------------------

@lowering(TRANSPOSE)
def lower_transpose(k: KernelBuilder, inst: Instruction, ins: list[Value],
                    outs: list[Value]) -> None:
    """Y[j0, ..] = X[..] with X's axis perm[d] read by output loop d; output
    loop d is named after the input axis it walks (NCHW -> NHWC reads
    ``Y[%n, %h, %w, %c] = X[%n, %c, %h, %w]``)."""
    (x,), (y,) = ins, outs
    r = len(_shape(inst.args[0]))
    perm = attr(inst, "perm")
    names = loop_names(r)
    with k.loops(_shape(inst.results[0]), [names[p] for p in perm]) as ivs:
        src: list[Expr] = [Expr.of(0)] * r
        for d, p in enumerate(perm):
            src[p] = Expr.of(ivs[d])
        k.finish(k.load(x, src), y, _exprs(ivs))


# -- reshape and its special cases -------------------------------------------------------

def reshape_groups(src: tuple[int, ...], dst: tuple[int, ...]
                   ) -> list[tuple[list[int], list[int]]]:
    """Pair the non-unit axes of two shapes of equal size into minimal groups
    of equal size (row-major order is preserved within and across groups):
    [2, 12, 5] and [2, 3, 4, 5] give ([0], [0]), ([1], [1, 2]), ([2], [3])."""
    s = [a for a, d in enumerate(src) if d != 1]
    t = [a for a, d in enumerate(dst) if d != 1]
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(s):
        gs, gt = [s[i]], [t[j]]
        ps, pt = src[s[i]], dst[t[j]]
        i, j = i + 1, j + 1
        while ps != pt:
            if ps < pt:
                gs.append(s[i])
                ps *= src[s[i]]
                i += 1
            else:
                gt.append(t[j])
                pt *= dst[t[j]]
                j += 1
        groups.append((gs, gt))
    assert j == len(t), "reshape of shapes with different sizes"
    return groups


def copy_reshaped(k: KernelBuilder, x: Value, y: Value, src: tuple[int, ...],
                  dst: tuple[int, ...]) -> None:
    """Row-major reshape as a copy. The loops walk the non-unit axes of the
    side with more of them (the source on a tie): then each group of axes
    that merges into one is a plain affine combination (``4*%i1 + %i2``) and
    only a group that is re-cut differently on both sides needs floordiv /
    mod of its linearised index. Unit axes are subscripted 0."""
    on_src = sum(d != 1 for d in src) >= sum(d != 1 for d in dst)
    walk, other = (src, dst) if on_src else (dst, src)
    axes = [a for a, d in enumerate(walk) if d != 1]
    names = loop_names(len(walk))
    with k.loops([walk[a] for a in axes], [names[a] for a in axes]) as ivs:
        iv = dict(zip(axes, ivs))
        walk_idx = [Expr.of(iv[a]) if a in iv else Expr.of(0) for a in range(len(walk))]
        other_idx = [Expr.of(0)] * len(other)
        for gw, go in reshape_groups(walk, other):
            linear = Expr.of(0)
            for a in gw:  # outermost first: 4*%i1 + %i2
                linear = linear * walk[a] + Expr.of(iv[a])
            stride = 1
            for pos, a in reversed(list(enumerate(go))):
                e = linear.floordiv(stride) if stride > 1 else linear
                other_idx[a] = e if pos == 0 else e.mod(other[a])
                stride *= other[a]
        src_idx, dst_idx = (walk_idx, other_idx) if on_src else (other_idx, walk_idx)
        k.finish(k.load(x, src_idx), y, dst_idx)


@lowering(RESHAPE, FLATTEN, SQUEEZE, UNSQUEEZE)
def lower_reshape(k: KernelBuilder, inst: Instruction, ins: list[Value],
                  outs: list[Value]) -> None:
    """All four are row-major reshapes to the result type (a copy here; a
    later pass may alias the buffers instead)."""
    copy_reshaped(k, ins[0], outs[0], _shape(inst.args[0]), _shape(inst.results[0]))


# -- concat, split, slice ----------------------------------------------------------------

@lowering(CONCAT)
def lower_concat(k: KernelBuilder, inst: Instruction, ins: list[Value],
                 outs: list[Value]) -> None:
    """One nest per input, writing its block of the output at its offset along
    ``axis``."""
    (y,) = outs
    r = len(_shape(inst.results[0]))
    axis = normalise_axis(attr(inst, "axis"), r)
    names = loop_names(r)
    offset = 0
    for x, arg in zip(ins, inst.args):
        shape = _shape(arg)
        with k.loops(shape, names) as ivs:
            dst = _exprs(ivs)
            dst[axis] = dst[axis] + offset
            k.finish(k.load(x, _exprs(ivs)), y, dst)
        offset += shape[axis]


@lowering(SPLIT)
def lower_split(k: KernelBuilder, inst: Instruction, ins: list[Value],
                outs: list[Value]) -> None:
    """One nest per result, reading its block of the input at its offset."""
    (x,) = ins
    r = len(_shape(inst.args[0]))
    axis = normalise_axis(attr(inst, "axis"), r)
    names = loop_names(r)
    offset = 0
    for y, res in zip(outs, inst.results):
        shape = _shape(res)
        with k.loops(shape, names) as ivs:
            src = _exprs(ivs)
            src[axis] = src[axis] + offset
            k.finish(k.load(x, src), y, _exprs(ivs))
        offset += shape[axis]


@lowering(SLICE)
def lower_slice(k: KernelBuilder, inst: Instruction, ins: list[Value],
                outs: list[Value]) -> None:
    """Y[.., i, ..] = X[.., start + step*i, ..] per sliced axis, with ONNX's
    clamping done at compile time (``slice_bounds``, shared with the shape
    rule and the graph kernel); negative steps walk backwards from the
    clamped start."""
    (x,), (y,) = ins, outs
    shape = _shape(inst.args[0])
    starts, ends = attr(inst, "starts"), attr(inst, "ends")
    axes = normalise_axes(attr(inst, "axes"), len(shape))
    steps = attr(inst, "steps")
    first = {a: (slice_bounds(shape[a], s, e, st).start, st)
             for a, s, e, st in zip(axes, starts, ends, steps)}
    out = _shape(inst.results[0])
    with k.loops(out, loop_names(len(out))) as ivs:
        src = [Expr.of(first[a][0]) + Expr.of(iv) * first[a][1] if a in first else Expr.of(iv)
               for a, iv in enumerate(ivs)]
        k.finish(k.load(x, src), y, _exprs(ivs))


# -- gather ------------------------------------------------------------------------------

@lowering(GATHER, inputs=("Data", "Indices"))
def lower_gather(k: KernelBuilder, inst: Instruction, ins: list[Value],
                 outs: list[Value]) -> None:
    """Y[i.., j.., i..] = Data[i.., idx, i..] with ``idx = dyn_index
    Indices[j..]`` (negative indices count from the end; the bound is the size
    of the gathered axis). The index is loaded and converted once, between the
    loops over the indices and the loops over the trailing data axes; with no
    loop around it (a 0-d index on axis 0: ``qkv[1]``) it is loaded inside
    the trailing loops, which are the ones spread over the CPEs (code beside
    them would run outside every CPE)."""
    data, indices = ins
    (y,) = outs
    dshape, ishape = _shape(inst.args[0]), _shape(inst.args[1])
    r = len(dshape)
    axis = normalise_axis(attr(inst, "axis"), r)
    names = loop_names(r)
    outside = axis == 0 and not ishape
    with k.loops(dshape[:axis], names[:axis]) as lead, \
            k.loops(ishape, [f"j{t}" for t in range(len(ishape))]) as js:
        idx = None if outside else _gather_index(k, indices, js, dshape[axis])
        with k.loops(dshape[axis + 1:], names[axis + 1:]) as trail:
            if idx is None:
                idx = _gather_index(k, indices, js, dshape[axis])
            src = _exprs(lead) + [Expr.of(idx)] + _exprs(trail)
            k.finish(k.load(data, src), y, _exprs(list(lead) + list(js) + list(trail)))


def _gather_index(k: KernelBuilder, indices: Value, js: list[Value], bound: int) -> Value:
    v = k.load(indices, _exprs(js))
    return k.b.create("dyn_index", v, attrs={"bound": bound}, names=["idx"])


# -- resize_nearest --------------------------------------------------------------------

def resize_source(d: int, scale: float, n: int) -> np.ndarray:
    """The graph kernel's source index of each of the ``n`` outputs of an axis
    of size ``d`` (f64 arithmetic, as swir.kernels.tensor._resize_nearest)."""
    return np.minimum(np.floor(np.arange(n) / scale).astype(np.int64), d - 1)


def resize_affine(d: int, scale: float, n: int, o: Expr) -> Expr | None:
    """An affine source index for output index ``o`` that equals
    :func:`resize_source` for every ``o`` in [0, n), or None. Candidate:
    ``floor(o / scale)`` with scale replaced by the nearest fraction p/q with
    q <= 1024, i.e. ``(q*o) floordiv p``, with ``min(.., d - 1)`` only if some
    output needs the clamp; accepted only when it matches the f64 values for
    every output index (checked here, at compile time)."""
    want = resize_source(d, scale, n)
    frac = Fraction(scale).limit_denominator(1024)
    p, q = frac.numerator, frac.denominator
    got = (q * np.arange(n)) // p
    if np.array_equal(got, want):
        return (o * q).floordiv(p)
    if np.array_equal(np.minimum(got, d - 1), want):
        return Expr.minmax("min", [(o * q).floordiv(p), d - 1])
    return None


@lowering(RESIZE_NEAREST)
def lower_resize_nearest(k: KernelBuilder, inst: Instruction, ins: list[Value],
                         outs: list[Value]) -> None:
    """Y[o..] = X[src_0(o_0), ..]: per axis an affine source index (``2*%h``,
    ``%h floordiv 2``, ``(2*%h) floordiv 3``) when :func:`resize_affine` finds
    one, else a compile-time table of the graph kernel's indices read with
    ``dyn_index`` inside that axis's loop."""
    (x,), (y,) = ins, outs
    shape, out = _shape(inst.args[0]), _shape(inst.results[0])
    scales = [float(s) for s in inst.attrs["scales"]]
    names = loop_names(len(out))
    if not out:  # 0-d: a copy
        k.finish(k.load(x, []), y, [])
        return
    src: list[Expr] = []

    def nest(a: int, ivs: list[Value]) -> None:
        if a == len(out):
            k.finish(k.load(x, src), y, _exprs(ivs))
            return
        with k.loops([out[a]], [names[a]]) as (iv,):
            e = resize_affine(shape[a], scales[a], out[a], Expr.of(iv))
            if e is None:
                table = k.table(resize_source(shape[a], scales[a], out[a]).astype(np.int32),
                                I32, f"src_{names[a]}")
                v = k.load(table, [iv])
                e = Expr.of(k.b.create("dyn_index", v, attrs={"bound": shape[a]},
                                       names=[f"{names[a]}_src"]))
            src.append(e)
            nest(a + 1, ivs + [iv])
            src.pop()

    nest(0, [])


# -- expand ------------------------------------------------------------------------------

@lowering(EXPAND)
def lower_expand(k: KernelBuilder, inst: Instruction, ins: list[Value],
                 outs: list[Value]) -> None:
    """numpy broadcasting: a unit input axis against a larger output one
    reads element 0, missing leading axes are not read."""
    (x,), (y,) = ins, outs
    out = _shape(inst.results[0])
    with k.loops(out, loop_names(len(out))) as ivs:
        idx = _exprs(ivs)
        k.finish(k.load(x, broadcast_index(_shape(inst.args[0]), idx, out)), y, idx)
