"""swir-report's table (and its JSON): a CostReport as text, one row per
kernel, largest modeled time first (docs/swir-report.md, "The table")."""

from __future__ import annotations

import json
import sys
from typing import Any

from swir.costmodel.cost import CostReport, KernelCost, Machine
from swir.target import Target

from .names import fitted_names, wrapped


LEFT = {"kernel", "shape", "bound"}


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


def _broadcast_line(m: Machine) -> str:
    """How the machine broadcasts: one BCAST_MODE DMA, or (with RMA) CPE 0's
    DMA and two RMA hops (docs/cost-model.md, "RMA broadcasts")."""
    if m.rma:
        return (f"  broadcast: CPE 0's DMA get, then RMA along row 0 and down the columns, "
                f"{m.rma_startup_cycles} cycles and {m.rma_bandwidth / 1e9:,.2f} GB/s per hop "
                f"(assumed), {m.bcast_fixed_cycles} cycles per broadcast, every CPE waiting")
    return (f"  broadcast {m.bcast_bandwidth / 1e9:,.2f} GB/s from memory, half of it with "
            f"{m.bcast_half_block} B blocks, {m.bcast_fixed_cycles} cycles per broadcast, "
            "every CPE waiting")


def machine_lines(m: Machine, name: str, registers: bool = False,
                  narrow: bool = False) -> list[str]:
    """The machine's figures; ``registers``: also register communication's
    (when a kernel sends or receives); ``narrow``: within WIDTH columns."""
    dma = (f"  DMA {m.bandwidth / 1e9:,.2f} GB/s achievable ({m.dma_efficiency:.0%} of "
           f"{m.peak_bandwidth / 1e9:g} GB/s peak), half of it with {m.half_block} B blocks,")
    startup = (f"start-up {m.dma_startup_cycles} cycles per DMA (its share below "
               f"{m.startup_bytes} B),")
    lines = [(f"machine '{name}': {m.cpes} CPEs at {m.clock_hz / 1e9:g} GHz, peak "
              f"{m.peak_flops / 1e9:,.1f} GFLOPS ({m.cpe_flops / 1e9:g} per CPE), "
              f"LDM {m.ldm_bytes:,} B per CPE;")]
    lines += [dma, "    " + startup] if narrow else [f"{dma} {startup}"]
    lines += [(f"  one CPE's DMAs drawing at most {m.cpe_bandwidth / 1e9:,.2f} GB/s "
               "(assumed; fewer busy CPEs draw less);"),
              _broadcast_line(m) + (";" if registers else "")]
    if registers:
        lines.append(f"  register communication {m.reg_cycles_per_vector} cycle(s) per vector "
                     f"sent or received, {m.reg_latency_cycles} cycles from send to receive "
                     "(assumed)")
    return lines


def render(r: CostReport, info: dict[str, Any], micro: str = "µs", wide: bool = False) -> str:
    """The report as swir-report prints it: the essential columns within
    WIDTH columns, or (``wide``) every column on lines as long as they get."""
    return render_wide(r, info, micro) if wide else render_brief(r, info, micro)


def head_line(r: CostReport, info: dict[str, Any]) -> str:
    """What was modeled and how it was lowered."""
    how = f"lowered at -{info['level']} by " if info["level"] else "lowered by --pipeline "
    how = how + info["_compact"] if info["pipeline"] else "no passes run"
    return f"module \"{info['module']}\", @{r.function}: {info['stage']} stage, {how}"


def render_wide(r: CostReport, info: dict[str, Any], micro: str = "µs") -> str:
    """Every column (swir-report --wide)."""
    head = [head_line(r, info), ""]
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


WIDTH = 120                  # the longest line of the default report
# The default table's columns, each the wide table's column of that name, or "bound".
BRIEF = ("#", "kernel", "shape", "modeled", "bound", "roofline", "compute eff.", "flops",
         "DMA bytes")
BRIEF_NOTES = [
    "modeled: the kernel's modeled time over all its spawns; bound: what sets it, DMA "
    "(DMA time > compute time) or compute;",
    "roofline: the roofline bound as a share of the modeled time;",
    "compute eff.: the flops at the busy CPEs' vector FMA peak over the modeled compute time;",
    "--wide adds vector, LDM, DMA operations, small and unaligned transfers, and the I/O "
    "lower bound (docs/swir-report.md)."]


def render_brief(r: CostReport, info: dict[str, Any], micro: str = "µs") -> str:
    """The essential columns, every line at most WIDTH columns: long kernel
    names shortened (uniquely, with an ellipsis) to fit."""
    t: Target = info["_target"]
    full = list(columns(t))
    rows = [kernel_row(n, k, micro) + [bound(k)] for n, k in enumerate(r.kernels, 1)]
    total = totals_row(r, micro) + [f"DMA {sum(bound(k) == 'DMA' for k in r.kernels)}"
                                    f"/{len(r.kernels)}"]
    pick = [(full + ["bound"]).index(c) for c in BRIEF]
    rows = [[row[j] for j in pick] for row in rows]
    total = [total[j] for j in pick]
    rest = aligned([[c for c in BRIEF if c != "kernel"]] + [row[:1] + row[2:] for row in rows]
                   + [total[:1] + total[2:]])
    room = WIDTH - max(len(line) for line in rest) - 2
    names = fitted_names([row[1] for row in rows], max(room, 12), ascii_only=micro != "µs")
    for row, name in zip(rows, names):
        row[1] = name
    table = aligned([list(BRIEF)] + rows + [total])
    rule = "-" * max(len(line) for line in table)
    notes = [""] + BRIEF_NOTES + machine_lines(r.machine, info["machine_name"],
                                               any(k.reg_sends or k.reg_recvs for k in r.kernels),
                                               narrow=True)
    ranks = rank_lines(r, info, micro, dict(zip((k.name for k in r.kernels), names))) \
        if "one_core_group_s" in info else []
    lines = [head_line(r, info), ""] + table[:1] + [rule] + table[1:-1] + [rule] + table[-1:]
    return "\n".join(wrapped(lines + ranks + notes, WIDTH)) + "\n"


def bound(k: KernelCost) -> str:
    """What sets the kernel's modeled time: its DMA or its compute."""
    return "DMA" if k.dma_s > k.compute_s else "compute"


def rank_lines(r: CostReport, info: dict[str, Any], micro: str,
               names: dict[str, str] | None = None) -> list[str]:
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
    lines += layer_lines(r, micro, names or {})
    kernels = r.total("modeled_s")
    lines.append(f"per rank: kernels {seconds(kernels, micro)} (compute "
                 f"{seconds(r.total('compute_s'), micro)}, DMA {seconds(r.total('dma_s'), micro)}"
                 f"), communication {seconds(r.communication_s, micro)} in "
                 f"{len(r.collectives)} collectives; modeled {seconds(r.modeled_s, micro)}")
    speedup = one / r.modeled_s if r.modeled_s else float("inf")
    lines.append(f"one core group: {seconds(one, micro)}; speed-up on {r.ranks} ranks: "
                 f"{speedup:.2f}x (parallel efficiency {speedup / r.ranks:.0%})")
    return lines


def layer_lines(r: CostReport, micro: str, names: dict[str, str]) -> list[str]:
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
            rows.append([str(n), names.get(k.name, k.name), seconds(k.compute_s, micro),
                         seconds(k.dma_s, micro),
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

