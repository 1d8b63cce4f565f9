"""Oracle tests of the neural-network interpreter kernels (swir/kernels/nn.py).

Each case builds the equivalent one-node ONNX model with ``onnx.helper`` and runs it
with onnxruntime (CPU, graph optimisations off so nothing is fused or rewritten). The
swir side takes its result type from the op's own shape rule
(``lookup(op).infer(inst)``), so every case also checks that swir's shape rule agrees
with onnxruntime's output shape, and then compares the values.

onnxruntime's CPU provider has no f64 kernel for Conv, ConvTranspose, AveragePool,
GlobalAveragePool or Gelu (Erf), and onnx's numpy reference evaluator is no substitute
(onnx 1.23: its AveragePool shifts ceil-mode windows, its ConvTranspose fails on
groups > 1 and on output_padding >= stride, its Gelu is accurate to ~1e-8 only). Their
f64 cases draw f32-representable inputs and check (1) swir's f64 result rounded to f32
is bit-identical to swir's f32 result (both compute in f64) and (2) the f32 result
against onnxruntime in f32. Gelu's f64 values are also checked against libm
(math.erf / math.erfc / math.tanh) in test_gelu_f64_libm.

swir and ONNX spell the attributes differently; the mapping below (``_onnx_attrs``) is
the documented correspondence: stride -> strides, pad [top, left, bottom, right] ->
pads [x1_begin, x2_begin, x1_end, x2_end] (the same order), dilation -> dilations,
groups -> group, kernel -> kernel_shape; booleans become 0 / 1. A case with no
attributes checks that the defaults agree.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from swir.kernels import evaluate  # noqa: E402
from swir.ops.references import erf  # noqa: E402
from swir.ir.core import Instruction, Value  # noqa: E402
from swir.ir.types import F32, F64, I32, I64, TensorType  # noqa: E402
from swir.ops.registry import OpError, lookup  # noqa: E402
from helpers import onnx_model, ort_session

# Gelu needs opset 20 (LayerNormalization 17, AveragePool-19 / MaxPool-12 are older).
# IR version 9 is opset 20's, which every onnxruntime >= 1.17 (pyproject) accepts.
OPSET = 20
IR_VERSION = 9
if onnx.defs.onnx_opset_version() < OPSET:  # pragma: no cover
    pytest.skip(f"onnx {onnx.__version__} lacks opset {OPSET}", allow_module_level=True)

ELEMENT = {np.float32: F32, np.float64: F64, np.int32: I32, np.int64: I64}
ONNX_DTYPE = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE,
              np.int32: TensorProto.INT32, np.int64: TensorProto.INT64}

# Default tolerances: f32 as the brief asks; f64 compares two f64 computations whose
# differences are a few ulp times the reduction length.
TOL = {np.float32: (1e-5, 1e-6), np.float64: (1e-12, 1e-13),
       np.int32: (0, 0), np.int64: (0, 0)}

# Ops onnxruntime's CPU provider cannot run in f64 (NOT_IMPLEMENTED at session creation).
NO_ORT_F64 = {"Conv", "ConvTranspose", "AveragePool", "GlobalAveragePool", "Gelu"}

_ATTR_NAMES = {"stride": "strides", "pad": "pads", "dilation": "dilations",
               "groups": "group", "kernel": "kernel_shape"}


def _onnx_attrs(attrs: dict) -> dict:
    out = {}
    for k, v in attrs.items():
        if isinstance(v, bool):
            v = int(v)
        elif isinstance(v, tuple):
            v = list(v)
        out[_ATTR_NAMES.get(k, k)] = v
    return out


def _model(op_type: str, inputs: list[np.ndarray], attrs: dict, dtype) -> onnx.ModelProto:
    names = [f"in{i}" for i in range(len(inputs))]
    node = helper.make_node(op_type, names, ["out"], **attrs)
    graph = helper.make_graph(
        [node], op_type.lower(),
        [helper.make_tensor_value_info(n, ONNX_DTYPE[dtype], a.shape)
         for n, a in zip(names, inputs)],
        [helper.make_tensor_value_info("out", ONNX_DTYPE[dtype], None)])
    return onnx_model(graph, OPSET, IR_VERSION)


def run_onnx(op_type: str, inputs: list[np.ndarray], attrs: dict, dtype) -> np.ndarray:
    """The oracle: the one-node model run by onnxruntime."""
    model = _model(op_type, inputs, _onnx_attrs(attrs), dtype)
    feeds = {f"in{i}": a for i, a in enumerate(inputs)}
    return ort_session(model.SerializeToString()).run(["out"], feeds)[0]


def run_swir(opname: str, inputs: list[np.ndarray], attrs: dict, dtype) -> np.ndarray:
    args = [Value(TensorType(a.shape, ELEMENT[dtype]), f"x{i}") for i, a in enumerate(inputs)]
    inst = Instruction(opname, args, attrs=dict(attrs))
    result_types = lookup(opname).infer(inst)
    assert len(result_types) == 1
    (out,) = evaluate(opname, attrs, result_types, inputs)
    assert out.dtype == np.dtype(dtype)
    return out


# Products summed by onnxruntime in the input precision (Conv, ConvTranspose and MatMul
# in f32 through MLAS): besides rtol / atol, each element may differ by
# DOT_ULPS * u * sum|x_i * w_i| (u = unit roundoff, 2^-24 for f32, 2^-53 for f64), the
# magnitude being the op applied to |x|, |w| (and |b|). Cancelling sums of 100+ terms
# otherwise miss atol = 1e-6 (seen: k7 conv, error 7.5e-6 on an output of 1e-1). Over
# 5 seeds of every case the worst error was 3.8 u * magnitude (half an ulp of that is
# the f32 rounding of the exact result); the rigorous bound is n * u * magnitude.
DOT_ULPS = 8.0
UNIT_ROUNDOFF = {np.float32: 2.0 ** -24, np.float64: 2.0 ** -53}


def check(opname: str, op_type: str, inputs: list[np.ndarray], attrs: dict, dtype,
          tol: tuple[float, float] | None = None, dot: bool = False) -> None:
    if dtype is np.float64 and op_type in NO_ORT_F64:
        # No f64 oracle (module docstring): f32-representable inputs; swir's f64
        # result must round to exactly its f32 result, which meets onnxruntime's.
        inputs = [a.astype(np.float32).astype(np.float64) for a in inputs]
        got = run_swir(opname, inputs, attrs, dtype)
        inputs, dtype = [a.astype(np.float32) for a in inputs], np.float32
        np.testing.assert_array_equal(got.astype(np.float32),
                                      run_swir(opname, inputs, attrs, dtype))
        tol = None
    before = [a.copy() for a in inputs]
    got = run_swir(opname, inputs, attrs, dtype)
    for a, b in zip(inputs, before):  # kernels never mutate their operands
        np.testing.assert_array_equal(a, b)
    want = run_onnx(op_type, inputs, attrs, dtype)
    assert got.shape == want.shape, f"swir shape rule {got.shape} != onnx {want.shape}"
    rtol, atol = tol if tol is not None else TOL[dtype]
    if dot and dtype in UNIT_ROUNDOFF:
        magnitude = run_swir(opname, [np.abs(a).astype(np.float64) for a in inputs],
                             attrs, np.float64)
        allowed = atol + rtol * np.abs(want) + DOT_ULPS * UNIT_ROUNDOFF[dtype] * magnitude
        err = np.abs(got.astype(np.float64) - want.astype(np.float64))
        bad = ~(err <= allowed)
        i = int(np.argmax(np.where(bad, err - allowed, -np.inf)))
        assert not bad.any(), (
            f"{int(bad.sum())} / {bad.size} elements differ; worst at "
            f"{np.unravel_index(i, err.shape)}: got {got.flat[i]!r}, "
            f"want {want.flat[i]!r}, allowed difference {allowed.flat[i]:.3g}")
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def rng_for(case_id: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(case_id.encode()))


def rand(rng: np.random.Generator, shape, dtype, scale: float = 1.0) -> np.ndarray:
    if np.dtype(dtype).kind == "i":
        return rng.integers(-8, 9, size=shape).astype(dtype)
    return (rng.standard_normal(shape) * scale).astype(dtype)


F32_F64 = [pytest.param(np.float32, id="f32"), pytest.param(np.float64, id="f64")]


# -- matmul --------------------------------------------------------------------------

MATMUL = [  # (id, shape a, shape b)
    ("2d", (3, 4), (4, 5)),
    ("vec-mat", (4,), (4, 5)),
    ("mat-vec", (3, 4), (4,)),
    ("vec-vec", (7,), (7,)),
    ("batch-mat", (2, 3, 4, 5), (5, 6)),
    ("mat-batch", (3, 5), (2, 5, 6)),
    ("vec-batch", (5,), (2, 3, 5, 6)),
    ("batch-vec", (2, 3, 4, 5), (5,)),
    ("batch-bcast", (2, 1, 4, 5), (3, 5, 6)),
    ("batch-bcast-both", (1, 3, 4, 5), (2, 1, 5, 2)),
    ("long-k", (3, 96), (96, 4)),
]


@pytest.mark.parametrize("dtype", F32_F64 + [pytest.param(np.int32, id="i32"),
                                             pytest.param(np.int64, id="i64")])
@pytest.mark.parametrize("sa,sb", [pytest.param(a, b, id=i) for i, a, b in MATMUL])
def test_matmul(request, sa, sb, dtype):
    rng = rng_for(request.node.callspec.id)
    check("matmul", "MatMul", [rand(rng, sa, dtype), rand(rng, sb, dtype)], {}, dtype, dot=True)


# -- conv2d --------------------------------------------------------------------------

CONV = [  # (id, x shape, O, kernel, attrs, bias)
    ("defaults", (1, 3, 7, 6), 4, (3, 3), {}, False),
    ("k1", (3, 4, 5, 7), 6, (1, 1), {"stride": (1, 1)}, True),
    ("k1-s2", (1, 4, 9, 8), 2, (1, 1), {"stride": (2, 2)}, False),
    ("k3-s1-p1", (2, 3, 9, 9), 4, (3, 3), {"pad": (1, 1, 1, 1)}, True),
    ("k3-s2-asym-pad", (3, 4, 11, 9), 4, (3, 3),
     {"stride": (2, 2), "pad": (0, 1, 2, 1)}, True),
    ("k7-s2-p3", (1, 3, 17, 15), 8, (7, 7), {"stride": (2, 2), "pad": (3, 3, 3, 3)}, True),
    ("k3-d2", (1, 4, 13, 11), 4, (3, 3), {"dilation": (2, 2), "pad": (2, 1, 2, 0)}, False),
    ("k3-d2-s2", (3, 2, 15, 17), 3, (3, 3),
     {"stride": (2, 2), "dilation": (2, 2), "pad": (1, 2, 0, 1)}, True),
    ("rect-k1x7-s1x2", (2, 3, 9, 16), 4, (1, 7), {"stride": (1, 2), "pad": (0, 3, 0, 3)}, True),
    ("rect-k5x3-d1x2", (1, 2, 11, 13), 3, (5, 3),
     {"dilation": (1, 2), "stride": (2, 1), "pad": (2, 0, 1, 2)}, False),
    ("g2-k3", (2, 4, 9, 7), 6, (3, 3), {"groups": 2, "pad": (1, 1, 1, 1)}, True),
    ("g2-k7-s2-asym", (2, 4, 17, 13), 4, (7, 7),
     {"groups": 2, "stride": (2, 2), "pad": (3, 2, 1, 0)}, False),
    ("g2-d2-s2", (3, 6, 13, 12), 4, (3, 3),
     {"groups": 2, "stride": (2, 2), "dilation": (2, 2), "pad": (2, 2, 2, 2)}, True),
    ("depthwise-k3-s2", (1, 8, 9, 9), 8, (3, 3),
     {"groups": 8, "stride": (2, 2), "pad": (1, 1, 1, 1)}, True),
    ("depthwise-x2-d2", (3, 4, 7, 9), 8, (3, 3),
     {"groups": 4, "dilation": (2, 2), "pad": (2, 2, 2, 2)}, False),
    ("depthwise-k7-s1", (2, 5, 11, 10), 5, (7, 7), {"groups": 5, "pad": (3, 3, 3, 3)}, True),
    ("all-attrs", (1, 4, 10, 9), 2, (3, 3),
     {"stride": (1, 2), "pad": (0, 0, 1, 1), "dilation": (1, 1), "groups": 2}, True),
]


@pytest.mark.parametrize("dtype", F32_F64)
@pytest.mark.parametrize("xs,o,k,attrs,bias",
                         [pytest.param(*c[1:], id=c[0]) for c in CONV])
def test_conv2d(request, xs, o, k, attrs, bias, dtype):
    rng = rng_for(request.node.callspec.id)
    groups = attrs.get("groups", 1)
    inputs = [rand(rng, xs, dtype), rand(rng, (o, xs[1] // groups) + k, dtype)]
    if bias:
        inputs.append(rand(rng, (o,), dtype))
    check("conv2d", "Conv", inputs, attrs, dtype, dot=True)


# -- conv_transpose2d -----------------------------------------------------------------

CONV_T = [  # (id, x shape, O/groups, kernel, attrs, bias)
    ("defaults", (1, 3, 5, 5), 4, (3, 3), {}, False),
    ("k1-s2-op1", (1, 3, 5, 6), 2, (1, 1), {"stride": (2, 2), "output_padding": (1, 1)}, True),
    ("k3-s2-p1-op1", (2, 4, 7, 7), 3, (3, 3),
     {"stride": (2, 2), "pad": (1, 1, 1, 1), "output_padding": (1, 1)}, True),
    ("k4-s2-p1", (1, 4, 8, 8), 2, (4, 4), {"stride": (2, 2), "pad": (1, 1, 1, 1)}, False),
    ("k3-s2-asym-pad", (3, 2, 5, 7), 3, (3, 3),
     {"stride": (2, 2), "pad": (0, 1, 2, 1), "output_padding": (1, 0)}, True),
    ("k3-s3-op2", (1, 2, 4, 5), 2, (3, 3),
     {"stride": (3, 3), "output_padding": (2, 1), "pad": (1, 0, 0, 2)}, True),
    ("k3-d2-s2", (1, 2, 5, 5), 2, (3, 3),
     {"stride": (2, 2), "dilation": (2, 2), "pad": (1, 1, 1, 1), "output_padding": (1, 1)},
     True),
    ("k7-p3", (1, 2, 5, 5), 3, (7, 7), {"pad": (3, 3, 3, 3)}, False),
    ("rect-k2x5-s2x1", (2, 3, 6, 5), 2, (2, 5), {"stride": (2, 1), "pad": (0, 2, 1, 1)}, True),
    ("g2-k3-s2", (2, 4, 6, 5), 3, (3, 3),
     {"groups": 2, "stride": (2, 2), "pad": (1, 1, 1, 1), "output_padding": (1, 1)}, True),
    ("g2-d2", (3, 6, 5, 7), 2, (3, 3), {"groups": 2, "dilation": (2, 2), "pad": (0, 1, 2, 1)},
     False),
    ("depthwise-k3-s2", (1, 6, 7, 7), 1, (3, 3),
     {"groups": 6, "stride": (2, 2), "pad": (1, 1, 1, 1)}, True),
    ("depthwise-k4-s2", (3, 4, 5, 6), 1, (4, 4), {"groups": 4, "stride": (2, 2)}, False),
]


@pytest.mark.parametrize("dtype", F32_F64)
@pytest.mark.parametrize("xs,og,k,attrs,bias",
                         [pytest.param(*c[1:], id=c[0]) for c in CONV_T])
def test_conv_transpose2d(request, xs, og, k, attrs, bias, dtype):
    rng = rng_for(request.node.callspec.id)
    groups = attrs.get("groups", 1)
    inputs = [rand(rng, xs, dtype), rand(rng, (xs[1], og) + k, dtype)]
    if bias:
        inputs.append(rand(rng, (og * groups,), dtype))
    check("conv_transpose2d", "ConvTranspose", inputs, attrs, dtype, dot=True)


def test_conv_transpose2d_output_padding_below_dilation_only():
    """output_padding 1 with stride 1 and dilation 2: swir accepts it (docs/ir.md:
    "smaller than the stride or the dilation"), onnxruntime rejects it at run time
    ("output_padding (1) may be too large for stride (1)"). output_padding only
    appends zero rows / columns to the full output before the end pads crop it, so
    the oracle is onnxruntime without output_padding and with the end pads reduced by
    it, plus the rows / columns the crop cannot supply (zero plus the bias)."""
    rng = rng_for("convT-op-dilation")
    attrs = {"dilation": (2, 2), "output_padding": (1, 1), "pad": (1, 0, 0, 1)}
    x, w, b = (rand(rng, (2, 3, 5, 4), np.float32), rand(rng, (3, 2, 3, 3), np.float32),
               rand(rng, (2,), np.float32))
    got = run_swir("conv_transpose2d", [x, w, b], attrs, np.float32)
    # H: end pad 0 < output_padding 1, so one extra bottom row of bias;
    # W: end pad 1 absorbs output_padding 1, so ORT's end pad is 0.
    want = run_onnx("ConvTranspose", [x, w, b],
                    {"dilation": (2, 2), "pad": (1, 0, 0, 0)}, np.float32)
    extra = np.broadcast_to(b[None, :, None, None], (2, 2, 1, want.shape[3]))
    want = np.concatenate([want, extra], axis=2)
    assert got.shape == want.shape == (2, 2, 9, 8)
    np.testing.assert_allclose(got, want, *TOL[np.float32])


# -- pooling ---------------------------------------------------------------------------

POOL = [  # (id, x shape, attrs without ceil_mode); each runs with ceil_mode false / true
    ("defaults-k2", (1, 3, 8, 7), {"kernel": (2, 2)}),
    ("k1-s2", (2, 2, 7, 6), {"kernel": (1, 1), "stride": (2, 2)}),
    ("k2-s2", (1, 3, 9, 8), {"kernel": (2, 2), "stride": (2, 2)}),
    ("k2-s2-p1-drop-last", (1, 2, 5, 5), {"kernel": (2, 2), "stride": (2, 2),
                                           "pad": (1, 1, 1, 1)}),
    ("k3-s2-p1", (2, 4, 9, 9), {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1, 1, 1)}),
    ("k3-s2-p1-even", (3, 2, 10, 10), {"kernel": (3, 3), "stride": (2, 2),
                                       "pad": (1, 1, 1, 1)}),
    ("k3-s2-asym-pad", (3, 2, 11, 9), {"kernel": (3, 3), "stride": (2, 2),
                                       "pad": (0, 1, 1, 0)}),
    ("k3-s3-end-pad", (1, 2, 7, 8), {"kernel": (3, 3), "stride": (3, 3),
                                     "pad": (0, 0, 1, 1)}),
    ("k7-s3-p3", (1, 2, 15, 17), {"kernel": (7, 7), "stride": (3, 3), "pad": (3, 3, 3, 3)}),
    ("rect-k2x3-s1x2", (2, 3, 6, 9), {"kernel": (2, 3), "stride": (1, 2),
                                      "pad": (1, 0, 0, 1)}),
    ("rect-k3x1-s2x1", (1, 2, 8, 5), {"kernel": (3, 1), "stride": (2, 1),
                                      "pad": (1, 0, 1, 0)}),
]

MAX_POOL_DILATED = [
    ("k3-d2", (1, 2, 13, 11), {"kernel": (3, 3), "dilation": (2, 2), "pad": (2, 1, 2, 1)}),
    ("k3-d2-s2", (1, 3, 12, 11), {"kernel": (3, 3), "dilation": (2, 2), "stride": (2, 2),
                                  "pad": (1, 1, 1, 1)}),
    ("k2-d3-s2", (3, 2, 10, 9), {"kernel": (2, 2), "dilation": (3, 3), "stride": (2, 2),
                                 "pad": (1, 0, 0, 1)}),
    ("k3-d1x2", (2, 2, 9, 12), {"kernel": (3, 3), "dilation": (1, 2), "stride": (2, 3),
                                "pad": (1, 2, 0, 1)}),
]

CEIL = [pytest.param(False, id="floor"), pytest.param(True, id="ceil")]


@pytest.mark.parametrize("dtype", F32_F64)
@pytest.mark.parametrize("ceil", CEIL)
@pytest.mark.parametrize("xs,attrs",
                         [pytest.param(*c[1:], id=c[0]) for c in POOL + MAX_POOL_DILATED])
def test_max_pool2d(request, xs, attrs, ceil, dtype):
    rng = rng_for(request.node.callspec.id)
    attrs = dict(attrs, ceil_mode=ceil) if ceil else attrs
    # Negative inputs throughout: a padding that counted as 0 would win the max.
    x = -np.abs(rand(rng, xs, dtype)) - 1
    check("max_pool2d", "MaxPool", [x], attrs, dtype)


def test_max_pool2d_window_of_padding_only():
    """With dilation a window's taps can all fall in the padding (H = 1, kernel 2,
    dilation 2, pads 1 / 1: taps at rows -1 and 1). swir's padding acts as -inf
    (docs/ir.md), so the result is -inf; onnxruntime returns the lowest finite f32
    (-3.4028235e38) there."""
    x = np.array([[[[1.5, -2.0, 0.25]]]], np.float32)  # 1 x 1 x 1 x 3
    attrs = {"kernel": (2, 1), "dilation": (2, 1), "pad": (1, 0, 1, 0)}
    got = run_swir("max_pool2d", [x], attrs, np.float32)
    assert got.shape == (1, 1, 1, 3) and np.all(got == -np.inf)
    want = run_onnx("MaxPool", [x], attrs, np.float32)
    assert want.shape == got.shape and np.all(want <= np.finfo(np.float32).min)


@pytest.mark.parametrize("dtype", F32_F64)
@pytest.mark.parametrize("include_pad", [pytest.param(False, id="exclude-pad"),
                                         pytest.param(True, id="include-pad")])
@pytest.mark.parametrize("ceil", CEIL)
@pytest.mark.parametrize("xs,attrs", [pytest.param(*c[1:], id=c[0]) for c in POOL])
def test_avg_pool2d(request, xs, attrs, ceil, include_pad, dtype):
    rng = rng_for(request.node.callspec.id)
    attrs = dict(attrs)
    if ceil:
        attrs["ceil_mode"] = True
    if include_pad:
        attrs["count_include_pad"] = True
    check("avg_pool2d", "AveragePool", [rand(rng, xs, dtype) + 3], attrs, dtype)


def test_avg_pool2d_ceil_window_past_padding_divisor():
    """The divisor when a ceil-mode window runs past the end padding, by hand and
    against onnxruntime (and as docs/ir.md says): with count_include_pad it counts the
    window clipped to the padded input, without it the window clipped to the input."""
    x = np.ones((1, 1, 5, 5), np.float32)
    attrs = {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1, 0, 0), "ceil_mode": True}
    # Output 3 x 3; the last row / column of windows covers rows 3, 4 and one row past
    # the input (no end padding): 2 rows count. The first covers the top padding.
    inc = run_swir("avg_pool2d", [x], dict(attrs, count_include_pad=True), np.float32)
    counts = np.array([2, 3, 2])  # input elements per window, per axis
    padded = np.array([3, 3, 2])  # elements inside the padded input
    np.testing.assert_allclose(inc[0, 0], np.outer(counts, counts) / np.outer(padded, padded),
                               rtol=1e-7)
    exc = run_swir("avg_pool2d", [x], attrs, np.float32)
    np.testing.assert_array_equal(exc, np.ones((1, 1, 3, 3), np.float32))
    for include in (False, True):
        a = dict(attrs, count_include_pad=True) if include else attrs
        np.testing.assert_allclose(run_onnx("AveragePool", [x], a, np.float32),
                                   inc if include else exc, rtol=1e-6)


@pytest.mark.parametrize("dtype", F32_F64)
@pytest.mark.parametrize("xs", [pytest.param((1, 3, 7, 7), id="1x3x7x7"),
                                pytest.param((3, 8, 17, 13), id="3x8x17x13"),
                                pytest.param((2, 4, 1, 1), id="2x4x1x1"),
                                pytest.param((2, 5, 1, 9), id="2x5x1x9")])
def test_global_avg_pool2d(request, xs, dtype):
    rng = rng_for(request.node.callspec.id)
    check("global_avg_pool2d", "GlobalAveragePool", [rand(rng, xs, dtype) + 1], {}, dtype)


# -- random configurations ---------------------------------------------------------
# Beyond the hand-picked cases: configurations drawn with a fixed seed, f32. The draw
# keeps to what onnxruntime accepts (pooling pad < kernel, output_padding < stride);
# those swir's shape rule rejects (kernel larger than the padded input) are redrawn.

def _draw(rng: np.random.Generator, op: str) -> tuple[list[tuple], dict]:
    """(operand shapes, attrs) of one random valid configuration of ``op``."""
    n = int(rng.integers(1, 4))
    h, w = (int(v) for v in rng.integers(3, 15, size=2))
    kern = [int(v) for v in rng.choice([1, 2, 3, 4, 5, 7], size=2)]
    stride = [int(v) for v in rng.integers(1, 4, size=2)]
    dil = [int(v) for v in rng.integers(1, 3, size=2)]
    ext = [d * (k - 1) + 1 for k, d in zip(kern, dil)]
    attrs: dict = {"stride": tuple(stride)}
    if op in ("conv2d", "conv_transpose2d"):
        c = int(rng.choice([1, 2, 3, 4, 6]))
        groups = int(rng.choice([g for g in (1, 2, 3, c) if c % g == 0]))
        mult = int(rng.integers(1, 3))
        attrs.update(groups=groups, dilation=tuple(dil),
                     pad=tuple(int(rng.integers(0, ext[i % 2])) for i in range(4)))
        if op == "conv2d":
            return [(n, c, h, w), (groups * mult, c // groups) + tuple(kern)], attrs
        # onnxruntime wants output_padding < stride
        attrs["output_padding"] = tuple(int(rng.integers(0, s)) for s in stride)
        return [(n, c, h, w), (c, mult) + tuple(kern)], attrs
    c = int(rng.integers(1, 5))
    # swir: pad <= extent // 2; onnxruntime also wants pad < kernel
    if op == "max_pool2d":
        attrs["dilation"] = tuple(dil)
    else:
        ext = kern
    attrs.update(kernel=tuple(kern), ceil_mode=bool(rng.integers(0, 2)),
                 pad=tuple(int(rng.integers(0, min(ext[i % 2] // 2, kern[i % 2] - 1) + 1))
                           for i in range(4)))
    if op == "avg_pool2d":
        attrs["count_include_pad"] = bool(rng.integers(0, 2))
    return [(n, c, h, w)], attrs


def _random_cases(op: str, count: int) -> list:
    rng = np.random.default_rng(zlib.crc32(op.encode()))
    cases = []
    while len(cases) < count:
        shapes, attrs = _draw(rng, op)
        args = [Value(TensorType(sh, F32)) for sh in shapes]
        try:
            lookup(op).infer(Instruction(op, args, attrs=attrs))
        except OpError:
            continue
        cases.append(pytest.param(shapes, attrs, id=f"rand{len(cases):02d}"))
    return cases


ONNX_NAME = {"conv2d": "Conv", "conv_transpose2d": "ConvTranspose",
             "max_pool2d": "MaxPool", "avg_pool2d": "AveragePool"}


@pytest.mark.parametrize("op,shapes,attrs", [
    pytest.param(op, *c.values, id=f"{op}-{c.id}")
    for op in ONNX_NAME for c in _random_cases(op, 30)])
def test_random_configurations(request, op, shapes, attrs):
    rng = rng_for(request.node.callspec.id)
    inputs = [rand(rng, sh, np.float32) for sh in shapes]
    if op in ("conv2d", "conv_transpose2d") and rng.integers(0, 2):
        out_channels = shapes[1][0] if op == "conv2d" else shapes[1][1] * attrs["groups"]
        inputs.append(rand(rng, (out_channels,), np.float32))
    check(op, ONNX_NAME[op], inputs, attrs, np.float32, dot=op.startswith("conv"))


# -- batch_norm ------------------------------------------------------------------------

# ONNX stores epsilon as an f32 attribute, swir as a Python float (f64): the explicit
# epsilons below are exact in f32 (2^-10, 2^-17, 2^-3, 2^-14) so both sides use the same
# value. With the default, swir's 1e-5 and ONNX's f32(1e-5) differ by 2.5e-13, which
# moves y by |(x - mean) * scale| * 0.5 * 2.5e-13 / (var + eps)^1.5: with var >= 0.5 and
# |(x - mean) * scale| < 30 that is < 1e-11, so default-epsilon f64 cases compare at 1e-11.
DEFAULT_EPS_F64_TOL = (1e-11, 1e-11)


def eps_tol(attrs: dict, dtype) -> tuple[float, float] | None:
    return DEFAULT_EPS_F64_TOL if dtype is np.float64 and "epsilon" not in attrs else None


@pytest.mark.parametrize("dtype", F32_F64)
@pytest.mark.parametrize("xs,attrs", [
    pytest.param((3, 5), {}, id="rank2-default-eps"),
    pytest.param((2, 4, 9), {"epsilon": 2.0 ** -10}, id="rank3"),
    pytest.param((3, 8, 7, 9), {}, id="rank4-default-eps"),
    pytest.param((1, 3, 5, 17), {"epsilon": 0.125}, id="rank4-eps0.125"),
    pytest.param((2, 3, 3, 4, 5), {"epsilon": 2.0 ** -14}, id="rank5"),
    pytest.param((2, 6, 4, 3), {"epsilon": 2.0 ** -17}, id="rank4-small-var"),
])
def test_batch_norm(request, xs, attrs, dtype):
    rng = rng_for(request.node.callspec.id)
    c = xs[1]
    var = 1e-4 if "small-var" in request.node.callspec.id else 0.5
    inputs = [rand(rng, xs, dtype, 2.0), rand(rng, (c,), dtype), rand(rng, (c,), dtype),
              rand(rng, (c,), dtype), (rng.random(c) * 2 + var).astype(dtype)]
    check("batch_norm", "BatchNormalization", inputs, attrs, dtype, eps_tol(attrs, dtype))


# -- softmax / log_softmax -----------------------------------------------------------

SOFTMAX = [
    ("1d-default", (9,), {}),
    ("2d-last-default", (3, 7), {}),
    ("2d-axis0", (3, 7), {"axis": 0}),
    ("3d-middle", (2, 5, 7), {"axis": 1}),
    ("3d-middle-neg", (2, 5, 7), {"axis": -2}),
    ("3d-last-neg", (2, 5, 7), {"axis": -1}),
    ("3d-first-neg", (4, 3, 5), {"axis": -3}),
    ("4d-axis2", (2, 3, 6, 4), {"axis": 2}),
]


@pytest.mark.parametrize("dtype", F32_F64)
@pytest.mark.parametrize("scale", [pytest.param(1.0, id="x1"), pytest.param(30.0, id="x30")])
@pytest.mark.parametrize("opname,op_type", [pytest.param("softmax", "Softmax", id="softmax"),
                                            pytest.param("log_softmax", "LogSoftmax",
                                                         id="log_softmax")])
@pytest.mark.parametrize("xs,attrs", [pytest.param(*c[1:], id=c[0]) for c in SOFTMAX])
def test_softmax(request, opname, op_type, xs, attrs, scale, dtype):
    rng = rng_for(request.node.callspec.id)
    # x30: logits spread over hundreds, so the max subtraction matters.
    check(opname, op_type, [rand(rng, xs, dtype, scale)], attrs, dtype)


# -- layer_norm ----------------------------------------------------------------------

LAYER_NORM = [  # (id, x shape, attrs, scale shape, bias shape or None)
    ("last-default", (2, 5, 8), {}, (8,), (8,)),
    ("last-no-bias", (3, 16), {"axis": -1}, (16,), None),
    ("middle", (2, 5, 8), {"axis": 1}, (5, 8), (5, 8)),
    ("middle-neg", (2, 5, 8), {"axis": -2, "epsilon": 2.0 ** -10}, (5, 8), None),
    ("all-axes", (3, 4, 5), {"axis": 0}, (3, 4, 5), (3, 4, 5)),
    ("all-axes-neg", (3, 4, 5), {"axis": -3}, (3, 4, 5), None),
    ("rank4-axis2", (2, 3, 4, 6), {"axis": 2, "epsilon": 2.0 ** -20}, (4, 6), (4, 6)),
    ("small-var-eps", (3, 7), {"epsilon": 0.25}, (7,), (7,)),
    ("bcast-scale-row", (2, 5, 8), {"axis": 1}, (8,), (1, 8)),
    ("bcast-scale-col", (2, 5, 8), {"axis": -2}, (5, 1), (8,)),
    ("bcast-scale-scalar", (4, 6), {"axis": 0}, (1,), (1, 6)),
    ("1d", (10,), {}, (10,), (10,)),
]


@pytest.mark.parametrize("dtype", F32_F64)
@pytest.mark.parametrize("xs,attrs,ss,bs",
                         [pytest.param(*c[1:], id=c[0]) for c in LAYER_NORM])
def test_layer_norm(request, xs, attrs, ss, bs, dtype):
    rng = rng_for(request.node.callspec.id)
    spread = 0.05 if "small-var" in request.node.callspec.id else 3.0
    inputs = [rand(rng, xs, dtype, spread) + 1, rand(rng, ss, dtype)]
    if bs is not None:
        inputs.append(rand(rng, bs, dtype))
    check("layer_norm", "LayerNormalization", inputs, attrs, dtype, eps_tol(attrs, dtype))


# -- gelu ----------------------------------------------------------------------------

SPECIAL = [0.0, -0.0, 1e-30, -1e-30, 0.5, -0.5, 3.0, -3.0, 5.5, -5.5, 9.0, -9.0, 30.0, -30.0]


@pytest.mark.parametrize("dtype", F32_F64)
@pytest.mark.parametrize("attrs", [pytest.param({}, id="default"),
                                   pytest.param({"approximate": "none"}, id="none"),
                                   pytest.param({"approximate": "tanh"}, id="tanh")])
@pytest.mark.parametrize("xs", [pytest.param((4, 9), id="4x9"),
                                pytest.param((2, 3, 5, 7), id="2x3x5x7")])
def test_gelu(request, xs, attrs, dtype):
    rng = rng_for(request.node.callspec.id)
    x = rand(rng, xs, dtype, 3.0)
    x.flat[:len(SPECIAL)] = SPECIAL
    check("gelu", "Gelu", [x], attrs, dtype)


def _gelu_libm(x: np.ndarray, approximate: str) -> np.ndarray:
    """docs/ir.md's gelu composition in f64 with libm; for x < 0 the erf form uses
    1 + erf(x / sqrt 2) = erfc(-x / sqrt 2) so the reference keeps its relative accuracy."""
    out = []
    for v in x.ravel().tolist():
        if approximate == "tanh":
            z = 0.7978845608028654 * (v + 0.044715 * v * v * v)
            out.append(0.5 * v * (1.0 + math.tanh(z)))
        elif v < 0:
            out.append(0.5 * v * math.erfc(-v * 0.7071067811865476))
        else:
            out.append(0.5 * v * (1.0 + math.erf(v * 0.7071067811865476)))
    return np.array(out).reshape(x.shape)


@pytest.mark.parametrize("approximate,tol", [
    # The kernel evaluates the same libm formula; only the final products round.
    pytest.param("none", (1e-15, 0.0), id="none"),
    # The libm reference's 1 + tanh(z) cancels for z << 0 (absolute error ~1e-16 * |x|);
    # the kernel's x / (1 + exp(-2z)) does not.
    pytest.param("tanh", (1e-13, 1e-14), id="tanh")])
def test_gelu_f64_libm(approximate, tol):
    rng = rng_for(f"gelu-libm-{approximate}")
    x = np.concatenate([rng.standard_normal(500) * 4, np.linspace(-12, 12, 481), SPECIAL])
    (y,) = evaluate("gelu", {"approximate": approximate}, [TensorType(x.shape, F64)], [x])
    np.testing.assert_allclose(y, _gelu_libm(x, approximate), rtol=tol[0], atol=tol[1])


def test_erf_matches_math_erf():
    """The vectorised f64 erf the kernels use is libm's (math.erf / math.erfc)."""
    x = np.concatenate([np.linspace(-7.0, 7.0, 40001), np.geomspace(1e-300, 1.0, 200),
                        [0.0, -0.0, 1.999999, 2.0, 2.000001, 26.0, 27.2, 40.0, np.inf]])
    want = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(erf(x), want, rtol=3e-15, atol=0)
    assert math.copysign(1.0, erf(np.array([-0.0]))[0]) == -1.0
    assert np.isnan(erf(np.array([np.nan]))[0])
    assert erf(np.array([-np.inf]))[0] == -1.0
    # gelu's negative tail is 0.5 x erfc(|x| / sqrt 2): relative accuracy down to
    # the f64 underflow.
    xs = -np.linspace(0.01, 37.0, 3001)
    (y,) = evaluate("gelu", {}, [TensorType(xs.shape, F64)], [xs])
    ok = np.abs(_gelu_libm(xs, "none")) > 1e-290
    np.testing.assert_allclose(y[ok], _gelu_libm(xs, "none")[ok], rtol=5e-13)
