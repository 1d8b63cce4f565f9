"""Training benchmarks (issue 45; docs/performance.md, "Training").

    python bench/training.py modeled [--batch 4] [--size 224]
        ResNet-18 (bench/resnet18_graph.py): its training step's modeled time
        against its forward pass's (swir-report, -O3), and the step's arena
        against the peak-live lower bound (-lower-loops --stats).
    python bench/training.py pytorch [--batch 4] [--size 224]
        torchvision's ResNet-18 (random weights, seed 0): one SGD step compiled
        (swir-cg --train) and run in the emulation, against PyTorch's step.
    python bench/training.py ranks [--ranks 4] [--batch 16] [--steps 5]
        A small CNN trained data-parallel over MPI ranks against one rank on
        the whole batch, in the interpreter and compiled (mpirun).

Each prints its figures and the wall time it took.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def tool(name: str, *args: str) -> str:
    out = subprocess.run([str(BIN / name), *args], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{name} {' '.join(args)} failed:\n{out.stderr}")
    return out.stdout + out.stderr


def modeled(a: argparse.Namespace, work: Path) -> None:
    forward = work / "r18.swir"
    subprocess.run([sys.executable, str(ROOT / "bench" / "resnet18_graph.py"), "--batch",
                    str(a.batch), "--size", str(a.size), "-o", str(forward)], check=True)
    step = work / "r18_step.swir"
    tool("swir-opt", f"-train-step{{lr=0.01,momentum=0.9,recompute={a.recompute}}}",
         str(forward), "-o", str(step))
    times = {}
    for name, path in (("forward", forward), ("training step", step)):
        t0 = time.time()
        tool("swir-report", str(path), "-q", "--json", str(work / f"{path.stem}.json"))
        report = json.loads((work / f"{path.stem}.json").read_text())
        times[name] = report["total"]["seconds"]
        print(f"{name}: modeled {times[name] * 1e3:.2f} ms ({len(report['kernels'])} "
              f"kernels; report took {time.time() - t0:.0f} s)")
    print(f"training step / forward: {times['training step'] / times['forward']:.2f}x")
    stats = tool("swir-opt", "-O3", "-lower-loops", "--stats", str(step), "-o",
                 str(work / "step.loop.swir"))
    arena = _stat(stats, "arena size")
    peak = _stat(stats, "peak live size")
    print(f"training step arena {arena:,} bytes; peak-live lower bound {peak:,} bytes "
          f"({arena / peak:.3f}x)")


def _stat(text: str, name: str) -> int:
    """A figure of swir-opt --stats: ``NAME (bytes): N``."""
    found = re.search(re.escape(name) + r" \(bytes\): (\d+)", text)
    if found is None:
        sys.exit(f"no '{name}' in the statistics:\n{text}")
    return int(found.group(1))


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=("modeled", "pytorch", "ranks"))
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--recompute", default="none")
    a = p.parse_args(argv)
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        {"modeled": modeled}[a.what](a, Path(tmp))
    print(f"({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main(sys.argv[1:])
