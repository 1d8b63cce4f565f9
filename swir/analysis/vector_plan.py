"""Which CPE loop nests become vector micro-kernels, and how: the plan
swir-cg's code generator writes (swir/codegen/vector.py) and the cost model
charges (swir/costmodel/traffic.py, "compute"). One decision serves both, so
the modeled compute time is that of the code written.

Two shapes of perfect nest (loops directly inside loops, a straight-line body
of loads, element-wise arithmetic and stores on the kernel's own LDM buffers,
in one float type) are vectorised; docs/codegen.md, "Vector micro-kernels",
says what each becomes:

- **reduce**: one store ``Y[s] = Y[s] + e`` (or ``max`` / ``min`` for ``+``:
  max pooling), each subscript of ``s`` one loop of the nest (P); the other
  loops (R) reduce. v (the last subscript's loop)
  gives the lanes and U vectors, m (another loop of P whose iterations
  reuse a load) is unrolled and jammed M times.
- **map**: the innermost loop, a vector's lanes at a time, every access
  contiguous in it or independent of it. A map body in f32 and f64 (a batch
  norm epilogue: loads cast to f64, the result cast back) is one too when
  what moves with v has vector forms (casts included, lane by lane through
  memory); what does not (the channel's scale: its loads, casts, sqrt, div)
  is computed once per row in scalar code before the vector loop.

The lanes are the target's (:class:`VectorUnit`): 4 on the SW26010
(floatv4 / doublev4), 8 on the SW26010-Pro (floatv8 / doublev8).

Ops with an exact vector form are ``add``, ``sub``, ``mul``, ``div`` and ``neg``
(``+ - * /`` on the vector types), and ``max``, ``min`` and ``relu`` as selects
on compares (the public SW26010 simd.h has no vector max: swir/codegen/vector.py,
``select_form``, writes swir's NaN-propagating max from ``simd_vfcmplt``,
``simd_vfcmpun`` and ``simd_vseleq``, four vector instructions).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import lru_cache

from swir.ir.affine import Compound, Expr
from swir.ir.core import Access, Instruction, Region, Result, Value
from swir.ir.module_attrs import module_target
from swir.ir.types import LDMType, ScalarType, ShapedType
from swir.ops import (ADD, CAST, CONST, DIV, FOR, LDM_ALLOC, LOAD, MAX, MIN, MUL, NEG, RELU, STORE,
                      SUB)
from swir.ops.registry import FLOP
from swir.ops.util import attr_or_default
from swir.target import Target, default_target

VECTOR_TYPES = ("f32", "f64")
# The ops a vector body may compute, with their C operators.
VECTOR_BINARY = {ADD: "+", SUB: "-", MUL: "*", DIV: "/"}
VECTOR_UNARY = {NEG: "-"}
# The ops written as selects on compares, with the vector instructions each
# takes (a compare, a select, the NaN test and its select).
VECTOR_SELECTS = {MAX: 4, MIN: 4, RELU: 4}
VECTOR_OPS = (*VECTOR_BINARY, *VECTOR_UNARY, *VECTOR_SELECTS)
# The ops a reduce plan accumulates with: Y[s] = op(Y[s], e).
REDUCTIONS = (ADD, MAX, MIN)
# Bits of the vector register one lane takes: a doublev4 is 4 doubles in the
# SW26010's 256 bits, and its floatv4 keeps each float in a 64-bit slot too
# (sunway.md, "SIMD"); the Pro's 512 bits hold a doublev8 or a floatv8
# (SYSU-SCC/swops slave.c; heptagonhust/CPC2023-Preliminary
# vector/vector_slave.c; docs/codegen.md, "Vector code (simd.h)").
LANE_BITS = 64


@dataclass(frozen=True)
class VectorUnit:
    """The CPE's vectors as swir's C writes them: lanes per vector (f32 and
    f64 alike), the C names of the types and of their intrinsics, and the
    alignment an aligned access needs. Derived from the target's register
    width (:func:`vector_unit`): the SW26010's floatv4 / doublev4, the Pro's
    floatv8 / doublev8."""
    lanes: int

    def type_name(self, element: str) -> str:
        """``floatv4`` / ``doublev4`` (``floatv8`` / ``doublev8``)."""
        return {"f32": "float", "f64": "double"}[element] + f"v{self.lanes}"

    def set_name(self, element: str) -> str:
        """The intrinsic setting a vector from its lanes, lane 0 first."""
        return f"simd_set_{self.type_name(element)}"

    def fma_name(self, element: str) -> str:
        """The fused multiply-add a*b+c (the same name for every width:
        heptagonhust/CPC2023-Preliminary calls simd_vmad on doublev8)."""
        return {"f32": "simd_vmas", "f64": "simd_vmad"}[element]

    def align_bytes(self, element_bytes: int) -> int:
        """The alignment an aligned load or store (simd_load / simd_store)
        needs: the vector's own size in memory (16 bytes for a floatv4, 32
        for a doublev4 or a floatv8, 64 for a doublev8; an assumption for
        the Pro: docs/codegen.md, "Vector code (simd.h)")."""
        return self.lanes * element_bytes

    @property
    def set_memory(self) -> int:
        """Memory operations of setting a vector from lanes (simd_set_*: a
        scalar store per lane to a union and a vector load in the public
        header), besides the loads of the lanes themselves: a gathered
        input's cost."""
        return self.lanes + 1

    @property
    def cast_memory(self) -> int:
        """Memory operations of a vector cast between f32 and f64 (the
        public simd.h has no conversion): the vector stored to scalars, a
        scalar load per lane, and simd_set_*'s stores and vector load."""
        return 1 + self.lanes + self.set_memory


def vector_unit(target: Target | None = None) -> VectorUnit:
    """The vectors of ``target`` (the default target's if None)."""
    return _vector_unit(target or default_target())


@lru_cache(maxsize=None)
def _vector_unit(target: Target) -> VectorUnit:
    """Kept: the plan search asks for every block it costs."""
    return VectorUnit(target.vector_bits // LANE_BITS)


def vector_instructions(inst: Instruction) -> int:
    """The vector instructions one vector op of the body issues."""
    return VECTOR_SELECTS.get(inst.opdef, 1)  # type: ignore[call-overload]
# The fewest columns (v's iterations) a reduce plan takes: fewer stay scalar,
# as they always have on the SW26010 (4: its vector; swir's choice). On a
# wider target (the Pro's 8 lanes) 4 to 7 columns are one tail block of
# gathered lanes, which still beats the scalar nest's chain through Y.
REDUCE_MIN_COLUMNS = 4
# Registers a block may hold live: the CPE's 32 vector registers less four for
# addresses the compiler may keep in vector registers and spills of the
# remainder code (target.vector_registers).
SPARE_REGISTERS = 4


@dataclass
class Plan:
    """How one nest is written with vectors."""
    kind: str                              # "reduce" or "map"
    loops: list[Instruction]               # the nest, outermost first (none: a tile's plan)
    element: ScalarType
    ivs: list[Value]                       # the nest's induction variables, outermost first
    trips: list[int | None]                # their most iterations (None: unknown)
    v: Value                               # the vector loop's induction variable
    m: Value | None = None                 # the unrolled-and-jammed loop (reduce)
    M: int = 1                             # rows of m per block
    U: int = 1                             # vectors of v per block
    store: Instruction | None = None       # reduce: the accumulating store
    acc_load: Instruction | None = None    # reduce: its load of the accumulator
    fused: Instruction | None = None       # reduce: the mul the add absorbs into an FMA
    body: list[Instruction] = field(default_factory=list)
    # What does not depend on the trip counts, found once for the plans of
    # one caller that asks again with other trips (tile_plan's memo).
    memo: dict = field(default_factory=dict, repr=False)
    # The machine whose vector registers the block must fit (the module's,
    # or the one the LDM plan search plans for).
    target: Target | None = field(default=None, repr=False)
    # A map plan of a body in f32 and f64: the instructions that do not move
    # with v, computed once per row in scalar code before the vector loop.
    mixed: bool = False
    hoisted: frozenset[int] = frozenset()

    @property
    def unit(self) -> VectorUnit:
        """The vectors the nest is written with: its target's."""
        return vector_unit(self.target)

    @property
    def lanes(self) -> int:
        return self.unit.lanes

    def iv(self, loop: Instruction) -> Value:
        return loop.regions[0].blocks[0].args[0]

    def most(self, iv: Value) -> int | None:
        """The most iterations of ``iv``'s loop, if known."""
        return next(t for v, t in zip(self.ivs, self.trips) if v is iv)

    @property
    def columns(self) -> int:
        """The vector loop's most iterations (64, a full tile loop's, when
        not known)."""
        return self.most(self.v) or 64

    def in_store(self, iv: Value) -> bool:
        """Whether ``iv`` is a parallel loop of a reduce plan (a subscript of
        its store); the others reduce."""
        assert self.store is not None
        return any(uses(ix, iv) for ix in access_of(self.store).indices)  # type: ignore[arg-type]

    def loop_of(self, iv: Value) -> Instruction:
        return next(lp for lp in self.loops if self.iv(lp) is iv)


# ---------------------------------------------------------------------------
# Analysis
# ---------------------------------------------------------------------------

def plan(loop: Instruction, target: Target | None = None) -> Plan | None:
    """How to vectorise the perfect nest rooted at ``loop``, or None, for
    ``target`` (the module's when None: what the cost model counts)."""
    loops = _perfect_nest(loop)
    if loops is None:
        return None
    body = list(loops[-1].regions[0].blocks[0].instructions)
    ivs = [lp.regions[0].blocks[0].args[0] for lp in loops]
    if any(v in ivs for lp in loops for a in lp.args[:2] for v in Expr.of(a).values()):
        return None             # a bound depends on the nest: no reordering
    element, mixed = _element_type(body), False
    if element is None:
        element, mixed = _mixed_element(body), True
    if element is None:
        return None
    return _plan(loops, body, element, ivs, [most_trips(lp) for lp in loops],
                 target=target or module_target(loop), mixed=mixed)


def tile_plan(body: list[Instruction], ivs: list[Value], trips: list[int],
              memo: dict | None = None, target: Target | None = None) -> Plan | None:
    """The plan swir-cg will make for ``body`` inside loops ``ivs`` (outermost
    first) of ``trips`` iterations: what the LDM plan search charges a tile
    before any loop exists (the body's buffers are the main-memory ones its
    tiles will copy). ``memo``: a dict the caller keeps for as long as the
    body and loops do not change, asking with other trips (the search asks
    for thousands of tilings): what does not depend on the trips is found
    once in it. ``target``: the machine planned for (the default's if none)."""
    memo = {} if memo is None else memo
    key = ("element", tuple(body))
    if key not in memo:
        single = _element_type(body, ldm=False)
        memo[key] = (single, False) if single is not None else \
            (_mixed_element(body, ldm=False), True)
    element, mixed = memo[key]
    return None if element is None else \
        _plan([], body, element, ivs, list(trips), memo, target or default_target(), mixed)


def _plan(loops: list[Instruction], body: list[Instruction], element: ScalarType,
          ivs: list[Value], trips: list[int | None], memo: dict | None = None,
          target: Target | None = None, mixed: bool = False) -> Plan | None:
    for kind in ("map",) if mixed else ("reduce", "map"):
        p = Plan(kind, loops, element, ivs, trips, v=None, body=body,  # type: ignore[arg-type]
                 target=target, mixed=mixed)
        if memo is not None:
            p.memo = memo
        if (_reduce_plan if kind == "reduce" else _map_plan)(p):
            return p
    return None


def _memo(p: Plan, key: tuple, find):
    """``find()``, kept in the plan's memo under ``key``."""
    if key not in p.memo:
        p.memo[key] = find()
    return p.memo[key]


def _perfect_nest(loop: Instruction) -> list[Instruction] | None:
    loops = [loop]
    while True:
        lp = loops[-1]
        if not lp.isa(FOR) or attr_or_default(lp, "step") != 1 or len(lp.args) < 2:
            return None
        inner = lp.regions[0].blocks[0].instructions
        if len(inner) == 1 and inner[0].isa(FOR):
            loops.append(inner[0])
            continue
        if any(i.regions for i in inner):
            return None
        return loops


def _element_type(body: list[Instruction], ldm: bool = True) -> ScalarType | None:
    """The one float type the body computes in (f32 or f64), if it is
    straight-line code of loads, stores, constants and vectorisable ops
    (``ldm``: on the kernel's own LDM buffers)."""
    element = None
    for inst in body:
        if not inst.isa(LOAD, STORE, CONST, *VECTOR_OPS):
            return None
        if inst.isa(LOAD, STORE):
            t = _buffer_type(inst, ldm)
            if t is None:
                return None
            types = [t.element]
        else:
            types = [r.type for r in inst.results] + \
                [a.type for a in inst.args if isinstance(a, Value)]
        for ty in types:
            if not isinstance(ty, ScalarType) or ty.name not in VECTOR_TYPES:
                return None
            if element is None:
                element = ty
            elif ty != element:
                return None
    return element


def _buffer_type(inst: Instruction, ldm: bool) -> ShapedType | None:
    """The buffer type a load or store accesses, if a vector body may
    (``ldm``: the kernel's own LDM buffer), with affine subscripts."""
    acc = inst.args[0] if inst.isa(LOAD) else inst.args[1]
    t = acc.base.type if isinstance(acc, Access) else None
    if not isinstance(t, ShapedType) or t.rank == 0 or \
            (ldm and (not isinstance(t, LDMType) or not _allocated(acc.base))) or \
            any(not isinstance(i, Expr) for i in acc.indices):  # type: ignore[union-attr]
        return None
    return t


def _float(t: object) -> bool:
    return isinstance(t, ScalarType) and t.name in VECTOR_TYPES


def _mixed_element(body: list[Instruction], ldm: bool = True) -> ScalarType | None:
    """For a map plan of a body in f32 and f64 (a batch norm's epilogue: its
    loads cast to f64, the result cast back): the stores' type, if every
    instruction is a load or store (as :func:`_element_type` asks), a
    constant, or a float op on floats (a cast between f32 and f64
    included); whether the ops that move with v have vector forms is
    :func:`_map_plan`'s question."""
    stored = set()
    for inst in body:
        if inst.isa(LOAD, STORE):
            t = _buffer_type(inst, ldm)
            if t is None or not _float(t.element):
                return None
            if inst.isa(STORE):
                stored.add(t.element)
        elif not inst.isa(CONST) and not (
                (inst.isa(CAST) or flops_of(inst)) and len(inst.results) == 1
                and all(_float(a.type) for a in inst.args if isinstance(a, Value))
                and _float(inst.results[0].type)):
            return None
    return stored.pop() if len(stored) == 1 else None


def _hoisted(p: Plan) -> frozenset[int] | None:
    """A mixed map plan's instructions that do not move with v (none of its
    operands does): the ops, and the loads they read; None if an op that
    moves with v has no vector form (only the VECTOR_OPS and casts do)."""
    still: set[int] = set()
    ops: set[int] = set()
    for inst in p.body:
        if inst.isa(LOAD):
            if access_kind(access_of(inst), p.v) == "invariant":
                still.add(id(inst.results[0]))
        elif inst.isa(CONST, STORE):
            continue
        elif all(id(a) in still or producer(p.body, a) is None or
                 producer(p.body, a).isa(CONST) for a in inst.args):  # type: ignore[union-attr]
            still.add(id(inst.results[0]))
            ops.add(id(inst))
        elif not inst.isa(CAST, *VECTOR_OPS):
            return None
    loads = {id(i) for i in p.body if i.isa(LOAD) and any(
        id(u) in ops for u in (x for x in p.body if i.results[0] in x.args))}
    return frozenset(ops | loads)


def _allocated(base: object) -> bool:
    """An LDM buffer of the kernel's own (``ldm_alloc``): distinct from every
    other, where LDM parameters of a called function may alias."""
    return isinstance(base, Result) and base.owner.isa(LDM_ALLOC)


def _coef(e: Expr, v: Value) -> int:
    return sum(c for a, c in e.terms if a is v)


def uses(e: Expr, v: Value) -> bool:
    return any(a is v for a in e.values())


def access_of(inst: Instruction) -> Access:
    acc = inst.args[0] if inst.isa(LOAD) else inst.args[1]
    assert isinstance(acc, Access)
    return acc


def access_kind(acc: Access, v: Value) -> str:
    """How an access moves with ``v``: "contig" (the last subscript, step 1;
    or an element offset :func:`flat_offset` finds, step 1), "invariant"
    (not at all) or "gather" (any other way)."""
    idx: list[Expr] = list(acc.indices)  # type: ignore[arg-type]
    if not any(uses(i, v) for i in idx):
        return "invariant"
    last = idx[-1]
    if not any(uses(i, v) for i in idx[:-1]) and _coef(last, v) == 1 and \
            sum(1 for a in last.values() if a is v) == 1:
        return "contig"
    flat = flat_offset(acc)
    return "contig" if flat is not None and _coef(flat, v) == 1 else "gather"


def flat_offset(acc: Access) -> Expr | None:
    """The element offset of ``acc`` in its buffer, as an affine expression
    with no floordiv or mod, if it has one: affine subscripts, or the digits
    of one such expression e in the buffer's shape (e floordiv S0, then
    (e floordiv Sk) mod dk, ..., e mod the last extent: -insert-dma's move
    of a broadcast tile into its padded place). With floor division the
    digits recompose e for every integer e."""
    shape = acc.base.type.shape  # type: ignore[union-attr]
    idx: list[Expr] = list(acc.indices)  # type: ignore[arg-type]
    strides = [math.prod(shape[k + 1:]) for k in range(len(shape))]
    if all(_plain(i) for i in idx):
        out = Expr.of(0)
        for i, stride in zip(idx, strides):
            out = out + i.scale(stride)
        return out
    atom = idx[-1].terms[0][0] if len(idx[-1].terms) == 1 else None
    if not isinstance(atom, Compound) or atom.kind != "mod" or not _plain(atom.args[0]):
        return None
    e = atom.args[0]
    for k, (i, stride) in enumerate(zip(idx, strides)):
        digit = e.floordiv(stride)
        if i != digit.mod(shape[k]) and not (k == 0 and i == digit):
            return None
    return e


def _plain(e: Expr) -> bool:
    """An affine expression without floordiv, mod, min or max."""
    return not any(isinstance(a, Compound) for a, _ in e.terms)


def _reads_no_lane_store(p: Plan, store: Access, load: Access) -> bool:
    """Whether a map plan's ``load`` of the buffer ``store`` writes (an
    in-place move) may run a vector's lanes at a time: both element offsets
    move 1 per v and the store's minus the load's, d, is at most 0 or at
    least the lanes wherever the nest runs, so no lane reads what an earlier
    lane of its vector writes (a later lane's store lands on an element read
    before it, or a vector or more columns on); the last columns' vector, of which only new
    lanes are stored, too. Needs constant loop bounds (d's range)."""
    g, f = flat_offset(store), flat_offset(load)
    if g is None or f is None or _coef(g, p.v) != 1 or _coef(f, p.v) != 1:
        return False
    low = high = (g - f).const
    for atom, c in (g - f).terms:
        if not p.loops or not _is_in(atom, p.ivs):
            return False
        lp = p.loop_of(atom)  # type: ignore[arg-type]
        lo, hi = Expr.of(lp.args[0]), Expr.of(lp.args[1])
        if not (lo.is_constant and hi.is_constant) or hi.const <= lo.const:
            return False
        ends = (c * lo.const, c * (hi.const - 1))
        low, high = low + min(ends), high + max(ends)
    return high <= 0 or low >= p.lanes


def trip_count(loop: Instruction) -> int | None:
    lo, hi = Expr.of(loop.args[0]), Expr.of(loop.args[1])
    return hi.const - lo.const if lo.is_constant and hi.is_constant else None


def most_trips(loop: Instruction) -> int | None:
    """The most iterations ``loop`` makes: its trip count, or for a tile
    loop ``lo to min(c, ...)`` with a constant lo, c - lo."""
    trip = trip_count(loop)
    lo, hi = Expr.of(loop.args[0]), Expr.of(loop.args[1])
    if trip is not None or not lo.is_constant or hi.const or len(hi.terms) != 1:
        return trip
    atom, coef = hi.terms[0]
    if coef != 1 or not isinstance(atom, Compound) or atom.kind != "min":
        return None
    bounds = [a.const for a in atom.args if a.is_constant]
    return min(bounds) - lo.const if bounds else None


def _reduce_plan(p: Plan) -> bool:
    """Fill in ``p`` as a reduce plan, if its body is one."""
    shape = _memo(p, ("reduce", tuple(p.body), tuple(p.ivs)), lambda: _reduce_shape(p))
    if shape is None:
        return False
    p.store, p.acc_load, parallel, p.v, loads, fused = shape
    if (p.most(p.v) or p.lanes) < min(p.lanes, REDUCE_MIN_COLUMNS):
        return False
    p.fused = fused
    _choose_block(p, list(parallel), list(loads))
    return True


def _reduce_shape(p: Plan) -> tuple | None:
    """What makes ``p``'s body a reduce plan, whatever the trip counts: the
    store, the accumulator's load, the parallel loops (the store's
    subscripts), v, the other loads and the mul an FMA fuses; None if it is
    not one."""
    body = p.body
    stores = [i for i in body if i.isa(STORE)]
    if len(stores) != 1:
        return None
    store = stores[0]
    target = access_of(store)
    add = producer(body, store.args[0])
    if add is None or not add.isa(*REDUCTIONS):
        return None
    acc_load = next((producer(body, a) for a in add.args
                     if (x := producer(body, a)) is not None and x.isa(LOAD)
                     and _same(access_of(x), target)), None)
    if acc_load is None or len(acc_load.results[0].uses) != 1:
        return None
    ivs = p.ivs
    parallel: list[Value] = []
    for ix in target.indices:
        used = [x for x in ix.values() if _is_in(x, ivs)]  # type: ignore[union-attr]
        direct = [a for a, c in ix.terms if _is_in(a, ivs) and c == 1]  # type: ignore[union-attr]
        if len(used) > 1 or len(direct) != len(used):
            return None                      # each subscript one loop, step 1
        parallel += direct
    if len(set(map(id, parallel))) != len(parallel) or len(parallel) == len(ivs):
        return None                          # not injective, or nothing reduces
    last = [a for a, _ in target.indices[-1].terms if _is_in(a, ivs)]  # type: ignore[union-attr]
    if not last:
        return None
    loads = [i for i in body if i.isa(LOAD) and i is not acc_load]
    if any(access_of(i).base is target.base for i in loads):
        return None                          # reads the accumulator array elsewhere
    other = producer(body, next(a for a in add.args if a is not acc_load.results[0]))
    fused = other if add.isa(ADD) and other is not None and other.isa(MUL) and \
        len(other.results[0].uses) == 1 else None
    return store, acc_load, tuple(parallel), last[0], tuple(loads), fused


def _same(a: Access, b: Access) -> bool:
    """The same element of the same buffer."""
    return a.base is b.base and a.indices == b.indices


def _is_in(x: object, values: list[Value]) -> bool:
    return any(x is v for v in values)


def producer(body: list[Instruction], v: object) -> Instruction | None:
    return next((i for i in body if v in i.results), None)


def _choose_block(p: Plan, parallel: list[Value], loads: list[Instruction]) -> None:
    """m and the block M x U whose code the cost model (below) charges the
    fewest cycles per point, among those whose accumulators and operands fit
    the vector registers; ties go to the bigger block."""
    candidates = []                          # (m, its rows, the step's profile with it)
    for m in [None, *parallel]:
        if m is p.v or (m is not None and (p.most(m) or 0) < 2):
            continue
        p.m = m
        prof = _profile(p)
        if m is not None and all(dm for dm, _ in prof.loads):
            continue                        # nothing reused across rows
        candidates.append((m, p.most(m) if m is not None else None, prof))
    assert p.target is not None
    k, p.M, p.U = _best_block(tuple((rows, prof) for _, rows, prof in candidates), p.columns,
                              p.target, columns_known(p))
    p.m = candidates[k][0]
    if p.M == 1:
        p.m = None            # an ordinary loop around the blocks


@lru_cache(maxsize=1 << 12)
def _best_block(candidates: tuple[tuple[int | None, _Profile], ...], columns: int,
                target: Target, known: bool = False) -> tuple[int, int, int]:
    """:func:`_choose_block`'s choice from what decides it: per candidate m,
    its rows (None: no m) and the step's profile; ``columns``: v's most
    iterations (``known``: its trip count, :func:`columns_known`). The index
    of the best candidate, M and U. Kept: the LDM plan search asks the same
    for many tilings."""
    budget = target.vector_registers - SPARE_REGISTERS
    lanes = vector_unit(target).lanes
    vectors = max(1, -(-columns // lanes) if known else columns // lanes)
    best: tuple = ()
    for k, (rows, prof) in enumerate(candidates):
        # registers live: M x U accumulators, and per load M (moving with m)
        # or 1 times U (a vector per column block) or 1 (a broadcast)
        per = Counter((dm, kind == "invariant") for dm, kind in prof.loads)
        for M in range(1, min(rows or 1, 8) + 1):
            for U in range(1, min(vectors, 8) + 1):
                live = M * U + per[True, False] * M * U + per[True, True] * M + \
                    per[False, False] * U + per[False, True]
                if live > budget:
                    continue
                cost = _block_point_cost(prof, columns, rows, M, U, target, known)
                key = (-cost, M * U, -abs(M - U))
                if not best or key > best[0]:
                    best = (key, k, M, U)
    return best[1:]


def _map_plan(p: Plan) -> bool:
    """Fill in ``p`` as a map plan (the innermost loop in lanes), if it can be one."""
    body = p.body
    p.v = p.ivs[-1]
    if (p.trips[-1] or p.lanes) < p.lanes:
        return False
    stores = [i for i in body if i.isa(STORE)]
    if not stores:
        return False
    for s in stores:
        if access_kind(access_of(s), p.v) != "contig":
            return False
    for i in body:
        if not i.isa(LOAD):
            continue
        acc = access_of(i)
        if access_kind(acc, p.v) == "gather":
            return False
        for s in stores:    # a lane must not read what another lane writes
            if access_of(s).base is acc.base and not _same(access_of(s), acc) and \
                    not _reads_no_lane_store(p, access_of(s), acc):
                return False
    bases = [access_of(s).base for s in stores]
    if len(set(map(id, bases))) != len(bases):
        return False
    if p.mixed:
        hoisted = _memo(p, ("hoisted", tuple(p.body), p.v), lambda: _hoisted(p))
        if hoisted is None:
            return False
        p.hoisted = hoisted
    return True


# ---------------------------------------------------------------------------
# What the code written for a body costs (docs/cost-model.md, "Compute")
# ---------------------------------------------------------------------------

def flops_of(inst: Instruction) -> int:
    """Floating-point operations one execution of ``inst`` performs: 1 for a
    scalar element-wise op with a float result (add, mul, max, exp, relu,
    ...; transcendental functions count 1 too), 0 for anything else
    (loads, stores, index arithmetic, casts, comparisons)."""
    d = inst.opdef
    if d is None or FLOP not in d.traits or len(inst.results) != 1:
        return 0
    return 1 if getattr(inst.results[0].type, "is_float", False) else 0


@dataclass(frozen=True)
class PointCost:
    """One execution of a loop body (one point of its nest) as the CPE runs
    the code swir-cg writes for it: cycles, and the share of its flops done
    by vector instructions."""
    cycles: float
    vector_flops: float


def body_cost(body: list[Instruction], p: Plan | None,
              target: Target | None = None) -> PointCost:
    """The cost of one point of straight-line ``body``: written by plan ``p``
    (its innermost body), or scalar (``p`` None). The pipeline model: per
    cycle one floating-point or vector instruction (P0) and one LDM load or
    store (P1); a chain of dependent floating-point instructions waits
    ``target.fp_latency`` cycles per link (``target``: the plan's own when not
    given)."""
    target = target or (p.target if p is not None else None) or default_target()
    if p is None:
        return PointCost(_scalar_cost(body, target), 0.0)
    scalar, flops = _memo(p, ("counts", tuple(body), target), lambda: (
        _scalar_cost(body, target), sum(map(flops_of, body))))
    if p.kind == "reduce":
        return PointCost(_reduce_point_cost(p, target), flops)
    hoisted = [i for i in body if id(i) in p.hoisted]
    vector = flops - sum(map(flops_of, hoisted))
    once = _scalar_cost(hoisted, target) / p.columns if hoisted else 0.0   # once per row
    if columns_known(p):
        return PointCost(_map_point_cost(p) + once, vector)
    lanes = _lane_share(p)
    return PointCost(lanes * _map_cost(p) / p.lanes + (1 - lanes) * scalar + once,
                     lanes * vector)


def point_cycles_floor(body: list[Instruction], target: Target | None = None) -> float:
    """A lower bound of ``body_cost(body, p).cycles`` over every plan ``p``
    (None included) that :func:`tile_plan` may make for any trip counts: the
    scalar code's, or the arithmetic in the target's lanes (a reduce plan issues at
    least one vector instruction per op less the add and the mul it fuses,
    and at least one; a map plan at least one per op). What the LDM plan
    search prunes with (closed_forms.Tilings.lower_bounds)."""
    target = target or default_target()
    arith = sum(1 for i in body if not i.isa(LOAD, STORE, CONST))
    return min(_scalar_cost(body, target), max(1, arith - 1) / vector_unit(target).lanes)


def _scalar_cost(body: list[Instruction], target: Target) -> float:
    fp = sum(map(flops_of, body))
    mem = sum(1 for i in body if i.isa(LOAD, STORE))
    chain = target.fp_latency if _accumulates(body) else 0
    return float(max(fp, mem, chain))


def _accumulates(body: list[Instruction]) -> bool:
    """Whether the body adds into the element it loaded (a reduction through
    memory: each point waits for the previous one's add)."""
    for s in (i for i in body if i.isa(STORE)):
        add = producer(body, s.args[0])
        if add is not None and flops_of(add) and any(
                (x := producer(body, a)) is not None and x.isa(LOAD)
                and _same(access_of(x), access_of(s)) for a in add.args):
            return True
    return False


def columns_known(p: Plan) -> bool:
    """Whether v's trip count is known where swir-cg writes the nest (a
    tile plan's trips are the tile's): then the last columns (fewer than
    a vector's lanes) are the vector ending at the bound (a map plan's; a reduce plan's
    last block holds it), else a map plan's scalar body or a reduce plan's
    gathered tail block."""
    return not p.loops or trip_count(p.loop_of(p.v)) is not None


def _map_point_cost(p: Plan) -> float:
    """Cycles per point of a map plan whose last columns (fewer than the
    lanes) are the vector ending at the bound: a step per vector of columns
    and one more for the rest, whose stores go through an array of the
    lanes (a vector store, then per stored lane a load and a store)."""
    n = p.columns
    rest = n % p.lanes
    stores = sum(1 for i in p.body if i.isa(STORE))
    extra = stores * 2 * rest if rest else 0
    return (math.ceil(n / p.lanes) * _map_cost(p) + extra) / n


def _lane_share(p: Plan) -> float:
    """The share of v's iterations in whole vectors (the rest run in a
    reduce plan's tail block, or scalar in a map plan)."""
    n = p.columns
    return (n - n % p.lanes) / n


def _row_share(rows: int | None, M: int) -> float:
    """The share of m's ``rows`` in blocks of M (the rest in blocks of one;
    None: no m)."""
    return 1.0 if rows is None else (rows - rows % M) / rows


def _reduce_point_cost(p: Plan, target: Target, prof: _Profile | None = None) -> float:
    """Cycles per point of a reduce plan's code: whole vectors in blocks,
    the last columns in a final block or a tail block."""
    rows = (p.most(p.m) or p.M) if p.m is not None else None
    return _block_point_cost(prof or _profile(p), p.columns, rows, p.M, p.U, target,
                             columns_known(p))


@lru_cache(maxsize=1 << 16)
def _block_point_cost(prof: _Profile, columns: int, rows: int | None, M: int, U: int,
                      target: Target, known: bool = False) -> float:
    """:func:`_reduce_point_cost` from what decides it (``columns``: v's most
    iterations, ``known`` its trip count; ``rows``: m's, None without m).
    Kept: the LDM plan search asks the same blocks for every tiling it
    weighs."""
    width = vector_unit(target).lanes
    if known and columns >= width:
        share = _row_share(rows, M)
        return sum(r * _known_columns_cost(prof, columns, m, U, target)
                   for r, m in ((share, M), (1 - share, 1)) if r)
    lanes = (columns - columns % width) / columns
    tail = _tail_cost(prof, columns, rows, M, target) if lanes < 1 else 0.0
    return lanes * _block_mix_cost(prof, columns, rows, M, U, target) + (1 - lanes) * tail


def _tail_cost(prof: _Profile, columns: int, rows: int | None, M: int, target: Target
               ) -> float:
    """Cycles per point of the last ``columns % lanes`` columns: blocks of M
    rows (then single rows) by one vector whose moving loads are gathered
    lane by lane, its valid lanes added to Y one by one."""
    rest = columns % vector_unit(target).lanes
    gathered = replace(prof, loads=tuple((dm, k if k == "invariant" else "gather")
                                         for dm, k in prof.loads))
    share = _row_share(rows, M)
    return sum(r * _reduce_cost(gathered, m, 1, target, rest)
               for r, m in ((share, M), (1 - share, 1)) if r)


def _known_columns_cost(prof: _Profile, columns: int, M: int, U: int, target: Target
                        ) -> float:
    """Cycles per point of M rows across ``columns`` (a trip count known
    where the code is written, a vector's lanes or more): blocks of U
    vectors, then one block of the vectors left, the last of them, when
    ``columns`` is not a multiple of the lanes, the vector of the columns
    ending at the bound (its first lanes recompute columns done, and are
    dropped)."""
    lanes = vector_unit(target).lanes
    whole, rest = divmod(columns, lanes)
    blocks, left = divmod(whole, U)
    parts = ((blocks * U * lanes, U, lanes), (left * lanes + rest, left + (rest > 0), rest or lanes))
    return sum(n * _reduce_cost(prof, M, u, target, last=last)
               for n, u, last in parts if n) / columns


def _block_mix_cost(prof: _Profile, columns: int, rows: int | None, M: int, U: int,
                    target: Target) -> float:
    """Cycles per point of a reduce plan's vector code: M x U blocks, rows
    beyond the last whole block of M in blocks of one row, vectors beyond the
    last whole block of U one at a time."""
    vectors = max(1, columns // vector_unit(target).lanes)
    cols = (vectors - vectors % U) / vectors
    share = _row_share(rows, M)
    return sum(r * c * _reduce_cost(prof, m, u, target)
               for r, m in ((share, M), (1 - share, 1)) if r
               for c, u in ((cols, U), (1 - cols, 1)) if c)


def _map_cost(p: Plan) -> float:
    """Cycles of one vector step of a map body."""
    fp = mem = 0
    for i in p.body:
        if id(i) in p.hoisted:
            continue                # once per row, before the vector loop
        if i.isa(CAST):
            fp += 1
            mem += p.unit.cast_memory
        elif i.isa(LOAD):
            mem += 1        # a vector load, or simd_loade: a load that splats
        elif i.isa(STORE):
            mem += 1
        elif not i.isa(CONST):
            fp += vector_instructions(i)
    return float(max(fp, mem))


@dataclass(frozen=True)
class _Profile:
    """What a reduce plan's step issues, independent of the block size:
    per load (other than the accumulator's), whether it moves with m and how
    with v; per other op, whether it moves with m; the reduction loops' points."""
    loads: tuple[tuple[bool, str], ...]
    ops: int
    reduction_points: int | None
    combine: int = 1          # vector instructions of the accumulating op (or FMA)


def _profile(p: Plan) -> _Profile:
    assert p.acc_load is not None and p.store is not None
    loads, ops, stored = _memo(p, ("step", tuple(p.body), p.m, p.v), lambda: _step(
        p.body, p.acc_load, p.store, p.fused, p.m, p.v))
    trips = [t for v, t in zip(p.ivs, p.trips) if v not in stored]
    points = math.prod(trips) if trips and all(trips) else None  # type: ignore[arg-type]
    combine = producer(p.body, p.store.args[0])
    assert combine is not None
    return _Profile(loads, ops, points, vector_instructions(combine))


def _step(body: list[Instruction], acc_load: Instruction, store: Instruction,
          fused: Instruction | None, m: Value | None, v: Value
          ) -> tuple[tuple[tuple[bool, str], ...], int, frozenset[Value]]:
    """The parts of a reduce plan's profile its trip counts do not change:
    per load, whether it moves with m and how with v; the other ops; the
    values the store's subscripts use (its parallel loops)."""
    add = producer(body, store.args[0])
    loads, ops = [], 0
    for i in body:
        if i in (acc_load, store, add, fused) or i.isa(CONST):
            continue
        if i.isa(LOAD):
            dm = m is not None and any(uses(ix, m) for ix in access_of(i).indices)  # type: ignore[arg-type]
            loads.append((dm, access_kind(access_of(i), v)))
        else:
            ops += vector_instructions(i)
    stored = frozenset(x for ix in access_of(store).indices for x in ix.values())  # type: ignore[union-attr]
    return tuple(loads), ops, stored


def _reduce_cost(prof: _Profile, M: int, U: int, target: Target, lanes: int | None = None,
                 last: int | None = None) -> float:
    """Cycles per point of an M x U block of which ``lanes`` of each vector
    are columns (fewer than all: the tail block, its inputs gathered), or
    whose last vector holds ``last`` new columns (fewer than all: the
    vector ending at the bound): per step of the reduction loops, M x U FMAs (adds,
    maxima) and the other ops on the FP pipe; on the memory pipe the vector
    loads, the broadcasts (``simd_loade``: one load that splats, issued
    beside the FMAs as swGEMM's inner loop issues its ``lddec``) and the
    gathers (``lanes`` loads and the set's stores and load each); at least
    one FP latency (each accumulator's chain); plus adding the block to Y
    (a vector load and store, or for a vector of fewer columns a store of
    the lanes and per column two loads and a store), spread over the
    reduction loops' points when they are known."""
    unit = vector_unit(target)
    width = unit.lanes
    lanes, last = lanes or width, last or width
    fp = M * U * (prof.combine + prof.ops)
    mem = 0
    for dm, kind in prof.loads:
        copies = M if dm else 1
        if kind == "contig":
            mem += copies * U
        elif kind == "invariant":
            mem += copies
        else:
            mem += copies * U * (lanes + unit.set_memory)
    step = max(fp, mem, target.fp_latency)
    if lanes < width:
        to_y, points = M * (1 + 3 * lanes), M * lanes
    else:
        to_y = 2 * M * (U - 1) + (2 * M if last == width else M * (1 + 3 * last))
        points = M * (width * (U - 1) + last)
    block = to_y / prof.reduction_points if prof.reduction_points else 0.0
    return (step + block) / points


def body_costs(region: Region, vectors: bool = True, target: Target | None = None
               ) -> Iterator[tuple[list[Instruction], PointCost]]:
    """Every straight-line loop body of ``region`` that stores, with the cost
    of one execution: the innermost body of each nest :func:`plan` vectorises
    (``vectors``: a CPE kernel's, as swir-cg writes them) at the plan's cost,
    the other bodies scalar."""
    for block in region.blocks:
        own = [i for i in block.instructions if not i.regions]
        if any(i.isa(STORE) for i in own):
            yield own, body_cost(own, None, target)
        for inst in block.instructions:
            p = plan(inst, target) if vectors and inst.isa(FOR) else None
            if p is not None:
                yield p.body, body_cost(p.body, p, target)
                continue
            for r in inst.regions:
                yield from body_costs(r, vectors, target)
