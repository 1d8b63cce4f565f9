"""Passes that exist to test the pass manager (like MLIR's -test-* passes):
one that leaves invalid IR behind, one that crashes, and one that fails with
a diagnostic."""

from __future__ import annotations

from dataclasses import dataclass

from swir.diagnostics import Diagnostic
from swir.ir.core import Module
from swir.ir.types import F64, I1
from swir.passes.manager import AnalysisManager, Pass, PassFailure, option


@dataclass
class TestInvalidIR(Pass):
    name = "test-invalid-ir"
    summary = "[testing] Corrupt a result type, as a buggy pass would"

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        for inst in module.walk():
            d = inst.opdef
            if inst.results and d is not None and d.infer is not None:
                r = inst.results[0]
                r.type = I1 if r.type != I1 else F64
                return True
        return False


@dataclass
class TestFail(Pass):
    name = "test-fail"
    summary = "[testing] Refuse to run, with a diagnostic naming the module"
    reason: str = option("refused", "the message to fail with")

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        raise PassFailure([Diagnostic(f"-test-fail: {self.reason}", module.loc)])


@dataclass
class TestCrash(Pass):
    name = "test-crash"
    summary = "[testing] Raise a Python exception, as a buggy pass would"

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        return {}["no such key"]
