"""The buffered-stage interpreter: the example kernel and a remainder-tiled matmul
against numpy, the CPE work split, CPE order, private LDM, LDM capacity at run
time, validity of LDM elements (copied in or written), region copies, counters."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from swir.diagnostics import Diagnostic
from swir.interp.buffered import CPES, BufferedInterpreter, cpe_share
from swir.interp.loop import LoopInterpreter, io_signature
from swir.interp.pycode import MAX_INLINE_DEPTH
from swir.interp.run import run_function
from swir.parser import parse_module
from swir.verifier import VerificationError, verify
from helpers import f32, in_order_matmul

ROOT = Path(__file__).resolve().parents[2]
BUFFERED_STAGE = ROOT / "test" / "IR" / "buffered-stage.swir"


def module(text: str, check: bool = True):
    m = parse_module(text, "<test>")
    if check:
        verify(m)
    return m


def interp(text: str, check: bool = True, **kw) -> BufferedInterpreter:
    return BufferedInterpreter(module(text, check), **kw)


def run(text: str, name: str, args: list, check: bool = True, **kw) -> list[np.ndarray]:
    return interp(text, check, **kw).run(name, args)


# -- the kernel of test/IR/buffered-stage.swir ----------------------------------------------

@pytest.fixture(scope="module")
def example():
    m = parse_module(BUFFERED_STAGE.read_text(), str(BUFFERED_STAGE))
    verify(m)
    return m


def test_example_matmul_counts_its_ldm_and_copies(example):
    A, B, C = f32(1, 1024, seed=1), f32(1024, 1024, seed=2), f32(1, 1024, seed=3)
    it = BufferedInterpreter(example)
    (c,) = it.run("matmul_0", [A, B, C])
    np.testing.assert_array_equal(c, in_order_matmul(A, B))
    # 128 + 64 + 64*128 floats live at once (32.75 KB) on each of the 8 CPEs working.
    assert it.ldm_peak == {"matmul_0": 33536}
    s = it.kernel_stats["matmul_0"]
    assert s.ldm_peak_cpe == [33536] * 8 + [0] * 56
    assert max(s.ldm_peak_cpe) <= it.ldm_size == 65536
    assert s.cpe_iterations == [1] * 8 + [0] * 56
    assert it.copy_counts == {
        "copies_in": 8 * 16 * 2, "elements_in": 8 * 16 * (64 + 64 * 128),
        "bytes_in": 4 * 8 * 16 * (64 + 64 * 128),
        "copies_out": 8, "elements_out": 1024, "bytes_out": 4096}
    # A second run starts from zero.
    it.run("matmul_0", [A, B, C])
    assert it.kernel_stats["matmul_0"].calls == 1 and it.copy_counts["copies_out"] == 8


def test_example_main_through_swir_run_dispatch(tmp_path, example):
    shutil.copy(BUFFERED_STAGE, tmp_path / "m.swir")
    w = f32(1024, 1024, seed=4)
    (tmp_path / "matmul.weights").write_bytes(w.astype("<f4").tobytes())
    m = parse_module((tmp_path / "m.swir").read_text(), str(tmp_path / "m.swir"))
    verify(m)
    x = f32(1, 1024, seed=5)
    # main has no outputs attribute: it returns nothing; run the kernel through
    # run_function and main through the interpreter, reading %c back.
    it = BufferedInterpreter(m, tmp_path)
    c = np.zeros((1, 1024), np.float32)
    assert it.run("main", [x, c]) == []
    (k,) = run_function(m, m.lookup("matmul_0"), [x, w, c], tmp_path)
    np.testing.assert_array_equal(k, in_order_matmul(x, w))
    assert it.ldm_peak["main"] == it.ldm_peak["matmul_0"] == 33536


def test_loop_interpreter_still_refuses_buffered_modules(example):
    with pytest.raises(Diagnostic, match="loop-stage interpreter cannot run a buffered"):
        LoopInterpreter(example)
    m = module('module "l"\nstage loop\n')
    with pytest.raises(Diagnostic, match="buffered-stage interpreter cannot run a loop"):
        BufferedInterpreter(m)


# -- a hand-written buffered matmul with remainder tiles ---------------------------------------

def tiled_matmul(M: int, K: int, N: int, TM: int, TK: int, TN: int, workers: int = 64) -> str:
    """Parallel over row tiles, for over column tiles; every tile loop has a min
    bound, every copy a min extent, so the last tiles are partial."""
    def cd(n: int, t: int) -> int:
        return -(-n // t)
    return f'''module "mm"
stage buffered
kernel @mm(%A: buf<{M} x {K} x f32>, %B: buf<{K} x {N} x f32>, %C: buf<{M} x {N} x f32>) {{
  %zero = const 0.0 : f32
  parallel %mo = 0 to {cd(M, TM)} {{workers = {workers}}} {{
    for %no = 0 to {cd(N, TN)} {{
      %CC = ldm_alloc : ldm<{TM} x {TN} x f32>
      for %mi = 0 to min({TM}, {M} - {TM}*%mo) {{
        for %ni = 0 to min({TN}, {N} - {TN}*%no) {{
          store %zero, %CC[%mi, %ni]
        }}
      }}
      for %ko = 0 to {cd(K, TK)} {{
        %AA = ldm_alloc : ldm<{TM} x {TK} x f32>
        %BB = ldm_alloc : ldm<{TK} x {TN} x f32>
        copy_in %A[{TM}*%mo : min({TM}*%mo + {TM}, {M}), {TK}*%ko : min({TK}*%ko + {TK}, {K})] -> %AA
        copy_in %B[{TK}*%ko : min({TK}*%ko + {TK}, {K}), {TN}*%no : min({TN}*%no + {TN}, {N})] -> %BB
        for %mi = 0 to min({TM}, {M} - {TM}*%mo) {{
          for %ni = 0 to min({TN}, {N} - {TN}*%no) {{
            for %ki = 0 to min({TK}, {K} - {TK}*%ko) {{
              %a = load %AA[%mi, %ki] : f32
              %b = load %BB[%ki, %ni] : f32
              %c = load %CC[%mi, %ni] : f32
              %m = mul %a, %b : f32
              %s = add %c, %m : f32
              store %s, %CC[%mi, %ni]
            }}
          }}
        }}
      }}
      copy_out %CC -> %C[{TM}*%mo : min({TM}*%mo + {TM}, {M}), {TN}*%no : min({TN}*%no + {TN}, {N})]
    }}
  }}
}}
'''


@pytest.mark.parametrize("M,K,N,TM,TK,TN,workers", [
    (70, 40, 45, 16, 32, 20, 64),    # 5 row tiles (the last 6 rows) on 5 of 64 CPEs
    (130, 9, 7, 1, 4, 3, 64),        # 130 row tiles: CPEs 0 and 1 take 3, the rest 2
    (33, 65, 10, 4, 64, 8, 3),       # 9 row tiles over 3 workers; K tiles of 64 and 1
])
def test_tiled_matmul_with_remainder_tiles(M, K, N, TM, TK, TN, workers):
    A, B = f32(M, K, seed=6), f32(K, N, seed=7)
    it = interp(tiled_matmul(M, K, N, TM, TK, TN, workers))
    (c,) = it.run("mm", [A, B, f32(M, N, seed=8)])
    np.testing.assert_array_equal(c, in_order_matmul(A, B))
    s = it.kernel_stats["mm"]
    tiles_m, tiles_n, tiles_k = -(-M // TM), -(-N // TN), -(-K // TK)
    shares = [cpe_share(i, tiles_m, workers) for i in range(workers)]
    assert s.cpe_iterations == [hi - lo for lo, hi in shares] + [0] * (CPES - workers)
    assert s.ldm_peak == 4 * (TM * TN + TM * TK + TK * TN) <= it.ldm_size
    assert s.copies_in == 2 * tiles_m * tiles_n * tiles_k
    assert s.copies_out == tiles_m * tiles_n
    # Partial tiles move only their elements: every A row once per column tile, etc.
    assert s.elements_in == M * K * tiles_n + K * N * tiles_m
    assert s.elements_out == M * N


# -- the CPE work split --------------------------------------------------------------------------

def increment(extent: int, workers: int = 64) -> str:
    return f'''module "inc"
stage buffered
kernel @inc(%X: buf<{extent} x f32>) {{
  %one = const 1.0 : f32
  parallel %i = 0 to {extent} {{workers = {workers}}} {{
    %L = ldm_alloc : ldm<1 x f32>
    copy_in %X[%i : %i + 1] -> %L
    %v = load %L[0] : f32
    %w = add %v, %one : f32
    store %w, %L[0]
    copy_out %L -> %X[%i : %i + 1]
  }}
}}
'''


@pytest.mark.parametrize("extent", [1, 3, 7, 63, 64, 65, 1000])
def test_cpe_split_covers_every_iteration_exactly_once(extent):
    X = np.arange(extent, dtype=np.float32)
    it = interp(increment(extent), trace=True)
    (x,) = it.run("inc", [X])
    np.testing.assert_array_equal(x, X + 1)          # each iteration ran exactly once
    trace = it.cpe_trace
    assert sorted(i for _, _, _, i in trace) == list(range(extent))
    owner = {i: cpe for _, _, cpe, i in trace}
    q, m = divmod(extent, 64)
    for cpe in range(64):
        lo, hi = cpe_share(cpe, extent, 64)
        assert lo == cpe * q + min(cpe, m) and hi - lo == q + (cpe < m)
        assert [i for i in range(extent) if owner[i] == cpe] == list(range(lo, hi))
    assert it.kernel_stats["inc"].cpe_iterations == \
        [cpe_share(c, extent, 64)[1] - cpe_share(c, extent, 64)[0] for c in range(64)]
    # CPEs run one after another, highest id first, each its share in reverse:
    # the iterations run in the loop stage's (reversed) order.
    cpes = [cpe for _, _, cpe, _ in trace]
    assert cpes == sorted(cpes, reverse=True)
    assert [i for *_, i in trace] == list(range(extent))[::-1]
    # One 4-byte buffer live at a time on each working CPE.
    working = min(extent, 64)
    assert it.kernel_stats["inc"].ldm_peak_cpe == [4] * working + [0] * (64 - working)


def test_fewer_workers_than_cpes_and_steps():
    it = interp(increment(10, workers=3), trace=True)
    it.run("inc", [np.zeros(10, np.float32)])
    assert it.kernel_stats["inc"].cpe_iterations[:4] == [4, 3, 3, 0]
    text = increment(10).replace("parallel %i = 0 to 10 {workers = 64}",
                                 "parallel %i = 0 to 10 step 3 {workers = 2}")
    it = interp(text, trace=True)
    (x,) = it.run("inc", [np.zeros(10, np.float32)])
    assert list(x) == [1, 0, 0, 1, 0, 0, 1, 0, 0, 1]
    assert [(c, i) for _, _, c, i in it.cpe_trace] == [(1, 9), (1, 6), (0, 3), (0, 0)]


def test_too_many_workers_is_refused():
    with pytest.raises(Diagnostic, match="spreads over 1 to 64 CPEs; workers = 65"):
        run(increment(3, workers=65), "inc", [np.zeros(3, np.float32)])


def test_two_cpes_writing_one_element_is_observable():
    """Iteration 1 (CPE 1) runs before iteration 0 (CPE 0): the last writer is CPE 0,
    so the element holds what a sequential loop would have overwritten."""
    text = '''module "c"
stage buffered
kernel @k(%O: buf<1 x f32>) {
  %zero = const 0.0 : f32
  %one = const 1.0 : f32
  LOOP %i = 0 to 2 {workers = 64} {
    %L = ldm_alloc : ldm<1 x f32>
    if %i == 0 {
      store %zero, %L[0]
    } else {
      store %one, %L[0]
    }
    copy_out %L -> %O[0 : 1]
  }
}
'''
    (par,) = run(text.replace("LOOP", "parallel"), "k", [np.full(1, 7, np.float32)])
    seq_text = text.replace("LOOP", "for").replace(" {workers = 64}", "")
    (seq,) = run(seq_text, "k", [np.full(1, 7, np.float32)])
    assert list(seq) == [1.0] and list(par) == [0.0]


SCAN = '''module "s"
stage STAGE
kernel @scan(%A: buf<200 x f32>) {
  parallel %i = 1 to 200 {workers = 64} {
    %p = load %A[%i - 1] : f32
    %q = load %A[%i] : f32
    %s = add %p, %q : f32
    store %s, %A[%i]
  }
}
'''


def test_iterations_run_in_the_loop_stages_order():
    """A loop-carried dependence wrongly marked parallel: spread over 64 CPEs (3 or 4
    iterations each) it computes what the loop stage's reversed loop computes, not
    the sequential prefix sum."""
    a = np.arange(1, 201, dtype=np.float32)
    (b,) = run(SCAN.replace("STAGE", "buffered"), "scan", [a])
    m = module(SCAN.replace("STAGE", "loop"))
    (lp,) = LoopInterpreter(m).run("scan", [a])
    np.testing.assert_array_equal(b, lp)
    assert not np.array_equal(b, np.cumsum(a))


def test_nested_parallel_runs_on_the_cpe_of_the_outer_iteration():
    text = '''module "n"
stage buffered
kernel @k(%X: buf<4 x 6 x f32>) {
  parallel %i = 0 to 4 {workers = 64} {
    %L = ldm_alloc : ldm<6 x f32>
    copy_in %X[%i, 0 : 6] -> %L
    parallel %j = 0 to 6 {
      %v = load %L[%j] : f32
      %w = add %v, %v : f32
      store %w, %L[%j]
    }
    copy_out %L -> %X[%i, 0 : 6]
  }
}
'''
    X = f32(4, 6)
    it = interp(text, trace=True)
    (x,) = it.run("k", [X])
    np.testing.assert_array_equal(x, X + X)
    # Only the outer loop is spread; the inner one used the outer CPE's LDM.
    assert [(c, i) for _, v, c, i in it.cpe_trace] == [(3, 3), (2, 2), (1, 1), (0, 0)]
    assert it.kernel_stats["k"].cpe_iterations[:5] == [1, 1, 1, 1, 0]


# -- private LDM -----------------------------------------------------------------------------------

def test_ldm_of_another_cpe_is_private():
    text = '''module "p"
stage buffered
kernel @k(%X: buf<N x f32>, %Y: buf<N x f32>) {
  %L = ldm_alloc : ldm<4 x f32>
  copy_in %X[0 : 4] -> %L
  parallel %i = 0 to N {workers = 64} {
    %v = load %L[0] : f32
    store %v, %Y[%i]
  }
}
'''
    # One iteration runs on CPE 0, which also ran the code outside the loop.
    one = text.replace("buf<N x f32>", "buf<4 x f32>", 1).replace("buf<N x f32>",
                                                                   "buf<1 x f32>")
    (y,) = run(one.replace("to N", "to 1"), "k", [np.arange(4, dtype=np.float32),
                                                 np.zeros(1, np.float32)])
    assert list(y) == [0.0]
    three = text.replace("buf<N x f32>", "buf<4 x f32>", 1).replace("buf<N x f32>",
                                                                     "buf<3 x f32>")
    with pytest.raises(Diagnostic, match=r"CPE 2: 'load' uses LDM buffer %L, which is in the "
                                         r"LDM of CPE 0; each CPE's LDM is private") as e:
        run(three.replace("to N", "to 3"), "k", [np.arange(4, dtype=np.float32),
                                                np.zeros(3, np.float32)])
    assert e.value.loc.line == 7
    # Copies check the owner too.
    copy = three.replace("%v = load %L[0] : f32",
                         "copy_in %X[0 : 4] -> %L\n    %v = const 0.0 : f32")
    with pytest.raises(Diagnostic, match=r"CPE 2: 'copy_in' uses LDM buffer %L, which is in "
                                         r"the LDM of CPE 0"):
        run(copy.replace("to N", "to 3"), "k", [np.arange(4, dtype=np.float32),
                                               np.zeros(3, np.float32)])


# -- LDM capacity at run time ----------------------------------------------------------------------

CALLS = '''module "o"
stage buffered
kernel @outer(%X: buf<3 x f32>) {
  parallel %i = 0 to 3 {workers = 64} {
    %big = ldm_alloc : ldm<OUTER x f32>
    call @inner(%X)
  }
}
kernel @inner(%X: buf<3 x f32>) {
  %more = ldm_alloc : ldm<INNER x f32>
  %y = const 1.0 : f32
  store %y, %more[0]
  %v = load %more[0] : f32
}
'''


def test_ldm_overflow_through_a_call_is_caught_at_run_time():
    """Each kernel fits on its own (the verifier checks kernels one by one), but
    @inner runs while @outer's buffer is live: 40 KB + 30 KB on one CPE."""
    text = CALLS.replace("OUTER", "10240").replace("INNER", "7680")
    m = module(text)   # the verifier accepts it
    with pytest.raises(Diagnostic) as e:
        BufferedInterpreter(m).run("outer", [np.zeros(3, np.float32)])
    assert e.value.message == ("CPE 2: ldm_alloc of %more : ldm<7680 x f32> (30720 bytes) "
                            "makes 71680 bytes of LDM live at once, more than the 65536 "
                            "bytes of LDM (ldm_size)")
    assert e.value.loc.line == 10
    assert e.value.notes[0][0].startswith("%big : ldm<10240 x f32> (40960 bytes) is live on "
                                          "CPE 2") and e.value.notes[0][1].line == 5
    assert any("called from here" in n for n, _ in e.value.notes)
    # Within the capacity, the peak counts the caller's buffer in both kernels.
    it = interp(CALLS.replace("OUTER", "10240").replace("INNER", "6144"))
    it.run("outer", [np.zeros(3, np.float32)])
    assert it.ldm_peak == {"outer": 65536, "inner": 65536}
    assert it.kernel_stats["inner"].calls == 3
    assert it.kernel_stats["inner"].ldm_peak_cpe[:4] == [65536, 65536, 65536, 0]


NESTED = '''module "n"
stage buffered
kernel @k(%X: buf<8 x f32>) {
  %a = ldm_alloc : ldm<8 x f32>
  copy_in %X[0 : 8] -> %a
  for %t = 0 to 100 {
    %b = ldm_alloc : ldm<64 x f32>
    if %t >= 50 {
      %c = ldm_alloc : ldm<32 x f32>
    }
  }
  for %t = 0 to 3 {
    %d = ldm_alloc : ldm<16 x f32>
  }
  copy_out %a -> %X[0 : 8]
}
'''


def test_buffers_live_until_the_end_of_their_region():
    # 32 + 256 + 128 bytes at most at once, though 100 * 256 bytes are allocated.
    it = interp(NESTED)
    it.run("k", [np.zeros(8, np.float32)])
    assert it.ldm_peak == {"k": 32 + 256 + 128}
    it = interp(NESTED, ldm_size=416)
    it.run("k", [np.zeros(8, np.float32)])
    it = interp(NESTED, ldm_size=415)
    with pytest.raises(Diagnostic, match=r"CPE 0: ldm_alloc of %c : ldm<32 x f32> \(128 bytes\) "
                                         r"makes 416 bytes of LDM live at once, more than the "
                                         r"415 bytes") as e:
        it.run("k", [np.zeros(8, np.float32)])
    assert [n.split(" :")[0] for n, _ in e.value.notes] == ["%a", "%b"]
    # The module's ldm_size applies when the verifier is not asked.
    small = NESTED.replace("stage buffered", "stage buffered {ldm_size = 280}")
    with pytest.raises(VerificationError, match="need 416 bytes, more than the 280 bytes"):
        verify(parse_module(small, "<t>"))
    with pytest.raises(Diagnostic, match=r"%b : ldm<64 x f32> \(256 bytes\) makes 288 bytes"):
        run(small, "k", [np.zeros(8, np.float32)], check=False)


def test_a_kernels_buffers_are_freed_when_it_returns():
    text = '''module "r"
stage buffered
func @main(%x: buf<4 x f32>, %y: buf<4 x f32>) attributes {outputs = 1} {
'entry:
  call @twice(%x, %y)
  call @twice(%y, %y)
  return
}
kernel @twice(%X: buf<4 x f32>, %Y: buf<4 x f32>) {
  %L = ldm_alloc : ldm<4096 x f32>
  copy_in %X[0 : 4] -> %L
  for %i = 0 to 4 {
    %v = load %L[%i] : f32
    %w = add %v, %v : f32
    store %w, %L[%i]
  }
  copy_out %L -> %Y[0 : 4]
  return
}
'''
    it = interp(text)
    (y,) = it.run("main", [np.arange(4, dtype=np.float32)])
    assert list(y) == [0.0, 4.0, 8.0, 12.0]
    assert it.ldm_peak == {"main": 16384, "twice": 16384}
    assert it.live == [0] * CPES
    assert it.kernel_stats["twice"].calls == 2
    assert it.copy_counts["copies_in"] == it.copy_counts["copies_out"] == 2


# -- validity of LDM elements ----------------------------------------------------------------------

PARTIAL = '''module "r"
stage buffered
kernel @k(%X: buf<20 x f32>, %Y: buf<20 x f32>) {
  parallel %t = 0 to 2 {workers = 64} {
    %L = ldm_alloc : ldm<16 x f32>
    copy_in %X[16*%t : min(16*%t + 16, 20)] -> %L
    for %i = 0 to BOUND {
      %v = load %L[%i] : f32
      store %v, %Y[16*%t + %i]
    }
  }
}
'''


def test_read_outside_the_region_copied_in_is_an_error():
    X = f32(20)
    (y,) = run(PARTIAL.replace("BOUND", "min(16, 20 - 16*%t)"), "k", [X, f32(20, seed=1)])
    np.testing.assert_array_equal(y, X)
    # The remainder tile copied 4 elements; reading the 5th is caught (on CPE 1,
    # which runs first).
    text = PARTIAL.replace("BOUND", "min(16, 19 - 16*%t + 2)")
    with pytest.raises(Diagnostic) as e:
        run(text, "k", [X, f32(20)], check=False)
    assert e.value.message == ("CPE 1: read of LDM %L[4] that was neither copied in nor written "
                            "(load %L[%i])")
    assert e.value.loc.line == 8


def test_copy_out_of_ldm_never_written_is_an_error():
    text = '''module "w"
stage buffered
kernel @k(%Y: buf<2 x 3 x f32>) {
  %z = const 0.0 : f32
  %L = ldm_alloc : ldm<2 x 4 x f32>
  for %j = 0 to J {
    store %z, %L[0, %j]
  }
  copy_out %L -> %Y[0 : 2, 0 : 3]
}
'''
    with pytest.raises(Diagnostic) as e:
        run(text.replace("J", "3"), "k", [f32(2, 3)])
    assert e.value.message == ("CPE 0: copy_out of LDM %L[1, 0] that was neither copied in nor "
                            "written (copy_out %L -> %Y[0 : 2, 0 : 3])")
    assert e.value.loc.line == 9
    nothing = text.replace("J", "3").replace("store %z, %L[0, %j]", "%q = add %z, %z : f32")
    with pytest.raises(Diagnostic, match=r"copy_out of LDM %L\[0, 0\] that was neither"):
        run(nothing, "k", [f32(2, 3)])
    # Writing both rows (the fourth column, never copied out, may stay invalid).
    whole = text.replace("J", "3").replace("store %z, %L[0, %j]",
                                           "store %z, %L[0, %j]\n    store %z, %L[1, %j]")
    (y,) = run(whole, "k", [f32(2, 3)])
    assert not y.any()


def test_region_copies_map_ranged_dimensions_in_order():
    text = '''module "c"
stage buffered
kernel @k(%X: buf<4 x 5 x 6 x f32>, %Y: buf<3 x 6 x 5 x f32>) {
  %L = ldm_alloc : ldm<3 x 8 x f32>
  copy_in %X[1 : 4, 2, 0 : 6] -> %L
  copy_out %L -> %Y[0 : 3, 0 : 6, 4]
  %M = ldm_alloc : ldm<2 x 2 x f32>
  copy_in %X[3, 1 : 3, 4 : 6] -> %M
  copy_out %M -> %Y[1 : 3, 4, 0 : 2]
}
'''
    X, Y = f32(4, 5, 6), f32(3, 6, 5, seed=1)
    it = interp(text)
    (y,) = it.run("k", [X, Y])
    want = Y.copy()
    want[0:3, 0:6, 4] = X[1:4, 2, 0:6]
    want[1:3, 4, 0:2] = X[3, 1:3, 4:6]
    np.testing.assert_array_equal(y, want)
    assert it.copy_counts == {"copies_in": 2, "elements_in": 22, "bytes_in": 88,
                              "copies_out": 2, "elements_out": 22, "bytes_out": 88}
    assert io_signature(module(text).lookup("k"))[1] == [module(text).lookup("k").params[1].type]


def test_out_of_bounds_and_oversized_copies_are_errors_at_run_time():
    text = '''module "b"
stage buffered
kernel @k(%X: buf<10 x f32>, %n: index) {
  %L = ldm_alloc : ldm<4 x f32>
  for %i = 0 to %n {
    copy_in %X[3*%i : 3*%i + 4] -> %L
  }
}
'''
    it = interp(text, check=False)
    it.run("k", [f32(10), np.array(3)])
    with pytest.raises(Diagnostic) as e:
        it.run("k", [f32(10), np.array(4)])
    assert e.value.message == ("CPE 0: copy_in region of %X is out of bounds: range #0 "
                            "(3*%i : 3*%i + 4) is [9, 13), outside [0, 10) of %X : "
                            "buf<10 x f32> (copy_in %X[3*%i : 3*%i + 4] -> %L)")
    big = text.replace("3*%i + 4", "3*%i + %n")
    with pytest.raises(Diagnostic, match=r"range #0 \(3\*%i : 3\*%i \+ %n\) spans 5 elements, "
                                         r"more than dimension 0 of %L : ldm<4 x f32>"):
        run(big, "k", [f32(10), np.array(5)], check=False)
    empty = text.replace("3*%i + 4", "3*%i + %n - 3")
    with pytest.raises(Diagnostic, match=r"is empty: \[0, 0\)"):
        run(empty, "k", [f32(10), np.array(3)], check=False)
    idx = '''module "b"
stage buffered
kernel @k(%X: buf<3 x 4 x f32>, %n: index) {
  %L = ldm_alloc : ldm<4 x f32>
  copy_in %X[%n, 0 : 4] -> %L
}
'''
    with pytest.raises(Diagnostic, match=r"subscript #0 \(%n\) is 3, outside \[0, 3\)"):
        run(idx, "k", [f32(3, 4), np.array(3)], check=False)


def test_copy_out_to_a_constant_global_is_refused():
    text = '''module "g"
stage buffered
global @w : buf<4 x f32> = dense<1.0>
kernel @k(%X: buf<4 x f32>) {
  %L = ldm_alloc : ldm<4 x f32>
  copy_in %X[0 : 4] -> %L
  copy_out %L -> @w[0 : 4]
}
'''
    with pytest.raises(VerificationError, match="writes to @w, a constant global"):
        verify(parse_module(text, "<t>"))
    with pytest.raises(Diagnostic, match="'copy_out' writes to @w, a constant global"):
        run(text, "k", [f32(4)], check=False)


# -- the loop interpreter's machinery still applies --------------------------------------------

def test_deep_nests_compiled_apart_check_ownership_at_run_time():
    depth = MAX_INLINE_DEPTH + 3
    vs = [f"%i{d}" for d in range(depth)]
    pad = "  " * (depth + 2)
    body = (f"{pad}%one = const 1.0 : f32\n{pad}%c = load %L[{vs[-1]}] : f32\n"
            f"{pad}%s = add %c, %one : f32\n{pad}store %s, %L[{vs[-1]}]\n")
    heads = "".join("  " * (d + 2) + f"for {v} = 0 to 2 {{\n" for d, v in enumerate(vs))
    tails = "".join("  " * (d + 2) + "}\n" for d in reversed(range(depth)))
    text = (f'module "d"\nstage buffered\nkernel @k(%A: buf<2 x f32>) {{\n'
            f'  parallel %p = 0 to 1 {{\n    %L = ldm_alloc : ldm<2 x f32>\n'
            f'    copy_in %A[0 : 2] -> %L\n{heads}{body}{tails}'
            f'    copy_out %L -> %A[0 : 2]\n  }}\n}}\n')
    it = interp(text)
    (a,) = it.run("k", [np.ones(2, np.float32)])
    assert list(a) == [1.0 + 2 ** (depth - 1)] * 2
    assert any(".owner != _cpe[0]" in s for s in it.sources.values())


def test_step_limit_and_compile_once():
    it = interp(increment(100), max_steps=500)
    with pytest.raises(Diagnostic, match="did not finish within 500 instructions"):
        it.run("inc", [np.zeros(100, np.float32)])
    it = interp(increment(100))
    for _ in range(3):
        (x,) = it.run("inc", [np.zeros(100, np.float32)])
        assert (x == 1).all()
        assert it.kernel_stats["inc"].calls == 1
    assert len([n for n in it.sources if n.startswith("_f_")]) == 1
    assert it.steps == 2 + 100 * 6


def test_example_speed_is_reported(example):
    """Not a benchmark: the example's 6.3 million instructions run quickly."""
    A, B, C = f32(1, 1024), f32(1024, 1024), f32(1, 1024)
    it = BufferedInterpreter(example)
    t = time.perf_counter()
    it.run("matmul_0", [A, B, C])
    dt = time.perf_counter() - t
    assert it.steps == 2 + 8 * (4 + 3 + 128 + 16 * (3 + 128 * (1 + 64 * 6)))
    assert dt < 60
    print(f"{it.steps / dt / 1e6:.1f}M instructions/s")
