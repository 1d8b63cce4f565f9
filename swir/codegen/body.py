"""C statements for the body of one dma-stage function.

A ``cpe kernel`` becomes structured C (its loops ``for``, its guards ``if``,
SSA values ``const`` locals), an MPE function (``host func``) becomes C with
one label per basic block. Both share the op translations below; what differs
between the MPE and the CPE side (how LDM, DMA, spawn and calls are written)
is asked of the :class:`Unit` the function belongs to.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from swir.codegen import scalar
from swir.codegen import c_ast as C
from swir.codegen.names import Scope, c_string, display_text
from swir.diagnostics import Diagnostic
from swir.interp.graph import constant_array
from swir.ir.affine import Compound, Expr, format_expr
from swir.ir.core import (
    Access,
    Apply,
    Block,
    Constraint,
    Function,
    Global,
    Instruction,
    Successor,
    Value,
)
from swir.ir.types import INDEX, BufType, LDMType, ScalarType, ShapedType
from swir.ops.elementwise import BINARY, COMPARE, UNARY

if TYPE_CHECKING:
    from swir.codegen.project import Project

ELEMENTWISE = frozenset([*UNARY, *BINARY, *COMPARE, "select", "cast"])


def pointer_type(t: ShapedType, const: bool = False) -> tuple[str, str]:
    """The C type of a pointer through which buffer ``t`` is indexed as
    ``A[i][j]``, split around the declarator: ``float (*`` / ``)[1024]``."""
    elem = scalar.c_type(t.element)
    q = "const " if const else ""
    dims = "".join(f"[{d}]" for d in t.shape[1:])
    if not dims:
        return f"{q}{elem} *", ""
    return f"{q}{elem} (*", f"){dims}"


def declare_pointer(t: ShapedType, name: str, init: str, const: bool = False) -> str:
    """``float (*const A)[1024] = (float (*)[1024])init;``"""
    head, tail = pointer_type(t, const)
    if not tail:
        cast = "" if init.startswith(("&", "ldm.")) else f"({head.strip()})"
        return f"{head}const {name} = {cast}{init};"
    return f"{head}const {name}{tail} = ({head}{tail}){init};"


class BodyEmitter:
    """Writes the C body of one function, statement by statement."""

    def __init__(self, project: Project, f: Function, side: str, scope: Scope) -> None:
        self.project, self.f, self.side, self.scope = project, f, side, scope
        self.lines: list[str] = []
        self.depth = 1
        self.labels: dict[int, str] = {}

    # -- output ----------------------------------------------------------------
    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    @contextmanager
    def scoped(self) -> Iterator[None]:
        """A C block scope: names declared in it may be reused by its siblings."""
        outer, self.scope = self.scope, Scope(self.scope)
        try:
            yield
        finally:
            self.scope = outer

    @contextmanager
    def block(self, head: str) -> Iterator[None]:
        """``head { ... }``, a scope of its own."""
        with self.scoped():
            self.line(head + " {")
            self.depth += 1
            yield
            self.depth -= 1
            self.line("}")

    def fail(self, message: str, inst: Instruction | None = None) -> Diagnostic:
        return Diagnostic(f"swir-cg: {message}", inst.loc if inst is not None else self.f.loc)

    # -- names and expressions ---------------------------------------------------------
    def name(self, v: Value) -> str:
        if isinstance(v, Global):
            return self.project.global_name(v, self.side)
        try:
            return self.scope.lookup(v)
        except KeyError:
            raise self.fail(f"%{v.name} is used but has no C name (unreachable definition?)") \
                from None

    def define(self, v: Value, fallback: str = "t") -> str:
        """v's C name: a new one, unless v was declared already (a func's
        values are declared at its top, before the blocks that assign them)."""
        try:
            return self.scope.lookup(v)
        except KeyError:
            return self.scope.declare(v.name or fallback, v, fallback)

    def expr(self, e: Expr | int) -> str:
        return format_expr(Expr.of(e), self.name, lambda atom, _bare: self._atom(atom))

    def _atom(self, atom: object) -> str:
        if not isinstance(atom, Compound):
            v = self.name(atom)  # type: ignore[arg-type]
            t = getattr(atom, "type", INDEX)
            return v if t == INDEX else f"(long){v}"
        if atom.kind in ("min", "max"):
            return self._fold(atom.kind, [self.expr(a) for a in atom.args])
        return f"swir_{atom.kind}({self.expr(atom.args[0])}, {atom.divisor})"

    def _fold(self, kind: str, args: list[str]) -> str:
        text = args[0]
        for a in args[1:]:
            text = f"swir_{kind}({text}, {a})"
        return text

    def condition(self, cs: list) -> str:
        parts = []
        for c in cs:
            assert isinstance(c, Constraint)
            parts.append(f"{self.expr(c.lhs)} {c.rel} {self.expr(c.rhs)}")
        return " && ".join(parts)

    def element(self, acc: Access) -> str:
        """``A[i][j]``: one element of a main-memory or LDM buffer."""
        base = self.name(acc.base)
        t = acc.base.type
        assert isinstance(t, ShapedType)
        if t.rank == 0:
            return f"{base}[0]"
        if any(not isinstance(i, Expr) for i in acc.indices) or len(acc.indices) != t.rank:
            raise Diagnostic("swir-cg: an element access needs one subscript per dimension "
                             "(ranges are for copies)", None)
        return base + "".join(f"[{self.expr(i)}]" for i in acc.indices)

    # -- statements ------------------------------------------------------------------
    def region(self, block: Block) -> None:
        for inst in block.instructions:
            self.instruction(inst)

    def instruction(self, inst: Instruction) -> None:
        op = inst.opname
        fn = _STATEMENTS.get(op)
        if fn is None and op in ELEMENTWISE:
            fn = _elementwise
        if fn is None:
            raise self.fail(f"'{op}' has no C translation in a "
                            f"{'CPE' if self.side == 'cpe' else 'host'} function", inst)
        try:
            fn(self, inst)
        except scalar.Unsupported as e:
            raise self.fail(str(e), inst) from None


# ---------------------------------------------------------------------------
# Op translations
# ---------------------------------------------------------------------------

def _scalar_result(e: BodyEmitter, inst: Instruction) -> tuple[ScalarType, str]:
    t = inst.results[0].type
    if not isinstance(t, ScalarType):
        raise e.fail(f"'{inst.opname}' must give a scalar in C, not {t}", inst)
    return t, e.define(inst.results[0])


def _emit_value(e: BodyEmitter, inst: Instruction, value: C.Expr | str) -> None:
    if not inst.results[0].has_uses and not (e.side == "host" and e.f.kind == "func"):
        return      # C warns of unused variables; the op has no effect
    t, name = _scalar_result(e, inst)
    if e.side == "host" and e.f.kind == "func":
        e.line(f"{name} = {value};")
    else:
        e.line(f"const {scalar.c_type(t)} {name} = {value};")


def _const(e: BodyEmitter, inst: Instruction) -> None:
    t = inst.results[0].type
    if not isinstance(t, ScalarType):
        raise e.fail(f"a tensor constant has no place in C code; constants are globals "
                     f"at this stage, got {t}", inst)
    v = constant_array(inst.args[0], t)[()]
    _emit_value(e, inst, scalar.literal(v, t))


def _elementwise(e: BodyEmitter, inst: Instruction) -> None:
    args = list(inst.args)
    if not all(isinstance(a, Value) and isinstance(a.type, ScalarType) for a in args):
        raise e.fail(f"'{inst.opname}' on tensors or buffers has no C form; loop bodies "
                     "compute on scalars", inst)
    t = inst.results[0].type
    assert isinstance(t, ScalarType)
    value = scalar.node(inst.opname, [a.type for a in args],  # type: ignore[union-attr]
                        [C.Id(e.name(a)) for a in args], t, dict(inst.attrs))  # type: ignore[arg-type]
    _emit_value(e, inst, value)


def _load(e: BodyEmitter, inst: Instruction) -> None:
    acc = inst.args[0]
    assert isinstance(acc, Access)
    _emit_value(e, inst, e.element(acc))


def _store(e: BodyEmitter, inst: Instruction) -> None:
    acc = inst.args[1]
    assert isinstance(acc, Access)
    if isinstance(acc.base, Global) and acc.base.kind == "global":
        raise e.fail(f"'store' writes to @{acc.base.name}, a constant global", inst)
    e.line(f"{e.element(acc)} = {e.name(inst.args[0])};")  # type: ignore[arg-type]


def _loop(e: BodyEmitter, inst: Instruction) -> None:
    body = inst.regions[0].blocks[0]
    lo, hi = e.expr(inst.args[0]), e.expr(inst.args[1])  # type: ignore[arg-type]
    step = inst.attrs.get("step", 1)
    with e.scoped():     # the loop variable belongs to the loop
        iv = e.define(body.args[0], "i")
        inc = f"{iv}++" if step == 1 else f"{iv} += {step}"
        with e.block(f"for (long {iv} = {lo}; {iv} < {hi}; {inc})"):
            e.region(body)


def _if(e: BodyEmitter, inst: Instruction) -> None:
    with e.block(f"if ({e.condition(list(inst.args))})"):
        e.region(inst.regions[0].blocks[0])
    if len(inst.regions) > 1 and inst.regions[1].blocks and inst.regions[1].blocks[0].instructions:
        closing = e.lines.pop()
        with e.block(closing.strip() + " else"):
            e.region(inst.regions[1].blocks[0])


def _dyn_index(e: BodyEmitter, inst: Instruction) -> None:
    v = inst.args[0]
    n = inst.attrs["bound"]
    loc = inst.loc or e.f.loc
    # One printable line whatever the names hold (SWIR_TRAP prints it as is).
    where = f"{display_text(str(loc), 200)}: " if loc else ""
    what = f"%{display_text(v.name)}" if getattr(v, "name", None) else "an index"
    if e.side == "cpe":    # recorded for the MPE to report after the join
        site = e.project.fault_site(f"{where}'dyn_index' of {what}",
                                    "@" + display_text(e.f.name))
        call = f"swir_cpe_dyn_index((long){e.name(v)}, {n}, {site})"  # type: ignore[arg-type]
    else:
        msg = c_string(f"{where}'dyn_index' of {what}")
        call = f"swir_dyn_index((long){e.name(v)}, {n}, {msg}, " \
               f"{c_string('@' + display_text(e.f.name))})"  # type: ignore[arg-type]
    if not inst.results[0].has_uses:
        e.line(f"(void){call};")      # unused, but its range check still runs
        return
    e.line(f"const long {e.define(inst.results[0], 'd')} = {call};")


def _cpe_id(e: BodyEmitter, inst: Instruction) -> None:
    if not inst.results[0].has_uses:
        return
    e.line(f"const long {e.define(inst.results[0], 'id')} = athread_get_id(-1);")


def _chunk(e: BodyEmitter, inst: Instruction) -> None:
    ext, w, g = inst.attrs["extent"], inst.attrs["workers"], inst.attrs.get("grain", 1)
    who = e.expr(inst.args[0])  # type: ignore[arg-type]
    lo_v, hi_v = inst.results
    lo = e.define(lo_v, "lo") if lo_v.has_uses else "lo"
    hi = e.define(hi_v, "hi") if hi_v.has_uses else "hi"
    if g == 1:
        e.line(f"/* this CPE's share [{lo}, {hi}) of {ext} iterations over {w} CPEs */")
    else:
        e.line(f"/* this CPE's share [{lo}, {hi}) of {ext} iterations over {w} CPEs, in units of "
               f"{g} (no two CPEs write one 32-byte block) */")
    for v, name, side in ((lo_v, lo, "lo"), (hi_v, hi, "hi")):
        if not v.has_uses:
            continue
        if g == 1:
            e.line(f"const long {name} = swir_chunk_{side}({who}, {ext}, {w});")
        else:
            e.line(f"const long {name} = swir_min(swir_chunk_{side}({who}, {-(-ext // g)}, {w}) "
                   f"* {g}, {ext});")


def _ldm_alloc(e: BodyEmitter, inst: Instruction) -> None:
    if inst.results[0].has_uses:     # an unused buffer keeps its place in the struct
        e.project.ldm_alloc(e, inst)


def _dma(e: BodyEmitter, inst: Instruction) -> None:
    get = inst.opname == "dma_get"
    mem, local = (inst.args[0], inst.args[1]) if get else (inst.args[1], inst.args[0])
    assert isinstance(mem, Access)
    mt = mem.base.type
    assert isinstance(mt, BufType)
    lbase = local.base if isinstance(local, Access) else local
    lt = lbase.type  # type: ignore[union-attr]
    if not isinstance(lt, LDMType):
        raise e.fail(f"a DMA's local side must be an LDM buffer, got {lt}", inst)
    esize = lt.element.bytes
    mem_ptr = f"(void *){_address(e, mem)}"
    ldm_ptr = _address(e, local) if isinstance(local, Access) else e.name(local)  # type: ignore[arg-type]
    count, reply = inst.attrs["count"], inst.attrs["reply"]
    bsize, stride = inst.attrs.get("bsize", 0), inst.attrs.get("stride", 0)
    e.project.note_reply(reply)
    tail = f"{count * esize}, (void *)&reply[{reply}]"
    if get:
        e.line(f"athread_get(PE_MODE, {mem_ptr}, {ldm_ptr}, {tail}, 0, "
               f"{stride * esize}, {bsize * esize});")
    else:
        if isinstance(mem.base, Global) and mem.base.kind == "global":
            raise e.fail(f"'dma_put' writes to @{mem.base.name}, a constant global", inst)
        e.line(f"athread_put(PE_MODE, {ldm_ptr}, {mem_ptr}, {tail}, "
               f"{stride * esize}, {bsize * esize});")


def _address(e: BodyEmitter, acc: Access) -> str:
    t = acc.base.type
    assert isinstance(t, ShapedType)
    if t.rank == 0:
        return e.name(acc.base)
    return "&" + e.element(acc)


def _dma_wait(e: BodyEmitter, inst: Instruction) -> None:
    reply = inst.attrs["reply"]
    e.project.note_reply(reply)
    e.line(f"SWIR_WAIT(reply[{reply}], {inst.attrs.get('times', 1)});")


def _call(e: BodyEmitter, inst: Instruction) -> None:
    app = inst.args[0]
    assert isinstance(app, Apply)
    callee = e.project.function(app.callee, inst)
    e.project.check_writes(callee, app, inst)
    args = [e.name(a) for a in app.args]
    outs = []
    for r in inst.results:
        t = r.type
        if not isinstance(t, ScalarType):
            raise e.fail(f"a call result of type {t} has no C form (results are scalars "
                         "at this stage)", inst)
        outs.append(e.define(r))
    if outs and e.f.kind != "func":
        for r, name in zip(inst.results, outs):
            e.line(f"{scalar.c_type(r.type)} {name};")  # type: ignore[arg-type]
    args += [f"&{o}" for o in outs]
    e.line(f"{e.project.call_name(callee, e.side, inst)}({', '.join(args)});")


def _spawn(e: BodyEmitter, inst: Instruction) -> None:
    callees, args = [], []
    for app in inst.args:                  # one or more kernels, in order
        assert isinstance(app, Apply)
        callee = e.project.function(app.callee, inst)
        e.project.check_writes(callee, app, inst)
        callees.append(callee)
        args += [e.name(a) for a in app.args]
    name, taken = e.project.spawn_call(callees, inst)
    e.line(f"{name}({', '.join(args[i] for i in taken)});")


def _join(e: BodyEmitter, inst: Instruction) -> None:
    e.line("athread_join();")
    if e.project.fault_sites:
        e.line("swir_check_faults();")


def _return(e: BodyEmitter, inst: Instruction) -> None:
    for i, v in enumerate(inst.args):
        e.line(f"*result{i} = {e.name(v)};")  # type: ignore[arg-type]
    if e.side == "host" and e.f.kind == "func" or inst.args:
        e.line("return;")


def _br(e: BodyEmitter, inst: Instruction) -> None:
    _jump(e, inst.args[0])  # type: ignore[arg-type]


def _cond_br(e: BodyEmitter, inst: Instruction) -> None:
    c, yes, no = inst.args
    with e.block(f"if ({e.name(c)})"):  # type: ignore[arg-type]
        _jump(e, yes)  # type: ignore[arg-type]
    _jump(e, no)  # type: ignore[arg-type]


def _jump(e: BodyEmitter, succ: Successor) -> None:
    """Bind the target's block arguments (all values read before any is
    written: a parallel copy) and go there."""
    targets = [e.name(a) for a in succ.block.args]
    values = [e.name(v) for v in succ.args]
    pairs = [(t, v) for t, v in zip(targets, values) if t != v]
    if len(pairs) == 1:
        e.line(f"{pairs[0][0]} = {pairs[0][1]};")
    elif pairs:
        with e.block(""):
            for k, (t, v) in enumerate(pairs):
                ct = scalar.c_type(succ.block.args[targets.index(t)].type)  # type: ignore[arg-type]
                e.line(f"const {ct} swir_tmp{k} = {v};")
            for k, (t, _) in enumerate(pairs):
                e.line(f"{t} = swir_tmp{k};")
    e.line(f"goto {e.labels[id(succ.block)]};")


def _copy(e: BodyEmitter, inst: Instruction) -> None:
    raise e.fail(f"'{inst.opname}' reached code generation: at the dma stage copies are "
                 "DMAs (run -insert-dma on the buffered stage)", inst)


_STATEMENTS = {
    "const": _const, "load": _load, "store": _store, "for": _loop, "parallel": _loop,
    "if": _if, "dyn_index": _dyn_index, "cpe_id": _cpe_id, "chunk": _chunk,
    "ldm_alloc": _ldm_alloc, "dma_get": _dma, "dma_put": _dma, "dma_wait": _dma_wait,
    "call": _call, "spawn": _spawn, "join": _join, "return": _return, "br": _br,
    "cond_br": _cond_br, "copy_in": _copy, "copy_out": _copy,
}
