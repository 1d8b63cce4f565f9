"""Compiling a module to the athread C project: what swir-cg does between
reading its command line and printing its closing line, and what
:func:`swir.compile` runs. Option errors point at the option (``argv``, as
the tool or the API spelled them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from swir.analysis.calling import carried_names
from swir.codegen.project import Options as CodegenOptions
from swir.codegen.project import WriteError, check_project_dir, generate, write_project
from swir.ir.core import FileInit, Function, Module
from swir.parser import parse_module
from swir.passes.manager import Pass, PassManager
from swir.passes.options import reserve_bytes
from swir.passes.pipelines import DEFAULT_LEVEL, compile_pipeline, level_options
from swir.progress import QUIET, Progress
from swir.target import Target, default_target, target_of
from swir.verifier import VerificationError, module_attr_ldm, verify

from .errors import command_line_error, usage_error
from .passes import Globals, PassEntry, PassFlags, build_passes


@dataclass
class CompileJob:
    """What to compile and how: swir-cg's options. ``globals`` holds the
    pass options given to every pass that takes them (``--ldm-size=...``,
    ``--ranks``, ``--split``, ``--jobs``), each with where ``argv`` has it."""

    input: str = "-"                 # the input file as given ('-': stdin)
    output: str | None = None        # the project directory
    force: bool = False
    simd: bool = True
    train: bool = False
    func: str = "main"
    level: str = DEFAULT_LEVEL
    globals: Globals = field(default_factory=dict)
    target: Target = field(default_factory=default_target)
    target_given: bool = False      # --target was given (else a planned module's own rules)
    ranks: int | None = None         # an MPI program (-distribute)
    verify_each: bool = False
    argv: list[str] = field(default_factory=list)
    prog: str = "swir-cg"
    base_dir: str | None = None      # where weight files are read from (None: the input's folder)

    @property
    def name(self) -> str:
        """The input's name in diagnostics."""
        return "<stdin>" if self.input == "-" else self.input


def prepare(job: CompileJob, text: str) -> tuple[Module, list[Pass], tuple[str, ...]]:
    """Parse and check the input, check the project directory (before the
    possibly long pipeline), and build the passes: the module, the passes
    and the files the compile reads (which --force must not replace)."""
    module = parse(text, job)
    verify(module)
    check_target(module, job)
    check_ranks(module, job)
    check_training(module, job)
    keep = read_files(job.input, module)
    if job.output is not None:
        project_dir(job.output, job.force, keep)
    passes = pipeline(module.stage, job)
    check_ldm(module, passes, job)
    return module, passes, keep


def lower(job: CompileJob, module: Module, passes: list[Pass], text: str,
          dump: TextIO, progress: Progress = QUIET) -> PassManager:
    """Run the passes; the result is verified (a pass that broke it is
    found by running again, verifying after every pass)."""
    manager = PassManager(passes, verify_each=job.verify_each, input_name=job.name, dump=dump,
                          progress=progress, source=text, target=job.target)
    manager.run(module)
    if not job.verify_each:
        try:
            verify(module)
        except VerificationError:
            find_faulty_pass(text, job, dump)
            raise
    return manager


def write(job: CompileJob, module: Module, passes: list[Pass], keep: tuple[str, ...],
          progress: Progress = QUIET) -> dict[str, bytes]:
    """Generate the C project and write it to ``job.output`` (all or nothing)."""
    progress.begin("generating C")
    try:
        files = generate(module, CodegenOptions(entry=job.func, source=job.name,
                                                ldm_reserve=ldm_reserve(passes), simd=job.simd,
                                                train=job.train))
        assert job.output is not None
        write_project(files, job.output, job.force, keep)
    except WriteError as e:
        raise usage_error(str(e)) from None
    finally:
        progress.end()
    return files


def parse(text: str, job: CompileJob) -> Module:
    module = parse_module(text, job.name)
    if job.base_dir is not None:
        module.base_dir = job.base_dir
    return module


def check_target(module: Module, job: CompileJob) -> None:
    """The code is for the target the module was planned for (its target
    attribute, from -ldm-plan): a planned module given another --target is an
    error, as the plan (tiles, LDM) would not be the machine's."""
    if module.stage not in ("buffered", "dma"):
        return
    planned = target_of(module.attrs)
    if job.target_given and job.target is not planned:
        raise usage_error(f"--target={job.target.name}: {job.name} was planned for the "
                          f"{planned.title} (its target attribute); plan it again from the "
                          f"loop or graph stage for the {job.target.title}")
    job.target = planned


def check_ranks(module: Module, job: CompileJob) -> None:
    """--ranks on a module past the graph stage: it must have been split for as many."""
    if job.ranks is None or module.stage == "graph":
        return
    if module.attrs.get("ranks") != job.ranks:
        have = (f"is split for {module.attrs['ranks']} ranks" if "ranks" in module.attrs
                else "is for one core group")
        raise usage_error(f"--ranks {job.ranks}: the {module.stage}-stage module {have}; ranks "
                          "are given to a graph-stage module (-distribute splits it there)")
    job.globals.pop("ranks", None)
    job.globals.pop("split", None)


def check_training(module: Module, job: CompileJob) -> None:
    """--train: the entry function is a training step (its ``carried``
    attribute), and a module for several ranks was split by the batch before
    (-distribute would cut the carried state too)."""
    if not job.train:
        return
    f = module.lookup(job.func)
    if not isinstance(f, Function):
        return                  # the generator reports a missing entry function
    if not carried_names(f):
        raise usage_error(f"--train: @{f.name} has no 'carried' attribute, so it is not a "
                          "training step (attributes {carried = [@w, @b, ...]}: the globals "
                          "its last parameters carry)")
    if job.ranks is not None:
        raise usage_error("--train --ranks: a training step is shared over ranks in the IR "
                          "(stage ... {ranks = N, split = \"data\"}, with the allreduce of its "
                          "gradients); give that module without --ranks")


def pipeline(stage: str, job: CompileJob) -> list[Pass]:
    """What is left of the default pipeline for a ``stage`` module at the job's level."""
    return lowering(level_passes(stage, job.level, job.globals, job.ranks is not None), stage,
                    job.globals, job.argv, job.prog, job.target)


def level_passes(stage: str, level: str, globals_: Globals, ranks: bool = False
                 ) -> list[PassEntry]:
    """What swir-cg runs on a ``stage`` module at ``level``, as swir-opt's
    pass entries: each pass with the options the level gives it, except
    those the user gave (``globals_``); with ``ranks``, -distribute too."""
    return [(n, {k: v for k, v in level_options(n, level).items() if k not in globals_}, 0)
            for n in compile_pipeline(stage, level, ranks)]


def lowering(passes: list[PassEntry], stage: str, globals_: Globals, argv: list[str],
             prog: str, target: Target | None = None) -> list[Pass]:
    """The passes, with the global options given to those that take them; a
    global option is an error when no pass runs."""
    if not passes:
        for k, (_, idx) in globals_.items():
            raise command_line_error(prog, argv, idx, f"unknown option '--{k}' (a {stage}-stage "
                                                      "module runs no passes)")
    return build_passes(PassFlags(passes, globals_, target or default_target()), argv, prog)


def check_ldm(module: Module, passes: list[Pass], job: CompileJob) -> None:
    """swir-cg writes code for the machine: a plan for more LDM than a CPE
    has would build and then stop at run time (swir-opt and swir-report
    plan and model larger LDMs for studies)."""
    machine = job.target
    for p in passes:
        size = getattr(p, "ldm_size", None)
        if isinstance(size, int) and size > machine.ldm_bytes:
            given = job.globals.get("ldm-size")
            message = (f"an LDM of {size} bytes is more than the {machine.title} has "
                       f"({machine.ldm_bytes} bytes per CPE); swir-cg writes code for the "
                       "machine (swir-opt and swir-report plan and model larger ones)")
            if given is not None:
                raise command_line_error(job.prog, job.argv, given[1], message)
            raise usage_error(message)
    planned = module_attr_ldm(module)
    if planned > machine.ldm_bytes:
        raise usage_error(f"{job.input} was planned for an LDM of {planned} bytes, more than "
                          f"the {machine.title} has ({machine.ldm_bytes} bytes per CPE)")


def ldm_reserve(passes: list[Pass]) -> int | None:
    """The LDM the plan left for the CPE stack and reply words (the emulation's
    capacity check uses it); None when the input was planned already (the
    generator then assumes -ldm-plan's default, 1/16 of the module's LDM)."""
    for p in passes:
        if p.name == "ldm-plan":
            r = p.ldm_reserve
            return reserve_bytes(p.ldm_size, r, p.target)  # type: ignore[attr-defined]
    return None


def find_faulty_pass(text: str, job: CompileJob, dump: TextIO) -> None:
    """The pipeline left invalid IR behind (its input was valid): run it
    again, verifying after every pass, so the pass at fault is reported as
    an internal error with the IR it was given saved (PassBug)."""
    module = parse(text, job)
    PassManager(pipeline(module.stage, job), verify_each=True, input_name=job.name,
                dump=dump, target=job.target).run(module)


def read_files(input: str, module: Module) -> tuple[str, ...]:
    """The files the compilation reads (the input and its weight files):
    --force must not replace a directory holding one."""
    base = Path(module.base_dir or ".")
    weights = {str(base / g.init.path) for g in module.globals
               if isinstance(g.init, FileInit)}
    is_file = input != "-" and not Path(input).name.startswith("<")  # not stdin, nor a Module
    return tuple(([input] if is_file else []) + sorted(weights))


def project_dir(out: str, force: bool, keep: tuple[str, ...]) -> None:
    """Fail early when ``out`` cannot become the project directory."""
    try:
        check_project_dir(out, force, keep)
    except WriteError as e:
        raise usage_error(str(e)) from None
