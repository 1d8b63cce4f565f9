"""Where a tensor's copies go in a tiled loop nest (swTVM Algorithm 3's
placement rule), shared by -ldm-plan (copy_in / copy_out) and -insert-dma.

Walk the outer (tile) loops from the outermost inward, dropping from each
tensor's set of correlated variables every loop passed; when the set is
empty, the tensor's copy goes at that point: inside the last loop it depends
on, before the loops it does not depend on, so data that does not change
across those loops is moved once for all of them.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence


def copy_level(correlated: set[Hashable], outer_order: Sequence[Hashable],
               floor: int = 0) -> int:
    """The number of outer loops (outermost first) that enclose the tensor's
    copy: one past the innermost loop whose variable the tensor depends on,
    and at least ``floor`` (e.g. inside the parallel loop, where each CPE has
    its own LDM)."""
    pending = set(correlated) & set(outer_order)
    level = 0
    for i, var in enumerate(outer_order):
        if not pending:
            break
        pending.discard(var)
        level = i + 1
    return max(level, floor)


def executions(level: int, trips: Sequence[int]) -> int:
    """How often a copy placed at ``level`` runs: the product of the trip
    counts of the loops enclosing it."""
    n = 1
    for t in trips[:level]:
        n *= t
    return n
