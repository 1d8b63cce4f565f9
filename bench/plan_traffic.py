#!/usr/bin/env python3
"""DMA traffic of the -O3 plans against the I/O lower bound (issue 24).

For each zoo model named (bench/models/zoo.py, at the paper's sizes, batch
1), compiled by swir-cg's -O3 pipeline to the dma stage, it prints from
swir.costmodel.cost (the model's figures, not timings):

  kernels       the CPE kernels swir-report lists
  no-flop       of them, the kernels that move data without computing
  DMA MB        bytes moved per inference
  traffic/LB    conv / dense kernels' DMA bytes over their I/O lower bound,
                median (the bound as the cost model of the running swir
                defines it: from issue 24 on, the input elements actually
                read and Hong-Kung with the LDM a plan can use); and the
                least of them (below 1.0 the bound would be no bound)
  LB binds      of those kernels, how many the compulsory bytes bound
                ("reads") and how many Hong-Kung ("LDM")
  busy CPEs     the fewest busy CPEs of a conv / dense kernel with at
                least 64 output tiles
  bcasts        broadcast gets per inference (tiles every CPE reads alike)
  modeled ms    the model's time for the whole inference

    python bench/plan_traffic.py resnet18 vgg16 mobilenet
    python bench/plan_traffic.py --bin OTHER_VENV/bin resnet18   # another swir's tools
    python bench/plan_traffic.py --smoke     # CI: ResNet-18 at a reduced size

Run it with the python of the swir being measured (its cost model scores
the module its tools wrote).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from common import load_zoo, print_rows, timed


SMOKE = {"resnet18": {"resolution": 32, "width": 4}}   # as test/unit/test_zoo_e2e.py


def measure(zoo, name: str, work: Path, bindir: Path, sizes: dict) -> dict[str, str]:
    from swir.costmodel.cost import cost_report
    from swir.parser import parse_module
    from swir.passes.pipelines import pipeline_flags
    onnx, graph, dma = work / f"{name}.onnx", work / f"{name}.swir", work / f"{name}.dma.swir"
    zoo.save(zoo.build(name, **sizes), onnx, external_data=True)
    timed([str(bindir / "swir-import"), str(onnx), "-o", str(graph)])
    seconds = timed([str(bindir / "swir-opt"), *pipeline_flags("graph", "O3"), str(graph),
                     "-o", str(dma), "--quiet"])
    m = parse_module(dma.read_text(), str(dma))
    r = cost_report(m)
    bounded = [k for k in r.kernels if k.io_lower_bound_bytes]
    binds = [getattr(k, "bound_binds", None) or "reads" for k in bounded]
    wide = [k.busy_cpes for k in bounded if _tasks(m.lookup(k.name)) >= 64]
    return {
        "kernels": str(len(r.kernels)),
        "no-flop": str(sum(1 for k in r.kernels if not k.flops)),
        "DMA MB": f"{r.total('dma_bytes') / 1e6:.1f}",
        "traffic/LB": f"{statistics.median(k.traffic_over_bound for k in bounded):.2f}"
                      if bounded else "-",
        "least traffic/LB": f"{min(k.traffic_over_bound for k in bounded):.2f}"
                            if bounded else "-",
        "LB binds": f"reads {binds.count('reads')}, LDM {binds.count('LDM')}",
        "busy CPEs": str(min(wide)) if wide else "-",
        "bcasts": str(sum(getattr(k, "bcasts", 0) for k in r.kernels)),
        "modeled ms": f"{r.modeled_s * 1e3:.2f}",
        "-O3 s": f"{seconds:.0f}",
    }


def _tasks(f) -> int:
    """The output tiles of a cpe kernel: its parallel loop's tasks (the
    chunk's extent) times the trips of the tile loops around its output's
    put inside it (loops of DMAs alone are one copy's rows, not tiles)."""
    from swir.ir.affine import Expr
    chunk = next((i for i in f.walk() if i.opname == "chunk"), None)
    put = next((i for i in f.walk() if i.opname == "dma_put"), None)
    if chunk is None:
        return 0
    tiles = int(chunk.attrs["extent"])
    inst = put
    while inst is not None and inst.parent is not None and inst.parent.parent is not None:
        loop = inst.parent.parent.parent
        if not hasattr(loop, "opname") or loop.opname != "for":
            break
        lb, ub = (Expr.of(a) for a in loop.args[:2])
        if any(a.owner is chunk for a in lb.values() if hasattr(a, "owner")):
            break       # the CPE's share of the parallel loop: counted by the chunk
        body = loop.regions[0].blocks[0].instructions
        if lb.is_constant and ub.is_constant and \
                not all(i.opname in ("dma_put", "dma_get", "dma_wait") for i in body):
            tiles *= ub.const - lb.const
        inst = loop
    return tiles


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--smoke", action="store_true", help="ResNet-18 at a reduced size")
    ap.add_argument("--bin", type=Path, default=Path(sys.executable).parent,
                    help="where swir-import and swir-opt are (default: this python's)")
    args = ap.parse_args()
    if not args.smoke and not args.models:
        ap.error("name one zoo model at least, or --smoke")
    zoo = load_zoo()
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in SMOKE if args.smoke else args.models:
            rows[name] = measure(zoo, name, Path(tmp), args.bin,
                                 SMOKE[name] if args.smoke else {})
            print(f"{name}: {rows[name]}", file=sys.stderr)
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
