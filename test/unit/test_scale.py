"""Scale (docs/reliability.md): bench/scale.py's generated graph of
20,000 ops -- a deep chain of small convolutions and element-wise ops with
residual adds -- goes through swir-opt's whole pipeline (-O3, -lower-loops,
-ldm-plan{strategy=search}, -insert-dma) and through swir-cg, each in a fresh
process, within a memory bound; and at a small size the results are right.

The full 20,000 ops fit CI's time: each tool takes 11 to 15 s on the 2-core
CI machine, and the two run at once here (16 s in all, with generating the
module). Nested regions 200 deep are test_limits.py's.
"""

from __future__ import annotations

import shutil

import pytest
import siblings


def _scale():
    # Loaded when a test runs, not when pytest collects this file: Hypothesis
    # draws literals from every loaded module of the project, and the
    # derandomized sample of test_roundtrip.py's coverage test shifts with them.
    return siblings.load(siblings.ROOT / "bench" / "scale.py")


OPS = 20_000
# Peak RSS measured for each tool at 20,000 ops: 130 MiB (docs/reliability.md),
# growing linearly with the op count (about 4.5 KiB per op over
# some 41 MiB of start-up: 63 MiB at 5,000 ops, 220 MiB at 40,000). The bound
# is three times the measurement: well above what another Python or
# allocator can add, well below what a structure quadratic in the op count or
# a leak per trial module (10,908 of them) would take.
RSS_BOUND = 3 * 130 * 2**20
# No wall-time assertion: performance is measured by bench/scale.py, not
# asserted in tests (the times and their history are in docs/reliability.md).


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    out = tmp_path_factory.mktemp("scale")
    return out, _scale().run_all(OPS, out, together=True)


def test_20000_ops_compile_within_memory_bound(measured):
    out, rows = measured
    assert [r.tool for r in rows] == ["swir-opt", "swir-cg"]
    for r in rows:
        assert r.status == 0, f"{r.tool} exited with {r.status}:\n{r.stderr[-3000:]}"
        assert r.peak_rss < RSS_BOUND, (r.tool, r.peak_rss / 2**20)
    dma = (out / "scale.dma.swir").read_text()
    assert dma.startswith('module "scale"\nstage dma')
    assert dma.count("spawn @") > OPS // 5      # at least a spawn per fused group
    project = out / "project"
    assert (project / "main.c").stat().st_size > 0
    assert (project / "layers_slave.c").stat().st_size > 0


def test_generator_counts_ops_exactly():
    for n in (1, 7, 8, 17, 500):
        text, _, ops = _scale().generate(n)
        body = text.split("'entry:\n", 1)[1].split("  return", 1)[0]
        assert ops == n == len(body.splitlines())


@pytest.mark.skipif(shutil.which("cc") is None or shutil.which("make") is None,
                    reason="needs a host C compiler (cc) and make")
def test_small_graph_results_agree(tmp_path):
    # The graph interpreter, the dma-stage interpreter on swir-opt's output and
    # the C project built with `make emu` give the same output.
    scale = _scale()
    rows = scale.run_all(300, tmp_path, together=True)
    assert all(r.status == 0 for r in rows), [r.stderr[-2000:] for r in rows]
    line = scale.check(tmp_path)
    assert line.startswith("check:") and "vs dma-stage interpreter" in line, line
