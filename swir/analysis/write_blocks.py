"""Which work split keeps the CPEs' writes in separate 32-byte blocks of main
memory.

Whether the SW26010's DMA engine writes part of an aligned block without
touching the bytes around it is not public (docs/codegen.md, "On a real
Sunway machine"), so no two CPEs may write by DMA into one aligned 32-byte
block in one spawn. A parallel loop is shared out by ``chunk`` in contiguous
ranges of iterations; :func:`write_grain` finds the smallest unit (``grain``
iterations) whose cut points fall between blocks: at each cut, the last block
the iterations before it write comes before the first block the iterations
after it write. Main-memory buffers start 32-byte aligned (the arena and
every block are 64-byte aligned), so block numbers are offsets // 32.

The footprint of one iteration is bounded by its hull: the lowest and
highest byte its ``copy_out``s write, over the corners of the loops around
them (exact for affine subscripts). A subscript that is not affine in those
loops' variables gives no hull, and the loop is then left to one CPE: always
safe, and rare (no lowering produces it). The emulation checks the rule
exactly at every join.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from swir.ir.affine import Compound, Expr
from swir.ir.core import Access, Instruction, Range, Value
from swir.ir.types import ShapedType
from swir.ops import COPY_OUT, FOR
from swir.ops.util import attr_or_default
from swir.ir.module_attrs import module_target
from swir.target import default_target

_CORNER_LIMIT = 4096     # loop-corner environments evaluated per hull at most
_EXACT_LIMIT = 1 << 14   # loops up to this long have every iteration's hull looked at
_SEGMENT_LIMIT = 1 << 16  # contiguous runs the block-exact check enumerates at most
_ACTIVE_LIMIT = 64       # runs sharing blocks at one point, at most, for that check
_POINT_BUDGET = 1 << 18  # loop points the exact checks evaluate over a whole loop at most
NOTHING = 1 << 62        # the first block of an empty footprint


def chunk_cuts(extent: int, workers: int, grain: int) -> list[int]:
    """The iterations where one worker's share ends and the next one's begins
    (as ``chunk`` shares ``extent`` out), without 0 and ``extent``."""
    units = -(-extent // grain)
    q, m = divmod(units, workers)
    cuts = set()
    for w in range(1, workers):
        b = min((w * q + min(w, m)) * grain, extent)
        if 0 < b < extent:
            cuts.add(b)
    return sorted(cuts)


def write_grain(loop: Instruction, extent: int, workers: int) -> int:
    """The smallest grain (iterations per unit of the split) for which no two
    workers' writes share a block; ``extent`` (one worker) when none is found."""
    puts = [i for i in loop.regions[0].blocks[0].walk() if i.isa(COPY_OUT)]
    if not puts or extent <= 1 or workers <= 1:
        return 1
    iv = loop.regions[0].blocks[0].args[0]
    lb = Expr.of(loop.args[0]).const
    by_buffer: dict[int, list[Instruction]] = {}
    for put in puts:
        by_buffer.setdefault(id(put.args[1].base) if isinstance(put.args[1], Access) else 0,
                             []).append(put)
    block = module_target(loop).write_block     # bytes: the write granularity no two CPEs may share
    checks = [_BufferCuts(group, iv, lb, extent, block) for group in by_buffer.values()]
    for grain in _candidates(extent, block):
        cuts = chunk_cuts(extent, workers, grain)
        if all(c.separates(b) for c in checks for b in cuts):
            return grain
    return extent


def _candidates(extent: int, block: int) -> Iterator[int]:
    yield from range(1, min(extent, 2 * block) + 1)
    g = 4 * block
    while g < extent:
        yield g
        g *= 2


class _BufferCuts:
    """Whether cutting the parallel loop before iteration b separates the
    blocks the ``copy_out``s into one buffer write in iterations before b from
    those they write in iterations from b on: by the hulls (the last block
    written before b against the first written from b on, over every
    iteration when the loop is short enough to look at each; else at the cut,
    and only when no subscript divides the loop variable, so the iterations
    move forward through memory), or, for a buffer with one ``copy_out``, by
    the layout (the loop steps along one dimension whose boundary at b falls
    on a block boundary in every row)."""

    def __init__(self, puts: list[Instruction], iv: Value, lb: int, extent: int,
                 block: int) -> None:
        self.puts, self.iv, self.lb, self.extent = puts, iv, lb, extent
        self.block = block
        self.loops = [_loops_between(put, iv) for put in puts]
        self._hull_cache: dict[int, tuple[int, int] | None] = {}
        self._prefix: list[int] | None = None     # last block written by iterations <= i
        self._suffix: list[int] | None = None     # first block written by iterations >= i
        # every iteration looked at, within a budget of evaluated points
        self._exact = extent <= _EXACT_LIMIT and \
            extent * max(_points(put, loops, iv, lb) for put, loops in zip(puts, self.loops)) \
            <= _POINT_BUDGET
        self._bad_cuts: list[bool] | None = None  # by the blocks each iteration writes
        # beyond the exact limit, only the cut's two iterations are looked at
        self._forward = not any(
            isinstance(put.args[1], Access)
            and any(_compound_over(ix, {id(iv)}, _DIVISIONS) for ix in put.args[1].indices)
            for put in puts)

    def separates(self, b: int) -> bool:
        return self._by_hulls(b) or self._by_layout(b) or self._by_blocks(b)

    # -- blocks ------------------------------------------------------------------
    def _by_blocks(self, b: int) -> bool:
        """By the blocks themselves: each iteration's box (per dimension, the
        indices its puts cover: what they write, or more) cut into contiguous
        runs; a cut is bad when a block has runs of iterations on both sides
        of it. Where boxes of different iterations interleave (a tile of
        channels, each a few rows: their hulls overlap, their blocks do not),
        this finds the cuts the hulls cannot. Only for loops short enough to
        look at every iteration (and at most _SEGMENT_LIMIT runs)."""
        if self._bad_cuts is None:
            self._bad_cuts = self._scan_blocks() or [True] * (self.extent + 1)
        return not self._bad_cuts[b]

    def _scan_blocks(self) -> list[bool] | None:
        if not self._exact:
            return None
        runs: list[tuple[int, int, int]] = []        # (first block, last block, iteration)
        for i in range(self.extent):
            for put, loops in zip(self.puts, self.loops):
                acc = put.args[1]
                if not isinstance(acc, Access) or not isinstance(acc.base.type, ShapedType):
                    return None
                box = _index_ranges(acc, loops, self.iv, self.lb + i)
                if box is None:
                    return None
                room = _SEGMENT_LIMIT - len(runs)
                runs += [(lo // self.block, hi // self.block, i)
                         for lo, hi in itertools.islice(_box_runs(box, acc.base.type), room + 1)]
                if len(runs) > _SEGMENT_LIMIT:
                    return None
        runs.sort()
        delta = [0] * (self.extent + 2)             # bad cuts, as a difference array
        active: list[tuple[int, int, int]] = []
        for first, last, i in runs:
            active = [r for r in active if r[1] >= first]
            others = [r[2] for r in active if r[2] != i]
            if others:
                lo, hi = min(others + [i]), max(others + [i])
                delta[lo + 1] += 1                  # cuts lo+1 .. hi split a shared block
                delta[hi + 1] -= 1
            active.append((first, last, i))
            if len(active) > _ACTIVE_LIMIT:
                return None
        bad, level = [], 0
        for d in delta[:self.extent + 1]:
            level += d
            bad.append(level > 0)
        return bad

    # -- hulls -------------------------------------------------------------------
    def _blocks(self, i: int) -> tuple[int, int] | None:
        """The first and last block the buffer's puts write in iteration i."""
        if i not in self._hull_cache:
            first, last = NOTHING, -1
            for put, loops in zip(self.puts, self.loops):
                h = _put_hull(put, loops, self.iv, self.lb + i)
                if h is None:
                    self._hull_cache[i] = None
                    return None
                if h[0] <= h[1]:
                    first, last = min(first, h[0] // self.block), max(last, h[1] // self.block)
            self._hull_cache[i] = (first, last)
        return self._hull_cache[i]

    def _by_hulls(self, b: int) -> bool:
        if self._exact:
            if self._prefix is None and not self._scan():
                return False
            return self._prefix[b - 1] < self._suffix[b]  # type: ignore[index]
        if not self._forward:
            return False
        before, after = self._blocks(b - 1), self._blocks(b)
        return before is not None and after is not None and before[1] < after[0]

    def _scan(self) -> bool:
        hulls = [self._blocks(i) for i in range(self.extent)]
        if any(h is None for h in hulls):
            self._exact = False
            return False
        prefix, last = [], -1
        for h in hulls:
            last = max(last, h[1])  # type: ignore[index]
            prefix.append(last)
        suffix, first = [0] * self.extent, NOTHING
        for i in range(self.extent - 1, -1, -1):
            first = min(first, hulls[i][0])  # type: ignore[index]
            suffix[i] = first
        self._prefix, self._suffix = prefix, suffix
        return True

    # -- layout ------------------------------------------------------------------
    def _by_layout(self, b: int) -> bool:
        """The loop variable p appears, affinely with a positive coefficient,
        in the subscript of one dimension d only; iteration p's range along d
        lies in [c*p + k, c*p + k + c); the offset where iteration b's range
        starts is a multiple of the block in every row (each outer dimension that
        varies has a byte stride that is a multiple of it). Then every
        row splits at a block boundary: before it iterations < b, after it
        the others."""
        if len(self.puts) != 1:
            return False
        acc = self.puts[0].args[1]
        if not isinstance(acc, Access) or not isinstance(acc.base.type, ShapedType):
            return False
        dims = [k for k, ix in enumerate(acc.indices) if _mentions(ix, self.iv)]
        if len(dims) != 1 or any(_compound_over(ix, {id(self.iv)}, _DIVISIONS)
                                 for ix in acc.indices):
            return False
        d = dims[0]
        ix = acc.indices[d]
        c = _coefficient(ix.lo if isinstance(ix, Range) else ix, self.iv)
        if c <= 0:
            return False
        ranges = [_index_ranges(acc, self.loops[0], self.iv, self.lb + p)
                  for p in (b - 1, b, 0)]
        if any(r is None for r in ranges):
            return False
        before, after, first = ranges  # type: ignore[misc]
        k = first[d][0] - 0                            # iteration 0 starts at k along d
        strides = _byte_strides(acc.base.type)
        start = after[d][0]
        if start != c * b + k or before[d][1] >= start or after[d][1] >= start + c:
            return False
        offset = start * strides[d]
        for outer in range(d):
            lo, hi = after[outer]
            if strides[outer] % self.block == 0:
                continue
            if lo != hi or before[outer] != (lo, hi):
                return False
            offset += lo * strides[outer]
        return offset % self.block == 0


def _loops_between(put: Instruction, iv: Value) -> list[Instruction]:
    """The ``for`` loops around ``put`` inside the parallel loop, outermost first."""
    loops = []
    parent = put.parent
    while parent is not None:
        owner = parent.parent.parent if parent.parent is not None else None
        if owner is None or (owner.regions and owner.regions[0].blocks
                             and owner.regions[0].blocks[0].args
                             and owner.regions[0].blocks[0].args[0] is iv):
            break
        if owner.isa(FOR):
            loops.append(owner)
        parent = owner.parent
    return loops[::-1]


def _needs_every(acc: Access, loops: list[Instruction]) -> bool:
    """Whether a min / max / division over the inner loops' variables (an
    edge tile's extent, a triangular bound) makes the corners not enough:
    then every point of those loops is evaluated."""
    inner = {id(lp.regions[0].blocks[0].args[0]) for lp in loops}
    return any(_compound_over(ix, inner) for ix in acc.indices) or \
        any(_compound_over(Expr.of(b), inner) for lp in loops for b in lp.args[:2])


def _points(put: Instruction, loops: list[Instruction], iv: Value, lb: int) -> int:
    """The loop points one iteration's bound evaluates (its first iteration's)."""
    acc = put.args[1]
    if not isinstance(acc, Access):
        return 1
    envs = _corners(loops, {iv: lb}, every=_needs_every(acc, loops))
    return sum(1 for _ in envs) if envs is not None else _CORNER_LIMIT


def _corners(loops: list[Instruction], env: dict, every: bool = False
             ) -> Iterator[dict] | None:
    """Environments at the corners of the loops' iteration space (each
    variable at its first and last value, given the outer ones); with
    ``every``, at every point of it. None past _CORNER_LIMIT of them."""
    envs = [env]
    for loop in loops:
        var = loop.regions[0].blocks[0].args[0]
        step = attr_or_default(loop, "step")
        nxt = []
        for e in envs:
            lo, hi = Expr.of(loop.args[0]).evaluate(e), Expr.of(loop.args[1]).evaluate(e) - 1
            if hi < lo:
                continue
            if every and (hi - lo) // step + 1 > _CORNER_LIMIT:
                return None
            for v in range(lo, hi + 1, step) if every else {lo, hi}:
                nxt.append({**e, var: v})
        envs = nxt
        if len(envs) > _CORNER_LIMIT:
            return None
    return iter(envs)


def _put_hull(put: Instruction, loops: list[Instruction], iv: Value, p: int
              ) -> tuple[int, int] | None:
    """The lowest and highest byte offset ``put`` writes in iteration ``p``
    (lowest > highest: it writes nothing)."""
    acc = put.args[1]
    if not isinstance(acc, Access) or not isinstance(acc.base.type, ShapedType):
        return None
    ranges = _index_ranges(acc, loops, iv, p)
    if ranges is None:
        return None
    if any(lo > hi for lo, hi in ranges):
        return 1, 0
    strides = _byte_strides(acc.base.type)
    first = sum(lo * s for (lo, _), s in zip(ranges, strides))
    last = sum(hi * s for (_, hi), s in zip(ranges, strides))
    return first, last + acc.base.type.element.bytes - 1


def _index_ranges(acc: Access, loops: list[Instruction], iv: Value, p: int
                  ) -> list[tuple[int, int]] | None:
    """Per dimension, the lowest and highest index ``acc`` covers in
    iteration ``p`` over the loops around it (None: not affine in them)."""
    envs = _corners(loops, {iv: p}, every=_needs_every(acc, loops))
    if envs is None:
        return None
    out: list[list[int]] = [[1 << 62, -(1 << 62)] for _ in acc.indices]
    seen = False
    try:
        for env in envs:
            seen = True
            for k, ix in enumerate(acc.indices):
                if isinstance(ix, Range):
                    a, z = ix.lo.evaluate(env), ix.hi.evaluate(env) - 1
                else:
                    a = z = ix.evaluate(env)
                out[k][0], out[k][1] = min(out[k][0], a), max(out[k][1], z)
    except KeyError:                           # a value from inside the nest (data)
        return None
    if not seen:
        return [(1, 0)] * len(acc.indices)
    return [(a, z) for a, z in out]


def _mentions(ix: Expr | Range, v: Value) -> bool:
    exprs = [ix.lo, ix.hi] if isinstance(ix, Range) else [ix]
    return any(u is v for e in exprs for u in e.values())


def _coefficient(e: Expr, v: Value) -> int:
    return sum(c for atom, c in e.terms if atom is v)


_DIVISIONS = ("floordiv", "ceildiv", "mod")


def _compound_over(ix: Expr | Range, variables: set[int],
                   kinds: tuple[str, ...] = ("floordiv", "ceildiv", "mod", "min", "max")) -> bool:
    """Whether a compound of one of ``kinds`` in ``ix`` depends on one of the
    ``variables`` (then the loop corners do not bound it, or the index does
    not step evenly)."""
    exprs = [ix.lo, ix.hi] if isinstance(ix, Range) else [ix]
    return any(isinstance(atom, Compound) and atom.kind in kinds
               and any(id(v) in variables for a in atom.args for v in a.values())
               for e in exprs for atom, _ in e.terms)


def _box_runs(box: list[tuple[int, int]], t: ShapedType) -> Iterator[tuple[int, int]]:
    """The contiguous byte runs [first, last] of a box of indices (per
    dimension, lowest and highest) in a tensor of type t: the dimensions
    inside the outermost partial one join its run."""
    if not box or any(lo > hi for lo, hi in box):
        return
    shape, strides = t.shape, _byte_strides(t)
    d = len(box) - 1
    while d > 0 and box[d] == (0, shape[d] - 1):
        d -= 1
    length = (box[d][1] - box[d][0] + 1) * strides[d]
    outer = [range(lo, hi + 1) for lo, hi in box[:d]]
    for idx in itertools.product(*outer):
        start = sum(k * s for k, s in zip(idx, strides)) + box[d][0] * strides[d]
        yield start, start + length - 1


def _byte_strides(t: ShapedType) -> list[int]:
    strides, step = [], t.element.bytes
    for d in reversed(t.shape):
        strides.append(step)
        step *= d
    return strides[::-1]


__all__ = ["BLOCK", "chunk_cuts", "write_grain"]


def __getattr__(name: str) -> Any:
    """BLOCK: the default target's write block, for code that asks for it by
    this name; write_grain reads the target of the module it looks at."""
    if name == "BLOCK":
        return default_target().write_block
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
