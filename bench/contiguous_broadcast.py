#!/usr/bin/env python3
"""What keeping broadcasts contiguous costs by the model (issue 43, item 8):
each zoo model at the paper's size lowered at -O3 as swir-cg lowers it, once
as is and once with -insert-dma{strided-broadcast=false} (public Sunway code
shows broadcasts of strided blocks only in swCandle's benchmark), and the
modeled Sunway time of each (swir.costmodel.cost on the default machine).

  strided bcasts   broadcasts per inference whose DMA moves strided blocks
  bcasts           all broadcasts per inference
  modeled          the model's time per inference

    python bench/contiguous_broadcast.py                 # every zoo model
    python bench/contiguous_broadcast.py resnet18 bert
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from common import print_rows, timed, zoo_models
from zoo import BIN, prepare

SWITCH = "strided-broadcast=false"


def lowered(swir_path: Path, out: Path, contiguous: bool) -> Path:
    from swir.passes.pipelines import pipeline_flags
    flags = pipeline_flags("graph", "O3")
    if contiguous:
        # both passes: -ldm-plan's search measures its plans as -insert-dma lowers them
        flags = [f"-insert-dma{{{SWITCH}}}" if f == "-insert-dma" else
                 f.replace("-ldm-plan{", "-ldm-plan{" + SWITCH + ",") for f in flags]
        assert f"-insert-dma{{{SWITCH}}}" in flags and any(
            f.startswith("-ldm-plan{" + SWITCH) for f in flags), flags
    timed([str(BIN / "swir-opt"), *flags, str(swir_path), "-o", str(out)])
    return out


def figures(dma_path: Path) -> tuple[int, int, float]:
    """Strided broadcasts and all broadcasts per inference, modeled seconds."""
    from swir.costmodel.cost import cost_report
    from swir.costmodel.traffic import dma_traffic
    from swir.parser import parse_module
    m = parse_module(dma_path.read_text(), str(dma_path))
    r = cost_report(m)
    traffic = dma_traffic(m)
    strided = sum(n for t in traffic.kernels.values()
                  for blocks, n in t.bcasts_by_shape.items() if sum(k for _, k in blocks) > 1)
    return strided, sum(k.bcasts for k in r.kernels), r.modeled_s


def model_row(zoo, name: str, work: Path) -> dict[str, str]:
    _, _, _, swir_path = prepare(zoo, name, work / name)
    s1, b1, t1 = figures(lowered(swir_path, work / name / "as-is.swir", False))
    s2, b2, t2 = figures(lowered(swir_path, work / name / "contiguous.swir", True))
    return {"strided bcasts": f"{s1:,} -> {s2:,}", "bcasts": f"{b1:,} -> {b2:,}",
            "modeled": f"{t1 * 1e3:.3f} -> {t2 * 1e3:.3f} ms",
            "change": f"{(t2 / t1 - 1) * 100:+.2f}%"}


def main(argv: list[str] | None = None) -> int:
    zoo, models = zoo_models(__doc__, argv)
    with tempfile.TemporaryDirectory(prefix="swir-bcast-bench-") as tmp:
        rows = {name: model_row(zoo, name, Path(tmp)) for name in models}
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
