"""Running a module made for several ranks (-distribute): one interpreter per
rank, each in a thread of its own, meeting at every collective, as the ranks
of the MPI program do.

A ``data`` split gives each rank its block of every input's batch (axis 0)
and puts the results' blocks back together; a ``model`` split gives every rank
the whole inputs and returns rank 0's results (every rank has them all).
A rank that fails breaks the barrier, so the others stop instead of waiting.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np

from swir.diagnostics import Diagnostic
from swir.ops import ALLGATHER, ALLREDUCE
from swir.ops.registry import OpDef


class RankAborted(Exception):
    """Another rank failed: this one stops at its next collective."""


class World:
    """The ranks' meeting point: MPI_COMM_WORLD for the interpreters."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._barrier = threading.Barrier(size)
        self._slots: list[Any] = [None] * size

    def allgather(self, rank: int, part: np.ndarray, axis: int) -> np.ndarray:
        """Every rank's ``part``, concatenated along ``axis`` in rank order."""
        if self.size == 1:
            return part.copy()
        self._slots[rank] = part.copy()
        self._wait()
        whole = np.concatenate(self._slots, axis=axis)
        self._wait()            # nobody refills a slot before all have read them
        return whole

    def reduce(self, rank: int, partial: np.ndarray) -> np.ndarray:
        """The sum of every rank's ``partial``, in rank order (MPI_SUM)."""
        if self.size == 1:
            return partial.copy()
        self._slots[rank] = partial.copy()
        self._wait()
        total = self._slots[0].copy()
        for other in self._slots[1:]:
            total += other
        self._wait()
        return total

    def _wait(self) -> None:
        try:
            self._barrier.wait()
        except threading.BrokenBarrierError:
            raise RankAborted from None

    def abort(self) -> None:
        self._barrier.abort()


def collective(op: OpDef, attrs: dict, world: World | None, rank: int, value: np.ndarray,
               counters: "MPICounters") -> np.ndarray:
    """What graph-stage collective ``op`` gives this rank for its ``value``
    (with no world, this is the only rank), counted as the MPI program counts it."""
    ranks = attrs["ranks"]
    counter = op.name               # each collective has a counter of its name (COLLECTIVES)
    if op is ALLGATHER:
        counters.count(counter, value.nbytes * (ranks - 1))
        return value.copy() if world is None else world.allgather(rank, value, attrs["axis"])
    counters.count(counter, value.nbytes * (ranks - 1) // ranks * (2 if op is ALLREDUCE else 1))
    total = value.copy() if world is None else world.reduce(rank, value)
    if op is ALLREDUCE:
        return total
    return np.split(total, ranks, axis=attrs["axis"])[rank]


COLLECTIVES = ("allgather", "reduce_scatter", "allreduce", "scatter", "gather", "bcast")


class MPICounters:
    """What one rank sent, per collective: the MPI program's --stats "mpi"
    (swir/codegen/program_ranks.c counts the same)."""

    def __init__(self) -> None:
        self.counts = {c: [0, 0] for c in COLLECTIVES}     # calls, bytes sent

    def count(self, collective: str, bytes_sent: int) -> None:
        self.counts[collective][0] += 1
        self.counts[collective][1] += bytes_sent

    def as_json(self) -> dict[str, dict[str, int]]:
        return {c: {"calls": n, "bytes_sent": b} for c, (n, b) in self.counts.items()}


def count_io(counters: list[MPICounters], split: str, args: list[np.ndarray],
             results: list[np.ndarray]) -> None:
    """The program's inputs and outputs, moved as the MPI program moves them
    when its inputs are files: with a data split each rank reads its block of
    the batch itself and the results are gathered to rank 0; with a model
    split rank 0 broadcasts the inputs (every rank computes the whole
    outputs)."""
    ranks = len(counters)
    for r, c in enumerate(counters):
        for a in args if split != "data" else ():
            c.count("bcast", np.asarray(a).nbytes * (ranks - 1) if r == 0 else 0)
        for out in results if split == "data" else ():
            c.count("gather", 0 if r == 0 else np.asarray(out).nbytes // ranks)


def run_ranks(ranks: int, split: str, args: list[np.ndarray],
              run_rank: Callable[[int, World, list[np.ndarray]], list[np.ndarray]],
              whole: tuple[set[int], set[int]] = (set(), set())
              ) -> tuple[list[np.ndarray], list[Any]]:
    """Run ``run_rank(rank, world, its arguments)`` on every rank at once; return
    the program's results and each rank's return value in rank order.
    ``whole``: the arguments and results a data split does not cut (a
    training step's carried parameters, swir/ir/carried.py): every rank gets
    the whole argument, and must return the same result."""
    world = World(ranks)
    blocks = [np.array_split(a, ranks, axis=0)
              if split == "data" and np.ndim(a) and i not in whole[0] else [a] * ranks
              for i, a in enumerate(args)]
    shares = [[b[r] for b in blocks] for r in range(ranks)]
    results: list[Any] = [None] * ranks
    errors: list[BaseException | None] = [None] * ranks

    def body(r: int) -> None:
        try:
            results[r] = run_rank(r, world, shares[r])
        except RankAborted:
            pass
        except BaseException as e:          # reported below, from the first rank that failed
            errors[r] = e
            world.abort()

    threads = [threading.Thread(target=body, args=(r,), name=f"rank {r}")
               for r in range(ranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = next((e for e in errors if e is not None), None)
    if first is not None:
        raise first
    if split == "data":
        _check_replicated(results, whole[1])
        outs = [np.concatenate([results[r][i] for r in range(ranks)], axis=0)
                if np.ndim(results[0][i]) and i not in whole[1] else results[0][i]
                for i in range(len(results[0]))]
    else:
        outs = results[0]
    return outs, results


def _check_replicated(results: list[Any], indices: set[int]) -> None:
    """Each replicated result is bit for bit the same on every rank."""
    for i in sorted(indices):
        for r in range(1, len(results)):
            if results[r][i].tobytes() != results[0][i].tobytes():
                raise Diagnostic(f"rank {r}'s result {i} differs from rank 0's; a training "
                                 "step's carried values must be the same on every rank")
