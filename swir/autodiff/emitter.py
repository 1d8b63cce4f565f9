"""What an adjoint rule writes the backward code with.

A rule is ``rule(e, inst, dys) -> list`` (swir.autodiff.rules): ``inst`` is a
forward instruction, ``dys`` the adjoints of its results (None: zero, never
materialised) and the answer one adjoint per operand (None: zero, or not
wanted: ``e.wants(i)`` says whether operand i needs one). The rule reads
forward values through ``e.primal(v)``, which gives the saved value or, under
checkpointing, a recomputation of it placed in the backward code.
"""

from __future__ import annotations

from typing import Callable

from swir.ir.builder import Builder
from swir.ir.core import Instruction, Value
from swir.ir.graph_builder import GraphBuilder


class AdjointError(Exception):
    """A gradient that cannot be built (an op or an attribute without a rule)."""


class Emitter(GraphBuilder):
    def __init__(self, builder: Builder, primal: Callable[[Value], Value],
                 wanted: Callable[[Value], bool]) -> None:
        super().__init__(builder)
        self._primal = primal
        self._wanted = wanted
        self.inst: Instruction | None = None   # the forward instruction being reversed

    # -- what the rule is asked ------------------------------------------------
    def wants(self, i: int) -> bool:
        """Whether operand ``i`` of the instruction being reversed needs an adjoint."""
        return self._wanted(self.inst.args[i])

    def primal(self, v: Value) -> Value:
        """The forward value ``v`` in the backward code (saved or recomputed)."""
        return self._primal(v)

    def arg(self, i: int) -> Value:
        return self.primal(self.inst.args[i])

    def result(self, i: int = 0) -> Value:
        return self.primal(self.inst.results[i])
