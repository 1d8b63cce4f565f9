"""The benchmark zoo end to end: every model of bench/models/zoo.py at a
reduced size goes ONNX → swir-import → swir-cg → make emu → run, at -O0 (no
graph optimisation) and at -O3 (everything, swir-cg's default), and its
outputs must equal onnxruntime's (CPU, graph optimisations off) and each
other's. -O3 must never move more DMA bytes than -O0, and fewer on every
model with a batch norm or an element-wise layer (all eight have one).

Reduced sizes keep every layer of each model (the topology, the op mix, the
strides, the groups and the heads are those of the paper-size model). They
shrink the input resolution and divide the channel counts (``width``), and
BERT gets fewer layers and a smaller hidden size. At paper size the
weights alone would be 45 MB to 553 MB per model; bench/zoo.py runs those
sizes (docs/performance.md). BERT is written with external data
(MODEL.onnx.data) so that path is exercised end to end.

Tolerance: f32 rtol 1e-4, atol 1e-5 (the issue's figures), for every model.
The generated C sums convolutions and matrix products in tile order and
onnxruntime in its own (MLAS), so the two differ by rounding only.

Each model is compiled once per level: swir-cg's pipeline at that level,
run in process by swir-opt, writes the dma-stage module, and swir-cg makes
the C from it (test_codegen_onnx.py and test_examples_codegen.py run swir-cg
from the graph stage). The same run checks the DMA counters the program
reports, per kernel, against swir.costmodel.traffic's static count of that
module. So the bench's static DMA figures are tied to what the C does on the
zoo models.

The -O3 project of each model is also built with ``make emu-asan``
(AddressSanitizer + UndefinedBehaviorSanitizer) and ``make emu-tsan``
(ThreadSanitizer: the 64 CPE threads and the MPE really concurrent) and run
with every report fatal (test_codegen_sanitizers.ENV); each must exit 0 with
no report, give onnxruntime's outputs at the same tolerance and the same DMA
counters as the plain build. Every zoo model runs several kernels (12 to
60; 12 to 191 spawns of 64 threads), so all eight run under both. The emulation runtime's checks
(an LDM frame over the capacity, a DMA not waited for at kernel end, DMAs
outside their buffers) are unconditional C in these builds as in ``make
emu``; test_codegen_sanitizers.py shows broken programs being caught under
each sanitizer. Nothing is tuned down: the Makefile's builds (-O2 -g) and
the small programs' sanitizer options. Measured on the 2-core machine under
other load, the sanitizer builds and runs take about 95 s of CPU (ASan
builds 42 s, ASan runs 7 s, TSan builds 16 s, TSan runs 31 s; the longest
TSan runs, yolov3's and shufflenet's, 8 s of CPU and 12 to 20 s of wall
time each, as TSan starts 64 threads per kernel call) and added 1.5 minutes
of wall time to this file (3.5 to 5 minutes).

Models are imported and compiled two at a time (the 2-core CI machine), the
sanitizer builds and runs in the same two workers.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from swir.tools import swir_opt
from swir.passes.pipelines import pipeline_flags

from swir.costmodel.cost import cost_report
from swir.costmodel.traffic import dma_traffic
from swir.codegen import cpe_stack, emulate
from swir.interp.loop import io_signature
from swir.parser import parse_module

import siblings

sanitizers = siblings.sibling("test_codegen_sanitizers")

pytestmark = pytest.mark.skipif(
    subprocess.run(["sh", "-c", "command -v cc && command -v make"],
                   capture_output=True, check=False).returncode != 0,
    reason="no host C compiler (cc) or make on PATH")

BIN = Path(sys.executable).parent
RTOL, ATOL = 1e-4, 1e-5

zoo = siblings.zoo()
# name -> (builder keyword arguments, write with external data)
REDUCED = zoo.REDUCED


@dataclass
class Sanitized:
    """The -O3 program built for a sanitizer target and run: what it gave, or
    (outputs None) why building or running it failed."""
    outputs: list[np.ndarray] | None
    counters: dict | None
    stderr: str


@dataclass
class Result:
    outputs: list[np.ndarray]          # the program's
    reference: list[np.ndarray]        # onnxruntime's
    counters: dict                     # the program's DMA counters, per kernel
    static: dict                       # swir.costmodel.traffic's
    misaligned: dict                   # per kernel: (program's, static bound), main memory and LDM
    modeled: dict[str, float]          # modeled time per kernel (swir.costmodel.cost)
    greedy: dict[str, float] | None    # the same with -ldm-plan's greedy strategy (at -O3)
    sanitized: dict[str, Sanitized]    # by make target, at -O3 (when cc links it)
    stack: cpe_stack.StackReport | None  # the CPE stack against the LDM reserve (at -O3)


def tool(name: str, *args: str) -> None:
    r = subprocess.run([str(BIN / name), *args], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise AssertionError(f"{name} failed ({r.returncode}):\n{r.stderr}")


def onnxruntime_run(path: Path, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]) \
        .run(None, inputs)


LEVELS = ("O0", "O3")
SANITIZED = ("emu-asan", "emu-tsan")
SANITIZED_BUILD_S = 900
linkable: dict[str, bool] = {}         # make target -> cc links its sanitizers (the fixture fills it)


def compile_and_run(name: str, root: Path, level: str) -> Result:
    kwargs, external = REDUCED[name]
    d = root / f"{name}-{level}"
    d.mkdir()
    model = zoo.build(name, **kwargs)
    inputs = zoo.random_inputs(model, seed=1)
    onnx_path = d / f"{name}.onnx"
    zoo.save(model, onnx_path, external_data=external)
    swir_path = d / f"{name}.swir"
    tool("swir-import", str(onnx_path), "-o", str(swir_path))
    # swir-cg's pipeline at the level, once (in process), to the dma stage;
    # swir-cg compiles that module to C, so the static count below is of the
    # module the C was made from.
    lowered = d / f"{name}.dma.swir"
    assert swir_opt.main(pipeline_flags("graph", level)
                         + [str(swir_path), "-o", str(lowered)]) == 0
    project = d / "project"
    tool("swir-cg", str(lowered), "-o", str(project))
    module = parse_module(swir_path.read_text(), str(swir_path)).name
    program = emulate.build(project, module)
    dma = parse_module(lowered.read_text(), str(lowered))
    ins, outs = io_signature(dma.lookup("main"))
    run = emulate.run(program, list(inputs.values()), [p.type for p in ins], outs)
    greedy = None
    if level == "O3":   # the same with the paper's greedy LDM plan, to compare plans
        greedy_path = d / f"{name}.greedy.dma.swir"
        flags = [f.replace("strategy=search", "strategy=greedy")
                 for f in pipeline_flags("graph", level)]
        assert swir_opt.main(flags + [str(swir_path), "-o", str(greedy_path)]) == 0
        greedy = modeled(parse_module(greedy_path.read_text(), str(greedy_path)))
    sanitized = {}
    stack = cpe_stack.measure(project) if level == "O3" else None
    if level == "O3":   # the same project under the sanitizers
        for target in SANITIZED:
            if linkable[target]:
                sanitized[target] = sanitized_run(project, module, target,
                                                  list(inputs.values()), ins, outs)
    traffic = dma_traffic(dma)
    misaligned = {k: ((s["mem_misaligned"], s["ldm_misaligned"]),
                      (traffic.kernels[k].mem_unaligned, traffic.kernels[k].ldm_unaligned))
                  for k, s in run.stats["functions"].items() if s["gets"] + s["puts"]}
    return Result(run.outputs, onnxruntime_run(onnx_path, inputs),
                  emulate.dma_counters(run.stats), traffic.counters(),
                  misaligned, modeled(dma), greedy, sanitized, stack)


def sanitized_run(project: Path, module: str, target: str, inputs: list[np.ndarray],
                  ins, outs) -> Sanitized:
    try:
        # A sanitizer build of the largest reduced model (ResNet-50, about
        # 240 KB of CPE C) took over emulate.build's 300 s on the 2-core CI
        # machine while the other pytest worker ran: the build is slow, not
        # stuck, so it gets more time.
        program = emulate.build(project, module, target, timeout=SANITIZED_BUILD_S)
        run = emulate.run(program, inputs, [p.type for p in ins], outs, env=sanitizers.ENV)
    except emulate.EmulationError as e:
        return Sanitized(None, None, str(e))
    return Sanitized(run.outputs, emulate.dma_counters(run.stats), run.stderr)


def modeled(dma) -> dict[str, float]:
    """Each kernel's modeled Sunway time (swir.costmodel.cost)."""
    return {k.name: k.modeled_s for k in cost_report(dma).kernels}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("zoo")
    load_zoo_kernels()
    for target in SANITIZED:
        linkable[target] = sanitizers.links(sanitizers.FLAGS[target], root)
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {(name, level): pool.submit(compile_and_run, name, root, level)
                   for name in REDUCED for level in LEVELS}
        yield futures


def load_zoo_kernels() -> None:
    """The interpreter's kernel registry is filled before the threads start
    (importing swir.interp registers every kernel); folding and lowering read it."""
    import swir.interp  # noqa: F401


def test_the_zoo_has_the_eight_models():
    assert sorted(zoo.MODELS) == sorted(REDUCED)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", list(REDUCED))
def test_matches_onnxruntime(results, name, level):
    r = results[name, level].result()
    assert len(r.outputs) == len(r.reference)
    for i, (got, want) in enumerate(zip(r.outputs, r.reference)):
        assert got.shape == want.shape and got.dtype == want.dtype, (i, got.shape, want.shape)
        assert np.std(want) > 1e-3, f"{name} output {i} is nearly constant: a weak check"
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL,
                                   err_msg=f"{name} output {i} vs onnxruntime")


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", list(REDUCED))
def test_dma_counters_equal_the_static_count(results, name, level):
    r = results[name, level].result()
    assert r.counters, "the program issued no DMA"
    assert r.counters == r.static


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", list(REDUCED))
def test_misaligned_transfers_within_the_static_bound(results, name, level):
    """swir-report's unaligned counts (transfers whose start is not 32-byte
    aligned in every run) bound the program's misaligned transfers, per
    kernel, on each side."""
    r = results[name, level].result()
    assert r.misaligned
    over = {k: v for k, v in r.misaligned.items()
            if v[0][0] > v[1][0] or v[0][1] > v[1][1]}
    assert not over, over


@pytest.mark.parametrize("name", list(REDUCED))
def test_o3_equals_o0(results, name):
    o0, o3 = results[name, "O0"].result(), results[name, "O3"].result()
    for i, (a, b) in enumerate(zip(o3.outputs, o0.outputs)):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL, err_msg=f"{name} output {i}")


def dma_bytes(counters: dict) -> int:
    return sum(k["bytes_in"] + k["bytes_out"] for k in counters.values())


# Models whose -O3 search takes a plan that moves more bytes for less modeled
# time, more than fusion saves: DCGAN (reduced), where -O0's greedy plans keep
# the transposed convs' weights whole (issue 24: 2,934,144 -> 1,280,768 bytes)
# while -O3's search plans its third transposed conv in a way that moves 4.4
# times its I/O bound and is modeled 11% faster (41.9 against greedy's 47.3 us).
# There -O3 must still be faster in the model and move fewer bytes than -O0
# did before whole tensors (its bytes then, counted by swir-report -O0
# --resident=false).
TRADES_BYTES_FOR_TIME = {"dcgan": 2_934_144}


@pytest.mark.parametrize("name", list(REDUCED))
def test_o3_moves_fewer_dma_bytes(results, name):
    """Every zoo model has batch norms or element-wise layers (relu, bias
    adds, residual adds, gelu), so -O3 must move strictly fewer bytes; the
    programs' own counters are compared (TRADES_BYTES_FOR_TIME: the
    exception, and what is asserted there)."""
    o0, o3 = results[name, "O0"].result(), results[name, "O3"].result()
    if name in TRADES_BYTES_FOR_TIME:
        assert sum(o3.modeled.values()) < sum(o0.modeled.values())
        assert dma_bytes(o0.counters) < dma_bytes(o3.counters) < TRADES_BYTES_FOR_TIME[name]
        return
    assert dma_bytes(o3.counters) < dma_bytes(o0.counters)


@pytest.mark.parametrize("name", list(REDUCED))
def test_search_plan_is_never_slower_than_greedy(results, name):
    """-O3 plans LDM tiles by cost-model search; by the same model, no kernel
    is slower than with the paper's greedy plan (1e-9: float rounding of
    equal plans), and the model as a whole is faster."""
    r = results[name, "O3"].result()
    assert r.greedy is not None and sorted(r.modeled) == sorted(r.greedy)
    slower = {k: (r.greedy[k], t) for k, t in r.modeled.items() if t > r.greedy[k] * (1 + 1e-9)}
    assert not slower, slower
    assert sum(r.modeled.values()) < sum(r.greedy.values())


@pytest.mark.parametrize("name", list(REDUCED))
def test_the_ldm_reserve_covers_the_cpe_stack(results, name):
    """Every spawned kernel's deepest stack, twice over plus 1 KB, and the
    CPE statics fit the reserve (swir.codegen.cpe_stack; the zoo at paper
    size: bench/cpe_stack.py)."""
    r = results[(name, "O3")].result().stack
    assert r.worst.bytes > 0 and r.static_bytes > 0
    assert r.covered, (r.worst, r.statics, r.required, r.reserve)


@pytest.mark.parametrize("target", SANITIZED)
@pytest.mark.parametrize("name", list(REDUCED))
def test_o3_program_is_clean_under_sanitizers(results, name, target):
    """The -O3 program under ASan+UBSan and under TSan: exit status 0 with
    every report fatal (a runtime check failing exits 1), no report at all,
    onnxruntime's outputs and the same DMA counters as the plain build."""
    r = results[name, "O3"].result()
    if target not in r.sanitized:
        pytest.skip(f"cc cannot link {sanitizers.FLAGS[target]} on this machine")
    if target == "emu-tsan":    # TSan's case: many kernels, each spawned on 64 threads
        assert len(r.counters) > 1
    s = r.sanitized[target]
    assert s.outputs is not None, s.stderr
    assert "Sanitizer" not in s.stderr and "runtime error" not in s.stderr, s.stderr
    assert len(s.outputs) == len(r.reference)
    for i, (got, want) in enumerate(zip(s.outputs, r.reference)):
        assert got.shape == want.shape and got.dtype == want.dtype, (i, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL,
                                   err_msg=f"{name} output {i} ({target}) vs onnxruntime")
    assert s.counters == r.counters
