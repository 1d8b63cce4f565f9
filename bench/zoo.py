#!/usr/bin/env python3
"""The swTVM benchmark zoo at the paper's sizes, through swir.

For each model of bench/models/zoo.py (batch 1; 224x224, YOLOv3 416x416,
DCGAN 64x64 output, BERT-base sequence 16), written as ONNX with external
data (what torch.onnx.export writes), and at each optimisation level (-O0,
-O1, -O3 by default):

  import    swir-import wall time (once per model)
  cg        compile wall time: swir-opt with swir-cg's pipeline at the level
            (graph passes, lowering) to the dma stage, then swir-cg on it
  C lines   lines of generated C (main.c, layers*.[ch], layers_slave.c)
  arena     bytes of main memory for intermediate values (-mem-plan)
  kernels   LDM-planned cpe kernels
  DMA       gets + puts, bytes in + out, the bytes of memory-intensive
            kernels (those without a conv / matmul: batch norm, bias,
            activations, pools, copies), share of transfers < 256 B:
            swir.costmodel.traffic on the dma-stage module, without running
  make      `make emu` wall time (gcc -O2 -Wall -Wextra -Werror)
  run       with --run: the emulated run's wall time and DMA bytes, whether
            its DMA counters equal the static count, and its outputs against
            onnxruntime without graph optimisations (pass = rtol 1e-4, atol
            1e-5; the largest difference, absolute and relative to the
            largest output); for scale, the same difference between
            onnxruntime with and without its graph optimisations

A second table sums up the static DMA bytes per model and level: all
kernels, the conv / matmul kernels (with the epilogues fused into them) and
the memory-intensive ones, with the change against the first level.

    python bench/zoo.py                        # all eight, no runs
    python bench/zoo.py --run resnet18 dcgan   # these, with runs
    python bench/zoo.py --levels O0,O3 resnet50
    python bench/zoo.py --run all --work /tmp/zoo --keep
    python bench/zoo.py --run --levels O3 --target sw26010pro   # the SW26010-Pro's code

It prints Markdown tables (docs/performance.md keeps the results). The tools
are the ones beside this Python (the venv's).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from common import load_zoo, timed

BIN = Path(sys.executable).parent
RTOL, ATOL = 1e-4, 1e-5


@dataclass
class Row:
    name: str
    level: str
    params: int = 0
    figures: dict[str, str] = field(default_factory=dict)
    # For the summary: static DMA bytes, all kernels and memory-intensive ones.
    dma_bytes: int = 0
    memory_bytes: int = 0


def c_lines(project: Path) -> int:
    files = [p for p in project.iterdir() if p.suffix in (".c", ".h")]
    return sum(p.read_text().count("\n") for p in files)


def compile_level(swir_path: Path, level: str, dma_path: Path, project: Path,
                  target: str = "sw26010") -> float:
    """swir-cg's work at ``level``, in two timed steps: swir-opt runs the
    level's graph passes and the lowering (swir-cg's pipeline) to the dma
    stage for ``target``, kept for the static count; swir-cg writes the C
    project from it (for the target it was planned for)."""
    from swir.passes.pipelines import pipeline_flags
    passes = pipeline_flags("graph", level)
    opt = timed([str(BIN / "swir-opt"), f"--target={target}", *passes, str(swir_path),
                 "-o", str(dma_path)])
    return opt + timed([str(BIN / "swir-cg"), str(dma_path), "-o", str(project)])


def arena_bytes(module) -> int:
    from swir.ir.core import Global
    end = 0
    for item in module.items:
        if isinstance(item, Global) and item.kind == "buffer" and "offset" in item.attrs:
            end = max(end, int(item.attrs["offset"]) + item.type.bytes)
    return end


def cpe_kernels(module) -> int:
    from swir.ir.core import Function
    return sum(1 for f in module.items
               if isinstance(f, Function) and f.kind == "kernel" and f.target == "cpe")


def onnxruntime_run(path: Path, inputs: dict[str, np.ndarray], optimize: bool = False
                    ) -> list[np.ndarray]:
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]) \
        .run(None, inputs)


def prepare(zoo, name: str, d: Path) -> tuple[Row, dict[str, np.ndarray], Path, Path]:
    """The model as ONNX (external data) and imported; import time."""
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    model = zoo.build(name, **zoo.PAPER_SIZES[name])
    row = Row(name, "", zoo.param_count(model))
    inputs = zoo.random_inputs(model, seed=1)
    onnx_path, swir_path = d / f"{name}.onnx", d / f"{name}.swir"
    zoo.save(model, onnx_path, external_data=True)
    row.figures["import"] = f"{timed([str(BIN / 'swir-import'), str(onnx_path), '-o', str(swir_path)]):.2f} s"
    return row, inputs, onnx_path, swir_path


def measure(base: Row, level: str, swir_path: Path, inputs: dict[str, np.ndarray],
            want: list[np.ndarray] | None, target: str = "sw26010") -> Row:
    """One level of one model: compile, count, build and (with ``want``, the
    reference outputs) run."""
    from swir.analysis.calling import io_signature
    from swir.costmodel.cost import is_matmul_like
    from swir.costmodel.traffic import dma_traffic
    from swir.codegen import emulate
    from swir.parser import parse_module
    d = swir_path.parent
    row = Row(base.name, level, base.params, dict(base.figures) if level == "O0" else {})
    f = row.figures
    dma_path, project = d / f"{base.name}.{level}.dma.swir", d / f"project-{level}"
    f["cg"] = f"{compile_level(swir_path, level, dma_path, project, target):.2f} s"
    f["C lines"] = f"{c_lines(project):,}"
    dma = parse_module(dma_path.read_text(), str(dma_path))
    f["arena"] = f"{arena_bytes(dma) / 2**20:.1f} MiB"
    f["kernels"] = str(cpe_kernels(dma))
    t = dma_traffic(dma)
    row.dma_bytes = t.bytes_in + t.bytes_out
    # Memory-intensive: no conv / matmul in the kernel (batch norm, bias,
    # activations, pools, copies).
    row.memory_bytes = sum(k.bytes_in + k.bytes_out for n, k in t.kernels.items()
                           if not is_matmul_like(n))
    f["DMA ops"] = f"{t.gets + t.puts:,}"
    f["DMA bytes"] = f"{row.dma_bytes / 1e6:,.1f} MB"
    f["mem.-int. DMA"] = f"{row.memory_bytes / 1e6:,.1f} MB"
    f["< 256 B"] = f"{100 * t.small_share:.1f}%"
    start = time.perf_counter()
    program = emulate.build(project, dma.name, timeout=1800)
    f["make"] = f"{time.perf_counter() - start:.1f} s"
    if want is not None:
        ins, outs = io_signature(dma.lookup("main"))
        start = time.perf_counter()
        got = emulate.run(program, list(inputs.values()), [p.type for p in ins], outs,
                          timeout=3600)
        f["run"] = f"{time.perf_counter() - start:.1f} s"
        measured = emulate.dma_counters(got.stats)
        run_bytes = sum(k["bytes_in"] + k["bytes_out"] for k in measured.values())
        f["run DMA bytes"] = f"{run_bytes / 1e6:,.1f} MB"
        f["static = run"] = "yes" if measured == t.counters() else "NO"
        ok = all(np.allclose(g, w, rtol=RTOL, atol=ATOL) for g, w in zip(got.outputs, want))
        f["vs onnxruntime"] = f"{'pass' if ok else 'FAIL'} ({max_diff(got.outputs, want)})"
    return row


def measure_model(zoo, name: str, work: Path, levels: list[str], run: bool,
                  target: str = "sw26010") -> list[Row]:
    base, inputs, onnx_path, swir_path = prepare(zoo, name, work / name)
    want = onnxruntime_run(onnx_path, inputs) if run else None
    if run:
        # The scale of rounding differences between two correct f32
        # implementations: onnxruntime with its graph optimisations against
        # itself without (other kernels, fused ops, other summation orders).
        base.figures["ort opt vs no-opt"] = max_diff(onnxruntime_run(onnx_path, inputs, True),
                                                     want)
    rows = []
    for level in levels:
        rows.append(measure(base, level, swir_path, inputs, want, target))
        print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    return rows


def max_diff(got: list[np.ndarray], want: list[np.ndarray]) -> str:
    """The largest absolute difference, and relative to the largest |output|."""
    diff = max(float(np.max(np.abs(g.astype(np.float64) - w))) for g, w in zip(got, want))
    scale = max(float(np.max(np.abs(w))) for w in want)
    return f"{diff:.1e}, {diff / scale:.1e} rel."


COLUMNS = ["import", "cg", "C lines", "arena", "kernels", "DMA ops", "DMA bytes",
           "mem.-int. DMA", "< 256 B", "make", "run", "run DMA bytes", "static = run",
           "vs onnxruntime", "ort opt vs no-opt"]


def table(rows: list[Row]) -> str:
    cols = [c for c in COLUMNS if any(c in r.figures for r in rows)]
    lines = ["| model | level | params | " + " | ".join(cols) + " |",
             "|---|---|---:|" + "---:|" * len(cols)]
    for r in rows:
        cells = [r.figures.get(c, "–") for c in cols]
        lines.append(f"| {r.name} | -{r.level} | {r.params / 1e6:.1f} M | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(rows: list[Row], levels: list[str]) -> str:
    """Per model and level: static DMA bytes of all kernels, of the conv /
    matmul kernels (with what is fused into them) and of the memory-intensive
    ones, each with its change against the first level."""
    by_model: dict[str, dict[str, Row]] = {}
    for r in rows:
        by_model.setdefault(r.name, {})[r.level] = r
    head = ["model"] + [f"-{lv} {what}" for lv in levels
                        for what in ("all", "conv/matmul", "mem.-int.")]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for name, rs in by_model.items():
        r0 = rs[levels[0]]
        cells = [name]
        for lv in levels:
            r = rs[lv]
            for new, old in ((r.dma_bytes, r0.dma_bytes),
                             (r.dma_bytes - r.memory_bytes, r0.dma_bytes - r0.memory_bytes),
                             (r.memory_bytes, r0.memory_bytes)):
                change = "" if r is r0 else f" ({percent(new, old)})"
                cells.append(f"{new / 1e6:,.1f} MB{change}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def percent(new: int, old: int) -> str:
    return f"{100 * (new - old) / old:+.1f}%" if old else "–"


def parse_args(argv: list[str] | None, models: list[str]) -> argparse.Namespace:
    """The command line; ``models`` is the zoo. Sets ``names`` (the models to
    measure) and ``run`` (those also run under emulation)."""
    from swir.passes.pipelines import OPT_LEVELS
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="*", help=f"models to measure: any of {', '.join(models)}, "
                                             "or all (the default)")
    p.add_argument("--run", action="store_true",
                   help="also run them under emulation and check them against onnxruntime")
    p.add_argument("--levels", default="O0,O1,O3",
                   help="optimisation levels to compile at, comma-separated (default: O0,O1,O3; "
                        "the first is the baseline of the summary)")
    p.add_argument("--work", type=Path, help="working directory (default: a temporary one)")
    p.add_argument("--keep", action="store_true", help="keep each model's files")
    p.add_argument("--target", default="sw26010", choices=["sw26010", "sw26010pro"],
                   help="the machine to plan and write code for (default: sw26010)")
    a = p.parse_args(argv)
    a.names = [m for m in a.models if m != "all"] if a.models and "all" not in a.models \
        else list(models)
    for n in a.names:
        if n not in models:
            p.error(f"no model '{n}' (the zoo has {', '.join(models)})")
    a.levels = [lv.strip().lstrip("-") for lv in a.levels.split(",") if lv.strip()]
    for lv in a.levels:
        if lv not in OPT_LEVELS:
            p.error(f"no optimisation level '{lv}' (there are {', '.join(OPT_LEVELS)})")
    if not a.levels:
        p.error("--levels names no level")
    a.run = set(a.names) if a.run else set()
    return a


def main(argv: list[str] | None = None) -> int:
    zoo = load_zoo()
    a = parse_args(argv, list(zoo.MODELS))
    names, levels, run = a.names, a.levels, a.run
    work = a.work or Path(tempfile.mkdtemp(prefix="swir-zoo-"))
    rows = []
    for name in names:
        rows += measure_model(zoo, name, work, levels, name in run, a.target)
        if not a.keep:
            shutil.rmtree(work / name, ignore_errors=True)
    print(table(rows))
    print()
    print(summary(rows, levels))
    if a.work is None and not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
