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
  buffer it touches lives across the whole function;
- a buffer used under two roots, in a recursive function, or nowhere on the
  timeline lives for the whole program.

Placement is greedy, as in TFLite's and MNN's static planners: in a given
order, each buffer takes the lowest ``align``-aligned offset that overlaps no
placed buffer whose lifetime meets its own. Three orders are tried (size,
size x lifetime, first use) and the smallest arena wins; ``--stats`` also
reports the peak live size, the lower bound no placement can beat.
"""

from __future__ import annotations

from dataclasses import dataclass

from swir.diagnostics import Diagnostic
from swir.ir.core import Apply, Function, Global, Instruction, Module
from swir.passes.manager import AnalysisManager, Pass, PassFailure, option


@dataclass
class MemPlan(Pass):
    name = "mem-plan"
    summary = "Place intermediate buffers in one arena, sharing memory between disjoint lifetimes"
    stages = ("loop", "buffered", "dma")

    align: int = option(64, "alignment of every buffer's offset, in bytes (a power of two)")

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        if self.align <= 0 or self.align & (self.align - 1):
            raise PassFailure([Diagnostic(f"-mem-plan: align must be a power of two, got "
                                          f"{self.align}", module.loc)])
        buffers = [g for g in module.globals if g.kind == "buffer"]
        if not buffers:
            return False
        lifetimes = Lifetimes(module).compute()
        offsets = place(buffers, lifetimes, self.align)
        changed = False
        for g in buffers:
            if g.attrs.get("offset") != offsets[g]:
                g.attrs["offset"] = offsets[g]
                changed = True
        arena = max(offsets[g] + g.type.bytes for g in buffers)
        self.bump("arena size (bytes)", arena)
        self.bump("unshared size (bytes)", sum(g.type.bytes for g in buffers))
        self.bump("peak live size (bytes)", peak_live(buffers, lifetimes))
        self.bump("buffers placed", len(buffers))
        return changed


def peak_live(buffers: list[Global], life: dict[Global, tuple[int, int]]) -> int:
    """The most bytes live at one time: no placement can use a smaller arena."""
    events = sorted({life[g][0] for g in buffers})
    return max(sum(g.type.bytes for g in buffers if life[g][0] <= t <= life[g][1])
               for t in events)


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
    placed: list[tuple[int, int, tuple[int, int]]] = []  # (offset, end, lifetime)
    offsets: dict[Global, int] = {}
    for g in order:
        lo, hi = life[g]
        busy = sorted((o, e) for o, e, (a, b) in placed if a <= hi and lo <= b)
        offset = 0
        for o, e in busy:
            if offset + g.type.bytes <= o:
                break
            offset = max(offset, _round_up(e, align))
        offsets[g] = offset
        placed.append((offset, offset + g.type.bytes, (lo, hi)))
    return offsets


class Lifetimes:
    """First and last use of every buffer on the program timeline."""

    def __init__(self, module: Module) -> None:
        self.m = module
        self.t = 0
        self.first: dict[Global, int] = {}
        self.last: dict[Global, int] = {}
        self.roots_of: dict[Global, set[str]] = {}
        self.forever: set[Global] = set()
        self.stack: list[Function] = []
        self.root = ""

    def compute(self) -> dict[Global, tuple[int, int]]:
        called = {a.callee for i in self.m.walk() for a in i.args if isinstance(a, Apply)}
        roots = [f for f in self.m.functions
                 if f.kind == "func" and f.body is not None and f.name not in called]
        for f in roots:
            self.root = f.name
            self.visit(f)
        end = self.t + 1
        out = {}
        for g in (g for g in self.m.globals if g.kind == "buffer"):
            if g in self.forever or g not in self.first or len(self.roots_of[g]) > 1:
                out[g] = (0, end)
            else:
                out[g] = (self.first[g], self.last[g])
        return out

    def use(self, g: Global) -> None:
        self.first.setdefault(g, self.t)
        self.last[g] = self.t
        self.roots_of.setdefault(g, set()).add(self.root)

    def visit(self, f: Function) -> None:
        if f in self.stack:  # recursion: the timeline cannot order it
            for g in _buffers_in(f):
                self.forever.add(g)
            return
        self.stack.append(f)
        start = self.t
        for inst in f.walk():
            self.t += 1
            self.instruction(inst)
        if f.body is not None and len(f.body.blocks) > 1:
            for g, last in self.last.items():
                if last > start:  # touched in this function (or its callees)
                    self.first[g] = min(self.first[g], start)
                    self.last[g] = self.t
        self.stack.pop()

    def instruction(self, inst: Instruction) -> None:
        args = [v for v in inst.operands if isinstance(v, Global) and v.kind == "buffer"]
        for g in args:
            self.use(g)
        app = next((a for a in inst.args if isinstance(a, Apply)), None)
        callee = self.m.lookup(app.callee) if app is not None else None
        if not isinstance(callee, Function) or callee.body is None:
            return
        if callee.kind == "kernel":
            for g in _buffers_in(callee):
                self.use(g)
            return
        self.visit(callee)
        self.t += 1
        for g in args:  # live across the whole call
            self.use(g)


def _buffers_in(f: Function) -> set[Global]:
    return {v for i in f.walk() for v in i.operands
            if isinstance(v, Global) and v.kind == "buffer"}
