"""Searching many loop nests' plans at once, one process per core: the plan
search (:mod:`swir.passes.buffered.ldm_search`) is pure Python and takes
most of an -O3 compile, and one nest's search needs nothing of another's.

The workers are forked (swir.parallel), so they start with the module in
memory and are given only the index of a nest; each returns the search's
:class:`~swir.passes.buffered.ldm_search.Decision`. The decisions are the
same as one process's (a search is deterministic; one the time budget cut
short is not used), so the plans, and the C, do not depend on the number of
processes.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from swir.analysis.vector_plan import trip_count
from swir.ops import FOR, PARALLEL
from swir.parallel import fork_map
from swir.passes.buffered.ldm_model import Nest, size_buffers
from swir.passes.buffered.ldm_search import Decision, search


def search_all(work: list[tuple[str, tuple]], ldm_init: int, double: bool, jobs: int
               ) -> Iterator[tuple[str, Decision | None]]:
    """Each nest's (key, (top, ctx)) searched in up to ``jobs`` processes:
    (key, its decision), None where the nest could not be searched (the
    caller searches it again, and reports why). Serial where fork is not
    available (swir.parallel.fork_map)."""
    order = sorted(range(len(work)), key=lambda i: -_size(work[i][1][0]))
    items = [(top, ctx, ldm_init, double) for _, (top, ctx) in work]
    for i, d in fork_map(_search_one, items, jobs, order):
        yield work[i][0], d


def _search_one(item: tuple) -> Decision | None:
    top, ctx, ldm_init, double = item
    try:
        nest, _ = Nest.parse(top, legal=ctx.serial is not None)
        if nest is None:
            return None
        nest.double = double
        size_buffers(nest, ctx.capacity, ldm_init, top)
        return search(nest, ctx)
    except Exception:  # the parent searches it again and reports the error there
        return None


def _size(top) -> float:
    """How long a nest's search may take, roughly: its loops (each adds a
    variable to search) and the log of its points; the longest go first."""
    loops = [i for i in top.walk() if i.isa(FOR, PARALLEL)]
    points = sum(math.log(max(1, trip_count(lp) or 1)) for lp in loops)
    return len(loops) * 100 + points
