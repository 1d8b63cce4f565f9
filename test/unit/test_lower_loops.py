"""-lower-loops and -mem-plan, checked numerically: each case runs a graph
module in the graph-stage interpreter, lowers a fresh copy, verifies it and
runs it in the loop-stage interpreter, and compares.

Element-wise ops and copies must be bit-identical (the loop interpreter uses
the graph kernels on scalars). Sums differ by accumulation order and type:
the graph kernels accumulate f32 in f64 and round once, the loop kernels
accumulate in the buffer's type as the generated C does, so matmul results
are compared within 2·n·u·Σ|a·b| (n terms, u the unit roundoff: the classic
bound for recursive summation is n·u·Σ|terms|; the factor 2 covers the final
rounding of the graph result).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swir.kernels import dtype_of
from swir.interp.run import run_function
from swir.ir.builder import Builder
from swir.ir.core import Apply, Module
from swir.ir.types import BufType
from swir.lowering.elementwise import elementwise_epilogue
from swir.lowering.kernel import KernelBuilder
from swir.lowering.linalg import lower_matmul
from swir.ops.elementwise import BINARY, COMPARE, UNARY
from swir.parser import parse_module
from swir.passes.loop.lower_loops import LowerLoops
from swir.passes.loop.mem_plan import Lifetimes, MemPlan
from swir.passes.manager import AnalysisManager
from swir.printer import print_module
from swir.verifier import verify
from helpers import rng_for


def lower(text: str, mem_plan: bool = True) -> Module:
    m = parse_module(text, "<test>")
    verify(m)
    LowerLoops(mem_plan=mem_plan).run(m, AnalysisManager())
    verify(m)
    # The printed loop stage must parse back to the same text.
    assert print_module(parse_module(print_module(m), "<printed>")) == print_module(m)
    return m


def run_both(text: str, args: list[np.ndarray], mem_plan: bool = True
             ) -> tuple[list[np.ndarray], list[np.ndarray], Module]:
    g = parse_module(text, "<test>")
    verify(g)
    want = run_function(g, g.lookup("main"), args)
    m = lower(text, mem_plan)
    # A 0-d tensor is a one-element buffer at the loop stage.
    f = m.lookup("main")
    got = run_function(m, f, [a.reshape(a.shape or (1,)) if isinstance(p.type, BufType) else a
                              for a, p in zip(args, f.params)])
    got = [g.reshape(w.shape) if w.ndim == 0 else g for g, w in zip(got, want)]
    return want, got, m


def assert_identical(want: list[np.ndarray], got: list[np.ndarray]) -> None:
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def ty(shape: tuple[int, ...], elem: str) -> str:
    return "<" + " x ".join([*map(str, shape), elem]) + ">"


def data(shape: tuple[int, ...], elem: str, rng: np.random.Generator,
         positive: bool = False) -> np.ndarray:
    dt = dtype_of(parse_type_name(elem))
    if elem == "i1":
        return rng.random(shape) < 0.5
    if elem.startswith("i"):
        return rng.integers(1 if positive else -9, 10, size=shape).astype(dt)
    x = rng.standard_normal(shape)
    return (np.abs(x) + 0.1 if positive else x).astype(dt)


def parse_type_name(name: str):
    from swir.ir.types import scalar
    return scalar(name)


def one_op(op: str, operands: list[tuple[tuple[int, ...], str]], result: str,
           attrs: str = "") -> str:
    params = ", ".join(f"%a{i}: {ty(s, e)}" for i, (s, e) in enumerate(operands))
    args = ", ".join(f"%a{i}" for i in range(len(operands)))
    return (f'module "t"\nstage graph\nfunc @main({params}) -> {result} {{\n'
            f"'entry:\n  %r = {op} {args}{attrs} : {result}\n  return %r\n}}\n")


# -- element-wise ops -------------------------------------------------------------------

SHAPE_PAIRS = [((2, 3), (2, 3)), ((2, 3), (3,)), ((3, 1), (1, 4)), ((2, 1, 3), (4, 1)),
               ((), (3,)), ((5,), ())]


def _broadcast(a, b):
    return np.broadcast_shapes(a, b)


def _elements(kind: str) -> list[str]:
    """The element types an op of this kind is defined on (the verifier
    rejects the others)."""
    return {"float": ["f32", "f64"], "bool": ["i1"], "int": ["i32", "i64"]}.get(
        kind, ["f32", "f64", "i32", "i64", "i1"])


UNARY_CASES = [(n, e) for n in sorted(UNARY) for e in _elements(UNARY[n][0])]
BINARY_CASES = [(n, e) for n in sorted(BINARY) + sorted(COMPARE)
                for e in _elements(BINARY[n][0] if n in BINARY else "any") if e != "i32"]


@pytest.mark.parametrize("name,elem", UNARY_CASES)
def test_unary(name, elem):
    shape = (2, 3, 4)
    positive = name in ("log", "sqrt", "rsqrt")
    x = data(shape, elem, rng_for(name, elem), positive)
    want, got, _ = run_both(one_op(name, [(shape, elem)], ty(shape, elem)), [x])
    assert_identical(want, got)


@pytest.mark.parametrize("name,elem", BINARY_CASES)
@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=str)
def test_binary(name, shapes, elem):
    a, b = shapes
    out = _broadcast(a, b)
    rng = rng_for(name, shapes, elem)
    xs = [data(a, elem, rng), data(b, elem, rng, positive=name in ("div", "pow"))]
    res = "i1" if name in COMPARE else elem
    want, got, _ = run_both(one_op(name, [(a, elem), (b, elem)], ty(out, res)), xs)
    assert_identical(want, got)


def test_select_and_cast():
    rng = rng_for("select")
    c, x, y = rng.random((3, 1)) < 0.5, data((1, 4), "f32", rng), data((3, 4), "f32", rng)
    text = one_op("select", [((3, 1), "i1"), ((1, 4), "f32"), ((3, 4), "f32")], ty((3, 4), "f32"))
    want, got, _ = run_both(text, [c, x, y])
    assert_identical(want, got)
    for src, dst in [("f32", "i32"), ("f64", "f32"), ("i64", "f64"), ("i32", "i1"), ("f32", "f16")]:
        x = data((4, 3), src, rng) * (7 if src.startswith("f") else 1)
        text = one_op("cast", [((4, 3), src)], ty((4, 3), dst), f" {{to = {dst}}}")
        want, got, _ = run_both(text, [x])
        assert_identical(want, got)


@pytest.mark.parametrize("attrs,elem", [
    (" {min = -0.5, max = 0.5}", "f32"), (" {min = 0.25}", "f64"), (" {max = -0.1}", "f32"),
    (" {min = -2.7, max = 3.9}", "i32"), (" {min = -1.0e10}", "i32")])
def test_clip(attrs, elem):
    x = data((3, 5), elem, rng_for("clip", attrs, elem))
    if elem == "f32":
        x[0, 0] = np.nan
    want, got, _ = run_both(one_op("clip", [((3, 5), elem)], ty((3, 5), elem), attrs), [x])
    assert_identical(want, got)


@pytest.mark.parametrize("op,attrs", [("leaky_relu", ""), ("leaky_relu", " {alpha = 0.3}"),
                                      ("gelu", ""), ("gelu", ' {approximate = "tanh"}')])
@pytest.mark.parametrize("elem", ["f32", "f64"])
def test_composites(op, attrs, elem):
    x = data((4, 6), elem, rng_for(op, attrs, elem)) * 4
    want, got, _ = run_both(one_op(op, [((4, 6), elem)], ty((4, 6), elem), attrs), [x])
    assert_identical(want, got)


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (2, 3), (1, 4, 3)])
@pytest.mark.parametrize("elem", ["f32", "f64"])
def test_batch_norm(shape, elem):
    c = shape[1]
    rng = rng_for("bn", shape, elem)
    args = [data(shape, elem, rng)] + [data((c,), elem, rng) for _ in range(3)] + \
        [data((c,), elem, rng, positive=True)]
    text = one_op("batch_norm", [(shape, elem)] + [((c,), elem)] * 4, ty(shape, elem),
                  " {epsilon = 0.001}")
    want, got, _ = run_both(text, args)
    assert_identical(want, got)


# -- matmul ------------------------------------------------------------------------------

def assert_sum_close(want: np.ndarray, got: np.ndarray, a: np.ndarray, b: np.ndarray,
                     n: int) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want)
        return
    u = np.finfo(want.dtype).eps / 2
    bound = 2 * n * u * np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    assert np.all(err <= bound + np.finfo(want.dtype).tiny), float(np.max(err - bound))


@pytest.mark.parametrize("a,b", [((1, 16), (16, 8)), ((5, 7), (7, 3)), ((2, 3, 4), (4, 5)),
                                 ((4,), (4, 3)), ((3, 4), (4,)), ((6,), (6,)),
                                 ((2, 1, 3, 4), (5, 4, 2)), ((1, 2, 3), (2, 3, 2))])
@pytest.mark.parametrize("elem", ["f32", "f64", "i32"])
def test_matmul(a, b, elem):
    rng = rng_for("matmul", a, b, elem)
    xa, xb = data(a, elem, rng), data(b, elem, rng)
    out = np.matmul(xa, xb).shape
    text = one_op("matmul", [(a, elem), (b, elem)], ty(out, elem))
    want, got, _ = run_both(text, [xa, xb])
    assert_sum_close(want[0], got[0], xa, xb, a[-1])


def test_fused_epilogue_is_one_kernel():
    """The fusion hook: matmul + bias add + relu built as ONE kernel through
    the lowering API gives relu(A @ B + bias), with one store per output
    element after the reduction (no intermediate buffer)."""
    g = parse_module(
        'module "f"\nstage graph\n'
        "func @main(%a: <3 x 5 x f32>, %b: <5 x 4 x f32>, %bias: <4 x f32>) -> <3 x 4 x f32> {\n"
        "'entry:\n  %m = matmul %a, %b : <3 x 4 x f32>\n  %s = add %m, %bias : <3 x 4 x f32>\n"
        "  %r = relu %s : <3 x 4 x f32>\n  return %r\n}\n", "<test>")
    mm, add, relu = list(g.lookup("main").walk())[:3]
    m = Module("f", stage="loop")
    t = lambda v: BufType(v.type.shape, v.type.element)
    k = KernelBuilder(m, "matmul_add_relu", [("A", t(mm.args[0])), ("B", t(mm.args[1])),
                                             ("Bias", t(add.args[1])), ("C", t(relu.results[0]))])
    A, B, bias, C = k.params
    k.epilogue = elementwise_epilogue([(add, 0, [bias]), (relu, 0, [])])
    lower_matmul(k, mm, [A, B], [C])
    f, b = Builder.function(m, "main", [p.type for p in k.params],
                            param_names=["a", "b", "bias", "out"])
    f.attrs["outputs"] = 1
    b.create_inst("call", Apply("matmul_add_relu", tuple(f.params)))
    b.create_inst("return")
    verify(m)
    text = print_module(m)
    assert text.count("kernel @") == 1 and "buffer @" not in text
    assert text.count(" = relu ") == 1  # the epilogue's op, in the kernel
    rng = rng_for("epilogue")
    xa, xb, xbias = (rng.standard_normal(s).astype(np.float32) for s in ((3, 5), (5, 4), (4,)))
    (got,) = run_function(m, f, [xa, xb, xbias])
    (want,) = run_function(g, g.lookup("main"), [xa, xb, xbias])
    assert_sum_close(want, got, xa, xb, 5)
    assert np.all(got >= 0) and np.any(got == 0)


# -- bufferization --------------------------------------------------------------------------

BUFFERIZATION = (Path(__file__).parents[1] / "Transforms" / "LowerLoops" /
                 "bufferization.swir").read_text()


@pytest.mark.parametrize("flag", [True, False])
def test_outputs_copies_calls_and_block_arguments(flag):
    x = rng_for("buf").standard_normal(4).astype(np.float32)
    want, got, _ = run_both(BUFFERIZATION, [x, np.array(flag)])
    assert_identical(want, got)


def test_identical_ops_share_a_kernel():
    text = ('module "s"\nstage graph\nfunc @main(%x: <8 x f32>) -> <8 x f32> {\n'
            "'entry:\n  %a = relu %x : <8 x f32>\n  %b = relu %a : <8 x f32>\n"
            "  %c = relu %b : <8 x f32>\n  %d = neg %c : <8 x f32>\n  return %d\n}\n")
    x = rng_for("share").standard_normal(8).astype(np.float32)
    want, got, m = run_both(text, [x])
    assert_identical(want, got)
    assert sorted(f.name for f in m.functions if f.kind == "kernel") == ["neg_0", "relu_0"]
    m2 = parse_module(text, "<t>")
    LowerLoops(share_kernels=False).run(m2, AnalysisManager())
    assert len([f for f in m2.functions if f.kind == "kernel"]) == 4


# -- memory planning -------------------------------------------------------------------------

def _overlapping_in_memory(a, b) -> bool:
    oa, ob = a.attrs["offset"], b.attrs["offset"]
    return oa < ob + b.type.bytes and ob < oa + a.type.bytes


def check_plan(m: Module) -> None:
    """No two buffers share bytes while both are live."""
    life = Lifetimes(m).compute()
    bufs = [g for g in m.globals if g.kind == "buffer"]
    for i, a in enumerate(bufs):
        assert a.attrs["offset"] % 64 == 0
        for b in bufs[i + 1:]:
            (a0, a1), (b0, b1) = life[a], life[b]
            if a0 <= b1 and b0 <= a1:
                assert not _overlapping_in_memory(a, b), (a.name, b.name)


@st.composite
def dags(draw):
    """A random DAG of element-wise ops: each op reads one or two earlier
    values (so lifetimes vary and overlap in many ways)."""
    n = draw(st.integers(2, 12))
    lines, vals = [], [("%x", (4, 8))]
    for i in range(n):
        a = draw(st.sampled_from(vals))
        unary = draw(st.booleans())
        if unary:
            op = draw(st.sampled_from(["relu", "neg", "abs", "tanh"]))
            lines.append(f"  %v{i} = {op} {a[0]} : {ty(a[1], 'f32')}")
            vals.append((f"%v{i}", a[1]))
        else:
            b = draw(st.sampled_from(vals))
            op = draw(st.sampled_from(["add", "mul", "sub", "max"]))
            out = _broadcast(a[1], b[1])
            lines.append(f"  %v{i} = {op} {a[0]}, {b[0]} : {ty(out, 'f32')}")
            vals.append((f"%v{i}", out))
    rets = draw(st.lists(st.sampled_from(vals[1:]), min_size=1, max_size=2))
    sig = ", ".join(ty(s, "f32") for _, s in rets)
    return (f'module "r"\nstage graph\nfunc @main(%x: <4 x 8 x f32>) -> ({sig}) {{\n'
            "'entry:\n" + "\n".join(lines) +
            f"\n  return {', '.join(v for v, _ in rets)}\n}}\n")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags())
def test_planned_programs_compute_the_graph_result(text):
    """With sharing, the loop interpreter (whose arena really aliases buffers
    with overlapping offsets) still gives the graph result, bit for bit; and
    no two live buffers share bytes."""
    x = rng_for(text).standard_normal((4, 8)).astype(np.float32)
    want, got, m = run_both(text, [x])
    assert_identical(want, got)
    check_plan(m)
    stats = MemPlan()
    stats.run(m, AnalysisManager())
    assert stats.statistics.get("arena size (bytes)", 0) <= \
        stats.statistics.get("unshared size (bytes)", 0)


def test_sharing_actually_happens_in_a_chain():
    lines = "\n".join(f"  %v{i + 1} = relu %v{i} : <256 x f32>" for i in range(8))
    text = (f'module "c"\nstage graph\nfunc @main(%v0: <256 x f32>) -> <256 x f32> {{\n'
            f"'entry:\n{lines}\n  return %v8\n}}\n")
    m = lower(text)
    offsets = {g.attrs["offset"] for g in m.globals if g.kind == "buffer"}
    assert offsets == {0, 1024}  # seven intermediates alternate between two slots
    x = rng_for("chain").standard_normal(256).astype(np.float32)
    want, got, _ = run_both(text, [x])
    assert_identical(want, got)


def test_a_wrong_plan_is_caught_by_the_interpreter():
    """The check above has teeth: placing two live buffers at one offset makes
    the loop stage compute something else."""
    text = ('module "w"\nstage graph\nfunc @main(%x: <16 x f32>) -> <16 x f32> {\n'
            "'entry:\n  %a = exp %x : <16 x f32>\n  %b = neg %x : <16 x f32>\n"
            "  %c = add %a, %b : <16 x f32>\n  return %c\n}\n")
    x = rng_for("wrong").standard_normal(16).astype(np.float32)
    want, got, m = run_both(text, [x])
    assert_identical(want, got)
    for g in m.globals:
        if g.kind == "buffer":
            g.attrs["offset"] = 0
    (bad,) = run_function(m, m.lookup("main"), [x])
    assert not np.array_equal(bad, want[0])


# -- bundled examples ----------------------------------------------------------------------

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.swir"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_bundled_examples_loop_stage_matches_graph(path, interpretable_example):
    """The loop stage of every bundled example gives the graph stage's result.
    The examples are small networks ending in softmax: the f32 matmuls
    accumulate in f32 at the loop stage (f64 in the graph interpreter), which
    moves probabilities by a few units in the last place; 1e-5 relative is
    about 80 ulp of headroom."""
    path = interpretable_example(path)
    text = path.read_text()
    inputs = sorted(path.parent.glob(path.stem + "_input*.npy"))
    assert inputs, f"{path.name} has no bundled input"
    args = [np.load(p) for p in inputs]
    g = parse_module(text, str(path))
    want = run_function(g, g.lookup("main"), args, base_dir=path.parent)
    m = lower(text)
    got = run_function(m, m.lookup("main"), args, base_dir=path.parent)
    for w, o in zip(want, got):
        assert o.dtype == w.dtype and o.shape == w.shape
        np.testing.assert_allclose(o, w, rtol=1e-5, atol=0)


def test_resnet18_shaped_model_lowers_and_plans_to_its_peak():
    """bench/resnet18_graph.py (at 64 x 64 to stay quick) lowers to a valid
    loop stage; identical layers share kernels; the arena reaches the peak
    live size (the bound no placement beats) and is far below the unshared
    total. docs/performance.md records the 224 x 224 figures."""
    import importlib.util
    path = Path(__file__).parents[2] / "bench" / "resnet18_graph.py"
    spec = importlib.util.spec_from_file_location("resnet18_graph", path)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    m = parse_module(gen.Net(1, 64).build(), "<resnet18>")
    verify(m)
    p = LowerLoops()
    p.run(m, AnalysisManager())
    verify(m)
    kernels = [f for f in m.functions if f.kind == "kernel"]
    calls = [i for i in m.lookup("main").walk() if i.opname == "call"]
    assert len(kernels) < len(calls)
    s = p.statistics
    assert s["arena size (bytes)"] == s["peak live size (bytes)"]
    assert s["arena size (bytes)"] * 4 < s["unshared size (bytes)"]


# -- control flow and symbols (regressions found in review) ---------------------------------

def _graph(body: str, sig: str, globals_: str = "") -> str:
    return f'module "t"\nstage graph\n{globals_}\n{sig} {{\n{body}\n}}\n'


@pytest.mark.parametrize("flag", [True, False])
def test_cond_br_copies_only_on_the_taken_edge(flag):
    text = _graph("'entry:\n  cond_br %c, 'j(%x), 'j(%y)\n'j(%r: <4 x f32>):\n  return %r",
                  "func @main(%x: <4 x f32>, %y: <4 x f32>, %c: i1) -> <4 x f32>")
    x, y = np.float32([1, -2, 3, -4]), np.float32([10, 20, 30, 40])
    want, got, _ = run_both(text, [x, y, np.array(flag)])
    assert_identical(want, got)


@pytest.mark.parametrize("n", [1, 3])
def test_loop_carried_tensors_and_a_swap_leaving_the_loop(n):
    """A back edge that doubles an accumulator and swaps two tensors, and an
    exit edge that passes the old values: the exit must not see the copies
    of the back edge."""
    text = _graph(
        "'entry:\n  %z = const 0 : i32\n  br 'loop(%x, %x, %y, %z)\n"
        "'loop(%acc: <4 x f32>, %a: <4 x f32>, %b: <4 x f32>, %i: i32):\n"
        "  %new = add %acc, %acc : <4 x f32>\n  %one = const 1 : i32\n"
        "  %i2 = add %i, %one : i32\n  %c = lt %i2, %n : i1\n"
        "  cond_br %c, 'loop(%new, %b, %a, %i2), 'exit(%acc)\n"
        "'exit(%r: <4 x f32>):\n  return %r, %a, %b",
        "func @main(%x: <4 x f32>, %y: <4 x f32>, %n: i32) -> (<4 x f32>, <4 x f32>, <4 x f32>)")
    x, y = np.float32([1, -2, 3, -4]), np.float32([10, 20, 30, 40])
    want, got, _ = run_both(text, [x, y, np.array(n, np.int32)])
    assert_identical(want, got)


def test_returned_and_0d_globals():
    text = _graph("'entry:\n  %a = neg %x : <4 x f32>\n"
                  "  %g = gather @m, @i0 {axis = 1} : <2 x f32>\n  return @w, %a, %g",
                  "func @main(%x: <4 x f32>) -> (<4 x f32>, <4 x f32>, <2 x f32>)",
                  "global @w : <4 x f32> = dense<[1.0, 2.0, 3.0, 4.0]>\n"
                  "global @i0 : <i64> = dense<2>\n"
                  "global @m : <2 x 3 x f32> = dense<[[1.0, 5.0, -2.0], [3.0, 4.0, 6.0]]>")
    want, got, _ = run_both(text, [np.float32([1, -2, 3, -4])])
    assert_identical(want, got)


def test_recursion_is_refused_at_the_call():
    text = _graph("'entry:\n  %r = call @main(%x) : <4 x f32>\n  return %r",
                  "func @main(%x: <4 x f32>) -> <4 x f32>")
    from swir.passes.manager import PassFailure
    m = parse_module(text, "<t>")
    with pytest.raises(PassFailure, match="calls @main recursively") as e:
        LowerLoops().run(m, AnalysisManager())
    assert e.value.diagnostics[0].loc.line == 6


@pytest.mark.parametrize("name", ["sharing", "overlap", "host-loop", "kernel-calls"])
def test_planned_loop_modules_compute_what_unplanned_ones_do(name):
    """The golden -mem-plan inputs, run with every buffer in its own memory and
    then with the plan's shared arena: the same bits."""
    text = (Path(__file__).parents[1] / "Transforms" / "MemPlan" / f"{name}.swir").read_text()
    plain = parse_module(text, name)
    planned = parse_module(text, name)
    MemPlan().run(planned, AnalysisManager())
    verify(planned)
    f = plain.lookup("main")
    n_in = len(f.params) - f.attrs.get("outputs", 0)
    args = [rng_for(name, i).standard_normal(p.type.shape).astype(dtype_of(p.type.element))
            for i, p in enumerate(f.params[:n_in])]
    want = run_function(plain, f, args)
    got = run_function(planned, planned.lookup("main"), args)
    assert_identical(want, got)
    assert not any(np.isnan(w).any() for w in want)
