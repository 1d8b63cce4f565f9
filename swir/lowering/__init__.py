"""Lowering rules: how each graph op becomes a loop-nest kernel.

One function per op family, attached to the op definitions with :func:`lowering`
(the LOWERING hook); element-wise ops (SCALAR_FORM) share one rule.
A rule receives a :class:`~swir.lowering.kernel.KernelBuilder` whose
parameters are the op's operands (buffers, or scalars for scalar operands)
followed by its results (buffers the kernel writes), and the graph-stage
instruction for shapes and attributes. It emits loop nests and stores each
output element's final value through ``KernelBuilder.finish`` so that a fused
epilogue applies (see kernel.py).

The rule modules attach their rules when the package is imported (any
import from it loads them all), which then checks that every graph op has a
rule (swir.lowering.rule: what a rule is, and rule_for).
"""

from __future__ import annotations

from swir.lowering import (  # noqa: F401  (registration)
    composite,
    elementwise,
    fused,
    linalg,
    movement,
    padding,
    pool,
    reduce,
)
from swir.lowering.elementwise import EXPANSION
from swir.lowering.rule import OpLowering, param_names, rule_for  # noqa: F401
from swir.ops.registry import DECOMPOSITION, LOWERING

LOWERING.check_complete()
DECOMPOSITION.check_complete()
EXPANSION.check_complete()
