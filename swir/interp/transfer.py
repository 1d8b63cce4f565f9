"""The DMA transfers of the dma-stage interpreter (swir/interp/dma.py): the
objects a transfer leaves while in flight (:class:`Transfer`,
:class:`DMABuffer`) and the run-time function of one ``dma_get``,
``dma_put`` or ``dma_bcast``, built from parts by what they do: the form of
the instruction (:func:`dma_sides`), its blocks (:class:`Blocks`), where it
starts in main memory and in LDM (:func:`_locator`), how each kind moves
its data and completes (:func:`_getter`, :func:`_putter`,
:func:`_broadcaster`), and what it adds to the counters (:func:`_counter`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from swir.diagnostics import Diagnostic, Location
from swir.interp.buffered import LDMBuffer, element_text, report_foreign_ldm
from swir.interp.pycode import expr_text, value_text
from swir.ir.core import Access, Instruction, Range
from swir.ir.types import LDMType, ShapedType
from swir.ops import DMA_BCAST, DMA_PUT
from swir.ops.util import attr_or_default


def size_bucket(nbytes: int) -> int:
    """The histogram bucket of a size: the power of two 2**k with
    2**k <= nbytes < 2**(k+1) (0 for 0)."""
    return 1 << (nbytes.bit_length() - 1) if nbytes > 0 else 0


def int_attr(inst: Instruction, name: str, default: int | None, least: int) -> int:
    v = inst.attrs.get(name, default)
    if not isinstance(v, int) or isinstance(v, bool) or v < least:
        raise Diagnostic(f"'{inst.opname}' needs an integer {name} >= {least}, got {v!r}",
                         inst.loc)
    return v


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


# ---------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------

def at_text(loc: Location | None) -> str:
    return f"{loc.line}:{loc.col}" if loc is not None else "?"


def _side_text(s: Any) -> str:
    if isinstance(s, Access):
        return f"{value_text(s.base)}[{', '.join(expr_text(i) for i in s.indices)}]"
    return value_text(s)


def _dma_text(inst: Instruction) -> str:
    return f"{inst.opname} {_side_text(inst.args[0])} -> {_side_text(inst.args[1])}"


def issued_note(t: Transfer) -> tuple[str, Location | None]:
    note = (f"the {t.op}, issued here on reply word {t.reply}; a dma_wait {{reply = "
            f"{t.reply}}} completes it")
    return note, t.inst.loc


def in_flight_text(t: Transfer) -> str:
    return (f"the {t.op} ({at_text(t.inst.loc)}) {'writing' if t.get else 'reading'} it has "
            "not been waited for")


def _strides(shape: tuple[int, ...]) -> list[int]:
    out = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        out[k] = out[k + 1] * shape[k + 1]
    return out


# ---------------------------------------------------------------------------
# The form of a transfer and its blocks
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Sides:
    """A dma_get / dma_put / dma_bcast checked: its main-memory access, its
    LDM side (a buffer or one element of it) and their types."""

    op: str
    get: bool               # into LDM (dma_get, dma_bcast)
    bcast: bool
    macc: Access
    lside: Any
    lbase: Any
    mt: ShapedType
    lt: LDMType


def dma_sides(inst: Instruction) -> Sides:
    """The sides of a DMA instruction; a Diagnostic if it is not well formed."""
    op = inst.opname
    get, bcast = not inst.isa(DMA_PUT), inst.isa(DMA_BCAST)
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
    return Sides(op, get, bcast, macc, lside, lbase, mt, lt)


@dataclass(frozen=True)
class Blocks:
    """How a transfer of ``count`` elements of ``esize`` bytes lies in main
    memory: one block, or (0 < bsize < count) ``full`` blocks of ``bsize``
    and one of ``rem``, ``pitch`` elements apart."""

    count: int
    bsize: int
    esize: int
    strided: bool
    full: int
    rem: int
    pitch: int
    nblocks: int
    extent: int                           # main-memory elements from first to last
    block_sizes: list[tuple[int, int]]    # (size_bucket of a block's bytes, blocks)
    blocks_32: int                        # blocks whose bytes are a multiple of align
    shape_text: str

    @property
    def nbytes(self) -> int:
        return self.count * self.esize


def dma_blocks(count: int, bsize: int, stride: int, esize: int, align: int) -> Blocks:
    if 0 < bsize < count:
        full, rem = divmod(count, bsize)
        pitch = bsize + stride
        nblocks = full + (rem > 0)
        extent = (nblocks - 1) * pitch + (rem or bsize)
        block_sizes = [(size_bucket(bsize * esize), full)] + \
            ([(size_bucket(rem * esize), 1)] if rem else [])
        blocks_32 = full * (bsize * esize % align == 0) + \
            (1 if rem and rem * esize % align == 0 else 0)
        shape_text = f" in {nblocks} blocks of {bsize} with {stride} skipped between them"
        return Blocks(count, bsize, esize, True, full, rem, pitch, nblocks, extent,
                      block_sizes, blocks_32, shape_text)
    return Blocks(count, bsize, esize, False, 0, 0, 0, 1, count,
                  [(size_bucket(count * esize), 1)], int(count * esize % align == 0), "")


# ---------------------------------------------------------------------------
# The run-time function
# ---------------------------------------------------------------------------

@dataclass
class Run:
    """What the run-time function of a transfer shares with the interpreter:
    the running CPE (``cpe_state[0]``), each CPE's transfers on each reply
    word, the issue order, the issuing function's counters, each CPE's
    broadcasts, and the bytes under which a transfer counts as small."""

    cpe_state: list[int]
    replies: list[dict[int, list[Transfer]]]
    seq: itertools.count
    stats: Any
    bcast_log: list[list[tuple]]
    small: int


def dma_shape(inst: Instruction, s: Sides, align: int) -> tuple[int, Blocks]:
    """A DMA's reply word and blocks, from its attributes (checked)."""
    count = int_attr(inst, "count", None, 1)
    reply = int_attr(inst, "reply", None, 0)
    bsize = int_attr(inst, "bsize", attr_or_default(inst, "bsize"), 0)
    stride = int_attr(inst, "stride", attr_or_default(inst, "stride"), 0)
    if stride and not bsize:
        raise Diagnostic(f"'{s.op}' has a stride but no block size (bsize)", inst.loc)
    return reply, dma_blocks(count, bsize, stride, s.lt.bytes // s.lt.num_elements, align)


def transfer_function(inst: Instruction, s: Sides, reply: int, b: Blocks,
                      ctx: Run) -> Callable[..., None]:
    """The run-time function of one DMA, called with the main-memory array,
    the LDM buffer, the main-memory subscripts and (when the LDM side is an
    element) the LDM subscripts."""
    state = ctx.cpe_state
    text = _dma_text(inst)

    def fail(message: str, notes: list | None = None) -> None:
        raise Diagnostic(f"CPE {state[0]}: {message} ({text})", inst.loc, notes or [])

    locate = _locator(s, b, fail)
    kind = _broadcaster if s.bcast else _getter if s.get else _putter
    move = kind(inst, b, reply, ctx, fail)
    count_it = _counter(b, ctx)

    def run(mem: np.ndarray, buf: DMABuffer, *subs: int) -> None:
        cpe = state[0]
        if buf.owner != cpe:
            report_foreign_ldm(buf, cpe, inst)
        start, lo = locate(buf, subs)
        if move(cpe, mem, buf, start, lo):
            count_it()
    return run


def _locator(s: Sides, b: Blocks, fail: Callable[..., None]
             ) -> Callable[[DMABuffer, tuple], tuple[int, int]]:
    """The first main-memory and LDM elements of a transfer from its
    subscripts, checked: both spans inside their buffers."""
    op, get, mt, lt, count = s.op, s.get, s.mt, s.lt, b.count
    mdims, mstr = tuple(mt.shape), _strides(tuple(mt.shape))
    ldims, lstr = tuple(lt.shape), _strides(tuple(lt.shape))
    mrank = len(mdims)
    lsubs = isinstance(s.lside, Access)
    n_main, n_ldm, extent = mt.num_elements, lt.num_elements, b.extent
    what, lwhat = value_text(s.macc.base), value_text(s.lbase)
    mem_indices, ldm_indices = s.macc.indices, s.lside.indices if lsubs else ()

    def bad_subscript(side: str, base: str, t: Any, indices: Any, k: int, v: int,
                      dim: int) -> None:
        fail(f"{op} {side} element {base}[...] is outside {base} : {t}: subscript #{k} "
             f"({expr_text(indices[k])}) is {v}, outside [0, {dim})")

    def locate(buf: DMABuffer, subs: tuple) -> tuple[int, int]:
        start = 0
        for k in range(mrank):
            v = subs[k]
            if not 0 <= v < mdims[k]:
                bad_subscript("start", what, mt, mem_indices, k, v, mdims[k])
            start += v * mstr[k]
        end = start + extent
        if end > n_main:
            fail(f"{op} {'reads' if get else 'writes'} outside {what} : {mt}: {count} "
                 f"elements from {what}[{', '.join(str(v) for v in subs[:mrank])}] "
                 f"(element {start}){b.shape_text} reach element {end - 1}, past its "
                 f"last element, {n_main - 1}")
        lo = 0
        if lsubs:
            for k in range(len(ldims)):
                v = subs[mrank + k]
                if not 0 <= v < ldims[k]:
                    bad_subscript("LDM", lwhat, lt, ldm_indices, k, v, ldims[k])
                lo += v * lstr[k]
        if lo + count > n_ldm:
            fail(f"{op} of {count} elements {'into' if get else 'from'} LDM "
                 f"{element_text(buf, lo)} runs past the end of {lwhat} : {lt} "
                 f"({n_ldm} elements)")
        return start, lo
    return locate


def _copy_in(b: Blocks) -> Callable[[np.ndarray, np.ndarray, int, int], None]:
    """Main memory from ``start`` into LDM from ``lo``, block by block."""
    count, full, bsize, rem, pitch = b.count, b.full, b.bsize, b.rem, b.pitch
    if not b.strided:
        def copy(mem: np.ndarray, data: np.ndarray, start: int, lo: int) -> None:
            data[lo:lo + count] = mem[start:start + count]
        return copy

    def copy_blocks(mem: np.ndarray, data: np.ndarray, start: int, lo: int) -> None:
        data[lo:lo + full * bsize].reshape(full, bsize)[...] = as_strided(
            mem[start:], shape=(full, bsize),
            strides=(pitch * mem.itemsize, mem.itemsize), writeable=False)
        if rem:
            m0 = start + full * pitch
            data[lo + full * bsize:lo + count] = mem[m0:m0 + rem]
    return copy_blocks


def _copy_out(b: Blocks) -> Callable[[np.ndarray, np.ndarray, int, int], None]:
    """LDM from ``lo`` into main memory from ``start``, block by block."""
    count, full, bsize, rem, pitch = b.count, b.full, b.bsize, b.rem, b.pitch
    if not b.strided:
        def copy(mem: np.ndarray, data: np.ndarray, start: int, lo: int) -> None:
            mem[start:start + count] = data[lo:lo + count]
        return copy

    def copy_blocks(mem: np.ndarray, data: np.ndarray, start: int, lo: int) -> None:
        as_strided(mem[start:], shape=(full, bsize),
                   strides=(pitch * mem.itemsize, mem.itemsize))[...] = \
            data[lo:lo + full * bsize].reshape(full, bsize)
        if rem:
            m0 = start + full * pitch
            mem[m0:m0 + rem] = data[lo + full * bsize:lo + count]
    return copy_blocks


def _in_flight_check(fail: Callable[..., None]) -> Callable[[DMABuffer, int, int], None]:
    """A get never writes LDM another transfer still has in flight."""
    def check(buf: DMABuffer, lo: int, hi: int) -> None:
        if buf.pending:
            i = buf.busy.find(1, lo, hi)
            if i >= 0:
                t = buf.in_flight(i)
                assert t is not None
                fail(f"dma_get into LDM {element_text(buf, i)} while "
                     f"{in_flight_text(t)}", [issued_note(t)])
    return check


def _pender(inst: Instruction, get: bool, reply: int, ctx: Run
            ) -> Callable[[int, DMABuffer, int, int], None]:
    """A get or put issued: its LDM elements in flight until a dma_wait on
    its reply word."""
    replies, seq = ctx.replies, ctx.seq

    def pend(cpe: int, buf: DMABuffer, lo: int, hi: int) -> None:
        buf.busyf[lo:hi] = 1
        t = Transfer(inst, get, buf, lo, hi, reply, next(seq))
        buf.pending.append(t)
        q = replies[cpe].get(reply)
        if q is None:
            q = replies[cpe][reply] = []
        q.append(t)
    return pend


Mover = Callable[[int, np.ndarray, DMABuffer, int, int], bool]


def _getter(inst: Instruction, b: Blocks, reply: int, ctx: Run,
            fail: Callable[..., None]) -> Mover:
    """dma_get: into LDM, in flight until waited for."""
    count, nbytes, stats = b.count, b.nbytes, ctx.stats
    check, copy, pend = _in_flight_check(fail), _copy_in(b), _pender(inst, True, reply, ctx)

    def get(cpe: int, mem: np.ndarray, buf: DMABuffer, start: int, lo: int) -> bool:
        hi = lo + count
        check(buf, lo, hi)
        copy(mem, buf.data, start, lo)
        buf.okf[lo:hi] = 0
        stats.gets += 1
        stats.elements_in += count
        stats.bytes_in += nbytes
        pend(cpe, buf, lo, hi)
        return True
    return get


def _broadcaster(inst: Instruction, b: Blocks, reply: int, ctx: Run,
                 fail: Callable[..., None]) -> Mover:
    """dma_bcast: into every CPE's LDM, complete on return; main memory is
    read once, by CPE 0's transfer (every CPE checks that it reaches the
    same one), and counted once."""
    count, nbytes, stats, replies = b.count, b.nbytes, ctx.stats, ctx.replies
    bcast_log = ctx.bcast_log
    check, copy = _in_flight_check(fail), _copy_in(b)

    def bcast(cpe: int, mem: np.ndarray, buf: DMABuffer, start: int, lo: int) -> bool:
        hi = lo + count
        if replies[cpe].get(reply):
            fail(f"dma_bcast on reply word {reply} while {len(replies[cpe][reply])} DMA(s) "
                 f"on it are outstanding: CPE 0 waits for its broadcast alone there",
                 [issued_note(replies[cpe][reply][0])])
        check(buf, lo, hi)
        copy(mem, buf.data, start, lo)
        buf.okf[lo:hi] = 1
        stats.bcast_bytes += nbytes
        bcast_log[cpe].append((inst, start, buf.name, lo))
        if cpe != 0:
            return False
        stats.bcasts += 1
        stats.gets += 1
        stats.elements_in += count
        stats.bytes_in += nbytes
        return True
    return bcast


def _putter(inst: Instruction, b: Blocks, reply: int, ctx: Run,
            fail: Callable[..., None]) -> Mover:
    """dma_put: from LDM written or fetched and waited for; its LDM
    elements in flight until waited for."""
    count, nbytes, stats = b.count, b.nbytes, ctx.stats
    copy, pend = _copy_out(b), _pender(inst, False, reply, ctx)

    def put(cpe: int, mem: np.ndarray, buf: DMABuffer, start: int, lo: int) -> bool:
        hi = lo + count
        i = buf.ok.find(0, lo, hi)
        if i >= 0:
            t = buf.in_flight(i, get=True)
            if t is not None:
                fail(f"dma_put of LDM {element_text(buf, i)} whose dma_get "
                     f"({at_text(t.inst.loc)}) has not been waited for", [issued_note(t)])
            fail(f"dma_put of LDM {element_text(buf, i)} that was neither fetched "
                 "by dma_get nor written")
        copy(mem, buf.data, start, lo)
        stats.puts += 1
        stats.elements_out += count
        stats.bytes_out += nbytes
        pend(cpe, buf, lo, hi)
        return True
    return put


def _counter(b: Blocks, ctx: Run) -> Callable[[], None]:
    """One transfer (a broadcast once) in the size and block histograms."""
    stats, bucket, small = ctx.stats, size_bucket(b.nbytes), b.nbytes < ctx.small
    nblocks, blocks_32, block_sizes = b.nblocks, b.blocks_32, b.block_sizes

    def count_it() -> None:
        h = stats.size_histogram
        h[bucket] = h.get(bucket, 0) + 1
        if small:
            stats.small_transfers += 1
        stats.blocks += nblocks
        stats.blocks_32 += blocks_32
        h = stats.block_histogram
        for size, n in block_sizes:
            h[size] = h.get(size, 0) + n
    return count_it
