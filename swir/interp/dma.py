"""The dma-stage interpreter: runs host functions on the MPE and spawned cpe
kernels on 64 simulated CPEs, each with its private LDM and its own reply
words, checking every DMA.

It is the buffered-stage interpreter (:mod:`swir.interp.buffered`: functions
compiled once into Python, LDM buffers with per-element validity, the LDM
capacity per CPE) with the dma stage's emitters overlaid (:data:`DMA_EMITTERS`):

* ``spawn @k(args)`` runs ``cpe kernel @k`` on CPEs 63, 62, ..., 0, one after
  another; ``cpe_id`` is the running CPE's id and ``chunk`` its share of an
  iteration space. ``spawn @a(..), @b(..)`` runs @a so on every CPE, then @b:
  the barrier between the kernels of one spawn (athread_syn). ``join`` ends
  the spawn (a spawn not joined before the next spawn or before its function
  returns is an error). ``parallel`` loops do not
  spread at this stage: the work split is explicit.
* ``dma_get`` / ``dma_put`` move their data when issued (with athread's block
  size and stride), but the LDM elements they write (get) or read (put) are
  *in flight* until a ``dma_wait`` on the same CPE has counted them on their
  reply word: reading data in flight, overwriting LDM that is in flight,
  waiting for more (or fewer) completions than were issued, freeing a buffer
  or ending the kernel with DMAs not waited for are located errors, and so is
  a DMA whose span leaves its main-memory tensor or its LDM buffer.
* Per function (:class:`DMAStats`, ``DMAInterpreter.kernel_stats``): spawns
  (and barriers: runs after another kernel of the same spawn),
  runs, gets and puts, elements and bytes each way, waits, histograms of
  transfer and block sizes, the share of transfers under 256 bytes, and the
  LDM high-water mark per CPE.

The rules are in docs/ir.md, "Executing IR", "The dma stage".
"""

from __future__ import annotations

import itertools
from collections import ChainMap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.lib.stride_tricks import as_strided

from swir.diagnostics import Diagnostic, Location
from swir.interp.buffered import (
    BUFFERED_EMITTERS,
    BufferedInterpreter,
    KernelStats,
    LDMBuffer,
    element_text,
    ldm_locals,
    region_text,
    report_foreign_ldm,
    simple_operand,
)
from swir.interp.graph import MAX_STEPS
from swir.interp.loop import EMITTERS, OpEmitter
from swir.interp.pycode import Emit, expr_text, raiser, value_text
from swir.ir.core import (
    Access,
    Apply,
    Function,
    Global,
    Instruction,
    Module,
    Range,
    Value,
)
from swir.ir.types import LDMType, ShapedType
from swir.ops.loop import chunk_code
from swir.ops.util import attr_or_default
from swir.target import default_target

# The module names SMALL_TRANSFER and ALIGN_BYTES (see __getattr__), the Target
# fields they read. Transfers smaller than small_transfer bytes are counted as
# small (DMA efficiency falls for blocks below a few hundred bytes;
# ../shared/design/sunway.md); blocks_32 counts the blocks whose length is a
# multiple of dma_align bytes: the CPEs' write blocks and the LDM buffers'
# alignment (docs/codegen.md).
_DEFAULT_FIGURES = {"SMALL_TRANSFER": "small_transfer", "ALIGN_BYTES": "dma_align"}

DMA_EMITTERS: dict[str, OpEmitter] = {}


def dma_emitter(*names: str) -> Callable[[OpEmitter], OpEmitter]:
    """Register the dma-stage emitter of one or more ops (overlaid on the
    buffered and loop stages' emitters)."""
    def register(fn: OpEmitter) -> OpEmitter:
        for n in names:
            if n in DMA_EMITTERS:
                raise ValueError(f"dma emitter for '{n}' registered twice")
            DMA_EMITTERS[n] = fn
        return fn
    return register


def size_bucket(nbytes: int) -> int:
    """The histogram bucket of a size: the power of two 2**k with
    2**k <= nbytes < 2**(k+1) (0 for 0)."""
    return 1 << (nbytes.bit_length() - 1) if nbytes > 0 else 0


# ---------------------------------------------------------------------------
# Run-time objects
# ---------------------------------------------------------------------------

class Transfer:
    """One DMA issued and not yet waited for: the LDM elements [lo, hi) of
    ``buf`` it writes (get) or reads (put), and its reply word."""

    __slots__ = ("buf", "get", "hi", "inst", "lo", "reply", "seq")

    def __init__(self, inst: Instruction, get: bool, buf: DMABuffer, lo: int, hi: int,
                 reply: int, seq: int) -> None:
        self.inst, self.get, self.buf, self.lo, self.hi = inst, get, buf, lo, hi
        self.reply, self.seq = reply, seq

    @property
    def op(self) -> str:
        return "dma_get" if self.get else "dma_put"


class DMABuffer(LDMBuffer):
    """An LDM buffer at the dma stage: also which elements are in flight (the
    destination of a get or the source of a put not yet waited for) and the
    transfers doing it."""

    __slots__ = ("busy", "busyf", "okf", "pending")

    def __init__(self, t: LDMType, owner: int, name: str, loc: Any) -> None:
        super().__init__(t, owner, name, loc)
        self.okf = np.frombuffer(self.ok, np.uint8)     # flat view of the validity bytes
        self.busy = bytearray(t.num_elements)           # 1 = in flight
        self.busyf = np.frombuffer(self.busy, np.uint8)
        self.pending: list[Transfer] = []

    def in_flight(self, flat: int, get: bool | None = None) -> Transfer | None:
        """The first pending transfer covering element ``flat`` (of either
        direction, or only gets / puts)."""
        for t in self.pending:
            if t.lo <= flat < t.hi and (get is None or t.get == get):
                return t
        return None


class TransferShares:
    """Derived DMA counters, for classes with ``gets``, ``puts`` and
    ``small_transfers``: the interpreter's DMAStats, the static KernelTraffic."""

    gets: int
    puts: int
    small_transfers: int

    @property
    def transfers(self) -> int:
        return self.gets + self.puts

    @property
    def small_share(self) -> float:
        """The share of transfers under SMALL_TRANSFER bytes (0.0 with none)."""
        return self.small_transfers / self.transfers if self.transfers else 0.0


@dataclass
class DMAStats(KernelStats, TransferShares):
    """What the runs of one function did in the last top-level run. The
    buffered stage's counters (``calls`` counts each CPE's run of a spawned
    kernel; ``ldm_peak`` / ``ldm_peak_cpe`` are LDM high-water marks including
    callers' and callees' buffers; ``elements_in`` / ``bytes_in`` count what
    DMAs (and copies) moved into LDM, ``*_out`` out of it) plus the DMA
    counters below. DMA counters belong to the function whose code issues the
    DMA, summed over CPEs and calls."""

    spawns: int = 0                   # spawns that start with this kernel (athread_spawn)
    barriers: int = 0                 # runs after a barrier inside a spawn (athread_syn)
    gets: int = 0
    puts: int = 0
    waits: int = 0
    # Transfers (gets + puts) by size in bytes: size_bucket(bytes) -> count.
    size_histogram: dict[int, int] = field(default_factory=dict)
    small_transfers: int = 0          # transfers under SMALL_TRANSFER bytes
    # Contiguous main-memory blocks moved (a strided DMA moves one per bsize).
    blocks: int = 0
    block_histogram: dict[int, int] = field(default_factory=dict)
    blocks_32: int = 0                # of them, those whose length is a multiple of 32 bytes
    # Broadcast gets (dma_bcast): issued once each (by CPE 0, counted in gets
    # and bytes_in once), and the bytes they delivered into LDM, per CPE.
    bcasts: int = 0
    bcast_bytes: int = 0

    def reset(self) -> None:
        super().reset()
        self.spawns = self.barriers = self.gets = self.puts = self.waits = 0
        self.bcasts = self.bcast_bytes = 0
        self.small_transfers = self.blocks = self.blocks_32 = 0
        self.size_histogram.clear()
        self.block_histogram.clear()


    def as_dict(self) -> dict[str, Any]:
        d = super().as_dict()
        d.update(spawns=self.spawns, barriers=self.barriers, gets=self.gets, puts=self.puts,
                 transfers=self.transfers, waits=self.waits,
                 size_histogram={str(k): v for k, v in sorted(self.size_histogram.items())},
                 small_transfers=self.small_transfers, small_share=self.small_share,
                 blocks=self.blocks, blocks_32=self.blocks_32,
                 bcasts=self.bcasts, bcast_bytes=self.bcast_bytes,
                 block_histogram={str(k): v for k, v in sorted(self.block_histogram.items())},
                 ldm_peak_cpe=list(self.ldm_peak_cpe))
        return d

    @classmethod
    def total(cls, stats: Iterable[DMAStats], name: str = "total", cpes: int = 0) -> DMAStats:
        """Counters summed over functions (DMA counters belong to one function
        each, so the sums count every DMA once); LDM high-water marks are the
        maxima, per CPE (of ``cpes``, or as many as the stats have)."""
        out = cls(name, ldm_peak_cpe=[0] * cpes)
        for s in stats:
            for k in ("calls", "copies_in", "elements_in", "bytes_in", "copies_out",
                      "elements_out", "bytes_out", "spawns", "barriers", "gets", "puts", "waits",
                      "small_transfers", "blocks", "blocks_32", "bcasts", "bcast_bytes"):
                setattr(out, k, getattr(out, k) + getattr(s, k))
            for mine, theirs in ((out.size_histogram, s.size_histogram),
                                 (out.block_histogram, s.block_histogram)):
                for b, n in theirs.items():
                    mine[b] = mine.get(b, 0) + n
            out.ldm_peak = max(out.ldm_peak, s.ldm_peak)
            out.ldm_peak_cpe[:] = [max(a, b) for a, b in itertools.zip_longest(
                out.ldm_peak_cpe, s.ldm_peak_cpe, fillvalue=0)]
        return out


# ---------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------

def _at(loc: Location | None) -> str:
    return f"{loc.line}:{loc.col}" if loc is not None else "?"


def _side_text(s: Any) -> str:
    if isinstance(s, Access):
        return f"{value_text(s.base)}[{', '.join(expr_text(i) for i in s.indices)}]"
    return value_text(s)


def _dma_text(inst: Instruction) -> str:
    return f"{inst.opname} {_side_text(inst.args[0])} -> {_side_text(inst.args[1])}"


def _issued_note(t: Transfer) -> tuple[str, Location | None]:
    note = (f"the {t.op}, issued here on reply word {t.reply}; a dma_wait {{reply = "
            f"{t.reply}}} completes it")
    return note, t.inst.loc


def _in_flight_text(t: Transfer) -> str:
    return (f"the {t.op} ({_at(t.inst.loc)}) {'writing' if t.get else 'reading'} it has not "
            "been waited for")


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 < 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _strides(shape: tuple[int, ...]) -> list[int]:
    out = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        out[k] = out[k + 1] * shape[k + 1]
    return out


def int_attr(inst: Instruction, name: str, default: int | None, least: int) -> int:
    v = inst.attrs.get(name, default)
    if not isinstance(v, int) or isinstance(v, bool) or v < least:
        raise Diagnostic(f"'{inst.opname}' needs an integer {name} >= {least}, got {v!r}",
                         inst.loc)
    return v


# ---------------------------------------------------------------------------
# The interpreter
# ---------------------------------------------------------------------------

class DMAInterpreter(BufferedInterpreter):
    """Runs functions of a dma-stage module (see the module docstring).

    ``ldm_size`` overrides the module's LDM capacity per CPE (stage attribute
    ``ldm_size``, default: the target's LDM). Running a ``cpe kernel`` directly (the
    top-level :meth:`call`, ``swir-run --func``) runs it on every CPE as a
    spawn and join would. After a run, :attr:`kernel_stats` (a
    :class:`DMAStats` per function run, by name), :attr:`dma_totals` and
    :meth:`stats` describe it."""

    stages = frozenset({"dma"})
    emitters: ClassVar[Mapping[str, OpEmitter]] = ChainMap(DMA_EMITTERS, BUFFERED_EMITTERS,
                                                           EMITTERS)
    description = "dma-stage interpreter"
    buffer_class = DMABuffer
    stats_class = DMAStats
    kernel_stats: dict[str, DMAStats]

    def __init__(self, module: Module, base_dir: str | Path = ".",
                 max_steps: int = MAX_STEPS, ldm_size: int | None = None) -> None:
        super().__init__(module, base_dir, max_steps, ldm_size)
        # Per CPE: reply word -> the transfers counted on it and not yet waited for.
        self.replies: list[dict[int, list[Transfer]]] = [{} for _ in range(self.target.cpes)]
        # [the spawn whose kernel has not been joined, or None; its call depth]
        self.spawned: list[Any] = [None, 0]
        self._seq = itertools.count()
        self._dma_touched: dict[int, set[int]] = {}
        self._spawns: dict[int, bool] = {}
        # Per CPE, the broadcasts of the kernel run: (inst, start, LDM buffer, LDM start).
        self.bcast_log: list[list[tuple]] = [[] for _ in range(self.target.cpes)]
        self.ns.update(_sp=self.spawned)

    # -- results of the last run ----------------------------------------------------
    @property
    def dma_totals(self) -> DMAStats:
        """The counters of the last run summed over its functions."""
        return DMAStats.total((s for s in self.kernel_stats.values() if s.calls),
                              cpes=self.target.cpes)

    def stats(self) -> dict[str, Any]:
        """JSON-ready counters of the last run: steps, per function run
        (:meth:`DMAStats.as_dict`), and the totals."""
        return {"steps": self.steps,
                "functions": {n: s.as_dict() for n, s in self.kernel_stats.items() if s.calls},
                "total": self.dma_totals.as_dict()}

    # -- running --------------------------------------------------------------------
    def call(self, f: Function, args: list[np.ndarray],
             arg_names: list[str] | None = None) -> list[np.ndarray]:
        for d in self.replies:
            d.clear()
        self.spawned[:] = [None, 0]
        return super().call(f, args, arg_names)

    def entry(self, f: Function) -> Callable[..., tuple]:
        fn = self.function(f)
        if f.target == "cpe":
            stats = self.stats_for(f)

            def on_every_cpe(*args: Any) -> tuple:
                stats.spawns += 1
                self.run_on_cpes(fn, f, args, None)
                return ()
            return on_every_cpe
        spawned = self.spawned

        def host(*args: Any) -> tuple:
            out = fn(*args)
            if spawned[0] is not None:
                raise Diagnostic(f"the run of @{f.name} ends while the cpe kernel spawned "
                                 "here is still running (no join)", spawned[0].loc)
            return out
        return host

    def run_on_cpes(self, fn: Callable[..., tuple], kernel: Function, args: tuple,
                    site: Instruction | None) -> None:
        """Run a compiled cpe kernel on CPEs 63 .. 0, one after another; each
        must end with every DMA it issued waited for."""
        state, replies = self.cpe_state, self.replies
        for log in self.bcast_log:
            log.clear()
        try:
            for cpe in range(self.target.cpes - 1, -1, -1):
                state[0] = cpe
                try:
                    fn(*args)
                    if any(replies[cpe].values()):
                        self._unwaited(cpe, kernel)
                except Diagnostic as d:
                    if site is not None and len(d.notes) < 8:
                        d.notes.append((f"in @{kernel.name} on CPE {cpe}, spawned from here",
                                        site.loc))
                    raise
        finally:
            state[0] = 0
        self._check_broadcasts(kernel, site)

    def _check_broadcasts(self, kernel: Function, site: Instruction | None) -> None:
        """Every CPE must reach the same broadcasts (each is a barrier, and CPE
        0's transfer is what every CPE receives): same instruction, main-memory
        start and LDM place, in the same order."""
        logs = self.bcast_log
        ref = logs[0]
        for cpe in range(1, self.target.cpes):
            mine = logs[cpe]
            if mine == ref:
                continue
            k = next((i for i, (a, b) in enumerate(zip(mine, ref)) if a != b),
                     min(len(mine), len(ref)))
            inst = (mine[k] if k < len(mine) else ref[k])[0]
            notes = [(f"in @{kernel.name}, spawned from here", site.loc)] if site else []
            if k >= len(mine) or k >= len(ref):
                raise Diagnostic(
                    f"CPE {cpe} reaches {len(mine)} broadcast(s) and CPE 0 {len(ref)} in this "
                    f"run of @{kernel.name}: every CPE must reach each dma_bcast (a barrier; "
                    f"here the {_ordinal(k + 1)})", inst.loc, notes)
            a, b = mine[k], ref[k]
            what = ("another dma_bcast" if a[0] is not b[0] else
                    f"main-memory element {a[1]}, CPE 0's {b[1]}" if a[1] != b[1] else
                    f"LDM {a[2]} element {a[3]}, CPE 0's {b[2]} element {b[3]}")
            raise Diagnostic(f"CPE {cpe}'s {_ordinal(k + 1)} broadcast in this run of "
                             f"@{kernel.name} differs from CPE 0's ({what}): a broadcast "
                             "delivers CPE 0's one transfer to every CPE", a[0].loc, notes)

    def _unwaited(self, cpe: int, kernel: Function) -> None:
        pending = sorted((t for q in self.replies[cpe].values() for t in q),
                         key=lambda t: t.seq)
        t = pending[0]
        raise Diagnostic(f"CPE {cpe}: cpe kernel @{kernel.name} returns before the {t.op} "
                         f"issued here has been waited for (reply word {t.reply}; "
                         f"{len(pending)} DMA(s) not waited for)", t.inst.loc)

    def _free(self, buf: LDMBuffer) -> None:
        if isinstance(buf, DMABuffer) and buf.pending:
            t = buf.pending[0]
            raise Diagnostic(f"CPE {buf.owner}: LDM buffer {buf.name} is freed (its region "
                             f"ends) before the {t.op} {'into' if t.get else 'from'} it, "
                             f"issued here, has been waited for (reply word {t.reply})",
                             t.inst.loc, [(f"{buf.name} is allocated here", buf.loc)])
        super()._free(buf)

    # -- static facts about functions -------------------------------------------------
    def dma_touched(self, f: Function) -> set[int]:
        """Ids of the LDM values of f that can be in flight: the LDM side of
        its DMAs, LDM buffers passed to calls, and its LDM parameters."""
        out = self._dma_touched.get(id(f))
        if out is None:
            out = {id(p) for p in f.params if isinstance(p.type, LDMType)}
            for inst in f.walk():
                if inst.opname in ("dma_get", "dma_put", "dma_bcast") and len(inst.args) == 2:
                    s = inst.args[0 if inst.opname == "dma_put" else 1]
                    out.add(id(s.base if isinstance(s, Access) else s))
                elif inst.opname in ("call", "spawn") and inst.args \
                        and isinstance(inst.args[0], Apply):
                    out.update(id(a) for a in inst.args[0].args if isinstance(a.type, LDMType))
            self._dma_touched[id(f)] = out
        return out

    def spawns_in(self, f: Function) -> bool:
        has = self._spawns.get(id(f))
        if has is None:
            has = self._spawns[id(f)] = any(i.opname == "spawn" for i in f.walk())
        return has

    # -- run-time helpers bound into the generated code ------------------------------
    def read_reporter(self, inst: Instruction, acc: Access) -> Callable[[DMABuffer, int], None]:
        state = self.cpe_state
        text = f"load {region_text(acc)}"

        def report(buf: DMABuffer, flat: int) -> None:
            elem = element_text(buf, flat)
            t = buf.in_flight(flat, get=True) if isinstance(buf, DMABuffer) else None
            if t is not None:
                raise Diagnostic(f"CPE {state[0]}: read of LDM {elem} whose dma_get "
                                 f"({_at(t.inst.loc)}) has not been waited for ({text})",
                                 inst.loc, [_issued_note(t)])
            raise Diagnostic(f"CPE {state[0]}: read of LDM {elem} that was neither fetched by "
                             f"dma_get nor written ({text})", inst.loc)
        return report

    def overwrite_reporter(self, inst: Instruction, acc: Access
                           ) -> Callable[[DMABuffer, int], None]:
        state = self.cpe_state
        text = f"store {value_text(inst.args[0])}, {region_text(acc)}"

        def report(buf: DMABuffer, flat: int) -> None:
            t = buf.in_flight(flat)
            assert t is not None
            raise Diagnostic(f"CPE {state[0]}: store to LDM {element_text(buf, flat)} while "
                             f"{_in_flight_text(t)} ({text})", inst.loc, [_issued_note(t)])
        return report

    def copy_hook(self, buf: LDMBuffer, local: tuple, inbound: bool,
                  fail: Callable[[str], None]) -> None:
        """copy_in / copy_out at the dma stage: never onto LDM in flight, never
        from LDM a get has not completed."""
        if not isinstance(buf, DMABuffer) or not buf.pending:
            return
        shape = buf.type.shape
        busy = buf.busyf.reshape(shape)[local]
        if inbound:
            hit = np.argwhere(busy)
        else:
            hit = np.argwhere(busy & (buf.okf.reshape(shape)[local] == 0))
        if len(hit):
            flat = int(np.ravel_multi_index(tuple(int(x) for x in hit[0]), shape))
            t = buf.in_flight(flat)
            assert t is not None
            what = "onto" if inbound else "of"
            fail(f"{'copy_in' if inbound else 'copy_out'} {what} LDM "
                 f"{element_text(buf, flat)} while {_in_flight_text(t)}")

    def transfer(self, inst: Instruction, f: Function) -> tuple[Callable[..., None], Access, Any]:
        """The run-time function of one dma_get / dma_put, called with the
        main-memory array, the LDM buffer, the main-memory subscripts and
        (when the LDM side is an element) the LDM subscripts; also the
        main-memory access and the LDM side of the instruction."""
        op = inst.opname
        get, bcast = op != "dma_put", op == "dma_bcast"
        form = (f"{op} %A[i, ...] -> %L {{count, reply}}" if get else
                f"{op} %L -> %A[i, ...] {{count, reply}}")
        if len(inst.args) != 2:
            raise Diagnostic(f"'{op}' is written {form}", inst.loc)
        macc, lside = (inst.args[0], inst.args[1]) if get else (inst.args[1], inst.args[0])
        if not isinstance(macc, Access) or not isinstance(macc.base.type, ShapedType) \
                or isinstance(macc.base.type, LDMType) \
                or len(macc.indices) != macc.base.type.rank \
                or any(isinstance(i, Range) for i in macc.indices):
            raise Diagnostic(f"'{op}' is written {form}: its main-memory side is one element "
                             "of a buffer, one subscript per dimension", inst.loc)
        lbase = lside.base if isinstance(lside, Access) else lside
        lt = getattr(lbase, "type", None)
        if not isinstance(lt, LDMType) or (isinstance(lside, Access) and (
                len(lside.indices) != lt.rank or any(isinstance(i, Range)
                                                     for i in lside.indices))):
            raise Diagnostic(f"'{op}' is written {form}: its local side is an LDM buffer or "
                             "one element of it", inst.loc)
        mt = macc.base.type
        if mt.element != lt.element:
            raise Diagnostic(f"'{op}' element types differ: {mt.element} in main memory, "
                             f"{lt.element} in LDM", inst.loc)
        count = int_attr(inst, "count", None, 1)
        reply = int_attr(inst, "reply", None, 0)
        bsize = int_attr(inst, "bsize", attr_or_default(inst, "bsize"), 0)
        stride = int_attr(inst, "stride", attr_or_default(inst, "stride"), 0)
        if stride and not bsize:
            raise Diagnostic(f"'{op}' has a stride but no block size (bsize)", inst.loc)
        if not get and isinstance(macc.base, Global) and macc.base.kind == "global":
            return raiser(f"'dma_put' writes to @{macc.base.name}, a constant global",
                           inst.loc), macc, lside

        state, replies, seq, stats = self.cpe_state, self.replies, self._seq, self.stats_for(f)
        bcast_log = self.bcast_log
        mdims, mstr = tuple(mt.shape), _strides(tuple(mt.shape))
        ldims, lstr = tuple(lt.shape), _strides(tuple(lt.shape))
        mrank = len(mdims)
        lsubs = isinstance(lside, Access)
        n_main, n_ldm = mt.num_elements, lt.num_elements
        esize = lt.bytes // lt.num_elements
        align = self.target.dma_align
        strided = 0 < bsize < count
        if strided:
            full, rem = divmod(count, bsize)
            pitch = bsize + stride
            nblocks = full + (rem > 0)
            extent = (nblocks - 1) * pitch + (rem or bsize)
            block_sizes = [(size_bucket(bsize * esize), full)] + \
                ([(size_bucket(rem * esize), 1)] if rem else [])
            blocks_32 = full * (bsize * esize % align == 0) + \
                (1 if rem and rem * esize % align == 0 else 0)
            shape_text = f" in {nblocks} blocks of {bsize} with {stride} skipped between them"
        else:
            full = rem = pitch = 0
            nblocks, extent = 1, count
            block_sizes = [(size_bucket(count * esize), 1)]
            blocks_32 = int(count * esize % align == 0)
            shape_text = ""
        nbytes = count * esize
        bucket = size_bucket(nbytes)
        small = nbytes < self.target.small_transfer
        what, lwhat = value_text(macc.base), value_text(lbase)
        text = _dma_text(inst)
        mem_indices, ldm_indices = macc.indices, lside.indices if lsubs else ()

        def fail(message: str, notes: list | None = None) -> None:
            raise Diagnostic(f"CPE {state[0]}: {message} ({text})", inst.loc, notes or [])

        def bad_subscript(side: str, base: str, t: Any, indices: Any, k: int, v: int,
                          dim: int) -> None:
            fail(f"{op} {side} element {base}[...] is outside {base} : {t}: subscript #{k} "
                 f"({expr_text(indices[k])}) is {v}, outside [0, {dim})")

        def run(mem: np.ndarray, buf: DMABuffer, *subs: int) -> None:
            cpe = state[0]
            if buf.owner != cpe:
                report_foreign_ldm(buf, cpe, inst)
            start = 0
            for k in range(mrank):
                s = subs[k]
                if not 0 <= s < mdims[k]:
                    bad_subscript("start", what, mt, mem_indices, k, s, mdims[k])
                start += s * mstr[k]
            end = start + extent
            if end > n_main:
                fail(f"{op} {'reads' if get else 'writes'} outside {what} : {mt}: {count} "
                     f"elements from {what}[{', '.join(str(s) for s in subs[:mrank])}] "
                     f"(element {start}){shape_text} reach element {end - 1}, past its "
                     f"last element, {n_main - 1}")
            lo = 0
            if lsubs:
                for k in range(len(ldims)):
                    s = subs[mrank + k]
                    if not 0 <= s < ldims[k]:
                        bad_subscript("LDM", lwhat, lt, ldm_indices, k, s, ldims[k])
                    lo += s * lstr[k]
            hi = lo + count
            if hi > n_ldm:
                fail(f"{op} of {count} elements {'into' if get else 'from'} LDM "
                     f"{element_text(buf, lo)} runs past the end of {lwhat} : {lt} "
                     f"({n_ldm} elements)")
            data = buf.data
            if bcast and replies[cpe].get(reply):
                fail(f"dma_bcast on reply word {reply} while {len(replies[cpe][reply])} DMA(s) "
                     f"on it are outstanding: CPE 0 waits for its broadcast alone there",
                     [_issued_note(replies[cpe][reply][0])])
            if get:
                if buf.pending:
                    i = buf.busy.find(1, lo, hi)
                    if i >= 0:
                        t = buf.in_flight(i)
                        assert t is not None
                        fail(f"dma_get into LDM {element_text(buf, i)} while "
                             f"{_in_flight_text(t)}", [_issued_note(t)])
                if strided:
                    data[lo:lo + full * bsize].reshape(full, bsize)[...] = as_strided(
                        mem[start:], shape=(full, bsize),
                        strides=(pitch * mem.itemsize, mem.itemsize), writeable=False)
                    if rem:
                        m0 = start + full * pitch
                        data[lo + full * bsize:hi] = mem[m0:m0 + rem]
                else:
                    data[lo:hi] = mem[start:end]
                if bcast:
                    # Complete on return; main memory is read once, by CPE 0's
                    # transfer (every CPE checks that it reaches the same one).
                    buf.okf[lo:hi] = 1
                    stats.bcast_bytes += nbytes
                    bcast_log[cpe].append((inst, start, buf.name, lo))
                    if cpe != 0:
                        return
                    stats.bcasts += 1
                else:
                    buf.okf[lo:hi] = 0
                stats.gets += 1
                stats.elements_in += count
                stats.bytes_in += nbytes
            else:
                i = buf.ok.find(0, lo, hi)
                if i >= 0:
                    t = buf.in_flight(i, get=True)
                    if t is not None:
                        fail(f"dma_put of LDM {element_text(buf, i)} whose dma_get "
                             f"({_at(t.inst.loc)}) has not been waited for", [_issued_note(t)])
                    fail(f"dma_put of LDM {element_text(buf, i)} that was neither fetched "
                         "by dma_get nor written")
                if strided:
                    as_strided(mem[start:], shape=(full, bsize),
                               strides=(pitch * mem.itemsize, mem.itemsize))[...] = \
                        data[lo:lo + full * bsize].reshape(full, bsize)
                    if rem:
                        m0 = start + full * pitch
                        mem[m0:m0 + rem] = data[lo + full * bsize:hi]
                else:
                    mem[start:end] = data[lo:hi]
                stats.puts += 1
                stats.elements_out += count
                stats.bytes_out += nbytes
            if not bcast:
                buf.busyf[lo:hi] = 1
                t = Transfer(inst, get, buf, lo, hi, reply, next(seq))
                buf.pending.append(t)
                q = replies[cpe].get(reply)
                if q is None:
                    q = replies[cpe][reply] = []
                q.append(t)
            h = stats.size_histogram
            h[bucket] = h.get(bucket, 0) + 1
            if small:
                stats.small_transfers += 1
            stats.blocks += nblocks
            stats.blocks_32 += blocks_32
            h = stats.block_histogram
            for b, n in block_sizes:
                h[b] = h.get(b, 0) + n
        return run, macc, lside

    def waiter(self, inst: Instruction, f: Function) -> Callable[[], None]:
        reply = int_attr(inst, "reply", None, 0)
        times = int_attr(inst, "times", attr_or_default(inst, "times"), 1)
        state, replies, stats = self.cpe_state, self.replies, self.stats_for(f)
        text = f"dma_wait {{reply = {reply}, times = {times}}}"

        def wait() -> None:
            cpe = state[0]
            q = replies[cpe].get(reply) or []
            n = len(q)
            if n != times:
                notes = [_issued_note(t) for t in q[:4]]
                if n < times:
                    raise Diagnostic(
                        f"CPE {cpe}: {text} waits for {times} completion(s) of reply word "
                        f"{reply}, but {n} DMA(s) on it are outstanding: the CPE would wait "
                        "forever", inst.loc, notes)
                raise Diagnostic(
                    f"CPE {cpe}: {text} waits for {times} completion(s) of reply word {reply}, "
                    f"but {n} DMAs on it are outstanding: the wait ends after any {times} of "
                    f"them (or never, once all have completed), and resetting the word loses "
                    f"the rest", inst.loc, notes)
            for t in q:
                buf = t.buf
                buf.pending.remove(t)
                if t.get:
                    buf.okf[t.lo:t.hi] = 1
                buf.busyf[t.lo:t.hi] = 0
                for p in buf.pending:     # transfers overlapping the one completed
                    buf.busyf[p.lo:p.hi] = 1
            q.clear()
            stats.waits += 1
        return wait

    def spawner(self, inst: Instruction) -> Callable[..., None]:
        """A spawn's run: each kernel it names on every CPE, in order (the
        barrier between two kernels of one spawn lets none start the next
        before all have ended the last). It takes the kernels' arguments one
        after another."""
        apps = inst.args
        if not apps or not all(isinstance(a, Apply) for a in apps):
            return raiser("'spawn' is written spawn @kernel(args), @kernel(args), ...",
                           inst.loc)
        kernels: list[Function] = []
        for app in apps:
            k = self.module.lookup(app.callee)
            if not isinstance(k, Function) or k.target != "cpe" or k.kind != "kernel":
                return raiser(f"'spawn' starts a cpe kernel; @{app.callee} is not one",
                               inst.loc)
            if k.body is None:
                return raiser(f"@{k.name} is only declared; it has no body to run", inst.loc)
            if len(app.args) != len(k.params):
                return raiser(f"@{k.name} takes {len(k.params)} arguments, "
                               f"{len(app.args)} given", inst.loc)
            for i in self.written(k):
                a = app.args[i]
                if isinstance(a, Global) and a.kind == "global":
                    return raiser(f"spawn passes @{a.name}, a constant global, to parameter "
                                   f"%{k.params[i].name} of @{k.name}, which writes it",
                                   inst.loc)
            kernels.append(k)
        spawned, st = self.spawned, self.state
        stats = [self.stats_for(k) for k in kernels]
        cuts = list(itertools.accumulate([0] + [len(a.args) for a in apps]))
        compiled: list[Callable[..., tuple]] = []

        def spawn(*args: Any) -> None:
            if spawned[0] is not None:
                raise Diagnostic(f"'spawn' while the cpe kernel spawned at "
                                 f"{_at(spawned[0].loc)} is still running: join it first",
                                 inst.loc, [("spawned here, not joined", spawned[0].loc)])
            if not compiled:
                compiled.extend(self.function(k) for k in kernels)
            stats[0].spawns += 1
            for n, k in enumerate(kernels):
                if n:
                    stats[n].barriers += 1
                self.run_on_cpes(compiled[n], k, args[cuts[n]:cuts[n + 1]], inst)
            spawned[0], spawned[1] = inst, st[1]
        return spawn

    def joiner(self, inst: Instruction) -> Callable[[], None]:
        spawned = self.spawned

        def join() -> None:
            if spawned[0] is None:
                raise Diagnostic("'join' with no cpe kernel running (no spawn since the last "
                                 "join)", inst.loc)
            spawned[0] = None
        return join

    def unjoined_reporter(self, inst: Instruction, f: Function) -> Callable[[Any], None]:
        def report(site: Instruction) -> None:
            raise Diagnostic(f"@{f.name} returns while the cpe kernel spawned at "
                             f"{_at(site.loc)} is still running: join it first", inst.loc,
                             [("spawned here, not joined", site.loc)])
        return report


# ---------------------------------------------------------------------------
# Emitters
# ---------------------------------------------------------------------------

def _interp(e: Emit) -> DMAInterpreter:
    assert isinstance(e.interp, DMAInterpreter)
    return e.interp


@dma_emitter("ldm_alloc")
def _emit_ldm_alloc(e: Emit, inst: Instruction) -> None:
    BUFFERED_EMITTERS["ldm_alloc"](e, inst)
    r = inst.results[0]
    b = e.name(r)
    e.line(f"{b}_busy = {b}.busy")
    e.data.setdefault("busy", {})[id(r)] = (e.parallel_depth, f"{b}_busy")


def _busy_local(e: Emit, v: Value) -> str:
    info = e.data.get("busy", {}).get(id(v))
    if info is not None and info[0] == e.parallel_depth:
        return info[1]
    return f"{e.name(v)}.busy"


@dma_emitter("store")
def _emit_store(e: Emit, inst: Instruction) -> None:
    acc = inst.args[1]
    if not isinstance(acc, Access) or not isinstance(acc.base.type, LDMType):
        EMITTERS["store"](e, inst)
        return
    d, ok = ldm_locals(e, inst, acc.base)
    off = simple_operand(e, e.offset(inst, acc))
    if id(acc.base) in _interp(e).dma_touched(e.function):
        busy = _busy_local(e, acc.base)
        rep = e.bind(_interp(e).overwrite_reporter(inst, acc), "inflight")
        e.line(f"if {busy}[{off}]: {rep}({e.name(acc.base)}, {off})")
    e.line(f"{d}[{off}] = {e.name(inst.args[0])}")
    e.line(f"{ok}[{off}] = 1")


@dma_emitter("dma_get", "dma_put", "dma_bcast")
def _emit_dma(e: Emit, inst: Instruction) -> None:
    fn, macc, lside = _interp(e).transfer(inst, e.function)
    vals = [e.expr(i) for i in macc.indices]
    lbase = lside.base if isinstance(lside, Access) else lside
    if isinstance(lside, Access):
        vals += [e.expr(i) for i in lside.indices]
    e.line(f"{e.bind(fn, inst.opname)}({', '.join([e.name(macc.base), e.name(lbase)] + vals)})")


@dma_emitter("dma_wait")
def _emit_dma_wait(e: Emit, inst: Instruction) -> None:
    e.line(f"{e.bind(_interp(e).waiter(inst, e.function), 'wait')}()")


@dma_emitter("cpe_id")
def _emit_cpe_id(e: Emit, inst: Instruction) -> None:
    e.line(f"{e.define(inst.results[0])} = _cpe[0]")


@dma_emitter("chunk")
def _emit_chunk(e: Emit, inst: Instruction) -> None:
    extent = int_attr(inst, "extent", None, 0)
    workers = int_attr(inst, "workers", None, 1)
    if len(inst.args) != 1 or len(inst.results) != 2:
        raise Diagnostic("'chunk' is written %lo, %hi = chunk %id {extent, workers}", inst.loc)
    wid = simple_operand(e, e.expr(inst.args[0]))
    if wid == "_o":                       # keep it: the results are defined below
        e.line(f"_w = {wid}")
        wid = "_w"
    text = expr_text(inst.args[0])

    def report(v: int) -> None:
        raise Diagnostic(f"'chunk' worker id {text} is {v}, outside [0, {workers}) "
                         f"(workers = {workers})", inst.loc)
    e.line(f"if not 0 <= {wid} < {workers}: {e.bind(report, 'chunk')}({wid})")
    lo, hi = e.define(inst.results[0]), e.define(inst.results[1])
    for line in chunk_code(wid, lo, hi, extent, workers, int_attr(inst, "grain", attr_or_default(inst, "grain"), 1)):
        e.line(line)


@dma_emitter("spawn")
def _emit_spawn(e: Emit, inst: Instruction) -> None:
    fn = e.bind(_interp(e).spawner(inst), "spawn")
    args = [a for app in inst.args if isinstance(app, Apply) for a in app.args]
    e.line(f"{fn}({', '.join(e.name(a) for a in args)})")


@dma_emitter("join")
def _emit_join(e: Emit, inst: Instruction) -> None:
    e.line(f"{e.bind(_interp(e).joiner(inst), 'join')}()")


@dma_emitter("return")
def _emit_return(e: Emit, inst: Instruction) -> None:
    it = _interp(e)
    if it.spawns_in(e.function):
        rep = e.bind(it.unjoined_reporter(inst, e.function), "unjoined")
        e.line(f"if _sp[0] is not None and _sp[1] >= _st[1]: {rep}(_sp[0])")
    EMITTERS["return"](e, inst)


@dma_emitter("call")
def _emit_call(e: Emit, inst: Instruction) -> None:
    app = inst.args[0] if inst.args else None
    callee = e.interp.module.lookup(app.callee) if isinstance(app, Apply) else None
    if isinstance(callee, Function) and e.function.target != "cpe" and callee.target == "cpe":
        fn = raiser(f"@{callee.name} is a cpe kernel: it runs on the CPEs, started by "
                     "'spawn', not called from the MPE", inst.loc)
        e.line(f"{e.bind(fn, 'call')}()")
        return
    if isinstance(callee, Function) and e.function.target == "cpe" and callee.target == "host":
        fn = raiser(f"@{callee.name} is a host func: it runs on the MPE, and a cpe kernel "
                     "cannot call it", inst.loc)
        e.line(f"{e.bind(fn, 'call')}()")
        return
    EMITTERS["call"](e, inst)


# No spreading at the dma stage: a parallel loop runs on the CPE running it, in
# reverse order (the loop stage's rule); the work split is cpe_id and chunk.
DMA_EMITTERS["parallel"] = EMITTERS["parallel"]


def __getattr__(name: str) -> Any:
    """SMALL_TRANSFER, ALIGN_BYTES: the default target's figures, for code that
    asks for them by these names; the interpreter itself reads its module's
    target (target_of)."""
    if name in _DEFAULT_FIGURES:
        return getattr(default_target(), _DEFAULT_FIGURES[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
