"""-fold-batchnorm: fold an inference batch_norm into the conv2d,
conv_transpose2d or matmul that feeds it.

``batch_norm(p) = (p - mean) * factor + bias`` with ``factor = scale /
sqrt(var + epsilon)`` per channel (axis 1). When ``p = conv(x, W) + b`` and W,
b and the four vectors are constants, that is ``conv(x, W * factor) + (b -
mean) * factor + bias``, the weight scaled per output channel: one op and no
batch_norm at run time. The new weight and bias are computed in f64, as the
interpreter's batch_norm kernel computes ``factor``, and rounded once to the
element type.

Folding changes the conv (it gains a bias) and with it the LDM plan the
greedy -ldm-plan picks for its kernel, which can move more data than the
conv and batch_norm kernels did. So each fold is measured first (trial
lowering, swir.costmodel.trial) and kept only when it moves no more DMA
bytes; ``check-traffic=false`` folds regardless.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from swir.costmodel.trial import Cost, measure_ahead, ops_module, plan_options, traffic_of
from swir.diagnostics import Diagnostic
from swir.ir.builder import Builder
from swir.ir.constants import constant_value, is_constant
from swir.ir.core import Global, Instruction, Module, Value
from swir.ir.dtypes import dtype_of
from swir.ir.types import TensorType
from swir.ops import BATCH_NORM, MATMUL
from swir.ops.registry import OpDef
from swir.ops.util import attr
from swir.parallel import processes
from swir.passes import options
from swir.passes.graph.fold_constants import new_global
from swir.passes.manager import AnalysisManager, Pass, PassFailure, option

@dataclass
class FoldBatchNorm(Pass):
    name = "fold-batchnorm"
    summary = ("Fold batch_norm with constant parameters into the conv2d, conv_transpose2d "
               "or matmul before it (graph stage)")
    stages = ("graph",)

    check_traffic: bool = option(True, "fold only where the folded op moves no more DMA "
                                       "bytes than the two ops (measured by trial lowering)")
    ldm_size: int = options.ldm_size("LDM bytes per CPE, for the trial lowering")
    jobs: int = options.jobs()
    # Trial costs measured ahead, by (id(bn), id(its producer), folded) (_measure_ahead).
    _known: dict[tuple, Cost | None] = field(default_factory=dict, init=False, repr=False,
                                             compare=False)

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        folded = 0
        norms = [i for i in module.walk() if i.isa(BATCH_NORM)]
        self._measure_ahead(module, norms)
        self.progress.total(len(norms), "batch norm")
        for bn in norms:
            self.progress.advance()
            producer = self._producer(bn)
            if producer is None:
                continue
            try:
                weight, bias = folded_parameters(bn, producer)
            except Diagnostic as e:  # a weight file that cannot be read
                raise PassFailure([e]) from None
            if not (np.isfinite(weight).all() and np.isfinite(bias).all()):
                # var + epsilon = 0, or an overflow of the element type: the
                # folded op would not compute what the two ops compute.
                self.bump("not folded: folded values not finite")
                continue
            made = _rewrite(module, bn, producer, weight, bias)
            if self.check_traffic and not self._no_more_traffic(bn, producer, made):
                _undo(module, bn, made)
                self.bump("not folded: more DMA traffic")
                continue
            bn.erase()
            producer.erase()
            folded += 1
        if folded:
            self.bump("batch norms folded", folded)
        return folded > 0

    def _no_more_traffic(self, bn: Instruction, producer: Instruction,
                         made: list[Instruction]) -> bool:
        """Whether the folded op (``made``) moves no more DMA bytes than
        ``producer`` and ``bn``."""
        new = self._traffic(bn, producer, made, True)
        old = self._traffic(bn, producer, made, False)
        return new is not None and (old is None or new.bytes <= old.bytes)

    def _traffic(self, bn: Instruction, producer: Instruction, made: list[Instruction],
                 folded: bool) -> Cost | None:
        """The trial's cost, folded or not: measured ahead, else now."""
        key = (id(bn), id(producer), folded)
        if key in self._known:
            return self._known[key]
        return traffic_of(made if folded else [producer, bn], plan_options(self),
                          target=self.target)

    def _producer(self, bn: Instruction) -> Instruction | None:
        """The conv / matmul that bn can be folded into, or None (counted when
        the pattern matches but a condition fails)."""
        producer, why = producer_of(bn)
        if why:
            self.bump(f"not folded: {why}")
        return producer

    def _measure_ahead(self, module: Module, norms: list[Instruction]) -> None:
        """Measure the trial kernels of every fold, before and after, in
        ``jobs`` processes at once (trial.measure_ahead), before the folds
        are decided one by one. A trial depends on the new weight's and
        bias's types only, so each fold is made with zeros for them, its
        trial module built, and undone."""
        self._known = {}
        jobs = processes(self.jobs)
        if not self.check_traffic or jobs < 2:
            return
        trials: dict[tuple, Module] = {}
        for bn in norms:
            producer, _ = producer_of(bn)
            if producer is None:
                continue
            w = producer.args[1].type
            made = _rewrite(module, bn, producer, np.zeros(w.shape, dtype_of(w)),
                            np.zeros(bn.args[3].type.shape, dtype_of(w)))
            trials[id(bn), id(producer), True] = ops_module(made)
            trials[id(bn), id(producer), False] = ops_module([producer, bn])
            _undo(module, bn, made)
        self._known = measure_ahead(trials, plan_options(self), jobs, self.target)


def producer_of(bn: Instruction) -> tuple[Instruction | None, str | None]:
    """The conv / matmul that bn can be folded into, or None and, when the
    pattern matches but a condition fails, why not."""
    p = bn.args[0]
    producer = getattr(p, "owner", None)
    if not isinstance(producer, Instruction) or producer.opdef is None or \
            producer.opdef.weight_channels is None:
        return None, None
    if producer.isa(MATMUL) and not _is_matrix_product(producer):
        return None, "matmul not rank 2"
    if len(p.uses) != 1:  # the other users need the value before the batch_norm
        return None, "producer has other uses"
    if not all(isinstance(v, Value) and is_constant(v)
               for v in producer.args[1:] + bn.args[1:]):
        return None, "operands not constant"
    return producer, None


def _is_matrix_product(mm: Instruction) -> bool:
    """A rank-2 result (so batch_norm's channel axis 1 is the columns) of a
    rank-2 right operand (whose columns are those channels)."""
    w = mm.args[1]
    return mm.results[0].type.rank == 2 and isinstance(w, Value) and w.type.rank == 2


def folded_parameters(bn: Instruction, producer: Instruction) -> tuple[np.ndarray, np.ndarray]:
    """The new weight and bias (per output channel), in the element type."""
    scale, shift, mean, var = (_wide(v) for v in bn.args[1:5])  # shift: its bias
    eps = attr(bn, "epsilon")
    weight = _wide(producer.args[1])
    bias = _wide(producer.args[2]) if len(producer.args) > 2 else np.zeros_like(mean)
    groups = attr(producer, "groups") if producer.opdef.attr("groups") else 1  # matmul: one
    dtype = dtype_of(producer.results[0].type)
    # inf and nan (var + eps = 0, an overflow of dtype) are refused by the caller.
    with np.errstate(all="ignore"):
        factor = scale / np.sqrt(var + eps)  # as the batch_norm kernel computes it
        weight = weight * channel_factor(producer.opdef, weight.shape, groups, factor)
        return weight.astype(dtype), ((bias - mean) * factor + shift).astype(dtype)


def channel_factor(op: OpDef, weight_shape: tuple[int, ...], groups: int,
                   factor: np.ndarray) -> np.ndarray:
    """``factor`` arranged to multiply each weight element by the factor of the
    output channel it contributes to (the op's definition says which that is)."""
    return factor[op.weight_channels(weight_shape, groups)]


def _wide(v: Value) -> np.ndarray:
    return np.asarray(constant_value(v), dtype=np.float64)


def _rewrite(module: Module, bn: Instruction, producer: Instruction,
             weight: np.ndarray, bias: np.ndarray) -> list[Instruction]:
    """Insert the producer with the new weight and bias before it and give
    it bn's users; returns the new instructions (the old ones stay, unused)."""
    out = bn.results[0]
    base = out.name or "bn"
    w_type = producer.args[1].type
    w = new_global(module, f"{base}.weight", w_type, weight)
    b = new_global(module, f"{base}.bias", TensorType(bias.shape, w_type.element), bias)
    build = Builder(producer.parent, producer)
    if producer.isa(MATMUL):
        mm = build.create_inst("matmul", producer.args[0], w, names=[producer.results[0].name])
        new = build.create_inst("add", mm.results[0], b, names=[out.name])
        mm.loc = producer.loc
    else:
        new = build.create_inst(producer.opname, producer.args[0], w, b,
                                attrs=dict(producer.attrs), names=[out.name])
    new.loc = bn.loc
    out.replace_all_uses_with(new.results[0])
    return [mm, new] if producer.isa(MATMUL) else [new]


def _undo(module: Module, bn: Instruction, made: list[Instruction]) -> None:
    """Give bn its users back, erase ``made`` and the weight and bias
    globals only it used (not the producer's input when that is a global:
    the producer still reads it)."""
    made[-1].results[0].replace_all_uses_with(bn.results[0])
    operands = {v for i in made for v in i.operands if isinstance(v, Global)}
    for inst in reversed(made):
        inst.erase()
    for g in operands:
        if not g.uses:
            module.remove(g)
