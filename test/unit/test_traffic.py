"""swir.costmodel.traffic: the DMA counters of a dma-stage module counted from
its structure equal, exactly, what the dma-stage interpreter counts when it
runs the module — on every graph-op configuration of test_codegen (lowered
with swir-cg's pipeline at 64 KB and 2 KB of LDM, no C compiled), the bundled
examples, the paper's matmul, and hand-written modules (if guards, remainder
tiles, strided DMAs with a short last block, kernels called from cpe
kernels with index arguments, nests deeper than Python nests blocks, a cpe
kernel run on its own). Where the count is not static (a data-dependent
branch around a spawn, an input or data as a loop bound) it is an error,
never a guess.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest
from siblings import sibling
from swir.passes.pipelines import compile_pipeline

from swir.costmodel.traffic import TrafficError, dma_traffic
from swir.codegen import emulate
from swir.interp.dma import DMAInterpreter
from swir.kernels import dtype_of
from swir.interp.loop import io_signature
from swir.interp.arguments import default_function
from swir.ir.types import ShapedType
from swir.parser import parse_module
from swir.passes import pass_class
from swir.passes.manager import PassManager
from swir.verifier import verify

REPO = Path(__file__).parents[2]
EXAMPLES = REPO / "examples"


_codegen = sibling("test_codegen")
CASES, LDM_SIZES = _codegen.CASES, _codegen.LDM_SIZES


def lower(text: str, ldm_size: int = 65536, name: str = "<test>", resident: bool = True):
    """What swir-cg compiles: the module after what is left of its pipeline
    for the module's stage (test_codegen.lower, for any stage)."""
    m = parse_module(text, name)
    verify(m)
    # -O0: the figures below were measured before graph optimisation existed
    passes = [pass_class(n)() for n in compile_pipeline(m.stage, "O0")]
    for p in passes:
        if p.name == "ldm-plan":
            p.ldm_size = ldm_size
            p.resident = resident
    PassManager(passes, verify_each=True).run(m)
    return m


def zeros(m, func: str | None = None) -> list[np.ndarray]:
    """Arguments for a run (the traffic does not depend on the data)."""
    f = m.lookup(func) if func else default_function(m)
    ins, _ = io_signature(f)
    return [np.zeros(p.type.shape if isinstance(p.type, ShapedType) else (), dtype_of(p.type))
            for p in ins]


def assert_exact(m, args: list[np.ndarray], func: str | None = None, base: Path = Path("."),
                 max_steps: int = 10_000_000):
    """The static traffic equals the interpreter's counters after one run:
    per function (DMA_COUNTERS, spawns, calls) and in total. Returns it."""
    traffic = dma_traffic(m, func)
    interp = DMAInterpreter(m, base, max_steps=max_steps)
    interp.call(m.lookup(func) if func else default_function(m), args)
    stats = interp.stats()
    assert traffic.counters() == emulate.dma_counters(stats)
    for name, k in traffic.kernels.items():
        s = stats["functions"][name]
        assert (k.spawns, k.calls) == (s["spawns"], s["calls"]), name
    total = stats["total"]
    assert (traffic.gets, traffic.puts, traffic.bytes_in, traffic.bytes_out,
            traffic.transfers, traffic.small_share) == \
        (total["gets"], total["puts"], total["bytes_in"], total["bytes_out"],
         total["transfers"], total["small_share"])
    return traffic


# ---------------------------------------------------------------------------
# Lowered graph programs
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("ldm_size", LDM_SIZES)
@pytest.mark.parametrize("index", range(len(CASES)), ids=[c[0] for c in CASES])
def test_graph_op_configurations(index, ldm_size):
    op, types, attrs = CASES[index]
    m = lower(_codegen.build(op, types, attrs), ldm_size)
    args = _codegen.inputs(op, types, (op, str(types)))
    assert_exact(m, [a.reshape(a.shape or (1,)) for a in args])   # 0-d: a buf<1 x T>


def test_the_configurations_move_data():
    """The comparisons above are not all of empty counters."""
    op, types, attrs = CASES[0]
    t = dma_traffic(lower(_codegen.build(op, types, attrs), 2048))
    assert t.gets and t.puts and t.total.spawns


@pytest.mark.parametrize("ldm_size", LDM_SIZES)
def test_mlp_example(ldm_size):
    m = lower((EXAMPLES / "mlp.swir").read_text(), ldm_size, str(EXAMPLES / "mlp.swir"))
    assert_exact(m, [np.load(EXAMPLES / "mlp_input.npy")], base=EXAMPLES)


@pytest.mark.parametrize("ldm_size", LDM_SIZES)
def test_resnet_example(ldm_size):
    """The full-size example (83 million interpreted steps, about 8 s each)."""
    path = EXAMPLES / "resnet.swir"
    m = lower(path.read_text(), ldm_size, str(path))
    t = assert_exact(m, [np.load(EXAMPLES / "resnet_input.npy")], base=EXAMPLES,
                     max_steps=200_000_000)
    if ldm_size == 65536:   # docs/performance.md, measured by running the generated C
        # 35 kernels run: 33 spawns, 2 of them after a barrier inside a spawn
        # (the padded convs' fill and copy nests are folded into their tile
        # loads); tiles every CPE reads alike are broadcast, before the tiles
        # or in each round of tiles when every CPE runs as many (35 broadcasts)
        assert (t.gets, t.puts, t.total.spawns, t.total.barriers) == (1699, 678, 33, 2)
        assert (t.total.bcasts, t.bytes_in) == (35, 2_056_584)


def test_paper_matmul():
    """8 CPEs each compute one 128-column tile of C = A (1x1024) . B
    (1024x1024): per tile 16 k-steps each getting B's 64 x 128 tile (32 KB,
    strided) and A's 64 elements (256 B), then one put of 128 elements (the
    paper's plan, resident=false)."""
    path = REPO / "test" / "CodeGen" / "paper-matmul.swir"
    m = lower(path.read_text(), 65536, str(path), resident=False)
    t = assert_exact(m, zeros(m))
    k = t.kernels["matmul_0"]
    assert (k.gets, k.bytes_in) == (8 * 16 * 2, 8 * 16 * (64 * 128 * 4 + 64 * 4)) \
        == (256, 4_227_072)
    assert (k.puts, k.bytes_out) == (8, 8 * 128 * 4) == (8, 4096)
    # Blocks: B's tile is 64 rows of 512 bytes; A's 256 bytes and C's 512 are one each.
    assert k.block_histogram == {256: 8 * 16, 512: 8 * 16 * 64 + 8}
    assert (k.spawns, k.calls) == (1, 64)


def test_resnet18_at_224_matches_the_generated_program():
    """docs/performance.md's ResNet-18 figures, counted by running the
    generated C (the interpreter cannot finish it); here without running."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import resnet18_graph
    finally:
        sys.path.pop(0)
    m = lower(resnet18_graph.Net(1, 224).build(), 65536)
    t = dma_traffic(m)
    # 70 kernels run, each its own spawn (no padded-copy nests left to share one)
    assert (t.gets, t.puts, t.total.spawns, t.total.barriers) == (164_403, 12_319, 70, 0)
    assert (t.bytes_in, t.bytes_out, t.total.bcasts) == (311_636_464, 32_927_552, 125)
    assert round(100 * t.small_share, 1) == 7.4


# ---------------------------------------------------------------------------
# Hand-written dma-stage modules
# ---------------------------------------------------------------------------

HAND = """\
module "hand"
stage dma {ldm_size = 65536}

// 1000 elements in 16 tiles of 64 over the CPEs (one tile each on CPEs
// 0..15); the last tile is a remainder of 40, behind an if guard.
cpe kernel @tiles(%A: buf<1000 x f32>, %B: buf<1000 x f32>) {
  %id = cpe_id : index
  %lo, %hi = chunk %id {extent = 16, workers = 64} : index, index
  %L = ldm_alloc : ldm<64 x f32>
  for %t = %lo to %hi {
    if %t < 15 {
      dma_get %A[64*%t] -> %L {count = 64, reply = 0}
      dma_wait {reply = 0, times = 1}
      dma_put %L -> %B[64*%t] {count = 64, reply = 1}
      dma_wait {reply = 1, times = 1}
    } else {
      dma_get %A[64*%t] -> %L {count = 40, reply = 0}
      dma_wait {reply = 0, times = 1}
      dma_put %L -> %B[64*%t] {count = 40, reply = 1}
      dma_wait {reply = 1, times = 1}
    }
  }
}

// Column block %j of 4 (12 blocks of 4 elements and a last one of 2),
// fetched on the CPEs below %j and put back three times.
cpe kernel @column(%M: buf<13 x 40 x f32>, %N: buf<13 x 40 x f32>, %j: index) {
  %id = cpe_id : index
  %T = ldm_alloc : ldm<50 x f32>
  if %j >= 0, %j < 10, %id < %j {
    dma_get %M[0, 4*%j] -> %T {count = 50, bsize = 4, stride = 36, reply = 2}
    dma_wait {reply = 2, times = 1}
    for %r = 0 to 3 {
      dma_put %T -> %N[0, 4*%j] {count = 50, bsize = 4, stride = 36, reply = 3}
      dma_wait {reply = 3, times = 1}
    }
  }
}

cpe kernel @columns(%M: buf<13 x 40 x f32>, %N: buf<13 x 40 x f32>, %k: index) {
  for %j = 0 to %k {
    call @column(%M, %N, %j)
  }
}

// 14 nested loops whose variables all decide (more than Python nests).
cpe kernel @deep(%A: buf<1000 x f32>) {
  %id = cpe_id : index
  %L = ldm_alloc : ldm<4 x f32>
  if %id == 0 {
    for %i0 = 0 to 2 { for %i1 = 0 to 2 { for %i2 = 0 to 2 { for %i3 = 0 to 2 {
    for %i4 = 0 to 2 { for %i5 = 0 to 2 { for %i6 = 0 to 2 { for %i7 = 0 to 2 {
    for %i8 = 0 to 2 { for %i9 = 0 to 2 { for %i10 = 0 to 2 { for %i11 = 0 to 2 {
    for %i12 = 0 to 2 { for %i13 = 0 to 3 {
      if %i0 + %i1 + %i2 + %i3 + %i4 + %i5 + %i6 + %i7 + %i8 + %i9 + %i10 + %i11 + %i12 + %i13 >= 9 {
        dma_get %A[%i13] -> %L {count = 1, reply = 0}
        dma_wait {reply = 0, times = 1}
      }
    } } } } } } } } } } } } } }
  }
}

host func @main(%a: buf<1000 x f32>, %m: buf<13 x 40 x f32>, %b: buf<1000 x f32>, %n: buf<13 x 40 x f32>) attributes {outputs = 2} {
'entry:
  %k = const 10 : index
  %yes = const true : i1
  spawn @tiles(%a, %b)
  join
  br 'next(%k)
'next(%kk: index):
  cond_br %yes, 'more, 'done
'more:
  spawn @columns(%m, %n, %kk)
  join
  spawn @columns(%m, %n, %kk)
  join
  spawn @deep(%a)
  join
  br 'done
'done:
  return
}
"""


def _parse(text: str):
    m = parse_module(text, "<test>")
    verify(m)
    return m


def test_hand_written_module():
    m = _parse(HAND)
    t = assert_exact(m, zeros(m))
    tiles, column, deep = t.kernels["tiles"], t.kernels["column"], t.kernels["deep"]
    # 15 full tiles of 256 bytes and the remainder of 160, each way.
    assert (tiles.gets, tiles.puts, tiles.waits) == (16, 16, 32)
    assert tiles.bytes_in == tiles.bytes_out == 15 * 256 + 160
    assert tiles.size_histogram == {256: 30, 128: 2}
    # Column j is fetched on the j CPEs below it: 0 + 1 + ... + 9 = 45 per spawn.
    assert (column.gets, column.puts) == (2 * 45, 2 * 45 * 3)
    assert column.block_histogram == {16: 12 * 360, 8: 360}
    assert (column.calls, t.kernels.get("columns")) == (2 * 64 * 10, None)
    # The tuples (i0..i12 in {0, 1}, i13 in {0, 1, 2}) summing to 9 or more.
    n = sum(sum(v) >= 9 for v in itertools.product(*[range(2)] * 13, range(3)))
    assert (deep.gets, deep.waits, deep.spawns, deep.calls) == (n, n, 1, 64)


def test_cpe_kernel_run_on_its_own():
    """swir-run --func: a cpe kernel runs on every CPE, as one spawn."""
    m = _parse(HAND)
    t = assert_exact(m, zeros(m, "tiles"), func="tiles")
    assert (t.kernels["tiles"].spawns, t.kernels["tiles"].calls) == (1, 64)


def test_deeply_nested_ifs():
    body = "dma_get %A[%i] -> %L {count = 1, reply = 0}\ndma_wait {reply = 0, times = 1}\n"
    for k in range(70):
        body = f"if %i >= {k % 5} {{\n{body}}}\n"
    m = _parse(f"module \"ifs\"\nstage dma\ncpe kernel @k(%A: buf<64 x f32>) {{\n"
               f"%L = ldm_alloc : ldm<1 x f32>\nfor %i = 0 to 64 {{\n{body}}}\n}}\n")
    assert assert_exact(m, zeros(m)).gets == 60 * 64


# ---------------------------------------------------------------------------
# Not static: errors, not guesses
# ---------------------------------------------------------------------------

BRANCHY = """\
module "branchy"
stage dma

cpe kernel @copy(%A: buf<64 x f32>, %B: buf<64 x f32>) {
  %id = cpe_id : index
  %L = ldm_alloc : ldm<1 x f32>
  dma_get %A[%id] -> %L {count = 1, reply = 0}
  dma_wait {reply = 0, times = 1}
  dma_put %L -> %B[%id] {count = 1, reply = 1}
  dma_wait {reply = 1, times = 1}
}

host func @main(%p: i1, %a: buf<64 x f32>, %b: buf<64 x f32>) attributes {outputs = 1} {
'entry:
  spawn @copy(%a, %b)
  join
  cond_br %p, 'again, 'done
'again:
  SECOND
  br 'done
'done:
  return
}
"""


def test_data_dependent_branch_around_a_spawn():
    m = _parse(BRANCHY.replace("SECOND", "spawn @copy(%b, %a)\n  join"))
    with pytest.raises(TrafficError, match=r"@main is not static: the cond_br on %p"):
        dma_traffic(m)


def test_data_dependent_branch_after_the_last_spawn():
    """Nothing after the branch moves data: the count is static."""
    m = _parse(BRANCHY.replace("SECOND", "%z = const 0 : index"))
    t = assert_exact(m, [np.array(True)] + zeros(m)[1:])
    assert (t.gets, t.puts) == (64, 64)


def test_lowered_graph_branch_is_not_static():
    """A graph-level cond_br on an input (swir-cg's test input) becomes host
    code choosing between spawns."""
    path = REPO / "test" / "Inputs" / "codegen" / "host-branches.swir"
    m = lower(path.read_text(), 65536, str(path))
    with pytest.raises(TrafficError, match="@main is not static"):
        dma_traffic(m)


def test_host_loop_is_not_static():
    """A CFG loop (here an endless one) around a spawn."""
    m = _parse(BRANCHY.replace("SECOND", "spawn @copy(%b, %a)\n  join")
               .replace("cond_br %p, 'again, 'done", "br 'again")
               .replace("br 'done\n'done", "br 'again\n'done"))
    with pytest.raises(TrafficError, match=r"@main is not static: its CFG loops back"):
        dma_traffic(m)


BOUNDED = """\
module "bounded"
stage dma

cpe kernel @k(%A: buf<64 x f32>, %I: buf<1 x i64>, %n: index) {
  %L = ldm_alloc : ldm<1 x f32>
  %x = load %I[0] : i64
  %j = dyn_index %x {bound = 64} : index
  for %i = 0 to BOUND {
    dma_get %A[INDEX] -> %L {count = 1, reply = 0}
    dma_wait {reply = 0, times = 1}
  }
}
"""


@pytest.mark.parametrize("bound, what", [("%n", "index parameter %n of @k, an input"),
                                         ("%j", "%j, the result of 'dyn_index'")])
def test_input_or_data_as_a_loop_bound(bound, what):
    m = _parse(BOUNDED.replace("BOUND", bound).replace("INDEX", "%i mod 64"))
    with pytest.raises(TrafficError, match=f"not static: it depends on {what}"):
        dma_traffic(m, "k")


@pytest.mark.parametrize("index", ["%n mod 64", "%j"])
def test_input_or_data_only_as_a_dma_subscript(index):
    m = _parse(BOUNDED.replace("BOUND", "2").replace("INDEX", index))
    args = [np.zeros(64, np.float32), np.array([5]), np.array(7)]
    assert assert_exact(m, args, func="k").gets == 2 * 64


def test_other_stages_are_refused():
    with pytest.raises(TrafficError, match="at the dma stage"):
        dma_traffic(parse_module((EXAMPLES / "mlp.swir").read_text(), "mlp.swir"))


def test_as_dict_has_the_interpreters_keys():
    t = dma_traffic(_parse(HAND))
    d = t.kernels["tiles"].as_dict()
    assert tuple(d) == emulate.DMA_COUNTERS
    assert d["size_histogram"] == {"128": 2, "256": 30}


ALIGN = """\
module "align"
stage dma {ldm_size = 65536}

// Each CPE gets 8 f32 rows of 12 (48 bytes: not a multiple of 32) and puts
// them back into rows of 8 (32 bytes); row %id of A starts at 48 * %id bytes,
// 32-byte aligned only for even ids; row %id of B at 32 * %id bytes, always.
cpe kernel @rows(%A: buf<64 x 12 x f32>, %B: buf<64 x 8 x f32>) {
  %id = cpe_id : index
  %L = ldm_alloc : ldm<12 x f32>
  dma_get %A[%id, 0] -> %L {count = 12, reply = 0}
  dma_wait {reply = 0, times = 1}
  dma_put %L[4] -> %B[%id, 0] {count = 8, reply = 1}
  dma_wait {reply = 1, times = 1}
}
"""


def test_alignment_counts():
    """blocks_32 is exact; the unaligned counts are a DMA's executions when a
    term of its start's byte offset is not a multiple of 32: the get's main
    side (48 * %id) on every CPE, the put's LDM side (element 4, 16 bytes) on
    every CPE, the put's main side (32 * %id) never."""
    t = dma_traffic(parse_module(ALIGN, "<align>")).kernels["rows"]
    assert (t.gets, t.puts, t.blocks, t.blocks_32) == (64, 64, 128, 64)
    assert (t.mem_unaligned, t.ldm_unaligned) == (64, 64)
    interp = DMAInterpreter(parse_module(ALIGN, "<align>"))
    interp.run("rows", [np.zeros((64, 12), np.float32), np.zeros((64, 8), np.float32)])
    assert interp.kernel_stats["rows"].blocks_32 == 64


# -- register communication ------------------------------------------------------------

CODEGEN = REPO / "test" / "CodeGen"


@pytest.mark.parametrize("name, sends, recvs, vector_bytes", [
    # 8 rows x 8 steps of one broadcast and 7 receives, then 8 columns x 64
    ("reg-allgather", 8 * 8 + 8 * 64, 8 * 8 * 7 + 8 * 64 * 7, 16),
    # columns 0 and 7 of 8 rows, rows 2 and 5 of 8 columns, each one send and receive
    ("reg-swap", 32, 32, 32),
])
def test_register_messages_are_counted(name, sends, recvs, vector_bytes):
    """reg_send and reg_recv run per kernel, a broadcast one send, and the
    bytes received: 4 elements each (the emulation's counts of the same
    programs: test_reg_emulation.py)."""
    t = dma_traffic(_parse((CODEGEN / f"{name}.swir").read_text()))
    (k,) = t.kernels.values()
    assert (k.reg_sends, k.reg_recvs, k.reg_bytes) == (sends, recvs, recvs * vector_bytes)
    assert (t.total.reg_sends, t.total.reg_recvs, t.total.reg_bytes) == \
        (sends, recvs, recvs * vector_bytes)


def test_a_kernel_that_only_exchanges_registers_is_counted():
    """No DMA, no wait: its messages still make it one of the kernels, as the
    emulation's counters keep it (emulate.dma_counters)."""
    text = (CODEGEN / "reg-swap.swir").read_text()
    for dma in ("  dma_get %A[%id, 0] -> %L[0] {count = 8, reply = 0}\n",
                "  dma_wait {reply = 0, times = 1}\n",
                "  dma_put %L -> %B[%id, 0] {count = 8, reply = 1}\n",
                "  dma_wait {reply = 1, times = 1}\n"):
        assert dma in text
        text = text.replace(dma, "")
    t = dma_traffic(_parse(text))
    assert t.kernels["swap"].reg_sends == 32 and t.kernels["swap"].gets == 0
    stats = {"functions": {"swap": {**t.kernels["swap"].as_dict(), "reg_sends": 32,
                                     "reg_recvs": 32}}}
    assert emulate.dma_counters(stats) == t.counters()
