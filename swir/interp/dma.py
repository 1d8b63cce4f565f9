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
  a DMA whose span leaves its main-memory tensor or its LDM buffer. How one
  transfer runs, by kind, is :mod:`swir.interp.transfer`'s.
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

from swir.diagnostics import Diagnostic
from swir.interp.buffered import (
    BUFFERED_EMITTERS,
    BufferedInterpreter,
    KernelStats,
    LDMBuffer,
    element_text,
    ldm_locals,
    region_text,
    simple_operand,
)
from swir.interp.buses import CPEScheduler, Mesh
from swir.interp.graph import MAX_STEPS
from swir.interp.loop import EMITTERS, OpEmitter
from swir.interp.pycode import Emit, expr_text, raiser, value_text
from swir.interp.transfer import (
    DMABuffer,
    Run,
    Transfer,
    at_text,
    dma_shape,
    dma_sides,
    in_flight_text,
    int_attr,
    issued_note,
    size_bucket,         # as swir.interp.dma.size_bucket for the reports and tests
    transfer_function,
)
from swir.ir.core import (
    Access,
    Apply,
    Function,
    Global,
    Instruction,
    Module,
    Value,
)
from swir.ir.types import LDMType
from swir.ops import (CALL, CHUNK, CPE_ID, DMA_BCAST, DMA_GET, DMA_PUT, DMA_TRANSFERS,
                      DMA_WAIT, JOIN, LDM_ALLOC, PARALLEL, REG_MESSAGES, REG_RECV, REG_SEND,
                      RETURN, SPAWN, STORE)
from swir.ops.loop import chunk_code
from swir.ops.registry import OpDef
from swir.ops.util import attr_or_default
from swir.target import default_target

# The module names SMALL_TRANSFER and ALIGN_BYTES (see __getattr__), the Target
# fields they read. Transfers smaller than small_transfer bytes are counted as
# small (DMA efficiency falls for blocks below a few hundred bytes;
# ../shared/design/sunway.md); blocks_32 counts the blocks whose length is a
# multiple of dma_align bytes: the CPEs' write blocks and the LDM buffers'
# alignment (docs/codegen.md).
_DEFAULT_FIGURES = {"SMALL_TRANSFER": "small_transfer", "ALIGN_BYTES": "dma_align"}

DMA_EMITTERS: dict[OpDef, OpEmitter] = {}


def dma_emitter(*ops: OpDef) -> Callable[[OpEmitter], OpEmitter]:
    """Register the dma-stage emitter of one or more ops (overlaid on the
    buffered and loop stages' emitters)."""
    def register(fn: OpEmitter) -> OpEmitter:
        for op in ops:
            if op in DMA_EMITTERS:
                raise ValueError(f"dma emitter for '{op.name}' registered twice")
            DMA_EMITTERS[op] = fn
        return fn
    return register


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
    # Register communication: reg_send and reg_recv run (each CPE's counted),
    # and the bytes received.
    reg_sends: int = 0
    reg_recvs: int = 0
    reg_bytes: int = 0

    def reset(self) -> None:
        super().reset()
        self.spawns = self.barriers = self.gets = self.puts = self.waits = 0
        self.bcasts = self.bcast_bytes = 0
        self.reg_sends = self.reg_recvs = self.reg_bytes = 0
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
                 reg_sends=self.reg_sends, reg_recvs=self.reg_recvs, reg_bytes=self.reg_bytes,
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
                      "small_transfers", "blocks", "blocks_32", "bcasts", "bcast_bytes",
                      "reg_sends", "reg_recvs", "reg_bytes"):
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

def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 < 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


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
    emitters: ClassVar[Mapping[OpDef, OpEmitter]] = ChainMap(DMA_EMITTERS, BUFFERED_EMITTERS,
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
        self.mesh = Mesh(self.target.cpes, self.target.cpe_grid,
                         self.target.reg_buffer_vectors, self.cpe_state)
        self._meshed: dict[int, bool] = {}
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

        def body(cpe: int) -> None:
            try:
                fn(*args)
                if any(replies[cpe].values()):
                    self._unwaited(cpe, kernel)
            except Diagnostic as d:
                if site is not None and len(d.notes) < 8:
                    d.notes.append((f"in @{kernel.name} on CPE {cpe}, spawned from here",
                                    site.loc))
                raise
        try:
            if self.uses_buses(kernel):
                self.mesh.run(self._scheduler(), body, kernel.name,
                              site.loc if site is not None else kernel.loc)
            else:
                for cpe in range(self.target.cpes - 1, -1, -1):
                    state[0] = cpe
                    body(cpe)
        finally:
            state[0] = 0
        self._check_broadcasts(kernel, site)

    def _scheduler(self) -> CPEScheduler:
        """Runs the CPEs of a kernel that sends or receives side by side; each
        keeps its own call depth and stack of running functions."""
        state, active = self.state, self.active

        def context() -> tuple:
            return state[1], list(active)

        def restore(ctx: tuple) -> None:
            state[1] = ctx[0]
            active[:] = ctx[1]
        return CPEScheduler(self.target.cpes, self.cpe_state, context, restore)

    def uses_buses(self, f: Function) -> bool:
        """Whether f or a function it calls sends or receives on a bus."""
        has = self._meshed.get(id(f))
        if has is None:
            self._meshed[id(f)] = False          # a recursive call adds nothing
            has = False
            for inst in f.walk():
                if inst.isa(*REG_MESSAGES):
                    has = True
                    break
                if inst.isa(CALL) and inst.args and isinstance(inst.args[0], Apply):
                    g = self.module.lookup(inst.args[0].callee)
                    if isinstance(g, Function) and g.body is not None and self.uses_buses(g):
                        has = True
                        break
            self._meshed[id(f)] = has
        return has

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
                if inst.isa(*DMA_TRANSFERS) and len(inst.args) == 2:
                    s = inst.args[0 if inst.isa(DMA_PUT) else 1]
                    out.add(id(s.base if isinstance(s, Access) else s))
                elif inst.isa(CALL, SPAWN) and inst.args \
                        and isinstance(inst.args[0], Apply):
                    out.update(id(a) for a in inst.args[0].args if isinstance(a.type, LDMType))
            self._dma_touched[id(f)] = out
        return out

    def spawns_in(self, f: Function) -> bool:
        has = self._spawns.get(id(f))
        if has is None:
            has = self._spawns[id(f)] = any(i.isa(SPAWN) for i in f.walk())
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
                                 f"({at_text(t.inst.loc)}) has not been waited for ({text})",
                                 inst.loc, [issued_note(t)])
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
                             f"{in_flight_text(t)} ({text})", inst.loc, [issued_note(t)])
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
                 f"{element_text(buf, flat)} while {in_flight_text(t)}")

    def transfer(self, inst: Instruction, f: Function) -> tuple[Callable[..., None], Access, Any]:
        """The run-time function of one dma_get / dma_put / dma_bcast
        (swir/interp/transfer.py), called with the main-memory array, the LDM
        buffer, the main-memory subscripts and (when the LDM side is an
        element) the LDM subscripts; also the main-memory access and the LDM
        side of the instruction."""
        s = dma_sides(inst)
        reply, blocks = dma_shape(inst, s, self.target.dma_align)
        if not s.get and isinstance(s.macc.base, Global) and s.macc.base.kind == "global":
            return raiser(f"'dma_put' writes to @{s.macc.base.name}, a constant global",
                           inst.loc), s.macc, s.lside
        run = Run(self.cpe_state, self.replies, self._seq, self.stats_for(f), self.bcast_log,
                  self.target.small_transfer)
        fn = transfer_function(inst, s, reply, blocks, run)
        if inst.isa(DMA_BCAST) and self.uses_buses(f):
            move, barrier = fn, self.mesh.barrier

            def fn(*args: Any) -> None:   # the CPEs meet before it (athread_syn)
                barrier(inst)
                move(*args)
        return fn, s.macc, s.lside

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
                notes = [issued_note(t) for t in q[:4]]
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
                                 f"{at_text(spawned[0].loc)} is still running: join it first",
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
                             f"{at_text(site.loc)} is still running: join it first", inst.loc,
                             [("spawned here, not joined", site.loc)])
        return report


# ---------------------------------------------------------------------------
# Emitters
# ---------------------------------------------------------------------------

def _interp(e: Emit) -> DMAInterpreter:
    assert isinstance(e.interp, DMAInterpreter)
    return e.interp


@dma_emitter(LDM_ALLOC)
def _emit_ldm_alloc(e: Emit, inst: Instruction) -> None:
    BUFFERED_EMITTERS[LDM_ALLOC](e, inst)
    r = inst.results[0]
    b = e.name(r)
    e.line(f"{b}_busy = {b}.busy")
    e.data.setdefault("busy", {})[id(r)] = (e.parallel_depth, f"{b}_busy")


def _busy_local(e: Emit, v: Value) -> str:
    info = e.data.get("busy", {}).get(id(v))
    if info is not None and info[0] == e.parallel_depth:
        return info[1]
    return f"{e.name(v)}.busy"


@dma_emitter(STORE)
def _emit_store(e: Emit, inst: Instruction) -> None:
    acc = inst.args[1]
    if not isinstance(acc, Access) or not isinstance(acc.base.type, LDMType):
        EMITTERS[STORE](e, inst)
        return
    d, ok = ldm_locals(e, inst, acc.base)
    off = simple_operand(e, e.offset(inst, acc))
    if id(acc.base) in _interp(e).dma_touched(e.function):
        busy = _busy_local(e, acc.base)
        rep = e.bind(_interp(e).overwrite_reporter(inst, acc), "inflight")
        e.line(f"if {busy}[{off}]: {rep}({e.name(acc.base)}, {off})")
    e.line(f"{d}[{off}] = {e.name(inst.args[0])}")
    e.line(f"{ok}[{off}] = 1")


@dma_emitter(DMA_GET, DMA_PUT, DMA_BCAST)
def _emit_dma(e: Emit, inst: Instruction) -> None:
    fn, macc, lside = _interp(e).transfer(inst, e.function)
    vals = [e.expr(i) for i in macc.indices]
    lbase = lside.base if isinstance(lside, Access) else lside
    if isinstance(lside, Access):
        vals += [e.expr(i) for i in lside.indices]
    e.line(f"{e.bind(fn, inst.opname)}({', '.join([e.name(macc.base), e.name(lbase)] + vals)})")


@dma_emitter(DMA_WAIT)
def _emit_dma_wait(e: Emit, inst: Instruction) -> None:
    e.line(f"{e.bind(_interp(e).waiter(inst, e.function), 'wait')}()")


@dma_emitter(REG_SEND, REG_RECV)
def _emit_reg(e: Emit, inst: Instruction) -> None:
    acc = inst.args[0]
    it = _interp(e)
    make = it.mesh.sender if inst.isa(REG_SEND) else it.mesh.receiver
    fn = e.bind(make(inst, it.stats_for(e.function)), inst.opname)
    off = simple_operand(e, e.offset(inst, acc))
    e.line(f"{fn}({e.name(acc.base)}, {off})")


@dma_emitter(CPE_ID)
def _emit_cpe_id(e: Emit, inst: Instruction) -> None:
    e.line(f"{e.define(inst.results[0])} = _cpe[0]")


@dma_emitter(CHUNK)
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


@dma_emitter(SPAWN)
def _emit_spawn(e: Emit, inst: Instruction) -> None:
    fn = e.bind(_interp(e).spawner(inst), "spawn")
    args = [a for app in inst.args if isinstance(app, Apply) for a in app.args]
    e.line(f"{fn}({', '.join(e.name(a) for a in args)})")


@dma_emitter(JOIN)
def _emit_join(e: Emit, inst: Instruction) -> None:
    e.line(f"{e.bind(_interp(e).joiner(inst), 'join')}()")


@dma_emitter(RETURN)
def _emit_return(e: Emit, inst: Instruction) -> None:
    it = _interp(e)
    if it.spawns_in(e.function):
        rep = e.bind(it.unjoined_reporter(inst, e.function), "unjoined")
        e.line(f"if _sp[0] is not None and _sp[1] >= _st[1]: {rep}(_sp[0])")
    EMITTERS[RETURN](e, inst)


@dma_emitter(CALL)
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
    EMITTERS[CALL](e, inst)


# No spreading at the dma stage: a parallel loop runs on the CPE running it, in
# reverse order (the loop stage's rule); the work split is cpe_id and chunk.
DMA_EMITTERS[PARALLEL] = EMITTERS[PARALLEL]


def __getattr__(name: str) -> Any:
    """SMALL_TRANSFER, ALIGN_BYTES: the default target's figures, for code that
    asks for them by these names; the interpreter itself reads its module's
    target (target_of)."""
    if name in _DEFAULT_FIGURES:
        return getattr(default_target(), _DEFAULT_FIGURES[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
