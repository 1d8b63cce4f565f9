"""The machines swir compiles for: every hardware figure in one place.

A :class:`Target` holds what the passes, the cost model and the code
generator need to know of one core group of a Sunway processor: CPEs, LDM
bytes and the reserve rule, clock and vector width, the DMA constants and the
alignment rules. Nothing else in swir writes these figures down; the C
headers' constants are generated from here (:meth:`Target.c_defines`) and a
test (test/unit/test_target.py) greps the sources for stray copies.

Each figure cites its public source; docs/architecture.md ("Targets") lists
them and says which are assumptions. Select a target with ``--target NAME``
(swir-opt, swir-report, swir-cg).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping


@dataclass(frozen=True)
class Target:
    name: str                   # what --target takes
    title: str                  # what messages call it
    core_groups: int            # core groups per processor
    cpes: int                   # CPEs per core group
    cpe_grid: tuple[int, int]   # rows x columns of the CPE cluster
    ldm_bytes: int              # LDM (scratchpad) per CPE
    # The LDM a plan leaves for the CPE stack, statics and reply words by
    # default: ldm_bytes // reserve_divisor (an swir convention, not a figure).
    reserve_divisor: int
    clock_hz: float             # CPE clock
    flops_per_cycle: int        # per CPE, the double-precision vector FMA peak
    vector_bits: int            # the CPE's SIMD register width
    vector_registers: int       # the CPE's vector registers (a micro-kernel's block fits them)
    # The CPE pipeline model of the compute time (docs/cost-model.md,
    # "Compute"): per cycle one floating-point or vector instruction and one
    # LDM load or store issue; a floating-point result is usable this many
    # cycles after its instruction issues. Assumptions, not measurements.
    fp_latency: int
    peak_bandwidth: float       # main memory, bytes/s per core group, theoretical
    # The DMA rules the emulation enforces (docs/codegen.md, "On a real Sunway machine").
    write_block: int            # no two CPEs may write one aligned block of this many bytes
    dma_align: int              # DMA blocks and starts stream best at multiples of this
    small_transfer: int         # a DMA under this many bytes counts as small
    # Main memory: every buffer, constant and weights-file array starts at a
    # multiple of this many bytes (the C's arrays and blob, -mem-plan's arena
    # offsets, the weights files swir-import and the printer write).
    mem_align: int
    # The DMA curve (docs/cost-model.md, "The DMA curve"): the share of peak
    # bandwidth large DMAs reach, each contiguous block's overhead in bytes
    # (a block of this many bytes streams at half the bandwidth), each DMA's
    # start-up in cycles (per CPE, with every CPE of the core group issuing
    # DMAs), and the DMA size from which the start-up is paid in full (a
    # shorter DMA pays its share, bytes / dma_startup_bytes).
    dma_efficiency: float
    dma_half_block: int
    dma_startup_cycles: int
    dma_startup_bytes: int
    # What one CPE's DMAs can draw, bytes/s: a kernel whose DMAs come from P
    # busy CPEs streams at min(the core group's bandwidth, P x this). An
    # assumption (docs/cost-model.md, "One CPE's share of the bandwidth").
    dma_cpe_bandwidth: float
    # Broadcast DMA (athread_get in BCAST_MODE; docs/cost-model.md, "Broadcast"):
    # the main-memory bandwidth one CPE's broadcasts reach, the block size at
    # which a block streams at half of it, and each broadcast's fixed cost
    # in cycles (issue, completion and the barriers around it).
    bcast_bandwidth: float
    bcast_half_block: int
    bcast_fixed_cycles: int
    # Register communication (docs/cost-model.md, "Register communication"):
    # one 256-bit vector from a CPE to one or all CPEs of its row or column
    # (putr / putc, getr / getc). No public figures: all three are
    # assumptions. The cycles from a send to the receive that gets it; the
    # cycles per vector a CPE's send or receive occupies its bus; and the
    # vectors a CPE's receive buffer holds per bus (a send to a full buffer
    # waits). The buffer is the smallest plausible, 1: a program that runs
    # with it runs with any larger buffer.
    reg_latency_cycles: int
    reg_cycles_per_vector: int
    reg_buffer_vectors: int
    # Remote memory access (docs/cost-model.md, "RMA broadcasts"): whether
    # the CPEs reach each other's LDM by RMA and have no register
    # communication (the Pro), so that a broadcast is CPE 0's DMA get, then
    # an RMA row broadcast to row 0 and RMA column broadcasts down the
    # columns; else (the SW26010) a broadcast is one BCAST_MODE DMA. Where
    # there is RMA: one row or column broadcast's start-up in cycles (its
    # issue until its reply words are written) and its bandwidth in bytes/s.
    rma: bool
    rma_startup_cycles: int
    rma_bandwidth: float
    # Between core groups (docs/cost-model.md, "Network"): one MPI rank per
    # core group; ranks on one chip meet over its network on chip (NoC), chips
    # over the interconnect. Bandwidths in bytes/s (the interconnect's is one
    # node's injection bandwidth, shared by its core groups), latencies in s.
    noc_bandwidth: float
    noc_latency: float
    net_bandwidth: float
    net_latency: float
    bisection_bandwidth: float  # the whole interconnect's
    mpe_copy_bandwidth: float   # the MPE's memcpy (an allgather's interleaving)
    codegen: bool               # whether swir-cg writes code for it
    sources: str                # where the figures come from
    network_sources: str        # where the network figures come from, and which are assumed

    def default_reserve(self, ldm_size: int) -> int:
        """The LDM bytes a plan keeps back by default (-ldm-reserve=-1)."""
        return ldm_size // self.reserve_divisor

    def c_defines(self) -> str:
        """The figures the C runtime needs (emu/swir_target.h, included by
        swir_emu.h). The LDM size and reserve may be overridden with -D, as the
        generated Makefile does with the plan's."""
        return f"""/* The {self.title}, from swir's target description (swir/target.py).
 * Generated by swir-cg; do not edit. */
#ifndef SWIR_TARGET_H
#define SWIR_TARGET_H

/* CPEs of one core group (a {self.cpe_grid[0]} x {self.cpe_grid[1]} grid, id = row * {self.cpe_grid[1]} + col). */
#define SWIR_CPES {self.cpes}

/* LDM per CPE, and the part of it the code generator leaves for the CPE
 * stack and the reply words by default. */
#ifndef SWIR_LDM_BYTES
#define SWIR_LDM_BYTES {self.ldm_bytes}
#endif
#ifndef SWIR_LDM_RESERVE
#define SWIR_LDM_RESERVE {self.default_reserve(self.ldm_bytes)}
#endif

/* No two CPEs may write by DMA into one aligned block of this many bytes of
 * main memory in one spawn (checked at each join; docs/codegen.md). */
#define SWIR_WRITE_BLOCK {self.write_block}

/* Register communication: the vectors a CPE's receive buffer holds per bus
 * (row, column); a send to a full buffer waits. An assumption (swir/target.py). */
#define SWIR_REG_BUFFER {self.reg_buffer_vectors}

/* DMAs shorter than this many bytes are counted as small (as in the
 * interpreter's SMALL_TRANSFER). */
#define SWIR_SMALL_TRANSFER {self.small_transfer}

#endif
"""



def stream_seconds(blocks: "list[tuple[int, int]] | tuple[tuple[int, int], ...]",
                   half_block: float, bandwidth: float) -> float:
    """Seconds to stream contiguous blocks ((bytes, how many)) of main memory
    at ``bandwidth`` bytes/s, each block costing ``half_block`` bytes more
    (a block of that size streams at half the bandwidth): the DMA curve of
    docs/cost-model.md, for PE_MODE DMAs and broadcasts alike."""
    return sum(k * (b + half_block) for b, k in blocks) / bandwidth

SW26010 = Target(
    name="sw26010", title="SW26010",
    core_groups=4, cpes=64, cpe_grid=(8, 8), ldm_bytes=64 * 1024, reserve_divisor=16,
    clock_hz=1.45e9, flops_per_cycle=8, vector_bits=256, vector_registers=32,
    fp_latency=7, peak_bandwidth=34.1e9, write_block=32, dma_align=32, small_transfer=256,
    mem_align=64,
    # Fitted to TaihuLight measurements (swCandle, below; bench/dma_calibration.py):
    # 0.6 x 34.1 = 20.5 GB/s for large DMAs, 330 B per block, 1650 cycles
    # (1.14 us) per DMA with 64 CPEs issuing, paid in full from 96 B.
    dma_efficiency=0.6, dma_half_block=330, dma_startup_cycles=1650, dma_startup_bytes=96,
    # Assumed: no public figure for one CPE's PE_MODE DMAs. The only public
    # one-issuer figure is swCandle's broadcast (CPE 0 alone reads 8.7 GB/s
    # from memory, below): taken as one CPE's share; dma_assumptions ranges
    # it from 1/16 of the core group's bandwidth to no cap at all.
    dma_cpe_bandwidth=8.7e9,
    # swCandle BCAST_STEP / BCAST_CONT (sunway-measured.md, 1c and 2): 8.7 GB/s
    # memory-side for blocks of 512 B and more, half of it at about 45 B blocks;
    # at most 1.5 us (2175 cycles) per small broadcast, spawn and join
    # included. The two athread_syn barriers are not measured: not charged
    # beyond that bound.
    bcast_bandwidth=8.7e9, bcast_half_block=45, bcast_fixed_cycles=2175,
    # Assumed (no public latency or bandwidth figure; swCandle, Lin et al.,
    # Parallel Computing 77 (2018), says only that a broadcast costs what a
    # point-to-point send does): 10 cycles from send to receive, one vector
    # per cycle per bus, a receive buffer of one vector.
    # swir.costmodel.cost.dma_assumptions ranges them (docs/cost-model.md).
    reg_latency_cycles=10, reg_cycles_per_vector=1, reg_buffer_vectors=1,
    # No RMA: the SW26010's CPEs share LDM data by register communication.
    rma=False, rma_startup_cycles=0, rma_bandwidth=0.0,
    # Interconnect: 128 Gb/s injection per node (16 GB/s), 560 Tb/s (70 TB/s)
    # bisection. The NoC's bandwidth is not public: a message between core
    # groups is a copy from one core group's memory to another's, modeled at
    # what one core group's copy reaches (swCandle STREAM Copy, 20.4 GB/s),
    # and the MPE's memcpy likewise. Both latencies are assumed: 1 us.
    noc_bandwidth=20.4e9, noc_latency=1e-6, net_bandwidth=16e9, net_latency=1e-6,
    bisection_bandwidth=70e12, mpe_copy_bandwidth=20.4e9,
    codegen=True,
    sources=("../shared/design/sunway.md (hardware table: 4 core groups of 1 MPE + an 8 x 8 "
             "CPE grid, 64 KB LDM, 1.45 GHz, 256-bit vector FMA, 11.6 GFLOPS per CPE); "
             "32 vector registers per CPE: the figure swDNN's register blocking (Fang et al., "
             "IPDPS 2017) is designed around, no public manual checked; "
             "swTVM, 000_ba374e17f4714793.txt Sec. II (34.1 GB/s per core group); "
             "docs/codegen.md 'On a real Sunway machine' (32-byte DMA blocks); "
             "001_1987d45e91562161.txt Sec. 5 (256-byte transfers); "
             "DMA curve: swCandle (github.com/jameslinsjtu/swCandle, commit f0ee5ca), "
             "memory/stream_sw PE_CONT and PE_STEP Copy results, 64 CPEs, as tabled in "
             "../shared/design/sunway-measured.md tables 1a (contiguous) and 1b (strided), "
             "fitted by bench/dma_calibration.py; broadcast: swCandle BCAST_STEP and "
             "BCAST_CONT, sunway-measured.md 1c and 2"),
    network_sources=("Dongarra, 'Report on the Sunway TaihuLight System', UT-EECS-16-742 "
                     "(2016): 4 core groups per chip joined by a network on chip, one chip per "
                     "node, 256-node supernodes, 70 TB/s bisection; Glenn Lockwood, 'Sunway "
                     "TaihuLight' (glennklockwood.com, citing Fu et al., SCIENCE CHINA Inf. Sci. "
                     "59, 072001, 2016): injection bandwidth 128 Gb/s per node, bisection 560 "
                     "Tb/s; NoC and MPE copy bandwidth: assumed equal to one core group's "
                     "measured copy bandwidth (swCandle STREAM Copy, sunway-measured.md 1a); "
                     "MPI latency on the NoC and the interconnect: assumed 1 us (no public "
                     "measurement found)"))

# The SW26010's, changed where the Pro differs. The same: 64 CPEs in an 8 x 8
# grid (published) and the LDM reserve rule (swir's). Unknown for this
# processor, so kept: the 32 vector registers, the DMA rules (write block, alignment, small transfers)
# and the DMA curve: its constants are the SW26010's, fitted to TaihuLight
# measurements (no Pro measurement is public); only the peak bandwidth they
# scale is the Pro's, so its large DMAs are modeled at 0.6 x 51.2 GB/s.
SW26010_PRO = replace(
    SW26010, name="sw26010pro", title="SW26010-Pro",
    core_groups=6, ldm_bytes=256 * 1024,
    # 13.8 TFLOPS FP64 per chip / (384 CPEs x 2.25 GHz) = 16 flops per cycle:
    # a 512-bit vector of 8 doubles with FMA.
    clock_hz=2.25e9, flops_per_cycle=16, vector_bits=512, peak_bandwidth=51.2e9,
    # RMA in place of register communication (SYSU-SCC/swops slave.c:
    # athread_rma_row_ibcast / athread_rma_col_ibcast between LDMs). No Pro
    # RMA (or DMA) measurement is public: both figures are assumptions,
    # ranged by swir.costmodel.cost.dma_assumptions. The start-up: 300
    # cycles, the uncontended end of the DMA start-up range (an RMA reaches
    # a neighbour's LDM, not the memory controller whose queue is in the
    # fitted 1650 cycles). The bandwidth: 32 bytes per cycle, the width of
    # the SW26010's register buses that RMA takes the place of (one 256-bit
    # vector per cycle, itself assumed).
    rma=True, rma_startup_cycles=300, rma_bandwidth=32 * 2.25e9,
    codegen=True,
    sources=("Chips and Cheese, 'China's New(ish) SW26010-Pro Supercomputer at SC23' "
             "(2023-11-20): 6 core groups of 64 CPEs, 2.25 GHz; Tom's Hardware on the "
             "same SC23 disclosure: 512-bit vector engine and 256 KB local store per CPE, "
             "13.8 TFLOPS FP64 per chip; Wikipedia 'Sunway SW26010', section 'Successor: "
             "SW26010P': 8 x 8 CPE cluster per core group, DDR4 at 51.2 GB/s per core group; "
             "RMA row and column broadcasts between LDMs in place of register "
             "communication: SYSU-SCC/swops slave.c (athread_rma_row_ibcast, "
             "athread_rma_col_ibcast); the RMA start-up and bandwidth are assumed (no public "
             "measurement)"))

TARGETS: dict[str, Target] = {t.name: t for t in (SW26010, SW26010_PRO)}
# The target of a run that names none. Modules other than this one read it
# when they run (default_target), never into a constant at import, so that
# what they compute follows the target they are handed.
DEFAULT_TARGET = SW26010


def default_target() -> Target:
    """The target of a run that names none (``--target``, a module's
    ``target`` attribute): where no target is handed down."""
    return DEFAULT_TARGET


class UnknownTarget(ValueError):
    pass


def target_of(module_attrs: Mapping[str, Any]) -> Target:
    """The target a module was planned for: its ``target`` attribute (which
    -ldm-plan writes for any target but the default), else the default."""
    name = module_attrs.get("target")
    return TARGETS[name] if isinstance(name, str) and name in TARGETS else default_target()


def target_named(name: str) -> Target:
    """The target ``name`` (as --target spells it); UnknownTarget lists the known ones."""
    try:
        return TARGETS[name]
    except KeyError:
        raise UnknownTarget(f"unknown target '{name}' (targets: {', '.join(TARGETS)})") from None


def record_target(module_attrs: dict[str, Any], target: Target) -> None:
    """Write the target a module is planned for into its attributes, as
    :func:`target_of` reads them: its name, or none for the default target
    (left implicit, so a plan for it prints as before targets existed)."""
    if target is default_target():
        module_attrs.pop("target", None)
    else:
        module_attrs["target"] = target.name
