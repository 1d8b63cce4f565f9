"""Ops of the loop, buffered and dma stages: structured loops and guards,
affine loads and stores, LDM buffers and region copies, DMA, CPE work split,
and spawning CPE kernels from the host.

Semantics (what the interpreter and the C emitter implement) are in docs/ir.md.
"""

from __future__ import annotations

from swir.ir.affine import Expr
from swir.ir.core import (Access, Constraint, FuncParam, Function, Global, Instruction, Range,
                          Region, Value)
from swir.ir.types import INDEX, BufType, LDMType, ScalarType, ShapedType, Type
from swir.ops.registry import (BUFFERED_AND_LATER, DMA_ONLY, LOOP_AND_LATER, Attr, Category,
                               OpDef, OpError, VerifyContext, register)
from swir.ops.util import (access_arg, attr, attr_or_default, callee, check_writable,
                           element_offset, index_expr, value_arg, value_ref)

# -- structured control flow -------------------------------------------------

def _verify_loop(inst: Instruction) -> None:
    index_expr(inst, 0)
    index_expr(inst, 1)
    step = attr_or_default(inst, "step")
    if not isinstance(step, int) or isinstance(step, bool) or step <= 0:
        raise OpError(f"loop step must be a positive integer, got {step!r}")
    if inst.attrs.get("workers", 1) <= 0:
        raise OpError(f"workers must be positive, got {inst.attrs['workers']}")
    body = inst.regions[0]
    if len(body.blocks) != 1:
        raise OpError("a loop body is a single block")
    args = body.blocks[0].args
    if len(args) != 1 or args[0].type != INDEX:
        raise OpError("a loop body block takes exactly its induction variable (index)")


def _verify_if(inst: Instruction) -> None:
    if not inst.args or not all(isinstance(s, Constraint) for s in inst.args):
        raise OpError("'if' takes one or more affine conditions like %i + 1 >= 0")
    for r in inst.regions:
        if len(r.blocks) != 1 or r.blocks[0].args:
            raise OpError("'if' branches are single blocks without arguments")


_LOOP_ATTRS = (Attr("step", "int", default=1, doc="iteration step (printed as 'step N')"),)

FOR = register(OpDef(
    "for", "Sequential loop: for %i = lb to ub step s { body }.",
    stages=LOOP_AND_LATER, num_args=(2, 2), attrs=_LOOP_ATTRS,
    verify=_verify_loop, num_regions=1, syntax="loop", pure=False,
    category=Category.LOOP))
PARALLEL = register(OpDef(
    "parallel", "Loop whose iterations are independent; spread over the CPEs.",
    stages=LOOP_AND_LATER, num_args=(2, 2),
    attrs=_LOOP_ATTRS + (Attr("workers", "int", doc="CPEs to spread over"),
                         Attr("reads", "ints",
                              doc="per kernel parameter, the distinct elements "
                                  "the loop's computation reads (-1: all it "
                                  "holds, or not read); set by -ldm-plan where "
                                  "a tensor is read in part")),
    verify=_verify_loop, num_regions=1, syntax="loop", pure=False,
    category=Category.LOOP))
IF = register(OpDef(
    "if", "Guarded region: if c0, c1 { then } else { otherwise }.",
    stages=LOOP_AND_LATER, num_args=(1, None), verify=_verify_if,
    num_regions=2, pure=False, category=Category.LOOP,
    min_regions=1))


# -- memory ----------------------------------------------------------------------

def _infer_load(inst: Instruction) -> list[Type]:
    acc = access_arg(inst, 0)
    if acc.is_region:
        raise OpError("'load' reads one element; ranges are for copies")
    return [acc.base.type.element]


def _verify_store(inst: Instruction) -> None:
    v = value_arg(inst, 0)
    acc = access_arg(inst, 1)
    if acc.is_region:
        raise OpError("'store' writes one element; ranges are for copies")
    if v.type != acc.base.type.element:
        raise OpError(f"stored value has type {v.type}, buffer elements are "
                      f"{acc.base.type.element}")
    check_writable(inst, 1)


def _infer_ldm_alloc(inst: Instruction) -> list[Type]:
    if len(inst.results) != 1 or not isinstance(inst.results[0].type, LDMType):
        raise OpError("'ldm_alloc' needs its result type written, e.g. : ldm<64 x f32>")
    return [inst.results[0].type]


def _region_fits(inst: Instruction, acc_index: int, ldm_index: int) -> None:
    acc = access_arg(inst, acc_index, (BufType,))
    ldm = value_arg(inst, ldm_index)
    if not isinstance(ldm.type, LDMType):
        raise OpError(f"copy needs an LDM buffer, got {ldm.type}")
    if acc.base.type.element != ldm.type.element:
        raise OpError(f"element types differ: {acc.base.type.element} in main memory, "
                      f"{ldm.type.element} in LDM")
    ranges = [i for i in acc.indices if isinstance(i, Range)]
    if len(ranges) != ldm.type.rank:
        raise OpError(f"copy region has {len(ranges)} ranged dimensions but the LDM buffer "
                      f"{ldm.type} has rank {ldm.type.rank}")
    for r, dim in zip(ranges, ldm.type.shape):
        extent = r.hi - r.lo
        if extent.is_constant and not 0 < extent.const <= dim:
            raise OpError(f"copy range of extent {extent.const} does not fit LDM "
                          f"dimension {dim}")


def _verify_copy(inst: Instruction) -> None:
    if inst.arrow != 1 or len(inst.args) != 2:
        raise OpError(f"'{inst.opname}' is written {inst.opname} SRC -> DST")
    if inst.opname == "copy_in":
        _region_fits(inst, 0, 1)
        fill = inst.attrs.get("fill")
        if fill is not None and not isinstance(fill, (int, float)):
            raise OpError(f"copy_in fill must be a number or a boolean, got {fill!r}")
    else:
        _region_fits(inst, 1, 0)
        check_writable(inst, 1)


def _verify_dma(inst: Instruction) -> None:
    if inst.arrow != 1 or len(inst.args) != 2:
        raise OpError(f"'{inst.opname}' is written {inst.opname} SRC -> DST")
    mem, ldm = (1, 0) if inst.opname == "dma_put" else (0, 1)
    acc = access_arg(inst, mem, (BufType,))
    if inst.opname == "dma_put":
        check_writable(inst, 1)
    if acc.is_region:
        raise OpError("a DMA names its main-memory start element, not a range")
    lv = inst.args[ldm]
    if isinstance(lv, Value):
        ldm_type = lv.type
    else:
        ldm_type = access_arg(inst, ldm, (LDMType,)).base.type
    if not isinstance(ldm_type, LDMType):
        raise OpError(f"a DMA's local side must be an LDM buffer, got {ldm_type}")
    if ldm_type.element != acc.base.type.element:
        raise OpError(f"element types differ: {acc.base.type.element} in main memory, "
                      f"{ldm_type.element} in LDM")
    count = inst.attrs["count"]
    if count <= 0:
        raise OpError(f"DMA count must be positive, got {count}")
    if isinstance(lv, Value) and count > ldm_type.num_elements:
        raise OpError(f"DMA of {count} elements does not fit LDM buffer {ldm_type} "
                      f"({ldm_type.num_elements} elements)")
    bsize, stride = attr_or_default(inst, "bsize"), attr_or_default(inst, "stride")
    if bsize < 0 or stride < 0 or (stride and not bsize):
        raise OpError("DMA block size and stride must be non-negative, with a block "
                      "size whenever there is a stride")


def _copy_extents(inst: Instruction, bounds) -> str | None:
    """Every range of a copy is non-empty and fits its LDM dimension, in every iteration."""
    acc, ldm = (inst.args[0], inst.args[1]) if inst.isa(COPY_IN) else \
        (inst.args[1], inst.args[0])
    ranges = [i for i in acc.indices if isinstance(i, Range)]
    for dim, (r, size) in enumerate(zip(ranges, ldm.type.shape)):
        longest, shortest = bounds.hi(r.hi - r.lo), bounds.hi(r.lo - r.hi)
        if longest is None or shortest is None:
            return f"cannot bound the extent of copy range {dim} statically"
        if longest > size:
            return f"copy range {dim} spans up to {longest} elements, more than LDM dimension {size}"
        if -shortest < 1:
            return f"copy range {dim} can be empty (extent down to {-shortest})"
    return None


def _dma_span(inst: Instruction, acc: Access, t: ShapedType, bounds) -> str | None:
    """A DMA reads or writes count elements (in blocks, when strided) from its
    start in main memory; the LDM side is always packed."""
    count, bsize = inst.attrs.get("count", 0), attr_or_default(inst, "bsize")
    stride = attr_or_default(inst, "stride")
    span = count
    if bsize and not isinstance(t, LDMType):
        blocks = -(-count // bsize)
        span = blocks * bsize + (blocks - 1) * stride
    return _past_end(acc, t, bounds, span, "the DMA start", f"DMA of {span} elements")


def _past_end(acc: Access, t: ShapedType, bounds, span: int, start: str, what: str
              ) -> str | None:
    """Why ``span`` elements from ``acc``'s element may leave ``t`` (None:
    they never do), ``start`` and ``what`` naming them in the message."""
    r = bounds.bounds(element_offset(acc.indices, t.shape))
    if r is None:
        return f"cannot bound {start} in {value_ref(acc.base)} statically"
    if r[1] + span > t.num_elements:
        return (f"{what} from offset up to {r[1]} runs past the end of "
                f"{value_ref(acc.base)} ({t.num_elements} elements)")
    return None


def _verify_wait(inst: Instruction) -> None:
    if attr_or_default(inst, "times") <= 0:
        raise OpError("'dma_wait' times must be positive")


def _infer_chunk(inst: Instruction) -> list[Type]:
    index_expr(inst, 0)
    if inst.attrs["extent"] < 0 or inst.attrs["workers"] <= 0:
        raise OpError("'chunk' needs extent >= 0 and workers > 0")
    if attr_or_default(inst, "grain") <= 0:
        raise OpError("'chunk' needs grain > 0")
    return [INDEX, INDEX]


def _chunk_worker(inst: Instruction, bounds) -> str | None:
    """The worker id lies in [0, workers) in every iteration."""
    workers = inst.attrs.get("workers", 0)
    r = bounds.bounds(Expr.of(inst.args[0]) if not isinstance(inst.args[0], Expr)
                      else inst.args[0])
    if r is None or r[0] < 0 or r[1] >= workers:
        shown = "unbounded" if r is None else f"[{r[0]}, {r[1]}]"
        return f"worker id ranges over {shown}, outside [0, {workers - 1}] (workers = {workers})"
    return None


def chunk_code(wid: str, lo: str, hi: str, extent: int, workers: int, grain: int = 1
               ) -> list[str]:
    """Python lines setting ``lo``, ``hi`` to worker ``wid``'s share of a
    ``chunk`` (the interpreters' and the traffic counter's one definition):
    the ``ceil(extent / grain)`` units of ``grain`` iterations are shared out
    balanced to within one unit, larger shares first; the last unit may be
    short."""
    units = -(-extent // grain)
    q, m = divmod(units, workers)
    lines = [f"{lo} = {wid} * {q} + ({wid} if {wid} < {m} else {m})" if m else
             f"{lo} = {wid} * {q}",
             f"{hi} = {lo} + {q + 1} if {wid} < {m} else {lo} + {q}" if m else
             f"{hi} = {lo} + {q}"]
    if grain != 1:
        lines += [f"{lo} = min({lo} * {grain}, {extent})", f"{hi} = min({hi} * {grain}, {extent})"]
    return lines


def _infer_dyn_index(inst: Instruction) -> list[Type]:
    v = value_arg(inst, 0)
    if not (isinstance(v.type, ScalarType) and v.type.is_int):
        raise OpError(f"'dyn_index' takes an integer scalar, got {v.type}")
    if inst.attrs["bound"] <= 0:
        raise OpError("'dyn_index' bound must be positive")
    return [INDEX]


def _verify_spawn(inst: Instruction) -> None:
    for slot in range(len(inst.args)):
        target = callee(inst, slot)
        if target.target != "cpe":
            raise OpError(f"'spawn' starts a cpe kernel; @{target.name} is not one")


def _ldm_fits(f: Function, context: VerifyContext) -> str | None:
    """The LDM buffers live at once in a kernel fit the module's LDM."""
    if f.kind != "kernel":
        return None
    need = _ldm_need(f.body)
    if need > context.ldm_bytes:
        return (f"LDM buffers live at once need {need} bytes, more than the "
                f"{context.ldm_bytes} bytes of LDM")
    return None


def _ldm_need(region: Region) -> int:
    """The LDM bytes of a region's buffers and, at most, of one nested region's
    at a time (a nested region's buffers die with it)."""
    total, nested = 0, 0
    for b in region.blocks:
        for inst in b.instructions:
            if inst.isa(LDM_ALLOC) and inst.results:
                t = inst.results[0].type
                if isinstance(t, LDMType):
                    total += t.slot_bytes    # each buffer starts 32-byte aligned
            for r in inst.regions:
                nested = max(nested, _ldm_need(r))
    return total + nested


def _broadcast_source(inst: Instruction, context: VerifyContext) -> str | None:
    """A broadcast reads main memory once for every CPE (CPE 0 issues it),
    so no CPE of the kernel run may write what it reads: the
    interpreter's CPEs, run one after another, would see other data than
    Sunway's. Written: by the function, by a cpe function that calls it
    (through the argument it passes), or, for a `buffer` global, by any
    cpe function."""
    base = inst.args[0].base if isinstance(inst.args[0], Access) else inst.args[0]
    f = inst.function
    if f is None:
        return None
    if isinstance(base, Global):
        if base.kind != "global" and context.cpe_writes_global(base):
            return (f"broadcasts from @{base.name}, which a cpe kernel also "
                    "writes (every CPE must read what CPE 0 fetched)")
        return None
    if isinstance(base, FuncParam) and base.owner is f:
        writer = context.param_writer(f, base.index)
        if writer is not None:
            return (f"broadcasts from %{base.name}, which @{writer} also writes "
                    "(every CPE must read what CPE 0 fetched)")
    return None


LOAD = register(OpDef(
    "load", "Read one element: %v = load %A[i, j] : f32.",
    stages=LOOP_AND_LATER, num_args=(1, 1), infer=_infer_load,
    reads_memory=True, category=Category.MEMORY))
STORE = register(OpDef(
    "store", "Write one element: store %v, %A[i, j].",
    stages=LOOP_AND_LATER, num_args=(2, 2), verify=_verify_store, pure=False,
    writes=(1,), category=Category.MEMORY))
DYN_INDEX = register(OpDef(
    "dyn_index", "A data-dependent subscript: the integer %v (negative counts from "
                 "the end, v + bound) as an index in [0, bound); outside "
                 "[-bound, bound) is a run-time error.",
    stages=LOOP_AND_LATER, num_args=(1, 1),
    attrs=(Attr("bound", "int", required=True, doc="size of the indexed dimension"),),
    infer=_infer_dyn_index, category=Category.MEMORY))
LDM_ALLOC = register(OpDef(
    "ldm_alloc", "Declare a buffer in the CPE's LDM: %b = ldm_alloc : ldm<...>.",
    stages=BUFFERED_AND_LATER, num_args=(0, 0), infer=_infer_ldm_alloc,
    verify_function=_ldm_fits, pure=False, context="cpe", category=Category.MEMORY))
COPY_IN = register(OpDef(
    "copy_in", "Copy a main-memory region into an LDM buffer: copy_in %A[..] -> %L.",
    stages=BUFFERED_AND_LATER, num_args=(2, 2), verify=_verify_copy, pure=False,
    verify_ranges=_copy_extents,
    attrs=(Attr("fill", "any", doc="the region may reach past %A's bounds; the "
                                   "elements outside get this value (a padded "
                                   "tile read from the unpadded tensor)"),),
    writes=(1,), arrow=True, context="cpe", category=Category.MEMORY))
COPY_OUT = register(OpDef(
    "copy_out", "Copy an LDM buffer to a main-memory region: copy_out %L -> %A[..].",
    stages=BUFFERED_AND_LATER, num_args=(2, 2), verify=_verify_copy, pure=False,
    verify_ranges=_copy_extents, writes=(1,), arrow=True, context="cpe",
    category=Category.MEMORY))

_DMA_ATTRS = (Attr("count", "int", required=True, doc="elements transferred"),
              Attr("bsize", "int", default=0,
                   doc="contiguous elements per block (strided DMA; 0: one block)"),
              Attr("stride", "int", default=0, doc="elements skipped between blocks in main memory"),
              Attr("reply", "int", required=True, doc="reply word incremented on completion"))
DMA_GET = register(OpDef(
    "dma_get", "DMA from main memory into LDM (athread_get).", stages=DMA_ONLY,
    num_args=(2, 2), attrs=_DMA_ATTRS, verify=_verify_dma, verify_access=_dma_span,
    pure=False, arrow=True, writes=(1,),
    context="cpe", category=Category.DMA))
DMA_PUT = register(OpDef(
    "dma_put", "DMA from LDM into main memory (athread_put).", stages=DMA_ONLY,
    num_args=(2, 2), attrs=_DMA_ATTRS, verify=_verify_dma, verify_access=_dma_span,
    pure=False, arrow=True, writes=(1,),
    context="cpe", category=Category.DMA))
DMA_BCAST = register(OpDef(
    "dma_bcast", "Broadcast DMA into every CPE's LDM (athread_get in BCAST_MODE): "
                 "collective, every CPE of the spawn reaches it with the same operands; CPE 0 "
                 "issues one transfer, barriers before and after, complete on return.",
    stages=DMA_ONLY, num_args=(2, 2), attrs=_DMA_ATTRS, verify=_verify_dma, verify_access=_dma_span,
    verify_in_context=_broadcast_source, pure=False, arrow=True, writes=(1,), context="cpe",
    category=Category.DMA))
DMA_WAIT = register(OpDef(
    "dma_wait", "Wait until a reply word has counted `times` completions, then reset it.",
    stages=DMA_ONLY, num_args=(0, 0),
    attrs=(Attr("reply", "int", required=True), Attr("times", "int", default=1)),
    verify=_verify_wait, pure=False, context="cpe", category=Category.DMA))
# -- register communication: one vector between CPEs of a row or a column --------

# A message is one 256-bit vector register: 4 lanes of f32 (floatv4) or f64
# (doublev4) (swGEMM include/common_slave.h putr/getr; swDNN simd_putr).
REG_LANES = 4
REG_ELEMENTS = ("f32", "f64")


def _verify_reg(inst: Instruction) -> None:
    attr(inst, "bus")
    acc = access_arg(inst, 0, (LDMType,))
    if acc.is_region:
        raise OpError(f"'{inst.opname}' names the first element of its vector, not a range")
    t = acc.base.type
    if str(t.element) not in REG_ELEMENTS:
        raise OpError(f"moves a vector of f32 or f64, not {t.element}")
    to = inst.attrs.get("to")
    if to is not None and not 0 <= to < 8:
        raise OpError(f"to = {to}: the receiver's place in its row or column is 0..7 "
                      "(leave 'to' out to send to all the others)")


def _reg_span(inst: Instruction, acc: Access, t: ShapedType, bounds) -> str | None:
    """The vector's 4 elements lie in the LDM buffer in every iteration."""
    return _past_end(acc, t, bounds, REG_LANES, "the vector's start",
                     f"a vector of {REG_LANES} elements")


_BUS = Attr("bus", "str", required=True, choices=("row", "col"),
            doc="the row bus (CPEs of this CPE's row) or the column bus")
REG_SEND = register(OpDef(
    "reg_send", "Send the vector of 4 elements from an LDM element to one CPE of this "
                "CPE's row or column (`to`, its column or row index), or to all 7 others "
                "(no `to`) (putr / putc).",
    stages=DMA_ONLY, num_args=(1, 1), verify=_verify_reg, verify_access=_reg_span,
    attrs=(_BUS, Attr("to", "int", doc="the receiver's place in the row or column, 0..7; "
                                      "absent: all the others")),
    reads_memory=True, pure=False, context="cpe", category=Category.CPE))
REG_RECV = register(OpDef(
    "reg_recv", "Receive the next vector from the row or column bus into 4 LDM elements "
                "(getr / getc); blocks until one has arrived.",
    stages=DMA_ONLY, num_args=(1, 1), verify=_verify_reg, verify_access=_reg_span,
    attrs=(_BUS,), pure=False, writes=(0,), context="cpe", category=Category.CPE))
CPE_ID = register(OpDef(
    "cpe_id", "This CPE's id, 0..63 (athread_get_id).", stages=DMA_ONLY,
    num_args=(0, 0), infer=lambda inst: [INDEX], context="cpe",
    category=Category.CPE))
CHUNK = register(OpDef(
    "chunk", "The [lo, hi) share of `extent` iterations for worker %id of `workers`, "
             "in units of `grain` iterations (default 1), balanced to within one unit.",
    stages=DMA_ONLY, num_args=(1, 1),
    attrs=(Attr("extent", "int", required=True), Attr("workers", "int", required=True),
           Attr("grain", "int", default=1)),
    infer=_infer_chunk, verify_ranges=_chunk_worker, context="cpe", category=Category.CPE))
SPAWN = register(OpDef(
    "spawn", "Start a cpe kernel on every CPE (athread_spawn); several kernels run "
             "in order in one spawn, all CPEs meeting at a barrier (athread_syn) "
             "between them.", stages=DMA_ONLY,
    num_args=(1, None), verify=_verify_spawn, pure=False, context="host",
    category=Category.CPE))
JOIN = register(OpDef(
    "join", "Wait for every CPE to finish the spawned kernel (athread_join).",
    stages=DMA_ONLY, num_args=(0, 0), pure=False, context="host",
    category=Category.CPE))
