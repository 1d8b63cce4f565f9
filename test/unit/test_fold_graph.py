"""-fold-constants and -fold-batchnorm on random small modules: the graph
interpreter gives the same results before and after the pass."""

from __future__ import annotations

import numpy as np
import pytest

from swir.interp.graph import GraphInterpreter
from swir.kernels import dtype_of, evaluate
from swir.ir.builder import Builder
from swir.ir.core import ArrayInit, FileInit, Global, Module, Value
from swir.ir.types import F16, F32, ScalarType, TensorType
from swir.passes.graph.fold_batchnorm import FoldBatchNorm
from swir.passes.graph.fold_constants import FoldConstants
from swir.passes.manager import Pass, PassManager
from swir.printer import array_dense
from swir.verifier import verify

F16_EPS = 2.0 ** -11  # half an ulp of 1.0 in f16: the relative error of one rounding


# -- helpers --------------------------------------------------------------------------

def run_main(module: Module, args: list[np.ndarray], base_dir=".") -> list[np.ndarray]:
    return GraphInterpreter(module, base_dir).run("main", args)


def apply(p: Pass, module: Module) -> Pass:
    PassManager([p]).run(module)  # verifies the result, too
    return p


def opnames(module: Module) -> list[str]:
    return [i.opname for i in module.walk()]


def add_global(m: Module, name: str, array: np.ndarray, elem: ScalarType,
               storage: str = "array", base_dir=None) -> Global:
    """A constant global held as a numpy array, a dense literal or a sidecar file."""
    t = TensorType(array.shape, elem)
    data = np.asarray(array, dtype=dtype_of(t))
    if storage == "dense":
        init = array_dense(data)
    elif storage == "file":
        path = base_dir / f"{name}.weights"
        path.write_bytes(data.astype(data.dtype.newbyteorder("<")).tobytes())
        init = FileInit(path.name, 0)
    else:
        init = ArrayInit(data)
    return Builder.global_(m, name, t, init=init)


def finish(f, build: Builder, result: Value) -> None:
    """Return result; put the globals made while building first, as printed."""
    build.create("return", result)
    f.result_types = [result.type]
    f.module.items.sort(key=lambda item: not isinstance(item, Global))


def assert_bits_equal(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    bits = f"u{want.dtype.itemsize}"
    np.testing.assert_array_equal(got.view(bits), want.view(bits))


# -- -fold-constants ------------------------------------------------------------------

UNARY = ("neg", "abs", "relu", "exp", "tanh", "sigmoid", "floor", "erf")
BINARY = ("add", "sub", "mul", "max", "min", "div")


class ConstantChains:
    """Random chains of ops on constant globals (every one foldable), each
    ending in an op with the run-time input, so folding must keep the result."""

    def __init__(self, rng: np.random.Generator, m: Module, elem: ScalarType, shape,
                 base_dir) -> None:
        self.rng, self.m, self.elem, self.shape, self.base_dir = rng, m, elem, shape, base_dir
        self.count = 0

    def weight(self) -> Global:
        self.count += 1
        storage = ("array", "dense", "file")[self.count % 3]
        data = self.rng.standard_normal(self.shape)
        return add_global(self.m, f"w{self.count}", data, self.elem, storage, self.base_dir)

    def step(self, b: Builder, v: Value) -> Value:
        rows, cols = self.shape
        kind = self.rng.integers(7)
        if kind == 0:
            return b.create(str(self.rng.choice(UNARY)), v)
        if kind == 1:
            return b.create(str(self.rng.choice(BINARY)), v, self.weight())
        if kind == 2:  # a weight in another layout and back
            t = b.create("transpose", v, attrs={"perm": [1, 0]})
            return b.create("transpose", b.create("exp", t), attrs={"perm": [1, 0]})
        if kind == 3:  # flattened and back
            flat = b.create("reshape", v, attrs={"shape": [-1]})
            return b.create("reshape", b.create("neg", flat), attrs={"shape": [rows, cols]})
        if kind == 4:  # through the other float type
            other = F16 if self.elem == F32 else F32
            return b.create("cast", b.create("cast", v, attrs={"to": other}),
                            attrs={"to": self.elem})
        if kind == 5:  # a broadcast row sum
            s = b.create("reduce_sum", v, attrs={"axes": [1], "keepdims": True})
            return b.create("sub", v, s)
        if rows != cols:
            return b.create("mul", v, v)
        square = b.create("transpose", b.create("mul", v, v), attrs={"perm": [1, 0]})
        return b.create("matmul", v, square)


def chain_module(seed: int, elem: ScalarType, shape, base_dir) -> Module:
    rng = np.random.default_rng(seed)
    m = Module("chains", "graph")
    m.base_dir = str(base_dir)
    gen = ConstantChains(rng, m, elem, shape, base_dir)
    f, b = Builder.function(m, "main", [TensorType(shape, elem)], param_names=["x"])
    y = f.params[0]
    for _ in range(3):
        c = gen.weight()
        for _ in range(int(rng.integers(1, 5))):
            c = gen.step(b, c)
        y = b.create("add", y, c)
    finish(f, b, y)
    verify(m)
    return m


@pytest.mark.parametrize("elem", [F32, F16], ids=str)
@pytest.mark.parametrize("shape", [(1, 7), (3, 5), (4, 4), (6, 5), (8, 8)])
@pytest.mark.parametrize("seed", range(4))
def test_fold_constants_is_bit_exact(tmp_path, elem, shape, seed):
    m = chain_module(seed, elem, shape, tmp_path)
    x = np.random.default_rng(100 + seed).standard_normal(shape).astype(dtype_of(elem))
    (before,) = run_main(m, [x], tmp_path)
    p = apply(FoldConstants(), m)
    (after,) = run_main(m, [x], tmp_path)
    # The same kernels compute the same values, only earlier.
    assert_bits_equal(after, before)
    # Only the three adds of the run-time input are left (and constants).
    assert [n for n in opnames(m) if n != "const"] == ["add", "add", "add", "return"]
    assert p.statistics["instructions folded"] > 0


def test_fold_constants_makes_globals_only_for_large_results(tmp_path):
    m = chain_module(0, F32, (6, 5), tmp_path)
    old = {g.name for g in m.globals}
    apply(FoldConstants(), m)
    new = [g for g in m.globals if g.name not in old]
    assert new and all(isinstance(g.init, ArrayInit) and g.type.num_elements > 16 for g in new)
    # Globals come before functions.
    kinds = [isinstance(i, Global) for i in m.items]
    assert kinds == sorted(kinds, reverse=True)


def test_fold_constants_respects_max_bytes(tmp_path):
    m = chain_module(1, F32, (6, 5), tmp_path)
    p = apply(FoldConstants(max_bytes=16), m)   # every result here has >= 24 bytes
    assert p.statistics.get("instructions folded", 0) == 0
    assert p.statistics["too large"] > 0


# -- -fold-batchnorm ------------------------------------------------------------------

def bn_vectors(rng: np.random.Generator, m: Module, channels: int, elem: ScalarType
               ) -> list[Global]:
    scale = rng.standard_normal(channels)
    shift = rng.standard_normal(channels)
    mean = rng.standard_normal(channels)
    var = rng.uniform(0.25, 2.0, channels)
    return [add_global(m, n, a, elem) for n, a in
            zip(("scale", "shift", "mean", "var"), (scale, shift, mean, var))]


def conv_bn_module(rng, opname: str, elem: ScalarType, channels: int, out_channels: int,
                   groups: int, kernel: int, stride: int, dilation: int, bias: bool
                   ) -> tuple[Module, np.ndarray]:
    m = Module("conv_bn", "graph")
    in_per_group, out_per_group = channels // groups, out_channels // groups
    if opname == "conv2d":
        w_shape = (out_channels, in_per_group, kernel, kernel)
        attrs = {"stride": [stride, stride], "pad": [1, 0, 1, 1],
                 "dilation": [dilation, dilation], "groups": groups}
    else:
        w_shape = (channels, out_per_group, kernel, kernel)
        attrs = {"stride": [stride, stride], "pad": [0, 1, 1, 0],
                 "dilation": [dilation, dilation], "output_padding": [stride - 1, 0],
                 "groups": groups}
    x = rng.standard_normal((2, channels, 7, 6)).astype(dtype_of(elem))
    f, b = Builder.function(m, "main", [TensorType(x.shape, elem)], param_names=["x"])
    operands = [f.params[0], add_global(m, "w", rng.standard_normal(w_shape), elem)]
    if bias:
        operands.append(add_global(m, "b", rng.standard_normal(out_channels), elem))
    conv = b.create(opname, *operands, attrs=attrs)
    y = b.create("batch_norm", conv, *bn_vectors(rng, m, out_channels, elem),
                 attrs={"epsilon": 1e-3})
    finish(f, b, y)
    verify(m)
    return m, x


def matmul_bn_module(rng, elem: ScalarType, rows: int, inner: int, cols: int
                     ) -> tuple[Module, np.ndarray]:
    m = Module("matmul_bn", "graph")
    a = rng.standard_normal((rows, inner)).astype(dtype_of(elem))
    f, b = Builder.function(m, "main", [TensorType(a.shape, elem)], param_names=["a"])
    mm = b.create("matmul", f.params[0], add_global(m, "w", rng.standard_normal((inner, cols)),
                                                    elem))
    finish(f, b, b.create("batch_norm", mm, *bn_vectors(rng, m, cols, elem)))
    verify(m)
    return m, a


def check_bn_fold(m: Module, x: np.ndarray, elem: ScalarType) -> None:
    (before,) = run_main(m, [x])
    producer = next(i for i in m.walk() if i.opname != "batch_norm" and
                    i.opname in ("conv2d", "conv_transpose2d", "matmul"))
    bound = f16_error_bound(m, producer, x, before) if elem == F16 else None
    p = apply(FoldBatchNorm(), m)
    assert p.statistics == {"batch norms folded": 1}
    assert "batch_norm" not in opnames(m)
    (after,) = run_main(m, [x])
    if elem == F32:
        # Folded: conv(x, round(W * factor)), the weights rounded once to f32.
        # Unfolded: the conv rounded to f32, then the batch norm in f64 and
        # rounded again. Both are a few f32 roundings of the same f64 value.
        np.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-6)
    else:
        # In f16 the roundings are 2^-11 relative, and the weight rounding
        # errors add up over the conv's terms, so the difference is bounded by
        # a few f16 roundings of the terms' magnitudes, not of the result
        # (which may cancel): see f16_error_bound.
        diff = np.abs(after.astype(np.float64) - before.astype(np.float64))
        assert (diff <= bound).all(), float((diff - bound).max())


def f16_error_bound(m: Module, producer, x: np.ndarray, before: np.ndarray) -> np.ndarray:
    """Four f16 roundings of the magnitudes involved: |factor| * op(|x|, |W|)
    (what rounding the scaled weights can change), the bias terms, and the
    result itself."""
    interp = GraphInterpreter(m)

    def wide(v: Value) -> np.ndarray:
        return interp.global_value(v).astype(np.float64)

    bn = next(i for i in m.walk() if i.opname == "batch_norm")
    scale, shift, mean, var = (wide(v) for v in bn.args[1:5])
    factor = np.abs(scale / np.sqrt(var + float(bn.attrs.get("epsilon", 1e-5))))
    conv_bias = np.abs(wide(producer.args[2])) if len(producer.args) > 2 else 0.0
    (terms,) = evaluate(producer.opname, dict(producer.attrs),
                        [TensorType(before.shape, ScalarType("f64"))],
                        [np.abs(x.astype(np.float64)), np.abs(wide(producer.args[1]))])
    channel = (1, -1) + (1,) * (before.ndim - 2)  # batch_norm's axis 1

    def per_channel(a) -> np.ndarray:
        return np.broadcast_to(a, factor.shape).reshape(channel)

    magnitude = (per_channel(factor) * (terms + per_channel(conv_bias + np.abs(mean)))
                 + per_channel(np.abs(shift)) + np.abs(before.astype(np.float64)))
    return 4 * F16_EPS * magnitude


CONVS = [  # channels, out_channels, groups, kernel, stride, dilation, bias
    (3, 4, 1, 3, 1, 1, False),
    (4, 6, 2, 3, 2, 1, True),
    (4, 4, 4, 3, 1, 2, True),     # depthwise, dilated
    (6, 4, 2, 1, 1, 1, False),
    (2, 8, 1, 2, 2, 1, True),
]


@pytest.mark.parametrize("elem", [F32, F16], ids=str)
@pytest.mark.parametrize("opname", ["conv2d", "conv_transpose2d"])
@pytest.mark.parametrize("case", CONVS, ids=lambda c: "c{}o{}g{}k{}s{}d{}{}".format(
    *c[:6], "b" if c[6] else ""))
def test_fold_batchnorm_conv_matches_the_interpreter(elem, opname, case):
    rng = np.random.default_rng([CONVS.index(case), len(opname)])
    m, x = conv_bn_module(rng, opname, elem, *case)
    check_bn_fold(m, x, elem)


@pytest.mark.parametrize("elem", [F32, F16], ids=str)
@pytest.mark.parametrize("rows,inner,cols", [(1, 8, 3), (5, 4, 7), (2, 16, 16)])
def test_fold_batchnorm_matmul_matches_the_interpreter(elem, rows, inner, cols):
    rng = np.random.default_rng(rows * 100 + inner * 10 + cols)
    m, a = matmul_bn_module(rng, elem, rows, inner, cols)
    check_bn_fold(m, a, elem)


def test_fold_batchnorm_reads_file_weights(tmp_path):
    m, x = conv_bn_module(np.random.default_rng(3), "conv2d", F32, 3, 4, 1, 3, 1, 1, True)
    w = m.lookup("w")
    path = tmp_path / "w.weights"
    path.write_bytes(np.asarray(w.init.array, "<f4").tobytes())
    w.init = FileInit("w.weights", 0)
    m.base_dir = str(tmp_path)
    (before,) = run_main(m, [x], tmp_path)
    apply(FoldBatchNorm(), m)
    (after,) = run_main(m, [x], tmp_path)
    np.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-6)
