"""Lowering rules: how each graph op becomes a loop-nest kernel.

One function per op family, attached to the op definitions with :func:`lowering`
(the LOWERING hook); element-wise ops (SCALAR_FORM) share one rule.
A rule receives a :class:`~swir.lowering.kernel.KernelBuilder` whose
parameters are the op's operands (buffers, or scalars for scalar operands)
followed by its results (buffers the kernel writes), and the graph-stage
instruction for shapes and attributes. It emits loop nests and stores each
output element's final value through ``KernelBuilder.finish`` so that a fused
epilogue applies (see kernel.py).

The rule modules are imported on first use (see :func:`rule_for`), which then
checks that every graph op has a rule.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from swir.ir.core import Instruction, Value
from swir.lowering.kernel import KernelBuilder
from swir.ops.registry import LOWERING, SCALAR_FORM, OpDef, lookup

Rule = Callable[[KernelBuilder, Instruction, list[Value], list[Value]], None]


@dataclass(frozen=True)
class OpLowering:
    rule: Rule
    inputs: tuple[str, ...] = ()   # parameter names of the operands (default X, X0, X1, ...)
    outputs: tuple[str, ...] = ()  # parameter names of the results (default Y, Y0, ...)


_RULE_MODULES = ("elementwise", "linalg", "pool", "reduce", "movement", "padding", "fused")
_LOADED = False


def lowering(*ops: OpDef, inputs: tuple[str, ...] = (), outputs: tuple[str, ...] = ()):
    def register(fn: Rule) -> Rule:
        LOWERING.register(*ops)(OpLowering(fn, inputs, outputs))
        return fn
    return register


def _load() -> None:
    global _LOADED
    if not _LOADED:
        for m in _RULE_MODULES:
            importlib.import_module(f"swir.lowering.{m}")
        LOWERING.check_complete()
        from swir.lowering.elementwise import EXPANSION
        EXPANSION.check_complete()
        _LOADED = True


def rule_for(opname: str) -> OpLowering | None:
    _load()
    op = lookup(opname)
    if op is None:
        return None
    rule = LOWERING.of(op)
    if rule is None and SCALAR_FORM in op.traits:
        from swir.lowering.elementwise import ELEMENTWISE_RULE
        rule = ELEMENTWISE_RULE
    return rule


def param_names(low: OpLowering, n_in: int, n_out: int) -> list[str]:
    def names(given: tuple[str, ...], n: int, base: str) -> list[str]:
        if len(given) >= n:
            return list(given[:n])
        if n == 1:
            return [base]
        return [f"{base}{i}" for i in range(n)]
    return names(low.inputs, n_in, "X") + names(low.outputs, n_out, "Y")
