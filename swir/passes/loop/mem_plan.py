"""-mem-plan: static memory planning (swTVM's AOT memory management).

Every ``buffer`` (an intermediate tensor, a kernel's scratch) gets a byte
``offset`` in one arena, chosen so that buffers whose lifetimes overlap never
share bytes and buffers whose lifetimes do not may. Constant ``global``s and
function parameters are not in the arena.

Lifetimes are intervals on one timeline: the host functions that nothing
calls (the roots) are walked in module order, instruction by instruction,
entering every called ``func`` (a kernel call is one point). A buffer lives
from its first use to its last. Three conservative rules keep this exact
for the programs the timeline cannot order:

- a buffer passed to a called ``func`` lives across the whole call;
- in a function with more than one block (a CFG, possibly a loop), every
  buffer it touches lives across the whole function, and in a ``for`` or
  ``parallel`` loop of a host function across the whole loop;
- a kernel call uses every buffer the kernel names, also through kernels it
  calls; a ``spawn``'s buffers stay in use until the next ``join``;
- a buffer used under two roots, in a recursive function, or nowhere on the
  timeline lives for the whole program.

Placement is greedy, as in TFLite's and MNN's static planners: in a given
order, each buffer takes the lowest ``align``-aligned offset that overlaps no
placed buffer whose lifetime meets its own. Three orders are tried (size,
size x lifetime, first use) and the smallest arena wins; ``--stats`` also
reports the peak live size, the lower bound no placement can beat.
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass
from typing import Callable

from swir.diagnostics import Diagnostic
from swir.ir.core import Apply, Function, Global, Instruction, Module
from swir.ir.types import MAX_BYTES
from swir.ops import FOR, JOIN, PARALLEL, SPAWN
from swir.passes import options
from swir.passes.manager import AnalysisManager, FigureCheck, Pass, PassFailure, power_of_two
from swir.target import Target


def block_aligned(target: Target) -> Callable[[int], str | None]:
    """align: a power of two of at least the target's write block (32 bytes).
    -insert-dma splits the CPEs' work so that no two write one block,
    counting blocks from each buffer's start: the buffer must start on one
    (swir/analysis/write_blocks.py)."""
    block = target.write_block
    return lambda v: power_of_two(v) or (None if v >= block else f"must be at least {block}")


@dataclass
class MemPlan(Pass):
    name = "mem-plan"
    summary = "Place intermediate buffers in one arena, sharing memory between disjoint lifetimes"
    stages = ("loop", "buffered", "dma")

    align: int = options.mem_align("alignment of every buffer's offset, in bytes (a power of two, "
                                   "at least 32: the CPEs' DMA writes are kept to whole 32-byte "
                                   "blocks)", check=FigureCheck(block_aligned))

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        buffers = [g for g in module.globals if g.kind == "buffer"]
        if not buffers:
            return False
        lifetimes = Lifetimes(module).compute()
        offsets = place(buffers, lifetimes, self.align)
        arena = max(offsets[g] + g.type.bytes for g in buffers)
        if arena > MAX_BYTES:
            raise PassFailure([Diagnostic(
                f"-mem-plan: the buffers live at one time need about 2^{arena.bit_length() - 1} "
                "bytes of arena, over swir's limit of 2^62 bytes", module.loc)])
        changed = False
        for g in buffers:
            if g.attrs.get("offset") != offsets[g]:
                g.attrs["offset"] = offsets[g]
                changed = True
        self.bump("arena size (bytes)", arena)
        self.bump("unshared size (bytes)", sum(g.type.bytes for g in buffers))
        self.bump("peak live size (bytes)", peak_live(buffers, lifetimes))
        self.bump("buffers placed", len(buffers))
        return changed


def peak_live(buffers: list[Global], life: dict[Global, tuple[int, int]]) -> int:
    """The most bytes live at one time: no placement can use a smaller arena.
    (The maximum is reached at some buffer's first use; one sweep over the
    first uses in order, adding the buffers that start and dropping those
    that ended.)"""
    by_start = sorted(buffers, key=lambda g: life[g][0])
    ending: list[tuple[int, int]] = []  # heap of (last use, bytes) of started buffers
    live = best = k = 0
    for t in sorted({life[g][0] for g in buffers}):
        while k < len(by_start) and life[by_start[k]][0] <= t:
            g = by_start[k]
            if life[g][1] >= t:     # (a buffer that ends before it starts is never live)
                heapq.heappush(ending, (life[g][1], g.type.bytes))
                live += g.type.bytes
            k += 1
        while ending and ending[0][0] < t:
            live -= heapq.heappop(ending)[1]
        best = max(best, live)
    return best


def _round_up(n: int, align: int) -> int:
    return -(-n // align) * align


# Orders to try buffers in; the plan with the smallest arena wins.
_ORDERS = {
    "size": lambda g, life: (-g.type.bytes, life[g][0], g.name),
    "size x lifetime": lambda g, life: (-g.type.bytes * (life[g][1] - life[g][0] + 1),
                                        life[g][0], g.name),
    "first use": lambda g, life: (life[g][0], -g.type.bytes, g.name),
}


def place(buffers: list[Global], life: dict[Global, tuple[int, int]], align: int
          ) -> dict[Global, int]:
    """The best of a few greedy placements (each: in its order, every buffer
    takes the lowest aligned offset clear of the placed buffers whose lifetimes
    overlap its own)."""
    plans = [place_in_order(sorted(buffers, key=lambda g, k=key: k(g, life)), life, align)
             for key in _ORDERS.values()]
    return min(plans, key=lambda p: max(p[g] + g.type.bytes for g in buffers))


def place_in_order(order: list[Global], life: dict[Global, tuple[int, int]], align: int
                   ) -> dict[Global, int]:
    placed = _Placed(life[g] for g in order)
    offsets: dict[Global, int] = {}
    for g in order:
        lo, hi = life[g]
        busy = sorted(placed.meeting(lo, hi))
        offset = 0
        for o, e in busy:
            if offset + g.type.bytes <= o:
                break
            offset = max(offset, _round_up(e, align))
        offsets[g] = offset
        placed.add(lo, hi, (offset, offset + g.type.bytes))
    return offsets


class _Placed:
    """The placed buffers' byte ranges, by lifetime: :meth:`meeting` gives the
    ranges of those whose lifetime [a, b] meets [lo, hi] (a <= hi and lo <= b)
    without scanning every placed buffer (placement was quadratic in the
    number of buffers). A lifetime that meets [lo, hi] either contains lo (a
    segment tree over the lifetimes' end points answers that) or starts in
    (lo, hi] (a list sorted by start answers that)."""

    def __init__(self, lifetimes) -> None:
        self.points = sorted({t for life in lifetimes for t in life})
        self.index = {t: k for k, t in enumerate(self.points)}
        self.size = 1
        while self.size < len(self.points):
            self.size *= 2
        self.nodes: dict[int, list[tuple[int, int]]] = {}  # segment tree node -> ranges
        self.starts: list[int] = []                        # sorted
        self.by_start: list[tuple[int, int]] = []          # the ranges, in that order
        self.odd: list[tuple[int, int, tuple[int, int]]] = []  # lifetimes with a > b
        self.all: list[tuple[int, int, tuple[int, int]]] = []

    def add(self, a: int, b: int, rng: tuple[int, int]) -> None:
        self.all.append((a, b, rng))
        if a > b:
            self.odd.append((a, b, rng))
            return
        i = bisect.bisect_right(self.starts, a)
        self.starts.insert(i, a)
        self.by_start.insert(i, rng)
        lo, hi = self.index[a] + self.size, self.index[b] + self.size + 1
        while lo < hi:
            if lo & 1:
                self.nodes.setdefault(lo, []).append(rng)
                lo += 1
            if hi & 1:
                hi -= 1
                self.nodes.setdefault(hi, []).append(rng)
            lo //= 2
            hi //= 2

    def meeting(self, lo: int, hi: int) -> list[tuple[int, int]]:
        if lo > hi:  # (no lifetime from Lifetimes is empty)
            return [rng for a, b, rng in self.all if a <= hi and lo <= b]
        out = [rng for a, b, rng in self.odd if a <= hi and lo <= b]
        node = self.index[lo] + self.size     # lifetimes containing lo
        while node:
            out += self.nodes.get(node, ())
            node //= 2
        out += self.by_start[bisect.bisect_right(self.starts, lo):
                             bisect.bisect_right(self.starts, hi)]
        return out


class _Span:
    """Uses of buffers on a timeline that starts at 0: ``uses[g] = [first, last]``."""

    def __init__(self) -> None:
        self.t = 0
        self.uses: dict[Global, list[int]] = {}

    def use(self, g: Global, t: int | None = None) -> None:
        t = self.t if t is None else t
        r = self.uses.get(g)
        if r is None:
            self.uses[g] = [t, t]
        else:
            r[0], r[1] = min(r[0], t), max(r[1], t)

    def hold_since(self, start: int) -> None:
        """Code from ``start`` to now may repeat (a loop, a CFG): whatever it
        touches lives across all of it."""
        for r in self.uses.values():
            if r[1] > start:
                r[0], r[1] = min(r[0], start), self.t


class Lifetimes:
    """First and last use of every buffer on the program timeline.

    Each function is summarised once — its length on the timeline and the
    interval of each buffer it uses, relative to its start — and a call
    splices the callee's summary in, so the cost is linear in the program
    however often functions are called.
    """

    def __init__(self, module: Module) -> None:
        self.m = module
        self.summaries: dict[str, _Span] = {}
        self.active: set[str] = set()
        self.forever: set[Global] = set()
        self._reachable: dict[str, set[Global]] = {}

    def compute(self) -> dict[Global, tuple[int, int]]:
        called = {a.callee for i in self.m.walk() for a in i.args if isinstance(a, Apply)}
        roots = [f for f in self.m.functions
                 if f.kind == "func" and f.body is not None and f.name not in called]
        program = _Span()
        roots_of: dict[Global, set[str]] = {}
        for f in roots:
            start = program.t
            span = self.summary(f)
            for g, (lo, hi) in span.uses.items():
                program.use(g, start + lo)
                program.use(g, start + hi)
                roots_of.setdefault(g, set()).add(f.name)
            program.t += span.t + 1
        end = program.t + 1
        out = {}
        for g in (g for g in self.m.globals if g.kind == "buffer"):
            if g in self.forever or g not in program.uses or len(roots_of[g]) > 1:
                out[g] = (0, end)
            else:
                out[g] = tuple(program.uses[g])
        return out

    def summary(self, f: Function) -> _Span:
        done = self.summaries.get(f.name)
        if done is not None:
            return done
        span = _Span()
        if f.name in self.active:  # recursion: the timeline cannot order it
            self.forever |= self.buffers_reachable(f)
            return span
        self.active.add(f.name)
        if f.body is not None:
            self.region_uses(f.body, span)
            if len(f.body.blocks) > 1:
                span.hold_since(0)
        self.active.discard(f.name)
        self.summaries[f.name] = span
        return span

    def region_uses(self, region, span: _Span) -> None:
        pending: list[Global] = []  # spawned, in use until the join
        for block in region.blocks:
            for inst in block.instructions:
                span.t += 1
                self.instruction(inst, span, pending)

    def instruction(self, inst: Instruction, span: _Span, pending: list[Global]) -> None:
        args = [v for v in inst.operands if isinstance(v, Global) and v.kind == "buffer"]
        for g in args:
            span.use(g)
        if inst.isa(JOIN):
            for g in pending:
                span.use(g)
            pending.clear()
        if inst.regions:
            start = span.t
            for r in inst.regions:
                self.region_uses(r, span)
            if inst.isa(FOR, PARALLEL):
                span.hold_since(start)
            return
        if inst.isa(SPAWN):           # one or more kernels, in use until the join
            for app in inst.args:
                callee = self.m.lookup(app.callee) if isinstance(app, Apply) else None
                if isinstance(callee, Function) and callee.body is not None:
                    inside = self.buffers_reachable(callee)
                    for g in inside:
                        span.use(g)
                    pending.extend(args + sorted(inside, key=lambda g: g.name))
            return
        app = next((a for a in inst.args if isinstance(a, Apply)), None)
        callee = self.m.lookup(app.callee) if app is not None else None
        if not isinstance(callee, Function) or callee.body is None:
            return
        if callee.kind == "kernel":
            for g in self.buffers_reachable(callee):
                span.use(g)
            return
        sub = self.summary(callee)
        start = span.t
        for g, (lo, hi) in sub.uses.items():
            span.use(g, start + lo)
            span.use(g, start + hi)
        span.t += sub.t + 1
        for g in args:  # live across the whole call
            span.use(g)

    def buffers_reachable(self, f: Function) -> set[Global]:
        """Buffers f names, directly or in anything it calls."""
        if f.name in self._reachable:
            return self._reachable[f.name]
        seen: set[str] = set()
        out: set[Global] = set()

        def walk(fn: Function) -> None:
            if fn.name in seen:
                return
            seen.add(fn.name)
            for inst in fn.walk():
                out.update(v for v in inst.operands
                           if isinstance(v, Global) and v.kind == "buffer")
                for a in inst.args:
                    callee = self.m.lookup(a.callee) if isinstance(a, Apply) else None
                    if isinstance(callee, Function):
                        walk(callee)
        walk(f)
        self._reachable[f.name] = out
        return out
