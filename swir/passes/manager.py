"""Passes and the pass manager.

A pass is a small dataclass: a ``name`` (its command-line flag without the
dash), a one-line ``summary``, its options as dataclass fields (so the CLI,
``--help`` and the code cannot disagree), and ``run(module, analyses)``
returning whether it changed the IR. As in DLVM, the manager verifies after
every pass (``--verify-each``), and invalidates cached analyses when a pass
reports a change. As TVM's PassContext carries the target, the manager hands
every pass one :class:`PassContext`: the target it compiles for, whose
figures the options declared ``from_target`` take as their defaults.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, TextIO

from swir.diagnostics import Diagnostic
from swir.files import new_file_mode
from swir.ir.core import FileInit, Module
from swir.ir.constants import load_weights_outside
from swir.printer import WeightSink, print_module
from swir.progress import QUIET, Progress
from swir.target import Target, default_target
from swir.verifier import VerificationError, verify


class PassFailure(Exception):
    """A pass refused to run (bad option, illegal transformation); carries diagnostics."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        super().__init__("\n".join(d.render() for d in diagnostics))
        self.diagnostics = diagnostics


class PassBug(Exception):
    """A pass left invalid IR behind or crashed: a bug in swir, not in the input.

    ``reproducer`` is the file holding the IR the pass was given (or None when
    it could not be saved); ``command`` runs the pass on it."""

    def __init__(self, spelling: str, problem: str, diagnostics: list[Diagnostic],
                 reproducer: str | None, command: str) -> None:
        super().__init__(f"pass {spelling} {problem}")
        self.spelling, self.problem = spelling, problem
        self.diagnostics, self.reproducer, self.command = diagnostics, reproducer, command


# Exceptions a pass may end with that are about the input, not a bug in the pass.
_INPUT_ERRORS = (PassFailure, Diagnostic, VerificationError, RecursionError, MemoryError)


@dataclass(frozen=True)
class PassContext:
    """What the pass manager hands every pass it runs (as TVM's PassContext):
    the machine the passes compile for, a tool's --target."""
    target: Target


@dataclass(frozen=True)
class FromTarget:
    """An option's default that is a figure of the target (``ldm_bytes``),
    read when a pass is made and again when it is handed its context
    (:meth:`Pass.enter`), never at import."""
    figure: str     # a field of swir.target.Target

    def of(self, target: Target) -> Any:
        return getattr(target, self.figure)


def from_target(figure: str) -> FromTarget:
    return FromTarget(figure)


@dataclass(frozen=True)
class FigureCheck:
    """An option check bounded by a figure of the target (``cpes``: at most the
    target's CPEs): ``make(target)`` is the check."""
    make: Callable[[Target], Callable[[Any], str | None]]


@dataclass
class Pass:
    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    # The stages a pass accepts as input; None means any.
    stages: ClassVar[tuple[str, ...] | None] = None
    # What the pass manager hands the pass (enter): not an option, it sets
    # the defaults of the options declared from_target.
    context: PassContext | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.statistics: dict[str, int] = {}
        # Where a pass that works item by item reports it (the manager's).
        self.progress: Progress = QUIET
        # The options left at a figure of the target, not given: the default
        # target's until the pass is handed a context (enter), then its
        # target's. An option assigned after construction is the caller's.
        self._figures: dict[str, FromTarget] = {
            f.name: getattr(self, f.name) for f in self.options()
            if isinstance(getattr(self, f.name), FromTarget)}
        self._take_figures(default_target())

    def __setattr__(self, name: str, value: Any) -> None:
        figures = self.__dict__.get("_figures")
        if figures is not None:
            figures.pop(name, None)
        object.__setattr__(self, name, value)

    def _take_figures(self, target: Target) -> None:
        for name, figure in self._figures.items():
            object.__setattr__(self, name, figure.of(target))

    def run(self, module: Module, analyses: "AnalysisManager") -> bool:
        raise NotImplementedError

    @property
    def target(self) -> Target:
        """The machine the pass compiles for: its context's (a pass run
        outside a pass manager, without one: the default target)."""
        return self.context.target if self.context is not None else default_target()

    def enter(self, context: PassContext) -> "Pass":
        """Hand the pass its context: the options left at a figure of the
        target (from_target) take the context target's."""
        object.__setattr__(self, "context", context)
        self._take_figures(context.target)
        return self

    def bump(self, stat: str, n: int = 1) -> None:
        self.statistics[stat] = self.statistics.get(stat, 0) + n

    # -- options ---------------------------------------------------------------------------
    @classmethod
    def options(cls) -> list[dataclasses.Field]:
        return [f for f in dataclasses.fields(cls) if f.init]

    def option_errors(self) -> list[tuple[str, str]]:
        """What is wrong with the options' values: (option flag, message)
        pairs, from each option's declared check and :meth:`check_options`.
        Bounds that are figures of the target are the pass's target's."""
        out = []
        for f in self.options():
            check = f.metadata.get("check")
            value = getattr(self, f.name)
            if isinstance(check, FigureCheck):
                check = check.make(self.target)
            why = check(value) if check is not None else None
            if why:
                out.append((option_flag(f.name), f"-{self.name}: option {option_flag(f.name)} "
                                                 f"{why}, got {value!r}"))
        return out or self.check_options()

    def check_options(self) -> list[tuple[str, str]]:
        """Checks between options (each is valid on its own); see option_errors."""
        return []

    def spelling(self) -> str:
        """``-name{opt=value,...}``: reproduces this pass exactly on a command line."""
        opts = []
        for f in self.options():
            v = getattr(self, f.name)
            text = option_text(v)
            if any(c in text for c in ',{}"') or text != text.strip():
                text = json.dumps(text)  # quoted, as -pass{opt="a,b"} accepts
            opts.append(f"{option_flag(f.name)}={text}")
        return f"-{self.name}" + ("{" + ",".join(opts) + "}" if opts else "")


def _either(words: tuple[str, ...]) -> str:
    """("loop",) -> "loop"; ("loop", "buffered", "dma") -> "loop, buffered or dma"."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def option_flag(field_name: str) -> str:
    return field_name.replace("_", "-")


def option_text(value: Any) -> str:
    """An option's value as the command line spells it (booleans true / false)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def option(default: Any, help: str,
           check: "Callable[[Any], str | None] | FigureCheck | None" = None) -> Any:
    """Declare a pass option: ``init: int = option(64, "initial buffer size")``;
    ``check(value)`` says what is wrong with a value (None: nothing). A
    default ``from_target("ldm_bytes")`` is that figure of the target the
    pass is compiled for (its context's, :meth:`Pass.enter`)."""
    return field(default=default, metadata={"help": help, "check": check})


def option_default(f: dataclasses.Field, target: Target) -> Any:
    """Option ``f``'s default for ``target``: what --help prints, and what a
    pass that is not given the option takes."""
    return f.default.of(target) if isinstance(f.default, FromTarget) else f.default


# Checks for option(): each returns what a bad value must be, or None.
def at_least(low: float) -> Callable[[Any], str | None]:
    return lambda v: None if v >= low else f"must be at least {low}"


def in_range(low: int, high: "int | FromTarget") -> "Callable[[Any], str | None] | FigureCheck":
    """``low <= v <= high``; a ``from_target`` bound is the figure of the pass's target."""
    if isinstance(high, FromTarget):
        return FigureCheck(lambda target: in_range(low, high.of(target)))  # type: ignore[arg-type,return-value]
    return lambda v: None if low <= v <= high else f"must be in [{low}, {high}]"


def one_of(*choices: Any) -> Callable[[Any], str | None]:
    return lambda v: None if v in choices else "must be " + _either(tuple(map(str, choices)))


def power_of_two(v: int) -> str | None:
    return None if v > 0 and not v & (v - 1) else "must be a power of two"


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
    progress: Progress = QUIET  # a bar per pass (on a terminal: swir.progress)
    # The input's text, if the caller has it: what a crash report rebuilds the
    # IR from when passes are not verified (else printed when they are).
    source: str | None = None
    # The machine the passes compile for, handed to each in its PassContext
    # (the tools' --target; the default target where a caller names none).
    target: Target = field(default_factory=default_target)

    def run(self, module: Module) -> Module:
        try:
            return self._run(module)
        finally:
            self.progress.end()     # before any message is printed

    def _run(self, module: Module) -> Module:
        analyses = AnalysisManager()
        # The input, kept to rebuild the IR a buggy pass was given (see _bug).
        source = self.source if self.source is not None else \
            print_module(module) if self.verify_each else None
        context = PassContext(self.target)
        for index, p in enumerate(self.passes):
            self.progress.begin(f"-{p.name} ({index + 1}/{len(self.passes)})")
            p.progress = self.progress
            p.enter(context)
            before = print_module(module) if self.print_ir_after_failure else None
            start = time.perf_counter()
            try:
                problems = p.option_errors()
                if problems:
                    raise PassFailure([Diagnostic(m, file=self.input_name)
                                       for _, m in problems])
                if p.stages is not None and module.stage not in p.stages:
                    raise PassFailure([Diagnostic(
                        f"pass -{p.name} runs on the {_either(p.stages)} stage, but the "
                        f"module is at the {module.stage} stage", module.loc)])
                try:
                    changed = bool(p.run(module, analyses))
                except _INPUT_ERRORS:
                    raise
                except PassBug as inner:   # from a pipeline inside this pass
                    if inner.reproducer is not None or source is None:
                        raise
                    # The inner pipeline could not save its input (it does not
                    # verify): report it as this pass's crash, whose IR can be.
                    raise self._bug(index, source, module, "crashed",
                                    [Diagnostic(str(inner), file=self.input_name),
                                     *inner.diagnostics]) from inner
                except Exception as e:
                    raise self._bug(index, source, module, "crashed",
                                    [Diagnostic(f"{type(e).__name__}: {e}",
                                                file=self.input_name)]) from e
                if changed:
                    analyses.invalidate()
                if self.verify_each:
                    try:
                        verify(module)
                    except VerificationError as e:
                        raise self._bug(index, source, module, "produced invalid IR",
                                        e.diagnostics) from None
            except (PassFailure, PassBug):
                self.progress.end()
                if before is not None:
                    self._dump(f"IR Dump Before {p.spelling()} Failed", before,
                               "// reproduce: save the IR above as repro.swir, then run\n"
                               f"//   swir-opt {shlex.quote(p.spelling())} repro.swir\n")
                raise
            self.progress.end()
            self.records.append(PassRecord(p.name, changed, time.perf_counter() - start,
                                           dict(p.statistics)))
            if self.print_after_all:
                self._dump(f"IR Dump After {p.spelling()}", print_module(module))
        return module

    def _bug(self, index: int, source: str | None, module: Module, problem: str,
             diagnostics: list[Diagnostic]) -> PassBug:
        """A PassBug for pass ``index``, with the IR it was given saved to a file.

        The module has been changed in place, so that IR is rebuilt: the input
        as it was when run() began, re-parsed and taken through the passes
        before this one (all deterministic). If the rebuild fails, the input
        itself is saved and the command runs every pass up to this one."""
        p = self.passes[index]
        spellings = [p.spelling()]
        replayed = None
        if source is not None:
            try:
                replayed = self._replay(source, module.base_dir, index)
            except Exception:  # the rebuild is best effort: fall back to the input
                spellings = [q.spelling() for q in self.passes[:index + 1]]
        path, folders = _save_reproducer(p.name, replayed, source, self.target)
        # The target is the context's, in no pass option: the command names it
        # unless it is the default (whose command stays as it always was).
        target = "" if self.target is default_target() else f"--target {self.target.name} "
        command = "swir-opt " + target + " ".join(shlex.quote(s) for s in spellings) + " " + \
            "".join(f"--weights-from {shlex.quote(f)} " for f in folders) + \
            shlex.quote(path or "IN.swir")
        return PassBug(p.spelling(), problem, diagnostics, path, command)

    def _replay(self, source: str, base_dir: str | None, index: int) -> Module:
        from swir.parser import parse_module
        m = parse_module(source, f"<before -{self.passes[index].name}>")
        m.base_dir = base_dir
        fresh = [dataclasses.replace(q) for q in self.passes[:index]]
        PassManager(fresh, verify_each=False, input_name=self.input_name,
                    target=self.target).run(m)
        return m

    def _dump(self, title: str, text: str, trailer: str = "") -> None:
        if self.dump is not None:
            self.dump.write(f"// -----// {title} //----- //\n{text}{trailer}")



def _save_reproducer(pass_name: str, module: Module | None, source: str | None,
                     target: Target) -> tuple[str | None, list[str]]:
    """Save the IR a pass was given to a new file in $SWIR_CRASH_DIR (default:
    the system's temporary directory), with its weights in a sidecar beside
    it (``NAME.swir.weights``), so the file alone reproduces the bug
    wherever it is attached; the module's own text if it could not be
    rebuilt (``module`` None). The weights are aligned as the run's ``target``
    aligns them (swir-opt's own output does the same). Returns the path (None if it cannot be
    written) and the folders the command must allow weights from (weights
    that could not be copied, named by absolute path)."""
    if module is None and source is None:
        return None, []
    folder = os.environ.get("SWIR_CRASH_DIR") or tempfile.gettempdir()
    try:
        fd, path = tempfile.mkstemp(prefix=f"swir-before-{pass_name}-", suffix=".swir",
                                    dir=folder)
    except OSError:
        return None, []
    text, weights, folders = source or "", b"", []
    if module is not None:
        try:
            load_weights_outside(module, folder)
            module.move_weight_files(folder)
        except Diagnostic:       # weights the input could not read: named where they are
            module.move_weight_files(None)
            folders = sorted({os.path.dirname(g.init.path) for g in module.globals
                              if isinstance(g.init, FileInit)})
        sink = WeightSink(os.path.basename(path) + ".weights", target.mem_align)
        text, weights = print_module(module, sink), bytes(sink.data)
    try:
        os.fchmod(fd, new_file_mode())        # mkstemp's 0600: as any new file instead
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        if weights:
            with open(path + ".weights", "wb") as f:
                f.write(weights)
        return path, folders
    except OSError:
        return None, []
