"""-dce: remove instructions whose results are unused and that have no side effects.

Fused groups are pure: an unused ``fused`` op goes, dead ops inside a group's
region go, and then the group's operands that nothing inside reads. At the
graph stage a ``global`` nothing reads any more goes too (the weights that
folding replaced), except the globals a training step carries."""

from __future__ import annotations

from dataclasses import dataclass

from swir.ir.carried import module_carried
from swir.ir.core import Instruction, Module
from swir.ir.fused import drop_unused_inputs
from swir.ops import FUSED
from swir.passes.manager import AnalysisManager, Pass


def is_trivially_dead(inst: Instruction) -> bool:
    d = inst.opdef
    return (d is not None and d.pure and not d.terminator
            and (not inst.regions or inst.isa(FUSED))
            and not any(r.has_uses for r in inst.results))


@dataclass
class DeadCodeElimination(Pass):
    name = "dce"
    summary = "Remove unused instructions that have no side effects (any stage)"

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        # Worklist: erasing an instruction may make its operands' definitions dead.
        worklist = [i for i in module.walk() if is_trivially_dead(i)]
        removed = 0
        while worklist:
            inst = worklist.pop()
            if inst.parent is None or not is_trivially_dead(inst):
                continue
            producers = [v.owner for v in inst.operands if hasattr(v, "owner")
                         and isinstance(v.owner, Instruction)]
            inst.erase()
            removed += 1
            worklist.extend(p for p in producers if is_trivially_dead(p))
        dropped = sum(drop_unused_inputs(i) for i in module.walk() if i.isa(FUSED))
        # A training step's carried globals are its state's first values (no op reads them).
        kept = module_carried(module)
        unread = [g for g in module.globals if not g.has_uses and g.name not in kept] \
            if module.stage == "graph" else []
        for g in unread:
            module.remove(g)
        if unread:
            self.bump("globals removed", len(unread))
        if removed:
            self.bump("instructions removed", removed)
        if dropped:
            self.bump("fused-group inputs removed", dropped)
        return removed + dropped + len(unread) > 0
