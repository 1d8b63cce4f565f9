"""swir-cg: compile a swir module to the Sunway athread C project.

    swir-cg IN.swir -o DIR [--force] [--func NAME] [--print-pipeline] [--stats]
            [--PASS-OPTION=VALUE ...]

The module may be at any stage; swir-cg runs what is left of the default
pipeline (graph clean-up, -lower-loops, -ldm-plan, -insert-dma), verifying the
result (after every pass with --verify-each), then writes DIR: main.c, layers.h, layers.c, layers_mix.h,
layers_slave.c, Makefile, weights.bin and the emulation runtime in emu/.
``make -C DIR`` builds for Sunway with sw5cc, ``make -C DIR emu`` for this
machine. DIR is written completely or not at all; an existing DIR is replaced
only with --force. With --train, the entry function is a training step and
the program trains (docs/codegen.md, "Training programs").
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass

from swir import __version__, cache
from swir.api import compiling as compile_job
# level_passes and lowering: swir-report (and tests) build its pipelines as swir-cg's
from swir.api.compiling import CompileJob, level_passes, lowering  # noqa: F401
from swir.api.passes import field_type, global_option, target_option
from swir.codegen.names import file_stem
from swir.ir.core import Module
from swir.parser import read_source
from swir.passes.manager import option_default, option_flag, option_text
from swir.passes.pipelines import (
    DEFAULT_LEVEL,
    LOWERING,
    OPT_LEVELS,
    compile_pipeline,
    level_options,
    pipeline_flags,
)
from swir.progress import for_terminal
from swir.target import TARGETS, Target, default_target

from .driver import (
    WEIGHTS_FROM_HELP,
    UsageError,
    command_line_error,
    opt_level,
    run_tool,
    take_weights_from,
    use_cache,
)
from .swir_opt import print_pass_times, print_statistics

PROG = "swir-cg"

# What each stage still needs at the default optimisation level, in order.
PIPELINE = {stage: compile_pipeline(stage) for stage in LOWERING}


def usage(target: Target) -> str:
    lines = [f"usage: {PROG} IN.swir -o DIR [options]", "",
             "Compiles a swir module (any stage) to the Sunway athread C project in DIR,",
             f"running what is left of the pipeline (at -{DEFAULT_LEVEL}):"]
    for stage in PIPELINE:
        lines.append(f"  {stage + ':':<10} " + (" ".join(pipeline_flags(stage)) or "(nothing)"))
    lines += ["", "Optimisation levels (graph passes a graph-stage module runs first):"]
    for level, names in OPT_LEVELS.items():
        lines.append(f"  -{level:<25} " + (" ".join(f"-{n}" for n in names) or "(none)"))
    lines += ["", "Options:",
              "  -o DIR                     the project directory to write",
              "  --force                    replace DIR if it exists",
              "  --func NAME                the function the program runs (default: main)",
              "  --print-pipeline           print the passes that will run, with their options",
              "  --no-simd                  write every CPE loop nest as scalar C (no floatv4 / "
              "doublev4 micro-kernels)",
              "  --stats                    report each pass's statistics",
              "  --train                    a training program: the entry function is a "
              "training step (attributes {carried = [...]}); the program runs --steps of it "
              "over batches and can --save the trained weights (docs/codegen.md)",
              "  -j N, --jobs N             processes planning loop nests and measuring "
              "trial lowerings at once (default: the cores; the C is the same for any N)",
              "  --cache-dir DIR            keep plan searches and trial measurements in DIR "
              f"for later compiles (default: ${cache.ENV}, else none; safe to delete)",
              "  --ranks N                  an MPI program for N ranks, one per core group "
              "(4 per SW26010 chip): -distribute shares the work before -fuse",
              "  --split data|model|auto    how the ranks share it: the batch, each conv's and "
              "matmul's output channels, or data when the batch divides (default)",
              "  " + WEIGHTS_FROM_HELP,
              "  --time-passes              report the time each pass took",
              "  --verify-each              verify the IR after every pass, not only at the end "
              "(finds the pass that broke it)",
              f"  --target NAME              the machine: {', '.join(TARGETS)} (default: a planned "
              f"module's own, else {default_target().name})",
              "  -q, --quiet                no progress bar (drawn only on a terminal) and no "
              "closing line",
              "  --help, --version", "",
              "Pass options (given to every pass in the pipeline that takes them; the "
              "default is", "the one at each -O level):"]
    lines += pass_option_lines(target)
    lines += ["", "Build: make -C DIR (Sunway, sw5cc) or make -C DIR emu (this machine).",
              "Run:   DIR/NAME_emu --input FILE ... --output FILE ... [--stats FILE.json]",
              "       (--train: DIR/NAME_emu --input FILE ... --steps N --save FILE "
              "--loss-log FILE)",
              "       (--ranks N: mpirun -np N --oversubscribe DIR/NAME_emu ..., or make -C DIR "
              "emu-run ARGS='...')"]
    return "\n".join(lines) + "\n"


def pass_option_lines(target: Target) -> list[str]:
    """One line per option of the passes swir-cg can run: what it does (as
    the last pass taking it says: the lowering's, not a trial's), which
    passes take it, and its default at each optimisation level (for ``target``)."""
    from swir.passes import pass_class
    graph = [n for level in OPT_LEVELS for n in OPT_LEVELS[level]]
    order = list(dict.fromkeys(graph + LOWERING["graph"]))
    takers: dict[str, list[str]] = {}
    for name in order:
        for f in pass_class(name).options():  # type: ignore[union-attr]
            takers.setdefault(option_flag(f.name), []).append(name)
    lines = []
    for flag, names in takers.items():
        fields = {n: next(f for f in pass_class(n).options()   # type: ignore[union-attr]
                          if option_flag(f.name) == flag) for n in names}
        owner = names[-1]
        also = f"; also {', '.join('-' + n for n in names[:-1])}" if len(names) > 1 else ""
        defaults: dict[str, list[str]] = {}
        for n in reversed(names):
            defaults.setdefault(level_defaults(n, fields[n], target), []).append(f"-{n}")
        default = next(iter(defaults)) if len(defaults) == 1 else \
            "; ".join(f"{v} ({', '.join(ns)})" for v, ns in defaults.items())
        f = fields[owner]
        text = f"--{flag}=<{field_type(f).__name__}>"
        lines.append(f"  {text:<26} {f.metadata.get('help', '')} (-{owner}{also}; "
                     f"default: {default})")
    return lines


def level_defaults(name: str, f, target: Target) -> str:
    """An option's default at each -O level that runs pass ``name``:
    ``64``, or ``greedy at -O0, -O1; search at -O3``."""
    at: dict[str, list[str]] = {}
    for level in OPT_LEVELS:
        if name in compile_pipeline("graph", level):
            value = level_options(name, level).get(option_flag(f.name),
                                                   option_default(f, target))
            at.setdefault(option_text(value), []).append(f"-{level}")
    if len(at) == 1:
        return next(iter(at))
    return "; ".join(f"{v} at {', '.join(levels)}" for v, levels in at.items())


@dataclass
class Command(CompileJob):
    """swir-cg's command line: the compile job, and what the tool prints."""

    print_pipeline: bool = False
    stats: bool = False
    quiet: bool = False
    time_passes: bool = False
    cache_dir: str | None = None


def parse_args(argv: list[str]) -> Command:
    c = Command(input=None, argv=argv, prog=PROG)  # type: ignore[arg-type]
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            sys.stdout.write(usage(c.target))
            raise SystemExit(0)
        if a == "--version":
            print(f"{PROG} {__version__}")
            raise SystemExit(0)
        if a in ("-o", "--output", "--func", "-j", "--jobs", "--cache-dir", "--ranks", "--split"):
            if i + 1 >= len(argv):
                raise command_line_error(PROG, argv, i, f"'{a}' needs a value")
            if a in ("--ranks", "--split"):
                c.globals[a[2:]] = (argv[i + 1], i + 1)
            elif a == "--func":
                c.func = argv[i + 1]
            elif a in ("-j", "--jobs"):
                c.globals["jobs"] = (argv[i + 1], i + 1)
            elif a == "--cache-dir":
                c.cache_dir = argv[i + 1]
            else:
                c.output = argv[i + 1]
            i += 2
            continue
        if a.startswith("-j") and a[2:].isdigit():
            c.globals["jobs"] = (a[2:], i)
            i += 1
            continue
        if a.startswith("--cache-dir="):
            c.cache_dir = a.partition("=")[2]
            i += 1
            continue
        if a.startswith("-O"):
            c.level = opt_level(PROG, argv, i)
        elif a in ("--force", "--print-pipeline", "--stats", "--quiet", "--time-passes",
                   "--verify-each"):
            setattr(c, a[2:].replace("-", "_"), True)
        elif a == "-q":
            c.quiet = True
        elif a == "--no-simd":
            c.simd = False
        elif a == "--train":
            c.train = True
        elif a == "--target" or a.startswith("--target="):
            c.target, after = target_option(PROG, argv, i)
            c.target_given = True
            if not c.target.codegen:
                raise command_line_error(
                    PROG, argv, i, f"code generation for the {c.target.title} is not supported "
                    "yet (its athread, DMA and SIMD interfaces are not described in public "
                    "sources swir has); swir-opt --target and swir-report --target plan and "
                    "model for it")
            i = after
            continue
        elif a.startswith("--"):
            global_option(a, i, c.globals)
        elif a.startswith("-") and a != "-":
            raise command_line_error(PROG, argv, i, f"unknown option '{a}' (see {PROG} --help; "
                                                    "to run passes of your own, use swir-opt)")
        else:
            if c.input is not None:
                raise command_line_error(PROG, argv, i, f"more than one input file ('{a}')")
            c.input = a
        i += 1
    if "ranks" in c.globals:
        c.ranks = ranks_option(argv, *c.globals["ranks"])
    elif "split" in c.globals:
        raise command_line_error(PROG, argv, c.globals["split"][1],
                                 "--split says how --ranks share the work: give --ranks N too")
    if c.input is None:
        raise UsageError("no input file (see swir-cg --help)")
    if c.output is None and not c.print_pipeline:
        raise UsageError("no output directory: give -o DIR")
    return c


def ranks_option(argv: list[str], value: str, index: int, prog: str = PROG) -> int:
    """--ranks N: a whole number of ranks, at least 1."""
    if not (value.isascii() and value.isdigit()) or int(value) < 1:
        raise command_line_error(prog, argv, index, f"--ranks needs a whole number of MPI "
                                                    f"ranks, at least 1, got '{value}'")
    return int(value)


def main(argv: list[str]) -> int:
    argv = take_weights_from(PROG, argv)
    try:
        c = parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    use_cache(c.cache_dir)
    text = read_source(c.input)
    module, passes, keep = compile_job.prepare(c, text)
    if c.print_pipeline:
        print(" ".join(p.spelling() for p in passes) or "(no passes)")
        if c.output is None:
            return 0
    progress = for_terminal(c.quiet)
    # Verifying after every pass costs more than some passes; the result is
    # verified, and a pass that broke it is found by running again.
    manager = compile_job.lower(c, module, passes, text, sys.stderr, progress)
    if c.time_passes:
        print_pass_times(manager, PROG)
    if c.stats:
        print_statistics(manager)
    compile_job.write(c, module, passes, keep, progress)
    if not c.quiet:
        assert c.output is not None
        print(done_line(c.output, module), file=sys.stderr)
    return 0


def done_line(out: str, module: Module) -> str:
    """What was written where, and how to build and run it."""
    kernels = sum(1 for f in module.functions if f.target == "cpe")
    program = os.path.join(out, file_stem(module.name) + "_emu")
    return (f"{PROG}: wrote {out} ({kernels} CPE kernel{'s' if kernels != 1 else ''}); "
            f"make -C {shlex.quote(out)} emu builds {shlex.quote(program)}")


def entry() -> None:
    sys.exit(run_tool(PROG, main))


if __name__ == "__main__":
    entry()
