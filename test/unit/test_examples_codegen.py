"""The bundled examples through swir-cg and `make emu`: the generated C, run on
swir's athread emulation, gives the graph interpreter's result on the bundled
inputs (examples/mlp.swir, examples/resnet.swir), and its DMA counters equal
the dma-stage interpreter's exactly (mlp, and the ResNet of make_resnet.py at
8 x 8, where the interpreter is quick). Also: make_resnet.py regenerates the
bundled files byte for byte, and the demo's checker (scripts/emu_check.py)
passes a right reference and fails a wrong one with exit status 1."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from swir.passes.pipelines import pipeline_flags

from swir.codegen import emulate
from swir.interp.run import interpreter_for, signature
from swir.parser import parse_module

from helpers import compile_cache

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CHECKER = ROOT / "scripts" / "emu_check.py"
DMA_PIPELINE = pipeline_flags("graph")  # what swir-cg runs
RTOL, ATOL = 1e-4, 1e-5   # f32, as the demo's checker

pytestmark = pytest.mark.skipif(shutil.which("cc") is None or shutil.which("make") is None,
                                reason="needs a host C compiler (cc) and make")


def make_resnet():
    spec = importlib.util.spec_from_file_location("make_resnet", EXAMPLES / "make_resnet.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Example:
    """A module, its input, its generated project and built program, run once."""

    def __init__(self, path: Path, inputs: list[Path], work: Path) -> None:
        self.path, self.inputs = path, inputs
        self.module = parse_module(path.read_text(), str(path))
        self.args = [np.load(p) for p in inputs]
        self.project = work / "project"
        r = subprocess.run([str(Path(sys.executable).with_name("swir-cg")), str(path),
                            "-o", str(self.project)], capture_output=True, text=True,
                           cwd=work, timeout=120)
        assert r.returncode == 0, r.stderr
        self.program = emulate.build(self.project, self.module.name)
        params, results = signature(self.module, self.module.lookup("main"))
        self.run = emulate.run(self.program, self.args, [p.type for p in params], results)

    def reference(self) -> list[np.ndarray]:
        return interpreter_for(self.module, self.path.parent).run("main", self.args)

    def dma_stats(self, work: Path) -> dict:
        """The dma-stage interpreter's counters on the same input."""
        r = subprocess.run([str(Path(sys.executable).with_name("swir-opt")), *DMA_PIPELINE,
                            str(self.path)], capture_output=True, text=True, cwd=work,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        m = parse_module(r.stdout, str(work / "dma.swir"))
        interp = interpreter_for(m, self.path.parent)
        out = interp.run("main", self.args)
        np.testing.assert_allclose(out[0], self.run.outputs[0], rtol=RTOL, atol=ATOL)
        return interp.stats()


@pytest.fixture(scope="module")
def examples(tmp_path_factory, compile_cache_dir) -> Iterator[Callable[[str], Example]]:
    """The examples, each made on first use. Under the compile cache: the
    dma-stage interpreter's swir-opt run reads the LDM plans and trial
    lowerings swir-cg searched for the same module."""
    made: dict[str, Example] = {}

    def get(name: str) -> Example:
        if name not in made:
            work = tmp_path_factory.mktemp(name)
            if name == "resnet8":   # the bundled network at an 8 x 8 input
                swir, _, x = make_resnet().write(work / "src", size=8)
                made[name] = Example(swir, [x], work)
            else:
                made[name] = Example(EXAMPLES / f"{name}.swir",
                                     [EXAMPLES / f"{name}_input.npy"], work)
        return made[name]
    with compile_cache(compile_cache_dir):
        yield get


@pytest.mark.parametrize("name", ["mlp", "resnet", "resnet8"])
def test_generated_c_matches_graph_interpreter(examples, name):
    ex = examples(name)
    want = ex.reference()
    assert len(ex.run.outputs) == len(want)
    for got, w in zip(ex.run.outputs, want):
        assert got.dtype == w.dtype and got.shape == w.shape
        np.testing.assert_allclose(got, w, rtol=RTOL, atol=ATOL)
    stats = ex.run.stats
    assert stats["runs"] == 1 and stats["functions"]
    # every kernel fits the LDM, and the program moved data both ways
    assert 0 < stats["total"]["ldm_peak"] <= 65536
    assert stats["total"]["gets"] > 0 and stats["total"]["puts"] > 0


@pytest.mark.parametrize("name", ["mlp", "resnet8"])
def test_dma_counters_equal_dma_stage_interpreter(examples, name, tmp_path):
    ex = examples(name)
    want = emulate.dma_counters(ex.dma_stats(tmp_path))
    got = emulate.dma_counters(ex.run.stats)
    assert got.keys() == want.keys()
    for kernel in want:
        assert got[kernel] == want[kernel], kernel


def test_make_resnet_regenerates_the_bundled_files(tmp_path):
    paths = make_resnet().write(tmp_path)
    for p in paths:
        assert p.read_bytes() == (EXAMPLES / p.name).read_bytes(), p.name
    assert (EXAMPLES / "resnet.weights").stat().st_size < 400_000


def run_checker(ex: Example, ref: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECKER), str(ex.path), str(ex.program),
                           "--input", str(ex.inputs[0]), "--reference", str(ref)],
                          capture_output=True, text=True, cwd=ref.parent, timeout=120)


def test_checker_passes_right_and_fails_wrong_reference(examples, tmp_path):
    ex = examples("mlp")
    want = ex.reference()[0]
    good, bad = tmp_path / "good.npy", tmp_path / "bad.npy"
    np.save(good, want)
    wrong = want.copy()
    wrong[0, 3] += 1e-3
    np.save(bad, wrong)

    r = run_checker(ex, good)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[-1] == "PASS" and "max abs diff" in r.stdout
    assert any(line.startswith("matmul_add_relu_0 ") for line in lines)  # fused at -O3
    assert any(line.startswith("total (") for line in lines)

    r = run_checker(ex, bad)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == "FAIL"
    assert "1 of 10 elements out of tolerance, first at (0, 3)" in r.stdout
