"""Independent work shared out over forked processes, one per core: the plan
search of many loop nests (-ldm-plan) and the trial lowerings of the graph
passes (swir.costmodel.trial) are pure Python, and no item needs another's.

The workers are forked, so they start with the compiler's objects in memory;
they are handed the items as they start (the Pool initializer: nothing is
pickled but the results), never through a global set before the fork, since
two threads of one process may share work out at once. Results are the same
as one process's, so the output does not depend on the number of processes.

What a worker learns in a process-wide :func:`memo` (the dependence answers
by kernel text, say) comes back with each result and is merged into the
parent's, so the parent, and workers forked later, do not learn it again.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any

_FN: Callable[[Any], Any] | None = None
_ITEMS: list = []
_MEMOS: dict[str, dict] = {}
_SENT: dict[str, int] = {}      # in a worker: each memo's entries already sent back


def memo(name: str) -> dict:
    """The process-wide memo ``name``: a dict of picklable keys and values,
    entries only ever added, whose entries forked workers learn come back
    to the parent (:func:`fork_map`)."""
    return _MEMOS.setdefault(name, {})


def default_jobs() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def processes(jobs: int) -> int:
    """The processes a pass option ``jobs`` asks for: itself, or one per
    core for 0."""
    return jobs or default_jobs()


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def fork_map(fn: Callable[[Any], Any], items: list, jobs: int,
             order: Iterable[int] | None = None) -> Iterator[tuple[int, Any]]:
    """``(i, fn(items[i]))`` for each item, in up to ``jobs`` forked
    processes, as they finish (``order``: the indices in the order to start
    them). The caller does itself the work of any item not yielded: none
    where fork or a process pool is not available, the rest when a worker
    dies (killed, out of memory)."""
    if not can_fork() or not items:
        return
    try:
        pool = ProcessPoolExecutor(min(jobs, len(items)),
                                   mp_context=multiprocessing.get_context("fork"),
                                   initializer=_start, initargs=(fn, items))
    except (OSError, ImportError, NotImplementedError):
        return
    try:
        futures = [pool.submit(_run, i) for i in (range(len(items)) if order is None else order)]
        for done in as_completed(futures):
            i, result, learned = done.result()
            for name, entries in learned.items():
                memo(name).update(entries)
            yield i, result
    except BrokenProcessPool:
        return
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _start(fn: Callable[[Any], Any], items: list) -> None:
    global _FN, _ITEMS, _SENT
    _FN, _ITEMS = fn, items
    _SENT = {name: len(entries) for name, entries in _MEMOS.items()}


def _run(i: int) -> tuple[int, Any, dict[str, list]]:
    assert _FN is not None
    result = _FN(_ITEMS[i])
    learned = {}
    for name, entries in _MEMOS.items():
        sent = _SENT.get(name, 0)
        if len(entries) > sent:
            learned[name] = list(entries.items())[sent:]
            _SENT[name] = len(entries)
    return i, result, learned
