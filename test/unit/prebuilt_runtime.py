"""The emulation's runtime (emu/swir_emu.c) compiled once per test process for
all the programs that share its flags, instead of once per `make emu`.

A generated Makefile compiles the runtime with the program unless EMU_RUNTIME
names an object compiled from it with the same CC, CFLAGS and EMU_DEFS
(swir/codegen/templates.py). conftest.py sets swir.codegen.emulate.make_variables
to :func:`make_variables`, so every emulate.build of the target ``emu`` links
such an object, keyed by those flags (the LDM size and reserve, -march, ...)
and by the bytes of the project's emu/ folder (the runtime, its headers and the
target's figures). Projects a test wrote a Makefile for itself, with no
EMU_RUNTIME, and the sanitizer targets, build as they always did.

The same `make emu` runs its compiler through object_cache.py (CC on make's
command line), which reuses the object of a source compiled before with the
same preprocessed text and flags.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
import threading
from pathlib import Path

RUNTIME = "emu/swir_emu.c"
# The flags make would compile the runtime with, printed by a rule given on
# make's command line (the Makefile itself is not changed).
PRINT_FLAGS = "swir-test-emu-flags: ; @echo $(CC) $(CFLAGS) $(EMU_DEFS)"
PRINT_CC = "swir-test-cc: ; @echo $(CC)"
OBJECT_CACHE = Path(__file__).with_name("object_cache.py")


def make_variables(cache: Path, project: Path, target: str) -> list[str]:
    """``["EMU_RUNTIME=OBJECT", "CC=..."]`` for a `make emu` of a generated
    project, the object compiled into ``cache`` on first use, the compiler
    wrapped by object_cache.py (its objects in ``cache`` too); ``[]`` for
    anything else."""
    if target != "emu" or "\nEMU_RUNTIME = " not in (project / "Makefile").read_text():
        return []
    cc, flags = _runtime_flags(project)
    key = hashlib.sha256(flags.encode())
    for header in sorted((project / "emu").iterdir()):
        key.update(header.name.encode() + b"\0" + header.read_bytes() + b"\0")
    obj = cache / f"swir_emu-{key.hexdigest()[:32]}.o"
    if not obj.exists():
        _compile(project, flags, obj)
    wrapped = shlex.join([sys.executable, str(OBJECT_CACHE), str(cache), cc])
    return [f"EMU_RUNTIME={obj}", f"CC={wrapped}"]


def _runtime_flags(project: Path) -> tuple[str, str]:
    """The project's compiler, and the command line it compiles the runtime with."""
    cc, flags = _run(["make", "-s", "--no-print-directory", "-C", str(project),
                      "--eval", PRINT_CC, "--eval", PRINT_FLAGS,
                      "swir-test-cc", "swir-test-emu-flags"], project).splitlines()
    return cc.strip(), flags.strip()


def _compile(project: Path, flags: str, obj: Path) -> None:
    """Compile the runtime to ``obj``, by way of a file of this thread's own
    (tests build from several threads) so that no reader sees half an object."""
    part = obj.with_name(f"{obj.name}.{os.getpid()}.{threading.get_ident()}.part")
    _run([*shlex.split(flags), "-c", RUNTIME, "-o", str(part)], project)
    part.replace(obj)


def _run(cmd: list[str], project: Path) -> str:
    r = subprocess.run(cmd, cwd=project, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)} failed in {project}:\n{r.stdout}{r.stderr}")
    return r.stdout
