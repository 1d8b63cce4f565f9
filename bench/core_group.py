#!/usr/bin/env python3
"""How close the kernels come to the core group's limit (issue 44): each zoo
model at the paper's size lowered at -O3 as swir-cg lowers it, and its
modeled Sunway time (swir.costmodel.cost, machine 'default' unless --machine):

  -O3 compile     swir-opt wall time, the -O3 pipeline to the dma stage
  modeled         time per inference, and its share of the core group's
                  742.4 GFLOPS peak (flops / peak / modeled)
  conv/roofline   conv / matmul kernels: roofline bound over modeled time,
                  the median over the kernels
  conv eff.       compute efficiency of the conv / matmul kernels of at
                  least 1e8 flops (min - max): flops at the busy CPEs'
                  vector FMA peak over the modeled compute time
  overlapped      DMA time overlapped with compute over all DMA time
  largest GEMM    the largest conv / matmul kernel by flops: its share of peak
  relayed         broadcasts -mesh-broadcast shared over the register buses
  no reg. comm.   with --compare: the modeled time of the same compile
                  without -mesh-broadcast, on the same machine

    python bench/core_group.py resnet18 vgg16 mobilenet
    python bench/core_group.py --machine default,pessimistic --compare resnet18
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from common import load_zoo, print_rows, timed
from zoo import BIN, prepare


def lowered(swir_path: Path, out: Path, mesh: bool = True) -> tuple[Path, float]:
    from swir.passes.pipelines import pipeline_flags
    flags = [f for f in pipeline_flags("graph", "O3") if mesh or f != "-mesh-broadcast"]
    return out, timed([str(BIN / "swir-opt"), *flags, str(swir_path), "-o", str(out)])


def figures(dma_path: Path, machine) -> dict[str, str]:
    from swir.costmodel.cost import cost_report, is_matmul_like
    from swir.parser import parse_module
    r = cost_report(parse_module(dma_path.read_text(), str(dma_path)), machine)
    ks = r.kernels
    convs = [k for k in ks if is_matmul_like(k.name)]
    big = [k for k in convs if k.flops >= 1e8]
    flops = sum(k.flops for k in ks)
    dma = sum(k.dma_s for k in ks)
    largest = max(convs, key=lambda k: k.flops) if convs else None
    eff = [k.compute_efficiency for k in big]
    return {
        "modeled": f"{r.modeled_s * 1e3:.2f} ms, {flops / r.machine.peak_flops / r.modeled_s:.1%}",
        "conv/roofline": f"{statistics.median(k.roofline_share for k in convs):.1%}" if convs else "-",
        "conv eff.": f"{min(eff):.0%} - {max(eff):.0%}" if eff else "-",
        "overlapped": f"{sum(k.overlapped_dma_s for k in ks) / dma:.1%}" if dma else "-",
        "largest GEMM": (f"{largest.name} {largest.flops / r.machine.peak_flops / largest.modeled_s:.1%}"
                         if largest else "-"),
        "relayed": str(sum(1 for k in ks if k.reg_s > 0)),
    }


def model_rows(zoo, name: str, work: Path, machines: list[str], compare: bool
               ) -> dict[str, dict[str, str]]:
    """A row per machine of one model, compiled once (and once without
    -mesh-broadcast with ``compare``)."""
    from swir.costmodel.cost import DMA_ASSUMPTIONS
    _, _, _, swir_path = prepare(zoo, name, work / name)
    dma_path, seconds = lowered(swir_path, work / name / "o3.swir")
    off = lowered(swir_path, work / name / "o3-noreg.swir", mesh=False)[0] if compare else None
    rows = {}
    for machine in machines:
        m = DMA_ASSUMPTIONS[machine]
        row = {"-O3 compile": f"{seconds:.1f} s", **figures(dma_path, m)}
        if off is not None:
            row["no reg. comm."] = figures(off, m)["modeled"]
        rows[f"{name} ({machine})"] = row
    return rows


def main(argv: list[str] | None = None) -> int:
    from swir.costmodel.cost import DMA_ASSUMPTIONS
    zoo = load_zoo()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", default=["resnet18", "vgg16", "mobilenet"])
    p.add_argument("--machine", default="default",
                   help=f"one or more of {', '.join(sorted(DMA_ASSUMPTIONS))}, comma-separated")
    p.add_argument("--compare", action="store_true",
                   help="also compile without -mesh-broadcast and model it")
    a = p.parse_args(argv)
    machines = a.machine.split(",")
    unknown = [m for m in machines if m not in DMA_ASSUMPTIONS]
    if unknown:
        p.error(f"unknown machine {unknown[0]!r}")
    rows: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory(prefix="swir-core-group-") as tmp:
        for n in a.models:
            rows.update(model_rows(zoo, n, Path(tmp), machines, a.compare))
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
