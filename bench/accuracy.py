#!/usr/bin/env python3
"""How far swir's emulated program and onnxruntime are from a near-exact
reference, on zoo models at the paper's sizes.

The reference is swir's graph-stage interpreter (swir.interp) on the imported
module: every op is computed in f64 (conv / matmul / pooling / normalisation
accumulate in f64, see swir.kernels.nn) and rounded once to its f32
result type, so values are f32 between ops but each op's result is within
about half an f32 ulp of the exact result on its (f32) operands.

Per model (batch 1, the zoo's seeded inputs), against that reference:

  swir          the program swir-cg writes at -O3, built with `make emu` and
                run once (one inference)
  ORT opt       onnxruntime, graph optimisations on (ORT_ENABLE_ALL)
  ORT no-opt    onnxruntime, graph optimisations off (what bench/zoo.py and
                bench/vector_code.py check swir against)

each as the largest absolute difference (and relative to the largest
|reference output|) and the number of output elements outside rtol 1e-4,
atol 1e-5 (numpy.isclose, the zoo's tolerance). Also swir and ORT opt
against ORT no-opt (the zoo's check), and the largest |output| for scale.

    python bench/accuracy.py yolov3 vgg16
    python bench/accuracy.py --work /tmp/accuracy --keep resnet18

It prints a Markdown table; per-step wall times go to stderr.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import load_zoo, print_rows
from zoo import ATOL, RTOL, compile_level, max_diff, onnxruntime_run, prepare


def outside(got: list[np.ndarray], want: list[np.ndarray]) -> int:
    """Elements of ``got`` not within rtol / atol of ``want``."""
    return sum(int(np.count_nonzero(~np.isclose(g.astype(np.float64), w, rtol=RTOL, atol=ATOL)))
               for g, w in zip(got, want))


def compare(got: list[np.ndarray], want: list[np.ndarray]) -> str:
    return f"{max_diff(got, want)}; {outside(got, want):,} out"


def emulated(dma_path: Path, project: Path, inputs: dict[str, np.ndarray]
             ) -> list[np.ndarray]:
    """The outputs of one run of the C project swir-cg wrote from ``dma_path``."""
    from swir.analysis.calling import io_signature
    from swir.codegen import emulate
    from swir.parser import parse_module
    m = parse_module(dma_path.read_text(), str(dma_path))
    program = emulate.build(project, m.name, timeout=1800)
    ins, outs = io_signature(m.lookup("main"))
    return emulate.run(program, list(inputs.values()), [p.type for p in ins], outs,
                       timeout=7200).outputs


def reference(swir_path: Path, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The graph-stage interpreter's outputs on the imported module."""
    from swir.interp.run import run_function
    from swir.parser import parse_module
    m = parse_module(swir_path.read_text(), str(swir_path))
    return run_function(m, m.lookup("main"), list(inputs.values()), swir_path.parent,
                        list(inputs))


def measure(zoo, name: str, work: Path, target: str = "sw26010") -> dict[str, str]:
    times: dict[str, float] = {}
    start = time.perf_counter()

    def lap(step: str) -> None:
        nonlocal start
        now = time.perf_counter()
        times[step] = now - start
        start = now

    d = work / name
    _, inputs, onnx_path, swir_path = prepare(zoo, name, d)
    lap("import")
    dma_path = d / f"{name}.dma.swir"
    compile_level(swir_path, "O3", dma_path, d / "project", target)
    lap("compile")
    swir = emulated(dma_path, d / "project", inputs)
    lap("make emu + run")
    noopt = onnxruntime_run(onnx_path, inputs)
    opt = onnxruntime_run(onnx_path, inputs, optimize=True)
    lap("onnxruntime")
    ref = reference(swir_path, inputs)
    lap("interpreter")
    print(f"{name}: " + ", ".join(f"{k} {v:.1f} s" for k, v in times.items())
          + f"; total {sum(times.values()):.1f} s", file=sys.stderr, flush=True)
    return {"elements": f"{sum(r.size for r in ref):,}",
            "max \\|ref\\|": f"{max(float(np.max(np.abs(r))) for r in ref):.3g}",
            "swir vs ref": compare(swir, ref),
            "ORT opt vs ref": compare(opt, ref),
            "ORT no-opt vs ref": compare(noopt, ref),
            "swir vs ORT no-opt": compare(swir, noopt),
            "ORT opt vs ORT no-opt": compare(opt, noopt)}


def main(argv: list[str] | None = None) -> int:
    zoo = load_zoo()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", help=f"of {', '.join(zoo.PAPER_SIZES)}")
    ap.add_argument("--work", type=Path, help="working directory (default: a temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep each model's files")
    ap.add_argument("--target", default="sw26010", choices=["sw26010", "sw26010pro"],
                    help="the machine to write code for (default: sw26010)")
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="swir-accuracy-"))
    rows = {}
    for name in args.models:
        rows[name] = measure(zoo, name, work, args.target)
        print(name, rows[name], file=sys.stderr, flush=True)
        if not args.keep:
            shutil.rmtree(work / name, ignore_errors=True)
    if args.work is None and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
