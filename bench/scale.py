#!/usr/bin/env python3
"""Scale: a generated graph of N ops (default 20,000) through ``swir-opt`` and
``swir-cg``, each in a fresh process, with its wall time and peak RSS.

The graph (``@main`` of a graph-stage module, 1 x 4 x 8 x 8 activations, f32)
is a deep chain of small residual blocks; block k is

    c  = conv2d h, @w3_k {pad = [1, 1, 1, 1]}    3x3, 4 -> 4 channels
    a  = add c, @b_k                             (every 4th block: batch_norm c,
                                                  @g_k, @beta_k, @mu_k, @var_k)
    r  = relu a
    d  = conv2d r, @w1_k                         1x1
   (q  = sigmoid d                               in every 4th block, another one)
    m  = mul d, @s_k                             per-channel scale
    s  = add m, h                                the residual
    t  = relu s
    h' = mul t, @half                            keeps the values bounded

8 or 9 ops, with the op count topped up by relu ops to exactly N. Every
weight is a global of its own, read from the sidecar file ``scale.weights``
(seeded random), so the weights differ from block to block while the kernels'
shapes repeat: -fold-batchnorm folds each batch_norm (one trial lowering per
fold), -layout and -fuse measure each conv and group, -fuse makes two or
three groups per block, -lower-loops shares the identical kernels, and the
host function spawns one kernel per group (about 5,000 at 20,000 ops).

For each tool the figures are those of one run in a fresh process:

  swir-opt   swir-opt -O3 and swir-cg's lowering of a graph module, i.e.
             ``swir-opt -O3 -lower-loops -ldm-plan{strategy=search} -insert-dma
             IN -o OUT`` (the whole pipeline swir-cg runs, as swir-opt flags,
             verifying after every pass), printing the dma-stage module
  swir-cg    ``swir-cg IN -o DIR``: the same pipeline, then the C project

its wall time, and its peak resident set size (its ``ru_maxrss``, from
``os.wait4`` in a small process that starts it: a child's ru_maxrss starts at
the size of the process it was forked from).

``--check`` (for small N) also checks the results: the graph module and the
dma-stage module of swir-opt give the same output in ``swir-run``'s
interpreters, and the C project built with ``make emu`` agrees with the graph
interpreter (rtol 1e-4, atol 1e-5 as the examples' check).

    python bench/scale.py                          # 20,000 ops, in a temporary dir
    python bench/scale.py --ops 500 --check --out /tmp/scale
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BIN = Path(sys.executable).parent
SHAPE = (1, 4, 8, 8)
C = SHAPE[1]
WEIGHTS = "scale.weights"
TIMEOUT = 3600


def _t(shape: tuple[int, ...]) -> str:
    return "<" + " x ".join(map(str, shape)) + " x f32>"


ACT = _t(SHAPE)


class _Globals:
    """Globals and their bytes in the sidecar file, in order."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.data: list[bytes] = []
        self.offset = 0

    def add(self, name: str, values: np.ndarray) -> str:
        raw = np.ascontiguousarray(values, dtype="<f4").tobytes()
        self.lines.append(f"global @{name} : {_t(values.shape)} = file \"{WEIGHTS}\" "
                          f"offset {self.offset}")
        self.data.append(raw)
        self.offset += len(raw)
        return "@" + name


def generate(ops: int, seed: int = 0) -> tuple[str, bytes, int]:
    """The module text, the sidecar's bytes, and the number of ops of @main
    (without its ``return``), which is exactly ``ops``."""
    if ops < 1:
        raise ValueError("--ops must be at least 1")
    rng = np.random.default_rng(seed)
    g = _Globals()
    half = g.add("half", np.full((1,), 0.5, dtype=np.float32))
    body: list[str] = []
    h = "%x"
    k = 0

    def emit(name: str, text: str) -> str:
        body.append(f"  %{name} = {text} : {ACT}")
        return "%" + name

    while True:
        bn = k % 4 == 3
        size = 9 if k % 4 == 1 else 8
        if len(body) + size > ops:
            break
        w3 = g.add(f"w3_{k}", rng.normal(0, 1 / np.sqrt(C * 9), (C, C, 3, 3)))
        c = emit(f"c{k}", f"conv2d {h}, {w3} {{pad = [1, 1, 1, 1]}}")
        if bn:
            gamma = g.add(f"g{k}", rng.uniform(0.5, 1.5, (C,)))
            beta = g.add(f"beta{k}", rng.normal(0, 0.1, (C,)))
            mean = g.add(f"mu{k}", rng.normal(0, 0.1, (C,)))
            var = g.add(f"var{k}", rng.uniform(0.5, 1.5, (C,)))
            a = emit(f"n{k}", f"batch_norm {c}, {gamma}, {beta}, {mean}, {var}")
        else:
            bias = g.add(f"b{k}", rng.normal(0, 0.1, (1, C, 1, 1)))
            a = emit(f"a{k}", f"add {c}, {bias}")
        r = emit(f"r{k}", f"relu {a}")
        w1 = g.add(f"w1_{k}", rng.normal(0, 1 / np.sqrt(C), (C, C, 1, 1)))
        d = emit(f"d{k}", f"conv2d {r}, {w1}")
        if k % 4 == 1:
            d = emit(f"q{k}", f"sigmoid {d}")
        scale = g.add(f"s{k}", rng.uniform(0.5, 1.0, (1, C, 1, 1)))
        m = emit(f"m{k}", f"mul {d}, {scale}")
        s = emit(f"s{k}", f"add {m}, {h}")
        t = emit(f"t{k}", f"relu {s}")
        h = emit(f"h{k}", f"mul {t}, {half}")
        k += 1
    while len(body) < ops:
        h = emit(f"z{len(body)}", f"relu {h}")
    head = [f'// {ops} ops: a chain of {k} residual blocks of small convolutions and',
            "// element-wise ops (bench/scale.py; do not edit).",
            'module "scale"', "stage graph", ""]
    text = "\n".join(head + g.lines + ["", f"func @main(%x: {ACT}) -> {ACT} {{", "'entry:"]
                     + body + [f"  return {h}", "}", ""])
    return text, b"".join(g.data), len(body)


def write(directory: Path, ops: int, seed: int = 0) -> Path:
    """Write ``scale.swir`` and its sidecar into ``directory``; the module's path."""
    directory.mkdir(parents=True, exist_ok=True)
    text, data, n = generate(ops, seed)
    assert n == ops
    (directory / WEIGHTS).write_bytes(data)
    path = directory / "scale.swir"
    path.write_text(text)
    return path


@dataclass
class Measure:
    tool: str
    command: list[str]
    wall: float          # seconds
    peak_rss: int        # bytes
    status: int
    stderr: str


# Runs one command and writes its wall time, peak RSS and exit status as JSON
# to argv[1]. The measuring is done in this small process, not in the caller:
# on Linux a child's ru_maxrss starts at the RSS of the process it was forked
# from (it survives the exec), so a tool started straight from a big process
# (pytest, after other tests) would report that process's size.
_MEASURE = """
import json, os, subprocess, sys, threading, time
out, timeout, cmd = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
start = time.perf_counter()
p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
killer = threading.Timer(timeout, p.kill)
killer.start()
_, status, usage = os.wait4(p.pid, 0)
wall = time.perf_counter() - start
killer.cancel()
with open(out, "w") as f:
    json.dump({"wall": wall, "rss": usage.ru_maxrss * 1024,
               "status": os.waitstatus_to_exitcode(status)}, f)
"""


def measure(tool: str, cmd: list[str], timeout: float = TIMEOUT) -> Measure:
    """Run ``cmd`` in a fresh process: its wall time and peak RSS."""
    return measure_together([(tool, cmd)], timeout)[0]


def measure_together(commands: list[tuple[str, list[str]]],
                     timeout: float = TIMEOUT) -> list[Measure]:
    """Run the commands at once, each in a fresh process: its wall time and
    peak resident set size (its ``ru_maxrss`` from ``os.wait4``, which Linux
    gives in KiB). A command still running after ``timeout`` seconds is
    killed (status -9)."""
    with tempfile.TemporaryDirectory(prefix="swir-scale-") as tmp:
        runs = []
        for k, (_, cmd) in enumerate(commands):
            err = open(Path(tmp) / f"{k}.err", "w+b")
            result = Path(tmp) / f"{k}.json"
            proc = subprocess.Popen([sys.executable, "-I", "-c", _MEASURE, str(result),
                                     str(timeout), *cmd], stdout=subprocess.DEVNULL, stderr=err)
            runs.append((proc, err, result))
        out = []
        for (tool, cmd), (proc, err, result) in zip(commands, runs):
            proc.wait()
            err.seek(0)
            text = err.read().decode(errors="replace")
            err.close()
            if proc.returncode != 0 or not result.exists():
                raise RuntimeError(f"measuring {tool} failed:\n{text[-2000:]}")
            r = json.loads(result.read_text())
            out.append(Measure(tool, cmd, r["wall"], r["rss"], r["status"], text))
    return out


def tool(name: str) -> str:
    return str(BIN / name)


def opt_command(src: Path, out: Path) -> list[str]:
    from swir.passes.pipelines import pipeline_flags
    return [tool("swir-opt"), *pipeline_flags("graph"), str(src), "-o", str(out)]


def cg_command(src: Path, project: Path) -> list[str]:
    return [tool("swir-cg"), str(src), "-o", str(project), "--force"]


def run_all(ops: int, out: Path, together: bool = False) -> list[Measure]:
    """Generate the module into ``out``, then run swir-opt (writing
    ``scale.dma.swir``) and swir-cg (writing ``project/``), one after the
    other, or at once when ``together``."""
    src = write(out, ops)
    commands = [("swir-opt", opt_command(src, out / "scale.dma.swir")),
                ("swir-cg", cg_command(src, out / "project"))]
    if together:
        return measure_together(commands)
    return [measure(tool, cmd) for tool, cmd in commands]


def check(out: Path) -> str:
    """The graph interpreter, the dma-stage interpreter on swir-opt's output
    and the C project built with ``make emu`` agree on a seeded input; a line
    saying by how much (AssertionError if not). The dma-stage interpreter
    stops at ten million instructions, about 1,000 ops of this graph: beyond
    that only the C is compared."""
    from swir.codegen import emulate
    from swir.diagnostics import Diagnostic
    from swir.interp.run import interpreter_for, signature
    from swir.parser import parse_module

    src = out / "scale.swir"
    graph = parse_module(src.read_text(), str(src))
    x = np.random.default_rng(1).normal(0, 1, SHAPE).astype(np.float32)
    want = interpreter_for(graph, out).run("main", [x])[0]
    dma_path = out / "scale.dma.swir"
    dma = parse_module(dma_path.read_text(), str(dma_path))
    try:
        got_dma = interpreter_for(dma, out).run("main", [x])[0]
    except Diagnostic as e:
        if "did not finish" not in e.message:
            raise
        dma_line = "(dma-stage interpreter skipped: past its instruction limit)"
    else:
        np.testing.assert_allclose(got_dma, want, rtol=1e-4, atol=1e-5)
        diff = float(np.max(np.abs(got_dma - want)))
        dma_line = f"vs dma-stage interpreter max |diff| {diff:.2e}"
    program = emulate.build(out / "project", graph.name)
    params, results = signature(graph, graph.lookup("main"))
    got_c = emulate.run(program, [x], [p.type for p in params], results).outputs[0]
    np.testing.assert_allclose(got_c, want, rtol=1e-4, atol=1e-5)
    return (f"check: graph interpreter {dma_line}, vs make emu max |diff| "
            f"{float(np.max(np.abs(got_c - want))):.2e} (max |output| "
            f"{float(np.max(np.abs(want))):.3g})")


def table(ops: int, rows: list[Measure]) -> str:
    lines = [f"| tool ({ops} ops) | wall (s) | peak RSS (MiB) | exit |",
             "|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r.tool} | {r.wall:.1f} | {r.peak_rss / 2**20:.0f} | {r.status} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", type=int, default=20_000, help="ops in @main (default 20000)")
    p.add_argument("--out", type=Path, help="directory for the module, outputs and project "
                                            "(default: a temporary one, removed)")
    p.add_argument("--check", action="store_true",
                   help="also check the results (the interpreters and make emu)")
    a = p.parse_args(argv)
    out = a.out or Path(tempfile.mkdtemp(prefix="swir-scale-"))
    try:
        rows = run_all(a.ops, out)
        for r in rows:
            print(f"$ {' '.join(r.command)}", file=sys.stderr)
        print(table(a.ops, rows))
        failed = [r for r in rows if r.status != 0]
        for r in failed:
            print(f"{r.tool} failed (exit {r.status}):\n{r.stderr[-3000:]}", file=sys.stderr)
        if failed:
            return 1
        if a.check:
            print(check(out))
        return 0
    finally:
        if a.out is None:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
