"""DMA traffic of a dma-stage module, counted from its structure without
running it.

For one call of the root function (by default the one ``swir-run`` picks:
``@main``, else the only function with a body), :func:`dma_traffic` gives per
function exactly the DMA counters the dma-stage interpreter
(:class:`swir.interp.dma.DMAInterpreter`) reports after running it — the keys
of :data:`swir.dma_counters.DMA_COUNTERS` (gets, puts, bytes each way,
waits, the transfer-size histogram, small transfers, contiguous blocks and
their histogram) — plus ``spawns`` and ``calls``, with the interpreter's rules:
a ``spawn`` runs its cpe kernel on CPEs 63 .. 0, a DMA counts for the function
whose code issues it, histogram buckets are :func:`swir.interp.dma.size_bucket`
and small transfers are those under the target's ``small_transfer`` (the
module's target, :func:`swir.target.target_of`, as everywhere in the count).

Why it is exact. Every counter of a DMA depends on its instruction only
(``count``, ``bsize`` and the LDM element size are attributes and types; the
start subscripts and ``stride`` say where the data goes, not how much), so the
counters are the sum, over DMA and wait instructions, of how often each runs
times its fixed contribution. How often an instruction runs is decided by
index values alone: in a cpe kernel those are affine symbols (loop variables,
``cpe_id``, ``chunk`` results, index constants and parameters), so loop bounds
and ``if`` guards are evaluated from integers, as the interpreter does,
without touching data. Each function is compiled once into a Python function
of its index parameters that adds to one counter per DMA / wait instruction
(written with the interpreters' Python code generator,
:class:`swir.interp.pycode.PyWriter`, in a :class:`~swir.interp.pycode.CodeSpace`); only loops and ``if``s that
contain a DMA, a wait, a spawn or such a call are kept, and a loop whose
variable no kept bound, guard or argument reads is not iterated but multiplies
what its body counts by its trip count. A loop whose variable a guard or an
inner trip count reads is summed piecewise (:mod:`swir.analysis.loop_sums`:
a few evaluations per piece, however long the loop) where its reads are
affine, ``min`` or ``max``; otherwise it is walked, and a count that would
walk more than WORK_LIMIT iterations (or run past a caller's deadline)
stops with :class:`CountLimit`. The counts of one spawn (64 CPE runs)
or call are computed once per distinct index-argument tuple (and CPE, for a
called kernel that reads ``cpe_id``) and reused.

Host functions follow their CFG: the path from the entry block through ``br``
is the only one there is; a ``cond_br`` whose condition is not an ``i1``
constant ends the path only when nothing after it spawns or calls work that
moves data. Otherwise, and for a branch back to a block already on the path
(a loop whose trip count is data), :class:`TrafficError` says the count is not
static, naming the function.

Limits. The counts are those of a run that succeeds: the checks the
interpreter makes while running (DMA spans inside their buffers, in-flight
LDM, waits matching the DMAs outstanding, LDM capacity, its step limit) are
not repeated — use the interpreter, or the verifier, for those. An index
value computed from data (``dyn_index``, a ``load`` of an index, element-wise
index arithmetic) or an index parameter of the root function (an input) is
fine where only DMA subscripts read it; where a kept bound, guard, ``chunk``
or call argument reads it, evaluating that raises :class:`TrafficError`, as
does a ``chunk`` worker id outside its range (the run would stop there).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from swir.analysis.loop_sums import (piece_cuts, piecewise_forms, reads, slope,
                                     sum_of_polynomial)
from swir.dma_counters import DMA_COUNTERS
from swir.interp.arguments import default_function
from swir.interp.dma import (TransferShares, int_attr,
                             size_bucket)
from swir.interp.loop import loop_range
from swir.interp.pycode import (MAX_INDENT, MAX_NESTED_FOR, CodeSpace, PyWriter, free_values,
                                function_values, index_constant, value_text)
from swir.ir.affine import Expr
from swir.ops import (BR, CALL, CHUNK, COND_BR, CONST, CPE_ID, DMA_BCAST, DMA_GET, DMA_PUT,
                      DMA_WAIT, FOR, IF, MUL, PARALLEL, REG_RECV, REG_SEND, SPAWN, STORE)
from swir.ops.loop import REG_LANES, chunk_code
from swir.analysis.vector_plan import PointCost, body_costs, flops_of
from swir.ir.core import (
    Access,
    Apply,
    Block,
    Constraint,
    Function,
    Global,
    Instruction,
    Literal,
    Module,
    Range,
    Result,
    Successor,
    Value,
)
from swir.ir.types import INDEX, LDMType
from swir.ops.util import attr_or_default
from swir.passes.dma.insert_dma import EVEN_REPLY, ODD_REPLY
from swir.passes.dma.replies import MESH_REPLY
from swir.target import Target, target_of

DMA_OPS = (DMA_GET, DMA_PUT, DMA_BCAST)
# The reply words of double-buffered gets: they overlap the previous tile's compute.
DOUBLE_BUFFER_REPLIES = (EVEN_REPLY, ODD_REPLY)
# Ops whose execution counts are what the traffic is made of.
COUNTED_OPS = (DMA_GET, DMA_PUT, DMA_BCAST, DMA_WAIT, SPAWN)
# Loop iterations a count may walk or evaluate (loops it cannot sum piecewise
# are walked): a few seconds of Python. The zoo models at paper size need
# under 7,000 (docs/reliability.md).
WORK_LIMIT = 10_000_000
# A loop of at most this many iterations is walked rather than cut into pieces
# (cheaper than finding its pieces).
SHORT_LOOP = 16


class TrafficError(Exception):
    """The DMA traffic cannot be computed without running the module: it
    depends on data or inputs (or the module is not a dma-stage one)."""


class CountLimit(TrafficError):
    """Counting was stopped: it would take more work than its limit, or it
    ran past its deadline."""


# ---------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------

@dataclass
class KernelTraffic(TransferShares):
    """What one function's own code moves in one call of the root function
    (the counters of :class:`swir.interp.dma.DMAStats` that DMAs make)."""

    name: str
    gets: int = 0
    puts: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    waits: int = 0
    # Transfers by size in bytes: size_bucket(bytes) -> count.
    size_histogram: dict[int, int] = field(default_factory=dict)
    small_transfers: int = 0
    # Contiguous main-memory blocks moved, and by size.
    blocks: int = 0
    block_histogram: dict[int, int] = field(default_factory=dict)
    blocks_32: int = 0              # of them, those whose length is a multiple of 32 bytes
    # Broadcast gets (issued once each, also in gets and bytes_in) and the
    # bytes they delivered into LDM, every CPE's counted.
    bcasts: int = 0
    bcast_bytes: int = 0
    # Register communication: reg_send and reg_recv instructions run (a send
    # to all the others of a row or column is one), and the bytes received
    # (a vector of 4 elements each).
    reg_sends: int = 0
    reg_recvs: int = 0
    reg_steps: int = 0              # iterations of bus-step loops run, each CPE's (_bus_steps)
    reg_bytes: int = 0
    # Transfers whose main-memory (LDM) start is not 32-byte aligned in every
    # execution: an upper bound of the program's mem_misaligned (ldm_misaligned).
    mem_unaligned: int = 0
    ldm_unaligned: int = 0
    spawns: int = 0
    barriers: int = 0               # runs after a barrier inside a spawn
    calls: int = 0
    # Beyond the interpreter's counters, for the cost model (swir.costmodel.cost):
    # executions per DMA shape, (double-buffered?, ((block bytes, blocks), ...)).
    transfers_by_shape: dict[tuple[bool, tuple[tuple[int, int], ...]], int] = \
        field(default_factory=dict)
    # Broadcasts by shape ((block bytes, blocks), ...): each one transfer for all CPEs.
    bcasts_by_shape: dict[tuple[tuple[int, int], ...], int] = field(default_factory=dict)
    # The gets of relayed tiles' shares by shape: every CPE issues one at once.
    relays_by_shape: dict[tuple[tuple[int, int], ...], int] = field(default_factory=dict)
    # With count_compute: floating-point operations and multiplications run,
    # and the most CPEs any spawn of the function kept busy (moving data or
    # computing).
    flops: int = 0
    muls: int = 0
    busy_cpes: int = 0
    # CPE cycles of the code swir-cg writes (vector micro-kernels where
    # swir.analysis.vector_plan plans one, scalar loops elsewhere), summed
    # over the CPEs, and the flops of it that vector instructions do.
    compute_cycles: float = 0.0
    vector_flops: float = 0.0

    @property
    def moves_anything(self) -> bool:
        return bool(self.gets or self.puts or self.waits or self.reg_sends or self.reg_recvs)

    def as_dict(self) -> dict[str, Any]:
        """The DMA_COUNTERS, shaped as the interpreter's ``stats()`` gives
        them (histogram keys are strings, in increasing order)."""
        d: dict[str, Any] = {k: getattr(self, k) for k in DMA_COUNTERS}
        for k in ("size_histogram", "block_histogram"):
            d[k] = {str(b): n for b, n in sorted(d[k].items())}
        return d


@dataclass
class Traffic:
    """The DMA traffic of one call of ``function``: per function that moved
    data or waited (the others are left out, as
    :func:`swir.codegen.emulate.dma_counters` leaves them out), and totals."""

    function: str
    kernels: dict[str, KernelTraffic]
    # Loop iterations the count walked or evaluated (its cost; at most the
    # work limit): how far the piecewise sums kept it from the trip counts.
    work: int = 0

    @cached_property
    def total(self) -> KernelTraffic:
        """Every counter summed over the functions (histograms too); summed
        once (the gets, bytes, ... below read it)."""
        out = KernelTraffic("total")
        for k in self.kernels.values():
            for key in ("gets", "puts", "bytes_in", "bytes_out", "waits", "small_transfers",
                        "blocks", "blocks_32", "bcasts", "bcast_bytes", "mem_unaligned",
                        "ldm_unaligned", "spawns", "barriers", "calls", "reg_sends",
                        "reg_recvs", "reg_bytes"):
                setattr(out, key, getattr(out, key) + getattr(k, key))
            for mine, theirs in ((out.size_histogram, k.size_histogram),
                                 (out.block_histogram, k.block_histogram)):
                for b, n in theirs.items():
                    mine[b] = mine.get(b, 0) + n
        return out

    @property
    def gets(self) -> int:
        return self.total.gets

    @property
    def puts(self) -> int:
        return self.total.puts

    @property
    def bytes_in(self) -> int:
        return self.total.bytes_in

    @property
    def bytes_out(self) -> int:
        return self.total.bytes_out

    @property
    def transfers(self) -> int:
        return self.total.transfers

    @property
    def small_share(self) -> float:
        return self.total.small_share

    def counters(self) -> dict[str, dict[str, Any]]:
        """Per function, :meth:`KernelTraffic.as_dict`: equal to
        ``emulate.dma_counters(interp.stats())`` after the interpreter ran the
        same function."""
        return {n: k.as_dict() for n, k in self.kernels.items()}


def dma_traffic(module: Module, func: str | None = None, count_compute: bool = False,
                deadline: float | None = None, work_limit: int = WORK_LIMIT) -> Traffic:
    """The DMA traffic of one call of ``func`` (default: the function
    ``swir-run`` runs) of a dma-stage module, per function; see the module
    docstring. Raises :class:`TrafficError` when it is not static, and
    :class:`CountLimit` (a TrafficError) when counting would walk more than
    ``work_limit`` iterations or runs past ``deadline`` (``time.monotonic()``).

    With ``count_compute`` it also counts each function's floating-point
    operations (:func:`flops_of`) and the CPEs its spawns keep busy, which
    the cost model needs (slower: the compute loops are walked too)."""
    if module.stage != "dma":
        raise TrafficError(f"DMA traffic is counted at the dma stage; module "
                           f"\"{module.name}\" is at the {module.stage} stage")
    root = _root(module, func)
    counter = _Counter(module, count_compute, work_limit, deadline)
    try:
        counts = counter.run_root(root)
    except RecursionError:
        raise TrafficError(f"calls from @{root.name} nest too deeply to count (unbounded "
                           "recursion?)") from None
    return Traffic(root.name, counter.tally(counts), counter.work)


def _root(module: Module, func: str | None) -> Function:
    if func is None:
        return default_function(module)
    f = module.lookup(func.lstrip("@"))
    if not isinstance(f, Function) or f.body is None:
        raise TrafficError(f"no function @{func.lstrip('@')} with a body in module "
                           f"\"{module.name}\"")
    return f


# ---------------------------------------------------------------------------
# Values that are not static
# ---------------------------------------------------------------------------

class _Unknown:
    """An index value computed from data or given as an input: any arithmetic,
    comparison or use as a bound on it raises TrafficError (it may still be
    passed around, e.g. to a kernel that only uses it in DMA subscripts)."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what

    def _fail(self, *_: Any) -> Any:
        raise TrafficError(f"the DMA traffic is not static: it depends on {self.what}")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _fail
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __neg__ = _fail
    __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = _fail
    __index__ = __int__ = __bool__ = _fail
    __hash__ = object.__hash__


def _at(inst: Instruction) -> str:
    return f" at {inst.loc.line}:{inst.loc.col}" if inst.loc is not None else ""


# ---------------------------------------------------------------------------
# What each counter slot counts
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class _DMA:
    """The fixed counters of one execution of a dma_get / dma_put."""

    get: bool
    nbytes: int
    blocks: int
    block_sizes: tuple[tuple[int, int], ...]   # (bucket, blocks of that size)
    exact_blocks: tuple[tuple[int, int], ...]  # (bytes, blocks of that size)
    overlapped: bool                           # a double-buffered get (its reply word)
    blocks_32: int = 0                         # blocks whose length is a multiple of 32 B
    mem_aligned: bool = True                   # main-memory start 32-byte aligned, always
    ldm_aligned: bool = True                   # LDM start 32-byte aligned, always
    bcast: bool = False                        # a broadcast (dma_bcast)
    relay: bool = False                        # a CPE's share of a relayed tile (-mesh-broadcast)


def _dma_facts(inst: Instruction, align: int) -> _DMA:
    """As :meth:`DMAInterpreter.transfer` computes them: ``count`` elements of
    the LDM side's element size, in blocks of ``bsize`` when 0 < bsize < count."""
    get = not inst.isa(DMA_PUT)
    lside = inst.args[1] if get else inst.args[0]
    lt = (lside.base if isinstance(lside, Access) else lside).type
    if not isinstance(lt, LDMType):
        raise TrafficError(f"'{inst.opname}'{_at(inst)}: its local side is not an LDM buffer")
    esize = lt.bytes // lt.num_elements
    count = int_attr(inst, "count", None, 1)
    bsize = int_attr(inst, "bsize", attr_or_default(inst, "bsize"), 0)
    overlapped = int_attr(inst, "reply", 0, 0) in DOUBLE_BUFFER_REPLIES
    if 0 < bsize < count:
        full, rem = divmod(count, bsize)
        exact = ((bsize * esize, full),) + (((rem * esize, 1),) if rem else ())
    else:
        exact = ((count * esize, 1),)
    sizes = tuple((size_bucket(b), k) for b, k in exact)
    mside = inst.args[0] if get else inst.args[1]
    return _DMA(get, count * esize, sum(k for _, k in exact), sizes, exact, overlapped,
                blocks_32=sum(k for b, k in exact if b % align == 0),
                mem_aligned=_always_aligned(mside, esize, align),
                ldm_aligned=_always_aligned(lside, esize, align), bcast=inst.isa(DMA_BCAST),
                relay=int_attr(inst, "reply", 0, 0) == MESH_REPLY)


def _vector_bytes(inst: Instruction) -> int:
    """The bytes one reg_send / reg_recv moves: 4 elements of its LDM buffer."""
    acc = inst.args[0]
    t = acc.base.type if isinstance(acc, Access) else None
    if not isinstance(t, LDMType):
        raise TrafficError(f"'{inst.opname}'{_at(inst)}: its vector is not in an LDM buffer")
    return REG_LANES * t.element.bytes


def _always_aligned(side: object, esize: int, align: int) -> bool:
    """Whether a DMA side's start is a multiple of ``align`` whatever its
    subscripts' values: every term of the byte offset is. The buffers
    themselves start aligned (the C places main-memory buffers at multiples
    of the target's mem_align, -mem-plan's arena offsets at multiples of its
    align, at least 32, and LDM buffers at the dma_align); a buffer global whose ``offset`` is not
    a multiple counts as unaligned."""
    if not isinstance(side, Access):
        base = side
        subs: tuple = ()
    else:
        base, subs = side.base, side.indices
    offset = base.attrs.get("offset", 0) if isinstance(base, Global) else 0
    if not isinstance(offset, int) or offset % align:
        return False
    shape = getattr(base.type, "shape", ())
    stride = esize * math.prod(shape)
    for d, ix in enumerate(subs):
        stride //= shape[d]
        e = ix.lo if isinstance(ix, Range) else ix
        if (e.const * stride) % align or \
                any((c * stride) % align for _, c in e.terms):
            return False
    return True


@dataclass(frozen=True)
class _Slot:
    kind: str           # "dma", "wait", "calls", "spawns", "barriers", "flops", "compute",
    #                     "vector_sent" or "vector_received", "reg_steps"
    function: str
    dma: _DMA | None = None
    vector_bytes: int = 0           # a reg_recv slot: the bytes of its vector
    mul: bool = False   # a flop slot that is a multiplication
    cost: PointCost | None = None   # a compute slot: one execution of a loop body


def _add(stats: KernelTraffic, slot: _Slot, n: int, target: Target) -> None:
    """Add n executions of what ``slot`` counts, on ``target``'s CPEs."""
    if slot.kind == "flops":
        stats.flops += n
        stats.muls += n if slot.mul else 0
        return
    if slot.kind == "compute":
        assert slot.cost is not None
        stats.compute_cycles += n * slot.cost.cycles
        stats.vector_flops += n * slot.cost.vector_flops
        return
    if slot.kind == "vector_sent":
        stats.reg_sends += n
        return
    if slot.kind == "reg_steps":
        stats.reg_steps += n
        return
    if slot.kind == "vector_received":
        stats.reg_recvs += n
        stats.reg_bytes += n * slot.vector_bytes
        return
    if slot.kind in ("wait", "calls", "spawns", "barriers"):
        key = "waits" if slot.kind == "wait" else slot.kind
        setattr(stats, key, getattr(stats, key) + n)
        return
    d = slot.dma
    assert d is not None
    if d.bcast:
        # Every CPE runs it (in a run that succeeds: the interpreter checks);
        # main memory moves once, by CPE 0's transfer.
        cpes = target.cpes
        if n % cpes:
            raise TrafficError(f"a dma_bcast of @{slot.function} runs {n} times in all, not "
                               f"the same number of times on each of the {cpes} CPEs (the "
                               "run would stop there)")
        stats.bcast_bytes += n * d.nbytes
        n //= cpes
        stats.bcasts += n
        stats.bcasts_by_shape[d.exact_blocks] = stats.bcasts_by_shape.get(d.exact_blocks, 0) + n
    if d.get:
        stats.gets += n
        stats.bytes_in += n * d.nbytes
    else:
        stats.puts += n
        stats.bytes_out += n * d.nbytes
    b = size_bucket(d.nbytes)
    stats.size_histogram[b] = stats.size_histogram.get(b, 0) + n
    if d.nbytes < target.small_transfer:
        stats.small_transfers += n
    stats.blocks += n * d.blocks
    stats.blocks_32 += n * d.blocks_32
    stats.mem_unaligned += 0 if d.mem_aligned else n
    stats.ldm_unaligned += 0 if d.ldm_aligned else n
    for b, k in d.block_sizes:
        stats.block_histogram[b] = stats.block_histogram.get(b, 0) + n * k
    if d.relay:
        stats.relays_by_shape[d.exact_blocks] = stats.relays_by_shape.get(d.exact_blocks, 0) + n
    elif not d.bcast:
        shape = (d.overlapped, d.exact_blocks)
        stats.transfers_by_shape[shape] = stats.transfers_by_shape.get(shape, 0) + n


def _bus_steps(loop: Instruction) -> bool:
    """Whether each iteration of a loop is a step of register communication:
    a guard in its body chooses who sends and who receives (the relay's and
    a hand-written all-gather's form); each step waits for a send's latency.
    Messages inside loops of steps of their own are theirs (a tile loop
    around relays is no step loop)."""
    return any(i.isa(IF) and _messages_outside_steps(i)
               for i in loop.regions[0].blocks[0].instructions)


def _messages_outside_steps(inst: Instruction) -> bool:
    for region in inst.regions:
        for x in region.blocks[0].instructions if region.blocks else ():
            if x.isa(REG_SEND, REG_RECV):
                return True
            if x.regions and not (x.isa(FOR) and _bus_steps(x)) and \
                    _messages_outside_steps(x):
                return True
    return False


def _relayed(inst: Instruction) -> bool:
    """A DMA or wait of a CPE's share of a relayed tile (-mesh-broadcast)."""
    return int_attr(inst, "reply", 0, 0) == MESH_REPLY


# ---------------------------------------------------------------------------
# The counter: functions compiled into Python that count executions
# ---------------------------------------------------------------------------

# A compiled function: fn(counts, multiplier, cpe, *index arguments) adds
# multiplier x (executions of each slot's instruction in one call) to counts.
Compiled = Callable[..., None]
# A profile: the non-zero (slot, executions) of one call or spawn.
Profile = list[tuple[int, int]]


class _Counter(CodeSpace):
    """Compiles the module's functions (on first use) into Python functions
    that count how often each DMA / wait / call / spawn runs."""

    label = "swir traffic"

    def __init__(self, module: Module, count_compute: bool = False,
                 work_limit: int = WORK_LIMIT, deadline: float | None = None) -> None:
        super().__init__()
        self.module = module
        self.target = target_of(module.attrs)     # its CPEs and DMA rules
        self.count_compute = count_compute
        self.busy: dict[str, int] = {}             # kernel -> most CPEs a spawn kept busy
        # The slots of collective work, which no CPE does for itself: broadcasts,
        # and relays (each CPE's share of the tile, its wait, sends and receives).
        self.collective_slots: list[int] = []
        self.slots: list[_Slot] = []
        self.slot_of: dict[int, int] = {}          # id(instruction) -> slot
        self.step_slot_of: dict[int, int] = {}     # id(a loop of bus steps) -> slot
        self.calls_slot: dict[str, int] = {}
        self.spawns_slot: dict[str, int] = {}
        self.barriers_slot: dict[str, int] = {}
        self._compiled: dict[str, Compiled] = {}
        self._spawners: dict[str, Callable[..., None]] = {}
        self._callers: dict[str, Callable[..., None]] = {}
        self._relevant: dict[int, bool] = {}
        self._reads_cpe: dict[int, bool] = {}
        for f in module.functions:
            self._allocate(f)
        self.ns["_sum"] = self.sum_loop
        self.ns["_charge"] = self.charge
        # Work done so far (loop iterations walked, loop bodies evaluated), its
        # limit, and the time by which counting must end (None: no deadline).
        self.work = 0
        self.work_limit = work_limit
        self.deadline = deadline

    # -- bounded work ---------------------------------------------------------------
    def charge(self, n: int) -> None:
        """Account for n more iterations; stop when over the limit or past the
        deadline."""
        self.work += n
        if self.work > self.work_limit:
            raise CountLimit(f"counting the DMA traffic would walk more than "
                             f"{self.work_limit:,} loop iterations (a loop whose variable "
                             "is read where the count cannot be summed piecewise)")
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise CountLimit("counting the DMA traffic ran out of its time budget")

    def sum_loop(self, counts: list[int], m: int, cpe: int, body: Compiled, lo: int, hi: int,
                 step: int, forms: Callable[[int], tuple[int, ...]], degree: int,
                 args: tuple) -> None:
        """Add m x what ``for v = lo to hi step step { body }`` counts, per
        piece (swir.analysis.loop_sums): a piece longer than degree + 1
        iterations is summed from its first degree + 1."""
        n = len(range(lo, hi, step))
        cuts = None
        if n > SHORT_LOOP:
            try:
                first = forms(lo)
                cuts = piece_cuts(first, forms(lo + step), n) if first else []
            except CountLimit:
                raise
            except TrafficError:
                pass    # a form reads a value known only at run time (maybe on a
                # path never taken): walk, as the interpreter would run it
        if cuts is None:
            self.charge(n)
            for v in range(lo, hi, step):
                body(counts, m, cpe, *args, v)
            return
        edges = [0] + cuts + [n]
        for k0, k1 in zip(edges, edges[1:]):
            length = k1 - k0
            if length <= degree + 1:
                self.charge(length)
                for k in range(k0, k1):
                    body(counts, m, cpe, *args, lo + k * step)
                continue
            self.charge(degree + 1)
            samples = []
            for j in range(degree + 1):
                c = [0] * len(counts)
                body(c, 1, cpe, *args, lo + (k0 + j) * step)
                samples.append(c)
            for s, x in enumerate(sum_of_polynomial(samples, length)):
                if x:
                    counts[s] += m * x

    # -- slots ------------------------------------------------------------------------
    def _slot(self, slot: _Slot) -> int:
        self.slots.append(slot)
        return len(self.slots) - 1

    def _allocate(self, f: Function) -> None:
        """A slot per DMA and wait of f, and for its calls and spawns (all
        slots exist before anything runs, so every count list has them all)."""
        self.calls_slot[f.name] = self._slot(_Slot("calls", f.name))
        self.spawns_slot[f.name] = self._slot(_Slot("spawns", f.name))
        self.barriers_slot[f.name] = self._slot(_Slot("barriers", f.name))
        for inst in f.walk():
            if inst.isa(*DMA_OPS):
                self.slot_of[id(inst)] = self._slot(_Slot(
                    "dma", f.name, _dma_facts(inst, self.target.dma_align)))
                if inst.isa(DMA_BCAST) or _relayed(inst):
                    self.collective_slots.append(self.slot_of[id(inst)])
            elif inst.isa(DMA_WAIT):
                self.slot_of[id(inst)] = self._slot(_Slot("wait", f.name))
                if _relayed(inst):
                    self.collective_slots.append(self.slot_of[id(inst)])
            elif inst.isa(REG_SEND, REG_RECV):
                kind = "vector_sent" if inst.isa(REG_SEND) else "vector_received"
                self.slot_of[id(inst)] = self._slot(_Slot(kind, f.name,
                                                          vector_bytes=_vector_bytes(inst)))
                self.collective_slots.append(self.slot_of[id(inst)])
            elif inst.isa(FOR) and _bus_steps(inst):
                self.step_slot_of[id(inst)] = self._slot(_Slot("reg_steps", f.name))
                self.collective_slots.append(self.step_slot_of[id(inst)])
            elif self.count_compute and flops_of(inst):
                self.slot_of[id(inst)] = self._slot(_Slot("flops", f.name,
                                                          mul=inst.isa(MUL)))
        if self.count_compute:
            for body, cost in body_costs(f.body, vectors=f.target == "cpe", target=self.target):
                store = next(i for i in body if i.isa(STORE))
                self.slot_of[id(store)] = self._slot(_Slot("compute", f.name, cost=cost))

    def tally(self, counts: list[int]) -> dict[str, KernelTraffic]:
        """Per function, the counters the slot counts make (functions that
        moved nothing and waited for nothing left out)."""
        out: dict[str, KernelTraffic] = {}
        for slot, n in zip(self.slots, counts):
            if n:
                _add(out.setdefault(slot.function, KernelTraffic(slot.function)), slot, n,
                     self.target)
        for name, k in out.items():
            k.busy_cpes = self.busy.get(name, 0)
        return {name: k for name, k in out.items() if k.moves_anything or k.flops}

    # -- running --------------------------------------------------------------------
    def run_root(self, root: Function) -> list[int]:
        """The slot counts of one call of root, as the interpreter runs it: a
        cpe kernel on every CPE as a spawn would, anything else once on the MPE."""
        counts = [0] * len(self.slots)
        inputs = [_Unknown(f"index parameter %{p.name} of @{root.name}, an input")
                  for p in _index_params(root)]
        if root.target == "cpe":
            self.spawner(root)(counts, 1, *inputs)
        else:
            self.function(root)(counts, 1, 0, *inputs)
        return counts

    def _profile(self, run: Callable[[list[int]], None]) -> Profile:
        counts = [0] * len(self.slots)
        run(counts)
        return [(i, n) for i, n in enumerate(counts) if n]

    def spawner(self, kernel: Function, after_barrier: bool = False) -> Callable[..., None]:
        """What a spawn of kernel adds (or, after_barrier, its run after
        another kernel of one spawn): its runs on CPEs 63 .. 0, counted once
        per distinct index-argument tuple."""
        key = f"{kernel.name}/{after_barrier}"
        if key in self._spawners:
            return self._spawners[key]
        cache: dict[tuple, Profile] = {}
        spawns = (self.barriers_slot if after_barrier else self.spawns_slot)[kernel.name]

        def spawn(counts: list[int], m: int, *args: Any) -> None:
            profile = cache.get(args)
            if profile is None:
                fn = self.function(kernel)

                def work(c: list[int]) -> int:    # a broadcast or relay is no CPE's own work
                    return sum(c) - sum(c[i] for i in self.collective_slots)

                def on_every_cpe(c: list[int]) -> None:
                    busy = 0
                    for cpe in range(self.target.cpes - 1, -1, -1):
                        before = work(c) if self.count_compute else 0
                        fn(c, 1, cpe, *args)
                        # (the call itself adds 1: its calls counter)
                        busy += self.count_compute and work(c) - before > 1
                    self.busy[kernel.name] = max(self.busy.get(kernel.name, 0), busy)
                profile = cache[args] = self._profile(on_every_cpe)
            for i, n in profile:
                counts[i] += m * n
            counts[spawns] += m
        self._spawners[key] = spawn
        return spawn

    def caller(self, callee: Function) -> Callable[..., None]:
        """What a call of callee adds, counted once per distinct index-argument
        tuple (and CPE, if the callee reads cpe_id)."""
        if callee.name in self._callers:
            return self._callers[callee.name]
        cache: dict[tuple, Profile] = {}
        per_cpe = self.reads_cpe(callee)

        def call(counts: list[int], m: int, cpe: int, *args: Any) -> None:
            key = (cpe, *args) if per_cpe else args
            profile = cache.get(key)
            if profile is None:
                fn = self.function(callee)
                profile = cache[key] = self._profile(lambda c: fn(c, 1, cpe, *args))
            for i, n in profile:
                counts[i] += m * n
        self._callers[callee.name] = call
        return call

    # -- static facts ---------------------------------------------------------------
    def relevant(self, inst: Instruction) -> bool:
        """Whether running inst can count anything: it is a DMA, wait or spawn,
        calls a relevant function, or contains such an instruction."""
        r = self._relevant.get(id(inst))
        if r is None:
            if inst.isa(*COUNTED_OPS) or id(inst) in self.slot_of:
                r = True
            elif inst.isa(CALL):
                callee = self._callee(inst)
                r = callee is not None and self.function_relevant(callee)
            else:
                r = any(self.relevant(x) for region in inst.regions
                        for b in region.blocks for x in b.instructions)
            self._relevant[id(inst)] = r
        return r

    def function_relevant(self, f: Function) -> bool:
        key = id(f)
        if key not in self._relevant:
            self._relevant[key] = True          # a recursive call counts as relevant
            self._relevant[key] = any(self.relevant(i) for i in f.walk())
        return self._relevant[key]

    def reads_cpe(self, f: Function) -> bool:
        """Whether f's counts can depend on the CPE it runs on (cpe_id in f or
        in a function it calls)."""
        key = id(f)
        if key not in self._reads_cpe:
            self._reads_cpe[key] = True
            self._reads_cpe[key] = any(
                i.isa(CPE_ID) or (i.isa(CALL) and (c := self._callee(i)) is not None
                                         and self.reads_cpe(c))
                for i in f.walk())
        return self._reads_cpe[key]

    def _callee(self, inst: Instruction) -> Function | None:
        app = inst.args[0] if inst.args else None
        f = self.module.lookup(app.callee) if isinstance(app, Apply) else None
        return f if isinstance(f, Function) and f.body is not None else None

    # -- compiling ------------------------------------------------------------------
    def function(self, f: Function) -> Compiled:
        fn = self._compiled.get(f.name)
        if fn is None:
            fn = self._compiled[f.name] = _FunctionWriter(self, f).compile()
        return fn


def _index_params(f: Function) -> list[Value]:
    return [p for p in f.params if p.type == INDEX]


# ---------------------------------------------------------------------------
# Writing one function
# ---------------------------------------------------------------------------

class _FunctionWriter:
    """Writes the counting function of one swir function:
    ``def name(_c, _m, _cpe, <index params>)``, adding ``_m`` per execution to
    the slot of each DMA and wait run, calling the counting functions of the
    calls and spawns run."""

    def __init__(self, counter: _Counter, f: Function, needed: set[int] | None = None) -> None:
        self.counter = counter
        self.f = f
        self.emit = PyWriter(counter, f)
        self.mult = "_m"                 # the Python name of the current multiplier
        self.for_depth = 0               # `for` statements around the code being written
        if needed is None:               # the whole function, not a unit of it
            needed = _control_values(f)
            self._name_values()
        self.needed = needed

    # -- names ----------------------------------------------------------------------
    def _name_values(self) -> None:
        """Name every index value of f (PyWriter.expr spells them by these
        names); index constants become literals."""
        c = self.counter
        for inst in self.f.walk():
            k = index_constant(inst)
            if k is not None:
                c.int_consts[id(inst.results[0])] = k
        for v in function_values(self.f):
            if v.type == INDEX and id(v) not in c.names:
                c.names[id(v)] = c.fresh("v")

    def name(self, v: Value) -> str:
        return self.emit.expr(v)

    # -- the function -----------------------------------------------------------------
    def compile(self) -> Compiled:
        f, c = self.f, self.counter
        if f.body is None:
            raise TrafficError(f"@{f.name} is only declared; it has no body to count")
        e = self.emit
        e.line(f"_c[{c.calls_slot[f.name]}] += _m")
        if f.kind == "kernel":
            self.block(f.body.blocks[0].instructions)
        else:
            self.path()
        fname = c.fresh("t_" + "".join(ch if ch.isalnum() else "_" for ch in f.name)[:32])
        params = ["_c", "_m", "_cpe"] + [c.names[id(p)] for p in _index_params(f)]
        return c.define(fname, e.assemble(fname, params), f)

    def block(self, instructions: Iterable[Instruction]) -> None:
        for inst in instructions:
            self.instruction(inst)

    def region(self, inst: Instruction, k: int) -> None:
        with self.emit.indented():
            if len(inst.regions) > k and inst.regions[k].blocks:
                self.block(inst.regions[k].blocks[0].instructions)

    # -- instructions -------------------------------------------------------------------
    def instruction(self, inst: Instruction) -> None:
        e = self.emit
        if id(inst) in self.counter.slot_of:       # a DMA, a wait, or a counted flop
            e.line(f"_c[{self.counter.slot_of[id(inst)]}] += {self.mult}")
        elif inst.isa(FOR, PARALLEL, IF):
            if not self.counter.relevant(inst):
                return
            if self._too_deep(inst):
                self.unit(inst)
            elif inst.isa(IF):
                self.if_(inst)
            else:
                self.loop(inst)
        elif inst.isa(CALL, SPAWN):
            self.call(inst)
        elif not any(id(r) in self.needed for r in inst.results):
            return                       # nothing kept reads what it computes
        elif inst.isa(CPE_ID):
            e.line(f"{self.name(inst.results[0])} = _cpe")
        elif inst.isa(CHUNK):
            self.chunk(inst)
        elif not inst.isa(CONST):
            self.unknown(inst)

    def _too_deep(self, inst: Instruction) -> bool:
        return self.emit.indent >= MAX_INDENT or \
            (not inst.isa(IF) and self.for_depth >= MAX_NESTED_FOR)

    def loop(self, inst: Instruction) -> None:
        e = self.emit
        rng, body = loop_range(e, inst)
        steps = self.counter.step_slot_of.get(id(inst))
        if steps is not None:                     # each iteration a bus step
            e.line(f"_c[{steps}] += {self.mult} * len({rng})")
        var = body.args[0]
        if id(var) in self.needed:
            plan = self.sum_plan(inst)
            if plan is not None:
                self.summed(inst, *plan)
                return
            r = e.fresh("r")
            e.line(f"{r} = {rng}")
            e.line(f"_charge(len({r}))")
            e.line(f"for {self.name(var)} in {r}:")
            self.for_depth += 1
            with e.indented():
                self.block(body.instructions)
            self.for_depth -= 1
            return
        # Nothing kept reads the variable: every iteration counts the same.
        outer, self.mult = self.mult, self.counter.fresh("m")
        e.line(f"{self.mult} = {outer} * len({rng})")
        e.line(f"if {self.mult}:")
        with e.indented():
            self.block(body.instructions)
        self.mult = outer

    # -- loops summed piecewise (swir.analysis.loop_sums) ----------------------------
    def sum_plan(self, inst: Instruction) -> tuple[list[Expr], int] | None:
        """The affine forms whose signs cut loop ``inst`` into pieces and the
        degree of one iteration's counts within a piece, if its variable is
        read only where loop_sums can follow it: guards, and the bounds of
        loops inside that are multiplied out, through affine terms, min and
        max of it and of values from outside the loop. Else None (walked)."""
        body = inst.regions[0].blocks[0]
        scan = _SumScan(self, body.args[0], attr_or_default(inst, "step"),
                        {id(v) for v in free_values(inst)})
        depth = scan.block(body)
        return None if depth is None else (scan.forms, depth)

    def summed(self, inst: Instruction, forms: list[Expr], degree: int) -> None:
        """Count loop ``inst`` piecewise: its body becomes a function of the
        loop variable, evaluated a few times per piece (_Counter.sum_loop)."""
        e = self.emit
        body = inst.regions[0].blocks[0]
        var = self.counter.names[id(body.args[0])]
        fname, free = self._function_of(inst, "s", lambda w: w.block(body.instructions), var)
        lb, ub = (e.expr(a) for a in inst.args[:2])
        step = attr_or_default(inst, "step")
        values = "".join(f"{e.expr(x)}, " for x in forms)
        args = "".join(f"{v}, " for v in free)
        e.line(f"_sum(_c, {self.mult}, _cpe, {fname}, {lb}, {ub}, {step}, "
               f"lambda {var}: ({values}), {degree}, ({args}))")

    def unit(self, inst: Instruction) -> None:
        """Count a deeply nested loop or if in a function of its own (Python
        limits how deeply blocks nest), called with the index values it reads."""
        fname, free = self._function_of(
            inst, "u", lambda w: w.if_(inst) if inst.isa(IF) else w.loop(inst))
        self.emit.line(f"{fname}(_c, {', '.join([self.mult, '_cpe'] + free)})")

    def _function_of(self, inst: Instruction, prefix: str,
                     write: Callable[["_FunctionWriter"], None], *extra: str
                     ) -> tuple[str, list[str]]:
        """Write code for ``inst`` (``write(writer)``) as a function of its
        own, ``def NAME(_c, _m, _cpe, <the index values it reads>, *extra)``;
        its name and the names of those values (all defined here: the ones
        deciding counts)."""
        c = self.counter
        free = [c.names[id(v)] for v in free_values(inst) if id(v) in self.needed
                and id(v) in c.names and id(v) not in c.int_consts]
        sub = _FunctionWriter(c, self.f, self.needed)
        write(sub)
        fname = c.fresh(prefix)
        c.define(fname, sub.emit.assemble(fname, ["_c", "_m", "_cpe", *free, *extra]), self.f)
        return fname, free

    def if_(self, inst: Instruction) -> None:
        conds = []
        for k in inst.args:
            if not isinstance(k, Constraint):
                raise TrafficError(f"'if'{_at(inst)} in @{self.f.name} takes affine conditions")
            conds.append(f"{self.emit.expr(k.lhs)} {k.rel} {self.emit.expr(k.rhs)}")
        self.emit.line(f"if {' and '.join(conds)}:")
        self.region(inst, 0)
        if len(inst.regions) > 1 and inst.regions[1].blocks \
                and any(self.counter.relevant(x) for x in inst.regions[1].blocks[0].instructions):
            self.emit.line("else:")
            self.region(inst, 1)

    def chunk(self, inst: Instruction) -> None:
        """As the interpreter: worker id's share [lo, hi) of extent over workers."""
        e = self.emit
        extent = int_attr(inst, "extent", None, 0)
        workers = int_attr(inst, "workers", None, 1)
        w = e.fresh("w")
        e.line(f"{w} = {e.expr(inst.args[0])}")
        f = self.f

        def report(v: int) -> None:
            raise TrafficError(f"'chunk'{_at(inst)} in @{f.name}: worker id is {v}, outside "
                               f"[0, {workers}): the run stops there with an error")
        e.line(f"if not 0 <= {w} < {workers}: {e.bind(report, 'chunk')}({w})")
        lo, hi = (self.name(r) for r in inst.results)
        for line in chunk_code(w, lo, hi, extent, workers, int_attr(inst, "grain", attr_or_default(inst, "grain"), 1)):
            e.line(line)

    def call(self, inst: Instruction) -> None:
        if not self.counter.relevant(inst):
            if any(id(r) in self.needed for r in inst.results):
                self.unknown(inst)
            return
        c = self.counter
        for n, app in enumerate(inst.args or [None]):   # a spawn may run several kernels
            callee = c.module.lookup(app.callee) if isinstance(app, Apply) else None
            if not isinstance(callee, Function) or callee.body is None:
                raise TrafficError(f"'{inst.opname}'{_at(inst)} in @{self.f.name}: no "
                                   "function with a body to run")
            assert isinstance(app, Apply)
            args = [self.name(a) for a, p in zip(app.args, callee.params) if p.type == INDEX]
            if inst.isa(SPAWN):
                if callee.target != "cpe":
                    raise TrafficError(f"'spawn'{_at(inst)} in @{self.f.name}: "
                                       f"@{callee.name} is not a cpe kernel")
                fn = c.bind(c.spawner(callee, after_barrier=n > 0), "spawn")
                self.emit.line(f"{fn}(_c, {', '.join([self.mult] + args)})")
            else:
                fn = c.bind(c.caller(callee), "call")
                self.emit.line(f"{fn}(_c, {', '.join([self.mult, '_cpe'] + args)})")
        if any(id(r) in self.needed for r in inst.results):
            self.unknown(inst)

    def unknown(self, inst: Instruction) -> None:
        """Index results computed from data: usable only where nothing counted
        depends on them."""
        for r in inst.results:
            if id(r) in self.needed and id(r) not in self.counter.int_consts:
                what = (f"{value_text(r)}, the result of '{inst.opname}'{_at(inst)} in "
                        f"@{self.f.name}, computed when the module runs")
                self.emit.line(f"{self.name(r)} = {self.counter.bind(_Unknown(what), 'unk')}")

    # -- host CFG -----------------------------------------------------------------------
    def path(self) -> None:
        """A func's blocks along its one path from the entry (see the module
        docstring); raise TrafficError where the path is not static."""
        f, e = self.f, self.emit
        assert f.body is not None
        b: Block | None = f.body.blocks[0]
        seen: set[int] = set()
        while b is not None:
            if id(b) in seen:
                raise TrafficError(f"the DMA traffic of @{f.name} is not static: its CFG "
                                   f"loops back to block '{b.label} (how often depends on "
                                   "data)")
            seen.add(id(b))
            term = b.terminator
            self.block(b.instructions if term is None else b.instructions[:-1])
            succ = self.successor(term) if term is not None else None
            if succ is not None:
                for arg, val in zip(succ.block.args, succ.args):
                    if id(arg) in self.needed:
                        e.line(f"{self.name(arg)} = {self.name(val)}")
            b = succ.block if succ is not None else None

    def successor(self, term: Instruction) -> Successor | None:
        """Where the path goes after term; None when it ends (return, or a
        branch after which nothing counts)."""
        if term.isa(BR):
            return term.args[0]
        if not term.isa(COND_BR):
            return None
        cond, yes, no = term.args
        if yes.block is no.block and tuple(yes.args) == tuple(no.args):
            return yes
        known = _bool_const(cond)
        if known is not None:
            return yes if known else no
        if not self._counts_after(yes.block) and not self._counts_after(no.block):
            return None
        raise TrafficError(f"the DMA traffic of @{self.f.name} is not static: the cond_br "
                           f"on {value_text(cond)}{_at(term)} chooses between paths that "
                           "start DMA work, and its condition is computed when the module "
                           "runs")

    def _counts_after(self, start: Block) -> bool:
        """Whether any block reachable from start (itself included) counts."""
        todo, seen = [start], {id(start)}
        while todo:
            b = todo.pop()
            if any(self.counter.relevant(i) for i in b.instructions):
                return True
            for s in b.successors:
                if id(s) not in seen:
                    seen.add(id(s))
                    todo.append(s)
        return False


class _SumScan:
    """Walks a loop body as _FunctionWriter would write it, collecting the
    forms that decide its pieces (see _FunctionWriter.sum_plan)."""

    def __init__(self, writer: _FunctionWriter, var: Value, step: int, outside: set[int]
                 ) -> None:
        self.w, self.var, self.step, self.outside = writer, var, step, outside
        self.forms: list[Expr] = []

    def block(self, block: Block) -> int | None:
        """The most nested multiplied loops whose trip count reads the
        variable, on any path through ``block``; None if it cannot be summed."""
        deepest = 0
        for x in block.instructions:
            d = self.instruction(x)
            if d is None:
                return None
            deepest = max(deepest, d)
        return deepest

    def instruction(self, x: Instruction) -> int | None:
        w = self.w
        if id(x) in w.counter.slot_of or (x.isa(FOR, PARALLEL, IF, CALL, SPAWN)
                                          and not w.counter.relevant(x)):
            return 0
        if x.isa(IF):
            if not all(isinstance(k, Constraint) and self.decided(k.lhs - k.rhs)
                       for k in x.args):
                return None
            depths = [self.block(r.blocks[0]) for r in x.regions if r.blocks]
            return None if None in depths else max(depths, default=0)   # type: ignore
        if x.isa(FOR, PARALLEL):
            return self.loop(x)
        if x.isa(CALL, SPAWN):
            return None if any(self.reads(Expr.of(a)) for app in x.args for a in app.args
                               if a.type == INDEX) else 0
        if not any(id(r) in w.needed for r in x.results) or x.isa(CONST, CPE_ID):
            return 0
        if x.isa(CHUNK) and not any(self.reads(Expr.of(a)) for a in x.args):
            return 0
        return None

    def loop(self, x: Instruction) -> int | None:
        lb, ub = (Expr.of(a) for a in x.args[:2])
        body = x.regions[0].blocks[0]
        own = 0
        if self.reads(lb) or self.reads(ub):
            if id(body.args[0]) in self.w.needed:
                return None        # walked, with a trip count that varies: not summable
            if not self.trip_count(ub - lb, attr_or_default(x, "step")):
                return None
            own = 1
        d = self.block(body)
        return None if d is None else own + d

    def reads(self, e: Expr) -> bool:
        return reads(e, self.var)

    def _from_outside(self, e: Expr) -> bool:
        return all(v is self.var or id(v) in self.outside
                   or id(v) in self.w.counter.int_consts for v in e.values())

    def decided(self, e: Expr) -> bool:
        """A guard's difference: its sign class is fixed within a piece."""
        if not self.reads(e):
            return True
        got = piecewise_forms(e, self.var) if self._from_outside(e) else None
        if got is None:
            return False
        self.forms += got[0] + got[1]
        return True

    def trip_count(self, e: Expr, step: int) -> bool:
        """An inner loop's ub - lb: fixed sign, and a trip count affine in the
        iteration number, within a piece."""
        got = piecewise_forms(e, self.var) if self._from_outside(e) else None
        if got is None or any(slope(p, self.var) * self.step % step for p in got[1]):
            return False
        self.forms += got[0] + got[1]
        return True


def _bool_const(v: Value) -> bool | None:
    """The value of an i1 ``const``, or None."""
    if isinstance(v, Result) and v.owner.isa(CONST) and v.owner.args \
            and isinstance(v.owner.args[0], Literal) and isinstance(v.owner.args[0].value, bool):
        return v.owner.args[0].value
    return None


def _control_values(f: Function) -> set[int]:
    """Ids of the values whatever decides how often things run reads: loop
    bounds, if guards, chunk worker ids, index arguments of calls and spawns
    that count, index arguments passed along branches. (Conservative: read
    anywhere in f.)"""
    out: set[int] = set()

    def read(x: Any) -> None:
        if isinstance(x, Value):
            out.add(id(x))
        elif isinstance(x, (Expr, Constraint)):
            out.update(id(v) for v in x.values())

    for inst in f.walk():
        if inst.isa(FOR, PARALLEL):
            for x in inst.args[:2]:
                read(x)
        elif inst.isa(IF, CHUNK):
            for x in inst.args:
                read(x)
        elif inst.isa(CALL, SPAWN):
            for app in inst.args:
                if isinstance(app, Apply):
                    for a in app.args:
                        if a.type == INDEX:
                            read(a)
        elif inst.isa(BR, COND_BR):
            for s in inst.args:
                if isinstance(s, Successor):
                    for a in s.args:
                        if a.type == INDEX:
                            read(a)
    return out
