"""The SW26010 cost model: modeled Sunway time per kernel, from exact counts.

swir cannot time code on a Sunway machine, so it counts what it can count
exactly — per kernel, the floating-point operations, the DMAs by size and
double-buffering, LDM bytes (:func:`swir.costmodel.traffic.dma_traffic` with
``count_compute``; its DMA counts are the emulated run's) — and turns the counts
into time with the constants of :class:`Machine`. The model is for comparing
plans and finding bad kernels; the counts are the ground truth.
docs/cost-model.md derives every formula; in short, for one kernel:

- compute = the CPE cycles of the code swir-cg writes (vector micro-kernels
  where :mod:`swir.analysis.vector_plan` plans them, scalar loops elsewhere;
  per loop body, on a two-pipeline model of the CPE) / (busy CPEs x clock);
- DMA = sum over blocks of (block bytes + ``half_block``) / bandwidth, the
  aggregate streaming time shared by all CPEs (a block of ``half_block``
  bytes runs at half the bandwidth), plus the DMAs' start-up latency,
  spread over the busy CPEs (a DMA shorter than ``startup_bytes`` pays
  bytes / ``startup_bytes`` of it); the constants are fitted to TaihuLight
  measurements (bench/dma_calibration.py, test/unit/test_dma_calibration.py);
- modeled = max(compute, double-buffered DMA) + the other DMA: gets that
  -insert-dma double-buffered run during the previous tile's compute, the
  rest waits.

And two bounds on the same kernel:

- roofline = max(flops / peak, compulsory bytes / bandwidth), compulsory
  bytes being each buffer the kernel reads or writes moved once;
- for conv / matmul kernels, the I/O lower bound of Hong and Kung's
  red-blue pebble game for a fast memory of S words (the LDM the 64 CPEs
  have for tiles, together: broadcasts fill all of them by one read): at
  least MACs / (2 sqrt(2 S)) - S words must move (Irony, Toledo and
  Tiskin's bound for matrix multiplication), and never less than the
  compulsory bytes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from swir.costmodel.network import CollectiveCost, host_steps
from swir.costmodel.traffic import KernelTraffic, TrafficError, dma_traffic
from swir.ir.constants import module_ranks
from swir.ir.core import Function, Module
from swir.ir.types import BufType, LDMType
from swir.ops import CONV2D, CONV_TRANSPOSE2D, DMA_BCAST, DMA_GET, DMA_PUT, LDM_ALLOC, MATMUL
from swir.passes.dma.insert_dma import ldm_total
from swir.target import SW26010, Target, default_target, stream_seconds, target_of

# Ops whose kernels are matmul-like (TVM's complex-out-fusable pattern): the
# I/O lower bound applies to them. Kernel names list the ops they run.
MATMUL_LIKE = (CONV2D, CONV_TRANSPOSE2D, MATMUL)

# A Machine figure not given: the target's (Machine.__post_init__).
FROM_TARGET: Any = None
# The Target field of a Machine figure, where the names differ.
TARGET_FIELD = {"half_block": "dma_half_block", "startup_bytes": "dma_startup_bytes",
                "cpe_bandwidth": "dma_cpe_bandwidth"}


def _target_figure(t: Target, machine_field: str) -> Any:
    return getattr(t, TARGET_FIELD.get(machine_field, machine_field))


@dataclass(frozen=True)
class Machine:
    """One core group of a target (swir/target.py holds the figures and
    their sources; the default is the SW26010's). The DMA constants are fitted
    to swCandle's TaihuLight measurements with 64 CPEs
    (../shared/design/sunway-measured.md, tables 1a and 1b); what those did
    not measure (fewer CPEs, GET- or PUT-only, alignment) is covered by
    repeating plan comparisons over :func:`dma_assumptions`."""

    # Each figure is the target's field of the same name (FROM_TARGET renames
    # two); a Machine made without one takes the default target's.
    clock_hz: float = FROM_TARGET
    flops_per_cycle: int = FROM_TARGET      # the vector FMA peak per CPE
    cpes: int = FROM_TARGET
    ldm_bytes: int = FROM_TARGET            # LDM per CPE
    peak_bandwidth: float = FROM_TARGET     # per core group, theoretical
    # Fitted: the share of the theoretical bandwidth large DMAs reach
    # (0.6: 20.5 GB/s; swCandle Copy measured 20.4 GB/s with 24 KB DMAs).
    dma_efficiency: float = FROM_TARGET
    # Fitted: each contiguous block's overhead, in bytes of streaming time (a
    # block of this many bytes streams at half the bandwidth; measured: about
    # 340 B for blocks of one 24 KB strided DMA).
    half_block: int = FROM_TARGET
    # Fitted: each DMA's start-up, in cycles, paid by the CPE that issues it
    # with all the CPEs issuing (about 1 us per blocking DMA under contention).
    dma_startup_cycles: int = FROM_TARGET
    # Fitted: a DMA of fewer bytes pays bytes / startup_bytes of the start-up
    # (measured: 8 and 16 B DMAs cost a third of 128 B ones).
    startup_bytes: int = FROM_TARGET
    # Assumed: what one CPE's DMAs can draw (bytes/s); P busy CPEs stream at
    # min(bandwidth, P x this) (docs/cost-model.md, "One CPE's share").
    cpe_bandwidth: float = FROM_TARGET
    # The LDM a plan keeps back: ldm_size // reserve_divisor (swir's rule).
    reserve_divisor: int = FROM_TARGET
    # Measured: broadcast gets' main-memory bandwidth, per-block overhead and
    # fixed cost (swir/target.py gives the sources).
    bcast_bandwidth: float = FROM_TARGET
    bcast_half_block: int = FROM_TARGET
    bcast_fixed_cycles: int = FROM_TARGET
    # Assumed (no public figure): register communication's cycles from a
    # send to its receive, and the cycles a send or receive takes per vector.
    reg_latency_cycles: int = FROM_TARGET
    reg_cycles_per_vector: int = FROM_TARGET
    # Whether broadcasts go by RMA (a DMA get, then a row and a column RMA
    # broadcast) and there is no register communication; an RMA broadcast's
    # start-up (cycles) and bandwidth (bytes/s). Assumed (swir/target.py).
    rma: bool = FROM_TARGET
    rma_startup_cycles: int = FROM_TARGET
    rma_bandwidth: float = FROM_TARGET

    def __post_init__(self) -> None:
        t = default_target()
        for f in fields(self):
            if getattr(self, f.name) is FROM_TARGET:
                object.__setattr__(self, f.name, _target_figure(t, f.name))

    @classmethod
    def for_target(cls, t: Target) -> Machine:
        return cls(**{f.name: _target_figure(t, f.name) for f in fields(cls)})

    @property
    def cpe_flops(self) -> float:
        """Peak flop/s of one CPE."""
        return self.clock_hz * self.flops_per_cycle

    @property
    def peak_flops(self) -> float:
        """Peak flop/s of the CPE cluster (742.4 GFLOPS on the SW26010, sunway.md)."""
        return self.cpe_flops * self.cpes

    @property
    def bandwidth(self) -> float:
        """Achievable DMA bandwidth for large blocks, bytes/s."""
        return self.peak_bandwidth * self.dma_efficiency

    def drawn_bandwidth(self, busy: int) -> float:
        """The bandwidth the DMAs of ``busy`` CPEs stream at together: the
        core group's, or less when too few CPEs issue to draw it."""
        return min(self.bandwidth, max(busy, 1) * self.cpe_bandwidth)

    @property
    def dma_startup(self) -> float:
        return self.dma_startup_cycles / self.clock_hz

    def startup_share(self, nbytes: float) -> float:
        """The share of the start-up a DMA of ``nbytes`` pays: all of it from
        ``startup_bytes`` on, nbytes / startup_bytes below."""
        return min(1.0, nbytes / self.startup_bytes) if self.startup_bytes > 0 else 1.0

    def dma_seconds(self, blocks: list[tuple[int, int]] | tuple[tuple[int, int], ...],
                    busy: int | None = None) -> float:
        """Modeled seconds of one DMA moving ``blocks`` ((bytes, how many)
        contiguous blocks) while ``busy`` CPEs (default: all of them) issue
        DMAs: its streaming, a share of the bandwidth those CPEs draw, plus
        its start-up over the busy CPEs. What :func:`kernel_cost` charges per DMA."""
        busy = self.cpes if busy is None else busy
        nbytes = sum(b * k for b, k in blocks)
        stream = stream_seconds(blocks, self.half_block, self.drawn_bandwidth(busy))
        return stream + self.startup_share(nbytes) * self.dma_startup / max(busy, 1)

    def bcast_seconds(self, blocks: list[tuple[int, int]] | tuple[tuple[int, int], ...]
                      ) -> float:
        """Modeled seconds of one broadcast get of ``blocks``, every CPE
        waiting for it between two barriers. Without RMA, CPE 0 streams the
        blocks at the broadcast bandwidth (one BCAST_MODE DMA fills every
        LDM); with RMA, CPE 0 gets them by an ordinary DMA of one busy CPE,
        then the two RMA hops send their bytes along row 0 and down the
        columns (docs/cost-model.md, "RMA broadcasts"). Either way plus
        ``bcast_fixed_cycles``: issue, completion and the barriers, measured
        on the SW26010 for a BCAST_MODE DMA and kept for CPE 0's get on the
        Pro, as the Pro keeps the DMA curve. Of numbers or arrays alike."""
        fixed = self.bcast_fixed_cycles / self.clock_hz
        if not self.rma:
            return stream_seconds(blocks, self.bcast_half_block, self.bcast_bandwidth) + fixed
        get = stream_seconds(blocks, self.half_block, self.drawn_bandwidth(1))
        return get + self.rma_hops_seconds(blocks) + fixed

    @property
    def bcast_fixed(self) -> float:
        """What each broadcast costs whatever its bytes: that of no bytes."""
        return self.bcast_seconds([])

    def rma_hops_seconds(self, blocks: list[tuple[int, int]] | tuple[tuple[int, int], ...]
                         ) -> float:
        """An RMA broadcast's two hops (CPE 0 to row 0, then row 0's CPEs
        down their columns, at once): each its start-up plus the blocks'
        bytes, contiguous in CPE 0's LDM by then, at the RMA bandwidth."""
        nbytes = sum(b * k for b, k in blocks)
        return 2 * (self.rma_startup_cycles / self.clock_hz + nbytes / self.rma_bandwidth)

    def reg_seconds(self, sends: int, recvs: int, steps: int) -> float:
        """Modeled seconds of a kernel's register communication: each CPE's
        share of the sends and receives at ``reg_cycles_per_vector`` each
        (a CPE issues them one after another), and of the bus steps it runs
        (a loop iteration in which a guard picks who sends: the relay
        -mesh-broadcast writes has 16) at ``reg_latency_cycles`` each, a
        receive waiting for its send (docs/cost-model.md). Every CPE waits
        for it: not overlapped."""
        per_cpe = (sends + recvs) / self.cpes
        return (per_cpe * self.reg_cycles_per_vector
                + steps / self.cpes * self.reg_latency_cycles) / self.clock_hz

    def with_(self, **changes: Any) -> Machine:
        return Machine(**{**asdict(self), **changes})


def dma_assumptions(t: Target | None = None) -> dict[str, Machine]:
    """The range of DMA constants that plan comparisons are repeated over:
    pessimistic, the target's own (fitted to 64-CPE Copy measurements),
    optimistic. The range covers what was not measured (docs/cost-model.md,
    "What is still assumed"): the optimistic end reaches Triad's 22.3 GB/s
    (a GET-heavy mix) with the half-block of Triad's curve and an
    uncontended start-up (fewer busy CPEs); the pessimistic end streams at
    17 GB/s (below every large-DMA figure measured), with a block overhead
    that halves 512 B blocks and the whole 2.2 us of a blocking 8 B GET+PUT
    pair charged to each DMA."""
    m = Machine.for_target(t or default_target())
    pessimistic = m.with_(dma_efficiency=0.5, half_block=512, dma_startup_cycles=3200)
    optimistic = m.with_(dma_efficiency=0.65, half_block=200, dma_startup_cycles=300)
    # Register communication, all assumed: 40 cycles from send to receive
    # and 4 per vector (a quarter of a vector per cycle) to 5 and 1.
    pessimistic = pessimistic.with_(reg_latency_cycles=40, reg_cycles_per_vector=4)
    optimistic = optimistic.with_(reg_latency_cycles=5, reg_cycles_per_vector=1)
    if m.rma:
        # RMA, all assumed (swir/target.py): a start-up of a contended
        # main-memory DMA's (the fitted 1650 cycles) to a few register-bus
        # latencies (50 cycles); 4 bytes per cycle (about one CPE's share of
        # main memory: RMA no faster than a DMA) to 64 (one 512-bit vector
        # per cycle, the Pro's vector width).
        pessimistic = pessimistic.with_(rma_startup_cycles=m.dma_startup_cycles,
                                        rma_bandwidth=4 * m.clock_hz)
        optimistic = optimistic.with_(rma_startup_cycles=50, rma_bandwidth=64 * m.clock_hz)
    # One CPE's share: 1/16 of the core group's (16 CPEs to saturate it) to
    # all of it (no cap).
    return {"pessimistic": pessimistic.with_(cpe_bandwidth=pessimistic.bandwidth / 16),
            "default": m,
            "optimistic": optimistic.with_(cpe_bandwidth=optimistic.bandwidth)}


class NoRegisterCommunication(TrafficError):
    """A kernel sends or receives by register communication on a target that
    has none (RMA in its place: the SW26010-Pro)."""


# The SW26010's range, by name (docs/cost-model.md tables it; other targets:
# dma_assumptions(target)).
DMA_ASSUMPTIONS: dict[str, Machine] = dma_assumptions(SW26010)


@dataclass
class KernelCost:
    """The counts and the modeled time of one function, summed over its
    spawns (or calls) in one run of the root function."""

    name: str
    shape: str                      # the shapes of the buffers it writes
    spawns: int
    barriers: int                   # runs after a barrier inside a spawn
    flops: int
    macs: int                       # multiplications: the MACs of a conv / matmul
    busy_cpes: int
    ldm_bytes: int                  # LDM per CPE
    ldm_capacity: int
    gets: int
    puts: int
    bytes_in: int
    bytes_out: int
    small_share: float              # transfers under 256 bytes
    blocks: int                     # contiguous main-memory blocks the DMAs move
    blocks_32: int                  # of them, those whose length is a multiple of 32 bytes
    mem_unaligned: int              # transfers whose main-memory start may not be 32-aligned
    ldm_unaligned: int              # transfers whose LDM start may not be 32-aligned
    compulsory_bytes: int
    vector_flops: float             # flops done by vector instructions
    peak_compute_s: float           # the flops at the busy CPEs' vector FMA peak
    compute_s: float
    dma_s: float                    # all DMA time, overlapped or not
    overlapped_dma_s: float         # the double-buffered part of dma_s
    modeled_s: float
    roofline_s: float
    io_lower_bound_bytes: int | None  # conv / matmul kernels only: the larger of the two
    hong_kung_bytes: int | None = None  # MACs over the LDM available (io_lower_bound)
    bcasts: int = 0                 # broadcast gets (in gets), each one transfer for all CPEs
    reg_sends: int = 0              # register communication: reg_send run (a broadcast is one),
    reg_recvs: int = 0              # reg_recv run,
    reg_bytes: int = 0              # and the bytes they received
    reg_s: float = 0.0              # their modeled time (waited for, not overlapped)
    bcast_s: float = 0.0            # the broadcasts' modeled time (in dma_s, not overlapped),
    rma_s: float = 0.0              # of it, RMA targets: the row and column hops'

    @property
    def bound_binds(self) -> str | None:
        """Which bound is the I/O lower bound: "reads" (the elements the
        kernel must read and write once) or "LDM" (Hong-Kung)."""
        if self.io_lower_bound_bytes is None:
            return None
        return "LDM" if (self.hong_kung_bytes or 0) > self.compulsory_bytes else "reads"

    @property
    def dma_ops(self) -> int:
        return self.gets + self.puts

    @property
    def dma_bytes(self) -> int:
        return self.bytes_in + self.bytes_out

    @property
    def vector_share(self) -> float:
        """The share of the flops vector instructions do (1.0 without flops)."""
        return self.vector_flops / self.flops if self.flops else 1.0

    @property
    def compute_efficiency(self) -> float:
        """The flops at the CPEs' vector FMA peak over the modeled compute
        time (1.0: every cycle issues a vector FMA)."""
        return self.peak_compute_s / self.compute_s if self.compute_s else 1.0

    @property
    def roofline_share(self) -> float:
        """The roofline bound as a share of the modeled time (1.0: on the roof)."""
        return self.roofline_s / self.modeled_s if self.modeled_s else 1.0

    @property
    def traffic_over_bound(self) -> float | None:
        """DMA bytes over the I/O lower bound (1.0: optimal traffic)."""
        b = self.io_lower_bound_bytes
        return self.dma_bytes / b if b else None

    @property
    def intensity(self) -> float:
        """Operational intensity, flops per DMA byte."""
        return self.flops / self.dma_bytes if self.dma_bytes else math.inf

    def as_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d.update(dma_ops=self.dma_ops, dma_bytes=self.dma_bytes,
                 vector_share=self.vector_share, compute_efficiency=self.compute_efficiency,
                 roofline_share=self.roofline_share,
                 traffic_over_bound=self.traffic_over_bound, bound_binds=self.bound_binds)
        return d


@dataclass
class CostReport:
    function: str
    machine: Machine
    kernels: list[KernelCost] = field(default_factory=list)
    # A program for several ranks: the ranks (each runs the kernels above on
    # its share) and the collectives between them (swir.costmodel.network).
    ranks: int = 1
    collectives: list[CollectiveCost] = field(default_factory=list)
    # The run in program order: kernel names (at their first spawn) and the
    # collectives (swir.costmodel.network.host_steps).
    steps: list[str | CollectiveCost] = field(default_factory=list)

    def total(self, key: str) -> float:
        return sum(getattr(k, key) for k in self.kernels)

    @property
    def communication_s(self) -> float:
        return sum(c.seconds for c in self.collectives)

    @property
    def modeled_s(self) -> float:
        """Kernels run one after another (spawn, join), then or between them
        the collectives, which every rank waits for; other host time is not
        modeled."""
        return self.total("modeled_s") + self.communication_s

    def as_dict(self) -> dict[str, Any]:
        keys = ("flops", "vector_flops", "gets", "puts", "bytes_in", "bytes_out",
                "peak_compute_s", "compute_s", "dma_s", "modeled_s", "roofline_s")
        totals = {k: self.total(k) for k in keys}
        totals["communication_s"] = self.communication_s
        totals["modeled_s"] = self.modeled_s
        return {"function": self.function, "machine": asdict(self.machine),
                "ranks": self.ranks, "kernels": [k.as_dict() for k in self.kernels],
                "collectives": [c.as_dict() for c in self.collectives], "totals": totals}


def cost_report(module: Module, machine: Machine | None = None,
                func: str | None = None, deadline: float | None = None) -> CostReport:
    """The modeled cost of one run of ``func`` (default: what swir-run runs)
    of a dma-stage module, per function that moves data or computes. The
    LDM size is the module's (``stage dma {ldm_size = N}``) when it says.
    Counting stops with CountLimit past ``deadline`` (time.monotonic())."""
    machine = machine or Machine.for_target(target_of(module.attrs))
    if "ldm_size" in module.attrs:
        machine = machine.with_(ldm_bytes=int(module.attrs["ldm_size"]))
    traffic = dma_traffic(module, func, count_compute=True, deadline=deadline)
    report = CostReport(traffic.function, machine, ranks=module_ranks(module))
    for name, t in traffic.kernels.items():
        f = module.lookup(name)
        if isinstance(f, Function):
            report.kernels.append(kernel_cost(f, t, machine))
    entry = module.lookup(traffic.function)
    if isinstance(entry, Function):
        report.steps = host_steps(module, entry, target_of(module.attrs))
        report.collectives = [s for s in report.steps if isinstance(s, CollectiveCost)]
    return report


def kernel_cost(f: Function, t: KernelTraffic, machine: Machine) -> KernelCost:
    busy = max(t.busy_cpes, 1)
    peak = t.flops / (busy * machine.cpe_flops)
    compute = t.compute_cycles / (busy * machine.clock_hz) if t.compute_cycles else peak
    dma = {True: 0.0, False: 0.0}
    for (overlapped, blocks), n in t.transfers_by_shape.items():
        dma[overlapped] += n * machine.dma_seconds(blocks, busy)
    if machine.rma and (t.reg_sends or t.reg_recvs):
        raise NoRegisterCommunication(
            f"@{f.name} sends or receives by register communication (reg_send / reg_recv, "
            "from -mesh-broadcast), which a target with RMA does not have; the cost model "
            "does not charge it the SW26010's figures: lower it without -mesh-broadcast")
    bcast = sum(n * machine.bcast_seconds(blocks) for blocks, n in t.bcasts_by_shape.items())
    dma[False] += bcast                             # every CPE waits for a broadcast
    rma = sum(n * machine.rma_hops_seconds(blocks)
              for blocks, n in t.bcasts_by_shape.items()) if machine.rma else 0.0
    for blocks, n in t.relays_by_shape.items():     # a relay's shares: all CPEs at once
        dma[False] += n * machine.dma_seconds(blocks, machine.cpes)
    # A run on every CPE, by a spawn of its own or after a barrier in one: one run.
    runs = (t.spawns + t.barriers) or max(t.calls, 1)
    reg = machine.reg_seconds(t.reg_sends, t.reg_recvs, t.reg_steps)
    # At most what it moves: a slice reads part of its input.
    compulsory = min(runs * compulsory_bytes(f), t.bytes_in + t.bytes_out)
    roofline = max(t.flops / machine.peak_flops, compulsory / machine.bandwidth)
    return KernelCost(
        name=f.name, shape=written_shapes(f), spawns=t.spawns, barriers=t.barriers, flops=t.flops, macs=t.muls,
        busy_cpes=t.busy_cpes, ldm_bytes=ldm_total(f), ldm_capacity=machine.ldm_bytes,
        gets=t.gets, puts=t.puts, bytes_in=t.bytes_in, bytes_out=t.bytes_out,
        small_share=t.small_share, blocks=t.blocks, blocks_32=t.blocks_32,
        mem_unaligned=t.mem_unaligned, ldm_unaligned=t.ldm_unaligned, compulsory_bytes=compulsory,
        vector_flops=t.vector_flops, peak_compute_s=peak, compute_s=compute,
        dma_s=dma[True] + dma[False], overlapped_dma_s=dma[True],
        reg_s=reg, modeled_s=max(compute, dma[True]) + dma[False] + reg, roofline_s=roofline,
        io_lower_bound_bytes=io_lower_bound(f, t.muls, compulsory, machine),
        hong_kung_bytes=hong_kung_bytes(f, t.muls, machine), bcasts=t.bcasts,
        reg_sends=t.reg_sends, reg_recvs=t.reg_recvs, reg_bytes=t.reg_bytes,
        bcast_s=bcast, rma_s=rma)


def is_matmul_like(kernel: str) -> bool:
    """Whether a kernel runs a conv2d, conv_transpose2d or matmul (its name
    lists the ops it runs: conv2d_add_relu_0, batch_norm_3)."""
    return any(op.name in kernel for op in MATMUL_LIKE)


def io_lower_bound(f: Function, macs: int, compulsory: int, machine: Machine) -> int | None:
    """Bytes a conv / matmul kernel must move: the larger of what it must
    read and write once (``compulsory``: the elements it reads, strides and
    slices counted, compulsory_bytes) and the Hong-Kung bound."""
    hk = hong_kung_bytes(f, macs, machine)
    return None if hk is None else max(compulsory, hk)


def hong_kung_bytes(f: Function, macs: int, machine: Machine) -> int | None:
    """MACs / (2 sqrt(2 S)) - S words (at least 0) for a conv / matmul
    kernel (Irony, Toledo and Tiskin: what a fast memory of S words must
    exchange with slow memory, less the S words it may hold), S the words of
    LDM tiles can use on all the CPEs together: per CPE the module's
    ldm_size less the target's reserve (the stack's share, which no plan
    gets). All of them, because a broadcast fills every LDM by one read of
    main memory: a run of the kernel is also a run on one fast memory of
    their size (each broadcast one read; docs/cost-model.md, "Bounds"), so
    the bound of the one CPE's LDM would not bound main-memory traffic."""
    if not is_matmul_like(f.name) or not macs:
        return None
    word = element_bytes(f)
    size = f.module.attrs.get("ldm_size", machine.ldm_bytes) if f.module else machine.ldm_bytes
    s = machine.cpes * ((size - size // machine.reserve_divisor) // word)
    return max(0, math.ceil(macs / (2 * math.sqrt(2 * s))) - s) * word


def element_bytes(f: Function) -> int:
    """The element size of the kernel's LDM tiles (4 when it has none)."""
    for inst in f.walk():
        if inst.isa(LDM_ALLOC) and isinstance(inst.results[0].type, LDMType):
            t = inst.results[0].type
            return t.bytes // max(t.num_elements, 1)
    return 4


def _dma_buffers(f: Function) -> tuple[set[int], set[int]]:
    """Ids of the main-memory buffers f's DMAs read from and write to."""
    read: set[int] = set()
    written: set[int] = set()
    for inst in f.walk():
        if inst.isa(DMA_GET, DMA_PUT, DMA_BCAST):
            get = not inst.isa(DMA_PUT)
            main = inst.args[0] if get else inst.args[1]
            base = getattr(main, "base", main)
            (read if get else written).add(id(base))
    return read, written


def compulsory_bytes(f: Function) -> int:
    """One run's compulsory traffic: the elements it reads of every buffer
    parameter it reads, once (all of them, unless -ldm-plan's ``reads``
    attribute counts fewer: a stride-2 1x1 conv reads a quarter of its
    input), and every parameter it writes, once."""
    read, written = _dma_buffers(f)
    reads = f.attrs.get("reads") or []
    total = 0
    for p in f.params:
        if not isinstance(p.type, BufType):
            continue
        part = reads[p.index] if p.index < len(reads) else -1
        size = p.type.bytes
        total += (min(size, part * p.type.element.bytes) if part >= 0 else size) * \
            (id(p) in read) + size * (id(p) in written)
    return total


def written_shapes(f: Function) -> str:
    _, written = _dma_buffers(f)
    return ", ".join("x".join(map(str, p.type.shape)) for p in f.params
                     if isinstance(p.type, BufType) and id(p) in written)
