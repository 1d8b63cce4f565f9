#!/usr/bin/env python3
"""The SW26010-Pro beside the SW26010 (issue 47), from the cost model: each
model at the paper's size (batch 1, 224 x 224) lowered by swir-cg's -O3
pipeline for each target (swir-opt --target; the Pro's without
-mesh-broadcast, as it has no register communication: its broadcasts go by
RMA) and modeled on the target's machine (swir.costmodel.cost, 'default'
figures unless --machine):

  --one-cg  ResNet-18 and ResNet-50 on one core group of each target:
            the -O3 compile's wall time, the modeled time per inference and
            its share of the core group's peak (flops / peak / modeled:
            742.4 GFLOPS on the SW26010, 2,304 on the Pro), the broadcasts
            and their modeled time (on the Pro: of it, the RMA hops'), and
            the Pro's share on its pessimistic and optimistic figures
  --chip    ResNet-50 on the 6 core groups of one Pro chip against one core
            group: at batch 1 split by channels (swir-cg --ranks 6 --split
            model), and at batch 6 split by the batch (one image per rank,
            --split data) against batch 6 on one core group: the modeled time
            per rank (kernels, collectives) and the speed-up
  --limits  where --one-cg's modeled time goes: the compute efficiency
            (all kernels: flops at the vector FMA peak over the modeled
            compute), the DMA-bound kernels, the broadcasts' fixed cost,
            CPE 0's gets (on the SW26010: the BCAST_MODE stream) and the RMA
            hops; and on the Pro, the time with the compute halved (8-lane
            vectors) and then the broadcasts free as well

    python bench/pro.py --one-cg --chip --work /tmp/pro

It prints Markdown tables (docs/performance.md, "SW26010-Pro, issue 47", keeps
the results). Compiles are kept in --work and reused. The tools are the ones
beside this Python (the venv's).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import load_zoo

from swir.costmodel.cost import CostReport, cost_report, dma_assumptions
from swir.parser import parse_module
from swir.passes.pipelines import DEFAULT_LEVEL, pipeline_flags
from swir.target import SW26010, SW26010_PRO, Target

BIN = Path(sys.executable).parent
CHIP = SW26010_PRO.core_groups


class Model:
    """One zoo model, written as ONNX and imported once; its compiles kept."""

    def __init__(self, zoo, work: Path, name: str, batch: int = 1) -> None:
        self.dir = work / f"{name}-b{batch}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.swir = self.dir / f"{name}.swir"
        if not self.swir.exists():
            onnx = self.dir / f"{name}.onnx"
            zoo.save(zoo.build(name, batch=batch), onnx, external_data=True)
            _run([str(BIN / "swir-import"), str(onnx), "-o", str(self.swir)])
        self.seconds: dict[Path, float] = {}

    def lower(self, target: Target, ranks: int | None = None, split: str = "model") -> Path:
        """swir-cg's -O3 pipeline to the dma stage for ``target`` (the Pro's
        without -mesh-broadcast), timed; ``ranks``: -distribute's."""
        tag = f"{target.name}" + (f"-r{ranks}-{split}" if ranks else "")
        out = self.dir / f"{tag}.dma.swir"
        if not out.exists():
            flags = pipeline_flags("graph", DEFAULT_LEVEL, ranks is not None)
            if target.rma:
                flags = [f for f in flags if f != "-mesh-broadcast"]
            if ranks is not None:
                flags += [f"--ranks={ranks}", f"--split={split}"]
            start = time.perf_counter()
            _run([str(BIN / "swir-opt"), f"--target={target.name}", *flags, str(self.swir),
                  "-o", str(out)])
            (self.dir / f"{tag}.seconds").write_text(f"{time.perf_counter() - start:.1f}\n")
        self.seconds[out] = float((self.dir / f"{tag}.seconds").read_text())
        return out

    def cost(self, target: Target, ranks: int | None = None, split: str = "model",
             machine: str = "default") -> CostReport:
        path = self.lower(target, ranks, split)
        return cost_report(parse_module(path.read_text(), str(path)),
                           dma_assumptions(target)[machine])


def _run(cmd: list[str]) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} failed:\n{r.stderr[-3000:]}")


def ms(s: float) -> str:
    return f"{s * 1e3:,.2f} ms"


def share(r: CostReport) -> float:
    """The run's flops over the core group's peak for its modeled time."""
    return r.total("flops") / r.machine.peak_flops / r.modeled_s


def one_core_group(zoo, work: Path, machine: str) -> None:
    print("| model | target | -O3 compile | modeled | share of peak | broadcasts "
          "| of which RMA hops | Pro share, pessimistic - optimistic |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name in ("resnet18", "resnet50"):
        m = Model(zoo, work, name)
        for t in (SW26010, SW26010_PRO):
            r = m.cost(t, machine=machine)
            bcasts = sum(k.bcasts for k in r.kernels)
            rng = "-"
            if t.rma:
                lo, hi = (share(m.cost(t, machine=e)) for e in ("pessimistic", "optimistic"))
                rng = f"{lo:.1%} - {hi:.1%}"
            print(f"| {name} | {t.title} | {m.seconds[m.lower(t)]:.0f} s | {ms(r.modeled_s)} | "
                  f"{share(r):.1%} | {bcasts} ({ms(r.total('bcast_s'))}) | "
                  f"{ms(r.total('rma_s')) if t.rma else '-'} | {rng} |", flush=True)


def chip(zoo, work: Path, machine: str) -> None:
    print("| ResNet-50 | ranks | -O3 compile | kernels per rank | collectives "
          "| modeled per rank | one core group | speed-up | efficiency |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for batch, split in ((1, "model"), (CHIP, "data")):
        m = Model(zoo, work, "resnet50", batch)
        try:
            r = m.cost(SW26010_PRO, CHIP, split, machine)
        except RuntimeError as e:      # -distribute refuses: say why
            print(f"| batch {batch}, split {split} | {CHIP} | refused: "
                  f"{str(e).splitlines()[1].split('error: ')[-1]} |||||||", flush=True)
            continue
        one = m.cost(SW26010_PRO, machine=machine).modeled_s
        speedup = one / r.modeled_s
        print(f"| batch {batch}, split {split} | {CHIP} ({len(r.collectives)} collectives) | "
              f"{m.seconds[m.lower(SW26010_PRO, CHIP, split)]:.0f} s | "
              f"{ms(r.total('modeled_s'))} | {ms(r.communication_s)} | {ms(r.modeled_s)} | "
              f"{ms(one)} | {speedup:.2f}x | {speedup / CHIP:.1%} |", flush=True)


def limits(zoo, work: Path, machine: str) -> None:
    """Where one core group's modeled time goes: the compute efficiency, the DMA-bound kernels' share, the broadcasts' parts, and
    two what-ifs (not the model's figures: its kernels recharged) that
    bound what wider vectors and free broadcasts could give."""
    print("| model | target | compute eff. | DMA-bound kernels, share of time | broadcasts: "
          "fixed / get / RMA hops | compute halved | and broadcasts free |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name in ("resnet18", "resnet50"):
        m = Model(zoo, work, name)
        for t in (SW26010, SW26010_PRO):
            r = m.cost(t, machine=machine)
            ks = r.kernels
            bound = [k for k in ks if k.dma_s > k.compute_s]
            fixed = sum(k.bcasts for k in ks) * r.machine.bcast_fixed_cycles / r.machine.clock_hz
            get = r.total("bcast_s") - r.total("rma_s") - fixed
            halved = sum(max(k.compute_s / 2, k.overlapped_dma_s) + k.dma_s - k.overlapped_dma_s
                         for k in ks)
            free = halved - r.total("bcast_s")
            flops = r.total("flops") / r.machine.peak_flops
            ifs = f"{ms(halved)}, {flops / halved:.1%} | {ms(free)}, {flops / free:.1%}" \
                if t.rma else "- | -"       # the SW26010's vectors are its width already
            print(f"| {name} | {t.title} | {r.total('peak_compute_s') / r.total('compute_s'):.1%} "
                  f"| {len(bound)} of {len(ks)}, {sum(k.modeled_s for k in bound) / r.modeled_s:.0%} "
                  f"| {ms(fixed)} / {ms(get)} / {ms(r.total('rma_s'))} | {ifs} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--one-cg", action="store_true", help="one core group, both targets")
    ap.add_argument("--chip", action="store_true", help="ResNet-50 on a Pro chip's 6 core groups")
    ap.add_argument("--limits", action="store_true", help="where one core group's time goes")
    ap.add_argument("--machine", default="default", choices=["pessimistic", "default", "optimistic"],
                    help="the DMA and RMA assumptions to model with (default: default)")
    ap.add_argument("--work", help="keep the files here (default: a temporary folder)")
    args = ap.parse_args(argv)
    if not (args.one_cg or args.chip or args.limits):
        ap.error("give --one-cg, --chip or --limits")
    zoo = load_zoo()
    with tempfile.TemporaryDirectory(prefix="swir-pro-") as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        print(f"Machine: {os.cpu_count()} cores; {time.strftime('%Y-%m-%d')}; "
              f"machine '{args.machine}'\n")
        if args.one_cg:
            one_core_group(zoo, work, args.machine)
            print()
        if args.chip:
            chip(zoo, work, args.machine)
            print()
        if args.limits:
            limits(zoo, work, args.machine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
