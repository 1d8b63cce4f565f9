"""The Sunway athread C project for a dma-stage module (swTVM's AOT code
generation, 000_ba374e17f4714793.txt Section IV, Fig. 2).

    main.c          MPE: arena, constants, inputs, the host functions, outputs
    layers.h/.c     MPE: per CPE kernel, fill its parameter struct and spawn it
    layers_mix.h    both: the parameter structs (Para) and small helpers
    layers_slave.c  CPE: one function per kernel, LDM buffers, DMA
    Makefile        sw5cc for Sunway (default), `make emu` for the host
    weights.bin     the constants main.c loads (size checked)
    emu/            swir's athread emulation runtime (for `make emu`)

:func:`generate` returns the files as bytes; nothing is written until every
file has been produced (the caller writes the directory atomically).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from swir.analysis.calling import all_written_params, output_count
from swir.codegen import c_ast as C
from swir.codegen import scalar, templates
from swir.codegen.body import (
    BodyEmitter,
    declare_pointer,
    pointer_type,
    reply_address,
    reply_word,
    wait,
)
from swir.codegen.names import Scope, c_string, comment_text, display_text, file_stem
from swir.diagnostics import Diagnostic
from swir.files import new_dir_mode, repair_leftovers, replace_directory
from swir.ir.constants import dense_array, global_array, global_ranks, module_ranks
from swir.ir.core import (
    Apply,
    ArrayInit,
    Dense,
    FileInit,
    FuncParam,
    Function,
    Global,
    Instruction,
    Module,
    Successor,
)
from swir.ir.types import LDM_ALIGN, LDMType, ScalarType, ShapedType
from swir.target import SW26010
from swir.verifier import module_attr_ldm

WEIGHTS_FILE = "weights.bin"
PARA_REPLY = 0      # the reply word of a kernel's Para copy (waited for before any other DMA)
ALIGN = 64          # main-memory alignment of every buffer and constant (bytes)
RUNTIME_FILES = ("athread.h", "slave.h", "simd.h", "swir_emu.h", "swir_emu.c")
TARGET_HEADER = "swir_target.h"   # emu/: the target's figures, generated (swir/target.py)


@dataclass
class Options:
    entry: str = "main"          # the function main() runs
    source: str = "<input>"      # the swir file the module came from (comments)
    # LDM bytes the plan left for stack and reply words (None: -ldm-plan's default)
    ldm_reserve: int | None = None
    # CPE loop nests as vector micro-kernels (swir/codegen/vector.py); False:
    # every nest scalar, as before (swir-cg --no-simd)
    simd: bool = True


class WriteError(Exception):
    """The project directory cannot be written (exists, not a directory, I/O)."""


def write_project(files: dict[str, bytes], out: str, force: bool,
                  keep: tuple[str, ...] = ()) -> None:
    """Write every file into a fresh directory beside ``out``, then move it into
    place: ``out`` ends up complete, or (on any failure) as it was. A symlink
    ``out`` is followed (the directory it points to is replaced, the link
    stays). Refused: replacing a path that is not a directory, a directory
    without ``force``, the current directory or one holding it, or one holding
    a file in ``keep`` (the input and the weights it reads)."""
    target = check_project_dir(out, force, keep)
    # a new one gets the umask's mode, a replaced one keeps its own
    mode = stat.S_IMODE(target.stat().st_mode) if target.is_dir() else new_dir_mode()

    def fill(folder: Path) -> None:
        for rel, data in files.items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    try:
        replace_directory(target, fill, mode)
    except OSError as e:
        raise WriteError(f"cannot write '{out}': {e.strerror or e}") from None


def check_project_dir(out: str, force: bool, keep: tuple[str, ...] = ()) -> Path:
    """The directory ``out`` names (symlinks followed), if swir-cg may write
    it; else WriteError saying why (see :func:`write_project`)."""
    try:
        return _check_project_dir(out, force, keep)
    except OSError as e:            # a name too long, a loop of links, ...
        raise WriteError(f"cannot write '{out}': {e.strerror or e}") from None


def _check_project_dir(out: str, force: bool, keep: tuple[str, ...]) -> Path:
    given = Path(out)
    target = Path(os.path.realpath(given))
    if target.parent.is_dir():
        repair_leftovers(target)        # a killed run's project put back first
    if given.exists() and not given.is_dir():
        raise WriteError(f"'{out}' exists and is not a directory")
    if not target.parent.is_dir():
        raise WriteError(f"cannot write '{out}': no directory '{given.parent}'")
    if not given.exists():
        return target
    if not force:
        raise WriteError(f"'{out}' exists; use --force to replace it")
    here = Path.cwd().resolve()
    if here == target or target in here.parents:
        raise WriteError(f"'{out}' is the current directory or holds it; --force will not "
                         "replace it (give a new directory)")
    for path in keep:
        real = Path(os.path.realpath(path))
        if target in real.parents:
            raise WriteError(f"'{out}' holds the input '{path}'; --force would delete it")
    return target


def generate(module: Module, options: Options) -> dict[str, bytes]:
    """Every file of the project, by relative path."""
    return Project(module, options).files()


class Project:
    def __init__(self, module: Module, options: Options) -> None:
        if module.stage != "dma":
            raise Diagnostic(f"swir-cg: code generation needs a dma-stage module, got stage "
                             f"'{module.stage}'", module.loc)
        self.m, self.opt = module, options
        self.stem = file_stem(module.name)
        self.scope = Scope()                       # every file-scope C name
        self.scope.reserve("ldm", "reply", "swir_para")
        # main.c's fixed code: its functions and locals must not meet a model name
        # at file scope (kernel locals live in other scopes and may use them).
        self.scope.reserve(*templates.NAMES, inner=False)
        # An MPI program (-distribute): its support code's names too.
        self.ranks = templates.Ranks(module_ranks(module), module.attr("split")) \
            if "ranks" in module.attrs else None
        if self.ranks is not None:
            self.scope.reserve(*templates.RANKS_NAMES, inner=False)
        self.reply_words = 0
        self.uses_simd = False      # a kernel has vector code: layers_slave.c includes simd.h
        self._para_copies: list[tuple[str, str]] = []  # (Para type, entry) of each copy
        # CPE run-time error sites (message, function), numbered from 1: a CPE
        # records a site number, the MPE prints its message after the join.
        self.fault_sites: list[tuple[str, str]] = []
        self._globals: dict[int, str] = {}
        self._used_globals: set[int] = set()
        self._slave_globals: dict[int, Global] = {}
        self._ldm_paths: dict[int, C.Expr] = {}   # ldm_alloc -> its buffer in ldm
        self._frames: dict[str, C.RecordDef] = {}  # kernel C name -> its LDM struct
        self._field_scopes: dict[int, Scope] = {}  # spawned kernel -> its Para fields
        # The buffer parameters each function writes, computed once for the
        # module (analysis.calling.written_params is a fixpoint over the whole
        # module: asking it for each kernel was quadratic in the module size).
        self._written = all_written_params(module)
        for g in module.globals:     # file scope first: no local may take their names
            self._globals[id(g)] = self.scope.declare(g.name, fallback="g")
        self.entry = self._entry()
        self._alone: set[int] = set()             # kernels spawned on their own
        self.host_funcs, self.spawned, self.cpe_called, self.groups = self._reachable()
        # Kernels run inside a spawn of several: a function of their own, called
        # from the spawn's entry (a spawn of one of them alone calls it too).
        self.runners = list({id(f): f for g in self.groups for f in g}.values())
        self._c_names: dict[tuple[int, str], str] = {}
        for f in self.spawned:
            self._c_names[(id(f), "spawn")] = self.scope.declare(f.name, fallback="k")
        for f in self.runners:
            self._c_names[(id(f), "run")] = self.scope.declare(f.name + "_run", fallback="k")
        self._group_names = [self.scope.declare(g[0].name + "_group", fallback="k")
                             for g in self.groups]
        self._group_para = [self.scope.declare(n + "_para") for n in self._group_names]
        self._group_spawn = [self.scope.declare("spawn_" + n) for n in self._group_names]
        self._group_of = {key: i for i, key in enumerate(self._group_keys)}
        for f in self.cpe_called:    # a kernel both spawned and called gets two functions
            self._c_names[(id(f), "cpe")] = self.scope.declare(f.name, fallback="k")
        for f in self.host_funcs:
            self._c_names[(id(f), "host")] = self.scope.declare(f.name, fallback="f")
        self._para = {id(f): self.scope.declare(self._c_names[(id(f), "spawn")] + "_para")
                      for f in self.spawned}
        self._spawn = {id(f): self.scope.declare("spawn_" + self._c_names[(id(f), "spawn")])
                       for f in self.spawned}

    # -- what to emit --------------------------------------------------------------
    def _entry(self) -> Function:
        f = self.m.lookup(self.opt.entry)
        if not isinstance(f, Function) or f.body is None:
            raise Diagnostic(f"swir-cg: the module has no function @{self.opt.entry} to run "
                             "(choose one with --func)", self.m.loc)
        if f.target == "cpe" or f.kind != "func":
            raise Diagnostic(f"swir-cg: @{f.name} is a kernel; the program runs a host func",
                             f.loc)
        return f

    def _reachable(self) -> tuple[list[Function], list[Function], list[Function],
                                  list[tuple[Function, ...]]]:
        """Host functions, spawned CPE kernels, kernels called on a CPE, and
        the spawns of several kernels (each sequence once), each in the order
        first reached from the entry function."""
        host: list[Function] = []
        spawned: list[Function] = []
        cpe: list[Function] = []
        groups: dict[tuple, tuple[Function, ...]] = {}
        seen: set[tuple[int, str]] = set()
        todo: list[tuple[Function, str]] = [(self.entry, "host")]
        while todo:
            f, side = todo.pop(0)
            if (id(f), side) in seen:
                continue
            seen.add((id(f), side))
            if side == "host":
                host.append(f)
            elif side == "spawn":
                spawned.append(f)
            else:
                cpe.append(f)
            for inst in f.body.walk() if f.body is not None else ():
                if inst.opname in ("call", "spawn"):
                    callees = [self.function(a.callee, inst) for a in inst.args]  # type: ignore[union-attr]
                    to = "spawn" if inst.opname == "spawn" else \
                        ("host" if side == "host" else "cpe")
                    todo += [(c, to) for c in callees]
                    if len(callees) > 1:
                        groups.setdefault(self._group_key(callees, inst), tuple(callees))
                    elif inst.opname == "spawn":
                        self._alone.add(id(callees[0]))
        for f in cpe:
            if any(i.opname == "ldm_alloc" for i in f.body.walk()):  # type: ignore[union-attr]
                raise Diagnostic(f"swir-cg: @{f.name} allocates LDM but is called from a CPE "
                                 "kernel; its buffers would overlap its caller's (only "
                                 "spawned kernels may allocate LDM)", f.loc)
        self._group_keys = list(groups)
        return host, spawned, cpe, list(groups.values())

    def function(self, name: str, inst: Instruction) -> Function:
        f = self.m.lookup(name)
        if not isinstance(f, Function):
            raise Diagnostic(f"swir-cg: @{name} is not a function", inst.loc)
        if f.body is None:
            raise Diagnostic(f"swir-cg: @{name} is only declared; it has no body to compile",
                             inst.loc)
        return f

    # -- names the bodies ask for ---------------------------------------------------------
    def call_name(self, f: Function, side: str, inst: Instruction) -> str:
        return self._c_names[(id(f), "host" if side == "host" else "cpe")]

    @staticmethod
    def _group_key(kernels: list[Function], inst: Instruction) -> tuple:
        """A spawn of several kernels: the kernels, and for each argument the
        first argument of the spawn that is the same value (the nests of one
        kernel take the same arguments: the wrapper takes them once)."""
        args = [a for app in inst.args for a in app.args]  # type: ignore[union-attr]
        same = tuple(next(j for j, b in enumerate(args) if b is a) for a in args)
        return tuple(id(f) for f in kernels), same

    def spawn_call(self, kernels: list[Function], inst: Instruction) -> tuple[str, list[int]]:
        """The MPE wrapper that spawns these kernels, in this order, and which
        of the spawn's arguments (positions, all applications in turn) it takes."""
        n = sum(len(f.params) for f in kernels)
        if len(kernels) == 1:
            return self._spawn[id(kernels[0])], list(range(n))
        key = self._group_key(kernels, inst)
        return self._group_spawn[self._group_of[key]], \
            [i for i, j in enumerate(key[1]) if i == j]

    def global_name(self, g: Global, side: str) -> str:
        self._used_globals.add(id(g))
        if side == "cpe":
            self._slave_globals[id(g)] = g
        return self._globals[id(g)]

    def check_writes(self, callee: Function, app: Apply, inst: Instruction) -> None:
        """A constant global passed where the callee writes is an error (the
        interpreters refuse it too; the weights block is no place to write)."""
        for i in self.written_params(callee):
            a = app.args[i] if i < len(app.args) else None
            if isinstance(a, Global) and a.kind == "global":
                raise Diagnostic(f"swir-cg: {inst.opname} passes @{a.name}, a constant global, "
                                 f"to parameter %{callee.params[i].name} of @{callee.name}, "
                                 "which writes it", inst.loc)

    def written_params(self, f: Function) -> list[int]:
        """Indices of the buffer parameters ``f`` writes (as
        :func:`swir.analysis.calling.written_params`)."""
        return sorted(self._written.get(id(f), set()))

    def fault_site(self, message: str, function: str) -> int:
        """The number of a CPE run-time error site (see CPE_FAULTS)."""
        self.fault_sites.append((message, function))
        return len(self.fault_sites)

    def note_reply(self, reply: int) -> None:
        if not isinstance(reply, int) or reply < 0 or reply > 1023:
            raise Diagnostic(f"swir-cg: reply word {reply} is out of range [0, 1023]", None)
        self.reply_words = max(self.reply_words, reply + 1)

    def ldm_alloc(self, e: BodyEmitter, inst: Instruction) -> None:
        t = inst.results[0].type
        assert isinstance(t, LDMType)
        name = e.define(inst.results[0], "L")
        e.emit(declare_pointer(t, name, self._ldm_paths[id(inst)], cast=False))

    # -- files -------------------------------------------------------------------------
    def files(self) -> dict[str, bytes]:
        slave = self._slave_c()         # first: it decides the reply words and LDM frames
        host_functions = [self._host_function(f) for f in reversed(self.host_funcs)]
        weights, constants = self._constants()
        out = {
            "layers_mix.h": self._mix_h(),
            "layers.h": self._layers_h(),
            "layers.c": self._layers_c(),
            "layers_slave.c": slave,
            "main.c": self._main_c(host_functions, constants),
            "Makefile": self._makefile(),
        }
        files = {k: v.encode("utf-8") for k, v in out.items()}
        files[WEIGHTS_FILE] = weights
        runtime = resources.files("swir.codegen") / "runtime"
        for name in RUNTIME_FILES:
            files[f"emu/{name}"] = (runtime / name).read_bytes()
        files[f"emu/{TARGET_HEADER}"] = SW26010.c_defines().encode("utf-8")
        return files

    def header(self, what: str) -> str:
        return (f"/* {what}\n"
                f" * Generated by swir-cg from {comment_text(self.opt.source)} "
                f"(module {comment_text(repr(self.m.name))}); do not edit. */\n")

    def where(self, f: Function) -> str:
        loc = f.loc
        return comment_text(str(loc)) if loc is not None else comment_text(self.opt.source)

    # layers_mix.h ----------------------------------------------------------------------
    def _mix_h(self) -> str:
        parts = [self.header("layers_mix.h: what the MPE and the CPEs share: each CPE "
                             "kernel's parameter\n * struct (Para) and small helpers."),
                 templates.MIX_PRELUDE]
        if self._uses_f16():
            parts.append(templates.F16)
        if self.fault_sites:
            parts.append(templates.FAULT_SLOTS.replace("{cpes}", str(SW26010.cpes)))
        parts.append(scalar.helpers())
        for f in self.spawned:
            fields = [self._para_field(p) for p in f.params] \
                or [C.Decl(C.CHAR, "unused", comment="C structs cannot be empty")]
            parts.append(_typedef(f"@{comment_text(f.name)}'s arguments ({self.where(f)}).",
                                  self._para[id(f)], fields))
        for i, g in enumerate(self.groups):
            fields = [C.Decl(C.Named(self._para[id(f)]), m)
                      for f, m in zip(g, self._group_members(i))]
            parts.append(_typedef(f"The arguments of a spawn of {self._group_text(g)}.",
                                  self._group_para[i], fields))
        parts.append("#endif\n")
        return "\n".join(parts)

    def _para_field(self, p: FuncParam) -> C.Decl:
        """The member of a spawned kernel's Para struct for parameter ``p``."""
        n = self._param_field(p)
        if isinstance(p.type, ShapedType):
            return C.Decl(C.Pointer(C.Named(scalar.c_type(p.type.element))), n,
                          comment=comment_text(str(p.type)))
        return C.Decl(C.Named(scalar.c_type(p.type)), n)  # type: ignore[arg-type]

    def _param_field(self, p: FuncParam) -> str:
        """The Para field (and wrapper parameter) of a spawned kernel's parameter."""
        scope = self._field_scopes.setdefault(id(p.owner), Scope())
        try:
            return scope.lookup(p)
        except KeyError:
            return scope.declare(p.name or f"arg{p.index}", p, "a")

    def _group_members(self, i: int) -> list[str]:
        """The Para members of spawn group i, one per kernel (a kernel may
        come twice)."""
        scope = Scope()
        return [scope.declare(self._c_names[(id(f), "spawn")]) for f in self.groups[i]]

    def _group_params(self, i: int) -> list[list[str]]:
        """Spawn group i's wrapper parameter for each kernel's each parameter:
        one per distinct argument of the spawn, named after the Para field of
        its first use."""
        scope, same = Scope(self.scope), self._group_keys[i][1]
        names: list[str] = []
        for f in self.groups[i]:
            for p in f.params:
                j = same[len(names)]
                names.append(scope.declare(self._param_field(p)) if j == len(names)
                             else names[j])
        out, at = [], 0
        for f in self.groups[i]:
            out.append(names[at:at + len(f.params)])
            at += len(f.params)
        return out

    @staticmethod
    def _group_text(g: tuple[Function, ...]) -> str:
        return ", ".join("@" + comment_text(f.name) for f in g)

    def _uses_f16(self) -> bool:
        def f16(t: object) -> bool:
            e = t.element if isinstance(t, ShapedType) else t
            return isinstance(e, ScalarType) and e.name == "f16"
        for item in self.m.items:
            if isinstance(item, Global) and f16(item.type):
                return True
            if isinstance(item, Function):
                if any(f16(p.type) for p in item.params):
                    return True
                for inst in item.body.walk() if item.body is not None else ():
                    if any(f16(r.type) for r in inst.results):
                        return True
        return False

    # layers.h / layers.c -----------------------------------------------------------------
    def _wrapper_params(self, f: Function) -> list[C.Param]:
        return [C.Param(_param_type(p.type), self._param_field(p)) for p in f.params]

    def _group_wrapper_params(self, i: int) -> list[C.Param]:
        params = [p for f in self.groups[i] for p in f.params]
        names = [n for ns in self._group_params(i) for n in ns]
        same = self._group_keys[i][1]
        return [C.Param(_param_type(p.type), n)
                for k, (p, n) in enumerate(zip(params, names)) if same[k] == k]

    def _spawn_wrapper(self, f: Function) -> C.Function:
        """The MPE wrapper of a spawn of kernel ``f`` alone."""
        fill = [(C.member("para", n), C.Id(n)) for n in map(self._param_field, f.params)]
        return self._wrapper(f"@{comment_text(f.name)} ({self.where(f)})", self._spawn[id(f)],
                             self._wrapper_params(f), self._para[id(f)], fill, [f],
                             self._c_names[(id(f), "spawn")])

    def _group_wrappers(self) -> list[C.Function]:
        """The MPE wrapper of each spawn of several kernels."""
        out = []
        for i, g in enumerate(self.groups):
            fill = [(C.member("para", f"{m}.{self._param_field(p)}"), C.Id(n))
                    for f, m, names in zip(g, self._group_members(i), self._group_params(i))
                    for p, n in zip(f.params, names)]
            out.append(self._wrapper(f"spawn {self._group_text(g)}", self._group_spawn[i],
                                     self._group_wrapper_params(i), self._group_para[i], fill,
                                     list(g), self._group_names[i]))
        return out

    def _layers_h(self) -> str:
        lines = [self.header("layers.h: the MPE side of each CPE kernel: fill its "
                             f"parameters and spawn it\n * on the {SW26010.cpes} CPEs (the caller joins)."),
                 "#ifndef SWIR_LAYERS_H", "#define SWIR_LAYERS_H", "",
                 '#include "layers_mix.h"', ""]
        # Every spawned kernel's wrapper is declared, also one spawned only
        # with others (layers.c defines those spawned alone).
        lines += [self._spawn_wrapper(f).prototype() for f in self.spawned]
        lines += [w.prototype() for w in self._group_wrappers()]
        if self.fault_sites:
            lines += ["", "/* After a join: report the first run-time error a CPE recorded. */",
                      "void swir_check_faults(void);"]
        lines += ["", "#endif", ""]
        return "\n".join(lines)

    def _layers_c(self) -> str:
        lines = [self.header("layers.c: MPE wrappers: each fills its kernel's Para struct "
                             f"and spawns the\n * kernel on the {SW26010.cpes} CPEs."),
                 "#include <athread.h>", "", '#include "layers.h"', ""]
        alone = [f for f in self.spawned if id(f) in self._alone]
        for f in alone:
            lines.append(f"extern void SLAVE_FUN({self._c_names[(id(f), 'spawn')]})(void *);")
        for k in self._group_names:
            lines.append(f"extern void SLAVE_FUN({k})(void *);")
        if self.fault_sites:
            lines += ["", templates.mpe_faults(self.fault_sites, c_string)]
        for w in [*map(self._spawn_wrapper, alone), *self._group_wrappers()]:
            lines += ["", *w.lines()]
        lines.append("")
        return "\n".join(lines)

    def _wrapper(self, what: str, name: str, params: list[C.Param], para: str,
                 fill: list[tuple[C.Expr, C.Expr]], kernels: list[Function],
                 entry: str) -> C.Function:
        """An MPE wrapper: fill the Para struct, spawn the CPE entry on it."""
        names = display_text(" + ".join(f.name for f in kernels), 150)
        struct = C.Id("para")
        body: list[C.Stmt] = [
            C.Comment("static: each CPE copies it into LDM by DMA at kernel entry"),
            C.Decl(C.Named(para), "para", storage="static"),
            *(C.ExprStmt(C.Assign(field, value)) for field, value in fill)]
        if self.fault_sites:
            body.append(C.ExprStmt(C.Assign(C.Id("swir_spawned"), C.Lit(c_string(names)))))
        calls = [C.call("SWIR_MEMORY", C.Unary("&", struct), C.SizeOf(struct),
                        C.Lit(c_string("Para of " + names))),
                 C.call("SWIR_KERNEL", C.Lit(c_string(kernels[0].name))),
                 C.call("athread_spawn", entry, C.Unary("&", struct))]
        return C.Function(name, params, C.Block(body + [C.ExprStmt(c) for c in calls]),
                          comment=what)

    # layers_slave.c ----------------------------------------------------------------------
    def _slave_c(self) -> str:
        bodies = []
        for f in self.cpe_called:
            bodies.append(self._cpe_function(f, "cpe"))
        for f in self.runners:
            bodies.append(self._cpe_function(f, "run"))
        for f in self.spawned:
            if id(f) in self._alone:
                bodies.append(self._cpe_function(f, "spawn"))
        for i, g in enumerate(self.groups):
            bodies.append(self._entry_function(self._group_names[i], self._group_para[i], g,
                                               self._group_members(i)))
        out = [self.header(f"layers_slave.c: the CPE kernels. Each runs on all {SW26010.cpes} CPEs, "
                           "takes its share of\n * the work by CPE id, and moves data "
                           "between main memory and its LDM by DMA."),
               "#include <slave.h>"] + (["#include <simd.h>"] if self.uses_simd else []) + \
            ["", '#include "layers_mix.h"', ""]
        if self._frames:
            out.append("/* Each CPE's LDM buffers. Kernels run one at a time, so their "
                       "buffers share the\n * space: one struct per kernel, in a union. */")
            out += [C.render([frame]) + "\n" for frame in self._frames.values()]
            members = tuple(C.Decl(C.Record("struct", tag=_frame_tag(k)), k)
                            for k in self._frames)
            out.append(_thread_local(C.Record("union", members), "ldm", 64))
        if self.fault_sites:
            out.append(templates.CPE_FAULTS)
        if self._para_copies:
            members = tuple(C.Decl(C.Named(t), k) for t, k in self._para_copies)
            out.append("/* Each kernel's copy of its Para struct, fetched by one DMA at entry "
                       "(kernels run\n * one at a time: one union). */")
            out.append(_thread_local(C.Record("union", members), "swir_para", 32))
        if self.reply_words:
            out.append("/* DMA reply words: each completed DMA adds one to its word. */")
            out.append(_thread_local(C.Array(C.Named("volatile int"), self.reply_words),
                                     "reply"))
        for g in self._slave_globals.values():
            out.append(self._global_decl(g, "extern", "main memory, defined in main.c").text())
        if self._slave_globals:
            out.append("")
        out += [b.prototype() for b in bodies[:len(self.cpe_called)]]
        if self.cpe_called:
            out.append("")
        out += [b.text() for b in bodies]
        return "\n".join(out)

    def _cpe_function(self, f: Function, mode: str) -> C.Function:
        """The C function of a CPE kernel: mode "spawn", the entry a spawn of
        it alone starts (it reads its Para from ``arg``); "run", the kernel
        as one of several in a spawn (its Para at ``p``, in LDM already);
        "cpe", called from another CPE kernel with plain parameters."""
        if mode == "spawn" and any(g is f for g in self.runners):
            return self._entry_function(self._c_names[(id(f), "spawn")], self._para[id(f)],
                                        (f,), [""])
        k = self._c_names[(id(f), mode)]
        scope = Scope(self.scope)
        scope.reserve("p", "arg")
        e = BodyEmitter(self, f, "cpe", scope)
        written = set(self.written_params(f))
        params: list[C.Param] = []
        allocs = [i for i in f.body.walk() if i.opname == "ldm_alloc"]  # type: ignore[union-attr]
        used = any(p.has_uses for p in f.params)
        if mode == "spawn":
            self._cpe_prologue(e, f, k, bool(allocs), used)
        elif mode == "run":
            if allocs:
                self._frames[k] = self._frame(f, k)
            e.emit(_ldm_frame(k) if allocs else _ldm_frame(None))
            self._reset_replies(e, f, [])
            if not used:
                e.emit(_unused("p"))
        for p in f.params:
            name = scope.declare(p.name or f"arg{p.index}", p, "a")
            t = p.type
            if mode != "cpe":
                if not p.has_uses:
                    continue
                field = C.Member(C.Id("p"), self._param_field(p), arrow=True)
                if isinstance(t, ShapedType):
                    e.emit(declare_pointer(t, name, field, const=p.index not in written))
                else:
                    e.emit(C.Decl(C.Named(scalar.c_type(t), const=True), name, field))  # type: ignore[arg-type]
            else:
                params.append(C.Param(pointer_type(t, const=p.index not in written)
                                      if isinstance(t, ShapedType)
                                      else C.Named(scalar.c_type(t)), name))  # type: ignore[arg-type]
                if not p.has_uses:
                    e.emit(_unused(name))
        e.region(f.body.entry)  # type: ignore[union-attr]
        what = f"@{comment_text(f.name)} ({self.where(f)})"
        if mode == "spawn":
            if not used:
                e.body.body.insert(0, C.ExprStmt(_unused("arg")))
            return C.Function(k, [C.Param(VOID_P, "arg")], e.body, comment=what)
        if mode == "run":
            params = [C.Param(C.Pointer(C.Named(self._para[id(f)], const=True)), "p")]
        return C.Function(k, params, e.body, storage="static", comment=what)

    def _entry_function(self, k: str, para: str, kernels: tuple[Function, ...],
                        members: list[str]) -> C.Function:
        """The entry of a spawn that runs kernels (each a "run" function): the
        Para copied into LDM by one DMA, then each kernel in turn, the CPEs
        meeting at a barrier (athread_syn) between two: the next kernel reads
        what the others' DMAs wrote."""
        self.note_reply(PARA_REPLY)
        declare, fetch = self._para_copy(para, k)
        body: list[C.Expr] = [_ldm_frame(None), declare,
                              C.Assign(reply_word(PARA_REPLY), C.Lit("0")), *fetch]
        for n, (f, m) in enumerate(zip(kernels, members)):
            if n:
                body.append(C.call("SWIR_SYN", C.Lit(c_string(f.name))))
            para_copy = C.member("swir_para", k + ("." + m if m else ""))
            body.append(C.call(self._c_names[(id(f), "run")], C.Unary("&", para_copy)))
        what = "spawn " + self._group_text(kernels) if len(kernels) > 1 else \
            f"@{comment_text(kernels[0].name)} ({self.where(kernels[0])})"
        return C.Function(k, [C.Param(VOID_P, "arg")],
                          C.Block([C.ExprStmt(x) for x in body]), comment=what)

    def _cpe_prologue(self, e: BodyEmitter, f: Function, k: str, allocs: bool,
                      used: bool) -> None:
        """A spawned kernel's entry: its LDM frame, its reply words zeroed,
        and its Para struct copied into LDM by one DMA (000_ba374e17f4714793
        Fig. 2(e)) rather than read field by field from main memory (a gld of
        hundreds of cycles each). The copy is a static outside the frame (one
        union for all kernels), taken from the LDM reserve."""
        if allocs:
            self._frames[k] = self._frame(f, k)
            e.emit(_ldm_frame(k))
        elif used:
            e.emit(_ldm_frame(None))
        if used:
            declare, fetch = self._para_copy(self._para[id(f)], k)
            e.emit(declare)
        self._reset_replies(e, f, [PARA_REPLY] if used else [])
        if used:
            for x in fetch:
                e.emit(x)
            para_ptr = C.Pointer(C.Named(self._para[id(f)], const=True), const=True)
            e.emit(C.Decl(para_ptr, "p", C.Unary("&", C.member("swir_para", k))))

    def _para_copy(self, para: str, k: str) -> tuple[C.Expr, list[C.Expr]]:
        """Entry k's LDM copy of its Para (of type para), a member of the
        swir_para union: the line declaring it to the emulation, and the DMA
        that fetches it from ``arg`` on reply word PARA_REPLY (zeroed before)."""
        self._para_copies.append((para, k))
        copy = C.member("swir_para", k)
        return (C.call("SWIR_LDM_PARA", C.Unary("&", copy), C.SizeOf(copy)),
                [C.call("athread_get", "PE_MODE", "arg", C.Unary("&", copy),
                        C.Cast(C.INT, C.SizeOf(copy)), reply_address(PARA_REPLY), 0, 0, 0),
                 wait(PARA_REPLY)])

    def _reset_replies(self, e: BodyEmitter, f: Function, extra: list[int]) -> None:
        """Zero the reply words the kernel (and the kernels it calls) uses
        before its first DMA, as public Sunway codes do (``reply = 0;`` before
        issuing): LDM is not known to start at zero, and a word a previous
        kernel left non-zero would end a wait early. SWIR_WAIT resets each word
        after its wait, so every DMA starts on a zero word."""
        words: set[int] = set(extra)
        todo, seen = [f], set()
        while todo:
            g = todo.pop()
            if id(g) in seen or g.body is None:
                continue
            seen.add(id(g))
            for inst in g.body.walk():
                if inst.opname in ("dma_get", "dma_put", "dma_bcast", "dma_wait"):
                    words.add(inst.attrs["reply"])
                elif inst.opname == "call":
                    todo.append(self.function(inst.args[0].callee, inst))  # type: ignore[union-attr]
        for w in sorted(words):
            self.note_reply(w)
            e.emit(C.Assign(reply_word(w), C.Lit("0")))

    def _frame(self, f: Function, k: str) -> C.RecordDef:
        """The struct of kernel k's LDM buffers: a region's buffers side by side,
        the regions nested in it (alive one at a time) in a union after them.
        Each buffer starts LDM_ALIGN-aligned (what the planner counts), the
        larger elements first."""
        counter = [0]
        aligned = f"__attribute__((aligned({LDM_ALIGN})))"

        def members(block, path: str) -> tuple[C.Decl, ...]:
            own = [i for i in block.instructions if i.opname == "ldm_alloc"]
            own.sort(key=lambda i: -i.results[0].type.element.bytes)
            fields = Scope()
            out = []
            for inst in own:
                t = inst.results[0].type
                member = fields.declare(inst.results[0].name or "L", fallback="L")
                self._ldm_paths[id(inst)] = C.member("ldm", f"{path}.{member}")
                out.append(C.Decl(C.array(C.Named(scalar.c_type(t.element)), t.shape), member,
                                  attributes=aligned))
            nested = []
            for inst in block.instructions:
                for region in inst.regions:
                    for b in region.blocks:
                        if any(i.opname == "ldm_alloc" for i in b.walk()):
                            counter[0] += 1
                            name = f"r{counter[0]}"
                            inner = members(b, f"{path}.nested.{name}")
                            nested.append(C.Decl(C.Record("struct", inner), name))
            if nested:
                out.append(C.Decl(C.Record("union", tuple(nested)), "nested"))
            return tuple(out)

        body = members(f.body.entry, k)   # paths below the ldm union  # type: ignore[union-attr]
        return C.RecordDef(C.Record("struct", body, _frame_tag(k)),
                           f"@{comment_text(f.name)}")

    # main.c -----------------------------------------------------------------------------
    def _host_function(self, f: Function) -> C.Function:
        name = self._c_names[(id(f), "host")]
        scope = Scope(self.scope)
        e = BodyEmitter(self, f, "host", scope)
        scope.reserve(*(f"result{i}" for i in range(len(f.result_types))))
        params = []
        for p in f.params:
            n = scope.declare(p.name or f"arg{p.index}", p, "a")
            t = p.type
            params.append(C.Param(_param_type(t), n))
            if not p.has_uses:
                e.emit(_unused(n))
        for i, t in enumerate(f.result_types):
            if not isinstance(t, ScalarType):
                raise Diagnostic(f"swir-cg: @{f.name} returns {t}; at the dma stage results "
                                 "are output buffers or scalars", f.loc)
            params.append(C.Param(C.Pointer(C.Named(scalar.c_type(t))), f"result{i}"))
        if f.kind == "func":
            self._host_locals(e, f)
        blocks = f.body.blocks  # type: ignore[union-attr]
        labels = Scope()
        for b in blocks:
            e.labels[id(b)] = labels.declare("bb_" + (b.label or "block"))
        targets = {id(s.block) for b in blocks for i in b.instructions for s in i.args
                   if isinstance(s, Successor)}
        for b in blocks:
            if id(b) in targets:
                e.emit(C.Line(f"{e.labels[id(b)]}:;"))
            e.region(b)
        return C.Function(name, params, e.body, storage="static",
                          comment=f"@{comment_text(f.name)} ({self.where(f)})")

    def _host_locals(self, e: BodyEmitter, f: Function) -> None:
        """A func's values are declared up front: its blocks jump to each other."""
        decls: list[C.Stmt] = []
        for b in f.body.blocks:  # type: ignore[union-attr]
            values = list(b.args) if b is not f.body.entry else []  # type: ignore[union-attr]
            for inst in b.instructions:
                values += inst.results
            for v in values:
                t = v.type
                if not isinstance(t, ScalarType):
                    raise Diagnostic(f"swir-cg: %{v.name} has type {t}; host code holds only "
                                     "scalars at the dma stage", f.loc)
                n = e.define(v)
                decls.append(C.Decl(C.Named(scalar.c_type(t)), n, C.Lit("0")))
                if not v.has_uses:
                    decls.append(C.ExprStmt(_unused(n)))
        for d in decls:
            e.emit(d)

    def _global_decl(self, g: Global, storage: str, comment: str) -> C.Decl:
        """A global's pointer (its data is in main memory, placed at start)."""
        t = g.type
        assert isinstance(t, ShapedType)
        return C.Decl(_param_type(t), self._globals[id(g)], storage=storage, comment=comment)

    def _constants(self) -> tuple[bytes, str]:
        """weights.bin and the C that places the constants: file-backed and
        listed constants are read from the file, each at a 64-byte boundary;
        splat constants are filled in at start (they take no file space)."""
        blob = bytearray()
        read, fill, decls = [], [], []
        base_dir = Path(self.opt.source).parent
        for g in self.m.globals:
            if g.kind != "global" or id(g) not in self._used_globals:
                continue
            t = g.type
            assert isinstance(t, ShapedType)
            n = self._globals[id(g)]
            decls.append(self._global_decl(
                g, "" if id(g) in self._slave_globals else "static",
                f"@{comment_text(g.name)} : {comment_text(str(t))}"))
            if isinstance(g.init, Dense) and g.init.is_splat:
                value = dense_array(g.init, t).reshape(-1)[0] if t.num_elements else 0
                fill.append((n, t, value))
                continue
            if not isinstance(g.init, (Dense, FileInit, ArrayInit)):
                raise Diagnostic(f"swir-cg: @{g.name} has no contents", g.loc)
            data = global_array(g, base_dir)     # a per-rank global: every rank's slice
            arr = np.ascontiguousarray(data, dtype=data.dtype.newbyteorder("<"))
            blob += b"\0" * (-len(blob) % ALIGN)
            read.append((n, t, len(blob), t.bytes if global_ranks(g) else 0))
            blob += arr.tobytes()
        code = templates.constants_code(decls, read, fill, len(blob), c_string,
                                        ranked=self.ranks is not None)
        return bytes(blob), code

    def _buffers(self) -> str:
        """The arena (buffers with a planned offset) and buffers of their own."""
        placed, own, decls = [], [], []
        size = 0
        for g in self.m.globals:
            if g.kind != "buffer" or id(g) not in self._used_globals:
                continue
            t = g.type
            assert isinstance(t, ShapedType)
            n = self._globals[id(g)]
            off = g.attrs.get("offset")
            static = "" if id(g) in self._slave_globals else "static"
            where = f"arena offset {off}" if isinstance(off, int) else "own memory"
            decls.append(self._global_decl(
                g, static, f"@{comment_text(g.name)} : {comment_text(str(t))}, {where}"))
            if isinstance(off, int) and not isinstance(off, bool) and off >= 0:
                placed.append((n, g, off))
                size = max(size, off + t.bytes)
            else:
                own.append((n, g))
        return templates.buffers_code(decls, placed, own, size, c_string)

    def _main_c(self, host_functions: list[str], constants: str) -> str:
        f = self.entry
        n_out = output_count(f)
        inputs = f.params[:len(f.params) - n_out]
        outputs = f.params[len(inputs):]
        entry_name = self._c_names[(id(f), "host")]
        return templates.main_c(
            header=self.header(f"main.c: the MPE program: allocates main memory, loads the "
                               f"constants, reads the inputs,\n * runs @{comment_text(f.name)}"
                               " (which spawns the CPE kernels in order) and writes the "
                               "outputs."),
            constants=constants, buffers=self._buffers(), functions=host_functions,
            entry=entry_name, entry_name=f.name, inputs=inputs, outputs=outputs, results=list(f.result_types),
            c_string=c_string, ranks=self.ranks)

    # Makefile ---------------------------------------------------------------------------
    def _makefile(self) -> str:
        # The LDM the plan was made for (stage dma {ldm_size = N}), at most the
        # SW26010's: the emulation holds each kernel to both.
        planned = module_attr_ldm(self.m)
        ldm_bytes = min(planned, SW26010.ldm_bytes)
        reserve = self.opt.ldm_reserve
        if reserve is None:                 # -ldm-plan's default
            reserve = SW26010.default_reserve(planned)
        if reserve >= ldm_bytes:
            raise Diagnostic(f"swir-cg: an LDM reserve of {reserve} bytes leaves no LDM for "
                             f"the kernels: the {SW26010.title} has {SW26010.ldm_bytes} bytes "
                             "per CPE", self.m.loc)
        return templates.makefile(self.stem, comment_text(self.opt.source), reserve, ldm_bytes,
                                  SW26010.cpes, self.ranks)


VOID_P = C.Pointer(C.VOID)


def _frame_tag(kernel: str) -> str:
    """The tag of a kernel's LDM struct (``struct conv1_ldm``)."""
    return f"{kernel}_ldm"


def _typedef(comment: str, name: str, fields: list[C.Decl]) -> str:
    """``/* comment */ typedef struct { fields } name;`` and a blank line."""
    return C.render([C.Comment(comment),
                     C.Decl(C.Record("struct", tuple(fields)), name, storage="typedef")]) + "\n"


def _thread_local(t: C.CType, name: str, align: int = 0) -> str:
    """A CPE-private variable at file scope (``__thread_local``: in each CPE's
    LDM), and a blank line."""
    attributes = f"__attribute__((aligned({align})))" if align else ""
    return C.render([C.Decl(t, name, storage="static __thread_local",
                            attributes=attributes)]) + "\n"


def _unused(name: str) -> C.Expr:
    """``(void)name``: a parameter or value the code does not read (C warns)."""
    return C.Cast(C.VOID, C.Id(name))


def _ldm_frame(kernel: str | None) -> C.Expr:
    """The emulation's note of a kernel's LDM frame: its struct in the ``ldm``
    union, or (None) no buffers (the frame starts at the Para copy)."""
    if kernel is None:
        return C.call("SWIR_LDM_FRAME", C.Unary("&", C.Id("swir_para")), 0)
    frame = C.member("ldm", kernel)
    return C.call("SWIR_LDM_FRAME", C.Unary("&", frame), C.SizeOf(frame))


def _param_type(t: object) -> C.CType:
    """A host function's parameter: a buffer by its element pointer, a scalar by value."""
    if isinstance(t, ShapedType):
        return C.Pointer(C.Named(scalar.c_type(t.element)))
    return C.Named(scalar.c_type(t))  # type: ignore[arg-type]
