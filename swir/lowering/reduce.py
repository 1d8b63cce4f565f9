"""Reductions and normalisations: reduce_sum / reduce_mean / reduce_max /
reduce_min / reduce_prod, argmax, softmax, log_softmax, layer_norm.

Every value that survives a loop lives in memory (TVM's plain IR): a
reduction accumulates in its output (``KernelBuilder.reduce``), and an op
with several passes over a row keeps its per-row temporaries (the row maximum,
the exp-sum, mean and standard deviation, the best value of argmax) in
scratch buffers (``KernelBuilder.scratch``) indexed by the row, one loop nest
per pass. The outer loops of every nest are therefore independent.

Loop names: an axis that is kept (an output loop) is ``n c h w`` for rank-4
inputs, else ``i<axis>``; the reduction loop over axis ``a`` is ``r`` plus
that name (``rh``, ``r2``), so subscripts read as the input's axes.

Precision (docs/passes.md, "Lowering rules: reductions, normalisation, data
movement"): reduce_sum / reduce_mean / reduce_prod accumulate in the output's
element type, as the generated C does (the graph interpreter accumulates
f16 / f32 in f64); max / min / argmax are exact; softmax, log_softmax and
layer_norm compute in f64 with f64 scratch for every float type and round
once, as the graph kernels do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from swir.ir.affine import Expr
from swir.ir.core import Instruction, Value
from swir.ir.dtypes import dtype_of
from swir.ir.types import F64, I1, I64, ScalarType
from swir.lowering.kernel import KernelBuilder, broadcast_index, loop_names
from swir.lowering.rule import lowering
from swir.ops.graph import (ARGMAX, LAYER_NORM, LOG_SOFTMAX, REDUCE_MAX, REDUCE_MEAN, REDUCE_MIN,
                            REDUCE_PROD, REDUCE_SUM, SOFTMAX)
from swir.ops.util import attr, normalise_axes, normalise_axis

# -- helpers shared by the rules ------------------------------------------------------

def reduction_name(name: str) -> str:
    """The loop name of an axis iterated as a reduction axis: i2 -> r2, h -> rh."""
    return "r" + (name[1:] if name[0] == "i" and name[1:].isdigit() else name)


class Rows:
    """An input of ``shape`` split into kept axes (one output element, or one
    row of a scratch buffer, per position) and reduced axes."""

    def __init__(self, shape: tuple[int, ...], reduced: Sequence[int]) -> None:
        self.shape = shape
        self.reduced = sorted(reduced)
        self.kept = [d for d in range(len(shape)) if d not in self.reduced]
        names = loop_names(len(shape))  # an axis iterated as an output axis
        self.kept_extents = [shape[d] for d in self.kept]
        self.kept_names = [names[d] for d in self.kept]
        self.red_extents = [shape[d] for d in self.reduced]
        self.red_names = [reduction_name(names[d]) for d in self.reduced]
        self.names = names

    @property
    def row_shape(self) -> tuple[int, ...]:
        """Shape of a per-row scratch buffer (the kept axes)."""
        return tuple(self.kept_extents)

    @property
    def count(self) -> int:
        return math.prod(self.red_extents)

    def source(self, kept: Sequence[Value | Expr], red: Sequence[Value | Expr]) -> list[Expr]:
        """Subscript of the input from the kept and the reduced loop variables."""
        it_k, it_r = iter(kept), iter(red)
        return [Expr.of(next(it_r) if d in self.reduced else next(it_k))
                for d in range(len(self.shape))]

    def output(self, kept: Sequence[Value | Expr], keepdims: bool) -> list[Expr]:
        """Subscript of the output: reduced axes are 0 (keepdims) or absent."""
        if not keepdims:
            return [Expr.of(v) for v in kept]
        it = iter(kept)
        return [Expr.of(0) if d in self.reduced else Expr.of(next(it))
                for d in range(len(self.shape))]


def named(v: Value, name: str) -> Value:
    """Give ``v`` a readable name (constants are shared: only a default name
    is replaced)."""
    if v.name in (None, "c"):
        v.name = name
    return v


def wide(k: KernelBuilder, v: Value) -> Value:
    """``v`` in f64 (the working precision of the normalisations)."""
    return v if v.type == F64 else k.op("cast", v, to=F64)


def narrow(k: KernelBuilder, v: Value, elem: ScalarType) -> Value:
    return v if elem == F64 else k.op("cast", v, to=elem)


def lowest(k: KernelBuilder, elem: ScalarType) -> Value:
    """The identity of max: -inf, the integer type's minimum, false."""
    if elem.is_float:
        return named(k.const(-math.inf, elem), "ninf")
    if elem == I1:
        return named(k.const(False, elem), "false")
    return named(k.const(int(np.iinfo(dtype_of(elem)).min), elem), "lowest")


def highest(k: KernelBuilder, elem: ScalarType) -> Value:
    """The identity of min: +inf, the integer type's maximum, true."""
    if elem.is_float:
        return named(k.const(math.inf, elem), "inf")
    if elem == I1:
        return named(k.const(True, elem), "true")
    return named(k.const(int(np.iinfo(dtype_of(elem)).max), elem), "highest")


def _zero(k: KernelBuilder, elem: ScalarType, one: bool = False) -> Value:
    """The identity of sum (``one``: of prod); on i1 false / true."""
    if elem == I1:
        return named(k.const(one, elem), "true" if one else "false")
    v = k.const((1.0 if one else 0.0) if elem.is_float else (1 if one else 0), elem)
    return named(v, "one") if one else v


# -- reduce_* ----------------------------------------------------------------------------

@lowering(REDUCE_SUM, REDUCE_MEAN, REDUCE_MAX, REDUCE_MIN, REDUCE_PROD)
def lower_reduce(k: KernelBuilder, inst: Instruction, ins: list[Value],
                 outs: list[Value]) -> None:
    """out[kept] = combine over the reduced axes of x, accumulated in ``out``
    itself (init, then ``out = combine(out, x)``). i1: sum is any (or), prod
    all (and), max or, min and — what the graph kernels' i64 arithmetic
    converted back to i1 gives. max / min propagate NaN (the scalar max / min
    do) from an identity of -inf / +inf."""
    (x,), (y,) = ins, outs
    shape = inst.args[0].type.shape
    elem: ScalarType = inst.args[0].type.element
    axes = normalise_axes(attr(inst, "axes"), len(shape)) or \
        list(range(len(shape)))
    keep = attr(inst, "keepdims")
    rows = Rows(shape, axes)
    finalize = None
    if inst.isa(REDUCE_SUM, REDUCE_MEAN):
        combine, init = ("or" if elem == I1 else "add"), _zero(k, elem)
        if inst.isa(REDUCE_MEAN):
            count = named(k.const(float(rows.count), elem), "count")
            finalize = lambda v: k.op("div", v, count)
    elif inst.isa(REDUCE_PROD):
        combine, init = ("and" if elem == I1 else "mul"), _zero(k, elem, one=True)
    elif inst.isa(REDUCE_MAX):
        combine, init = ("or" if elem == I1 else "max"), lowest(k, elem)
    else:
        combine, init = ("and" if elem == I1 else "min"), highest(k, elem)
    with k.loops(rows.kept_extents, rows.kept_names) as ivs:
        k.reduce(y, rows.output(ivs, keep), init, rows.red_extents, rows.red_names,
                 lambda rivs: k.load(x, rows.source(ivs, rivs)), combine, finalize)


# -- argmax --------------------------------------------------------------------------------

@lowering(ARGMAX)
def lower_argmax(k: KernelBuilder, inst: Instruction, ins: list[Value],
                 outs: list[Value]) -> None:
    """Two nests. (1) ``max[row]`` = the row's maximum, NaN-propagating (so a
    row with a NaN has maximum NaN). (2) ``out[row]`` = the smallest ``r``
    whose element is the maximum — equal to it, or NaN (only possible when
    the maximum is NaN) — as a min-reduction of ``select(hit, r, N)``. That is
    numpy's argmax: the first maximum, or the first NaN."""
    (x,), (y,) = ins, outs
    shape = inst.args[0].type.shape
    elem: ScalarType = inst.args[0].type.element
    axis = normalise_axis(attr(inst, "axis"), len(shape))
    keep = attr(inst, "keepdims")
    rows = Rows(shape, [axis])
    n = shape[axis]
    best = k.scratch(rows.row_shape, elem, "max")
    with k.loops(rows.kept_extents, rows.kept_names) as ivs:
        k.reduce(best, ivs, lowest(k, elem), [n], rows.red_names,
                   lambda rivs: k.load(x, rows.source(ivs, rivs)),
                   "or" if elem == I1 else "max", output=False)
    none = named(k.const(n, I64), "size")
    with k.loops(rows.kept_extents, rows.kept_names) as ivs:
        m = named(k.load(best, ivs), "best")

        def term(rivs: list[Value]) -> Value:
            v = k.load(x, rows.source(ivs, rivs))
            hit = k.op("eq", v, m)
            if elem.is_float:
                hit = k.op("or", hit, k.op("ne", v, v))
            pos = k.op("cast", rivs[0], to=I64)
            return k.op("select", hit, pos, none)

        k.reduce(y, rows.output(ivs, keep), none, [n], rows.red_names, term, "min")


# -- softmax, log_softmax ---------------------------------------------------------------

@lowering(SOFTMAX, LOG_SOFTMAX)
def lower_softmax(k: KernelBuilder, inst: Instruction, ins: list[Value],
                  outs: list[Value]) -> None:
    """Three nests over the rows (all axes but ``axis``), in f64 like the graph
    kernel: (1) ``max[row]`` = maximum of the row; (2) ``sum[row]`` = sum of
    ``exp(x - max)`` (log_softmax: then its log); (3) every element:
    ``exp(x - max) / sum`` (log_softmax: ``(x - max) - sum``), rounded once to
    the element type. exp is recomputed in (3) rather than kept in a
    full-size f64 buffer."""
    (x,), (y,) = ins, outs
    shape = inst.args[0].type.shape
    elem: ScalarType = inst.args[0].type.element
    axis = normalise_axis(attr(inst, "axis"), len(shape))
    log = inst.isa(LOG_SOFTMAX)
    rows = Rows(shape, [axis])
    mx = k.scratch(rows.row_shape, F64, "max")
    sm = k.scratch(rows.row_shape, F64, "sum")

    with k.loops(rows.kept_extents, rows.kept_names) as ivs:
        k.reduce(mx, ivs, named(k.const(-math.inf, F64), "ninf"), rows.red_extents, rows.red_names,
                   lambda rivs: wide(k, k.load(x, rows.source(ivs, rivs))), "max", output=False)
    with k.loops(rows.kept_extents, rows.kept_names) as ivs:
        m = named(k.load(mx, ivs), "m")
        k.reduce(sm, ivs, k.const(0.0, F64), rows.red_extents, rows.red_names,
                   lambda rivs: k.op("exp", k.op("sub", wide(k, k.load(
                       x, rows.source(ivs, rivs))), m)),
                   "add", (lambda s: k.op("log", s)) if log else None, output=False)

    # Every axis in order (stores are row-major), split after the last kept
    # axis: the row's max and sum are loaded there, once per row when the
    # axis is innermost.
    split = rows.kept[-1] + 1 if rows.kept else 0
    with k.loops(shape[:split], rows.names[:split]) as ovs:
        row = [ovs[d] for d in rows.kept]
        m, s = named(k.load(mx, row), "m"), named(k.load(sm, row), "logsum" if log else "s")
        with k.loops(shape[split:], rows.names[split:]) as ivs:
            idx = [Expr.of(v) for v in list(ovs) + list(ivs)]
            d = k.op("sub", wide(k, k.load(x, idx)), m)
            v = k.op("sub", d, s) if log else k.op("div", k.op("exp", d), s)
            k.finish(narrow(k, v, elem), y, idx)


# -- layer_norm ----------------------------------------------------------------------------

@lowering(LAYER_NORM, inputs=("X", "Scale", "Bias"))
def lower_layer_norm(k: KernelBuilder, inst: Instruction, ins: list[Value],
                     outs: list[Value]) -> None:
    """Over the axes ``[axis, r)``, in f64 like the graph kernel: (1)
    ``mean[row]`` = sum / count; (2) ``std[row]`` = sqrt(sum((x - mean)^2) /
    count + epsilon); (3) ``y = (x - mean) / std * scale + bias``, scale and
    bias broadcast against the normalised axes; rounded once."""
    x, scale = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    (y,) = outs
    shape = inst.args[0].type.shape
    elem: ScalarType = inst.args[0].type.element
    axis = normalise_axis(attr(inst, "axis"), len(shape))
    eps = attr(inst, "epsilon")
    rows = Rows(shape, range(axis, len(shape)))
    norm = shape[axis:]
    count = named(k.const(float(rows.count), F64), "count")
    mean = k.scratch(rows.row_shape, F64, "mean")
    std = k.scratch(rows.row_shape, F64, "std")

    with k.loops(rows.kept_extents, rows.kept_names) as ivs:
        k.reduce(mean, ivs, k.const(0.0, F64), rows.red_extents, rows.red_names,
                   lambda rivs: wide(k, k.load(x, rows.source(ivs, rivs))), "add",
                   lambda s: k.op("div", s, count), output=False)
    with k.loops(rows.kept_extents, rows.kept_names) as ivs:
        mu = named(k.load(mean, ivs), "mu")

        def square(rivs: list[Value]) -> Value:
            c = k.op("sub", wide(k, k.load(x, rows.source(ivs, rivs))), mu)
            return k.op("mul", c, c)

        e = named(k.const(eps, F64), "eps")
        k.reduce(std, ivs, k.const(0.0, F64), rows.red_extents, rows.red_names,
                   square, "add",
                   lambda s: k.op("sqrt", k.op("add", k.op("div", s, count), e)), output=False)

    with k.loops(rows.kept_extents, rows.kept_names) as ivs:
        mu, sd = named(k.load(mean, ivs), "mu"), named(k.load(std, ivs), "sd")
        with k.loops(list(norm), rows.names[axis:]) as nvs:
            idx = [Expr.of(v) for v in list(ivs) + list(nvs)]
            tail = [Expr.of(v) for v in nvs]
            v = k.op("div", k.op("sub", wide(k, k.load(x, idx)), mu), sd)
            g = k.load(scale, broadcast_index(inst.args[1].type.shape, tail, norm))
            v = k.op("mul", v, wide(k, g))
            if bias is not None:
                b = k.load(bias, broadcast_index(inst.args[2].type.shape, tail, norm))
                v = k.op("add", v, wide(k, b))
            k.finish(narrow(k, v, elem), y, idx)
