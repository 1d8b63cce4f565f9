"""-insert-dma: buffered stage → dma stage (swTVM's DMA auto-insertion and
the MPE / CPE split).

- **MPE / CPE split.** Every ``func`` becomes a ``host func`` and every
  ``kernel`` a ``cpe kernel``; a call of a kernel becomes ``spawn`` + ``join``
  (the arguments become the kernel's parameter struct). A kernel with several
  ``parallel`` loops becomes one cpe kernel per loop, all run by one
  ``spawn @k(..), @k_1(..), ...``: the CPEs meet at a barrier
  (``athread_syn``) between them, the barrier the buffered stage's semantics
  need, without a join and a spawn per loop (``one-spawn=false``: a spawn and
  a join per loop, as before).
- **Work split.** The ``parallel`` loop becomes a per-CPE range:
  ``%id = cpe_id``, ``%lo, %hi = chunk %id {extent, workers}``,
  ``for %p = %lo to %hi`` (guarded by ``%id < workers`` when fewer workers
  than CPEs are used), balanced to within one iteration. Side-effecting code
  outside the parallel loop runs on CPE 0 only.
- **DMA.** Each ``copy_in`` / ``copy_out`` becomes DMAs (``dma_get`` /
  ``dma_put``) with the main-memory start element, element count, block size
  and stride: contiguous dimensions are merged into one block, one further
  dimension becomes the stride of a single strided DMA, dimensions beyond
  that are loops of DMAs. A region whose extents vary (remainder tiles) gets
  an ``if`` per varying extent: whole tiles and edge tiles each get the
  fewest DMAs for their constant extents, so edge tiles move exactly what
  exists (rows of an edge tile that do not fill their LDM rows go one DMA per
  row, to the row's place in the LDM buffer).
- **Waits.** The gets of one group of ``copy_in``s share reply word 0 and one
  ``dma_wait`` placed just before the first instruction that is not part of
  the group (the first use of the buffers); the branches of an edge-tile
  ``if`` use reply word 2 and wait at their own end. Puts use reply word 1 and are waited for right after they are
  issued (before the buffer can be overwritten and before the kernel ends).

- **Broadcasts** (issue 24): a tile every CPE reads alike is fetched once
  for all CPEs (``dma_bcast``) where the cost model finds that faster:
  before the CPE's tiles when no iteration moves it, or in each round when
  every CPE runs as many iterations and nothing the parallel loop's
  variable decides reaches the copy (lock-step broadcasts).

- **Double buffering** (on by default where the second buffers fit): a
  tile loop's gets are issued one tile ahead into a second buffer set on
  alternating reply words, so the transfer of tile t+1 overlaps the compute
  of tile t (docs/passes.md).

This module holds the pass, the MPE / CPE split, the work split and the
broadcasts; a copy's lowering to DMAs is in ``swir.passes.dma.copies``, double
buffering and the placement of waits in ``swir.passes.dma.double_buffer``.
"""

from __future__ import annotations

from dataclasses import dataclass

from swir.analysis.calling import writes_global, written_params
from swir.analysis.dependence import ancestors
from swir.analysis.write_blocks import write_grain
from swir.diagnostics import Diagnostic
from swir.ir.affine import Expr
from swir.ir.builder import Builder
from swir.ir.core import (
    Access,
    Apply,
    Block,
    Constraint,
    FuncParam,
    Function,
    Global,
    Instruction,
    Module,
    Region,
    Value,
)
from swir.ir.types import INDEX
from swir.ops import (CALL, CONST, COPY_IN, COPY_OUT, CPE_ID, DMA_GET, DMA_PUT, DMA_WAIT, FOR,
                      IF, LDM_ALLOC, LOAD, PARALLEL, RETURN)
from swir.ops.util import attr_or_default
from swir.passes.dma.copies import CopyRegion, PaddedCopy, erase_all
from swir.passes.dma.double_buffer import (double_buffer, double_buffer_plan,
                                           wait_groups)
from swir.passes.dma.replies import BCAST_REPLY, GET_REPLY, PUT_REPLY
# swir.costmodel.traffic reads the double-buffering reply words from here.
from swir.passes.dma.replies import EVEN_REPLY, ODD_REPLY  # noqa: F401
from swir.passes.manager import AnalysisManager, Pass, PassFailure, option
from swir.target import Target, stream_seconds


@dataclass
class InsertDMA(Pass):
    name = "insert-dma"
    summary = "Lower copies to DMA, split MPE host code from CPE kernels (buffered -> dma)"
    stages = ("buffered",)

    double_buffer: bool = option(True, "overlap each tile's gets with the previous tile's "
                                       "compute where the doubled buffers fit the LDM")
    one_spawn: bool = option(True, "run a kernel's loop nests in one spawn, the CPEs meeting "
                                   "at a barrier (athread_syn) between nests, rather than "
                                   "one spawn + join per nest")
    broadcast: bool = option(True, "fetch a tile every CPE reads alike by a broadcast DMA "
                                   "into every CPE's LDM where that is faster: once before "
                                   "the CPE's share of the tiles (a copy_in of the parallel "
                                   "body that its tile index does not move), or in each "
                                   "round of tiles when every CPE runs as many")
    strided_broadcast: bool = option(True, "let a broadcast move strided blocks (a DMA with "
                                           "bsize and stride); false broadcasts only tiles whose "
                                           "every DMA is one contiguous block, the form public "
                                           "Sunway code uses (docs/codegen.md, Broadcast DMA)")

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        self.broadcasts: set[int] = set()      # ids of the copy_ins to broadcast
        self.lockstep: set[int] = set()        # ids of tile-loop copy_ins that may be broadcast
        split = {}
        for f in list(module.functions):
            if f.kind == "kernel" and f.body is not None:
                split[f.name] = self.split_kernel(module, f)
        self.target_figures = module.attr("target")
        size = module.attr("ldm_size")
        self.capacity = size - self.target_figures.default_reserve(size)
        for f in module.functions:
            if f.kind == "kernel":
                f.target = "cpe"
                if f.body is not None:
                    self.lower_kernel(f)
                    if self.double_buffer:
                        self.double_buffer_loops(f)
                    self.delay_put_waits(f)
            else:
                f.target = "host"
        for f in module.functions:
            if f.kind == "func" and f.body is not None:
                self.spawn_calls(f, split)
        module.stage = "dma"
        return True

    # -- MPE / CPE split -------------------------------------------------------------
    def split_kernel(self, module: Module, f: Function) -> list[str]:
        """One cpe kernel per parallel loop (a barrier between them: the
        kernels of one spawn, or a join and a spawn each); returns the kernels
        to spawn, in order."""
        block = f.body.blocks[0]
        loops = [i for i in block.instructions if i.isa(PARALLEL)]
        others = [i for i in block.instructions
                  if not i.isa(PARALLEL, CONST, RETURN)]
        if loops and others:
            raise PassFailure([Diagnostic(
                f"-insert-dma: @{f.name} has '{others[0].opname}' beside its parallel "
                "loops; code outside the CPE loops would need a barrier (not supported)",
                others[0].loc)])
        for loop in loops:
            if attr_or_default(loop, "step") != 1:
                raise PassFailure([Diagnostic(
                    "-insert-dma: parallel loops with a step are not supported", loop.loc)])
        names = [f.name]
        for n, loop in enumerate(loops[1:], 1):
            name = module.unique_name(f"{f.name}_{n}")
            g, b = Builder.function(module, name, [p.type for p in f.params], kind="kernel",
                                    param_names=[p.name for p in f.params])
            inner = list(loop.walk())
            for old, new in zip(f.params, g.params):
                for inst in inner:
                    inst.replace_uses_of(old, new)
            for inst in list(block.instructions):
                if inst.isa(CONST) and any(u in inner for r in inst.results
                                           for u in r.users):
                    copy = b.create_inst("const", *inst.args, types=[r.type for r in inst.results],
                                         names=[r.name for r in inst.results])
                    for u in inner:
                        u.replace_uses_of(inst.results[0], copy.results[0])
            loop.detach()
            g.body.blocks[0].append(loop)
            module.items.remove(g)
            module.items.insert(module.items.index(f) + n, g)
            names.append(name)
            self.bump("kernels split off")
        return names

    def spawn_calls(self, f: Function, split: dict[str, list[str]]) -> None:
        for inst in list(f.walk()):
            app = inst.args[0] if inst.isa(CALL) and inst.args else None
            if not isinstance(app, Apply) or app.callee not in split:
                continue
            b = Builder(inst.parent, before=inst)
            apps = [Apply(name, app.args) for name in split[app.callee]]
            for group in [apps] if self.one_spawn else [[a] for a in apps]:
                b.create_inst("spawn", *group)
                b.create_inst("join")
                self.bump("spawns")
                if len(group) > 1:
                    self.bump("barriers", len(group) - 1)
            inst.erase()

    # -- CPE kernels ---------------------------------------------------------------------
    def lower_kernel(self, f: Function) -> None:
        block = f.body.blocks[0]
        first = next((i for i in block.instructions if not i.isa(CONST)), None)
        b = Builder(block, before=first)
        cpe = b.create("cpe_id", types=[INDEX], names=["id"])
        for inst in list(block.instructions):
            if inst.isa(PARALLEL):
                self.distribute(inst, cpe)
            elif not inst.isa(CONST, CPE_ID) and not _pure(inst):
                _guard_cpe0(inst, cpe)
        for inst in list(f.walk()):
            if inst.isa(COPY_IN, COPY_OUT) and inst.parent is not None:
                self.lower_copy(inst)
        self.place_get_waits(f)

    def distribute(self, loop: Instruction, cpe: Value) -> None:
        if "reads" in loop.attrs:     # the I/O lower bound's input (swir.costmodel.cost)
            loop.function.attrs["reads"] = tuple(loop.attrs["reads"])
        lb, ub = loop.args[0], loop.args[1]
        cpes = self.target_figures.cpes
        workers = int(loop.attrs.get("workers", cpes))
        extent = ub - lb
        assert extent.is_constant, "parallel loops of the buffered stage have constant bounds"
        b = Builder(loop.parent, before=loop)
        guard = None
        if workers < cpes:
            guard = b.create_inst("if", Constraint(Expr.of(cpe), "<", Expr.of(workers)),
                                  regions=[Region([Block(None)])])
            b = Builder(guard.regions[0].blocks[0])
        attrs = {"extent": extent.const, "workers": workers}
        grain = write_grain(loop, extent.const, workers)
        if grain > 1:
            # no two CPEs may write into one 32-byte block (swir/analysis/write_blocks.py)
            attrs["grain"] = grain
            self.bump("parallel loops split in units (32-byte write blocks)")
            if grain >= extent.const:
                self.bump("parallel loops left to one CPE (32-byte write blocks)")
        chunk = b.create_inst("chunk", Expr.of(cpe), attrs=attrs,
                              types=[INDEX, INDEX], names=["lo", "hi"])
        lo, hi = chunk.results
        body = loop.regions[0]
        shared = self.shared_copies(loop)
        busy = min(workers, cpes, -(-extent.const // grain))
        bcast = [c for c in shared if self.broadcast and busy >= 2 and
                 _hoisted_pays(c, busy, self.target_figures, self.strided_broadcast)]
        shared = [c for c in shared if c not in bcast]
        # Each CPE runs the kernel once: its LDM buffers (static arrays in
        # the C code) are allocated once, before its share of the tiles; with
        # broadcasts, before the guard too (every CPE takes part in them).
        at = Builder(guard.parent, before=guard) if guard is not None and bcast else b
        for alloc in [i for i in body.blocks[0].instructions if i.isa(LDM_ALLOC)]:
            alloc.detach()
            at.insert(alloc)
        for copy in bcast:
            at.insert(copy.detach())
            self.broadcasts.add(id(copy))
            self.bump("tiles broadcast (fetched once for every CPE)")
        if shared:          # fetched once by each CPE that has tiles
            g = b.create_inst("if", Constraint(Expr.of(lo), "<", Expr.of(hi)),
                              regions=[Region([Block(None)])])
            for copy in shared:
                g.regions[0].blocks[0].append(copy.detach())
                self.bump("tiles every CPE reads alike, fetched once per CPE")
        if self.broadcast and workers == cpes and extent.const % grain == 0 and \
                extent.const // grain % cpes == 0:
            self.lockstep |= {id(c) for c in self.lockstep_copies(loop)}
        loop.regions = []
        new = b.create_inst("for", Expr.of(lo) + lb.const, Expr.of(hi) + lb.const,
                            regions=[body])
        body.parent = new
        loop.erase()
        self.bump("parallel loops distributed")

    def shared_copies(self, loop: Instruction) -> list[Instruction]:
        """The copy_ins at the top of a parallel loop's body that read the
        same tile in every iteration: their region reads nothing the loop
        defines, their LDM buffer nothing else writes, their extents are
        constant and the kernel never writes their source. A CPE needs them
        once, before its first tile."""
        block = loop.regions[0].blocks[0]
        inside = {id(r) for i in loop.walk() for r in i.results} | \
            {id(a) for a in block.args}
        written = set(written_params(loop.function))
        out = []
        for inst in block.instructions:
            if not inst.isa(COPY_IN):
                continue
            acc, ldm = inst.args[0], inst.args[1]
            if not _read_alike(inst, written):
                continue
            if any(id(v) in inside for v in acc.values()):
                continue
            if CopyRegion(acc, ldm, True).compounds:
                continue
            out.append(inst)
        return out

    def lockstep_copies(self, loop: Instruction) -> list[Instruction]:
        """The copy_ins inside a parallel loop's tile loops that every CPE
        runs alike when every CPE runs as many iterations of the loop (the
        caller's test): their region, and the bounds of every loop and the
        conditions of every ``if`` around them, use nothing the parallel
        loop's variable decides. In each round every CPE fetches the same
        tile at the same time, so one broadcast can serve all (a broadcast is
        collective: every CPE must reach it in the same order)."""
        iv = loop.regions[0].blocks[0].args[0]
        varying = {id(iv)}                 # values that differ between CPEs
        out = []
        written = set(written_params(loop.function))
        for inst in loop.walk():
            if inst is loop:
                continue
            # a load's value is data: taken as differing between CPEs
            moved = inst.isa(LOAD) or any(id(v) in varying for v in inst.operands)
            if moved:
                varying |= {id(r) for r in inst.results}
                varying |= {id(a) for r in inst.regions for b in r.blocks for a in b.args}
            if inst.isa(COPY_IN) and not any(id(v) in varying for v in inst.operands) \
                    and _read_alike(inst, written) and \
                    not any(a.isa(FOR, IF) and any(id(v) in varying
                                                   for v in a.operands)
                            for a in _ancestors_within(inst, loop)):
                out.append(inst)
        return out

    # -- copies → DMA ------------------------------------------------------------------
    def lower_copy(self, inst: Instruction) -> None:
        """Lower a copy; a broadcast (decided, or a lock-step copy whose DMAs
        make one pay) is lowered as any copy, then its gets made broadcasts."""
        decided = id(inst) in self.broadcasts
        if not decided and id(inst) not in self.lockstep:
            self.lower_copy_once(inst)
            return
        block = inst.parent
        before = {id(i) for i in block.instructions}
        self.lower_copy_once(inst)
        new = [i for i in block.instructions if id(i) not in before]
        if decided or _broadcast_pays(_gets_in(new), self.target_figures.cpes, self.target_figures,
                                      self.strided_broadcast):
            _to_broadcasts(new)
            if not decided:
                self.bump("tiles broadcast in lock-step tile loops")

    def lower_copy_once(self, inst: Instruction) -> None:
        if inst.isa(COPY_IN) and inst.attrs.get("fill") is not None:
            PaddedCopy(inst).lower()
            self.bump("padded tile loads (halo filled in LDM)")
            inst.erase()
            return
        get = inst.isa(COPY_IN)
        acc: Access = inst.args[0] if get else inst.args[1]
        ldm: Value = inst.args[1] if get else inst.args[0]
        region = CopyRegion(acc, ldm, get)
        b = Builder(inst.parent, before=inst)
        if region.compounds:
            region.emit_cases(b, region.compounds, {})
            self.bump("edge-tile branches", 2 ** len(region.compounds) - 1)
        else:
            n = region.emit(b, GET_REPLY if get else PUT_REPLY, {})
            if not get:
                b.create_inst("dma_wait", attrs={"reply": PUT_REPLY, "times": n})
        inst.erase()

    def delay_put_waits(self, f: Function) -> None:
        """A put at the end of a loop body is waited for at the start of the
        next iteration (before anything can overwrite its buffer) and once
        after the loop, so the transfer overlaps the loop's control and the
        next tile's first gets."""
        for loop in [i for i in f.walk() if i.isa(FOR)]:
            body = loop.regions[0].blocks[0].instructions
            if len(body) < 2 or not body[-1].isa(DMA_WAIT) or \
                    body[-1].attrs.get("reply") != PUT_REPLY or not body[-2].isa(DMA_PUT):
                continue
            wait = body[-1]
            put_buffer = body[-2].args[0]
            put_buffer = put_buffer.base if isinstance(put_buffer, Access) else put_buffer
            if any(a is loop for a in ancestors(put_buffer.owner)):
                continue   # the buffer ends with the iteration: wait inside it
            iv = loop.regions[0].blocks[0].args[0]
            lb, ub = Expr.of(loop.args[0]), Expr.of(loop.args[1])
            wait.detach()
            first = loop.regions[0].blocks[0].instructions[0]
            g = Instruction("if", [Constraint(Expr.of(iv), ">", lb)],
                            regions=[Region([Block(None)])])
            first.insert_before(g)
            g.regions[0].blocks[0].append(Instruction("dma_wait", attrs=dict(wait.attrs)))
            after = Instruction("if", [Constraint(lb, "<", ub)],
                                regions=[Region([Block(None)])])
            loop.insert_after(after)
            after.regions[0].blocks[0].append(wait)
            self.bump("put waits delayed to the next iteration")

    # -- double buffering ---------------------------------------------------------------
    def double_buffer_loops(self, f: Function) -> None:
        for loop in [i for i in f.walk() if i.isa(FOR)]:
            if loop.parent is None or not loop.args:   # inside a loop already rewritten
                continue
            plan = double_buffer_plan(loop)
            if plan is None:
                continue
            gets, wait, rest, bufs = plan
            extra = sum(b.type.slot_bytes for b in bufs)
            if ldm_total(f) + extra > self.capacity:
                self.bump("loops left single-buffered (LDM full)")
                continue
            double_buffer(loop, gets, wait, rest, bufs)
            self.bump("loops double-buffered")

    def place_get_waits(self, f: Function) -> None:
        """Gets on reply 0 are waited for once per group, just before the first
        instruction after the group that is not a DMA (the first use)."""
        wait_groups(f.body.blocks[0])


def _broadcast_pays(dmas: list[Instruction], busy: int, target: Target,
                    strided: bool = True) -> bool:
    """Whether one broadcast per get (every CPE waits while CPE 0 streams it
    at the broadcast bandwidth; on a target with RMA, gets it and sends it
    on by RMA) is modeled faster than ``busy`` CPEs each
    issuing the gets (sharing the bandwidth, start-ups in parallel): the
    cost model's DMA curve and broadcast figures (docs/cost-model.md).
    Without ``strided``, never when a get moves strided blocks."""
    per_cpe = broadcast = 0.0
    for dma in dmas:
        esize = (dma.args[1].base if isinstance(dma.args[1], Access)
                 else dma.args[1]).type.element.bytes
        count, bsize = dma.attrs["count"], attr_or_default(dma, "bsize")
        if 0 < bsize < count and not strided:
            return False
        if target.rma and esize < 4:
            # RMA moves whole 4-byte words from 4-byte aligned addresses
            # (docs/codegen.md, "The SW26010-Pro"): elements of 4 bytes or
            # more keep every length and LDM offset a multiple of 4.
            return False
        if 0 < bsize < count:
            blocks = [(bsize * esize, count // bsize)] + \
                ([(count % bsize * esize, 1)] if count % bsize else [])
        else:
            blocks = [(count * esize, 1)]
        # a DMA under dma_startup_bytes pays its share of the start-up
        share = min(1.0, count * esize / target.dma_startup_bytes)
        per_cpe += busy * stream_seconds(blocks, target.dma_half_block,
                                         target.peak_bandwidth * target.dma_efficiency) \
            + share * target.dma_startup_cycles / target.clock_hz
        broadcast += broadcast_seconds(blocks, target)
    return bool(dmas) and broadcast < per_cpe


def broadcast_seconds(blocks: list[tuple[int, int]], target: Target) -> float:
    """One broadcast get of ``blocks`` on ``target``'s own figures, as the
    cost model charges it (swir.costmodel.cost.Machine.bcast_seconds, which
    this layer may not import; test_insert_dma checks the two agree): one
    BCAST_MODE stream, or with RMA CPE 0's get at what one CPE draws and
    the two RMA hops; plus the fixed cost."""
    fixed = target.bcast_fixed_cycles / target.clock_hz
    if not target.rma:
        return stream_seconds(blocks, target.bcast_half_block, target.bcast_bandwidth) + fixed
    one_cpe = min(target.peak_bandwidth * target.dma_efficiency, target.dma_cpe_bandwidth)
    nbytes = sum(b * k for b, k in blocks)
    hops = 2 * (target.rma_startup_cycles / target.clock_hz + nbytes / target.rma_bandwidth)
    return stream_seconds(blocks, target.dma_half_block, one_cpe) + hops + fixed


def _hoisted_pays(copy: Instruction, busy: int, target: Target, strided: bool) -> bool:
    """_broadcast_pays for a copy_in not yet lowered (a copy of it lowered
    aside: its DMAs)."""
    from swir.ir.clone import clone
    scratch = Block(None)
    trial, = clone(Builder(scratch), [copy], {})
    if trial.attrs.get("fill") is not None:
        PaddedCopy(trial).lower()
    else:
        CopyRegion(trial.args[0], trial.args[1], True).emit(
            Builder(scratch, before=trial), GET_REPLY, {})
    trial.erase()
    pays = _broadcast_pays(_gets_in(scratch.instructions), busy, target, strided)
    erase_all(scratch)
    return pays


def _gets_in(insts: list[Instruction]) -> list[Instruction]:
    return [d for i in insts for d in i.walk() if d.isa(DMA_GET)]


def _read_alike(copy: Instruction, written: set[int]) -> bool:
    """Whether a copy_in's source is never written by the kernel (nor, for a
    `buffer` global, by any cpe kernel) and its LDM buffer is written by
    this copy alone: what a tile every CPE reads alike needs."""
    acc, ldm = copy.args[0], copy.args[1]
    src = acc.base
    if isinstance(src, FuncParam) and src.index in written:
        return False
    if isinstance(src, Global) and src.kind != "global" and \
            writes_global((f for f in copy.function.module.functions if f.kind == "kernel"), src):
        return False
    return not (any(u is not copy and not u.isa(LOAD, COPY_OUT) for u in ldm.users)
                or any(u.isa(COPY_OUT) and u.args[0] is not ldm for u in ldm.users))


def _ancestors_within(inst: Instruction, top: Instruction) -> list[Instruction]:
    """The instructions whose regions hold ``inst``, up to (without) ``top``."""
    out = []
    for a in ancestors(inst):
        if a is top:
            break
        out.append(a)
    return out


def _to_broadcasts(lowered: list[Instruction]) -> None:
    """The gets of a lowered copy_in made broadcasts (complete on return:
    their waits go)."""
    for top in lowered:
        for inst in list(top.walk()):
            if inst.isa(DMA_GET):
                inst.insert_before(Instruction("dma_bcast", list(inst.args), arrow=1,
                                               attrs={**inst.attrs, "reply": BCAST_REPLY}))
                inst.erase()
            elif inst.isa(DMA_WAIT):
                inst.erase()


def ldm_total(f: Function) -> int:
    """The LDM bytes of every ldm_alloc in f (each is a static array per CPE,
    LDM_ALIGN-aligned)."""
    return sum(i.results[0].type.slot_bytes for i in f.walk() if i.isa(LDM_ALLOC))


def _pure(inst: Instruction) -> bool:
    d = inst.opdef
    return d is not None and d.pure and not inst.regions


def _guard_cpe0(inst: Instruction, cpe: Value) -> None:
    guard = Instruction("if", [Constraint(Expr.of(cpe), "==", Expr.of(0))],
                        regions=[Region([Block(None)])])
    inst.insert_before(guard)
    inst.detach()
    guard.regions[0].blocks[0].append(inst)

