"""The MPI program end to end (issue 26): zoo models at reduced size go ONNX →
swir-import → swir-cg --ranks N → make emu (mpicc, the athread emulation) →
mpirun -np N, and their outputs must equal onnxruntime's: ResNet-18 at
batch 1 split by channels (split=model) at N = 1, 2 and 4, at batch 4 split
by the batch (split=data) at N = 2, and BERT (one encoder layer) split by
channels at N = 2 and 4.

Each run's counters are checked against the dma-stage interpreter running
the same module on every rank (swir.interp.ranks): the MPI bytes each rank
sends per collective, and the DMA each rank's kernels move. The bad runs:
mpirun with another N than compiled, and a rank that fails (rank 0 cannot
read its input) exit 1 with one line, every rank ending, within the
timeout (no rank left waiting in a collective). The 2-rank ResNet-18 program
also runs under ThreadSanitizer, which must stay silent within each rank.

Needs mpicc and mpirun (Open MPI; scripts/test installs it where missing).
Tolerance: f32 rtol 1e-4, atol 1e-5, as test_zoo_e2e.py: the ranks add
partial sums in another order than onnxruntime.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from swir.costmodel.traffic import dma_traffic
from swir.codegen import emulate
from swir.parser import parse_module
from swir.passes.pipelines import DEFAULT_LEVEL, pipeline_flags
from swir.tools import swir_opt

import siblings
from helpers import compile_cache

zoo = siblings.zoo()
sanitizers = siblings.sibling("test_codegen_sanitizers")
e2e = siblings.sibling("test_zoo_e2e")      # its tool runner and onnxruntime reference
tool, reference = e2e.tool, e2e.onnxruntime_run

HAVE_MPI = all(shutil.which(t) for t in ("mpicc", "mpirun", "cc", "make"))
# scripts/test (and so CI) installs MPI and sets this: there the tests must run.
pytestmark = pytest.mark.skipif(not HAVE_MPI and not os.environ.get("SWIR_REQUIRE_MPI"),
                                reason="no mpicc / mpirun (Open MPI) on PATH")

RTOL, ATOL = 1e-4, 1e-5
# (zoo model, batch, split): the ranks each runs at
CASES = {"resnet18-b1": ("resnet18", 1, "model"), "resnet18-b4": ("resnet18", 4, "data"),
         "bert": ("bert", None, "model")}
# Each path once (issue 42: 9 programs were 190 CPU-s). One rank (no message
# sent) is the same program whatever the split: ResNet-18 at batch 1 has it.
# The data split at N = 2 (a block of 2 images per rank, gathered); at N = 4
# it is the same code with blocks of 1. The model split at N = 2 and 4 on
# convolutions (ResNet) and on matmuls and attention heads (BERT).
RANKS = {"resnet18-b1": (1, 2, 4), "resnet18-b4": (2,), "bert": (2, 4)}
PARAMS = [(case, n) for case in CASES for n in RANKS[case]]
# BERT at zoo.REDUCED's size but one encoder layer: its second layer repeats
# the first one's ops at the same shapes.
SIZES = {"bert": dict(zoo.REDUCED["bert"][0], layers=1)}


class Case:
    """One model at one N: its ONNX file, inputs, the dma-stage module the C
    was made from, and the program's run."""

    def __init__(self, root: Path, case: str, ranks: int) -> None:
        name, batch, split = CASES[case]
        self.dir = d = root / f"{case}-{ranks}"
        d.mkdir()
        kwargs, external = zoo.REDUCED[name]
        kwargs = dict(SIZES.get(name, kwargs), **({"batch": batch} if batch else {}))
        model = zoo.build(name, **kwargs)
        self.inputs = zoo.random_inputs(model, seed=1)
        self.onnx = d / f"{name}.onnx"
        zoo.save(model, self.onnx, external_data=external)
        swir = d / f"{name}.swir"
        tool("swir-import", str(self.onnx), "-o", str(swir))
        self.graph = parse_module(swir.read_text(), str(swir))
        # swir-cg's pipeline for N ranks, once (in process), to the dma stage;
        # swir-cg compiles that module to C, so the static DMA count below is
        # of the module the C was made from.
        self.dma_path = d / f"{name}.dma.swir"
        flags = pipeline_flags("graph", DEFAULT_LEVEL, ranks=True)
        assert swir_opt.main([*flags, f"--ranks={ranks}", f"--split={split}", "--jobs=1",
                              str(swir), "-o", str(self.dma_path)]) == 0
        self.dma = parse_module(self.dma_path.read_text(), str(self.dma_path))
        self.project = d / "project"
        tool("swir-cg", str(self.dma_path), "-o", str(self.project), "-q", "--ranks", str(ranks))
        self.program = emulate.build(self.project, self.graph.name)
        f = self.graph.lookup("main")
        self.types = ([p.type for p in f.params], list(f.result_types))
        self.run = emulate.run(self.program, list(self.inputs.values()), *self.types,
                               ranks=ranks)
        self.want = reference(self.onnx, self.inputs)


@pytest.fixture(scope="module")
def cases(tmp_path_factory, compile_cache_dir):
    root = tmp_path_factory.mktemp("mpi")
    # The compile cache: fold-batchnorm's trial lowerings, before -distribute,
    # are the same for every N (and as test_zoo_e2e's).
    with compile_cache(compile_cache_dir), ThreadPoolExecutor(max_workers=2) as pool:
        futures = {(c, n): pool.submit(Case, root, c, n) for c, n in PARAMS}
        yield futures


@pytest.mark.parametrize("case,ranks", PARAMS)
def test_outputs_equal_onnxruntime(cases, case, ranks):
    c = cases[(case, ranks)].result()
    assert len(c.run.outputs) == len(c.want)
    for got, want in zip(c.run.outputs, c.want):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("case,ranks", PARAMS)
def test_every_rank_reports_its_counters(cases, case, ranks):
    c = cases[(case, ranks)].result()
    per_rank = c.run.stats["ranks"]
    assert [r["rank"] for r in per_rank] == list(range(ranks))
    split = CASES[case][2]
    for r in per_rank:
        mpi = r["mpi"]
        if ranks == 1:
            assert all(v["bytes_sent"] == 0 for v in mpi.values())
        if split == "data":     # each rank reads its block; gathered; nothing between layers
            assert mpi["allgather"]["calls"] == mpi["reduce_scatter"]["calls"] == 0
            assert mpi["scatter"]["calls"] == 0 and mpi["gather"]["calls"] == len(c.want)
        else:
            assert mpi["bcast"]["calls"] == len(c.inputs)
            if ranks > 1:
                assert mpi["allgather"]["calls"] + mpi["reduce_scatter"]["calls"] \
                    + mpi["allreduce"]["calls"] > 0
        assert r["total"]["spawns"] > 0


@pytest.mark.parametrize("case,ranks", PARAMS)
def test_each_ranks_dma_is_the_static_count(cases, case, ranks):
    """Every rank runs the same kernels on its share: each rank's DMA counters
    are swir.costmodel.traffic's static count of the module (the MPI bytes are
    checked against the interpreters in test_distribute.py)."""
    c = cases[(case, ranks)].result()
    static = dma_traffic(c.dma).counters()
    for r in c.run.stats["ranks"]:
        assert emulate.dma_counters(r) == static, f"rank {r['rank']}"


def test_mpirun_with_another_count_is_refused(cases):
    c = cases[("resnet18-b1", 2)].result()
    prefix, env = emulate.mpirun(3)
    inp = c.dir / "in.bin"
    next(iter(c.inputs.values())).astype(np.float32).tofile(inp)
    r = subprocess.run([*prefix, str(c.program), "--input", str(inp)], capture_output=True,
                       text=True, timeout=120, env={**os.environ, **env})
    assert r.returncode != 0
    assert "compiled for 2 ranks (swir-cg --ranks 2), started on 3: run mpirun -np 2" \
        in r.stderr
    assert r.stderr.count("error: compiled for") == 1      # one line, from rank 0


def test_a_failing_rank_ends_every_rank(cases, tmp_path):
    """Rank 0 cannot read its input: it fails before the broadcast the other
    ranks wait in; MPI_Abort ends them (the timeout would catch a hang)."""
    c = cases[("resnet18-b1", 4)].result()
    prefix, env = emulate.mpirun(4)
    out = tmp_path / "out.npy"
    r = subprocess.run([*prefix, str(c.program), "--input", str(tmp_path / "missing.npy"),
                        "--output", str(out)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, **env})
    assert r.returncode != 0
    assert "error: cannot open input 1" in r.stderr
    assert not out.exists()


def test_threadsanitizer_is_silent_within_each_rank(cases):
    c = cases[("resnet18-b1", 2)].result()
    if not sanitizers.links(sanitizers.FLAGS["emu-tsan"], c.dir):
        pytest.fail("cc cannot link ThreadSanitizer programs here")
    program = emulate.build(c.project, c.graph.name, "emu-tsan")
    run = emulate.run(program, list(c.inputs.values()), *c.types, ranks=2,
                      env=sanitizers.ENV)
    assert "ThreadSanitizer" not in run.stderr, run.stderr
    for got, want in zip(run.outputs, c.want):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_stats_file_is_one_json_object(cases):
    c = cases[("bert", 4)].result()
    text = json.dumps(c.run.stats)
    assert json.loads(text)["ranks"][3]["rank"] == 3
