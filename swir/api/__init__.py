"""swir from Python: the tools' jobs as functions (docs/api.md).

    import swir
    module = swir.import_model("model.onnx", "out/model.swir")  # swir-import
    swir.optimize(module, "-O3")                                # swir-opt -O3
    outputs = swir.run(module, [x])                             # swir-run
    print(swir.report(module).text())                           # swir-report
    swir.compile(module, "out/model", force=True)               # swir-cg

Each function does what its tool does, with the same options and the same
errors: bad input (IR text, a file, an option) raises :class:`SwirError`,
whose text is the tool's diagnostics (``FILE:LINE:COL: error: MESSAGE``);
nothing is written when a function fails. A module given to :func:`compile`
or :func:`report` is left as it is (they lower a copy); :func:`optimize`
changes the module it is given, as a pass manager does.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from swir import files
from swir.diagnostics import Diagnostic
from swir.ir.core import Module
from swir.parser import parse_module, read_source
from swir.passes.pipelines import DEFAULT_LEVEL, OPT_LEVELS
from swir.printer import print_module
from swir.target import Target, UnknownTarget, default_target, target_named
from swir.verifier import verify

from .errors import SwirError, reported, usage_error
from .importer import sidecar, translate
from .passes import (
    PassFlags,
    build_passes,
    global_option,
    option_argv,
    pass_flag,
    run_passes,
    split_flags,
    target_option,
)
from .running import entry_function

if TYPE_CHECKING:
    from .reporting import Report, ReportJob

__all__ = ["SwirError", "Report", "parse", "load", "to_text", "import_model", "optimize",
           "compile", "run", "report"]

# A module, or the path of its .swir file.
Source = Union[Module, str, Path]


@reported("parse")
def parse(text: str, name: str = "<input>") -> Module:
    """The module written in ``text`` (swir's textual IR), verified. ``name``
    is the file name diagnostics give; weight files are read from its folder."""
    module = parse_module(text, name)
    verify(module)
    return module


@reported("load")
def load(path: str | Path) -> Module:
    """The module in the .swir file at ``path``, verified."""
    module = parse_module(read_source(str(path)), str(path))
    verify(module)
    return module


def to_text(module: Module) -> str:
    """The module as swir's textual IR (computed constants inline)."""
    return print_module(module)


@reported("import_model")
def import_model(model: Any, output: str | Path, *,
                shapes: Mapping[str, Sequence[int]] | None = None,
                name: str | None = None, weights: str | Path | None = None, check: bool = True,
                inline_max: int | None = None) -> Module:
    """Translate a model as ``swir-import MODEL -o OUTPUT``: an ONNX file, an
    ``onnx.ModelProto``, or a TensorFlow SavedModel folder, Keras or TFLite
    file (through tf2onnx; docs/frontend.md). Writes OUTPUT (.swir) and its weights
    (``weights``, default OUTPUT with suffix .weights) and returns the
    module, read back from OUTPUT. ``shapes`` binds inputs' shapes or
    symbolic dimensions (``--shape``); ``inline_max`` is ``--inline-max``."""
    output = Path(output)
    weights_path = sidecar(output, weights)
    reference = os.path.relpath(weights_path, output.parent)
    bound = {k: tuple(int(d) for d in v) for k, v in (shapes or {}).items()}
    imported, text = translate(model, reference, bound, name, check, inline_max,
                               model_name(model))
    jobs = [(str(weights_path), bytes(imported.weights))] if imported.weights else []
    files.write_all(jobs + [(str(output), text.encode("utf-8"))])
    return load(output)


def model_name(model: Any) -> str:
    """The model's name in diagnostics: its path, or the ModelProto's graph."""
    if isinstance(model, (str, Path)):
        return str(model)
    import onnx
    if not isinstance(model, onnx.ModelProto):
        raise usage_error(f"a model is a path or an onnx.ModelProto, not a "
                          f"{type(model).__name__}")
    return f"<onnx.ModelProto {model.graph.name or 'model'}>"


@reported("optimize")
def optimize(module: Module, passes: str | Sequence[str], *, target: str | Target | None = None,
             verify_each: bool = True) -> Module:
    """Run swir-opt's pass flags on ``module`` (changed in place, and
    returned): ``"-O3"``, ``"-lower-loops -ldm-plan{strategy=greedy}
    -insert-dma"``, or a list of flags; ``--name=value`` flags give an
    option to every pass that takes it. Verifies after every pass (or,
    with ``verify_each=False``, at the end)."""
    argv = split_flags(passes) if isinstance(passes, str) else list(passes)
    flags = PassFlags(target=target_named_or_default(target))
    i = 0
    while i < len(argv):
        if argv[i] == "--target" or argv[i].startswith("--target="):
            flags.target, i = target_option("swir.optimize", argv, i)
            continue
        if not argv[i].startswith("-") or argv[i] == "-":
            raise Diagnostic(f"'{argv[i]}' is not a pass flag (-PASS{{opt=value,...}}, "
                             "-O0/-O1/-O3 or --OPTION=VALUE)")
        pass_flag("swir.optimize", argv, i, flags)
        i += 1
    run_passes(module, build_passes(flags, argv, "swir.optimize"), flags.target,
               f"<module {module.name}>", verify_each)
    return module


@reported("compile")
def compile(source: Source, output: str | Path, *, level: str = DEFAULT_LEVEL,
            options: Mapping[str, object] | None = None, ranks: int | None = None,
            split: str | None = None, train: bool = False, simd: bool = True,
            func: str = "main", target: str | Target | None = None, force: bool = False,
            jobs: int | None = None, verify_each: bool = False) -> Path:
    """Compile a module (or a .swir file) to the athread C project in
    ``output``, as ``swir-cg SOURCE -o OUTPUT``: the rest of the pipeline at
    ``level`` (``"O0"``, ``"O1"``, ``"O3"``), pass ``options`` (``{"ldm-size":
    32768}`` for ``--ldm-size=32768``), ``ranks`` / ``split`` (an MPI
    program), ``train``, ``simd=False`` (``--no-simd``), ``func``, ``force``
    (replace OUTPUT), ``jobs`` (``-j``). Returns the project directory;
    ``make -C OUTPUT emu`` builds it for this machine."""
    from . import compiling     # the C generator: imported when a project is written
    job = compiling.CompileJob(output=str(output), force=force, simd=simd, train=train,
                               func=func, level=level_name(level), verify_each=verify_each,
                               target=target_named_or_default(target),
                               target_given=target is not None, prog="swir.compile")
    if not job.target.codegen:
        raise usage_error(f"code generation for the {job.target.title} is not supported; "
                          "swir.optimize and swir.report plan and model for it")
    job.globals, job.argv = option_globals(options, {"jobs": jobs, "split": split,
                                                     "ranks": ranks})
    job.ranks = ranks_count(ranks, split)
    job.input, job.base_dir, text = source_text(source)
    module, passes, keep = compiling.prepare(job, text)
    compiling.lower(job, module, passes, text, sys.stderr)
    compiling.write(job, module, passes, keep)
    return Path(output)


@reported("run")
def run(source: Source, inputs: Sequence[np.ndarray], *, func: str | None = None,
        verify_first: bool = True, stats: dict[str, Any] | None = None) -> list[np.ndarray]:
    """Run a function of a module (default: @main, else the only one) in
    the reference interpreter, as swir-run: ``inputs`` bind to its
    parameters in order and must match their shapes and dtypes; returns its
    results. With ``stats`` (a dict), fills it with the run's counters
    (swir-run --stats). ``verify_first=False`` is ``--no-verify``."""
    from swir.interp.run import run_function
    module = source if isinstance(source, Module) else \
        parse_module(read_source(str(source)), str(source))
    if verify_first:
        verify(module)
    f = entry_function(module, func, module_name(source))
    args = [np.asarray(x) for x in inputs]
    return run_function(module, f, args, module.base_dir or ".", None, stats)


@reported("report")
def report(source: Source, *, level: str | None = None,
           pipeline: str | Sequence[str] | None = None,
           options: Mapping[str, object] | None = None, func: str | None = None,
           machine: str = "default", target: str | Target | None = None,
           ranks: int | None = None, split: str | None = None) -> Report:
    """The modeled Sunway cost of a module (or a .swir file), as
    swir-report: lowered to the dma stage at ``level`` (default -O3) or by
    the swir-opt flags of ``pipeline``, then modeled kernel by kernel on
    the ``machine`` DMA assumptions (pessimistic, default, optimistic).
    The :class:`Report` holds the CostReport (``.costs``), the table
    (``.text()``, ``.text(wide=True)``), the JSON (``.json()``) and the
    roofline plot (``.plot(path)``)."""
    from swir.costmodel.cost import DMA_ASSUMPTIONS

    from . import reporting     # the cost model: imported when a report is made
    if machine not in DMA_ASSUMPTIONS:
        raise usage_error(f"unknown machine '{machine}' (machines: "
                          f"{', '.join(DMA_ASSUMPTIONS)})")
    if pipeline is not None and level is not None:
        raise usage_error("level and pipeline both choose the passes: put the level into "
                          "the pipeline")
    if ranks is not None and pipeline is not None:
        raise usage_error("ranks adds -distribute to the level's pipeline; with a pipeline, put "
                          "-distribute{ranks=N} into it")
    job = reporting.ReportJob(func=func, machine=machine, prog="swir.report",
                              target=None if target is None else target_named_or_default(target))
    job.level = None if pipeline is not None else level_name(level or DEFAULT_LEVEL)
    job.globals, job.argv = option_globals(options, {"split": split, "ranks": ranks})
    job.ranks = ranks_count(ranks, split)
    if pipeline is not None:
        job.pipeline = pipeline_entries(pipeline, job)
    job.input, job.base_dir, text = source_text(source)
    return reporting.lower_and_model(job, text)


# -- the options, read as the tools read theirs -------------------------------------------

def level_name(level: str) -> str:
    """``"O3"`` or ``"-O3"`` -> ``"O3"``; another is an error naming the levels."""
    name = level.lstrip("-")
    if name not in OPT_LEVELS:
        raise usage_error(f"unknown optimisation level '{level}' (levels: "
                          f"{', '.join(OPT_LEVELS)})")
    return name


def target_named_or_default(target: str | Target | None) -> Target:
    """The target named (default: sw26010)."""
    if target is None or isinstance(target, Target):
        return target or default_target()
    try:
        return target_named(target)
    except UnknownTarget as e:
        raise usage_error(str(e)) from None


def ranks_count(ranks: int | None, split: str | None) -> int | None:
    """``ranks``: None (one core group) or a whole number, at least 1; a
    ``split`` needs it."""
    if ranks is None:
        if split is not None:
            raise usage_error("split says how ranks share the work: give ranks too")
        return None
    if not isinstance(ranks, int) or isinstance(ranks, bool) or ranks < 1:
        raise usage_error(f"ranks is a whole number of MPI ranks, at least 1, got {ranks!r}")
    return ranks


def option_globals(options: Mapping[str, object] | None, extra: Mapping[str, object]
                 ) -> tuple[dict[str, tuple[str, int]], list[str]]:
    """Keyword pass options as the tools' global options and the flags
    they stand for (where errors point)."""
    given = {k: v for k, v in extra.items() if v is not None}
    argv = option_argv({**(options or {}), **given})
    found: dict[str, tuple[str, int]] = {}
    for i, flag in enumerate(argv):
        global_option(flag, i, found)
    return found, argv


def pipeline_entries(pipeline: str | Sequence[str], job: ReportJob) -> list:
    """The pass flags of ``pipeline``, after the option flags in ``job.argv``."""
    flags = split_flags(pipeline) if isinstance(pipeline, str) else list(pipeline)
    into = PassFlags(globals=job.globals)
    start = len(job.argv)
    job.argv = job.argv + flags
    for i in range(start, len(job.argv)):
        pass_flag(job.prog, job.argv, i, into)
    return into.passes


def source_text(source: Source) -> tuple[str, str | None, str]:
    """A module's (or a file's) name, the folder its weight files are read
    from (None: the file's), and its text."""
    if isinstance(source, Module):
        # named as a file in its folder: weight files (and the C's) are read from there
        name = os.path.join(source.base_dir or ".", f"<module {source.name}>")
        return name, source.base_dir or ".", print_module(source)
    return str(source), None, read_source(str(source))


def module_name(source: Source) -> str:
    return f"module \"{source.name}\"" if isinstance(source, Module) else str(source)


def __getattr__(name: str) -> Any:
    # Report lives with the cost model, which is imported only when a report is made.
    if name == "Report":
        from .reporting import Report
        return Report
    raise AttributeError(f"module 'swir.api' has no attribute '{name}'")
