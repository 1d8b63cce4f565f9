"""-mesh-broadcast: a tile every CPE needs, fetched 1/64 per CPE and shared
over the register buses instead of by broadcast DMA (issue 44, item 2).

A ``dma_bcast`` has CPE 0 stream the whole tile from main memory at the
broadcast bandwidth (8.7 GB/s measured) between two barriers. Here each CPE
instead fetches its own 1/64 share by an ordinary DMA (all 64 at once, at
the core group's bandwidth) and the shares travel over the buses, a row
then a column relay (SWsnn ``my_slave.c`` reaches any CPE by a row then a
column hop; swDNN and swGEMM broadcast a vector along a row or a column
with ``putr`` / ``putc`` to destination 8):

    %lo, %hi = chunk %id {extent = V, workers = 64}       this CPE's vectors
    dma_get (its share) ; dma_wait
    for %k = 0 to 8:           row step k: the CPE at column k of each row
      its share  -> reg_send {bus = "row"}  /  the others reg_recv it
    for %k = 0 to 8:           column step k: the CPEs of row k
      their row's 8 shares -> reg_send {bus = "col"}  /  the others reg_recv

After the 16 steps every CPE holds the tile, as after the broadcast. The
rewrite applies to contiguous broadcasts of f32 / f64 whose element count is
a multiple of 4 (a message is one 4-lane vector), on an 8 x 8 CPE grid, and
only where the cost model finds it faster (docs/cost-model.md, "Register
communication"): unless ``always``.
"""

from __future__ import annotations

from dataclasses import dataclass

from swir.ir.affine import Expr
from swir.ir.builder import Builder
from swir.ir.core import Access, Block, Constraint, Instruction, Module, Region, Value
from swir.ir.types import INDEX
from swir.ops import DMA_BCAST
from swir.ops.loop import REG_ELEMENTS, REG_LANES
from swir.ops.util import attr_or_default, element_offset
from swir.passes.dma.replies import MESH_REPLY
from swir.passes.manager import AnalysisManager, Pass, option
from swir.costmodel.cost import Machine, dma_assumptions
from swir.target import Target


@dataclass
class MeshBroadcast(Pass):
    name = "mesh-broadcast"
    summary = ("Share a broadcast tile over the register buses: each CPE fetches 1/64 "
               "by DMA, a row then a column relay delivers the rest (dma stage)")
    stages = ("dma",)

    always: bool = option(False, "rewrite every broadcast that can be rewritten, not only "
                                 "those the cost model finds faster")

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        target = module.attr("target")
        if target.rma:      # RMA between LDMs, no register buses
            self.bump(f"broadcasts kept (the {target.title} has no register communication)")
            return False
        if target.cpe_grid != (8, 8):
            return False
        changed = False
        for f in module.functions:
            if f.target != "cpe" or f.body is None:
                continue
            for inst in [i for i in f.walk() if i.isa(DMA_BCAST)]:
                if not _eligible(inst):
                    self.bump("broadcasts kept (strided, not whole vectors, or not f32/f64)")
                    continue
                if not self.always and not mesh_pays(inst, target):
                    self.bump("broadcasts kept (broadcast DMA modeled faster)")
                    continue
                _relay(inst)
                self.bump("broadcasts shared over the register buses")
                changed = True
        return changed


def _ldm_side(inst: Instruction) -> tuple[Value, Expr]:
    """The LDM buffer a DMA writes and the flat offset it starts at."""
    side = inst.args[1]
    if isinstance(side, Access):
        return side.base, element_offset(side.indices, side.base.type.shape)
    return side, Expr.of(0)


def _split(flat: Expr, shape) -> list[Expr]:
    """Subscripts of the element at ``flat`` (row-major), by floordiv and mod
    (they add up to ``flat`` again: swir.ir.affine folds the pairs)."""
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    out, rest = [], flat
    for i, s in enumerate(strides):
        if i == len(shape) - 1:
            out.append(rest)
        else:
            out.append(rest.floordiv(s))
            rest = rest.mod(s)
    return out


def _eligible(inst: Instruction) -> bool:
    count, bsize = inst.attrs["count"], attr_or_default(inst, "bsize")
    ldm, _ = _ldm_side(inst)
    return (not 0 < bsize < count and count % REG_LANES == 0
            and str(ldm.type.element) in REG_ELEMENTS)


def mesh_pays(inst: Instruction, target: Target) -> bool:
    """Whether the relay is modeled faster than the broadcast on the
    target's figures and on the pessimistic end of the assumed ranges
    (swir.costmodel.cost.dma_assumptions: slower DMA, 40 cycles of bus
    latency, 4 cycles per vector): the register figures are assumptions,
    so a relay must not lose where they are wrong. The broadcast
    streams the tile at the broadcast bandwidth plus its fixed cost; the
    relay has 64 CPEs each fetch 1/64 (sharing the core group's bandwidth,
    each DMA's start-up paid once in parallel), then sends and receives its
    vectors (every CPE receives all but its own share, sends its share in
    the row steps and its row's shares in the column steps) at the bus's
    cycles per vector, plus the 16 steps' latency."""
    ldm, _ = _ldm_side(inst)
    esize = ldm.type.element.bytes
    return all(relay_seconds(inst.attrs["count"], esize, m) < broadcast_seconds(
        inst.attrs["count"] * esize, m) for m in (Machine.for_target(target),
                                                 dma_assumptions(target)["pessimistic"]))


def broadcast_seconds(nbytes: int, m: Machine) -> float:
    return m.bcast_seconds([(nbytes, 1)])


def relay_seconds(count: int, esize: int, m: Machine) -> float:
    """The modeled time of the relay of ``count`` elements (see mesh_pays):
    as swir.costmodel.cost charges the code it writes."""
    vectors = count // REG_LANES
    q, r = divmod(vectors, m.cpes)
    shares = [(q + 1, r), (q, m.cpes - r)]
    dma = sum(n * m.dma_seconds([(v * REG_LANES * esize, 1)]) for v, n in shares if v and n)
    # Each vector is sent once along its owner's row, then by each of the 8
    # CPEs of that row along their columns; every CPE but its owner receives
    # it; every CPE runs the 8 row and the 8 column steps.
    side = 8
    return dma + m.reg_seconds(vectors * (1 + side), vectors * (m.cpes - 1),
                               2 * side * m.cpes)


def _relay(bcast: Instruction) -> None:
    """Replace ``bcast`` by its share's DMA and the 16 relay steps."""
    count = bcast.attrs["count"]
    vectors = count // REG_LANES
    mem = bcast.args[0]
    ldm, lstart = _ldm_side(bcast)
    mstart = element_offset(mem.indices, mem.base.type.shape)
    b = Builder(bcast.parent, before=bcast)
    cpe = b.create("cpe_id", types=[INDEX], names=["mesh_id"])
    _fetch_share(b, bcast, cpe, vectors, mstart, lstart)
    row, col = Expr.of(cpe).floordiv(8), Expr.of(cpe).mod(8)
    with b.loop(0, 8, name="step") as k:
        slo, shi = b.create_inst("chunk", row.scale(8) + Expr.of(k),
                                 attrs={"extent": vectors, "workers": 64}, types=[INDEX, INDEX],
                                 names=["row_lo", "row_hi"]).results
        _exchange(b, Constraint(col - Expr.of(k), "==", Expr.of(0)), "row", ldm, lstart, slo, shi)
    with b.loop(0, 8, name="step") as k:
        first = b.create_inst("chunk", Expr.of(k).scale(8),
                              attrs={"extent": vectors, "workers": 64}, types=[INDEX, INDEX],
                              names=["col_lo", "unused"]).results[0]
        last = b.create_inst("chunk", Expr.of(k).scale(8) + 7,
                             attrs={"extent": vectors, "workers": 64}, types=[INDEX, INDEX],
                             names=["unused", "col_hi"]).results[1]
        _exchange(b, Constraint(row - Expr.of(k), "==", Expr.of(0)), "col", ldm, lstart,
                  first, last)
    bcast.erase()


def _fetch_share(b: Builder, bcast: Instruction, cpe: Value, vectors: int, mstart: Expr,
                 lstart: Expr) -> None:
    """This CPE's share by DMA, as chunk splits the vectors: vectors // 64
    each, one more on the first vectors % 64 CPEs (a DMA's count is a
    constant: one branch per size). The share's start is written from the
    CPE id, so the verifier bounds it exactly."""
    q, m = divmod(vectors, 64)
    mem = bcast.args[0].base
    ldm, _ = _ldm_side(bcast)
    i = Expr.of(cpe)
    cases = [(q + 1, i.scale(q + 1), Constraint(i, "<", Expr.of(m)))] if m else []
    if q:
        cases.append((q, i.scale(q) + m, Constraint(i, ">=", Expr.of(m)) if m else None))
    for n, first, when in cases:
        inner = b
        if when is not None:
            g = b.create_inst("if", when, regions=[Region([Block(None)])])
            inner = Builder(g.regions[0].blocks[0])
        off = first.scale(REG_LANES)
        inner.create_inst("dma_get", Access(mem, tuple(_split(mstart + off, mem.type.shape))),
                          Access(ldm, tuple(_split(lstart + off, ldm.type.shape))), arrow=1,
                          attrs={"count": n * REG_LANES, "reply": MESH_REPLY})
        inner.create_inst("dma_wait", attrs={"reply": MESH_REPLY, "times": 1})


def _exchange(b: Builder, sender: Constraint, bus: str, ldm: Value, lstart: Expr,
              lo: Value, hi: Value) -> None:
    """``if sender { send vectors [lo, hi) } else { receive them }``."""
    then, other = Block(None), Block(None)
    b.create_inst("if", sender, regions=[Region([then]), Region([other])])
    for block, op in ((then, "reg_send"), (other, "reg_recv")):
        inner = Builder(block)
        with inner.loop(lo, hi, name="v") as v:
            at = lstart + Expr.of(v).scale(REG_LANES)
            inner.create_inst(op, Access(ldm, tuple(_split(at, ldm.type.shape))),
                              attrs={"bus": bus})
