#!/usr/bin/env python3
"""The swTVM benchmark zoo at the paper's sizes, through swir.

For each model of bench/models/zoo.py (batch 1; 224x224, YOLOv3 416x416,
DCGAN 64x64 output, BERT-base sequence 16), written as ONNX with external
data (what torch.onnx.export writes):

  import    swir-import wall time
  cg        swir-cg wall time (the whole pipeline and the C project)
  C lines   lines of generated C (main.c, layers*.[ch], layers_slave.c)
  arena     bytes of main memory for intermediate values (-mem-plan)
  kernels   LDM-planned cpe kernels
  DMA       gets + puts, bytes in, bytes out, share of transfers < 256 B:
            swir.analysis.traffic on the dma-stage module, without running
  make      `make emu` wall time (gcc -O2 -Wall -Wextra -Werror)
  run       with --run: the emulated run's wall time; its outputs against
            onnxruntime without graph optimisations (pass = rtol 1e-4, atol
            1e-5; the largest difference, absolute and relative to the largest
            output); for scale, the same difference between onnxruntime with
            and without its graph optimisations; and whether the run's DMA
            counters equal the static count

    python bench/zoo.py                        # all eight, no runs
    python bench/zoo.py --run resnet18 dcgan   # these, with runs
    python bench/zoo.py --run all --work /tmp/zoo --keep

It prints a Markdown table (docs/performance.md keeps the results). The tools
are the ones beside this Python (the venv's).
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
RTOL, ATOL = 1e-4, 1e-5


def load_zoo():
    spec = importlib.util.spec_from_file_location("_swir_bench_zoo", HERE / "models" / "zoo.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@dataclass
class Row:
    name: str
    params: int = 0
    figures: dict[str, str] = field(default_factory=dict)


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:2])} failed:\n{r.stderr[-2000:]}")
    return time.perf_counter() - start


def c_lines(project: Path) -> int:
    files = [p for p in project.iterdir() if p.suffix in (".c", ".h")]
    return sum(p.read_text().count("\n") for p in files)


def lowered(swir_path: Path, out: Path):
    """The dma-stage module swir-cg compiles (its pipeline, run by swir-opt)."""
    from swir.parser import parse_module
    from swir.tools import swir_opt
    from swir.tools.swir_cg import PIPELINE
    assert swir_opt.main(["-" + p for p in PIPELINE["graph"]]
                         + [str(swir_path), "-o", str(out)]) == 0
    return parse_module(out.read_text(), str(out))


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


def measure(zoo, name: str, work: Path, run: bool) -> Row:
    from swir.analysis.traffic import dma_traffic
    from swir.codegen import emulate
    from swir.interp.loop import io_signature
    d = work / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    model = zoo.build(name, **zoo.PAPER_SIZES[name])
    row = Row(name, zoo.param_count(model))
    inputs = zoo.random_inputs(model, seed=1)
    onnx_path = d / f"{name}.onnx"
    zoo.save(model, onnx_path, external_data=True)
    del model
    f = row.figures
    swir_path, project = d / f"{name}.swir", d / "project"
    f["import"] = f"{timed([str(BIN / 'swir-import'), str(onnx_path), '-o', str(swir_path)]):.2f} s"
    f["cg"] = f"{timed([str(BIN / 'swir-cg'), str(swir_path), '-o', str(project)]):.2f} s"
    f["C lines"] = f"{c_lines(project):,}"
    dma = lowered(swir_path, d / f"{name}.dma.swir")
    f["arena"] = f"{arena_bytes(dma) / 2**20:.1f} MiB"
    f["kernels"] = str(cpe_kernels(dma))
    t = dma_traffic(dma)
    f["DMA ops"] = f"{t.gets + t.puts:,}"
    f["DMA in"] = f"{t.bytes_in / 1e6:,.1f} MB"
    f["DMA out"] = f"{t.bytes_out / 1e6:,.1f} MB"
    f["< 256 B"] = f"{100 * t.small_share:.1f}%"
    start = time.perf_counter()
    program = emulate.build(project, dma.name, timeout=1800)
    f["make"] = f"{time.perf_counter() - start:.1f} s"
    if run:
        ins, outs = io_signature(dma.lookup("main"))
        start = time.perf_counter()
        got = emulate.run(program, list(inputs.values()), [p.type for p in ins], outs,
                          timeout=3600)
        f["run"] = f"{time.perf_counter() - start:.1f} s"
        want = onnxruntime_run(onnx_path, inputs)
        ok = all(np.allclose(g, w, rtol=RTOL, atol=ATOL) for g, w in zip(got.outputs, want))
        f["vs onnxruntime"] = f"{'pass' if ok else 'FAIL'} ({max_diff(got.outputs, want)})"
        # The scale of rounding differences between two correct f32
        # implementations: onnxruntime with its graph optimisations against
        # itself without (other kernels, fused ops, other summation orders).
        f["ort opt vs no-opt"] = max_diff(onnxruntime_run(onnx_path, inputs, True), want)
        measured = emulate.dma_counters(got.stats)
        f["static = run"] = "yes" if measured == t.counters() else "NO"
    return row


def max_diff(got: list[np.ndarray], want: list[np.ndarray]) -> str:
    """The largest absolute difference, and relative to the largest |output|."""
    diff = max(float(np.max(np.abs(g.astype(np.float64) - w))) for g, w in zip(got, want))
    scale = max(float(np.max(np.abs(w))) for w in want)
    return f"{diff:.1e}, {diff / scale:.1e} rel."


COLUMNS = ["import", "cg", "C lines", "arena", "kernels", "DMA ops", "DMA in", "DMA out",
           "< 256 B", "make", "run", "vs onnxruntime", "ort opt vs no-opt", "static = run"]


def table(rows: list[Row]) -> str:
    cols = [c for c in COLUMNS if any(c in r.figures for r in rows)]
    lines = ["| model | params | " + " | ".join(cols) + " |",
             "|---|---:|" + "---:|" * len(cols)]
    for r in rows:
        cells = [r.figures.get(c, "–") for c in cols]
        lines.append(f"| {r.name} | {r.params / 1e6:.1f} M | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    zoo = load_zoo()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="*", help=f"models to measure (default: all of "
                                             f"{', '.join(zoo.MODELS)})")
    p.add_argument("--run", nargs="*", metavar="MODEL",
                   help="also run these under emulation and check them against onnxruntime "
                        "('all' for every model measured)")
    p.add_argument("--work", type=Path, help="working directory (default: a temporary one)")
    p.add_argument("--keep", action="store_true", help="keep each model's files")
    a = p.parse_args(argv)
    names = a.models or list(zoo.MODELS)
    for n in names + [m for m in a.run or [] if m != "all"]:
        if n not in zoo.MODELS:
            p.error(f"no model '{n}' (the zoo has {', '.join(zoo.MODELS)})")
    run = set(names) if a.run is not None and ("all" in a.run or not a.run) else set(a.run or [])
    work = a.work or Path(tempfile.mkdtemp(prefix="swir-zoo-"))
    rows = []
    for name in names:
        rows.append(measure(zoo, name, work, name in run))
        print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
        if not a.keep:
            shutil.rmtree(work / name, ignore_errors=True)
    print(table(rows))
    if a.work is None and not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
