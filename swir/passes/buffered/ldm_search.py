"""-ldm-plan{strategy=search}: tile sizes and tile-loop orders chosen by the
SW26010 cost model (swir.costmodel.cost), never slower than the paper's
greedy plan by that model.

The greedy plan (Algorithms 1 and 2) grows tiles in powers of two in a fixed
order of variable classes and never weighs parallelism: a conv whose tiles
leave 4 tasks keeps 60 CPEs idle. The search weighs everything the model
does, in three steps:

1. **Candidates.** Per loop variable: 1, every power of two below its
   extent, the extent, and ceil(extent / k) for k up to twice the CPEs
   (tiles that split the loop evenly, remainder tiles included: the
   rewrite makes them exact). Per tile choice, Algorithm 2's loop order and
   that order with each output loop moved outermost (which decides the
   loops spread over the CPEs).
2. **Estimate** (:func:`estimate`, closed form): compute time with the load
   balance of the parallel tasks (shared out in units of the write-block
   grain, :func:`write_grain`), DMA time from each tensor's copies (how
   often Algorithm 2's placement runs them, bytes and contiguous runs per
   copy), per-DMA start-up, and broadcasts for the tiles every CPE fetches
   in the same round when all run as many tasks. A local search starts from greedy's tiles and
   from a few seeded random starts, changes one variable's tile at a time to
   the candidate with the best estimate that fits the LDM, and stops when
   nothing improves, after a fixed number of rounds, or at three quarters of
   the time budget.
3. **Exact check.** The best few plans by estimate and greedy's plan are
   each applied to a copy of the kernel with only this nest, through
   -insert-dma, and measured with :func:`swir.costmodel.cost.cost_report`
   (exact counts). The fastest wins; greedy's on a tie. When the copy cannot
   be measured (the nest's trip counts depend on kernel parameters), greedy's
   plan is kept. Counting stops at the end of the budget: the best plan
   measured by then wins.
"""

from __future__ import annotations

import heapq
import math
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from swir.costmodel.cost import Machine, cost_report
from swir.analysis.dependence import carried_dependence
from swir.analysis.placement import copy_level, executions
from swir.costmodel.traffic import CountLimit, TrafficError
from swir.analysis.vector_plan import body_cost, point_cycles_floor, tile_plan
from swir.ir.builder import Builder
from swir.ir.clone import clone
from swir.ir.core import Access, Function, Global, Instruction, Module, Value
from swir.ops import FOR, PARALLEL
from swir.passes.buffered.closed_forms import (
    Tilings,
    broadcast_seconds,
    direct_seconds,
    get_seconds,
)
from swir.passes.buffered.ldm_model import (
    SINGLE,
    LoopVar,
    Nest,
    Plan,
    SearchContext,
    Tensor,
    corr,
    load_single_elements_directly,
    order_loops,
    share_single_tile,
    top_loops,
)
from swir.passes.buffered.pad_fold import read_from_source
from swir.target import Target, default_target, record_target

ROUNDS = 8          # local-search rounds per start
RANDOM_STARTS = 4   # seeded, so the search is reproducible
EXACT_CHECKS = 4    # plans measured exactly, besides greedy's
ALIGNED_CHECKS = 2  # and the best by estimate with more runs of whole 32-byte multiples
ALIGNED_SCAN = 200  # plans looked at (by estimate) for those
# A plan up to this much slower by the model (and never slower than greedy's)
# wins when more of its DMA blocks are whole multiples of 32 bytes. The model
# does not price alignment (no public figure: sunway.md, "aligned blocks of
# 256 B or more stream best"); this buys it where it costs little.
ALIGN_SLACK = 0.02
ROUNDS_SHARE = 0.75  # of the time budget, for the local search (the rest: exact checks)

Choice = tuple[tuple[int, ...], tuple[int, ...]]   # (tile per var, order as var indices)


@dataclass(frozen=True)
class Decision:
    """What a nest's search decided, all :func:`apply` needs to plan it: the
    winner's tile per variable, its tile-loop order (variable indices), each
    tensor's Constraint-1 reason (None: buffered), whether it beat greedy's
    plan and whether the time budget cut the search short."""

    tiles: tuple[int, ...]
    order: tuple[int, ...]
    direct: tuple[str | None, ...]
    chose: bool
    cut: bool

    def to_json(self) -> dict:
        return {"tiles": list(self.tiles), "order": list(self.order),
                "direct": list(self.direct), "chose": self.chose}

    @staticmethod
    def from_json(value: object) -> Decision | None:
        """The decision a cache entry's JSON holds, or None when it is not
        exactly the shape :meth:`to_json` writes."""
        if not isinstance(value, dict) or set(value) != {"tiles", "order", "direct", "chose"}:
            return None
        tiles, order, direct, chose = (value[k] for k in ("tiles", "order", "direct", "chose"))
        if not (isinstance(tiles, list) and all(type(t) is int for t in tiles) and
                isinstance(order, list) and all(type(i) is int for i in order) and
                isinstance(direct, list) and
                all(d is None or type(d) is str for d in direct) and type(chose) is bool):
            return None
        return Decision(tuple(tiles), tuple(order), tuple(direct), chose, False)


def search(nest: Nest, ctx: SearchContext) -> Decision:
    """Search the nest's plan (greedy's tiles on entry; the winner's after)."""
    order, chose, cut = Search(nest, ctx).run()
    return Decision(tuple(v.tile for v in nest.vars), tuple(nest.vars.index(v) for v in order),
                    tuple(t.direct for t in nest.tensors), chose, cut)


def apply(nest: Nest, d: Decision) -> list[LoopVar]:
    """Give the nest the decision's tiles and direct flags; its loop order."""
    for v, t in zip(nest.vars, d.tiles):
        v.tile = t
    for t, why in zip(nest.tensors, d.direct):
        t.direct = why
    return [nest.vars[i] for i in d.order]


def legal_decision(nest: Nest, value: object, capacity: int, cpes: int,
                   serial: frozenset[int]) -> Decision | None:
    """The decision a cache entry holds (``value``, its JSON), if it is one
    the search could have made for this nest, else None (it is searched
    again): a tile in 1..extent per variable, tiles that fit the LDM and that
    Plan.make keeps (share_single_tile would not split them again), a loop
    order that is exactly the tile loops (the variables with more than one
    tile), output loops before reduction loops, and each tensor's direct
    flag the nest's own (only a one-element tile may add Constraint 1's).
    Any such decision plans a correct kernel (test_ldm_plan's property
    test); one that is not could drop a tile loop (a wrong result) or a
    reduction's initialisation."""
    d = Decision.from_json(value)
    n = len(nest.vars)
    if d is None or len(d.tiles) != n or len(d.direct) != len(nest.tensors):
        return None
    if not all(1 <= t <= v.extent for t, v in zip(d.tiles, nest.vars)):
        return None
    with tiled(nest, d.tiles):
        share_single_tile(nest, cpes, {nest.vars[i] for i in serial})
        kept = tuple(v.tile for v in nest.vars) == d.tiles
    if not kept:
        return None
    with tiled(nest, d.tiles):
        loops = {i for i, v in enumerate(nest.vars) if v.ntiles > 1}
        if sorted(d.order) != sorted(loops):
            return None
        kinds = [nest.vars[i].reduction for i in d.order]
        if kinds != sorted(kinds):          # a reduction loop outside an output loop
            return None
        tiles = nest.tiles()
        for t, why in zip(nest.tensors, d.direct):
            own = t.direct if t.direct != SINGLE else None
            if why != own and not (why == SINGLE and t.elements(tiles) == 1):
                return None
        old = [t.direct for t in nest.tensors]
        for t, why in zip(nest.tensors, d.direct):
            t.direct = why
        try:
            return d if nest.ldm_bytes() <= capacity else None
        finally:
            for t, why in zip(nest.tensors, old):
                t.direct = why


class Search:
    def __init__(self, nest: Nest, ctx: SearchContext) -> None:
        self.nest, self.ctx = nest, ctx
        # Loops that carry a dependence are never spread over the CPEs (asked
        # once: the dependence test is costly).
        self.serial = ctx.serial if ctx.serial is not None else frozenset(
            i for i, v in enumerate(nest.vars) if carried_dependence(v.loop) is not None)
        share_single_tile(nest, ctx.cpes, {nest.vars[i] for i in self.serial})
        # Greedy's plan exactly as Plan.make would make it, with its
        # Constraint-1 decisions (restored if it stays best).
        self.greedy: Choice = (tuple(v.tile for v in nest.vars),
                               tuple(nest.vars.index(v) for v in order_loops(nest)))
        self.greedy_direct = [t.direct for t in nest.tensors]
        for t in nest.tensors:          # re-decided for each other plan (set_tiles)
            if t.direct == SINGLE:
                t.direct = None
        self.options = [tile_options(v.extent, ctx.cpes) for v in nest.vars]
        self.seen: dict[Choice, float] = {}                     # every plan estimated
        # The ALIGNED_SCAN best estimates but greedy's (negated: a max-heap),
        # every finalist among them: a tiling whose bound is above the worst
        # of them cannot be a finalist (Tilings.lower_bounds).
        self.best_seen: list[float] = []
        self.floor = nest_cycles_floor(nest, ctx.target)
        self.machine = Machine.for_target(ctx.target)
        self.pruned = 0
        self.scored: dict[tuple[int, ...], list[tuple[float, Choice]]] = {}

    def run(self) -> tuple[list[LoopVar], bool, bool]:
        """(the winner's loop order, whether it is not greedy's, whether the
        time budget cut the search short)."""
        began = time.monotonic()
        # The local search may use ROUNDS_SHARE of the budget; the exact check
        # of its finalists has until the end of it.
        self.deadline = began + ROUNDS_SHARE * self.ctx.budget
        self.out_of_time = False
        for start in [self.greedy[0]] + self.random_starts():
            best = min(self.score(start))
            for _ in range(ROUNDS):
                step = self.improve(best)
                if step is None:
                    break
                best = step
        ranked = [k for _, k in sorted((v, k) for k, v in self.seen.items()
                                       if k != self.greedy)]
        winner, cut = choose(self.ctx, self.greedy, self.greedy_direct,
                             ranked[:EXACT_CHECKS] + self.aligned_finalists(ranked),
                             self.serial, began + self.ctx.budget)
        self.out_of_time |= cut
        if winner == self.greedy:       # the nest still holds greedy's tiles
            for t, d in zip(self.nest.tensors, self.greedy_direct):
                t.direct = d
        else:
            set_tiles(self.nest, winner[0])
        return [self.nest.vars[i] for i in winner[1]], winner != self.greedy, self.out_of_time

    def aligned_finalists(self, ranked: list[Choice]) -> list[Choice]:
        """The best plans by estimate, past the first EXACT_CHECKS, whose
        copies move a larger share of runs of whole 32-byte multiples than
        any of those."""
        def share(c: Choice) -> float:
            return aligned_share(self.nest, c, self.ctx.cpes, self.serial,
                                 self.ctx.target.dma_align)
        top = max((share(c) for c in ranked[:EXACT_CHECKS]), default=1.0)
        return [c for c in ranked[EXACT_CHECKS:ALIGNED_SCAN] if share(c) > top][:ALIGNED_CHECKS]

    def time_left(self) -> bool:
        if time.monotonic() > self.deadline:
            self.out_of_time = True
        return not self.out_of_time

    def score(self, tiles: tuple[int, ...], forms: Tilings | None = None, k: int = 0
              ) -> list[tuple[float, Choice]]:
        """Each loop order's estimate for these tiles (tiling ``k`` of
        ``forms``, if given; kept: the local search meets the same tilings
        again)."""
        if tiles not in self.scored:
            out = []
            shapes = (forms or Tilings(self.nest, [tiles])).row(k)
            with tiled(self.nest, tiles):
                cycles = nest_cycles(self.nest, self.ctx.target)
                for order in orders(self.nest):
                    key = (tiles, order)
                    self.seen[key] = estimate(self.nest, order, self.ctx.cpes, cycles,
                                              self.serial, self.machine, shapes, self.ctx.target)
                    out.append((self.seen[key], key))
                    if key != self.greedy:
                        heapq.heappush(self.best_seen, -self.seen[key])
                        if len(self.best_seen) > ALIGNED_SCAN:
                            heapq.heappop(self.best_seen)
            self.scored[tiles] = out
        return self.scored[tiles]

    def fitting(self, forms: Tilings) -> np.ndarray:
        """Which tilings fit the LDM and leave the CPEs more than one task
        where an output loop can be split (what Plan.make would otherwise
        force; one task is fine with one CPE)."""
        fits = forms.ldm_bytes() <= self.ctx.capacity
        if self.ctx.cpes > 1:
            fits &= ~forms.one_task(self.serial)
        return fits

    def improve(self, best: tuple[float, Choice]) -> tuple[float, Choice] | None:
        """The best plan differing from ``best`` in one variable's tile, if it
        is faster by the estimate. The closed forms that need no order (fit,
        lower bound) are evaluated for all of a variable's candidates at once."""
        cur = best
        tiles = list(best[1][0])
        for i, opts in enumerate(self.options):
            if not self.time_left():
                break
            trials = [tuple(tiles[:i] + [t] + tiles[i + 1:]) for t in opts if t != tiles[i]]
            if not trials:
                continue
            forms = Tilings(self.nest, trials)
            bounds = None
            for k in np.flatnonzero(self.fitting(forms)).tolist():
                trial = trials[k]
                if trial not in self.scored and len(self.best_seen) == ALIGNED_SCAN:
                    if bounds is None:
                        bounds = forms.lower_bounds(self.ctx.cpes, self.floor, self.serial,
                                                    self.machine).tolist()
                    if self.hopeless(bounds[k], cur[0]):
                        continue
                cur = min([cur] + self.score(trial, forms, k))
        return cur if cur < best else None

    def hopeless(self, bound: float, best: float) -> bool:
        """Whether no plan of a tiling whose estimates are all at least
        ``bound`` (Tilings.lower_bounds) can change the search's result: each
        is slower than ``best`` (so the step would not take it) and than the
        ALIGNED_SCAN best seen so far (so it would be no finalist)."""
        if bound > max(best, -self.best_seen[0]):
            self.pruned += 1
            return True
        return False

    def random_starts(self) -> list[tuple[int, ...]]:
        """Seeded random tilings that fit (the same for the same nest)."""
        rng = random.Random(repr([(v.name, v.extent) for v in self.nest.vars]))
        drawn = [tuple(rng.choice(opts) for opts in self.options)
                 for _ in range(RANDOM_STARTS * 8)]
        fits = self.fitting(Tilings(self.nest, drawn))
        return [tiles for tiles, ok in zip(drawn, fits) if ok][:RANDOM_STARTS]


def tile_options(extent: int, cpes: int) -> list[int]:
    opts = {1, extent}
    p = 2
    while p < extent:
        opts.add(p)
        p *= 2
    for k in range(1, min(extent, 2 * cpes) + 1):
        opts.add(-(-extent // k))
    return sorted(opts)


def set_tiles(nest: Nest, tiles: tuple[int, ...]) -> None:
    for v, t in zip(nest.vars, tiles):
        v.tile = t
    for t in nest.tensors:
        if t.direct == SINGLE:
            t.direct = None
    load_single_elements_directly(nest)


@contextmanager
def tiled(nest: Nest, tiles: tuple[int, ...]) -> Iterator[None]:
    """The nest with these tiles for the duration, its own tiles after."""
    old = [v.tile for v in nest.vars]
    for v, t in zip(nest.vars, tiles):
        v.tile = t
    try:
        yield
    finally:
        for v, t in zip(nest.vars, old):
            v.tile = t


def orders(nest: Nest) -> list[tuple[int, ...]]:
    """Algorithm 2's tile-loop order for the nest's tiles, and the same order
    with each other output loop moved outermost."""
    base = [nest.vars.index(v) for v in order_loops(nest)]
    out = [tuple(base)]
    outputs = [i for i in base if not nest.vars[i].reduction]
    for i in outputs[1:]:
        out.append(tuple([i] + [j for j in base if j != i]))
    return out


def nest_cycles(nest: Nest, target: Target | None = None) -> float:
    """CPE cycles of one run of the whole nest with its current tiles, as
    swir-cg will write each tile's loops (vector_plan.tile_plan: a vector
    micro-kernel or loop where the tile allows one, scalar code elsewhere;
    docs/cost-model.md, "Compute"): the body per point of the nest, the
    pre and post parts (zero fill, epilogue) per output point."""
    target = target or default_target()
    every = math.prod(v.extent for v in nest.vars)
    band = [v for v in nest.vars if not v.reduction]
    per_output = math.prod(v.extent for v in band)

    def per_point(body: list, vs: list[LoopVar]) -> float:
        p = tile_plan(body, [v.iv for v in vs], [v.tile for v in vs], nest.memo, target)
        return body_cost(body, p, target).cycles

    def per_output_point(part: str) -> float:
        # pre and post recur with every reduction tiling (Search.score has
        # the body's cost once per tiling already)
        key = (part, target, tuple(v.tile for v in band))
        if key not in nest.memo:
            nest.memo[key] = per_point(getattr(nest, part), band)
        return nest.memo[key]
    return per_point(nest.body, nest.vars) * every + \
        sum(per_output_point(part) for part in ("pre", "post") if getattr(nest, part)) * per_output


def nest_cycles_floor(nest: Nest, target: Target | None = None) -> float:
    """A lower bound of :func:`nest_cycles` for any tiles
    (vector_plan.point_cycles_floor of each part)."""
    target = target or default_target()
    every = math.prod(v.extent for v in nest.vars)
    per_output = math.prod(v.extent for v in nest.vars if not v.reduction)
    return point_cycles_floor(nest.body, target) * every + sum(
        point_cycles_floor(part, target) for part in (nest.pre, nest.post) if part) * per_output


def estimate(nest: Nest, order_i: tuple[int, ...], cpes: int, cycles: float,
             serial: frozenset[int], m: Machine,
             shapes: dict[Tensor, tuple[int, int, int, bool]], target: Target | None = None
             ) -> float:
    """Modeled seconds of the nest with its tiles and this tile-loop order, in
    closed form (full tiles; no double buffering); ``cycles``: its compute
    (:func:`nest_cycles`); ``serial``: the indices of the loops that carry a
    dependence; ``shapes``: its tile shapes (Tilings.row); ``target``: whose
    write blocks the work split keeps whole (the search's, else the default)."""
    tasks, floor = _tasks(nest, order_i, cpes, serial)
    # -insert-dma shares the tasks out in units of `grain` (no two CPEs write
    # one 32-byte block): a CPE runs up to grain * ceil(units / cpes) tasks.
    par = order_i[:floor]
    key = ("grain", par, tuple(nest.vars[i].tile for i in par), cpes,
           tuple(t.direct is None for t in nest.tensors if t.written))
    if key not in nest.memo:
        nest.memo[key] = write_grain(nest, order_i, floor, cpes, target)
    grain = nest.memo[key]
    units = -(-tasks // grain)
    busy = min(units, cpes)
    compute = cycles / tasks * min(tasks, grain * math.ceil(units / cpes)) / m.clock_hz
    stream, starts, bcast = 0.0, 0.0, 0.0
    # Every CPE runs as many tasks: a tile no parallel loop moves is fetched
    # in the same round by every CPE, and -insert-dma may broadcast it.
    lockstep = cpes == m.cpes and units % cpes == 0 and tasks % grain == 0
    moved = {nest.vars[i].iv for i in order_i[:floor]}
    for t, copies in _copies(nest, order_i, floor, lambda t: shapes[t][3]):
        if copies is None:
            direct = direct_seconds(nest, t, m, busy)
            stream += direct[0]
            starts += direct[1]
            continue
        nbytes, runs, dmas, _ = shapes[t]
        gets = get_seconds(m, copies, nbytes, runs, dmas, busy)
        if lockstep and t.read and not t.written and not corr(t) & moved:
            once = broadcast_seconds(m, copies, cpes, nbytes, runs, dmas)
            if once < sum(gets):
                bcast += once
                continue
        stream += gets[0]
        starts += gets[1]
    return compute + stream + starts + bcast


def _tasks(nest: Nest, order_i: tuple[int, ...], cpes: int,
           serial: frozenset[int]) -> tuple[int, int]:
    """The parallel tasks of the order, and how many outer loops make them."""
    tasks, floor = 1, 0
    for i in order_i:
        v = nest.vars[i]
        if v.reduction or tasks >= cpes or i in serial:
            break
        tasks *= v.ntiles
        floor += 1
    return tasks, floor


def write_grain(nest: Nest, order_i: tuple[int, ...], floor: int, cpes: int | None = None,
                target: Target | None = None) -> int:
    """The tasks per unit of the work split, in closed form: the fewest
    consecutive tasks whose written tiles, together, write only whole 32-byte
    blocks of every buffered output, so a cut between two units never splits
    a block (-insert-dma's rule, swir.analysis.write_blocks, which finds the
    exact grain of the plan chosen: finer where its block-exact check sees
    cuts this cannot, never coarser than what this returns). Units group
    tasks along the innermost parallel loop first, then whole inner loops;
    all the tasks when no grouping keeps to whole blocks. When the CPEs share
    the tasks evenly, the cuts fall only between their shares: 1 when those
    keep to whole blocks. ``cpes``: those sharing the tasks (default: all of
    the target's); ``target``: the search's (a caller outside one: the default)."""
    target = target or default_target()
    cpes = target.cpes if cpes is None else cpes
    block = target.write_block
    par = [nest.vars[i] for i in order_i[:floor]]
    outs = [t for t in nest.buffered() if t.written]
    tasks = math.prod(v.ntiles for v in par)
    if tasks <= 1 or not outs:
        return 1
    extents = {v.iv: v.extent for v in nest.vars}

    def whole(size: int) -> bool:
        """Whether groups of ``size`` consecutive tasks keep to whole blocks
        (False when such a group is not a box of tiles)."""
        inner = 1
        for k in reversed(range(len(par))):
            n = par[k].ntiles
            if size % inner == 0 and n % (size // inner) == 0:
                steps = {v.iv: v.tile for v in par[:k]}
                steps[par[k].iv] = par[k].tile * (size // inner)
                return all(_whole_blocks(t, steps, extents, block) for t in outs)
            inner *= n
        return False
    if tasks % cpes == 0 and whole(tasks // cpes):
        return 1
    size = next((size for size in _group_sizes(par) if whole(size)), tasks)
    # -insert-dma tries the grains 1..64 and 128 x 2^k only: another size
    # may not be found there, so count on none (one CPE) rather than more
    return size if size <= 2 * block or size & (size - 1) == 0 else tasks


def _group_sizes(par: list[LoopVar]):
    """Candidate group sizes, ascending: along each parallel loop, innermost
    first, its divisors up to 64, its powers of two and itself, times the
    whole loops inside it (a few per loop, whatever its trip count)."""
    inner = 1
    for v in reversed(par):
        n = v.ntiles
        gs = {g for g in range(1, min(n, 64) + 1) if n % g == 0} | {n}
        p = 128
        while p < n and n % p == 0:
            gs.add(p)
            p *= 2
        yield from (inner * g for g in sorted(gs))
        inner *= n


def _whole_blocks(t, steps: dict, extents: dict, block: int) -> bool:
    """Whether every tile of ``t`` that loops stepping by ``steps`` write (the
    other loops over their whole range; ``extents``: each loop's) starts and
    ends its contiguous runs on a ``block``-byte boundary (or at the buffer's end)."""
    shape, nbytes = t.shape, t.base.type.element.bytes
    stride = [nbytes * math.prod(shape[d + 1:]) for d in range(len(shape))]
    dims = []                      # per dimension: (first index, step or 0, extent)
    for d, coefs in enumerate(t.coefs):
        v = next(iter(coefs), None)
        extent = extents.get(v, 1)
        step = steps.get(v, 0)
        dims.append((t.cmin[d], step if step < extent else 0, extent))
    # the dimensions the tile covers whole, innermost first, merge into runs
    r = len(dims) - 1
    while r >= 0 and dims[r] == (0, 0, shape[r]):
        r -= 1
    if r < 0:
        return True
    for d in range(r):             # outer dimensions: each index starts runs
        first, step, extent = dims[d]
        if (extent > 1 or step) and stride[d] % block or first * stride[d] % block:
            return False
    first, step, extent = dims[r]

    def boundary(i: int) -> bool:
        return i * stride[r] % block == 0 or (r == 0 and i == shape[0])
    return boundary(first) and boundary(step) and boundary(first + extent)


def _copies(nest: Nest, order_i: tuple[int, ...], floor: int,
            single: Callable[[Tensor], bool]):
    """Each buffered tensor and the copies of its tile one run of the nest
    makes (Algorithm 2's placement), None for one loaded directly (read only,
    and ``single``: its tile is one element)."""
    order = [nest.vars[i] for i in order_i]
    trips = [v.ntiles for v in order]
    out_level = max(floor, sum(1 for v in order if not v.reduction))
    outer = [v.iv for v in order]
    for t in nest.buffered():
        if t.read and not t.written and single(t):
            yield t, None
            continue
        init = bool(nest.red) and nest.initialised and t.base is nest.output
        level = out_level if init else copy_level(corr(t), outer, floor)
        moves = (t.copied_in and not init) + t.written
        yield t, executions(level, trips) * moves


def aligned_share(nest: Nest, choice: Choice, cpes: int, serial: frozenset[int],
                  align: int) -> float:
    """The share of the contiguous runs the plan's copies move whose length
    is a multiple of ``align``, the target's dma_align (full tiles; what DMA
    blocks become)."""
    tiles_, order_i = choice
    with tiled(nest, tiles_):
        tiles = nest.tiles()
        _, floor = _tasks(nest, order_i, cpes, serial)
        total = aligned = 0
        for t, copies in _copies(nest, order_i, floor, lambda t: t.elements(tiles) == 1):
            if copies is None:
                continue
            runs = t.segments(tiles)
            total += copies * runs
            aligned += copies * runs * (t.bytes(tiles) // runs % align == 0)
    return aligned / total if total else 1.0


# -- the exact check ------------------------------------------------------------------

def choose(ctx: SearchContext, greedy: Choice, greedy_direct: list, finalists: list[Choice],
           serial: frozenset[int], deadline: float | None = None) -> tuple[Choice, bool]:
    """The best of greedy's plan and the finalists, measured exactly, and
    whether the deadline cut the measuring short (the best of the plans
    measured by then; greedy's if not even it was measured). The best: the
    fastest, or a plan with a larger share of DMA blocks of whole 32-byte
    multiples or fewer bytes at most ALIGN_SLACK slower and never slower than
    greedy's (best_measured)."""
    try:
        base = measure(ctx, greedy, serial, greedy_direct, deadline)
    except CountLimit:
        return greedy, True
    if base is None:
        return greedy, False
    measured = [(greedy, base)]
    cut = False
    for c in finalists:
        try:
            m = measure(ctx, c, serial, deadline=deadline)
        except CountLimit:
            cut = True
            break
        if m is not None:
            measured.append((c, m))
    return best_measured(measured), cut


def best_measured(measured: list[tuple[Choice, tuple[float, float, int]]]) -> Choice:
    """Of plans measured as (modeled seconds, share of 32-byte-multiple DMA
    blocks, DMA bytes), greedy's first: among those at most ALIGN_SLACK
    slower than the fastest and not slower than greedy's, the one moving
    the fewest bytes (bytes are energy and shared bandwidth on a real
    machine), then the largest share of such blocks, then the fastest, then
    greedy's."""
    greedy_time = measured[0][1][0]
    fastest = min(m[0] for _, m in measured)
    limit = min(fastest * (1 + ALIGN_SLACK), greedy_time)
    best = None
    for c, m in measured:
        key = (m[2], -m[1], m[0])
        if m[0] <= limit and (best is None or key < best[1]):
            best = c, key
    return best[0]


def kernel_copy(k: Function, index: int) -> tuple[Module, Function]:
    """A module holding a copy of kernel ``k`` with only its top-level loop
    ``index`` (the other top-level loops left out) and declarations of the
    globals it reads, their data left behind: what an exact check plans and
    lowers, in memory."""
    top = top_loops(k)[index]
    body = [i for i in k.body.blocks[0].instructions
            if i is top or not i.isa(FOR, PARALLEL)]
    m = Module("search", stage="loop")
    mapping: dict = {}
    for inst in body:
        for i in inst.walk():
            for a in i.args:
                base = a.base if isinstance(a, Access) else a
                if isinstance(base, Global) and base not in mapping:
                    mapping[base] = Builder.global_(m, base.name, base.type, kind=base.kind)
    f, b = Builder.function(m, k.name, [p.type for p in k.params], k.result_types,
                            kind=k.kind, target=k.target, param_names=[p.name for p in k.params])
    f.attrs = dict(k.attrs)
    mapping.update(zip(k.params, f.params))
    clone(b, body, mapping)
    return m, f


def search_key(ctx: SearchContext, ldm_init: int) -> list:
    """What decides a nest's search, as JSON: the kernel with only this nest,
    printed with every name replaced by its position (so a layer repeated
    under other names, or at another place, has the same key), and the
    options. The loop variables' names stay in it: they seed the random
    starts. The time budget is left out: a search it cut short is not kept
    (ldm_plan)."""
    text, loops, globals_ = canonical_kernel(ctx.kernel, ctx.index)
    pads = [[scratch, globals_.get(source, source) if isinstance(source, str) else source,
             list(before), fill] for scratch, source, before, fill in ctx.pads]
    return [text, loops, pads, ctx.capacity, ctx.cpes, ctx.ldm_size, ctx.double,
            ctx.target.name, ctx.resident, ldm_init] + \
        ([] if ctx.strided_broadcast else ["contiguous broadcasts"])


def canonical_kernel(k: Function, index: int) -> tuple[str, list[str | None], dict[str, str]]:
    """The :func:`kernel_copy` of kernel ``k`` with its top-level loop
    ``index``, printed with every name replaced by its position (the same
    text for the same nest under other names, in another kernel or another
    module); the loop variables' names, in order; the globals' new names."""
    from swir.printer import print_module
    m, f = kernel_copy(k, index)
    loops = [_loop_name(i) for i in f.walk() if i.isa(FOR, PARALLEL)]
    globals_ = {g.name: f"g{n}" for n, g in enumerate(m.globals)}
    for g in m.globals:
        g.name = globals_[g.name]
    f.name = "kernel"
    n = 0
    for v in [*f.params, *(x for i in f.walk() for x in _defined(i))]:
        v.name, n = f"v{n}", n + 1
    return print_module(m), loops, globals_


def _defined(inst: Instruction) -> list[Value]:
    """The values ``inst`` defines: its results, its regions' block arguments."""
    return [*inst.results, *(a for r in inst.regions for blk in r.blocks for a in blk.args)]


def _loop_name(loop: Instruction) -> str | None:
    return loop.regions[0].blocks[0].args[0].name


def measure(ctx: SearchContext, choice: Choice, serial: frozenset[int],
            direct: list | None = None, deadline: float | None = None
            ) -> tuple[float, float, int] | None:
    """Modeled seconds of the kernel copy with only this nest, planned as
    ``choice`` (``direct``: its tensors' direct flags, else Constraint 1
    decides) and through -insert-dma, and the share of its DMA blocks whose
    length is a multiple of 32 bytes; None if that cannot be measured (the
    plan is then not chosen). Raises CountLimit when counting runs past
    ``deadline`` or over its work limit."""
    from swir.diagnostics import Diagnostic
    from swir.passes.dma.insert_dma import InsertDMA
    from swir.passes.manager import PassFailure, PassManager
    try:
        m, f = kernel_copy(ctx.kernel, ctx.index)
        nest, _ = Nest.parse(top_loops(f)[0], legal=True)
        if nest is None:
            return None
        nest.double = ctx.double
        set_tiles(nest, choice[0])
        if direct is not None:
            for t, d in zip(nest.tensors, direct):
                t.direct = d
        Plan.make(nest, ctx.cpes, [nest.vars[i] for i in choice[1]],
                  {nest.vars[i] for i in serial},
                  ctx.capacity if ctx.resident else None).rewrite()
        for scratch, source, before, fill in ctx.pads:   # measured as pad-in-load makes it
            src = f.params[source] if isinstance(source, int) else m.lookup(source)
            read_from_source(f.params[scratch], src, before, fill)
        m.stage = "buffered"
        m.attrs["ldm_size"] = ctx.ldm_size
        record_target(m.attrs, ctx.target)
        PassManager([InsertDMA(strided_broadcast=ctx.strided_broadcast)], verify_each=False,
                    target=ctx.target).run(m)
        r = cost_report(m, func=f.name, deadline=deadline)
        blocks = r.total("blocks")
        return (r.modeled_s, (r.total("blocks_32") / blocks if blocks else 1.0),
                r.total("dma_bytes"))
    except CountLimit:
        raise
    except (TrafficError, PassFailure, Diagnostic):
        return None
