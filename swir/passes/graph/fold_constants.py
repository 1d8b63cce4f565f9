"""-fold-constants: evaluate at compile time the instructions whose operands
are all constants.

Each candidate (a pure instruction without regions, not ``const`` or
``call``, every operand a ``const`` result or a global with contents) is run
by the graph interpreter's kernels (:func:`fold`), so a
folded value is bit for bit what the interpreter would compute at run time.
A small or splat result becomes a ``const dense<...>`` in place; a larger one a
new global holding the array (``ArrayInit``), named after the result. Folding
is a worklist to a fixpoint: the users of a folded result are looked at again.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from swir.diagnostics import Diagnostic
from swir.kernels import DataError, evaluate
from swir.ir.builder import Builder
from swir.ir.core import (
    ArrayInit,
    DenseSlot,
    Global,
    Instruction,
    Module,
    Value,
)
from swir.ir.constants import constant_value, is_constant
from swir.ir.dtypes import dtype_of
from swir.ir.types import ScalarType, ShapedType, TensorType, Type
from swir.ops import CALL, CONST
from swir.passes.manager import AnalysisManager, Pass, PassFailure, option
from swir.printer import INLINE_ELEMENTS, array_dense, is_splat

NOT_FOLDED = (CONST, CALL)  # already constant; a call is not evaluated here


def is_candidate(inst: Instruction) -> bool:
    """Pure, region-free, with a used result, and every operand a constant."""
    d = inst.opdef
    if d is None or not d.pure or d.reads_memory or d.terminator or inst.regions \
            or inst.isa(*NOT_FOLDED):
        return False
    if not any(r.has_uses for r in inst.results):
        return False  # dead: -dce removes it, folding would only add a global
    return all(isinstance(s, Value) and is_constant(s) for s in inst.args)


def new_global(module: Module, base: str, t: TensorType, array: np.ndarray) -> Global:
    """A global holding ``array`` (as ``t``'s dtype, C order, its own copy),
    placed after the globals that precede the first function: the printed
    module keeps its globals first."""
    data = np.array(array, dtype=dtype_of(t), order="C", copy=True)
    g = Global(module.unique_name(base), t, "global", ArrayInit(data))
    module.add(g, module.first_function_index())
    return g


@dataclass
class FoldConstants(Pass):
    name = "fold-constants"
    summary = "Evaluate instructions whose operands are all constants (graph stage)"
    stages = ("graph",)
    max_bytes: int = option(64 << 20, "results larger than this many bytes are not folded")

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        self._module = module
        self._too_large: set[int] = set()  # instructions counted once, however often queued
        # What this pass made: a chain (reshape, then cast, ...) folds step by
        # step, and the intermediate constants are removed once unused.
        self._made: set[Value] = set()
        folded = self._fold_all(deque(i for i in module.walk() if is_candidate(i)))
        if folded:
            self.bump("instructions folded", folded)
            new_bytes = sum(g.init.array.nbytes for g in self._made
                            if isinstance(g, Global) and g.module is module)
            if new_bytes:
                self.bump("bytes in new globals", new_bytes)
        return folded > 0

    def _fold_all(self, worklist: deque[Instruction]) -> int:
        queued = {id(i) for i in worklist}
        folded = 0
        while worklist:
            inst = worklist.popleft()
            queued.discard(id(inst))
            if inst.parent is None or not is_candidate(inst) or not self._fits(inst):
                continue
            operands = inst.operands
            for user in self._fold(inst):
                if id(user) not in queued and is_candidate(user):
                    worklist.append(user)
                    queued.add(id(user))
            self._drop_unused_made(operands)
            folded += 1
        return folded

    def _drop_unused_made(self, values: list[Value]) -> None:
        for v in dict.fromkeys(values):
            if v.has_uses or v not in self._made:
                continue
            if isinstance(v, Global):
                if v.module is not None:
                    self._module.remove(v)
            elif v.owner.parent is not None:
                v.owner.erase()

    def _fits(self, inst: Instruction) -> bool:
        if all(_bytes(r.type) <= self.max_bytes for r in inst.results):
            return True
        if id(inst) not in self._too_large:
            self._too_large.add(id(inst))
            self.bump("too large")
        return False

    def _fold(self, inst: Instruction) -> list[Instruction]:
        """Replace inst's results by constants, erase it; return the users to revisit."""
        try:
            arrays = fold(inst)
        except Diagnostic as e:  # a weight file that cannot be read
            raise PassFailure([e]) from None
        assert arrays is not None, f"'{inst.opname}' was a candidate but did not fold"
        users: list[Instruction] = []
        for result, array in zip(inst.results, arrays):
            if not result.has_uses:
                continue  # e.g. an unused output of split
            users += result.users
            result.replace_all_uses_with(self._constant(inst, result, array))
        inst.erase()
        return users

    def _constant(self, inst: Instruction, result: Value, array: np.ndarray) -> Value:
        t = result.type
        if not isinstance(t, TensorType):
            return self._scalar_const(inst, result, array)
        if array.size <= INLINE_ELEMENTS or is_splat(array):
            c = Builder(inst.parent, inst).create_inst(
                "const", DenseSlot(array_dense(array)), types=[t], names=[result.name])
            c.loc = inst.loc
            self._made.add(c.results[0])
            return c.results[0]
        g = new_global(self._module, result.name or "cst", t, array)
        self._made.add(g)
        return g

    def _scalar_const(self, inst: Instruction, result: Value, array: np.ndarray) -> Value:
        value = Builder(inst.parent, inst).const(array.item(), result.type, result.name)
        value.owner.loc = inst.loc
        self._made.add(value)
        return value


def _bytes(t: Type) -> int:
    return t.bytes if isinstance(t, (ShapedType, ScalarType)) else 0


def fold(inst: Instruction) -> list[np.ndarray] | None:
    """Evaluate an instruction at compile time when every operand is a constant
    (the hook for constant folding); None if it cannot be folded."""
    d = inst.opdef
    if d is None or not d.pure or d.reads_memory or inst.regions or not inst.results \
            or inst.isa(CONST, CALL):
        return None
    if not all(isinstance(s, Value) for s in inst.args):
        return None
    if not all(is_constant(v) for v in inst.args):
        return None  # before reading any weight file
    operands = [constant_value(v) for v in inst.args]
    try:
        return evaluate(inst.opname, inst.attrs, [r.type for r in inst.results], operands)
    except DataError:
        return None     # left to fail where it runs (an index out of range)
