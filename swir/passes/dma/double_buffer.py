"""-insert-dma's double buffering and wait placement: a tile loop's gets
issued one tile ahead into a second buffer set on alternating reply words
(so the transfer of tile t+1 overlaps the compute of tile t), and each
group of gets waited for just before its buffers are first used.
"""

from __future__ import annotations

from swir.analysis.dependence import ancestors
from swir.ir.affine import Expr
from swir.ir.builder import Builder
from swir.ir.core import Access, Block, Constraint, Instruction, Region, Value
from swir.ops import (CALL, DMA_BCAST, DMA_GET, DMA_PUT, DMA_WAIT, FOR, IF, LDM_ALLOC, LOAD,
                      SPAWN, STORE)
from swir.ops.util import attr_or_default
from swir.passes.dma.copies import varying_extents
from swir.passes.dma.replies import EVEN_REPLY, GET_REPLY, ODD_REPLY


def wait_groups(block: Block) -> None:
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
                wait_groups(b)
    if pending:
        block.append(Instruction("dma_wait", attrs={"reply": GET_REPLY, "times": pending}))


def double_buffer_plan(loop: Instruction):
    """A tile loop whose body starts with a group of gets (reply 0) into whole
    LDM buffers allocated outside it, then their wait: the gets can run one
    tile ahead. The buffers must be written by nothing else in the loop and
    not used after it."""
    if varying_extents([Expr.of(a) for a in loop.args[:2]]):
        return None           # min / max bounds: the guards on t + step could not be bounded
    body = loop.regions[0].blocks[0].instructions
    k = 0
    while k < len(body) and (body[k].isa(DMA_BCAST) or body[k].isa(DMA_GET)
                             and body[k].attrs.get("reply") == 0):
        k += 1
    gets = [i for i in body[:k] if i.isa(DMA_GET)]
    if not gets or k >= len(body) or not body[k].isa(DMA_WAIT) or \
            body[k].attrs.get("reply") != GET_REPLY or body[k].attrs.get("times") != len(gets):
        return None
    # broadcasts (complete on return) stay in every tile, after the wait
    wait, rest = body[k], [i for i in body[:k] if i.isa(DMA_BCAST)] + body[k + 1:]
    bufs = []
    for g in gets:
        dst = g.args[1]
        if not isinstance(dst, Value) or not dst.owner.isa(LDM_ALLOC):
            return None
        if any(a is loop for a in ancestors(dst.owner)):
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
        target = u.args[1] if u.isa(STORE, DMA_PUT) else None
        if isinstance(target, Access) and target.base in sources:
            return None
        if u.isa(CALL, SPAWN):
            return None
    return gets, wait, rest, bufs


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
    if u.isa(STORE):
        return u.args[1].base is buf
    if u.isa(DMA_GET):
        dst = u.args[1]
        return dst is buf or (isinstance(dst, Access) and dst.base is buf)
    return not u.isa(LOAD, DMA_PUT)


def double_buffer(loop: Instruction, gets, wait, rest, bufs) -> None:
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
    if not (inst.regions and inst.isa(FOR, IF)):
        return False

    def ok(i: Instruction) -> bool:
        if i.isa(DMA_GET, DMA_WAIT, DMA_BCAST):
            return i.attrs.get("reply") != GET_REPLY
        return i.isa(FOR, IF) and all(
            ok(j) for r in i.regions for b in r.blocks for j in b.instructions)
    return ok(inst)


def _gets_issued(inst: Instruction) -> int | None:
    """How many reply-0 gets an instruction issues (None: it is not a get or a
    loop of gets with a constant trip count)."""
    if inst.isa(DMA_GET) and inst.attrs.get("reply") == GET_REPLY:
        return 1
    if inst.isa(DMA_BCAST):      # complete on return: it passes a group
        return 0
    lb, ub = (Expr.of(a) for a in inst.args[:2]) if inst.isa(FOR) else (None, None)
    if inst.isa(FOR) and lb.is_constant and ub.is_constant:
        body = inst.regions[0].blocks[0].instructions
        counts = [_gets_issued(i) for i in body]
        if body and all(c is not None for c in counts):
            return (ub.const - lb.const) * sum(counts)
    return None
