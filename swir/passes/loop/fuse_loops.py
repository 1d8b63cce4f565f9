"""-fuse-loops: fuse a loop with the loop right after it when no dependence prevents it."""

from __future__ import annotations

from dataclasses import dataclass

from swir.diagnostics import Diagnostic
from swir.ir.core import Module
from swir.ops import FOR, PARALLEL
from swir.passes.manager import AnalysisManager, Pass, PassFailure, option
from swir.transforms.loops import TransformError, fuse_loops, loop_name, select_loop


@dataclass
class FuseLoops(Pass):
    name = "fuse-loops"
    summary = "Fuse loop %IV with the loop right after it (same bounds)"
    stages = ("loop", "buffered")
    kernel: str = option("", "function containing the loop (may be omitted if only one has it)")
    loop: str = option("", "induction variable of the first of the two loops, e.g. i")

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        if not self.loop:
            raise PassFailure([Diagnostic(
                f"-{self.name}: option 'loop' is required (the induction variable of the first "
                "loop, e.g. loop=i)", module.loc)])
        try:
            first = select_loop(module, self.loop, self.kernel or None)
            block = first.parent
            assert block is not None
            k = block.index_of(first)
            second = block.instructions[k + 1] if k + 1 < len(block.instructions) else None
            if second is None or not second.isa(FOR, PARALLEL):
                what = "nothing" if second is None else f"a '{second.opname}'"
                raise TransformError(f"cannot fuse loop {loop_name(first)}: it is followed by "
                                     f"{what}, not a loop", first.loc)
            fuse_loops(first, second)
        except TransformError as e:
            raise PassFailure([e.diagnostic(f"-{self.name}: ")]) from None
        self.bump("loops fused")
        return True
