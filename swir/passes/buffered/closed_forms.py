"""The LDM plan search's closed forms that need no tile-loop order, for many
tilings of one nest at once: numpy arrays with one entry per tiling.

The search (ldm_search.Search.improve) weighs every candidate tile of one
variable, the other tiles fixed, at each step. Before estimating a tiling's
loop orders it asks whether the tiles fit the LDM, whether they leave the
CPEs one task, and whether a lower bound of every order's estimate already
rules them out. Those are straight formulas of the tiles, so they are
evaluated here for all the step's candidates in one pass of array arithmetic
instead of one Python call per candidate. The estimates that need an order
(Algorithm 2's choice, the vector plan) stay per tiling, in ldm_search.

Exactness: sizes, runs and DMA counts are int64 (a tile's elements are at
most its tensor's, far below 2**63), so they equal Python's integers. The
bound applies the same IEEE operations in the same order as a scalar loop
would, element by element, so it is the same double for every tiling
(test_search_shortcuts checks both against scalar code, to the bit, and
the bound against every order's estimate).
"""

from __future__ import annotations

import math

import numpy as np

from swir.costmodel.cost import Machine
from swir.passes.buffered.ldm_model import Nest, Tensor, corr

# Per buffered tensor: its tile's bytes, contiguous runs, DMAs per copy, and
# whether the tile is one element (each an array over the tilings).
Shapes = dict[Tensor, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]


class Tilings:
    """Tilings of ``nest`` (one tile per loop variable each), with each
    buffered tensor's tile shape (:attr:`shapes`) for every one of them."""

    def __init__(self, nest: Nest, tilings: list[tuple[int, ...]]) -> None:
        self.nest = nest
        self.tiles = np.array(tilings, dtype=np.int64).reshape(len(tilings), len(nest.vars))
        self.ntiles = -(-np.array([v.extent for v in nest.vars], dtype=np.int64) // self.tiles)
        column = {v.iv: self.tiles[:, j] for j, v in enumerate(nest.vars)}
        self.shapes: Shapes = {t: _shape(t, column, len(tilings)) for t in nest.buffered()}

    def __len__(self) -> int:
        return len(self.tiles)

    def row(self, k: int) -> dict[Tensor, tuple[int, int, int, bool]]:
        """Tiling ``k``'s shapes as Python numbers (what the per-order
        estimate takes)."""
        return {t: (int(b[k]), int(r[k]), int(d[k]), bool(s[k]))
                for t, (b, r, d, s) in self.shapes.items()}

    def ldm_bytes(self) -> np.ndarray:
        """The LDM each tiling's buffers take (Nest.slot_bytes of each, on
        the arrays)."""
        total = np.zeros(len(self), dtype=np.int64)
        for t, (nbytes, *_) in self.shapes.items():
            total += self.nest.slot_bytes(t, nbytes)
        return total

    def one_task(self, serial: frozenset[int]) -> np.ndarray:
        """Whether each tiling leaves one task where an output loop (not in
        ``serial``) could be split."""
        outputs = [(i, v) for i, v in enumerate(self.nest.vars) if not v.reduction]
        splittable = any(v.extent > 1 and i not in serial for i, v in outputs)
        whole = np.ones(len(self), dtype=bool)
        for i, v in outputs:
            whole &= self.tiles[:, i] >= v.extent
        return whole & splittable

    def lower_bounds(self, cpes: int, floor: float, serial: frozenset[int], m: Machine
                     ) -> np.ndarray:
        """A lower bound of ldm_search.estimate for each tiling over every
        tile-loop order, without ordering the loops or costing the vector
        code (``floor``: ldm_search.nest_cycles_floor): the compute spread
        over as many CPEs as the loops that may run in parallel give tasks,
        and each tensor copied once per tile of the loops it depends on
        (every order's copies enclose those loops), as many CPEs as there are
        starting DMAs, a broadcast wherever one could be cheaper."""
        nest, n = self.nest, len(self)
        tasks = np.ones(n, dtype=np.int64)
        for i, v in enumerate(nest.vars):
            if not v.reduction and i not in serial:
                tasks *= self.ntiles[:, i]
        total = floor / np.minimum(cpes, tasks) / m.clock_hz
        for t, (nbytes, runs, dmas, single) in self.shapes.items():
            init = bool(nest.red) and nest.initialised and t.base is nest.output
            moves = (t.copied_in and not init) + t.written
            deps = corr(t)
            copies = np.full(n, moves, dtype=np.int64)
            for i, v in enumerate(nest.vars):
                if v.iv in deps and not (init and v.reduction):
                    copies *= self.ntiles[:, i]
            gets = sum(get_seconds(m, copies, nbytes, runs, dmas, cpes))
            if cpes == m.cpes and t.read and not t.written:
                gets = np.minimum(gets, broadcast_seconds(m, copies, cpes, nbytes, runs, dmas))
            if t.read and not t.written:      # a one-element tile is loaded directly
                gets = np.where(single, sum(direct_seconds(nest, t, m, cpes)), gets)
            total = total + gets
        return total


def _shape(t: Tensor, column: dict, n: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``t``'s tile bytes, runs, DMAs per copy and one-element flag for each
    tiling (``column``: each loop variable's tiles)."""
    ext = []
    for const, terms in t.extent_terms:
        e = np.full(n, const, dtype=np.int64)
        for v, c in terms:
            e += c * (column[v] - 1)
        ext.append(e)
    elements = np.ones(n, dtype=np.int64)
    for e in ext:
        elements *= e
    runs, dmas = _runs_and_dmas(ext, t.shape, n)
    return elements * t.base.type.element.bytes, runs, dmas, elements == 1


def _runs_and_dmas(ext: list[np.ndarray], shape: tuple[int, ...], n: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Contiguous runs of each tile in a row-major array of ``shape`` (the
    dimensions outside the innermost partial one multiply), and the DMAs one
    copy takes: runs with one pitch share a strided DMA (the runs across the
    dimension outside the innermost partial one; ldm_model.runs_of)."""
    runs = np.ones(n, dtype=np.int64)
    whole = np.ones(n, dtype=bool)
    for d in reversed(range(len(ext))):
        runs = np.where(whole, runs, runs * ext[d])
        whole &= ext[d] >= shape[d]
    dmas = np.ones(n, dtype=np.int64)
    found = np.zeros(n, dtype=bool)
    for d in reversed(range(len(ext))):
        partial = (ext[d] < shape[d]) & ~found
        if d > 0:
            dmas = np.where(partial, np.maximum(1, runs // ext[d - 1]), dmas)
        found |= partial
    return runs, dmas


def direct_seconds(nest: Nest, t: Tensor, m: Machine, busy: int) -> tuple[float, float]:
    """Streaming and start-up seconds of a tensor loaded directly
    (Constraint 1): a single-word access each time, charged as a one-element
    DMA, the start-ups spread over ``busy`` CPEs."""
    words, word = math.prod(v.extent for v in nest.vars), t.base.type.element.bytes
    return (words * (word + m.half_block) / m.drawn_bandwidth(busy),
            words * m.startup_share(word) * m.dma_startup / busy)


def get_seconds(m: Machine, copies, nbytes, runs, dmas, busy: int) -> tuple:
    """Streaming and start-up seconds of ``copies`` copies of a tile (its
    bytes, contiguous runs and DMAs per copy), the start-ups spread over
    ``busy`` CPEs; of numbers or of arrays over tilings alike."""
    return (copies * (nbytes + runs * m.half_block) / m.drawn_bandwidth(busy),
            copies * dmas * _startup_share(m, nbytes / dmas) * m.dma_startup / busy)


def broadcast_seconds(m: Machine, copies, cpes: int, nbytes, runs, dmas):
    """Seconds of the same copies as broadcasts: one per round of copies,
    every CPE waiting for it; of numbers or of arrays alike."""
    return copies / cpes * (m.bcast_seconds([(nbytes / runs, runs)])
                            + (dmas - 1) * m.bcast_fixed)


def _startup_share(m: Machine, per_dma):
    """Machine.startup_share of a number or of an array."""
    if isinstance(per_dma, np.ndarray) and m.startup_bytes > 0:
        return np.minimum(1.0, per_dma / m.startup_bytes)
    return m.startup_share(per_dma)
