"""numpy kernels of the data-movement and reduction tensor ops of the graph
stage and of the element-wise ops with attributes (cast, clip, leaky_relu) and
select (docs/ir.md, "Graph-stage op set"). The other element-wise ops carry
their numpy reference in their definitions (swir/ops/references.py).

Conventions (see :mod:`swir.kernels`): ``attrs`` has the op definition's
defaults filled in (a default computed from the operands is the kernel's); the shapes were
checked by the op's rule, and :func:`swir.kernels.evaluate` casts each
result to its declared element type.

Element-wise kernels accept 0-d arrays (and numpy scalars): the loop-stage
interpreter runs them on scalars. They never promote: operands share one element
type (the op rules check it) and results keep it.

Numerics (those of the other element-wise ops: swir/ops/references.py):

- Sums, means and products of f16 / f32 accumulate in f64; ``evaluate`` rounds to
  the result type.
- NaN wins: ``max``, ``min``, ``reduce_max``, ``reduce_min`` propagate it and
  ``argmax`` returns the first NaN's index (numpy).
- Float attributes applied to an integer tensor (``clip`` bounds, ``pad`` value) are
  converted as by ``cast`` (truncation toward zero), saturating to the type's range.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from swir.kernels.base import DataError, kernel
from swir.ir.dtypes import dtype_of, to_dtype
from swir.ir.types import ScalarType
from swir.ops.elementwise import CAST, SELECT
from swir.ops.graph import (ARGMAX, CLIP, CONCAT, EXPAND, FLATTEN, GATHER, LEAKY_RELU, PAD,
                            REDUCE_MAX, REDUCE_MEAN, REDUCE_MIN, REDUCE_PROD, REDUCE_SUM,
                            RESHAPE, RESIZE_NEAREST, SLICE, SPLIT, SQUEEZE, TRANSPOSE, UNSQUEEZE,
                            slice_bounds)

_BOOL = np.dtype(np.bool_)


# -- helpers ------------------------------------------------------------------------

def _arr(x: Any) -> np.ndarray:
    return np.asarray(x)


def _is_float(a: np.ndarray) -> bool:
    return a.dtype.kind == "f"


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _axes(axes: Any, rank: int) -> tuple[int, ...]:
    return tuple(_axis(a, rank) for a in axes)







@kernel(SELECT)
def _select(attrs, result_types, c, x, y):
    return [np.where(_arr(c), _arr(x), _arr(y))]


@kernel(CAST)
def _cast(attrs, result_types, x):
    to = attrs["to"]
    dt = dtype_of(to if isinstance(to, ScalarType) else result_types[0])
    x = _arr(x)
    if dt == _BOOL:
        return [x != 0]  # C: nonzero (and NaN) is true
    if dt.kind in "iu" and _is_float(x):
        # C conversion truncates toward zero; out-of-range values and NaN are
        # undefined in C (numpy gives an unspecified value here).
        return [np.trunc(x).astype(dt)]
    return [x.astype(dt)]


# -- composites that are element-wise ---------------------------------------------------

@kernel(CLIP)
def _clip(attrs, result_types, x):
    x = _arr(x)
    lo, hi = attrs.get("min"), attrs.get("max")
    y = x
    if lo is not None:
        y = np.maximum(y, to_dtype(lo, x.dtype))
    if hi is not None:
        y = np.minimum(y, to_dtype(hi, x.dtype))
    return [y.copy() if y is x else y]


@kernel(LEAKY_RELU)
def _leaky_relu(attrs, result_types, x):
    x = _arr(x)
    alpha = x.dtype.type(attrs["alpha"])
    return [np.where(x >= 0, x, alpha * x)]


# -- reductions ---------------------------------------------------------------------

def _reduce_args(attrs, x: np.ndarray) -> tuple[tuple[int, ...], bool]:
    axes = _axes(attrs["axes"], x.ndim) or tuple(range(x.ndim))
    return axes, bool(attrs["keepdims"])


def _acc(x: np.ndarray) -> np.ndarray:
    """Operand in the accumulation type: f16/f32 in f64, i1 as i64, else its own."""
    if x.dtype in (np.float16, np.float32):
        return x.astype(np.float64)
    if x.dtype == _BOOL:
        return x.astype(np.int64)
    return x


@kernel(REDUCE_SUM)
def _reduce_sum(attrs, result_types, x):
    x = _arr(x)
    axes, keep = _reduce_args(attrs, x)
    a = _acc(x)
    return [np.sum(a, axis=axes, keepdims=keep, dtype=a.dtype)]


@kernel(REDUCE_PROD)
def _reduce_prod(attrs, result_types, x):
    x = _arr(x)
    axes, keep = _reduce_args(attrs, x)
    a = _acc(x)
    return [np.prod(a, axis=axes, keepdims=keep, dtype=a.dtype)]


@kernel(REDUCE_MEAN)
def _reduce_mean(attrs, result_types, x):
    x = _arr(x)
    axes, keep = _reduce_args(attrs, x)
    a = x.astype(np.float64) if x.dtype != np.float64 else x
    count = math.prod(x.shape[i] for i in axes)
    return [np.sum(a, axis=axes, keepdims=keep) / count]


@kernel(REDUCE_MAX)
def _reduce_max(attrs, result_types, x):
    x = _arr(x)
    axes, keep = _reduce_args(attrs, x)
    return [np.max(x, axis=axes, keepdims=keep)]  # NaN-propagating


@kernel(REDUCE_MIN)
def _reduce_min(attrs, result_types, x):
    x = _arr(x)
    axes, keep = _reduce_args(attrs, x)
    return [np.min(x, axis=axes, keepdims=keep)]


@kernel(ARGMAX)
def _argmax(attrs, result_types, x):
    x = _arr(x)
    axis = _axis(attrs["axis"], x.ndim)
    keep = bool(attrs["keepdims"])
    # np.argmax returns the first maximum (select_last_index = 0).
    return [np.argmax(x, axis=axis, keepdims=keep).astype(np.int64)]


# -- data movement ---------------------------------------------------------------------

@kernel(TRANSPOSE)
def _transpose(attrs, result_types, x):
    x = _arr(x)
    perm = attrs["perm"]
    return [np.transpose(x, tuple(perm))]


@kernel(RESHAPE)
def _reshape(attrs, result_types, x):
    x = _arr(x)
    shape = [x.shape[i] if d == 0 else d for i, d in enumerate(attrs["shape"])]
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        shape[shape.index(-1)] = x.size // known
    return [x.reshape(shape)]


@kernel(FLATTEN)
def _flatten(attrs, result_types, x):
    x = _arr(x)
    axis = _axis(attrs["axis"], x.ndim)
    return [x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))]


@kernel(CONCAT)
def _concat(attrs, result_types, *xs):
    xs = [_arr(x) for x in xs]
    return [np.concatenate(xs, axis=_axis(attrs["axis"], xs[0].ndim))]


@kernel(SPLIT)
def _split(attrs, result_types, x):
    x = _arr(x)
    axis = _axis(attrs["axis"], x.ndim)
    bounds = np.cumsum(attrs["sizes"])[:-1]
    return list(np.split(x, bounds, axis=axis))


@kernel(SLICE)
def _slice(attrs, result_types, x):
    x = _arr(x)
    starts, ends = attrs["starts"], attrs["ends"]
    axes, steps = attrs["axes"], attrs["steps"]
    index = [slice(None)] * x.ndim
    for a, s, e, st in zip(axes, starts, ends, steps):
        a = _axis(a, x.ndim)
        index[a] = slice_bounds(x.shape[a], s, e, st)
    return [x[tuple(index)]]


@kernel(PAD)
def _pad(attrs, result_types, x):
    x = _arr(x)
    pads = attrs["pads"]
    mode = attrs["mode"]
    r = x.ndim
    if r == 0:
        return [x.copy()]
    width = [(pads[i], pads[i + r]) for i in range(r)]
    if mode == "constant":
        value = to_dtype(attrs["value"], x.dtype)
        return [np.pad(x, width, mode="constant", constant_values=value)]
    if mode in ("reflect", "edge"):
        return [np.pad(x, width, mode=mode)]
    raise ValueError(f"pad mode {mode!r}")


@kernel(GATHER)
def _gather(attrs, result_types, data, indices):
    data, indices = _arr(data), _arr(indices)
    axis = _axis(attrs["axis"], data.ndim)
    n = data.shape[axis]
    bad = np.argwhere((indices < -n) | (indices >= n))
    if len(bad):
        at = tuple(int(i) for i in bad[0])
        raise DataError(f"index {int(indices[at])} (indices{list(at)}) is outside "
                        f"[-{n}, {n}), the size of axis {axis}")
    # np.take counts negative indices from the end.
    return [np.take(data, indices.astype(np.int64), axis=axis)]


@kernel(RESIZE_NEAREST)
def _resize_nearest(attrs, result_types, x):
    x = _arr(x)
    scales = attrs["scales"]
    index = []
    for a, (d, s) in enumerate(zip(x.shape, scales)):
        n = math.floor(d * s)
        src = np.minimum(np.floor(np.arange(n) / s).astype(np.int64), d - 1)
        shape = [1] * x.ndim
        shape[a] = n
        index.append(src.reshape(shape))
    return [x[tuple(index)] if x.ndim else x.copy()]


@kernel(EXPAND)
def _expand(attrs, result_types, x):
    x = _arr(x)
    shape = np.broadcast_shapes(x.shape, tuple(attrs["shape"]))
    return [np.broadcast_to(x, shape).copy()]


@kernel(SQUEEZE)
def _squeeze(attrs, result_types, x):
    x = _arr(x)
    axes = _axes(attrs["axes"], x.ndim)
    if not axes:
        axes = tuple(a for a, d in enumerate(x.shape) if d == 1)
    return [np.squeeze(x, axis=axes)]


@kernel(UNSQUEEZE)
def _unsqueeze(attrs, result_types, x):
    x = _arr(x)
    axes = attrs["axes"]
    return [np.expand_dims(x, _axes(axes, x.ndim + len(axes)))]
