"""-fuse: group graph ops into ``fused`` ops, each lowered to ONE kernel,
by TVM's rules (002_33a2ce4792eea380.txt, Sec. 3).

Every op has a fusion pattern (its ``category`` in the op registry):

- *element-wise* (add, relu, cast, clip, batch_norm, ...): a one-to-one map
  with a scalar form, so it can run inside another op's kernel;
- *injective* (transpose, reshape, concat, slice, pad, gather, expand, ...);
- *reduction* (reduce_*, softmax, layer_norm, pools, argmax);
- *complex-out-fusable* (conv2d, conv_transpose2d, matmul);
- *opaque*: everything else (calls, constants, multi-result ops): never fused.

The pass walks each block in order and lets an op join the group that
produced one of its operands:

1. **Epilogue.** An element-wise op joins the group producing one of its
   operands when that value has the op's own shape and no other use: the op
   then runs on each output element of the group before the one store
   (conv2d + bias + relu, matmul + add + gelu, an element-wise chain).
   Among several candidate operands it prefers the heavier group
   (complex > reduction > injective > element-wise).
2. **Prologue.** A reduction or injective op absorbs the groups producing its
   operands when they consist only of element-wise ops and transposes and the
   value has no other use: those ops are computed where the master reads them
   (relu into max_pool, scale + mask into softmax, a residual add into
   layer_norm). A complex op absorbs only a transpose of a constant (a weight
   stored in another layout by -layout: a pure index map, nothing recomputed).
3. Otherwise the op starts a group of its own.

**Fusion never moves more data.** Each group is measured (swir.costmodel.trial:
the kernels -lower-loops, -ldm-plan and -insert-dma make, counted by the DMA
traffic analysis) fused and unfused; when the fused kernel would move more
DMA bytes (the greedy LDM plan can pick smaller tiles for a kernel with more
operands), its trailing epilogue ops are dropped one at a time until it does
not, or the group is left unfused. ``-fuse{check-traffic=false}`` applies
TVM's rules alone.

**Values with other users are never fused across**: a value read by two ops
stays in main memory, written once and read by each; swir never recomputes
a group for a second reader (recomputing could only add DMA traffic to the
other reader's kernel). Groups of one op are left as plain ops.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from swir.costmodel.trial import Cost, measure_ahead, ops_module, plan_options, traffic_of
from swir.ir.core import Block, Global, Instruction, Module
from swir.ir.fused import group
from swir.ir.types import TensorType
from swir.ops import TRANSPOSE
from swir.ops.registry import INLINABLE, SCALAR_FORM, Category
from swir.parallel import processes
from swir.passes import options
from swir.passes.manager import AnalysisManager, Pass, option

WEIGHT = {"complex": 3, "reduction": 2, "injective": 1, "broadcast": 1, "elementwise": 0}


@dataclass(eq=False)
class Group:
    ops: list[Instruction]
    pattern: str  # the master's: complex, reduction, injective or elementwise
    inline_only: bool  # only element-wise ops and transposes: may become a prologue
    master: int = 0  # index in ops of the op whose rule the kernel runs

    @property
    def output(self):
        return self.ops[-1].results[0]


def pattern(inst: Instruction) -> str:
    """TVM's fusion pattern of an op; 'opaque' for what -fuse never touches."""
    d = inst.opdef
    if d is None or len(inst.results) != 1 or inst.regions or d.category == Category.FUSED \
            or d.composite \
            or not isinstance(inst.results[0].type, TensorType):
        return "opaque"
    if SCALAR_FORM in d.traits:
        return "elementwise"
    if d.category == Category.BROADCAST:
        return "injective"
    fusable = (Category.INJECTIVE, Category.REDUCTION, Category.COMPLEX)
    return str(d.category) if d.category in fusable else "opaque"


@dataclass
class Fuse(Pass):
    name = "fuse"
    summary = "Group ops into fused kernels by TVM's rules (graph)"
    stages = ("graph",)

    check_traffic: bool = option(True, "keep a group unfused where fusing would move more "
                                       "DMA bytes (measured by trial lowering)")
    ldm_size: int = options.ldm_size("LDM bytes per CPE, for the trial lowering")
    jobs: int = options.jobs()
    # Trial costs measured ahead, by (ids of the ops, fused) (_block).
    _known: dict[tuple, Cost | None] = field(default_factory=dict, init=False, repr=False,
                                             compare=False)

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        changed = False
        for f in module.functions:
            if f.body is None:
                continue
            for b in f.body.blocks:
                changed |= self._block(b)
        return changed

    def _block(self, block: Block) -> bool:
        position = {id(i): k for k, i in enumerate(block.instructions)}
        of: dict[int, Group] = {}  # id(instruction) -> its group
        groups: list[Group] = []
        listed: set[int] = set()
        for inst in list(block.instructions):
            kind = pattern(inst)
            if kind == "opaque":
                continue
            g = self._join(inst, kind, of, position)
            if g is None:
                g = Group([inst], kind, _inlinable(inst))
            if id(g) not in listed:
                listed.add(id(g))
                groups.append(g)
            for op in g.ops:
                of[id(op)] = g
        candidates = [g for g in groups if len(g.ops) > 1]
        self._measure_ahead(candidates)
        self.progress.total(len(candidates), "group")
        fused = []
        for g in candidates:
            self.progress.advance(g.ops[0].opname)
            ops = self._profitable(g)
            if ops:
                fused.append(ops)
        for ops in fused:
            group(ops)
            self.bump("ops fused", len(ops))
        return bool(fused)

    def _profitable(self, g: Group) -> list[Instruction]:
        """The longest part of the group (master, prologue, a prefix of the
        epilogue) that moves no more DMA bytes fused than unfused."""
        for cut in range(len(g.ops), g.master, -1):
            ops = g.ops[:cut]
            if len(ops) < 2:
                break
            if not self.check_traffic or self._no_more_traffic(ops):
                self.bump(f"groups, {g.pattern} master")
                if cut < len(g.ops):
                    self.bump("epilogue ops left unfused (traffic)", len(g.ops) - cut)
                return ops
        self.bump("groups left unfused (traffic)")
        return []

    def _measure_ahead(self, candidates: list[Group]) -> None:
        """Measure the groups' trials in ``jobs`` processes at once
        (trial.measure_ahead) for :meth:`_profitable` to find: each whole
        group fused and not, then every shorter cut of the groups that
        fused whole would move more bytes."""
        self._known = {}
        jobs = processes(self.jobs)
        if not self.check_traffic or jobs < 2:
            return
        self._measure_all([g.ops for g in candidates], jobs)
        refused = [g for g in candidates if not self._no_more_traffic(g.ops)]
        self._measure_all([g.ops[:cut] for g in refused
                           for cut in range(len(g.ops) - 1, max(g.master, 1), -1)], jobs)

    def _measure_all(self, parts: list[list[Instruction]], jobs: int) -> None:
        trials = {(_ids(ops), fused): ops_module(ops, fused)
                  for ops in parts for fused in (True, False)}
        self._known.update(measure_ahead(trials, plan_options(self), jobs, self.target))

    def _no_more_traffic(self, ops: list[Instruction]) -> bool:
        fused, plain = self._traffic(ops, True), self._traffic(ops, False)
        return fused is not None and (plain is None or fused.bytes <= plain.bytes)

    def _traffic(self, ops: list[Instruction], fused: bool) -> Cost | None:
        """The trial's cost: measured ahead (the block's ops are unchanged
        until every group is decided), else now."""
        known = (_ids(ops), fused)
        return self._known[known] if known in self._known else \
            traffic_of(ops, plan_options(self), fused=fused, target=self.target)

    def _join(self, inst: Instruction, kind: str, of: dict[int, Group],
              position: dict[int, int]) -> Group | None:
        if kind == "elementwise":
            g = self._epilogue_target(inst, of)
            if g is not None:
                g.ops.append(inst)
                g.inline_only = g.inline_only and _inlinable(inst)
                return g
        if kind in ("injective", "reduction", "complex"):
            producers = self._prologue_sources(inst, kind, of)
            if producers:
                ops = sorted((op for g in producers for op in g.ops),
                             key=lambda op: position[id(op)]) + [inst]
                for g in producers:
                    g.ops = []  # absorbed into the new group
                return Group(ops, kind, all(map(_inlinable, ops)), len(ops) - 1)
        return None

    def _epilogue_target(self, inst: Instruction, of: dict[int, Group]) -> Group | None:
        best = None
        for pos, v in enumerate(inst.operands):
            g = of.get(id(getattr(v, "owner", None)))
            if g is None or not g.ops or v is not g.output or len(v.uses) != 1:
                continue
            if v.type.shape != inst.results[0].type.shape:
                continue
            if not inst.opdef.may_run_through(pos):
                continue
            if best is None or WEIGHT[g.pattern] > WEIGHT[best.pattern]:
                best = g
        return best

    def _prologue_sources(self, inst: Instruction, kind: str,
                          of: dict[int, Group]) -> list[Group]:
        found: list[Group] = []
        for v in dict.fromkeys(inst.operands):
            g = of.get(id(getattr(v, "owner", None)))
            if g is None or not g.ops or v is not g.output or len(v.uses) != 1 \
                    or not g.inline_only or g in found:
                continue
            if kind == "complex" and not _constant_transpose(g):
                continue
            found.append(g)
        return found


def _ids(ops: list[Instruction]) -> tuple[int, ...]:
    return tuple(map(id, ops))


def _inlinable(inst: Instruction) -> bool:
    return INLINABLE in inst.opdef.traits


def _constant_transpose(g: Group) -> bool:
    """A weight read through a permutation (-layout's form)."""
    return len(g.ops) == 1 and g.ops[0].isa(TRANSPOSE) \
        and isinstance(g.ops[0].operands[0], Global)
