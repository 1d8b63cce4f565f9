"""-reorder-loops: permute a perfect loop nest when no dependence is reversed."""

from __future__ import annotations

from dataclasses import dataclass

from swir.diagnostics import Diagnostic
from swir.ir.core import Module
from swir.passes.manager import AnalysisManager, Pass, PassFailure, option
from swir.transforms.loops import TransformError, perfect_nest, reorder_loops, select_nest


@dataclass
class ReorderLoops(Pass):
    name = "reorder-loops"
    summary = "Permute a perfect loop nest into the given order (outermost first)"
    stages = ("loop", "buffered")
    kernel: str = option("", "function containing the nest (may be omitted if only one has it)")
    order: str = option("", 'the nest\'s loops in their new order, outermost first, e.g. "k,y,x"')

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        names = [n.strip() for n in self.order.split(",") if n.strip()]
        if not names:
            raise PassFailure([Diagnostic(
                f"-{self.name}: option 'order' is required (the nest's induction variables, "
                'outermost first, e.g. order="k,y,x")', module.loc)])
        try:
            root = select_nest(module, names, self.kernel or None)
            before = perfect_nest(root, len(names))
            after = reorder_loops(root, names)
        except TransformError as e:
            raise PassFailure([e.diagnostic(f"-{self.name}: ")]) from None
        changed = after != before
        if changed:
            self.bump("loop nests reordered")
        return changed
