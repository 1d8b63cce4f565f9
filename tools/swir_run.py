"""swir-run: execute a function of a swir module in the reference interpreter.

    swir-run MODEL.swir --input X.npy [--input Y.npy ...] [--output OUT.npy ...]
             [--func NAME] [--print] [--stats FILE.json] [--no-verify]

Inputs bind to the function's parameters in order and must match their shapes
and dtypes exactly. Outputs are written as .npy files (all of them, and only
if the run succeeded); without --output, or with --print, results are printed.
--stats writes the run's counters as JSON (with the outputs, only on success):
instructions executed; from the buffered stage on, per function LDM
high-water marks and copies; at the dma stage DMA gets and puts, bytes each
way, transfer-size histograms and waits (docs/ir.md, "Executing IR").
--no-verify skips the verifier, to test the interpreter's own run-time checks
on modules the verifier would reject.

At the loop stage a func's results are the buffers named by ``attributes
{outputs = N}`` (its last N parameters, which take no --input), then its return
values; a kernel takes every parameter as an input and its results are the
buffer parameters it writes, in parameter order (docs/ir.md, "Executing IR").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from swir import __version__
from swir.api.running import entry_function
from swir.interp.run import run_function, signature
from swir.parser import parse_file
from swir.verifier import verify

from .driver import ArgumentParser, UsageError, run_tool, use_weights_from, write_files

PROG = "swir-run"


def _args(argv: list[str]) -> argparse.Namespace:
    p = ArgumentParser(prog=PROG, description="Run a function of a swir module on .npy inputs "
                "in the reference interpreter.")
    p.add_argument("module", help="the module (.swir); '-' reads stdin")
    p.add_argument("--input", "-i", action="append", default=[], metavar="X.npy",
                   help="an argument, in parameter order (repeat for each)")
    p.add_argument("--output", "-o", action="append", default=[], metavar="OUT.npy",
                   help="where to write a result, in result order (repeat for each)")
    p.add_argument("--func", "-f", metavar="NAME", help="the function to run (default: @main)")
    p.add_argument("--print", action="store_true", help="print the results")
    p.add_argument("--stats", metavar="FILE.json",
                   help="write the run's counters (per kernel at the buffered and dma "
                        "stages) as JSON")
    p.add_argument("--no-verify", action="store_true",
                   help="run without verifying the module first (the interpreter's own "
                        "run-time checks still apply)")
    p.add_argument("--weights-from", action="append", default=[], metavar="DIR",
                   help="also read weight files (file \"...\") from DIR and below; by default "
                        "only from the module's own folder and below")
    p.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    return p.parse_args(argv)


def load_input(path: str) -> np.ndarray:
    try:
        with open(path, "rb") as fh:
            return np.load(fh, allow_pickle=False)
    except OSError as e:
        raise UsageError(f"cannot read input '{path}': {e.strerror or e}") from None
    except Exception as e:  # noqa: BLE001  numpy's header parser raises many kinds
        # (ValueError, EOFError, SyntaxError, tokenize.TokenError, ...): a file it
        # cannot parse is not a .npy file, whatever the reason.
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UsageError(f"input '{path}' is not a .npy file ({reason})") from None


def stats_json(stats: dict) -> str:
    """Counters as JSON: one key per line, lists on one line."""
    def fmt(v: object, indent: str) -> str:
        if isinstance(v, dict) and v:
            inner = indent + " "
            items = [f"{inner}{json.dumps(str(k))}: {fmt(x, inner)}" for k, x in v.items()]
            return "{\n" + ",\n".join(items) + "\n" + indent + "}"
        return json.dumps(v)
    return fmt(stats, "") + "\n"


def main(argv: list[str]) -> int:
    a = _args(argv)
    use_weights_from(a.weights_from)
    module = parse_file(a.module)
    if not a.no_verify:
        verify(module)
    f = entry_function(module, a.func, a.module)
    _, result_types = signature(module, f)
    if a.output and len(a.output) != len(result_types):
        raise UsageError(f"@{f.name} has {len(result_types)} result(s), "
                         f"{len(a.output)} --output given")
    args = [load_input(p) for p in a.input]
    base = Path(a.module).parent if a.module != "-" else Path(".")
    stats: dict | None = {} if a.stats is not None else None
    results = run_function(module, f, args, base, [f"'{p}'" for p in a.input], stats)
    extra = [] if a.stats is None else [(a.stats, stats_json(stats).encode())]
    if a.output or extra:
        write_files([*zip(a.output, results), *extra])
    if a.print or not a.output:
        for i, r in enumerate(results):
            print(f"result #{i}: {result_types[i]}")
            print(np.array2string(r, threshold=1000))
    return 0


def entry() -> None:
    sys.exit(run_tool(PROG, main))


if __name__ == "__main__":
    entry()
