"""swir-report: the modeled Sunway cost of a swir module, kernel by kernel.

    swir-report IN.swir [-O0|-O1|-O3] [--pipeline PASSES] [--func NAME]
                [--machine NAME] [--wide] [--json OUT.json] [--plot OUT.png]
                [--PASS-OPTION=VALUE ...]

The module may be at any stage. swir-report lowers it to the dma stage as
swir-cg would (the level's graph passes, then what is left of -lower-loops
-ldm-plan -insert-dma; default -O3), or with the swir-opt pass flags of
--pipeline instead, verifying after every pass. Then it prints, per kernel
and largest first, what :mod:`swir.costmodel.cost` counts and models: the
modeled time, what bounds it, how close that is to the roofline bound, the
compute efficiency, flops and DMA bytes, within 120 columns; --wide adds LDM
use, DMA operations, the share of small transfers and the DMA traffic over
the I/O lower bound of conv / matmul kernels; a totals row; and the machine
constants. --json writes the same as JSON, --plot a roofline plot (needs
matplotlib). Output files are written only when everything succeeded. The
work is swir.api's (swir.report); this module is its command line.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from swir import __version__
from swir.api.passes import split_flags
from swir.api.reporting import ReportJob, lower_and_model
from swir.api.report_table import micro_sign
# plotted and key_text: the tests draw the key from here
from swir.api.roofline import key_text, plot_format, plotted  # noqa: F401
from swir.costmodel.cost import DMA_ASSUMPTIONS
from swir.diagnostics import Diagnostic
from swir.parser import read_source
from swir.passes.pipelines import DEFAULT_LEVEL
from swir.progress import for_terminal
from swir.target import TARGETS, Target, default_target

from . import swir_opt
from .driver import (
    UsageError,
    check_writable,
    command_line_error,
    opt_level,
    run_tool,
    take_weights_from,
    use_cache,
    write_files,
)
from .swir_cg import pass_option_lines, ranks_option
from .swir_opt import Options, global_option

PROG = "swir-report"
VALUE_OPTIONS = ("--func", "--json", "--plot", "--machine", "--pipeline", "--target", "--ranks",
                 "--split")


# ---------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------

def usage(target: Target | None = None) -> str:
    """The help, with the pass options' defaults for ``target`` (the one given
    before --help; else the default target, as the module is not read yet)."""
    lines = [f"usage: {PROG} IN.swir [options] [--PASS-OPTION=VALUE ...]", "",
             "Lowers a swir module (any stage) to the dma stage as swir-cg does and prints",
             "each kernel's modeled Sunway cost (swir.costmodel.cost), largest first.", "",
             "Options:",
             ("  -O0, -O1, -O3              the optimisation level (default: "
             f"-{DEFAULT_LEVEL}; swir-cg --help lists its passes)"),
             "  --pipeline 'PASSES'        run these swir-opt pass flags instead, e.g.",
             "                             '-ldm-plan{strategy=greedy} -insert-dma'; the",
             "                             module must end at the dma stage",
             "  --func NAME                the function whose run is modeled (default: what",
             "                             swir-run runs: @main, else the only function)",
             "  --machine NAME             the DMA assumptions: "
             + ", ".join(DMA_ASSUMPTIONS) + " (default: default)",
             "  --target NAME              the machine planned for and modeled: "
             + ", ".join(TARGETS) + " (default: the module's,",
             f"                             else {default_target().name})",
             "  --ranks N                  model the MPI program of swir-cg --ranks N (one rank",
             "                             per core group): the collectives' time, and the",
             "                             speed-up over one core group",
             "  --split data|model|auto    how the ranks share the work (swir-cg --split)",
             "  --weights-from DIR         also read weight files (file \"...\") from DIR and",
             "                             below (default: only the module's folder and below)",
             "  --wide                     every column (vector, LDM, DMA operations, small and",
             "                             unaligned transfers, the I/O lower bound); by default",
             "                             the essential ones, within 120 columns",
             "  --json FILE                write the report as JSON",
             "  --plot FILE                write a roofline plot (PNG; needs matplotlib: the",
             "                             report extra, pip install 'swir[report]')",
             "  -q, --quiet                no progress bar (drawn only on a terminal) and no",
             "                             closing line naming the files written",
             "  --help, --version", "",
             "Pass options (given to every pass of the pipeline that takes them; the default is",
             "the one at each -O level):"]
    lines += pass_option_lines(target or default_target())
    lines += ["", "Columns: docs/swir-report.md."]
    return "\n".join(lines) + "\n"


@dataclass
class Command(ReportJob):
    """swir-report's command line: the report job, and what the tool writes."""

    json: str | None = None
    plot: str | None = None
    quiet: bool = False
    wide: bool = False               # every column, not only the essential ones


def split_pipeline(argv: list[str]) -> tuple[list[str], range]:
    """argv with the value of --pipeline replaced by its flags (so that
    diagnostics point at the flag), and where those flags are."""
    at = [i for i, a in enumerate(argv) if a == "--pipeline" or a.startswith("--pipeline=")]
    if not at:
        return argv, range(0)
    if len(at) > 1:
        raise command_line_error(PROG, argv, at[1], "--pipeline is given more than once")
    i = at[0]
    if argv[i] == "--pipeline":
        if i + 1 >= len(argv):
            raise command_line_error(PROG, argv, i, "'--pipeline' needs a value")
        value, rest = argv[i + 1], argv[i + 2:]
    else:
        value, rest = argv[i][len("--pipeline="):], argv[i + 1:]
    flags = split_flags(value)
    return argv[:i] + ["--pipeline"] + flags + rest, range(i + 1, i + 1 + len(flags))


def parse_args(argv: list[str]) -> Command:
    argv, span = split_pipeline(argv)
    c = Command(input=None, argv=argv)
    i = 0
    while i < len(argv):
        a = argv[i]
        if i in span:
            pipeline_flag(c, i)
        elif a in ("-h", "--help"):
            sys.stdout.write(usage(c.target))
            raise SystemExit(0)
        elif a == "--version":
            print(f"{PROG} {__version__}")
            raise SystemExit(0)
        elif a == "--pipeline":
            c.pipeline = []
        elif a in ("-q", "--quiet"):
            c.quiet = True
        elif a == "--wide":
            c.wide = True
        elif a in VALUE_OPTIONS or a.split("=")[0] in VALUE_OPTIONS:
            i = value_option(c, i)
            continue
        elif a.startswith("-O"):
            c.level = opt_level(PROG, argv, i)
        elif a.startswith("--"):
            global_option(a, i, c.globals)
        elif a.startswith("-") and a != "-":
            raise command_line_error(PROG, argv, i, f"unknown option '{a}' (see {PROG} --help)")
        elif c.input is not None:
            raise command_line_error(PROG, argv, i, f"more than one input file ('{a}')")
        else:
            c.input = a
        i += 1
    return checked(c)


def value_option(c: Command, i: int) -> int:
    """``--name VALUE`` or ``--name=VALUE``; returns the index after it."""
    a = c.argv[i]
    name, eq, value = a.partition("=")
    if not eq:
        if i + 1 >= len(c.argv):
            raise command_line_error(PROG, c.argv, i, f"'{a}' needs a value")
        value = c.argv[i + 1]
    if name == "--machine" and value not in DMA_ASSUMPTIONS:
        raise command_line_error(PROG, c.argv, i, f"unknown machine '{value}' (machines: "
                                 f"{', '.join(DMA_ASSUMPTIONS)})")
    if name == "--target":
        c.target = swir_opt.target_option(PROG, c.argv, i)[0]
    elif name in ("--ranks", "--split"):
        at = i + (0 if eq else 1)
        c.globals[name[2:]] = (value, at)
        if name == "--ranks":
            c.ranks = ranks_option(c.argv, value, at, PROG)
    else:
        setattr(c, name[2:], value)
    return i + (1 if eq else 2)


def pipeline_flag(c: Command, i: int) -> None:
    """One flag of --pipeline, read by swir-opt's own parser: a pass (with its
    options), a level, or a global pass option."""
    a = c.argv[i]
    if a in ("-h", "--help", "--version", "-o", "--output") or not a.startswith("-") or a == "-":
        raise command_line_error(PROG, c.argv, i, f"'{a}' in --pipeline is not a pass flag "
                                 "(-PASS{opt=value,...}, -O0/-O1/-O3 or --OPTION=VALUE)")
    try:
        o = swir_opt.parse_args([a])
    except Diagnostic as d:
        raise command_line_error(PROG, c.argv, i, d.message) from None
    if o.output is not None or o.flags != Options().flags:
        raise command_line_error(PROG, c.argv, i, f"'{a}' is a swir-opt flag, not a pass: "
                                 "--pipeline takes passes and pass options")
    assert c.pipeline is not None
    c.pipeline += [(name, opts, i) for name, opts, _ in o.passes]
    c.globals.update({k: (v, i) for k, (v, _) in o.globals.items()})


def checked(c: Command) -> Command:
    if c.input is None:
        raise UsageError(f"no input file (see {PROG} --help)")
    if c.pipeline is not None and c.level is not None:
        raise UsageError(f"-{c.level} and --pipeline both choose the passes; put -{c.level} "
                         "into the --pipeline flags")
    if c.pipeline is None and c.level is None:
        c.level = DEFAULT_LEVEL
    if "split" in c.globals and c.ranks is None:
        raise UsageError("--split says how --ranks share the work: give --ranks N too")
    if c.ranks is not None and c.pipeline is not None:
        raise UsageError("--ranks adds -distribute to the level's pipeline; with --pipeline, "
                         "put -distribute{ranks=N} into the --pipeline flags")
    if c.json is not None and c.plot is not None and \
            os.path.abspath(c.json) == os.path.abspath(c.plot):
        raise UsageError(f"--json and --plot both name '{c.json}'")
    for path, what in ((c.json, "--json"), (c.plot, "--plot")):
        if path is not None:
            check_writable(path, what)
    if c.plot is not None:
        plot_format(c.plot)
    return c


# ---------------------------------------------------------------------------

def main(argv: list[str]) -> int:
    argv = take_weights_from(PROG, argv)
    try:
        c = parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    use_cache(None)
    assert c.input is not None
    report = lower_and_model(c, read_source(c.input), for_terminal(c.quiet))
    jobs: list[tuple[str, bytes]] = []
    if c.json is not None:
        jobs.append((c.json, report.json().encode()))
    if c.plot is not None:
        jobs.append((c.plot, report.image(c.plot)))
    write_files(jobs)    # type: ignore[arg-type]
    sys.stdout.write(report.text(wide=c.wide, micro=micro_sign()))
    if jobs and not c.quiet:
        sys.stdout.flush()
        print(f"{PROG}: wrote {' and '.join(path for path, _ in jobs)}", file=sys.stderr)
    return 0


def entry() -> None:
    sys.exit(run_tool(PROG, main))


if __name__ == "__main__":
    entry()
