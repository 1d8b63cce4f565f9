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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from swir.analysis.calling import writes_global, written_params
from swir.analysis.write_blocks import write_grain
from swir.diagnostics import Diagnostic
from swir.ir.affine import Compound, Expr
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
    Range,
    Region,
    Value,
)
from swir.ir.types import INDEX
from swir.ops.util import attr_or_default
from swir.passes.manager import AnalysisManager, Pass, PassFailure, option
from swir.target import Target, stream_seconds, target_of
from swir.verifier import module_attr_ldm

GET_REPLY, PUT_REPLY, EDGE_REPLY = 0, 1, 2
MAX_STAGED_DMAS = 32     # a padded tile's staged DMAs, unrolled
# A padded tile's branches per dimension: each start that clips it. Within
# the padding these are at most the pad's size; remainder tiles' shorter
# extents add starts no tile takes (branches never run), hence the room.
MAX_CLIPPED_STARTS = 64
EVEN_REPLY, ODD_REPLY = 3, 4     # double buffering: the two halves of a tile pair
BCAST_REPLY = 5                  # broadcasts: CPE 0 waits for each alone


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

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        self.broadcasts: set[int] = set()      # ids of the copy_ins to broadcast
        self.lockstep: set[int] = set()        # ids of tile-loop copy_ins that may be broadcast
        split = {}
        for f in list(module.functions):
            if f.kind == "kernel" and f.body is not None:
                split[f.name] = self.split_kernel(module, f)
        self.target_figures = target_of(module.attrs)
        size = module_attr_ldm(module)
        self.capacity = size - target_of(module.attrs).default_reserve(size)
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
        loops = [i for i in block.instructions if i.opname == "parallel"]
        others = [i for i in block.instructions
                  if i.opname not in ("parallel", "const", "return")]
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
                if inst.opname == "const" and any(u in inner for r in inst.results
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
            app = inst.args[0] if inst.opname == "call" and inst.args else None
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
        first = next((i for i in block.instructions if i.opname != "const"), None)
        b = Builder(block, before=first)
        cpe = b.create("cpe_id", types=[INDEX], names=["id"])
        for inst in list(block.instructions):
            if inst.opname == "parallel":
                self.distribute(inst, cpe)
            elif inst.opname not in ("const", "cpe_id") and not _pure(inst):
                _guard_cpe0(inst, cpe)
        for inst in list(f.walk()):
            if inst.opname in ("copy_in", "copy_out") and inst.parent is not None:
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
                 _hoisted_pays(c, busy, self.target_figures)]
        shared = [c for c in shared if c not in bcast]
        # Each CPE runs the kernel once: its LDM buffers (static arrays in
        # the C code) are allocated once, before its share of the tiles; with
        # broadcasts, before the guard too (every CPE takes part in them).
        at = Builder(guard.parent, before=guard) if guard is not None and bcast else b
        for alloc in [i for i in body.blocks[0].instructions if i.opname == "ldm_alloc"]:
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
            if inst.opname != "copy_in":
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
            moved = inst.opname == "load" or any(id(v) in varying for v in inst.operands)
            if moved:
                varying |= {id(r) for r in inst.results}
                varying |= {id(a) for r in inst.regions for b in r.blocks for a in b.args}
            if inst.opname == "copy_in" and not any(id(v) in varying for v in inst.operands) \
                    and _read_alike(inst, written) and \
                    not any(a.opname in ("for", "if") and any(id(v) in varying
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
        if decided or _broadcast_pays(_gets_in(new), self.target_figures.cpes, self.target_figures):
            _to_broadcasts(new)
            if not decided:
                self.bump("tiles broadcast in lock-step tile loops")

    def lower_copy_once(self, inst: Instruction) -> None:
        if inst.opname == "copy_in" and inst.attrs.get("fill") is not None:
            PaddedCopy(inst).lower()
            self.bump("padded tile loads (halo filled in LDM)")
            inst.erase()
            return
        get = inst.opname == "copy_in"
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
        for loop in [i for i in f.walk() if i.opname == "for"]:
            body = loop.regions[0].blocks[0].instructions
            if len(body) < 2 or body[-1].opname != "dma_wait" or \
                    body[-1].attrs.get("reply") != PUT_REPLY or body[-2].opname != "dma_put":
                continue
            wait = body[-1]
            put_buffer = body[-2].args[0]
            put_buffer = put_buffer.base if isinstance(put_buffer, Access) else put_buffer
            if any(a is loop for a in _ancestors(put_buffer.owner)):
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
        for loop in [i for i in f.walk() if i.opname == "for"]:
            if loop.parent is None or not loop.args:   # inside a loop already rewritten
                continue
            plan = _double_buffer_plan(loop)
            if plan is None:
                continue
            gets, wait, rest, bufs = plan
            extra = sum(b.type.slot_bytes for b in bufs)
            if ldm_total(f) + extra > self.capacity:
                self.bump("loops left single-buffered (LDM full)")
                continue
            _double_buffer(loop, gets, wait, rest, bufs)
            self.bump("loops double-buffered")

    def place_get_waits(self, f: Function) -> None:
        """Gets on reply 0 are waited for once per group, just before the first
        instruction after the group that is not a DMA (the first use)."""
        _wait_groups(f.body.blocks[0])


def _broadcast_pays(dmas: list[Instruction], busy: int, target: Target) -> bool:
    """Whether one broadcast per get (every CPE waits while CPE 0 streams it
    at the broadcast bandwidth) is modeled faster than ``busy`` CPEs each
    issuing the gets (sharing the bandwidth, start-ups in parallel): the
    cost model's DMA curve and broadcast figures (docs/cost-model.md)."""
    per_cpe = broadcast = 0.0
    for dma in dmas:
        esize = (dma.args[1].base if isinstance(dma.args[1], Access)
                 else dma.args[1]).type.element.bytes
        count, bsize = dma.attrs["count"], attr_or_default(dma, "bsize")
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
        broadcast += stream_seconds(blocks, target.bcast_half_block, target.bcast_bandwidth) \
            + target.bcast_fixed_cycles / target.clock_hz
    return bool(dmas) and broadcast < per_cpe


def _hoisted_pays(copy: Instruction, busy: int, target: Target) -> bool:
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
    pays = _broadcast_pays(_gets_in(scratch.instructions), busy, target)
    _erase_all(scratch)
    return pays


def _gets_in(insts: list[Instruction]) -> list[Instruction]:
    return [d for i in insts for d in i.walk() if d.opname == "dma_get"]


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
    return not (any(u is not copy and u.opname not in ("load", "copy_out") for u in ldm.users)
                or any(u.opname == "copy_out" and u.args[0] is not ldm for u in ldm.users))


def _ancestors_within(inst: Instruction, top: Instruction) -> list[Instruction]:
    """The instructions whose regions hold ``inst``, up to (without) ``top``."""
    out = []
    for a in _ancestors(inst):
        if a is top:
            break
        out.append(a)
    return out


def _to_broadcasts(lowered: list[Instruction]) -> None:
    """The gets of a lowered copy_in made broadcasts (complete on return:
    their waits go)."""
    for top in lowered:
        for inst in list(top.walk()):
            if inst.opname == "dma_get":
                inst.insert_before(Instruction("dma_bcast", list(inst.args), arrow=1,
                                               attrs={**inst.attrs, "reply": BCAST_REPLY}))
                inst.erase()
            elif inst.opname == "dma_wait":
                inst.erase()


def _wait_groups(block: Block) -> None:
    pending = 0
    for inst in list(block.instructions):
        issued = _gets_issued(inst)
        if issued is not None:  # a get, or a loop of them: counted here
            pending += issued
            continue
        if _self_waiting_gets(inst):   # an edge-tile branch of gets: it waits for itself
            continue
        if pending:
            inst.insert_before(Instruction("dma_wait",
                                           attrs={"reply": GET_REPLY, "times": pending}))
            pending = 0
        for region in inst.regions:
            for b in region.blocks:
                _wait_groups(b)
    if pending:
        block.append(Instruction("dma_wait", attrs={"reply": GET_REPLY, "times": pending}))


def ldm_total(f: Function) -> int:
    """The LDM bytes of every ldm_alloc in f (each is a static array per CPE,
    LDM_ALIGN-aligned)."""
    return sum(i.results[0].type.slot_bytes for i in f.walk() if i.opname == "ldm_alloc")


def _double_buffer_plan(loop: Instruction):
    """A tile loop whose body starts with a group of gets (reply 0) into whole
    LDM buffers allocated outside it, then their wait: the gets can run one
    tile ahead. The buffers must be written by nothing else in the loop and
    not used after it."""
    if _varying([Expr.of(a) for a in loop.args[:2]]):
        return None           # min / max bounds: the guards on t + step could not be bounded
    body = loop.regions[0].blocks[0].instructions
    k = 0
    while k < len(body) and (body[k].opname == "dma_bcast" or body[k].opname == "dma_get"
                             and body[k].attrs.get("reply") == 0):
        k += 1
    gets = [i for i in body[:k] if i.opname == "dma_get"]
    if not gets or k >= len(body) or body[k].opname != "dma_wait" or \
            body[k].attrs.get("reply") != GET_REPLY or body[k].attrs.get("times") != len(gets):
        return None
    # broadcasts (complete on return) stay in every tile, after the wait
    wait, rest = body[k], [i for i in body[:k] if i.opname == "dma_bcast"] + body[k + 1:]
    bufs = []
    for g in gets:
        dst = g.args[1]
        if not isinstance(dst, Value) or dst.owner.opname != "ldm_alloc":
            return None
        if any(a is loop for a in _ancestors(dst.owner)):
            return None
        bufs.append(dst)
    if len(set(bufs)) != len(bufs):
        return None
    iv = loop.regions[0].blocks[0].args[0]
    if not any(iv in set(g.operands) for g in gets):
        return None           # the same data every tile: nothing to prefetch
    inside = set(loop.walk())
    for buf in bufs:
        for u in buf.users:
            if u not in inside:
                return None   # used before or after the loop: the second buffer would differ
            if u not in gets and _writes(u, buf):
                return None
    # Prefetching tile t+1 before tile t runs is wrong if the loop writes the
    # memory it reads (a dependence between tiles through main memory).
    sources = {g.args[0].base for g in gets}
    for u in inside:
        target = u.args[1] if u.opname in ("store", "dma_put") else None
        if isinstance(target, Access) and target.base in sources:
            return None
        if u.opname in ("call", "spawn"):
            return None
    return gets, wait, rest, bufs


def _ancestors(inst: Instruction):
    p = inst.parent
    while p is not None and p.parent is not None:
        owner = p.parent.parent
        if not isinstance(owner, Instruction):
            return
        yield owner
        p = owner.parent


def _after(u: Instruction, loop: Instruction) -> bool:
    """Whether ``u`` comes after ``loop`` (in its block or an enclosing one)."""
    outer = loop
    while outer is not None:
        block = outer.parent
        x = u
        while x is not None and x.parent is not block:
            owner = x.parent.parent.parent if x.parent and x.parent.parent else None
            x = owner if isinstance(owner, Instruction) else None
        if x is not None:
            return block.index_of(x) > block.index_of(outer)
        owner = block.parent.parent if block.parent else None
        outer = owner if isinstance(owner, Instruction) else None
    return False


def _writes(u: Instruction, buf: Value) -> bool:
    if u.opname == "store":
        return u.args[1].base is buf
    if u.opname == "dma_get":
        dst = u.args[1]
        return dst is buf or (isinstance(dst, Access) and dst.base is buf)
    return u.opname not in ("load", "dma_put")


def _double_buffer(loop: Instruction, gets, wait, rest, bufs) -> None:
    """for t { gets(t); wait; body(t) } becomes, with buffers B0 = B and B1:
    gets(lb) -> B0; for t step 2 { gets(t+1) -> B1; wait B0; body(t, B0);
    if t+1 < ub { gets(t+2) -> B0; wait B1; body(t+1, B1) } } — each get
    issued one tile ahead, guarded at the end, on alternating reply words."""
    from swir.ir.clone import clone
    iv = loop.regions[0].blocks[0].args[0]
    lb, ub = Expr.of(loop.args[0]), Expr.of(loop.args[1])
    step = int(attr_or_default(loop, "step"))
    times = wait.attrs["times"]
    second = {}
    for buf in bufs:
        b1 = Builder(buf.owner.parent, before=buf.owner).create_inst(
            "ldm_alloc", types=[buf.type], names=[f"{buf.name}_next"]).results[0]
        second[buf] = b1
    b = Builder(loop.parent, before=loop)

    def issue(at: Builder, t: Expr, swap: bool, reply: int) -> None:
        mapping = {iv: t, **(second if swap else {})}
        for new in clone(at, gets, mapping):
            new.attrs["reply"] = reply

    def when(at: Builder, c: Constraint) -> Builder:
        g = at.create_inst("if", c, regions=[Region([Block(None)])])
        return Builder(g.regions[0].blocks[0])

    issue(when(b, Constraint(lb, "<", ub)), lb, False, EVEN_REPLY)
    with b.loop(loop.args[0], loop.args[1], step=2 * step, name=iv.name) as t:
        # Guards on the loop variable itself (t < ub - s), which the verifier
        # uses to bound every subscript built from it.
        issue(when(b, Constraint(Expr.of(t), "<", ub - step)), Expr.of(t) + step, True,
              ODD_REPLY)
        b.create_inst("dma_wait", attrs={"reply": EVEN_REPLY, "times": times})
        clone(b, rest, {iv: Expr.of(t)})
        odd = when(b, Constraint(Expr.of(t), "<", ub - step))
        issue(when(odd, Constraint(Expr.of(t), "<", ub - 2 * step)), Expr.of(t) + 2 * step,
              False, EVEN_REPLY)
        odd.create_inst("dma_wait", attrs={"reply": ODD_REPLY, "times": times})
        clone(odd, rest, {iv: Expr.of(t) + step, **second})
    loop.drop_references()
    loop.detach()


def _self_waiting_gets(inst: Instruction) -> bool:
    """An edge-tile branch of gets: loops / guards holding only gets and waits
    on a reply word other than the group's (they wait for themselves). Puts
    read LDM, so they never pass a pending group."""
    if not (inst.regions and inst.opname in ("for", "if")):
        return False

    def ok(i: Instruction) -> bool:
        if i.opname in ("dma_get", "dma_wait", "dma_bcast"):
            return i.attrs.get("reply") != GET_REPLY
        return i.opname in ("for", "if") and all(
            ok(j) for r in i.regions for b in r.blocks for j in b.instructions)
    return ok(inst)


def _gets_issued(inst: Instruction) -> int | None:
    """How many reply-0 gets an instruction issues (None: it is not a get or a
    loop of gets with a constant trip count)."""
    if inst.opname == "dma_get" and inst.attrs.get("reply") == GET_REPLY:
        return 1
    if inst.opname == "dma_bcast":      # complete on return: it passes a group
        return 0
    lb, ub = (Expr.of(a) for a in inst.args[:2]) if inst.opname == "for" else (None, None)
    if inst.opname == "for" and lb.is_constant and ub.is_constant:
        body = inst.regions[0].blocks[0].instructions
        counts = [_gets_issued(i) for i in body]
        if body and all(c is not None for c in counts):
            return (ub.const - lb.const) * sum(counts)
    return None


class CopyRegion:
    """A copy's main-memory region: per ranged dimension its start, extent
    (an expression: edge tiles are smaller) and the LDM dimension it fills."""

    def __init__(self, acc: Access, ldm: Value, get: bool) -> None:
        self.acc, self.ldm, self.get = acc, ldm, get
        self.op = "dma_get" if get else "dma_put"
        self.offset: dict[int, int] = {}    # LDM start per ranged dimension (padded tiles)
        self.shape = acc.base.type.shape
        self.pitch = [math.prod(self.shape[d + 1:]) for d in range(len(self.shape))]
        self.start = [ix.lo if isinstance(ix, Range) else ix for ix in acc.indices]
        maxes = iter(ldm.type.shape)
        self.dims = [(d, ix.lo, ix.hi - ix.lo, next(maxes))
                     for d, ix in enumerate(acc.indices) if isinstance(ix, Range)]
        self.compounds = _varying([ext for _, _, ext, _ in self.dims])

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
        _edge_cases(Builder(self.inst.parent, before=self.inst), _varying(exts), {},
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
                _erase_all(scratch)
                scratch, n, region = trial, k, staged
            else:
                _erase_all(trial)
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


def _erase_all(block: Block) -> None:
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
    if isinstance(owner, Instruction) and owner.opname == "chunk":
        return 0, int(owner.attrs["extent"])
    if isinstance(owner, Instruction) and owner.opname == "cpe_id":
        f = owner.function
        module = f.module if f is not None else None
        return 0, target_of(module.attrs if module is not None else {}).cpes - 1
    if isinstance(owner, Block) and owner.parent is not None and \
            isinstance(owner.parent.parent, Instruction) and \
            owner.parent.parent.opname in ("for", "parallel"):
        loop = owner.parent.parent
        lb, ub = _range(Expr.of(loop.args[0])), _range(Expr.of(loop.args[1]))
        return None if lb is None or ub is None else (lb[0], ub[1] - 1)
    return None


def _varying(extents: list[Expr]) -> list[Compound]:
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


def _pure(inst: Instruction) -> bool:
    d = inst.opdef
    return d is not None and d.pure and not inst.regions


def _guard_cpe0(inst: Instruction, cpe: Value) -> None:
    guard = Instruction("if", [Constraint(Expr.of(cpe), "==", Expr.of(0))],
                        regions=[Region([Block(None)])])
    inst.insert_before(guard)
    inst.detach()
    guard.regions[0].blocks[0].append(inst)

