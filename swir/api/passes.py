"""Pass flags as swir-opt spells them (``-PASS{name=value,...}``, ``-O3``,
``--name=value``), read into pass instances: shared by swir-opt, swir-cg,
swir-report and :func:`swir.optimize`. Errors point into the command line
(``<command-line>:1:COL``), or, from the API, into the flags given."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from typing import TextIO

from swir.passes import PASSES, pass_class
from swir.ir.core import Module
from swir.passes.manager import Pass, PassContext, PassManager, option_flag
from swir.passes.pipelines import OPT_LEVELS
from swir.progress import QUIET, Progress
from swir.target import Target, UnknownTarget, default_target, target_named
from swir.verifier import verify

from .errors import command_line_error, usage_error

PASS_RE = re.compile(r"^-([a-z][a-z0-9-]*)(?:\{(.*)\})?$")
_OPTION_RE = re.compile(r'\s*([A-Za-z][\w-]*)\s*=\s*("(?:[^"\\]|\\.)*"|[^,]*?)\s*(?:,|$)')
# A flag in a string of flags: a run of non-blanks, where {...} and "..." may hold blanks.
FLAG_TOKEN = re.compile(r'(?:\{(?:"(?:[^"\\]|\\.)*"|[^}"])*\}?|"(?:[^"\\]|\\.)*"?|[^\s{"])+')

# A pass to build: its name, the options given on it, and where it was given (argv index).
PassEntry = tuple[str, dict[str, str], int]
# A global pass option (--name=value): its value and where it was given.
Globals = dict[str, tuple[str, int]]


@dataclass
class PassFlags:
    """What a list of pass flags asks for: passes (in order), the global
    options given to every pass that takes them, and the machine planned for."""

    passes: list[PassEntry] = field(default_factory=list)
    globals: Globals = field(default_factory=dict)
    target: Target = field(default_factory=default_target)


def split_flags(text: str) -> list[str]:
    """``'-ldm-plan{strategy=greedy} -insert-dma'`` -> its flags."""
    return FLAG_TOKEN.findall(text)


def pass_options(prog: str, argv: list[str], i: int, text: str | None) -> dict[str, str]:
    """``name=value,name="quoted, value"`` → {name: value}."""
    out: dict[str, str] = {}
    text, pos = text or "", 0
    while pos < len(text):
        m = _OPTION_RE.match(text, pos)
        if m is None or m.end() == pos:
            raise command_line_error(prog, argv, i, f"malformed pass options '{text[pos:]}' "
                                                    "(expected name=value,...)")
        value = m.group(2)
        if value.startswith('"'):
            try:
                value = json.loads(value)
            except ValueError:
                raise command_line_error(prog, argv, i,
                                         f"malformed quoted value {value}") from None
        out[m.group(1)] = value
        pos = m.end()
    return out


def global_option(arg: str, index: int, into: Globals) -> None:
    """``--name=value``, ``--flag`` or ``--no-flag``: a pass option given to
    every pass that declares it (checked later, by build_passes)."""
    name, eq, value = arg[2:].partition("=")
    if eq:
        into[name] = (value, index)
    elif name.startswith("no-"):   # --no-double-buffer: a boolean pass option
        into[name[3:]] = ("false", index)
    else:                          # --double-buffer
        into[name] = ("true", index)


def target_option(prog: str, argv: list[str], i: int) -> tuple[Target, int]:
    """``--target NAME`` or ``--target=NAME`` at argv[i]: the target and the
    index after the option."""
    name, eq, value = argv[i].partition("=")
    if not eq:
        if i + 1 >= len(argv):
            raise command_line_error(prog, argv, i, f"'{name}' needs a value")
        value = argv[i + 1]
    try:
        return target_named(value), i + (1 if eq else 2)
    except UnknownTarget as e:
        raise command_line_error(prog, argv, i, str(e)) from None


def pass_flag(prog: str, argv: list[str], i: int, into: PassFlags) -> None:
    """One pass flag at argv[i] (a level, ``-PASS{...}`` or ``--name=value``)."""
    a = argv[i]
    if a[1:] in OPT_LEVELS:
        into.passes += [(name, {}, i) for name in OPT_LEVELS[a[1:]]]
    elif a.startswith("--"):
        global_option(a, i, into.globals)
    else:
        m = PASS_RE.match(a)
        if not m or m.group(1) not in PASSES:
            raise command_line_error(prog, argv, i, f"unknown pass '{a}' (see swir-opt --help)")
        into.passes.append((m.group(1), pass_options(prog, argv, i, m.group(2)), i))


def convert(value: str, typ: type, what: str) -> object:
    """A pass option's text as the option's type."""
    try:
        if typ is bool:
            if value.lower() not in ("true", "false", "1", "0"):
                raise ValueError
            return value.lower() in ("true", "1")
        return typ(value)
    except ValueError:
        raise usage_error(f"{what} expects {typ.__name__}, got '{value}'") from None


def field_type(f) -> type:
    """The type of a pass option (its dataclass field)."""
    t = f.type
    if isinstance(t, str):
        t = {"int": int, "float": float, "bool": bool, "str": str}.get(t, str)
    return t


def build_passes(o: PassFlags, argv: list[str], prog: str) -> list[Pass]:
    """The passes ``o`` names, each with its options (those given on it,
    then the global ones it declares); a global option no pass takes is an
    error, as is a value a pass refuses."""
    declared: set[str] = set()
    passes: list[Pass] = []
    for name, local, idx in o.passes:
        cls = pass_class(name)
        assert cls is not None
        fields = {option_flag(f.name): f for f in cls.options()}
        declared |= set(fields)
        kwargs: dict[str, object] = {}
        for k, (v, _) in o.globals.items():
            if k in fields:
                kwargs[fields[k].name] = convert(v, field_type(fields[k]), f"--{k}")
        for k, v in local.items():
            if k not in fields:
                raise command_line_error(prog, argv, idx, f"pass -{name} has no option '{k}'")
            kwargs[fields[k].name] = convert(v, field_type(fields[k]), f"-{name} option {k}")
        p = cls(**kwargs).enter(PassContext(o.target))
        for flag, message in p.option_errors():
            # point at the option where it was given: on the pass, or globally
            at = idx if flag in local or flag not in o.globals else o.globals[flag][1]
            raise command_line_error(prog, argv, at, message)
        passes.append(p)
    for k, (_, idx) in o.globals.items():
        if k not in declared:
            raise command_line_error(prog, argv, idx,
                                     f"unknown option '--{k}' (no pass in the pipeline takes it)")
    return passes


def option_argv(options: dict[str, object] | None) -> list[str]:
    """Keyword pass options as the flags a tool would be given:
    ``{"ldm-size": 32768, "double_buffer": False}`` -> ``--ldm-size=32768
    --double-buffer=false``."""
    out = []
    for name, value in (options or {}).items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        out.append(f"--{name.replace('_', '-')}={text}")
    return out


def run_passes(module: Module, passes: list[Pass], target: Target, input_name: str,
               verify_each: bool = True, print_after_all: bool = False,
               print_ir_after_failure: bool = False, dump: TextIO | None = None,
               progress: Progress = QUIET) -> PassManager:
    """Run the passes on ``module`` (in place), verifying after each one, or
    (``verify_each=False``) once at the end: swir-opt's and swir.optimize's
    work. The manager keeps each pass's time, statistics and whether it
    changed the IR."""
    manager = PassManager(passes, verify_each=verify_each, print_after_all=print_after_all,
                          print_ir_after_failure=print_ir_after_failure,
                          input_name=input_name, dump=dump or sys.stderr, progress=progress,
                          target=target)
    manager.run(module)
    if not manager.verify_each:
        verify(module)
    return manager
