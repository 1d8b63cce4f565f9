"""A compiler wrapper for the tests' `make emu`: the one command that compiles
and links a project (``CC FLAGS main.c layers.c layers_slave.c RUNTIME.o -o
PROGRAM LIBS``) becomes one compile per source and a link, and a source whose
preprocessed text and compile flags were compiled before in this test process
is not compiled again: its object is reused.

Why: the tests build one module several times with the same host code (an op
at two LDM sizes, with vector and scalar CPE code: test_codegen's main.c and
layers.c are the same in all three, and main.c is two thirds of a build). The
key is what decides the object, as ccache's preprocessor mode has it: the
compiler, the flags that are not the preprocessor's (-D, -U, -I act through
the preprocessed text), and the preprocessed text itself. A compile that
fails or warns (-Werror) leaves no object, so its diagnostics come again.

Usage (prebuilt_runtime.make_variables sets CC to it):
    python object_cache.py CACHE_DIR REAL_CC ARGS...
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

# Options that take the next argument as their value.
PREPROCESSOR_WITH_VALUE = {"-D", "-U", "-I", "-include", "-isystem", "-iquote"}
PREPROCESSOR_PREFIXES = ("-D", "-U", "-I")


def split(args: list[str]) -> tuple[list[str], list[str], str | None, list[str]]:
    """(flags, C sources, output, link inputs and libraries) of one cc command."""
    flags, sources, links, output = [], [], [], None
    it = iter(args)
    for a in it:
        if a == "-o":
            output = next(it)
        elif a.endswith(".c"):
            sources.append(a)
        elif a.endswith((".o", ".a", ".so")) or a.startswith(("-l", "-L")):
            links.append(a)
        elif a in PREPROCESSOR_WITH_VALUE:
            flags += [a, next(it)]
        else:
            flags.append(a)
    return flags, sources, output, links


def compile_flags(flags: list[str]) -> list[str]:
    """The flags that act after preprocessing (the key's part)."""
    out, skip = [], False
    for a in flags:
        if skip:
            skip = False
        elif a in PREPROCESSOR_WITH_VALUE:
            skip = True
        elif not a.startswith(PREPROCESSOR_PREFIXES):
            out.append(a)
    return out


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True)


def fail(r: subprocess.CompletedProcess) -> None:
    sys.stdout.buffer.write(r.stdout)
    sys.stderr.buffer.write(r.stderr)
    sys.exit(r.returncode)


def object_for(cache: Path, cc: list[str], flags: list[str], source: str) -> str | None:
    """The object of ``source``, compiled now or reused; None when the
    preprocessor says anything (the command then runs as it was)."""
    pre = run([*cc, *flags, "-E", source])
    if pre.returncode != 0 or pre.stderr:
        return None
    key = hashlib.sha256("\0".join([*cc, *compile_flags(flags)]).encode() + b"\0" + pre.stdout)
    obj = cache / f"{Path(source).stem}-{key.hexdigest()[:32]}.o"
    if not obj.exists():
        part = obj.with_name(f"{obj.name}.{os.getpid()}.part")
        r = run([*cc, *flags, "-c", source, "-o", str(part)])
        if r.returncode != 0 or r.stdout or r.stderr:
            part.unlink(missing_ok=True)
            fail(r)
        part.replace(obj)
    return str(obj)


def main(argv: list[str]) -> None:
    cache, cc, args = Path(argv[0]), [argv[1]], argv[2:]
    flags, sources, output, links = split(args)
    if "-c" in args or "-E" in args or not sources or output is None:
        os.execvp(cc[0], [*cc, *args])       # not a compile-and-link: as it was
    objects = [object_for(cache, cc, flags, s) for s in sources]
    if None in objects:
        os.execvp(cc[0], [*cc, *args])
    r = run([*cc, *compile_flags(flags), *objects, *links, "-o", output])
    if r.returncode != 0 or r.stdout or r.stderr:
        fail(r)


if __name__ == "__main__":
    main(sys.argv[1:])
