"""-parallelize: mark a loop parallel when it carries no dependence."""

from __future__ import annotations

from dataclasses import dataclass

from swir.diagnostics import Diagnostic
from swir.ir.core import Module
from swir.passes.manager import AnalysisManager, Pass, PassFailure, option
from swir.transforms.loops import TransformError, mark_parallel, select_loop


@dataclass
class Parallelize(Pass):
    name = "parallelize"
    summary = "Turn 'for' loop %IV into 'parallel' when its iterations are independent"
    stages = ("loop", "buffered")
    kernel: str = option("", "function containing the loop (may be omitted if only one has it)")
    loop: str = option("", "induction variable of the loop, e.g. x")
    workers: int = option(0, "CPEs to spread the loop over (0: leave unset)")

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        if not self.loop:
            raise PassFailure([Diagnostic(
                f"-{self.name}: option 'loop' is required (the induction variable of the loop, "
                "e.g. loop=x)", module.loc)])
        if self.workers < 0:
            raise PassFailure([Diagnostic(
                f"-{self.name}: workers must be positive (or 0 to leave it unset), got "
                f"{self.workers}", module.loc)])
        try:
            loop = select_loop(module, self.loop, self.kernel or None)
            before = (loop.opname, loop.attrs.get("workers"))
            mark_parallel(loop, self.workers or None)
        except TransformError as e:
            raise PassFailure([e.diagnostic(f"-{self.name}: ")]) from None
        changed = (loop.opname, loop.attrs.get("workers")) != before
        if changed:
            self.bump("loops parallelized")
        return changed
