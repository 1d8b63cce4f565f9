"""The Sunway athread C project for a dma-stage module (swTVM's AOT code
generation, 000_ba374e17f4714793.txt Section IV, Fig. 2).

    main.c          MPE: arena, constants, inputs, the host functions, outputs
    layers.h/.c     MPE: per CPE kernel, fill its parameter struct and spawn it
    layers_mix.h    both: the parameter structs (Para) and small helpers
    layers_slave.c  CPE: one function per kernel, LDM buffers, DMA
    Makefile        sw5cc for Sunway (default), `make emu` for the host
    weights.bin     the constants main.c loads (size checked)
    carried.bin     with --train: the carried state's first values (swir/codegen/train.py)
    emu/            swir's athread emulation runtime (for `make emu`)

:func:`generate` returns the files as bytes; nothing is written until every
file has been produced (the caller writes the directory atomically).
"""

from __future__ import annotations

import os
import stat
from importlib import resources
from dataclasses import replace
from pathlib import Path

from swir.codegen import templates, train
from swir.codegen.cpe import CPECode
from swir.codegen.host import HostCode
from swir.codegen.layout import Layout
from swir.codegen.names import comment_text
from swir.codegen.para import ParaCode
from swir.codegen.unit import Options
from swir.diagnostics import Diagnostic
from swir.files import new_dir_mode, repair_leftovers, replace_directory
from swir.ir.core import Module
from swir.target import target_of
from swir.verifier import module_attr_ldm

__all__ = ["Options", "Project", "WriteError", "check_project_dir", "generate",
           "write_project"]

WEIGHTS_FILE = "weights.bin"
RUNTIME_FILES = ("athread.h", "slave.h", "crts.h", "simd.h", "swir_emu.h", "swir_emu.c")
TARGET_HEADER = "swir_target.h"   # emu/: the target's figures, generated (swir/target.py)


class WriteError(Exception):
    """The project directory cannot be written (exists, not a directory, I/O)."""


def write_project(files: dict[str, bytes], out: str, force: bool,
                  keep: tuple[str, ...] = ()) -> None:
    """Write every file into a fresh directory beside ``out``, then move it into
    place: ``out`` ends up complete, or (on any failure) as it was. A symlink
    ``out`` is followed (the directory it points to is replaced, the link
    stays). Refused: replacing a path that is not a directory, a directory
    without ``force``, the current directory or one holding it, or one holding
    a file in ``keep`` (the input and the weights it reads)."""
    target = check_project_dir(out, force, keep)
    # a new one gets the umask's mode, a replaced one keeps its own
    mode = stat.S_IMODE(target.stat().st_mode) if target.is_dir() else new_dir_mode()

    def fill(folder: Path) -> None:
        for rel, data in files.items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    try:
        replace_directory(target, fill, mode)
    except OSError as e:
        raise WriteError(f"cannot write '{out}': {e.strerror or e}") from None


def check_project_dir(out: str, force: bool, keep: tuple[str, ...] = ()) -> Path:
    """The directory ``out`` names (symlinks followed), if swir-cg may write
    it; else WriteError saying why (see :func:`write_project`)."""
    try:
        return _check_project_dir(out, force, keep)
    except OSError as e:            # a name too long, a loop of links, ...
        raise WriteError(f"cannot write '{out}': {e.strerror or e}") from None


def _check_project_dir(out: str, force: bool, keep: tuple[str, ...]) -> Path:
    given = Path(out)
    target = Path(os.path.realpath(given))
    if target.parent.is_dir():
        repair_leftovers(target)        # a killed run's project put back first
    if given.exists() and not given.is_dir():
        raise WriteError(f"'{out}' exists and is not a directory")
    if not target.parent.is_dir():
        raise WriteError(f"cannot write '{out}': no directory '{given.parent}'")
    if not given.exists():
        return target
    if not force:
        raise WriteError(f"'{out}' exists; use --force to replace it")
    here = Path.cwd().resolve()
    if here == target or target in here.parents:
        raise WriteError(f"'{out}' is the current directory or holds it; --force will not "
                         "replace it (give a new directory)")
    for path in keep:
        real = Path(os.path.realpath(path))
        if target in real.parents:
            raise WriteError(f"'{out}' holds the input '{path}'; --force would delete it")
    return target


def generate(module: Module, options: Options) -> dict[str, bytes]:
    """Every file of the project, by relative path, for the target the
    module was planned for."""
    return Project(module, replace(options, target=target_of(module.attrs))).files()


class Project:
    """The files of the project: each written by the part that knows it
    (swir/codegen/layout.py decides where each function goes and its C
    name; host.py writes main.c, cpe.py layers_slave.c, para.py the Para
    structs and the MPE wrappers)."""

    def __init__(self, module: Module, options: Options) -> None:
        self.layout = Layout(module, options)
        self.m, self.opt = module, options

    def files(self) -> dict[str, bytes]:
        lay = self.layout
        host, para = HostCode(lay), ParaCode(lay)
        slave = CPECode(lay).slave_c()  # first: it decides the reply words and LDM frames
        host_functions = [host.function(f) for f in reversed(lay.host_funcs)]
        weights, constants = host.constants()
        training = self._training()
        out = {
            "layers_mix.h": para.mix_h(),
            "layers.h": para.layers_h(),
            "layers.c": para.layers_c(),
            "layers_slave.c": slave,
            "main.c": host.main_c(host_functions, constants, training),
            "Makefile": self._makefile(),
        }
        files = {k: v.encode("utf-8") for k, v in out.items()}
        files[WEIGHTS_FILE] = weights
        if training is not None:
            files[train.CARRIED_FILE] = training.blob
        runtime = resources.files("swir.codegen") / "runtime"
        for name in RUNTIME_FILES:
            files[f"emu/{name}"] = (runtime / name).read_bytes()
        files[f"emu/{TARGET_HEADER}"] = self.opt.target.c_defines().encode("utf-8")
        return files

    def _training(self) -> train.TrainingStep | None:
        """The entry function as a training step (Options.train), else None."""
        if not self.opt.train:
            return None
        if self.layout.ranks is not None and self.layout.ranks.split != "data":
            raise Diagnostic("swir-cg --train: training runs data-parallel; this module's "
                             f"ranks share it by {self.layout.ranks.split} (split = \"data\" "
                             "is needed)", self.m.loc)
        return train.training_step(self.m, self.layout.entry, Path(self.opt.source).parent)

    # Makefile ---------------------------------------------------------------------------
    def _makefile(self) -> str:
        # The LDM the plan was made for (stage dma {ldm_size = N}), at most the
        # target's: the emulation holds each kernel to both.
        target = self.opt.target
        planned = module_attr_ldm(self.m)
        ldm_bytes = min(planned, target.ldm_bytes)
        reserve = self.opt.ldm_reserve
        if reserve is None:                 # -ldm-plan's default
            reserve = target.default_reserve(planned)
        if reserve >= ldm_bytes:
            raise Diagnostic(f"swir-cg: an LDM reserve of {reserve} bytes leaves no LDM for "
                             f"the kernels: the {target.title} has {target.ldm_bytes} bytes "
                             "per CPE", self.m.loc)
        return templates.makefile(self.layout.stem, comment_text(self.opt.source), reserve,
                                  ldm_bytes, target, self.layout.ranks)

