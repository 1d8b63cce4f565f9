"""C statements for the body of one dma-stage function.

A ``cpe kernel`` becomes structured C (its loops ``for``, its guards ``if``,
SSA values ``const`` locals), an MPE function (``host func``) becomes C with
one label per basic block. Both share the op translations below; what differs
between the MPE and the CPE side (how LDM, DMA, spawn and calls are written)
is asked of the :class:`Unit` the function belongs to.
"""

from __future__ import annotations

import math

from collections.abc import Iterator
from contextlib import contextmanager

from swir.analysis import vector_plan
from swir.codegen.dialect import dialect_of
from swir.codegen import c_ast as C
from swir.codegen import scalar, vector
from swir.codegen.names import Scope, c_string, display_text
from swir.codegen.unit import Unit
from swir.diagnostics import Diagnostic
from swir.ir.affine import Compound, Expr
from swir.ir.constants import constant_array
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
from swir.ops import (BR, CALL, CHUNK, COND_BR, CONST, COPY_IN, COPY_OUT, CPE_ID, DMA_BCAST,
                      DMA_GET, DMA_PUT, DMA_WAIT, DYN_INDEX, FOR, IF, JOIN, LDM_ALLOC, LOAD,
                      MPI_ALLGATHER, MPI_ALLREDUCE, MPI_REDUCE_SCATTER, PARALLEL, REG_RECV,
                      REG_SEND, RETURN, SPAWN, STORE)
from swir.ops.loop import REG_LANES
from swir.ops.registry import SCALAR_FORM
from swir.ops.util import attr_or_default, element_offset

CONST_LONG = C.Named("long", const=True)
VOID_P = C.Pointer(C.VOID)


def pointer_type(t: ShapedType, const: bool = False) -> C.Pointer:
    """The C type of a pointer through which buffer ``t`` is indexed as
    ``A[i][j]``: ``float (*)[1024]``; ``const``: to const elements."""
    return C.Pointer(C.array(C.Named(scalar.c_type(t.element), const), t.shape[1:]))


def declare_pointer(t: ShapedType, name: str, init: C.Expr, const: bool = False,
                    cast: bool = True) -> C.Decl:
    """``float (*const A)[1024] = (float (*)[1024])init;``. A one-dimensional
    buffer's ``init`` needs no cast when it has the pointer's type already
    (``cast`` false: an LDM array, an element's address)."""
    ptr = pointer_type(t, const)
    value = C.Cast(ptr, init) if cast or t.rank > 1 else init
    return C.Decl(C.const(ptr), name, value)


class BodyEmitter:
    """Writes the C body of one function, statement by statement."""

    def __init__(self, project: Unit, f: Function, side: str, scope: Scope) -> None:
        self.project, self.f, self.side, self.scope = project, f, side, scope
        self.dialect = dialect_of(project.opt.target)    # the target's athread calls
        self.body = C.Block()        # the function's statements
        self.labels: dict[int, str] = {}

    # -- output ----------------------------------------------------------------
    def emit(self, stmt: C.Stmt | C.Expr) -> None:
        """A statement (an expression becomes an expression statement)."""
        self.body.body.append(C.ExprStmt(stmt) if isinstance(stmt, C.Expr) else stmt)

    @contextmanager
    def scoped(self) -> Iterator[None]:
        """A C block scope: names declared in it may be reused by its siblings."""
        outer, self.scope = self.scope, Scope(self.scope)
        try:
            yield
        finally:
            self.scope = outer

    @contextmanager
    def block(self) -> Iterator[C.Block]:
        """A block of statements (a scope of its own) the caller places: what
        is emitted inside goes into it."""
        outer, self.body = self.body, C.Block()
        try:
            with self.scoped():
                yield self.body
        finally:
            self.body = outer

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

    def var(self, v: Value) -> C.Id:
        return C.Id(self.name(v))

    def expr(self, e: Expr | int) -> C.Expr:
        """An affine index expression in C, written as swir writes it
        (``2*oh + kh - 3``: a coefficient's product tight)."""
        e = Expr.of(e)
        out: C.Expr | None = None
        for atom, coef in e.terms:
            a = self._atom(atom)
            if out is None:     # the first term carries its own sign
                out = a if coef == 1 else C.Unary("-", a) if coef == -1 else \
                    C.Binary("*", C.Lit(str(coef)), a, tight=True)
                continue
            term = a if abs(coef) == 1 else C.Binary("*", C.Lit(str(abs(coef))), a, tight=True)
            out = C.Binary("+" if coef > 0 else "-", out, term)
        if out is None:
            return C.Lit(str(e.const))
        if e.const:
            out = C.Binary("+" if e.const > 0 else "-", out, C.Lit(str(abs(e.const))))
        return out

    def _atom(self, atom: object) -> C.Expr:
        if not isinstance(atom, Compound):
            v = self.var(atom)  # type: ignore[arg-type]
            return v if getattr(atom, "type", INDEX) == INDEX else C.Cast(C.LONG, v)
        if atom.kind in ("min", "max"):
            args = [self.expr(a) for a in atom.args]
            out = args[0]
            for a in args[1:]:
                out = C.call(f"swir_{atom.kind}", out, a)
            return out
        return C.call(f"swir_{atom.kind}", self.expr(atom.args[0]), atom.divisor)

    def condition(self, cs: list) -> C.Expr:
        out: C.Expr | None = None
        for c in cs:
            assert isinstance(c, Constraint)
            test = C.Binary(c.rel, self.expr(c.lhs), self.expr(c.rhs))
            out = test if out is None else C.Binary("&&", out, test)
        assert out is not None
        return out

    def element(self, acc: Access) -> C.Expr:
        """``A[i][j]``: one element of a main-memory or LDM buffer."""
        base = self.var(acc.base)
        t = acc.base.type
        assert isinstance(t, ShapedType)
        if t.rank == 0:
            return C.index(base, 0)
        if any(not isinstance(i, Expr) for i in acc.indices) or len(acc.indices) != t.rank:
            raise Diagnostic("swir-cg: an element access needs one subscript per dimension "
                             "(ranges are for copies)", None)
        return C.index(base, *(self.expr(i) for i in acc.indices))

    # -- statements ------------------------------------------------------------------
    def region(self, block: Block) -> None:
        for inst in block.instructions:
            self.instruction(inst)

    def instruction(self, inst: Instruction) -> None:
        fn = _STATEMENTS.get(inst.opdef)
        if fn is None and _computes_on_scalars(inst):
            fn = _elementwise
        if fn is None:
            raise self.fail(f"'{inst.opname}' has no C translation in a "
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


def _emit_value(e: BodyEmitter, inst: Instruction, value: C.Expr) -> None:
    if not inst.results[0].has_uses and not (e.side == "host" and e.f.kind == "func"):
        return      # C warns of unused variables; the op has no effect
    t, name = _scalar_result(e, inst)
    if e.side == "host" and e.f.kind == "func":
        e.emit(C.Assign(C.Id(name), value))
    else:
        e.emit(C.Decl(C.Named(scalar.c_type(t), const=True), name, value))


def _const(e: BodyEmitter, inst: Instruction) -> None:
    t = inst.results[0].type
    if not isinstance(t, ScalarType):
        raise e.fail(f"a tensor constant has no place in C code; constants are globals "
                     f"at this stage, got {t}", inst)
    v = constant_array(inst.args[0], t)[()]
    _emit_value(e, inst, scalar.literal(v, t))


def _computes_on_scalars(inst: Instruction) -> bool:
    """An element-wise op of loop bodies: its C is ``scalar.expression``."""
    op = inst.opdef
    return op is not None and SCALAR_FORM in op.traits and "dma" in op.stages


def _elementwise(e: BodyEmitter, inst: Instruction) -> None:
    args = list(inst.args)
    if not all(isinstance(a, Value) and isinstance(a.type, ScalarType) for a in args):
        raise e.fail(f"'{inst.opname}' on tensors or buffers has no C form; loop bodies "
                     "compute on scalars", inst)
    t = inst.results[0].type
    assert isinstance(t, ScalarType)
    value = scalar.node(inst.opdef, [a.type for a in args],  # type: ignore[union-attr]
                        [e.var(a) for a in args], t, dict(inst.attrs))  # type: ignore[arg-type]
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
    e.emit(C.Assign(e.element(acc), e.var(inst.args[0])))  # type: ignore[arg-type]


def _loop(e: BodyEmitter, inst: Instruction) -> None:
    if e.side == "cpe" and e.project.opt.simd and inst.isa(FOR):
        nest = vector_plan.plan(inst)
        if nest is not None:
            vector.emit(e, nest)
            return
    body = inst.regions[0].blocks[0]
    lo, hi = e.expr(inst.args[0]), e.expr(inst.args[1])  # type: ignore[arg-type]
    step = attr_or_default(inst, "step")
    with e.scoped():     # the loop variable belongs to the loop
        iv = C.Id(e.define(body.args[0], "i"))
        inc = C.Postfix(iv) if step == 1 else C.Assign(iv, C.Lit(str(step)), "+=")
        with e.block() as loop_body:
            e.region(body)
        e.emit(C.For(C.Decl(C.LONG, iv.name, lo), C.Binary("<", iv, hi), inc, loop_body))


def _if(e: BodyEmitter, inst: Instruction) -> None:
    with e.block() as then:
        e.region(inst.regions[0].blocks[0])
    orelse = None
    if len(inst.regions) > 1 and inst.regions[1].blocks and inst.regions[1].blocks[0].instructions:
        with e.block() as orelse:
            e.region(inst.regions[1].blocks[0])
    e.emit(C.If(e.condition(list(inst.args)), then, orelse))


def _dyn_index(e: BodyEmitter, inst: Instruction) -> None:
    v = inst.args[0]
    n = inst.attrs["bound"]
    loc = inst.loc or e.f.loc
    # One printable line whatever the names hold (SWIR_TRAP prints it as is).
    where = f"{display_text(str(loc), 200)}: " if loc else ""
    what = f"%{display_text(v.name)}" if getattr(v, "name", None) else "an index"
    index = C.Cast(C.LONG, e.var(v))  # type: ignore[arg-type]
    if e.side == "cpe":    # recorded for the MPE to report after the join
        site = e.project.fault_site(f"{where}'dyn_index' of {what}",
                                    "@" + display_text(e.f.name))
        call = C.call("swir_cpe_dyn_index", index, n, site)
    else:
        msg = c_string(f"{where}'dyn_index' of {what}")
        call = C.call("swir_dyn_index", index, n, C.Lit(msg),
                      C.Lit(c_string("@" + display_text(e.f.name))))
    if not inst.results[0].has_uses:
        e.emit(C.Cast(C.VOID, call))      # unused, but its range check still runs
        return
    e.emit(C.Decl(CONST_LONG, e.define(inst.results[0], "d"), call))


def _cpe_id(e: BodyEmitter, inst: Instruction) -> None:
    if not inst.results[0].has_uses:
        return
    e.emit(C.Decl(CONST_LONG, e.define(inst.results[0], "id"), e.dialect.cpe_id()))


def _chunk(e: BodyEmitter, inst: Instruction) -> None:
    ext, w, g = inst.attrs["extent"], inst.attrs["workers"], attr_or_default(inst, "grain")
    who = e.expr(inst.args[0])  # type: ignore[arg-type]
    lo_v, hi_v = inst.results
    lo = e.define(lo_v, "lo") if lo_v.has_uses else "lo"
    hi = e.define(hi_v, "hi") if hi_v.has_uses else "hi"
    if g == 1:
        e.emit(C.Comment(f"this CPE's share [{lo}, {hi}) of {ext} iterations over {w} CPEs"))
    else:
        e.emit(C.Comment(f"this CPE's share [{lo}, {hi}) of {ext} iterations over {w} CPEs, "
                         f"in units of {g} (no two CPEs write one 32-byte block)"))
    for v, name, side in ((lo_v, lo, "lo"), (hi_v, hi, "hi")):
        if not v.has_uses:
            continue
        if g == 1:
            share: C.Expr = C.call(f"swir_chunk_{side}", who, ext, w)
        else:
            units = C.call(f"swir_chunk_{side}", who, -(-ext // g), w)
            share = C.call("swir_min", C.Binary("*", units, C.Lit(str(g))), ext)
        e.emit(C.Decl(CONST_LONG, name, share))


def _ldm_alloc(e: BodyEmitter, inst: Instruction) -> None:
    if inst.results[0].has_uses:     # an unused buffer keeps its place in the struct
        e.project.ldm_alloc(e, inst)


def _dma(e: BodyEmitter, inst: Instruction) -> None:
    get = not inst.isa(DMA_PUT)
    mem, local = (inst.args[0], inst.args[1]) if get else (inst.args[1], inst.args[0])
    assert isinstance(mem, Access)
    mt = mem.base.type
    assert isinstance(mt, BufType)
    lbase = local.base if isinstance(local, Access) else local
    lt = lbase.type  # type: ignore[union-attr]
    if not isinstance(lt, LDMType):
        raise e.fail(f"a DMA's local side must be an LDM buffer, got {lt}", inst)
    esize = lt.element.bytes
    mem_ptr = C.Cast(VOID_P, _address(e, mem))
    ldm_ptr = _address(e, local) if isinstance(local, Access) else e.var(local)  # type: ignore[arg-type]
    count, reply = inst.attrs["count"], inst.attrs["reply"]
    bsize, stride = attr_or_default(inst, "bsize"), attr_or_default(inst, "stride")
    e.project.note_reply(reply)
    d = e.dialect
    size, word = C.as_expr(count * esize), d.reply_address(reply_word(reply))
    strides = (C.as_expr(stride * esize), C.as_expr(bsize * esize))
    if inst.isa(DMA_BCAST):
        e.project.broadcasts = True
        _broadcast(e, d.broadcast(mem_ptr, ldm_ptr, size, word, *strides), reply)
    elif get:
        e.emit(d.get(mem_ptr, ldm_ptr, size, word, *strides))
    else:
        if isinstance(mem.base, Global) and mem.base.kind == "global":
            raise e.fail(f"'dma_put' writes to @{mem.base.name}, a constant global", inst)
        e.emit(d.put(ldm_ptr, mem_ptr, size, word, *strides))


def _broadcast(e: BodyEmitter, get: C.Expr, reply: int) -> None:
    """A broadcast get as public Sunway code writes it (docs/codegen.md,
    "Broadcast DMA"): all 64 CPEs meet at a barrier, CPE 0 issues the get in
    BCAST_MODE to every row (mask 0xff, a char in athread_get's prototype)
    and waits for it, and a second barrier holds the others until it has
    landed in their LDM. On the SW26010-Pro, swir_rma_bcast (layers_mix.h)
    is called by every CPE between the barriers: CPE 0's DMA, then RMA."""
    syn = e.dialect.barrier()
    e.emit(syn)
    if e.dialect.pro:
        e.emit(get)
    else:
        with e.block() as then:
            e.emit(get)
            e.emit(wait(reply))
        e.emit(C.If(C.Binary("==", e.dialect.cpe_id(), C.Lit("0")), then))
    e.emit(syn)


def reply_word(reply: int) -> C.Expr:
    """``reply[N]``: a DMA reply word of the CPE."""
    return C.index("reply", reply)


def wait(reply: int, times: int = 1) -> C.Expr:
    """Wait for ``times`` completions on a reply word (then reset it)."""
    return C.call("SWIR_WAIT", reply_word(reply), times)


def _address(e: BodyEmitter, acc: Access) -> C.Expr:
    t = acc.base.type
    assert isinstance(t, ShapedType)
    if t.rank == 0:
        return e.var(acc.base)
    return C.Unary("&", e.element(acc))


def _dma_wait(e: BodyEmitter, inst: Instruction) -> None:
    reply = inst.attrs["reply"]
    e.project.note_reply(reply)
    e.emit(wait(reply, attr_or_default(inst, "times")))


# Register communication in the public simd.h's intrinsics (docs/codegen.md,
# "Register communication"): per bus, the send and the receive; a send to
# place 8 goes to all the others of the row or column (swDNN's
# `simd_putr(v, 8)`).
REG_CALLS = {"row": ("simd_putr", "simd_getr"), "col": ("simd_putc", "simd_getc")}
REG_ALL = 8


def _reg(e: BodyEmitter, inst: Instruction) -> None:
    """``reg_send``: the vector loaded from LDM, then sent; ``reg_recv``: the
    vector received, then stored to LDM. Aligned loads and stores where every
    execution's vector starts at a multiple of 4 elements, else loadu / storeu."""
    acc = inst.args[0]
    assert isinstance(acc, Access) and isinstance(acc.base.type, ShapedType)
    if e.dialect.pro:
        raise e.fail(f"'{inst.opname}' is register communication, which the "
                     f"{e.project.opt.target.title} does not have (its CPEs share LDM data by "
                     "RMA); plan the module again without -mesh-broadcast", inst)
    e.project.uses_simd = True
    put, get = REG_CALLS[inst.attrs["bus"]]
    name = e.scope.declare("reg", fallback="reg")
    address = C.Unary("&", e.element(acc))
    aligned = _vector_aligned(acc)
    e.emit(C.Decl(C.Named(vector.VECTOR_TYPE[acc.base.type.element.name]), name))
    if inst.isa(REG_SEND):
        e.emit(C.call("simd_load" if aligned else "simd_loadu", C.Id(name), address))
        e.emit(C.call(put, C.Id(name), inst.attrs.get("to", REG_ALL)))
    else:
        e.emit(C.Assign(C.Id(name), C.call(get, C.Id(name))))
        e.emit(C.call("simd_store" if aligned else "simd_storeu", C.Id(name), address))


def _vector_aligned(acc: Access) -> bool:
    """Whether the element at ``acc`` is at a multiple of 4 elements from its
    LDM buffer's start whatever the subscripts' values (the buffer starts
    32-byte aligned): aligned for a floatv4's 16 bytes or a doublev4's 32."""
    t = acc.base.type
    assert isinstance(t, ShapedType)
    offset = element_offset(acc.indices, t.shape)
    return offset.const % REG_LANES == 0 and all(c % REG_LANES == 0 for _, c in offset.terms)


def _call(e: BodyEmitter, inst: Instruction) -> None:
    app = inst.args[0]
    assert isinstance(app, Apply)
    callee = e.project.function(app.callee, inst)
    e.project.check_writes(callee, app, inst)
    args: list[C.Expr] = [e.var(a) for a in app.args]
    outs = []
    for r in inst.results:
        t = r.type
        if not isinstance(t, ScalarType):
            raise e.fail(f"a call result of type {t} has no C form (results are scalars "
                         "at this stage)", inst)
        outs.append(e.define(r))
    if outs and e.f.kind != "func":
        for r, name in zip(inst.results, outs):
            e.emit(C.Decl(C.Named(scalar.c_type(r.type)), name))  # type: ignore[arg-type]
    args += [C.Unary("&", C.Id(o)) for o in outs]
    e.emit(C.call(e.project.call_name(callee, e.side, inst), *args))


def _spawn(e: BodyEmitter, inst: Instruction) -> None:
    callees, args = [], []
    for app in inst.args:                  # one or more kernels, in order
        assert isinstance(app, Apply)
        callee = e.project.function(app.callee, inst)
        e.project.check_writes(callee, app, inst)
        callees.append(callee)
        args += [e.var(a) for a in app.args]
    name, taken = e.project.spawn_call(callees, inst)
    e.emit(C.call(name, *(args[i] for i in taken)))


def _join(e: BodyEmitter, inst: Instruction) -> None:
    e.emit(C.call("athread_join"))
    if e.project.fault_sites:
        e.emit(C.call("swir_check_faults"))


def _return(e: BodyEmitter, inst: Instruction) -> None:
    for i, v in enumerate(inst.args):
        e.emit(C.Assign(C.Unary("*", C.Id(f"result{i}")), e.var(v)))  # type: ignore[arg-type]
    if e.side == "host" and e.f.kind == "func" or inst.args:
        e.emit(C.Return())


def _br(e: BodyEmitter, inst: Instruction) -> None:
    _jump(e, inst.args[0])  # type: ignore[arg-type]


def _cond_br(e: BodyEmitter, inst: Instruction) -> None:
    c, yes, no = inst.args
    with e.block() as then:
        _jump(e, yes)  # type: ignore[arg-type]
    e.emit(C.If(e.var(c), then))  # type: ignore[arg-type]
    _jump(e, no)  # type: ignore[arg-type]


def _jump(e: BodyEmitter, succ: Successor) -> None:
    """Bind the target's block arguments (all values read before any is
    written: a parallel copy) and go there."""
    targets = [e.name(a) for a in succ.block.args]
    values = [e.name(v) for v in succ.args]
    pairs = [(t, v) for t, v in zip(targets, values) if t != v]
    if len(pairs) == 1:
        e.emit(C.Assign(C.Id(pairs[0][0]), C.Id(pairs[0][1])))
    elif pairs:
        with e.block() as copy:
            for k, (t, v) in enumerate(pairs):
                ct = scalar.c_type(succ.block.args[targets.index(t)].type)  # type: ignore[arg-type]
                e.emit(C.Decl(C.Named(ct, const=True), f"swir_tmp{k}", C.Id(v)))
            for k, (t, _) in enumerate(pairs):
                e.emit(C.Assign(C.Id(t), C.Id(f"swir_tmp{k}")))
        e.emit(copy)
    e.emit(C.Goto(e.labels[id(succ.block)]))


def _copy(e: BodyEmitter, inst: Instruction) -> None:
    raise e.fail(f"'{inst.opname}' reached code generation: at the dma stage copies are "
                 "DMAs (run -insert-dma on the buffered stage)", inst)


def _mpi_allgather(e: BodyEmitter, inst: Instruction) -> None:
    """swir_allgather (main.c, program_ranks.c): this rank's slice, as ``outer``
    runs of the bytes from the gathered axis on, into the whole buffer."""
    part = inst.args[0].type  # type: ignore[union-attr]
    axis = inst.attrs["axis"]
    outer = math.prod(part.shape[:axis])
    run = math.prod(part.shape[axis:]) * part.element.bytes
    e.emit(C.ExprStmt(C.call("swir_allgather", e.var(inst.args[0]), e.var(inst.args[1]),
                             C.as_expr(run), C.as_expr(outer))))  # type: ignore[arg-type]


def _mpi_reduce(e: BodyEmitter, inst: Instruction) -> None:
    """swir_reduce_scatter / swir_allreduce (program_ranks.c): the elements of
    the buffer filled, summed as MPI_FLOAT or MPI_DOUBLE."""
    target = inst.args[1].type  # type: ignore[union-attr]
    mpi_type = {"f32": "MPI_FLOAT", "f64": "MPI_DOUBLE"}[target.element.name]
    fn = _MPI_REDUCTIONS[inst.opdef]
    e.emit(C.ExprStmt(C.call(fn, e.var(inst.args[0]), e.var(inst.args[1]),  # type: ignore
                             C.as_expr(target.num_elements), C.Id(mpi_type),
                             C.as_expr(target.element.bytes))))


# The functions of program_ranks.c that do each reduction.
_MPI_REDUCTIONS = {MPI_REDUCE_SCATTER: "swir_reduce_scatter", MPI_ALLREDUCE: "swir_allreduce"}

_STATEMENTS = {
    CONST: _const, LOAD: _load, STORE: _store, FOR: _loop, PARALLEL: _loop,
    IF: _if, DYN_INDEX: _dyn_index, CPE_ID: _cpe_id, CHUNK: _chunk,
    LDM_ALLOC: _ldm_alloc, DMA_GET: _dma, DMA_PUT: _dma, DMA_BCAST: _dma, DMA_WAIT: _dma_wait,
    CALL: _call, SPAWN: _spawn, JOIN: _join, RETURN: _return, BR: _br,
    COND_BR: _cond_br, COPY_IN: _copy, COPY_OUT: _copy, MPI_ALLGATHER: _mpi_allgather,
    MPI_REDUCE_SCATTER: _mpi_reduce, MPI_ALLREDUCE: _mpi_reduce, REG_SEND: _reg, REG_RECV: _reg,
}
