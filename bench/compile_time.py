#!/usr/bin/env python3
"""Compile time, swir against Apache TVM, from the same ONNX file.

ResNet-18, ResNet-50 and BERT-base of bench/models/zoo.py at the paper's size
(batch 1; 1x3x224x224, or 128 tokens; seeded random weights, external data),
each compiled by:

  TVM    tvm.relax.frontend.onnx.from_onnx(onnx.load(MODEL.onnx)) (weights
         become constants), then tvm.compile(mod, target) with its defaults:
         the "default" Relax pipeline (legalize, no fusion, VM memory planning)
         and the "default" TIR pipeline, under the default PassContext
         (opt_level as the table note says), no tuning; for target "llvm"
         (native code) then export_library to a shared object (the file a
         user deploys; linked by the host compiler), and with --tvm-c target
         "c" (C source in memory)
  swir   swir-import MODEL.onnx -o m.swir, then swir-cg -O m.swir -o DIR: ONNX
         to the athread C project, at -O0 (lowering, LDM planning, DMA
         insertion, C), at swir-cg's default -O3 (graph passes with trial
         lowerings, fusion, then LDM planning by cost-model search, on every
         core: -j's default) with no compile cache, and at -O3 with a warm
         cache (--cache-dir, filled by one compile before those measured)

Every measurement runs in a fresh Python process, and is shown three ways:

  import, build, total      in process: the calls alone, timed inside that
                            process after `import onnx` and the compiler's
                            entry modules (swir.tools.swir_import and
                            swir_cg, run through their main(); tvm and its
                            ONNX frontend); imports done lazily inside the
                            calls count. swir's import and build write files.
  wall                      the whole command, Python start-up and imports
                            included: for swir the two CLI commands (import,
                            cg and their total); for TVM one process running
                            import + from_onnx + tvm.compile (+ export), so
                            only a total
  CPU                       user + system time of those commands and every
                            process they start (swir-cg's planning workers,
                            TVM's linker)
  swir / TVM                each swir row's wall and CPU time over TVM's llvm
                            build of the same model
  vs onnxruntime            a TVM build, in one more process, run on one
                            seeded input against onnxruntime without graph
                            optimisations: the largest absolute difference and
                            that relative to the largest output (for "c" the
                            C is compiled with the host compiler first, not
                            timed). swir's C is checked by bench/zoo.py --run.

Each row's figures are those of its fastest run (by wall time) of --repeat.
If a TVM target cannot build a model, its row shows TVM's error, one line,
instead of times; if the build does not run, the check's cell does.

    python bench/compile_time.py                    # resnet18 resnet50 bert
    python bench/compile_time.py resnet50 --repeat 1 --work /tmp/ct
    python bench/compile_time.py --smoke            # resnet18 at 32x32, width/4, llvm

It prints a Markdown table and a note of the versions (progress to stderr).
The tools are the ones beside this Python (the venv's).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

import numpy as np
from common import load_zoo

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
MODELS = ("resnet18", "resnet50", "bert")
TARGETS = ("llvm", "c")
DEFAULT_TARGETS = ("llvm",)
# swir without graph optimisation, at swir-cg's default (the TVM / swir
# ratios are against it), and at the default with a warm compile cache (a
# --cache-dir filled by one compile before the measured ones).
SWIR_LEVELS = ("O0", "O3", "O3 warm")
# The smoke model: ResNet-18's every layer at 32x32 with a quarter of the
# channels (test/unit/test_zoo_e2e.py's reduced size).
SMOKE = ("resnet18", {"batch": 1, "resolution": 32, "width": 4})
TIMEOUT = 1800

# swir-import and swir-cg through their main(), as the CLI runs them.
SWIR_IN_PROCESS = """
import json, sys, time
import onnx  # noqa: F401  (swir-import reads the model with it)
from swir.tools import swir_cg, swir_import
from swir.tools.driver import run_tool
model, module, project, *cg = sys.argv[1:]
t0 = time.perf_counter()
status = run_tool("swir-import", swir_import.main, [model, "-o", module])
t1 = time.perf_counter()
status = status or run_tool("swir-cg", swir_cg.main, [*cg, module, "-o", project])
t2 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "build": t2 - t1}))
sys.exit(status)
"""

TVM_BUILD = """
import json, sys, time
import onnx
import tvm
from tvm.relax.frontend.onnx import from_onnx
model, target, lib = sys.argv[1:]
t0 = time.perf_counter()
mod = from_onnx(onnx.load(model))
t1 = time.perf_counter()
ex = tvm.compile(mod, target=target)
if target == "llvm":      # the shared library a user deploys (links with the host compiler)
    ex.export_library(lib)
t2 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "build": t2 - t1,
                  "opt_level": tvm.transform.PassContext.current().opt_level}))
"""

# The same build, run: the largest difference from the reference outputs.
TVM_CHECK = """
import json, sys
import numpy as np
import onnx
import tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx
model, target, data = sys.argv[1:]
d = np.load(data)
vm = relax.VirtualMachine(tvm.compile(from_onnx(onnx.load(model)), target=target), tvm.cpu())
inputs = [tvm.runtime.tensor(d[k]) for k in sorted(d.files) if k.startswith("in")]
out = vm["main"](*inputs)
got = [out] if isinstance(out, tvm.runtime.Tensor) else list(out)
want = [d[k] for k in sorted(d.files) if k.startswith("out")]
diff = max(float(np.max(np.abs(g.numpy().astype(np.float64) - w))) for g, w in zip(got, want))
scale = max(float(np.max(np.abs(w))) for w in want)
print(json.dumps({"diff": diff, "rel": diff / scale}))
"""


CPU_SECONDS = 0.0


class Failed(Exception):
    """A measured command failed; the message is one line for the table."""


def error_line(stderr: str) -> str:
    """The line of a failed run's stderr that names the error: the last one
    mentioning an Error (Python's and TVM's tracebacks end with it), else the
    last line."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    named = [ln for ln in lines if "Error" in ln or "error:" in ln]
    line = (named or lines or ["(no message)"])[-1]
    return line if len(line) <= 200 else line[:197] + "..."


def run(cmd: list[str]) -> tuple[float, str]:
    """Wall time and stdout of one command; Failed if it fails. Its CPU time
    (user + system, its children included) is added to CPU_SECONDS."""
    global CPU_SECONDS
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise Failed(f"timed out after {TIMEOUT} s") from None
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_SECONDS += after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    if r.returncode != 0:
        raise Failed(error_line(r.stderr))
    return wall, r.stdout


def python(script: str, *args: str) -> tuple[float, dict]:
    """Wall time of a fresh Python running ``script``, and the JSON it prints
    last. Isolated (-I): the current directory is not on its sys.path, so a
    source tree there cannot shadow the installed swir."""
    wall, out = run([sys.executable, "-I", "-c", script, *args])
    return wall, json.loads(out.strip().splitlines()[-1])


@dataclass
class Row:
    model: str
    compiler: str
    target: str
    figures: dict[str, float] = field(default_factory=dict)
    check: str = "–"
    error: str = ""

    @property
    def total(self) -> float | None:
        f = self.figures
        return f["import"] + f["build"] if "build" in f else None


def fastest(measure, repeat: int) -> dict[str, float]:
    """The figures of the fastest of ``repeat`` runs (by their wall total)."""
    return min((measure() for _ in range(repeat)), key=lambda f: f["wall"])


def measure_swir(onnx_path: Path, d: Path, repeat: int, level: str) -> Row:
    row = Row(onnx_path.stem, "swir", f"C (athread), -{level}")
    module, project, cache = d / "m.swir", d / "project", d / "cache"
    flags = [f"-{level.split()[0]}"]
    if level.endswith("warm"):
        flags += ["--cache-dir", str(cache)]
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(project, ignore_errors=True)
        run([str(BIN / "swir-import"), str(onnx_path), "-o", str(module)])
        run([str(BIN / "swir-cg"), *flags, str(module), "-o", str(project)])   # fills it
        shutil.rmtree(project)

    def once() -> dict[str, float]:
        global CPU_SECONDS
        shutil.rmtree(project, ignore_errors=True)
        CPU_SECONDS = 0.0
        imp, _ = run([str(BIN / "swir-import"), str(onnx_path), "-o", str(module)])
        cg, _ = run([str(BIN / "swir-cg"), *flags, str(module), "-o", str(project)])
        cpu = CPU_SECONDS
        shutil.rmtree(project)
        _, inner = python(SWIR_IN_PROCESS, str(onnx_path), str(module), str(project), *flags)
        return {**inner, "wall import": imp, "wall build": cg, "wall": imp + cg, "cpu": cpu}

    try:
        row.figures = fastest(once, repeat)
    except Failed as e:
        row.error = str(e)
    return row


def measure_tvm(onnx_path: Path, data: Path, target: str, repeat: int) -> Row:
    row = Row(onnx_path.stem, "TVM", target)

    def once() -> dict[str, float]:
        global CPU_SECONDS
        CPU_SECONDS = 0.0
        wall, inner = python(TVM_BUILD, str(onnx_path), target, str(onnx_path.parent / "m.so"))
        return {**inner, "wall": wall, "cpu": CPU_SECONDS}

    try:
        row.figures = fastest(once, repeat)
    except Failed as e:
        row.error = str(e)
        return row
    try:
        _, check = python(TVM_CHECK, str(onnx_path), target, str(data))
        row.check = f"{check['diff']:.1e}, {check['rel']:.1e} rel."
    except Failed as e:   # built, but does not run here
        row.check = f"error: {e}"
    return row


def reference(zoo, model, onnx_path: Path, data: Path) -> None:
    """One seeded input and onnxruntime's outputs for it (graph optimisations
    off), saved for the check."""
    import onnxruntime as ort
    feeds = zoo.random_inputs(model, seed=1)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    outs = ort.InferenceSession(str(onnx_path), so, providers=["CPUExecutionProvider"]) \
        .run(None, feeds)
    np.savez(data, **{f"in{i:03d}": v for i, v in enumerate(feeds.values())},
             **{f"out{i:03d}": v for i, v in enumerate(outs)})


def measure_model(zoo, name: str, sizes: dict, targets: tuple[str, ...], work: Path,
                  repeat: int) -> list[Row]:
    d = work / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    model = zoo.build(name, **sizes)
    onnx_path, data = d / f"{name}.onnx", d / "check.npz"
    zoo.save(model, onnx_path, external_data=True)
    reference(zoo, model, onnx_path, data)
    rows = []
    for target in targets:          # first: the swir rows' ratios are against it
        rows.append(measure_tvm(onnx_path, data, target, repeat))
        print(table(rows).splitlines()[-1], file=sys.stderr, flush=True)
    for level in SWIR_LEVELS:
        rows.append(measure_swir(onnx_path, d, repeat, level))
        print(table(rows).splitlines()[-1], file=sys.stderr, flush=True)
    return rows


COLUMNS = ["model", "compiler", "target", "import", "build", "total", "import, wall",
           "build, wall", "total, wall", "total, CPU", "swir / TVM, wall", "swir / TVM, CPU",
           "vs onnxruntime"]


def seconds(f: dict[str, float], key: str) -> str:
    return f"{f[key]:.2f} s" if key in f else "–"


def cells(r: Row, tvm: Row | None) -> list[str]:
    head = [r.model, r.compiler, r.target]
    if r.error:
        return head + [f"error: {r.error}"] + ["–"] * (len(COLUMNS) - 4)
    f = r.figures
    ratios = ["–", "–"]
    if r.compiler == "swir" and tvm is not None and not tvm.error:
        ratios = [f"{f['wall'] / tvm.figures['wall']:.2f}x",
                  f"{f['cpu'] / tvm.figures['cpu']:.2f}x"]
    return head + [seconds(f, "import"), seconds(f, "build"), f"{r.total:.2f} s",
                   seconds(f, "wall import"), seconds(f, "wall build"), seconds(f, "wall"),
                   seconds(f, "cpu"), *ratios, r.check]


def table(rows: list[Row]) -> str:
    """The rows; each swir row's ratios are against TVM's llvm build of its
    model (whole commands: wall time, and CPU time of all their processes)."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|---|---|---|" + "---:|" * 9 + "---|"]
    tvm = {r.model: r for r in rows if r.compiler == "TVM" and r.target == "llvm"}
    for r in rows:
        lines.append("| " + " | ".join(cells(r, tvm.get(r.model))) + " |")
    return "\n".join(lines)


def note(rows: list[Row], repeat: int) -> str:
    from swir.passes.pipelines import DEFAULT_LEVEL
    levels = sorted({str(r.figures["opt_level"]) for r in rows if "opt_level" in r.figures})
    return (f"swir {version('swir')} (swir-cg -{DEFAULT_LEVEL}); Apache TVM "
            f"{version('apache-tvm')}, tvm.compile defaults, PassContext opt_level "
            f"{'/'.join(levels) or '?'}; onnx {version('onnx')}, onnxruntime "
            f"{version('onnxruntime')}; fastest of {repeat} run(s) by wall time. import / build / "
            "total: in process, imports of the compiler excluded; wall, CPU: whole commands "
            f"(CPU: user + system of all their processes); {os.cpu_count()} cores.")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="*", help=f"zoo models at paper size (default: "
                                             f"{' '.join(MODELS)})")
    p.add_argument("--smoke", action="store_true",
                   help=f"{SMOKE[0]} at a reduced size, target llvm only, one run")
    p.add_argument("--repeat", type=int, default=3,
                   help="runs per measurement, the fastest kept (default 3)")
    p.add_argument("--tvm-c", action="store_true",
                   help="also TVM's target c (C source in memory)")
    p.add_argument("--work", type=Path, help="working directory (default: a temporary one)")
    a = p.parse_args(argv)
    zoo = load_zoo()
    for n in a.models:
        if n not in zoo.MODELS:
            p.error(f"no model '{n}' (the zoo has {', '.join(zoo.MODELS)})")
    if a.smoke and a.models:
        p.error("--smoke measures its own model; give no models with it")
    if a.repeat < 1:
        p.error("--repeat must be at least 1")
    if a.smoke:
        plan, targets, repeat = [SMOKE], ("llvm",), 1
    else:
        plan = [(n, zoo.PAPER_SIZES[n]) for n in a.models or MODELS]
        targets, repeat = (TARGETS if a.tvm_c else DEFAULT_TARGETS), a.repeat
    work = a.work or Path(tempfile.mkdtemp(prefix="swir-compile-time-"))
    rows = []
    for name, sizes in plan:
        print(f"{name} {sizes} ...", file=sys.stderr, flush=True)
        rows += measure_model(zoo, name, sizes, targets, work, repeat)
    print(table(rows))
    print()
    print(note(rows, repeat))
    if a.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
