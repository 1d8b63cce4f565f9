"""-insert-dma, checked numerically: every graph op through graph -> loop ->
buffered -> dma runs on 64 simulated CPEs (private LDM, reply words, data in
flight until waited) and gives the graph-stage result; the paper matmul's
counted DMA traffic equals the closed form of its plan."""

from __future__ import annotations

import numpy as np
import pytest
from siblings import sibling

from swir.interp.dma import DMAInterpreter
from swir.interp.run import run_function
from swir.parser import parse_module
from swir.passes.buffered.ldm_plan import LDMPlan
from swir.passes.dma.insert_dma import InsertDMA
from swir.passes.loop.lower_loops import LowerLoops
from swir.passes.manager import AnalysisManager
from swir.printer import print_module
from swir.verifier import verify

_cases = sibling("test_ldm_plan")   # the every-graph-op case table and its helpers
CASES, build, inputs, assert_matches_graph = (_cases.CASES, _cases.build, _cases.inputs,
                                              _cases.assert_matches_graph)


def to_dma(text: str, ldm_size: int = 65536, double: bool = False, resident: bool = True,
           broadcast: bool = True):
    m = parse_module(text, "<case>")
    for p in (LowerLoops(), LDMPlan(ldm_size=ldm_size, double_buffer=double, resident=resident),
              InsertDMA(double_buffer=double, broadcast=broadcast)):
        p.run(m, AnalysisManager())
    verify(m)
    assert print_module(parse_module(print_module(m), "<printed>")) == print_module(m)
    return m


@pytest.mark.parametrize("ldm_size", [65536, 2048])
@pytest.mark.parametrize("double", [False, True], ids=["single", "double-buffered"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_dma_stage_computes_the_graph_result(case, double, ldm_size):
    """At 64 KB and at 2 KB of LDM (many tiles, remainder tiles in several
    dimensions, fused parallel indices)."""
    op, types, attrs = case
    text = build(op, types, attrs)
    args = inputs(op, types, (op, str(types)))
    g = parse_module(text, "<case>")
    want = run_function(g, g.lookup("main"), args)
    m = to_dma(text, ldm_size=ldm_size, double=double)
    interp = DMAInterpreter(m, ".")
    got = interp.call(m.lookup("main"), [a.reshape(a.shape or (1,)) for a in args])
    assert all(s.ldm_peak <= ldm_size for s in interp.kernel_stats.values())
    assert_matches_graph(op, g, args, want, got)


# Shapes where a lowering rule left code beside the loops -ldm-plan spreads over
# the CPEs, which -insert-dma refused ("'load' beside its parallel loops"): a
# 0-d index on axis 0 (exporters' q, k, v = qkv[0], qkv[1], qkv[2]), a softmax
# or a full reduction whose whole tensor is one row. Last: the index data.
T = _cases.T
DEGENERATE = [
    ("gather", [T((3, 17, 64)), T((), "i64")], {"axis": 0}, [1]),
    ("gather", [T((3, 17, 64)), T((), "i64")], {"axis": 0}, [-3]),
    ("gather", [T((5,)), T((), "i64")], {"axis": 0}, [-2]),
    ("gather", [T((2, 5, 3)), T((), "i32")], {"axis": 1}, [4]),
    ("softmax", [T((1000,))], {}, None),
    ("log_softmax", [T((13,))], {"axis": 0}, None),
    ("reduce_max", [T((1, 1))], {}, None),
    ("reduce_sum", [T((7, 13))], {"keepdims": False}, None),
    ("reduce_mean", [T((1, 300))], {"axes": [1]}, None),
    ("relu", [T(())], {}, None),
]


@pytest.mark.parametrize("double", [False, True], ids=["single", "double-buffered"])
@pytest.mark.parametrize("case", DEGENERATE, ids=lambda c: f"{c[0]}-{[str(t) for t in c[1]]}")
def test_degenerate_shapes_reach_the_dma_stage(case, double):
    op, types, attrs, index = case
    text = build(op, types, attrs)
    args = inputs(op, types, (op, str(types)))
    if index is not None:
        args[1] = np.array(index, dtype=args[1].dtype).reshape(types[1].shape)
    g = parse_module(text, "<case>")
    want = run_function(g, g.lookup("main"), args)
    m = to_dma(text, ldm_size=2048, double=double)
    got = DMAInterpreter(m, ".").call(m.lookup("main"), [a.reshape(a.shape or (1,))
                                                          for a in args])
    assert_matches_graph(op, g, args, want, got)


PAPER = """
module "paper"
stage graph
func @main(%a: <1 x 1024 x f32>, %b: <1024 x 1024 x f32>) -> <1 x 1024 x f32> {
'entry:
  %c = matmul %a, %b : <1 x 1024 x f32>
  return %c
}
"""


def test_paper_matmul_dma_traffic_is_the_closed_form_of_its_plan():
    """Plan y = 128 (8 tiles), k = 64 (16 tiles): per y tile and k tile one
    get of A's 64 floats and one strided get of B's 64 x 128 tile; per y tile
    one put of C's 128 floats. So 8*16*2 = 256 gets moving 8*16*(64 + 8192)*4
    = 4,227,072 bytes (A read 8 times, B exactly once), and 8 puts of 512
    bytes = 4,096 bytes; one wait per k step and one per put. (The paper's
    plan: resident=false.)"""
    m = to_dma(PAPER, resident=False)
    interp = DMAInterpreter(m, ".")
    rng = np.random.default_rng(7)
    a = rng.standard_normal((1, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 1024)).astype(np.float32)
    (c,) = interp.call(m.lookup("main"), [a, b])
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    s = interp.kernel_stats["matmul_0"]
    assert (s.gets, s.puts) == (8 * 16 * 2, 8)
    assert s.bytes_in == 8 * 16 * (64 + 64 * 128) * 4 == 4_227_072
    assert s.bytes_out == 1024 * 4
    assert s.waits == 8 * 16 + 8
    # LDM buffers are per CPE and allocated once per kernel (static arrays in C).
    assert s.ldm_peak_cpe == [33536] * 64


@pytest.mark.parametrize("broadcast", [True, False], ids=["broadcast", "per-cpe"])
def test_paper_matmul_with_a_whole_and_its_closed_form(broadcast):
    """swir's default plan keeps A whole (4 KB, read alike by all 8 y tiles):
    one copy at the top of the parallel loop, which -insert-dma makes one
    broadcast for all 64 CPEs (counted once in gets and bytes_in, 64 times in
    bcast_bytes; no wait) or, with broadcast=false, one get per CPE that has
    tiles. B and C move as in the paper's plan; the result is the same."""
    m = to_dma(PAPER, broadcast=broadcast)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((1, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 1024)).astype(np.float32)
    interp = DMAInterpreter(m, ".")
    (c,) = interp.call(m.lookup("main"), [a, b])
    ref = DMAInterpreter(to_dma(PAPER, resident=False), ".")
    (c0,) = ref.call(ref.module.lookup("main"), [a, b])
    np.testing.assert_array_equal(c, c0)       # the same sums in the same order
    s = interp.kernel_stats["matmul_0"]
    a_gets = 1 if broadcast else 8
    assert (s.gets, s.puts) == (a_gets + 8 * 16, 8)
    assert s.bytes_in == a_gets * 4096 + 8 * 16 * 64 * 128 * 4
    assert s.waits == 8 * 16 + 8 + (0 if broadcast else 8)
    assert (s.bcasts, s.bcast_bytes) == ((1, 64 * 4096) if broadcast else (0, 0))
    assert s.ldm_peak_cpe == [4 * (128 + 1024 + 64 * 128)] * 64


def test_double_buffering_overlaps_the_next_tile_and_moves_the_same_bytes():
    """With room planned for it, the paper matmul's k loop prefetches tile
    k+1 into a second buffer pair on alternating reply words: the same gets
    and bytes as the single-buffered code of the same plan, the same result,
    and twice the input buffers in LDM."""
    single, double = to_dma(PAPER, resident=False), to_dma(PAPER, double=True, resident=False)
    assert "_next" in print_module(double) and "_next" not in print_module(single)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((1, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 1024)).astype(np.float32)
    d = DMAInterpreter(double, ".")
    (c2,) = d.call(double.lookup("main"), [a, b])
    # The double-buffer-aware plan is y = 64, k = 64: 16 y tiles, 16 k tiles.
    s = d.kernel_stats["matmul_0"]
    assert (s.gets, s.puts) == (16 * 16 * 2, 16)
    assert s.bytes_in == 16 * 16 * (64 + 64 * 64) * 4
    assert max(s.ldm_peak_cpe) == (64 + 2 * 64 + 2 * 64 * 64) * 4
    (c1,) = DMAInterpreter(single, ".").call(single.lookup("main"), [a, b])
    np.testing.assert_allclose(c2, c1, rtol=1e-5, atol=1e-5)


REVIEW = __import__("pathlib").Path(__file__).parents[1] / "Inputs" / "insert-dma"


@pytest.mark.parametrize("name", ["fused-remainder", "get-then-put", "store-before-loop",
                                  "prefix-sum"])
@pytest.mark.parametrize("double", [False, True], ids=["single", "double-buffered"])
def test_hand_written_buffered_modules_keep_their_meaning(name, double):
    """Regressions found in review: remainder extents over fused parallel
    indices (floordiv / mod guards), a loop of only a get and a put (its get
    must be waited for), a buffer written before a double-buffered loop, and
    a loop whose tiles depend on each other through main memory (no
    prefetch). The dma stage computes what the buffered stage computes."""
    from swir.interp.buffered import BufferedInterpreter
    text = (REVIEW / f"{name}.swir").read_text()
    buffered = parse_module(text, name)
    m = parse_module(text, name)
    InsertDMA(double_buffer=double).run(m, AnalysisManager())
    verify(m)
    f = buffered.lookup("main")
    x = np.arange(1, f.params[0].type.num_elements + 1, dtype=np.float32).reshape(
        f.params[0].type.shape)
    want = BufferedInterpreter(buffered, ".").call(f, [x])
    got = DMAInterpreter(m, ".").call(m.lookup("main"), [x])
    for w, o in zip(want, got):
        np.testing.assert_array_equal(o, w)


# Convs and a matmul with a tensor every tile reads alike: -ldm-plan's search
# plans them, -insert-dma broadcasts it once before the tiles (the convs'
# padded inputs, halo filled in LDM after the transfer; the matmul's B), and
# the dma stage, where each CPE is checked to reach the same broadcasts,
# gives the graph result. (Broadcasts in each round of a tile loop: the
# lock-step test below and test/Transforms/InsertDMA/lockstep-broadcast.swir.)
BROADCAST = [
    ("conv2d", [T((1, 8, 9, 9)), T((64, 8, 3, 3)), T((64,))], {"pad": [1, 1, 1, 1]}),
    ("conv2d", [T((1, 8, 12, 12)), T((128, 8, 3, 3))], {"pad": [1, 1, 1, 1],
                                                         "stride": [2, 2]}),
    ("matmul", [T((128, 96)), T((96, 48))], {}),
]


@pytest.mark.parametrize("case", BROADCAST, ids=lambda c: f"{c[0]}-{c[1][0].shape}")
def test_broadcast_plans_compute_the_graph_result(case):
    op, types, attrs = case
    text = build(op, types, attrs)
    args = inputs(op, types, (op, str(types)))
    g = parse_module(text, "<case>")
    want = run_function(g, g.lookup("main"), args)
    m = parse_module(text, "<case>")
    # resident=false: tensors this small would be kept whole; tiled, as
    # larger ones are, their tiles are what is broadcast
    insert = InsertDMA()
    for p in (LowerLoops(), LDMPlan(strategy="search", resident=False), insert):
        p.run(m, AnalysisManager())
    verify(m)
    assert insert.statistics.get("tiles broadcast (fetched once for every CPE)", 0) >= 1
    interp = DMAInterpreter(m, ".")
    got = interp.call(m.lookup("main"), [a.reshape(a.shape or (1,)) for a in args])
    assert_matches_graph(op, g, args, want, got)


@pytest.mark.parametrize("double", [False, True], ids=["single", "double-buffered"])
def test_lock_step_broadcast_of_a_padded_tile_keeps_its_meaning(double):
    """A padded conv input tile fetched in each round of a tile loop every
    CPE runs alike (test/Inputs/insert-dma/lockstep-padded.swir) is
    broadcast, halo and staged move included, and the dma stage computes
    what the buffered stage computes (its broadcasts checked per CPE)."""
    from swir.interp.buffered import BufferedInterpreter
    text = (REVIEW / "lockstep-padded.swir").read_text()
    buffered = parse_module(text, "lockstep")
    m = parse_module(text, "lockstep")
    insert = InsertDMA(double_buffer=double)
    insert.run(m, AnalysisManager())
    verify(m)
    assert insert.statistics.get("tiles broadcast in lock-step tile loops") == 1
    loop = next(i for i in m.lookup("conv").walk()
                if i.opname == "for" and "ico" in (i.regions[0].blocks[0].args[0].name or ""))
    assert [i.opname for i in loop.walk()].count("dma_bcast") >= 1
    rng = np.random.default_rng(24)
    f = buffered.lookup("main")
    args = [rng.standard_normal(p.type.shape).astype(np.float32) for p in f.params[:2]]
    want = BufferedInterpreter(buffered, ".").call(f, args)
    interp = DMAInterpreter(m, ".")
    got = interp.call(m.lookup("main"), args)
    assert interp.kernel_stats["conv"].bcasts == 2    # one per round, for all 64 CPEs
    for w, o in zip(want, got):
        np.testing.assert_array_equal(o, w)


def test_the_broadcast_decision_charges_what_the_cost_model_charges():
    """-insert-dma's own broadcast estimate (it may not import the cost
    model) equals Machine.bcast_seconds on each target's figures: one
    BCAST_MODE stream on the SW26010, CPE 0's get and two RMA hops on the Pro."""
    from swir.costmodel.cost import Machine
    from swir.passes.dma.insert_dma import broadcast_seconds
    from swir.target import SW26010, SW26010_PRO
    for target in (SW26010, SW26010_PRO):
        for blocks in ([(4096, 1)], [(512, 64), (128, 1)], [(32, 3)]):
            got = broadcast_seconds(blocks, target)
            assert got == pytest.approx(Machine.for_target(target).bcast_seconds(blocks),
                                        rel=1e-12)
    assert broadcast_seconds([(4096, 1)], SW26010_PRO) != broadcast_seconds([(4096, 1)], SW26010)
