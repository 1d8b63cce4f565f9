"""swir-cg end to end on small ONNX-built models: the generated C (``make emu``)
must compute what onnxruntime computes, what swir's graph interpreter
computes, and issue exactly the DMAs the dma-stage interpreter issues.

There is no ONNX importer yet, so every model is written twice, side by side:
as an ONNX graph with ``onnx.helper`` (opset 20, IR version 9, run by
onnxruntime on the CPU with graph optimisations off, as in test_oracle_nn.py)
and as the equivalent graph-stage swir module, sharing the same weights (ONNX
initializers; swir ``global``s: ``dense<...>`` literals for the small ones, a
sidecar ``NAME.weights`` file beside the .swir for the rest). Attribute
spellings follow test_oracle_nn._onnx_attrs: stride -> strides, pad [top,
left, bottom, right] -> pads (same order), dilation -> dilations, groups ->
group, kernel -> kernel_shape; attributes that are ONNX inputs (axes, shape,
pads, scales, split, starts/ends/axes/steps, clip bounds) become int64 / f32
initializers.

For every model and LDM size (64 KB, and 4 KB so that tiles, remainder tiles
and strided DMAs occur; test_small_ldm_changes_the_tiling checks that the two
builds differ), the test
  1. writes the .swir, runs ``swir-cg`` on it (a subprocess) and ``make emu``;
  2. runs the program on the inputs and compares every output with
     onnxruntime (test_matches_onnxruntime) and with swir's graph interpreter
     (test_matches_graph_interpreter);
  3. lowers the module with swir-opt (swir-cg's pipeline: -dce -cse -dce
     -lower-loops -ldm-plan -insert-dma, same --ldm-size; swir-opt's main run
     in this process, which saves an interpreter start), runs that in the
     dma-stage interpreter and requires the program's DMA counters to equal
     the interpreter's exactly (test_dma_counters_match_interpreter).
All projects are generated, compiled and run by a module-scoped fixture, two at
a time (the dma-stage interpreter runs in the same workers, overlapping the
compilers).

Coverage: test_every_graph_op_is_covered checks that the models together use
every op the registry allows at the graph stage, control flow included:
  cnn_block          conv2d (bias, pad, stride), batch_norm, relu, max_pool2d,
                     avg_pool2d, global_avg_pool2d, flatten, matmul, add, softmax
  transformer_block  gather, slice, add, layer_norm, matmul, split, reshape,
                     transpose, const, mul, softmax, gelu, log_softmax
  grouped_convs      depthwise / grouped / dilated conv2d, conv_transpose2d,
                     resize_nearest (integer and fractional), concat, leaky_relu
  pools              ceil-mode and dilated max_pool2d, avg_pool2d with
                     count_include_pad, constant pad, conv2d, sigmoid,
                     resize_nearest, global_avg_pool2d
  reductions         reduce_sum / mean / max / min / prod, argmax, log_softmax,
                     exp, softmax (rank-0 result included)
  unary              abs, neg, relu, exp, log, sqrt, rsqrt, reciprocal, tanh,
                     sigmoid, erf, erfc, floor, ceil, gelu (tanh), clip,
                     leaky_relu, concat of 17
  binary_compare     add, sub, mul, div, max, min, pow, eq, ne, lt, le, gt, ge,
                     and, or, not, select, cast (f32/i32/i8/i16/f64/f16/i1), f16
  integers           i32 / i64 arithmetic, abs, neg, relu, clip, gt, select,
                     matmul, reductions, argmax, slice, gather, cast
  shapes             transpose, reshape, flatten, unsqueeze, squeeze, expand,
                     slice, pad (reflect, edge), split, concat, gather
  float64            matmul, add, tanh, exp, sqrt, sigmoid, log, softmax,
                     log_softmax, layer_norm, mul, reduce_sum / mean, batch_norm,
                     max_pool2d, cast (all f64)
  mlp_call           call (twice), matmul, add, relu, squeeze, softmax
  control_flow       cond_br, br, call, neg (onnx: If)

Ops without an ONNX counterpart, compared with the graph interpreter only:
  - erfc: ONNX has no Erfc (and 1 - Erf(x) cancels, so it is no oracle for
    x > 1; docs/ir.md: "no ONNX op, checked against libm").
All other ops are compared with onnxruntime; those with no single ONNX op are
compared through their exact ONNX equivalent: rsqrt = Reciprocal(Sqrt(x)),
ne = Not(Equal(x, y)), call = the callee's nodes inlined, cond_br / br = If
with two subgraphs, const = an initializer. onnxruntime has no f64 kernel for
Conv, ConvTranspose, AveragePool, GlobalAveragePool, Erf / Gelu, LeakyRelu or
Resize (nor i64 Relu / Resize), so those run in f32 / i32 only.

Tolerances: f32 against onnxruntime rtol 1e-4, atol 1e-5 (TOL); f64 rtol 1e-12,
atol 1e-13 (two f64 computations that differ in summation order and libm);
f16 rtol 2^-10, one f16 ulp (each side rounds each op to f16, onnxruntime
possibly through f32); integers and booleans exactly. Against the graph
interpreter, the specification of the generated code, see INTERP_TOL (f32 rtol
1e-5 plus 1e-6 of the output's largest magnitude: accumulation order) and the
one per-output exception in ``reductions`` (softmax of large logits), which says
why.
"""

from __future__ import annotations

import subprocess
import sys
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from swir.codegen import emulate  # noqa: E402
from swir.interp.loop import io_signature  # noqa: E402
from swir.interp.run import interpreter_for  # noqa: E402
from swir.ir.types import ShapedType  # noqa: E402
from swir.ops.registry import all_ops  # noqa: E402
from swir.parser import parse_module  # noqa: E402
from swir.tools import swir_opt  # noqa: E402
from swir.passes.pipelines import pipeline_flags  # noqa: E402
from helpers import compile_cache, onnx_model, ort_session

OPSET = 20
IR_VERSION = 9
if onnx.defs.onnx_opset_version() < OPSET:  # pragma: no cover
    pytest.skip(f"onnx {onnx.__version__} lacks opset {OPSET}", allow_module_level=True)

pytestmark = pytest.mark.skipif(
    subprocess.run(["sh", "-c", "command -v cc && command -v make"],
                   capture_output=True, check=False).returncode != 0,
    reason="no host C compiler (cc) or make on PATH")

LDM_SIZES = [65536, 4096]
# The small build's LDM where 4 KB would tile a model as 64 KB does: unary's
# 2 KB tensors of scalar libm work are split into 1 KB tiles over CPEs by the
# plan search at 64 KB already (the compute model charges the scalar code).
SMALLER_LDM = {"unary": 2048}
LOWERING = pipeline_flags("graph")   # what swir-cg runs on a graph module
INT64_MAX = 9223372036854775807

# (rtol, atol) against onnxruntime, by dtype.
TOL = {np.dtype(np.float32): (1e-4, 1e-5), np.dtype(np.float64): (1e-12, 1e-13),
       np.dtype(np.float16): (2.0 ** -10, 0.0)}
# Against the graph interpreter: (rtol, a) with atol = a * max(1, max |expected|).
# The lowered loops accumulate matmul, conv and reductions in loop (tile) order,
# numpy in its own (pairwise, BLAS); an element whose sum cancels keeps an
# absolute error of a few ulp of the larger terms, which the largest output
# bounds: for f32, 1e-6 of it is ~8 ulp. Element-wise rtol 1e-5 (~80 ulp) covers
# those differences carried through the models' chains of ops.
INTERP_TOL = {np.dtype(np.float32): (1e-5, 1e-6), np.dtype(np.float64): (1e-12, 1e-14),
              np.dtype(np.float16): (2.0 ** -10, 0.0)}

ONNX_TYPE = {"f16": TensorProto.FLOAT16, "f32": TensorProto.FLOAT, "f64": TensorProto.DOUBLE,
             "i1": TensorProto.BOOL, "i8": TensorProto.INT8, "i16": TensorProto.INT16,
             "i32": TensorProto.INT32, "i64": TensorProto.INT64}
SWIR_TYPE = {np.dtype(np.float16): "f16", np.dtype(np.float32): "f32",
             np.dtype(np.float64): "f64", np.dtype(np.bool_): "i1",
             np.dtype(np.int8): "i8", np.dtype(np.int16): "i16",
             np.dtype(np.int32): "i32", np.dtype(np.int64): "i64"}


# ---------------------------------------------------------------------------
# The two representations of a model
# ---------------------------------------------------------------------------

class Graph:
    """An ONNX graph under construction: ``g("Op", *inputs, **attrs)`` adds a
    node and returns its output name(s); ``g.k(values)`` an int64 (or given
    dtype) initializer for inputs that are attributes in swir."""

    def __init__(self) -> None:
        self.nodes: list = []
        self.inits: list = []
        self._n = 0

    def k(self, values, dtype=np.int64) -> str:
        name = f"_k{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.array(values, dtype=dtype), name))
        return name

    def __call__(self, op: str, *inputs: str, outputs: int = 1, **attrs):
        outs = [f"_t{self._n + i}" for i in range(outputs)]
        self._n += outputs
        self.nodes.append(helper.make_node(op, list(inputs), outs, **attrs))
        return outs[0] if outputs == 1 else outs


@dataclass
class Model:
    name: str
    body: str                          # the swir functions (the globals are generated)
    weights: dict[str, np.ndarray]     # swir global @NAME == ONNX initializer NAME
    inputs: dict[str, np.ndarray]      # swir parameter %NAME == ONNX graph input NAME
    graph: Graph
    # ONNX names of @main's results in order; None: no ONNX counterpart (the key
    # of ``why``), compared with the graph interpreter only.
    outputs: list[str | None]
    why: dict[int, str] = field(default_factory=dict)
    # Per result index: (rtol, atol) against onnxruntime where TOL is not enough
    # (each use says why in its model).
    tol: dict[int, tuple[float, float]] = field(default_factory=dict)
    # The same against the graph interpreter, where INTERP_TOL is not enough.
    interp_tol: dict[int, tuple[float, float]] = field(default_factory=dict)

    def text(self) -> str:
        """The graph-stage module: the globals, then the functions."""
        lines, offset = [], 0
        for n, a in self.weights.items():
            t = swir_type(a.shape, a.dtype)
            if a.size > DENSE_MAX:    # in the sidecar, in this order
                lines.append(f'global @{n} : {t} = file "{self.name}.weights" offset {offset}')
                offset += a.nbytes
            elif a.ndim == 0:
                lines.append(f"global @{n} : {t} = dense<{_literal(a[()])}>")
            else:
                values = ", ".join(_literal(v) for v in a.ravel())
                lines.append(f"global @{n} : {t} = dense<[{values}]>")
        return (f'module "{self.name}"\nstage graph\n\n' + "".join(x + "\n" for x in lines)
                + "\n" + self.body.strip("\n") + "\n")

    def sidecar(self) -> bytes:
        return b"".join(np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
                        for a in self.weights.values() if a.size > DENSE_MAX)

    def onnx_model(self, result_types) -> onnx.ModelProto:
        g = self.graph
        ins = [helper.make_tensor_value_info(n, ONNX_TYPE[SWIR_TYPE[a.dtype]], a.shape)
               for n, a in self.inputs.items()]
        outs = [helper.make_tensor_value_info(n, ONNX_TYPE[t.element.name], t.shape)
                for n, t in zip(self.outputs, result_types) if n is not None]
        inits = [numpy_helper.from_array(a, n) for n, a in self.weights.items()] + g.inits
        graph = helper.make_graph(g.nodes, self.name, ins, outs, inits)
        return onnx_model(graph, OPSET, IR_VERSION)


DENSE_MAX = 16     # weights with at most this many elements are dense<...> literals


def _literal(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (np.integer, int)):
        return str(int(v))
    return repr(float(v))     # exact: the double of an f16 / f32 / f64 value


def swir_type(shape, dtype) -> str:
    return "<" + "".join(f"{d} x " for d in shape) + SWIR_TYPE[np.dtype(dtype)] + ">"


def rng_for(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


def randn(rng, shape, scale=1.0, dtype=np.float32) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(dtype)


def f32(x: float) -> str:
    """A float as the swir literal of its f32 value (what the ONNX side holds)."""
    return repr(float(np.float32(x)))


# ---------------------------------------------------------------------------
# The models
# ---------------------------------------------------------------------------

def cnn_block() -> Model:
    """conv2d (bias, padded, strided) -> batch_norm -> relu -> max_pool2d ->
    avg_pool2d -> global_avg_pool2d -> flatten -> matmul + add -> softmax."""
    rng = rng_for("cnn_block")
    W = {"c1_w": randn(rng, (8, 3, 3, 3), 0.5), "c1_b": randn(rng, (8,)),
         "bn_scale": randn(rng, (8,)), "bn_bias": randn(rng, (8,)),
         "bn_mean": randn(rng, (8,), 0.5), "bn_var": (rng.random(8) + 0.5).astype(np.float32),
         "fc_w": randn(rng, (8, 10)), "fc_b": randn(rng, (10,))}
    X = {"x": randn(rng, (2, 3, 17, 17))}
    g = Graph()
    c = g("Conv", "x", "c1_w", "c1_b", strides=[2, 2], pads=[1, 1, 1, 1])
    # epsilon 2^-10 is exact in ONNX's f32 attribute and in swir's double.
    bn = g("BatchNormalization", c, "bn_scale", "bn_bias", "bn_mean", "bn_var",
           epsilon=2.0 ** -10)
    r = g("Relu", bn)
    mp = g("MaxPool", r, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    ap = g("AveragePool", mp, kernel_shape=[2, 2], pads=[0, 0, 1, 1], count_include_pad=0)
    gp = g("GlobalAveragePool", ap)
    fl = g("Flatten", gp, axis=1)
    fc = g("Add", g("MatMul", fl, "fc_w"), "fc_b")
    p = g("Softmax", fc, axis=-1)
    body = """
func @main(%x: <2 x 3 x 17 x 17 x f32>) -> (<2 x 10 x f32>, <2 x 8 x 5 x 5 x f32>) {
  %c = conv2d %x, @c1_w, @c1_b {stride = [2, 2], pad = [1, 1, 1, 1]} : <2 x 8 x 9 x 9 x f32>
  %bn = batch_norm %c, @bn_scale, @bn_bias, @bn_mean, @bn_var {epsilon = 0.0009765625} : <2 x 8 x 9 x 9 x f32>
  %r = relu %bn : <2 x 8 x 9 x 9 x f32>
  %mp = max_pool2d %r {kernel = [3, 3], stride = [2, 2], pad = [1, 1, 1, 1]} : <2 x 8 x 5 x 5 x f32>
  %ap = avg_pool2d %mp {kernel = [2, 2], pad = [0, 0, 1, 1]} : <2 x 8 x 5 x 5 x f32>
  %gp = global_avg_pool2d %ap : <2 x 8 x 1 x 1 x f32>
  %fl = flatten %gp {axis = 1} : <2 x 8 x f32>
  %mm = matmul %fl, @fc_w : <2 x 10 x f32>
  %fc = add %mm, @fc_b : <2 x 10 x f32>
  %p = softmax %fc {axis = -1} : <2 x 10 x f32>
  return %p, %ap
}
"""
    return Model("cnn_block", body, W, X, g, [p, ap])


def transformer_block() -> Model:
    """Token embedding (gather with negative ids) + a sliced position table ->
    layer_norm -> fused QKV matmul + add -> split -> reshape / transpose into
    3 heads -> batched matmul, scaled by a const, causal mask, softmax ->
    matmul -> heads merged -> projection + residual -> layer_norm -> MLP with
    gelu -> head matmul -> log_softmax. Sequence 7, width 24, MLP 40."""
    rng = rng_for("transformer_block")
    mask = np.triu(np.full((7, 7), -10000.0, np.float32), 1)
    W = {"emb": randn(rng, (20, 24)), "pos": randn(rng, (9, 24), 0.1),
         "ln1_g": (1 + randn(rng, (24,), 0.1)), "ln1_b": randn(rng, (24,), 0.1),
         "wqkv": randn(rng, (24, 72), 0.25), "bqkv": randn(rng, (72,), 0.1),
         "mask": mask, "wo": randn(rng, (24, 24), 0.2),
         "ln2_g": (1 + randn(rng, (24,), 0.1)), "ln2_b": randn(rng, (24,), 0.1),
         "w1": randn(rng, (24, 40), 0.2), "b1": randn(rng, (40,), 0.1),
         "w2": randn(rng, (40, 24), 0.2), "head": randn(rng, (24, 5), 0.5)}
    X = {"ids": rng.integers(-20, 20, size=(2, 7)).astype(np.int64)}
    scale = np.float32(1 / np.sqrt(8))
    g = Graph()
    e = g("Gather", "emb", "ids", axis=0)
    pe = g("Slice", "pos", g.k([0]), g.k([7]), g.k([0]))
    x = g("Add", e, pe)
    h = g("LayerNormalization", x, "ln1_g", "ln1_b", axis=-1, epsilon=1e-5)
    qkv = g("Add", g("MatMul", h, "wqkv"), "bqkv")
    q, k, v = g("Split", qkv, g.k([24, 24, 24]), axis=2, outputs=3)
    qh = g("Transpose", g("Reshape", q, g.k([2, 7, 3, 8])), perm=[0, 2, 1, 3])
    kt = g("Transpose", g("Reshape", k, g.k([0, 0, 3, -1])), perm=[0, 2, 3, 1])
    vh = g("Transpose", g("Reshape", v, g.k([2, 7, 3, 8])), perm=[0, 2, 1, 3])
    s = g("Add", g("Mul", g("MatMul", qh, kt), g.k([scale], np.float32)), "mask")
    a = g("Softmax", s, axis=3)
    o = g("Reshape", g("Transpose", g("MatMul", a, vh), perm=[0, 2, 1, 3]), g.k([2, 7, 24]))
    x2 = g("Add", x, g("MatMul", o, "wo"))
    h2 = g("LayerNormalization", x2, "ln2_g", "ln2_b", axis=-1, epsilon=1e-5)
    f = g("Gelu", g("Add", g("MatMul", h2, "w1"), "b1"))
    y = g("Add", x2, g("MatMul", f, "w2"))
    lp = g("LogSoftmax", g("MatMul", y, "head"), axis=-1)
    # layer_norm's epsilon: swir's double 1e-5 vs ONNX's f32 1e-5 (2.5e-13 apart):
    # an effect of ~1e-12 relative on the normalised values.
    body = f"""
func @main(%ids: <2 x 7 x i64>) -> (<2 x 7 x 24 x f32>, <2 x 7 x 5 x f32>) {{
  %e = gather @emb, %ids {{axis = 0}} : <2 x 7 x 24 x f32>
  %pe = slice @pos {{starts = [0], ends = [7], axes = [0]}} : <7 x 24 x f32>
  %x = add %e, %pe : <2 x 7 x 24 x f32>
  %h = layer_norm %x, @ln1_g, @ln1_b {{axis = -1, epsilon = 1e-05}} : <2 x 7 x 24 x f32>
  %qkv0 = matmul %h, @wqkv : <2 x 7 x 72 x f32>
  %qkv = add %qkv0, @bqkv : <2 x 7 x 72 x f32>
  %q, %k, %v = split %qkv {{axis = 2, sizes = [24, 24, 24]}} : <2 x 7 x 24 x f32>, <2 x 7 x 24 x f32>, <2 x 7 x 24 x f32>
  %q4 = reshape %q {{shape = [2, 7, 3, 8]}} : <2 x 7 x 3 x 8 x f32>
  %qh = transpose %q4 {{perm = [0, 2, 1, 3]}} : <2 x 3 x 7 x 8 x f32>
  %k4 = reshape %k {{shape = [0, 0, 3, -1]}} : <2 x 7 x 3 x 8 x f32>
  %kt = transpose %k4 {{perm = [0, 2, 3, 1]}} : <2 x 3 x 8 x 7 x f32>
  %v4 = reshape %v {{shape = [2, 7, 3, 8]}} : <2 x 7 x 3 x 8 x f32>
  %vh = transpose %v4 {{perm = [0, 2, 1, 3]}} : <2 x 3 x 7 x 8 x f32>
  %s0 = matmul %qh, %kt : <2 x 3 x 7 x 7 x f32>
  %sc = const dense<[{f32(scale)}]> : <1 x f32>
  %s1 = mul %s0, %sc : <2 x 3 x 7 x 7 x f32>
  %s = add %s1, @mask : <2 x 3 x 7 x 7 x f32>
  %a = softmax %s {{axis = 3}} : <2 x 3 x 7 x 7 x f32>
  %o = matmul %a, %vh : <2 x 3 x 7 x 8 x f32>
  %ot = transpose %o {{perm = [0, 2, 1, 3]}} : <2 x 7 x 3 x 8 x f32>
  %oc = reshape %ot {{shape = [2, 7, 24]}} : <2 x 7 x 24 x f32>
  %pr = matmul %oc, @wo : <2 x 7 x 24 x f32>
  %x2 = add %x, %pr : <2 x 7 x 24 x f32>
  %h2 = layer_norm %x2, @ln2_g, @ln2_b {{axis = -1, epsilon = 1e-05}} : <2 x 7 x 24 x f32>
  %f0 = matmul %h2, @w1 : <2 x 7 x 40 x f32>
  %f1 = add %f0, @b1 : <2 x 7 x 40 x f32>
  %f = gelu %f1 : <2 x 7 x 40 x f32>
  %f2 = matmul %f, @w2 : <2 x 7 x 24 x f32>
  %y = add %x2, %f2 : <2 x 7 x 24 x f32>
  %lg = matmul %y, @head : <2 x 7 x 5 x f32>
  %lp = log_softmax %lg {{axis = -1}} : <2 x 7 x 5 x f32>
  return %y, %lp
}}
"""
    return Model("transformer_block", body, W, X, g, [y, lp])


def grouped_convs() -> Model:
    """Depthwise conv2d (channel multiplier 2, dilated, bias) -> grouped conv2d
    (asymmetric pads, stride 2 x 1, no bias) -> grouped conv_transpose2d
    (stride 2, output_padding, bias); beside it resize_nearest of the input;
    concat -> leaky_relu -> a fractional resize_nearest."""
    rng = rng_for("grouped_convs")
    W = {"dw_w": randn(rng, (8, 1, 3, 3), 0.5), "dw_b": randn(rng, (8,)),
         "gw": randn(rng, (6, 4, 3, 3), 0.3),
         "tw": randn(rng, (6, 2, 3, 3), 0.3), "tb": randn(rng, (4,))}
    X = {"x": randn(rng, (1, 4, 10, 10))}
    g = Graph()
    d = g("Conv", "x", "dw_w", "dw_b", pads=[2, 2, 2, 2], dilations=[2, 2], group=4)
    gc = g("Conv", d, "gw", strides=[2, 1], pads=[0, 1, 2, 1], group=2)
    t = g("ConvTranspose", gc, "tw", "tb", strides=[2, 2], pads=[1, 1, 1, 1],
          output_padding=[1, 1], group=2)
    resize = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
              "nearest_mode": "floor"}
    u = g("Resize", "x", "", g.k([1, 1, 1, 2], np.float32), **resize)
    c = g("Concat", t, u, axis=1)
    lr = g("LeakyRelu", c, alpha=0.1)
    r2 = g("Resize", lr, "", g.k([1, 1, 1.5, 0.5], np.float32), **resize)
    body = """
func @main(%x: <1 x 4 x 10 x 10 x f32>) -> (<1 x 8 x 10 x 20 x f32>, <1 x 8 x 15 x 10 x f32>) {
  %d = conv2d %x, @dw_w, @dw_b {pad = [2, 2, 2, 2], dilation = [2, 2], groups = 4} : <1 x 8 x 10 x 10 x f32>
  %g = conv2d %d, @gw {stride = [2, 1], pad = [0, 1, 2, 1], groups = 2} : <1 x 6 x 5 x 10 x f32>
  %t = conv_transpose2d %g, @tw, @tb {stride = [2, 2], pad = [1, 1, 1, 1], output_padding = [1, 1], groups = 2} : <1 x 4 x 10 x 20 x f32>
  %u = resize_nearest %x {scales = [1.0, 1.0, 1.0, 2.0]} : <1 x 4 x 10 x 20 x f32>
  %c = concat %t, %u {axis = 1} : <1 x 8 x 10 x 20 x f32>
  %lr = leaky_relu %c {alpha = 0.1} : <1 x 8 x 10 x 20 x f32>
  %r2 = resize_nearest %lr {scales = [1.0, 1.0, 1.5, 0.5]} : <1 x 8 x 15 x 10 x f32>
  return %lr, %r2
}
"""
    # leaky_relu: swir's alpha is the double 0.1, ONNX's the f32 0.1; the
    # products differ by at most 1.5e-9 relative, far inside rtol.
    return Model("grouped_convs", body, W, X, g, [lr, r2])


def pools() -> Model:
    """Pooling corners: max_pool2d dilated in ceil mode, avg_pool2d in ceil mode
    counting the padding, a constant pad feeding a 1 x 1 conv2d (no bias) and a
    rectangular strided conv2d, sigmoid, resize_nearest x2, global_avg_pool2d."""
    rng = rng_for("pools")
    W = {"pw": randn(rng, (4, 6, 1, 1), 0.5), "rw": randn(rng, (3, 6, 1, 3), 0.4),
         "rb": randn(rng, (3,))}
    X = {"x": randn(rng, (2, 6, 11, 11))}
    g = Graph()
    mp = g("MaxPool", "x", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
           dilations=[2, 2], ceil_mode=1)
    ap = g("AveragePool", "x", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
           ceil_mode=1, count_include_pad=1)
    pd = g("Pad", "x", g.k([0, 0, 1, 1, 0, 0, 1, 1]), g.k(0.5, np.float32), mode="constant")
    sg = g("Sigmoid", g("Conv", pd, "pw"))
    rc = g("Conv", "x", "rw", "rb", strides=[3, 2], pads=[0, 1, 0, 1], dilations=[1, 2])
    up = g("Resize", ap, "", g.k([1, 1, 2, 2], np.float32), mode="nearest",
           coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    gp = g("GlobalAveragePool", mp)
    body = """
func @main(%x: <2 x 6 x 11 x 11 x f32>) -> (<2 x 6 x 5 x 5 x f32>, <2 x 6 x 12 x 12 x f32>, <2 x 4 x 13 x 13 x f32>, <2 x 3 x 4 x 5 x f32>, <2 x 6 x 1 x 1 x f32>) {
  %mp = max_pool2d %x {kernel = [3, 3], stride = [2, 2], pad = [1, 1, 1, 1], dilation = [2, 2], ceil_mode = true} : <2 x 6 x 5 x 5 x f32>
  %ap = avg_pool2d %x {kernel = [3, 3], stride = [2, 2], pad = [1, 1, 1, 1], ceil_mode = true, count_include_pad = true} : <2 x 6 x 6 x 6 x f32>
  %pd = pad %x {pads = [0, 0, 1, 1, 0, 0, 1, 1], mode = "constant", value = 0.5} : <2 x 6 x 13 x 13 x f32>
  %pc = conv2d %pd, @pw : <2 x 4 x 13 x 13 x f32>
  %sg = sigmoid %pc : <2 x 4 x 13 x 13 x f32>
  %rc = conv2d %x, @rw, @rb {stride = [3, 2], pad = [0, 1, 0, 1], dilation = [1, 2]} : <2 x 3 x 4 x 5 x f32>
  %up = resize_nearest %ap {scales = [1.0, 1.0, 2.0, 2.0]} : <2 x 6 x 12 x 12 x f32>
  %gp = global_avg_pool2d %mp : <2 x 6 x 1 x 1 x f32>
  return %mp, %up, %sg, %rc, %gp
}
"""
    return Model("pools", body, W, X, g, [mp, up, sg, rc, gp])


def reductions() -> Model:
    """Every reduction over f32: reduce_sum / _mean / _max / _min / _prod with
    kept and dropped axes, all axes to a rank-0 result, negative axes; argmax
    (dropped and kept axis); softmax and log_softmax along a middle axis."""
    rng = rng_for("reductions")
    X = {"x": randn(rng, (5, 24, 30), 2.0),
         "p": rng.uniform(0.7, 1.4, size=(5, 24, 30)).astype(np.float32)}
    g = Graph()
    s = g("ReduceSum", "x", g.k([1]), keepdims=1)
    mean = g("ReduceMean", "x", g.k([0, 2]), keepdims=0)
    mx = g("ReduceMax", "x", keepdims=0)
    mn = g("ReduceMin", "x", g.k([-1]), keepdims=0)
    pr = g("ReduceProd", "p", g.k([1]), keepdims=1)
    am = g("ArgMax", "x", axis=1, keepdims=0)
    am2 = g("ArgMax", "x", axis=-1, keepdims=1)
    ls = g("LogSoftmax", "x", axis=1)
    sm = g("Softmax", g("ReduceSum", g("Exp", "p"), g.k([2]), keepdims=1), axis=0)
    body = """
func @main(%x: <5 x 24 x 30 x f32>, %p: <5 x 24 x 30 x f32>) -> (<5 x 1 x 30 x f32>, <24 x f32>, <f32>, <5 x 24 x f32>, <5 x 1 x 30 x f32>, <5 x 30 x i64>, <5 x 24 x 1 x i64>, <5 x 24 x 30 x f32>, <5 x 24 x 1 x f32>) {
  %s = reduce_sum %x {axes = [1], keepdims = true} : <5 x 1 x 30 x f32>
  %mean = reduce_mean %x {axes = [0, 2], keepdims = false} : <24 x f32>
  %mx = reduce_max %x {keepdims = false} : <f32>
  %mn = reduce_min %x {axes = [-1], keepdims = false} : <5 x 24 x f32>
  %pr = reduce_prod %p {axes = [1]} : <5 x 1 x 30 x f32>
  %am = argmax %x {axis = 1, keepdims = false} : <5 x 30 x i64>
  %am2 = argmax %x {axis = -1} : <5 x 24 x 1 x i64>
  %ls = log_softmax %x {axis = 1} : <5 x 24 x 30 x f32>
  %e = exp %p : <5 x 24 x 30 x f32>
  %es = reduce_sum %e {axes = [2]} : <5 x 24 x 1 x f32>
  %sm = softmax %es {axis = 0} : <5 x 24 x 1 x f32>
  return %s, %mean, %mx, %mn, %pr, %am, %am2, %ls, %sm
}
"""
    # %sm: softmax over logits %es ~ 90, each a sum of 30 f32 terms that the
    # program adds in another order than numpy (pairwise): the logits differ by
    # a few ulp(90) ~ 1e-5 absolute, which softmax turns into the same relative
    # difference of its outputs (seen: 2.1e-5); onnxruntime's rtol 1e-4 is used.
    return Model("reductions", body, {}, X, g, [s, mean, mx, mn, pr, am, am2, ls, sm],
                 interp_tol={8: (1e-4, 1e-6)})


def unary() -> Model:
    """Every unary element-wise op on f32 (and clip with both / one bound,
    leaky_relu with the default alpha, gelu "tanh"), gathered by a 17-way concat."""
    rng = rng_for("unary")
    x = randn(rng, (8, 64), 2.0)
    X = {"x": x}
    g = Graph()
    a = g("Abs", "x")
    parts = [a, g("Neg", "x"), g("Relu", "x"), g("Exp", g("Neg", a)), g("Log", a),
             g("Sqrt", a), g("Reciprocal", g("Sqrt", a)), g("Reciprocal", "x"),
             g("Tanh", "x"), g("Sigmoid", "x"), g("Erf", "x"), g("Floor", "x"),
             g("Ceil", "x"), g("Gelu", "x", approximate="tanh"),
             g("Clip", "x", g.k(-1.0, np.float32), g.k(0.5, np.float32)),
             g("Clip", "x", g.k(0.0, np.float32)), g("LeakyRelu", "x")]
    cat = g("Concat", *parts, axis=0)
    body = """
func @main(%x: <8 x 64 x f32>) -> (<136 x 64 x f32>, <8 x 64 x f32>) {
  %a = abs %x : <8 x 64 x f32>
  %n = neg %x : <8 x 64 x f32>
  %r = relu %x : <8 x 64 x f32>
  %na = neg %a : <8 x 64 x f32>
  %e = exp %na : <8 x 64 x f32>
  %lg = log %a : <8 x 64 x f32>
  %sq = sqrt %a : <8 x 64 x f32>
  %rs = rsqrt %a : <8 x 64 x f32>
  %rc = reciprocal %x : <8 x 64 x f32>
  %th = tanh %x : <8 x 64 x f32>
  %sg = sigmoid %x : <8 x 64 x f32>
  %ef = erf %x : <8 x 64 x f32>
  %fl = floor %x : <8 x 64 x f32>
  %ce = ceil %x : <8 x 64 x f32>
  %ge = gelu %x {approximate = "tanh"} : <8 x 64 x f32>
  %c2 = clip %x {min = -1.0, max = 0.5} : <8 x 64 x f32>
  %c1 = clip %x {min = 0.0} : <8 x 64 x f32>
  %lr = leaky_relu %x : <8 x 64 x f32>
  %cat = concat %a, %n, %r, %e, %lg, %sq, %rs, %rc, %th, %sg, %ef, %fl, %ce, %ge, %c2, %c1, %lr {axis = 0} : <136 x 64 x f32>
  %ec = erfc %x : <8 x 64 x f32>
  return %cat, %ec
}
"""
    # rsqrt = Reciprocal(Sqrt(x)) rounds twice in ONNX, once in swir: <= 1.5 ulp.
    return Model("unary", body, {}, X, g, [cat, None],
                 why={1: "erfc: ONNX has no Erfc"})



def binary_compare() -> Model:
    """Binary element-wise ops with broadcasting on both sides (add, sub, mul,
    div, max, min, pow with a negative base and a rank-0 exponent), a rank-0
    input, every comparison, and / or / not with an i1 input, select (f32),
    cast f32 -> i32 -> i8 -> i16, f32 -> f64 / f16, i1 -> f32, f16 arithmetic."""
    rng = rng_for("binary_compare")
    # Multiples of 0.5: comparisons meet equal operands, casts exact halves.
    X = {"a": (rng.integers(-6, 7, size=(4, 8, 16)) / 2).astype(np.float32),
         "b": (rng.integers(-6, 7, size=(8, 1)) / 2).astype(np.float32),
         "c": (rng.integers(-6, 7, size=(16,)) / 2).astype(np.float32),
         "t": np.array(1.25, np.float32),
         "mk": rng.random((4, 8, 16)) < 0.3}
    W = {"den": rng.uniform(0.5, 2.0, size=(16,)).astype(np.float32),
         "half": np.array([0.5], np.float32), "three": np.array(3.0, np.float32)}
    g = Graph()
    s = g("Add", "a", "b")
    d = g("Sub", "a", "c")
    m = g("Mul", s, d)
    q = g("Div", m, "den")
    mx = g("Max", "a", "b")
    mn = g("Min", "a", "c")
    pw = g("Pow", g("Add", g("Abs", "a"), "half"), "c")
    cube = g("Pow", g("Mul", "a", "t"), "three")
    bc = g("Add", "b", "c")
    eq = g("Equal", "a", "b")
    ne = g("Not", g("Equal", "a", "c"))
    lt = g("Less", "a", "b")
    le = g("LessOrEqual", "a", "c")
    gt = g("Greater", "a", "b")
    ge = g("GreaterOrEqual", "a", "c")
    an = g("Or", g("And", eq, le), "mk")
    orr = g("Or", g("Or", lt, ne), g("And", gt, ge))
    sel = g("Where", orr, m, q)
    nt = g("Not", an)
    ci = g("Cast", g("Mul", "a", g("Add", "b", "half")), to=TensorProto.INT32)
    c16 = g("Cast", g("Cast", ci, to=TensorProto.INT8), to=TensorProto.INT16)
    cb = g("Add", g("Cast", nt, to=TensorProto.FLOAT), mx)
    cd = g("Cast", pw, to=TensorProto.DOUBLE)
    h = g("Cast", "a", to=TensorProto.FLOAT16)
    hc = g("Cast", "c", to=TensorProto.FLOAT16)
    hm = g("Add", g("Mul", h, hc), h)
    body = """
func @main(%a: <4 x 8 x 16 x f32>, %b: <8 x 1 x f32>, %c: <16 x f32>, %t: <f32>, %mk: <4 x 8 x 16 x i1>) -> (<4 x 8 x 16 x f32>, <4 x 8 x 16 x i1>, <4 x 8 x 16 x i32>, <4 x 8 x 16 x f32>, <4 x 8 x 16 x f64>, <4 x 8 x 16 x f16>, <4 x 8 x 16 x f32>, <4 x 8 x 16 x f32>, <8 x 16 x f32>, <4 x 8 x 16 x i16>) {
  %s = add %a, %b : <4 x 8 x 16 x f32>
  %d = sub %a, %c : <4 x 8 x 16 x f32>
  %m = mul %s, %d : <4 x 8 x 16 x f32>
  %q = div %m, @den : <4 x 8 x 16 x f32>
  %mx = max %a, %b : <4 x 8 x 16 x f32>
  %mn = min %a, %c : <4 x 8 x 16 x f32>
  %aa = abs %a : <4 x 8 x 16 x f32>
  %base = add %aa, @half : <4 x 8 x 16 x f32>
  %pw = pow %base, %c : <4 x 8 x 16 x f32>
  %at = mul %a, %t : <4 x 8 x 16 x f32>
  %cube = pow %at, @three : <4 x 8 x 16 x f32>
  %bc = add %b, %c : <8 x 16 x f32>
  %eq = eq %a, %b : <4 x 8 x 16 x i1>
  %ne = ne %a, %c : <4 x 8 x 16 x i1>
  %lt = lt %a, %b : <4 x 8 x 16 x i1>
  %le = le %a, %c : <4 x 8 x 16 x i1>
  %gt = gt %a, %b : <4 x 8 x 16 x i1>
  %ge = ge %a, %c : <4 x 8 x 16 x i1>
  %an0 = and %eq, %le : <4 x 8 x 16 x i1>
  %an = or %an0, %mk : <4 x 8 x 16 x i1>
  %o1 = or %lt, %ne : <4 x 8 x 16 x i1>
  %a2 = and %gt, %ge : <4 x 8 x 16 x i1>
  %or = or %o1, %a2 : <4 x 8 x 16 x i1>
  %sel = select %or, %m, %q : <4 x 8 x 16 x f32>
  %nt = not %an : <4 x 8 x 16 x i1>
  %bh = add %b, @half : <8 x 1 x f32>
  %ab = mul %a, %bh : <4 x 8 x 16 x f32>
  %ci = cast %ab {to = i32} : <4 x 8 x 16 x i32>
  %c8 = cast %ci {to = i8} : <4 x 8 x 16 x i8>
  %c16 = cast %c8 {to = i16} : <4 x 8 x 16 x i16>
  %nf = cast %nt {to = f32} : <4 x 8 x 16 x f32>
  %cb = add %nf, %mx : <4 x 8 x 16 x f32>
  %cd = cast %pw {to = f64} : <4 x 8 x 16 x f64>
  %h = cast %a {to = f16} : <4 x 8 x 16 x f16>
  %hc = cast %c {to = f16} : <16 x f16>
  %hm0 = mul %h, %hc : <4 x 8 x 16 x f16>
  %hm = add %hm0, %h : <4 x 8 x 16 x f16>
  return %sel, %nt, %ci, %cb, %cd, %hm, %mn, %cube, %bc, %c16
}
"""
    # %cd is pow computed in f32 and then widened: compared at f32's tolerance.
    return Model("binary_compare", body, W, X, g, [sel, nt, ci, cb, cd, hm, mn, cube, bc, c16],
                 tol={4: TOL[np.dtype(np.float32)]})


def control_flow() -> Model:
    """Branches: a function whose CFG picks -u (a block that negates) or v by an
    i1 argument (cond_br / br with block arguments), called once with true and
    once with false; onnx: If with two subgraphs."""
    rng = rng_for("control_flow")
    X = {"p": np.array(True), "q": np.array(False),
         "u": randn(rng, (3, 700)), "v": randn(rng, (3, 700))}
    g = Graph()
    outs = []
    for cond in ("p", "q"):
        then = helper.make_graph(
            [helper.make_node("Neg", ["u"], [f"neg_{cond}"])], f"then_{cond}", [],
            [helper.make_tensor_value_info(f"neg_{cond}", TensorProto.FLOAT, [3, 700])])
        other = helper.make_graph(
            [helper.make_node("Identity", ["v"], [f"id_{cond}"])], f"else_{cond}", [],
            [helper.make_tensor_value_info(f"id_{cond}", TensorProto.FLOAT, [3, 700])])
        outs.append(g("If", cond, then_branch=then, else_branch=other))
    body = """
func @pick(%c: i1, %u: <3 x 700 x f32>, %v: <3 x 700 x f32>) -> <3 x 700 x f32> {
'entry:
  cond_br %c, 'then(%u), 'join(%v)
'then(%t: <3 x 700 x f32>):
  %n = neg %t : <3 x 700 x f32>
  br 'join(%n)
'join(%r: <3 x 700 x f32>):
  return %r
}

func @main(%p: i1, %q: i1, %u: <3 x 700 x f32>, %v: <3 x 700 x f32>) -> (<3 x 700 x f32>, <3 x 700 x f32>) {
  %a = call @pick(%p, %u, %v) : <3 x 700 x f32>
  %b = call @pick(%q, %u, %v) : <3 x 700 x f32>
  return %a, %b
}
"""
    return Model("control_flow", body, {}, X, g, outs)


def integers() -> Model:
    """i32 and i64: arithmetic with broadcasting (div truncating toward zero on
    negative operands), max / min / abs / neg / relu / clip, compare + select,
    matmul, reductions and argmax (ties: the first index), slice, gather with
    negative i32 indices, cast to i64, 64-bit products and sums beyond 2^32."""
    rng = rng_for("integers")
    X = {"a": rng.integers(-50, 50, size=(5, 400)).astype(np.int32),
         "b": (rng.integers(1, 9, size=(400,)) * rng.choice([-1, 1], size=400)).astype(np.int32)}
    W = {"wi": rng.integers(-5, 6, size=(400, 4)).astype(np.int32),
         "idx": np.array([[0, -1], [3, -400], [399, 5]], np.int32),
         "big": rng.integers(10 ** 9, 3 * 10 ** 9, size=(400,)).astype(np.int64),
         "w64": rng.integers(-10 ** 6, 10 ** 6, size=(4, 3)).astype(np.int64)}
    g = Graph()
    s = g("Add", "a", "b")
    d = g("Sub", "a", "b")
    m = g("Mul", "a", "b")
    q = g("Div", "a", "b")
    mx = g("Max", "a", "b")
    mn = g("Min", g("Abs", d), g("Neg", "a"))
    rl = g("Relu", d)
    cl = g("Clip", m, g.k(-100, np.int32), g.k(150, np.int32))
    sel = g("Where", g("Greater", "a", "b"), q, cl)
    mm = g("MatMul", "a", "wi")
    rs = g("ReduceSum", "a", g.k([0]), keepdims=1)
    rmx = g("ReduceMax", mx, g.k([1]), keepdims=0)
    rmn = g("ReduceMin", mn, g.k([0]), keepdims=0)
    bc = g("Slice", g("Clip", "b", g.k(-2, np.int32), g.k(2, np.int32)), g.k([0]), g.k([12]))
    rp = g("ReduceProd", bc, keepdims=0)
    am = g("ArgMax", rl, axis=0, keepdims=0)
    ga = g("Gather", s, "idx", axis=1)
    c64 = g("Cast", mm, to=TensorProto.INT64)
    big = g("Mul", g("Cast", "a", to=TensorProto.INT64), "big")
    bs = g("ReduceSum", big, g.k([1]), keepdims=0)
    mm64 = g("MatMul", c64, "w64")
    body = """
func @main(%a: <5 x 400 x i32>, %b: <400 x i32>) -> (<5 x 400 x i32>, <5 x 4 x i32>, <1 x 400 x i32>, <5 x i32>, <400 x i32>, <i32>, <400 x i64>, <5 x 3 x 2 x i32>, <5 x i64>, <5 x 3 x i64>, <5 x 400 x i32>) {
  %s = add %a, %b : <5 x 400 x i32>
  %d = sub %a, %b : <5 x 400 x i32>
  %m = mul %a, %b : <5 x 400 x i32>
  %q = div %a, %b : <5 x 400 x i32>
  %mx = max %a, %b : <5 x 400 x i32>
  %ad = abs %d : <5 x 400 x i32>
  %na = neg %a : <5 x 400 x i32>
  %mn = min %ad, %na : <5 x 400 x i32>
  %rl = relu %d : <5 x 400 x i32>
  %cl = clip %m {min = -100, max = 150} : <5 x 400 x i32>
  %gt = gt %a, %b : <5 x 400 x i1>
  %sel = select %gt, %q, %cl : <5 x 400 x i32>
  %mm = matmul %a, @wi : <5 x 4 x i32>
  %rs = reduce_sum %a {axes = [0]} : <1 x 400 x i32>
  %rmx = reduce_max %mx {axes = [1], keepdims = false} : <5 x i32>
  %rmn = reduce_min %mn {axes = [0], keepdims = false} : <400 x i32>
  %bcl = clip %b {min = -2, max = 2} : <400 x i32>
  %bc = slice %bcl {starts = [0], ends = [12]} : <12 x i32>
  %rp = reduce_prod %bc {keepdims = false} : <i32>
  %am = argmax %rl {axis = 0, keepdims = false} : <400 x i64>
  %ga = gather %s, @idx {axis = 1} : <5 x 3 x 2 x i32>
  %c64 = cast %mm {to = i64} : <5 x 4 x i64>
  %a64 = cast %a {to = i64} : <5 x 400 x i64>
  %big = mul %a64, @big : <5 x 400 x i64>
  %bs = reduce_sum %big {axes = [1], keepdims = false} : <5 x i64>
  %mm64 = matmul %c64, @w64 : <5 x 3 x i64>
  return %sel, %mm, %rs, %rmx, %rmn, %rp, %am, %ga, %bs, %mm64, %mn
}
"""
    return Model("integers", body, W, X, g, [sel, mm, rs, rmx, rmn, rp, am, ga, bs, mm64, mn])


def shapes() -> Model:
    """Injective ops: transpose (default and given perm), reshape (with -1),
    flatten, unsqueeze / squeeze (all unit axes and given ones), expand
    (bidirectional broadcast), slice (negative start and step, stride, clamped
    ends), pad in reflect / edge modes, split into unequal parts re-concatenated
    in another order, gather along a middle axis with 2-D and rank-0 indices."""
    rng = rng_for("shapes")
    X = {"x": randn(rng, (2, 4, 12, 20))}
    W = {"col": randn(rng, (3, 1)), "gidx": np.array([[1, -1, 4], [0, 7, -8]], np.int64),
         "gone": np.array(-2, np.int64)}
    g = Graph()
    t = g("Transpose", "x")
    r = g("Reshape", g("Transpose", "x", perm=[0, 3, 1, 2]), g.k([20, -1]))
    f = g("Flatten", "x", axis=2)
    us = g("Unsqueeze", f, g.k([0, -1]))
    sq = g("Squeeze", us)
    sq2 = g("Squeeze", us, g.k([3]))
    e = g("Expand", "col", g.k([2, 1, 5]))
    sl = g("Slice", "x", g.k([-1, 1]), g.k([0, 100]), g.k([2, -1]), g.k([-2, 3]))
    sl2 = g("Slice", "x", g.k([0]), g.k([INT64_MAX]), g.k([1]), g.k([2]))
    p1 = g("Pad", "x", g.k([0, 0, 1, 2, 0, 0, 2, 1]), mode="reflect")
    p2 = g("Pad", "x", g.k([0, 1, 0, 1, 1, 0, 1, 0]), mode="edge")
    a, b, c = g("Split", "x", g.k([2, 11, 7]), axis=3, outputs=3)
    cc = g("Concat", c, a, b, axis=-1)
    gi = g("Gather", "x", "gidx", axis=2)
    go = g("Gather", cc, "gone", axis=1)
    body = """
func @main(%x: <2 x 4 x 12 x 20 x f32>) -> (<20 x 12 x 4 x 2 x f32>, <20 x 96 x f32>, <8 x 240 x f32>, <1 x 8 x 240 x f32>, <2 x 3 x 5 x f32>, <2 x 4 x 6 x 7 x f32>, <2 x 2 x 12 x 20 x f32>, <2 x 4 x 15 x 23 x f32>, <3 x 5 x 13 x 21 x f32>, <2 x 4 x 2 x 3 x 20 x f32>, <2 x 12 x 20 x f32>) {
  %t = transpose %x : <20 x 12 x 4 x 2 x f32>
  %t2 = transpose %x {perm = [0, 3, 1, 2]} : <2 x 20 x 4 x 12 x f32>
  %r = reshape %t2 {shape = [20, -1]} : <20 x 96 x f32>
  %f = flatten %x {axis = 2} : <8 x 240 x f32>
  %us = unsqueeze %f {axes = [0, -1]} : <1 x 8 x 240 x 1 x f32>
  %sq = squeeze %us : <8 x 240 x f32>
  %sq2 = squeeze %us {axes = [3]} : <1 x 8 x 240 x f32>
  %e = expand @col {shape = [2, 1, 5]} : <2 x 3 x 5 x f32>
  %sl = slice %x {starts = [-1, 1], ends = [0, 100], axes = [2, -1], steps = [-2, 3]} : <2 x 4 x 6 x 7 x f32>
  %sl2 = slice %x {starts = [0], ends = [9223372036854775807], axes = [1], steps = [2]} : <2 x 2 x 12 x 20 x f32>
  %p1 = pad %x {pads = [0, 0, 1, 2, 0, 0, 2, 1], mode = "reflect"} : <2 x 4 x 15 x 23 x f32>
  %p2 = pad %x {pads = [0, 1, 0, 1, 1, 0, 1, 0], mode = "edge"} : <3 x 5 x 13 x 21 x f32>
  %a, %b, %c = split %x {axis = 3, sizes = [2, 11, 7]} : <2 x 4 x 12 x 2 x f32>, <2 x 4 x 12 x 11 x f32>, <2 x 4 x 12 x 7 x f32>
  %cc = concat %c, %a, %b {axis = -1} : <2 x 4 x 12 x 20 x f32>
  %gi = gather %x, @gidx {axis = 2} : <2 x 4 x 2 x 3 x 20 x f32>
  %go = gather %cc, @gone {axis = 1} : <2 x 12 x 20 x f32>
  return %t, %r, %sq, %sq2, %e, %sl, %sl2, %p1, %p2, %gi, %go
}
"""
    return Model("shapes", body, W, X, g, [t, r, sq, sq2, e, sl, sl2, p1, p2, gi, go])


def float64() -> Model:
    """An f64 block where onnxruntime has f64 kernels: matmul + add, tanh,
    sigmoid, exp, log, sqrt, softmax, log_softmax, layer_norm, reductions,
    batch_norm and max_pool2d, cast down to f32."""
    rng = rng_for("float64")
    W = {"w64": randn(rng, (40, 24), 0.5, np.float64), "b64": randn(rng, (24,), 1, np.float64),
         "g64": 1 + randn(rng, (24,), 0.1, np.float64), "bb64": randn(rng, (24,), 0.1, np.float64),
         "sc": randn(rng, (4,), 1, np.float64), "bi": randn(rng, (4,), 1, np.float64),
         "mu": randn(rng, (4,), 1, np.float64), "var": rng.uniform(0.5, 2, 4)}
    X = {"x": randn(rng, (6, 40), 1, np.float64), "img": randn(rng, (2, 4, 9, 11), 1, np.float64)}
    g = Graph()
    a = g("Add", g("MatMul", "x", "w64"), "b64")
    t = g("Tanh", a)
    e = g("Sqrt", g("Exp", t))
    l = g("Log", g("Sigmoid", a))
    sm = g("Softmax", a, axis=1)
    ls = g("LogSoftmax", a, axis=0)
    ln = g("LayerNormalization", a, "g64", "bb64", axis=-1, epsilon=2.0 ** -10)
    rs = g("ReduceSum", g("Mul", e, l), g.k([1]), keepdims=0)
    rm = g("ReduceMean", ln, g.k([0]), keepdims=1)
    bn = g("BatchNormalization", "img", "sc", "bi", "mu", "var", epsilon=2.0 ** -10)
    mp = g("MaxPool", bn, kernel_shape=[2, 3], strides=[2, 2], pads=[1, 1, 0, 1])
    c32 = g("Cast", sm, to=TensorProto.FLOAT)
    body = """
func @main(%x: <6 x 40 x f64>, %img: <2 x 4 x 9 x 11 x f64>) -> (<6 x 24 x f64>, <6 x 24 x f64>, <6 x f64>, <1 x 24 x f64>, <2 x 4 x 5 x 6 x f64>, <6 x 24 x f32>) {
  %m = matmul %x, @w64 : <6 x 24 x f64>
  %a = add %m, @b64 : <6 x 24 x f64>
  %t = tanh %a : <6 x 24 x f64>
  %et = exp %t : <6 x 24 x f64>
  %e = sqrt %et : <6 x 24 x f64>
  %sg = sigmoid %a : <6 x 24 x f64>
  %l = log %sg : <6 x 24 x f64>
  %sm = softmax %a {axis = 1} : <6 x 24 x f64>
  %ls = log_softmax %a {axis = 0} : <6 x 24 x f64>
  %ln = layer_norm %a, @g64, @bb64 {axis = -1, epsilon = 0.0009765625} : <6 x 24 x f64>
  %el = mul %e, %l : <6 x 24 x f64>
  %rs = reduce_sum %el {axes = [1], keepdims = false} : <6 x f64>
  %rm = reduce_mean %ln {axes = [0]} : <1 x 24 x f64>
  %bn = batch_norm %img, @sc, @bi, @mu, @var {epsilon = 0.0009765625} : <2 x 4 x 9 x 11 x f64>
  %mp = max_pool2d %bn {kernel = [2, 3], stride = [2, 2], pad = [1, 1, 0, 1]} : <2 x 4 x 5 x 6 x f64>
  %c32 = cast %sm {to = f32} : <6 x 24 x f32>
  return %sm, %ls, %rs, %rm, %mp, %c32
}
"""
    return Model("float64", body, W, X, g, [sm, ls, rs, rm, mp, c32])


def mlp_call() -> Model:
    """An MLP whose hidden layer is a function called twice (call; onnx: the
    callee's nodes inlined), weights named as a model author would (@w, @b),
    squeeze of a unit axis and a final softmax."""
    rng = rng_for("mlp_call")
    W = {"w": randn(rng, (48, 48), 0.2), "b": randn(rng, (48,), 0.1),
         "w_out": randn(rng, (48, 4), 0.3)}
    X = {"x": randn(rng, (1, 6, 48))}
    g = Graph()
    h = "x"
    for _ in range(2):
        h = g("Relu", g("Add", g("MatMul", h, "w"), "b"))
    y = g("Softmax", g("MatMul", g("Squeeze", h, g.k([0])), "w_out"), axis=-1)
    body = """
func @layer(%h: <1 x 6 x 48 x f32>) -> <1 x 6 x 48 x f32> {
  %m = matmul %h, @w : <1 x 6 x 48 x f32>
  %a = add %m, @b : <1 x 6 x 48 x f32>
  %r = relu %a : <1 x 6 x 48 x f32>
  return %r
}

func @main(%x: <1 x 6 x 48 x f32>) -> <6 x 4 x f32> {
  %h1 = call @layer(%x) : <1 x 6 x 48 x f32>
  %h2 = call @layer(%h1) : <1 x 6 x 48 x f32>
  %s = squeeze %h2 {axes = [0]} : <6 x 48 x f32>
  %o = matmul %s, @w_out : <6 x 4 x f32>
  %y = softmax %o : <6 x 4 x f32>
  return %y
}
"""
    return Model("mlp_call", body, W, X, g, [y])


# ---------------------------------------------------------------------------
# Compiling, running and the references
# ---------------------------------------------------------------------------

MODELS = [cnn_block, transformer_block, grouped_convs, pools, reductions, unary,
          binary_compare, integers, shapes, float64, mlp_call, control_flow]


class StageError(Exception):
    """A tool or the program failed; the message has its output."""


def _tool(args: list[str], what: str) -> None:
    # The installed console script: `python -m` from the source tree would
    # import the tree's swir/, which has no tools/ package.
    tool = str(Path(sys.executable).with_name(args[0].rsplit(".", 1)[1].replace("_", "-")))
    r = subprocess.run([tool, *args[1:]], capture_output=True, text=True,
                       timeout=300, check=False)
    if r.returncode != 0:
        raise StageError(f"{what} failed (status {r.returncode}):\n{r.stdout}{r.stderr}")


@dataclass
class Built:
    """One model compiled and run at one LDM size."""
    outputs: list[np.ndarray]          # the program's, shaped as @main's results
    counters: dict                     # emulate.dma_counters of its --stats
    interp_counters: dict              # the dma-stage interpreter's


@dataclass
class Reference:
    onnx: list[np.ndarray | None]      # onnxruntime's (None: no ONNX counterpart)
    graph: list[np.ndarray]            # the graph interpreter's


@dataclass
class Case:
    model: Model
    path: Path                          # the .swir (sidecar beside it)
    args: list[np.ndarray]
    result_types: list


def _prepare(m: Model, root: Path) -> Case:
    d = root / m.name
    d.mkdir()
    path = d / f"{m.name}.swir"
    path.write_text(m.text())
    (d / f"{m.name}.weights").write_bytes(m.sidecar())
    module = parse_module(path.read_text(), str(path))
    main = module.lookup("main")
    names = [p.name for p in main.params]
    assert names == list(m.inputs), f"{m.name}: @main's parameters {names} != {list(m.inputs)}"
    return Case(m, path, list(m.inputs.values()), list(main.result_types))


def _shape(t) -> tuple:
    return tuple(t.shape) if isinstance(t, ShapedType) else ()


def _build(case: Case, ldm: int) -> Built:
    m, d = case.model, case.path.parent
    if ldm == min(LDM_SIZES):
        ldm = SMALLER_LDM.get(m.name, ldm)
    project = d / f"project_{ldm}"
    _tool(["swir.tools.swir_cg", str(case.path), "-o", str(project), f"--ldm-size={ldm}"],
          "swir-cg")
    program = emulate.build(project, m.name)
    lowered = d / f"{m.name}.dma_{ldm}.swir"
    # swir-opt's main in this process (its diagnostics raise here): a second
    # interpreter start per build would cost more than the lowering.
    assert swir_opt.main([*LOWERING, f"--ldm-size={ldm}", str(case.path),
                          "-o", str(lowered)]) == 0
    dma = parse_module(lowered.read_text(), str(lowered))
    ins, outs = io_signature(dma.lookup("main"))
    run = emulate.run(program, case.args, [p.type for p in ins], outs)
    outputs = []
    for o, t in zip(run.outputs, case.result_types):
        assert o.size == int(np.prod(_shape(t))), (o.shape, t)
        outputs.append(o.reshape(_shape(t)))
    interp = interpreter_for(dma, d)
    # A rank-0 tensor is a buf<1 x T> from the loop stage on.
    interp.run("main", [a.reshape(_shape(p.type)) for a, p in zip(case.args, ins)])
    return Built(outputs, emulate.dma_counters(run.stats), emulate.dma_counters(interp.stats()))


def _reference(case: Case) -> Reference:
    m = case.model
    module = parse_module(case.path.read_text(), str(case.path))
    graph = interpreter_for(module, case.path.parent).run("main", case.args)
    proto = m.onnx_model(case.result_types)
    # Valid ONNX, and its shape inference agrees with the swir result types.
    onnx.checker.check_model(proto, full_check=True)
    sess = ort_session(proto.SerializeToString())
    names = [n for n in m.outputs if n is not None]
    got = dict(zip(names, sess.run(names, m.inputs)))
    return Reference([got[n] if n is not None else None for n in m.outputs], graph)


def _done(fn, *args) -> Future:
    """fn(*args) run now, as a completed future (its exception kept for the test)."""
    f: Future = Future()
    try:
        f.set_result(fn(*args))
    except Exception as e:  # noqa: BLE001  (re-raised by the test that asks)
        f.set_exception(e)
    return f


@pytest.fixture(scope="module")
def compiled(tmp_path_factory, compile_cache_dir):
    """{model name: (case, reference future, {ldm: built future})}. The references
    are computed first, in this thread. Then every
    (model, LDM size) is compiled, built and run, two at a time. Under the
    compile cache: swir-opt's lowering for the interpreter reads the plans
    swir-cg searched for the same module and LDM size (a third of a build's
    CPU, issue 42) instead of searching again."""
    root = tmp_path_factory.mktemp("codegen_onnx")
    cases = [_prepare(make(), root) for make in MODELS]
    refs = {c.model.name: _done(_reference, c) for c in cases}
    with compile_cache(compile_cache_dir):
        pool = ThreadPoolExecutor(max_workers=2)
        out = {c.model.name: (c, refs[c.model.name],
                              {ldm: pool.submit(_build, c, ldm) for ldm in LDM_SIZES})
               for c in cases}
        yield out
        pool.shutdown(wait=True, cancel_futures=True)


MODEL_IDS = [make.__name__ for make in MODELS]
# Known generator bugs, by model (every test of the model fails with it).
XFAIL: dict[str, str] = {}


def _marks(name: str) -> list:
    reason = XFAIL.get(name)
    return ([pytest.mark.xfail(strict=True, raises=emulate.EmulationError, reason=reason)]
            if reason else [])


def _params():
    return [pytest.param(name, ldm, id=f"{name}-ldm{ldm}", marks=_marks(name))
            for name in MODEL_IDS for ldm in LDM_SIZES]


def _compare(got: np.ndarray, want: np.ndarray, tol: tuple[float, float], what: str) -> None:
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got, want, rtol=tol[0], atol=tol[1], err_msg=what)


@pytest.mark.parametrize("name,ldm", _params())
def test_matches_onnxruntime(compiled, name, ldm):
    case, ref, builds = compiled[name]
    built, ref = builds[ldm].result(), ref.result()
    m = case.model
    assert len(built.outputs) == len(ref.onnx) == len(case.result_types)
    for i, (got, want) in enumerate(zip(built.outputs, ref.onnx)):
        if want is None:
            assert i in m.why
            continue
        tol = m.tol.get(i, TOL.get(got.dtype, (0, 0)))
        _compare(got, want, tol, f"{name} result {i} ({case.result_types[i]}) vs onnxruntime")


@pytest.mark.parametrize("name,ldm", _params())
def test_matches_graph_interpreter(compiled, name, ldm):
    case, ref, builds = compiled[name]
    built, ref = builds[ldm].result(), ref.result()
    assert len(built.outputs) == len(ref.graph) == len(case.result_types)
    for i, (got, want) in enumerate(zip(built.outputs, ref.graph)):
        rtol, a = case.model.interp_tol.get(i, INTERP_TOL.get(got.dtype, (0, 0)))
        scale = max(1.0, float(np.max(np.abs(want)))) if want.dtype.kind == "f" else 0.0
        tol = (rtol, a * scale)
        _compare(got, want, tol, f"{name} result {i} ({case.result_types[i]}) vs interpreter")


@pytest.mark.parametrize("name,ldm", _params())
def test_dma_counters_match_interpreter(compiled, name, ldm):
    built = compiled[name][2][ldm].result()
    assert built.counters, "the program issued no DMA"
    assert built.counters == built.interp_counters


@pytest.mark.parametrize("name", [pytest.param(n, marks=_marks(n)) for n in MODEL_IDS])
def test_small_ldm_changes_the_tiling(compiled, name):
    """The 4 KB build is not the 64 KB one again: its DMA pattern differs (more,
    smaller tiles; remainders), so both tilings were checked."""
    builds = compiled[name][2]
    small, large = builds[min(LDM_SIZES)].result(), builds[max(LDM_SIZES)].result()
    assert small.counters != large.counters


def test_every_graph_op_is_covered():
    """The models together use every op the registry allows at the graph stage:
    the tensor ops and element-wise ops, const, and the control flow (call, br,
    cond_br, return)."""
    # fused groups are made by -fuse, collectives by -distribute, gradients
    # (*_grad) by -differentiate and the training ops (composite) by
    # -train-step, not by the importer (test_fuse.py; test_distribute.py,
    # test_mpi_emulation.py; test_*_grad.py; test_training_*.py)
    want = {o.name for o in all_ops()
            if "graph" in o.stages and o.category != "collective" and not o.composite
            and not o.name.endswith("_grad")} - {"fused", "yield"}
    used = set()
    for make in MODELS:
        m = make()
        module = parse_module(m.text(), m.name)
        for f in module.functions:
            for block in f.body.blocks:
                used.update(inst.opname for inst in block.instructions)
    assert want - used == set(), f"graph ops no model uses: {sorted(want - used)}"
