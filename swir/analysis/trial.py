"""Trial lowering: the DMA traffic some graph ops would cost, measured by
lowering them as swir-cg does (-lower-loops, -ldm-plan, -insert-dma) in a
module of their own and counting with :func:`swir.analysis.traffic.dma_traffic`.

Graph passes that must never make the generated code move more data (-fuse,
-fold-batchnorm, -layout) compare the traffic before and after a rewrite
with this. A kernel's traffic depends only on its own op and shapes (not on
its neighbours or on memory planning), so comparing the ops a rewrite
touches, each measured alone, compares the whole program.
"""

from __future__ import annotations

from dataclasses import dataclass

from swir.ir.builder import Builder
from swir.ir.clone import clone
from swir.ir.core import Instruction, Module, Value
from swir.ir.fused import group
from swir.passes.manager import AnalysisManager, PassFailure
from swir.printer import print_module


@dataclass(frozen=True)
class Cost:
    bytes: int  # DMA bytes in + out, one call
    ops: int    # DMA operations (gets + puts)

    def __add__(self, o: Cost) -> Cost:
        return Cost(self.bytes + o.bytes, self.ops + o.ops)

    def better_than(self, o: Cost) -> bool:
        return (self.bytes, self.ops) < (o.bytes, o.ops)


UNPLANNABLE = Cost(2**62, 2**62)  # the lowering refused: never preferred
_CACHE: dict[tuple[str, int], Cost] = {}


def traffic_of(ops: list[Instruction], ldm_size: int = 65536, fused: bool = False) -> Cost:
    """The DMA cost of computing ``ops`` (graph instructions, in order, from
    one block) as kernels, or as ONE fused kernel when ``fused``: values
    from outside, globals included, are parameters; results used after the
    last op (or the last op's results) are returned. Cached by the trial
    module's text."""
    module = _trial_module(ops, fused)
    key = (print_module(module), ldm_size)
    hit = _CACHE.get(key)
    if hit is None:
        hit = _CACHE[key] = _measure(module, ldm_size)
    return hit


def _trial_module(ops: list[Instruction], fused: bool) -> Module:
    members = {id(i) for i in ops}
    inputs: list[Value] = []
    for inst in ops:
        for v in inst.operands:
            if id(getattr(v, "owner", None)) not in members and v not in inputs:
                inputs.append(v)
    outputs = [r for i in ops for r in i.results
               if any(id(u) not in members for u in r.users)] or list(ops[-1].results)
    m = Module("trial")
    f, b = Builder.function(m, "main", [v.type for v in inputs], [r.type for r in outputs])
    mapping: dict = dict(zip(inputs, f.params))
    copies = clone(b, ops, mapping)
    b.create_inst("return", *[mapping[r] for r in outputs])
    if fused:
        group(copies)
    return m


def _measure(module: Module, ldm_size: int) -> Cost:
    from swir.analysis.traffic import TrafficError, dma_traffic
    from swir.passes import pass_class
    analyses = AnalysisManager()
    try:
        for name, opts in (("lower-loops", {}), ("ldm-plan", {"ldm_size": ldm_size}),
                           ("insert-dma", {})):
            pass_class(name)(**opts).run(module, analyses)  # type: ignore[misc]
            analyses.invalidate()
        t = dma_traffic(module).total
    except (PassFailure, TrafficError):
        return UNPLANNABLE
    return Cost(t.bytes_in + t.bytes_out, t.gets + t.puts)
