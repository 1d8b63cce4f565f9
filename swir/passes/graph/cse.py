"""-cse: merge instructions that compute the same value.

Scoped hash tables over the dominator tree of each region (so a value is
reused wherever its first computation dominates), descending into nested
regions with the enclosing scope visible. Only pure instructions without
regions or memory reads are merged; the operands of commutative ops are put in
a canonical order before comparing, and constants compare exactly (0.0 and
-0.0 differ, every nan is the same). Fused groups are the exception to "no
regions": two with the same operands and the same region (structurally) are
merged; a group's region is isolated, so CSE inside it starts a fresh scope.
"""

from __future__ import annotations

from dataclasses import dataclass
from swir.analysis.dominance import DominanceInfo
from swir.ir.core import Block, Instruction, Module, Region, Type, slot_key, value_key
from swir.ir.fused import structural_key
from swir.ops import FUSED
from swir.passes.manager import AnalysisManager, Pass


def cse_key(inst: Instruction) -> tuple | None:
    d = inst.opdef
    if d is None or not d.pure or d.reads_memory or d.terminator or not inst.results \
            or (inst.regions and not inst.isa(FUSED)):
        return None
    args = [slot_key(s) for s in inst.args]
    if d.commutative:
        args.sort(key=repr)
    attrs = tuple(sorted((k, value_key(v)) for k, v in inst.attrs.items()))
    types: tuple[Type, ...] = tuple(r.type for r in inst.results)
    region = structural_key(inst) if inst.regions else None
    return (inst.opname, tuple(args), inst.arrow, attrs, types, region)


@dataclass
class CommonSubexpressionElimination(Pass):
    name = "cse"
    summary = "Merge pure instructions that compute the same value (any stage)"

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        self._analyses = analyses
        merged = 0
        for f in module.functions:
            if f.body is not None:
                merged += self._region(f.body, [{}])
        if merged:
            self.bump("instructions merged", merged)
        return merged > 0

    def _region(self, region: Region, scopes: list[dict]) -> int:
        if not region.blocks:
            return 0
        dom = self._analyses.get(DominanceInfo, region)
        return self._block(region.entry, dom, scopes)

    def _block(self, block: Block, dom: DominanceInfo, scopes: list[dict]) -> int:
        scopes.append({})
        merged = 0
        for inst in list(block.instructions):
            key = cse_key(inst)
            if key is not None:
                hit = _find(scopes, key)
                if hit is not None:
                    for old, new in zip(inst.results, hit.results):
                        old.replace_all_uses_with(new)
                    inst.erase()
                    merged += 1
                    continue
                scopes[-1][key] = inst
            for r in inst.regions:
                merged += self._region(r, [{}] if inst.isa(FUSED) else scopes)
        for child in dom.tree_children(block):
            merged += self._block(child, dom, scopes)
        scopes.pop()
        return merged


def _find(scopes: list[dict], key: tuple) -> Instruction | None:
    for s in reversed(scopes):
        hit = s.get(key)
        if hit is not None:
            return hit
    return None
