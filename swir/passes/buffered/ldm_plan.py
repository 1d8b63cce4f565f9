"""-ldm-plan: loop stage → buffered stage. swTVM's LDM management.

For every loop nest of every kernel:

1. **Model** the nest (:class:`Nest`): a perfect band of output loops whose body
   is either straight-line statements (form P) or ``init; reduction band;
   finalize`` (form R, what ``k.reduce`` makes). Loops count from 0 by 1 to a
   constant. Each tensor's subscripts give its correlation with the loop
   variables (Algorithm 4, :mod:`swir.analysis.correlation`).
2. **Size** the buffers (Algorithm 1, :func:`size_buffers`): one tile size per
   loop variable, classified into sizevars / numvars / compvars with UPDATE
   (Algorithm 5); initial phase at ``ldm-init`` elements, halving while over
   capacity, then greedy doubling while the tiles fit.
3. **Order** the tile loops (Algorithm 2, :func:`order_loops`): buffer loops
   innermost; the tile loops chosen outermost-first, each time the one giving
   the fewest DMA instructions over all tensors.
4. **Distribute** the outermost output tile loop over the CPEs (Section V-D),
   fusing it with the next output tile loops while it has fewer tiles than
   CPEs; only loops that carry no dependence (so no two CPEs write one
   element).
5. **Rewrite**: tile loops, LDM buffers (``ldm_alloc`` inside the parallel loop:
   each CPE has its own), ``copy_in`` / ``copy_out`` at the level the placement
   rule (:mod:`swir.analysis.placement`) gives, statements reading and writing
   LDM. A reduction's output stays in LDM across its reduction: its
   initialisation and finalisation run on the LDM tile.

Choices where the paper is ambiguous are in docs/passes.md.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace

from swir import cache
from swir.diagnostics import Diagnostic
from swir.ir.core import FuncParam, Function, Instruction, Module
from swir.parallel import memo, processes
from swir.passes import options
from swir.passes.buffered.ldm_model import Nest, Plan, SearchContext, size_buffers, top_loops
from swir.passes.buffered.ldm_search import (
    Decision,
    apply,
    canonical_kernel,
    legal_decision,
    search,
    search_key,
)
from swir.passes.buffered.pad_fold import PaddedCopy, find_padded_copies, fold
from swir.passes.buffered.parallel_search import search_all
from swir.passes.manager import AnalysisManager, Pass, at_least, one_of, option
from swir.target import record_target


@dataclass
class LDMPlan(Pass):
    name = "ldm-plan"
    summary = "Tile loop nests into LDM buffers with copies, spread over the CPEs (loop -> buffered)"
    stages = ("loop",)

    ldm_size: int = options.ldm_size()
    ldm_reserve: int = options.ldm_reserve()
    ldm_init: int = options.ldm_init()
    cpes: int = options.cpes()
    double_buffer: bool = option(False, "leave room for -insert-dma's double buffering: count "
                                        "every read-only tile twice")
    strategy: str = option("greedy", "how tiles and loop order are chosen: greedy (the paper's "
                                     "Algorithms 1 and 2) or search (the fastest plan by the "
                                     "cost model; never slower than greedy's)",
                           check=one_of("greedy", "search"))
    search_budget: float = option(30.0, "seconds of cost-model search per loop nest at most "
                                        "(strategy=search; its bounded rounds end it sooner)",
                                  check=at_least(0))
    resident: bool = option(True, "keep a tensor the nest only reads, and that every tile "
                                  "reads alike, whole in LDM where it fits: copied once at "
                                  "the top of the parallel loop (-insert-dma broadcasts it)")
    pad_in_load: bool = option(True, "read a padded conv or pool input's tiles from the "
                                     "unpadded tensor, the halo filled in LDM, instead of "
                                     "writing a padded copy first")
    strided_broadcast: bool = option(True, "plan for -insert-dma's option of this name: the "
                                           "search measures its plans with broadcasts of "
                                           "strided blocks allowed (true) or not (false)")
    remarks: bool = option(False, "print a remark per loop nest: tiles, LDM use, order, copies")
    jobs: int = options.jobs("processes searching loop nests at once (strategy=search; 0: one "
                             "per core); the plans are the same for any number")

    def check_options(self) -> list[tuple[str, str]]:
        return options.check_reserve(self.name, self.ldm_size, self.ldm_reserve, self.target)

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        capacity = self.ldm_size - options.reserve_bytes(self.ldm_size, self.ldm_reserve,
                                                         self.target)
        nests = [(f, top_loops(f)) for f in module.functions
                 if f.kind == "kernel" and f.body is not None]
        self.progress.total(sum(len(tops) for _, tops in nests), "nest")
        self.ahead: set[str] = set()
        # (search key, cache entry) per nest, found by search_ahead for decide
        self.looked_up: dict[int, tuple[str, object]] = {}
        if self.strategy == "search":
            self.search_ahead(module, nests, capacity)
        for f, tops in nests:
            pads = find_padded_copies(module, f) if self.pad_in_load else []
            later = {id(n) for pc in pads for n in pc.nests}
            for inst in [i for i in tops if id(i) not in later]:
                self.plan_nest(f, inst, capacity, pads)
            for pc in pads:     # planned only if their reads cannot be folded
                if fold(module, f, pc):
                    self.bump("padded copies folded into tile loads")
                    for _ in pc.nests:
                        self.progress.advance(f"@{f.name}")
                    continue
                for inst in pc.nests:
                    self.plan_nest(f, inst, capacity)
        module.stage = "buffered"
        module.attrs["ldm_size"] = self.ldm_size
        record_target(module.attrs, self.target)
        return True

    def plan_nest(self, f: Function, top: Instruction, capacity: int,
                  pads: list[PaddedCopy] = ()) -> None:
        """Plan the nest ``top``, a loop at the top of kernel f (``pads``: the
        padded copies its tiles will be read through)."""
        self.progress.advance(f"@{f.name}")
        kernel = f.name
        index = top_loops(f).index(top)
        nest, why = Nest.parse(top, legal=True)
        serial: frozenset[int] = frozenset()
        if nest is not None:
            why, serial = dependences(f, index, nest)
            nest = None if why else nest
        if nest is not None:
            nest.double = self.double_buffer
        if nest is None:
            self.bump("nests kept as written")
            self.remark(top, f"@{kernel}: nest kept as written (not planned): {why}")
            return
        size_buffers(nest, capacity, self.ldm_init, top)
        order = None
        if self.strategy == "search":
            ctx = replace(self.search_context(f, index, capacity, pads), serial=serial)
            d = self.decide(nest, top, ctx)
            order = apply(nest, d)
            self.bump("nests where search beat greedy" if d.chose else
                      "nests where greedy stayed best")
            if d.cut:
                self.bump("nests whose search the time budget cut short")
        plan = Plan.make(nest, self.cpes, order, {nest.vars[i] for i in serial},
                         capacity if self.resident else None)
        text = plan.describe(kernel, capacity)
        plan.rewrite()
        self.bump("nests planned")
        self.bump("copies per kernel call", plan.copies())
        self.remark(top, text)

    def search_context(self, f: Function, index: int, capacity: int,
                       pads: list[PaddedCopy] = ()) -> SearchContext:
        padded = tuple((pc.scratch.index, pc.source.index if isinstance(pc.source, FuncParam)
                        else pc.source.name, pc.before, pc.fill) for pc in pads)
        return SearchContext(f, index, capacity, self.cpes, self.search_budget, self.ldm_size,
                             self.double_buffer, self.target, padded, self.resident,
                             strided_broadcast=self.strided_broadcast)

    def decide(self, nest: Nest, top: Instruction, ctx: SearchContext) -> Decision:
        """The search's decision for the nest ``top``: remembered by what
        decides it (:func:`search_key`) for the rest of the process, and in
        the compile cache (swir.cache) when one is in use; searched when
        neither has it."""
        key, value = self.looked_up.pop(id(top), None) or self.look_up(ctx)
        d = _DECISIONS.get(key)
        if d is not None:
            if key in self.ahead:          # searched for this nest, in a worker
                self.ahead.discard(key)
            else:
                self.bump("nest searches known from an identical nest")
            return d
        store = cache.current()
        d = legal_decision(nest, value, ctx.capacity, ctx.cpes, ctx.serial) \
            if value is not None else None
        if d is not None:
            self.bump("nest searches read from the compile cache")
        else:
            d = search(nest, ctx)
            if store and not d.cut:
                store.put(CACHE_KIND, key, d.to_json())
        if not d.cut:             # a search cut short depends on the clock
            _DECISIONS[key] = d
        return d

    def look_up(self, ctx: SearchContext) -> tuple[str, object]:
        """The nest's search key and its compile-cache entry (None: none, or
        no cache), not yet checked against the nest (decide does that)."""
        key = json.dumps(search_key(ctx, self.ldm_init))
        store = cache.current()
        return key, store.get(CACHE_KIND, key) if store and key not in _DECISIONS else None

    def search_ahead(self, module: Module, nests: list, capacity: int) -> None:
        """Search the nests :meth:`decide` does not know yet in ``jobs``
        processes at once (the nests read through a padded copy are left to
        the loop: whether they are planned at all depends on the fold)."""
        jobs = processes(self.jobs)
        if jobs < 2:
            return
        work: dict[str, tuple] = {}
        for f, tops in nests:
            pads = find_padded_copies(module, f) if self.pad_in_load else []
            later = {id(n) for pc in pads for n in pc.nests}
            for index, top in enumerate(tops):
                if id(top) in later:
                    continue
                ctx = self.search_context(f, index, capacity, pads)
                key, value = self.looked_up[id(top)] = self.look_up(ctx)
                if key not in _DECISIONS and key not in work and value is None:
                    nest, _ = Nest.parse(top, legal=True)
                    why, serial = dependences(f, index, nest) if nest else ("", frozenset())
                    if nest is None or why:
                        continue             # not planned (plan_nest says why)
                    # the workers, forked, find the dependences known
                    work[key] = (top, replace(ctx, serial=serial))
        if len(work) < 2:
            return
        store = cache.current()
        for key, d in search_all(list(work.items()), self.ldm_init, self.double_buffer, jobs):
            if d is None or d.cut:
                continue            # searched again in the loop, where its error is reported
            _DECISIONS[key] = d
            self.ahead.add(key)
            if store:
                store.put(CACHE_KIND, key, d.to_json())

    def remark(self, inst: Instruction, text: str) -> None:
        if self.remarks:
            print(Diagnostic(text, inst.loc).render().replace("error:", "remark:", 1),
                  file=sys.stderr)


def dependences(f: Function, index: int, nest: Nest) -> tuple[str, frozenset[int]]:
    """:meth:`Nest.dependences` of kernel f's top-level loop ``index``,
    remembered for the process by the kernel's canonical text (the answer
    depends on nothing else): a nest repeated under other names, in a
    trial lowering or a later pass is tested once (and what forked workers
    learn comes back: trial lowerings run -ldm-plan there)."""
    key = canonical_kernel(f, index)[0]
    known = memo(DEPENDENCES)
    found = known.get(key)
    if found is None:
        found = known[key] = nest.dependences()
    return found


# Decisions by search key, for the process (a repeated layer, a second pass).
_DECISIONS: dict[str, Decision] = {}
CACHE_KIND = "ldm-search"
DEPENDENCES = "nest-dependences"   # swir.parallel.memo: Nest.dependences by kernel text


