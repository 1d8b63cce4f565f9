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
from pathlib import Path

from swir import __version__, cache
from swir.codegen.names import file_stem
from swir.codegen.project import Options as CodegenOptions
from swir.codegen.project import WriteError, check_project_dir, generate, write_project
from swir.analysis.calling import carried_names
from swir.ir.core import FileInit, Function, Module
from swir.parser import parse_module, read_source
from swir.passes.manager import Pass, PassManager, option_default, option_flag, option_text
from swir.passes.pipelines import (
    DEFAULT_LEVEL,
    LOWERING,
    OPT_LEVELS,
    compile_pipeline,
    level_options,
    pipeline_flags,
)
from swir.passes.options import reserve_bytes
from swir.progress import for_terminal
from swir.target import Target, default_target, target_of
from swir.verifier import VerificationError, module_attr_ldm, verify

from .driver import (
    WEIGHTS_FROM_HELP,
    UsageError,
    command_line_error,
    opt_level,
    run_tool,
    take_weights_from,
    use_cache,
)
from .swir_opt import (
    Options,
    build_passes,
    field_type,
    global_option,
    print_pass_times,
    print_statistics,
    target_option,
)

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
              f"  --target NAME              the machine ({default_target().name}, the only one swir-cg "
              "writes code for)",
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


class Command:
    def __init__(self) -> None:
        self.input: str | None = None
        self.output: str | None = None
        self.force = self.print_pipeline = self.stats = self.quiet = False
        self.time_passes = self.verify_each = False
        self.cache_dir: str | None = None
        self.simd = True
        self.train = False
        self.func = "main"
        self.level = DEFAULT_LEVEL
        self.globals: dict[str, tuple[str, int]] = {}
        self.target: Target = default_target()
        self.ranks: int | None = None      # --ranks N: an MPI program (-distribute)


def parse_args(argv: list[str]) -> Command:
    c = Command()
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


def check_ranks(module: Module, c: Command) -> None:
    """--ranks on a module past the graph stage: it must have been split for as many."""
    if c.ranks is None or module.stage == "graph":
        return
    if module.attrs.get("ranks") != c.ranks:
        have = (f"is split for {module.attrs['ranks']} ranks" if "ranks" in module.attrs
                else "is for one core group")
        raise UsageError(f"--ranks {c.ranks}: the {module.stage}-stage module {have}; ranks are "
                         "given to a graph-stage module (-distribute splits it there)")
    c.globals.pop("ranks", None)
    c.globals.pop("split", None)


def check_training(module: Module, c: Command) -> None:
    """--train: the entry function is a training step (its ``carried``
    attribute), and a module for several ranks was split by the batch before
    (-distribute would cut the carried state too)."""
    if not c.train:
        return
    f = module.lookup(c.func)
    if not isinstance(f, Function):
        return                  # the generator reports a missing entry function
    if not carried_names(f):
        raise UsageError(f"--train: @{f.name} has no 'carried' attribute, so it is not a "
                         "training step (attributes {carried = [@w, @b, ...]}: the globals "
                         "its last parameters carry)")
    if c.ranks is not None:
        raise UsageError("--train --ranks: a training step is shared over ranks in the IR "
                         "(stage ... {ranks = N, split = \"data\"}, with the allreduce of its "
                         "gradients); give that module without --ranks")


def pipeline(stage: str, c: Command, argv: list[str]) -> list[Pass]:
    return lowering(level_passes(stage, c.level, c.globals, c.ranks is not None), stage,
                    c.globals, argv, PROG, c.target)


def level_passes(stage: str, level: str, globals_: dict, ranks: bool = False
                 ) -> list[tuple[str, dict, int]]:
    """What swir-cg runs on a ``stage`` module at ``level``, as swir-opt's
    pass entries: each pass with the options the level gives it, except
    those the user gave (``globals_``); with ``ranks``, -distribute too."""
    return [(n, {k: v for k, v in level_options(n, level).items() if k not in globals_}, 0)
            for n in compile_pipeline(stage, level, ranks)]


def lowering(passes: list[tuple[str, dict, int]], stage: str, globals_: dict,
             argv: list[str], prog: str, target: Target | None = None) -> list[Pass]:
    """The passes, with the global options given to those that take them; a
    global option is an error when no pass runs."""
    if not passes:
        for k, (_, idx) in globals_.items():
            raise command_line_error(prog, argv, idx, f"unknown option '--{k}' (a {stage}-stage "
                                                      "module runs no passes)")
    return build_passes(Options(passes=passes, globals=globals_,
                                target=target or default_target()), argv, prog)


def check_ldm(module: Module, passes: list[Pass], c: Command, argv: list[str]) -> None:
    """swir-cg writes code for the machine: a plan for more LDM than a CPE
    has would build and then stop at run time (swir-opt and swir-report
    plan and model larger LDMs for studies)."""
    machine = c.target
    for p in passes:
        size = getattr(p, "ldm_size", None)
        if isinstance(size, int) and size > machine.ldm_bytes:
            given = c.globals.get("ldm-size")
            message = (f"an LDM of {size} bytes is more than the {machine.title} has "
                       f"({machine.ldm_bytes} bytes per CPE); swir-cg writes code for the "
                       "machine (swir-opt and swir-report plan and model larger ones)")
            if given is not None:
                raise command_line_error(PROG, argv, given[1], message)
            raise UsageError(message)
    planned = module_attr_ldm(module)
    if planned > machine.ldm_bytes:
        raise UsageError(f"{c.input} was planned for an LDM of {planned} bytes, more than the "
                         f"{machine.title} has ({machine.ldm_bytes} bytes per CPE)")


def ldm_reserve(passes: list[Pass]) -> int | None:
    """The LDM the plan left for the CPE stack and reply words (the emulation's
    capacity check uses it); None when the input was planned already (the
    generator then assumes -ldm-plan's default, 1/16 of the module's LDM)."""
    for p in passes:
        if p.name == "ldm-plan":
            r = p.ldm_reserve
            return reserve_bytes(p.ldm_size, r, p.target)  # type: ignore[attr-defined]
    return None


def main(argv: list[str]) -> int:
    argv = take_weights_from(PROG, argv)
    try:
        c = parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    assert c.input is not None
    use_cache(c.cache_dir)
    text = read_source(c.input)
    name = "<stdin>" if c.input == "-" else c.input
    module = parse_module(text, name)
    verify(module)
    planned = target_of(module.attrs)
    if not planned.codegen:
        raise UsageError(f"{name} was planned for the {planned.title} (its target attribute); "
                         "swir-cg writes code for the SW26010 only")
    check_ranks(module, c)
    check_training(module, c)
    keep = read_files(c.input, module)
    if c.output is not None:       # before the (possibly long) pipeline
        project_dir(c.output, c.force, keep)
    passes = pipeline(module.stage, c, argv)
    check_ldm(module, passes, c, argv)
    if c.print_pipeline:
        print(" ".join(p.spelling() for p in passes) or "(no passes)")
        if c.output is None:
            return 0
    progress = for_terminal(c.quiet)
    # Verifying after every pass costs more than some passes; the result is
    # verified, and a pass that broke it is found by running again (below).
    manager = PassManager(passes, verify_each=c.verify_each, input_name=name, dump=sys.stderr,
                          progress=progress, source=text, target=c.target)
    manager.run(module)
    if not c.verify_each:
        try:
            verify(module)
        except VerificationError:
            find_faulty_pass(text, name, c, argv)
            raise
    if c.time_passes:
        print_pass_times(manager, PROG)
    if c.stats:
        print_statistics(manager)
    progress.begin("generating C")
    try:
        files = generate(module, CodegenOptions(entry=c.func, source=name,
                                                ldm_reserve=ldm_reserve(passes), simd=c.simd,
                                                train=c.train))
        assert c.output is not None
        write_project(files, c.output, c.force, keep)
    except WriteError as e:
        raise UsageError(str(e)) from None
    finally:
        progress.end()
    if not c.quiet:
        print(done_line(c.output, module), file=sys.stderr)
    return 0


def find_faulty_pass(text: str, name: str, c: Command, argv: list[str]) -> None:
    """The pipeline left invalid IR behind (its input was valid): run it
    again, verifying after every pass, so the pass at fault is reported as
    an internal error with the IR it was given saved (PassBug)."""
    module = parse_module(text, name)
    PassManager(pipeline(module.stage, c, argv), verify_each=True, input_name=name,
                dump=sys.stderr, target=c.target).run(module)


def done_line(out: str, module: Module) -> str:
    """What was written where, and how to build and run it."""
    kernels = sum(1 for f in module.functions if f.target == "cpe")
    program = os.path.join(out, file_stem(module.name) + "_emu")
    return (f"{PROG}: wrote {out} ({kernels} CPE kernel{'s' if kernels != 1 else ''}); "
            f"make -C {shlex.quote(out)} emu builds {shlex.quote(program)}")


def read_files(input: str, module: Module) -> tuple[str, ...]:
    """The files the compilation reads (the input and its weight files):
    --force must not replace a directory holding one."""
    base = Path(module.base_dir or ".")
    weights = {str(base / g.init.path) for g in module.globals
               if isinstance(g.init, FileInit)}
    return tuple(([input] if input != "-" else []) + sorted(weights))


def project_dir(out: str, force: bool, keep: tuple[str, ...]) -> None:
    try:
        check_project_dir(out, force, keep)
    except WriteError as e:
        raise UsageError(str(e)) from None


def entry() -> None:
    sys.exit(run_tool(PROG, main))


if __name__ == "__main__":
    entry()
