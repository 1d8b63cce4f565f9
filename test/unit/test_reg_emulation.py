"""Register communication in the athread emulation (docs/codegen.md,
"Register communication"): the generated C of reg_send / reg_recv runs on the
emulation's row and column buses as coroutines (make emu), as threads
(-DSWIR_EMU_THREADS) and as threads under ThreadSanitizer (make emu-tsan),
with the same outputs, which numpy computes, and counters (reg_sends,
reg_recvs, reg_bytes) equal to the static count (swir.costmodel.traffic).
A program whose CPEs wait on each other for ever, a send to the sender's own
place, a receive of another vector type and a vector never received each end
the run with exit status 1 and one line naming the CPEs, in both modes, well
within the timeout (never a hang)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_emu_runtime import CC, SAN_ENV, sanitizer_missing

from swir.codegen import emulate
from swir.costmodel.traffic import dma_traffic
from swir.parser import parse_module

pytestmark = pytest.mark.skipif(CC is None, reason="no host C compiler (cc) on PATH")

ROOT = Path(__file__).resolve().parents[2]
SWIR_CG = str(Path(sys.executable).with_name("swir-cg"))
ALLGATHER = ROOT / "test" / "CodeGen" / "reg-allgather.swir"
SWAP = ROOT / "test" / "CodeGen" / "reg-swap.swir"
REG_COUNTERS = ("reg_sends", "reg_recvs", "reg_bytes")

# How each mode is built: the make target and its variables.
MODES = {
    "coroutines": ("emu", ()),
    "threads": ("emu", ("EMU_ARCH=-march=native -DSWIR_EMU_THREADS",)),
    "tsan": ("emu-tsan", ()),
}


def build(src: Path, out: Path, mode: str) -> Path:
    """The emulation program of swir file ``src`` built in ``mode``."""
    r = subprocess.run([SWIR_CG, "-q", str(src), "-o", str(out)], capture_output=True,
                       text=True, check=False, timeout=300)
    assert r.returncode == 0, r.stderr
    target, variables = MODES[mode]
    if mode == "tsan":
        why = sanitizer_missing("-fsanitize=thread", out)
        if why:
            pytest.skip(why)
    r = subprocess.run(["make", "-s", "-C", str(out), target, *variables],
                       capture_output=True, text=True, check=False, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    name = parse_module(src.read_text(), str(src)).name
    return out / (f"{name}_emu_tsan" if mode == "tsan" else f"{name}_emu")


def run(prog: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([str(prog), *args], cwd=prog.parent, capture_output=True, text=True,
                          env={**os.environ, **SAN_ENV}, timeout=timeout, check=False)


def counters(src: Path, stats: dict) -> None:
    """The emulation's counters equal the static count: the register
    counters per kernel, and the DMA counters as swir-report counts them."""
    traffic = dma_traffic(parse_module(src.read_text(), str(src)))
    for name, k in traffic.kernels.items():
        got = stats["functions"][name]
        assert {c: got[c] for c in REG_COUNTERS} == {c: getattr(k, c) for c in REG_COUNTERS}
    assert emulate.dma_counters(stats) == traffic.counters()


@pytest.mark.parametrize("mode", list(MODES))
def test_the_all_gather_gives_every_cpe_all_vectors(tmp_path, mode):
    prog = build(ALLGATHER, tmp_path / "p", mode)
    a = np.arange(256, dtype="<f4") * 0.5 - 7.0
    a.tofile(tmp_path / "a.bin")
    r = run(prog, "--input", str(tmp_path / "a.bin"), "--output", str(tmp_path / "b.bin"),
            "--stats", str(tmp_path / "s.json"))
    assert r.returncode == 0 and r.stderr == "", r.stderr
    b = np.fromfile(tmp_path / "b.bin", "<f4").reshape(64, 256)
    np.testing.assert_array_equal(b, np.tile(a, (64, 1)))
    stats = json.loads((tmp_path / "s.json").read_text())
    counters(ALLGATHER, stats)
    assert stats["functions"]["gather"]["reg_sends"] == 8 * 8 + 8 * 64
    assert stats["total"]["reg_bytes"] == 4032 * 16


@pytest.mark.parametrize("mode", ["coroutines", "threads"])
def test_sends_to_one_cpe_swap_vectors(tmp_path, mode):
    """reg-swap.swir: columns 0 and 7 swap a doublev4 over every row bus, rows
    2 and 5 an unaligned one over every column bus."""
    prog = build(SWAP, tmp_path / "p", mode)
    a = np.random.default_rng(44).standard_normal(512)
    a.astype("<f8").tofile(tmp_path / "a.bin")
    r = run(prog, "--input", str(tmp_path / "a.bin"), "--output", str(tmp_path / "b.bin"),
            "--stats", str(tmp_path / "s.json"))
    assert r.returncode == 0 and r.stderr == "", r.stderr
    want = a.reshape(8, 8, 8).copy()
    want[:, [0, 7], 0:4] = want[:, [7, 0], 0:4]
    want[[2, 5], :, 2:6] = want[[5, 2], :, 2:6]
    np.testing.assert_array_equal(np.fromfile(tmp_path / "b.bin", "<f8"), want.ravel())
    counters(SWAP, json.loads((tmp_path / "s.json").read_text()))


# A kernel of 64 CPEs with 8 floats (32 bytes: no write block shared) and 4
# doubles of LDM each, BODY between the DMA in and the DMA out.
PROGRAM = """module "bad"
stage dma {ldm_size = 65536}

cpe kernel @bad(%A: buf<64 x 8 x f32>) {
  %id = cpe_id : index
  %L = ldm_alloc : ldm<8 x f32>
  %D = ldm_alloc : ldm<4 x f64>
  dma_get %A[%id, 0] -> %L[0] {count = 8, reply = 0}
  dma_wait {reply = 0, times = 1}
BODY
  dma_put %L -> %A[%id, 0] {count = 8, reply = 0}
  dma_wait {reply = 0, times = 1}
  return
}

host func @main(%a: buf<64 x 8 x f32>) attributes {outputs = 1} {
'entry:
  spawn @bad(%a)
  join
  return
}
"""

# Each program, and the one line its run ends with (a regular expression:
# which CPE returned first depends on the threads' timing).
FAILURES = {
    "all-receive-first": (
        '  reg_recv %L[0] {bus = "col"}\n  reg_send %L[0] {bus = "col"}',
        r"kernel 'bad': deadlock \(on Sunway the CPEs would wait forever\): CPE 0 waits in "
        r"getc \(column\) after 0 receives, CPE 1 waits in getc \(column\) after 0 receives, "
        r"CPE 2 .*, CPE 3 waits in getc \(column\) after 0 receives and 60 more"),
    # CPE 9 waits for a vector no CPE of its column sends; CPE 3's second send
    # to CPE 11 finds the buffer its first filled, and CPE 11 has returned.
    "returned-while-waited-for": (
        '  if %id - 9 == 0 {\n    reg_recv %L[0] {bus = "col"}\n  }\n'
        '  if %id - 3 == 0 {\n    reg_send %L[0] {bus = "col", to = 1}\n'
        '    reg_send %L[4] {bus = "col", to = 1}\n  }',
        r"kernel 'bad': deadlock \(on Sunway the CPEs would wait forever\): CPE 3 waits in "
        r"putc to CPE 11 after 1 send, CPE 9 waits in getc \(column\) after 0 receives; "
        r"62 returned \(CPE \d+ first\)"),
    # Row 0 broadcasts along every column twice and nobody receives: the
    # second broadcast waits for 7 full buffers whose CPEs have returned.
    "broadcast-into-full-buffers": (
        '  if %id floordiv 8 == 0 {\n    reg_send %L[0] {bus = "col"}\n'
        '    reg_send %L[0] {bus = "col"}\n  }',
        r"kernel 'bad': deadlock \(on Sunway the CPEs would wait forever\): CPE 0 waits in "
        r"putc to all \(7 of 7 buffers full\) after 1 send, CPE 1 waits in putc to all "
        r"\(7 of 7 buffers full\) after 1 send, .* and 4 more; 56 returned \(CPE \d+ first\)"),
    "never-received": (
        '  if %id - 3 == 0 {\n    reg_send %L[0] {bus = "col", to = 1}\n  }\n'
        '  if %id - 12 == 0 {\n    reg_send %L[4] {bus = "row", to = 0}\n  }',
        r"kernel 'bad': the kernel ended with vectors sent and never received: CPE 8 has 1 on "
        r"its row bus \(the first from CPE 12\), CPE 11 has 1 on its column bus \(the first "
        r"from CPE 3\)"),
    "to-itself": (
        '  if %id - 10 == 0 {\n    reg_send %L[0] {bus = "row", to = 2}\n  }',
        r"kernel 'bad', CPE 10: simd_putr to place 2, the sender's own place in its row"),
    "another-vector-type": (
        '  if %id - 1 == 0 {\n    reg_send %D[0] {bus = "row", to = 0}\n  }\n'
        '  if %id == 0 {\n    reg_recv %L[0] {bus = "row"}\n  }',
        r"kernel 'bad', CPE 0: simd_getr into a 16-byte vector received 32 bytes from CPE 1 "
        r"\(a doublev4\)"),
}


@pytest.mark.parametrize("mode", ["coroutines", "threads"])
@pytest.mark.parametrize("case", list(FAILURES))
def test_a_failing_exchange_ends_the_run_with_one_line(tmp_path, case, mode):
    body, message = FAILURES[case]
    src = tmp_path / "bad.swir"
    src.write_text(PROGRAM.replace("BODY", body))
    prog = build(src, tmp_path / "p", mode)
    r = run(prog, "--output", str(tmp_path / "out.bin"), timeout=60)
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1, r.stderr
    assert re.fullmatch(r"swir-emu: error: " + message + r"\n", r.stderr), r.stderr
