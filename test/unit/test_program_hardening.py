"""The generated program under hostile input and hostile luck
(swir/codegen/program.c, program_main.c, program_ranks.c):

- its .npy header parser never reads outside the header, whatever the header
  holds (a key at its very end, NULs, unclosed quotes and parentheses, huge
  shapes), and each failure is one line: run under AddressSanitizer and
  UndefinedBehaviorSanitizer on the reported header and on a bounded fuzz
  campaign (bench/fuzz_program.py, whose long run is in docs/reliability.md);
- any legal type builds and runs, however long its text (the most dimensions,
  a long name);
- SIGINT, SIGTERM: the temporaries are removed, one line, exit 130 / 143;
- two outputs naming one file are refused also through dangling symlinks and
  hard links;
- without --output the results are printed, as swir-run prints them;
- an MPI program reports an error every rank meets once, from rank 0.

Hostile paths are decoys made under the test's temporary folder."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from swir.codegen import emulate
from swir.ir import types

import siblings

BIN = Path(sys.executable).parent
ROOT = Path(__file__).parents[2]
MLP = ROOT / "examples" / "mlp.swir"
X = np.load(ROOT / "examples" / "mlp_input.npy")        # (1, 64) float32
fuzz = siblings.load(ROOT / "bench" / "fuzz_program.py")
files = siblings.sibling("test_program_files")
run, ok, one_error = files.run, files.ok, files.one_error
sanitizers = siblings.sibling("test_codegen_sanitizers")

# Two results of over 1000 elements (printed summarized), an i32 and an f16 one.
THREE = """module "three"
stage graph
func @main(%x: <2 x 600 x f32>) -> (<2 x 600 x f32>, <2 x 600 x f32>, <2 x 3 x i32>, <2 x 3 x f16>) {
'entry:
  %y = relu %x : <2 x 600 x f32>
  %z = sigmoid %x : <2 x 600 x f32>
  %s = slice %x {starts = [0, 0], ends = [2, 3]} : <2 x 3 x f32>
  %i = cast %s {to = i32} : <2 x 3 x i32>
  %h = cast %s {to = f16} : <2 x 3 x f16>
  return %y, %z, %i, %h
}
"""
X3 = ((np.arange(1200, dtype=np.float32) - 600) / 7).reshape(2, 600)


# The most dimensions a type may have (swir.ir.types.MAX_RANK: 32, numpy 1.x's limit).
RANK = min(36, getattr(types, "MAX_RANK", 36))
LONG_NAME = "activations_of_the_first_layer_" + "x" * 40       # 71 characters


def deep_module(rank: int) -> str:
    t = "<" + " x ".join(["1"] * (rank - 1) + ["4"]) + " x f32>"
    return (f'module "deep"\nstage graph\nfunc @main(%{LONG_NAME}: {t}) -> {t} {{\n'
            f"'entry:\n  %y = relu %{LONG_NAME} : {t}\n  return %y\n}}\n")


def compile_project(d: Path, source: str | Path, *targets: str, ranks: int = 0) -> Path:
    """swir-cg -O0 (--ranks N --split data) and make TARGETS, in d/proj."""
    if isinstance(source, str):
        (d / "m.swir").write_text(source)
        source = d / "m.swir"
    out = d / "proj"
    extra = ["--ranks", str(ranks), "--split", "data"] if ranks else ["-O0"]
    subprocess.run([str(BIN / "swir-cg"), "-q", *extra, str(source), "-o", str(out)],
                   check=True)
    r = subprocess.run(["make", "-s", "-j2", "-C", str(out), *targets], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


@pytest.fixture(scope="module")
def mlp(tmp_path_factory) -> Path:
    """examples/mlp.swir built with make emu-asan (every test here runs it
    under the sanitizers); its folder. (The Sunway dialect check runs on the
    deep and MPI projects below.)"""
    return compile_project(tmp_path_factory.mktemp("mlp"), MLP, "emu-asan")


@pytest.fixture(scope="module")
def three(tmp_path_factory) -> Path:
    out = compile_project(tmp_path_factory.mktemp("three"), THREE, "emu")
    return out / "three_emu"


# -- 1. the .npy reader stays inside its buffer ----------------------------------------------

def npy_file(path: Path, header: bytes, data: bytes = X.tobytes()) -> Path:
    path.write_bytes(fuzz.npy(header, data))
    return path


def asan_run(mlp: Path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([str(mlp / "mlp_emu_asan"), *map(str, args)], capture_output=True,
                          text=True, timeout=60, env=ASAN_ENV)


ASAN_ENV = {**os.environ, **fuzz.ENV}


def clean_error(p: subprocess.CompletedProcess, text: str) -> None:
    assert not any(r in p.stderr for r in fuzz.REPORTS), p.stderr
    one_error(p, text)


def test_a_header_ending_in_descr_key_reads_nothing_past_it(mlp, tmp_path):
    """The tester's reproduction: `NAME_emu_asan --input in_descr-at-end.npy`
    was a heap-buffer-overflow in strncmp (the dtype compared from the byte
    after the header's NUL)."""
    path = npy_file(tmp_path / "in_descr-at-end.npy",
                    b"{'fortran_order': False, 'shape': (1, 64), 'descr':")
    clean_error(asan_run(mlp, "--input", path), "malformed .npy header")


@pytest.mark.parametrize("header, message", [
    (b"{'fortran_order': False, 'shape': (1, 64), \"descr\": ", "malformed .npy header"),
    (b"{'fortran_order': False, 'shape': (1, 64), 'descr': <f4}", "malformed .npy header"),
    (b"{'descr': '<f4\n', 'fortran_order': False, 'shape': (1, 64)}",
     r"holds dtype '<f4\x0a'"),
    (b"{'descr': '<f4', 'fortran_order': False, 'shape': (1,\n\t99999999999999999999)}",
     r"has shape (1,\x0a\x0999999999999999999999)"),
])
def test_hostile_headers_are_one_clean_line(mlp, tmp_path, header, message):
    """The dtype's key at the header's very end (either quote), a dtype
    without quotes, and control characters in a quoted dtype or shape
    (escaped: the message stays one line). The other keys at the end, and
    unclosed values, are among the fuzz campaign's cases."""
    path = npy_file(tmp_path / "x.npy", header)
    clean_error(asan_run(mlp, "--input", path), message)


def test_fuzz_campaign_bounded(mlp):
    """bench/fuzz_program.py's campaign, 250 cases (6 s on two cores): no
    sanitizer report, no death by signal, exit 0 or one line and exit 1,
    nothing left behind. On today's seed it meets the reported overflow (an
    end-key case) among the first 130."""
    prog = fuzz.Program(mlp / "mlp_emu_asan", mlp / "weights.bin", X)
    c = fuzz.campaign(prog, 250, seed=1, jobs=2)
    report = "\n".join(f"case {n} ({o.kind}): {o.failure}\n{o.detail}" for n, o in c.failures)
    assert not c.failures, report
    assert {o.status for o in c.outcomes} == {0, 1}


# -- 2. a type of any length ------------------------------------------------------------------

def test_the_longest_type_builds_and_runs(tmp_path):
    """A type of the most dimensions swir allows and a long parameter name
    (some 220 characters of "input 1 (NAME : TYPE)") used to overflow a
    160-byte message buffer: make emu failed with -Werror=format-truncation
    (the tester's 36-dimension input; swir now allows 32)."""
    out = compile_project(tmp_path, deep_module(RANK), "emu")
    emulate.sunway_check(out)
    x = np.array([-1.5, 0.25, 2.0, -0.0], np.float32).reshape((1,) * (RANK - 1) + (4,))
    np.save(tmp_path / "x.npy", x)
    ok(run(out / "deep_emu", "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy"))
    y = np.load(tmp_path / "y.npy")
    assert y.shape == x.shape and np.array_equal(y, np.maximum(x, 0))
    np.save(tmp_path / "bad.npy", x.reshape(2, 2))
    p = run(out / "deep_emu", "--input", tmp_path / "bad.npy")
    one_error(p, f"input 1 ({LONG_NAME} : buf<" + "1 x " * (RANK - 1) + "4 x f32>) ")


# -- 3. signals ----------------------------------------------------------------------------------

def default_signals() -> None:
    """The child starts with SIGINT and SIGTERM at their defaults (a
    background job of a shell starts with SIGINT ignored, which the program
    keeps ignoring)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def wait_blocked(p: subprocess.Popen, seen=lambda: True, timeout: float = 30) -> None:
    """Until the program sleeps in the kernel (on a FIFO nobody opened) and
    seen() holds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert p.poll() is None, p.stderr.read()
        try:
            wchan = Path(f"/proc/{p.pid}/wchan").read_text()
            state = Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            wchan, state = "", "S"
        if seen() and state == "S" and (wchan in ("", "0") or "partner" in wchan
                                        or "fifo" in wchan or "pipe" in wchan):
            time.sleep(0.1)
            return
        time.sleep(0.02)
    pytest.fail("the program never blocked on its FIFO")


SIGNALS = [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")]


@pytest.mark.parametrize("signo, status, word", SIGNALS)
def test_a_signal_while_writing_a_fifo_output_removes_the_temporaries(
        mlp, tmp_path, signo, status, word):
    """--stats goes to a temporary first, then the FIFO output (no reader)
    blocks: the signal removes the temporary, says so in one line and exits
    128 + the signal (it used to die by it and leave `.s.jsontmpXXXXXX`)."""
    os.mkfifo(tmp_path / "out.fifo")
    X.tofile(tmp_path / "x.bin")
    p = subprocess.Popen([str(mlp / "mlp_emu_asan"), "--input", str(tmp_path / "x.bin"),
                          "--output", str(tmp_path / "out.fifo"), "--stats",
                          str(tmp_path / "s.json")], stderr=subprocess.PIPE, text=True,
                         preexec_fn=default_signals, env=ASAN_ENV)
    try:
        wait_blocked(p, lambda: any(f.name.startswith(".s.json") for f in tmp_path.iterdir()))
        p.send_signal(signo)
        assert p.wait(timeout=30) == status
    finally:
        p.kill()
    assert p.stderr.read() == f"{mlp / 'mlp_emu_asan'}: {word}\n"
    assert sorted(f.name for f in tmp_path.iterdir()) == ["out.fifo", "x.bin"]


@pytest.mark.parametrize("signo, status, word", SIGNALS)
def test_a_signal_while_blocked_reading_a_fifo_input(mlp, tmp_path, signo, status, word):
    os.mkfifo(tmp_path / "in.fifo")
    p = subprocess.Popen([str(mlp / "mlp_emu_asan"), "--input", str(tmp_path / "in.fifo"),
                          "--output", str(tmp_path / "y.bin")], stderr=subprocess.PIPE,
                         text=True, preexec_fn=default_signals, env=ASAN_ENV)
    try:
        wait_blocked(p)
        p.send_signal(signo)
        assert p.wait(timeout=30) == status
    finally:
        p.kill()
    assert p.stderr.read() == f"{mlp / 'mlp_emu_asan'}: {word}\n"
    assert sorted(f.name for f in tmp_path.iterdir()) == ["in.fifo"]


# -- 4. two outputs, one file ---------------------------------------------------------------

def decoys(d: Path) -> None:
    (d / "real").write_bytes(b"old")
    os.link(d / "real", d / "hard")
    (d / "to-real").symlink_to("real")
    (d / "dangling").symlink_to("nowhere")
    (d / "sub").mkdir()
    (d / "sub" / "up").symlink_to("../nowhere")         # relative to its own folder
    (d / "chain").symlink_to("dangling")


@pytest.mark.parametrize("a, b", [
    ("dangling", "dangling"), ("dangling", "nowhere"), ("nowhere", "dangling"),
    ("chain", "nowhere"), ("sub/up", "dangling"), ("hard", "real"), ("hard", "to-real"),
])
def test_two_outputs_naming_one_file_are_refused(three, tmp_path, a, b):
    """Through dangling links (compared by the file they would make) and hard
    links (by device and inode): refused before anything is written."""
    decoys(tmp_path)
    np.save(tmp_path / "x.npy", X3)
    before = {f.name: (f.lstat().st_ino, f.lstat().st_mtime_ns) for f in tmp_path.iterdir()}
    p = run(three, "--input", tmp_path / "x.npy", "--output", tmp_path / a, "--output",
            tmp_path / b, "--output", tmp_path / "i.bin", "--output", tmp_path / "h.bin")
    one_error(p, f"'{tmp_path / a}' and '{tmp_path / b}' are the same file; give each output "
                 "its own")
    after = {f.name: (f.lstat().st_ino, f.lstat().st_mtime_ns) for f in tmp_path.iterdir()}
    assert after == before and (tmp_path / "real").read_bytes() == b"old"


def test_a_dangling_link_makes_the_file_it_points_to(three, tmp_path):
    """Written as a new file (temporary, renamed into place): a dangling link
    into a folder that does not exist fails before the run, as a new path
    there does."""
    decoys(tmp_path)
    (tmp_path / "lost").symlink_to("no/such/folder/y.bin")
    np.save(tmp_path / "x.npy", X3)
    p = run(three, "--input", tmp_path / "x.npy", "--output", tmp_path / "sub" / "up",
            "--output", tmp_path / "lost", "--output", tmp_path / "i.bin", "--output",
            tmp_path / "h.bin")
    one_error(p, f"cannot write output '{tmp_path / 'lost'}': No such file or directory")
    assert not (tmp_path / "nowhere").exists()
    ok(run(three, "--input", tmp_path / "x.npy", "--output", tmp_path / "sub" / "up",
           "--output", tmp_path / "z.bin", "--output", tmp_path / "i.bin", "--output",
           tmp_path / "h.bin"))
    assert (tmp_path / "nowhere").read_bytes() == np.maximum(X3, 0).tobytes()
    assert (tmp_path / "sub" / "up").is_symlink()


# -- 5. no --output: the results are printed -------------------------------------------------

def printed(text: str) -> list[tuple[str, list[str]]]:
    """(header line, the elements' texts) per result."""
    parts = re.split(r"^(result \d+ \(.*\):)$", text, flags=re.M)
    return [(h, re.findall(r"[^\s\[\]]+", body)) for h, body in zip(parts[1::2], parts[2::2])]


def test_without_output_the_results_are_printed(mlp, tmp_path):
    """As swir-run prints them (numpy's style); exact: every f32 in the
    fewest digits that read back as itself."""
    np.save(tmp_path / "x.npy", X)
    ok(asan_run(mlp, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy"))
    want = np.load(tmp_path / "y.npy")
    p = ok(asan_run(mlp, "--input", tmp_path / "x.npy"))
    [(head, values)] = printed(p.stdout)
    assert head == "result 1 (out : buf<1 x 10 x f32>):" and p.stderr == ""
    assert p.stdout.startswith(head + "\n[[") and p.stdout.endswith("]]\n")
    assert np.array_equal(np.array(values, np.float32), want.reshape(-1))
    assert max(map(len, p.stdout.splitlines())) <= 75


def numpy_text(v: np.floating) -> str:
    """How numpy prints one float in an array: str() of its type, 1. for 1.0."""
    s = str(v)
    return s[:-1] if s.endswith(".0") else s


def test_large_results_are_summarized_like_numpy(three, tmp_path):
    np.save(tmp_path / "x.npy", X3)
    p = ok(run(three, "--input", tmp_path / "x.npy"))
    results = printed(p.stdout)
    assert [h for h, _ in results] == [
        "result 1 (out0 : buf<2 x 600 x f32>):", "result 2 (out1 : buf<2 x 600 x f32>):",
        "result 3 (out2 : buf<2 x 3 x i32>):", "result 4 (out3 : buf<2 x 3 x f16>):"]
    relu = np.maximum(X3, 0)
    rows = [relu[r, [0, 1, 2, -3, -2, -1]] for r in range(2)]
    texts = [[numpy_text(v) for v in row] for row in rows]
    assert results[0][1] == [*texts[0][:3], "...", *texts[0][3:], *texts[1][:3], "...",
                             *texts[1][3:]]
    assert results[2][1] == ["-85", "-85", "-85", "0", "0", "0"]
    # f16: numpy's shortest spelling of each value
    assert results[3][1] == [numpy_text(v) for v in X3[:, :3].astype(np.float16).reshape(-1)]


# -- 6. MPI: an error every rank meets, once -----------------------------------------------------

HAVE_MPI = all(shutil.which(t) for t in ("mpicc", "mpirun"))


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> Path:
    if not HAVE_MPI and not os.environ.get("SWIR_REQUIRE_MPI"):
        pytest.skip("no mpicc / mpirun (Open MPI) on PATH")
    d = tmp_path_factory.mktemp("ranks")
    source = ('module "two"\nstage graph\nfunc @main(%x: <2 x 6 x f32>) -> <2 x 6 x f32> {\n'
              "'entry:\n  %y = relu %x : <2 x 6 x f32>\n  return %y\n}\n")
    out = compile_project(d, source, "emu", ranks=2)
    emulate.sunway_check(out)
    return out / "two_emu"


def mpirun(program: Path, *args) -> subprocess.CompletedProcess:
    prefix, env = emulate.mpirun(2)
    return subprocess.run([*prefix, str(program), *map(str, args)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **env})


def test_an_error_every_rank_meets_is_printed_once(two_ranks, tmp_path):
    """A usage error, and a weights file no rank can open, are the same on
    every rank: rank 0 prints the line, once and whole (each rank used to
    print it, the lines interleaved mid-line), every rank exits 1. A failure
    of rank 0 alone (its input) is still printed by it."""
    np.save(tmp_path / "x.npy", X3[:, :6])
    cases = [(["--input", tmp_path / "x.npy", "--bogus"],
              "--bogus: unknown option or missing value (see --help)"),
             (["--input", tmp_path / "x.npy", "--weights", tmp_path / "none.bin"],
              f"cannot open weights file '{tmp_path / 'none.bin'}': No such file or directory"),
             (["--input", tmp_path / "missing.npy"], "cannot open input 1")]
    for args, message in cases:
        r = mpirun(two_ranks, *args)
        lines = [line for line in r.stderr.splitlines() if ": error: " in line]
        assert r.returncode == 1 and len(lines) == 1, r.stderr
        assert lines[0].startswith(f"{two_ranks}: error: {message}"), r.stderr
