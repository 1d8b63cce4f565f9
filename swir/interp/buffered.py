"""The buffered-stage interpreter: runs functions and kernels of a buffered-stage
module, simulating the 64 CPEs of a core group and their private LDM.

It is the loop-stage interpreter (:mod:`swir.interp.loop`: functions compiled
once into Python) with the buffered stage's emitters overlaid on the loop
stage's (:data:`BUFFERED_EMITTERS`):

* ``parallel`` spreads its iterations over ``workers`` simulated CPEs (default
  64) as ``chunk`` does; the CPEs run one after another, highest id first, each
  its share in reverse order (so the iterations run in the loop stage's order,
  and only the CPE running each is new). Only the outermost ``parallel`` spreads:
  one nested in it (also through calls) runs on the CPE running the outer
  iteration. Code outside any spreading ``parallel`` runs on CPE 0.
* ``ldm_alloc`` makes a fresh LDM buffer, owned by the CPE running it, live until
  the end of its region. The bytes live at once on each CPE are counted; more
  than ``ldm_size`` is an error naming the CPE, the allocation and the total.
* Every LDM element starts invalid; ``copy_in`` and ``store`` validate the
  elements they write; ``load`` of an invalid element and ``copy_out`` of one
  are errors. An LDM buffer is private to its CPE: another CPE using it is an
  error.
* Per function: calls, the most LDM bytes live at once on any CPE (also per
  CPE), copies and elements moved each way, and the iterations each CPE ran
  (:class:`KernelStats`, ``BufferedInterpreter.kernel_stats``).

The dma stage's interpreter (:mod:`swir.interp.dma`) extends this one through
``buffer_class`` (what ``ldm_alloc`` makes), ``stats_class`` (what
``kernel_stats`` holds) and ``copy_hook`` (called before a copy moves data).

The rules are in docs/ir.md, "Executing IR", "The buffered stage".
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from swir.diagnostics import Diagnostic
from swir.interp.graph import MAX_STEPS
from swir.interp.loop import (
    EMITTERS,
    LoopInterpreter,
    OpEmitter,
    emit_loop,
    fresh_array,
)
from swir.interp.pycode import Emit, expr_text, value_text
from swir.ir.core import Access, Function, Global, Instruction, Module, Range, Value
from swir.ir.types import INDEX, LDMType, ShapedType
from swir.ops import COPY_IN, COPY_OUT, LDM_ALLOC, LOAD, PARALLEL, STORE
from swir.ops.registry import OpDef
from swir.target import default_target, target_of

# The module name CPES (see __getattr__) and the Target field it reads: the
# simulated CPEs of one core group.
_DEFAULT_FIGURES = {"CPES": "cpes"}

BUFFERED_EMITTERS: dict[OpDef, OpEmitter] = {}


def buffered_emitter(*ops: OpDef) -> Callable[[OpEmitter], OpEmitter]:
    """Register the buffered-stage emitter of one or more ops (overlaid on the
    loop stage's :data:`swir.interp.loop.EMITTERS`)."""
    def register(fn: OpEmitter) -> OpEmitter:
        for op in ops:
            if op in BUFFERED_EMITTERS:
                raise ValueError(f"buffered emitter for '{op.name}' registered twice")
            BUFFERED_EMITTERS[op] = fn
        return fn
    return register


def cpe_share(cpe: int, extent: int, workers: int) -> tuple[int, int]:
    """Worker ``cpe``'s share [lo, hi) of ``extent`` iterations spread over
    ``workers``, as ``chunk`` computes it (sizes differ by at most one)."""
    q, m = divmod(extent, workers)
    lo = cpe * q + min(cpe, m)
    return lo, lo + q + (cpe < m)


# ---------------------------------------------------------------------------
# Run-time objects
# ---------------------------------------------------------------------------

class LDMBuffer:
    """One execution of an ``ldm_alloc``: the buffer's elements (flat, poisoned),
    which of them are valid (copied in or stored), and the CPE owning it."""

    __slots__ = ("array", "data", "loc", "name", "nbytes", "ok", "owner", "type", "valid")

    def __init__(self, t: LDMType, owner: int, name: str, loc: Any) -> None:
        self.data = fresh_array(t)
        self.array = self.data.reshape(t.shape)
        self.ok = bytearray(t.num_elements)          # 1 = valid; fast item access
        self.valid = np.frombuffer(self.ok, np.uint8).reshape(t.shape)  # same memory
        self.owner = owner
        self.nbytes = t.bytes
        self.name = name
        self.type = t
        self.loc = loc


@dataclass
class KernelStats:
    """What the calls of one function did in the last top-level run."""

    name: str
    calls: int = 0
    # The most LDM bytes live at once on one CPE while the function ran (its own
    # buffers, its callers' and its callees'), overall and per CPE.
    ldm_peak: int = 0
    ldm_peak_cpe: list[int] = field(default_factory=list)     # sized by the interpreter
    copies_in: int = 0
    elements_in: int = 0
    bytes_in: int = 0
    copies_out: int = 0
    elements_out: int = 0
    bytes_out: int = 0
    # Iterations of the function's spreading parallel loops each CPE ran.
    cpe_iterations: list[int] = field(default_factory=list)

    def reset(self) -> None:
        self.calls = self.ldm_peak = 0
        self.copies_in = self.elements_in = self.bytes_in = 0
        self.copies_out = self.elements_out = self.bytes_out = 0
        self.ldm_peak_cpe[:] = [0] * len(self.ldm_peak_cpe)
        self.cpe_iterations[:] = [0] * len(self.cpe_iterations)

    def as_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "ldm_peak": self.ldm_peak,
                "copies_in": self.copies_in, "elements_in": self.elements_in,
                "bytes_in": self.bytes_in, "copies_out": self.copies_out,
                "elements_out": self.elements_out, "bytes_out": self.bytes_out}


# ---------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------

def _index_text(ix: Any) -> str:
    if isinstance(ix, Range):
        return f"{expr_text(ix.lo)} : {expr_text(ix.hi)}"
    return expr_text(ix)


def region_text(acc: Access) -> str:
    return f"{value_text(acc.base)}[{', '.join(_index_text(i) for i in acc.indices)}]"


def _copy_form(inst: Instruction) -> tuple[bool, Access, ShapedType, LDMType, list[bool]]:
    """A copy_in / copy_out checked: inbound or not, its main-memory access,
    the types of both sides, and which subscripts of the access are ranges;
    a Diagnostic if it is not well formed."""
    inbound = inst.isa(COPY_IN)
    acc, lv = (inst.args[0], inst.args[1]) if inbound else (inst.args[1], inst.args[0])
    if not isinstance(acc, Access) or not isinstance(lv, Value) \
            or not isinstance(lv.type, LDMType):
        raise Diagnostic(f"'{inst.opname}' is written {inst.opname} "
                         f"{'%A[...] -> %L' if inbound else '%L -> %A[...]'} with %L an "
                         "LDM buffer", inst.loc)
    mt, lt = acc.base.type, lv.type
    if not isinstance(mt, ShapedType) or len(acc.indices) != mt.rank:
        raise Diagnostic(f"'{inst.opname}' needs one subscript or range per dimension of "
                         f"{value_text(acc.base)}", inst.loc)
    ranged = [isinstance(i, Range) for i in acc.indices]
    if sum(ranged) != lt.rank:
        raise Diagnostic(f"'{inst.opname}' region has {sum(ranged)} ranged dimensions but "
                         f"the LDM buffer {value_text(lv)} : {lt} has rank {lt.rank}",
                         inst.loc)
    return inbound, acc, mt, lt, ranged


def _copy_text(inst: Instruction) -> str:
    a, b = inst.args
    side = (lambda s: region_text(s) if isinstance(s, Access) else value_text(s))
    return f"{inst.opname} {side(a)} -> {side(b)}"


def element_text(buf: LDMBuffer, flat: int) -> str:
    idx = np.unravel_index(flat, buf.type.shape)
    return f"{buf.name}[{', '.join(str(int(i)) for i in idx)}]"


# ---------------------------------------------------------------------------
# The interpreter
# ---------------------------------------------------------------------------

class BufferedInterpreter(LoopInterpreter):
    """Runs functions of a buffered-stage module (see the module docstring).

    ``ldm_size`` overrides the module's capacity (stage attribute ``ldm_size``,
    default: the target's LDM); with ``trace``, ``cpe_trace`` lists every iteration of
    a spreading parallel loop as ``(function, induction variable, cpe,
    value)`` in execution order. After a run, :attr:`kernel_stats` (by function
    name), :attr:`ldm_peak` and :attr:`copy_counts` describe it."""

    stages = frozenset({"buffered"})
    emitters: ClassVar[Mapping[OpDef, OpEmitter]] = ChainMap(BUFFERED_EMITTERS, EMITTERS)
    description = "buffered-stage interpreter"
    # What ldm_alloc makes, and what kernel_stats holds (a later stage extends them).
    buffer_class: ClassVar[type[LDMBuffer]] = LDMBuffer
    stats_class: ClassVar[type[KernelStats]] = KernelStats

    def __init__(self, module: Module, base_dir: str | Path = ".",
                 max_steps: int = MAX_STEPS, ldm_size: int | None = None,
                 trace: bool = False) -> None:
        super().__init__(module, base_dir, max_steps)
        from swir.verifier import module_attr_ldm
        self.ldm_size = module_attr_ldm(module) if ldm_size is None else ldm_size
        self.target = target_of(module.attrs)          # its CPEs and DMA rules
        # [CPE running now, 1 while a parallel loop is spread over the CPEs]
        self.cpe_state = [0, 0]
        self.live = [0] * self.target.cpes             # LDM bytes live per CPE
        self.live_buffers: list[dict[int, LDMBuffer]] = [{} for _ in range(self.target.cpes)]
        self.active: list[KernelStats] = []            # functions running, outermost first
        self.kernel_stats: dict[str, KernelStats] = {}
        self.cpe_trace: list[tuple[str, str, int, int]] | None = [] if trace else None
        self.ns.update(_cpe=self.cpe_state, _ldm_free=self._free)

    # -- results of the last run ----------------------------------------------------
    @property
    def ldm_peak(self) -> dict[str, int]:
        """Per function called in the last run: the most LDM bytes live at once
        on any one CPE while it ran."""
        return {n: s.ldm_peak for n, s in self.kernel_stats.items() if s.calls}

    @property
    def copy_counts(self) -> dict[str, int]:
        """Copies and elements (and bytes) moved each way in the last run, summed
        over all functions."""
        keys = ("copies_in", "elements_in", "bytes_in", "copies_out", "elements_out",
                "bytes_out")
        return {k: sum(getattr(s, k) for s in self.kernel_stats.values()) for k in keys}

    # -- running --------------------------------------------------------------------
    def call(self, f: Function, args: list[np.ndarray],
             arg_names: list[str] | None = None) -> list[np.ndarray]:
        self.cpe_state[:] = [0, 0]
        self.live[:] = [0] * self.target.cpes
        for d in self.live_buffers:
            d.clear()
        self.active.clear()
        for s in self.kernel_stats.values():
            s.reset()
        if self.cpe_trace is not None:
            self.cpe_trace.clear()
        return super().call(f, args, arg_names)

    def stats_for(self, f: Function) -> KernelStats:
        s = self.kernel_stats.get(f.name)
        if s is None:
            cpes = self.target.cpes
            s = self.kernel_stats[f.name] = self.stats_class(
                f.name, ldm_peak_cpe=[0] * cpes, cpe_iterations=[0] * cpes)
        return s

    def _compile(self, f: Function) -> Callable[..., tuple]:
        fn = super()._compile(f)
        stats, active, live, state = self.stats_for(f), self.active, self.live, self.cpe_state

        def run(*args: Any) -> tuple:
            stats.calls += 1
            cpe = state[0]
            if live[cpe] > stats.ldm_peak_cpe[cpe]:   # the caller's buffers count too
                stats.ldm_peak_cpe[cpe] = live[cpe]
                stats.ldm_peak = max(stats.ldm_peak, live[cpe])
            active.append(stats)
            try:
                return fn(*args)
            finally:
                active.pop()
        return run

    # Called by every copy_in / copy_out before it moves data, with the LDM
    # buffer, the part of it copied (a tuple of slices), whether it is a
    # copy_in, and a function raising a located diagnostic; None: no hook.
    copy_hook: Callable[[LDMBuffer, tuple, bool, Callable[[str], None]], None] | None = None

    def stats(self) -> dict[str, Any]:
        """The counters of every function called in the last run (by name), as
        JSON-ready data: :meth:`KernelStats.as_dict` plus the per-CPE figures."""
        out = super().stats()
        out["functions"] = {n: dict(s.as_dict(), ldm_peak_cpe=list(s.ldm_peak_cpe),
                                    cpe_iterations=list(s.cpe_iterations))
                            for n, s in self.kernel_stats.items() if s.calls}
        return out

    def _free(self, buf: LDMBuffer) -> None:
        self.live[buf.owner] -= buf.nbytes
        self.live_buffers[buf.owner].pop(id(buf), None)

    # -- run-time helpers bound into the generated code ------------------------------
    def read_reporter(self, inst: Instruction, acc: Access) -> Callable[[LDMBuffer, int], None]:
        """What a load of an invalid LDM element reports (the dma stage says more)."""
        state = self.cpe_state

        def report(buf: LDMBuffer, flat: int) -> None:
            raise Diagnostic(f"CPE {state[0]}: read of LDM {element_text(buf, flat)} that "
                             f"was neither copied in nor written (load {region_text(acc)})",
                             inst.loc)
        return report

    def allocator(self, inst: Instruction) -> Callable[[], LDMBuffer]:
        t = inst.results[0].type
        assert isinstance(t, LDMType)
        name, loc, nbytes = value_text(inst.results[0]), inst.loc, t.bytes
        state, live, live_buffers, active = self.cpe_state, self.live, self.live_buffers, \
            self.active
        cap, make = self.ldm_size, self.buffer_class

        def alloc() -> LDMBuffer:
            cpe = state[0]
            total = live[cpe] + nbytes
            if total > cap:
                live_here = live_buffers[cpe].values()
                notes = [(_live_note(b, cpe), b.loc) for b in live_here]
                raise Diagnostic(
                    f"CPE {cpe}: ldm_alloc of {name} : {t} ({nbytes} bytes) makes {total} "
                    f"bytes of LDM live at once, more than the {cap} bytes of LDM "
                    f"(ldm_size)", loc, notes[-8:])
            live[cpe] = total
            buf = make(t, cpe, name, loc)
            live_buffers[cpe][id(buf)] = buf
            for s in active:
                if total > s.ldm_peak_cpe[cpe]:
                    s.ldm_peak_cpe[cpe] = total
                    s.ldm_peak = max(s.ldm_peak, total)
            return buf
        return alloc

    def distributor(self, inst: Instruction, f: Function, workers: int
                    ) -> Callable[[range], Iterable[int]]:
        """The iterations of a parallel loop: spread over ``workers`` CPEs, run
        highest id first, each share in reverse order; in reverse order on the
        current CPE when a parallel loop around it is already spread."""
        state, counts, trace = self.cpe_state, self.stats_for(f).cpe_iterations, self.cpe_trace
        var = value_text(inst.regions[0].blocks[0].args[0])

        def spread(r: range) -> Iterator[int]:
            q, m = divmod(len(r), workers)
            state[1] = 1
            for cpe in range(min(len(r), workers) - 1, -1, -1):
                lo = cpe * q + min(cpe, m)
                hi = lo + q + (cpe < m)
                state[0] = cpe
                counts[cpe] += hi - lo
                if trace is None:
                    yield from r[lo:hi][::-1]
                else:
                    for i in r[lo:hi][::-1]:
                        trace.append((f.name, var, cpe, i))
                        yield i
            # The barrier: every CPE is done; the code after the loop runs on CPE 0.
            state[0] = state[1] = 0

        def iterations(r: range) -> Iterable[int]:
            return r[::-1] if state[1] else spread(r)
        return iterations

    def copier(self, inst: Instruction, f: Function) -> Callable[..., None]:
        """copy_in / copy_out of one instruction: called with the main-memory
        array, the LDM buffer and the values of the region's subscripts (a
        range gives two)."""
        inbound, acc, mt, lt, ranged = _copy_form(inst)
        if isinstance(acc.base, Global) and acc.base.kind == "global" and not inbound:
            def refuse(*_: Any) -> None:
                raise Diagnostic(f"'copy_out' writes to @{acc.base.name}, a constant global",
                                 inst.loc)
            return refuse
        stats, state, hook = self.stats_for(f), self.cpe_state, self.copy_hook
        shape, ldm_shape = tuple(mt.shape), tuple(lt.shape)
        elem_bytes = lt.bytes // lt.num_elements
        text = _copy_text(inst)
        what = value_text(acc.base)

        def fail(message: str) -> None:
            raise Diagnostic(f"CPE {state[0]}: {message} ({text})", inst.loc)

        fill = inst.attrs.get("fill") if inbound else None
        if fill is not None:
            return self.padded_copier(inst, f, ranged, fill)

        def copy(mem: np.ndarray, buf: LDMBuffer, *vals: int) -> None:
            if buf.owner != state[0]:
                report_foreign_ldm(buf, state[0], inst)
            region: list[Any] = []
            extents: list[int] = []
            k = 0
            for d, (is_range, dim) in enumerate(zip(ranged, shape)):
                if is_range:
                    lo, hi = vals[k], vals[k + 1]
                    k += 2
                    if lo < 0 or hi > dim:
                        fail(f"{inst.opname} region of {what} is out of bounds: range #{d} "
                             f"({_index_text(acc.indices[d])}) is [{lo}, {hi}), outside "
                             f"[0, {dim}) of {what} : {mt}")
                    _check_range(fail, inst, d, lo, hi, len(extents), buf)
                    region.append(slice(lo, hi))
                    extents.append(hi - lo)
                else:
                    i = vals[k]
                    k += 1
                    if not 0 <= i < dim:
                        fail(f"{inst.opname} region of {what} is out of bounds: subscript "
                             f"#{d} ({_index_text(acc.indices[d])}) is {i}, outside [0, {dim}) "
                             f"of {what} : {mt}")
                    region.append(i)
            main = mem.reshape(shape)[tuple(region)]
            local = tuple(slice(0, e) for e in extents)
            n = main.size
            if hook is not None:
                hook(buf, local, inbound, fail)
            if inbound:
                buf.array[local] = main
                buf.valid[local] = 1
                stats.copies_in += 1
                stats.elements_in += n
                stats.bytes_in += n * elem_bytes
            else:
                valid = buf.valid[local]
                if not valid.all():
                    first = tuple(int(x) for x in np.argwhere(valid == 0)[0])
                    flat = int(np.ravel_multi_index(first, ldm_shape))
                    fail(f"copy_out of LDM {element_text(buf, flat)} that was neither copied "
                         "in nor written")
                main[...] = buf.array[local]
                stats.copies_out += 1
                stats.elements_out += n
                stats.bytes_out += n * elem_bytes
        return copy

    def padded_copier(self, inst: Instruction, f: Function, ranged: list[bool],
                      fill: Any) -> Callable[..., None]:
        """copy_in with ``fill``: the region may reach past the tensor's
        bounds; what lies outside is set to ``fill`` (a padded tile read from
        the unpadded tensor, docs/ir.md)."""
        acc, lv = inst.args[0], inst.args[1]
        stats, state, hook = self.stats_for(f), self.cpe_state, self.copy_hook
        shape = tuple(acc.base.type.shape)
        elem_bytes = lv.type.bytes // lv.type.num_elements
        text = _copy_text(inst)

        def fail(message: str) -> None:
            raise Diagnostic(f"CPE {state[0]}: {message} ({text})", inst.loc)

        def copy(mem: np.ndarray, buf: LDMBuffer, *vals: int) -> None:
            if buf.owner != state[0]:
                report_foreign_ldm(buf, state[0], inst)
            inside: list[slice] = []   # the part of the region in the tensor
            local: list[slice] = []    # the whole region in LDM
            part: list[slice] = []     # where the part inside lands in LDM
            k = 0
            for d, dim in enumerate(shape):
                lo = vals[k]
                hi = vals[k + 1] if ranged[d] else lo + 1
                k += 2 if ranged[d] else 1
                clo, chi = max(lo, 0), max(min(hi, dim), max(lo, 0))
                inside.append(slice(clo, chi))
                if not ranged[d]:
                    continue
                _check_range(fail, inst, d, lo, hi, len(local), buf)
                local.append(slice(0, hi - lo))
                part.append(slice(clo - lo, chi - lo))
            if hook is not None:
                hook(buf, tuple(local), True, fail)
            main = mem.reshape(shape)[tuple(inside)]
            buf.array[tuple(local)] = fill
            if main.size:
                buf.array[tuple(part)] = main.reshape([s.stop - s.start for s in part])
            buf.valid[tuple(local)] = 1
            stats.copies_in += 1
            stats.elements_in += main.size
            stats.bytes_in += main.size * elem_bytes
        return copy


def _check_range(fail: Callable[[str], None], inst: Instruction, d: int, lo: int, hi: int,
                 k: int, buf: LDMBuffer) -> None:
    """Range #d of a copy, [lo, hi), is not empty and fits LDM dimension k."""
    ix = _index_text(inst.args[0 if inst.isa(COPY_IN) else 1].indices[d])
    if hi <= lo:
        fail(f"{inst.opname} range #{d} ({ix}) is empty: [{lo}, {hi})")
    if hi - lo > buf.type.shape[k]:
        fail(f"{inst.opname} range #{d} ({ix}) spans {hi - lo} elements, more than dimension "
             f"{k} of {buf.name} : {buf.type}")


def _live_note(buf: LDMBuffer, cpe: int) -> str:
    return f"{buf.name} : {buf.type} ({buf.nbytes} bytes) is live on CPE {cpe}, allocated here"


def report_foreign_ldm(buf: LDMBuffer, cpe: int, inst: Instruction) -> None:
    raise Diagnostic(f"CPE {cpe}: '{inst.opname}' uses LDM buffer {buf.name}, which is in the "
                     f"LDM of CPE {buf.owner}; each CPE's LDM is private (allocate the buffer "
                     "inside the parallel loop)", inst.loc)


# ---------------------------------------------------------------------------
# Emitters
# ---------------------------------------------------------------------------

def _interp(e: Emit) -> BufferedInterpreter:
    assert isinstance(e.interp, BufferedInterpreter)
    return e.interp


def ldm_locals(e: Emit, inst: Instruction, v: Value) -> tuple[str, str]:
    """Python text of an LDM buffer's elements and validity bytes, emitting the
    check that the running CPE owns it unless that is certain: the buffer was
    allocated in this generated function with no parallel loop in between."""
    info = e.data.get("ldm", {}).get(id(v))
    if info is not None and info[0] == e.parallel_depth:
        return info[1], info[2]
    b = e.name(v)
    state = _interp(e).cpe_state
    foreign = e.bind(lambda buf: report_foreign_ldm(buf, state[0], inst), "foreign")
    e.line(f"if {b}.owner != _cpe[0]: {foreign}({b})")
    return f"{b}.data", f"{b}.ok"


def simple_operand(e: Emit, text: str) -> str:
    if text.isidentifier() or text.lstrip("-").isdigit():
        return text
    e.line(f"_o = {text}")
    return "_o"


@buffered_emitter(LDM_ALLOC)
def _emit_ldm_alloc(e: Emit, inst: Instruction) -> None:
    if len(inst.results) != 1 or not isinstance(inst.results[0].type, LDMType):
        raise Diagnostic("'ldm_alloc' makes one LDM buffer, e.g. %L = ldm_alloc : "
                         "ldm<64 x f32>", inst.loc)
    r = inst.results[0]
    alloc = e.bind(_interp(e).allocator(inst), "ldm")
    b = e.define(r)
    d, ok = f"{b}_d", f"{b}_ok"
    e.line(f"{b} = {alloc}()")
    e.line(f"{d} = {b}.data")
    e.line(f"{ok} = {b}.ok")
    e.data.setdefault("ldm", {})[id(r)] = (e.parallel_depth, d, ok)
    e.at_exit(f"_ldm_free({b})")


@buffered_emitter(LOAD)
def _emit_load(e: Emit, inst: Instruction) -> None:
    acc = inst.args[0]
    if not isinstance(acc, Access) or not isinstance(acc.base.type, LDMType):
        EMITTERS[LOAD](e, inst)
        return
    d, ok = ldm_locals(e, inst, acc.base)
    off = simple_operand(e, e.offset(inst, acc))
    bad = e.bind(_interp(e).read_reporter(inst, acc), "unread")
    e.line(f"if not {ok}[{off}]: {bad}({e.name(acc.base)}, {off})")
    read = f"{d}[{off}]"
    if inst.results[0].type == INDEX:
        read = f"int({read})"
    e.line(f"{e.define(inst.results[0])} = {read}")


@buffered_emitter(STORE)
def _emit_store(e: Emit, inst: Instruction) -> None:
    acc = inst.args[1]
    if not isinstance(acc, Access) or not isinstance(acc.base.type, LDMType):
        EMITTERS[STORE](e, inst)
        return
    d, ok = ldm_locals(e, inst, acc.base)
    off = simple_operand(e, e.offset(inst, acc))
    e.line(f"{d}[{off}] = {e.name(inst.args[0])}")
    e.line(f"{ok}[{off}] = 1")


@buffered_emitter(COPY_IN, COPY_OUT)
def _emit_copy(e: Emit, inst: Instruction) -> None:
    if len(inst.args) != 2:
        raise Diagnostic(f"'{inst.opname}' is written {inst.opname} SRC -> DST", inst.loc)
    fn = e.bind(_interp(e).copier(inst, e.function), inst.opname)
    acc, lv = (inst.args[0], inst.args[1]) if inst.isa(COPY_IN) else \
        (inst.args[1], inst.args[0])
    vals: list[str] = []
    for ix in acc.indices:
        if isinstance(ix, Range):
            vals += [e.expr(ix.lo), e.expr(ix.hi)]
        else:
            vals.append(e.expr(ix))
    e.line(f"{fn}({', '.join([e.name(acc.base), e.name(lv)] + vals)})")


@buffered_emitter(PARALLEL)
def _emit_parallel(e: Emit, inst: Instruction) -> None:
    cpes = _interp(e).target.cpes
    workers = inst.attrs.get("workers", cpes)
    if not isinstance(workers, int) or isinstance(workers, bool) or not 1 <= workers <= cpes:
        raise Diagnostic(f"a parallel loop spreads over 1 to {cpes} CPEs; workers = "
                         f"{workers!r}", inst.loc)
    dist = e.bind(_interp(e).distributor(inst, e.function, workers), "par")
    emit_loop(e, inst, lambda r: f"{dist}({r})")


def __getattr__(name: str) -> Any:
    """CPES: the default target's figure, for code that asks for it by this
    name; the interpreter itself reads its module's target (target_of)."""
    if name in _DEFAULT_FIGURES:
        return getattr(default_target(), _DEFAULT_FIGURES[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
