"""Lowering rules: how each graph op becomes a loop-nest kernel.

One function per op family, registered by op name with :func:`lowering`.
A rule receives a :class:`~swir.lowering.kernel.KernelBuilder` whose
parameters are the op's operands (buffers, or scalars for scalar operands)
followed by its results (buffers the kernel writes), and the graph-stage
instruction for shapes and attributes. It emits loop nests and stores each
output element's final value through ``KernelBuilder.finish`` so that a fused
epilogue applies (see kernel.py).

The rule modules are imported on first use (see :func:`rule_for`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from swir.ir.core import Instruction, Value
from swir.lowering.kernel import KernelBuilder

Rule = Callable[[KernelBuilder, Instruction, list[Value], list[Value]], None]


@dataclass(frozen=True)
class OpLowering:
    rule: Rule
    inputs: tuple[str, ...] = ()   # parameter names of the operands (default X, X0, X1, ...)
    outputs: tuple[str, ...] = ()  # parameter names of the results (default Y, Y0, ...)


LOWERINGS: dict[str, OpLowering] = {}
_RULE_MODULES = ("elementwise", "linalg", "pool", "reduce", "movement", "padding", "fused")


def lowering(*names: str, inputs: tuple[str, ...] = (), outputs: tuple[str, ...] = ()):
    def register(fn: Rule) -> Rule:
        for n in names:
            assert n not in LOWERINGS, f"two lowering rules for '{n}'"
            LOWERINGS[n] = OpLowering(fn, inputs, outputs)
        return fn
    return register


def rule_for(opname: str) -> OpLowering | None:
    for m in _RULE_MODULES:  # cached by Python after the first import
        importlib.import_module(f"swir.lowering.{m}")
    return LOWERINGS.get(opname)


def param_names(low: OpLowering, n_in: int, n_out: int) -> list[str]:
    def names(given: tuple[str, ...], n: int, base: str) -> list[str]:
        if len(given) >= n:
            return list(given[:n])
        if n == 1:
            return [base]
        return [f"{base}{i}" for i in range(n)]
    return names(low.inputs, n_in, "X") + names(low.outputs, n_out, "Y")
