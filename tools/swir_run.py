"""swir-run: execute a function of a swir module in the reference interpreter.

    swir-run MODEL.swir --input X.npy [--input Y.npy ...] [--output OUT.npy ...]
             [--func NAME] [--print]

Inputs bind to the function's parameters in order and must match their shapes
and dtypes exactly. Outputs are written as .npy files (all of them, and only
if the run succeeded); without --output, or with --print, results are printed.

At the loop stage a func's results are the buffers named by ``attributes
{outputs = N}`` (its last N parameters, which take no --input), then its return
values; a kernel takes every parameter as an input and its results are the
buffer parameters it writes, in parameter order (docs/ir.md, "Executing IR").
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from swir import __version__
from swir.interp.run import default_function, run_function, signature
from swir.ir.core import Function
from swir.parser import parse_file
from swir.verifier import verify

from .driver import UsageError, run_tool

PROG = "swir-run"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse would exit with status 2
        raise UsageError(message)


def _args(argv: list[str]) -> argparse.Namespace:
    p = _Parser(prog=PROG, description="Run a function of a swir module on .npy inputs "
                "in the reference interpreter.")
    p.add_argument("module", help="the module (.swir); '-' reads stdin")
    p.add_argument("--input", "-i", action="append", default=[], metavar="X.npy",
                   help="an argument, in parameter order (repeat for each)")
    p.add_argument("--output", "-o", action="append", default=[], metavar="OUT.npy",
                   help="where to write a result, in result order (repeat for each)")
    p.add_argument("--func", "-f", metavar="NAME", help="the function to run (default: @main)")
    p.add_argument("--print", action="store_true", help="print the results")
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


def write_outputs(paths: list[str], arrays: list[np.ndarray]) -> None:
    """Write every output to a temporary file first, then move them all into place."""
    temps: list[tuple[str, str]] = []
    try:
        for path, arr in zip(paths, arrays):
            target = Path(path)
            fd, tmp = tempfile.mkstemp(dir=target.parent if str(target.parent) else ".",
                                       prefix=f".{target.name}.", suffix=".tmp")
            temps.append((tmp, path))
            with os.fdopen(fd, "wb") as fh:
                np.save(fh, arr, allow_pickle=False)
        for tmp, path in temps:
            os.replace(tmp, path)
    except OSError as e:
        for tmp, _ in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)
        raise UsageError(f"cannot write output: {e.strerror or e} ({e.filename})") from None


def main(argv: list[str]) -> int:
    a = _args(argv)
    module = parse_file(a.module)
    verify(module)
    if a.func is not None:
        f = module.lookup(a.func.lstrip("@"))
        if not isinstance(f, Function):
            raise UsageError(f"no function @{a.func.lstrip('@')} in {a.module}")
    else:
        f = default_function(module)
    _, result_types = signature(module, f)
    if a.output and len(a.output) != len(result_types):
        raise UsageError(f"@{f.name} has {len(result_types)} result(s), "
                         f"{len(a.output)} --output given")
    args = [load_input(p) for p in a.input]
    base = Path(a.module).parent if a.module != "-" else Path(".")
    results = run_function(module, f, args, base, [f"'{p}'" for p in a.input])
    if a.output:
        write_outputs(a.output, results)
    if a.print or not a.output:
        for i, r in enumerate(results):
            print(f"result #{i}: {result_types[i]}")
            print(np.array2string(r, threshold=1000))
    return 0


def entry() -> None:
    sys.exit(run_tool(PROG, main))


if __name__ == "__main__":
    entry()
