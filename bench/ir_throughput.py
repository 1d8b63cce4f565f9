#!/usr/bin/env python3
"""Textual IR throughput, swir against xDSL: parse + print of equal-sized modules.

For each size N it writes two modules of one function with N ops each, op for
op the same program over 4x8 f32 tensors: a zero constant, then a chain that
repeats add (of the last two values), mul (by the input), a 4x8 by 8x8
matmul and max (with zero, a ReLU), then the return.

  swir   graph stage:  %v2 = matmul %v1, %w : <4 x 8 x f32>
  xDSL   func + arith + linalg on tensors:
         %v2 = linalg.matmul ins(%v1, %w : ...) outs(%zero : ...) -> ...

Each text is first put in its tool's canonical form (parsed and printed once),
so a round trip that works gives back the same bytes. Then, on that text:

  parse + print   in process, best of --repeat runs (gc.collect() before
                  each): swir.parser.parse_module + swir.printer.print_module,
                  against xdsl.parser.Parser(ctx, text).parse_module() + an
                  xdsl.printer.Printer into a StringIO (ctx: a Context with
                  builtin, func, arith and linalg loaded). Neither verifies.
  CLI             best of --repeat runs, wall time of the whole command, Python
                  start-up and imports included: `swir-opt IN.swir -o OUT.swir`
                  against `xdsl-opt IN.mlir -o OUT.mlir` (no passes; both verify)
  ops/s           N / time
  xDSL / swir     the ratio of the two tools' times
  round trip      whether each round trip's output re-parses: "identical"
                  when it is the canonical input byte for byte

Each tool counts the ops in the function of its own parsed module (for
xDSL, not the mulf / addf / yield body each linalg.matmul carries); the
counts must equal N. File sizes differ: MLIR spells types and matmul
operands out more fully.

    python bench/ir_throughput.py                       # N = 1,000 10,000 50,000
    python bench/ir_throughput.py --sizes 2000,20000 --repeat 3
    python bench/ir_throughput.py --smoke               # N = 200, one run

It prints a Markdown table and a note of the versions (docs/performance.md
keeps the results). The tools are the ones beside this Python (the venv's).
"""

from __future__ import annotations

import argparse
import functools
import gc
import io
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

BIN = Path(sys.executable).parent
DEFAULT_SIZES = (1_000, 10_000, 50_000)
SMOKE_SIZE = 200


# --- the two modules ---------------------------------------------------------------

def chain(n: int) -> list[tuple[str, str, str]]:
    """The N - 2 ops between the constant and the return, as (result, op,
    operands): op is add, mul, matmul or max in turn."""
    ops, prev2, prev = [], "%x", "%x"
    for i in range(n - 2):
        op = ("add", "mul", "matmul", "max")[i % 4]
        rhs = {"add": f"{prev}, {prev2}", "mul": f"{prev}, %x", "matmul": f"{prev}, %w",
               "max": f"{prev}, %zero"}[op]
        ops.append((f"%v{i}", op, rhs))
        prev2, prev = prev, f"%v{i}"
    return ops


def swir_text(n: int) -> str:
    t = "<4 x 8 x f32>"
    lines = ['module "chain"', "stage graph", "",
             f"func @main(%x: {t}, %w: <8 x 8 x f32>) -> {t} {{", "'entry:",
             f"  %zero = const dense<0.0> : {t}"]
    ops = chain(n)
    lines += [f"  {r} = {op} {args} : {t}" for r, op, args in ops]
    lines += [f"  return {ops[-1][0]}", "}"]
    return "\n".join(lines) + "\n"


def mlir_text(n: int) -> str:
    t, w = "tensor<4x8xf32>", "tensor<8x8xf32>"
    lines = [f"func.func @main(%x: {t}, %w: {w}) -> {t} {{",
             f"  %zero = arith.constant dense<0.0> : {t}"]
    ops = chain(n)
    arith = {"add": "arith.addf", "mul": "arith.mulf", "max": "arith.maximumf"}
    for r, op, args in ops:
        if op == "matmul":
            # linalg.matmul accumulates into its outs operand: zeros make it C = A B
            lines.append(f"  {r} = linalg.matmul ins({args} : {t}, {w}) outs(%zero : {t}) -> {t}")
        else:
            lines.append(f"  {r} = {arith[op]} {args} : {t}")
    lines += [f"  func.return {ops[-1][0]} : {t}", "}"]
    return "\n".join(lines) + "\n"


# --- the two tools, in process ---------------------------------------------------------

def swir_parse(text: str):
    from swir.parser import parse_module
    return parse_module(text, "chain.swir")


def swir_print(module) -> str:
    from swir.printer import print_module
    return print_module(module)


def swir_ops(module) -> int:
    return sum(1 for _ in module.walk())


@functools.cache
def xdsl_context():
    from xdsl.context import Context
    from xdsl.dialects.arith import Arith
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func
    from xdsl.dialects.linalg import Linalg
    ctx = Context()
    for dialect in (Builtin, Func, Arith, Linalg):
        ctx.load_dialect(dialect)
    return ctx


def xdsl_parse(text: str):
    from xdsl.parser import Parser
    return Parser(xdsl_context(), text, "chain.mlir").parse_module()


def xdsl_print(module) -> str:
    # as xdsl-opt's mlir target writes it
    from xdsl.printer import Printer
    out = io.StringIO()
    Printer(stream=out).print_op(module)
    out.write("\n\n")
    return out.getvalue()


def xdsl_ops(module) -> int:
    # The functions' own ops: not the ops of the body linalg.matmul carries
    # (mulf, addf, yield), which swir's matmul has no counterpart of.
    from xdsl.dialects.func import FuncOp
    return sum(len(list(f.body.ops)) for f in module.walk() if isinstance(f, FuncOp))


@dataclass
class Tool:
    name: str
    suffix: str
    cli: str
    text: Callable[[int], str]
    parse: Callable[[str], object]
    print: Callable[[object], str]
    ops: Callable[[object], int]


TOOLS = [Tool("swir", ".swir", "swir-opt", swir_text, swir_parse, swir_print, swir_ops),
         Tool("xDSL", ".mlir", "xdsl-opt", mlir_text, xdsl_parse, xdsl_print, xdsl_ops)]


# --- measuring -------------------------------------------------------------------------

@dataclass
class Result:
    tool: str
    n: int
    ops: int = 0
    size: int = 0
    in_process: float | None = None
    cli: float | None = None
    round_trip: str = ""
    error: str = ""


def best_of(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    """The fastest of ``repeat`` calls, and the last call's result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        result = None           # the previous result is garbage before timing
        gc.collect()
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def reparses(tool: Tool, text: str, canonical: str) -> str:
    if text == canonical:
        return "identical"
    try:
        tool.parse(text)
    except Exception as e:   # noqa: BLE001  (the cell says what went wrong)
        return f"NO: {error_line(f'{type(e).__name__}: {e}')}"
    return "re-parses, differs"


def error_line(text: str) -> str:
    """One line of an error message: the line naming the error (the last one
    saying Error or error:, where a traceback ends), and when that line is
    only a location (xDSL's ParseError: FILE:LINE:COL, the source excerpt,
    then the message), the message's last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()] or ["(no message)"]
    named = [i for i, ln in enumerate(lines) if "Error" in ln or "error:" in ln]
    i = named[-1] if named else len(lines) - 1
    line = lines[i]
    if re.search(r":\d+:\d+$", line) and i < len(lines) - 1:
        line += ": " + lines[-1]
    return line if len(line) <= 200 else line[:197] + "..."


def cli_round_trip(tool: Tool, path: Path, repeat: int) -> tuple[float, str]:
    out = path.with_name(path.stem + ".out" + tool.suffix)
    cmd = [str(BIN / tool.cli), str(path), "-o", str(out)]
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
        best = min(best, time.perf_counter() - start)
        if r.returncode != 0:
            raise RuntimeError(f"{tool.cli} exited {r.returncode}: {error_line(r.stderr)}")
    return best, out.read_text()


def measure(tool: Tool, n: int, work: Path, repeat: int) -> Result:
    res = Result(tool.name, n)
    try:
        module = tool.parse(tool.text(n))
        canonical = tool.print(module)
        res.size = len(canonical.encode())
        res.ops = tool.ops(module)
        del module   # not alive during the timed runs
        if res.ops != n:
            raise RuntimeError(f"{res.ops} ops parsed, not {n}")
        path = work / f"chain{n}{tool.suffix}"
        path.write_text(canonical)
        res.in_process, printed = best_of(lambda: tool.print(tool.parse(canonical)), repeat)
        in_process_check = reparses(tool, printed, canonical)
        res.cli, written = cli_round_trip(tool, path, repeat)
        cli_check = reparses(tool, written, canonical)
        res.round_trip = (in_process_check if in_process_check == cli_check
                          else f"in process {in_process_check}; CLI {cli_check}")
    except Exception as e:   # noqa: BLE001  (one failing tool or size is a table cell)
        res.error = error_line(f"{type(e).__name__}: {e}")
    return res


# --- the table -------------------------------------------------------------------------

COLUMNS = ["N", "tool", "ops", "bytes", "parse + print", "ops/s", "CLI round trip", "CLI ops/s",
           "xDSL / swir", "xDSL / swir (CLI)", "round trip"]


def seconds(t: float | None) -> str:
    return "–" if t is None else f"{t:.3f} s"


def rate(n: int, t: float | None) -> str:
    return "–" if not t else f"{n / t:,.0f}"


def ratio(a: float | None, b: float | None) -> str:
    return "–" if not a or not b else f"{a / b:.1f}x"


def row(r: Result, swir: Result) -> list[str]:
    if r.error:
        return [f"{r.n:,}", r.tool, r.error] + ["–"] * (len(COLUMNS) - 3)
    theirs = r is not swir
    return [f"{r.n:,}", r.tool, f"{r.ops:,}", f"{r.size:,}", seconds(r.in_process),
            rate(r.n, r.in_process), seconds(r.cli), rate(r.n, r.cli),
            ratio(r.in_process, swir.in_process) if theirs else "–",
            ratio(r.cli, swir.cli) if theirs else "–", r.round_trip]


def table(results: list[tuple[Result, Result]]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|---:|---|" + "---:|" * 8 + "---|"]
    for swir, xdsl in results:
        for r in (swir, xdsl):
            lines.append("| " + " | ".join(row(r, swir)) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)),
                   help="ops per module, comma-separated (default: 1000,10000,50000)")
    p.add_argument("--repeat", type=int, default=2, help="runs per measurement, the best "
                                                         "kept (default 2)")
    p.add_argument("--smoke", action="store_true", help=f"N = {SMOKE_SIZE}, one run: a quick check")
    p.add_argument("--work", type=Path, help="working directory (default: a temporary one)")
    a = p.parse_args(argv)
    try:
        sizes = [SMOKE_SIZE] if a.smoke else [int(s) for s in a.sizes.split(",") if s.strip()]
    except ValueError:
        p.error(f"--sizes takes integers: {a.sizes!r}")
    if not sizes or min(sizes) < 3:
        p.error("--sizes needs at least one size, each at least 3 (constant, one op, return)")
    if a.repeat < 1:
        p.error("--repeat must be at least 1")
    repeat = 1 if a.smoke else a.repeat
    work = a.work or Path(tempfile.mkdtemp(prefix="swir-ir-throughput-"))
    work.mkdir(parents=True, exist_ok=True)
    results = []
    for n in sizes:
        pair = tuple(measure(tool, n, work, repeat) for tool in TOOLS)
        results.append(pair)
        print("\n".join(table([pair]).splitlines()[2:]), file=sys.stderr, flush=True)
    print(table(results))
    print()
    print(f"swir {version('swir')}, xDSL {version('xdsl')}; best of {repeat} run(s). "
          "parse + print: in process, no verification; CLI: the whole command, which "
          "verifies.")
    if a.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
