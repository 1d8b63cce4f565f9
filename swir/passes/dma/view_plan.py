"""-view-plan: the plan of each lowered kernel (dma stage, after
-insert-dma), as text or as an SVG picture (swir.views.plan, plan_svg): its
LDM buffers against the LDM capacity, the loop nest each CPE runs and the
loop split over the CPEs, which CPE takes which iterations, and every DMA
get, put, broadcast and register-bus send with its size and how often it
runs. The module passes through unchanged.

The text goes to stderr, or with ``file=PATH`` to a file: ``.svg`` draws
the picture (one kernel: ``kernel=NAME``, or the only one), anything else
(``.txt``) the text.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from swir.diagnostics import Diagnostic
from swir.ir.core import Module
from swir.passes.manager import AnalysisManager, Pass, PassFailure, option
from swir.views.output import PictureError, extension_check, write_bytes
from swir.views.plan import cpe_kernels, kernel_plan, plan_text
from swir.views.plan_svg import plan_svg
from swir.views.printed import as_printed


@dataclass
class ViewPlan(Pass):
    name = "view-plan"
    summary = "Show each cpe kernel's plan: LDM tiles, loop nest, CPE split, DMA transfers " \
              "(stderr, or file=PATH: .txt, or .svg for one kernel); the IR is unchanged"
    stages = ("dma",)

    file: str = option("", "where it goes (empty: stderr, as text): PATH.txt (text) or "
                           "PATH.svg (a picture of one kernel)",
                       check=extension_check((".txt", ".svg")))
    kernel: str = option("", "show only this cpe kernel (empty: every one)")

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        shown = as_printed(module, "-view-plan")
        kernels = [k for k in cpe_kernels(shown) if not self.kernel or k.name == self.kernel]
        if not kernels:
            what = f"no cpe kernel @{self.kernel}" if self.kernel else "no cpe kernel"
            raise self._fail(f"the module has {what} to show", module)
        svg = os.path.splitext(self.file)[1].lower() == ".svg"
        if svg and len(kernels) > 1:
            raise self._fail(f"an SVG shows one kernel; the module has {len(kernels)}: "
                             "choose one with kernel=NAME", module)
        cpes = self.target.cpes
        plans = [kernel_plan(shown, k, cpes) for k in kernels]
        if svg:
            content = plan_svg(plans[0])
        else:
            content = "\n".join(plan_text(p) for p in plans)
        if not self.file:
            sys.stderr.write(content)
            sys.stderr.flush()
            return False
        try:
            write_bytes(self.file, content.encode())
        except PictureError as e:
            raise self._fail(str(e), module) from None
        return False

    def _fail(self, message: str, module: Module) -> PassFailure:
        return PassFailure([Diagnostic(f"-view-plan: {message}", module.loc)])
