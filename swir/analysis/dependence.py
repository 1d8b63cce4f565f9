"""Memory dependences between the accesses of loop nests (loop stage and later).

Two *instances* of memory accesses (an access executed at some iteration of its
enclosing loops) depend on each other when they may touch the same element of
the same buffer and at least one of them writes. Every question a loop
transformation asks is a question about pairs of instances:

- :func:`carried_dependence` (may ``loop`` run in parallel?): two iterations of
  ``loop`` with *different* induction values, in the same iteration of the
  loops around it, conflict;
- :func:`direction_vectors` (may a perfect nest be permuted?): the signs
  ``<  =  >`` of the iteration differences of the nest's loops over all
  conflicting instance pairs;
- :func:`fusion_preventing_dependence` (may two adjacent loops be fused?): an
  iteration of the second loop conflicts with a *later* iteration of the first.

Each is decided on an integer linear system: one copy of the iteration
variables per instance (loops around the analysed region are shared, their
iteration fixed), the loop bounds (``lb <= x < ub``, ``x = lb + step*t``), the
enclosing ``if`` guards, one equation per subscript dimension, and the
question's own constraints. Subscripts are affine ``Expr``s; their quasi-affine
atoms become fresh variables with the constraints that define them exactly
(``d*q <= e <= d*q + d - 1`` for ``q = e floordiv d``; ``mod`` through it) or
soundly (``m <= a_i`` for ``m = min(a_i)``). ``dyn_index`` values and other
symbols defined inside the region vary per instance (their known range kept);
those defined outside are shared.

The system is solved exactly for its equalities (integer elimination: a unit
coefficient is substituted; otherwise the smallest coefficient is reduced by a
unimodular change of variables, Euclid-style, so the GCD test is exact), then
by Fourier-Motzkin elimination of the inequalities with integer tightening
(the "real shadow"; GCD-normalised constraints). An infeasible real shadow
proves independence. Everything else is answered *conservatively*: a system
too big to eliminate, constraints that cannot be expressed (``!=`` guards, the
else branch of a multi-condition ``if``), ranges of copies, and ops whose
memory effects are not modelled (``call``, DMA waits, ...) all count as a
possible dependence, so a transformation checked here is never accepted when it
could change the result.

Aliasing. Accesses conflict only through the *same* buffer value: distinct
kernel parameters, globals and buffers are assumed not to overlap (the
lowering guarantees it: a kernel's buffers are live at once and memory
planning gives them disjoint memory). Constant ``global``s are never written,
so reads of them never conflict. An LDM buffer allocated inside a loop is a
fresh buffer in each iteration of that loop.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from swir.ir.affine import Compound, Expr
from swir.ir.core import (
    Access,
    BlockArgument,
    Constraint,
    Global,
    Instruction,
    Range,
    Result,
    Value,
)
from swir.ir.module_attrs import module_target
from swir.ops import (CHUNK, CONST, COPY_IN, COPY_OUT, CPE_ID, DMA_BCAST, DMA_GET, DMA_PUT,
                      DYN_INDEX, FOR, IF, LDM_ALLOC, LOAD, PARALLEL, STORE)
from swir.ops.util import attr_or_default

LOOP_OPS = (FOR, PARALLEL)
DIRECTIONS = ("<", "=", ">")

# Ops with no memory effect of their own besides what their regions contain.
_STRUCTURAL = (FOR, PARALLEL, IF, LDM_ALLOC)
# Fourier-Motzkin gives up (answers "maybe dependent") beyond this many constraints.
_FM_LIMIT = 400


# --------------------------------------------------------------------------
# Memory accesses
# --------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class MemoryAccess:
    """One memory access of an instruction.

    ``buffer`` is None for an op whose effects are not modelled (it may touch
    anything). ``indices`` has one entry per dimension: an ``Expr`` (one
    element), a ``Range`` (``lo : hi`` of a copy), or None (any element); it is
    None as a whole when the access may touch the whole buffer.
    """

    inst: Instruction
    buffer: Value | None
    indices: tuple[Expr | Range | None, ...] | None
    is_write: bool
    loops: tuple[Instruction, ...]  # enclosing for/parallel loops, outermost first
    # Conditions known to hold where the access runs: (constraint, negated).
    guards: tuple[tuple[Constraint, bool], ...] = ()

    @property
    def kind(self) -> str:
        return "write" if self.is_write else "read"

    def describe(self) -> str:
        what = self.inst.opname
        if self.buffer is None:
            return f"'{what}' (memory effects unknown)"
        return f"'{what}' {'writing' if self.is_write else 'reading'} {value_name(self.buffer)}"


def value_name(v: Value) -> str:
    return f"@{v.name}" if isinstance(v, Global) else f"%{v.name}"


def enclosing_loops(inst: Instruction) -> list[Instruction]:
    """The for/parallel loops around ``inst``, outermost first."""
    out = []
    for anc in ancestors(inst):
        if anc.isa(*LOOP_OPS):
            out.append(anc)
    out.reverse()
    return out


def ancestors(inst: Instruction) -> Iterable[Instruction]:
    """Instructions whose regions contain ``inst``, innermost first."""
    b = inst.parent
    while b is not None and b.parent is not None:
        owner = b.parent.parent
        if not isinstance(owner, Instruction):
            return
        yield owner
        b = owner.parent


def _guards_of(inst: Instruction) -> tuple[tuple[Constraint, bool], ...]:
    out: list[tuple[Constraint, bool]] = []
    child = inst
    for anc in ancestors(inst):
        if anc.isa(IF):
            region = child.parent.parent if child.parent is not None else None
            in_else = len(anc.regions) > 1 and region is anc.regions[1]
            conds = [c for c in anc.args if isinstance(c, Constraint)]
            if not in_else:
                out.extend((c, False) for c in conds)
            elif len(conds) == 1:  # the else of one condition: its negation
                out.append((conds[0], True))
            # else of several conditions: a disjunction, left out (sound)
        child = anc
    return tuple(out)


def memory_accesses(roots: Instruction | Iterable[Instruction]) -> list[MemoryAccess]:
    """Every memory access in ``roots`` (instructions and their regions), in program order."""
    if isinstance(roots, Instruction):
        roots = [roots]
    out: list[MemoryAccess] = []
    for root in roots:
        for inst in root.walk():
            out.extend(_accesses_of(inst))
    return out


def _accesses_of(inst: Instruction) -> list[MemoryAccess]:
    d = inst.opdef
    loops = tuple(enclosing_loops(inst))
    guards = _guards_of(inst)

    def acc(slot: object, write: bool) -> MemoryAccess:
        if isinstance(slot, Access):
            return MemoryAccess(inst, slot.base, tuple(slot.indices), write, loops, guards)
        assert isinstance(slot, Value)
        return MemoryAccess(inst, slot, None, write, loops, guards)  # the whole buffer

    if inst.isa(LOAD):
        return [acc(inst.args[0], False)]
    if inst.isa(STORE):
        return [acc(inst.args[1], True)]
    if inst.isa(COPY_IN, COPY_OUT, DMA_GET, DMA_PUT, DMA_BCAST):
        src, dst = inst.args[0], inst.args[1]
        if inst.isa(DMA_GET, DMA_PUT, DMA_BCAST):
            # A DMA's extent (count, blocks, stride) is not modelled: the whole buffer.
            src = src.base if isinstance(src, Access) else src
            dst = dst.base if isinstance(dst, Access) else dst
        return [acc(src, False), acc(dst, True)]
    if inst.isa(*_STRUCTURAL) or (d is not None and d.pure):
        return []
    # call, spawn, join, dma_wait, terminators, unknown ops: may touch anything.
    return [MemoryAccess(inst, None, None, True, loops, guards)]


def may_conflict(a: MemoryAccess, b: MemoryAccess) -> bool:
    """Could the two accesses touch the same memory, one of them writing?"""
    if not (a.is_write or b.is_write):
        return False
    if a.buffer is None or b.buffer is None:
        other = b if a.buffer is None else a
        return not _constant(other.buffer)
    if _constant(a.buffer) or _constant(b.buffer):
        return False
    return a.buffer is b.buffer


def _constant(v: Value | None) -> bool:
    return isinstance(v, Global) and v.kind == "global"


# --------------------------------------------------------------------------
# Linear forms and the integer system
# --------------------------------------------------------------------------

class Lin:
    """``sum(coef * var) + const`` over integer variables (ints)."""

    __slots__ = ("c", "co")

    def __init__(self, co: dict[int, int] | None = None, c: int = 0) -> None:
        self.co = {v: a for v, a in (co or {}).items() if a}
        self.c = c

    @staticmethod
    def var(v: int) -> Lin:
        return Lin({v: 1})

    def __add__(self, o: Lin | int) -> Lin:
        if isinstance(o, int):
            return Lin(self.co, self.c + o)
        co = dict(self.co)
        for v, a in o.co.items():
            co[v] = co.get(v, 0) + a
        return Lin(co, self.c + o.c)

    def __sub__(self, o: Lin | int) -> Lin:
        return self + (-o if isinstance(o, int) else o.scale(-1))

    def scale(self, k: int) -> Lin:
        return Lin({v: a * k for v, a in self.co.items()}, self.c * k)

    def subst(self, v: int, by: Lin) -> Lin:
        a = self.co.get(v)
        if not a:
            return self
        rest = Lin({w: b for w, b in self.co.items() if w != v}, self.c)
        return rest + by.scale(a)

    @property
    def is_constant(self) -> bool:
        return not self.co


@dataclass
class _System:
    """Equalities ``lin == 0`` and inequalities ``lin >= 0`` over integer variables."""

    nvars: int = 0
    eqs: list[Lin] = field(default_factory=list)
    ineqs: list[Lin] = field(default_factory=list)

    def new_var(self) -> int:
        self.nvars += 1
        return self.nvars - 1

    def copy(self) -> _System:
        return _System(self.nvars, list(self.eqs), list(self.ineqs))


class _Reduced:
    """A system whose equalities have been eliminated: inequalities over the
    remaining variables, and the substitutions made (to rewrite further forms)."""

    def __init__(self, nvars: int, ineqs: list[Lin], subs: list[tuple[int, Lin]]) -> None:
        self.nvars = nvars
        self.ineqs = ineqs
        self.subs = subs

    def rewrite(self, lin: Lin) -> Lin:
        for v, by in self.subs:
            lin = lin.subst(v, by)
        return lin


def _eliminate_equalities(nvars: int, eqs: list[Lin], ineqs: list[Lin],
                          subs: list[tuple[int, Lin]] | None = None) -> _Reduced | None:
    """Exact integer elimination of the equalities; None if they have no integer solution."""
    subs = list(subs or [])
    eqs = list(eqs)
    ineqs = list(ineqs)
    while eqs:
        e = eqs.pop()
        if e.is_constant:
            if e.c != 0:
                return None
            continue
        g = 0
        for a in e.co.values():
            g = math.gcd(g, a)
        if e.c % g:
            return None  # the GCD test
        e = Lin({v: a // g for v, a in e.co.items()}, e.c // g)
        unit = next((v for v, a in e.co.items() if abs(a) == 1), None)
        if unit is not None:
            a = e.co[unit]
            # a*x + rest == 0  =>  x = -a*rest  (a is +-1)
            rest = Lin({v: b for v, b in e.co.items() if v != unit}, e.c)
            by = rest.scale(-a)
        else:
            # Euclid step: with a_k the smallest coefficient (made positive),
            # x_k = y - sum(q_i x_i), q_i = a_i // a_k, a unimodular change of
            # variables leaving coefficients a_i mod a_k < a_k on the others.
            k = min(e.co, key=lambda v: abs(e.co[v]))
            if e.co[k] < 0:
                e = e.scale(-1)
            ak = e.co[k]
            y = nvars
            nvars += 1
            by = Lin.var(y) - Lin({v: b // ak for v, b in e.co.items() if v != k})
            unit = k
            eqs.append(e.subst(k, by))
        subs.append((unit, by))
        eqs = [x.subst(unit, by) for x in eqs]
        ineqs = [x.subst(unit, by) for x in ineqs]
    return _Reduced(nvars, ineqs, subs)


def _normalise(lin: Lin) -> Lin | bool:
    """GCD-tighten ``lin >= 0``; True if trivially true, False if trivially false."""
    if lin.is_constant:
        return lin.c >= 0
    g = 0
    for a in lin.co.values():
        g = math.gcd(g, a)
    if g == 1:
        return lin
    return Lin({v: a // g for v, a in lin.co.items()}, lin.c // g)  # floor: integer cut


def _fourier_motzkin(ineqs: list[Lin], limit: int = _FM_LIMIT) -> bool:
    """False if ``ineqs`` (all ``>= 0``) certainly have no integer solution;
    True if they may have one (or the elimination grew too big)."""
    return _fourier_motzkin_of(tuple((tuple(sorted(x.co.items())), x.c) for x in ineqs), limit)


@lru_cache(maxsize=1 << 14)
def _fourier_motzkin_of(system: tuple, limit: int) -> bool:
    """:func:`_fourier_motzkin` of the inequalities given by value (each
    its sorted (variable, coefficient) pairs and constant), kept: the tests
    of a loop nest, and of the same nest in trial lowerings and later
    passes, pose the same systems again and again (an -O3 compile of
    ResNet-18 poses 692 distinct systems in 11,855 calls). The elimination
    does not depend on the order of a form's terms."""
    return _eliminate_inequalities([Lin(dict(co), c) for co, c in system], limit)


def _eliminate_inequalities(ineqs: list[Lin], limit: int) -> bool:
    cons: dict[tuple, int] = {}

    def add(lin: Lin) -> bool:
        n = _normalise(lin)
        if n is True:
            return True
        if n is False:
            return False
        key = tuple(sorted(n.co.items()))
        old = cons.get(key)
        if old is None or n.c < old:
            cons[key] = n.c
            neg = tuple((v, -a) for v, a in key)
            other = cons.get(neg)
            if other is not None and n.c + other < 0:  # lin >= -c and -lin >= -c'
                return False
        return True

    for x in ineqs:
        if not add(x):
            return False
    while cons:
        if len(cons) > limit:
            return True
        pos: dict[int, int] = {}
        neg: dict[int, int] = {}
        for key in cons:
            for v, a in key:
                (pos if a > 0 else neg)[v] = (pos if a > 0 else neg).get(v, 0) + 1
        variables = set(pos) | set(neg)
        if not variables:
            return True
        v = min(variables, key=lambda w: pos.get(w, 0) * neg.get(w, 0) - pos.get(w, 0)
                - neg.get(w, 0))
        lowers, uppers, rest = [], [], []
        for key, c in cons.items():
            co = dict(key)
            a = co.get(v, 0)
            lin = Lin(co, c)
            (lowers if a > 0 else uppers if a < 0 else rest).append(lin)
        cons = {}
        for lin in rest:
            if not add(lin):
                return False
        for lo in lowers:
            for up in uppers:
                a, b = lo.co[v], -up.co[v]
                if not add(lo.scale(b) + up.scale(a)):
                    return False
    return True


def _feasible(nvars: int, eqs: list[Lin], ineqs: list[Lin]) -> bool:
    red = _eliminate_equalities(nvars, eqs, ineqs)
    return red is not None and _fourier_motzkin(red.ineqs)


# --------------------------------------------------------------------------
# Building the system for a pair of access instances
# --------------------------------------------------------------------------

class _Problem:
    """The integer system of two access instances; loops in ``private`` get one
    iteration variable per instance, all others are shared."""

    def __init__(self, private: set[int]) -> None:
        self.sys = _System()
        self.private = private
        self.shared: dict[int, Lin] = {}

    def instance(self, tag: str) -> _Instance:
        return _Instance(self, tag)


class _Instance:
    def __init__(self, problem: _Problem, tag: str) -> None:
        self.p = problem
        self.tag = tag
        self.vars: dict[int, Lin] = {}
        self.compounds: dict[tuple, Lin] = {}

    # -- values -------------------------------------------------------------
    def _is_private(self, v: Value) -> bool:
        """Does v vary between the instances (defined inside the analysed region)?"""
        if isinstance(v, BlockArgument):
            loop = _loop_of_iv(v)
            return loop is not None and id(loop) in self.p.private
        if isinstance(v, Result):
            owner = v.owner
            return id(owner) in self.p.private or any(
                id(a) in self.p.private for a in ancestors(owner))
        return False

    def value(self, v: Value) -> Lin:
        table = self.vars if self._is_private(v) else self.p.shared
        hit = table.get(id(v))
        if hit is not None:
            return hit
        if isinstance(v, Result) and v.owner.isa(CONST):
            c = v.owner.args[0] if v.owner.args else None
            if isinstance(c, Expr) and c.is_constant:
                table[id(v)] = Lin(c=c.const)
                return table[id(v)]
        lin = table[id(v)] = Lin.var(self.p.sys.new_var())
        loop = _loop_of_iv(v) if isinstance(v, BlockArgument) else None
        if loop is not None:
            self._domain(loop, lin)
        elif isinstance(v, Result):
            lo_hi = _symbol_range(v)
            if lo_hi is not None:
                self.ge(lin - lo_hi[0])
                self.ge(Lin(c=lo_hi[1]) - lin)
        return lin

    def _domain(self, loop: Instruction, x: Lin) -> None:
        lb, ub = self.expr(_bound(loop, 0)), self.expr(_bound(loop, 1))
        step = attr_or_default(loop, "step")
        if step == 1:
            self.ge(x - lb)
        else:  # x = lb + step*t, t >= 0
            t = Lin.var(self.p.sys.new_var())
            self.p.sys.eqs.append(x - lb - t.scale(step))
            self.ge(t)
        self.ge(ub - x - 1)

    # -- expressions -------------------------------------------------------------
    def expr(self, e: Expr) -> Lin:
        out = Lin(c=e.const)
        for atom, coef in e.terms:
            term = self._compound(atom) if isinstance(atom, Compound) else self.value(atom)
            out = out + term.scale(coef)
        return out

    def _compound(self, atom: Compound) -> Lin:
        key = atom.key()
        hit = self.compounds.get(key)
        if hit is not None:
            return hit
        args = [self.expr(a) for a in atom.args]
        new = Lin.var(self.p.sys.new_var())
        d = atom.divisor
        if atom.kind in ("floordiv", "mod"):  # d*q <= e <= d*q + d - 1
            self.ge(args[0] - new.scale(d))
            self.ge(new.scale(d) + (d - 1) - args[0])
            result = new if atom.kind == "floordiv" else args[0] - new.scale(d)
        elif atom.kind == "ceildiv":  # d*q - d + 1 <= e <= d*q
            self.ge(new.scale(d) - args[0])
            self.ge(args[0] - new.scale(d) + (d - 1))
            result = new
        elif atom.kind == "min":  # m <= every argument (m = one of them is left out)
            for a in args:
                self.ge(a - new)
            result = new
        else:  # max
            for a in args:
                self.ge(new - a)
            result = new
        self.compounds[key] = result
        return result

    def ge(self, lin: Lin) -> None:
        self.p.sys.ineqs.append(lin)

    def eq(self, lin: Lin) -> None:
        self.p.sys.eqs.append(lin)

    def guard(self, c: Constraint, negated: bool) -> None:
        rel = c.rel
        if negated:
            rel = {">=": "<", "<=": ">", ">": "<=", "<": ">=", "==": "!=", "!=": "=="}[rel]
        d = self.expr(c.lhs) - self.expr(c.rhs)
        if rel == ">=":
            self.ge(d)
        elif rel == ">":
            self.ge(d - 1)
        elif rel == "<=":
            self.ge(d.scale(-1))
        elif rel == "<":
            self.ge(d.scale(-1) - 1)
        elif rel == "==":
            self.eq(d)
        # "!=" is a disjunction: left out (sound)

    def subscript(self, ix: Expr | Range | None) -> Lin | None:
        if ix is None:
            return None
        if isinstance(ix, Range):  # some element of [lo, hi)
            t = Lin.var(self.p.sys.new_var())
            self.ge(t - self.expr(ix.lo))
            self.ge(self.expr(ix.hi) - 1 - t)
            return t
        return self.expr(ix)


def _loop_of_iv(v: BlockArgument) -> Instruction | None:
    region = v.owner.parent
    owner = region.parent if region is not None else None
    if isinstance(owner, Instruction) and owner.isa(*LOOP_OPS):
        return owner
    return None


def _bound(loop: Instruction, i: int) -> Expr:
    return Expr.of(loop.args[i])


def _symbol_range(v: Result) -> tuple[int, int] | None:
    if v.owner.isa(CPE_ID):
        return 0, module_target(v.owner).cpes - 1
    if v.owner.isa(CHUNK):
        return 0, int(v.owner.attrs.get("extent", 0))
    if v.owner.isa(DYN_INDEX):
        return 0, int(v.owner.attrs.get("bound", 1)) - 1
    return None


def _alloc_loops(buffer: Value, private: set[int]) -> list[Instruction]:
    """Private loops around the ldm_alloc defining ``buffer`` (a fresh buffer per iteration)."""
    if isinstance(buffer, Result) and buffer.owner.isa(LDM_ALLOC):
        return [a for a in ancestors(buffer.owner) if a.isa(*LOOP_OPS) and id(a) in private]
    return []


@dataclass
class _PairSystem:
    problem: _Problem
    a: _Instance
    b: _Instance
    exact: bool  # False: an unmodelled op is involved (every question answers "maybe")


def _pair(a: MemoryAccess, b: MemoryAccess, private: set[int]) -> _PairSystem:
    p = _Problem(private)
    ia, ib = p.instance("a"), p.instance("b")
    for inst, acc in ((ia, a), (ib, b)):
        for loop in acc.loops:  # every enclosing loop runs (an empty loop runs nothing)
            inst.value(loop.regions[0].blocks[0].args[0])
        for c, neg in acc.guards:
            inst.guard(c, neg)
    exact = a.buffer is not None and b.buffer is not None
    if exact and a.indices is not None and b.indices is not None:
        for x, y in zip(a.indices, b.indices, strict=True):
            lx, ly = ia.subscript(x), ib.subscript(y)
            if lx is not None and ly is not None:
                p.sys.eqs.append(lx - ly)
    if exact:  # the same allocation of a per-iteration LDM buffer: the same iteration
        for loop in _alloc_loops(a.buffer, private):
            p.sys.eqs.append(ia.value(_iv(loop)) - ib.value(_iv(loop)))
    return _PairSystem(p, ia, ib, exact)


def _iv(loop: Instruction) -> BlockArgument:
    return loop.regions[0].blocks[0].args[0]


def _private_loops(roots: Iterable[Instruction]) -> set[int]:
    return {id(i) for r in roots for i in r.walk() if i.isa(*LOOP_OPS)}


# --------------------------------------------------------------------------
# Questions
# --------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Dependence:
    """A possible dependence between ``first`` and ``second`` (in program text order
    when they differ; the same access twice for two instances of one access).

    ``loops`` are the loops compared; ``directions`` the feasible sign vectors of
    (iteration of ``second``'s instance - iteration of ``first``'s) per loop:
    ``<`` means ``first`` runs at a smaller induction value than ``second``.
    ``distance`` holds the difference per loop where the subscripts fix it (None
    where they do not). ``exact`` is False when an op with unknown memory
    effects is involved or a constraint could not be expressed precisely.
    """

    first: MemoryAccess
    second: MemoryAccess
    loops: tuple[Instruction, ...]
    directions: frozenset[tuple[str, ...]]
    distance: tuple[int | None, ...]
    exact: bool = True

    def describe(self) -> str:
        return f"{self.first.describe()} and {self.second.describe()}"


def _conflicting_pairs(accesses_a: Sequence[MemoryAccess], accesses_b: Sequence[MemoryAccess] | None
                       ) -> Iterable[tuple[MemoryAccess, MemoryAccess]]:
    """Pairs that may conflict: within one list (each unordered pair, and each write
    with itself), or across two lists."""
    if accesses_b is None:
        for i, a in enumerate(accesses_a):
            for b in accesses_a[i:]:
                if may_conflict(a, b):
                    yield a, b
    else:
        for a in accesses_a:
            for b in accesses_b:
                if may_conflict(a, b):
                    yield a, b


def _delta(ps: _PairSystem, loop_a: Instruction, loop_b: Instruction) -> Lin:
    """Iteration of the b-instance of loop_b minus that of the a-instance of loop_a."""
    return ps.b.value(_iv(loop_b)) - ps.a.value(_iv(loop_a))


def _direction_constraint(delta: Lin, d: str) -> tuple[list[Lin], list[Lin]]:
    if d == "=":
        return [delta], []
    if d == "<":
        return [], [delta - 1]
    return [], [delta.scale(-1) - 1]


def _directions(ps: _PairSystem, deltas: list[Lin]) -> tuple[set[tuple[str, ...]], tuple]:
    """Feasible direction vectors for the deltas (hierarchically, pruning
    infeasible prefixes), and the constant distances."""
    n = len(deltas)
    if not ps.exact:
        return set(itertools.product(DIRECTIONS, repeat=n)), (None,) * n
    s = ps.problem.sys
    red = _eliminate_equalities(s.nvars, s.eqs, s.ineqs)
    if red is None or not _fourier_motzkin(red.ineqs):
        return set(), (None,) * n
    rewritten = [red.rewrite(d) for d in deltas]
    distance = tuple(r.c if r.is_constant else None for r in rewritten)
    out: set[tuple[str, ...]] = set()

    def walk(level: int, prefix: tuple[str, ...], eqs: list[Lin], ineqs: list[Lin]) -> None:
        if level == n:
            out.add(prefix)
            return
        r = rewritten[level]
        choices = DIRECTIONS
        if r.is_constant:
            choices = ("<",) if r.c > 0 else ("=",) if r.c == 0 else (">",)
        for d in choices:
            e2, i2 = _direction_constraint(r, d)
            if r.is_constant or _feasible_reduced(red, eqs + e2, ineqs + i2):
                walk(level + 1, prefix + (d,), eqs + e2, ineqs + i2)

    walk(0, (), [], [])
    return out, distance


def _feasible_reduced(red: _Reduced, eqs: list[Lin], ineqs: list[Lin]) -> bool:
    r2 = _eliminate_equalities(red.nvars, eqs, red.ineqs + ineqs)
    return r2 is not None and _fourier_motzkin(r2.ineqs)


def _feasible_with(ps: _PairSystem, eqs: list[Lin], ineqs: list[Lin]) -> bool:
    if not ps.exact:
        return True
    s = ps.problem.sys
    return _feasible(s.nvars, s.eqs + eqs, s.ineqs + ineqs)


def direction_vectors(a: MemoryAccess, b: MemoryAccess, loops: Sequence[Instruction]
                      ) -> Dependence | None:
    """The dependence between ``a`` and ``b`` over ``loops`` (loops enclosing both,
    outermost first, e.g. a perfect nest): loops around ``loops[0]`` are held at
    one iteration, ``loops`` and everything inside them vary per instance. None
    if the two never touch the same element (or neither writes)."""
    if not may_conflict(a, b):
        return None
    ps = _pair(a, b, _private_loops(loops[:1]))
    dirs, dist = _directions(ps, [_delta(ps, lp, lp) for lp in loops])
    if not dirs:
        return None
    return Dependence(a, b, tuple(loops), frozenset(dirs), dist, ps.exact)


def nest_dependences(loops: Sequence[Instruction]) -> list[Dependence]:
    """Every possible dependence among the accesses inside a loop nest
    (``loops`` outermost first, each enclosing the next), with its direction
    vectors over the nest."""
    accesses = memory_accesses(loops[-1].regions[0].blocks[0].instructions)
    out = []
    for a, b in _conflicting_pairs(accesses, None):
        dep = direction_vectors(a, b, loops)
        if dep is not None:
            out.append(dep)
    return out


def carried_dependence(loop: Instruction) -> Dependence | None:
    """A dependence between two different iterations of ``loop`` (in one iteration
    of the loops around it), or None when its iterations are independent — the
    condition for running them in parallel."""
    accesses = memory_accesses(loop.regions[0].blocks[0].instructions)
    private = _private_loops([loop])
    for a, b in _conflicting_pairs(accesses, None):
        ps = _pair(a, b, private)
        delta = _delta(ps, loop, loop)
        if _feasible_with(ps, [], [delta - 1]) or _feasible_with(ps, [], [delta.scale(-1) - 1]):
            dirs, dist = _directions(ps, [delta])
            return Dependence(a, b, (loop,), frozenset(dirs - {("=",)}), dist, ps.exact)
    return None


def fusion_preventing_dependence(first: Instruction, second: Instruction,
                                 parallel: bool = False) -> Dependence | None:
    """For two loops with the same iteration space, ``first`` running wholly before
    ``second``: a dependence that fusing them (iteration i of both bodies, in
    order, for each i) would reverse — an iteration of ``second`` touching what a
    *later* iteration of ``first`` touches, one of them writing. With
    ``parallel``, any dependence between *different* iterations counts (the fused
    loop would not be parallel). ``loops`` of the result are (first, second)."""
    acc_a = memory_accesses(first.regions[0].blocks[0].instructions)
    acc_b = memory_accesses(second.regions[0].blocks[0].instructions)
    private = _private_loops([first, second])
    for a, b in _conflicting_pairs(acc_a, acc_b):
        ps = _pair(a, b, private)
        delta = _delta(ps, first, second)  # i_second - i_first
        later = _feasible_with(ps, [], [delta.scale(-1) - 1])  # first's iteration > second's
        earlier = parallel and _feasible_with(ps, [], [delta - 1])
        if later or earlier:
            dirs, dist = _directions(ps, [delta])
            return Dependence(a, b, (first, second), frozenset(dirs), dist, ps.exact)
    return None
