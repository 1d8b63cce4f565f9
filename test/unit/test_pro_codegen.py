"""The SW26010-Pro's code (docs/codegen.md, "The SW26010-Pro"): swir-cg
--target=sw26010pro writes the Pro's CPE interface (crts.h, CRTS_tid, the
CRTS DMAs, athread_ssync_array), broadcasts by DMA and RMA, a swgcc
Makefile; the project passes the Pro's dialect check (test/sunway/swgcc) and,
under the emulation, gives the interpreter's results with the Pro's 256 KB
of LDM, in every way the emulation runs the CPEs. An RMA the Pro's rules
forbid, and a wait for an RMA never sent, end the run with one line."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_emu_runtime import CC, SAN_ENV, sanitizer_missing

from swir.codegen import emulate
from swir.costmodel.traffic import dma_traffic
from swir.interp.run import interpreter_for, signature
from swir.parser import parse_module

pytestmark = pytest.mark.skipif(CC is None, reason="no host C compiler (cc) on PATH")

ROOT = Path(__file__).resolve().parents[2]
SWIR_CG = str(Path(sys.executable).with_name("swir-cg"))
EXAMPLES = ROOT / "examples"
BROADCAST = ROOT / "test" / "CodeGen" / "broadcast.swir"
PAPER = ROOT / "test" / "CodeGen" / "paper-matmul.swir"
PRO = "--target=sw26010pro"
RTOL, ATOL = 1e-4, 1e-5   # f32 sums in another order than numpy's

MODES = {
    "coroutines": ("emu", ()),
    "threads": ("emu", ("EMU_ARCH=-march=native -DSWIR_EMU_THREADS",)),
    "tsan": ("emu-tsan", ()),
}


def swir_cg(src: Path, out: Path, *options: str) -> None:
    r = subprocess.run([SWIR_CG, "-q", PRO, str(src), "-o", str(out), *options],
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr


def make(out: Path, target: str = "emu", *variables: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-s", "-C", str(out), target, *variables],
                          capture_output=True, text=True, timeout=300, check=False)


def run(prog: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(prog), *args], cwd=prog.parent, capture_output=True, text=True,
                          env={**os.environ, **SAN_ENV}, timeout=120, check=False)


def test_the_mlp_example_on_the_pro_matches_the_interpreter(tmp_path):
    src = EXAMPLES / "mlp.swir"
    out = tmp_path / "p"
    swir_cg(src, out)
    slave = (out / "layers_slave.c").read_text()
    assert "#include <crts.h>" in slave and "#include <slave.h>" not in slave
    assert "CRTS_dma_iget" in slave and "athread_get(" not in slave
    makefile = (out / "Makefile").read_text()
    assert "SWGCC = swgcc" in makefile and "-mslave" in makefile and "sw5cc" not in makefile
    m = parse_module(src.read_text(), str(src))
    prog = emulate.build(out, m.name)          # the swgcc dialect check first (conftest)
    args = [np.load(EXAMPLES / "mlp_input.npy")]
    params, results = signature(m, m.lookup("main"))
    got = emulate.run(prog, args, [p.type for p in params], results)
    want = interpreter_for(m, src.parent).run("main", args)
    np.testing.assert_allclose(got.outputs[0], want[0], rtol=RTOL, atol=ATOL)


def zero_inputs(tmp_path: Path) -> list[str]:
    """The paper matmul's arguments, A (1 x 1024) and B (1024 x 1024), zeros."""
    (tmp_path / "a0.bin").write_bytes(bytes(4 * 1024))
    (tmp_path / "b0.bin").write_bytes(bytes(4 * 1024 * 1024))
    return ["--input", str(tmp_path / "a0.bin"), "--input", str(tmp_path / "b0.bin"),
            "--output", str(tmp_path / "c.bin")]


def broadcast_program(tmp_path: Path, mode: str) -> Path:
    """broadcast.swir planned for 64 KB (so that A is broadcast whole) on the
    Pro: the broadcast by DMA and RMA, built in ``mode``."""
    out = tmp_path / "p"
    swir_cg(BROADCAST, out, "--strategy=greedy", "--no-simd", "--ldm-size=65536")
    target, variables = MODES[mode]
    if mode == "tsan":
        why = sanitizer_missing("-fsanitize=thread", out)
        if why:
            pytest.skip(why)
    r = make(out, target, *variables)
    assert r.returncode == 0, r.stdout + r.stderr
    return out / ("paper_emu_tsan" if mode == "tsan" else "paper_emu")


@pytest.mark.parametrize("mode", list(MODES))
def test_a_broadcast_reaches_every_ldm_by_rma(tmp_path, mode):
    prog = broadcast_program(tmp_path, mode)
    slave = (prog.parent / "layers_slave.c").read_text()
    assert "swir_rma_bcast(A_ldm" in slave and "athread_get(BCAST_MODE" not in slave
    rng = np.random.default_rng(47)
    a, b = rng.standard_normal((1, 1024), "f4"), rng.standard_normal((1024, 1024), "f4")
    a.tofile(tmp_path / "a.bin")
    b.tofile(tmp_path / "b.bin")
    r = run(prog, "--input", str(tmp_path / "a.bin"), "--input", str(tmp_path / "b.bin"),
            "--output", str(tmp_path / "c.bin"), "--stats", str(tmp_path / "s.json"))
    assert r.returncode == 0 and r.stderr == "", r.stderr
    np.testing.assert_allclose(np.fromfile(tmp_path / "c.bin", "<f4"), (a @ b).ravel(),
                               rtol=RTOL, atol=1e-3)
    s = json.loads((tmp_path / "s.json").read_text())["functions"]["matmul_0"]
    # One broadcast of A's 4096 bytes: CPE 0's get, one row and 8 column RMAs
    # (each delivering to 8 CPEs), counted as the SW26010's broadcast is.
    assert (s["bcasts"], s["bcast_bytes"]) == (1, 4096 * 64)
    assert (s["rma_bcasts"], s["rma_bytes"]) == (9, 9 * 8 * 4096)
    # Every counter equals the static count of the dma-stage module (the
    # broadcast's DMA and its wait counted as the SW26010's broadcast).
    dma = tmp_path / "paper.dma.swir"
    r = subprocess.run([str(Path(sys.executable).with_name("swir-opt")), PRO,
                        "-ldm-plan{strategy=greedy,ldm-size=65536}", "-insert-dma",
                        str(BROADCAST), "-o", str(dma)],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    stats = json.loads((tmp_path / "s.json").read_text())
    module = parse_module(dma.read_text(), str(dma))
    assert emulate.dma_counters(stats) == dma_traffic(module).counters()


# Edits of the generated broadcast that break the Pro's rules, and the line
# each run ends with.
RMA_FAULTS = {
    "odd-length": ("athread_rma_row_ibcast(ldm, ldm, len,",
                   "athread_rma_row_ibcast(ldm, ldm, len - 2,",
                   r"athread_rma_row_ibcast of 4094 bytes: RMA moves a positive multiple of 4"),
    "never-sent": ("        athread_rma_row_ibcast(ldm, ldm, len, &swir_rma_local, "
                   "&swir_rma_remote);\n        athread_rma_wait_value(&swir_rma_local, 1);\n",
                   "",
                   r"deadlock \(on Sunway the CPEs would wait forever\): CPE 0 waits in "
                   r"athread_rma_wait_value for 1 \(the word has 0\)"),
    "past-the-frame": ("athread_rma_row_ibcast(ldm, ldm, len,",
                       "athread_rma_row_ibcast((char *)ldm + 65536, ldm, len,",
                       r"athread_rma_row_ibcast of 4096 bytes into LDM at"),
}


@pytest.mark.parametrize("mode", ["coroutines", "threads"])
@pytest.mark.parametrize("fault", list(RMA_FAULTS))
def test_a_broken_rma_ends_the_run_with_one_line(tmp_path, mode, fault):
    out = tmp_path / "p"
    swir_cg(BROADCAST, out, "--strategy=greedy", "--no-simd", "--ldm-size=65536")
    old, new, message = RMA_FAULTS[fault]
    slave = out / "layers_slave.c"
    text = slave.read_text()
    assert old in text
    slave.write_text(text.replace(old, new, 1))
    r = make(out, "emu", *MODES[mode][1])
    assert r.returncode == 0, r.stdout + r.stderr
    r = run(out / "paper_emu", *zero_inputs(tmp_path))
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and re.search(message, lines[0]), r.stderr
    assert "Traceback" not in r.stderr


# Coroutines only: with threads the broken program races (whether a row-0
# CPE's own stale column send lands in its LDM before or after the row's data
# depends on the threads' timing), so its result is not determined there.
@pytest.mark.parametrize("mode", ["coroutines"])
def test_a_column_send_before_the_row_arrived_sends_stale_data(tmp_path, mode):
    """RMA lands at the receiver's wait, as the machine gives no data before
    the remote word counts it: row 0 sending down its columns without waiting
    for the row's data sends what its LDM held before, and the result is
    wrong (here zeros where the input's ones should have been summed)."""
    out = tmp_path / "p"
    swir_cg(BROADCAST, out, "--strategy=greedy", "--no-simd", "--ldm-size=65536")
    slave = out / "layers_slave.c"
    wait = "        athread_rma_wait_value(&swir_rma_remote, 1);    /* row 0 has the data */\n"
    assert wait in slave.read_text()
    slave.write_text(slave.read_text().replace(wait, "", 1))
    assert make(out, "emu", *MODES[mode][1]).returncode == 0
    np.ones(1024, "<f4").tofile(tmp_path / "a.bin")
    np.ones(1024 * 1024, "<f4").tofile(tmp_path / "b.bin")
    r = run(out / "paper_emu", "--input", str(tmp_path / "a.bin"), "--input",
            str(tmp_path / "b.bin"), "--output", str(tmp_path / "c.bin"))
    assert r.returncode == 0, r.stderr
    c = np.fromfile(tmp_path / "c.bin", "<f4")
    assert np.count_nonzero(c != 1024) > 0     # the right code gives 1024 everywhere


def test_the_pro_plan_uses_its_256_kb_and_the_emulation_holds_it_to_them(tmp_path):
    """The paper's matmul planned for the Pro takes more LDM than the
    SW26010 has; built as for a 64 KB LDM, the emulation refuses it."""
    out = tmp_path / "p"
    swir_cg(PAPER, out, "--strategy=greedy", "--no-simd")
    makefile = (out / "Makefile").read_text()
    assert "LDM_BYTES = 262144" in makefile
    r = make(out)
    assert r.returncode == 0, r.stdout + r.stderr
    args = zero_inputs(tmp_path)
    r = run(out / "paper_emu", *args, "--stats", str(tmp_path / "s.json"))
    assert r.returncode == 0, r.stderr
    peak = json.loads((tmp_path / "s.json").read_text())["functions"]["matmul_0"]["ldm_peak"]
    assert 65536 < peak <= 262144
    r = make(out, "emu", "-B", "LDM_BYTES=65536", "LDM_RESERVE=4096")
    assert r.returncode == 0, r.stdout + r.stderr
    r = run(out / "paper_emu", *args)
    assert r.returncode == 1 and "LDM" in r.stderr and len(r.stderr.splitlines()) == 1


def test_a_module_planned_for_one_target_is_refused_for_the_other(tmp_path):
    planned = tmp_path / "paper.dma.swir"
    r = subprocess.run([str(Path(sys.executable).with_name("swir-opt")), "-ldm-plan",
                        "-insert-dma", str(PAPER), "-o", str(planned)],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([SWIR_CG, PRO, str(planned), "-o", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "was planned for the SW26010" in r.stderr and len(r.stderr.splitlines()) == 1
    assert not (tmp_path / "out").exists()


HAVE_MPI = all(shutil.which(t) for t in ("mpicc", "mpirun", "make"))


@pytest.mark.skipif(not HAVE_MPI and not os.environ.get("SWIR_REQUIRE_MPI"),
                    reason="needs Open MPI (mpicc, mpirun); scripts/test installs it")
def test_an_mpi_program_for_the_pro_runs_6_ranks_per_chip(tmp_path):
    """--ranks on the Pro: the job places 6 ranks per chip; the program,
    through the swgcc check (its MPE side too) and mpirun, gives the
    interpreter's result."""
    src, out = EXAMPLES / "mlp.swir", tmp_path / "p"
    swir_cg(src, out, "--ranks", "2")
    makefile = (out / "Makefile").read_text()
    assert "2 MPI processes, 6 per chip" in makefile and "-n 2 -np 2 -cgsp" in makefile
    assert "$(MPICC) -mhybrid" in makefile
    prog = emulate.build(out, "mlp")
    x = np.load(EXAMPLES / "mlp_input.npy")
    x.astype("<f4").tofile(tmp_path / "x.bin")
    r = make(out, "emu-run", f"ARGS=--input {tmp_path / 'x.bin'} --output {tmp_path / 'y.bin'}")
    assert r.returncode == 0 and prog.exists(), r.stdout + r.stderr
    m = parse_module(src.read_text(), str(src))
    want = interpreter_for(m, src.parent).run("main", [x])[0]
    np.testing.assert_allclose(np.fromfile(tmp_path / "y.bin", "<f4"), want.ravel(),
                               rtol=RTOL, atol=ATOL)


def test_register_communication_is_refused_for_the_pro(tmp_path):
    """reg_send / reg_recv in a module planned for the Pro (which has RMA,
    no register buses): one located line, exit 1, no project."""
    src = ROOT / "test" / "CodeGen" / "reg-swap.swir"
    text = src.read_text().replace("stage dma {", 'stage dma {target = "sw26010pro", ', 1)
    assert 'target = "sw26010pro"' in text
    planned = tmp_path / "reg.swir"
    planned.write_text(text)
    r = subprocess.run([SWIR_CG, str(planned), "-o", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert re.search(r"reg\.swir:\d+:\d+: error: swir-cg: 'reg_(send|recv)' is register communication, "
                     r"which the SW26010-Pro does not have", r.stderr), r.stderr
    assert not (tmp_path / "out").exists()


def test_an_explicit_target_must_be_the_one_a_module_was_planned_for(tmp_path):
    planned = tmp_path / "paper.pro.swir"
    r = subprocess.run([str(Path(sys.executable).with_name("swir-opt")), PRO, "-ldm-plan",
                        "-insert-dma", str(PAPER), "-o", str(planned)],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([SWIR_CG, "--target=sw26010", str(planned), "-o", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 1 and "was planned for the SW26010-Pro" in r.stderr, r.stderr
    r = subprocess.run([SWIR_CG, "-q", str(planned), "-o", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert "#include <crts.h>" in (tmp_path / "o" / "layers_slave.c").read_text()


def test_a_broadcast_of_two_byte_elements_is_not_planned_for_the_pro():
    """RMA moves whole 4-byte words from 4-byte aligned addresses: on the Pro
    -insert-dma broadcasts no tile of f16 (an odd count would not be whole
    words), where the SW26010 broadcasts it."""
    text = PAPER.read_text().replace("f32", "f16")
    from swir.passes import pass_class
    from swir.passes.manager import PassManager
    from swir.target import SW26010, SW26010_PRO
    counts = {}
    for target in (SW26010, SW26010_PRO):
        m = parse_module(text, "<f16>")
        plan = pass_class("ldm-plan")(strategy="greedy", ldm_size=65536)
        PassManager([plan, pass_class("insert-dma")()], target=target).run(m)
        counts[target.name] = sum(1 for f in m.functions for i in f.walk()
                                  if i.opname == "dma_bcast")
    assert counts == {"sw26010": 1, "sw26010pro": 0}


def test_the_pro_s_mpi_makefile_runs_6_ranks_per_chip():
    """-np is the chip's core groups, at most: 6 on the Pro, 4 on the SW26010."""
    from swir.codegen.templates import Ranks, makefile
    from swir.target import SW26010, SW26010_PRO
    pro = makefile("m", "m.swir", 16384, 262144, SW26010_PRO, Ranks(12, "data"))
    sw = makefile("m", "m.swir", 4096, 65536, SW26010, Ranks(12, "data"))
    assert "-n 12 -np 6 -cgsp" in pro and "12 MPI processes, 6 per chip" in pro
    assert "-n 12 -np 4 -cgsp" in sw and "12 MPI processes, 4 per chip" in sw
