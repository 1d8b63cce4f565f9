"""Register communication in the dma-stage interpreter: the row and column
buses between the 64 CPEs, and the scheduler that runs a kernel's CPEs side by
side so that a CPE can wait for another's message.

A kernel that sends or receives (``reg_send`` / ``reg_recv``) cannot run its
CPEs one after another as other kernels do: a receive waits for a send that
a later CPE makes. :class:`CPEScheduler` runs each CPE in a thread of its own
of which exactly one runs at any time (so the compiled kernel code, which
shares the interpreter's state, needs no locks): a CPE runs until it ends or
must wait (a receive with nothing in its buffer, a send to a full buffer),
then the next CPE that can go on runs, highest id first. When none can and
some still wait, the CPEs would wait on each other forever on Sunway: a
located error names them and how far each got, never a hang.

Semantics (docs/ir.md, "The dma stage"): one message is one 256-bit vector,
4 elements. Each CPE has a receive buffer per bus holding
``Target.reg_buffer_vectors`` messages; messages arrive in the order they
are sent (a bus carries one at a time), so a sender's arrive in order; a
send to a full buffer (a broadcast: to any full buffer of its 7 receivers)
waits until there is room; a receive waits until a message has arrived.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from swir.diagnostics import Diagnostic
from swir.ir.core import Instruction
from swir.ops.loop import REG_LANES

ROW, COL = 0, 1
BUS_NAMES = ("row", "col")


class _Abort(BaseException):
    """Ends a CPE thread whose kernel run has failed elsewhere."""


class Buses:
    """Each CPE's receive buffers, one per bus: (sender, vector) in arrival order."""

    def __init__(self, cpes: int, grid: tuple[int, int], capacity: int) -> None:
        self.grid, self.capacity = grid, capacity
        self.queues: list[tuple[deque, deque]] = [(deque(), deque()) for _ in range(cpes)]

    def receivers(self, cpe: int, bus: int, to: int | None) -> list[int]:
        """The CPEs a send from ``cpe`` reaches: place ``to`` of its row (bus
        row: ``to`` is the column) or column, or all the others."""
        cols = self.grid[1]
        row, col = divmod(cpe, cols)
        if bus == ROW:
            places = [row * cols + c for c in range(cols)]
        else:
            places = [r * cols + col for r in range(self.grid[0])]
        if to is not None:
            return [places[to]]
        return [p for p in places if p != cpe]

    def has_room(self, dests: list[int], bus: int) -> bool:
        return all(len(self.queues[d][bus]) < self.capacity for d in dests)

    def left_over(self) -> list[tuple[int, int, int]]:
        """(CPE, bus, vectors) of the buffers holding messages no one received."""
        return [(cpe, bus, len(q)) for cpe, qs in enumerate(self.queues)
                for bus, q in enumerate(qs) if q]

    def clear(self) -> None:
        for qs in self.queues:
            qs[0].clear()
            qs[1].clear()


class CPEScheduler:
    """Runs one kernel on every CPE, one CPE at a time, switching at waits.

    ``context()`` / ``restore(ctx)`` save and restore the interpreter's state
    a CPE's run changes (its call depth, the functions it is running), so each
    CPE resumes with its own; ``cpe_state[0]`` is set to the CPE running."""

    def __init__(self, cpes: int, cpe_state: list[int], context: Callable[[], Any],
                 restore: Callable[[Any], None]) -> None:
        self.cpes, self.cpe_state = cpes, cpe_state
        self.context, self.restore = context, restore
        self.go = [threading.Semaphore(0) for _ in range(cpes)]
        self.back = threading.Semaphore(0)
        self.waiting: dict[int, Callable[[], bool]] = {}   # CPE -> can it go on now?
        self.why: dict[int, tuple[str, Instruction]] = {}
        self.ended: set[int] = set()             # threads that have returned or will
        self.failure: BaseException | None = None
        self.failed_cpe = -1
        self.aborting = False

    # -- called on the CPE's own thread ------------------------------------------
    def wait_until(self, ready: Callable[[], bool], why: str, inst: Instruction) -> None:
        """Let the other CPEs run until ``ready()`` holds (why and where: for
        the deadlock report)."""
        cpe = self.cpe_state[0]
        ctx = self.context()
        self.waiting[cpe], self.why[cpe] = ready, (why, inst)
        self.back.release()
        self.go[cpe].acquire()
        if self.aborting:
            raise _Abort
        self.restore(ctx)
        self.cpe_state[0] = cpe

    def _thread(self, cpe: int, body: Callable[[int], None], start: Any) -> None:
        self.go[cpe].acquire()
        try:
            if self.aborting:
                return
            self.restore(start)
            self.cpe_state[0] = cpe
            body(cpe)
        except _Abort:
            pass
        except BaseException as e:           # reported on the interpreter's thread
            self.failure, self.failed_cpe = e, cpe
        finally:
            self.ended.add(cpe)
            self.back.release()

    # -- called on the interpreter's thread ----------------------------------------
    def run(self, body: Callable[[int], None], deadlock: Callable[[dict], Diagnostic]) -> None:
        """Run ``body(cpe)`` on every CPE (63 first), each until it ends or
        waits; raise what a CPE raised, or ``deadlock(why)`` when every CPE
        still running waits and none can go on."""
        start = self.context()
        threads = [threading.Thread(target=self._thread, args=(c, body, start), daemon=True)
                   for c in range(self.cpes)]
        for t in threads:
            t.start()
        fresh = list(range(self.cpes - 1, -1, -1))
        try:
            while True:
                cpe = fresh.pop(0) if fresh else self._next_ready()
                if cpe is None:
                    if self.waiting:
                        raise deadlock(dict(self.why))
                    break
                self.waiting.pop(cpe, None)
                self.why.pop(cpe, None)
                self.go[cpe].release()
                self.back.acquire()
                if self.failure is not None:
                    raise self.failure
        finally:
            self._stop(threads)
            self.restore(start)

    def _next_ready(self) -> int | None:
        for cpe in sorted(self.waiting, reverse=True):
            if self.waiting[cpe]():
                return cpe
        return None

    def _stop(self, threads: list[threading.Thread]) -> None:
        """End every thread still waiting (after a failure or a deadlock)."""
        self.aborting = True
        for cpe in range(self.cpes):
            if cpe not in self.ended:
                self.go[cpe].release()
                self.back.acquire()
        for t in threads:
            t.join(timeout=5)


def _where(buf: Any, off: int) -> str:
    shape = buf.type.shape
    idx, rest = [], off
    for n in reversed(shape):
        rest, i = divmod(rest, n)
        idx.append(i)
    return f"{buf.name}[{', '.join(str(i) for i in reversed(idx))}]"


class Mesh:
    """The buses of one interpreter and the run-time functions of its
    reg_send / reg_recv instructions. ``sched`` is the scheduler of the
    kernel run in progress (None between runs)."""

    def __init__(self, cpes: int, grid: tuple[int, int], capacity: int,
                 cpe_state: list[int]) -> None:
        self.buses = Buses(cpes, grid, capacity)
        self.cpe_state = cpe_state
        self.sched: CPEScheduler | None = None
        self.steps = [[0, 0] for _ in range(cpes)]      # per CPE: sends, receives
        self.arrived: set[int] = set()                   # CPEs at the open barrier
        self.barrier_gen = 0

    def _scheduler(self, inst: Instruction) -> CPEScheduler:
        if self.sched is None:
            raise Diagnostic(f"'{inst.opname}' runs outside a spawned cpe kernel", inst.loc)
        return self.sched

    def sender(self, inst: Instruction, stats: Any) -> Callable[[Any, int], None]:
        bus = BUS_NAMES.index(inst.attrs["bus"])
        to = inst.attrs.get("to")
        buses, state, steps = self.buses, self.cpe_state, self.steps
        lanes = REG_LANES

        def send(buf: Any, off: int) -> None:
            cpe = state[0]
            if not all(buf.ok[off:off + lanes]):
                raise Diagnostic(f"CPE {cpe}: reg_send of LDM {_where(buf, off)} .. {lanes} "
                                 "elements not all valid (neither fetched by a waited-for DMA "
                                 "nor written)", inst.loc)
            dests = buses.receivers(cpe, bus, to)
            if dests == [cpe]:
                raise Diagnostic(f"CPE {cpe}: reg_send {{bus = \"{BUS_NAMES[bus]}\", to = {to}}} "
                                 "sends to itself", inst.loc)
            if not buses.has_room(dests, bus):
                self._scheduler(inst).wait_until(
                    lambda: buses.has_room(dests, bus),
                    f"reg_send on the {BUS_NAMES[bus]} bus (a receive buffer full)", inst)
            data = buf.data[off:off + lanes].copy()
            for d in dests:
                buses.queues[d][bus].append((cpe, data, inst))
            steps[cpe][0] += 1
            stats.reg_sends += 1
        return send

    def receiver(self, inst: Instruction, stats: Any) -> Callable[[Any, int], None]:
        bus = BUS_NAMES.index(inst.attrs["bus"])
        buses, state, steps = self.buses, self.cpe_state, self.steps
        lanes = REG_LANES

        def recv(buf: Any, off: int) -> None:
            cpe = state[0]
            busy = getattr(buf, "busy", None)
            if busy is not None and any(busy[off:off + lanes]):
                t = buf.in_flight(next(i for i in range(off, off + lanes) if busy[i]))
                raise Diagnostic(f"CPE {cpe}: reg_recv into LDM {_where(buf, off)} while a "
                                 f"{t.op} on it has not been waited for", inst.loc,
                                 [(f"the {t.op}", t.inst.loc)])
            q = buses.queues[cpe][bus]
            if not q:
                self._scheduler(inst).wait_until(
                    lambda: bool(q), f"reg_recv on the {BUS_NAMES[bus]} bus", inst)
            sender, data, sent = q.popleft()
            if data.dtype != buf.data.dtype:
                raise Diagnostic(f"CPE {cpe}: reg_recv into {buf.name} ({buf.data.dtype.name}) of "
                                 f"a vector of {data.dtype.name} from CPE {sender}: a register "
                                 "holds bits, not values (the receive would reinterpret them)",
                                 inst.loc, [("sent here", sent.loc)])
            buf.data[off:off + lanes] = data
            buf.ok[off:off + lanes] = b"\x01" * lanes
            steps[cpe][1] += 1
            stats.reg_recvs += 1
            stats.reg_bytes += lanes * buf.data.itemsize
        return recv

    def barrier(self, inst: Instruction) -> None:
        """A dma_bcast in a kernel run side by side: every CPE meets at the
        barriers around it (athread_syn) before any goes on, so a CPE waits
        there until every CPE still running has reached it."""
        sched = self.sched
        if sched is None:
            return
        gen = self.barrier_gen
        self.arrived.add(sched.cpe_state[0])
        if len(self.arrived | sched.ended) < sched.cpes:
            sched.wait_until(lambda: self.barrier_gen != gen or
                             len(self.arrived | sched.ended) == sched.cpes,
                             "the barrier of a dma_bcast", inst)
        if self.barrier_gen == gen:      # the last to arrive opens it for all
            self.barrier_gen += 1
            self.arrived.clear()

    # -- a kernel run ------------------------------------------------------------
    def run(self, sched: CPEScheduler, body: Callable[[int], None], kernel: str,
            loc: Any) -> None:
        """Run ``body`` on every CPE with ``sched``; then no message may be
        left in a buffer."""
        self.buses.clear()
        for s in self.steps:
            s[0] = s[1] = 0
        self.arrived.clear()
        self.sched = sched
        try:
            sched.run(body, lambda why: self._deadlock(why, kernel))
        finally:
            self.sched = None
        left = self.buses.left_over()
        if left:
            cpe, bus, n = left[0]
            sender, _, inst = self.buses.queues[cpe][bus][0]
            more = f" (and {len(left) - 1} more buffer(s))" if len(left) > 1 else ""
            self.buses.clear()
            raise Diagnostic(f"CPE {cpe} ends @{kernel} with {n} vector(s) from CPE {sender} "
                             f"not received on its {BUS_NAMES[bus]} bus{more}: every "
                             "reg_send needs a reg_recv", inst.loc)

    def _deadlock(self, why: dict[int, tuple[str, Instruction]], kernel: str) -> Diagnostic:
        groups: dict[tuple, list[int]] = {}
        for c in sorted(why):
            text, inst = why[c]
            groups.setdefault((text, id(inst), *self.steps[c]), []).append(c)
        parts = []
        for (text, _, sends, recvs), cpes in groups.items():
            at = why[cpes[0]][1].loc
            where = f" ({at.line}:{at.col})" if at is not None else ""
            parts.append(f"{cpe_list(cpes)} wait{'s' if len(cpes) == 1 else ''} in {text}"
                         f"{where} after {sends} send(s) and {recvs} receive(s)")
        ended = self.sched.cpes - len(why) if self.sched else 0
        self.buses.clear()
        return Diagnostic(f"deadlock in @{kernel}: {'; '.join(parts)}; {ended} CPE(s) ended: "
                          "none can go on (on Sunway they would wait forever)",
                          why[min(why)][1].loc)


def cpe_list(cpes: list[int]) -> str:
    """'CPE 3', 'CPEs 0-7, 9': ascending ids, runs as ranges."""
    runs: list[list[int]] = []
    for c in cpes:
        if runs and runs[-1][1] == c - 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)
    return f"CPE {text}" if len(cpes) == 1 else f"CPEs {text}"
