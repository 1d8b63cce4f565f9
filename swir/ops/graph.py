"""Graph-stage tensor ops: shape inference and verification.

Semantics follow ONNX (and numpy where ONNX defers to it); images are NCHW and
convolution weights OIHW. The element-wise primitives (add, relu, exp, cast, ...)
live in :mod:`swir.ops.elementwise`; the ops here are the rest of the graph op
set. Following DLVM, the composites (softmax, log_softmax, layer_norm, gelu,
batch_norm) are ops so the importer and the fusion pass see them whole; each is
a composition of primitives, written out in docs/ir.md (Graph-stage op set).

``category`` is TVM's fusion pattern kind (002_33a2ce4792eea380.txt, Sec. 3):
``elementwise`` < ``broadcast`` < ``injective`` < ``reduction`` < ``complex``
(complex-out-fusable: element-wise consumers fuse into it) < ``opaque``.
Pooling is classed as a (windowed) reduction, so its injective producers fuse
into it, like reduce_* and softmax.

Every ``infer`` checks the operand count, operand kinds and attributes itself,
so it can be called on an instruction that has not been through the verifier.
"""

from __future__ import annotations

import math

import numpy as np

from swir.ir.core import Instruction, Value
from swir.ir.types import I1, I64, TensorType, Type
from swir.ops.elementwise import broadcast_shapes
from swir.ops.registry import (FLOP, INLINABLE, SCALAR_FORM, Attr, Category, OpDef, Operands,
                               OpError, register)
# The checks shared with swir.ops.gradients keep their short private names here.
from swir.ops.util import (attr, check_arity as _arity, check_float as _float,
                           check_positive as _positive, check_rank as _rank,
                           check_same_element as _same_element, normalise_axes, normalise_axis,
                           shape_text as _shape, tensor_arg)

GRAPH = frozenset({"graph"})


# -- shared checks ------------------------------------------------------------------

def _tensors(inst: Instruction) -> list[TensorType]:
    return [tensor_arg(inst, i) for i in range(len(inst.args))]


def _min_rank(t: TensorType, rank: int, what: str = "operand") -> None:
    if t.rank < rank:
        raise OpError(f"{what} must have rank >= {rank}, got {t}")


# Attribute checks (``Attr.check``).

def _non_negative(values: list[int], name: str) -> None:
    for v in values:
        if v < 0:
            raise OpError(f"'{name}' entries must be non-negative, got {_shape(values)}")


def _positive_int(value: int, name: str) -> None:
    if value <= 0:
        raise OpError(f"'{name}' must be positive, got {value}")


def _non_negative_float(value: float, name: str) -> None:
    if not value >= 0:
        raise OpError(f"'{name}' must be non-negative, got {value}")


def _vector(t: TensorType, size: int, what: str, of: str) -> None:
    if t.shape != (size,):
        raise OpError(f"{what} must be <{size} x {t.element}> "
                      f"(one per {of}), got {t}")


_AXES_HW = ("height", "width")


# -- matmul ---------------------------------------------------------------------------

def _infer_matmul(inst: Instruction) -> list[Type]:
    _arity(inst)
    a, b = _tensors(inst)
    _same_element([a, b], ["left operand", "right operand"])
    for t in (a, b):
        if t.rank == 0:
            raise OpError(f"operands must have rank >= 1 (as numpy.matmul), got {t}")
    sa = a.shape if a.rank >= 2 else (1,) + a.shape
    sb = b.shape if b.rank >= 2 else b.shape + (1,)
    if sa[-1] != sb[-2]:
        raise OpError(f"contracting dimensions differ: {a} has {sa[-1]} columns "
                      f"but {b} has {sb[-2]} rows")
    try:
        batch = broadcast_shapes(sa[:-2], sb[:-2])
    except OpError as e:
        raise OpError(f"batch dimensions do not broadcast: {e}") from None
    out = batch + ((sa[-2],) if a.rank >= 2 else ()) + ((sb[-1],) if b.rank >= 2 else ())
    return [TensorType(out, a.element)]


# -- convolution ------------------------------------------------------------------

def _spatial_attrs(inst: Instruction) -> tuple[list[int], list[int], list[int]]:
    return attr(inst, "stride", 2), attr(inst, "pad", 4), attr(inst, "dilation", 2)


def _extent(k: int, d: int) -> int:
    """Span of a kernel of size k with dilation d."""
    return d * (k - 1) + 1


def _window_count(axis: int, size: int, k: int, s: int, p0: int, p1: int,
                  d: int, ceil_mode: bool = False) -> int:
    """Number of windows along one spatial axis (ONNX Conv / pooling rule)."""
    ek = _extent(k, d)
    padded = size + p0 + p1
    if ek > padded:
        how = f"kernel {k}" + (f" with dilation {d}" if d != 1 else "")
        raise OpError(f"{how} spans {ek} but the padded input "
                      f"{_AXES_HW[axis]} is only {padded} ({size} + {p0} + {p1})")
    if not ceil_mode:
        return (padded - ek) // s + 1
    out = -(-(padded - ek) // s) + 1
    if (out - 1) * s >= size + p0:  # the last window would start in the end padding
        out -= 1
    return out


def _bias(inst: Instruction, x: TensorType, channels: int) -> None:
    if len(inst.args) == 3:
        b = tensor_arg(inst, 2)
        _same_element([x, b], ["input", "bias"])
        _vector(b, channels, "bias", "output channel")


def _infer_conv2d(inst: Instruction) -> list[Type]:
    _arity(inst)
    x, w = tensor_arg(inst, 0), tensor_arg(inst, 1)
    _rank(x, 4, "input (N x C x H x W)")
    _rank(w, 4, "weight (O x C/groups x kH x kW)")
    _same_element([x, w], ["input", "weight"])
    stride, pad, dilation = _spatial_attrs(inst)
    groups = attr(inst, "groups")
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    if cg * groups != c:
        raise OpError(f"input has {c} channels but weight expects {cg * groups} "
                      f"(groups = {groups})")
    if o % groups:
        raise OpError(f"weight has {o} output channels, not divisible by "
                      f"groups = {groups}")
    _bias(inst, x, o)
    oh = _window_count(0, h, kh, stride[0], pad[0], pad[2], dilation[0])
    ow = _window_count(1, wd, kw, stride[1], pad[1], pad[3], dilation[1])
    return [TensorType((n, o, oh, ow), x.element)]


def _infer_conv_transpose2d(inst: Instruction) -> list[Type]:
    _arity(inst)
    x, w = tensor_arg(inst, 0), tensor_arg(inst, 1)
    _rank(x, 4, "input (N x C x H x W)")
    _rank(w, 4, "weight (C x O/groups x kH x kW)")
    _same_element([x, w], ["input", "weight"])
    stride, pad, dilation = _spatial_attrs(inst)
    out_pad = attr(inst, "output_padding", 2)
    groups = attr(inst, "groups")
    n, c, h, wd = x.shape
    cw, og, kh, kw = w.shape
    if cw != c:
        raise OpError(f"input has {c} channels but weight has {cw} "
                      f"input channels")
    if c % groups:
        raise OpError(f"input has {c} channels, not divisible by "
                      f"groups = {groups}")
    o = og * groups
    _bias(inst, x, o)
    out = []
    for axis, (size, k) in enumerate(((h, kh), (wd, kw))):
        s, d, op = stride[axis], dilation[axis], out_pad[axis]
        p0, p1 = pad[axis], pad[axis + 2]
        if op >= s and op >= d:
            raise OpError(f"output_padding {op} in {_AXES_HW[axis]} must be smaller than "
                          f"the stride ({s}) or the dilation ({d})")
        full = (size - 1) * s + _extent(k, d) + op
        if full - p0 - p1 < 1:
            raise OpError(f"pads {p0} + {p1} crop the whole output "
                          f"{_AXES_HW[axis]} {full}")
        out.append(full - p0 - p1)
    return [TensorType((n, o, out[0], out[1]), x.element)]


# -- pooling ---------------------------------------------------------------------------

def _pool_rule(is_avg: bool):
    """The result-type rule of max_pool2d, or (``is_avg``) of avg_pool2d, which
    takes floats only, has no dilation and counts padding or not."""
    return lambda inst: _infer_pool(inst, is_avg)


def _infer_pool(inst: Instruction, is_avg: bool) -> list[Type]:
    _arity(inst)
    x = tensor_arg(inst, 0)
    _rank(x, 4, "input (N x C x H x W)")
    if is_avg:
        _float(x, "input")
    return [TensorType(pool_shape(inst, x.shape, is_avg), x.element)]


def pool_shape(inst: Instruction, shape: tuple[int, ...], is_avg: bool) -> tuple[int, ...]:
    """The result shape of max_pool2d, or (``is_avg``) of avg_pool2d, of an
    N x C x H x W input of ``shape``, by ``inst``'s pooling attributes (checked
    here); the pooling gradients (swir.ops.gradients) share it."""
    kernel = attr(inst, "kernel", 2)
    stride = attr(inst, "stride", 2)
    pad = attr(inst, "pad", 4)
    dilation = [1, 1] if is_avg else attr(inst, "dilation", 2)
    ceil_mode = attr(inst, "ceil_mode")
    if is_avg:
        attr(inst, "count_include_pad")
    n, c, h, w = shape
    out = []
    for axis, size in enumerate((h, w)):
        ek = _extent(kernel[axis], dilation[axis])
        for p, side in ((pad[axis], ("top", "left")[axis]),
                        (pad[axis + 2], ("bottom", "right")[axis])):
            if p > ek // 2:
                raise OpError(f"pad {p} on the {side} is more than half the "
                              f"kernel extent {ek}")
        out.append(_window_count(axis, size, kernel[axis], stride[axis], pad[axis],
                                 pad[axis + 2], dilation[axis], ceil_mode))
    return (n, c, out[0], out[1])


def _infer_global_avg_pool2d(inst: Instruction) -> list[Type]:
    _arity(inst)
    x = tensor_arg(inst, 0)
    _rank(x, 4, "input (N x C x H x W)")
    _float(x, "input")
    return [TensorType(x.shape[:2] + (1, 1), x.element)]


# -- normalisation and composites ----------------------------------------------------

def _infer_batch_norm(inst: Instruction) -> list[Type]:
    _arity(inst)
    names = ["input", "scale", "bias", "mean", "var"]
    types = _tensors(inst)
    x = types[0]
    _min_rank(x, 2, "input (N x C x ...)")
    _float(x, "input")
    _same_element(types, names)
    for t, name in zip(types[1:], names[1:]):
        _vector(t, x.shape[1], name, "channel")
    attr(inst, "epsilon")
    return [x]


def _infer_softmax(inst: Instruction) -> list[Type]:
    _arity(inst)
    x = tensor_arg(inst, 0)
    _min_rank(x, 1)
    _float(x)
    normalise_axis(attr(inst, "axis"), x.rank)
    return [x]


def _infer_layer_norm(inst: Instruction) -> list[Type]:
    _arity(inst)
    types = _tensors(inst)
    x = types[0]
    _min_rank(x, 1, "input")
    _float(x, "input")
    _same_element(types, ["input", "scale", "bias"])
    axis = normalise_axis(attr(inst, "axis"), x.rank)
    norm = x.shape[axis:]
    for t, name in zip(types[1:], ("scale", "bias")):
        ok = t.rank <= len(norm)
        if ok:
            try:
                ok = broadcast_shapes(t.shape, norm) == norm
            except OpError:
                ok = False
        if not ok:
            raise OpError(f"{name} {t} does not broadcast to the normalised "
                          f"shape {_shape(norm)} (axes {axis}..{x.rank - 1} of {x})")
    attr(inst, "epsilon")
    return [x]


# -- reductions --------------------------------------------------------------------

def _reduced(shape: tuple[int, ...], axes: list[int], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce_rule(float_only: bool):
    """The result-type rule of a reduce_* op (``float_only``: reduce_mean's)."""
    return lambda inst: _infer_reduce(inst, float_only)


def _infer_reduce(inst: Instruction, float_only: bool) -> list[Type]:
    _arity(inst)
    x = tensor_arg(inst, 0)
    if float_only:
        _float(x)
    axes = normalise_axes(attr(inst, "axes"), x.rank)
    keepdims = attr(inst, "keepdims")
    if not axes:
        axes = list(range(x.rank))
    return [TensorType(_reduced(x.shape, axes, keepdims), x.element)]


def _infer_argmax(inst: Instruction) -> list[Type]:
    _arity(inst)
    x = tensor_arg(inst, 0)
    _min_rank(x, 1)
    axis = normalise_axis(attr(inst, "axis"), x.rank)
    keepdims = attr(inst, "keepdims")
    return [TensorType(_reduced(x.shape, [axis], keepdims), I64)]


# -- data movement (injective) -----------------------------------------------------

def _infer_transpose(inst: Instruction) -> list[Type]:
    _arity(inst)
    x = tensor_arg(inst, 0)
    perm = attr(inst, "perm")
    if len(perm) != x.rank:
        raise OpError(f"perm {_shape(perm)} has {len(perm)} entries but the input {x} "
                      f"has rank {x.rank}")
    if sorted(perm) != list(range(x.rank)):
        raise OpError(f"perm {_shape(perm)} is not a permutation of 0..{x.rank - 1}")
    return [TensorType(tuple(x.shape[p] for p in perm), x.element)]


def _infer_reshape(inst: Instruction) -> list[Type]:
    _arity(inst)
    x = tensor_arg(inst, 0)
    spec = attr(inst, "shape")
    out: list[int] = []
    infer_at = None
    for i, d in enumerate(spec):
        if d == -1:
            if infer_at is not None:
                raise OpError(f"shape {_shape(spec)} has more than one -1")
            infer_at = i
            out.append(1)
        elif d == 0:
            if i >= x.rank:
                raise OpError(f"shape entry 0 at position {i} copies an input "
                              f"dimension, but the input {x} has rank {x.rank}")
            out.append(x.shape[i])
        elif d < -1:
            raise OpError(f"shape entries must be positive, 0 (copy) or -1 "
                          f"(infer), got {d}")
        else:
            out.append(d)
    total, known = x.num_elements, math.prod(out)
    if infer_at is not None:
        if total % known:
            raise OpError(f"cannot reshape {x} ({total} elements) to {_shape(spec)}: "
                          f"{total} is not a multiple of {known}")
        out[infer_at] = total // known
    elif known != total:
        raise OpError(f"cannot reshape {x} ({total} elements) to {_shape(spec)} "
                      f"({known} elements)")
    return [TensorType(tuple(out), x.element)]


def _infer_flatten(inst: Instruction) -> list[Type]:
    _arity(inst)
    x = tensor_arg(inst, 0)
    axis = attr(inst, "axis")
    if not -x.rank <= axis <= x.rank:
        raise OpError(f"axis {axis} is out of range for rank {x.rank} "
                      f"(allowed {-x.rank}..{x.rank})")
    if axis < 0:
        axis += x.rank
    return [TensorType((math.prod(x.shape[:axis]), math.prod(x.shape[axis:])), x.element)]


def _infer_concat(inst: Instruction) -> list[Type]:
    _arity(inst)
    types = _tensors(inst)
    first = types[0]
    _same_element(types, [f"operand #{i}" for i in range(len(types))])
    _min_rank(first, 1, "operand #0")
    axis = normalise_axis(attr(inst, "axis"), first.rank)
    for i, t in enumerate(types[1:], 1):
        if t.rank != first.rank:
            raise OpError(f"operand #{i} {t} has rank {t.rank} but operand #0 "
                          f"{first} has rank {first.rank}")
        for d, (p, q) in enumerate(zip(first.shape, t.shape)):
            if d != axis and p != q:
                raise OpError(f"operand #{i} {t} differs from operand #0 {first} "
                              f"in dimension {d} ({q} vs {p}); only axis {axis} may differ")
    shape = list(first.shape)
    shape[axis] = sum(t.shape[axis] for t in types)
    return [TensorType(tuple(shape), first.element)]


def _split_sizes(inst: Instruction) -> tuple[TensorType, int, list[int]]:
    _arity(inst)
    x = tensor_arg(inst, 0)
    _min_rank(x, 1)
    axis = normalise_axis(attr(inst, "axis"), x.rank)
    sizes = attr(inst, "sizes")
    if not sizes:
        raise OpError("needs at least one size")
    if sum(sizes) != x.shape[axis]:
        raise OpError(f"sizes {_shape(sizes)} sum to {sum(sizes)} but axis {axis} "
                      f"of {x} has size {x.shape[axis]}")
    return x, axis, sizes


def _infer_split(inst: Instruction) -> list[Type]:
    x, axis, sizes = _split_sizes(inst)
    if inst.results and len(inst.results) != len(sizes):  # as parsed; builders have none yet
        raise OpError(f"sizes {_shape(sizes)} make {len(sizes)} results but "
                      f"{len(inst.results)} are written")
    out = []
    for s in sizes:
        shape = list(x.shape)
        shape[axis] = s
        out.append(TensorType(tuple(shape), x.element))
    return out


def slice_bounds(dim: int, start: int, end: int, step: int) -> slice:
    """ONNX Slice clamping on an axis of size ``dim``, as the Python slice that
    takes the same elements (the shape rule and the interpreter's kernel share it)."""
    if start < 0:
        start += dim
    if end < 0:
        end += dim
    if step > 0:
        return slice(min(max(start, 0), dim), min(max(end, 0), dim), step)
    start = min(max(start, 0), dim - 1)
    end = min(max(end, -1), dim - 1)
    return slice(start, None if end < 0 else end, step)


def slice_length(dim: int, start: int, end: int, step: int) -> int:
    """Elements ONNX Slice takes from an axis of size ``dim`` (after clamping)."""
    return len(range(*slice_bounds(dim, start, end, step).indices(dim)))


def _infer_slice(inst: Instruction) -> list[Type]:
    _arity(inst)
    x = tensor_arg(inst, 0)
    starts = attr(inst, "starts")
    ends = attr(inst, "ends", len(starts))
    axes = normalise_axes(attr(inst, "axes", len(starts)), x.rank, "slice axes")
    steps = attr(inst, "steps", len(starts))
    shape = list(x.shape)
    for a, s, e, st in zip(axes, starts, ends, steps):
        if st == 0:
            raise OpError(f"slice steps must be non-zero, got {_shape(steps)}")
        shape[a] = slice_length(x.shape[a], s, e, st)
        if shape[a] == 0:
            raise OpError(f"slice of axis {a} (size {x.shape[a]}) from {s} to {e} step {st} "
                          f"is empty; tensors cannot have zero-size dimensions")
    return [TensorType(tuple(shape), x.element)]


def _infer_pad(inst: Instruction) -> list[Type]:
    _arity(inst)
    x = tensor_arg(inst, 0)
    pads = attr(inst, "pads", 2 * x.rank)
    mode = attr(inst, "mode")
    attr(inst, "value")
    if mode == "reflect":
        for a, d in enumerate(x.shape):
            for p, where in ((pads[a], "before"), (pads[a + x.rank], "after")):
                if p >= d:
                    raise OpError(f"reflect padding of {p} {where} axis {a} needs more "
                                  f"than {p} elements on that axis, it has {d}")
    shape = tuple(d + pads[a] + pads[a + x.rank] for a, d in enumerate(x.shape))
    return [TensorType(shape, x.element)]


def _infer_gather(inst: Instruction) -> list[Type]:
    _arity(inst)
    data, idx = tensor_arg(inst, 0), tensor_arg(inst, 1)
    _min_rank(data, 1, "data")
    if not idx.element.is_int or idx.element == I1:
        raise OpError(f"indices must be an integer tensor, got {idx}")
    axis = normalise_axis(attr(inst, "axis"), data.rank)
    shape = data.shape[:axis] + idx.shape + data.shape[axis + 1:]
    return [TensorType(shape, data.element)]


def _infer_resize_nearest(inst: Instruction) -> list[Type]:
    _arity(inst)
    x = tensor_arg(inst, 0)
    scales = attr(inst, "scales", x.rank)
    shape = []
    for a, (d, s) in enumerate(zip(x.shape, scales)):
        if not (s > 0 and math.isfinite(s)):
            raise OpError(f"scales must be positive, got {s} for axis {a}")
        if not math.isfinite(d * s):
            raise OpError(f"scale {s} makes axis {a} of size {d} infinitely large")
        n = math.floor(d * s)
        if n < 1:
            raise OpError(f"scale {s} shrinks axis {a} of size {d} to nothing")
        shape.append(n)
    return [TensorType(tuple(shape), x.element)]


def _infer_expand(inst: Instruction) -> list[Type]:
    _arity(inst)
    x = tensor_arg(inst, 0)
    shape = attr(inst, "shape")
    try:
        out = broadcast_shapes(x.shape, tuple(shape))
    except OpError as e:
        raise OpError(f"cannot expand {x} to {_shape(shape)}: {e}") from None
    return [TensorType(out, x.element)]


def _infer_squeeze(inst: Instruction) -> list[Type]:
    _arity(inst)
    x = tensor_arg(inst, 0)
    axes = normalise_axes(attr(inst, "axes"), x.rank)
    if not axes:
        axes = [a for a, d in enumerate(x.shape) if d == 1]
    for a in axes:
        if x.shape[a] != 1:
            raise OpError(f"cannot squeeze axis {a} of {x}: it has size {x.shape[a]}, not 1")
    return [TensorType(tuple(d for a, d in enumerate(x.shape) if a not in axes), x.element)]


def _infer_unsqueeze(inst: Instruction) -> list[Type]:
    _arity(inst)
    x = tensor_arg(inst, 0)
    raw = attr(inst, "axes")
    if not raw:
        raise OpError("unsqueeze needs at least one axis")
    axes = normalise_axes(raw, x.rank + len(raw))
    dims = iter(x.shape)
    shape = tuple(1 if a in axes else next(dims) for a in range(x.rank + len(raw)))
    return [TensorType(shape, x.element)]


# -- element-wise composites -----------------------------------------------------------

def _infer_clip(inst: Instruction) -> list[Type]:
    _arity(inst)
    x = tensor_arg(inst, 0)
    lo = attr(inst, "min")
    hi = attr(inst, "max")
    if any(b is not None and math.isnan(b) for b in (lo, hi)):
        raise OpError("clip bounds must be numbers, not nan")
    if lo is not None and hi is not None and lo > hi:
        raise OpError(f"min {lo} is greater than max {hi}")
    return [x]


def _infer_leaky_relu(inst: Instruction) -> list[Type]:
    _arity(inst)
    x = tensor_arg(inst, 0)
    _float(x)
    attr(inst, "alpha")
    return [x]


def _infer_gelu(inst: Instruction) -> list[Type]:
    _arity(inst)
    x = tensor_arg(inst, 0)
    _float(x)
    attr(inst, "approximate")
    return [x]


# -- registration ----------------------------------------------------------------------

def _op(name: str, summary: str, operands: Operands, infer, category: Category,
        onnx: str, attrs: tuple[Attr, ...] = (), **kw) -> OpDef:
    return register(OpDef(name, summary, stages=GRAPH, operands=operands, attrs=attrs,
                          infer=infer, category=category, onnx=onnx, **kw))


_INPUT = Operands(("x",), "the input")
_CONV_OPERANDS = Operands(("x", "w", "bias?"), "input, weight and an optional bias")

_STRIDE = Attr("stride", "ints", doc="[sH, sW], each > 0", default=(1, 1), check=_positive)
_PAD = Attr("pad", "ints", doc="[top, left, bottom, right], each >= 0", default=(0, 0, 0, 0),
            check=_non_negative)
_DILATION = Attr("dilation", "ints", doc="[dH, dW], each > 0", default=(1, 1),
                 check=_positive)
_GROUPS = Attr("groups", "int", doc="divides the input channels", default=1,
               check=_positive_int)
_EPSILON = Attr("epsilon", "float", doc=">= 0", default=1e-5, check=_non_negative_float)
_KEEPDIMS = Attr("keepdims", "bool", doc="keep reduced axes as size 1", default=True)

def _columns(weight_shape: tuple[int, ...], groups: int) -> np.ndarray:
    """K x N: the columns are the output channels."""
    return np.arange(weight_shape[1])[None, :]


def _first_axis(weight_shape: tuple[int, ...], groups: int) -> np.ndarray:
    """O x C/g x kH x kW: axis 0 is the output channel."""
    return np.arange(weight_shape[0])[:, None, None, None]


def _grouped_second_axis(weight_shape: tuple[int, ...], groups: int) -> np.ndarray:
    """C x O/g x kH x kW: weight[c, j] feeds output channel (c // (C/g)) * (O/g) + j."""
    in_channels, out_per_group = weight_shape[0], weight_shape[1]
    group = np.arange(in_channels) // (in_channels // groups)
    channel = group[:, None] * out_per_group + np.arange(out_per_group)[None, :]
    return channel[:, :, None, None]


MATMUL = _op("matmul", "Matrix product with numpy.matmul semantics (batch dims broadcast, "
                       "1-D operands promoted and the unit dimension dropped).",
             Operands(("a", "b"), "two tensors"), _infer_matmul, Category.COMPLEX, "MatMul",
             weight_layout=("KN", ("NK",)), weight_channels=_columns)
CONV2D = _op("conv2d", "2-D convolution, NCHW input, OIHW weight (O x C/groups x kH x kW), "
                       "optional bias of O.",
             _CONV_OPERANDS, _infer_conv2d, Category.COMPLEX, "Conv",
             (_STRIDE, _PAD, _DILATION, _GROUPS),
             weight_layout=("OIHW", ("OHWI", "IHWO", "HWIO")), weight_channels=_first_axis)
CONV_TRANSPOSE2D = _op(
    "conv_transpose2d", "2-D transposed convolution, weight C x O/groups x kH x kW, "
                        "optional bias of O.",
    _CONV_OPERANDS, _infer_conv_transpose2d, Category.COMPLEX, "ConvTranspose",
    (_STRIDE, _PAD, _DILATION,
     Attr("output_padding", "ints", doc="[oH, oW] added at the bottom/right; each smaller "
                                        "than the stride or the dilation",
          default=(0, 0), check=_non_negative),
     _GROUPS),
    weight_layout=("IOHW", ("OHWI", "IHWO", "HWIO")), weight_channels=_grouped_second_axis)

_KERNEL = Attr("kernel", "ints", required=True, doc="[kH, kW], each > 0", check=_positive)
_CEIL = Attr("ceil_mode", "bool", doc="round the output size up", default=False)
_POOL_PAD = Attr("pad", "ints", doc="[top, left, bottom, right], each at most half the "
                                    "kernel extent", default=(0, 0, 0, 0), check=_non_negative)
MAX_POOL2D = _op("max_pool2d", "2-D max pooling over NCHW (padding never wins).",
                 _INPUT, _pool_rule(False), Category.REDUCTION, "MaxPool",
                 (_KERNEL, _STRIDE, _POOL_PAD, _DILATION, _CEIL), channel_wise=True)
AVG_POOL2D = _op("avg_pool2d", "2-D average pooling over NCHW.",
                 _INPUT, _pool_rule(True), Category.REDUCTION, "AveragePool",
                 (_KERNEL, _STRIDE, _POOL_PAD, _CEIL,
                  Attr("count_include_pad", "bool",
                       doc="divide by the window size including padding", default=False)),
                 channel_wise=True)
GLOBAL_AVG_POOL2D = _op("global_avg_pool2d", "Mean over H and W of NCHW, keeping N x C x 1 x 1.",
                        _INPUT, _infer_global_avg_pool2d, Category.REDUCTION, "GlobalAveragePool",
                        channel_wise=True)

BATCH_NORM = _op("batch_norm", "Inference batch normalisation over channel axis 1: "
                               "(x - mean) * scale / sqrt(var + epsilon) + bias.",
                 Operands(("x", "scale", "bias", "mean", "var"), "x, scale, bias, mean, var"),
                 _infer_batch_norm, Category.BROADCAST, "BatchNormalization", (_EPSILON,),
                 traits=frozenset({SCALAR_FORM, INLINABLE}), running_operands=(0,))
_SOFTMAX_AXIS = Attr("axis", "int", default=-1)
SOFTMAX = _op("softmax", "exp(x - max) / sum(exp(x - max)) along one axis.",
              _INPUT, _infer_softmax, Category.REDUCTION, "Softmax", (_SOFTMAX_AXIS,))
LOG_SOFTMAX = _op("log_softmax", "x - max - log(sum(exp(x - max))) along one axis.",
                  _INPUT, _infer_softmax, Category.REDUCTION, "LogSoftmax", (_SOFTMAX_AXIS,))
LAYER_NORM = _op("layer_norm", "Normalise over axes [axis, rank), then * scale (+ bias).",
                 Operands(("x", "scale", "bias?"), "x, scale and an optional bias"),
                 _infer_layer_norm, Category.REDUCTION, "LayerNormalization",
                 (Attr("axis", "int", doc="first normalised axis", default=-1), _EPSILON))

REDUCTIONS = {
    name: _op(name, f"{what} over the given axes (all when none are given).",
              _INPUT, _reduce_rule(float_only), Category.REDUCTION, onnx,
              (Attr("axes", "ints", doc="distinct axes; [] = all axes", default=()), _KEEPDIMS))
    for name, onnx, what, float_only in (("reduce_sum", "ReduceSum", "Sum", False),
                                         ("reduce_mean", "ReduceMean", "Mean", True),
                                         ("reduce_max", "ReduceMax", "Maximum", False),
                                         ("reduce_min", "ReduceMin", "Minimum", False),
                                         ("reduce_prod", "ReduceProd", "Product", False))}
REDUCE_SUM, REDUCE_MEAN, REDUCE_MAX, REDUCE_MIN, REDUCE_PROD = REDUCTIONS.values()
ARGMAX = _op("argmax", "Index (i64) of the first maximum along one axis.",
             _INPUT, _infer_argmax, Category.REDUCTION, "ArgMax",
             (Attr("axis", "int", default=0), _KEEPDIMS), differentiable=False)

def _reversed_axes(attrs, ranks: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(reversed(range(ranks[0]))) if ranks else ()


def _per_start(value: int):
    """A default with one entry per entry of ``starts`` (``value(i)``)."""
    def derive(attrs, ranks) -> tuple[int, ...]:
        starts = attrs.get("starts")
        n = len(starts) if isinstance(starts, (list, tuple)) else 0
        return tuple(value if value is not None else i for i in range(n))
    return derive


TRANSPOSE = _op("transpose", "Permute the axes: output axis i is input axis perm[i].",
                _INPUT, _infer_transpose, Category.INJECTIVE, "Transpose",
                (Attr("perm", "ints", doc="a permutation of 0..rank-1; default reversed",
                      derived=_reversed_axes),),
                traits=frozenset({INLINABLE}))
RESHAPE = _op("reshape", "Same elements in row-major order, new shape (-1 inferred, 0 copies).",
              _INPUT, _infer_reshape, Category.INJECTIVE, "Reshape",
              (Attr("shape", "ints", required=True,
                    doc="entries > 0, at most one -1 (inferred), 0 copies the input "
                        "dimension"),))
FLATTEN = _op("flatten", "Reshape to 2-D: prod(dims[:axis]) x prod(dims[axis:]).",
              _INPUT, _infer_flatten, Category.INJECTIVE, "Flatten",
              (Attr("axis", "int", doc="in [-rank, rank]", default=1),))
CONCAT = _op("concat", "Join tensors along an axis; the other dimensions must agree.",
             Operands(("inputs+",), "the tensors to join"), _infer_concat, Category.INJECTIVE,
             "Concat",
             (Attr("axis", "int", required=True, doc="in [-rank, rank)"),))
SPLIT = _op("split", "Split along an axis into len(sizes) results.",
            _INPUT, _infer_split, Category.INJECTIVE, "Split",
            (Attr("axis", "int", default=0),
             Attr("sizes", "ints", required=True, doc="positive, summing to the axis size",
                  check=_positive)))
SLICE = _op("slice", "Strided slice with ONNX clamping (negative indices count from the end).",
            _INPUT, _infer_slice, Category.INJECTIVE, "Slice",
            (Attr("starts", "ints", required=True), Attr("ends", "ints", required=True),
             Attr("axes", "ints", doc="distinct; default [0, 1, ..., len(starts) - 1]",
                  derived=_per_start(None)),
             Attr("steps", "ints", doc="non-zero; default all 1", derived=_per_start(1))))
PAD = _op("pad", "Pad each axis before and after.",
          _INPUT, _infer_pad, Category.INJECTIVE, "Pad",
          (Attr("pads", "ints", required=True,
                doc="[begin_0, ..., begin_{r-1}, end_0, ..., end_{r-1}], each >= 0",
                check=_non_negative),
           Attr("mode", "str", default="constant", choices=("constant", "reflect", "edge")),
           Attr("value", "float", doc='fill for mode "constant"', default=0.0)))
GATHER = _op("gather", "ONNX Gather: take slices of data along axis at the integer indices.",
             Operands(("data", "indices"), "data and indices"), _infer_gather, Category.INJECTIVE,
             "Gather", (Attr("axis", "int", default=0),))
RESIZE_NEAREST = _op(
    "resize_nearest", "Nearest-neighbour resize: out dim = floor(dim * scale), "
                      "source index = min(floor(out_index / scale), dim - 1).",
    _INPUT, _infer_resize_nearest, Category.INJECTIVE, "Resize",
    (Attr("scales", "floats", required=True, doc="one positive scale per dimension"),))
EXPAND = _op("expand", "Broadcast to a shape (bidirectional numpy broadcasting, as ONNX Expand).",
             _INPUT, _infer_expand, Category.BROADCAST, "Expand",
             (Attr("shape", "ints", required=True, doc="positive entries", check=_positive),))
SQUEEZE = _op("squeeze", "Drop axes of size 1.",
              _INPUT, _infer_squeeze, Category.INJECTIVE, "Squeeze",
              (Attr("axes", "ints", doc="each of size 1; [] = every size-1 axis", default=()),))
UNSQUEEZE = _op("unsqueeze", "Insert axes of size 1 at the given output positions.",
                _INPUT, _infer_unsqueeze, Category.INJECTIVE, "Unsqueeze",
                (Attr("axes", "ints", required=True, doc="distinct, in [-(rank + n), rank + n)"),))

_ELEMENTWISE = frozenset({SCALAR_FORM, INLINABLE, FLOP})
CLIP = _op("clip", "Element-wise min(max(x, min), max); either bound may be absent.",
           _INPUT, _infer_clip, Category.ELEMENTWISE, "Clip",
           (Attr("min", "float", doc="absent: no lower bound"),
            Attr("max", "float", doc="absent: no upper bound")), traits=_ELEMENTWISE)
LEAKY_RELU = _op("leaky_relu", "Element-wise x >= 0 ? x : alpha * x.",
                 _INPUT, _infer_leaky_relu, Category.ELEMENTWISE, "LeakyRelu",
                 (Attr("alpha", "float", default=0.01),), traits=_ELEMENTWISE)
GELU = _op("gelu", "Element-wise 0.5 * x * (1 + erf(x / sqrt(2))), or its tanh approximation.",
           _INPUT, _infer_gelu, Category.ELEMENTWISE, "Gelu",
           (Attr("approximate", "str", default="none", choices=("none", "tanh")),),
           traits=_ELEMENTWISE)


# -- fused groups ----------------------------------------------------------------------
#
# ``%y = fused %a, %b : T { 'g(%x: A, %w: B): ... yield %v }``: a group of graph
# ops that -fuse found (or a person wrote) and -lower-loops turns into ONE
# kernel. The region is a single block whose arguments take the operands; it
# is isolated from the rest of the function (only its arguments, its own
# values and globals are used inside), so a group can be lowered, compared and
# moved on its own, as a TVM primitive function can.

def _fused_body(inst: Instruction):
    if len(inst.regions) != 1 or len(inst.regions[0].blocks) != 1:
        raise OpError("has one region of a single block")
    return inst.regions[0].blocks[0]


def _infer_fused(inst: Instruction) -> list[Type]:
    body = _fused_body(inst)
    last = body.instructions[-1] if body.instructions else None
    if last is None or not last.isa(YIELD):
        raise OpError("region must end with 'yield'")
    return [v.type for v in last.operands]


def _verify_fused(inst: Instruction) -> None:
    from swir.ir.core import Global
    body = _fused_body(inst)
    want = [v.type for v in inst.operands]
    got = [a.type for a in body.args]
    if want != got:
        raise OpError(f"region takes ({', '.join(map(str, got))}) but the operands are "
                      f"({', '.join(map(str, want))})")
    if not inst.results:
        raise OpError("must yield at least one value")
    inside = set(map(id, body.args))
    for i in body.instructions:
        for v in i.operands:
            if id(v) not in inside and not isinstance(v, Global):
                raise OpError(f"region uses %{v.name}, defined outside it; pass it as an "
                              "operand (a fused region is isolated)")
        if i.regions:
            raise OpError(f"'{i.opname}' with a region cannot be inside a fused group")
        inside.update(map(id, i.results))


def _verify_yield(inst: Instruction) -> None:
    region = inst.parent.parent if inst.parent is not None else None
    owner = region.parent if region is not None else None
    if not (isinstance(owner, Instruction) and owner.isa(FUSED)):
        raise OpError("ends the region of a 'fused' op and nothing else")
    if not all(isinstance(s, Value) for s in inst.args):
        raise OpError("'yield' takes values")


FUSED = register(OpDef("fused", "A fused group: one kernel computing the ops of its "
                                "region from its operands.",
                       stages=GRAPH, num_args=(0, None), infer=_infer_fused,
                       verify=_verify_fused, num_regions=1, category=Category.FUSED))
YIELD = register(OpDef("yield", "End a fused group's region, giving the group's results.",
                       stages=GRAPH, verify=_verify_yield, terminator=True, pure=False,
                       ends=FUSED))
