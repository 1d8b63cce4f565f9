"""-decompose: replace each composite graph op (a loss, an optimiser step,
training-mode batch_norm: swir/ops/training.py) by the graph ops it is
written with (swir.lowering.composite), so that -fuse can fuse them: an SGD
or Adam step becomes one element-wise kernel per parameter. -lower-loops
decomposes whatever is left, so -O0 needs no -decompose."""

from __future__ import annotations

from dataclasses import dataclass

from swir.ir.core import Module
from swir.lowering.composite import decompose_all
from swir.passes.manager import AnalysisManager, Pass


@dataclass
class Decompose(Pass):
    name = "decompose"
    summary = "Write each composite op (losses, optimiser steps, training batch_norm) " \
              "with the graph ops it is made of (graph stage)"
    stages = ("graph",)

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        n = decompose_all(module)
        if n:
            self.bump("composite ops decomposed", n)
        return n > 0
