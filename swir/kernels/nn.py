"""Interpreter kernels of the graph-stage neural-network ops (docs/ir.md, Graph-stage
op set): matmul, convolution, pooling, normalisation and the activation composites.

Floating-point inputs narrower than f64 are widened to f64 for every sum (dot
products, windows, means and variances) and the whole composite is computed in f64;
:func:`swir.kernels.evaluate` rounds once to the declared result type. The
interpreter is the reference the later stages are checked against, so it is at least
as accurate as onnxruntime (which accumulates f32 in f32). Integer operands accumulate
in i64 and wrap when ``evaluate`` casts back, as two's complement arithmetic does.

Everything is vectorised: windowed ops read a strided view of the padded input
(N x C x OH x OW x kH x kW, no copy); convolution is im2col + a batched matmul per
group; the transposed convolution is a matmul followed by a scatter-add per kernel
position (kH x kW slices, not a loop over pixels).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from swir.kernels.base import kernel
from swir.ir.dtypes import lowest
from swir.ir.types import ShapedType, Type
from swir.ops.graph import (AVG_POOL2D, BATCH_NORM, CONV2D, CONV_TRANSPOSE2D, GELU,
                            GLOBAL_AVG_POOL2D, LAYER_NORM, LOG_SOFTMAX, MATMUL, MAX_POOL2D, SOFTMAX)
from swir.ops.gradients import AVG_POOL2D_GRAD, MAX_POOL2D_GRAD
from swir.ops.references import erf, erfc
from swir.ops.semantics import pool_counts

# -- helpers -----------------------------------------------------------------------

def _wide(a: np.ndarray) -> np.ndarray:
    """The accumulation type: f64 for floats, i64 for integers and booleans."""
    a = np.asarray(a)
    if a.dtype.kind == "f":
        return a.astype(np.float64, copy=False)
    if a.dtype.kind in "iub":
        return a.astype(np.int64, copy=False)
    return a


def _ints(attrs: dict[str, Any], name: str) -> list[int]:
    return [int(e) for e in attrs[name]]


def _out_hw(result_types: list[Type]) -> tuple[int, int]:
    t = result_types[0]
    assert isinstance(t, ShapedType)
    return t.shape[2], t.shape[3]





def _padded(x: np.ndarray, pad: list[int], out_hw: tuple[int, int], kernel_hw: list[int],
            stride: list[int], dilation: list[int], fill: Any = 0) -> np.ndarray:
    """x padded by [top, left, bottom, right], and further at the bottom / right
    (with ``fill``) so that every one of the OH x OW windows lies inside it (ceil mode
    lets the last window run past the end padding)."""
    widths = [(0, 0)] * (x.ndim - 2)
    for axis in range(2):
        size = x.shape[x.ndim - 2 + axis]
        extent = dilation[axis] * (kernel_hw[axis] - 1) + 1
        need = (out_hw[axis] - 1) * stride[axis] + extent
        end = max(pad[axis + 2], need - size - pad[axis])
        widths.append((pad[axis], end))
    if not any(w for pair in widths for w in pair):
        return x
    return np.pad(x, widths, mode="constant", constant_values=fill)


def _windows(xp: np.ndarray, out_hw: tuple[int, int], kernel_hw: list[int],
             stride: list[int], dilation: list[int]) -> np.ndarray:
    """Read-only view ``... x OH x OW x kH x kW`` of the windows of ``xp`` (its last
    two axes are H and W): element [..., i, j, p, q] is
    xp[..., i*sH + p*dH, j*sW + q*dW]."""
    xp = np.ascontiguousarray(xp)
    sh, sw = xp.strides[-2:]
    shape = xp.shape[:-2] + tuple(out_hw) + tuple(kernel_hw)
    strides = xp.strides[:-2] + (sh * stride[0], sw * stride[1],
                                 sh * dilation[0], sw * dilation[1])
    return as_strided(xp, shape=shape, strides=strides, writeable=False)


def _channel(p: np.ndarray, rank: int) -> np.ndarray:
    """A per-channel vector shaped to broadcast along axis 1 of a rank-``rank`` tensor."""
    return p.reshape((p.shape[0],) + (1,) * (rank - 2))


def _axis(attrs: dict[str, Any], rank: int) -> int:
    return int(attrs["axis"]) % rank


# -- matmul ------------------------------------------------------------------------

@kernel(MATMUL)
def _matmul(attrs, result_types, a, b):
    return [np.matmul(_wide(a), _wide(b))]


# -- convolution ---------------------------------------------------------------------

@kernel(CONV2D)
def _conv2d(attrs, result_types, x, w, bias=None):
    stride = _ints(attrs, "stride")
    pad = _ints(attrs, "pad")
    dilation = _ints(attrs, "dilation")
    groups = int(attrs["groups"])
    x, w = _wide(x), _wide(w)
    n, c, _, _ = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    oh, ow = _out_hw(result_types)
    xp = _padded(x, pad, (oh, ow), [kh, kw], stride, dilation)
    win = _windows(xp, (oh, ow), [kh, kw], stride, dilation)      # N C OH OW kH kW
    win = win.reshape(n, groups, cg, oh, ow, kh, kw)
    # im2col: N x G x (OH*OW) x (Cg*kH*kW), then one batched matmul per group.
    cols = win.transpose(0, 1, 3, 4, 2, 5, 6).reshape(n, groups, oh * ow, cg * kh * kw)
    wmat = w.reshape(groups, og, cg * kh * kw).transpose(0, 2, 1)  # G x (Cg kH kW) x Og
    y = np.matmul(cols, wmat)                                       # N G (OH OW) Og
    y = y.transpose(0, 1, 3, 2).reshape(n, o, oh, ow)
    if bias is not None:
        y = y + _channel(_wide(bias), 4)
    return [y]


@kernel(CONV_TRANSPOSE2D)
def _conv_transpose2d(attrs, result_types, x, w, bias=None):
    stride = _ints(attrs, "stride")
    pad = _ints(attrs, "pad")
    dilation = _ints(attrs, "dilation")
    out_pad = _ints(attrs, "output_padding")
    groups = int(attrs["groups"])
    x, w = _wide(x), _wide(w)
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    cg = c // groups
    sh, sw = stride
    dh, dw = dilation
    # Full output (before the pads crop it): input pixel (i, j) and kernel tap (p, q)
    # land on (i*sH + p*dH, j*sW + q*dW); output_padding adds rows / columns at the end.
    full_h = (h - 1) * sh + dh * (kh - 1) + 1 + out_pad[0]
    full_w = (wd - 1) * sw + dw * (kw - 1) + 1 + out_pad[1]
    xg = x.reshape(n, groups, cg, h * wd).transpose(0, 1, 3, 2)     # N G (H W) Cg
    wg = w.reshape(groups, cg, og * kh * kw)                         # G Cg (Og kH kW)
    taps = np.matmul(xg, wg).reshape(n, groups, h, wd, og, kh, kw)
    taps = taps.transpose(0, 1, 4, 5, 6, 2, 3)                       # N G Og kH kW H W
    full = np.zeros((n, groups, og, full_h, full_w), dtype=taps.dtype)
    for p in range(kh):
        rows = slice(p * dh, p * dh + (h - 1) * sh + 1, sh)
        for q in range(kw):
            cols = slice(q * dw, q * dw + (wd - 1) * sw + 1, sw)
            full[:, :, :, rows, cols] += taps[:, :, :, p, q]
    full = full.reshape(n, groups * og, full_h, full_w)
    y = full[:, :, pad[0]:full_h - pad[2], pad[1]:full_w - pad[3]]
    if bias is not None:
        y = y + _channel(_wide(bias), 4)
    return [y]


# -- pooling -----------------------------------------------------------------------

@kernel(MAX_POOL2D)
def _max_pool2d(attrs, result_types, x):
    kern = _ints(attrs, "kernel")
    stride = _ints(attrs, "stride")
    pad = _ints(attrs, "pad")
    dilation = _ints(attrs, "dilation")
    out_hw = _out_hw(result_types)
    x = np.asarray(x)
    xp = _padded(x, pad, out_hw, kern, stride, dilation, fill=lowest(x.dtype))
    return [_windows(xp, out_hw, kern, stride, dilation).max(axis=(-2, -1))]





@kernel(AVG_POOL2D)
def _avg_pool2d(attrs, result_types, x):
    kern = _ints(attrs, "kernel")
    stride = _ints(attrs, "stride")
    pad = _ints(attrs, "pad")
    include_pad = bool(attrs["count_include_pad"])
    out_hw = _out_hw(result_types)
    x = _wide(x)
    xp = _padded(x, pad, out_hw, kern, stride, [1, 1])
    sums = _windows(xp, out_hw, kern, stride, [1, 1]).sum(axis=(-2, -1))
    h, w = x.shape[2:]
    ch = pool_counts(h, out_hw[0], kern[0], stride[0], pad[0], pad[2], include_pad)
    cw = pool_counts(w, out_hw[1], kern[1], stride[1], pad[1], pad[3], include_pad)
    return [sums / (ch[:, None] * cw[None, :])]


@kernel(MAX_POOL2D_GRAD)
def _max_pool2d_grad(attrs, result_types, x, dy):
    """PyTorch's CPU rule for the element each window's dy goes to: scanning the
    window in row-major order, an element wins if it is greater than the best
    so far or NaN (so the first maximum, or the last NaN); the best starts at
    -inf on the first element inside the input, so padding never wins and a
    window of -inf gives its first element inside the input."""
    kern, stride, pad = _ints(attrs, "kernel"), _ints(attrs, "stride"), _ints(attrs, "pad")
    dilation = _ints(attrs, "dilation")
    x, dy = _wide(x), _wide(dy)
    n, c, h, w = x.shape
    oh, ow = dy.shape[2:]
    taps = kern[0] * kern[1]

    def view(a: np.ndarray, fill: Any) -> np.ndarray:   # N x C x OH x OW x taps
        padded = _padded(a, pad, (oh, ow), kern, stride, dilation, fill)
        windows = _windows(padded, (oh, ow), kern, stride, dilation)
        return windows.reshape(a.shape[:2] + (oh, ow, taps))

    win = view(x, -np.inf)
    inside = view(np.ones((1, 1, h, w), dtype=bool), False)
    nan = np.isnan(win)
    any_nan = nan.any(axis=-1, keepdims=True)
    best = np.where(nan, -np.inf, win).max(axis=-1, keepdims=True)
    hits = inside & np.where(any_nan, nan, win == best)
    first, last = hits.argmax(axis=-1), taps - 1 - hits[..., ::-1].argmax(axis=-1)
    tap = np.where(any_nan[..., 0], last, first)
    rows = np.arange(oh)[:, None] * stride[0] - pad[0] + (tap // kern[1]) * dilation[0]
    cols = np.arange(ow)[None, :] * stride[1] - pad[1] + (tap % kern[1]) * dilation[1]
    ns, cs = np.ogrid[:n, :c, :1, :1][:2]
    found = np.broadcast_to(hits.any(axis=-1), dy.shape)
    index = [np.broadcast_to(a, dy.shape)[found] for a in (ns, cs, rows, cols)]
    dx = np.zeros(x.shape, dtype=np.result_type(x, dy))
    np.add.at(dx, tuple(index), dy[found])
    return [dx]


@kernel(AVG_POOL2D_GRAD)
def _avg_pool2d_grad(attrs, result_types, dy):
    """Each window adds dy / its divisor (the forward op's ``pool_counts``) to
    its elements, in a padded plane cropped to the input at the end."""
    kern, stride, pad = _ints(attrs, "kernel"), _ints(attrs, "stride"), _ints(attrs, "pad")
    n, c, h, w = _ints(attrs, "input_shape")
    dy = _wide(dy)
    oh, ow = dy.shape[2:]
    include_pad = bool(attrs["count_include_pad"])
    ch = pool_counts(h, oh, kern[0], stride[0], pad[0], pad[2], include_pad)
    cw = pool_counts(w, ow, kern[1], stride[1], pad[1], pad[3], include_pad)
    share = dy / (ch[:, None] * cw[None, :])
    full_h = max((oh - 1) * stride[0] + kern[0], pad[0] + h)
    full_w = max((ow - 1) * stride[1] + kern[1], pad[1] + w)
    full = np.zeros((n, c, full_h, full_w), dtype=share.dtype)
    for p in range(kern[0]):
        rows = slice(p, p + (oh - 1) * stride[0] + 1, stride[0])
        for q in range(kern[1]):
            full[:, :, rows, q:q + (ow - 1) * stride[1] + 1:stride[1]] += share
    return [full[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + w]]


@kernel(GLOBAL_AVG_POOL2D)
def _global_avg_pool2d(attrs, result_types, x):
    return [_wide(x).mean(axis=(2, 3), keepdims=True)]


# -- normalisation and composites -------------------------------------------------

@kernel(BATCH_NORM)
def _batch_norm(attrs, result_types, x, scale, bias, mean, var):
    eps = float(attrs["epsilon"])
    x = _wide(x)
    r = x.ndim
    factor = _wide(scale) / np.sqrt(_wide(var) + eps)
    return [(x - _channel(_wide(mean), r)) * _channel(factor, r) + _channel(_wide(bias), r)]


@kernel(SOFTMAX)
def _softmax(attrs, result_types, x):
    x = _wide(x)
    axis = _axis(attrs, x.ndim)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return [e / e.sum(axis=axis, keepdims=True)]


@kernel(LOG_SOFTMAX)
def _log_softmax(attrs, result_types, x):
    x = _wide(x)
    axis = _axis(attrs, x.ndim)
    shifted = x - x.max(axis=axis, keepdims=True)
    return [shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))]


@kernel(LAYER_NORM)
def _layer_norm(attrs, result_types, x, scale, bias=None):
    eps = float(attrs["epsilon"])
    x = _wide(x)
    axes = tuple(range(_axis(attrs, x.ndim), x.ndim))
    centred = x - x.mean(axis=axes, keepdims=True)
    var = np.mean(centred * centred, axis=axes, keepdims=True)
    y = centred / np.sqrt(var + eps) * _wide(scale)
    if bias is not None:
        y = y + _wide(bias)
    return [y]


# -- gelu and erf ------------------------------------------------------------------



@kernel(GELU)
def _gelu(attrs, result_types, x):
    approximate = attrs["approximate"]
    x = _wide(x)
    if approximate == "tanh":
        # 0.5 x (1 + tanh(z)) = x / (1 + exp(-2z)): no cancellation for x << 0.
        z = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        return [x / (1.0 + np.exp(-2.0 * z))]
    if approximate != "none":
        raise ValueError(f"gelu: unknown approximate = {approximate!r}")
    # 0.5 x (1 + erf(x / sqrt 2)); for x < 0, 1 + erf(x / sqrt 2) = erfc(|x| / sqrt 2),
    # computed directly so that the tail keeps its relative accuracy.
    a = np.abs(x) * 0.7071067811865476
    return [np.where(x < 0, 0.5 * x * erfc(a), 0.5 * x * (1.0 + erf(a)))]
