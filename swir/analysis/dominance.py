"""Dominance between the blocks of one region (CFG regions of functions; a
structured region has a single block and is trivial)."""

from __future__ import annotations

from swir.ir.core import Block, Region


def dominator_sets(region: Region) -> dict[int, set[int]]:
    """For each block (by id), the ids of the blocks that dominate it.

    The classic iterative data-flow solution; the entry is the first block.
    Unreachable blocks are dominated by everything, as in MLIR.
    """
    blocks = region.blocks
    ids = [id(b) for b in blocks]
    preds: dict[int, list[int]] = {i: [] for i in ids}
    for b in blocks:
        for s in b.successors:
            if id(s) in preds:
                preds[id(s)].append(id(b))
    everything = set(ids)
    dom = {i: set(everything) for i in ids}
    if ids:
        dom[ids[0]] = {ids[0]}
    changed = True
    while changed:
        changed = False
        for i in ids[1:]:
            ps = [dom[p] for p in preds[i]]
            if not ps:
                continue
            new = set.intersection(*ps) | {i}
            if new != dom[i]:
                dom[i], changed = new, True
    return dom


class DominanceInfo:
    """Dominator sets and tree of one region."""

    def __init__(self, region: Region) -> None:
        self.region = region
        self.sets = dominator_sets(region)
        by_id = {id(b): b for b in region.blocks}
        self.children: dict[int, list[Block]] = {id(b): [] for b in region.blocks}
        for b in region.blocks[1:]:
            strict = self.sets[id(b)] - {id(b)}
            # The immediate dominator is the strict dominator dominated by all others.
            for d in strict:
                if self.sets[d] == strict:
                    self.children[d].append(b)
                    break
        self._by_id = by_id

    def dominates(self, a: Block, b: Block) -> bool:
        return id(a) in self.sets.get(id(b), set())

    def tree_children(self, b: Block) -> list[Block]:
        return self.children.get(id(b), [])
