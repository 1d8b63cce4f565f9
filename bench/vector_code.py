#!/usr/bin/env python3
"""The vector micro-kernels (issue 23), measured on zoo models at the paper's
sizes: what the cost model reads from the code, and with --run what the
emulated program costs on this machine against onnxruntime.

Per model, compiled at -O3 (swir-cg's default) with vector code:

  conv/matmul flops     flops of the kernels that run a conv2d,
                        conv_transpose2d or matmul (epilogues included)
  as vector FMAs        the share of them vector instructions do
                        (swir.costmodel.cost: the plan swir-cg writes)
  compute eff.          their flops at the busy CPEs' vector FMA peak over
                        their modeled compute time
  roofline, median      of those kernels, the roofline bound over the
                        modeled time, median (and range)
  modeled               the whole model's modeled Sunway time

With --run, also the emulated program on this machine, built with and
without vector code (swir-cg --no-simd), REPEAT inferences each, CPU time
(user + sys of the program) per inference, beside onnxruntime's on one
thread (intra- and inter-op threads 1, graph optimisations on) in the same
run, and the outputs against onnxruntime without graph optimisations
(rtol 1e-4, atol 1e-5, the zoo's tolerance).

    python bench/vector_code.py                           # resnet18 mobilenet bert
    python bench/vector_code.py --run --repeat 3 resnet18
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import load_zoo, print_rows, timed
from zoo import BIN, compile_level, max_diff, onnxruntime_run, prepare

RTOL, ATOL = 1e-4, 1e-5


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def static_figures(dma_path: Path) -> dict[str, str]:
    from swir.costmodel.cost import cost_report, is_matmul_like
    from swir.parser import parse_module
    m = parse_module(dma_path.read_text(), str(dma_path))
    r = cost_report(m)
    ks = [k for k in r.kernels if is_matmul_like(k.name) and k.flops]
    flops = sum(k.flops for k in ks)
    vector = sum(k.vector_flops for k in ks)
    compute = sum(k.compute_s for k in ks)
    peak = sum(k.peak_compute_s for k in ks)
    roof = sorted(k.roofline_share for k in ks)
    return {"conv/matmul flops": f"{flops / 1e9:,.2f} G",
            "as vector FMAs": f"{100 * vector / flops:.1f}%",
            "compute eff.": f"{100 * peak / compute:.0f}%",
            "roofline, median": f"{100 * statistics.median(roof):.0f}% "
                                f"({100 * roof[0]:.0f}-{100 * roof[-1]:.0f}%)",
            "modeled": f"{r.modeled_s * 1e3:,.2f} ms"}


def ort_cpu(onnx_path: Path, inputs: dict[str, np.ndarray], repeat: int) -> float:
    """onnxruntime's CPU time per inference on one thread (after one warm-up)."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    so.log_severity_level = 3
    s = ort.InferenceSession(str(onnx_path), so, providers=["CPUExecutionProvider"])
    s.run(None, inputs)
    start = time.process_time()
    for _ in range(repeat):
        s.run(None, inputs)
    return (time.process_time() - start) / repeat


def emulated(dma_path: Path, project: Path, simd: bool, inputs, want, repeat: int
             ) -> tuple[float, str]:
    """CPU time per inference of the emulated program, and its outputs
    against ``want``."""
    from swir.analysis.calling import io_signature
    from swir.codegen import emulate
    from swir.parser import parse_module
    timed([str(BIN / "swir-cg"), str(dma_path), "-o", str(project), "-q", "--force"]
          + ([] if simd else ["--no-simd"]))
    m = parse_module(dma_path.read_text(), str(dma_path))
    program = emulate.build(project, m.name, timeout=1800)
    ins, outs = io_signature(m.lookup("main"))
    before = children_cpu()
    got = emulate.run(program, list(inputs.values()), [p.type for p in ins], outs,
                      repeat=repeat, timeout=7200)
    cpu = (children_cpu() - before) / repeat
    ok = all(np.allclose(g, w, rtol=RTOL, atol=ATOL) for g, w in zip(got.outputs, want))
    return cpu, f"{'pass' if ok else 'FAIL'} ({max_diff(got.outputs, want)})"


def measure(zoo, name: str, work: Path, run: bool, repeat: int) -> dict[str, str]:
    _, inputs, onnx_path, swir_path = prepare(zoo, name, work / name)
    dma_path = work / name / f"{name}.dma.swir"
    compile_level(swir_path, "O3", dma_path, work / name / "project")
    row = static_figures(dma_path)
    if run:
        want = onnxruntime_run(onnx_path, inputs)
        ort = ort_cpu(onnx_path, inputs, max(repeat, 3))
        vec, check = emulated(dma_path, work / name / "simd", True, inputs, want, repeat)
        sca, _ = emulated(dma_path, work / name / "scalar", False, inputs, want, repeat)
        row.update({"onnxruntime, 1 thread": f"{ort * 1e3:,.1f} ms",
                    "emulated, scalar": f"{sca:,.2f} s ({sca / ort:,.0f}x)",
                    "emulated, vector": f"{vec:,.2f} s ({vec / ort:,.0f}x)",
                    "vs onnxruntime": check})
    return row


def main(argv: list[str] | None = None) -> int:
    zoo = load_zoo()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", default=["resnet18", "mobilenet", "bert"],
                    help=f"of {', '.join(zoo.PAPER_SIZES)}")
    ap.add_argument("--run", action="store_true", help="build, run and time the programs")
    ap.add_argument("--repeat", type=int, default=2, help="inferences per emulated run")
    args = ap.parse_args(argv)
    rows = {}
    with tempfile.TemporaryDirectory(prefix="swir-vector-") as tmp:
        for name in args.models:
            rows[name] = measure(zoo, name, Path(tmp), args.run, args.repeat)
            print(name, rows[name], file=sys.stderr, flush=True)
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
