"""The dma-stage interpreter's register communication (swir/interp/buses.py):
an all-gather over the buses gives every CPE the whole array, the counters
count each send and receive, a receive in a called function waits and resumes
with its own call stack, and a deadlock ends every CPE's thread."""

import threading
from pathlib import Path

import numpy as np
import pytest

from swir.diagnostics import Diagnostic
from swir.interp.buses import cpe_list
from swir.interp.dma import DMAInterpreter
from swir.parser import parse_module

TOOLS = Path(__file__).resolve().parents[1] / "Tools"


def test_allgather_gives_every_cpe_the_array_and_counts_messages():
    m = parse_module((TOOLS / "swir-run-reg.swir").read_text(), "swir-run-reg.swir")
    it = DMAInterpreter(m)
    a = np.random.default_rng(0).standard_normal(256).astype(np.float32)
    (b,) = it.call(m.lookup("gather"), [a, np.zeros((64, 256), np.float32)])
    assert np.array_equal(b, np.tile(a, (64, 1)))
    s = it.kernel_stats["gather"]
    assert (s.reg_sends, s.reg_recvs, s.reg_bytes) == (64 * 9, 64 * 63, 64 * 63 * 16)


def test_a_receive_in_a_called_function_waits_and_resumes():
    # CPE 0 broadcasts a vector down column 0; the other CPEs of the column
    # receive it in a called function, so they wait one call deep (CPE 63
    # runs first: they wait before CPE 0 has sent).
    text = """
module "down"
stage dma {ldm_size = 1024}

cpe func @take(%L: ldm<4 x f32>) {
'entry:
  reg_recv %L[0] {bus = "col"}
  return
}

cpe kernel @down(%X: buf<4 x f32>, %Y: buf<64 x 4 x f32>) {
  %id = cpe_id : index
  %L = ldm_alloc : ldm<4 x f32>
  if %id mod 8 == 0 {
    if %id == 0 {
      dma_get %X[0] -> %L {count = 4, reply = 0}
      dma_wait {reply = 0, times = 1}
      reg_send %L[0] {bus = "col"}
    } else {
      call @take(%L)
    }
    dma_put %L -> %Y[%id, 0] {count = 4, reply = 1}
    dma_wait {reply = 1, times = 1}
  }
}
"""
    m = parse_module(text, "down.swir")
    it = DMAInterpreter(m)
    x = np.arange(4, dtype=np.float32) + 1
    (y,) = it.call(m.lookup("down"), [x, np.zeros((64, 4), np.float32)])
    want = np.zeros((64, 4), np.float32)
    want[::8] = x
    assert np.array_equal(y, want)
    assert it.kernel_stats["take"].reg_recvs == 7
    assert it.kernel_stats["down"].reg_sends == 1
    assert it.state[1] == 0 and not it.active


def test_a_deadlock_ends_every_cpe_thread():
    before = threading.active_count()
    m = parse_module((TOOLS / "swir-run-reg-errors.swir").read_text(), "e.swir")
    it = DMAInterpreter(m)
    with pytest.raises(Diagnostic, match="deadlock in @recv_first: CPEs 0-63"):
        it.call(m.lookup("run_recv_first"), [])
    assert threading.active_count() == before
    # The interpreter runs the next kernel normally after it.
    with pytest.raises(Diagnostic, match="CPE 2: reg_send .* sends to itself"):
        it.call(m.lookup("run_to_self"), [])
    assert threading.active_count() == before


def test_cpe_list_groups_runs():
    assert cpe_list([3]) == "CPE 3"
    assert cpe_list([0, 1, 2, 5, 7, 8]) == "CPEs 0-2, 5, 7-8"
