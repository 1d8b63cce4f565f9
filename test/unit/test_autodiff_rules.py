"""Every adjoint rule against PyTorch autograd (f32 and f64) and against
central finite differences in f64, through the graph interpreter.

Each case is one op applied to random operands; its gradient is declared
seedable (the vector-Jacobian product with a random seed), written by
-differentiate and run by the interpreter. PyTorch computes the same
product with ``backward(seed)``. The finite-difference check is directional:
<VJP, v> against <seed, (f(x + eps v) - f(x - eps v)) / 2 eps>.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from swir.interp.run import run_function
from swir.ir.builder import Builder
from swir.ir.core import Function, Module, SymbolRef
from swir.ir.types import F32, F64, I1, I64, TensorType
from swir.passes import pass_class
from swir.passes.manager import PassManager
from swir.verifier import verify

from helpers import rng_for

torch = pytest.importorskip("torch", reason="PyTorch is in the test extra")
F = torch.nn.functional


def _sym_pad(pad):
    """F.conv2d's padding from swir's [top, left, bottom, right] (symmetric here)."""
    assert pad[0] == pad[2] and pad[1] == pad[3]
    return (pad[0], pad[1])


def _bn(x, scale, bias, mean, var):
    """Inference batch norm written out (F.batch_norm takes no gradient for
    the running statistics, which swir's rule also gives)."""
    def c(v):
        return v.reshape(1, -1, 1, 1)
    return (x - c(mean)) * c(scale) / torch.sqrt(c(var) + 1e-5) + c(bias)


# (id, op, operand shapes, attrs, torch function, operand kinds): kinds
# "n" normal, "p" positive (away from 0), "i" no-grad operand, "l" labels
# (integers below the first operand's dimension 1), "b" a boolean mask.
# (Multi-result ops: the gradient of result 0.)
CASES = [
    ("add", "add", [(3, 4), (4,)], {}, lambda a, b: a + b, "nn"),
    ("sub", "sub", [(2, 1, 4), (3, 1)], {}, lambda a, b: a - b, "nn"),
    ("mul", "mul", [(3, 4), (3, 1)], {}, lambda a, b: a * b, "nn"),
    ("div", "div", [(3, 4), (4,)], {}, lambda a, b: a / b, "np"),
    ("pow", "pow", [(3, 4), (3, 4)], {}, torch.pow, "pn"),
    ("max", "max", [(3, 4), (4,)], {}, torch.maximum, "nn"),
    ("min", "min", [(3, 4), (3, 4)], {}, torch.minimum, "nn"),
    ("neg", "neg", [(5,)], {}, torch.neg, "n"),
    ("abs", "abs", [(5, 3)], {}, torch.abs, "n"),
    ("exp", "exp", [(5, 3)], {}, torch.exp, "n"),
    ("log", "log", [(5, 3)], {}, torch.log, "p"),
    ("sqrt", "sqrt", [(5, 3)], {}, torch.sqrt, "p"),
    ("rsqrt", "rsqrt", [(5, 3)], {}, torch.rsqrt, "p"),
    ("reciprocal", "reciprocal", [(5, 3)], {}, torch.reciprocal, "p"),
    ("tanh", "tanh", [(5, 3)], {}, torch.tanh, "n"),
    ("sigmoid", "sigmoid", [(5, 3)], {}, torch.sigmoid, "n"),
    ("erf", "erf", [(5, 3)], {}, torch.erf, "n"),
    ("erfc", "erfc", [(5, 3)], {}, torch.erfc, "n"),
    ("relu", "relu", [(5, 3)], {}, torch.relu, "n"),
    ("leaky_relu", "leaky_relu", [(5, 3)], {"alpha": 0.2}, lambda x: F.leaky_relu(x, 0.2), "n"),
    ("clip", "clip", [(5, 3)], {"min": -0.5, "max": 0.7}, lambda x: x.clamp(-0.5, 0.7), "n"),
    ("clip_min", "clip", [(5, 3)], {"min": 0.1}, lambda x: x.clamp(min=0.1), "n"),
    ("gelu", "gelu", [(5, 3)], {}, F.gelu, "n"),
    ("gelu_tanh", "gelu", [(5, 3)], {"approximate": "tanh"},
     lambda x: F.gelu(x, approximate="tanh"), "n"),
    ("matmul", "matmul", [(3, 5), (5, 2)], {}, torch.matmul, "nn"),
    ("matmul_batch", "matmul", [(2, 3, 5), (5, 4)], {}, torch.matmul, "nn"),
    ("matmul_bcast", "matmul", [(2, 1, 3, 5), (4, 5, 2)], {}, torch.matmul, "nn"),
    ("matmul_vec", "matmul", [(5,), (2, 5, 3)], {}, torch.matmul, "nn"),
    ("matmul_vec_right", "matmul", [(4, 5), (5,)], {}, torch.matmul, "nn"),
    ("conv2d", "conv2d", [(2, 3, 7, 6), (4, 3, 3, 3), (4,)], {"pad": [1, 1, 1, 1]},
     lambda x, w, b: F.conv2d(x, w, b, padding=1), "nnn"),
    ("conv2d_stride", "conv2d", [(2, 4, 9, 8), (6, 2, 3, 2)],
     {"stride": [2, 3], "pad": [1, 0, 1, 0], "dilation": [1, 2], "groups": 2},
     lambda x, w: F.conv2d(x, w, stride=(2, 3), padding=(1, 0), dilation=(1, 2), groups=2),
     "nn"),
    ("conv2d_depthwise", "conv2d", [(1, 4, 8, 8), (4, 1, 3, 3)],
     {"stride": [2, 2], "pad": [1, 1, 1, 1], "groups": 4},
     lambda x, w: F.conv2d(x, w, stride=2, padding=1, groups=4), "nn"),
    ("conv2d_1x1_stride2", "conv2d", [(2, 4, 8, 8), (6, 4, 1, 1)], {"stride": [2, 2]},
     lambda x, w: F.conv2d(x, w, stride=2), "nn"),
    ("conv2d_stem", "conv2d", [(2, 3, 32, 32), (4, 3, 7, 7)],
     {"stride": [2, 2], "pad": [3, 3, 3, 3]}, lambda x, w: F.conv2d(x, w, stride=2, padding=3),
     "nn"),
    ("conv2d_asym_pad", "conv2d", [(1, 2, 6, 7), (3, 2, 2, 3)], {"pad": [0, 1, 1, 2]},
     lambda x, w: F.conv2d(F.pad(x, (1, 2, 0, 1)), w), "nn"),
    ("conv_transpose2d", "conv_transpose2d", [(2, 4, 4, 5), (4, 3, 3, 3), (3,)],
     {"stride": [2, 2], "pad": [1, 1, 1, 1], "output_padding": [1, 0]},
     lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=(1, 0)),
     "nnn"),
    ("conv_transpose2d_groups", "conv_transpose2d", [(1, 4, 3, 3), (4, 2, 2, 3)],
     {"stride": [1, 2], "dilation": [2, 1], "groups": 2},
     lambda x, w: F.conv_transpose2d(x, w, stride=(1, 2), dilation=(2, 1), groups=2), "nn"),
    ("max_pool2d", "max_pool2d", [(2, 3, 7, 6)],
     {"kernel": [3, 3], "stride": [2, 2], "pad": [1, 1, 1, 1]},
     lambda x: F.max_pool2d(x, 3, 2, 1), "n"),
    ("max_pool2d_even", "max_pool2d", [(1, 3, 8, 8)],
     {"kernel": [3, 3], "stride": [2, 2], "pad": [1, 1, 1, 1]},
     lambda x: F.max_pool2d(x, 3, 2, 1), "n"),
    ("max_pool2d_ceil", "max_pool2d", [(1, 2, 7, 7)],
     {"kernel": [2, 2], "stride": [2, 2], "dilation": [1, 1], "ceil_mode": True},
     lambda x: F.max_pool2d(x, 2, 2, ceil_mode=True), "n"),
    ("max_pool2d_dilated", "max_pool2d", [(1, 2, 8, 8)],
     {"kernel": [2, 2], "stride": [1, 1], "dilation": [2, 2]},
     lambda x: F.max_pool2d(x, 2, 1, dilation=2), "n"),
    ("avg_pool2d", "avg_pool2d", [(2, 3, 7, 6)],
     {"kernel": [3, 3], "stride": [2, 2], "pad": [1, 1, 1, 1]},
     lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), "n"),
    ("avg_pool2d_with_pad", "avg_pool2d", [(1, 2, 7, 7)],
     {"kernel": [3, 3], "stride": [2, 2], "pad": [1, 1, 1, 1], "ceil_mode": True,
      "count_include_pad": True},
     lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=True), "n"),
    ("global_avg_pool2d", "global_avg_pool2d", [(2, 3, 4, 5)], {},
     lambda x: x.mean(dim=(2, 3), keepdim=True), "n"),
    ("batch_norm", "batch_norm", [(2, 3, 4, 4), (3,), (3,), (3,), (3,)], {},
     _bn, "nnnnp"),
    ("layer_norm", "layer_norm", [(2, 3, 4), (3, 4), (3, 4)], {"axis": 1},
     lambda x, s, b: F.layer_norm(x, (3, 4), s, b, eps=1e-5), "nnn"),
    ("layer_norm_last", "layer_norm", [(4, 6), (6,)], {"axis": -1},
     lambda x, s: F.layer_norm(x, (6,), s, eps=1e-5), "nn"),
    ("softmax", "softmax", [(3, 5)], {"axis": 1}, lambda x: torch.softmax(x, 1), "n"),
    ("softmax_0", "softmax", [(3, 5)], {"axis": 0}, lambda x: torch.softmax(x, 0), "n"),
    ("log_softmax", "log_softmax", [(3, 5)], {"axis": -1},
     lambda x: torch.log_softmax(x, -1), "n"),
    ("reduce_sum", "reduce_sum", [(3, 4, 5)], {"axes": [0, 2], "keepdims": False},
     lambda x: x.sum(dim=(0, 2)), "n"),
    ("reduce_sum_all", "reduce_sum", [(3, 4)], {}, lambda x: x.sum().reshape(1, 1), "n"),
    ("reduce_mean", "reduce_mean", [(3, 4, 5)], {"axes": [1]},
     lambda x: x.mean(dim=1, keepdim=True), "n"),
    ("reduce_max", "reduce_max", [(3, 4, 5)], {"axes": [2], "keepdims": False},
     lambda x: x.amax(dim=2), "n"),
    ("reduce_min", "reduce_min", [(3, 4)], {"axes": [0]}, lambda x: x.amin(0, keepdim=True), "n"),
    ("reduce_prod", "reduce_prod", [(3, 4)], {"axes": [1]},
     lambda x: x.prod(1, keepdim=True), "p"),
    ("reshape", "reshape", [(3, 4)], {"shape": [2, 6]}, lambda x: x.reshape(2, 6), "n"),
    ("flatten", "flatten", [(2, 3, 4)], {"axis": 1}, lambda x: x.flatten(1), "n"),
    ("squeeze", "squeeze", [(3, 1, 4)], {}, lambda x: x.squeeze(1), "n"),
    ("unsqueeze", "unsqueeze", [(3, 4)], {"axes": [0, 2]},
     lambda x: x.unsqueeze(0).unsqueeze(2), "n"),
    ("transpose", "transpose", [(2, 3, 4)], {"perm": [2, 0, 1]},
     lambda x: x.permute(2, 0, 1), "n"),
    ("expand", "expand", [(3, 1)], {"shape": [2, 3, 4]}, lambda x: x.expand(2, 3, 4), "n"),
    ("concat", "concat", [(2, 3), (2, 2)], {"axis": 1}, lambda a, b: torch.cat([a, b], 1), "nn"),
    ("slice", "slice", [(5, 6)], {"starts": [1, 0], "ends": [4, 6], "axes": [0, 1]},
     lambda x: x[1:4, 0:6], "n"),
    ("slice_step", "slice", [(7, 6)], {"starts": [1], "ends": [7], "axes": [0], "steps": [2]},
     lambda x: x[1:7:2], "n"),
    ("slice_step_short", "slice", [(8, 3)], {"starts": [0], "ends": [6], "axes": [0],
                                              "steps": [3]}, lambda x: x[0:6:3], "n"),
    ("pad", "pad", [(2, 3)], {"pads": [1, 0, 2, 3]}, lambda x: F.pad(x, (0, 3, 1, 2)), "n"),
    ("resize_nearest", "resize_nearest", [(1, 2, 3, 2)], {"scales": [1.0, 1.0, 2.0, 3.0]},
     lambda x: x.repeat_interleave(2, 2).repeat_interleave(3, 3), "n"),
    ("cast", "cast", [(3,)], {"to": "same"}, lambda x: x, "n"),
    ("select", "select", [(3, 4), (3, 4), (4,)], {}, torch.where, "bnn"),
    ("split", "split", [(6, 4)], {"axis": 0, "sizes": [2, 4]}, lambda x: x[:2], "n"),
    ("softmax_cross_entropy", "softmax_cross_entropy", [(4, 5), (4,)], {},
     lambda x, y: F.cross_entropy(x, y), "nl"),
    ("mse_loss", "mse_loss", [(3, 4), (3, 4)], {}, F.mse_loss, "nn"),
    ("batch_norm_train", "batch_norm_train", [(3, 2, 4, 3), (2,), (2,), (2,), (2,)], {},
     lambda x, s, b, m, v: F.batch_norm(x, m.clone(), v.clone(), s, b, training=True,
                                        eps=1e-5), "nnnii"),
]


def _operand(rng, shape, kind, dtype, classes=0):
    if kind == "l":
        return rng.integers(0, classes, size=shape).astype(np.int64)
    if kind == "b":
        return rng.standard_normal(shape) > 0
    a = rng.standard_normal(shape)
    if kind == "p":
        a = np.abs(a) + 0.5
    return a.astype(dtype)


def _module(case, element) -> tuple[Module, Function]:
    """@f: the op on its operands; @g: its seedable gradient wrt every float operand."""
    name, op, shapes, attrs, _, kinds = case
    m = Module("case", stage="graph")
    types = [TensorType(tuple(s), {"l": I64, "b": I1}.get(k, element))
             for s, k in zip(shapes, kinds)]
    f, b = Builder.function(m, "f", types)
    attrs = {k: (element if v == "same" else v) for k, v in attrs.items()}
    y = b.create_inst(op, *f.params, attrs=attrs).results[0]
    b.create("return", y)
    f.result_types = [y.type]
    wrt = tuple(i for i, k in enumerate(kinds) if k not in "ilb")
    g = Function("g", types + [y.type], [types[i] for i in wrt],
                 attrs={"gradient": SymbolRef("f"), "seedable": True, "wrt": wrt})
    m.add(g)
    verify(m)
    PassManager([pass_class("differentiate")()], verify_each=True).run(m)
    return m, m.lookup("f")


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_rule_matches_pytorch(case, dtype):
    name, op, shapes, _, torch_fn, kinds = case
    m, f = _module(case, F32 if dtype == np.float32 else F64)
    rng = rng_for(name, dtype.__name__)
    args = [_operand(rng, s, k, dtype, shapes[0][-1]) for s, k in zip(shapes, kinds)]
    seed = rng.standard_normal(f.result_types[0].shape).astype(dtype)
    got = run_function(m, m.lookup("g"), args + [seed])
    ts = [torch.tensor(a, requires_grad=k not in "ilb") for a, k in zip(args, kinds)]
    out = torch_fn(*ts)
    out.backward(torch.tensor(seed))
    want = [t.grad.numpy() for t, k in zip(ts, kinds) if k not in "ilb"]
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        # f32: the interpreter computes each op in f64 and rounds once where
        # PyTorch sums in f32, whose error grows with the terms summed, not
        # with the (possibly cancelled) result: atol is relative to the
        # gradient's largest element (a conv weight gradient sums 512 terms).
        scale = max(1.0, float(np.abs(w).max()))
        tol = dict(rtol=2e-5, atol=2e-6 * scale) if dtype == np.float32 else \
            dict(rtol=1e-10, atol=1e-12 * scale)
        np.testing.assert_allclose(g, w, **tol, err_msg=f"{name}: operand {i}")


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_rule_matches_finite_differences(case):
    name, _, shapes, _, _, kinds = case
    m, f = _module(case, F64)
    rng = rng_for(name, "fd")
    args = [_operand(rng, s, k, np.float64, shapes[0][-1]) for s, k in zip(shapes, kinds)]
    seed = rng.standard_normal(f.result_types[0].shape)
    grads = run_function(m, m.lookup("g"), args + [seed])
    wrt = [i for i, k in enumerate(kinds) if k not in "ilb"]
    v = [rng.standard_normal(args[i].shape) for i in wrt]
    eps = 1e-6

    def f_at(sign):
        moved = list(args)
        for i, d in zip(wrt, v):
            moved[i] = args[i] + sign * eps * d
        return run_function(m, f, moved)[0]
    numeric = float(np.sum(seed * (f_at(1) - f_at(-1)) / (2 * eps)))
    analytic = sum(float(np.sum(g * d)) for g, d in zip(grads, v))
    assert math.isclose(analytic, numeric, rel_tol=1e-6, abs_tol=1e-7), (analytic, numeric)
