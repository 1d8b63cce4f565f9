#!/usr/bin/env python3
"""Run a program built by `make emu` from a swir-cg project on .npy inputs,
check its outputs against reference outputs (e.g. from `swir-run ... --output
ref.npy`), and print what each CPE kernel did: LDM used, DMA traffic, time.

    python scripts/emu_check.py MODULE.swir PROGRAM --input X.npy [...] \\
        --reference REF.npy [...] [--rtol R] [--atol A] [--stats-json FILE]

MODULE is the swir module the project was generated from (any stage): its
function's signature gives the dtypes and shapes of the raw arrays the program
reads and writes. Tolerances default by dtype (f32: rtol 1e-4, atol 1e-5;
f64: rtol 1e-10, atol 1e-12; integers and booleans: exact). An output passes
when |out - ref| <= atol + rtol * |ref| at every element (numpy.allclose's
test); each result's line says so, with how close the worst element came to
its bound. Its largest relative difference |out - ref| / |ref| is printed
too, and may pass rtol where |ref| is small: atol covers those elements.
Exit status: 0 on PASS, 1 on FAIL (or when the program cannot be run), 2 on
a usage error.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from swir.codegen.emulate import EmulationError, run
from swir.diagnostics import Diagnostic
from swir.interp.arguments import default_function
from swir.interp.run import signature
from swir.ir.core import Function
from swir.parser import parse_module

LDM_BYTES = 64 * 1024          # one CPE's LDM on the SW26010
SMALL = 256                    # "small" DMA transfers: under this many bytes
# dtype kind/size -> (rtol, atol)
TOLERANCES = {"f4": (1e-4, 1e-5), "f8": (1e-10, 1e-12), "f2": (1e-2, 1e-3)}


def tolerance(dtype: np.dtype) -> tuple[float, float]:
    if dtype.kind != "f":
        return 0.0, 0.0
    return TOLERANCES.get(f"f{dtype.itemsize}", (1e-4, 1e-5))


CRITERION = "|out - ref| <= atol + rtol * |ref|"   # numpy.allclose's, elementwise


@dataclass
class Comparison:
    """One result against its reference under CRITERION."""

    ok: bool
    size: int
    max_abs: float      # max |out - ref|
    max_rel: float      # max |out - ref| / |ref|: not the criterion, which adds atol
    worst: float        # max |out - ref| / (atol + rtol * |ref|): the criterion holds iff <= 1
    why: str = ""       # what fails, where ("" when ok)


def compare(out: np.ndarray, ref: np.ndarray, rtol: float, atol: float) -> Comparison:
    """out against ref under CRITERION; NaN matches NaN only."""
    if out.shape != ref.shape:
        return Comparison(False, out.size, float("nan"), float("nan"), float("nan"),
                          f"shape {out.shape}, reference {ref.shape}")
    if out.size == 0:
        return Comparison(True, 0, 0.0, 0.0, 0.0)
    o, r = out.astype(np.float64), ref.astype(np.float64)
    bound = atol + rtol * np.abs(r)
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = np.abs(o - r)
        rel = diff / np.maximum(np.abs(r), np.finfo(np.float64).tiny)
        use = np.where(diff == 0, 0.0, diff / bound)    # inf where the bound is 0 (exact)
    both_nan = np.isnan(o) & np.isnan(r)
    diff[both_nan] = rel[both_nan] = use[both_nan] = 0.0
    use[np.isnan(use)] = np.inf                         # a NaN against a number
    bad = ~(diff <= bound) & ~both_nan                  # True wherever a NaN is left
    ok = not bool(bad.any())
    why = ""
    if not ok:
        i = np.unravel_index(int(np.argmax(bad)), out.shape)
        why = (f"{int(bad.sum())} of {out.size} elements out of tolerance, first at "
               f"{tuple(int(k) for k in i)}: {out[i]!s} vs {ref[i]!s}")
    return Comparison(ok, out.size, float(np.nanmax(diff)), float(np.nanmax(rel)),
                      float(np.max(use)), why)


def verdict(c: Comparison, rtol: float, atol: float) -> list[str]:
    """What was checked and how it came out: PASS or FAIL with the criterion,
    then how close the worst element came to its bound. The largest relative
    difference is printed too, but it is not what is checked: near 0, atol
    lets |out - ref| / |ref| be well over rtol."""
    exact = rtol == 0 and atol == 0
    criterion = "out == ref (exact)" if exact else f"{CRITERION} (rtol {rtol:g}, atol {atol:g})"
    if c.ok:
        head = f"PASS: {criterion} holds at all {c.size:,} elements"
    else:
        head = f"FAIL: {criterion} does not hold: {c.why}"
    if math.isnan(c.worst):                  # no elementwise comparison (shapes differ)
        return [head]
    if exact:
        return [head, f"  max abs diff {c.max_abs:.3g}"]
    if c.worst <= 1:
        worst = f"|out - ref| at {100 * c.worst:.3g}% of its bound"
    elif math.isfinite(c.worst):
        worst = f"|out - ref| at {c.worst:.3g}x its bound"
    else:
        worst = "a NaN against a number, or a difference where the bound is 0"
    rel = f"max rel diff {c.max_rel:.3g}"
    if c.ok and rtol > 0 and c.max_rel > rtol:
        rel += f" (over rtol only where |ref| < atol / rtol = {atol / rtol:g}, which atol covers)"
    return [head, f"  worst element: {worst}; max abs diff {c.max_abs:.3g}, {rel}"]


def kib(n: float) -> str:
    return f"{n / 1024:,.1f} KB"


def table(stats: dict) -> str:
    """The per-kernel table and its totals, columns aligned."""
    head = ["kernel", "spawns", "LDM/CPE", "of 64 KB", "gets", "puts", "bytes in",
            "bytes out", "<256 B", "wall ms"]
    right = [False] + [True] * (len(head) - 1)

    def row(name: str, s: dict) -> list[str]:
        transfers = s.get("transfers", s.get("gets", 0) + s.get("puts", 0))
        small = s.get("small_share", s.get("small_transfers", 0) / transfers if transfers else 0)
        return [name, f"{s.get('spawns', 0):,}", f"{s.get('ldm_peak', 0):,} B",
                f"{100 * s.get('ldm_peak', 0) / LDM_BYTES:.1f}%", f"{s.get('gets', 0):,}",
                f"{s.get('puts', 0):,}", f"{s.get('bytes_in', 0):,}",
                f"{s.get('bytes_out', 0):,}", f"{100 * small:.1f}%" if transfers else "-",
                f"{1000 * s.get('wall_seconds', 0.0):.2f}"]

    functions = stats.get("functions", {})
    rows = [row(n, s) for n, s in functions.items()]
    total = dict(stats.get("total") or {})
    if not total:   # older runtimes: sum here (maximum for the LDM high-water mark)
        for s in functions.values():
            for k in ("spawns", "gets", "puts", "transfers", "bytes_in", "bytes_out",
                      "small_transfers", "wall_seconds"):
                total[k] = total.get(k, 0) + s.get(k, 0)
            total["ldm_peak"] = max(total.get("ldm_peak", 0), s.get("ldm_peak", 0))
        total.pop("small_share", None)
    foot = row(f"total ({len(functions)} kernels)", total)
    widths = [max(len(r[i]) for r in [head, foot] + rows) for i in range(len(head))]

    def fmt(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if r else c.ljust(w)
                         for c, w, r in zip(cells, widths, right)).rstrip()
    rule = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(head), rule] + [fmt(r) for r in rows] + [rule, fmt(foot)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Run a `make emu` program, compare it with reference outputs and "
                    "print per-kernel LDM and DMA counters.")
    ap.add_argument("module", help="the swir module the project was generated from")
    ap.add_argument("program", help="the program `make emu` built (DIR/<module>_emu)")
    ap.add_argument("--input", "-i", action="append", default=[], metavar="X.npy",
                    help="an argument, in parameter order (repeat for each)")
    ap.add_argument("--reference", "-r", action="append", default=[], metavar="REF.npy",
                    help="a reference result, in result order (repeat for each)")
    ap.add_argument("--func", default=None, help="the function the program runs (default: main)")
    ap.add_argument("--rtol", type=float, default=None,
                    help=f"relative tolerance: rtol in {CRITERION} (default by dtype)")
    ap.add_argument("--atol", type=float, default=None,
                    help=f"absolute tolerance: atol in {CRITERION} (default by dtype)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of the program (default 1)")
    ap.add_argument("--stats-json", metavar="FILE", help="also save the program's --stats JSON")
    a = ap.parse_args(argv)

    try:
        path = Path(a.module)
        module = parse_module(path.read_text(), str(path))
        f = module.lookup(a.func) if a.func else default_function(module)
        if not isinstance(f, Function):
            raise Diagnostic(f"no function @{a.func} in {a.module}")
        params, results = signature(module, f)
    except (OSError, Diagnostic) as e:
        print(f"emu_check: {a.module}: {e}", file=sys.stderr)
        return 2
    if len(a.input) != len(params) or len(a.reference) != len(results):
        print(f"emu_check: @{f.name} takes {len(params)} input(s) and returns "
              f"{len(results)} result(s); given {len(a.input)} --input and "
              f"{len(a.reference)} --reference", file=sys.stderr)
        return 2
    inputs = [np.load(p) for p in a.input]
    refs = [np.load(p) for p in a.reference]

    program = Path(a.program)
    raw = sum(np.asarray(x).size * np.dtype(x.dtype).itemsize for x in inputs)
    print(f"running {program} on {len(inputs)} input(s) ({raw:,} bytes raw, little-endian)"
          + (f", {a.repeat} times" if a.repeat != 1 else ""))
    try:
        r = run(program, inputs, [p.type for p in params], results, repeat=a.repeat)
    except (EmulationError, OSError) as e:
        print(f"FAIL: {e}".rstrip())
        return 1
    if a.stats_json:
        Path(a.stats_json).write_text(json.dumps(r.stats, indent=1) + "\n")

    passed = True
    for i, (out, ref) in enumerate(zip(r.outputs, refs)):
        rtol, atol = tolerance(out.dtype)
        rtol = rtol if a.rtol is None else a.rtol
        atol = atol if a.atol is None else a.atol
        c = compare(out, ref, rtol, atol)
        passed &= c.ok
        head, *more = verdict(c, rtol, atol)
        print(f"result #{i} {out.dtype}{list(out.shape)} vs {a.reference[i]}: {head}")
        for line in more:
            print(line)
    print()
    print(f"per kernel ({r.stats.get('runs', a.repeat)} run(s); LDM/CPE = ldm_peak, the most "
          f"LDM any CPE held; <256 B = share of DMA transfers under {SMALL} bytes):")
    print(table(r.stats))
    print()
    print("PASS" if passed else "FAIL")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
