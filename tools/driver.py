"""What every swir tool shares: diagnostics to stderr with exit status 1, no
tracebacks, and output files written only when the whole job succeeded."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from swir.diagnostics import SOURCES, Diagnostic, Location, one_line
from swir.limits import deep_recursion
from swir.passes.manager import PassBug, PassFailure
from swir.verifier import VerificationError


class UsageError(Exception):
    """A bad command line: one-line error, exit status 1."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse, with usage errors as UsageError (argparse would exit with status 2)."""

    def error(self, message: str) -> None:
        raise UsageError(message)


def run_tool(prog: str, main: Callable[[list[str]], int], argv: list[str] | None = None) -> int:
    """Run ``main`` and turn every failure into a diagnostic and an exit status."""
    args = sys.argv[1:] if argv is None else argv
    try:
        with deep_recursion():  # passes recurse per nested region, too
            return main(args)
    except Diagnostic as d:
        print(render(prog, d), file=sys.stderr)
    except (VerificationError, PassFailure) as e:
        for d in e.diagnostics:
            print(render(prog, d), file=sys.stderr)
    except UsageError as e:
        print(f"{prog}: error: {one_line(str(e))}", file=sys.stderr)
    except PassBug as bug:
        if os.environ.get("SWIR_DEBUG"):
            raise
        report_pass_bug(prog, bug)
        return 2
    except RecursionError:
        print(f"{prog}: error: input is nested too deeply", file=sys.stderr)
    except MemoryError:
        # Not a bug: the input (or what it asks for) is larger than this machine.
        print(f"{prog}: error: out of memory", file=sys.stderr)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as e:  # a bug in swir, not in the input: still no traceback
        if os.environ.get("SWIR_DEBUG"):
            raise
        print(f"{prog}: internal error: {type(e).__name__}: {one_line(str(e))} "
              "(a bug in swir; set SWIR_DEBUG=1 for a traceback)", file=sys.stderr)
        return 2
    return 1


def render(prog: str, d: Diagnostic) -> str:
    """A diagnostic's text; one that names neither a place nor a file is
    prefixed with the tool's name, as every other error is."""
    text = d.render()
    return text if d.loc is not None or d.file else f"{prog}: {text}"


def report_pass_bug(prog: str, bug: PassBug) -> None:
    """An internal error naming the pass, its diagnostics, and where the IR it
    was given is saved for the bug report."""
    print(f"{prog}: internal error: {bug} (a bug in swir, not in the input)", file=sys.stderr)
    for d in bug.diagnostics:
        print(render(prog, d), file=sys.stderr)
    if bug.reproducer is not None:
        print(f"{prog}: note: the IR given to {bug.spelling} is saved in {bug.reproducer}; "
              f"attach it to the bug report", file=sys.stderr)
    else:
        print(f"{prog}: note: the IR given to {bug.spelling} could not be saved "
              "(run with --verify-each on, and a writable $SWIR_CRASH_DIR or temporary "
              "directory)", file=sys.stderr)
    print(f"{prog}: note: reproduce with: {bug.command}", file=sys.stderr)


def command_line_error(prog: str, argv: list[str], index: int, message: str) -> Diagnostic:
    """A diagnostic pointing into the command line itself, like clang's <command line>."""
    line = " ".join([prog] + argv)
    col = len(prog) + 2 + sum(len(a) + 1 for a in argv[:index])
    SOURCES.add("<command-line>", line)
    return Diagnostic(message, Location("<command-line>", 1, col))


def opt_level(prog: str, argv: list[str], index: int) -> str:
    """The optimisation level ``argv[index]`` names (``-O3`` -> ``O3``)."""
    from swir.passes.pipelines import OPT_LEVELS
    level = argv[index][1:]
    if level not in OPT_LEVELS:
        raise command_line_error(prog, argv, index, f"unknown optimisation level "
                                 f"'{argv[index]}' (levels: "
                                 f"{', '.join('-' + k for k in OPT_LEVELS)})")
    return level


def write_output(path: str | None, text: str) -> None:
    """Write to stdout, or atomically to ``path`` (never a partial file)."""
    if path is None or path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent if str(target.parent) else ".",
                                   prefix=f".{target.name}.", suffix=".tmp")
    except OSError as e:
        raise UsageError(f"cannot write '{path}': {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, target)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise UsageError(f"cannot write '{path}': {e.strerror or e}") from None


def write_files(jobs: list[tuple[str, np.ndarray | bytes]]) -> None:
    """Write every file (an array as .npy, bytes as they are) to a temporary
    file beside it first, then move them all into place. On failure nothing
    changes: files already moved into place are put back as they were."""
    for path, _ in jobs:
        if Path(path).is_dir():
            raise UsageError(f"cannot write output: '{path}' is a directory")
    temps: list[tuple[str, str]] = []
    placed: list[tuple[str, str | None]] = []   # (target, backup of what it replaced)
    try:
        for path, content in jobs:
            temps.append((_temp_beside(path, content), path))
        for tmp, path in temps:
            backup = None
            if os.path.lexists(path):
                backup = _temp_beside(path, None)
                os.replace(path, backup)
            placed.append((path, backup))
            os.replace(tmp, path)
    except OSError as e:
        _undo(placed, temps)
        raise UsageError(f"cannot write output: {e.strerror or e} ({e.filename})") from None
    for _, backup in placed:
        if backup is not None:
            os.unlink(backup)


def _temp_beside(path: str, content: np.ndarray | bytes | None) -> str:
    """A new temporary file in path's directory holding ``content``."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent if str(target.parent) else ".",
                               prefix=f".{target.name}.", suffix=".tmp")
    with os.fdopen(fd, "wb") as fh:
        if isinstance(content, (bytes, bytearray, memoryview)):
            fh.write(content)
        elif content is not None:
            np.save(fh, content, allow_pickle=False)
    return tmp


def _undo(placed: list[tuple[str, str | None]], temps: list[tuple[str, str]]) -> None:
    for path, backup in reversed(placed):
        try:
            if backup is not None:
                os.replace(backup, path)
            elif os.path.lexists(path):
                os.unlink(path)
        except OSError:
            pass
    for tmp, _ in temps:
        if os.path.exists(tmp):
            os.unlink(tmp)
