"""The plan search's shortcuts change no answer (issue 25, item 4): the lower
bound it prunes with is below every estimate it skips, pruning leaves the
result and the finalists as they were, the vector plan's memo gives the
plans a fresh analysis gives, and the dependence test remembered by a
kernel's canonical text answers as the test itself does."""

from __future__ import annotations

import math
import random

import pytest

from swir.costmodel.cost import Machine
from swir.analysis.vector_plan import body_cost, tile_plan
from swir.ir.core import Module
from swir.parallel import memo
from swir.parser import parse_module
from swir.passes.buffered import ldm_plan, ldm_search
from swir.passes.buffered.closed_forms import (
    Tilings,
    broadcast_seconds,
    direct_seconds,
    get_seconds,
)
from swir.passes.buffered.ldm_model import (
    Nest,
    SearchContext,
    corr,
    runs_of,
    size_buffers,
    top_loops,
)
from swir.passes.buffered.ldm_search import (
    ALIGNED_SCAN,
    Search,
    estimate,
    nest_cycles,
    nest_cycles_floor,
    orders,
    tile_options,
    tiled,
)
from swir.passes.loop.lower_loops import LowerLoops
from swir.passes.manager import AnalysisManager

# A 3 x 3 conv with bias (a zero-fill and an epilogue around its reduction)
# and a stride-2 1 x 1 conv: 7 and 5 loops, thousands of tilings.
GRAPH = """
module "convs"
stage graph

func @main(%x: <1 x 16 x 14 x 14 x f32>, %w: <32 x 16 x 3 x 3 x f32>, %b: <32 x f32>, \
%v: <24 x 32 x 1 x 1 x f32>) -> <1 x 24 x 7 x 7 x f32> {
'entry:
  %y = conv2d %x, %w, %b {pad = [1, 1, 1, 1]} : <1 x 32 x 14 x 14 x f32>
  %z = conv2d %y, %v {stride = [2, 2]} : <1 x 24 x 7 x 7 x f32>
  return %z
}
"""


def conv_kernels() -> Module:
    m = parse_module(GRAPH, "<convs>")
    LowerLoops().run(m, AnalysisManager())
    return m


def nests() -> list[tuple[Nest, SearchContext]]:
    out = []
    for f in conv_kernels().functions:
        if f.kind != "kernel":
            continue
        for index, top in enumerate(top_loops(f)):
            nest, _ = Nest.parse(top)
            if nest is None or len(nest.vars) < 5:
                continue
            size_buffers(nest, 48 * 1024, 64, top)
            out.append((nest, SearchContext(f, index, 48 * 1024, 64, 30.0, 64 * 1024, False)))
    assert len(out) == 2
    return out


def sample_tilings(nest: Nest, n: int = 150) -> list[tuple[int, ...]]:
    """n tilings drawn from the search's candidates (seeded), and the
    smallest and largest."""
    options = [tile_options(v.extent, 64) for v in nest.vars]
    rng = random.Random(n)
    return [tuple(o[0] for o in options), tuple(o[-1] for o in options)] + \
        [tuple(rng.choice(o) for o in options) for _ in range(n)]


@pytest.mark.parametrize("cpes", [64, 8, 1])
def test_lower_bound_is_below_every_orders_estimate(cpes):
    """For every sampled tiling and every order the search weighs, the
    tiling's lower bound (Tilings.lower_bounds, all tilings in one array) <=
    the estimate, with the serial loops as the search has them;
    nest_cycles_floor <= nest_cycles. A bound above an estimate would let
    the search skip a plan it would have chosen. The array's bound is the
    scalar formula's, to the last bit."""
    m = Machine()
    checked = 0
    for nest, _ in nests():
        floor = nest_cycles_floor(nest)
        tilings = sample_tilings(nest)
        forms = Tilings(nest, tilings)
        for serial in (frozenset(), frozenset({1})):
            bounds = forms.lower_bounds(cpes, floor, serial, m)
            for k, tiles in enumerate(tilings):
                assert bounds[k] == scalar_lower_bound(nest, tiles, forms.row(k), cpes, floor,
                                                       serial, m)
                with tiled(nest, tiles):
                    cycles = nest_cycles(nest)
                    assert floor <= cycles
                    for order in orders(nest):
                        assert bounds[k] <= estimate(nest, order, cpes, cycles, serial, m,
                                                     forms.row(k)), (tiles, order, serial)
                        checked += 1
    assert checked > 500


def scalar_lower_bound(nest: Nest, tiles: tuple[int, ...], shapes: dict, cpes: int,
                       floor: float, serial: frozenset[int], m: Machine) -> float:
    """The lower bound one tiling at a time, in Python numbers (the search's
    code before issue 25's numpy forms): the compute floor over the tasks the
    parallel loops give, each tensor copied once per tile of the loops it
    depends on, a broadcast where cheaper, one-element tiles loaded directly."""
    ntiles = [-(-v.extent // t) for v, t in zip(nest.vars, tiles)]
    tasks = math.prod(n for i, (v, n) in enumerate(zip(nest.vars, ntiles))
                      if not v.reduction and i not in serial)
    total = floor / min(cpes, tasks) / m.clock_hz
    for t, (nbytes, runs, dmas, single) in shapes.items():
        if t.read and not t.written and single:
            total += sum(direct_seconds(nest, t, m, cpes))
            continue
        init = bool(nest.red) and nest.initialised and t.base is nest.output
        moves = (t.copied_in and not init) + t.written
        copies = moves * math.prod(n for v, n in zip(nest.vars, ntiles)
                                   if v.iv in corr(t) and not (init and v.reduction))
        gets = sum(get_seconds(m, copies, nbytes, runs, dmas, cpes))
        if cpes == 64 and t.read and not t.written:
            gets = min(gets, broadcast_seconds(m, copies, cpes, nbytes, runs, dmas))
        total += gets
    return total


def scalar_dmas(ext: list[int], shape: tuple[int, ...], runs: int) -> int:
    """DMAs per copy one tile at a time: runs with one pitch share a strided
    DMA (the runs across the dimension outside the innermost partial one)."""
    for d in reversed(range(len(ext))):
        if ext[d] < shape[d]:
            return max(1, runs // ext[d - 1]) if d > 0 else 1
    return 1


def test_tilings_arrays_equal_the_scalar_forms():
    """The numpy forms over many tilings at once give, for each tiling, the
    tile bytes, runs, DMAs per copy, single-element flag and LDM use that
    the scalar forms give (Tensor.bytes, runs_of, scalar_dmas,
    Nest.ldm_bytes); the one-task flag is Search's rule, serial loops
    included."""
    for nest, ctx in nests():
        outputs = [(i, v) for i, v in enumerate(nest.vars) if not v.reduction]
        for double in (False, True):
            nest.double = double
            tilings = sample_tilings(nest)
            forms = Tilings(nest, tilings)
            ldm = forms.ldm_bytes()
            # every output loop serial: one task is then no loss
            every = frozenset(i for i, _ in outputs)
            one, none = forms.one_task(frozenset({1})), forms.one_task(every)
            assert not none.any()
            for k, tiles in enumerate(tilings):
                with tiled(nest, tiles):
                    scalar = nest.tiles()
                    for t, (nbytes, runs, dmas, single) in forms.row(k).items():
                        ext = t.extents(scalar)
                        assert nbytes == t.bytes(scalar)
                        assert runs == runs_of(ext, t.shape)
                        assert dmas == scalar_dmas(ext, t.shape, runs)
                        assert single == (t.elements(scalar) == 1)
                    assert ldm[k] == nest.ldm_bytes()
                    assert one[k] == all(v.tile >= v.extent for _, v in outputs)
        nest.double = False


def test_pruning_changes_neither_the_plan_nor_the_finalists(monkeypatch):
    """A search that prunes and one that scores every tiling choose the same
    plan from the same best ALIGNED_SCAN estimates (where the finalists come
    from); the pruning skipped some tilings."""
    runs = []
    for prune in (True, False):
        if not prune:
            monkeypatch.setattr(Search, "hopeless", lambda self, bound, best: False)
        out = []
        for nest, ctx in nests():
            s = Search(nest, ctx)
            order, chose, _ = s.run()
            ranked = sorted((v, k) for k, v in s.seen.items() if k != s.greedy)
            out.append(([v.tile for v in nest.vars], [nest.vars.index(v) for v in order],
                        chose, ranked[:ALIGNED_SCAN], s.pruned, len(s.scored)))
        runs.append(out)
    for pruned, every in zip(*runs):
        assert pruned[:4] == every[:4]
        assert every[4] == 0
    assert sum(r[4] for r in runs[0]) > 0
    assert sum(r[5] for r in runs[0]) < sum(r[5] for r in runs[1])


def test_vector_plan_memo_gives_the_plans_of_a_fresh_analysis():
    """tile_plan with the search's memo, asked for many trip counts in a row,
    makes the plan (kind, v, m, block) and cost that a call without a memo
    makes."""
    nest, _ = nests()[0]
    memo: dict = {}
    ivs = [v.iv for v in nest.vars]
    compared = 0
    for tiles in sample_tilings(nest, 300):
        kept = tile_plan(nest.body, ivs, list(tiles), memo)
        fresh = tile_plan(nest.body, ivs, list(tiles))
        assert (kept is None) == (fresh is None)
        if kept is None:
            continue
        assert (kept.kind, kept.v, kept.m, kept.M, kept.U, kept.fused) == \
            (fresh.kind, fresh.v, fresh.m, fresh.M, fresh.U, fresh.fused)
        assert body_cost(nest.body, kept) == body_cost(nest.body, fresh)
        compared += 1
    assert compared > 100
    assert any(key[0] == "reduce" for key in memo)


RENAMED = """
module "deps"
stage loop
kernel @copy(%A: buf<64 x f32>, %B: buf<64 x f32>) {
  for %i = 0 to 64 {
    %a = load %A[%i] : f32
    store %a, %B[%i]
  }
}
kernel @again(%P: buf<64 x f32>, %Q: buf<64 x f32>) {
  for %j = 0 to 64 {
    %c = load %P[%j] : f32
    store %c, %Q[%j]
  }
}
kernel @scan(%B: buf<64 x f32>, %C: buf<64 x f32>) {
  for %k = 0 to 63 {
    %p = load %B[%k] : f32
    %q = load %B[%k + 1] : f32
    %s = add %p, %q : f32
    store %s, %B[%k + 1]
  }
}
"""


def test_dependences_are_remembered_by_canonical_text(monkeypatch):
    """The first two kernels differ only in names: the dependence test runs
    once for both. The third (a running sum over %B) is another text; its
    answer is the test's own (it is illegal to tile), as Nest.parse without
    the memo says."""
    runs = []
    real = Nest.dependences
    monkeypatch.setattr(Nest, "dependences", lambda self: runs.append(1) or real(self))
    kernels = parse_module(RENAMED, "<deps>").functions
    answers = []
    for f in kernels:
        top = top_loops(f)[0]
        nest, why = Nest.parse(top, legal=True)
        assert nest is not None, why
        answers.append(ldm_plan.dependences(f, 0, nest))
        _, why_unmemoised = Nest.parse(top)
        assert answers[-1][0] == why_unmemoised
    assert len(runs) == 2
    assert answers[0] == answers[1] == ("", frozenset())
    assert answers[2][0].startswith("a dependence crosses its output loops")
    texts = [ldm_search.canonical_kernel(f, 0) for f in kernels]
    assert texts[0][0] == texts[1][0] != texts[2][0]
    assert (texts[0][1], texts[1][1]) == (["i"], ["j"])


def test_carried_loops_come_from_the_remembered_test():
    """A reduction over %j carries a dependence: the remembered answer marks
    loop 1 serial, as carried_dependence does, and -ldm-plan plans the
    kernel the same with a cold and a warm memo (one entry: the pass found
    the answer the test had asked for)."""
    text = """
module "red"
stage loop
kernel @k(%A: buf<32 x 64 x f32>, %Y: buf<32 x f32>) {
  %zero = const 0.0 : f32
  for %i = 0 to 32 {
    store %zero, %Y[%i]
    for %j = 0 to 64 {
      %y = load %Y[%i] : f32
      %a = load %A[%i, %j] : f32
      %s = add %y, %a : f32
      store %s, %Y[%i]
    }
  }
}
"""
    from swir.printer import print_module
    outs = []
    for _ in range(2):
        m = parse_module(text, "<red>")
        f = m.functions[0]
        nest, _ = Nest.parse(top_loops(f)[0], legal=True)
        assert ldm_plan.dependences(f, 0, nest) == ("", frozenset({1}))
        ldm_plan.LDMPlan(ldm_size=4096, strategy="search").run(m, AnalysisManager())
        outs.append(print_module(m))
    assert outs[0] == outs[1]
    assert len(memo(ldm_plan.DEPENDENCES)) == 1


def test_searches_in_two_threads_at_once_each_get_their_own_nests(monkeypatch):
    """Two threads of one process planning different kernels with forked
    searches at once (the ONNX tests compile two models in threads): each
    gets the plans a lone, one-process search makes. Before, the workers
    read their nests from a module global that the other thread could
    overwrite before the fork, and planned the wrong nests."""
    import threading

    from swir import parallel
    from swir.printer import print_module

    def planned(jobs: int, ldm: int) -> str:
        m = conv_kernels()
        ldm_plan.LDMPlan(ldm_size=ldm, strategy="search", jobs=jobs).run(m, AnalysisManager())
        return print_module(m)

    sizes = (16 * 1024, 64 * 1024)
    alone = {ldm: planned(1, ldm) for ldm in sizes}
    forked = []
    real = ldm_plan.search_all
    monkeypatch.setattr(ldm_plan, "search_all",
                        lambda work, *a: forked.append(len(work)) or real(work, *a))
    sentinel = [("not", "this")]
    monkeypatch.setattr(parallel, "_ITEMS", sentinel)
    for _ in range(3):
        ldm_plan._DECISIONS.clear()         # searched again, in forked workers
        got: dict[int, str] = {}
        threads = [threading.Thread(target=lambda ldm=ldm: got.update({ldm: planned(2, ldm)}))
                   for ldm in sizes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert got == alone
    assert len(forked) == 6 and min(forked) >= 2
    assert parallel._ITEMS is sentinel   # the parent's global is not the workers' input
