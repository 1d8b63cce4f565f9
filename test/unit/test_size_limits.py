"""Absurd sizes (docs/ir.md, "Limits"; docs/reliability.md): one limit, 2^62
bytes per tensor or buffer (the generated C's longs, with room for the index
arithmetic around them), enforced where it can first be known -- the parser
and the verifier, swir-import for ONNX shapes, -mem-plan for the arena -- with
a located error and exit 1; and sizes within the limit compile in seconds,
because the DMA traffic count sums long loops piecewise
(swir.analysis.loop_sums) instead of walking them, its work is bounded, and
the plan search's time budget holds inside a measurement."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from siblings import sibling

from swir.costmodel import traffic
from swir.costmodel.traffic import CountLimit, dma_traffic
from swir.ir.builder import Builder
from swir.ir.core import Module
from swir.ir.types import F32, MAX_BYTES, TensorType
from swir.parser import parse_module
from swir.passes.manager import PassManager
from swir.verifier import VerificationError, verify

BIN = Path(sys.executable).parent


def relu_module(shape: str, elem: str = "f32") -> str:
    t = f"<{shape} x {elem}>"
    return (f'module "huge"\nstage graph\n\nfunc @main(%x: {t}) -> {t} {{\n'
            f"'entry:\n  %y = relu %x : {t}\n  return %y\n}}\n")


def tool(*argv, timeout: float = 600) -> subprocess.CompletedProcess:
    """A tool run; the timeout only turns a hang into a failure (the runs
    below take about a second)."""
    return subprocess.run([str(BIN / argv[0]), *map(str, argv[1:])], capture_output=True,
                          text=True, timeout=timeout)


# -- the limit ------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, size", [
    ("9" * 400, "2^1330"),                      # a 400-digit dimension
    (str(2**61), "2^63"),                       # 2^63 bytes of f32
    ("4294967296 x 4294967296", "2^66"),        # a product of dimensions past 2^63
])
@pytest.mark.parametrize("prog", ["swir-opt", "swir-cg", "swir-run", "swir-report"])
def test_sizes_over_the_limit_are_a_located_error(tmp_path, shape, size, prog):
    src = tmp_path / "huge.swir"
    src.write_text(relu_module(shape))
    args = {"swir-opt": [], "swir-cg": ["-o", tmp_path / "out"], "swir-run": [],
            "swir-report": []}[prog]
    p = tool(prog, src, *args)
    assert p.returncode == 1, p.stderr
    first = p.stderr.splitlines()[0]
    assert first.startswith(f"{src}:4:16: error: type <") and "is too large: about " + size in first, first
    assert "over swir's limit of 2^62 bytes" in first
    assert not (tmp_path / "out").exists()


def test_the_verifier_checks_types_built_in_memory():
    m = Module("m", stage="graph")
    big = TensorType((2**40, 2**40), F32)
    f, b = Builder.function(m, "main", [big])
    f.result_types = [big]
    b.create_inst("return", f.params[0])
    with pytest.raises(VerificationError) as e:
        verify(m)
    assert "is too large" in e.value.diagnostics[0].message


def test_the_limit_itself_is_accepted():
    m = parse_module(relu_module(str(MAX_BYTES // 4)), "<limit>")
    verify(m)


def test_an_arena_over_the_limit_is_mem_plans_error(tmp_path):
    """Two live 2^62-byte intermediates: each is within the limit, together not."""
    n = 2**60
    src = tmp_path / "two.swir"
    t = f"<{n} x f32>"
    src.write_text(f'module "two"\nstage graph\nfunc @main(%x: {t}) -> {t} {{\n\'entry:\n'
                   f"  %a = relu %x : {t}\n  %b = neg %a : {t}\n  %c = add %a, %b : {t}\n"
                   "  return %c\n}\n")
    p = tool("swir-cg", "-O0", src, "-o", tmp_path / "out")
    assert p.returncode == 1 and "-mem-plan: the buffers live at one time need about 2^63 " \
        "bytes of arena, over swir's limit of 2^62 bytes" in p.stderr, p.stderr


# -- sizes within the limit compile quickly -------------------------------------------------

def lower(text: str, level: str = "O3"):
    """The dma-stage module swir-cg compiles at ``level``."""
    from swir.tools import swir_cg
    m = parse_module(text, "<huge>")
    passes = swir_cg.lowering(swir_cg.level_passes(m.stage, level, {}), m.stage, {}, [], "t")
    PassManager(passes).run(m)
    return m


@pytest.mark.parametrize("shape", [str(2**60), f"{2**60} x 1", f"{2**30} x {2**30}"])
def test_the_traffic_of_a_huge_relu_is_counted_in_a_few_steps(shape):
    """2^62 bytes in, 2^62 out, counted exactly with a few hundred evaluations
    (it used to walk 2^42 tile iterations per CPE)."""
    m = lower(relu_module(shape))
    t = dma_traffic(m, count_compute=True)
    assert t.bytes_in == MAX_BYTES and t.bytes_out == MAX_BYTES
    assert t.total.spawns == 1 and t.kernels["relu_0"].flops == MAX_BYTES // 4
    assert t.work < 10_000, t.work


def test_swir_cg_O3_and_swir_report_on_a_2_62_byte_tensor(tmp_path):
    src = tmp_path / "huge.swir"
    src.write_text(relu_module(str(2**60)))
    p = tool("swir-cg", "-q", src, "-o", tmp_path / "out")
    assert p.returncode == 0, p.stderr
    main_c = (tmp_path / "out" / "main.c").read_text()
    assert "4611686018427387904" in main_c     # 2^62, a C long constant
    p = tool("swir-report", src)
    assert p.returncode == 0 and "relu_0" in p.stdout, p.stderr


def test_the_search_measures_its_plans_within_its_budget(monkeypatch):
    """-ldm-plan's search hands the end of its budget to every exact
    measurement; when counting stops there, the best plan measured so far
    wins (here greedy's, measured first) and the nest is reported cut short."""
    from swir.passes.buffered import ldm_search
    from swir.passes.buffered.ldm_plan import LDMPlan
    from swir.passes.loop.lower_loops import LowerLoops
    deadlines = []
    real = ldm_search.cost_report

    def stopped_after_one(m, *args, deadline=None, **kwargs):
        deadlines.append((deadline, time.monotonic()))
        if len(deadlines) > 1:
            raise CountLimit("counting the DMA traffic ran out of its time budget")
        return real(m, *args, deadline=deadline, **kwargs)
    monkeypatch.setattr(ldm_search, "cost_report", stopped_after_one)
    m = parse_module(relu_module("3000 x 700"), "<relu>")
    PassManager([LowerLoops(), plan := LDMPlan(strategy="search", search_budget=60)]).run(m)
    assert len(deadlines) == 2
    assert all(d is not None and now < d <= now + 60 for d, now in deadlines)
    assert plan.statistics["nests whose search the time budget cut short"] == 1
    assert plan.statistics["nests where greedy stayed best"] == 1


def test_a_search_budget_of_zero_keeps_greedys_plan(tmp_path):
    """With no time at all, nothing is measured and greedy's plan stays."""
    src = tmp_path / "huge.swir"
    src.write_text(relu_module(str(2**60)))
    p = tool("swir-opt", "--stats", "-lower-loops",
             "-ldm-plan{strategy=search,search-budget=0}", src, "-o", tmp_path / "o.swir")
    assert p.returncode == 0, p.stderr
    assert "nests whose search the time budget cut short: 1" in p.stderr
    assert "nests where greedy stayed best: 1" in p.stderr


def test_counting_past_a_deadline_stops():
    m = lower(relu_module("100000"), "O0")
    with pytest.raises(CountLimit, match="time budget"):
        dma_traffic(m, deadline=time.monotonic() - 1)


NOT_SUMMABLE = """
module "walked"
stage dma {ldm_size = 65536}

cpe kernel @k(%X: buf<256 x f32>) {
  %b = ldm_alloc : ldm<1 x f32>
  for %i = 0 to 100000 {
    if (%i floordiv 7) * 7 == %i {
      dma_get %X[0] -> %b {count = 1, reply = 1}
      dma_wait {reply = 1, times = 1}
    }
  }
}
"""


def test_a_loop_that_cannot_be_summed_is_walked_within_a_limit():
    """A guard on ``%i floordiv 7`` is not piecewise affine: the loop is
    walked, exactly, and a count over the work limit stops with an error."""
    m = parse_module(NOT_SUMMABLE, "<walked>")
    verify(m)
    t = dma_traffic(m)
    assert t.gets == 64 * len(range(0, 100000, 7)) and t.work >= 64 * 100000
    with pytest.raises(CountLimit, match="more than 1,000 loop iterations"):
        dma_traffic(m, work_limit=1000)


# -- summing is exact -------------------------------------------------------------------------

_codegen = sibling("test_codegen")


def _walked(monkeypatch, m):
    with monkeypatch.context() as mp:
        mp.setattr(traffic._FunctionWriter, "sum_plan", lambda self, inst: None)
        return dma_traffic(m, count_compute=True)


def _same(a, b) -> bool:
    return a.kernels.keys() == b.kernels.keys() and all(
        (x.as_dict(), x.flops, x.muls, x.busy_cpes, x.transfers_by_shape)
        == (y.as_dict(), y.flops, y.muls, y.busy_cpes, y.transfers_by_shape)
        for x, y in zip(a.kernels.values(), b.kernels.values()))


def test_summed_counts_equal_walked_counts(monkeypatch):
    """Every graph-op configuration of test_codegen at 2 KB of LDM (remainder
    tiles: min() bounds), double-buffered (guards on the tile variable),
    counted both ways; and the piecewise sums were used."""
    summed_loops = 0
    real = traffic._Counter.sum_loop

    def counting(self, counts, m, cpe, body, lo, hi, step, *rest):
        nonlocal summed_loops
        summed_loops += len(range(lo, hi, step)) > traffic.SHORT_LOOP
        return real(self, counts, m, cpe, body, lo, hi, step, *rest)
    monkeypatch.setattr(traffic._Counter, "sum_loop", counting)
    for op, types, attrs in _codegen.CASES:
        m = _codegen.lower(_codegen.build(op, types, attrs), 2048)
        assert _same(dma_traffic(m, count_compute=True), _walked(monkeypatch, m)), op
    assert summed_loops > 0


@pytest.mark.parametrize("n", [1000, 4097, 100003])
def test_summed_equals_walked_on_long_remainder_tiles(monkeypatch, n):
    for level in ("O0", "O3"):
        m = lower(relu_module(f"{n} x 3"), level)
        assert _same(dma_traffic(m, count_compute=True), _walked(monkeypatch, m))


RUNTIME_GUARD = """
module "unknown"
stage dma {ldm_size = 65536}

cpe kernel @k(%X: buf<256 x f32>, %p: index) {
  %b = ldm_alloc : ldm<1 x f32>
  for %t = 0 to 100 {
    if %t < 0 {
      if %t < %p {
        dma_get %X[0] -> %b {count = 1, reply = 1}
        dma_wait {reply = 1, times = 1}
      }
    }
    dma_get %X[0] -> %b {count = 1, reply = 1}
    dma_wait {reply = 1, times = 1}
  }
}
"""


def test_a_guard_on_a_run_time_value_that_never_runs_is_walked():
    """The pieces' forms include a guard reading the input %p, on a path no
    iteration takes: the loop is walked, as the interpreter runs it, not
    refused."""
    m = parse_module(RUNTIME_GUARD, "<unknown>")
    verify(m)
    assert dma_traffic(m).gets == 64 * 100
