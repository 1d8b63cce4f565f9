"""-view-plan (swir/passes/dma/view_plan.py, swir/views/plan.py, plan_svg.py):
the counts it shows are the dma-stage interpreter's, as the static traffic
counter computes them; its SVG is well-formed XML with the plan's facts; it
refuses what is not a regular file."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from swir.costmodel.traffic import dma_traffic
from swir.parser import parse_module
from swir.passes import pass_class
from swir.passes.manager import PassManager
from swir.views.plan import chunk_share, cpe_kernels, kernel_plan, plan_text
from swir.views.plan_svg import plan_svg

BIN = Path(sys.executable).parent
ROOT = Path(__file__).parents[2]
MLP = ROOT / "examples" / "mlp.swir"
MATMUL = ROOT / "test" / "Transforms" / "ViewPlan" / "view-plan.swir"
SVG = "{http://www.w3.org/2000/svg}"


def lowered(path: Path, *passes: str, **options: dict) -> object:
    m = parse_module(path.read_text(), str(path))
    made = [pass_class(p)(**options.get(p.replace("-", "_"), {})) for p in passes]
    return PassManager(made).run(m)


@pytest.fixture(scope="module")
def mlp_dma():
    return lowered(MLP, "decompose", "fuse", "lower-loops", "ldm-plan", "insert-dma")


@pytest.fixture(scope="module")
def relayed():
    """The paper matmul with %A's broadcast relayed over the register buses."""
    return lowered(MATMUL, "ldm-plan", "insert-dma", "mesh-broadcast",
                   mesh_broadcast={"always": True})


@pytest.mark.parametrize("which", ["mlp_dma", "relayed"])
def test_counts_are_the_traffic_counters(which: str, request) -> None:
    module = request.getfixturevalue(which)
    counters = dma_traffic(module).counters()
    for k in cpe_kernels(module):
        plan = kernel_plan(module, k, 64)
        assert not plan.unknown
        total = {op: sum(t.total for t in plan.transfers if t.op == op)
                 for op in ("dma_get", "dma_put", "dma_bcast", "reg_send")}
        c = counters[k.name]
        assert total["dma_get"] + total["dma_bcast"] == c["gets"], k.name
        assert total["dma_put"] == c["puts"], k.name
        assert total["reg_send"] == c.get("reg_sends", 0), k.name
        moved_in = sum(t.total * t.bytes for t in plan.transfers
                       if t.op in ("dma_get", "dma_bcast"))
        assert moved_in == c["bytes_in"], k.name


def test_relay_shows_both_buses(relayed) -> None:
    text = plan_text(kernel_plan(relayed, cpe_kernels(relayed)[0], 64))
    assert "register send %A_ldm LDM -> LDM (bus): 4 elements (16 bytes, along the row bus) " \
           "x 4 on the busiest CPE, 256 in all" in text
    assert "along the col bus) x 32 on the busiest CPE, 2,048 in all" in text


def test_shares_follow_chunk() -> None:
    # 10 iterations in units of 8 over 64 workers: CPE 0 takes 8, CPE 1 the last 2.
    assert [chunk_share(k, 10, 64, 8) for k in range(3)] == [(0, 8), (8, 10), (10, 10)]
    shares = [chunk_share(k, 100, 64, 1) for k in range(64)]
    assert sum(hi - lo for lo, hi in shares) == 100 and shares[-1][1] == 100


def test_svg_is_xml_with_the_plan(mlp_dma) -> None:
    k = cpe_kernels(mlp_dma)[0]
    plan = kernel_plan(mlp_dma, k, 64)
    root = ET.fromstring(plan_svg(plan))
    assert root.tag == SVG + "svg"
    texts = [t.text or "" for t in root.iter(SVG + "text")]
    assert f"Plan of cpe kernel @{k.name} (module mlp)" in texts
    assert any(t.startswith("1. LDM of one CPE: ") for t in texts)
    assert "Legend" in texts and "DMA get" in texts
    cells = [r for r in root.iter(SVG + "rect") if r.get("width") == "28.0"]
    assert len(cells) == 64          # the 8 x 8 CPE grid
    busy = sum(1 for lo, hi in plan.split.shares if hi > lo)
    assert sum(1 for r in cells if r.get("fill") != "#e6e6e6") == busy


def test_tool_writes_the_svg_and_refuses_a_fifo(tmp_path: Path) -> None:
    out = tmp_path / "plan.svg"
    tool = str(BIN / "swir-opt")
    p = subprocess.run([tool, "-ldm-plan", "-insert-dma", f"-view-plan{{file={out}}}",
                        str(MATMUL)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert ET.parse(out).getroot().tag == SVG + "svg"
    fifo = tmp_path / "fifo.svg"
    os.mkfifo(fifo)
    p = subprocess.run([tool, "-ldm-plan", "-insert-dma", f"-view-plan{{file={fifo}}}",
                        str(MATMUL)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 1 and p.stdout == ""
    assert f"error: -view-plan: cannot write '{fifo}': it is not a regular file" in p.stderr
    assert sorted(os.listdir(tmp_path)) == ["fifo.svg", "plan.svg"]


def test_counts_past_the_walk_limit_are_unknown(mlp_dma, monkeypatch) -> None:
    import swir.views.plan as plan_module
    monkeypatch.setattr(plan_module, "WALK_LIMIT", 3)
    k = cpe_kernels(mlp_dma)[0]
    plan = kernel_plan(mlp_dma, k, 64)
    assert plan.unknown == "counting the transfers takes more than 3 loop iterations"
    assert all(t.total is None for t in plan.transfers)
    text = plan_text(plan)
    assert "x 8 on the busiest" not in text and " unknown" in text
    root = ET.fromstring(plan_svg(plan))          # the picture says so too
    assert any((t.text or "").startswith("counts unknown: ") for t in root.iter(SVG + "text"))
