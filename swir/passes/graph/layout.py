"""-layout: store each dominant kernel's constant weight in the axis order
that makes that kernel's DMA cheapest.

**What.** For ``matmul %x, @W`` with a constant rank-2 right operand, and
``conv2d %x, @W[, %b]`` / ``conv_transpose2d`` with a constant 4-D weight,
the pass picks a storage layout of W (a permutation of its axes) and stores
the weight in it at compile time: a new global ``@W_<layout>`` holding
``W.transpose(perm)``, read through ``%W = transpose @W_<layout> {perm =
inverse}`` right before the op, so the graph computes exactly what it did.
``-fuse`` then inlines that transpose into the conv / matmul kernel as an
index map (no transpose kernel runs): the kernel reads the weight in its new
order, which changes the tiles ``-ldm-plan`` can cut and the DMAs
``-insert-dma`` issues for them.

**How it is decided: by measurement.** For each candidate layout the op
alone becomes a trial module (the fused group ``[transpose, op]`` that
``-fuse`` will make, or the plain op for the layout as it is), lowered with
the normal pipeline (``-lower-loops``, ``-ldm-plan`` with this pass's LDM
options, ``-insert-dma``), and its DMA is counted statically
(:func:`swir.costmodel.traffic.dma_traffic`). The layout with the fewest DMA
bytes wins, ties broken by fewer DMA operations; the layout as it is wins
unless another is strictly better and gives as many CPEs work (fewer bytes
from bigger tiles on fewer CPEs would be slower). A trial that fails
(``-ldm-plan`` refusing a kernel, a count that is not static) only
drops that candidate; if the layout as it is cannot be measured, nothing
changes. Decisions are
cached by op name, operand types and attributes, so repeated layers are
measured once. The trials are those of swir.costmodel.trial, shared with
-fuse and -fold-batchnorm.

**Candidates** (:data:`LAYOUTS`, named by the weight's axes): matmul
``KN`` (as it is) and ``NK``; conv2d ``OIHW`` (as it is), ``OHWI``,
``IHWO``, ``HWIO``; conv_transpose2d ``IOHW`` (as it is: C x O/groups x kH
x kW) and the same three orders of its axes.

**Why at compile time.** The weights are constants: storing them permuted
costs nothing at run time, whereas a transpose kernel would move every
weight through main memory on each run.

**Copies.** Each re-laid-out op gets a copy of its own, placed after the
weight's global; a weight no op reads any more is removed (so a weight only
the op read is replaced in place), one that others read keeps its global
for them. Ops that compute the same value share a copy, so ``-cse`` still
merges them; two different ops do not, because ``-cse`` would merge their
transposes of one copy into one value with two readers, which ``-fuse`` does
not inline. Ops inside ``fused`` regions are left alone (the pass runs
before ``-fuse``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from swir.costmodel.trial import TRIAL_FAILURES, Cost, measure, measure_ahead, plan_options
from swir.diagnostics import Diagnostic
from swir.ir.builder import Builder
from swir.ir.constants import constant_value, is_constant
from swir.ir.core import Dense, Global, Instruction, Module, Value, value_key
from swir.ir.fused import group
from swir.ir.types import TensorType
from swir.ops.registry import OpDef, all_ops
from swir.parallel import processes
from swir.passes import options
from swir.passes.graph.fold_constants import new_global
from swir.passes.manager import AnalysisManager, Pass, PassFailure, option

# op name -> (the weight's axes as the op reads them, the other layouts tried):
# the ops' OpDef.weight_layout, as a table for reports and tests.
LAYOUTS: dict[str, tuple[str, tuple[str, ...]]] = {
    op.name: op.weight_layout for op in all_ops() if op.weight_layout is not None}
WEIGHT = 1  # the weight's operand position in each of these ops
@dataclass(frozen=True)
class Decision:
    layout: str | None  # None: keep the layout as it is
    saved: Cost = field(default_factory=lambda: Cost(0, 0))


def permutation(axes: str, layout: str) -> tuple[int, ...]:
    """``perm`` with ``W.transpose(perm)`` stored in ``layout``: stored axis i is axis perm[i]."""
    return tuple(axes.index(a) for a in layout)


def inverse(perm: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argsort(perm))


@dataclass
class Layout(Pass):
    name = "layout"
    summary = ("Store constant matmul / conv weights in the axis order with the least DMA, "
               "measured on trial kernels (graph)")
    stages = ("graph",)

    ldm_size: int = options.ldm_size("LDM bytes per CPE (as -ldm-plan's, for the trial kernels)")
    ldm_reserve: int = options.ldm_reserve("LDM bytes kept for the CPE stack and statics (as "
                                           "-ldm-plan's; -1: ldm-size / 16)")
    ldm_init: int = options.ldm_init("initial buffer size in elements (as -ldm-plan's)")
    cpes: int = options.cpes("CPEs to spread the parallel loop over (as -ldm-plan's)")
    double_buffer: bool = option(False, "as -ldm-plan's: count every read-only tile twice")
    jobs: int = options.jobs()
    # Trial costs measured ahead, by (_key(op), perm) (_measure_ahead).
    _known: dict[tuple, Cost | None] = field(default_factory=dict, init=False, repr=False,
                                             compare=False)

    def check_options(self) -> list[tuple[str, str]]:
        return options.check_reserve(self.name, self.ldm_size, self.ldm_reserve, self.target)

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        decisions: dict[tuple, Decision] = {}
        copies = _Copies(module)
        candidates = [i for f in module.functions if f.body is not None
                      for b in f.body.blocks for i in b.instructions if _candidate(i)]
        self._measure_ahead(candidates)
        self.progress.total(len(candidates), "weight")
        for op in candidates:
            self.progress.advance(op.opname)
            d = self._decide(op, decisions)
            if d.layout is None:
                continue
            _read_through(op, copies.get(op, d.layout), d.layout)
            self.bump("DMA bytes saved", d.saved.bytes)
            self.bump("DMA ops saved", d.saved.ops)
        copies.drop_unused()
        if copies.made:
            self.bump("weights re-laid-out", copies.made)
        return copies.made > 0

    def _measure_ahead(self, candidates: list[Instruction]) -> None:
        """Measure every layout's trial kernel of every distinct candidate in
        ``jobs`` processes at once (trial.measure_ahead); :meth:`_cost` then
        takes the answers from ``self._known``."""
        self._known = {}
        jobs = processes(self.jobs)
        if jobs < 2:
            return
        trials: dict[tuple, Module] = {}
        for op in candidates:
            axes, others = op.opdef.weight_layout
            for perm in [None, *(permutation(axes, layout) for layout in others)]:
                if (_key(op), perm) not in trials:
                    try:
                        trials[_key(op), perm] = trial_module(op, perm)
                    except TRIAL_FAILURES:
                        pass            # reported when _cost meets it
        self._known = measure_ahead(trials, plan_options(self), jobs, self.target)

    def _decide(self, op: Instruction, decisions: dict[tuple, Decision]) -> Decision:
        key = _key(op)
        if key not in decisions:
            decisions[key] = self._measure(op)
            self.bump("kernels measured")
        return decisions[key]

    def _measure(self, op: Instruction) -> Decision:
        """The cheapest layout by the trial kernels' DMA (None: as it is)."""
        axes, others = op.opdef.weight_layout
        base = self._cost(op, None)
        if base is None:
            return Decision(None)
        best, best_cost = None, base
        for layout in others:
            c = self._cost(op, permutation(axes, layout))
            # Fewer bytes must not come from fewer busy CPEs (bigger tiles).
            if c is not None and c < best_cost and c.tasks >= base.tasks:
                best, best_cost = layout, c
        if best is None:
            return Decision(None)
        return Decision(best, Cost(base.bytes - best_cost.bytes, base.ops - best_cost.ops))

    def _cost(self, op: Instruction, perm: tuple[int, ...] | None) -> Cost | None:
        """The DMA of ``op``'s kernel with its weight stored as ``W.transpose(perm)``."""
        try:
            known = (_key(op), perm)
            c = self._known[known] if known in self._known else \
                measure(trial_module(op, perm), plan_options(self), self.target)
        except TRIAL_FAILURES:
            c = None
        if c is None:
            self.bump("layout trials failed")
        return c


def _candidate(inst: Instruction) -> bool:
    """An op with a weight_layout (LAYOUTS) whose weight is a constant of the expected rank."""
    d = inst.opdef
    if d is None or d.weight_layout is None or len(inst.results) != 1 or inst.regions:
        return False
    if len(inst.args) <= WEIGHT or not all(isinstance(s, Value) for s in inst.args):
        return False
    w = inst.args[WEIGHT]
    return isinstance(w, Value) and isinstance(w.type, TensorType) and is_constant(w) \
        and w.type.rank == len(d.weight_layout[0])


def _key(op: Instruction) -> tuple:
    """What decides ``op``'s layout: its op, operand types and attributes."""
    return (op.opname, tuple(str(v.type) for v in op.operands), _attributes(op))


def _attributes(op: Instruction) -> tuple:
    return tuple(sorted((k, value_key(v)) for k, v in op.attrs.items()))


def trial_module(op: Instruction, perm: tuple[int, ...] | None) -> Module:
    """``op`` alone, its weight a global stored as ``W.transpose(perm)`` and
    read through the inverse transpose in one fused group (as -fuse makes it),
    or as it is (perm None); its other operands are parameters."""
    m = Module("layout-trial")
    w = op.args[WEIGHT]
    assert isinstance(w, Value) and isinstance(w.type, TensorType)
    shape = w.type.shape if perm is None else tuple(w.type.shape[p] for p in perm)
    zero = 0.0 if w.type.element.is_float else 0
    g = Builder.global_(m, "w", TensorType(shape, w.type.element), init=Dense(zero))
    others = [v for k, v in enumerate(op.args) if k != WEIGHT]
    f, b = Builder.function(m, "main", [v.type for v in others], [op.results[0].type])
    params = iter(f.params)
    t = None if perm is None else b.create_inst("transpose", g, attrs={"perm": inverse(perm)})
    weight = g if t is None else t.results[0]
    args = [weight if k == WEIGHT else next(params) for k in range(len(op.args))]
    kernel = b.create_inst(op.opname, *args, attrs=dict(op.attrs))
    b.create("return", kernel.results[0])
    if t is not None:
        group([t, kernel])
    return m


class _Copies:
    """The weights' copies in their new layouts: one per op, shared only by
    ops that compute the same value (same operands and attributes), which
    -cse merges. A copy read by two different ops would be read through one
    transpose after -cse, and -fuse inlines only a transpose with one reader."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self.made = 0
        self._copy: dict[tuple, Global] = {}
        self._last: dict[int, Global] = {}     # id(weight) -> its last copy
        self._weights: dict[int, Value] = {}

    def get(self, op: Instruction, layout: str) -> Global:
        key = (layout, tuple(id(v) for v in op.operands), _attributes(op))
        if key not in self._copy:
            w = op.args[WEIGHT]
            assert isinstance(w, Value)
            g = _store(self.module, w, layout, op.opdef, self._last.get(id(w)))
            self._copy[key] = self._last[id(w)] = g
            self._weights[id(w)] = w
            self.made += 1
        return self._copy[key]

    def drop_unused(self) -> None:
        """Remove the weights no op reads any more: their copies replace them."""
        for w in self._weights.values():
            if isinstance(w, Global) and not w.has_uses and w.module is self.module:
                self.module.remove(w)


def _store(module: Module, w: Value, layout: str, opdef: OpDef,
           after: Global | None) -> Global:
    """A new global ``<W>_<layout>`` holding the weight permuted, after
    ``after`` or W's global (or after the last global, for a ``const`` weight)."""
    axes = opdef.weight_layout[0]
    try:
        array = constant_value(w)
    except Diagnostic as e:  # a weight file that cannot be read
        raise PassFailure([e]) from None
    assert array is not None and isinstance(w.type, TensorType)
    data = np.asarray(array).transpose(permutation(axes, layout))  # copied C-contiguous
    g = new_global(module, f"{w.name or 'weight'}_{layout.lower()}",
                   TensorType(data.shape, w.type.element), data)
    anchor = after or (w if isinstance(w, Global) and w.module is module else None)
    if anchor is not None:
        module.items.remove(g)
        module.items.insert(module.items.index(anchor) + 1, g)
    return g


def _read_through(op: Instruction, g: Global, layout: str) -> None:
    """Make ``op`` read ``g`` through the transpose back to the op's layout."""
    w = op.args[WEIGHT]
    assert isinstance(w, Value)
    perm = permutation(op.opdef.weight_layout[0], layout)
    t = Builder(op.parent, op).create_inst("transpose", g, attrs={"perm": inverse(perm)},
                                           names=[w.name])
    t.loc = op.loc
    args = list(op.args)
    args[WEIGHT] = t.results[0]
    op.set_args(args)
