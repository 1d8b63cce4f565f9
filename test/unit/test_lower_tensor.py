"""-lower-loops rules for reductions, normalisations and data movement
(swir/lowering/reduce.py, swir/lowering/movement.py), checked numerically:
each case builds a one-op graph module, runs it in the graph interpreter,
lowers it (-lower-loops without memory planning), verifies it and runs it in
the loop-stage interpreter, and compares.

What must agree how:

- data movement, reduce_max / reduce_min, argmax, and every integer / i1
  result: bit for bit (NaNs in the same places);
- reduce_sum / reduce_mean / reduce_prod of floats: the graph kernels
  accumulate f16 / f32 in f64 and round once (f64 pairwise, numpy's sum),
  the loop kernels accumulate in the element type in loop order, as the
  generated C does. Recursive summation of n terms is within (n-1)·u·Σ|x|
  of the exact sum (u the unit roundoff), the graph result within u·|sum|
  of it; so ``|got - want| <= n·eps·Σ|x|`` (eps = 2u covers both). A mean
  divides both by n (one more rounding, covered by eps·|want|). A product of
  n factors is within (n-1)·u relative, so ``rtol = n·eps``;
- softmax / log_softmax / layer_norm: both compute in f64 and round once;
  they differ only by the f64 summation order (a relative difference of
  about n·2^-53), so an f16 / f32 result is within one unit in the last
  place of the graph's; f64 results within a small multiple of n·eps.

The loop interpreter is scalar Python, so shapes are small.
"""

from __future__ import annotations


import numpy as np
import pytest

from swir.kernels import dtype_of
from swir.interp.run import run_function
from swir.ir.builder import Builder
from swir.ir.core import Module
from swir.ir.types import TensorType, scalar
from swir.parser import parse_module
from swir.passes.loop.lower_loops import LowerLoops
from swir.passes.manager import AnalysisManager
from swir.printer import print_module
from swir.verifier import verify
from helpers import rng_for

# -- harness ------------------------------------------------------------------------------

def data(shape: tuple[int, ...], elem: str, rng: np.random.Generator) -> np.ndarray:
    dt = dtype_of(scalar(elem))
    if elem == "i1":
        return np.asarray(rng.random(shape) < 0.5)
    if elem.startswith("i"):
        # Few distinct values: argmax ties, products that wrap around.
        return np.asarray(rng.integers(-4, 5, size=shape)).astype(dt)
    return np.asarray(rng.uniform(-3.0, 3.0, size=shape)).astype(dt)


def one_op(op: str, operands: list[tuple[tuple[int, ...], str]], attrs: dict | None = None
           ) -> str:
    """The text of ``func @main`` applying ``op`` to its parameters and
    returning every result (result types from the op's shape rule)."""
    m = Module("t", stage="graph")
    types = [TensorType(tuple(s), scalar(e)) for s, e in operands]
    f, b = Builder.function(m, "main", types, param_names=[f"a{i}" for i in range(len(types))])
    inst = b.create_inst(op, *f.params, attrs=attrs)
    f.result_types = [r.type for r in inst.results]
    b.create("return", *inst.results)
    return print_module(m)


def lower(text: str) -> Module:
    m = parse_module(text, "<test>")
    LowerLoops(mem_plan=False).run(m, AnalysisManager())
    verify(m)
    # The printed loop stage parses back to the same text.
    assert print_module(parse_module(print_module(m), "<printed>")) == print_module(m)
    return m


def run_both(op: str, args: list[np.ndarray], attrs: dict | None = None,
             elems: list[str] | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    elems = elems or [_elem(a) for a in args]
    text = one_op(op, [(a.shape, e) for a, e in zip(args, elems)], attrs)
    g = parse_module(text, "<test>")
    verify(g)
    want = run_function(g, g.lookup("main"), args)
    m = lower(text)
    # A 0-d tensor is a one-element buffer at the loop stage.
    got = run_function(m, m.lookup("main"), [a.reshape(a.shape or (1,)) for a in args])
    assert len(got) == len(want)
    got = [r.reshape(()) if w.shape == () and r.shape == (1,) else r for w, r in zip(want, got)]
    for w, r in zip(want, got):
        assert r.dtype == w.dtype and r.shape == w.shape, (r.dtype, r.shape, w.dtype, w.shape)
    return want, got


_ELEM = {np.dtype(np.float16): "f16", np.dtype(np.float32): "f32",
         np.dtype(np.float64): "f64", np.dtype(np.bool_): "i1", np.dtype(np.int8): "i8",
         np.dtype(np.int32): "i32", np.dtype(np.int64): "i64"}


def _elem(a: np.ndarray) -> str:
    return _ELEM[a.dtype]


def assert_identical(want: list[np.ndarray], got: list[np.ndarray]) -> None:
    """Same bits (NaN in the same places; -0.0 differs from 0.0)."""
    for w, g in zip(want, got):
        if w.dtype.kind == "f":
            assert np.array_equal(np.isnan(w), np.isnan(g)), (w, g)
            ok = ~np.isnan(w)
            bits = np.dtype(f"u{w.dtype.itemsize}")
            np.testing.assert_array_equal(g[ok].view(bits), w[ok].view(bits))
        else:
            np.testing.assert_array_equal(g, w)


def assert_ulps(want: np.ndarray, got: np.ndarray, ulps: float, atol: float = 0.0) -> None:
    """|got - want| <= ulps units in the last place of want (+ atol)."""
    assert np.array_equal(np.isnan(want), np.isnan(got))
    ok = ~np.isnan(want)
    w, g = want[ok].astype(np.float64), got[ok].astype(np.float64)
    finite = np.isfinite(w)
    assert np.array_equal(w[~finite], g[~finite])  # infinities exactly
    w, g = w[finite], g[finite]
    spacing = np.abs(np.spacing(want[ok][finite])).astype(np.float64)
    err = np.abs(g - w)
    assert np.all(err <= ulps * spacing + atol), float(np.max(err - ulps * spacing))


# -- reductions ---------------------------------------------------------------------------

# (shape, axes, keepdims): negative axes, all axes (also as []), a 0-d result,
# middle and several axes, odd sizes, a 0-d input.
REDUCE_CASES = [
    ((3, 4, 5), [1], True), ((3, 4, 5), [1], False), ((3, 4, 5), [-1], False),
    ((3, 4, 5), [0, 2], True), ((3, 4, 5), [-3, -1], False), ((3, 4, 5), [], False),
    ((3, 4, 5), [], True), ((3, 4, 5), [0, 1, 2], False), ((7,), [0], True),
    ((7,), [0], False), ((2, 1, 3, 5), [2, 3], False), ((), [], False),
]
REDUCE_OPS = ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"]


def _reduce_attrs(axes: list[int], keep: bool) -> dict:
    return {"axes": axes, "keepdims": keep} if axes else {"keepdims": keep}


@pytest.mark.parametrize("op,elem", [(op, elem) for op in REDUCE_OPS
                                     for elem in ("f32", "f64", "i32", "i1")
                                     if op != "reduce_mean" or elem.startswith("f")])
@pytest.mark.parametrize("case", REDUCE_CASES, ids=str)
def test_reduce(op, elem, case):
    shape, axes, keep = case
    x = data(shape, elem, rng_for(op, elem, case))
    if op == "reduce_prod" and elem.startswith("f"):
        x = (np.sign(x) * (0.5 + np.abs(x) / 3)).astype(x.dtype)  # |x| in [0.5, 1.5]
    attrs = _reduce_attrs(axes, keep)
    (want,), (got,) = run_both(op, [x], attrs)
    if elem.startswith("i") or op in ("reduce_max", "reduce_min"):
        assert_identical([want], [got])
        return
    ax = tuple(a % max(len(shape), 1) for a in axes) or tuple(range(len(shape)))
    n = int(np.prod([shape[a] for a in ax])) if shape else 1
    eps = np.finfo(want.dtype).eps
    w, g = want.astype(np.float64), got.astype(np.float64)
    abs_sum = np.sum(np.abs(x.astype(np.float64)), axis=ax, keepdims=keep)
    if op == "reduce_sum":
        bound = n * eps * abs_sum
    elif op == "reduce_mean":
        bound = eps * abs_sum + eps * np.abs(w)
    else:
        bound = n * eps * np.abs(w)
    assert np.all(np.abs(g - w) <= bound + np.finfo(want.dtype).tiny), np.max(np.abs(g - w))


@pytest.mark.parametrize("op", ["reduce_max", "reduce_min"])
@pytest.mark.parametrize("elem", ["f32", "f64"])
def test_reduce_max_min_nan_and_inf(op, elem):
    """NaN wins wherever it is in the row; infinities are ordinary values."""
    x = data((4, 5), elem, rng_for(op, elem, "nan"))
    x[0, 0] = np.nan      # first
    x[1, 4] = np.nan      # last
    x[2, 1] = np.inf
    x[2, 3] = -np.inf
    x[3, :] = -np.inf if op == "reduce_max" else np.inf
    for axes, keep in (([1], False), ([0], True), ([], False)):
        (want,), (got,) = run_both(op, [x], _reduce_attrs(axes, keep))
        assert_identical([want], [got])
    assert np.isnan(got)  # all axes: the NaNs win


# -- argmax --------------------------------------------------------------------------------

@pytest.mark.parametrize("elem", ["f32", "f64", "i32", "i1"])
@pytest.mark.parametrize("shape,axis,keep", [
    ((3, 4, 5), 0, True), ((3, 4, 5), 1, False), ((3, 4, 5), -1, True), ((3, 4, 5), -1, False),
    ((7,), 0, False), ((7,), -1, True), ((2, 1, 3), 1, False)], ids=str)
def test_argmax(elem, shape, axis, keep):
    """The first maximum (ties are frequent with the small integer data)."""
    x = data(shape, elem, rng_for("argmax", elem, shape, axis))
    if elem.startswith("f"):
        x = np.round(x)  # ties in floats too
    (want,), (got,) = run_both("argmax", [x], {"axis": axis, "keepdims": keep})
    assert_identical([want], [got])


@pytest.mark.parametrize("elem", ["f32", "f64"])
def test_argmax_nan(elem):
    """The first NaN wins; a NaN after the maximum too; -inf and +inf rows."""
    x = data((6, 5), elem, rng_for("argmax-nan", elem))
    x[0, 2] = np.nan
    x[0, 4] = np.nan      # first NaN (2) wins
    x[1, 0] = 100.0
    x[1, 3] = np.nan      # NaN after the maximum wins
    x[2, :] = -np.inf     # all -inf: index 0
    x[3, 1] = np.inf
    x[3, 3] = np.inf      # first +inf
    x[4, :] = np.nan
    x[5, :] = 1.0         # all equal: index 0
    for axis in (0, 1):
        (want,), (got,) = run_both("argmax", [x], {"axis": axis, "keepdims": False})
        assert_identical([want], [got])
    assert list(got) == [2, 3, 0, 1, 0, 0]


# -- softmax, log_softmax, layer_norm -----------------------------------------------------

@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("elem", ["f32", "f64", "f16"])
@pytest.mark.parametrize("shape,axis", [((3, 4, 5), -1), ((3, 4, 5), 1), ((3, 4, 5), 0),
                                        ((7,), 0), ((2, 1, 3), 1)], ids=str)
def test_softmax(op, elem, shape, axis):
    x = data(shape, elem, rng_for(op, elem, shape, axis)) * 5
    flat = x.reshape(-1)
    flat[0] = 60.0        # large: exp(x) would overflow in f16 without the max shift
    if flat.size > 3:
        flat[3] = -np.inf  # contributes exp(-inf) = 0
    (want,), (got,) = run_both(op, [x], {"axis": axis})
    n = shape[axis]
    if elem == "f64":
        assert_ulps(want, got, ulps=8 * n, atol=8 * n * np.finfo(np.float64).eps)
    else:
        assert_ulps(want, got, ulps=1)


def test_softmax_nan_and_infinite_rows():
    x = data((4, 3), "f32", rng_for("softmax-nan"))
    x[0, 1] = np.nan          # a NaN row stays NaN
    x[1, :] = -np.inf         # all -inf: 0/0
    x[2, 2] = np.inf          # inf - inf
    for op in ("softmax", "log_softmax"):
        (want,), (got,) = run_both(op, [x], {"axis": -1})
        assert_identical([want], [got])


@pytest.mark.parametrize("elem", ["f32", "f64"])
@pytest.mark.parametrize("shape,axis,scale,bias", [
    ((2, 3, 4), -1, (4,), (4,)), ((2, 3, 4), 1, (3, 4), None), ((2, 3, 4), 1, (1, 4), (3, 1)),
    ((2, 3, 4), 0, (), ()), ((2, 3, 4), -2, (4,), None), ((5,), 0, (5,), (1,)),
    ((2, 1, 3), 2, (3,), (3,))], ids=str)
def test_layer_norm(elem, shape, axis, scale, bias):
    rng = rng_for("layer_norm", elem, shape, axis, scale, bias)
    args = [data(shape, elem, rng) * 2 + 1, data(scale, elem, rng)]
    if bias is not None:
        args.append(data(bias, elem, rng))
    (want,), (got,) = run_both("layer_norm", args, {"axis": axis, "epsilon": 1e-3})
    n = int(np.prod(shape[axis % len(shape):]))
    if elem == "f64":
        assert_ulps(want, got, ulps=16 * n, atol=16 * n * np.finfo(np.float64).eps)
    else:
        assert_ulps(want, got, ulps=1, atol=1e-12)


# -- data movement -------------------------------------------------------------------------

MOVE_ELEMS = ["f32", "i1", "i64"]


def check_copy(op: str, args: list[np.ndarray], attrs: dict | None = None) -> list[np.ndarray]:
    want, got = run_both(op, args, attrs)
    assert_identical(want, got)
    return got


@pytest.mark.parametrize("elem", MOVE_ELEMS)
@pytest.mark.parametrize("shape,perm", [
    ((2, 3, 4), [2, 0, 1]), ((2, 3, 4), [1, 0, 2]), ((2, 3, 4), None), ((2, 3, 4), [0, 1, 2]),
    ((1, 3, 2, 4), [0, 2, 3, 1]), ((5,), [0])], ids=str)
def test_transpose(elem, shape, perm):
    x = data(shape, elem, rng_for("transpose", elem, shape))
    check_copy("transpose", [x], {"perm": perm} if perm is not None else None)


@pytest.mark.parametrize("elem", MOVE_ELEMS)
@pytest.mark.parametrize("src,spec", [
    ((2, 3, 4), [4, 6]), ((2, 3, 4), [2, -1]), ((2, 3, 4), [24]), ((2, 3, 4), [1, 2, 1, 12, 1]),
    ((6, 4), [2, 3, 4]), ((2, 12, 5), [0, 3, 4, 5]), ((12, 2, 3), [3, 4, 6]),
    ((6, 4), [4, 6]), ((1, 1), [1]), ((), [1, 1]), ((3,), [3])], ids=str)
def test_reshape(elem, src, spec):
    x = data(src, elem, rng_for("reshape", elem, src, spec))
    check_copy("reshape", [x], {"shape": spec})


@pytest.mark.parametrize("axis", [0, 1, 2, -1, 3, -3])
def test_flatten(axis):
    x = data((2, 3, 1, 4), "f32", rng_for("flatten", axis))
    check_copy("flatten", [x], {"axis": axis})


@pytest.mark.parametrize("op,shape,axes", [
    ("squeeze", (1, 3, 1, 2), None), ("squeeze", (1, 3, 1, 2), [2]),
    ("squeeze", (1, 3, 1, 2), [-4]), ("squeeze", (1, 1), None),
    ("unsqueeze", (3, 2), [0, -1]), ("unsqueeze", (3, 2), [1]), ("unsqueeze", (), [0])], ids=str)
def test_squeeze_unsqueeze(op, shape, axes):
    x = data(shape, "i64", rng_for(op, shape, axes))
    check_copy(op, [x], {"axes": axes} if axes is not None else None)


@pytest.mark.parametrize("elem", MOVE_ELEMS)
@pytest.mark.parametrize("shapes,axis", [
    (((2, 1, 3), (2, 4, 3), (2, 2, 3)), 1), (((2, 3), (2, 1), (2, 2)), -1),
    (((1, 2), (3, 2), (1, 2)), 0), (((4,),), 0)], ids=str)
def test_concat(elem, shapes, axis):
    rng = rng_for("concat", elem, shapes)
    check_copy("concat", [data(s, elem, rng) for s in shapes], {"axis": axis})


@pytest.mark.parametrize("elem", MOVE_ELEMS)
@pytest.mark.parametrize("shape,axis,sizes", [
    ((2, 7, 3), 1, [1, 4, 2]), ((2, 7, 3), -1, [2, 1]), ((5, 2), 0, [3, 2]), ((4,), 0, [4])],
    ids=str)
def test_split(elem, shape, axis, sizes):
    x = data(shape, elem, rng_for("split", elem, shape, axis))
    got = check_copy("split", [x], {"axis": axis, "sizes": sizes})
    assert len(got) == len(sizes)


@pytest.mark.parametrize("elem", ["f32", "i1"])
@pytest.mark.parametrize("attrs", [
    {"starts": [1], "ends": [3]},
    {"starts": [-1], "ends": [-100], "steps": [-1]},               # reverse, end clamped
    {"starts": [10], "ends": [-100], "steps": [-2]},                # start clamped to d-1
    {"starts": [-100], "ends": [100], "steps": [3]},                # both clamped
    {"starts": [-2, 5], "ends": [0, 1], "axes": [-1, 1], "steps": [-1, -2]},
    {"starts": [0, 1, 4], "ends": [9, 3, 0], "axes": [0, 1, 2], "steps": [2, 1, -3]},
    {"starts": [3], "ends": [-9223372036854775807], "axes": [2], "steps": [-1]},
], ids=str)
def test_slice(elem, attrs):
    x = data((3, 6, 5), elem, rng_for("slice", elem))
    check_copy("slice", [x], attrs)


@pytest.mark.parametrize("dshape,ishape,ielem,axis", [
    ((5, 3), (2, 2), "i64", 0), ((5, 3), (4,), "i32", 1), ((2, 5, 3), (), "i64", 1),
    ((2, 5, 3), (3,), "i8", -1), ((4,), (2, 3), "i32", 0)], ids=str)
def test_gather(dshape, ishape, ielem, axis):
    """Indices in [-d, d): negative ones count from the end."""
    rng = rng_for("gather", dshape, ishape, axis)
    d = dshape[axis]
    idx = np.asarray(rng.integers(-d, d, size=ishape)).astype(dtype_of(scalar(ielem)))
    if idx.size >= 2:
        idx.reshape(-1)[:2] = [-d, d - 1]  # both ends
    check_copy("gather", [data(dshape, "f32", rng), idx], {"axis": axis})


@pytest.mark.parametrize("shape,scales", [
    ((1, 2, 3, 4), [1.0, 1.0, 2.0, 2.0]),
    ((1, 2, 4, 6), [1.0, 1.0, 0.5, 0.5]),
    ((2, 3), [3.0, 1.0]),
    ((4, 5), [1.5, 0.6]),      # not powers of two: affine forms proven at compile time
    ((3, 7), [0.34, 2.5]),
    ((2, 16), [1.0, 2.2]),     # 33 / 2.2 rounds below 15 in f64: the index table
    ((29,), [0.28]),           # the index table on a downscale
], ids=str)
def test_resize_nearest(shape, scales):
    x = data(shape, "f32", rng_for("resize", shape, scales))
    check_copy("resize_nearest", [x], {"scales": scales})


def test_resize_nearest_forms():
    """Which axes get an affine source index and which a table."""
    x = np.zeros((2, 16), np.float32)
    text = one_op("resize_nearest", [((2, 16), "f32")], {"scales": [1.5, 2.2]})
    printed = print_module(lower(text))
    assert "(2*%i0) floordiv 3" in printed
    assert "dyn_index" in printed and "src_i1" in printed
    check_copy("resize_nearest", [x], {"scales": [1.5, 2.2]})


@pytest.mark.parametrize("elem", MOVE_ELEMS)
@pytest.mark.parametrize("shape,target", [
    ((3, 1), [2, 1, 4]), ((1,), [2, 3]), ((), [3]), ((2, 3), [2, 3]), ((4, 1, 2), [1, 3, 1])],
    ids=str)
def test_expand(elem, shape, target):
    x = data(shape, elem, rng_for("expand", elem, shape))
    check_copy("expand", [x], {"shape": target})
