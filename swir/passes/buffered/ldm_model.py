"""The LDM model both strategies of -ldm-plan share (:mod:`swir.passes.buffered.ldm_plan`,
greedy, and :mod:`swir.passes.buffered.ldm_search`): a nest's model (:class:`Nest`),
buffer sizing (:func:`size_buffers`), loop order (:func:`order_loops`) and the
plan that rewrites the nest (:class:`Plan`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

from swir.analysis.correlation import COMP, SIZE, Classification, correlation
from swir.analysis.dependence import carried_dependence, nest_dependences
from swir.analysis.placement import copy_level, executions
from swir.diagnostics import Diagnostic
from swir.ir.affine import Compound, Expr
from swir.ir.builder import Builder
from swir.ir.core import Access, Function, Instruction, Range, Value
from swir.ir.types import BufType, LDMType, ldm_slot
from swir.ops import CALL, COPY_IN, COPY_OUT, FOR, LOAD, PARALLEL, STORE
from swir.ops.registry import OpDef
from swir.ops.util import attr_or_default
from swir.passes.manager import PassFailure
from swir.target import Target, default_target


# Why Constraint 1 loads a tensor directly (the search re-decides it per plan).
SINGLE = "its tile is a single element"


@dataclass(frozen=True)
class SearchContext:
    """Where a nest is and what constrains its plan, for the search."""

    kernel: Function
    index: int          # which top-level loop of the kernel
    capacity: int       # LDM bytes for tiles
    cpes: int
    budget: float       # seconds
    ldm_size: int
    double: bool        # the -ldm-plan option double-buffer
    target: Target = field(default_factory=default_target)
    # padded copies to be read from their source (pad-in-load): per scratch
    # parameter, (its index, the source's parameter index or global name,
    # offsets, fill)
    pads: tuple = ()
    resident: bool = True      # plans keep read-alike tensors whole (Plan.keep_resident)
    # -insert-dma's strided-broadcast, which the search's measurements run with
    strided_broadcast: bool = True
    # the indices of the loops that carry a dependence, when known
    # (Nest.dependences; None: the search asks the dependence test)
    serial: frozenset[int] | None = None


# -- the nest model ------------------------------------------------------------------------

@dataclass(eq=False)
class LoopVar:
    iv: Value
    name: str
    extent: int
    loop: Instruction
    reduction: bool = False
    tile: int = 1

    @property
    def ntiles(self) -> int:
        return -(-self.extent // self.tile)


@dataclass(eq=False)
class Tensor:
    """A buffer the nest accesses, with one linear part per dimension (every
    access must share it) and the spread of the constant offsets."""

    base: Value
    coefs: list[dict[Value, int]]     # per dimension, outermost first
    cmin: list[int]
    cmax: list[int]
    read: bool = False
    written: bool = False
    direct: str | None = None         # why it is accessed in main memory

    @property
    def name(self) -> str:
        return self.base.name or "?"

    @property
    def has_holes(self) -> bool:
        """Whether the tile may hold elements the nest never writes: a stride
        above 1, two variables in one dimension, one variable in two, constant
        offsets. Copying such a tile out would overwrite the holes (which
        another CPE may be writing), so written tensors with holes stay in
        main memory."""
        used = [v for c in self.coefs for v in c]
        return len(used) != len(set(used)) or any(
            len(c) > 1 or any(abs(k) > 1 for k in c.values()) or lo != hi
            for c, lo, hi in zip(self.coefs, self.cmin, self.cmax))

    @property
    def copied_in(self) -> bool:
        return self.read

    @property
    def shape(self) -> tuple[int, ...]:
        return self.base.type.shape

    @cached_property
    def extent_terms(self) -> list[tuple[int, list[tuple[Value, int]]]]:
        """Per dimension, the tile extent's constant part and (variable,
        |coefficient|) terms (the plan search asks for extents millions of
        times; coefs and offsets are final once the nest is parsed)."""
        return [(1 + hi - lo, [(v, abs(c)) for v, c in coefs.items()])
                for coefs, lo, hi in zip(self.coefs, self.cmin, self.cmax)]

    def extent(self, d: int, tiles: dict[Value, int]) -> int:
        const, terms = self.extent_terms[d]
        return const + sum(c * (tiles[v] - 1) for v, c in terms)

    def extents(self, tiles: dict[Value, int]) -> list[int]:
        """The tile's extent in each dimension, outermost first."""
        return [const + sum(c * (tiles[v] - 1) for v, c in terms)
                for const, terms in self.extent_terms]

    def elements(self, tiles: dict[Value, int]) -> int:
        return math.prod(self.extents(tiles))

    def bytes(self, tiles: dict[Value, int]) -> int:
        return self.elements(tiles) * self.base.type.element.bytes

    def segments(self, tiles: dict[Value, int]) -> int:
        """Contiguous runs in one copy of the tile (the DMAs it takes)."""
        return runs_of(self.extents(tiles), self.shape)


def runs_of(ext: list[int], shape: tuple[int, ...]) -> int:
    """Contiguous runs in a tile of extents ``ext`` of a row-major array of
    ``shape``: the dimensions outside the innermost partial one multiply."""
    runs = 1
    whole = True
    for d in reversed(range(len(ext))):
        if not whole:
            runs *= ext[d]
        whole = whole and ext[d] >= shape[d]
    return runs


@dataclass(eq=False)
class Nest:
    top: Instruction
    band: list[Instruction]
    red: list[Instruction]
    pre: list[Instruction]
    body: list[Instruction]
    post: list[Instruction]
    vars: list[LoopVar]
    tensors: list[Tensor]
    output: Value | None
    initialised: bool = False
    double: bool = False      # read-only tiles count twice (double buffering)
    # The plan search's answers that depend on a few of the tiles, kept for
    # the tilings that share them (ldm_search): the per-point cycles of pre
    # and post by the output loops' tiles (planning a tile's vector code is
    # costly), the write grain by the parallel loops and their tiles.
    memo: dict = field(default_factory=dict, repr=False)

    @staticmethod
    def parse(top: Instruction, legal: bool = False) -> tuple[Nest | None, str]:
        """The nest at ``top``, or None and why it cannot be planned.
        ``legal``: the caller knows tiling it is legal (a copy of a nest
        already checked), so the dependence test is skipped."""
        band, why = _band(top)
        if band is None:
            return None, why
        items = band[-1].regions[0].blocks[0].instructions
        inner = [i for i in items if i.regions]
        red: list[Instruction] = []
        if any(i.isa(CALL) for i in top.walk()):
            return None, "it calls a function (its memory effects stay in main memory)"
        if not inner:
            pre, body, post = [], list(items), []
        elif len(inner) == 1 and inner[0].isa(FOR):
            red, why = _band(inner[0])
            if red is None:
                return None, why
            k = items.index(inner[0])
            pre, post = list(items[:k]), list(items[k + 1:])
            body = list(red[-1].regions[0].blocks[0].instructions)
            if any(i.regions for i in body):
                return None, "the reduction band is not innermost"
        else:
            return None, "its body holds more than one inner loop nest"
        stored = [i.args[1].base for i in body if i.isa(STORE)]
        output = stored[-1] if stored else None
        # Values the body or the finalisation use from the code before the
        # inner band are recomputed there (they are loads and arithmetic).
        for part in ("body", "post"):
            stmts_ = body if part == "body" else post
            need, why = _needed(pre, stmts_, body + pre)
            if why:
                return None, why
            if part == "body":
                body = need + body
            else:
                post = need + post
        pre = _live(pre)
        if red and _writes_with(body, output, red):
            # The inner loops index the output: not a reduction but more
            # output loops (gather's trailing axes). One perfect nest then.
            if any(i.isa(STORE) for i in pre + post):
                return None, "stores both inside and outside its inner loops"
            band, red, pre, post = band + red, [], [], []
        vars_ = [LoopVar(lp.regions[0].blocks[0].args[0], _name(lp), lp.args[1].const, lp)
                 for lp in band]
        vars_ += [LoopVar(lp.regions[0].blocks[0].args[0], _name(lp), lp.args[1].const, lp,
                          reduction=True) for lp in red]
        ivs = {v.iv for v in vars_}
        why = "" if legal else _illegal(band, red, output)
        if why:
            return None, why
        tensors = _tensors(pre + body + post, ivs)
        nest = Nest(top, band, red, pre, body, post, vars_, tensors, output)
        nest.initialised = any(i.isa(STORE) and i.args[1].base is output for i in pre)
        return nest, ""

    def dependences(self) -> tuple[str, frozenset[int]]:
        """What the dependence test says of the nest (parsed with
        ``legal=True``): why tiling it is illegal ("" when legal) and, when
        legal, the indices of its loops that carry a dependence (never spread
        over the CPEs)."""
        why = _illegal(self.band, self.red, self.output)
        if why:
            return why, frozenset()
        return "", frozenset(i for i, v in enumerate(self.vars)
                             if carried_dependence(v.loop) is not None)

    def buffered(self) -> list[Tensor]:
        return [t for t in self.tensors if t.direct is None]

    def tiles(self) -> dict[Value, int]:
        return {v.iv: v.tile for v in self.vars}

    def ldm_bytes(self) -> int:
        tiles = self.tiles()
        return sum(self.slot_bytes(t, t.bytes(tiles)) for t in self.buffered())

    def slot_bytes(self, t: Tensor, nbytes: int) -> int:
        """The LDM a buffer of ``nbytes`` for ``t``'s tile occupies: each
        starts LDM_ALIGN-aligned, and read-only tiles count twice when
        double-buffered."""
        return ldm_slot(nbytes) * (2 if self.double and t.read and not t.written else 1)


def _needed(pre: list[Instruction], stmts: list[Instruction], writers: list[Instruction]
            ) -> tuple[list[Instruction], str]:
    """The instructions of ``pre`` that ``stmts`` use (transitively), to be
    recomputed in front of them; refused if one reads memory the nest writes."""
    defs = {r: i for i in pre for r in i.results}
    need: set[Instruction] = set()
    work = [v for i in stmts for v in i.operands if v in defs]
    while work:
        inst = defs[work.pop()]
        if inst not in need:
            need.add(inst)
            work.extend(v for v in inst.operands if v in defs)
    written = {i.args[1].base for i in writers if i.isa(STORE)}
    for inst in need:
        if inst.isa(LOAD) and inst.args[0].base in written:
            return [], "it reads, before its inner loops, memory those loops write"
    return [i for i in pre if i in need], ""


def _illegal(band: list[Instruction], red: list[Instruction], output: Value | None
             ) -> str:
    """Tiling, reordering and spreading the output loops is legal when no
    dependence crosses output iterations; reordering reduction loops when the
    only dependences they carry are the accumulation into the output."""
    loops = band + red
    for dep in nest_dependences(loops):
        accumulation = dep.first.buffer is output and dep.second.buffer is output \
            and output is not None
        for dv in dep.directions:
            if any(d != "=" for d in dv[:len(band)]):
                return "a dependence crosses its output loops"
            if any(d != "=" for d in dv[len(band):]) and not accumulation:
                return "a dependence other than the accumulation crosses its reduction loops"
    return ""


def _live(stmts: list[Instruction]) -> list[Instruction]:
    """The statements that contribute to a store among ``stmts``."""
    keep: set[Instruction] = set()
    for inst in reversed(stmts):
        if inst.isa(STORE) or any(u in keep for r in inst.results for u in r.users):
            keep.add(inst)
    return [i for i in stmts if i in keep]


def _writes_with(body: list[Instruction], output: Value | None,
                 loops: list[Instruction]) -> bool:
    ivs = {lp.regions[0].blocks[0].args[0] for lp in loops}
    return any(i.isa(STORE) and i.args[1].base is output and
               any(v in ivs for e in i.args[1].indices for v in e.values())
               for i in body)


def top_loops(f: Function) -> list[Instruction]:
    """The kernel's top-level loop nests, in order (what -ldm-plan plans)."""
    return [i for i in f.body.blocks[0].instructions if i.isa(FOR, PARALLEL)]


def _name(loop: Instruction) -> str:
    return loop.regions[0].blocks[0].args[0].name or "i"


def _band(top: Instruction) -> tuple[list[Instruction] | None, str]:
    band = []
    cur = top
    while True:
        if not cur.isa(FOR):
            return None, f"'{cur.opname}' loops are not planned"
        lb, ub = Expr.of(cur.args[0]), Expr.of(cur.args[1])   # a bare bound is a Value
        if not (lb.is_constant and lb.const == 0 and ub.is_constant and ub.const >= 1
                and attr_or_default(cur, "step") == 1):
            return None, "loop bounds are not 0 to a constant with step 1"
        band.append(cur)
        items = cur.regions[0].blocks[0].instructions
        if len(items) == 1 and items[0].regions:
            if not items[0].isa(FOR):
                return None, f"'{items[0].opname}' inside the nest is not planned"
            cur = items[0]
            continue
        if any(i.regions and not i.isa(FOR) for i in items):
            return None, "guards inside the nest are not planned"
        return band, ""


def _tensors(stmts: list[Instruction], ivs: set[Value]) -> list[Tensor]:
    found: dict[Value, Tensor] = {}
    for inst in stmts:
        if not inst.isa(LOAD, STORE):
            continue
        acc = inst.args[0] if inst.isa(LOAD) else inst.args[1]
        if not isinstance(acc, Access) or not isinstance(acc.base.type, BufType):
            continue
        coefs, consts, why = [], [], None
        for e in acc.indices:
            lin: dict[Value, int] = {}
            for atom, c in e.terms:
                if isinstance(atom, Compound) or atom not in ivs:
                    why = "a subscript is not affine in the nest's loop variables"
                else:
                    lin[atom] = c
            coefs.append(lin)
            consts.append(e.const)
        t = found.get(acc.base)
        if t is None:
            t = found[acc.base] = Tensor(acc.base, coefs, list(consts), list(consts))
        elif t.direct is None and why is None and coefs != t.coefs:
            why = "its accesses use different strides"
        else:
            t.cmin = [min(a, b) for a, b in zip(t.cmin, consts)]
            t.cmax = [max(a, b) for a, b in zip(t.cmax, consts)]
        if why and t.direct is None:
            t.direct = why
        t.read |= inst.isa(LOAD)
        t.written |= inst.isa(STORE)
    for t in found.values():
        if t.written and t.direct is None and t.has_holes:
            t.direct = "its tile would have holes that other CPEs may write"
    return list(found.values())


# -- Algorithm 1: buffer sizes --------------------------------------------------------------

def _pow2_below(n: int) -> int:
    return 1 << (n.bit_length() - 1) if n > 1 else 1


def size_buffers(nest: Nest, capacity: int, init: int = 64,
                 where: Instruction | None = None) -> list[tuple[str, dict[str, int], int]]:
    """Algorithm 1. Sets every LoopVar.tile; returns the steps taken
    (phase, tiles by name, LDM bytes) for tests and remarks."""
    byvar = {v.iv: v for v in nest.vars}
    tensors = {t.name: t for t in nest.buffered()}
    dims = correlation({n: [Expr(tuple(c.items()), 0) for c in t.coefs]
                        for n, t in tensors.items()}, byvar)
    free = {v.iv for v in nest.vars if v.extent > 1}
    cls = Classification(dims, free, [v.iv for v in nest.vars])
    for v in nest.vars:
        v.tile = 1
    steps: list[tuple[str, dict[str, int], int]] = []

    def use() -> int:
        return nest.ldm_bytes()

    def log(phase: str) -> None:
        steps.append((phase, {v.name: v.tile for v in nest.vars}, use()))

    if use() > capacity:
        _too_small(nest, capacity, where)

    def candidates() -> list[Value]:
        kinds = cls.classify()
        size = sorted(kinds[SIZE], key=lambda v: byvar[v].tile)
        comp = sorted(kinds[COMP], key=cls.tensors_using)
        return size + comp

    # Initial phase: each candidate once, at min(range, init); halve (this one,
    # then the ones before it) while over capacity; UPDATE may make new candidates.
    done: set[Value] = set()
    while True:
        todo = [v for v in candidates() if v not in done]
        if not todo:
            break
        placed: list[LoopVar] = []
        for iv in todo:
            v = byvar[iv]
            done.add(iv)
            v.tile = min(v.extent, init)
            if v.tile == v.extent:
                cls.update(iv, up=True)
            placed.append(v)
            while use() > capacity:
                victim = next((p for p in reversed(placed) if p.tile > 1), None)
                if victim is None:
                    _too_small(nest, capacity, where)
                if victim.tile == victim.extent:
                    cls.update(victim.iv, up=False)
                victim.tile = _pow2_below(victim.tile) if victim.tile & (victim.tile - 1) \
                    else victim.tile // 2
            log("initial")
    # Expansion phase: double the candidate with the smallest tile while it fits.
    while True:
        cands = [v for v in candidates() if byvar[v].tile < byvar[v].extent]
        if not cands:
            break
        v = byvar[min(cands, key=lambda iv: byvar[iv].tile)]
        old = v.tile
        v.tile = min(2 * old, v.extent)
        if use() > capacity:
            v.tile = old
            break
        if v.tile == v.extent:
            cls.update(v.iv, up=True)
        log("expand")
    load_single_elements_directly(nest)
    return steps


def load_single_elements_directly(nest: Nest) -> None:
    """Constraint 1: a read-only tensor whose tile is one element is loaded directly."""
    tiles = nest.tiles()
    for t in nest.buffered():
        if t.read and not t.written and t.elements(tiles) == 1:
            t.direct = SINGLE


def _too_small(nest: Nest, capacity: int, where: Instruction | None) -> None:
    need = sum(t.base.type.element.bytes * math.prod(
        t.cmax[d] - t.cmin[d] + 1 for d in range(len(t.coefs))) for t in nest.buffered())
    names = ", ".join(f"%{t.name}" for t in nest.buffered())
    raise PassFailure([Diagnostic(
        f"-ldm-plan: even 1-element buffers for {names} need {need} bytes of LDM, more "
        f"than the {capacity} bytes available (ldm-size minus ldm-reserve)",
        where.loc if where is not None else None)])


# -- Algorithm 2, parallel distribution, and the rewrite --------------------------------------

@dataclass(eq=False)
class Plan:
    nest: Nest
    order: list[LoopVar]                 # tile loops, outermost first
    parallel: list[LoopVar]              # a prefix of order, fused into one parallel loop
    cpes: int
    levels: dict[Tensor, int] = field(default_factory=dict)
    out_level: int = 0
    # Tensors every tile reads alike, kept whole in LDM: copied at the top of
    # the parallel body, where -insert-dma fetches them once for all CPEs.
    resident: list[Tensor] = field(default_factory=list)

    @staticmethod
    def make(nest: Nest, cpes: int, order: list[LoopVar] | None = None,
             serial: set[LoopVar] | None = None, capacity: int | None = None) -> Plan:
        """The plan for the nest's tiles: ``order`` (default Algorithm 2's) and
        the parallel loops it allows; ``serial``: the loops that carry a
        dependence, if known (else the dependence test decides). With
        ``capacity`` (LDM bytes), read-only tensors the parallel loop does
        not move are kept whole in LDM where they fit (:meth:`keep_resident`)."""
        if serial is None:
            serial = {v for v in nest.vars if carried_dependence(v.loop) is not None}
        share_single_tile(nest, cpes, serial)
        order = order_loops(nest) if order is None else order
        par: list[LoopVar] = []
        count = 1
        for v in order:
            if v.reduction or v in serial or count >= cpes:
                break
            par.append(v)
            count *= v.ntiles
        plan = Plan(nest, order, par, cpes)
        floor = len(par)
        outer = [v.iv for v in order]
        for t in nest.buffered():
            plan.levels[t] = copy_level(corr(t), outer, floor)
        # A reduction's init and finalisation run where its tile is complete:
        # inside every output tile loop, outside every reduction tile loop.
        plan.out_level = max(floor, sum(1 for v in order if not v.reduction))
        for t in plan.levels:
            if plan._initialised(t):
                plan.levels[t] = plan.out_level
        if capacity is not None and math.prod(v.ntiles for v in par) > 1:
            plan.keep_resident(capacity)
        return plan

    def keep_resident(self, capacity: int) -> None:
        """A tensor the nest only reads, whose tiles the parallel loops do not
        move, is read alike by every CPE, tile after tile. Where its whole
        read region fits the LDM left, keep it: one copy at the top of the
        parallel body (most copies saved first), which -insert-dma turns into
        one broadcast for all CPEs."""
        nest, floor = self.nest, len(self.parallel)
        tiles, moved = nest.tiles(), {v.iv for v in self.parallel}
        trips = [v.ntiles for v in self.order]
        used = self.ldm_bytes()
        # The second buffers -insert-dma's double buffering would add (when
        # the plan did not count them already): a whole tensor must not take
        # the room they have.
        second = 0 if nest.double else sum(
            ldm_slot(t.bytes(tiles)) for t in self.levels
            if t.read and not t.written and not self._initialised(t))
        keep = used + second <= capacity
        shared = [t for t, lv in self.levels.items()
                  if lv > floor and t.copied_in and not t.written and not (corr(t) & moved)]
        for t in sorted(shared, key=lambda t: -executions(self.levels[t], trips) *
                        t.bytes(tiles)):
            tile = ldm_slot(t.bytes(tiles))
            extra = ldm_slot(t.bytes(self._whole(t))) - tile * (2 if nest.double else 1)
            after = second - (0 if nest.double else tile)
            if used + extra + (after if keep else 0) <= capacity:
                used += extra
                second = after
                self.resident.append(t)
                self.levels[t] = floor

    def ldm_bytes(self) -> int:
        """The LDM its buffers take (Nest.ldm_bytes, with whole tensors whole:
        fetched once, they are never double-buffered)."""
        double = self.nest.double
        return sum(ldm_slot(t.bytes(self._tiles(t))) *
                   (2 if double and t.read and not t.written and t not in self.resident else 1)
                   for t in self.nest.buffered())

    def _whole(self, t: Tensor) -> dict[Value, int]:
        """Tile sizes that cover the whole of t's read region."""
        return {v.iv: v.extent for v in self.nest.vars}

    def copies(self) -> int:
        trips = [v.ntiles for v in self.order]
        return sum(executions(lv, trips) * ((t.copied_in and not self._initialised(t)) + t.written)
                   for t, lv in self.levels.items())

    def _initialised(self, t: Tensor) -> bool:
        """A reduction's output is initialised in LDM, never copied in."""
        return bool(self.nest.red) and self.nest.initialised and t.base is self.nest.output

    def describe(self, kernel: str, capacity: int) -> str:
        ts = ", ".join(f"{v.name}={v.tile}" for v in self.nest.vars)

        def buffer(t: Tensor) -> str:
            if t.direct is not None:
                return f"%{t.name} direct ({t.direct})"
            whole = " whole (read alike by every tile)" if t in self.resident else ""
            return f"%{t.name} {_ldm_type(t, self._tiles(t))}{whole}"
        bufs = "; ".join(buffer(t) for t in self.nest.tensors)
        order = ", ".join(f"{v.name}o" for v in self.order) or "none (one tile)"
        par = "*".join(f"{v.name}o" for v in self.parallel)
        ntasks = math.prod(v.ntiles for v in self.parallel)
        par_text = f"{par} ({ntasks} tiles over {self.cpes} CPEs)" if par else "none"
        return (f"@{kernel}: tiles {ts}; LDM {self.ldm_bytes()} of {capacity} bytes; "
                f"tile loops {order}; parallel {par_text}; buffers {bufs}; "
                f"copies per call {self.copies()}")

    # -- rewrite ------------------------------------------------------------------------
    def rewrite(self) -> None:
        top = self.nest.top
        b = Builder(top.parent, before=top)
        self.env: dict[Value, Expr] = {}
        self.ldm: dict[Tensor, Value] = {}
        self.lo: dict[Tensor, list[Expr]] = {}
        self.ext: dict[Tensor, list[Expr]] = {}
        self.trip: dict[Value, Expr] = {}
        self.vo: dict[Value, Expr] = {v.iv: Expr.of(0) for v in self.nest.vars}
        self._open_parallel(b)
        top.erase()

    def _emit(self, pos: int, b: Builder) -> None:
        if pos == len(self.parallel):
            self._allocate(b)
        here = [t for t, lv in self.levels.items() if lv == pos]
        for t in here:
            self._bounds(t)
            if t.copied_in and not self._initialised(t):
                self._copy(b, t, COPY_IN)
        out_here = bool(self.nest.red) and pos == self.out_level
        if out_here:
            self._statements(b, self.nest.pre, [v for v in self.nest.vars if not v.reduction])
        if pos < len(self.order):
            v = self.order[pos]
            with b.loop(0, v.ntiles, name=f"{v.name}o") as iv:
                self.vo[v.iv] = Expr.of(iv)
                self._emit(pos + 1, b)
        else:
            self._statements(b, self.nest.body, self.nest.vars)
        if out_here:
            self._statements(b, self.nest.post, [v for v in self.nest.vars if not v.reduction])
        for t in here:
            if t.written:
                self._copy(b, t, COPY_OUT)

    def _open_parallel(self, b: Builder) -> None:
        """The CPE loop: the fused parallel tile loops, or, when no loop can be
        spread, one task (CPE 0 does the nest) so that LDM stays per CPE."""
        sizes = [v.ntiles for v in self.parallel]
        name = "".join(f"{v.name}" for v in self.parallel) + "o" if self.parallel else "task"
        attrs: dict = {"workers": self.cpes}
        reads = distinct_reads(self.nest)
        if reads is not None:
            attrs["reads"] = reads
        with b.loop(0, math.prod(sizes), kind="parallel", name=name, attrs=attrs) as p:
            rest = math.prod(sizes)
            for v, n in zip(self.parallel, sizes):
                rest //= n
                e = Expr.of(p).floordiv(rest) if rest > 1 else Expr.of(p)
                self.vo[v.iv] = e.mod(n) if v is not self.parallel[0] else e
            self._emit(len(self.parallel), b)

    def _inner_trip(self, v: LoopVar) -> Expr:
        if v.ntiles == 1 or v.extent % v.tile == 0:
            return Expr.of(v.tile)
        return Expr.minmax("min", [v.tile, Expr.of(v.extent) - self.vo[v.iv] * v.tile])

    def _allocate(self, b: Builder) -> None:
        for t in self.levels:
            self.ldm[t] = b.create_inst("ldm_alloc", types=[_ldm_type(t, self._tiles(t))],
                                        names=[f"{t.name}_ldm"]).results[0]

    def _tiles(self, t: Tensor) -> dict[Value, int]:
        """The tile sizes t's LDM buffer holds."""
        return self._whole(t) if t in self.resident else self.nest.tiles()

    def _bounds(self, t: Tensor) -> None:
        """The tile's first element and extent per dimension, for the current
        tile indices (Section 5.3: inner variables at 0 — or at their maximum
        for a negative coefficient — give the start; at the other end, the
        extent)."""
        los, exts = [], []
        whole = t in self.resident
        for d, coefs in enumerate(t.coefs):
            lo, ext = Expr.of(t.cmin[d]), Expr.of(1 + t.cmax[d] - t.cmin[d])
            for iv, c in coefs.items():
                v = self._var(iv)
                if whole:       # from the first tile to the last
                    n = Expr.of(v.extent)
                else:
                    n = self._inner_trip(v)
                    lo = lo + self.vo[iv] * (c * v.tile)
                if c < 0:
                    lo = lo + (n - 1) * c
                ext = ext + (n - 1) * abs(c)
            los.append(lo)
            exts.append(ext)
        self.lo[t] = los
        self.ext[t] = exts

    def _var(self, iv: Value) -> LoopVar:
        return next(v for v in self.nest.vars if v.iv is iv)

    def _ranged(self, t: Tensor) -> list[bool]:
        tiles = self._tiles(t)
        r = [t.extent(d, tiles) > 1 for d in range(len(t.coefs))]
        if not any(r):
            r[-1] = True
        return r

    def _copy(self, b: Builder, t: Tensor, op: OpDef) -> None:
        idx = [Range(lo, lo + ext) if ranged else lo
               for lo, ext, ranged in zip(self.lo[t], self.ext[t], self._ranged(t))]
        acc = Access(t.base, tuple(idx))
        if op is COPY_IN:
            b.create_inst("copy_in", acc, self.ldm[t], arrow=1)
        else:
            b.create_inst("copy_out", self.ldm[t], acc, arrow=1)

    def _statements(self, b: Builder, stmts: list[Instruction], vars_: list[LoopVar]) -> None:
        """The statements inside loops over the tiles of ``vars_`` (original order)."""
        if not stmts:
            return
        loops = [v for v in vars_ if v.tile > 1]
        env = {}
        for v in vars_:
            if v.tile == 1:
                env[v.iv] = self.vo[v.iv]
        self._nest_loops(b, loops, env, stmts)

    def _nest_loops(self, b: Builder, loops: list[LoopVar], env: dict, stmts) -> None:
        if not loops:
            self._clone(b, stmts, env)
            return
        v = loops[0]
        with b.loop(0, self._inner_trip(v), name=f"{v.name}i") as iv:
            env = dict(env)
            env[v.iv] = self.vo[v.iv] * v.tile + iv if v.ntiles > 1 else Expr.of(iv)
            env[("inner", v.iv)] = iv
            self._nest_loops(b, loops[1:], env, stmts)

    def _clone(self, b: Builder, stmts: list[Instruction], env: dict) -> None:
        ivmap = {k: e for k, e in env.items() if not isinstance(k, tuple)}
        vmap: dict[Value, Value] = {}
        for inst in stmts:
            args = []
            for a in inst.args:
                if isinstance(a, Value) and a in ivmap:
                    args.append(_materialise(b, ivmap[a]))
                elif isinstance(a, Value):
                    args.append(vmap.get(a, a))
                elif isinstance(a, Access):
                    args.append(self._access(a, {**vmap, **ivmap}))
                elif hasattr(a, "substitute"):
                    args.append(a.substitute(vmap))
                else:
                    args.append(a)
            new = b.create_inst(inst.opname, *args, types=[r.type for r in inst.results],
                                attrs=dict(inst.attrs), names=[r.name for r in inst.results])
            for r, nr in zip(inst.results, new.results):
                vmap[r] = nr

    def _access(self, a: Access, ivmap: dict) -> Access:
        subs = [e.substitute(ivmap) for e in a.indices]
        t = next((t for t in self.levels if t.base is a.base), None)
        if t is None or t.direct is not None:
            return Access(ivmap.get(a.base, a.base), tuple(subs))
        local = [e - lo for e, lo, ranged in zip(subs, self.lo[t], self._ranged(t)) if ranged]
        return Access(self.ldm[t], tuple(local))


def distinct_reads(nest: Nest) -> tuple[int, ...] | None:
    """Per parameter of the nest's kernel, a count of the distinct elements
    its loads read that is never above the truth (it feeds a lower bound),
    where that is fewer than the tensor holds (a stride-2 1x1 conv reads a
    quarter of its input); else -1 (counted whole, as before: also a tensor
    whose subscripts swir cannot list). None when no tensor is read in part.
    One load reads, per dimension, the values its subscript takes over the
    loop ranges: their product when no loop variable indexes two dimensions
    (exact), else the largest of them (a set has at least as many elements
    as any projection). Several loads read at least as many as the largest
    of theirs."""
    f = nest.top.function
    extent = {v.iv: v.extent for v in nest.vars}
    out = [-1] * len(f.params)
    for p in f.params:
        loads = [i.args[0] for i in nest.pre + nest.body + nest.post
                 if i.isa(LOAD) and i.args[0].base is p]
        if not loads or not isinstance(p.type, BufType):
            continue
        counts = [_load_count(acc, extent, p.type.shape) for acc in loads]
        if None not in counts and max(counts) < p.type.num_elements:
            out[p.index] = max(counts)
    return tuple(out) if any(c >= 0 for c in out) else None


def _load_count(acc: Access, extent: dict[Value, int], shape: tuple[int, ...]) -> int | None:
    """Distinct elements one load reads, at most; None if a subscript
    cannot be listed."""
    per_dim = []
    for ix, n in zip(acc.indices, shape):
        values = _index_values(ix, extent, n)
        if values is False:
            return None
        per_dim.append(n if values is None else len(values))
    used = [a for ix in acc.indices for a in {a for a, _ in ix.terms}]
    return math.prod(per_dim) if len(used) == len(set(used)) else max(per_dim)


def _index_values(e: Expr, extent: dict[Value, int], n: int) -> set[int] | None | bool:
    """The values of an affine subscript over its loops' ranges; None for
    all n of its dimension; False when they cannot be listed (not a loop
    variable, or too many)."""
    values = {e.const}
    for atom, c in e.terms:
        if atom not in extent:
            return False
        if abs(c) == 1 and extent[atom] >= n:
            return None         # a loop over the whole dimension (however large)
        if len(values) * extent[atom] > 1 << 16:
            return False
        values = {v + c * i for v in values for i in range(extent[atom])}
        if len(values) >= n:
            return None
    return values


def share_single_tile(nest: Nest, cpes: int, serial: set[LoopVar]) -> None:
    """When Algorithm 1 leaves the whole output in one tile, one CPE would do
    all the work: split the outermost splittable output dimension into up to
    ``cpes`` tiles instead (smaller tiles only lower the LDM use)."""
    outputs = [v for v in nest.vars if not v.reduction]
    if any(v.ntiles > 1 for v in outputs):
        return
    for v in outputs:
        if v.extent > 1 and v not in serial:
            v.tile = -(-v.extent // min(cpes, v.extent))
            return


def _materialise(b: Builder, e: Expr) -> Value:
    """An index expression as an SSA value (a loop variable used as a value,
    e.g. argmax's index): index arithmetic on the tile loop variables."""
    from swir.ir.types import INDEX
    if not e.terms and True:
        return b.const(e.const, INDEX)
    if e.const == 0 and len(e.terms) == 1 and e.terms[0][1] == 1 and \
            isinstance(e.terms[0][0], Value):
        return e.terms[0][0]
    acc: Value | None = None
    for atom, c in e.terms:
        if isinstance(atom, Compound):
            x = _materialise(b, atom.args[0])
            d = b.const(atom.divisor, INDEX)
            q = b.create("div", x, d)  # non-negative operands: C division is floor
            v = q if atom.kind == "floordiv" else b.create("sub", x, b.create("mul", q, d))
        else:
            v = atom
        if c != 1:
            v = b.create("mul", v, b.const(c, INDEX))
        acc = v if acc is None else b.create("add", acc, v)
    if e.const:
        acc = b.create("add", acc, b.const(e.const, INDEX))
    return acc


def corr(t: Tensor) -> set[Value]:
    return set().union(*(set(c) for c in t.coefs)) if t.coefs else set()


def _ldm_type(t: Tensor, tiles: dict[Value, int]) -> LDMType:
    ext = [t.extent(d, tiles) for d in range(len(t.coefs))]
    shape = tuple(e for e in ext if e > 1) or (1,)
    return LDMType(shape, t.base.type.element)


def order_loops(nest: Nest) -> list[LoopVar]:
    """Algorithm 2: the tile loops (variables with more than one tile),
    outermost-first, each time the one that makes the fewest DMA instructions
    over all tensors (ties: the original order). Output loops come before
    reduction loops, so a reduction's output stays in LDM across its whole
    reduction (initialised and finalised once per tile)."""
    groups = [[v for v in nest.vars if v.ntiles > 1 and not v.reduction],
              [v for v in nest.vars if v.ntiles > 1 and v.reduction]]
    weights = _dma_weights(nest)
    order: list[LoopVar] = []
    for group in groups:
        rest = list(group)
        while rest:
            best = min(rest, key=lambda v: (_dma_count(weights, order + [v] + [r for r in rest
                                                                                if r is not v]),
                                            rest.index(v)))
            order.append(best)
            rest.remove(best)
    return order


def dma_count(nest: Nest, order: list[LoopVar]) -> int:
    """DMA instructions per kernel call for a tile-loop order: each tensor's
    copies run once per iteration of the loops enclosing its copy level, each
    as many DMAs as its tile has contiguous runs."""
    return _dma_count(_dma_weights(nest), order)


def _dma_weights(nest: Nest) -> list[tuple[set[Value], int]]:
    """Per buffered tensor, the loops it depends on and the DMAs one
    execution of its copies makes (runs times copies in and out): what
    :func:`dma_count` needs of the tiles, whatever the order."""
    tiles = nest.tiles()
    out = []
    for t in nest.buffered():
        init = bool(nest.red) and nest.initialised and t.base is nest.output
        n = (t.copied_in and not init) + t.written
        out.append((corr(t), t.segments(tiles) * n))
    return out


def _dma_count(weights: list[tuple[set[Value], int]], order: list[LoopVar]) -> int:
    outer = [v.iv for v in order]
    trips = [v.ntiles for v in order]
    return sum(executions(copy_level(deps, outer), trips) * w for deps, w in weights)


def plan_summary(nest: Nest) -> dict[str, int]:
    """Tile sizes by loop-variable name (for tests)."""
    return {v.name: v.tile for v in nest.vars}


