#!/usr/bin/env python3
"""Many core groups (issue 26): the MPI programs of swir-cg --ranks, checked
and modeled at the paper's sizes.

  --check   ResNet-18 at batch 1 (split by channels) and batch 4 (split by
            the batch) and BERT-base (split by channels; sequence 16): each
            compiled for N = 1, 2, 4 ranks, built with make emu (mpicc), run
            by mpirun -np N --oversubscribe, its outputs against onnxruntime
            (graph optimisations off; pass = rtol 1e-4, atol 1e-5), with the
            MPI bytes rank 0 sent and the run's wall time
  --speedup ResNet-18 and BERT-base at batch 1, split by channels on 2 and
            4 core groups (one chip): the modeled time per rank (kernels,
            collectives) and the speed-up over the same model on one core
            group (swir-report --ranks's figures); and ResNet-18 at batch 4
            on 4 core groups split either way
  --weak    weak scaling, data parallel: 4 images of ResNet-18 per rank,
            from 1 to 256 ranks (64 chips); modeled time per batch with the
            gather of the outputs to rank 0 (each rank reads its block of
            the inputs), and the efficiency T(1) / T(N); and the same with
            the inputs scattered from rank 0 (the program's --scatter). The per-rank program is
            the same at every N (the batch-4 model); it is compiled for 1,
            2 and 4 ranks (batches 4, 8, 16), its kernels' modeled time
            checked equal, and its collectives modeled for every N

    python bench/ranks.py --speedup --weak
    python bench/ranks.py --check --work /tmp/ranks

It prints Markdown tables (docs/performance.md keeps the results). The tools
are the ones beside this Python (the venv's).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import load_zoo

from swir.costmodel.cost import cost_report
from swir.costmodel.network import Network, collective_costs
from swir.codegen import emulate
from swir.parser import parse_module
from swir.passes.pipelines import DEFAULT_LEVEL, pipeline_flags
from swir.target import SW26010

BIN = Path(sys.executable).parent
RTOL, ATOL = 1e-4, 1e-5
RANKS = (1, 2, 4)
WEAK = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# name -> (zoo model, keyword arguments, split)
CHECKS = {"ResNet-18 batch 1": ("resnet18", {"batch": 1}, "model"),
          "ResNet-18 batch 4": ("resnet18", {"batch": 4}, "data"),
          "BERT-base": ("bert", {}, "model")}


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd[:3]))} failed:\n{r.stderr[-3000:]}")
    return r


class Model:
    """One zoo model at paper size, written as ONNX and imported once."""

    def __init__(self, zoo, work: Path, name: str, kwargs: dict) -> None:
        tag = name + "".join(f"-{k}{v}" for k, v in kwargs.items())
        self.dir = work / tag
        self.dir.mkdir(parents=True, exist_ok=True)
        model = zoo.build(name, **kwargs)
        self.inputs = zoo.random_inputs(model, seed=1)
        self.onnx = self.dir / f"{name}.onnx"
        zoo.save(model, self.onnx, external_data=True)
        self.swir = self.dir / f"{name}.swir"
        run([str(BIN / "swir-import"), str(self.onnx), "-o", str(self.swir)])
        self.graph = parse_module(self.swir.read_text(), str(self.swir))

    def lower(self, ranks: int | None, split: str = "auto") -> Path:
        """swir-cg's pipeline to the dma stage, for ``ranks`` (None: one core group)."""
        out = self.dir / (f"r{ranks}-{split}.dma.swir" if ranks else "one.dma.swir")
        if not out.exists():
            flags = pipeline_flags("graph", DEFAULT_LEVEL, ranks is not None)
            if ranks is not None:
                flags += [f"--ranks={ranks}", f"--split={split}"]
            run([str(BIN / "swir-opt"), *flags, str(self.swir), "-o", str(out)])
        return out

    def cost(self, ranks: int | None, split: str = "auto"):
        path = self.lower(ranks, split)
        return cost_report(parse_module(path.read_text(), str(path)))


def reference(path: Path, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]) \
        .run(None, inputs)


def check(zoo, work: Path) -> None:
    print("| model | split | ranks | compile | run (wall) | max abs diff | result "
          "| MPI bytes rank 0 sent |")
    print("|---|---|---:|---:|---:|---:|---|---:|")
    for label, (name, kwargs, split) in CHECKS.items():
        m = Model(zoo, work, name, kwargs)
        want = reference(m.onnx, m.inputs)
        f = m.graph.lookup("main")
        for n in RANKS:
            project = m.dir / f"p{n}"
            start = time.perf_counter()
            run([str(BIN / "swir-cg"), str(m.swir), "-o", str(project), "--force", "-q",
                 "--ranks", str(n), "--split", split])
            compile_s = time.perf_counter() - start
            program = emulate.build(project, m.graph.name)
            start = time.perf_counter()
            got = emulate.run(program, list(m.inputs.values()), [p.type for p in f.params],
                              list(f.result_types), ranks=n, timeout=7200)
            wall = time.perf_counter() - start
            diff = max(float(np.max(np.abs(g - w))) for g, w in zip(got.outputs, want))
            ok = all(np.allclose(g, w, rtol=RTOL, atol=ATOL) for g, w in zip(got.outputs, want))
            sent = sum(c["bytes_sent"] for c in got.stats["ranks"][0]["mpi"].values())
            print(f"| {label} | {split} | {n} | {compile_s:.1f} s | {wall:.1f} s | {diff:.2e} | "
                  f"{'pass' if ok else 'FAIL'} | {sent:,} |", flush=True)


def ms(s: float) -> str:
    return f"{s * 1e3:,.2f} ms"


def speedup(zoo, work: Path) -> None:
    print("| model | ranks | kernels per rank | collectives | modeled per rank "
          "| one core group | speed-up |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, name in (("ResNet-18 batch 1", "resnet18"), ("BERT-base", "bert")):
        m = Model(zoo, work, name, {"batch": 1} if name == "resnet18" else {})
        one = m.cost(None).modeled_s
        for n in (2, 4):
            speedup_row(label, m, n, "model", one)
    m = Model(zoo, work, "resnet18", {"batch": 4})     # which split auto should take
    one = m.cost(None).modeled_s
    for split in ("data", "model"):
        speedup_row(f"ResNet-18 batch 4, split {split}", m, 4, split, one)


def speedup_row(label: str, m: Model, n: int, split: str, one: float) -> None:
    r = m.cost(n, split)
    print(f"| {label} | {n} ({len(r.collectives)} collectives) | {ms(r.total('modeled_s'))} | "
          f"{ms(r.communication_s)} | {ms(r.modeled_s)} | {ms(one)} | "
          f"{one / r.modeled_s:.2f}x |", flush=True)


def weak(zoo, work: Path) -> None:
    per_rank = {}
    for n in (1, 2, 4):     # the real compiles: batch 4n over n ranks
        m = Model(zoo, work, "resnet18", {"batch": 4 * n})
        r = m.cost(n, "data")
        per_rank[n] = (r.total("modeled_s"), m.lower(n, "data"))
    kernels = per_rank[1][0]
    for n, (k, _) in per_rank.items():
        assert abs(k - kernels) <= 1e-12 * kernels, f"{n} ranks: kernels {k} vs {kernels}"
    path = per_rank[1][1]
    module = parse_module(path.read_text(), str(path))
    f = module.lookup("main")
    print(f"Per rank: 4 images, kernels {ms(kernels)} modeled (the same compiled for 1, 2 "
          "and 4 ranks).\n")
    print("| ranks | chips | gather outputs | modeled per batch | efficiency "
          "| with --scatter: scatter inputs | modeled per batch | efficiency |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    inputs = sum(p.type.bytes for p in f.params[:len(f.params) - f.attrs.get("outputs", 0)])
    for n in WEAK:
        module.attrs["ranks"] = n       # the per-rank program of a batch of 4n
        costs = collective_costs(module, f, SW26010)
        assert not any(c.kind == "scatter" for c in costs)
        gather = sum(c.seconds for c in costs if c.kind == "gather")
        scatter = Network.for_target(SW26010, n).scatter(inputs)
        own, scattered = kernels + gather, kernels + gather + scatter
        print(f"| {n} | {-(-n // SW26010.core_groups)} | {ms(gather)} | {ms(own)} | "
              f"{kernels / own:.2f} | {ms(scatter)} | {ms(scattered)} | {kernels / scattered:.2f} |",
              flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="run N = 1, 2, 4 against onnxruntime")
    ap.add_argument("--speedup", action="store_true", help="modeled speed-up on one chip")
    ap.add_argument("--weak", action="store_true", help="modeled weak scaling to 256 ranks")
    ap.add_argument("--work", help="keep the files here (default: a temporary folder)")
    args = ap.parse_args(argv)
    if not (args.check or args.speedup or args.weak):
        ap.error("give --check, --speedup or --weak")
    zoo = load_zoo()
    with tempfile.TemporaryDirectory(prefix="swir-ranks-") as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        print(f"Machine: {os.cpu_count()} cores; {time.strftime('%Y-%m-%d')}\n")
        if args.speedup:
            speedup(zoo, work)
            print()
        if args.weak:
            weak(zoo, work)
            print()
        if args.check:
            check(zoo, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
