"""max_pool2d_grad and avg_pool2d_grad (issue 45): the graph interpreter's
kernels against PyTorch autograd (torch.nn.functional.max_pool2d /
avg_pool2d, .backward) on random shapes and attributes, f32 and f64, ties
and NaN included; their shape rules' errors; and their lowering, through
-lower-loops and through swir-cg's -O3 pipeline, against the interpreter.
(The ldm-plan case table, test_ldm_plan.CASES, holds both ops, so the
buffered stage and the emulated C of test_codegen check them too.)

Tolerances against PyTorch: a max-pool gradient element is a sum of the dy
of the windows whose maximum it holds (at most kH*kW of them), an
average-pool one a sum of dy / divisor over the windows covering it; PyTorch
adds in the element type in its window order, the interpreter in f64 and
rounds once, so they differ by a few roundings of the sum: rtol 8u with an
absolute floor of 8u·max|dy| for sums that cancel.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_lower_nn import assert_sum_close, graph_run, no_guards, one_op, run_both

from swir.interp.run import interpreter_for, run_function
from swir.ops.registry import OpError
from swir.parser import parse_module
from swir.passes import pass_class
from swir.passes.manager import PassManager
from swir.passes.pipelines import compile_pipeline, level_options
from swir.diagnostics import Diagnostic
from swir.verifier import VerificationError, verify
from helpers import rng_for

DTYPES = {"f32": (np.float32, torch.float32), "f64": (np.float64, torch.float64)}
U = {"f32": 2.0 ** -24, "f64": 2.0 ** -53}


# -- cases -------------------------------------------------------------------------------

def random_case(rng: np.random.Generator, op: str) -> dict:
    """Shapes and attributes PyTorch accepts too (symmetric pads of at most
    half the kernel; dilation for max only), without a max-pool window of
    padding only: PyTorch's CPU kernel gives such a window's dy to an index
    past its input plane (the next channel's first row), where swir's rule
    (padding never wins) gives it to no element."""
    while True:
        case = _random_geometry(rng, op)
        if op == "avg" or not _padding_only_window(case):
            return case


def _padding_only_window(case: dict) -> bool:
    for axis in range(2):
        size, k, s, d, p = (case["shape"][2 + axis], case["kernel"][axis],
                            case["stride"][axis], case["dilation"][axis], case["pad"][axis])
        out = dy_shape("max", case)[2 + axis]
        rows = np.arange(out)[:, None] * s - p + np.arange(k)[None, :] * d
        if not ((rows >= 0) & (rows < size)).any(axis=1).all():
            return True
    return False


def _random_geometry(rng: np.random.Generator, op: str) -> dict:
    kern = [int(v) for v in rng.integers(1, 5, size=2)]
    stride = [int(v) for v in rng.integers(1, 4, size=2)]
    dilation = [int(v) for v in rng.integers(1, 3, size=2)] if op == "max" else [1, 1]
    extent = [d * (k - 1) + 1 for k, d in zip(kern, dilation)]
    pad = [int(rng.integers(0, k // 2 + 1)) for k in kern]   # PyTorch: at most half of k
    hw = [int(rng.integers(max(1, e - 2 * p), e + 7)) for e, p in zip(extent, pad)]
    case = {"shape": (int(rng.integers(1, 3)), int(rng.integers(1, 4)), *hw),
            "kernel": kern, "stride": stride, "pad": pad + pad,
            "ceil_mode": bool(rng.integers(0, 2))}
    if op == "max":
        case["dilation"] = dilation
    else:
        case["count_include_pad"] = bool(rng.integers(0, 2))
    return case


def torch_grad(op: str, case: dict, x: np.ndarray, dy_seed: int, elem: str
               ) -> tuple[np.ndarray, np.ndarray]:
    """(dy, x.grad): PyTorch's gradient of the pool at x for a random dy."""
    xt = torch.tensor(x, requires_grad=True)
    common = dict(kernel_size=case["kernel"], stride=case["stride"], padding=case["pad"][:2],
                  ceil_mode=case["ceil_mode"])
    if op == "max":
        y = torch.nn.functional.max_pool2d(xt, dilation=case["dilation"], **common)
    else:
        y = torch.nn.functional.avg_pool2d(xt, count_include_pad=case["count_include_pad"],
                                           **common)
    dy = np.random.default_rng(dy_seed).standard_normal(tuple(y.shape)).astype(DTYPES[elem][0])
    y.backward(torch.tensor(dy))
    return dy, xt.grad.numpy()


def grad_text(op: str, case: dict, dy_shape: tuple, elem: str) -> str:
    attrs = {k: v for k, v in case.items() if k != "shape"}
    if op == "max":
        return one_op("max_pool2d_grad", [case["shape"], dy_shape], elem, attrs)
    return one_op("avg_pool2d_grad", [dy_shape], elem, {**attrs, "input_shape": case["shape"]})


def grad_args(op: str, x: np.ndarray, dy: np.ndarray) -> list[np.ndarray]:
    return [x, dy] if op == "max" else [dy]


def assert_torch_close(got: np.ndarray, want: np.ndarray, dy: np.ndarray, elem: str) -> None:
    """Within a few roundings of the sum (module docstring)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    floor = 8 * U[elem] * float(np.max(np.abs(dy), initial=0.0))
    np.testing.assert_allclose(got, want, rtol=8 * U[elem], atol=floor)


def check_against_torch(op: str, case: dict, x: np.ndarray, elem: str, seed: int) -> None:
    dy, want = torch_grad(op, case, x, seed, elem)
    text = grad_text(op, case, dy.shape, elem)
    got = graph_run(text, grad_args(op, x, dy))
    assert_torch_close(got, want, dy, elem)


# -- against PyTorch ---------------------------------------------------------------------

@pytest.mark.parametrize("elem", ["f32", "f64"])
@pytest.mark.parametrize("op", ["max", "avg"])
def test_random_cases_against_torch(op, elem):
    rng = rng_for("pool-grad-torch", op, elem)
    for i in range(40):
        case = random_case(rng, op)
        x = rng.standard_normal(case["shape"]).astype(DTYPES[elem][0])
        check_against_torch(op, case, x, elem, seed=i)


TIES = [  # (N, C, H, W), kernel, stride, pad, dilation, ceil_mode
    ((1, 2, 5, 5), [3, 3], [1, 1], [1, 1], [1, 1], False),     # every window overlaps
    ((2, 1, 6, 7), [2, 3], [2, 1], [1, 1], [1, 2], True),
    ((1, 1, 4, 4), [4, 4], [3, 3], [2, 2], [1, 1], True),      # ceil overhang
    ((1, 3, 7, 5), [3, 2], [2, 2], [0, 1], [2, 1], False),
]


@pytest.mark.parametrize("elem", ["f32", "f64"])
@pytest.mark.parametrize("fill", ["constant", "few values", "nan", "-inf", "all -inf"])
@pytest.mark.parametrize("geometry", TIES, ids=lambda g: f"{g[0]}-k{g[1]}-s{g[2]}-p{g[3]}")
def test_max_pool2d_grad_ties_follow_torch(geometry, fill, elem):
    """PyTorch's CPU rule: the first maximum in the window's row-major scan, the
    last NaN, padding never; a window of -inf gives its first element."""
    shape, kern, stride, pad, dilation, ceil = geometry
    case = {"shape": shape, "kernel": kern, "stride": stride, "pad": pad + pad,
            "dilation": dilation, "ceil_mode": ceil}
    rng = rng_for("ties", geometry, fill, elem)
    x = {"constant": np.full(shape, 0.5),
         "few values": rng.integers(0, 3, size=shape).astype(float),
         "nan": np.where(rng.random(shape) < 0.3, np.nan, rng.integers(0, 2, size=shape)),
         "-inf": np.where(rng.random(shape) < 0.6, -np.inf, rng.standard_normal(shape)),
         "all -inf": np.full(shape, -np.inf)}[fill].astype(DTYPES[elem][0])
    check_against_torch("max", case, x, elem, seed=1)


def test_padding_never_wins_even_over_minus_infinity():
    """A window whose elements inside the input are all -inf gives its dy to the
    first of them, not to the padding (which also reads -inf)."""
    text = one_op("max_pool2d_grad", [(1, 1, 2, 2), (1, 1, 2, 2)], "f32",
                  {"kernel": [3, 3], "stride": [1, 1], "pad": [1, 1, 1, 1]})
    dy = np.array([[[[1, 2], [4, 8]]]], np.float32)
    got = graph_run(text, [np.full((1, 1, 2, 2), -np.inf, np.float32), dy])
    np.testing.assert_array_equal(got, [[[[15, 0], [0, 0]]]])


# -- shape rules ---------------------------------------------------------------------------

def graph_module(signature: str, line: str, result: str) -> str:
    return (f'module "t"\nstage graph\nfunc @main({signature}) -> {result} {{\n'
            f"'entry:\n  %r = {line} : {result}\n  return %r\n}}\n")


BAD = [
    ("%x: <1 x 2 x 5 x 5 x f32>, %dy: <1 x 2 x 3 x 3 x f32>",
     "max_pool2d_grad %x, %dy {kernel = [3, 3], stride = [2, 2]}", "<1 x 2 x 5 x 5 x f32>",
     "dy is [1, 2, 3, 3] but max_pool2d of x [1, 2, 5, 5] gives [1, 2, 2, 2]"),
    ("%x: <1 x 2 x 5 x 5 x f32>, %dy: <1 x 2 x 2 x 2 x f64>",
     "max_pool2d_grad %x, %dy {kernel = [3, 3], stride = [2, 2]}", "<1 x 2 x 5 x 5 x f32>",
     "dy has element type f64 but input has f32"),
    ("%x: <1 x 2 x 5 x 5 x i32>, %dy: <1 x 2 x 2 x 2 x i32>",
     "max_pool2d_grad %x, %dy {kernel = [3, 3], stride = [2, 2]}", "<1 x 2 x 5 x 5 x i32>",
     "needs a floating-point input"),
    ("%x: <1 x 2 x 5 x 5 x f32>, %dy: <1 x 2 x 3 x 3 x f32>",
     "max_pool2d_grad %x, %dy {kernel = [3, 3], stride = [2, 2], pad = [2, 2, 2, 2]}",
     "<1 x 2 x 5 x 5 x f32>", "pad 2 on the top is more than half the kernel extent 3"),
    ("%x: <2 x 5 x 5 x f32>, %dy: <2 x 2 x 2 x f32>",
     "max_pool2d_grad %x, %dy {kernel = [3, 3]}", "<2 x 5 x 5 x f32>",
     "input (N x C x H x W) must have rank 4"),
    ("%dy: <1 x 2 x 3 x 3 x f32>",
     "avg_pool2d_grad %dy {kernel = [2, 2], stride = [2, 2], input_shape = [1, 2, 5, 5]}",
     "<1 x 2 x 5 x 5 x f32>",
     "dy is [1, 2, 3, 3] but avg_pool2d of input_shape [1, 2, 5, 5] gives [1, 2, 2, 2]"),
    ("%dy: <1 x 2 x 2 x 2 x f32>",
     "avg_pool2d_grad %dy {kernel = [2, 2], stride = [2, 2], input_shape = [2, 5, 5]}",
     "<2 x 5 x 5 x f32>", "'input_shape'"),
    ("%dy: <1 x 2 x 2 x 2 x f32>", "avg_pool2d_grad %dy {kernel = [2, 2], stride = [2, 2]}",
     "<1 x 2 x 4 x 4 x f32>", "input_shape"),
    ("%dy: <1 x 2 x 2 x 2 x f32>",
     "avg_pool2d_grad %dy {kernel = [2, 2], stride = [2, 2], input_shape = [1, 0, 4, 4]}",
     "<1 x 2 x 4 x 4 x f32>", "'input_shape' entries must be positive"),
    ("%dy: <1 x 2 x 2 x 2 x i32>",
     "avg_pool2d_grad %dy {kernel = [2, 2], stride = [2, 2], input_shape = [1, 2, 4, 4]}",
     "<1 x 2 x 4 x 4 x i32>", "needs a floating-point dy"),
    ("%dy: <1 x 2 x 2 x 2 x f32>",
     "avg_pool2d_grad %dy {kernel = [2, 2], stride = [2, 2], input_shape = [1, 2, 4, 4], "
     "dilation = [2, 2]}", "<1 x 2 x 4 x 4 x f32>", "dilation"),
]


@pytest.mark.parametrize("signature, line, result, message", BAD,
                         ids=[b[3][:40] for b in BAD])
def test_shape_rule_errors(signature, line, result, message):
    with pytest.raises((VerificationError, OpError, Diagnostic)) as e:
        verify(parse_module(graph_module(signature, line, result), "<bad>"))
    assert message in str(e.value)


def test_results_are_not_differentiable():
    from swir.ops import AVG_POOL2D_GRAD, MAX_POOL2D_GRAD
    assert not MAX_POOL2D_GRAD.differentiable and not AVG_POOL2D_GRAD.differentiable


# -- lowering ------------------------------------------------------------------------------

LOWERED = [  # op, (N, C, H, W), kernel, stride, pad, dilation, ceil_mode, count_include_pad
    ("max", (1, 2, 5, 5), [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], False, None),
    ("max", (2, 1, 5, 5), [2, 2], [2, 2], [0, 0, 0, 0], [1, 1], True, None),
    ("max", (1, 2, 7, 6), [3, 2], [1, 2], [2, 1, 2, 0], [2, 1], False, None),  # asymmetric
    ("max", (1, 2, 1, 3), [2, 1], [1, 1], [1, 0, 1, 0], [2, 1], False, None),  # padding only
    ("max", (1, 2, 5, 4), [1, 1], [2, 2], [0, 0, 0, 0], [1, 1], False, None),  # kernel 1
    ("avg", (1, 2, 5, 5), [3, 3], [2, 2], [1, 1, 1, 1], None, False, False),
    ("avg", (2, 1, 5, 5), [2, 2], [2, 2], [0, 0, 0, 0], None, True, True),
    ("avg", (1, 2, 4, 5), [2, 3], [1, 2], [1, 0, 0, 1], None, False, False),   # asymmetric
    ("avg", (1, 1, 7, 7), [3, 3], [3, 3], [1, 1, 1, 1], None, True, False),
    ("avg", (1, 2, 5, 4), [1, 1], [2, 2], [0, 0, 0, 0], None, False, True),
]


def lowered_case(row) -> tuple[str, dict]:
    op, shape, kern, stride, pad, dilation, ceil, include = row
    case = {"shape": shape, "kernel": kern, "stride": stride, "pad": pad, "ceil_mode": ceil}
    if op == "max":
        case["dilation"] = dilation
    else:
        case["count_include_pad"] = include
    return op, case


def dy_shape(op: str, case: dict) -> tuple[int, ...]:
    attrs = {k: v for k, v in case.items() if k not in ("shape",)}
    text = one_op("max_pool2d" if op == "max" else "avg_pool2d", [case["shape"]], "f32", attrs)
    return parse_module(text, "<fwd>").lookup("main").result_types[0].shape


@pytest.mark.parametrize("elem", ["f32", "f64"])
@pytest.mark.parametrize("row", LOWERED, ids=lambda r: f"{r[0]}-{r[1]}-k{r[2]}-s{r[3]}-p{r[4]}")
def test_lower_loops_matches_the_interpreter(row, elem):
    """Each input element sums at most kH*kW window gradients, in the element
    type in loop order (test_lower_nn's bound)."""
    op, case = lowered_case(row)
    rng = rng_for("pool-grad-lower", row, elem)
    dt = DTYPES[elem][0]
    # ties and NaNs (several to a window): the scan's rule must be followed
    x = rng.integers(0, 3, size=case["shape"]).astype(dt)
    x[rng.random(x.shape) < 0.2] = np.nan
    dy = rng.standard_normal(dy_shape(op, case)).astype(dt)
    text = grad_text(op, case, dy.shape, elem)
    args = grad_args(op, x, dy)
    want, got, m = run_both(text, args)
    if op == "max":   # the bound of test_lower_nn: the op applied to |dy|, the same winners
        args = [x, np.abs(dy)]
    assert_sum_close(want, got, text, args, case["kernel"][0] * case["kernel"][1], elem)
    no_guards(m)


@pytest.mark.parametrize("row", [r for r in LOWERED if r[0] == "max"],
                         ids=lambda r: f"{r[1]}-k{r[2]}-s{r[3]}-p{r[4]}")
def test_lowered_max_pool2d_grad_with_minus_infinity(row):
    """Windows whose elements inside the input are all -inf (every one in
    channel 0): their dy goes to the first of them, never to the padding,
    which reads -inf too."""
    op, case = lowered_case(row)
    rng = rng_for("pool-grad-ninf", row)
    x = np.where(rng.random(case["shape"]) < 0.5, -np.inf,
                 rng.integers(0, 3, size=case["shape"])).astype(np.float32)
    x[:, 0] = -np.inf
    dy = rng.standard_normal(dy_shape(op, case)).astype(np.float32)
    text = grad_text(op, case, dy.shape, "f32")
    want, got, _ = run_both(text, [x, dy])
    assert_sum_close(want, got, text, [x, np.abs(dy)], case["kernel"][0] * case["kernel"][1],
                     "f32")


O3_GRAPH = """module "train"
stage graph
func @main(%x: <2 x 3 x 9 x 9 x f32>, %dy: <2 x 3 x 5 x 5 x f32>) -> <2 x 3 x 9 x 9 x f32> {
'entry:
  %r = relu %x : <2 x 3 x 9 x 9 x f32>
  %g = max_pool2d_grad %r, %dy {kernel = [3, 3], stride = [2, 2], pad = [1, 1, 1, 1]} : <2 x 3 x 9 x 9 x f32>
  %a = avg_pool2d_grad %dy {kernel = [3, 3], stride = [2, 2], pad = [1, 1, 1, 1], input_shape = [2, 3, 9, 9]} : <2 x 3 x 9 x 9 x f32>
  %s = add %g, %a : <2 x 3 x 9 x 9 x f32>
  %t = mul %s, %x : <2 x 3 x 9 x 9 x f32>
  return %t
}
"""


def test_o3_pipeline_matches_the_interpreter():
    """swir-cg's -O3 pipeline (fusion, -lower-loops, the searched LDM plan,
    -insert-dma) on both gradients with producers and consumers to fuse; the
    dma stage's result against the graph interpreter's."""
    rng = rng_for("pool-grad-O3")
    x = rng.integers(-2, 3, size=(2, 3, 9, 9)).astype(np.float32)
    dy = rng.standard_normal((2, 3, 5, 5)).astype(np.float32)
    g = parse_module(O3_GRAPH, "<O3>")
    verify(g)
    (want,) = run_function(g, g.lookup("main"), [x, dy])
    m = parse_module(O3_GRAPH, "<O3>")
    passes = [pass_class(n)(**level_options(n)) for n in compile_pipeline("graph")]
    PassManager(passes, verify_each=True).run(m)
    assert m.stage == "dma"
    (got,) = interpreter_for(m).run("main", [x, dy])
    # |got - want| within 9 window gradients summed twice and two roundings more
    bound = 2 * 22 * U["f32"] * (np.abs(x) * 2 * np.max(np.abs(dy)) * 9)
    assert np.all(np.abs(got.reshape(want.shape).astype(np.float64) - want) <= bound + 1e-30)
    kernels = [f.name for f in m.functions if f.kind == "kernel" or f.target == "cpe"]
    assert any("relu_max_pool2d_grad" in k for k in kernels), kernels  # relu fused in


# -- C under the emulation -----------------------------------------------------------------

@pytest.mark.parametrize("ldm_size", [65536, 2048])
def test_compiled_program_equals_the_interpreter(tmp_path, ldm_size):
    """The -O3 module above through swir-cg's pipeline, written as C, built
    with ``make emu`` and run: equal to the dma-stage interpreter (the same
    sums in the same order), and so within the bound above of the graph
    stage. At 2 KB of LDM the plan tiles every nest."""
    from swir.codegen import emulate
    from swir.codegen.project import Options, generate, write_project
    from swir.interp.loop import io_signature
    rng = rng_for("pool-grad-emu")
    x = rng.integers(-2, 3, size=(2, 3, 9, 9)).astype(np.float32)
    dy = rng.standard_normal((2, 3, 5, 5)).astype(np.float32)
    m = parse_module(O3_GRAPH, "<O3>")
    passes = [pass_class(n)(**level_options(n)) for n in compile_pipeline("graph")]
    plan = passes[compile_pipeline("graph").index("ldm-plan")]
    plan.ldm_size = ldm_size
    if ldm_size == 2048:
        # The fused kernel spawns 7 nests whose Para members each hold its 11
        # pointers (616 B): more than the default reserve of 128 B, and
        # -ldm-plan does not count the Para (test_codegen.PARA_RESERVES).
        # -insert-dma's double buffers fill the LDM up to the default reserve
        # whatever -ldm-plan's, so they are left out here.
        plan.ldm_reserve = 768
        passes[compile_pipeline("graph").index("insert-dma")].double_buffer = False
    PassManager(passes, verify_each=True).run(m)
    (want,) = interpreter_for(m).run("main", [x, dy])
    write_project(generate(m, Options(source="<O3>")), str(tmp_path / "p"), force=False)
    program = emulate.build(tmp_path / "p", m.name)
    ins, outs = io_signature(m.lookup("main"))
    run = emulate.run(program, [x, dy], [p.type for p in ins], outs)
    np.testing.assert_array_equal(run.outputs[0].reshape(want.shape), want)
