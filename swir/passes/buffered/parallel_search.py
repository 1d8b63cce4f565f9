"""Searching many loop nests' plans at once, one process per core: the plan
search (:mod:`swir.passes.buffered.ldm_search`) is pure Python and takes
most of an -O3 compile, and one nest's search needs nothing of another's.

The workers are forked, so they start with the module in memory and are
given only the index of a nest; each returns the search's
:class:`~swir.passes.buffered.ldm_search.Decision`. The decisions are the
same as one process's (a search is deterministic; one the time budget cut
short is not used), so the plans, and the C, do not depend on the number of
processes.
"""

from __future__ import annotations

import math
import multiprocessing
import os
from collections.abc import Iterator

from swir.analysis.vector_plan import trip_count
from swir.passes.buffered.ldm_model import Nest, size_buffers
from swir.passes.buffered.ldm_search import Decision, search

# What a forked worker searches: (top loop, context) per nest, set as it
# starts (_start; nothing is pickled but the result).
_WORK: list[tuple] = []
_OPTIONS: tuple[int, bool] = (64, False)


def default_jobs() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def search_all(work: list[tuple[str, tuple]], ldm_init: int, double: bool, jobs: int
               ) -> Iterator[tuple[str, Decision | None]]:
    """Each nest's (key, (top, ctx)) searched in up to ``jobs`` processes:
    (key, its decision), None where the nest could not be searched (the
    caller searches it again, and reports why). Serial where fork is not
    available."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return
    order = sorted(range(len(work)), key=lambda i: -_size(work[i][1][0]))
    # Each worker is handed the work as it starts (forked: nothing pickled),
    # not through a global set here: two threads of one process may search
    # at once, and a worker must not see the other's nests.
    items = [item for _, item in work]
    with multiprocessing.get_context("fork").Pool(
            min(jobs, len(work)), initializer=_start, initargs=(items, (ldm_init, double))
    ) as pool:
        for i, d in pool.imap_unordered(_search_one, order):
            yield work[i][0], d


def _start(work: list[tuple], options: tuple[int, bool]) -> None:
    global _WORK, _OPTIONS
    _WORK, _OPTIONS = work, options


def _search_one(i: int) -> tuple[int, Decision | None]:
    top, ctx = _WORK[i]
    ldm_init, double = _OPTIONS
    try:
        nest, _ = Nest.parse(top, legal=ctx.serial is not None)
        if nest is None:
            return i, None
        nest.double = double
        size_buffers(nest, ctx.capacity, ldm_init, top)
        return i, search(nest, ctx)
    except Exception:  # the parent searches it again and reports the error there
        return i, None


def _size(top) -> float:
    """How long a nest's search may take, roughly: its loops (each adds a
    variable to search) and the log of its points; the longest go first."""
    loops = [i for i in top.walk() if i.opname in ("for", "parallel")]
    points = sum(math.log(max(1, trip_count(lp) or 1)) for lp in loops)
    return len(loops) * 100 + points
