"""What every swir tool shares: diagnostics to stderr with exit status 1, no
tracebacks, and output files written only when the whole job succeeded."""

from __future__ import annotations

import argparse
import errno
import io
import os
import signal
import sys
import threading
from collections.abc import Callable

import numpy as np

from swir import cache, files
from swir.api.errors import SwirError, command_line_error, render
from swir.diagnostics import Diagnostic, one_line
from swir.limits import deep_recursion
from swir.passes.manager import PassBug, PassFailure
from swir.verifier import VerificationError


class UsageError(Exception):
    """A bad command line: one-line error, exit status 1."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse, with usage errors as UsageError (argparse would exit with status 2)."""

    def error(self, message: str) -> None:
        raise UsageError(message)


# Exit status of a tool whose stdout reader went away (``| head``): that of a C
# tool killed by SIGPIPE, as the shell reports it (128 + 13), with no message.
BROKEN_PIPE_STATUS = 141


class StdoutError(Exception):
    """Writing standard output failed (its reader went away, a full disk)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error.strerror or str(error))
        self.errno = error.errno


class GuardedStdout:
    """sys.stdout, with its write errors raised as StdoutError (told apart
    from errors writing the tools' output files, which name the file)."""

    def __init__(self, stream) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            buffer = getattr(self.stream, "buffer", None)
            if buffer is None:              # not a real file (a test's capture)
                return self.stream.write(text)
            # The bytes themselves, every one: an unbuffered stdout
            # (PYTHONUNBUFFERED, python -u) hands the text to one write(2),
            # and a pipe whose reader went away takes part of it and no error
            # comes back: the rest was dropped, exit 0.
            self.stream.flush()
            data = memoryview(text.encode(self.stream.encoding or "utf-8",
                                          self.stream.errors or "strict"))
            while data:
                n = buffer.write(data)
                if n is None:               # a non-blocking descriptor that is full
                    raise BlockingIOError(11, "Resource temporarily unavailable")
                data = data[n:]
            return len(text)
        except OSError as e:
            raise StdoutError(e) from None

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as e:
            raise StdoutError(e) from None

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


class Terminated(BaseException):
    """SIGTERM or SIGHUP: unwinds the tool as Ctrl-C does (every ``finally``
    and ``except BaseException`` runs: temporary files are removed)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _terminate(signum: int, frame) -> None:
    raise Terminated(signum)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def run_tool(prog: str, main: Callable[[list[str]], int], argv: list[str] | None = None) -> int:
    """Run ``main`` and turn every failure into a diagnostic and an exit status.
    A closed stdout (``>&-``) discards what is printed, as Python's print does;
    a broken pipe ends the tool quietly; a full disk is an error; Ctrl-C,
    SIGTERM and SIGHUP end it with one line, nothing written, 128 + the signal."""
    args = sys.argv[1:] if argv is None else argv
    saved = sys.stdout, sys.stderr
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        handlers = {s: signal.signal(s, _terminate) for s in STOP_SIGNALS}
        handlers[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
    if sys.stderr is None:          # closed: print(file=None) would go to stdout
        sys.stderr = open(os.devnull, "w")
    sys.stdout = GuardedStdout(sys.stdout if sys.stdout is not None else open(os.devnull, "w"))
    try:
        status = _run(prog, main, args)
        sys.stdout.flush()          # what is buffered fails here, not at exit
        return status
    except StdoutError as e:
        _discard_stdout(saved[0])
        if e.errno == errno.EPIPE:
            return BROKEN_PIPE_STATUS
        print(f"{prog}: error: cannot write standard output: {e}", file=sys.stderr)
        return 1
    finally:
        sys.stdout, sys.stderr = saved
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def _discard_stdout(stream) -> None:
    """Point stdout's file descriptor at /dev/null, so the interpreter's flush
    at exit neither fails again nor prints a traceback."""
    try:
        fd = stream.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except (AttributeError, OSError, ValueError):
        pass                        # not a real file (a test's capture)


def _run(prog: str, main: Callable[[list[str]], int], args: list[str]) -> int:
    try:
        with deep_recursion():  # passes recurse per nested region, too
            return main(args)
    except Diagnostic as d:
        print(render(prog, d), file=sys.stderr)
    except (VerificationError, PassFailure, SwirError) as e:
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
    except Terminated as t:
        print(f"{prog}: terminated", file=sys.stderr)
        return 128 + t.signum
    except StdoutError:
        raise
    except Exception as e:  # a bug in swir, not in the input: still no traceback
        if os.environ.get("SWIR_DEBUG"):
            raise
        print(f"{prog}: internal error: {type(e).__name__}: {one_line(str(e))} "
              "(a bug in swir; set SWIR_DEBUG=1 for a traceback)", file=sys.stderr)
        return 2
    return 1


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
    """Write to stdout, or to ``path`` as swir.files writes outputs (never a
    partial file; a device or FIFO written straight into)."""
    if path is None or path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    write_files([(path, text.encode("utf-8"))])


def write_files(jobs: list[tuple[str, np.ndarray | bytes]]) -> None:
    """Write every file (an array as .npy, bytes as they are), all or none
    (swir.files.write_all); a failure is a UsageError naming the file."""
    try:
        files.write_all([(path, _npy(c) if isinstance(c, np.ndarray) else c)
                         for path, c in jobs])
    except files.OutputError as e:
        raise UsageError(str(e)) from None
    except BrokenPipeError as e:        # an output named stdout, whose reader went away
        raise StdoutError(e) from None


def _npy(a: np.ndarray) -> bytes:
    """The .npy file of ``a`` (np.save asks a file for its position, which a
    FIFO has not)."""
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def check_writable(path: str, what: str = "") -> None:
    """Fail before a long job when ``path`` cannot be written (``what``: the
    option naming it, for the message)."""
    try:
        files.check_writable(path)
    except files.OutputError as e:
        raise UsageError(f"cannot write {what} '{e.path}': {e.reason}" if what
                         else str(e)) from None


def use_cache(cli_value: str | None) -> None:
    """Set up the compile cache (swir.cache) from ``--cache-dir`` or, without
    it, ``$SWIR_CACHE_DIR``: a directory that cannot hold it is the same
    one-line error either way (an empty value: no cache)."""
    path, source = (cli_value, "") if cli_value is not None else \
        (os.environ.get(cache.ENV), f" (${cache.ENV})")
    if path:
        why = cache.usable(path)
        if why is not None:
            raise UsageError(f"cannot keep the cache in '{path}'{source}: {why}")
    cache.use_directory(path or None)


WEIGHTS_FROM_HELP = ("--weights-from DIR          also read weight files (file \"...\") from DIR "
                     "and below; by default only from the module's own folder and below")


def take_weights_from(prog: str, argv: list[str]) -> list[str]:
    """``argv`` without its ``--weights-from DIR`` options (any number), whose
    folders weight files may then be read from besides a module's own
    (swir.ir.constants.weight_path). Each must be a directory."""
    rest, folders, i = [], [], 0
    while i < len(argv):
        a = argv[i]
        if a == "--weights-from" or a.startswith("--weights-from="):
            if "=" in a:
                folder = a.partition("=")[2]
            elif i + 1 < len(argv):
                folder = argv[i + 1]
                i += 1
            else:
                raise command_line_error(prog, argv, i, "'--weights-from' needs a folder")
            folders.append(folder)
        else:
            rest.append(a)
        i += 1
    use_weights_from(folders)
    return rest


def use_weights_from(folders: list[str]) -> None:
    """Let weight files be read from these folders too (each a directory)."""
    from swir.ir.constants import allow_weights_from
    for folder in folders:
        if not os.path.isdir(folder):
            raise UsageError(f"--weights-from '{folder}': not a directory")
    allow_weights_from(folders)


def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file: the same path after links (also
    where it does not exist yet, or is a loop of links), or one file by two
    names (hard links)."""
    return files.same_file(a, b)
