#!/usr/bin/env python3
"""LDM plan quality: the paper's greedy plan against cost-model search.

For every conv and dense kernel (the kernels with a conv2d, conv_transpose2d
or matmul in them) of ResNet-18, VGG-16 and MobileNetV2 (by default; any zoo
model can be named) at the paper's sizes
(bench/models/zoo.py, batch 1, 224 x 224), compiled by swir-cg's -O3 graph
passes and -lower-loops, then -ldm-plan with ``strategy=greedy`` and with
``strategy=search`` (then -insert-dma), it compares per kernel:

  DMA bytes, DMA operations (counted exactly, swir.costmodel.traffic),
  modeled Sunway time and traffic / I/O lower bound (swir.costmodel.cost);

and it counts the kernels of every kind (copies, pools, element-wise too)
that search made slower than greedy by the model, which must be none.

Search chooses its plans with the default machine constants. The DMA
constants are assumptions (../shared/design/sunway.md), so both plans are
also timed with the pessimistic and optimistic constants of
swir.costmodel.cost.DMA_ASSUMPTIONS: the table says how often search stays
ahead when the constants are wrong.

    python bench/plan_quality.py                     # the three models
    python bench/plan_quality.py --kernels resnet18  # and every kernel's row
    python bench/plan_quality.py --smoke             # CI: ResNet-18 at a reduced size

It prints Markdown tables (docs/performance.md keeps the results).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from common import load_zoo, timed

BIN = Path(sys.executable).parent
MODELS = ("resnet18", "vgg16", "mobilenet")
SMOKE = {"resnet18": {"resolution": 32, "width": 4}}   # as test/unit/test_zoo_e2e.py


@dataclass
class Compiled:
    strategy: str
    plan_seconds: float                 # wall time of -ldm-plan -insert-dma
    reports: dict                       # machine name -> CostReport


def compile_model(zoo, name: str, sizes: dict, work: Path) -> dict[str, Compiled]:
    """The model at the loop stage (-O3 graph passes, -lower-loops), then
    planned by each strategy."""
    from swir.costmodel.cost import DMA_ASSUMPTIONS, cost_report
    from swir.parser import parse_module
    from swir.passes.pipelines import OPT_LEVELS
    onnx_path, swir_path, loop = work / f"{name}.onnx", work / f"{name}.swir", \
        work / f"{name}.loop.swir"
    zoo.save(zoo.build(name, **sizes), onnx_path, external_data=True)
    timed([str(BIN / "swir-import"), str(onnx_path), "-o", str(swir_path)])
    timed([str(BIN / "swir-opt"), *("-" + p for p in OPT_LEVELS["O3"]), "-lower-loops",
         str(swir_path), "-o", str(loop)])
    out = {}
    for strategy in ("greedy", "search"):
        dma = work / f"{name}.{strategy}.dma.swir"
        seconds = timed([str(BIN / "swir-opt"), f"-ldm-plan{{strategy={strategy}}}",
                         "-insert-dma", str(loop), "-o", str(dma)])
        m = parse_module(dma.read_text(), str(dma))
        out[strategy] = Compiled(strategy, seconds,
                                 {k: cost_report(m, machine) for k, machine in
                                  DMA_ASSUMPTIONS.items()})
    return out


def matmul_like(report) -> dict:
    return {k.name: k for k in report.kernels if k.io_lower_bound_bytes is not None}


def ratio_stats(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} / {min(values):.2f} / {max(values):.2f}"


def median_worst(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} / {max(values):.2f}"


def summary_row(name: str, c: dict[str, Compiled]) -> list[str]:
    g, s = (matmul_like(c[k].reports["default"]) for k in ("greedy", "search"))
    names = sorted(g)
    time_ratio = [s[n].modeled_s / g[n].modeled_s for n in names]
    bytes_ratio = [s[n].dma_bytes / g[n].dma_bytes for n in names]
    ops_ratio = [s[n].dma_ops / g[n].dma_ops for n in names]
    cells = [name, str(len(names)),
             f"{sum(k.modeled_s for k in g.values()) * 1e3:,.2f} ms",
             f"{sum(k.modeled_s for k in s.values()) * 1e3:,.2f} ms",
             ratio_stats(time_ratio), ratio_stats(bytes_ratio), ratio_stats(ops_ratio),
             median_worst([g[n].traffic_over_bound for n in names]),
             median_worst([s[n].traffic_over_bound for n in names])]
    for machine in ("pessimistic", "optimistic"):
        gm, sm = (matmul_like(c[k].reports[machine]) for k in ("greedy", "search"))
        ahead = sum(sm[n].modeled_s <= gm[n].modeled_s * (1 + 1e-9) for n in names)
        cells.append(f"{ahead} of {len(names)}")
    ga, sa = ({k.name: k for k in c[k].reports["default"].kernels} for k in ("greedy", "search"))
    cells.append(str(sum(sa[n].modeled_s > ga[n].modeled_s * (1 + 1e-9) for n in ga)))
    cells.append(f"{c['greedy'].plan_seconds:.1f} / {c['search'].plan_seconds:.1f} s")
    return cells


SUMMARY_HEAD = ["model", "conv / dense kernels", "greedy time", "search time",
                "time search/greedy (median / best / worst)", "DMA bytes search/greedy",
                "DMA ops search/greedy", "greedy traffic / bound (median / worst)",
                "search traffic / bound", "search no slower, pessimistic DMA",
                "search no slower, optimistic DMA", "kernels of any kind search made slower",
                "plan time greedy / search"]


def kernel_rows(c: dict[str, Compiled]) -> list[list[str]]:
    g, s = (matmul_like(c[k].reports["default"]) for k in ("greedy", "search"))
    rows = []
    for n in sorted(g, key=lambda n: -g[n].modeled_s):
        a, b = g[n], s[n]
        rows.append([n, a.shape, f"{a.dma_bytes:,} / {b.dma_bytes:,}",
                     f"{a.dma_ops:,} / {b.dma_ops:,}",
                     f"{a.modeled_s * 1e6:,.1f} / {b.modeled_s * 1e6:,.1f} µs",
                     f"{a.busy_cpes} / {b.busy_cpes}",
                     f"{a.traffic_over_bound:.2f} / {b.traffic_over_bound:.2f}"])
    return rows


KERNEL_HEAD = ["kernel", "output", "DMA bytes greedy / search", "DMA ops", "modeled time",
               "busy CPEs", "traffic / bound"]


def markdown(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="*", help=f"models (default: {', '.join(MODELS)})")
    p.add_argument("--kernels", nargs="*", metavar="MODEL", default=[],
                   help="also print every conv / dense kernel of these models")
    p.add_argument("--smoke", action="store_true",
                   help="ResNet-18 at a reduced size (for CI)")
    p.add_argument("--work", type=Path, help="working directory (default: a temporary one)")
    a = p.parse_args(argv)
    zoo = load_zoo()
    sizes = SMOKE if a.smoke else {m: zoo.PAPER_SIZES[m] for m in a.models or MODELS}
    for m in sizes:
        if m not in zoo.MODELS:
            p.error(f"no model '{m}' (the zoo has {', '.join(zoo.MODELS)})")
    work = a.work or Path(tempfile.mkdtemp(prefix="swir-plan-"))
    summary, details = [], []
    for name, kw in sizes.items():
        d = work / name
        d.mkdir(parents=True, exist_ok=True)
        c = compile_model(zoo, name, kw, d)
        summary.append(summary_row(name, c))
        print(" | ".join(summary[-1]), file=sys.stderr, flush=True)
        if name in a.kernels or a.smoke:
            details.append((name, kernel_rows(c)))
    print(markdown(SUMMARY_HEAD, summary))
    for name, rows in details:
        print(f"\n{name}:\n")
        print(markdown(KERNEL_HEAD, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
