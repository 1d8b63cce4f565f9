"""-split-loop: strip-mine one loop by a factor (remainder handled with min bounds)."""

from __future__ import annotations

from dataclasses import dataclass

from swir.diagnostics import Diagnostic
from swir.ir.core import Module
from swir.passes.manager import AnalysisManager, Pass, PassFailure, option
from swir.transforms.loops import TransformError, select_loop, split_loop


@dataclass
class SplitLoop(Pass):
    name = "split-loop"
    summary = "Split loop %IV by a factor into %IVo (tiles) and %IVi (inside a tile)"
    stages = ("loop", "buffered")
    kernel: str = option("", "function containing the loop (may be omitted if only one has it)")
    loop: str = option("", "induction variable of the loop to split, e.g. y")
    factor: int = option(0, "tile size: iterations of the inner loop (>= 1)")

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        if not self.loop:
            raise PassFailure([Diagnostic(
                f"-{self.name}: option 'loop' is required (the induction variable of the loop, "
                "e.g. loop=y)", module.loc)])
        try:
            split_loop(select_loop(module, self.loop, self.kernel or None), self.factor)
        except TransformError as e:
            raise PassFailure([e.diagnostic(f"-{self.name}: ")]) from None
        self.bump("loops split")
        return True
