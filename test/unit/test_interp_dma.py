"""The dma-stage interpreter: the example module and a hand-written matmul
against numpy with hand-computed DMA counters; the CPE split (cpe_id, chunk);
strided and element-addressed DMAs; and every loud failure -- reading LDM
whose dma_get was not waited for, LDM overflow, DMAs outside their tensor or
LDM buffer, overwriting LDM in flight, wrong waits, unwaited DMAs at the end
of a region, spawn / join misuse -- each provoked by a wrong module and
reported at the op's location."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from swir.diagnostics import Diagnostic
from swir.interp.buffered import CPES, BufferedInterpreter, cpe_share
from swir.interp.dma import DMAInterpreter, DMAStats, size_bucket
from swir.interp.run import run_function
from swir.parser import parse_module
from swir.verifier import VerificationError, verify
from helpers import f32, in_order_matmul

ROOT = Path(__file__).resolve().parents[2]
DMA_STAGE = ROOT / "test" / "IR" / "dma-stage.swir"
SWIR_RUN = str(Path(sys.executable).parent / "swir-run")


def module(text: str, check: bool = True):
    m = parse_module(text, "<test>")
    if check:
        verify(m)
    return m


def interp(text: str, check: bool = True, **kw) -> DMAInterpreter:
    return DMAInterpreter(module(text, check), **kw)


def at(text: str, needle: str, op: str | None = None, nth: int = 0) -> str:
    """LINE:COL of the op on the nth line of text containing needle."""
    lines = [i for i, line in enumerate(text.split("\n")) if needle in line]
    i = lines[nth]
    line = text.split("\n")[i]
    word = op or needle.split()[0]
    return f"{i + 1}:{line.index(word) + 1}"


def raises(fn, *args) -> Diagnostic:
    with pytest.raises(Diagnostic) as e:
        fn(*args)
    return e.value


# -- test/IR/dma-stage.swir ------------------------------------------------------------------

@pytest.fixture(scope="module")
def example(tmp_path_factory):
    d = tmp_path_factory.mktemp("dma")
    shutil.copy(DMA_STAGE, d / "m.swir")
    w = f32(1024, 1024, seed=4)
    (d / "matmul.weights").write_bytes(w.astype("<f4").tobytes())
    m = parse_module((d / "m.swir").read_text(), str(d / "m.swir"))
    verify(m)
    return m, d, w


def test_example_runs_and_counts_its_dmas(example):
    m, d, w = example
    x, c0 = f32(1, 1024, seed=5), np.zeros((1, 1024), np.float32)
    it = DMAInterpreter(m, d)
    (c,) = it.run("matmul_0", [x, w, c0])          # a cpe kernel run on every CPE
    np.testing.assert_array_equal(c, in_order_matmul(x, w))
    s = it.kernel_stats["matmul_0"]
    # 8 column tiles on CPEs 0..7; per tile 16 k-steps of 2 gets and one wait, one put
    # and its wait.
    assert (s.spawns, s.calls) == (1, 64)
    assert (s.gets, s.puts, s.waits) == (8 * 16 * 2, 8, 8 * (16 + 1))
    assert s.bytes_in == 4 * 8 * 16 * (64 * 128 + 64) and s.bytes_out == 4 * 1024
    assert s.size_histogram == {32768: 128, 256: 128, 512: 8}
    assert s.small_transfers == 0 and s.small_share == 0.0
    # The strided B tile moves 64 blocks of 128 floats.
    assert s.blocks == 128 * 64 + 128 + 8
    assert s.block_histogram == {512: 128 * 64 + 8, 256: 128}
    # Every CPE allocates its buffers before its (possibly empty) share.
    assert s.ldm_peak_cpe == [33536] * CPES and s.ldm_peak == 33536
    # main spawns it: the same counters, main's own DMA counters are zero (DMAs count
    # where they are issued) but its LDM high-water mark includes what it spawned, as
    # for calls; a second run starts afresh.
    assert it.run("main", [x, c0]) == []
    assert it.kernel_stats["matmul_0"].gets == 256 and it.kernel_stats["main"].gets == 0
    assert it.kernel_stats["main"].ldm_peak == 33536
    assert it.dma_totals.transfers == 264 and it.dma_totals.calls == 65


def test_example_through_run_function_with_stats(example):
    m, d, w = example
    x = f32(1, 1024, seed=6)
    stats: dict = {}
    (c,) = run_function(m, m.lookup("matmul_0"), [x, w, np.zeros((1, 1024), np.float32)],
                        d, stats=stats)
    np.testing.assert_array_equal(c, in_order_matmul(x, w))
    assert stats["stage"] == "dma" and stats["function"] == "matmul_0"
    k = stats["functions"]["matmul_0"]
    assert (k["gets"], k["puts"], k["bytes_in"], k["bytes_out"]) == (256, 8, 4227072, 4096)
    assert k["size_histogram"] == {"256": 128, "512": 8, "32768": 128}
    assert stats["total"]["transfers"] == 264
    json.dumps(stats)


# -- a hand-written matmul -------------------------------------------------------------------

MATMUL = '''module "mm"
stage dma

// C = A B, A: 6 x 12, B: 12 x 40. Ten column tiles of 4 over 4 workers (3, 3, 2, 2).
cpe kernel @mm(%A: buf<6 x 12 x f32>, %B: buf<12 x 40 x f32>, %C: buf<6 x 40 x f32>) {
  %zero = const 0.0 : f32
  %id = cpe_id : index
  if %id < 4 {
    %lo, %hi = chunk %id {extent = 10, workers = 4} : index, index
    %AA = ldm_alloc : ldm<6 x 12 x f32>
    %BB = ldm_alloc : ldm<12 x 4 x f32>
    %CC = ldm_alloc : ldm<6 x 4 x f32>
    dma_get %A[0, 0] -> %AA {count = 72, reply = 0}
    dma_wait {reply = 0, times = 1}
    for %j = %lo to %hi {
      dma_get %B[0, 4*%j] -> %BB {count = 48, bsize = 4, stride = 36, reply = 0}
      dma_wait {reply = 0, times = 1}
      for %i = 0 to 6 {
        for %jj = 0 to 4 {
          store %zero, %CC[%i, %jj]
          for %k = 0 to 12 {
            %a = load %AA[%i, %k] : f32
            %b = load %BB[%k, %jj] : f32
            %c = load %CC[%i, %jj] : f32
            %m = mul %a, %b : f32
            %s = add %c, %m : f32
            store %s, %CC[%i, %jj]
          }
        }
      }
      dma_put %CC -> %C[0, 4*%j] {count = 24, bsize = 4, stride = 36, reply = 1}
      dma_wait {reply = 1, times = 1}
    }
  }
}

host func @main(%a: buf<6 x 12 x f32>, %b: buf<12 x 40 x f32>, %c: buf<6 x 40 x f32>) attributes {outputs = 1} {
'entry:
  spawn @mm(%a, %b, %c)
  join
  return
}
'''


def test_hand_written_matmul_and_its_counters():
    A, B = f32(6, 12, seed=1), f32(12, 40, seed=2)
    it = interp(MATMUL)
    (c,) = it.run("main", [A, B])
    np.testing.assert_array_equal(c, in_order_matmul(A, B))
    np.testing.assert_allclose(c, A @ B, rtol=1e-5, atol=1e-5)
    s = it.kernel_stats["mm"]
    # Hand-computed: each of the 4 working CPEs gets A once (72 floats = 288 bytes) and
    # waits; each of the 10 tiles gets B's 12 x 4 tile (48 floats = 192 bytes, 12
    # strided blocks of 16 bytes), waits, puts C's 6 x 4 tile (24 floats = 96 bytes, 6
    # blocks of 16 bytes) and waits.
    assert (s.spawns, s.calls, s.gets, s.puts, s.waits) == (1, 64, 4 + 10, 10, 4 + 2 * 10)
    assert s.bytes_in == 4 * 288 + 10 * 192 == 3072
    assert s.bytes_out == 10 * 96 == 960
    assert (s.elements_in, s.elements_out) == (768, 240)
    assert s.size_histogram == {256: 4, 128: 10, 64: 10}
    assert s.small_transfers == 20 and s.small_share == pytest.approx(20 / 24)
    assert s.blocks == 4 + 10 * 12 + 10 * 6 and s.block_histogram == {256: 4, 16: 180}
    assert s.ldm_peak_cpe == [288 + 192 + 96] * 4 + [0] * 60 and s.ldm_peak == 576
    assert it.kernel_stats["main"].as_dict()["transfers"] == 0
    d = it.stats()
    assert d["functions"]["mm"]["size_histogram"] == {"64": 10, "128": 10, "256": 4}
    assert d["total"]["gets"] == 14 and d["total"]["ldm_peak_cpe"][:5] == [576] * 4 + [0]


def test_size_buckets():
    assert [size_bucket(n) for n in (1, 2, 3, 4, 255, 256, 511, 512, 32768)] == \
        [1, 2, 2, 4, 128, 256, 256, 512, 32768]
    total = DMAStats.total([DMAStats("a", gets=1, size_histogram={4: 1}),
                            DMAStats("b", puts=2, small_transfers=1, size_histogram={4: 2})])
    assert total.size_histogram == {4: 3} and total.transfers == 3
    assert total.small_share == pytest.approx(1 / 3)


def test_compile_once_and_steps():
    A, B = f32(6, 12), f32(12, 40)
    it = interp(MATMUL)
    for _ in range(3):
        (c,) = it.run("main", [A, B])
        np.testing.assert_array_equal(c, in_order_matmul(A, B))
        assert it.kernel_stats["mm"].gets == 14
    assert len([n for n in it.sources if n.startswith("_f_")]) == 2
    # main's 3; 64 CPEs run the 3 instructions before the if, 4 of them its 7, then
    # 10 tiles.
    per_tile = 5 + 6 * (1 + 4 * (2 + 12 * 6))
    assert it.steps == 3 + 64 * 3 + 4 * 7 + 10 * per_tile


# -- the CPE split -------------------------------------------------------------------------

CPE_SPLIT = '''module "ids"
stage dma

cpe kernel @ids(%O: buf<64 x 3 x index>) {
  %id = cpe_id : index
  %lo, %hi = chunk %id {extent = 100, workers = 64} : index, index
  %L = ldm_alloc : ldm<3 x index>
  store %id, %L[0]
  store %lo, %L[1]
  store %hi, %L[2]
  dma_put %L -> %O[%id, 0] {count = 3, reply = 5}
  dma_wait {reply = 5, times = 1}
}
'''


def test_cpe_id_and_chunk_on_every_cpe():
    it = interp(CPE_SPLIT)
    (o,) = it.run("ids", [np.zeros((64, 3), np.int64)])
    want = [[i, *cpe_share(i, 100, 64)] for i in range(64)]
    assert o.tolist() == want
    assert it.kernel_stats["ids"].size_histogram == {16: 64}   # 24 bytes each
    assert it.kernel_stats["ids"].small_share == 1.0


def test_chunk_worker_outside_its_range_is_an_error():
    text = CPE_SPLIT.replace("workers = 64", "workers = 8")
    with pytest.raises(VerificationError, match="worker id ranges over"):
        verify(parse_module(text, "<t>"))
    e = raises(interp(text, check=False).run, "ids", [np.zeros((64, 3), np.int64)])
    assert e.message == "'chunk' worker id %id is 63, outside [0, 8) (workers = 8)"
    assert f"{e.loc.line}:{e.loc.col}" == at(text, "chunk", "chunk")


# -- DMA shapes ------------------------------------------------------------------------------

SHAPES = '''module "shapes"
stage dma

// A strided get with a short last block into the middle of an LDM buffer, then
// rows put back element-addressed.
cpe kernel @k(%X: buf<4 x 5 x f32>, %Y: buf<3 x 8 x f32>) {
  %id = cpe_id : index
  if %id == 0 {
    %L = ldm_alloc : ldm<3 x 4 x f32>
    %z = const 0.0 : f32
    for %i = 0 to 3 {
      for %j = 0 to 4 {
        store %z, %L[%i, %j]
      }
    }
    dma_get %X[1, 2] -> %L[0, 1] {count = 7, bsize = 3, stride = 2, reply = 0}
    dma_wait {reply = 0, times = 1}
    dma_put %L[1, 0] -> %Y[2, 1] {count = 4, reply = 1}
    dma_put %L -> %Y[0, 0] {count = 12, bsize = 4, stride = 4, reply = 1}
    dma_wait {reply = 1, times = 2}
  }
}
'''


def test_strided_and_element_addressed_dmas():
    X = np.arange(20, dtype=np.float32).reshape(4, 5)
    Y0 = np.full((3, 8), -1, np.float32)
    it = interp(SHAPES)
    (y,) = it.run("k", [X, Y0])
    flat = X.reshape(-1)
    got = np.concatenate([flat[7:10], flat[12:15], flat[17:18]])  # blocks of 3, 2 apart
    L = np.zeros(12, np.float32)
    L[1:8] = got
    want = Y0.copy()
    want[2, 1:5] = L[4:8]
    want.reshape(-1)[[0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19]] = L
    np.testing.assert_array_equal(y, want)
    s = it.kernel_stats["k"]
    assert (s.gets, s.puts, s.waits) == (1, 2, 2)
    assert s.block_histogram == {8: 2, 4: 1, 16: 4}      # 12, 12, 4 bytes; 16 and 3 x 16
    assert s.size_histogram == {16: 2, 32: 1}            # 28, 16 and 48 bytes


# -- the loud failures -----------------------------------------------------------------------

def test_read_of_ldm_whose_dma_get_was_not_waited_for():
    text = MATMUL.replace("      dma_wait {reply = 0, times = 1}\n", "", 1)
    e = raises(interp(text).run, "main", [f32(6, 12), f32(12, 40)])
    get = at(text, "dma_get %B")
    assert e.message == (f"CPE 3: read of LDM %BB[0, 0] whose dma_get ({get}) has not been "
                         "waited for (load %BB[%k, %jj])")
    assert f"{e.loc.line}:{e.loc.col}" == at(text, "load %BB", "load")
    assert f"{e.notes[0][1].line}:{e.notes[0][1].col}" == get
    assert e.notes[-1][0] == "in @mm on CPE 3, spawned from here"
    assert "dma_wait {reply = 0}" in e.notes[0][0]


STALE = '''module "stale"
stage dma

// %L[2] holds a valid 0.0 when the get is issued: until it is waited for, the
// element may hold the old value or the new one.
cpe kernel @k(%X: buf<4 x f32>, %Y: buf<4 x f32>) {
  %id = cpe_id : index
  if %id == 0 {
    %L = ldm_alloc : ldm<4 x f32>
    %z = const 0.0 : f32
    store %z, %L[2]
    dma_get %X[0] -> %L {count = 4, reply = 0}
    %v = load %L[2] : f32
    dma_wait {reply = 0, times = 1}
    store %v, %L[0]
    dma_put %L -> %Y[0] {count = 4, reply = 0}
    dma_wait {reply = 0, times = 1}
  }
}
'''


def test_data_valid_before_a_get_is_unreadable_until_the_wait():
    e = raises(interp(STALE).run, "k", [f32(4), f32(4)])
    assert e.message == (f"CPE 0: read of LDM %L[2] whose dma_get ({at(STALE, 'dma_get')}) "
                         "has not been waited for (load %L[2])")
    assert f"{e.loc.line}:{e.loc.col}" == at(STALE, "%v = load", "load")
    text = STALE.replace("    %v = load %L[2] : f32\n", "").replace(
        "    store %v, %L[0]\n", "    %v = load %L[2] : f32\n    store %v, %L[0]\n")
    X = f32(4, seed=7)
    (y,) = interp(text).run("k", [X, f32(4)])
    np.testing.assert_array_equal(y, [X[2], X[1], X[2], X[3]])


def test_put_of_ldm_whose_get_was_not_waited_for_and_never_written():
    text = MATMUL.replace("{count = 72, reply = 0}\n    dma_wait {reply = 0, times = 1}\n",
                          "{count = 72, reply = 3}\n", 1)
    text = text.replace("%a = load %AA[%i, %k] : f32", "%a = const 1.0 : f32")
    text = text.replace("dma_put %CC", "dma_put %AA")
    e = raises(interp(text).run, "main", [f32(6, 12), f32(12, 40)])
    assert e.message.startswith(f"CPE 3: dma_put of LDM %AA[0, 0] whose dma_get "
                                f"({at(text, 'dma_get %A[')}) has not been waited for "
                                "(dma_put %AA -> %C[0, 4*%j])")
    never = MATMUL.replace("%CC[%i, %jj]", "%CC[%i, 0]")     # column 0 only
    e = raises(interp(never).run, "main", [f32(6, 12), f32(12, 40)])
    assert e.message == ("CPE 3: dma_put of LDM %CC[0, 1] that was neither fetched by dma_get "
                         "nor written (dma_put %CC -> %C[0, 4*%j])")
    assert f"{e.loc.line}:{e.loc.col}" == at(never, "dma_put %CC")


def test_read_of_ldm_never_written():
    text = MATMUL.replace("store %zero, %CC[%i, %jj]", "store %zero, %CC[%i, 0]")
    e = raises(interp(text).run, "main", [f32(6, 12), f32(12, 40)])
    assert e.message == ("CPE 3: read of LDM %CC[0, 1] that was neither fetched by dma_get "
                         "nor written (load %CC[%i, %jj])")
    assert f"{e.loc.line}:{e.loc.col}" == at(text, "load %CC", "load")


OVERFLOW = '''module "over"
stage dma {ldm_size = 4096}

cpe kernel @outer(%A: buf<8 x f32>) {
  %id = cpe_id : index
  %L = ldm_alloc : ldm<1020 x f32>
  if %id == 5 {
    call @inner(%A)
  }
}

cpe kernel @inner(%A: buf<8 x f32>) {
  %M = ldm_alloc : ldm<8 x f32>
}

host func @main(%a: buf<8 x f32>) {
'entry:
  spawn @outer(%a)
  join
  return
}
'''


def test_ldm_overflow_at_run_time():
    it = interp(OVERFLOW)       # each kernel fits 4096 bytes; together on CPE 5 they do not
    e = raises(it.run, "main", [f32(8)])
    assert e.message == ("CPE 5: ldm_alloc of %M : ldm<8 x f32> (32 bytes) makes 4112 bytes "
                         "of LDM live at once, more than the 4096 bytes of LDM (ldm_size)")
    assert f"{e.loc.line}:{e.loc.col}" == at(OVERFLOW, "%M = ldm_alloc", "ldm_alloc")
    notes = [n for n, _ in e.notes]
    assert notes == ["%L : ldm<1020 x f32> (4080 bytes) is live on CPE 5, allocated here",
                     "in @inner, called from here", "in @outer on CPE 5, spawned from here"]
    # The module-level capacity can be overridden.
    assert interp(OVERFLOW, ldm_size=8192).run("main", [f32(8)]) == []


def test_ldm_high_water_marks_per_cpe():
    it = interp(OVERFLOW.replace("ldm<1020 x f32>", "ldm<16 x f32>"))
    it.run("main", [f32(8)])
    s = it.kernel_stats["outer"]
    assert s.ldm_peak_cpe == [64] * 5 + [96] + [64] * 58 and s.ldm_peak == 96
    inner = it.kernel_stats["inner"]
    assert inner.calls == 1 and inner.ldm_peak_cpe[5] == 96 and inner.ldm_peak == 96
    assert it.stats()["total"]["ldm_peak_cpe"] == s.ldm_peak_cpe


def test_dma_outside_the_main_memory_tensor():
    text = MATMUL.replace("bsize = 4, stride = 36, reply = 0", "bsize = 4, stride = 37, "
                          "reply = 0")
    with pytest.raises(VerificationError, match="runs past the end of %B"):
        verify(parse_module(text, "<t>"))
    e = raises(interp(text, check=False).run, "main", [f32(6, 12), f32(12, 40)])
    assert e.message == ("CPE 3: dma_get reads outside %B : buf<12 x 40 x f32>: 48 elements "
                         "from %B[0, 32] (element 32) in 12 blocks of 4 with 37 skipped "
                         "between them reach element 486, past its last element, 479 (dma_get "
                         "%B[0, 4*%j] -> %BB)")
    assert f"{e.loc.line}:{e.loc.col}" == at(text, "dma_get %B")
    # A start element outside the tensor.
    start = MATMUL.replace("dma_get %A[0, 0]", "dma_get %A[6, 0]")
    e = raises(interp(start, check=False).run, "main", [f32(6, 12), f32(12, 40)])
    assert e.message == ("CPE 3: dma_get start element %A[...] is outside %A : "
                         "buf<6 x 12 x f32>: subscript #0 (6) is 6, outside [0, 6) (dma_get "
                         "%A[6, 0] -> %AA)")
    # A put past the end of C.
    put = MATMUL.replace("%C[0, 4*%j]", "%C[1, 4*%j]")
    e = raises(interp(put, check=False).run, "main", [f32(6, 12), f32(12, 40)])
    assert e.message.startswith("CPE 3: dma_put writes outside %C : buf<6 x 40 x f32>: 24 "
                                "elements from %C[1, 32] (element 72) in 6 blocks of 4")
    assert f"{e.loc.line}:{e.loc.col}" == at(put, "dma_put %CC")


def test_dma_outside_its_ldm_buffer():
    text = SHAPES.replace("%L[0, 1] {count = 7", "%L[1, 3] {count = 7")
    with pytest.raises(VerificationError, match="runs past the end of %L"):
        verify(parse_module(text, "<t>"))
    e = raises(interp(text, check=False).run, "k", [f32(4, 5), f32(3, 8)])
    assert e.message == ("CPE 0: dma_get of 7 elements into LDM %L[1, 3] runs past the end "
                         "of %L : ldm<3 x 4 x f32> (12 elements) (dma_get %X[1, 2] -> "
                         "%L[1, 3])")
    assert f"{e.loc.line}:{e.loc.col}" == at(text, "dma_get %X")
    whole = SHAPES.replace("{count = 12, bsize = 4, stride = 4,", "{count = 13,")
    with pytest.raises(VerificationError, match="does not fit LDM buffer"):
        verify(parse_module(whole, "<t>"))
    e = raises(interp(whole, check=False).run, "k", [f32(4, 5), f32(3, 8)])
    assert e.message.startswith("CPE 0: dma_put of 13 elements from LDM %L[0, 0] runs past "
                                "the end of %L : ldm<3 x 4 x f32> (12 elements)")
    sub = SHAPES.replace("%L[1, 0] -> %Y[2, 1]", "%L[3, 0] -> %Y[2, 1]")
    e = raises(interp(sub, check=False).run, "k", [f32(4, 5), f32(3, 8)])
    assert e.message.startswith("CPE 0: dma_put LDM element %L[...] is outside %L : "
                                "ldm<3 x 4 x f32>: subscript #0 (3) is 3, outside [0, 3)")


def test_overwriting_ldm_in_flight_is_an_error():
    # A store into the source of a put not yet waited for.
    text = MATMUL.replace("      dma_wait {reply = 1, times = 1}\n", "", 1)
    e = raises(interp(text).run, "main", [f32(6, 12), f32(12, 40)])
    put = at(text, "dma_put %CC")
    assert e.message == (f"CPE 3: store to LDM %CC[0, 0] while the dma_put ({put}) reading it "
                         "has not been waited for (store %zero, %CC[%i, %jj])")
    assert f"{e.loc.line}:{e.loc.col}" == at(text, "store %zero", "store")
    # A get into the destination of a get not yet waited for (waiting for both later).
    text = MATMUL.replace(
        "    dma_wait {reply = 0, times = 1}\n    for",
        "    dma_get %A[0, 0] -> %AA {count = 72, reply = 0}\n"
        "    dma_wait {reply = 0, times = 2}\n    for", 1)
    e = raises(interp(text).run, "main", [f32(6, 12), f32(12, 40)])
    assert e.message == (f"CPE 3: dma_get into LDM %AA[0, 0] while the dma_get "
                         f"({at(text, 'dma_get %A[')}) writing it has not been waited for "
                         "(dma_get %A[0, 0] -> %AA)")
    assert f"{e.loc.line}:{e.loc.col}" == at(text, "dma_get %A[", nth=1)


def test_wrong_waits_are_errors():
    more = MATMUL.replace("dma_wait {reply = 0, times = 1}", "dma_wait {reply = 0, times = 2}",
                          1)
    e = raises(interp(more).run, "main", [f32(6, 12), f32(12, 40)])
    assert e.message == ("CPE 3: dma_wait {reply = 0, times = 2} waits for 2 completion(s) of "
                         "reply word 0, but 1 DMA(s) on it are outstanding: the CPE would wait "
                         "forever")
    assert f"{e.loc.line}:{e.loc.col}" == at(more, "times = 2", "dma_wait")
    other = MATMUL.replace("dma_wait {reply = 1, times = 1}", "dma_wait {reply = 2, times = 1}")
    e = raises(interp(other).run, "main", [f32(6, 12), f32(12, 40)])
    assert "reply word 2, but 0 DMA(s) on it are outstanding" in e.message
    fewer = MATMUL.replace("    dma_wait {reply = 0, times = 1}\n    for", "    for", 1)
    e = raises(interp(fewer).run, "main", [f32(6, 12), f32(12, 40)])
    assert e.message.startswith("CPE 3: dma_wait {reply = 0, times = 1} waits for 1 "
                                "completion(s) of reply word 0, but 2 DMAs on it are outstanding")
    assert len(e.notes) == 3 and "issued here" in e.notes[0][0]


def test_dmas_not_waited_for_when_their_buffer_goes():
    text = MATMUL.replace("      dma_wait {reply = 1, times = 1}\n", "", 1)
    text = text.replace("for %j = %lo to %hi {", "for %j = %lo to min(%hi, %lo + 1) {")
    e = raises(interp(text).run, "main", [f32(6, 12), f32(12, 40)])
    assert e.message == ("CPE 3: LDM buffer %CC is freed (its region ends) before the dma_put "
                         "from it, issued here, has been waited for (reply word 1)")
    assert f"{e.loc.line}:{e.loc.col}" == at(text, "dma_put %CC")


def test_copies_at_the_dma_stage_respect_dmas_in_flight():
    text = '''module "c"
stage dma
cpe kernel @k(%X: buf<8 x f32>, %Y: buf<8 x f32>) {
  %id = cpe_id : index
  if %id == 0 {
    %L = ldm_alloc : ldm<8 x f32>
    dma_get %X[0] -> %L {count = 8, reply = 0}
    copy_in %X[0 : 8] -> %L
    dma_wait {reply = 0, times = 1}
    copy_out %L -> %Y[0 : 8]
  }
}
'''
    e = raises(interp(text).run, "k", [f32(8), f32(8)])
    assert e.message.startswith("CPE 0: copy_in onto LDM %L[0] while the dma_get (7:5) "
                                "writing it has not been waited for")
    ok = text.replace("    copy_in %X[0 : 8] -> %L\n", "")
    it = interp(ok)
    X = f32(8, seed=3)
    (y,) = it.run("k", [X, f32(8)])
    np.testing.assert_array_equal(y, X)
    assert it.kernel_stats["k"].copies_out == 1 and it.kernel_stats["k"].gets == 1


# -- spawn and join --------------------------------------------------------------------------

def test_spawn_join_rules():
    A, B = f32(6, 12), f32(12, 40)
    nojoin = MATMUL.replace("  join\n", "")
    e = raises(interp(nojoin).run, "main", [A, B])
    assert e.message == (f"@main returns while the cpe kernel spawned at "
                         f"{at(nojoin, 'spawn @mm')} is still running: join it first")
    assert f"{e.loc.line}:{e.loc.col}" == at(nojoin, "  return", "return")
    twice = MATMUL.replace("  join\n", "  spawn @mm(%a, %b, %c)\n  join\n")
    e = raises(interp(twice).run, "main", [A, B])
    assert e.message.startswith("'spawn' while the cpe kernel spawned at")
    assert f"{e.loc.line}:{e.loc.col}" == at(twice, "spawn @mm", nth=1)
    extra = MATMUL.replace("  join\n", "  join\n  join\n")
    e = raises(interp(extra).run, "main", [A, B])
    assert e.message == "'join' with no cpe kernel running (no spawn since the last join)"
    # Twice, joined each time: the kernel runs twice on every CPE.
    again = MATMUL.replace("  join\n", "  join\n  spawn @mm(%a, %b, %c)\n  join\n")
    it = interp(again)
    (c,) = it.run("main", [A, B])
    np.testing.assert_array_equal(c, in_order_matmul(A, B))
    s = it.kernel_stats["mm"]
    assert (s.spawns, s.calls, s.gets, s.puts) == (2, 128, 28, 20)


def test_a_cpe_kernel_is_not_called_from_the_host():
    text = MATMUL.replace("  spawn @mm(%a, %b, %c)\n  join\n", "  call @mm(%a, %b, %c)\n")
    m = module(text, check=False)
    e = raises(DMAInterpreter(m).run, "main", [f32(6, 12), f32(12, 40)])
    assert e.message == ("@mm is a cpe kernel: it runs on the CPEs, started by 'spawn', not "
                         "called from the MPE")


def test_other_interpreters_refuse_the_dma_stage():
    m = module(MATMUL)
    with pytest.raises(Diagnostic, match="buffered-stage interpreter cannot run a dma"):
        BufferedInterpreter(m)
    with pytest.raises(Diagnostic, match="dma-stage interpreter cannot run a buffered"):
        DMAInterpreter(module('module "b"\nstage buffered\n'))


# -- speed and swir-run --------------------------------------------------------------------

def test_example_speed_is_reported(example):
    """Not a benchmark: the example's 6.3 million instructions run quickly."""
    m, d, w = example
    it = DMAInterpreter(m, d)
    t = time.perf_counter()
    it.run("matmul_0", [f32(1, 1024), w, np.zeros((1, 1024), np.float32)])
    dt = time.perf_counter() - t
    assert it.steps == 64 * 7 + 8 * (1 + 4 + 128 + 16 * (4 + 128 * (1 + 64 * 6)))
    assert dt < 60
    print(f"{it.steps / dt / 1e6:.1f}M instructions/s")


def test_swir_run_writes_the_counters(tmp_path):
    (tmp_path / "mm.swir").write_text(MATMUL)
    A, B = f32(6, 12, seed=1), f32(12, 40, seed=2)
    np.save(tmp_path / "a.npy", A)
    np.save(tmp_path / "b.npy", B)
    out, stats = tmp_path / "c.npy", tmp_path / "s.json"
    r = subprocess.run([SWIR_RUN, tmp_path / "mm.swir", "-i", tmp_path / "a.npy", "-i",
                        tmp_path / "b.npy", "-o", out, "--stats", stats],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(out), in_order_matmul(A, B))
    s = json.loads(stats.read_text())
    assert s["stage"] == "dma" and s["function"] == "main"
    mm = s["functions"]["mm"]
    assert (mm["gets"], mm["puts"], mm["bytes_in"], mm["bytes_out"]) == (14, 10, 3072, 960)
    assert mm["size_histogram"] == {"64": 10, "128": 10, "256": 4}
    assert mm["ldm_peak_cpe"] == [576] * 4 + [0] * 60
    assert s["total"]["waits"] == 24
    # A failing run writes neither the outputs nor the counters.
    (tmp_path / "bad.swir").write_text(MATMUL.replace("      dma_wait {reply = 0, times = 1}\n",
                                                      "", 1))
    out.unlink()
    stats.unlink()
    r = subprocess.run([SWIR_RUN, tmp_path / "bad.swir", "-i", tmp_path / "a.npy", "-i",
                        tmp_path / "b.npy", "-o", out, "--stats", stats],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 1 and "has not been waited for" in r.stderr.splitlines()[0]
    assert not out.exists() and not stats.exists()
