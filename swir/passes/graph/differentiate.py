"""-differentiate: write the body of every gradient declaration (graph stage).

``func @f_grad(...) attributes {gradient = @f, wrt = [1], keeping = [0]}``
(swir/ir/gradient.py) becomes an ordinary function: @f's forward code, then
its reverse-mode gradient built by swir.autodiff (one adjoint rule per op,
adjoints summed, zero adjoints never written). The result is graph code like
any other, which the later passes fuse, plan and lower. docs/passes.md has
the algorithm; docs/training.md how it is used.
"""

from __future__ import annotations

from dataclasses import dataclass

from swir.autodiff.reverse import RECOMPUTE, GradientFailure, differentiate
from swir.diagnostics import Diagnostic
from swir.ir.core import Module
from swir.ir.gradient import GradientError, gradient_decl
from swir.passes.manager import AnalysisManager, Pass, PassFailure, one_of, option


@dataclass
class Differentiate(Pass):
    name = "differentiate"
    summary = "Write the body of each gradient declaration: reverse-mode automatic " \
              "differentiation (graph stage)"
    stages = ("graph",)

    recompute: str = option("none", "checkpointing: 'none' keeps every forward value the "
                                    "gradient reads; 'cheap' recomputes the element-wise, "
                                    "broadcast and injective ones in the backward code",
                            check=one_of(*RECOMPUTE))

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        made = 0
        for g in [f for f in module.functions if "gradient" in f.attrs]:
            try:
                decl = gradient_decl(g, module)
                differentiate(g, decl, self.recompute)
            except GradientError as e:
                raise PassFailure([Diagnostic(f"-differentiate: @{g.name}: {e}", g.loc)]) \
                    from None
            except GradientFailure as e:
                loc = e.inst.loc if e.inst is not None else g.loc
                raise PassFailure([Diagnostic(f"-differentiate: @{g.name}: {e}", loc)]) \
                    from None
            made += 1
        if made:
            self.bump("gradients written", made)
        return made > 0
