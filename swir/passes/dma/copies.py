"""-insert-dma's lowering of one copy to DMAs: the region's contiguous
dimensions merged into blocks, one strided dimension, loops of DMAs beyond,
an ``if`` per varying extent (edge tiles), and padded tiles (a halo filled
in LDM, staged DMAs where the clipped rows are short).
"""

from __future__ import annotations

import math

from swir.diagnostics import Diagnostic
from swir.ir.affine import Compound, Expr
from swir.ir.builder import Builder
from swir.ir.core import Access, Block, Constraint, Instruction, Range, Region, Value
from swir.ir.module_attrs import module_target
from swir.ops import CHUNK, CPE_ID, DMA_GET, DMA_PUT, FOR, PARALLEL
from swir.passes.dma.replies import EDGE_REPLY
from swir.passes.manager import PassFailure

MAX_STAGED_DMAS = 32     # a padded tile's staged DMAs, unrolled
# A padded tile's branches per dimension: each start that clips it. Within
# the padding these are at most the pad's size; remainder tiles' shorter
# extents add starts no tile takes (branches never run), hence the room.
MAX_CLIPPED_STARTS = 64


class CopyRegion:
    """A copy's main-memory region: per ranged dimension its start, extent
    (an expression: edge tiles are smaller) and the LDM dimension it fills."""

    def __init__(self, acc: Access, ldm: Value, get: bool) -> None:
        self.acc, self.ldm, self.get = acc, ldm, get
        self.op = (DMA_GET if get else DMA_PUT).name
        self.offset: dict[int, int] = {}    # LDM start per ranged dimension (padded tiles)
        self.shape = acc.base.type.shape
        self.pitch = [math.prod(self.shape[d + 1:]) for d in range(len(self.shape))]
        self.start = [ix.lo if isinstance(ix, Range) else ix for ix in acc.indices]
        maxes = iter(ldm.type.shape)
        self.dims = [(d, ix.lo, ix.hi - ix.lo, next(maxes))
                     for d, ix in enumerate(acc.indices) if isinstance(ix, Range)]
        self.compounds = varying_extents([ext for _, _, ext, _ in self.dims])

    # -- edge tiles ----------------------------------------------------------------------
    def emit_cases(self, b: Builder, todo: list[Compound], values: dict) -> None:
        """One branch per whole / edge choice of each varying extent, each with
        constant extents, so every branch moves exactly what exists."""
        def tile(at: Builder, vals: dict) -> None:
            n = self.emit(at, EDGE_REPLY, vals)
            at.create_inst("dma_wait", attrs={"reply": EDGE_REPLY, "times": n})
        _edge_cases(b, todo, values, tile)

    def extents(self, values: dict) -> list[int]:
        return [_extent(ext, values) for _, _, ext, _ in self.dims]

    # -- one whole or edge tile ----------------------------------------------------------
    def emit(self, b: Builder, reply: int, values: dict) -> int:
        """The fewest DMAs for constant extents: the innermost dimension, when
        contiguous in memory, is the block; whole rows of memory (that also
        fill their LDM rows) widen it; one more dimension becomes the stride;
        dimensions beyond are loops. Returns the DMAs issued."""
        ext = self.extents(values)
        dims = [(d, lo, e, m) for (d, lo, _, m), e in zip(self.dims, ext)]
        last = len(dims) - 1
        if self.pitch[dims[last][0]] == 1:
            block, k = dims[last][2], last
            packed = dims[last][2] == dims[last][3]   # the LDM rows hold no gaps
            while packed and k > 0 and self.pitch[dims[k - 1][0]] == block:
                block *= dims[k - 1][2]                # whole rows: still contiguous
                packed = dims[k - 1][2] == dims[k - 1][3]
                k -= 1
            strided = dims[k - 1] if packed and k > 0 else None
        else:   # the innermost ranged dimension is not contiguous in memory
            block, k, strided = 1, last + 1, dims[last]
        outer = dims[:k - 1] if strided is not None else dims[:k]
        attrs = {"count": block * (strided[2] if strided else 1), "reply": reply}
        if strided is not None and self.pitch[strided[0]] != block:
            attrs["bsize"] = block
            attrs["stride"] = self.pitch[strided[0]] - block
        return self._loops(b, outer, attrs, {})

    def _loops(self, b: Builder, outer: list, attrs: dict, at: dict) -> int:
        if not outer:
            mem = Access(self.acc.base, tuple(at.get(d, s) for d, s in enumerate(self.start)))
            local = self._local(at)
            if self.get:
                b.create_inst(self.op, mem, local, attrs=dict(attrs), arrow=1)
            else:
                b.create_inst("dma_put", local, mem, attrs=dict(attrs), arrow=1)
            return 1
        d, lo, e, _ = outer[0]
        with b.loop(0, e, name=f"r{d}") as iv:
            n = self._loops(b, outer[1:], attrs, {**at, d: lo + iv, ("ldm", d): Expr.of(iv)})
        return e * n

    def _local(self, at: dict) -> Value | Access:
        idx = [at.get(("ldm", d)) for d, _, _, _ in self.dims]
        off = [self.offset.get(d, 0) for d, _, _, _ in self.dims]
        if all(i is None for i in idx) and not any(off):
            return self.ldm
        return Access(self.ldm, tuple((i if i is not None else Expr.of(0)) + o
                                      for i, o in zip(idx, off)))


class PaddedCopy:
    """``copy_in %X[region] -> %L {fill = v}`` whose region may reach past
    %X: per dimension, the tile's start decides how much of it lies before
    and after %X (its *clips*). Each combination of clips that the start can
    take is a branch (``if start == s``; the unclipped tiles in the last
    ``else``) with constant extents: the halo is filled with v by stores on
    the CPE, the part inside %X comes by the fewest DMAs, placed at its
    offset in %L, and waited for in the branch."""

    def __init__(self, inst: Instruction) -> None:
        self.inst = inst
        self.acc: Access = inst.args[0]
        self.ldm: Value = inst.args[1]
        self.fill = inst.attrs["fill"]
        self.shape = self.acc.base.type.shape
        # per dimension of %X: start, extent (Expr), LDM dimension or None (fixed)
        self.dims = []
        k = 0
        for ix in self.acc.indices:
            if isinstance(ix, Range):
                self.dims.append((ix.lo, ix.hi - ix.lo, k))
                k += 1
            else:
                self.dims.append((ix, Expr.of(1), None))

    def lower(self) -> None:
        """Remainder tiles first (a branch per whole / edge value of each
        varying extent, as CopyRegion.emit_cases), then the clips."""
        exts = [ext for _, ext, _ in self.dims]
        _edge_cases(Builder(self.inst.parent, before=self.inst), varying_extents(exts), {},
                    lambda b, vals: self._clips(b, [_extent(e, vals) for e in exts], 0, []))

    def _clips(self, b: Builder, extents: list[int], d: int, clips: list) -> None:
        """Branch on dimension d's start: unclipped starts first (the start
        stays symbolic, and the guard bounds it for the verifier), then one
        branch per clipped start (the start is that constant there)."""
        if d == len(self.dims):
            self._tile(b, extents, clips)
            return
        start, n, e = self.dims[d][0], self.shape[d], extents[d]
        middle, edges = self._starts(start, e, n, d)
        if middle is not None:
            m_lo, m_hi = middle
            one = m_lo == m_hi and not edges
            at = Expr.of(m_lo) if one else start
            if not edges:
                self._clips(b, extents, d + 1, clips + [(at, 0, 0)])
                return
            guard = b.create_inst("if", Constraint(start, ">=", Expr.of(m_lo)),
                                  Constraint(start, "<=", Expr.of(m_hi)),
                                  regions=[Region([Block(None)]), Region([Block(None)])])
            # The clamp changes nothing here; it shows the verifier the bounds
            # (its guards bound single variables, not sums of them).
            clamped = Expr.minmax("max", [m_lo, Expr.minmax("min", [start, m_hi])])
            self._clips(Builder(guard.regions[0].blocks[0]), extents, d + 1,
                        clips + [(clamped, 0, 0)])
            b = Builder(guard.regions[1].blocks[0])
        for k, v in enumerate(edges):
            clip = (Expr.of(v), max(0, -v), max(0, v + e - n))
            if k == len(edges) - 1:
                self._clips(b, extents, d + 1, clips + [clip])
                return
            guard = b.create_inst("if", Constraint(start, "==", Expr.of(v)),
                                  regions=[Region([Block(None)]), Region([Block(None)])])
            self._clips(Builder(guard.regions[0].blocks[0]), extents, d + 1, clips + [clip])
            b = Builder(guard.regions[1].blocks[0])

    def _starts(self, start: Expr, e: int, n: int, d: int
                ) -> tuple[tuple[int, int] | None, list[int]]:
        """The unclipped starts' range (None if there is none) and the
        clipped starts, of the values the start can take (its bounds, on the
        lattice of its coefficients)."""
        r = _range(start)
        if r is None or r[1] - r[0] >= 1 << 20:
            raise PassFailure([Diagnostic(f"-insert-dma: cannot bound the start of dimension "
                                          f"{d} of a padded copy", self.inst.loc)])
        g = math.gcd(*(abs(c) for _, c in start.terms)) or 1
        on = [v for v in range(r[0], r[1] + 1) if (v - start.const) % g == 0]
        edges = [v for v in on if v < 0 or v + e > n]
        if len(edges) > MAX_CLIPPED_STARTS:
            raise PassFailure([Diagnostic(
                f"-insert-dma: dimension {d} of a padded copy has {len(edges)} starts that "
                f"clip its tile, more than the {MAX_CLIPPED_STARTS} branches swir writes",
                self.inst.loc)])
        middle = [v for v in on if 0 <= v and v + e <= n]
        return ((middle[0], middle[-1]) if middle else None), edges

    def _tile(self, b: Builder, extents: list[int], clips: list[tuple]) -> None:
        """One branch: constant extents and clips (start, before, after). The
        part inside %X first, directly to its place when one DMA does it,
        else staged; then the halo is filled."""
        ranged = [(e, c[1:]) for (_, _, k), e, c in zip(self.dims, extents, clips)
                  if k is not None]
        inside = [e - c[1] - c[2] for e, c in zip(extents, clips)]
        if min(inside) > 0:
            idx = []
            for (_, _, k), n_in, (start, before, _) in zip(self.dims, inside, clips):
                lo = start + before
                idx.append(Range(lo, lo + n_in) if k is not None else lo)
            self._inside(b, Access(self.acc.base, tuple(idx)),
                         {d: c[1] for d, ((_, _, k), c) in enumerate(zip(self.dims, clips))
                          if k is not None})
        if min(inside) <= 0:
            slabs = [[(0, e) for e, _ in ranged]]
        else:
            slabs = [[(a, z) if i == j else (0, ee) for i, (ee, _) in enumerate(ranged)]
                     for j, (e, (before, after)) in enumerate(ranged)
                     for a, z in ((0, before), (e - after, e)) if a < z]
        if slabs:
            fill = b.const(self.fill, self.ldm.type.element, "fill")
            for box in slabs:
                self._fill(b, fill, box)

    def _inside(self, b: Builder, acc: Access, offset: dict[int, int]) -> None:
        """The part inside %X: straight to its place, by one DMA per row
        where its rows do not fill the LDM rows; or, when that takes fewer
        DMAs (at most MAX_STAGED_DMAS, unrolled), packed at the end of %L,
        then moved to its place in ascending order (each element moves
        towards the start of %L, never onto one not yet moved)."""
        direct = CopyRegion(acc, self.ldm, True)
        direct.offset = offset
        box = [(d, ix.hi - ix.lo) for d, ix in enumerate(acc.indices) if isinstance(ix, Range)]
        sizes = [e.const for _, e in box]
        base = self.ldm.type.num_elements - math.prod(sizes)
        scratch = Block(None)
        n = direct.emit(Builder(scratch), EDGE_REPLY, {})
        region = direct
        if n > 1:
            staged, trial = StagedRegion(acc, self.ldm, base), Block(None)
            k = staged.emit(Builder(trial), EDGE_REPLY, {})
            if k < n and k <= MAX_STAGED_DMAS:
                erase_all(scratch)
                scratch, n, region = trial, k, staged
            else:
                erase_all(trial)
        for inst in list(scratch.instructions):
            b.insert(inst.detach())
        b.create_inst("dma_wait", attrs={"reply": EDGE_REPLY, "times": n})
        if isinstance(region, StagedRegion):
            pitch = [math.prod(sizes[k + 1:]) for k in range(len(sizes))]
            self._move(b, base, sizes, pitch, [offset[d] for d, _ in box], [])

    def _move(self, b: Builder, base: int, sizes: list[int], pitch: list[int],
              offset: list[int], at: list[Value]) -> None:
        if len(at) == len(sizes):
            flat = Expr.of(base) + sum((Expr.of(iv) * p for iv, p in zip(at, pitch)), Expr.of(0))
            v = b.create("load", Access(self.ldm, _unflatten(flat, self.ldm.type.shape)),
                         types=[self.ldm.type.element])
            b.create_inst("store", v, Access(self.ldm, tuple(Expr.of(iv) + o
                                                              for iv, o in zip(at, offset))))
            return
        with b.loop(0, sizes[len(at)], name="mv") as iv:
            self._move(b, base, sizes, pitch, offset, [*at, iv])

    def _fill(self, b: Builder, value: Value, box: list[tuple[int, int]], at=()) -> None:
        if len(at) == len(box):
            b.create_inst("store", value, Access(self.ldm, tuple(Expr.of(i) for i in at)))
            return
        lo, hi = box[len(at)]
        with b.loop(lo, hi, name="halo") as iv:
            self._fill(b, value, box, (*at, iv))


class StagedRegion(CopyRegion):
    """A region copied packed into an LDM buffer from flat element ``base``
    (its LDM side is a box of the region's own extents)."""

    def __init__(self, acc: Access, ldm: Value, base: int) -> None:
        super().__init__(acc, ldm, True)
        self.dims = [(d, lo, ext, ext.const) for d, lo, ext, _ in self.dims]
        self.base = base

    def _loops(self, b: Builder, outer: list, attrs: dict, at: dict) -> int:
        """Unrolled: each DMA's LDM start is then a constant the verifier
        can check (a loop's would be a division of the loop variable)."""
        if not outer:
            return super()._loops(b, outer, attrs, at)
        d, lo, e, _ = outer[0]
        return sum(self._loops(b, outer[1:], attrs, {**at, d: lo + i, ("ldm", d): Expr.of(i)})
                   for i in range(e))

    def _local(self, at: dict) -> Value | Access:
        sizes = [m for _, _, _, m in self.dims]
        flat = Expr.of(self.base)
        for k, (d, _, _, _) in enumerate(self.dims):
            flat = flat + Expr.of(at.get(("ldm", d), 0)) * math.prod(sizes[k + 1:])
        return Access(self.ldm, _unflatten(flat, self.ldm.type.shape))


def _unflatten(flat: Expr, shape: tuple[int, ...]) -> tuple[Expr, ...]:
    """The subscripts of flat element ``flat`` of a buffer of ``shape``."""
    out = []
    for k, n in enumerate(shape):
        q = flat.floordiv(math.prod(shape[k + 1:])) if k < len(shape) - 1 else flat
        out.append(q.mod(n) if k > 0 else q)
    return tuple(out)


def erase_all(block: Block) -> None:
    for inst in reversed(list(block.instructions)):
        inst.erase()


def _range(e: Expr) -> tuple[int, int] | None:
    """Bounds of an index expression of a CPE kernel: loop variables by
    their loops, chunk bounds by their extent, floordiv / mod / min / max
    by their arguments."""
    lo = hi = e.const
    for atom, c in e.terms:
        r = _atom_range(atom)
        if r is None:
            return None
        a, z = sorted((c * r[0], c * r[1]))
        lo, hi = lo + a, hi + z
    return lo, hi


def _atom_range(atom: object) -> tuple[int, int] | None:
    if isinstance(atom, Compound):
        rs = [_range(Expr.of(a)) for a in atom.args]
        if any(r is None for r in rs):
            return None
        if atom.kind == "floordiv":
            return rs[0][0] // atom.divisor, rs[0][1] // atom.divisor
        if atom.kind == "ceildiv":
            return -(-rs[0][0] // atom.divisor), -(-rs[0][1] // atom.divisor)
        if atom.kind == "mod":
            inside = 0 <= rs[0][0] and rs[0][1] < atom.divisor
            return rs[0] if inside else (0, atom.divisor - 1)
        if atom.kind not in ("min", "max"):
            return None
        pick = min if atom.kind == "min" else max
        return pick(r[0] for r in rs), pick(r[1] for r in rs)
    owner = getattr(atom, "owner", None)
    if isinstance(owner, Instruction) and owner.isa(CHUNK):
        return 0, int(owner.attrs["extent"])
    if isinstance(owner, Instruction) and owner.isa(CPE_ID):
        return 0, module_target(owner).cpes - 1
    if isinstance(owner, Block) and owner.parent is not None and \
            isinstance(owner.parent.parent, Instruction) and \
            owner.parent.parent.isa(FOR, PARALLEL):
        loop = owner.parent.parent
        lb, ub = _range(Expr.of(loop.args[0])), _range(Expr.of(loop.args[1]))
        return None if lb is None or ub is None else (lb[0], ub[1] - 1)
    return None


def varying_extents(extents: list[Expr]) -> list[Compound]:
    """The remainder-tile atoms (``min(T, E - T*vo)``) of some extents, once each."""
    seen: dict = {}
    for ext in extents:
        for atom, _ in ext.terms:
            if isinstance(atom, Compound):
                seen.setdefault(atom.key(), atom)
    return list(seen.values())


def _extent(ext: Expr, values: dict) -> int:
    """An extent with its remainder atoms' values (by key) put in."""
    return ext.const + sum(c * values[a.key()] for a, c in ext.terms)


def _edge_cases(b: Builder, todo: list[Compound], values: dict, leaf) -> None:
    """``if E - T*vo >= T`` per varying extent, whole tiles in the then
    branch and the edge tile in the else, nested; ``leaf(builder, values)``
    writes each combination with those values."""
    if not todo:
        leaf(b, values)
        return
    atom, rest = todo[0], todo[1:]
    full, edge, x = _min_cases(atom)
    guard = b.create_inst("if", Constraint(x, ">=", Expr.of(full)),
                          regions=[Region([Block(None)]), Region([Block(None)])])
    _edge_cases(Builder(guard.regions[0].blocks[0]), rest, {**values, atom.key(): full}, leaf)
    _edge_cases(Builder(guard.regions[1].blocks[0]), rest, {**values, atom.key(): edge}, leaf)


def _min_cases(atom: Compound) -> tuple[int, int, Expr]:
    """For -ldm-plan's remainder extent min(T, E - T*vo): the whole value T,
    the edge value ((E - 1) mod T) + 1, and E - T*vo (whole when >= T)."""
    const = [a for a in atom.args if a.is_constant]
    other = [a for a in atom.args if not a.is_constant]
    if atom.kind != "min" or len(const) != 1 or len(other) != 1:
        raise NotImplementedError(f"extent {atom} is not a remainder tile")
    t, x = const[0].const, other[0]
    if len(x.terms) != 1 or x.terms[0][1] != -t:
        raise NotImplementedError(f"extent {atom} is not a remainder tile")
    return t, (x.const - 1) % t + 1, x
