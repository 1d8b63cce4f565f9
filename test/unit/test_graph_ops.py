"""Shape inference and verification of the graph-stage tensor ops (swir.ops.graph).

Output shapes are cross-checked against numpy where numpy has the op, and
against small independent reference computations (window enumeration,
scatter) for convolution and pooling.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swir.ir.core import Instruction, Value
from swir.ir.types import F16, F32, I1, I32, I64, TensorType
from swir.ops.registry import OpError, all_ops, lookup

FAST = settings(max_examples=60, deadline=None)


def T(*shape: int, el=F32) -> TensorType:
    return TensorType(tuple(shape), el)


def make(op: str, operands, **attrs) -> Instruction:
    args = [o if isinstance(o, Value) else Value(o) for o in operands]
    return Instruction(op, args, attrs=attrs)


def infer(op: str, operands, **attrs):
    return lookup(op).infer(make(op, operands, **attrs))


def one(op: str, operands, **attrs) -> TensorType:
    out = infer(op, operands, **attrs)
    assert len(out) == 1
    return out[0]


def shape(op: str, operands, **attrs) -> tuple[int, ...]:
    return one(op, operands, **attrs).shape


def fails(op: str, operands, message: str, **attrs) -> str:
    with pytest.raises(OpError) as e:
        infer(op, operands, **attrs)
    assert message in str(e.value), f"{message!r} not in {str(e.value)!r}"
    return str(e.value)


GRAPH_OPS = [
    "matmul", "conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d", "global_avg_pool2d",
    "batch_norm", "softmax", "log_softmax", "layer_norm", "reduce_sum", "reduce_mean",
    "reduce_max", "reduce_min", "reduce_prod", "argmax", "transpose", "reshape", "flatten",
    "concat", "split", "slice", "pad", "gather", "resize_nearest", "clip", "leaky_relu",
    "gelu", "expand", "squeeze", "unsqueeze",
    "max_pool2d_grad", "avg_pool2d_grad",
]


# -- registry -------------------------------------------------------------------------

@pytest.mark.parametrize("name", GRAPH_OPS)
def test_registered_for_graph_stage_only(name):
    op = lookup(name)
    assert op is not None
    assert op.stages == frozenset({"graph"})
    assert op.category in ("elementwise", "broadcast", "injective", "reduction", "complex",
                           "opaque")
    assert len(set(op.attr_names)) == len(op.attr_names)
    assert op.infer is not None and op.pure


# The fused group and its terminator: structure, not tensor ops (docs/ir.md,
# "Fused groups"; test/Verifier/fused.swir, test_fuse.py).
GROUP_OPS = {"fused", "yield"}


# What ranks exchange (docs/ir.md, "Collectives"; test_distribute.py).
COLLECTIVES = {"allgather", "reduce_scatter", "allreduce"}


# Losses, optimiser steps and training batch norm (docs/ir.md, "Training ops";
# test_training_ops.py).
TRAINING_OPS = {"softmax_cross_entropy", "mse_loss", "sgd_update", "adam_update",
                "batch_norm_train"}


def test_every_graph_only_op_is_listed_and_documented():
    graph_only = {o.name for o in all_ops() if o.stages == frozenset({"graph"})}
    assert graph_only == set(GRAPH_OPS) | GROUP_OPS | COLLECTIVES | TRAINING_OPS
    doc = (Path(__file__).resolve().parents[2] / "docs" / "ir.md").read_text()
    headings = [line for line in doc.splitlines() if line.startswith("#")]
    for name in GRAPH_OPS + sorted(TRAINING_OPS):
        assert any(f"`{name}`" in h for h in headings), name
    collectives = doc.split("## Collectives (graph stage)", 1)[1].split("\n## ", 1)[0]
    for name in COLLECTIVES:
        assert f"| `{name}` |" in collectives and f"| `mpi_{name}` |" in doc, name
        assert lookup(name).category == "collective"
    for op in all_ops():
        if op.category == "elementwise" and op.stages != frozenset({"graph"}):
            assert f"`{op.name}`" in doc, op.name


def test_categories():
    cat = {n: lookup(n).category for n in GRAPH_OPS}
    assert {n for n, c in cat.items() if c == "complex"} == {
        "matmul", "conv2d", "conv_transpose2d"}
    assert cat["transpose"] == cat["slice"] == cat["gather"] == "injective"
    assert cat["reduce_sum"] == cat["softmax"] == cat["max_pool2d"] == "reduction"
    assert cat["expand"] == "broadcast" and cat["gelu"] == "elementwise"


def test_operand_count_and_kind():
    x = T(1, 3, 8, 8)
    w = T(4, 3, 3, 3)
    fails("conv2d", [x], "takes 2 to 3 operands")
    fails("conv2d", [x, w, T(4), T(4)], "got 4")
    fails("softmax", [x, x], "takes 1 operand")
    fails("concat", [], "at least 1 operand", axis=0)
    fails("transpose", [Value(F32)], "must be a tensor")


def test_attribute_kinds_are_checked():
    x, w = T(1, 3, 8, 8), T(4, 3, 3, 3)
    fails("conv2d", [x, w], "needs 4 integers", pad=(1, 1))
    fails("conv2d", [x, w], "'groups' must be an integer", groups=True)
    fails("conv2d", [x, w], "list of integers", stride=(1.0, 1.0))
    fails("max_pool2d", [x], "missing attribute 'kernel'")
    fails("max_pool2d", [x], "true or false", kernel=(2, 2), ceil_mode=1)
    fails("gelu", [x], "must be a string", approximate=1)
    assert shape("leaky_relu", [x], alpha=1) == x.shape  # integers are accepted as floats


# -- matmul ---------------------------------------------------------------------------

@pytest.mark.parametrize("a, b", [
    ((3, 4), (4, 5)),
    ((1, 784), (784, 128)),
    ((4,), (4, 5)),
    ((3, 4), (4,)),
    ((4,), (4,)),
    ((2, 3, 4), (4, 5)),
    ((3, 4), (6, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 6)),
    ((7,), (2, 7, 3)),
    ((2, 3, 7), (7,)),
    ((1, 1), (1, 1)),
])
def test_matmul_matches_numpy(a, b):
    want = np.matmul(np.zeros(a), np.zeros(b)).shape
    assert infer("matmul", [T(*a), T(*b)]) == [TensorType(want, F32)]


@FAST
@given(st.lists(st.integers(1, 3), min_size=1, max_size=4),
       st.lists(st.integers(1, 3), min_size=1, max_size=4))
def test_matmul_property(a, b):
    try:
        want = np.matmul(np.zeros(a), np.zeros(b)).shape
    except ValueError:
        with pytest.raises(OpError):
            infer("matmul", [T(*a), T(*b)])
    else:
        assert shape("matmul", [T(*a), T(*b)]) == want


def test_matmul_errors():
    fails("matmul", [T(3, 4), T(5, 6)], "<3 x 4 x f32> has 4 columns but <5 x 6 x f32> has 5 rows")
    fails("matmul", [T(4), T(5)], "contracting dimensions differ")
    fails("matmul", [T(2, 3, 4), T(3, 4, 5)], "batch dimensions do not broadcast")
    fails("matmul", [T(), T(3)], "rank >= 1")
    fails("matmul", [T(3, 4), T(4, 5, el=F16)], "element type f16")


# -- conv2d ---------------------------------------------------------------------------

def ref_windows(size, k, s, p0, p1, d):
    """Output length by actually sliding a dilated window over a padded array."""
    padded = np.pad(np.arange(size), (p0, p1))
    views = np.lib.stride_tricks.sliding_window_view(padded, d * (k - 1) + 1)
    return len(views[::s])


def ref_conv(x, w, stride, pad, dil, groups):
    n, _, h, wd = x
    return (n, w[0], ref_windows(h, w[2], stride[0], pad[0], pad[2], dil[0]),
            ref_windows(wd, w[3], stride[1], pad[1], pad[3], dil[1]))


CONV_CASES = [
    # input, weight, stride, pad [t, l, b, r], dilation, groups
    ((1, 3, 224, 224), (64, 3, 7, 7), (2, 2), (3, 3, 3, 3), (1, 1), 1),
    ((1, 64, 56, 56), (64, 64, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((1, 64, 56, 56), (256, 64, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((1, 256, 56, 56), (512, 256, 1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1),
    ((2, 8, 15, 17), (16, 8, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),     # odd sizes
    ((1, 4, 9, 9), (4, 4, 3, 3), (2, 2), (0, 0, 1, 1), (1, 1), 1),        # TF "SAME" pads
    ((1, 4, 10, 11), (6, 4, 3, 5), (1, 2), (2, 0, 1, 3), (1, 1), 1),      # asymmetric
    ((1, 4, 20, 20), (4, 4, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1),      # dilation
    ((1, 4, 20, 21), (4, 4, 3, 3), (3, 2), (0, 0, 0, 0), (3, 2), 1),
    ((1, 6, 8, 8), (4, 3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 2),        # groups
    ((1, 32, 112, 112), (32, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 32),  # depthwise
    ((1, 32, 112, 112), (32, 1, 3, 3), (2, 2), (0, 0, 1, 1), (1, 1), 32),
    ((1, 8, 7, 7), (16, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 8),       # multiplier 2
    ((1, 3, 7, 7), (5, 3, 7, 7), (1, 1), (0, 0, 0, 0), (1, 1), 1),        # kernel = input
    ((1, 1, 1, 1), (1, 1, 1, 1), (5, 5), (0, 0, 0, 0), (4, 4), 1),
]


@pytest.mark.parametrize("x, w, stride, pad, dil, groups", CONV_CASES)
def test_conv2d_shapes(x, w, stride, pad, dil, groups):
    out = infer("conv2d", [T(*x), T(*w)], stride=stride, pad=pad, dilation=dil, groups=groups)
    assert out == [T(*ref_conv(x, w, stride, pad, dil, groups))]
    # with a bias of one value per output channel
    out = infer("conv2d", [T(*x), T(*w), T(w[0])], stride=stride, pad=pad, dilation=dil,
                groups=groups)
    assert out == [T(*ref_conv(x, w, stride, pad, dil, groups))]


def test_conv2d_resnet_stem_and_defaults():
    x, w = Value(T(1, 3, 224, 224), "x"), Value(T(64, 3, 7, 7), "w")
    inst = Instruction("conv2d", [x, w], attrs={"stride": (2, 2), "pad": (3, 3, 3, 3),
                                                "dilation": (1, 1), "groups": 1})
    assert lookup("conv2d").infer(inst) == [TensorType((1, 64, 112, 112), F32)]
    assert shape("conv2d", [T(1, 3, 10, 10), T(2, 3, 3, 3)]) == (1, 2, 8, 8)


@FAST
@given(st.integers(1, 12), st.integers(1, 4), st.integers(1, 3), st.integers(0, 3),
       st.integers(0, 3), st.integers(1, 3))
def test_conv2d_window_property(size, k, s, p0, p1, d):
    x, w = T(1, 2, size, 5), T(3, 2, k, 1)
    kw = dict(stride=(s, 1), pad=(p0, 0, p1, 0), dilation=(d, 1))
    if d * (k - 1) + 1 > size + p0 + p1:
        fails("conv2d", [x, w], "padded input height", **kw)
    else:
        assert shape("conv2d", [x, w], **kw)[2] == ref_windows(size, k, s, p0, p1, d)


def test_conv2d_errors():
    x = T(1, 3, 8, 8)
    fails("conv2d", [x, T(4, 3, 3, 3)], "input has 3 channels but weight expects 6 (groups = 2)",
          groups=2)
    fails("conv2d", [T(1, 6, 8, 8), T(5, 3, 3, 3)], "5 output channels, not divisible by "
          "groups = 2", groups=2)
    fails("conv2d", [T(1, 4, 8, 8), T(4, 1, 3, 3)], "weight expects 1 (groups = 1)")
    fails("conv2d", [x, T(4, 3, 3, 3)], "'stride' entries must be positive", stride=(0, 1))
    fails("conv2d", [x, T(4, 3, 3, 3)], "'dilation' entries must be positive",
          dilation=(1, -1))
    fails("conv2d", [x, T(4, 3, 3, 3)], "'pad' entries must be non-negative",
          pad=(0, 0, -1, 0))
    fails("conv2d", [x, T(4, 3, 3, 3)], "'groups' must be positive", groups=0)
    fails("conv2d", [x, T(4, 3, 9, 3)], "kernel 9 spans 9 but the padded input height is "
          "only 8")
    fails("conv2d", [x, T(4, 3, 3, 3)], "kernel 3 with dilation 4 spans 9 but the padded "
          "input width is only 8 (8 + 0 + 0)", dilation=(1, 4))
    fails("conv2d", [x, T(4, 3, 3, 3), T(3)], "bias must be <4 x f32>")
    fails("conv2d", [x, T(4, 3, 3, 3), T(1, 4)], "one per output channel")
    fails("conv2d", [T(3, 8, 8), T(4, 3, 3, 3)], "input (N x C x H x W) must have rank 4")
    fails("conv2d", [x, T(4, 3, 3)], "weight (O x C/groups x kH x kW) must have rank 4")
    fails("conv2d", [x, T(4, 3, 3, 3, el=F16)], "weight has element type f16")
    fails("conv2d", [x, T(4, 3, 3, 3), T(4, el=F16)], "bias has element type f16")


# -- conv_transpose2d -------------------------------------------------------------------

def ref_deconv(size, k, s, p0, p1, d, op):
    """Scatter each input position into the full output, then crop the pads."""
    full = np.zeros((size - 1) * s + d * (k - 1) + 1 + op)
    for i in range(size):
        for j in range(k):
            full[i * s + j * d] += 1
    return len(full[p0:len(full) - p1])


@pytest.mark.parametrize("x, w, stride, pad, dil, op, groups", [
    ((1, 16, 7, 7), (16, 8, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), (1, 1), 1),
    ((1, 16, 7, 7), (16, 8, 4, 4), (2, 2), (1, 1, 1, 1), (1, 1), (0, 0), 1),
    ((2, 8, 5, 6), (8, 3, 3, 2), (3, 1), (0, 1, 2, 0), (1, 1), (2, 0), 1),
    ((1, 4, 5, 5), (4, 2, 3, 3), (1, 1), (0, 0, 0, 0), (2, 3), (1, 2), 1),   # dilation
    ((1, 16, 7, 7), (16, 4, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), (1, 1), 2),  # groups
    ((1, 8, 9, 9), (8, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), (0, 0), 8),   # depthwise
    ((1, 1, 1, 1), (1, 1, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), (0, 0), 1),
])
def test_conv_transpose2d_shapes(x, w, stride, pad, dil, op, groups):
    want = (x[0], w[1] * groups,
            ref_deconv(x[2], w[2], stride[0], pad[0], pad[2], dil[0], op[0]),
            ref_deconv(x[3], w[3], stride[1], pad[1], pad[3], dil[1], op[1]))
    kw = dict(stride=stride, pad=pad, dilation=dil, output_padding=op, groups=groups)
    assert shape("conv_transpose2d", [T(*x), T(*w)], **kw) == want
    assert shape("conv_transpose2d", [T(*x), T(*w), T(want[1])], **kw) == want


def test_conv_transpose2d_defaults_and_inverse_of_conv():
    assert shape("conv_transpose2d", [T(1, 4, 5, 5), T(4, 2, 3, 3)]) == (1, 2, 7, 7)
    # stride-2 conv 14 -> 7 is inverted by a transposed conv with output_padding 1
    down = shape("conv2d", [T(1, 8, 14, 14), T(8, 8, 3, 3)], stride=(2, 2), pad=(1, 1, 1, 1))
    up = shape("conv_transpose2d", [T(*down), T(8, 8, 3, 3)], stride=(2, 2), pad=(1, 1, 1, 1),
               output_padding=(1, 1))
    assert down == (1, 8, 7, 7) and up == (1, 8, 14, 14)


def test_conv_transpose2d_errors():
    x = T(1, 4, 5, 5)
    fails("conv_transpose2d", [x, T(6, 2, 3, 3)], "input has 4 channels but weight has 6 input")
    fails("conv_transpose2d", [x, T(4, 2, 3, 3)], "not divisible by groups = 3", groups=3)
    fails("conv_transpose2d", [x, T(4, 2, 3, 3)], "output_padding 2 in height must be smaller "
          "than the stride (2) or the dilation (1)", stride=(2, 2), output_padding=(2, 0))
    fails("conv_transpose2d", [T(1, 4, 1, 1), T(4, 2, 1, 1)], "crop the whole output",
          pad=(1, 0, 0, 0))
    fails("conv_transpose2d", [x, T(4, 2, 3, 3), T(4)], "bias must be <2 x f32>")
    fails("conv_transpose2d", [x, T(4, 2, 3, 3)], "'output_padding' entries must be "
          "non-negative", output_padding=(-1, 0))


# -- pooling ----------------------------------------------------------------------------

def ref_pool(size, k, s, p0, p1, d, ceil):
    """Count windows: floor mode keeps those inside the padded input; ceil mode also
    keeps partial windows overhanging by less than a stride that start before the
    end padding (PyTorch / ONNX rule)."""
    ek, padded = d * (k - 1) + 1, size + p0 + p1
    if not ceil:
        return sum(1 for i in range(padded) if i * s + ek <= padded)
    return sum(1 for i in range(padded) if i * s + ek < padded + s and i * s < size + p0)


POOL_CASES = [
    # input H, W, kernel, stride, pad, dilation, ceil
    ((112, 112), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False),   # ResNet max pool
    ((6, 6), (3, 3), (2, 2), (0, 0, 0, 0), (1, 1), False),
    ((6, 6), (3, 3), (2, 2), (0, 0, 0, 0), (1, 1), True),
    ((5, 5), (2, 2), (2, 2), (1, 1, 1, 1), (1, 1), True),        # last window dropped
    ((7, 8), (2, 3), (2, 3), (0, 1, 1, 0), (1, 1), True),
    ((13, 13), (3, 3), (2, 2), (0, 0, 0, 0), (1, 1), True),      # SqueezeNet
    ((9, 10), (3, 2), (1, 2), (1, 0, 1, 1), (2, 1), False),      # dilation
    ((9, 10), (3, 2), (2, 2), (2, 0, 2, 0), (2, 1), True),
    ((7, 7), (7, 7), (1, 1), (0, 0, 0, 0), (1, 1), False),       # kernel = input
    ((8, 8), (1, 1), (2, 2), (0, 0, 0, 0), (1, 1), False),       # kernel 1
]


@pytest.mark.parametrize("hw, k, s, p, d, ceil", POOL_CASES)
def test_max_pool2d_shapes(hw, k, s, p, d, ceil):
    got = shape("max_pool2d", [T(2, 5, *hw)], kernel=k, stride=s, pad=p, dilation=d,
                ceil_mode=ceil)
    assert got == (2, 5, ref_pool(hw[0], k[0], s[0], p[0], p[2], d[0], ceil),
                   ref_pool(hw[1], k[1], s[1], p[1], p[3], d[1], ceil))


@pytest.mark.parametrize("hw, k, s, p, d, ceil", [c for c in POOL_CASES if c[4] == (1, 1)])
def test_avg_pool2d_shapes(hw, k, s, p, d, ceil):
    for include in (False, True):
        got = shape("avg_pool2d", [T(1, 3, *hw)], kernel=k, stride=s, pad=p, ceil_mode=ceil,
                    count_include_pad=include)
        assert got == (1, 3, ref_pool(hw[0], k[0], s[0], p[0], p[2], 1, ceil),
                       ref_pool(hw[1], k[1], s[1], p[1], p[3], 1, ceil))


def test_pool_known_values_and_defaults():
    assert shape("max_pool2d", [T(1, 64, 112, 112)], kernel=(3, 3), stride=(2, 2),
                 pad=(1, 1, 1, 1)) == (1, 64, 56, 56)
    assert shape("max_pool2d", [T(1, 1, 5, 5)], kernel=(2, 2), stride=(2, 2),
                 pad=(1, 1, 1, 1), ceil_mode=True) == (1, 1, 3, 3)  # as PyTorch
    assert shape("avg_pool2d", [T(1, 1, 7, 7)], kernel=(2, 2)) == (1, 1, 6, 6)  # stride 1


@FAST
@given(st.integers(1, 12), st.integers(1, 4), st.integers(1, 3), st.integers(0, 2),
       st.integers(0, 2), st.integers(1, 2), st.booleans())
def test_pool_window_property(size, k, s, p0, p1, d, ceil):
    ek = d * (k - 1) + 1
    kw = dict(kernel=(k, 1), stride=(s, 1), pad=(p0, 0, p1, 0), dilation=(d, 1), ceil_mode=ceil)
    if max(p0, p1) > ek // 2:
        fails("max_pool2d", [T(1, 1, size, 3)], "more than half the kernel extent", **kw)
    elif ek > size + p0 + p1:
        fails("max_pool2d", [T(1, 1, size, 3)], "padded input height", **kw)
    else:
        assert shape("max_pool2d", [T(1, 1, size, 3)], **kw)[2] == \
            ref_pool(size, k, s, p0, p1, d, ceil)


def test_pool_errors():
    x = T(1, 3, 8, 8)
    fails("max_pool2d", [x], "pad 2 on the top is more than half the kernel extent 3",
          kernel=(3, 3), pad=(2, 0, 0, 0))
    fails("max_pool2d", [x], "pad 2 on the right", kernel=(3, 3), pad=(0, 0, 0, 2))
    fails("max_pool2d", [x], "kernel 9 spans 9", kernel=(9, 3))
    fails("max_pool2d", [x], "'kernel' entries must be positive", kernel=(0, 3))
    fails("max_pool2d", [x], "'stride' entries must be positive", kernel=(2, 2), stride=(2, 0))
    fails("max_pool2d", [T(3, 8, 8)], "must have rank 4", kernel=(2, 2))
    fails("avg_pool2d", [T(1, 3, 8, 8, el=I32)], "floating-point input", kernel=(2, 2))
    fails("avg_pool2d", [x], "needs 2 integers", kernel=(2, 2, 2))


def test_global_avg_pool2d():
    assert infer("global_avg_pool2d", [T(2, 512, 7, 7)]) == [T(2, 512, 1, 1)]
    assert shape("global_avg_pool2d", [T(1, 3, 1, 1)]) == (1, 3, 1, 1)
    fails("global_avg_pool2d", [T(2, 512, 49)], "must have rank 4")
    fails("global_avg_pool2d", [T(1, 3, 4, 4, el=I64)], "floating-point")


# -- batch_norm, softmax, layer_norm -------------------------------------------------

def test_batch_norm():
    c = T(64)
    assert infer("batch_norm", [T(1, 64, 56, 56), c, c, c, c], epsilon=1e-5) == \
        [T(1, 64, 56, 56)]
    assert shape("batch_norm", [T(8, 64), c, c, c, c]) == (8, 64)
    assert shape("batch_norm", [T(2, 64, 10), c, c, c, c]) == (2, 64, 10)
    fails("batch_norm", [T(1, 32, 4, 4), c, c, c, c], "scale must be <32 x f32> (one per "
          "channel), got <64 x f32>")
    fails("batch_norm", [T(1, 64, 4, 4), c, c, c, T(1, 64)], "var must be <64 x f32>")
    fails("batch_norm", [T(1, 64, 4, 4), c, c, T(64, el=F16), c], "mean has element type f16")
    fails("batch_norm", [T(64), c, c, c, c], "rank >= 2")
    fails("batch_norm", [T(1, 64, 4, 4), c, c, c], "takes 5 operands")
    fails("batch_norm", [T(1, 64, 4, 4), c, c, c, c], "'epsilon' must be non-negative",
          epsilon=-1.0)
    fails("batch_norm", [T(1, 64, 4, 4, el=I32)] + [T(64, el=I32)] * 4, "floating-point")


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax(op):
    x = T(2, 10)
    assert infer(op, [x]) == [x]
    for axis in (0, 1, -1, -2):
        assert shape(op, [x], axis=axis) == (2, 10)
    fails(op, [x], "axis 2 is out of range for rank 2", axis=2)
    fails(op, [x], "axis -3 is out of range", axis=-3)
    fails(op, [T(2, 10, el=I32)], "floating-point")
    fails(op, [T()], "rank >= 1")


def test_layer_norm():
    x = T(2, 5, 16)
    assert infer("layer_norm", [x, T(16), T(16)], epsilon=1e-5) == [x]
    assert shape("layer_norm", [x, T(16)]) == x.shape                      # no bias
    assert shape("layer_norm", [x, T(5, 16), T(5, 16)], axis=1) == x.shape
    assert shape("layer_norm", [x, T(16), T(1, 16)], axis=-2) == x.shape   # broadcasts
    assert shape("layer_norm", [x, T(2, 5, 16)], axis=0) == x.shape
    fails("layer_norm", [x, T(5)], "scale <5 x f32> does not broadcast to the normalised "
          "shape [16]")
    fails("layer_norm", [x, T(16), T(5, 16)], "bias <5 x 16 x f32> does not broadcast")
    fails("layer_norm", [x, T(3, 5, 16)], "does not broadcast", axis=1)
    fails("layer_norm", [x, T(16)], "axis 3 is out of range", axis=3)
    fails("layer_norm", [x, T(16, el=F16)], "scale has element type f16")
    fails("layer_norm", [x], "takes 2 to 3 operands")


# -- reductions -------------------------------------------------------------------------

REDUCE_OPS = ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"]


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("axes", [(1,), (-1,), (0, 2), (2, 0), (-3, -1), (), (0, 1, 2)])
@pytest.mark.parametrize("keepdims", [True, False])
def test_reduce_matches_numpy(op, axes, keepdims):
    data = np.zeros((2, 3, 4))
    want = np.sum(data, axis=axes or None, keepdims=keepdims).shape
    assert infer(op, [T(2, 3, 4)], axes=axes, keepdims=keepdims) == [T(*want)]


def test_reduce_defaults_and_errors():
    assert shape("reduce_sum", [T(2, 3)]) == (1, 1)                  # all axes, keepdims
    assert shape("reduce_max", [T(2, 3)], keepdims=False) == ()
    assert shape("reduce_sum", [T()]) == ()
    assert one("reduce_sum", [T(2, 3, el=I32)], axes=(0,)).element == I32
    fails("reduce_sum", [T(2, 3, 4)], "name axis 1 twice", axes=(1, -2))
    fails("reduce_min", [T(2, 3, 4)], "axes entry 3 is out of range for rank 3", axes=(3,))
    fails("reduce_prod", [T(2, 3, 4)], "out of range", axes=(-4,))
    fails("reduce_mean", [T(2, 3, el=I32)], "floating-point")
    fails("reduce_sum", [T(2, 3)], "must be a list of integers", axes=1)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("keepdims", [True, False])
def test_argmax_matches_numpy(axis, keepdims):
    want = np.argmax(np.zeros((2, 3, 4)), axis=axis, keepdims=keepdims).shape
    assert infer("argmax", [T(2, 3, 4)], axis=axis, keepdims=keepdims) == [T(*want, el=I64)]


def test_argmax_defaults_and_errors():
    assert infer("argmax", [T(5, 7)]) == [T(1, 7, el=I64)]   # ONNX defaults: axis 0, keep
    assert infer("argmax", [T(5, 7, el=I32)], keepdims=False) == [T(7, el=I64)]
    fails("argmax", [T(5, 7)], "axis 2 is out of range", axis=2)
    fails("argmax", [T()], "rank >= 1")


# -- transpose, reshape, flatten -------------------------------------------------------

@pytest.mark.parametrize("shape_, perm", [
    ((2, 3), None), ((2, 3, 4), None), ((2, 3, 4, 5), (0, 2, 3, 1)), ((2, 3, 4, 5), (0, 3, 1, 2)),
    ((7,), (0,)), ((), None), ((1, 2, 3), (2, 0, 1)),
])
def test_transpose_matches_numpy(shape_, perm):
    want = np.transpose(np.zeros(shape_), perm).shape
    attrs = {} if perm is None else {"perm": perm}
    assert infer("transpose", [T(*shape_)], **attrs) == [T(*want)]


def test_transpose_errors():
    fails("transpose", [T(2, 3, 4)], "perm [0, 0, 2] is not a permutation of 0..2",
          perm=(0, 0, 2))
    fails("transpose", [T(2, 3, 4)], "not a permutation", perm=(0, -1, 1))
    fails("transpose", [T(2, 3, 4)], "perm [1, 0] has 2 entries but the input <2 x 3 x 4 x "
          "f32> has rank 3", perm=(1, 0))


@pytest.mark.parametrize("src, spec", [
    ((2, 3, 4), (6, 4)), ((2, 3, 4), (-1,)), ((2, 3, 4), (4, -1)), ((2, 3, 4), (-1, 2, 2)),
    ((1, 2048, 1, 1), (1, -1)), ((24,), (2, 3, 4)), ((6,), (1, 6, 1)), ((5,), (5,)),
])
def test_reshape_matches_numpy(src, spec):
    want = np.reshape(np.zeros(src), spec).shape
    assert infer("reshape", [T(*src)], shape=spec) == [T(*want)]


def test_reshape_zero_copies_and_errors():
    assert shape("reshape", [T(2, 3, 4)], shape=(0, -1)) == (2, 12)
    assert shape("reshape", [T(2, 3, 4)], shape=(0, 0, 2, 2)) == (2, 3, 2, 2)
    assert shape("reshape", [T(2, 3, 4)], shape=(-1, 0)) == (8, 3)
    assert shape("reshape", [T(1, 1)], shape=()) == ()
    fails("reshape", [T(2, 3)], "cannot reshape <2 x 3 x f32> (6 elements) to [4, 2] "
          "(8 elements)", shape=(4, 2))
    fails("reshape", [T(2, 3)], "more than one -1", shape=(-1, -1))
    fails("reshape", [T(2, 3)], "6 is not a multiple of 4", shape=(4, -1))
    fails("reshape", [T(2, 3)], "entry 0 at position 2 copies an input dimension",
          shape=(1, 6, 0))
    fails("reshape", [T(2, 3)], "got -2", shape=(-2, -3))
    fails("reshape", [T(2, 3)], "missing attribute 'shape'")


@pytest.mark.parametrize("axis", [0, 1, 2, 3, 4, -1, -4])
def test_flatten(axis):
    s = (2, 3, 4, 5)
    a = axis % 5 if axis >= 0 else axis + 4
    want = (math.prod(s[:a]), math.prod(s[a:]))
    assert np.zeros(s).reshape(want).shape == want
    assert infer("flatten", [T(*s)], axis=axis) == [T(*want)]


def test_flatten_defaults_and_errors():
    assert shape("flatten", [T(1, 512, 7, 7)]) == (1, 25088)
    assert shape("flatten", [T()], axis=0) == (1, 1)
    fails("flatten", [T(2, 3)], "axis 3 is out of range for rank 2", axis=3)
    fails("flatten", [T(2, 3)], "(allowed -2..2)", axis=-3)


# -- concat, split ----------------------------------------------------------------------

@pytest.mark.parametrize("shapes, axis", [
    ([(2, 3), (4, 3)], 0), ([(2, 3), (2, 5), (2, 1)], 1), ([(2, 3), (2, 5)], -1),
    ([(1, 64, 28, 28), (1, 32, 28, 28), (1, 16, 28, 28)], 1), ([(7,)], 0),
])
def test_concat_matches_numpy(shapes, axis):
    want = np.concatenate([np.zeros(s) for s in shapes], axis=axis).shape
    assert infer("concat", [T(*s) for s in shapes], axis=axis) == [T(*want)]


def test_concat_errors():
    fails("concat", [T(2, 3), T(2, 4)], "operand #1 <2 x 4 x f32> differs from operand "
          "#0 <2 x 3 x f32> in dimension 1 (4 vs 3); only axis 0 may differ", axis=0)
    fails("concat", [T(2, 3), T(2, 3, 1)], "has rank 3 but operand #0", axis=0)
    fails("concat", [T(2, 3), T(2, 3, el=F16)], "operand #1 has element type f16", axis=0)
    fails("concat", [T(2, 3), T(2, 3)], "axis 2 is out of range", axis=2)
    fails("concat", [T(2, 3), T(2, 3)], "missing attribute 'axis'")
    fails("concat", [T(), T()], "rank >= 1", axis=0)


@pytest.mark.parametrize("src, axis, sizes", [
    ((6, 4), 0, (2, 4)), ((2, 9), 1, (3, 3, 3)), ((2, 9, 5), -2, (1, 8)), ((5,), 0, (5,)),
])
def test_split_matches_numpy(src, axis, sizes):
    parts = np.split(np.zeros(src), np.cumsum(sizes)[:-1], axis=axis)
    assert infer("split", [T(*src)], axis=axis, sizes=sizes) == [T(*p.shape) for p in parts]


def test_split_errors_and_result_count():
    fails("split", [T(2, 6)], "sizes [2, 3] sum to 5 but axis 1 of <2 x 6 x f32> has "
          "size 6", axis=1, sizes=(2, 3))
    fails("split", [T(2, 6)], "'sizes' entries must be positive", axis=1, sizes=(0, 6))
    fails("split", [T(2, 6)], "at least one size", axis=1, sizes=())
    fails("split", [T(2, 6)], "missing attribute 'sizes'")
    ok = Instruction("split", [Value(T(6))], result_types=[T(2), T(4)], attrs={"sizes": (2, 4)})
    assert lookup("split").infer(ok) == [T(2), T(4)]
    bad = Instruction("split", [Value(T(6))], result_types=[T(6)], attrs={"sizes": (2, 4)})
    with pytest.raises(OpError, match=r"sizes \[2, 4\] make 2 results but 1 are written"):
        lookup("split").infer(bad)


# -- slice --------------------------------------------------------------------------------

BIG = 2 ** 63 - 1


def numpy_slice(src, starts, ends, axes, steps):
    """Python slicing, except for the one place ONNX's clamping differs: with a
    negative step, a start before the beginning is clamped to 0 (first element)
    rather than meaning "nothing"."""
    index = [slice(None)] * len(src)
    for s, e, a, st_ in zip(starts, ends, axes, steps):
        if st_ < 0 and s < -src[a]:
            s = 0
        index[a] = slice(s, e, st_)
    return np.zeros(src)[tuple(index)].shape


@pytest.mark.parametrize("src, starts, ends, axes, steps", [
    ((2, 4), (1, 0), (2, 3), (0, 1), (1, 2)),          # ONNX example 1
    ((2, 4), (0, 1), (-1, BIG), (0, 1), (1, 1)),       # ONNX example 2
    ((10,), (-3,), (BIG,), (0,), (1,)),
    ((10,), (-1,), (-BIG - 1,), (0,), (-1,)),          # full reversal
    ((10,), (8,), (1,), (0,), (-3,)),
    ((10,), (100,), (-100,), (0,), (-2,)),             # clamped both ends
    ((10,), (-100,), (100,), (0,), (3,)),
    ((3, 5, 7), (1, -4), (3, 6), (-1, 1), (2, 1)),
    ((1, 3, 224, 224), (16, 16), (208, 208), (2, 3), (1, 1)),
])
def test_slice_matches_numpy(src, starts, ends, axes, steps):
    want = numpy_slice(src, starts, ends, axes, steps)
    assert infer("slice", [T(*src)], starts=starts, ends=ends, axes=axes, steps=steps) == \
        [T(*want)]


@FAST
@given(st.integers(1, 8), st.integers(-12, 12), st.integers(-12, 12),
       st.sampled_from([-3, -2, -1, 1, 2, 3]))
def test_slice_property(dim, start, end, step):
    want = numpy_slice((3, dim), (start,), (end,), (1,), (step,))
    kw = dict(starts=(start,), ends=(end,), axes=(-1,), steps=(step,))
    if want[1] == 0:
        fails("slice", [T(3, dim)], "is empty", **kw)
    else:
        assert shape("slice", [T(3, dim)], **kw) == want


def test_slice_negative_step_start_clamps_as_onnx_not_numpy():
    # ONNX: starts are clamped to [0, dim - 1] for negative steps, so -100 means index 0.
    assert np.zeros(10)[-100:-BIG - 1:-1].shape == (0,)
    assert shape("slice", [T(10)], starts=(-100,), ends=(-BIG - 1,), steps=(-1,)) == (1,)


def test_slice_defaults_and_errors():
    assert shape("slice", [T(4, 6)], starts=(1, 2), ends=(3, 6)) == (2, 4)
    fails("slice", [T(4, 6)], "slice of axis 0 (size 4) from 3 to 1 step 1 is empty",
          starts=(3,), ends=(1,))
    fails("slice", [T(4, 6)], "steps must be non-zero", starts=(0,), ends=(2,), steps=(0,))
    fails("slice", [T(4, 6)], "'ends' needs 2 integers, got 1", starts=(0, 0), ends=(2,))
    fails("slice", [T(4, 6)], "slice axes [1, -1] name axis 1 twice", starts=(0, 0),
          ends=(2, 2), axes=(1, -1))
    fails("slice", [T(4, 6)], "slice axes entry 2 is out of range", starts=(0,), ends=(1,),
          axes=(2,))


# -- pad, gather, resize --------------------------------------------------------------

@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("src, pads", [
    ((3, 4), (1, 2, 0, 1)), ((1, 3, 5, 5), (0, 0, 1, 1, 0, 0, 2, 2)), ((4,), (3, 0)),
    ((2, 3, 4), (0, 0, 0, 0, 0, 0)),
])
def test_pad_matches_numpy(mode, src, pads):
    r = len(src)
    width = [(pads[i], pads[i + r]) for i in range(r)]
    want = np.pad(np.zeros(src), width, mode=mode).shape
    assert infer("pad", [T(*src)], pads=pads, mode=mode, value=0.0) == [T(*want)]


def test_pad_defaults_and_errors():
    assert shape("pad", [T(2, 2)], pads=(1, 1, 1, 1)) == (4, 4)
    assert shape("pad", [T(2, 2, el=I32)], pads=(1, 1, 1, 1), value=-1) == (4, 4)
    fails("pad", [T(2, 3)], "reflect padding of 2 before axis 0 needs more than 2 elements",
          pads=(2, 0, 0, 0), mode="reflect")
    fails("pad", [T(2, 3)], "after axis 1", pads=(0, 0, 0, 3), mode="reflect")
    fails("pad", [T(2, 3)], "'pads' needs 4 integers, got 2", pads=(1, 1))
    fails("pad", [T(2, 3)], "'pads' entries must be non-negative", pads=(0, -1, 0, 0))
    fails("pad", [T(2, 3)], 'must be one of "constant", "reflect", "edge", got "wrap"',
          pads=(0, 0, 0, 0), mode="wrap")


@pytest.mark.parametrize("data, idx, axis", [
    ((5, 4), (3,), 0), ((5, 4), (2, 3), 0), ((5, 4), (2, 3), 1), ((5, 4), (), 1),
    ((2, 5, 4), (6,), -2), ((1000, 64), (1, 7), 0), ((5,), (2, 2), 0),
])
def test_gather_matches_numpy(data, idx, axis):
    want = np.take(np.zeros(data), np.zeros(idx, dtype=np.int64), axis=axis).shape
    assert infer("gather", [T(*data), T(*idx, el=I64)], axis=axis) == [T(*want)]
    assert shape("gather", [T(*data), T(*idx, el=I32)], axis=axis) == want


def test_gather_errors():
    fails("gather", [T(5, 4), T(3)], "indices must be an integer tensor, got <3 x f32>")
    fails("gather", [T(5, 4), T(3, el=I1)], "integer tensor")
    fails("gather", [T(5, 4), T(3, el=I64)], "axis 2 is out of range", axis=2)
    fails("gather", [T(), T(3, el=I64)], "rank >= 1")
    assert one("gather", [T(5, 4, el=I32), T(3, el=I64)]).element == I32


@pytest.mark.parametrize("src, scales", [
    ((1, 3, 10, 10), (1.0, 1.0, 2.0, 2.0)), ((1, 3, 7, 9), (1.0, 1.0, 0.5, 1.5)),
    ((2, 8, 13, 13), (1, 1, 2, 2)), ((4, 5), (3.0, 0.4)), ((3,), (1.0,)),
])
def test_resize_nearest(src, scales):
    want = tuple(math.floor(d * s) for d, s in zip(src, scales))
    assert infer("resize_nearest", [T(*src)], scales=scales) == [T(*want)]


def test_resize_nearest_errors():
    fails("resize_nearest", [T(1, 3, 4, 4)], "'scales' needs 4 numbers, got 2", scales=(2.0, 2.0))
    fails("resize_nearest", [T(4, 4)], "scales must be positive, got 0.0 for axis 1",
          scales=(1.0, 0.0))
    fails("resize_nearest", [T(4, 4)], "scale 0.2 shrinks axis 0 of size 4 to nothing",
          scales=(0.2, 1.0))
    fails("resize_nearest", [T(4, 4)], "missing attribute 'scales'")


# -- expand, squeeze, unsqueeze -------------------------------------------------------

@pytest.mark.parametrize("src, target", [
    ((3, 1), (3, 4)), ((3, 1), (2, 1, 6)), ((1,), (2, 3)), ((2, 3), (1, 1)), ((), (4, 5)),
    ((1, 64, 1, 1), (8, 64, 7, 7)), ((5,), (5,)),
])
def test_expand_matches_numpy(src, target):
    want = np.broadcast_shapes(src, target)
    assert infer("expand", [T(*src)], shape=target) == [T(*want)]


def test_expand_errors():
    fails("expand", [T(3, 2)], "cannot expand <3 x 2 x f32> to [3, 4]", shape=(3, 4))
    fails("expand", [T(3, 2)], "'shape' entries must be positive", shape=(0, 2))


@pytest.mark.parametrize("src, axes", [
    ((1, 3, 1, 5), None), ((1, 3, 1, 5), (0,)), ((1, 3, 1, 5), (-2, 0)), ((1, 1), (1,)),
    ((1,), None), ((3, 4), None), ((1, 2048, 1, 1), (2, 3)),
])
def test_squeeze_matches_numpy(src, axes):
    want = np.squeeze(np.zeros(src), axis=axes).shape
    attrs = {} if axes is None else {"axes": axes}
    assert infer("squeeze", [T(*src)], **attrs) == [T(*want)]
    if axes is None:
        assert shape("squeeze", [T(*src)], axes=()) == want


def test_squeeze_errors():
    fails("squeeze", [T(1, 3)], "cannot squeeze axis 1 of <1 x 3 x f32>: it has size 3, not 1",
          axes=(1,))
    fails("squeeze", [T(1, 3)], "out of range", axes=(2,))
    fails("squeeze", [T(1, 1)], "twice", axes=(0, -2))


@pytest.mark.parametrize("src, axes", [
    ((3, 4), (0,)), ((3, 4), (1,)), ((3, 4), (-1,)), ((3, 4), (0, 3)), ((3, 4), (-1, -4)),
    ((), (0,)), ((), (0, 1)), ((5,), (2, 0)), ((64,), (0, 2, 3)),
])
def test_unsqueeze_matches_numpy(src, axes):
    want = np.expand_dims(np.zeros(src), axes).shape
    assert infer("unsqueeze", [T(*src)], axes=axes) == [T(*want)]


def test_unsqueeze_errors():
    fails("unsqueeze", [T(3, 4)], "axes entry 3 is out of range for rank 3", axes=(3,))
    fails("unsqueeze", [T(3, 4)], "name axis 0 twice", axes=(0, -4))
    fails("unsqueeze", [T(3, 4)], "at least one axis", axes=())
    fails("unsqueeze", [T(3, 4)], "missing attribute 'axes'")


# -- element-wise composites ---------------------------------------------------------------

def test_clip():
    x = T(2, 3)
    assert infer("clip", [x], min=0.0, max=6.0) == [x]
    assert infer("clip", [x], min=0.0) == [x]
    assert infer("clip", [x], max=1) == [x]
    assert infer("clip", [x]) == [x]
    assert infer("clip", [T(4, el=I32)], min=0, max=255) == [T(4, el=I32)]
    fails("clip", [x], "min 6.0 is greater than max 0.0", min=6.0, max=0.0)
    fails("clip", [x], "'min' must be a number", min="0")


def test_leaky_relu_and_gelu():
    x = T(1, 16, 8, 8)
    assert infer("leaky_relu", [x]) == [x]
    assert infer("leaky_relu", [x], alpha=0.2) == [x]
    fails("leaky_relu", [T(3, el=I32)], "floating-point")
    fails("leaky_relu", [x], "'alpha' must be a number", alpha=True)
    assert infer("gelu", [x]) == [x]
    assert infer("gelu", [T(2, 3, el=F16)], approximate="tanh") == [T(2, 3, el=F16)]
    fails("gelu", [x], 'attribute \'approximate\' must be one of "none", "tanh", got "fast"',
          approximate="fast")
    fails("gelu", [T(3, el=I32)], "floating-point")


def test_messages_are_single_line_and_free_of_python_reprs():
    msg = fails("conv2d", [T(1, 3, 8, 8), T(4, 3, 3, 3)], "groups", groups=2)
    assert "\n" not in msg and "TensorType" not in msg
    assert re.search(r"<\d+ x \d+", fails("matmul", [T(3, 4), T(5, 6)], "rows"))
