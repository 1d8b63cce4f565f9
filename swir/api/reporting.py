"""The modeled Sunway cost of a module, kernel by kernel: what swir-report
does between reading its command line and printing, and what
:func:`swir.report` runs. The table is :mod:`swir.api.report_table`, the
roofline plot :mod:`swir.api.roofline`."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swir.costmodel.cost import CostReport, cost_report, dma_assumptions
from swir.costmodel.traffic import TrafficError
from swir.files import write_all
from swir.parser import parse_module
from swir.passes.manager import Pass, PassManager, option_default, option_flag, option_text
from swir.progress import QUIET, Progress
from swir.target import Target, default_target, target_of
from swir.verifier import verify

from . import report_table, roofline
from .compiling import level_passes, lowering
from .errors import usage_error
from .passes import Globals, PassEntry


@dataclass
class ReportJob:
    """What to model and how: swir-report's options. ``pipeline`` (pass
    entries) replaces the level's passes; ``globals`` holds the pass options
    given to every pass that takes them, each with where ``argv`` has it."""

    input: str | None = "-"          # the input file as given ('-': stdin)
    level: str | None = None         # None: --pipeline
    func: str | None = None
    machine: str = "default"
    target: Target | None = None     # None: the module's (swir.target.target_of)
    pipeline: list[PassEntry] | None = None
    globals: Globals = field(default_factory=dict)
    ranks: int | None = None         # --ranks N: -distribute first, and the speed-up
    argv: list[str] = field(default_factory=list)
    prog: str = "swir-report"
    base_dir: str | None = None      # where weight files are read from (None: the input's folder)

    @property
    def name(self) -> str:
        """The input's name in diagnostics."""
        return "<stdin>" if self.input == "-" else str(self.input)


@dataclass
class Report:
    """A module's modeled cost: ``costs`` (kernels sorted by modeled time,
    largest first) and how it was lowered (``info``: the input, module,
    stage, level and passes, as swir-report's JSON has them)."""

    costs: CostReport
    info: dict[str, Any]

    def text(self, wide: bool = False, micro: str = "µs") -> str:
        """The table swir-report prints (``wide``: every column, as --wide)."""
        return report_table.render(self.costs, self.info, micro, wide)

    def json(self) -> str:
        """The JSON swir-report --json writes."""
        return report_table.json_text(self.costs, self.info)

    def image(self, path: str | Path = "roofline.png") -> bytes:
        """The roofline plot as swir-report --plot draws it, in the format
        of ``path``'s suffix (needs matplotlib)."""
        return roofline.roofline_image(self.costs, self.info, str(path))

    def plot(self, path: str | Path) -> Path:
        """Write the roofline plot to ``path`` (all of it, or nothing)."""
        write_all([(str(path), self.image(path))])
        return Path(path)


def pipeline(stage: str, job: ReportJob) -> list[Pass]:
    """The passes that lower a ``stage`` module: as swir-cg's pipeline(), or
    the --pipeline flags."""
    if job.pipeline is not None:
        passes = job.pipeline
    else:
        assert job.level is not None
        passes = level_passes(stage, job.level, job.globals, job.ranks is not None)
    return lowering(passes, stage, job.globals, job.argv, job.prog, job.target)


def compact_spelling(p: Pass) -> str:
    """``-name{opt=value}`` with only the options that differ from their
    defaults on the default target (so a pipeline for another target shows
    the figures it took: ``-ldm-plan{ldm-size=262144}``)."""
    opts = [f"{option_flag(f.name)}={option_text(getattr(p, f.name))}" for f in p.options()
            if getattr(p, f.name) != option_default(f, default_target())]
    return f"-{p.name}" + ("{" + ",".join(opts) + "}" if opts else "")


def parse(source: str, job: ReportJob):
    module = parse_module(source, job.name)
    if job.base_dir is not None:
        module.base_dir = job.base_dir
    return module


def lower_and_model(job: ReportJob, source: str, progress: Progress = QUIET) -> Report:
    """Parse, verify, lower to the dma stage and model: the report (kernels
    sorted by modeled time, largest first) and what was run."""
    name = job.name
    module = parse(source, job)
    verify(module)
    stage = module.stage
    job.target = job.target or target_of(module.attrs)
    if job.ranks is not None and stage != "graph":
        raise usage_error(f"--ranks: {name} is at the {stage} stage; ranks are given to a "
                          "graph-stage module (-distribute splits it there)")
    passes = pipeline(stage, job)
    PassManager(passes, verify_each=True, input_name=name, dump=sys.stderr,
                progress=progress, target=job.target).run(module)
    if module.stage != "dma":
        spelled = " ".join(compact_spelling(p) for p in passes) or "no passes"
        raise usage_error(f"the pipeline ({spelled}) leaves the module at the {module.stage} "
                          "stage; swir-report models the dma stage (end it with -insert-dma)")
    progress.begin("modeling")
    try:
        report = cost_report(module, dma_assumptions(job.target)[job.machine], job.func)
    except TrafficError as e:
        raise usage_error(str(e)) from None
    finally:
        progress.end()
    report.kernels.sort(key=lambda k: -k.modeled_s)
    info = {"input": name, "module": module.name, "stage": stage, "level": job.level,
            "pipeline": [p.spelling() for p in passes], "machine_name": job.machine,
            "_compact": " ".join(compact_spelling(p) for p in passes), "_target": job.target}
    if job.ranks is not None:
        info["split"] = module.attrs.get("split")
        info["one_core_group_s"] = one_core_group(job, source)
    return Report(report, info)


def one_core_group(job: ReportJob, source: str) -> float:
    """The modeled time of the same module compiled for one core group (no
    -distribute): what --ranks's speed-up is measured against."""
    module = parse(source, job)
    alone = ReportJob(job.input, job.level, job.func, job.machine, job.target,
                      globals={k: v for k, v in job.globals.items()
                               if k not in ("ranks", "split")},
                      argv=job.argv, prog=job.prog, base_dir=job.base_dir)
    PassManager(pipeline(module.stage, alone), verify_each=False, input_name=job.name,
                dump=sys.stderr, target=job.target).run(module)
    return cost_report(module, dma_assumptions(job.target)[job.machine], job.func).modeled_s
