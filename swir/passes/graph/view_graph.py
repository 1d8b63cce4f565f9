"""-view-graph: Graphviz DOT of each graph-stage function (as MLIR's
--view-op-graph): ops with their result types, SSA uses as edges, arguments
and results, fused groups as clusters, weights dimmed (swir.views.graph).

The module passes through unchanged. The DOT goes to stderr, or with
``file=PATH`` to a file: ``.svg`` / ``.png`` rendered by Graphviz's ``dot``
when it is on PATH (else the DOT beside it, with a hint), anything else DOT.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from swir.diagnostics import Diagnostic
from swir.ir.core import Module
from swir.passes.manager import AnalysisManager, Pass, PassFailure, option
from swir.views.graph import graph_dot
from swir.views.output import PictureError, extension_check, write_dot_picture
from swir.views.printed import as_printed


@dataclass
class ViewGraph(Pass):
    name = "view-graph"
    summary = "Write Graphviz DOT of each graph-stage function (stderr, or file=PATH: " \
              ".dot, or .svg/.png rendered by Graphviz); the IR is unchanged"
    stages = ("graph",)

    file: str = option("", "where the picture goes (empty: stderr): PATH.dot (DOT), "
                           "PATH.svg or PATH.png (rendered by Graphviz's dot)",
                       check=extension_check((".dot", ".gv", ".svg", ".png")))
    func: str = option("", "draw only this function (empty: every function with a body)")

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        shown = as_printed(module, "-view-graph")
        functions = [f for f in shown.functions if f.body is not None
                     and (not self.func or f.name == self.func)]
        if not functions:
            what = f"no function @{self.func}" if self.func else "no function with a body"
            raise PassFailure([Diagnostic(f"-view-graph: the module has {what} to draw",
                                          module.loc)])
        text = graph_dot(shown, functions)
        if not self.file:
            sys.stderr.write(text)
            sys.stderr.flush()
            return False
        try:
            note = write_dot_picture(self.file, text)
        except PictureError as e:
            raise PassFailure([Diagnostic(f"-view-graph: {e}", module.loc)]) from None
        if note:
            print(f"-view-graph: {note}", file=sys.stderr)
        return False
