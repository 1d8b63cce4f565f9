#!/usr/bin/env python3
"""CPU time of an emulated inference against onnxruntime's, side by side.

For each model (default ResNet-18) at the paper's size, compiled by swir-cg
at -O3 and built with `make emu` twice: the default build (the CPEs run as
coroutines on the MPE's thread) and the threaded build (SWIR_EMU_THREADS:
one thread per CPE, as under ThreadSanitizer). Each program runs with
`--repeat 1` and `--repeat N`; the difference over N - 1 is one inference's
user and system time without the start-up (reading the weights, athread_init).
onnxruntime runs in this process on one thread with graph optimisations off
(the zoo's reference), after one warm-up run: its user and system time over
N runs, per run. Where strace is installed, `strace -f -c` counts each
build's futex calls (and all system calls) for one inference with start-up.
The outputs are checked against onnxruntime's (rtol 1e-4, atol 1e-5).

    python bench/emu_cpu.py                       # resnet18, N = 5
    python bench/emu_cpu.py --repeat 9 resnet18 mobilenet
    python bench/emu_cpu.py --builds coroutines   # the default build only

It prints a Markdown table (docs/performance.md keeps the results). Run it on
a quiet machine: user and system time are per process, but a busy machine
still slows a run through caches and migrations.
"""

from __future__ import annotations

import argparse
import re
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from common import load_zoo, print_rows
from zoo import ATOL, RTOL, compile_level, onnxruntime_run, prepare

# build name -> extra C flags for `make emu`
BUILDS = {"coroutines": "", "threads": "-DSWIR_EMU_THREADS"}


def child_times() -> tuple[float, float]:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime, r.ru_stime


def run_program(cmd: list[str]) -> tuple[float, float]:
    """User and system seconds of one run of ``cmd`` (a child of this process)."""
    u0, s0 = child_times()
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr}")
    u1, s1 = child_times()
    return u1 - u0, s1 - s0


def futex_calls(cmd: list[str], work: Path) -> tuple[int, int] | None:
    """(futex calls, all system calls) of ``cmd`` under `strace -f -c`, or None
    without strace."""
    strace = shutil.which("strace")
    if strace is None:
        return None
    out = work / "strace.txt"
    subprocess.run([strace, "-f", "-c", "-o", str(out), *cmd], capture_output=True, check=True)
    futex = total = 0
    for line in out.read_text().splitlines():
        parts = line.split()
        if parts and parts[-1] == "futex":
            futex = int(parts[3])
        elif parts and parts[-1] == "total":     # % time, seconds, usecs/call, calls
            total = int(parts[3])
    return futex, total


def build(project: Path, flags: str, program: Path) -> Path:
    """`make emu` with ``flags`` added to the Makefile's CFLAGS; the program,
    renamed to ``program`` so that the builds stay side by side."""
    cflags = re.search(r"^CFLAGS = (.*)$", (project / "Makefile").read_text(), re.M).group(1)
    r = subprocess.run(["make", "-s", "-B", "-C", str(project), "emu",
                        f"CFLAGS={cflags} {flags}".strip()], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"make emu failed in {project}:\n{r.stdout}{r.stderr}")
    built = next(p for p in project.iterdir() if p.name.endswith("_emu"))
    return built.rename(program)


def emulated(program: Path, inputs: dict[str, np.ndarray], want: list[np.ndarray],
             repeat: int, work: Path) -> dict[str, object]:
    """One build's per-inference user and system time, futex count and check."""
    args = []
    for i, a in enumerate(inputs.values()):
        np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tofile(work / f"in{i}.bin")
        args += ["--input", str(work / f"in{i}.bin")]
    outs = [work / f"out{i}.bin" for i in range(len(want))]
    for o in outs:
        args += ["--output", str(o)]
    one = run_program([str(program), *args, "--repeat", "1"])
    many = run_program([str(program), *args, "--repeat", str(repeat)])
    got = [np.fromfile(o, dtype=w.dtype).reshape(w.shape) for o, w in zip(outs, want)]
    ok = all(np.allclose(g, w, rtol=RTOL, atol=ATOL) for g, w in zip(got, want))
    return {"user": (many[0] - one[0]) / (repeat - 1), "sys": (many[1] - one[1]) / (repeat - 1),
            "futex": futex_calls([str(program), *args, "--repeat", "1"], work), "ok": ok}


def ort_times(onnx_path: Path, inputs: dict[str, np.ndarray], repeat: int) -> tuple[float, float]:
    """onnxruntime's user and system seconds per inference: one thread, graph
    optimisations off, after a warm-up run."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    s = ort.InferenceSession(str(onnx_path), so, providers=["CPUExecutionProvider"])
    s.run(None, inputs)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(repeat):
        s.run(None, inputs)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    return (r1.ru_utime - r0.ru_utime) / repeat, (r1.ru_stime - r0.ru_stime) / repeat


def cell(user: float, system: float, ort_total: float) -> str:
    total = user + system
    return (f"{total * 1e3:,.1f} ms ({user * 1e3:,.1f} user + {system * 1e3:,.1f} sys; "
            f"{total / ort_total:,.1f}x; sys {100 * system / total:.0f}%)")


def measure(zoo, name: str, work: Path, builds: list[str], repeat: int) -> dict[str, str]:
    _, inputs, onnx_path, swir_path = prepare(zoo, name, work / name)
    project = work / name / "project"
    compile_level(swir_path, "O3", work / name / f"{name}.dma.swir", project)
    want = onnxruntime_run(onnx_path, inputs)
    ort_user, ort_sys = ort_times(onnx_path, inputs, repeat)
    ort_total = ort_user + ort_sys
    row = {"onnxruntime, 1 thread, no opt.": f"{ort_total * 1e3:,.1f} ms "
                                             f"({ort_user * 1e3:,.1f} user + "
                                             f"{ort_sys * 1e3:,.1f} sys)"}
    for b in builds:
        program = build(project, BUILDS[b], project / f"{name}_{b}")  # beside weights.bin
        e = emulated(program, inputs, want, repeat, work / name)
        row[f"emulated, {b}"] = cell(e["user"], e["sys"], ort_total)
        if e["futex"] is not None:
            row[f"futex / syscalls, {b}"] = f"{e['futex'][0]:,} / {e['futex'][1]:,}"
        row[f"vs onnxruntime, {b}"] = "pass" if e["ok"] else "FAIL"
        print(name, b, row, file=sys.stderr, flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    zoo = load_zoo()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", default=["resnet18"],
                    help=f"of {', '.join(zoo.PAPER_SIZES)}")
    ap.add_argument("--repeat", type=int, default=5, help="N, inferences of the long run (> 1)")
    ap.add_argument("--builds", default="coroutines,threads",
                    help=f"comma-separated, of {', '.join(BUILDS)}")
    args = ap.parse_args(argv)
    builds = args.builds.split(",")
    if args.repeat < 2 or not set(builds) <= set(BUILDS):
        ap.error("--repeat must be at least 2 and --builds of " + ", ".join(BUILDS))
    rows = {}
    with tempfile.TemporaryDirectory(prefix="swir-emu-cpu-") as tmp:
        for name in args.models:
            rows[name] = measure(zoo, name, Path(tmp), builds, args.repeat)
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
