"""Build a generated project with ``make emu`` and run it on numpy arrays: what
the tests, the demo and the benchmarks use to check generated C against the
reference interpreters."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from swir.codegen.names import file_stem
from swir.dma_counters import DMA_COUNTERS
from swir.ir.dtypes import dtype_of
from swir.ir.types import ShapedType, Type

# make target -> program suffix
TARGETS = {"emu": "_emu", "emu-asan": "_emu_asan", "emu-tsan": "_emu_tsan"}


class EmulationError(Exception):
    """Building or running the generated program failed; the message has its output."""


def program_path(project: Path, module_name: str, target: str = "emu") -> Path:
    return Path(project) / (file_stem(module_name) + TARGETS[target])


# The Sunway dialect check (docs/codegen.md, "The Sunway dialect check"): when
# this environment variable names a stand-in for sw5cc (the tests set it to
# test/sunway/sw5cc), build() first compiles the project as its Sunway build
# would, `make all SW5CC=...`: MPE and CPE sources separately, in the dialect
# the Makefile states, pedantically, against the real athread prototypes.
SW5CC_CHECK = "SWIR_SW5CC_CHECK"
# ... and for an SW26010-Pro project, a stand-in for its swgcc (test/sunway/swgcc).
SWGCC_CHECK = "SWIR_SWGCC_CHECK"


def sunway_check(project: Path, timeout: float = 300) -> bool:
    """``make -B -C project all SW5CC=$SWIR_SW5CC_CHECK`` (an SW26010-Pro
    project: ``SWGCC=$SWIR_SWGCC_CHECK``) when that variable is set and not
    empty (True); otherwise nothing (False). The stand-in writes no files.
    Raises EmulationError with the compiler's messages when it fails."""
    makefile = (Path(project) / "Makefile").read_text()
    variable, env = ("SWGCC", SWGCC_CHECK) if "\nSWGCC = " in makefile else ("SW5CC", SW5CC_CHECK)
    driver = os.environ.get(env)
    if not driver:
        return False
    tools = [f"{variable}={driver}"]
    if "\nMPICC = " in makefile:
        # An MPI program: its MPE side through the stand-in too, with mpi.h's folder.
        tools.append(f"MPICC={driver} " + " ".join(f"-I{d}" for d in mpi_include_dirs()))
    r = subprocess.run(["make", "-s", "-B", "-C", str(project), "all", *tools],
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise EmulationError(f"the Sunway dialect check (make all {variable}={driver}) failed "
                             f"in {project}:\n{r.stdout}{r.stderr}")
    return True


def mpi_include_dirs() -> list[str]:
    """Where the host MPI's mpi.h is (Open MPI's mpicc --showme:incdirs)."""
    r = subprocess.run(["mpicc", "--showme:incdirs"], capture_output=True, text=True)
    if r.returncode != 0:
        raise EmulationError(f"mpicc --showme:incdirs failed (is Open MPI installed?):\n"
                             f"{r.stderr}")
    return r.stdout.split()


# make variables (NAME=value) for build() to add, from the project and the target:
# swir's tests point EMU_RUNTIME at a runtime built once (test/unit/prebuilt_runtime.py).
make_variables: Callable[[Path, str], list[str]] | None = None


def build(project: Path, module_name: str, target: str = "emu", timeout: float = 300) -> Path:
    """``make -C project target``; the program it built. Under the Sunway
    dialect check (SWIR_SW5CC_CHECK), the project passes it first."""
    sunway_check(project, timeout)
    variables = make_variables(Path(project), target) if make_variables else []
    r = subprocess.run(["make", "-s", "-C", str(project), target, *variables],
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise EmulationError(f"make {target} failed in {project}:\n{r.stdout}{r.stderr}")
    return program_path(project, module_name, target)


@dataclass
class Run:
    outputs: list[np.ndarray]
    stats: dict[str, Any]
    stderr: str


def mpirun(ranks: int) -> tuple[list[str], dict[str, str]]:
    """The command prefix that starts ``ranks`` ranks of an MPI program here
    (Open MPI's mpirun; --oversubscribe: more ranks than cores), and its
    environment: Open MPI refuses to run as root unless told it may (CI
    machines and containers run as root); the ranks, all on this machine,
    talk through shared memory (the self and vader transports: Open MPI's
    TCP transport has lock-order reports of its own under ThreadSanitizer)."""
    env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_btl": "self,vader"}
    return ["mpirun", "-np", str(ranks), "--oversubscribe"], env


def run(program: Path, inputs: list[np.ndarray], input_types: list[Type],
        output_types: list[Type], repeat: int = 1, timeout: float = 600,
        env: dict[str, str] | None = None, ranks: int | None = None) -> Run:
    """Run the program on ``inputs`` (converted to the declared types, written
    raw little-endian), reading back one array per output type and the
    counters of ``--stats``. ``ranks``: an MPI program (swir-cg --ranks),
    started by mpirun on that many ranks; ``input_types`` and ``output_types``
    are then what rank 0 reads and writes (the whole batch)."""
    with tempfile.TemporaryDirectory(prefix="swir-emu-") as tmp:
        d = Path(tmp)
        prefix, mpi_env = mpirun(ranks) if ranks is not None else ([], {})
        env = {**mpi_env, **(env or {})}
        cmd = [*prefix, str(program)]
        for i, (a, t) in enumerate(zip(inputs, input_types)):
            path = d / f"in{i}.bin"
            np.ascontiguousarray(a, dtype=dtype_of(t).newbyteorder("<")).tofile(path)
            cmd += ["--input", str(path)]
        for i in range(len(output_types)):
            cmd += ["--output", str(d / f"out{i}.bin")]
        cmd += ["--stats", str(d / "stats.json"), "--repeat", str(repeat)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, **(env or {})})
        if r.returncode != 0:
            raise EmulationError(f"{program.name} exited with status {r.returncode}:\n"
                                 f"{r.stdout}{r.stderr}")
        outputs = []
        for i, t in enumerate(output_types):
            shape = t.shape if isinstance(t, ShapedType) else ()
            data = np.fromfile(d / f"out{i}.bin", dtype=dtype_of(t).newbyteorder("<"))
            outputs.append(data.astype(dtype_of(t)).reshape(shape))
        stats = json.loads((d / "stats.json").read_text())
        return Run(outputs, stats, r.stderr)


def dma_counters(stats: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per kernel, the counters of DMA_COUNTERS, from a program's ``--stats``
    or the dma-stage interpreter's ``stats()`` (the same shape); kernels that
    moved nothing, by DMA or register communication, and waited for nothing
    are left out (as the static count leaves them out)."""
    out = {}
    for name, s in stats.get("functions", {}).items():
        c = {k: s.get(k) for k in DMA_COUNTERS}
        if c["gets"] or c["puts"] or c["waits"] or s.get("reg_sends") or s.get("reg_recvs"):
            out[name] = c
    return out
