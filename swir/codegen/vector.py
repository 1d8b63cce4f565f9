"""Vector micro-kernels: CPE loop nests written with simd.h's vector types,
the target's (:class:`swir.analysis.vector_plan.VectorUnit`): floatv4 /
doublev4 on the SW26010, floatv8 / doublev8 on the SW26010-Pro.

Which nests, and the block each gets, is decided by
:mod:`swir.analysis.vector_plan` (the cost model charges the same plan); this
module writes the C (docs/codegen.md, "Vector micro-kernels"):

- a **reduce** plan: the loops of P other than m and v as they were; m in
  blocks of M rows, then single rows; v in blocks of U vectors, then single
  vectors, then a tail block of one vector for the last columns. A
  block's M x U accumulators start at zero, take one fused multiply-add per
  element per step of the reduction loops R (which keep their order), and
  are added to Y after R (blocked summation);
- a **map** plan: the innermost loop a vector's lanes at a time, then the
  last columns as the vector ending at the bound when the trip count is known
  (only their lanes stored), else the scalar body.

A value the same in every lane is splat with ``simd_loade`` from its scalar
in memory, as public CPE code splats (swCaffe's sw_slave_scale.c and GEMM
kernels); ``simd_set_floatv4`` / ``simd_set_doublev4`` (a scalar store per
lane and a vector load in the public header; ``simd_set_floatv8`` /
``simd_set_doublev8`` on the Pro) only where the lanes differ. ``max``,
``min`` and ``relu`` are selects on compares (:func:`select_form`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from swir.analysis.vector_plan import (
    VECTOR_BINARY,
    VECTOR_SELECTS,
    VECTOR_UNARY,
    Plan,
    VectorUnit,
    access_kind,
    access_of,
    producer,
    trip_count,
    uses,
)
from swir.codegen import c_ast as C
from swir.codegen import scalar
from swir.codegen.unit import Emitter
from swir.ir.affine import Expr
from swir.ir.core import Access, Instruction, Value
from swir.ir.types import LDMType, ScalarType
from swir.ops import ADD, CAST, CONST, LOAD, MAX, MIN, RELU, STORE
from swir.ops.loop import REG_LANES

# The vector types of register communication (reg_send / reg_recv: the
# SW26010's, whose vectors have REG_LANES lanes).
VECTOR_TYPE = {t: VectorUnit(REG_LANES).type_name(t) for t in ("f32", "f64")}
# A reduce plan's accumulators start at its op's identity.
IDENTITY = {ADD: 0, MAX: -math.inf, MIN: math.inf}


def select_form(op: object, a: C.Expr, b: C.Expr) -> C.Expr:
    """swir's ``max(a, b)`` / ``min(a, b)`` (``relu(a)``: ``max(a, 0)``) on
    vectors, exactly as the scalar C (swir/codegen/scalar.py): ``a`` where
    ``a > b`` (``a < b``) or ``a`` is NaN, else ``b``. ``simd_vfcmplt(x, y)``
    is 2.0 where x < y and 0.0 elsewhere, an unordered pair included;
    ``simd_vfcmpun(a, a)`` is 2.0 where a is NaN; ``simd_vseleq(c, y, z)``
    is y where c is 0.0, else z (docs/codegen.md, "Vector code (simd.h)")."""
    assert op in (MAX, MIN)
    ordered = C.call("simd_vfcmplt", b, a) if op is MAX else C.call("simd_vfcmplt", a, b)
    pick = C.call("simd_vseleq", ordered, b, a)
    return C.call("simd_vseleq", C.call("simd_vfcmpun", a, a), pick, a)


# ---------------------------------------------------------------------------
# Emission
# ---------------------------------------------------------------------------

def emit(e: Emitter, p: Plan) -> None:
    """The nest's C, in place of the scalar translation."""
    e.project.uses_simd = True
    with e.block() as nest:
        writer = _Writer(e, p)
        writer.hoist()
        outer = [lp for lp in p.loops if p.iv(lp) is not p.v and p.iv(lp) is not p.m
                 and (p.kind == "map" or p.in_store(p.iv(lp)))]
        _loops(e, outer, writer.kernel)
    e.emit(C.Comment(f"vector {'micro-kernel' if p.kind == 'reduce' else 'loop'}: "
                     f"{_describe(p)}"))
    e.emit(nest)


def _describe(p: Plan) -> str:
    lanes = f"{p.lanes} lanes of %{p.v.name}"
    if p.kind == "map":
        return lanes
    rows = f"{p.M} x " if p.m is not None else ""
    block = f"{rows}{p.U} {p.unit.type_name(p.element.name)} accumulators"
    return block + (f" (%{p.m.name} x {lanes})" if p.m is not None else f" ({lanes})")


def _runs(trip: int, steps: list[int], step: int) -> bool:
    """Whether the loop taking ``step`` at a time runs, when loops taking
    each of ``steps`` in turn (largest first) share ``trip`` iterations."""
    for n in steps:
        if n == step:
            return trip >= n
        trip %= n
    raise ValueError(step)


def _loops(e: Emitter, loops: list[Instruction], inner: Callable[[], None]) -> None:
    """``loops`` as C for loops (their own bounds and names), ``inner`` inside."""
    if not loops:
        inner()
        return
    lp = loops[0]
    lo, hi = e.expr(lp.args[0]), e.expr(lp.args[1])  # type: ignore[arg-type]
    with e.scoped():
        iv = C.Id(e.define(lp.regions[0].blocks[0].args[0], "i"))
        with e.block() as body:
            _loops(e, loops[1:], inner)
        e.emit(C.For(C.Decl(C.LONG, iv.name, lo), C.Binary("<", iv, hi), C.Postfix(iv), body))


class _Values:
    """The vectors of one planned nest: names, splats, the vector value of
    each body instruction, loads and stores."""

    def __init__(self, e: Emitter, p: Plan) -> None:
        self.e, self.p = e, p
        self.unit = p.unit                  # the target's vectors
        self.width = p.lanes                # lanes per vector
        self.vtype = self.vector_type(p.element)
        self.splat_of: dict[int, str] = {}  # id(outside value or const) -> its broadcast
        self.zero: dict[str, str] = {}      # relu's vector of zeros per type, if hoisted
        self.map_rest = 0                   # in a map plan's tail: the columns stored
        # the current block's vectors: (id(body value), row, vector) -> C name
        self.values: dict[tuple[int, int, int], C.Expr] = {}
        # in a tail block: its valid lanes (None: known at run time) and the
        # run-time flags of lanes 1 and 2
        self.valid: tuple[int | None, dict[int, C.Id]] | None = None
        # in a reduce plan's final block: the vector (by its place in the
        # block) that is the columns ending at the bound, its first column
        # and how many of its lanes are new columns
        self.shifted: dict[int, tuple[int, int]] = {}

    # -- names -------------------------------------------------------------
    def vector_type(self, t: object) -> C.Named:
        """The C vector type of element type ``t``."""
        return C.Named(self.unit.type_name(t.name))  # type: ignore[attr-defined]

    def fresh(self, name: str) -> str:
        return self.e.scope.declare(name, fallback="v")

    def splat(self, name: str, element: C.Expr, t: ScalarType | None = None) -> None:
        """``name``, a vector of ``t`` (the plan's element type if None),
        with the scalar at ``element`` (an lvalue) in every lane."""
        self.e.emit(C.Decl(self.vector_type(t or self.p.element), name))
        self.e.emit(C.ExprStmt(C.call("simd_loade", C.Id(name), C.Unary("&", element))))

    def broadcast(self, name: str, x: C.Expr, t: ScalarType | None = None) -> None:
        """``name`` with the value ``x`` in every lane: through a scalar of
        its own (simd_loade reads memory)."""
        t = t or self.p.element
        s = self.fresh(f"{name}_s")
        self.e.emit(C.Decl(C.Named(scalar.c_type(t)), s, x))
        self.splat(name, C.Id(s), t)

    def lane_valid(self, lane: int) -> C.Expr | bool:
        """Whether the tail block's ``lane`` holds a column: True, False or
        the C flag."""
        assert self.valid is not None
        rest, flags = self.valid
        if lane == 0 or rest is not None:
            return lane < (rest or 1)
        return flags.get(lane, False)

    # -- values --------------------------------------------------------------
    def depends(self, inst: Instruction) -> tuple[bool, bool]:
        """Whether ``inst``'s value differs along m, along v."""
        p = self.p
        if inst.isa(LOAD):
            ix = access_of(inst).indices
            return (p.m is not None and any(uses(i, p.m) for i in ix),  # type: ignore[arg-type]
                    any(uses(i, p.v) for i in ix))  # type: ignore[arg-type]
        dm = dv = False
        for a in inst.args:
            src = producer(p.body, a)
            if src is not None and not src.isa(CONST):
                m, v = self.depends(src)
                dm, dv = dm or m, dv or v
        return dm, dv

    def operand(self, a: object, i: int, u: int) -> C.Expr:
        if id(a) in self.splat_of:
            return C.Id(self.splat_of[id(a)])
        src = producer(self.p.body, a)
        assert src is not None
        dm, dv = self.depends(src)
        return self.values[(id(a), i if dm else 0, u if dv else 0)]

    def vector_op(self, inst: Instruction, rows: int, width: int) -> None:
        dm, dv = self.depends(inst)
        r = inst.results[0]
        for i in range(rows if dm else 1):
            for u in range(width if dv else 1):
                what = self.e.name(access_of(inst).base) if inst.isa(LOAD) else r.name
                name = self.fresh(f"{what or 't'}_v")
                self.values[(id(r), i, u)] = C.Id(name)
                if inst.isa(LOAD):
                    self._load(name, access_of(inst), i, u)
                    continue
                args = [self.operand(a, i, u) for a in inst.args]
                if inst.isa(CAST):
                    self._cast(name, inst, args[0])
                    continue
                self.e.emit(C.Decl(self.vector_type(r.type), name, self._value(inst, args)))

    def _cast(self, name: str, inst: Instruction, x: C.Expr) -> None:
        """``name``, the vector ``x`` converted between f32 and f64 lane by
        lane (the public simd.h has no conversion): stored to scalars and
        set from them, as the scalar C casts."""
        src, dst = inst.args[0].type, inst.results[0].type  # type: ignore[union-attr]
        lanes = self.fresh(f"{name}_lanes")
        self.e.emit(C.Decl(C.array(C.Named(scalar.c_type(src)), [self.width]), lanes))
        self.e.emit(C.ExprStmt(C.call("simd_storeu", x, C.Id(lanes))))
        each = [C.Cast(C.Named(scalar.c_type(dst)), C.index(lanes, k))
                for k in range(self.width)]
        self.e.emit(C.Decl(self.vector_type(dst), name,
                           C.call(self.unit.set_name(dst.name), *each)))

    def _value(self, inst: Instruction, args: list[C.Expr]) -> C.Expr:
        op = inst.opdef
        if op in VECTOR_UNARY:
            return C.Unary(VECTOR_UNARY[op], args[0])
        if op in VECTOR_SELECTS:
            zero = self.zero.get(inst.results[0].type.name, "")  # type: ignore[union-attr]
            return select_form(MAX, args[0], C.Id(zero)) if op is RELU \
                else select_form(op, args[0], args[1])
        return C.Binary(VECTOR_BINARY[op], args[0], args[1])

    def _load(self, name: str, acc: Access, i: int, u: int) -> None:
        e = self.e
        kind = access_kind(acc, self.p.v)
        t = acc.base.type.element  # type: ignore[union-attr]
        if kind == "invariant":
            self.splat(name, e.element(self._shift(acc, i, u)), t)
        elif kind == "contig" and self.valid is None:
            e.emit(C.Decl(self.vector_type(t), name))
            e.emit(self.vector_load(name, acc, i, u))
        else:                     # lane by lane: a gather, or a tail block's
            lanes = self.lane_elements(acc, i, u)
            if all(x.text() == lanes[0].text() for x in lanes):
                self.splat(name, lanes[0], t)   # a 1-column tail: one element
                return
            e.emit(C.Decl(self.vector_type(t), name, C.call(self.unit.set_name(t.name), *lanes)))

    def lane_elements(self, acc: Access, i: int, u: int) -> list[C.Expr]:
        """The elements (one per lane) of ``acc``'s vector; in a tail block, the valid
        columns' and the first column's in the lanes past them."""
        elements = [self.e.element(self._shift(acc, i, u, lane)) for lane in range(self.width)]
        if self.valid is None:
            return elements
        first, out = elements[0], []
        for lane, here in enumerate(elements):
            valid = self.lane_valid(lane)
            out.append(C.Ternary(valid, here, first) if isinstance(valid, C.Expr)
                       else here if valid else first)
        return out

    def _shift(self, acc: Access, i: int, u: int, lane: int = 0) -> Access:
        """``acc`` at row ``m + i`` and lane ``v + 4u + lane``."""
        p = self.p
        mapping: dict[object, Expr] = {p.v: Expr.of(p.v) + (self.width * u + lane)}
        if u in self.shifted:
            mapping[p.v] = Expr.of(self.shifted[u][0] + lane)
        if p.m is not None and i:
            mapping[p.m] = Expr.of(p.m) + i
        return Access(acc.base, tuple(ix.substitute(mapping)  # type: ignore[union-attr]
                                      for ix in acc.indices))

    def aligned(self, acc: Access) -> bool:
        """Whether every vector the block reads or writes at ``acc`` starts
        at a multiple of the lanes in elements, which is the alignment an
        aligned access needs (:meth:`VectorUnit.align_bytes`: 16 bytes for a
        floatv4, 32 for a doublev4 or a floatv8, 64 for a doublev8), and
        the buffer's start is so aligned: LDM buffers start at the target's
        dma_align (swir/codegen/cpe.py), 32 bytes, so a doublev8 is always
        accessed unaligned. v is the loop's lower bound plus multiples of
        the lanes."""
        p = self.p
        t = acc.base.type
        assert isinstance(t, LDMType)
        assert p.target is not None
        if self.unit.align_bytes(t.element.bytes) > p.target.dma_align:
            return False            # the buffer's start may not be aligned enough
        if self.map_rest:
            return False            # a map tail starts a vector before the bound
        lo = Expr.of(p.loop_of(p.v).args[0])
        if not lo.is_constant or lo.const % self.width:
            return False
        stride, offset = 1, Expr.of(0)
        for ix, n in zip(reversed(acc.indices), reversed(t.shape)):
            offset = offset + Expr.of(ix).scale(stride)  # type: ignore[arg-type]
            stride *= n
        return offset.const % self.width == 0 and all(
            c % self.width == 0 for a, c in offset.terms if a is not p.v)

    def vector_load(self, name: str, acc: Access, i: int, u: int) -> C.Stmt:
        fn = "simd_load" if self.aligned(acc) and u not in self.shifted else "simd_loadu"
        return C.ExprStmt(C.call(fn, C.Id(name),
                                 C.Unary("&", self.e.element(self._shift(acc, i, u)))))

    def vector_store(self, value: C.Expr, acc: Access, i: int, u: int) -> C.Stmt:
        fn = "simd_store" if self.aligned(acc) and u not in self.shifted else "simd_storeu"
        return C.ExprStmt(C.call(fn, value, C.Unary("&", self.e.element(self._shift(acc, i, u)))))


class _Writer(_Values):
    """The C of one planned nest: its loops, blocks and tails."""

    def hoist(self) -> None:
        """Broadcasts of the constants and of the values defined outside the
        nest, once, before it (and of 0 for relu)."""
        body = self.p.body
        defined = {id(r) for i in body for r in i.results}
        for inst in body:
            if inst.isa(CONST):
                self.e.instruction(inst)
                self.splat_of[id(inst.results[0])] = self._hoisted(inst.results[0])
            for a in inst.args:
                if isinstance(a, Value) and id(a) not in defined and id(a) not in self.splat_of:
                    self.splat_of[id(a)] = self._hoisted(a)
        for t in dict.fromkeys(i.results[0].type for i in body if i.isa(RELU)):
            assert isinstance(t, ScalarType)
            self.zero[t.name] = self.fresh("vzero")
            self.broadcast(self.zero[t.name], scalar.literal(0, t), t)

    def _hoisted(self, v: Value) -> str:
        name = self.fresh(f"{v.name or 'c'}_v")
        self.broadcast(name, self.e.var(v), v.type)  # type: ignore[arg-type]
        return name

    def hoist_rows(self) -> None:
        """A mixed map plan's instructions that do not move with v, in
        scalar C once per row before the vector loop; their values the
        vector code reads, splat."""
        body, hoisted = self.p.body, self.p.hoisted
        for inst in body:
            if id(inst) in hoisted:
                self.e.instruction(inst)
        for inst in body:
            if id(inst) in hoisted or inst.isa(CONST):
                continue
            for a in inst.args:
                src = producer(body, a)
                if src is not None and id(src) in hoisted and id(a) not in self.splat_of:
                    self.splat_of[id(a)] = self._hoisted(a)  # type: ignore[arg-type]

    # -- the kernel ---------------------------------------------------------
    def kernel(self) -> None:
        p, e = self.p, self.e
        if p.kind == "map":
            self.hoist_rows()
            self.lanes(1, [1])
            return
        if p.m is None:
            self.lanes(1, [p.U, 1])
            return
        loop = p.loop_of(p.m)
        m = C.Id(e.define(p.m, "m"))
        hi = e.expr(loop.args[1])  # type: ignore[arg-type]
        e.emit(C.Decl(C.LONG, m.name, e.expr(loop.args[0])))  # type: ignore[arg-type]
        trip = trip_count(loop)
        for rows in (p.M, 1):       # blocks of M rows, then the rows left one by one
            if trip is not None and not _runs(trip, [p.M, 1], rows):
                continue            # never runs (and GCC may warn about its body)
            with e.block() as blk:
                self.lanes(rows, [p.U, 1])
            if rows > 1:
                cond: C.Expr = C.Binary("<=", C.Binary("+", m, C.Lit(str(rows))), hi)
                step: C.Expr = C.Assign(m, C.Lit(str(rows)), "+=")
            else:
                cond, step = C.Binary("<", m, hi), C.Postfix(m)
            e.emit(C.For(C.Lit(""), cond, step, blk))

    def lanes(self, rows: int, widths: list[int]) -> None:
        """v in steps of ``widths[k]`` vectors while whole ones remain, then
        the last columns: a reduce plan's tail block, a map plan's scalar body."""
        p, e = self.p, self.e
        loop = p.loop_of(p.v)
        hi = e.expr(loop.args[1])  # type: ignore[arg-type]
        with e.block() as outer:
            v = C.Id(e.define(p.v, "v"))
            e.emit(C.Decl(C.LONG, v.name, e.expr(loop.args[0])))  # type: ignore[arg-type]
            trip = trip_count(loop)
            steps = [] if p.kind == "reduce" and trip is not None else \
                [w * self.width for w in dict.fromkeys(widths)] + [1]
            if not steps:
                self.known_columns(rows, v, hi, trip)  # type: ignore[arg-type]
            for n in steps:
                if trip is not None and not _runs(trip, steps, n):
                    continue        # never runs (and GCC may warn about its body)
                if n == 1 and p.kind == "reduce":
                    self.tail(rows, v, hi, None if trip is None else trip % self.width)
                    continue
                if n == 1 and trip is not None:
                    self.map_tail(v, hi, trip % self.width)
                    continue
                with e.block() as blk:
                    if n == 1:      # a map plan's scalar body, for one v
                        e.region(p.loops[-1].regions[0].blocks[0])
                    elif p.kind == "map":
                        self.map_block()
                    else:
                        self._reduce(rows, n // self.width)
                if n == 1:
                    e.emit(C.For(C.Lit(""), C.Binary("<", v, hi), C.Postfix(v), blk))
                else:
                    e.emit(C.For(C.Lit(""),
                                 C.Binary("<=", C.Binary("+", v, C.Lit(str(n))), hi),
                                 C.Assign(v, C.Lit(str(n)), "+="), blk))
        e.emit(outer)

    def known_columns(self, rows: int, v: C.Id, hi: C.Expr, trip: int) -> None:
        """A reduce plan's columns when their count is known: blocks of U
        vectors, then one block of the vectors left, the last of them, when
        the count is not a multiple of the lanes, the vector of the columns
        ending at the bound (docs/codegen.md, "Remainders")."""
        p, e = self.p, self.e
        if trip < self.width:       # fewer columns than lanes: one tail block
            self.tail(rows, v, hi, trip)
            return
        whole, rest = divmod(trip, self.width)
        if whole >= p.U:
            with e.block() as blk:
                self._reduce(rows, p.U)
            n = p.U * self.width
            e.emit(C.For(C.Lit(""), C.Binary("<=", C.Binary("+", v, C.Lit(str(n))), hi),
                         C.Assign(v, C.Lit(str(n)), "+="), blk))
        left = whole % p.U
        if not left and not rest:
            return
        if rest:
            bound = Expr.of(p.loop_of(p.v).args[1])    # constant: the trip count is known
            self.shifted = {left: (bound.const - self.width, rest)}
            e.emit(C.Comment(f"the last {left * self.width + rest} columns: "
                             + (f"{left} vector{'s' if left > 1 else ''} and " if left else "")
                             + f"the {self.width} ending at the bound, "
                             f"{rest} lane{'s' if rest > 1 else ''} new"))
        with e.block() as blk:
            self._reduce(rows, left + (rest > 0))
        self.shifted = {}
        e.emit(blk)

    def tail(self, rows: int, v: C.Id, hi: C.Expr, rest: int | None) -> None:
        """The last columns (fewer than the lanes) of a reduce plan: one
        block of ``rows`` x 1
        vector whose lanes past the end repeat the first column (so they
        read only elements the nest reads, and compute nothing lane 0 does
        not); only the valid lanes reach Y. ``rest``: how many are valid, or
        None when the loop's bound is known only at run time."""
        with self.e.block() as blk:
            flags = {}
            if rest is None:    # whether lanes 1 to lanes - 2 hold columns, once, before R
                for lane in range(1, self.width - 1):
                    flag = self.fresh(f"lane{lane}")
                    self.e.emit(C.Decl(C.Named("int", const=True), flag,
                                       C.Binary("<", C.Binary("+", v, C.Lit(str(lane))), hi)))
                    flags[lane] = C.Id(flag)
            self.valid = (rest, flags)
            self._reduce(rows, 1)
            self.valid = None
        what = {None: f"1 to {self.width - 1} columns", 1: "column"}.get(rest, f"{rest} columns")
        self.e.emit(C.Comment(f"the last {what}, lanes past them repeating the first"))
        self.e.emit(blk if rest else C.If(C.Binary("<", v, hi), blk))

    def map_tail(self, v: C.Id, hi: C.Expr, rest: int) -> None:
        """The last ``rest`` (fewer than the lanes) columns of a map plan
        whose trip count (the lanes or more) is known: the vector of the
        columns ending at the bound, of which only the last ``rest`` lanes are stored (the others
        were stored by the vector loop; computing them again reads only
        elements the nest reads, and an in-place body has already
        overwritten them, so they are dropped)."""
        with self.e.block() as blk:
            self.e.emit(C.ExprStmt(C.Assign(v, C.Binary("-", hi, C.Lit(str(self.width))))))
            self.map_rest = rest
            self.map_block()
            self.map_rest = 0
        self.e.emit(C.Comment(f"the last {rest} column{'s' if rest > 1 else ''}: "
                              f"the {self.width} ending at the bound, "
                              f"{rest} lane{'s' if rest > 1 else ''} stored"))
        self.e.emit(blk)

    def _store_rest(self, value: C.Expr, acc: Access) -> None:
        """Of ``value``'s lanes, the last ``map_rest`` to their elements."""
        e = self.e
        lanes = self.fresh("lanes")
        e.emit(C.Decl(C.array(C.Named(scalar.c_type(self.p.element)), [self.width]), lanes))
        e.emit(C.ExprStmt(C.call("simd_storeu", value, C.Id(lanes))))
        for lane in range(self.width - self.map_rest, self.width):
            e.emit(C.ExprStmt(C.Assign(e.element(self._shift(acc, 0, 0, lane)),
                                       C.index(lanes, lane))))

    # -- one block -------------------------------------------------------------
    def _reduce(self, rows: int, width: int) -> None:
        """One block: accumulators from the identity (0; -inf for max, +inf
        for min) over the whole of R, then combined with Y once. Blocked
        summation: an output gathers its terms in R-sized partial sums, so
        its rounding error grows with R's length plus the number of
        reduction tiles, not with their product. A max (min) gives what the
        scalar loop gives: the largest, the later of equals in the body's
        operand order, the first NaN."""
        p, e = self.p, self.e
        assert p.store is not None and p.acc_load is not None
        target = access_of(p.store)
        op = self.combine.opdef
        zero = self.fresh({MAX: "vlowest", MIN: "vhighest"}.get(op, "vzero"))  # type: ignore[call-overload]
        self.broadcast(zero, scalar.literal(IDENTITY[op], p.element))  # type: ignore[index]
        accs = {}
        for i in range(rows):
            for u in range(width):
                name = self.fresh(f"acc{i}_{u}" if rows > 1 or width > 1 else "acc")
                accs[(i, u)] = name
                e.emit(C.Decl(self.vtype, name, C.Id(zero)))
        inner = [lp for lp in p.loops if not p.in_store(p.iv(lp))]
        _loops(e, inner, lambda: self._update(accs, rows, width))
        for (i, u), name in accs.items():
            if self.valid is not None or u in self.shifted:
                self._add_lanes(name, target, i, u)
                continue
            y = self.fresh("y")
            e.emit(C.Decl(self.vtype, y))
            e.emit(self.vector_load(y, target, i, u))
            e.emit(self.vector_store(self.combined(C.Id(y), C.Id(name)), target, i, u))

    @property
    def combine(self) -> Instruction:
        """The reduce plan's accumulating op (add, max or min)."""
        assert self.p.store is not None
        op = producer(self.p.body, self.p.store.args[0])
        assert op is not None
        return op

    def in_order(self, y: C.Expr, acc: C.Expr) -> tuple[C.Expr, C.Expr]:
        """Y's value and an accumulator's in the body's operand order (Y
        where it loads Y)."""
        assert self.p.acc_load is not None
        first = self.combine.args[0] is self.p.acc_load.results[0]
        return (y, acc) if first else (acc, y)

    def combined(self, y: C.Expr, acc: C.Expr) -> C.Expr:
        """Y's vector combined with an accumulator."""
        a, b = self.in_order(y, acc)
        op = self.combine
        return C.Binary("+", a, b) if op.isa(ADD) else select_form(op.opdef, a, b)

    def _add_lanes(self, acc: str, target: Access, i: int, u: int = 0) -> None:
        """Y combined with the tail block's valid lanes of ``acc`` (or the
        new columns of the vector ending at the bound), one by one (``+=``,
        or the scalar max / min)."""
        e = self.e
        lanes = self.fresh(f"{acc}_lanes")
        e.emit(C.Decl(C.array(C.Named(scalar.c_type(self.p.element)), [self.width]), lanes))
        e.emit(C.ExprStmt(C.call("simd_storeu", C.Id(acc), C.Id(lanes))))
        for lane in range(self.width):
            valid = self.lane_valid(lane) if u not in self.shifted else \
                lane >= self.width - self.shifted[u][1]
            if valid is False:
                continue
            y = e.element(self._shift(target, i, u, lane))
            op, t = self.combine, self.p.element
            if op.isa(ADD):
                add = C.ExprStmt(C.Assign(y, C.index(lanes, lane), "+="))
            else:
                pair = list(self.in_order(y, C.index(lanes, lane)))
                add = C.ExprStmt(C.Assign(y, scalar.node(op.opdef, [t, t], pair, t, {})))
            e.emit(add if valid is True else C.If(valid, C.Block([add])))

    def _update(self, accs: dict, rows: int, width: int) -> None:
        p = self.p
        assert p.store is not None and p.acc_load is not None
        add = producer(p.body, p.store.args[0])
        assert add is not None
        skip = {id(p.store), id(p.acc_load), id(add)}
        if p.fused is not None:
            skip.add(id(p.fused))
        self.values = {}
        for inst in p.body:
            if id(inst) in skip or inst.isa(CONST):
                continue
            self.vector_op(inst, rows, width)
        acc_value = p.acc_load.results[0]
        for (i, u), name in accs.items():
            acc = C.Id(name)
            if p.fused is not None:
                a, b = (self.operand(x, i, u) for x in p.fused.args)
                new: C.Expr = C.call(self.unit.fma_name(p.element.name), a, b, acc)
            else:
                x, y = (acc if a is acc_value else self.operand(a, i, u) for a in add.args)
                new = C.Binary("+", x, y) if add.isa(ADD) else select_form(add.opdef, x, y)
            self.e.emit(C.Assign(acc, new))

    def map_block(self) -> None:
        self.values = {}
        for inst in self.p.body:
            if id(inst) in self.p.hoisted:
                continue
            if inst.isa(STORE) and self.map_rest:
                self._store_rest(self.operand(inst.args[0], 0, 0), access_of(inst))
            elif inst.isa(STORE):
                self.e.emit(self.vector_store(self.operand(inst.args[0], 0, 0),
                                              access_of(inst), 0, 0))
            elif not inst.isa(CONST):
                self.vector_op(inst, 1, 1)
