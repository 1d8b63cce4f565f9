"""swir-report: the modeled Sunway cost of a swir module, kernel by kernel.

    swir-report IN.swir [-O0|-O1|-O3] [--pipeline PASSES] [--func NAME]
                [--machine NAME] [--json OUT.json] [--plot OUT.png]
                [--PASS-OPTION=VALUE ...]

The module may be at any stage. swir-report lowers it to the dma stage as
swir-cg would (the level's graph passes, then what is left of -lower-loops
-ldm-plan -insert-dma; default -O3), or with the swir-opt pass flags of
--pipeline instead, verifying after every pass. Then it prints, per kernel
and largest first, what :mod:`swir.costmodel.cost` counts and models: flops,
LDM use, DMA operations and bytes, the share of small transfers, the modeled
time, how close that is to the roofline bound, and the DMA traffic over the
I/O lower bound of conv / matmul kernels; a totals row; and the machine
constants. --json writes the same as JSON, --plot a roofline plot (needs
matplotlib). Output files are written only when everything succeeded.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swir import __version__
from swir.costmodel.cost import (
    DMA_ASSUMPTIONS,
    CostReport,
    KernelCost,
    Machine,
    cost_report,
    dma_assumptions,
)
from swir.costmodel.traffic import TrafficError
from swir.diagnostics import Diagnostic
from swir.parser import parse_module, read_source
from swir.passes.manager import Pass, PassManager, option_default, option_flag, option_text
from swir.passes.pipelines import DEFAULT_LEVEL
from swir.progress import for_terminal
from swir.target import TARGETS, Target, default_target, target_of
from swir.verifier import verify

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
from .swir_cg import level_passes, lowering, pass_option_lines, ranks_option
from .swir_opt import Options, global_option

PROG = "swir-report"
VALUE_OPTIONS = ("--func", "--json", "--plot", "--machine", "--pipeline", "--target", "--ranks",
                 "--split")
PLOT_LABELS = 40             # the plot numbers at most this many kernels
# A --pipeline token: a run of non-blanks, where {...} and "..." may hold blanks.
_TOKEN = re.compile(r'(?:\{(?:"(?:[^"\\]|\\.)*"|[^}"])*\}?|"(?:[^"\\]|\\.)*"?|[^\s{"])+')


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
class Command:
    argv: list[str]                  # the command line, --pipeline split into its flags
    input: str | None = None
    level: str | None = None
    func: str | None = None
    machine: str = "default"
    target: Target | None = None     # None: the module's (swir.target.target_of)
    json: str | None = None
    plot: str | None = None
    quiet: bool = False
    pipeline: list[tuple[str, dict[str, str], int]] | None = None
    globals: dict[str, tuple[str, int]] = field(default_factory=dict)
    ranks: int | None = None         # --ranks N: -distribute first, and the speed-up


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
    flags = _TOKEN.findall(value)
    return argv[:i] + ["--pipeline"] + flags + rest, range(i + 1, i + 1 + len(flags))


def parse_args(argv: list[str]) -> Command:
    argv, span = split_pipeline(argv)
    c = Command(argv)
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
# Lowering and modeling
# ---------------------------------------------------------------------------

def pipeline(stage: str, c: Command) -> list[Pass]:
    """The passes that lower a ``stage`` module: as swir-cg's pipeline(), or
    the --pipeline flags."""
    if c.pipeline is not None:
        passes = c.pipeline
    else:
        assert c.level is not None
        passes = level_passes(stage, c.level, c.globals, c.ranks is not None)
    return lowering(passes, stage, c.globals, c.argv, PROG, c.target)


def compact_spelling(p: Pass) -> str:
    """``-name{opt=value}`` with only the options that differ from their
    defaults on the default target (so a pipeline for another target shows
    the figures it took: ``-ldm-plan{ldm-size=262144}``)."""
    opts = [f"{option_flag(f.name)}={option_text(getattr(p, f.name))}" for f in p.options()
            if getattr(p, f.name) != option_default(f, default_target())]
    return f"-{p.name}" + ("{" + ",".join(opts) + "}" if opts else "")


def lower_and_model(c: Command) -> tuple[CostReport, dict[str, Any]]:
    """Parse, verify, lower to the dma stage and model: the report (kernels
    sorted by modeled time, largest first) and what was run."""
    assert c.input is not None
    name = "<stdin>" if c.input == "-" else c.input
    source = read_source(c.input)
    module = parse_module(source, name)
    verify(module)
    stage = module.stage
    c.target = c.target or target_of(module.attrs)
    if c.ranks is not None and stage != "graph":
        raise UsageError(f"--ranks: {name} is at the {stage} stage; ranks are given to a "
                         "graph-stage module (-distribute splits it there)")
    passes = pipeline(stage, c)
    progress = for_terminal(c.quiet)
    PassManager(passes, verify_each=True, input_name=name, dump=sys.stderr,
                progress=progress, target=c.target).run(module)
    if module.stage != "dma":
        spelled = " ".join(compact_spelling(p) for p in passes) or "no passes"
        raise UsageError(f"the pipeline ({spelled}) leaves the module at the {module.stage} "
                         "stage; swir-report models the dma stage (end it with -insert-dma)")
    progress.begin("modeling")
    try:
        report = cost_report(module, dma_assumptions(c.target)[c.machine], c.func)
    except TrafficError as e:
        raise UsageError(str(e)) from None
    finally:
        progress.end()
    report.kernels.sort(key=lambda k: -k.modeled_s)
    info = {"input": name, "module": module.name, "stage": stage, "level": c.level,
            "pipeline": [p.spelling() for p in passes], "machine_name": c.machine,
            "_compact": " ".join(compact_spelling(p) for p in passes), "_target": c.target}
    if c.ranks is not None:
        info["split"] = module.attrs.get("split")
        info["one_core_group_s"] = one_core_group(c, source, name)
    return report, info


def one_core_group(c: Command, source: str, name: str) -> float:
    """The modeled time of the same module compiled for one core group (no
    -distribute): what --ranks's speed-up is measured against."""
    module = parse_module(source, name)
    alone = Command(c.argv, c.input, c.level, c.func, c.machine, c.target,
                    globals={k: v for k, v in c.globals.items() if k not in ("ranks", "split")},
                    quiet=True)
    PassManager(pipeline(module.stage, alone), verify_each=False, input_name=name,
                dump=sys.stderr, target=c.target).run(module)
    return cost_report(module, dma_assumptions(c.target)[c.machine], c.func).modeled_s


# ---------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------

LEFT = {"kernel", "shape"}


def columns(t: Target) -> tuple[str, ...]:
    """The table's heads: the small transfers and the block multiples are the
    target's (its small_transfer and dma_align, as the traffic counter counts)."""
    return ("#", "kernel", "shape", "flops", "vector", "compute eff.", "LDM B used / cap",
            "DMA ops", "DMA bytes", f"<{t.small_transfer} B", f"{t.dma_align} B-multiple blocks",
            "unaligned", "modeled", "roofline", "traffic/LB", "LB binds")


def seconds(s: float, micro: str = "µs") -> str:
    """A time with its unit: 12.34 µs, 5.67 ms, 1.234 s."""
    if s < 1e-3:
        return f"{s * 1e6:,.2f} {micro}"
    if s < 1:
        return f"{s * 1e3:,.2f} ms"
    return f"{s:,.3f} s"


def share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def percent(x: float, flops: float) -> str:
    """A share in percent, or '-' for a kernel without flops."""
    return f"{100 * x:.0f}%" if flops else "-"


def ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:,.2f}"


def kernel_row(n: int, k: KernelCost, micro: str) -> list[str]:
    return [str(n), k.name, k.shape, f"{k.flops:,}", percent(k.vector_share, k.flops),
            percent(k.compute_efficiency, k.flops), f"{k.ldm_bytes:,} / {k.ldm_capacity:,}",
            f"{k.dma_ops:,}", f"{k.dma_bytes:,}", f"{100 * k.small_share:.0f}%",
            share(k.blocks_32, k.blocks), f"{k.mem_unaligned:,} / {k.ldm_unaligned:,}",
            seconds(k.modeled_s, micro), f"{100 * k.roofline_share:.1f}%",
            ratio(k.traffic_over_bound), k.bound_binds or "-"]


def totals_row(r: CostReport, micro: str) -> list[str]:
    ks = r.kernels
    ops = sum(k.dma_ops for k in ks)
    small = sum(k.small_share * k.dma_ops for k in ks) / ops if ops else 0.0
    bounded = [k for k in ks if k.io_lower_bound_bytes]
    over = (sum(k.dma_bytes for k in bounded) / sum(k.io_lower_bound_bytes or 0 for k in bounded)
            if bounded else None)
    ldm = max((k.ldm_bytes for k in ks), default=0)
    cap = ks[0].ldm_capacity if ks else r.machine.ldm_bytes
    roof = r.total("roofline_s") / r.modeled_s if r.modeled_s else 1.0
    flops = r.total("flops")
    vector = r.total("vector_flops") / flops if flops else 1.0
    compute = r.total("compute_s")
    efficiency = r.total("peak_compute_s") / compute if compute else 1.0
    return ["", f"total ({n_kernels(len(ks))})", "", f"{int(flops):,}",
            percent(vector, flops), percent(efficiency, flops),
            f"max {ldm:,} / {cap:,}", f"{ops:,}", f"{sum(k.dma_bytes for k in ks):,}",
            f"{100 * small:.0f}%", share(sum(k.blocks_32 for k in ks), sum(k.blocks for k in ks)),
            f"{sum(k.mem_unaligned for k in ks):,} / {sum(k.ldm_unaligned for k in ks):,}",
            seconds(r.modeled_s, micro), f"{100 * roof:.1f}%", ratio(over), binds(bounded)]


def binds(bounded: list[KernelCost]) -> str:
    """How many kernels' lower bound each bound sets: "reads 20, LDM 3"."""
    n = sum(k.bound_binds == "reads" for k in bounded)
    return f"reads {n}, LDM {len(bounded) - n}" if bounded else "-"


def n_kernels(n: int) -> str:
    return f"{n} kernel" + ("" if n == 1 else "s")


def aligned(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[j]) for r in rows) for j in range(len(rows[0]))]
    out = []
    for r in rows:
        cells = [cell.ljust(w) if rows[0][j] in LEFT else cell.rjust(w)
                 for j, (cell, w) in enumerate(zip(r, widths))]
        out.append("  ".join(cells).rstrip())
    return out


def machine_lines(m: Machine, name: str, registers: bool = False) -> list[str]:
    """The machine's figures; ``registers``: also register communication's
    (when a kernel sends or receives)."""
    return [(f"machine '{name}': {m.cpes} CPEs at {m.clock_hz / 1e9:g} GHz, peak "
            f"{m.peak_flops / 1e9:,.1f} GFLOPS ({m.cpe_flops / 1e9:g} per CPE), "
            f"LDM {m.ldm_bytes:,} B per CPE;"),
            (f"  DMA {m.bandwidth / 1e9:,.2f} GB/s achievable ({m.dma_efficiency:.0%} of "
            f"{m.peak_bandwidth / 1e9:g} GB/s peak), half of it with {m.half_block} B blocks, "
            f"start-up {m.dma_startup_cycles} cycles per DMA (its share below {m.startup_bytes} B),"),
            (f"  one CPE's DMAs drawing at most {m.cpe_bandwidth / 1e9:,.2f} GB/s "
             "(assumed; fewer busy CPEs draw less);"),
            (f"  broadcast {m.bcast_bandwidth / 1e9:,.2f} GB/s from memory, half of it with "
             f"{m.bcast_half_block} B blocks, {m.bcast_fixed_cycles} cycles per broadcast, "
             "every CPE waiting" + (";" if registers else ""))] + ([
            (f"  register communication {m.reg_cycles_per_vector} cycle(s) per vector sent or "
             f"received, {m.reg_latency_cycles} cycles from send to receive (assumed)")]
            if registers else [])


def render(r: CostReport, info: dict[str, Any], micro: str = "µs") -> str:
    how = f"lowered at -{info['level']} by " if info["level"] else "lowered by --pipeline "
    how = how + info["_compact"] if info["pipeline"] else "no passes run"
    head = [f"module \"{info['module']}\", @{r.function}: {info['stage']} stage, {how}", ""]
    t: Target = info["_target"]
    rows = [list(columns(t))] + [kernel_row(n, k, micro) for n, k in enumerate(r.kernels, 1)]
    table = aligned(rows + [totals_row(r, micro)])
    rule = "-" * max(len(line) for line in table)
    notes = ["", ("vector: share of the flops vector instructions do; compute eff.: the flops "
                  "at the busy CPEs' vector FMA peak over the modeled compute time;"),
             (f"<{t.small_transfer} B: share of DMA transfers under {t.small_transfer} bytes; "
              "roofline: the roofline bound as a share of the modeled time;"),
             (f"{t.dma_align} B-multiple blocks: share of DMA blocks whose length is a multiple "
              f"of {t.dma_align} bytes; unaligned: transfers whose main-memory / LDM start"),
             f"  is not {t.dma_align}-byte aligned in every run (an upper bound: the program's "
             "--stats counts the misaligned ones exactly);",
             ("traffic/LB: DMA bytes over the I/O lower bound (conv / matmul kernels only): "
              "the larger of the bytes it must read and write"),
             ("  once (only the input elements it reads: strides, slices) and Hong-Kung's "
              "MACs / (2 sqrt(2 S)) words, S the LDM words tiles"),
             "  can use on all the CPEs (a broadcast fills every LDM by one read); LB binds: "
             "which of the two is larger (reads / LDM)."]
    notes += machine_lines(r.machine, info["machine_name"],
                           any(k.reg_sends or k.reg_recvs for k in r.kernels))
    ranks = rank_lines(r, info, micro) if "one_core_group_s" in info else []
    return "\n".join(head + table[:1] + [rule] + table[1:-1] + [rule] + table[-1:] + ranks
                     + notes) + "\n"


def rank_lines(r: CostReport, info: dict[str, Any], micro: str) -> list[str]:
    """--ranks: each collective's modeled time, the run's compute / DMA /
    communication split per rank, and the speed-up over one core group."""
    one = info["one_core_group_s"]
    lines = ["", f"{r.ranks} ranks, split {info['split']}: every rank runs the kernels above on "
             "its share, and the collectives below (docs/cost-model.md, \"Network\"):"]
    rows = [["#", "collective", "kind", "block bytes", "modeled"]]
    rows += [[str(n), c.what, c.kind, f"{c.block_bytes:,}", seconds(c.seconds, micro)]
             for n, c in enumerate(sorted(r.collectives, key=lambda c: -c.seconds), 1)]
    widths = [max(len(row[j]) for row in rows) for j in range(5)]
    lines += ["  " + "  ".join(cell.ljust(w) if j in (1, 2) else cell.rjust(w)
                               for j, (cell, w) in enumerate(zip(row, widths))).rstrip()
              for row in rows]
    lines += ["", "per layer, in program order (a kernel at its first spawn, with all its runs; "
              "each collective where the host makes it):"]
    lines += layer_lines(r, micro)
    kernels = r.total("modeled_s")
    lines.append(f"per rank: kernels {seconds(kernels, micro)} (compute "
                 f"{seconds(r.total('compute_s'), micro)}, DMA {seconds(r.total('dma_s'), micro)}"
                 f"), communication {seconds(r.communication_s, micro)} in "
                 f"{len(r.collectives)} collectives; modeled {seconds(r.modeled_s, micro)}")
    speedup = one / r.modeled_s if r.modeled_s else float("inf")
    lines.append(f"one core group: {seconds(one, micro)}; speed-up on {r.ranks} ranks: "
                 f"{speedup:.2f}x (parallel efficiency {speedup / r.ranks:.0%})")
    return lines


def layer_lines(r: CostReport, micro: str) -> list[str]:
    """The rank's run step by step: compute, DMA and communication time."""
    by_name = {k.name: k for k in r.kernels}
    steps = [s for s in r.steps if not isinstance(s, str) or s in by_name]
    steps += [k.name for k in r.kernels if k.name not in r.steps]
    rows = [["#", "step", "compute", "DMA", "communication", "modeled"]]
    for n, step in enumerate(steps, 1):
        if not isinstance(step, str):           # a collective
            rows.append([str(n), step.what, "", "", seconds(step.seconds, micro),
                         seconds(step.seconds, micro)])
        else:
            k = by_name[step]
            rows.append([str(n), k.name, seconds(k.compute_s, micro), seconds(k.dma_s, micro),
                         "", seconds(k.modeled_s, micro)])
    widths = [max(len(row[j]) for row in rows) for j in range(6)]
    return ["  " + "  ".join(cell.ljust(w) if j == 1 else cell.rjust(w)
                             for j, (cell, w) in enumerate(zip(row, widths))).rstrip()
            for row in rows]


def micro_sign() -> str:
    """µs where stdout can print it, else us."""
    try:
        "µ".encode(sys.stdout.encoding or "ascii")
        return "µs"
    except (UnicodeEncodeError, LookupError):
        return "us"


# ---------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------

def json_text(r: CostReport, info: dict[str, Any]) -> str:
    d: dict[str, Any] = {k: v for k, v in info.items() if not k.startswith("_")}
    d.update(r.as_dict())
    if "one_core_group_s" in info:
        d["speedup"] = info["one_core_group_s"] / r.modeled_s if r.modeled_s else None
    return json.dumps(d, indent=2, allow_nan=False) + "\n"


# ---------------------------------------------------------------------------
# The roofline plot
# ---------------------------------------------------------------------------

def plot_format(path: str) -> str:
    """The image format --plot writes (from the suffix; PNG without one)."""
    try:
        import matplotlib
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install matplotlib, or swir's report "
                         "extra (pip install 'swir[report]'; from a source checkout, "
                         "pip install '.[report]')") from None
    matplotlib.use("Agg")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    fmt = Path(path).suffix[1:].lower() or "png"
    supported = FigureCanvasAgg.get_supported_filetypes()
    if fmt not in supported:
        raise UsageError(f"--plot: cannot write a '.{fmt}' image (formats: "
                         f"{', '.join(sorted(supported))})")
    return fmt


def roofline_image(r: CostReport, info: dict[str, Any], path: str) -> bytes:
    fmt = plot_format(path)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure  # no pyplot: no global figure state
    fig = Figure(figsize=(12, 7), dpi=150)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.075, 0.09, 0.56, 0.80))
    key = fig.add_axes((0.655, 0.04, 0.335, 0.85))
    key.set_axis_off()
    points = plotted(r.kernels)
    limits(ax, r.machine, points)
    avoid = roofs(ax, r.machine)
    kernel_points(ax, points, r.modeled_s, avoid)
    key_text(key, r.kernels, points)
    level = f"-{info['level']}" if info["level"] else "a --pipeline"
    ax.set_title(f"Roofline of \"{info['module']}\" (@{r.function}) at {level}, "
                 f"{info['machine_name']} machine\nmodeled {seconds(r.modeled_s)} in "
                 f"{n_kernels(len(r.kernels))}", fontsize=11)
    ax.set_xlabel("operational intensity (flop/byte)", fontsize=10)
    ax.set_ylabel("attained performance (GFLOP/s)", fontsize=10)
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt)
    return buf.getvalue()


@dataclass
class Point:
    number: int
    kernel: KernelCost
    x: float             # flop/byte
    y: float             # GFLOP/s


def plotted(kernels: list[KernelCost]) -> list[Point]:
    """The kernels a log-log plot can show: some flops and some DMA."""
    return [Point(n, k, k.intensity, k.flops / k.modeled_s / 1e9)
            for n, k in enumerate(kernels, 1)
            if k.flops and k.dma_bytes and k.modeled_s > 0]


def limits(ax: Any, m: Machine, points: list[Point]) -> None:
    ridge = m.peak_flops / m.bandwidth
    xs = [p.x for p in points] + [ridge]
    ys = [p.y for p in points] + [m.peak_flops / 1e9]
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(min(xs) / 4, max(xs) * 4)
    ax.set_ylim(min(ys) / 4, m.peak_flops / 1e9 * 3)
    ax.grid(True, which="major", alpha=0.3)
    ax.grid(True, which="minor", alpha=0.08)


Box = tuple[float, float, float, float]     # x0, y0, x1, y1 in display pixels


def roofs(ax: Any, m: Machine) -> list[Box]:
    """min(peak, bandwidth x intensity), each part labelled with its value;
    returns where the labels are (for the kernels' numbers to avoid)."""
    peak, bw = m.peak_flops / 1e9, m.bandwidth / 1e9
    ridge = peak / bw
    x0, x1 = ax.get_xlim()
    ax.plot([x0, ridge], [bw * x0, peak], color="tab:red", lw=2)
    ax.plot([ridge, x1], [peak, peak], color="tab:blue", lw=2)
    ax.plot([x0, x1], [m.peak_bandwidth / 1e9 * x0, m.peak_bandwidth / 1e9 * x1],
            color="tab:red", lw=0.8, ls=":", alpha=0.6)
    ax.axvline(ridge, color="gray", lw=0.8, ls="--", alpha=0.6)
    labels = [ax.annotate(f"peak compute {peak:,.1f} GFLOP/s ({m.cpes} CPEs)", (x1, peak),
                          xytext=(-6, 5), textcoords="offset points", ha="right",
                          va="bottom", fontsize=9, color="tab:blue"),
              ax.annotate(f"ridge {ridge:.1f} flop/B", (ridge, peak), xytext=(4, -6),
                          textcoords="offset points", ha="left", va="top", fontsize=8,
                          color="gray")]
    # Above the dotted roof: no kernel can be there.
    xa = math.sqrt(x0 * ridge)           # halfway up the slope, in log space
    text = f"DMA {bw:,.2f} GB/s achievable (solid), {m.peak_bandwidth / 1e9:g} GB/s peak (dotted)"
    angle = slope_angle(ax, xa, bw)
    ax.annotate(text, (xa, m.peak_bandwidth / 1e9 * xa), xytext=(0, 6),
                textcoords="offset points", rotation=angle, rotation_mode="anchor",
                fontsize=9, color="tab:red", ha="center", va="bottom")
    renderer = ax.figure.canvas.get_renderer()
    boxes = [tuple(t.get_window_extent(renderer).extents) for t in labels]
    px, py = ax.transData.transform((xa, m.peak_bandwidth / 1e9 * xa))
    return boxes + along(px, py + 6 * ax.figure.dpi / 72, angle, len(text) * 5.2,
                         11, ax.figure.dpi / 72)


def along(x: float, y: float, angle: float, length: float, height: float,
          scale: float) -> list[Box]:
    """Boxes covering a text rotated by ``angle`` whose baseline is centred on
    (x, y): ``length`` and ``height`` in points."""
    c, s = math.cos(math.radians(angle)), math.sin(math.radians(angle))
    h = height * scale
    out = []
    for j in range(int(length / height) + 1):
        t = (j * height - length / 2) * scale
        cx, cy = x + t * c - h / 2 * s, y + t * s + h / 2 * c
        out.append((cx - h / 2, cy - h / 2, cx + h / 2, cy + h / 2))
    return out


def slope_angle(ax: Any, x: float, bw: float) -> float:
    """The on-screen angle of the line y = bw x (axes placed, limits set)."""
    (ax0, ay0), (ax1, ay1) = ax.transData.transform([(x, bw * x), (x * 2, bw * x * 2)])
    return math.degrees(math.atan2(ay1 - ay0, ax1 - ax0))


def kernel_points(ax: Any, points: list[Point], total: float, avoid: list[Box]) -> None:
    """Markers (area by share of the modeled time; colour by what bounds the
    kernel), numbered as the table."""
    for bound, color in (("DMA-bound", "tab:orange"), ("compute-bound", "tab:green")):
        pts = [p for p in points if is_dma_bound(p.kernel) == (bound == "DMA-bound")]
        if pts:
            ax.scatter([p.x for p in pts], [p.y for p in pts], s=[area(p, total) for p in pts],
                       color=color, alpha=0.75, edgecolors="black", linewidths=0.5,
                       label=bound, zorder=3)
    if points:
        legend = ax.legend(loc="lower right", fontsize=8, markerscale=0.6, framealpha=0.9)
        avoid = avoid + [tuple(legend.get_window_extent(ax.figure.canvas.get_renderer())
                               .extents)]
    place_labels(ax, [p for p in points if p.number <= PLOT_LABELS], total, avoid)


def is_dma_bound(k: KernelCost) -> bool:
    return k.dma_s > k.compute_s


def area(p: Point, total: float) -> float:
    return 12 + 400 * (p.kernel.modeled_s / total if total else 0)


# Label offsets in points, tried in order: right, above, left, below, diagonals.
OFFSETS = ((1, 0), (0, 1), (-1, 0), (0, -1), (1, 1), (-1, 1), (-1, -1), (1, -1))


def place_labels(ax: Any, points: list[Point], total: float, avoid: list[Box]) -> None:
    """Number the points; each number goes where it overlaps no marker, roof
    label or number placed before it (else farther out, with a leader line)."""
    scale = ax.figure.dpi / 72
    taken = avoid + [marker_box(ax, p, total) for p in points]
    for p in points:
        text = str(p.number)
        w, h = (4.6 * len(text) + 2) * scale, 9 * scale
        px, py = ax.transData.transform((p.x, p.y))
        r = (math.sqrt(area(p, total)) / 2 + 2) * scale
        chosen = None
        for ring in (1.0, 2.2, 3.4):
            for dx, dy in OFFSETS:
                cx, cy = px + dx * (r * ring + w / 2), py + dy * (r * ring + h / 2)
                box = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
                if not any(overlaps(box, t) for t in taken):
                    chosen = (ring, cx, cy, box)
                    break
            if chosen:
                break
        ring, cx, cy, box = chosen or (1.0, px + r + w / 2, py, (0, 0, 0, 0))
        taken.append(box)
        ax.annotate(text, (p.x, p.y), xytext=((cx - px) / scale, (cy - py) / scale),
                    textcoords="offset points", ha="center", va="center", fontsize=7.5,
                    zorder=4, arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "0.4"}
                    if ring > 1 else None)


def marker_box(ax: Any, p: Point, total: float) -> Box:
    px, py = ax.transData.transform((p.x, p.y))
    r = math.sqrt(area(p, total)) / 2 * ax.figure.dpi / 72
    return (px - r, py - r, px + r, py + r)


def overlaps(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def key_text(key: Any, kernels: list[KernelCost], points: list[Point]) -> None:
    """Beside the plot: n: kernel (modeled time), for the numbered kernels."""
    shown = {p.number for p in points}
    lines: list[tuple[str, str]] = [("kernels, by modeled time (point area ~ time):", "black")]
    for n, k in enumerate(kernels[:PLOT_LABELS], 1):
        name = k.name if len(k.name) <= 34 else k.name[:33] + "…"
        mark = "" if n in shown else "  *"
        lines.append((f"{n:>3}: {name} ({seconds(k.modeled_s)}){mark}",
                      "black" if n in shown else "0.45"))
    if len(kernels) > PLOT_LABELS:
        lines.append(((f"  … {len(kernels) - PLOT_LABELS} more kernels (only the "
                      f"{PLOT_LABELS} slowest are numbered)"), "0.3"))
    if any(n not in shown for n in range(1, min(len(kernels), PLOT_LABELS) + 1)):
        lines.append(("  * not plotted: no flops (a pure copy) is intensity 0,", "0.3"))
        lines.append(("    off the log axes; still in the totals", "0.3"))
    step = min(0.028, 0.99 / max(len(lines), 1))
    for j, (text, color) in enumerate(lines):
        key.text(0, 1 - j * step, text, transform=key.transAxes, va="top", ha="left",
                 family="monospace", fontsize=8 if step >= 0.022 else 7, color=color)


# ---------------------------------------------------------------------------

def main(argv: list[str]) -> int:
    argv = take_weights_from(PROG, argv)
    try:
        c = parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    use_cache(None)
    report, info = lower_and_model(c)
    jobs: list[tuple[str, bytes]] = []
    if c.json is not None:
        jobs.append((c.json, json_text(report, info).encode()))
    if c.plot is not None:
        jobs.append((c.plot, roofline_image(report, info, c.plot)))
    write_files(jobs)    # type: ignore[arg-type]
    sys.stdout.write(render(report, info, micro_sign()))
    if jobs and not c.quiet:
        sys.stdout.flush()
        print(f"{PROG}: wrote {' and '.join(path for path, _ in jobs)}", file=sys.stderr)
    return 0


def entry() -> None:
    sys.exit(run_tool(PROG, main))


if __name__ == "__main__":
    entry()
