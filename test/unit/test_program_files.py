"""The generated program's files (docs/codegen.md, "Running the program").

Inputs are raw arrays or .npy files (dtype and shape checked); every input and
the weights file is opened and size-checked before anything is allocated;
outputs follow the same rules as the tools' (test_output_safety.py): all or
nothing, devices and FIFOs written into, symlinks followed, the umask
honoured. Each test runs the program built from examples/mlp.swir with make
emu."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_output_safety import FifoReader

from swir.codegen import emulate

BIN = Path(sys.executable).parent
ROOT = Path(__file__).parents[2]
MLP = ROOT / "examples" / "mlp.swir"
X = np.load(ROOT / "examples" / "mlp_input.npy")        # (1, 64) float32


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("mlp") / "proj"
    subprocess.run([str(BIN / "swir-cg"), "-O0", "-q", str(MLP), "-o", str(out)], check=True)
    subprocess.run(["make", "-s", "-C", str(out), "emu"], check=True, capture_output=True)
    emulate.sunway_check(out)
    return out / "mlp_emu"


def run(program: Path, *args: str | Path, umask: int | None = None, cwd: Path | None = None
        ) -> subprocess.CompletedProcess:
    return subprocess.run([str(program), *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=cwd,
                          preexec_fn=(lambda: os.umask(umask)) if umask is not None else None)


def ok(p: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert p.returncode == 0, p.stderr
    return p


def one_error(p: subprocess.CompletedProcess, text: str) -> None:
    assert p.returncode == 1 and p.stderr.count("\n") == 1 and text in p.stderr, p.stderr


@pytest.fixture
def reference(program, tmp_path) -> bytes:
    raw = tmp_path / "x.bin"
    X.tofile(raw)
    ok(run(program, "--input", raw, "--output", tmp_path / "ref.bin"))
    return (tmp_path / "ref.bin").read_bytes()


# -- .npy ---------------------------------------------------------------------------------

def test_npy_input_and_output(program, tmp_path, reference):
    np.save(tmp_path / "x.npy", X)
    ok(run(program, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy"))
    y = np.load(tmp_path / "y.npy")
    assert y.dtype == np.float32 and y.shape == (1, 10)
    assert y.tobytes() == reference


def test_npy_input_may_leave_out_unit_dimensions(program, tmp_path, reference):
    np.save(tmp_path / "x.npy", X.reshape(64))
    ok(run(program, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.bin"))
    assert (tmp_path / "y.bin").read_bytes() == reference


@pytest.mark.parametrize("array, message", [
    (X.astype(np.float64), "holds dtype '<f8'; buf<1 x 64 x f32> needs '<f4'"),
    (X.reshape(8, 8), "has shape (8, 8); expected the shape of buf<1 x 64 x f32>"),
    (X[:, :32], "has shape (1, 32)"),
])
def test_npy_input_is_checked(program, tmp_path, array, message):
    np.save(tmp_path / "x.npy", array)
    one_error(run(program, "--input", tmp_path / "x.npy"), message)


def test_fortran_order_npy_is_refused(program, tmp_path):
    a = np.asfortranarray(np.arange(64, dtype=np.float32).reshape(8, 8))
    np.save(tmp_path / "x.npy", a)
    data = (tmp_path / "x.npy").read_bytes().replace(b"(8, 8)", b"(1, 64)")
    (tmp_path / "x.npy").write_bytes(data)
    one_error(run(program, "--input", tmp_path / "x.npy"), "is in Fortran order")


def test_a_npy_file_without_the_suffix_gets_a_hint(program, tmp_path):
    np.save(tmp_path / "x.npy", X)
    os.rename(tmp_path / "x.npy", tmp_path / "x")
    one_error(run(program, "--input", tmp_path / "x"), "it is a .npy file: give it a .npy name")


@pytest.mark.parametrize("data", [b"", b"\x93NUMPY", b"\x93NUMPY\x01\x00\xff\xff{",
                                  b"\x93NUMPY\x09\x00\x10\x00{'descr': '<f4'}      \n",
                                  b"garbage that is not npy at all"])
def test_malformed_npy_is_one_line(program, tmp_path, data):
    (tmp_path / "x.npy").write_bytes(data)
    p = run(program, "--input", tmp_path / "x.npy")
    assert p.returncode == 1 and p.stderr.count("\n") == 1, p.stderr


# -- inputs are checked before anything is allocated ----------------------------------------

@pytest.fixture(scope="module")
def big_program(tmp_path_factory) -> Path:
    """A relu over a 2 GiB input: allocating its buffers takes 4 GiB."""
    d = tmp_path_factory.mktemp("big")
    src = d / "big.swir"
    n = 1 << 29
    src.write_text(f'module "big"\nstage graph\nfunc @main(%x: <{n} x f32>) -> <{n} x f32> '
                   f"{{\n'entry:\n  %y = relu %x : <{n} x f32>\n  return %y\n}}\n")
    subprocess.run([str(BIN / "swir-cg"), "-O0", "-q", str(src), "-o", str(d / "proj")],
                   check=True)
    subprocess.run(["make", "-s", "-C", str(d / "proj"), "emu"], check=True,
                   capture_output=True)
    emulate.sunway_check(d / "proj")
    return d / "proj" / "big_emu"


@pytest.mark.parametrize("case", ["missing", "short", "npy-dtype"])
def test_inputs_are_checked_before_memory_is_allocated(big_program, tmp_path, case):
    """A missing or wrong-sized input fails at once, without first allocating
    the model's gigabytes (it used to allocate every buffer first). The peak
    is measured in a child of a fresh process, so it is this run's alone."""
    path = tmp_path / ("x.npy" if case == "npy-dtype" else "x.bin")
    if case == "short":
        path.write_bytes(b"\0" * 1024)
    elif case == "npy-dtype":
        np.save(path, np.zeros(4, np.float64))
    probe = ("import resource, subprocess, sys\n"
             "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
             "sys.stderr.write(p.stderr)\n"
             "sys.exit(p.returncode)\n")
    p = subprocess.run([sys.executable, "-c", probe, str(big_program), "--input", str(path)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "input 1" in p.stderr, p.stderr
    peak_kib = int(p.stdout)
    assert peak_kib < 64 * 1024, f"peak RSS {peak_kib} KiB before failing"


# -- outputs -------------------------------------------------------------------------------

@pytest.fixture
def x_bin(tmp_path) -> Path:
    X.tofile(tmp_path / "x.bin")
    return tmp_path / "x.bin"


def test_output_to_a_fifo(program, tmp_path, x_bin, reference):
    fifo = tmp_path / "pipe"
    reader = FifoReader(fifo)
    ok(run(program, "--input", x_bin, "--output", fifo))
    assert reader.result() == reference and stat.S_ISFIFO(fifo.lstat().st_mode)


def test_output_through_a_symlink_to_a_device(program, tmp_path, x_bin):
    link = tmp_path / "null"
    link.symlink_to("/dev/null")
    ok(run(program, "--input", x_bin, "--output", link, "--stats", link))
    assert link.is_symlink() and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null", "x.bin"]


def test_output_through_a_symlink_to_a_file(program, tmp_path, x_bin, reference):
    real = tmp_path / "real.bin"
    real.write_bytes(b"old")
    real.chmod(0o640)
    link = tmp_path / "link.bin"
    link.symlink_to("real.bin")
    ok(run(program, "--input", x_bin, "--output", link))
    assert link.is_symlink() and real.read_bytes() == reference
    assert stat.S_IMODE(real.stat().st_mode) == 0o640


def test_outputs_and_stats_to_stdout_share_its_offset(program, tmp_path, x_bin, reference):
    with open(tmp_path / "all.out", "wb") as f:
        p = subprocess.run([str(program), "--input", str(x_bin), "--output", "/dev/stdout",
                            "--stats", "/dev/stdout"], stdout=f, stderr=subprocess.PIPE,
                           timeout=120)
    assert p.returncode == 0, p.stderr
    data = (tmp_path / "all.out").read_bytes()
    assert data.startswith(reference) and data[len(reference):].startswith(b'{"runs": 1')


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600)])
def test_new_outputs_follow_the_umask(program, tmp_path, x_bin, mask, mode):
    ok(run(program, "--input", x_bin, "--output", tmp_path / "y.bin", "--stats",
           tmp_path / "s.json", umask=mask))
    for name in ("y.bin", "s.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == mode


@pytest.mark.parametrize("bad", ["{dir}", "{dir}/missing/y.bin"])
def test_a_bad_output_fails_before_the_run_and_leaves_nothing(program, tmp_path, x_bin, bad):
    (tmp_path / "old.bin").write_bytes(b"old")
    p = run(program, "--input", x_bin, "--output", bad.format(dir=tmp_path), "--stats",
            tmp_path / "old.bin")
    assert p.returncode == 1 and "cannot write output" in p.stderr, p.stderr
    assert (tmp_path / "old.bin").read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.bin", "x.bin"]


def test_two_outputs_naming_one_file_are_refused(program, tmp_path, x_bin):
    p = run(program, "--input", x_bin, "--output", tmp_path / "same", "--stats",
            f"{tmp_path}/./same")
    one_error(p, "are the same file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.bin"]


def test_a_link_to_dev_stdout_writes_into_stdout(program, tmp_path, x_bin, reference):
    link = tmp_path / "out"
    link.symlink_to("/dev/stdout")
    with open(tmp_path / "log", "wb") as log:
        p = subprocess.run([str(program), "--input", str(x_bin), "--output", str(link),
                            "--stats", str(link)], stdout=log, stderr=subprocess.PIPE,
                           timeout=120)
    assert p.returncode == 0, p.stderr
    data = (tmp_path / "log").read_bytes()
    assert data.startswith(reference) and data[len(reference):].startswith(b'{"runs": 1')
    assert link.is_symlink()


def test_a_long_output_name(program, tmp_path, x_bin, reference):
    """The temporary file beside a 255-byte name still fits the file system."""
    out = tmp_path / ("y" * 251 + ".bin")
    ok(run(program, "--input", x_bin, "--output", out))
    assert out.read_bytes() == reference
