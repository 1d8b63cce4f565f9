"""What a lowering rule is, how rule modules attach one to op definitions,
and how -lower-loops finds an op's rule (see the package's docstring)."""

from __future__ import annotations

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


# The rule every SCALAR_FORM op without a rule of its own shares (the
# element-wise rule, which composes their scalar forms); set by
# swir.lowering.elementwise through share_with_scalar_forms.
_SCALAR_FORM_RULE: list[OpLowering] = []


def lowering(*ops: OpDef, inputs: tuple[str, ...] = (), outputs: tuple[str, ...] = ()):
    def register(fn: Rule) -> Rule:
        LOWERING.register(*ops)(OpLowering(fn, inputs, outputs))
        return fn
    return register


def share_with_scalar_forms(rule: OpLowering) -> OpLowering:
    """Make ``rule`` the one SCALAR_FORM ops share."""
    _SCALAR_FORM_RULE[:] = [rule]
    return rule


def rule_for(opname: str) -> OpLowering | None:
    op = lookup(opname)
    if op is None:
        return None
    rule = LOWERING.of(op)
    if rule is None and SCALAR_FORM in op.traits and _SCALAR_FORM_RULE:
        rule = _SCALAR_FORM_RULE[0]
    return rule


def param_names(low: OpLowering, n_in: int, n_out: int) -> list[str]:
    def names(given: tuple[str, ...], n: int, base: str) -> list[str]:
        if len(given) >= n:
            return list(given[:n])
        if n == 1:
            return [base]
        return [f"{base}{i}" for i in range(n)]
    return names(low.inputs, n_in, "X") + names(low.outputs, n_out, "Y")
