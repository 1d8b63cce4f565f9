"""-lower-loops rules of conv2d, conv_transpose2d, the pools and pad, checked
numerically: each case builds a one-op graph module, runs it in the graph
interpreter, lowers a fresh copy (verified, and printed text round-trips),
runs the loop stage in the loop interpreter, and compares. Shapes are small:
the loop interpreter is scalar Python.

Max pools and pads only move values (and take maxima), so they must be
bit-identical, NaN and -inf included. Sums differ by accumulation: the graph
kernels accumulate f32 in f64 (and f64 in f64 in another order, im2col +
matmul) and round once; the loop kernels accumulate in the buffer's type in
loop order, as the generated C will. Recursive summation of n terms errs by
at most n·u·Σ|terms| (u the unit roundoff); a bias add, an average's division
and the graph kernel's own rounding (or its own f64 summation) add a few u
more. So sums are compared within 2·(n + 2)·u·M, where M is the op applied
to |inputs| in f64 (Σ|x·w| + |b| for a convolution, the average of |x| for a
pool).
"""

from __future__ import annotations


import numpy as np
import pytest

from swir.kernels import dtype_of
from swir.interp.run import run_function
from swir.ir.builder import Builder
from swir.ir.core import Apply, Global, Module
from swir.ir.types import scalar
from swir.lowering.elementwise import elementwise_epilogue
from swir.lowering.kernel import KernelBuilder, buffer_type
from swir.lowering.linalg import lower_conv2d
from swir.lowering.padding import lower_pad
from swir.parser import parse_module
from swir.passes.loop.lower_loops import LowerLoops
from swir.passes.manager import AnalysisManager
from swir.printer import print_module
from swir.verifier import verify
from helpers import rng_for

U = {"f32": 2.0 ** -24, "f64": 2.0 ** -53}


def ty(shape, elem: str) -> str:
    return "<" + " x ".join([*map(str, shape), elem]) + ">"


def fmt_attrs(attrs: dict) -> str:
    def v(x):
        if isinstance(x, bool):
            return "true" if x else "false"
        if isinstance(x, (list, tuple)):
            return "[" + ", ".join(map(str, x)) + "]"
        if isinstance(x, str):
            return f'"{x}"'
        return repr(x).replace("e+", "e")
    return " {" + ", ".join(f"{k} = {v(x)}" for k, x in attrs.items()) + "}" if attrs else ""


def one_op(op: str, operands: list[tuple], elem: str, attrs: dict) -> str:
    """A graph module whose @main applies ``op`` once; the result type comes
    from the op's shape rule (a placeholder is parsed, then replaced)."""
    from swir.ops.registry import lookup
    params = ", ".join(f"%a{i}: {ty(s, elem)}" for i, s in enumerate(operands))
    args = ", ".join(f"%a{i}" for i in range(len(operands)))
    probe = parse_module(f'module "p"\nstage graph\nfunc @main({params}) {{\n'
                         f"'entry:\n  %r = {op} {args}{fmt_attrs(attrs)} : <1 x {elem}>\n"
                         "  return\n}\n", "<probe>")
    inst = next(iter(probe.lookup("main").walk()))
    (rt,) = lookup(op).infer(inst)
    return (f'module "t"\nstage graph\nfunc @main({params}) -> {rt} {{\n'
            f"'entry:\n  %r = {op} {args}{fmt_attrs(attrs)} : {rt}\n  return %r\n}}\n")


def lower(text: str) -> Module:
    m = parse_module(text, "<test>")
    verify(m)
    LowerLoops(mem_plan=False).run(m, AnalysisManager())
    verify(m)
    assert print_module(parse_module(print_module(m), "<printed>")) == print_module(m)
    return m


def graph_run(text: str, args: list[np.ndarray]) -> np.ndarray:
    g = parse_module(text, "<test>")
    verify(g)
    (y,) = run_function(g, g.lookup("main"), args)
    return y


def run_both(text: str, args: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, Module]:
    want = graph_run(text, args)
    m = lower(text)
    (got,) = run_function(m, m.lookup("main"), args)
    assert got.dtype == want.dtype and got.shape == want.shape
    return want, got, m


def data(shape, elem: str, rng: np.random.Generator) -> np.ndarray:
    if elem.startswith("i"):
        return rng.integers(-50, 50, size=shape).astype(dtype_of(scalar(elem)))
    return rng.standard_normal(shape).astype(dtype_of(scalar(elem)))


def assert_sum_close(want, got, text: str, args: list[np.ndarray], n: int, elem: str) -> None:
    """|got - want| <= 2·(n + 2)·u·M (module docstring), M the op on |args| in f64."""
    if elem not in U:
        np.testing.assert_array_equal(got, want)
        return
    magnitude = graph_run(text.replace(elem, "f64"),
                          [np.abs(a).astype(np.float64) for a in args])
    bound = 2 * (n + 2) * U[elem] * magnitude
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    bad = ~(err <= bound)
    assert not bad.any(), (f"{int(bad.sum())} / {bad.size} differ; worst excess "
                           f"{float(np.max(np.where(bad, err - bound, 0))):.3g}")


def kernels(m: Module) -> list:
    return [f for f in m.functions if f.kind == "kernel"]


def no_guards(m: Module) -> None:
    """The design: every nest is rectangular and guard-free."""
    for f in kernels(m):
        assert not [i for i in f.walk() if i.opname == "if"], f.name


# -- conv2d ------------------------------------------------------------------------------

# (N, C, H, W), (O, kH, kW), stride, pad [t, l, b, r], dilation, groups, bias
CONV = [
    ((1, 3, 5, 5), (4, 3, 3), [1, 1], [1, 1, 1, 1], [1, 1], 1, True),
    ((2, 2, 7, 6), (3, 3, 3), [2, 2], [1, 0, 2, 1], [1, 1], 1, False),   # asymmetric
    ((1, 2, 7, 7), (2, 3, 3), [1, 1], [2, 2, 2, 2], [2, 2], 1, True),    # dilation
    ((1, 2, 8, 7), (3, 3, 2), [2, 3], [0, 1, 1, 0], [2, 1], 1, False),
    ((1, 4, 5, 6), (6, 3, 1), [2, 1], [0, 0, 0, 0], [1, 1], 2, True),    # groups
    ((2, 3, 6, 5), (3, 3, 3), [2, 2], [1, 1, 1, 1], [1, 1], 3, True),    # depthwise
    ((1, 2, 5, 5), (4, 3, 3), [1, 1], [1, 1, 1, 1], [1, 1], 2, False),   # depthwise x2
    ((1, 3, 4, 4), (2, 1, 1), [1, 1], [0, 0, 0, 0], [1, 1], 1, True),    # 1x1
    ((1, 2, 5, 5), (2, 1, 1), [2, 2], [1, 0, 0, 1], [1, 1], 1, False),   # 1x1, padded
]


def conv_case(x_shape, wk, stride, pad, dilation, groups, bias, elem):
    o, kh, kw = wk
    operands = [x_shape, (o, x_shape[1] // groups, kh, kw)] + ([(o,)] if bias else [])
    attrs = {"stride": stride, "pad": pad, "dilation": dilation, "groups": groups}
    return one_op("conv2d", operands, elem, attrs), operands


@pytest.mark.parametrize("elem", ["f32", "f64"])
@pytest.mark.parametrize("case", CONV, ids=lambda c: f"{c[0]}-{c[1]}-s{c[2]}-p{c[3]}-"
                         f"d{c[4]}-g{c[5]}-{'b' if c[6] else 'nb'}")
def test_conv2d(case, elem):
    text, operands = conv_case(*case, elem)
    rng = rng_for("conv2d", case, elem)
    args = [data(s, elem, rng) for s in operands]
    want, got, m = run_both(text, args)
    x_shape, (_, kh, kw) = case[0], case[1]
    assert_sum_close(want, got, text, args, x_shape[1] // case[5] * kh * kw, elem)
    no_guards(m)
    (k,) = kernels(m)
    scratch = any(case[3])
    assert len(k.params) == len(operands) + 1 + scratch  # + the padded input P


def test_conv2d_i32_wraps_like_the_graph_kernel():
    """Integers: the loop kernel accumulates in i32, the graph kernel in i64 and
    wraps when it casts back; two's complement sums agree mod 2^32."""
    text, operands = conv_case((1, 2, 4, 4), (2, 3, 3), [1, 1], [1, 1, 1, 1], [1, 1], 1,
                               True, "i32")
    rng = rng_for("conv-i32")
    args = [rng.integers(-2 ** 31, 2 ** 31, size=s, dtype=np.int64).astype(np.int32)
            for s in operands]
    want, got, _ = run_both(text, args)
    np.testing.assert_array_equal(got, want)


# -- conv_transpose2d ----------------------------------------------------------------------

# (N, C, H, W), (O/groups, kH, kW), stride, pad, dilation, output_padding, groups, bias
CONVT = [
    ((1, 2, 3, 3), (3, 3, 3), [1, 1], [0, 0, 0, 0], [1, 1], [0, 0], 1, False),
    ((1, 2, 3, 4), (2, 3, 3), [2, 2], [1, 1, 1, 1], [1, 1], [1, 1], 1, True),
    ((2, 4, 3, 3), (1, 2, 3), [2, 1], [0, 1, 1, 0], [2, 1], [1, 0], 2, False),
    ((1, 2, 4, 4), (2, 2, 2), [2, 2], [2, 2, 2, 1], [1, 1], [0, 0], 1, True),  # crop > span
    ((1, 3, 4, 3), (1, 3, 3), [3, 2], [1, 2, 0, 1], [1, 2], [2, 1], 3, True),  # depthwise
    ((1, 2, 1, 2), (2, 1, 1), [2, 2], [1, 0, 0, 0], [1, 1], [1, 1], 1, True),  # only out_pad
]


@pytest.mark.parametrize("elem", ["f32", "f64"])
@pytest.mark.parametrize("case", CONVT, ids=lambda c: f"{c[0]}-{c[1]}-s{c[2]}-p{c[3]}-"
                         f"d{c[4]}-op{c[5]}-g{c[6]}")
def test_conv_transpose2d(case, elem):
    x_shape, (og, kh, kw), stride, pad, dilation, out_pad, groups, bias = case
    operands = [x_shape, (x_shape[1], og, kh, kw)] + ([(og * groups,)] if bias else [])
    attrs = {"stride": stride, "pad": pad, "dilation": dilation,
             "output_padding": out_pad, "groups": groups}
    text = one_op("conv_transpose2d", operands, elem, attrs)
    rng = rng_for("convT", case, elem)
    args = [data(s, elem, rng) for s in operands]
    want, got, m = run_both(text, args)
    assert_sum_close(want, got, text, args, x_shape[1] // groups * kh * kw, elem)
    no_guards(m)


# -- pools ---------------------------------------------------------------------------------

# (N, C, H, W), kernel, stride, pad, dilation, ceil_mode
MAX_POOL = [
    ((1, 2, 5, 5), [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], False),
    ((2, 1, 5, 5), [2, 2], [2, 2], [0, 0, 0, 0], [1, 1], True),      # ceil overhang
    ((1, 2, 7, 6), [3, 2], [1, 2], [2, 1, 2, 0], [2, 1], False),     # dilation, asymmetric
    ((1, 1, 6, 7), [3, 3], [2, 2], [1, 0, 0, 1], [1, 1], True),
    ((1, 2, 1, 3), [2, 1], [1, 1], [1, 0, 1, 0], [2, 1], False),     # all-padding window
    ((1, 2, 5, 4), [1, 1], [2, 2], [0, 0, 0, 0], [1, 1], False),     # kernel 1
    ((1, 1, 4, 4), [3, 3], [3, 3], [1, 1, 1, 1], [1, 1], True),
]


@pytest.mark.parametrize("elem", ["f32", "f64", "i32"])
@pytest.mark.parametrize("case", MAX_POOL, ids=lambda c: f"{c[0]}-k{c[1]}-s{c[2]}-p{c[3]}-"
                         f"d{c[4]}-{'ceil' if c[5] else 'floor'}")
def test_max_pool2d_bit_identical(case, elem):
    x_shape, kern, stride, pad, dilation, ceil = case
    attrs = {"kernel": kern, "stride": stride, "pad": pad, "dilation": dilation,
             "ceil_mode": ceil}
    text = one_op("max_pool2d", [x_shape], elem, attrs)
    x = data(x_shape, elem, rng_for("max", case, elem))
    if elem != "i32" and x.size > 4:
        x.flat[3] = np.nan  # NaN propagates in both
    want, got, m = run_both(text, [x])
    np.testing.assert_array_equal(got, want)
    no_guards(m)
    if case[0] == (1, 2, 1, 3) and elem != "i32":
        assert np.all(np.isneginf(got))  # every window is padding only


# (N, C, H, W), kernel, stride, pad, ceil_mode, count_include_pad, divisor varies
AVG_POOL = [
    ((1, 2, 5, 5), [3, 3], [2, 2], [1, 1, 1, 1], False, False, True),
    ((1, 2, 5, 5), [3, 3], [2, 2], [1, 1, 1, 1], False, True, False),  # always 9
    ((2, 1, 5, 5), [2, 2], [2, 2], [0, 0, 0, 0], True, True, True),    # overhang not counted
    ((1, 1, 5, 6), [3, 3], [1, 1], [0, 0, 0, 0], False, False, False),  # no padding
    ((1, 2, 4, 5), [2, 3], [1, 2], [1, 0, 0, 1], False, False, True),  # asymmetric
    ((1, 1, 7, 7), [3, 3], [3, 3], [1, 1, 1, 1], True, False, True),
    ((1, 1, 7, 7), [3, 3], [3, 3], [1, 1, 1, 1], True, True, False),
]


@pytest.mark.parametrize("elem", ["f32", "f64"])
@pytest.mark.parametrize("case", AVG_POOL, ids=lambda c: f"{c[0]}-k{c[1]}-s{c[2]}-p{c[3]}-"
                         f"{'ceil' if c[4] else 'floor'}-{'inc' if c[5] else 'exc'}")
def test_avg_pool2d(case, elem):
    x_shape, kern, stride, pad, ceil, include, varies = case
    attrs = {"kernel": kern, "stride": stride, "pad": pad, "ceil_mode": ceil,
             "count_include_pad": include}
    text = one_op("avg_pool2d", [x_shape], elem, attrs)
    x = data(x_shape, elem, rng_for("avg", case, elem))
    want, got, m = run_both(text, [x])
    assert_sum_close(want, got, text, [x], kern[0] * kern[1], elem)
    no_guards(m)
    # A divisor table (a dense global) exactly when the divisor varies.
    assert bool([g for g in m.globals if g.kind == "global"]) == varies


def test_avg_pool2d_divisors_are_the_graph_kernels():
    """All-ones input: every output is exactly 1 only if each divisor counts
    the same elements the sum adds (a wrong table entry gives another value)."""
    for x_shape, kern, stride, pad, ceil, include, _ in AVG_POOL:
        attrs = {"kernel": kern, "stride": stride, "pad": pad, "ceil_mode": ceil,
                 "count_include_pad": include}
        text = one_op("avg_pool2d", [x_shape], "f32", attrs)
        want, got, _ = run_both(text, [np.ones(x_shape, np.float32)])
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("elem", ["f32", "f64"])
@pytest.mark.parametrize("shape", [(1, 3, 4, 5), (2, 2, 1, 1), (1, 2, 3, 1)])
def test_global_avg_pool2d(shape, elem):
    text = one_op("global_avg_pool2d", [shape], elem, {})
    x = data(shape, elem, rng_for("gap", shape, elem))
    want, got, _ = run_both(text, [x])
    assert_sum_close(want, got, text, [x], shape[2] * shape[3], elem)


# -- pad -----------------------------------------------------------------------------------

PAD = [
    ((1, 2, 3, 4), [0, 0, 1, 2, 0, 1, 2, 0], "constant", 1.5),
    ((1, 2, 3, 4), [0, 0, 1, 2, 0, 1, 2, 3], "reflect", None),
    ((1, 2, 3, 4), [0, 1, 2, 0, 1, 0, 0, 3], "edge", None),
    ((4, 5), [3, 0, 0, 4], "reflect", None),         # one side only per axis
    ((4, 5), [2, 4, 1, 0], "edge", None),
    ((5,), [2, 3], "constant", -2.0),
    ((3,), [0, 0], "reflect", None),                 # no padding: a copy
    ((2, 3), [1, 1, 1, 1], "constant", None),        # default value 0
]


@pytest.mark.parametrize("elem", ["f32", "f64", "i32"])
@pytest.mark.parametrize("case", PAD, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
def test_pad_bit_identical(case, elem):
    shape, pads, mode, value = case
    attrs = {"pads": pads, "mode": mode}
    if value is not None:
        attrs["value"] = value
    text = one_op("pad", [shape], elem, attrs)
    x = data(shape, elem, rng_for("pad", case, elem))
    want, got, m = run_both(text, [x])
    np.testing.assert_array_equal(got, want)
    no_guards(m)
    nests = [i for i in kernels(m)[0].body.blocks[0].instructions if i.opname == "for"]
    assert len(nests) == (2 if mode == "constant" and any(pads) else 1)


def test_pad_value_converts_like_the_graph_kernel():
    """A float fill for an integer tensor truncates and saturates (docs/ir.md)."""
    for value in (2.7, -3.9, 1e30):
        text = one_op("pad", [(3,)], "i16", {"pads": [1, 2], "value": value})
        x = np.array([1, -2, 3], np.int16)
        want, got, _ = run_both(text, [x])
        np.testing.assert_array_equal(got, want)


# -- fused epilogues: one kernel -----------------------------------------------------------

def fused_module(graph_text: str, rule, chain_len: int, extra_names: list[str]):
    """Build ONE kernel for the graph function's first op with the next
    ``chain_len`` element-wise ops as its epilogue (their other operands are
    extra kernel parameters), and a host @main calling it."""
    g = parse_module(graph_text, "<test>")
    verify(g)
    insts = list(g.lookup("main").walk())
    op, chain = insts[0], insts[1:1 + chain_len]
    m = Module("f", stage="loop")
    bt = lambda v: buffer_type(v.type)
    others = [[a for a in c.operands if a is not prev] for c, prev in
              zip(chain, [op.results[0]] + [c.results[0] for c in chain])]
    params = [(f"X{i}", bt(a)) for i, a in enumerate(op.operands)]
    params += [(nm, bt(a)) for nm, a in zip(extra_names, [a for o in others for a in o])]
    params.append(("Y", bt(chain[-1].results[0])))
    k = KernelBuilder(m, "fused", params)
    ins = k.params[:len(op.operands)]
    extra = iter(k.params[len(op.operands):-1])
    k.epilogue = elementwise_epilogue(
        [(c, list(c.operands).index(prev), [next(extra) for _ in o])
         for c, prev, o in zip(chain, [op.results[0]] + [c.results[0] for c in chain], others)])
    rule(k, op, ins, [k.params[-1]])
    extras = [t if isinstance(t, Global) else Builder.global_(m, f"s{i}", t, kind="buffer")
              for i, t in enumerate(k.extras)]
    f, b = Builder.function(m, "main", [p.type for p in k.params[:len(params)]],
                            param_names=[f"a{i}" for i in range(len(params) - 1)] + ["out"])
    f.attrs["outputs"] = 1
    b.create_inst("call", Apply("fused", tuple(f.params) + tuple(extras)))
    b.create_inst("return")
    verify(m)
    return g, m, f


def test_fused_conv_bias_relu_is_one_kernel():
    """conv2d (padded: a scratch pad nest, then the compute nest) with a
    per-channel bias tensor added and a relu, built as ONE kernel through the
    lowering API, computes relu(conv + bias) with one store of each output
    element's final value."""
    text = ('module "f"\nstage graph\n'
            "func @main(%x: <1 x 2 x 5 x 5 x f32>, %w: <3 x 2 x 3 x 3 x f32>, "
            "%bias: <3 x 1 x 1 x f32>) -> <1 x 3 x 3 x 3 x f32> {\n'entry:\n"
            "  %c = conv2d %x, %w {stride = [2, 2], pad = [1, 1, 1, 1]} : <1 x 3 x 3 x 3 x f32>\n"
            "  %s = add %c, %bias : <1 x 3 x 3 x 3 x f32>\n"
            "  %r = relu %s : <1 x 3 x 3 x 3 x f32>\n  return %r\n}\n")
    g, m, f = fused_module(text, lower_conv2d, 2, ["Bias"])
    printed = print_module(m)
    assert printed.count("kernel @") == 1 and printed.count("relu") == 1
    (k,) = kernels(m)
    # The final value goes through the epilogue once: one relu, and after the
    # reduction loops one store of it.
    relus = [i for i in k.walk() if i.opname == "relu"]
    assert len(relus) == 1
    rng = rng_for("fused-conv")
    args = [rng.standard_normal(s).astype(np.float32) for s in
            ((1, 2, 5, 5), (3, 2, 3, 3), (3, 1, 1))]
    (got,) = run_function(m, f, args)
    (want,) = run_function(g, g.lookup("main"), args)
    conv_text, _ = conv_case((1, 2, 5, 5), (3, 3, 3), [2, 2], [1, 1, 1, 1], [1, 1], 1,
                             True, "f32")
    # relu is 1-Lipschitz, so the bound of conv2d with a bias operand holds.
    assert_sum_close(want, got, conv_text, args[:2] + [args[2].reshape(3)], 2 * 3 * 3, "f32")
    assert np.all(got >= 0) and np.any(got == 0)


def test_fused_pad_finishes_each_element_exactly_once():
    """A constant pad with an epilogue fills only the border (disjoint boxes),
    so a non-idempotent epilogue (x + 1) is applied once per element."""
    text = ('module "f"\nstage graph\n'
            "func @main(%x: <2 x 3 x f32>, %one: <1 x f32>) -> <5 x 5 x f32> {\n'entry:\n"
            '  %p = pad %x {pads = [1, 0, 2, 2], value = -4.0} : <5 x 5 x f32>\n'
            "  %s = add %p, %one : <5 x 5 x f32>\n  return %s\n}\n")
    g, m, f = fused_module(text, lower_pad, 1, ["One"])
    (k,) = kernels(m)
    nests = [i for i in k.body.blocks[0].instructions if i.opname == "for"]
    assert len(nests) == 4  # border: top, bottom, right of the interior rows; interior
    rng = rng_for("fused-pad")
    args = [rng.standard_normal((2, 3)).astype(np.float32), np.ones(1, np.float32)]
    (got,) = run_function(m, f, args)
    (want,) = run_function(g, g.lookup("main"), args)
    np.testing.assert_array_equal(got, want)


# -- seeded random sweeps: the combinations the tables above do not list ----------------

def random_cases(op: str, count: int):
    """``count`` valid random configurations of ``op`` (the shape rule rejects
    invalid ones, which are redrawn), as (text, operand shapes, terms per output)."""
    from swir.ops.registry import OpError
    rng = rng_for("sweep", op)
    out = []
    while len(out) < count:
        n, groups = int(rng.integers(1, 3)), int(rng.choice([1, 1, 2, 3]))
        c = groups * int(rng.integers(1, 3))
        h, w = (int(v) for v in rng.integers(1, 8, size=2))
        kh, kw = (int(v) for v in rng.choice([1, 2, 3], size=2))
        stride = [int(v) for v in rng.integers(1, 4, size=2)]
        dilation = [int(v) for v in rng.integers(1, 3, size=2)]
        pad = [int(v) for v in rng.integers(0, 3, size=4)]
        if op == "conv2d":
            o = groups * int(rng.integers(1, 3))
            operands = [(n, c, h, w), (o, c // groups, kh, kw)] + \
                [(o,)] * int(rng.integers(0, 2))
            attrs = {"stride": stride, "pad": pad, "dilation": dilation, "groups": groups}
            terms = c // groups * kh * kw
        elif op == "conv_transpose2d":
            og = int(rng.integers(1, 3))
            operands = [(n, c, h, w), (c, og, kh, kw)] + [(og * groups,)] * int(rng.integers(0, 2))
            out_pad = [int(rng.integers(0, max(s, d))) for s, d in zip(stride, dilation)]
            attrs = {"stride": stride, "pad": pad, "dilation": dilation,
                     "output_padding": out_pad, "groups": groups}
            terms = c // groups * kh * kw
        else:
            operands = [(n, c, h, w)]
            attrs = {"kernel": [kh, kw], "stride": stride, "pad": pad,
                     "ceil_mode": bool(rng.integers(0, 2))}
            if op == "max_pool2d":
                attrs["dilation"] = dilation
            else:
                attrs["count_include_pad"] = bool(rng.integers(0, 2))
            terms = kh * kw
        try:
            text = one_op(op, operands, "f32", attrs)
        except OpError:
            continue
        out.append((text, operands, terms))
    return out


@pytest.mark.parametrize("op", ["conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d"])
def test_random_sweep(op):
    for i, (text, operands, terms) in enumerate(random_cases(op, 25)):
        rng = rng_for("sweep-data", op, i)
        args = [data(s, "f32", rng) for s in operands]
        want, got, m = run_both(text, args)
        if op == "max_pool2d":
            np.testing.assert_array_equal(got, want, err_msg=text)
        else:
            assert_sum_close(want, got, text, args, terms, "f32")
        no_guards(m)


def test_random_pad_sweep():
    rng = rng_for("pad-sweep")
    for i in range(40):
        rank = int(rng.integers(1, 5))
        shape = tuple(int(v) for v in rng.integers(1, 5, size=rank))
        mode = str(rng.choice(["constant", "reflect", "edge"]))
        limit = [d - 1 if mode == "reflect" else 3 for d in shape] * 2
        pads = [int(rng.integers(0, lim + 1)) for lim in limit]
        text = one_op("pad", [shape], "f32", {"pads": pads, "mode": mode, "value": 0.25})
        x = data(shape, "f32", rng)
        want, got, m = run_both(text, [x])
        np.testing.assert_array_equal(got, want, err_msg=text)
        no_guards(m)
