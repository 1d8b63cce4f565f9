"""Where each function of a dma-stage module goes in the C project and what
it is called there: the host functions, spawned CPE kernels, kernels called
on a CPE and spawns of several kernels reached from the entry function, one
file-scope C name for each, the Para fields of their parameters; and what
the function bodies record while they are written (globals used, reply
words, CPE run-time error sites, SIMD). The writers of the files
(swir/codegen/host.py, cpe.py, para.py) read it; a function body
(swir/codegen/body.py) sees it as its :class:`swir.codegen.unit.Unit`.
"""

from __future__ import annotations

from swir.analysis.calling import all_written_params
from swir.codegen import c_ast as C
from swir.codegen import scalar, templates
from swir.codegen.body import declare_pointer
from swir.codegen.names import Scope, comment_text, file_stem
from swir.codegen.unit import Emitter, Options
from swir.diagnostics import Diagnostic
from swir.ir.constants import module_ranks
from swir.ir.core import Apply, FuncParam, Function, Global, Instruction, Module
from swir.ir.types import LDMType, ShapedType
from swir.ops import CALL, LDM_ALLOC, SPAWN


class Layout:
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
        if options.train:           # the training program's main() and tables
            self.scope.reserve(*templates.TRAIN_NAMES, inner=False)
        self.reply_words = 0
        self.uses_simd = False      # a kernel has vector code: layers_slave.c includes simd.h
        self.broadcasts = False     # a kernel broadcasts (on the Pro: swir_rma_bcast)
        # CPE run-time error sites (message, function), numbered from 1: a CPE
        # records a site number, the MPE prints its message after the join.
        self.fault_sites: list[tuple[str, str]] = []
        self.globals: dict[int, str] = {}
        self.used_globals: set[int] = set()
        self.slave_globals: dict[int, Global] = {}
        self.ldm_paths: dict[int, C.Expr] = {}   # ldm_alloc -> its buffer in ldm
        self._field_scopes: dict[int, Scope] = {}  # spawned kernel -> its Para fields
        # The buffer parameters each function writes, computed once for the
        # module (analysis.calling.written_params is a fixpoint over the whole
        # module: asking it for each kernel was quadratic in the module size).
        self._written = all_written_params(module)
        for g in module.globals:     # file scope first: no local may take their names
            self.globals[id(g)] = self.scope.declare(g.name, fallback="g")
        self.entry = self._entry()
        self.alone: set[int] = set()             # kernels spawned on their own
        self.host_funcs, self.spawned, self.cpe_called, self.groups = self._reachable()
        # Kernels run inside a spawn of several: a function of their own, called
        # from the spawn's entry (a spawn of one of them alone calls it too).
        self.runners = list({id(f): f for g in self.groups for f in g}.values())
        self._declare_functions()

    def _declare_functions(self) -> None:
        """The file-scope C names of the functions, wrappers and Para structs,
        in an order that fixes which name gets a suffix when two meet."""
        self.c_names: dict[tuple[int, str], str] = {}
        for f in self.spawned:
            self.c_names[(id(f), "spawn")] = self.scope.declare(f.name, fallback="k")
        for f in self.runners:
            self.c_names[(id(f), "run")] = self.scope.declare(f.name + "_run", fallback="k")
        self.group_names = [self.scope.declare(g[0].name + "_group", fallback="k")
                            for g in self.groups]
        self.group_para = [self.scope.declare(n + "_para") for n in self.group_names]
        self.group_spawn = [self.scope.declare("spawn_" + n) for n in self.group_names]
        self._group_of = {key: i for i, key in enumerate(self.group_keys)}
        for f in self.cpe_called:    # a kernel both spawned and called gets two functions
            self.c_names[(id(f), "cpe")] = self.scope.declare(f.name, fallback="k")
        for f in self.host_funcs:
            self.c_names[(id(f), "host")] = self.scope.declare(f.name, fallback="f")
        self.para = {id(f): self.scope.declare(self.c_names[(id(f), "spawn")] + "_para")
                     for f in self.spawned}
        self.spawn = {id(f): self.scope.declare("spawn_" + self.c_names[(id(f), "spawn")])
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
                if inst.isa(CALL, SPAWN):
                    callees = [self.function(a.callee, inst) for a in inst.args]  # type: ignore[union-attr]
                    to = "spawn" if inst.isa(SPAWN) else \
                        ("host" if side == "host" else "cpe")
                    todo += [(c, to) for c in callees]
                    if len(callees) > 1:
                        groups.setdefault(self._group_key(callees, inst), tuple(callees))
                    elif inst.isa(SPAWN):
                        self.alone.add(id(callees[0]))
        for f in cpe:
            if any(i.isa(LDM_ALLOC) for i in f.body.walk()):  # type: ignore[union-attr]
                raise Diagnostic(f"swir-cg: @{f.name} allocates LDM but is called from a CPE "
                                 "kernel; its buffers would overlap its caller's (only "
                                 "spawned kernels may allocate LDM)", f.loc)
        self.group_keys = list(groups)
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
        return self.c_names[(id(f), "host" if side == "host" else "cpe")]

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
            return self.spawn[id(kernels[0])], list(range(n))
        key = self._group_key(kernels, inst)
        return self.group_spawn[self._group_of[key]], \
            [i for i, j in enumerate(key[1]) if i == j]

    def global_name(self, g: Global, side: str) -> str:
        self.used_globals.add(id(g))
        if side == "cpe":
            self.slave_globals[id(g)] = g
        return self.globals[id(g)]

    def used_globals_of(self, kind: str) -> list[Global]:
        """The module's globals of ``kind`` ("global" or "buffer") that the
        written code names, in module order."""
        return [g for g in self.m.globals if g.kind == kind and id(g) in self.used_globals]

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

    def ldm_alloc(self, e: Emitter, inst: Instruction) -> None:
        t = inst.results[0].type
        assert isinstance(t, LDMType)
        name = e.define(inst.results[0], "L")
        e.emit(declare_pointer(t, name, self.ldm_paths[id(inst)], cast=False))

    def global_decl(self, g: Global, storage: str, comment: str) -> C.Decl:
        """A global's pointer (its data is in main memory, placed at start)."""
        t = g.type
        assert isinstance(t, ShapedType)
        return C.Decl(param_type(t), self.globals[id(g)], storage=storage, comment=comment)

    # -- comments ------------------------------------------------------------------------
    def header(self, what: str) -> str:
        return (f"/* {what}\n"
                f" * Generated by swir-cg from {comment_text(self.opt.source)} "
                f"(module {comment_text(repr(self.m.name))}); do not edit. */\n")

    def where(self, f: Function) -> str:
        loc = f.loc
        return comment_text(str(loc)) if loc is not None else comment_text(self.opt.source)

    @staticmethod
    def group_text(g: tuple[Function, ...]) -> str:
        return ", ".join("@" + comment_text(f.name) for f in g)

    # -- Para fields ---------------------------------------------------------------------
    def param_field(self, p: FuncParam) -> str:
        """The Para field (and wrapper parameter) of a spawned kernel's parameter."""
        scope = self._field_scopes.setdefault(id(p.owner), Scope())
        try:
            return scope.lookup(p)
        except KeyError:
            return scope.declare(p.name or f"arg{p.index}", p, "a")

    def group_members(self, i: int) -> list[str]:
        """The Para members of spawn group i, one per kernel (a kernel may
        come twice)."""
        scope = Scope()
        return [scope.declare(self.c_names[(id(f), "spawn")]) for f in self.groups[i]]

    def group_params(self, i: int) -> list[list[str]]:
        """Spawn group i's wrapper parameter for each kernel's each parameter:
        one per distinct argument of the spawn, named after the Para field of
        its first use."""
        scope, same = Scope(self.scope), self.group_keys[i][1]
        names: list[str] = []
        for f in self.groups[i]:
            for p in f.params:
                j = same[len(names)]
                names.append(scope.declare(self.param_field(p)) if j == len(names)
                             else names[j])
        out, at = [], 0
        for f in self.groups[i]:
            out.append(names[at:at + len(f.params)])
            at += len(f.params)
        return out


def param_type(t: object) -> C.CType:
    """A host function's parameter: a buffer by its element pointer, a scalar by value."""
    if isinstance(t, ShapedType):
        return C.Pointer(C.Named(scalar.c_type(t.element)))
    return C.Named(scalar.c_type(t))  # type: ignore[arg-type]


def unused(name: str) -> C.Expr:
    """``(void)name``: a parameter or value the code does not read (C warns)."""
    return C.Cast(C.VOID, C.Id(name))
