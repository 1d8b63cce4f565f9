"""Passes and the pass manager.

A pass is a small dataclass: a ``name`` (its command-line flag without the
dash), a one-line ``summary``, its options as dataclass fields (so the CLI,
``--help`` and the code cannot disagree), and ``run(module, analyses)``
returning whether it changed the IR. As in DLVM, the manager verifies after
every pass (``--verify-each``), and invalidates cached analyses when a pass
reports a change.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, TextIO

from swir.diagnostics import Diagnostic
from swir.ir.core import Module
from swir.printer import print_module
from swir.verifier import VerificationError, verify


class PassFailure(Exception):
    """A pass refused to run (bad option, illegal transformation); carries diagnostics."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        super().__init__("\n".join(d.render() for d in diagnostics))
        self.diagnostics = diagnostics


@dataclass
class Pass:
    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    # The stages a pass accepts as input; None means any.
    stages: ClassVar[tuple[str, ...] | None] = None

    def __post_init__(self) -> None:
        self.statistics: dict[str, int] = {}

    def run(self, module: Module, analyses: "AnalysisManager") -> bool:
        raise NotImplementedError

    def bump(self, stat: str, n: int = 1) -> None:
        self.statistics[stat] = self.statistics.get(stat, 0) + n

    # -- options ---------------------------------------------------------------------------
    @classmethod
    def options(cls) -> list[dataclasses.Field]:
        return [f for f in dataclasses.fields(cls) if f.init]

    def spelling(self) -> str:
        """``-name{opt=value,...}``: reproduces this pass exactly on a command line."""
        opts = []
        for f in self.options():
            v = getattr(self, f.name)
            text = ("true" if v else "false") if isinstance(v, bool) else str(v)
            if any(c in text for c in ',{}"') or text != text.strip():
                text = json.dumps(text)  # quoted, as -pass{opt="a,b"} accepts
            opts.append(f"{option_flag(f.name)}={text}")
        return f"-{self.name}" + ("{" + ",".join(opts) + "}" if opts else "")


def _either(words: tuple[str, ...]) -> str:
    """("loop",) -> "loop"; ("loop", "buffered", "dma") -> "loop, buffered or dma"."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def option_flag(field_name: str) -> str:
    return field_name.replace("_", "-")


def option(default: Any, help: str) -> Any:
    """Declare a pass option: ``ldm_size: int = option(65536, "LDM bytes")``."""
    return field(default=default, metadata={"help": help})


class AnalysisManager:
    """Caches analyses per IR object; cleared when a pass changes the IR."""

    def __init__(self) -> None:
        self._cache: dict[tuple[type, int], Any] = {}

    def get(self, analysis: Callable[[Any], Any], obj: Any) -> Any:
        key = (analysis, id(obj))
        hit = self._cache.get(key)
        if hit is None or hit[0] is not obj:
            hit = self._cache[key] = (obj, analysis(obj))
        return hit[1]

    def invalidate(self) -> None:
        self._cache.clear()


@dataclass
class PassRecord:
    name: str
    changed: bool
    seconds: float
    statistics: dict[str, int]


@dataclass
class PassManager:
    passes: list[Pass]
    verify_each: bool = True
    print_after_all: bool = False
    print_ir_after_failure: bool = False
    input_name: str = "in.swir"
    dump: TextIO | None = None  # where IR dumps go (stderr in swir-opt)
    records: list[PassRecord] = field(default_factory=list)

    def run(self, module: Module) -> Module:
        analyses = AnalysisManager()
        for p in self.passes:
            before = print_module(module) if self.print_ir_after_failure else None
            start = time.perf_counter()
            try:
                if p.stages is not None and module.stage not in p.stages:
                    raise PassFailure([Diagnostic(
                        f"pass -{p.name} runs on the {_either(p.stages)} stage, but the "
                        f"module is at the {module.stage} stage", module.loc)])
                changed = bool(p.run(module, analyses))
                if changed:
                    analyses.invalidate()
                if self.verify_each:
                    try:
                        verify(module)
                    except VerificationError as e:
                        raise PassFailure([Diagnostic(
                            f"pass -{p.name} produced invalid IR (a bug in the pass)",
                            file=self.input_name)] + e.diagnostics) from None
            except PassFailure:
                if before is not None:
                    self._dump(f"IR Dump Before {p.spelling()} Failed", before,
                               "// reproduce: save the IR above as repro.swir, then run\n"
                               f"//   swir-opt {shlex.quote(p.spelling())} repro.swir\n")
                raise
            self.records.append(PassRecord(p.name, changed, time.perf_counter() - start,
                                           dict(p.statistics)))
            if self.print_after_all:
                self._dump(f"IR Dump After {p.spelling()}", print_module(module))
        return module

    def _dump(self, title: str, text: str, trailer: str = "") -> None:
        if self.dump is not None:
            self.dump.write(f"// -----// {title} //----- //\n{text}{trailer}")

