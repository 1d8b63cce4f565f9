"""Outputs never destroy what they replace (docs/reliability.md, "Outputs").

Every tool and the generated program write an output path by its kind: a
regular file or a new path atomically (a temporary file renamed into place), a
symlink by replacing the file it points to, a device or a FIFO by writing
straight into it, never by renaming over it (as root, ``-o /dev/null`` used to
replace the system's /dev/null with a file). Files get 0666 & ~umask, project
directories 0777 & ~umask, as ``cc -o`` and ``cp`` give; a replaced file keeps
its permission bits. A closed or broken stdout is quiet; a full one an error."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from helpers import onnx_model

BIN = Path(sys.executable).parent
ROOT = Path(__file__).parents[2]
MLP = ROOT / "examples" / "mlp.swir"
MLP_INPUT = ROOT / "examples" / "mlp_input.npy"


def run(*argv: str | Path, umask: int | None = None, **kw) -> subprocess.CompletedProcess:
    tool = str(BIN / argv[0]) if (BIN / str(argv[0])).exists() else str(argv[0])
    return subprocess.run([tool, *map(str, argv[1:])], capture_output=True, text=True,
                          timeout=300, preexec_fn=(lambda: os.umask(umask)) if umask is not None
                          else None, **kw)


def ok(p: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert p.returncode == 0, p.stderr
    return p


def tiny_onnx(path: Path) -> Path:
    """A relu model with no weights (its module needs no sidecar file)."""
    onnx = pytest.importorskip("onnx")
    h = onnx.helper
    x = h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])
    y = h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])
    g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "tiny", [x], [y])
    onnx.save(onnx_model(g, 17), str(path))
    return path


# Each tool with an output option: (name, argv with {out} for the output, what the
# output holds when read back).
def _writers(tmp: Path) -> list[tuple[str, list[str]]]:
    return [
        ("swir-opt", ["swir-opt", "-dce", str(MLP), "-o", "{out}"]),
        ("swir-run --output", ["swir-run", str(MLP), "--input", str(MLP_INPUT),
                               "--output", "{out}"]),
        ("swir-run --stats", ["swir-run", str(MLP), "--input", str(MLP_INPUT),
                              "--stats", "{out}"]),
        ("swir-report --json", ["swir-report", "-O0", str(MLP), "--json", "{out}"]),
        ("swir-import", ["swir-import", str(tiny_onnx(tmp / "tiny.onnx")), "-o", "{out}"]),
    ]


WRITERS = ["swir-opt", "swir-run --output", "swir-run --stats", "swir-report --json",
           "swir-import"]


def _argv(tmp: Path, which: str, out: Path) -> list[str]:
    argv = dict(_writers(tmp))[which]
    return [a.format(out=out) for a in argv]


def _reference(tmp: Path, which: str) -> Path:
    return tmp / f"reference-{which.replace(' ', '_')}"


def _sidecar_named(text: bytes, output: Path) -> bytes:
    """A module swir-opt wrote to ``output``, its weights sidecar (named
    after the output: OUTPUT.weights) renamed OUT.weights, to compare
    modules written under other names."""
    return text.replace(f'"{output.name}.weights"'.encode(), b'"OUT.weights"')


def _expected(tmp: Path, which: str, stream: bool = False) -> bytes:
    """What the tool writes to a regular file; with ``stream``, to a device
    or FIFO (swir-opt names weight files from a file's folder, and as the
    input does on stdout or a stream, where no folder is known)."""
    if stream and which == "swir-opt":
        argv = _argv(tmp, which, Path("-"))
        return ok(run(*argv[:-2])).stdout.encode()
    ref = _reference(tmp, which)
    ok(run(*_argv(tmp, which, ref)))
    return ref.read_bytes()


class FifoReader:
    """Reads everything written to a FIFO, in a thread (opening it for
    writing blocks until a reader opens it)."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.path, self.data = path, b""
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        with open(self.path, "rb") as f:
            self.data = f.read()

    def result(self) -> bytes:
        self.thread.join(timeout=120)
        return self.data


@pytest.mark.parametrize("which", WRITERS)
def test_a_fifo_is_written_into_not_replaced(tmp_path, which):
    want = _expected(tmp_path, which, stream=True)
    fifo = tmp_path / "pipe"
    reader = FifoReader(fifo)
    ok(run(*_argv(tmp_path, which, fifo)))
    assert reader.result() == want
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


@pytest.mark.parametrize("which", WRITERS)
def test_a_symlink_to_a_device_is_written_through(tmp_path, which):
    """``-o link`` with link -> /dev/null: the link and the device stay."""
    link = tmp_path / "null"
    link.symlink_to("/dev/null")
    ok(run(*_argv(tmp_path, which, link)))
    assert link.is_symlink() and os.readlink(link) == "/dev/null"
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("tiny")) == \
        ["null"]


def _device(tmp: Path) -> Path:
    """A character device like /dev/null (1, 3) made in tmp, where permitted."""
    dev = tmp / "dev-null"
    try:
        os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod is not permitted here (the symlink test covers devices)")
    return dev


@pytest.mark.parametrize("which", WRITERS)
def test_a_device_is_written_into_not_replaced(tmp_path, which):
    dev = _device(tmp_path)
    ok(run(*_argv(tmp_path, which, dev)))
    st = dev.lstat()
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)


@pytest.mark.parametrize("which", WRITERS)
def test_a_symlink_to_a_file_replaces_the_file_and_keeps_the_link(tmp_path, which):
    want = _expected(tmp_path, which)
    real = tmp_path / "real.out"
    real.write_bytes(b"old")
    real.chmod(0o640)
    link = tmp_path / "link.out"
    link.symlink_to("real.out")
    ok(run(*_argv(tmp_path, which, link)))
    assert link.is_symlink() and os.readlink(link) == "real.out"
    assert _sidecar_named(real.read_bytes(), link) == _sidecar_named(want, _reference(tmp_path,
                                                                                     which))
    assert stat.S_IMODE(real.stat().st_mode) == 0o640      # a replaced file keeps its mode


@pytest.mark.parametrize("which", WRITERS)
def test_new_files_follow_the_umask(tmp_path, which):
    out = tmp_path / "new.out"
    ok(run(*_argv(tmp_path, which, out), umask=0o022))
    assert stat.S_IMODE(out.stat().st_mode) == 0o644       # not mkstemp's 0600


@pytest.mark.parametrize("mask, mode", [(0o077, 0o600), (0o002, 0o664)])
def test_new_files_follow_other_umasks(tmp_path, mask, mode):
    out = tmp_path / "new.swir"
    ok(run("swir-opt", MLP, "-o", out, umask=mask))
    assert stat.S_IMODE(out.stat().st_mode) == mode


def test_swir_opt_sidecar_weights_follow_the_umask_and_skip_devices(tmp_path):
    """Folded weights go to OUT.weights beside a file; a device or FIFO has
    no folder beside it, so they are printed inline."""
    resnet = ROOT / "examples" / "resnet.swir"
    out = tmp_path / "r.swir"
    ok(run("swir-opt", "-fold-batchnorm", resnet, "-o", out, umask=0o027))
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "r.swir.weights").stat().st_mode) == 0o640
    fifo = tmp_path / "pipe"
    reader = FifoReader(fifo)
    ok(run("swir-opt", "-fold-batchnorm", resnet, "-o", fifo))
    assert b"dense<" in reader.result()
    assert not (tmp_path / "pipe.weights").exists()


def test_swir_import_to_a_device_needs_a_weights_file(tmp_path):
    onnx = pytest.importorskip("onnx")
    h = onnx.helper
    w = onnx.numpy_helper.from_array(np.arange(64, dtype=np.float32).reshape(8, 8), "w")
    g = h.make_graph([h.make_node("MatMul", ["x", "w"], ["y"])], "dense",
                     [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 8])],
                     [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 8])], [w])
    model = tmp_path / "dense.onnx"
    onnx.save(onnx_model(g, 17), str(model))
    link = tmp_path / "null"
    link.symlink_to("/dev/null")
    p = run("swir-import", model, "-o", link)
    assert p.returncode == 1 and p.stderr.count("\n") == 1, p.stderr
    assert "--weights FILE" in p.stderr
    ok(run("swir-import", model, "-o", link, "--weights", tmp_path / "w.bin"))
    assert (tmp_path / "w.bin").stat().st_size > 0 and link.is_symlink()


# -- swir-cg's project directory ---------------------------------------------------------

@pytest.mark.parametrize("mask, dmode, fmode", [(0o022, 0o755, 0o644), (0o077, 0o700, 0o600)])
def test_project_directory_follows_the_umask(tmp_path, mask, dmode, fmode):
    out = tmp_path / "proj"
    ok(run("swir-cg", "-O0", MLP, "-o", out, umask=mask))
    assert stat.S_IMODE(out.stat().st_mode) == dmode
    assert stat.S_IMODE((out / "main.c").stat().st_mode) == fmode
    assert stat.S_IMODE((out / "emu").stat().st_mode) == dmode


def test_force_through_a_symlink_replaces_its_directory_and_leaves_nothing(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "stale.c").write_text("old")
    real.chmod(0o750)
    link = tmp_path / "link"
    link.symlink_to("real")
    for _ in range(2):
        ok(run("swir-cg", "-O0", MLP, "-o", link, "--force"))
    assert link.is_symlink() and os.readlink(link) == "real"
    assert (real / "main.c").exists() and not (real / "stale.c").exists()
    assert stat.S_IMODE(real.stat().st_mode) == 0o750     # a replaced directory keeps its mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]


@pytest.mark.parametrize("target", [".", "..", "{cwd}"])
def test_force_will_not_replace_the_current_directory(tmp_path, target):
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(MLP, work)
    shutil.copy(MLP.with_suffix(".weights"), work)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    p = run("swir-cg", "-O0", "mlp.swir", "-o", target.format(cwd=work), "--force", cwd=work)
    assert p.returncode == 1 and p.stderr.count("\n") == 1, p.stderr
    assert "current directory" in p.stderr and "Device or resource busy" not in p.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_force_will_not_delete_its_own_input(tmp_path):
    proj = tmp_path / "proj"
    ok(run("swir-cg", "-O0", MLP, "-o", proj))
    shutil.copy(MLP, proj)
    shutil.copy(MLP.with_suffix(".weights"), proj)
    p = run("swir-cg", "-O0", proj / "mlp.swir", "-o", proj, "--force")
    assert p.returncode == 1 and "holds the input" in p.stderr, p.stderr
    assert (proj / "mlp.swir").exists() and (proj / "main.c").exists()


# -- standard output -----------------------------------------------------------------------

def _many_results(tmp: Path) -> Path:
    """A module whose printed results are far larger than a pipe's buffer."""
    n = 60
    body = "".join(f"  %y{i} = relu %x : <999 x f32>\n" for i in range(n))
    types = ", ".join(["<999 x f32>"] * n)
    p = tmp / "many.swir"
    p.write_text('module "many"\nstage graph\nfunc @main(%x: <999 x f32>) -> (' + types +
                 ") {\n'entry:\n" + body + "  return " + ", ".join(f"%y{i}" for i in range(n))
                 + "\n}\n")
    np.save(tmp / "x.npy", np.linspace(-1, 1, 999, dtype=np.float32))
    return p


def _stdout_writers(tmp: Path) -> dict[str, list[str]]:
    many = _many_results(tmp)
    return {
        "swir-opt": ["swir-opt", str(many)],
        "swir-run": ["swir-run", str(many), "--input", str(tmp / "x.npy"), "--print"],
        "swir-report": ["swir-report", "-O0", str(many)],
        "swir-import": ["swir-import", str(tiny_onnx(tmp / "tiny.onnx")), "-o", "-"],
        "swir-cg": ["swir-cg", str(MLP), "--print-pipeline"],
    }


STDOUT_TOOLS = ["swir-opt", "swir-run", "swir-report", "swir-import", "swir-cg"]


@pytest.mark.parametrize("tool", STDOUT_TOOLS)
def test_closed_stdout_is_quiet(tmp_path, tool):
    argv = _stdout_writers(tmp_path)[tool]
    p = subprocess.run(" ".join(f"'{BIN / argv[0]}'" if i == 0 else f"'{a}'"
                                for i, a in enumerate(argv)) + " >&-",
                       shell=True, executable="/bin/bash", capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0 and p.stderr == "", p.stderr


@pytest.mark.parametrize("tool", STDOUT_TOOLS)
def test_broken_pipe_is_quiet(tmp_path, tool):
    """The reader is gone before the tool writes: exit 141 (as SIGPIPE gives
    a C tool), nothing on stderr."""
    argv = _stdout_writers(tmp_path)[tool]
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([str(BIN / argv[0]), *argv[1:]], stdout=w, stderr=subprocess.PIPE,
                           text=True, timeout=300)
    finally:
        os.close(w)
    assert p.returncode == 141 and p.stderr == "", p.stderr


@pytest.mark.parametrize("tool", STDOUT_TOOLS)
def test_full_stdout_is_an_error(tmp_path, tool):
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    argv = _stdout_writers(tmp_path)[tool]
    with open("/dev/full", "w") as full:
        p = subprocess.run([str(BIN / argv[0]), *argv[1:]], stdout=full, stderr=subprocess.PIPE,
                           text=True, timeout=300)
    assert p.returncode == 1
    assert p.stderr == f"{tool}: error: cannot write standard output: No space left on device\n"


# -- paths naming the process's own descriptors -----------------------------------------------

def test_dev_stdout_and_a_link_to_it_share_stdouts_offset(tmp_path):
    """``--json /dev/stdout > log``: the JSON, then the table, both kept (a
    link to /dev/stdout too); reopening the file would write over one."""
    link = tmp_path / "to-stdout"
    link.symlink_to("/dev/stdout")
    for target in ("/dev/stdout", str(link)):
        with open(tmp_path / "log", "w") as log:
            p = subprocess.run([str(BIN / "swir-report"), "-O0", "-q", str(MLP), "--json",
                                target], stdout=log, stderr=subprocess.PIPE, text=True,
                               timeout=300)
        assert p.returncode == 0, p.stderr
        text = (tmp_path / "log").read_text()
        assert text.startswith("{") and "modeled" in text.split("\n}\n", 1)[1], text[:300]
        assert link.is_symlink()


def test_an_explicit_dev_stdout_whose_reader_is_gone_is_quiet(tmp_path):
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([str(BIN / "swir-opt"), str(MLP), "-o", "/dev/stdout"], stdout=w,
                           stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(w)
    assert p.returncode == 141 and p.stderr == "", p.stderr


def test_other_proc_paths_are_ordinary_files(tmp_path):
    """/proc/self/cwd/F is a path to a regular file, written as any other:
    a long old file replaced whole, a new one created."""
    (tmp_path / "old.swir").write_text("x" * 100_000)
    ok(run("swir-opt", MLP, "-o", tmp_path / "reference.swir"))
    for name in ("old.swir", "new.swir"):
        ok(run("swir-opt", MLP, "-o", f"/proc/self/cwd/{name}", cwd=tmp_path))
        assert _sidecar_named((tmp_path / name).read_bytes(), tmp_path / name) == \
            _sidecar_named((tmp_path / "reference.swir").read_bytes(), tmp_path / "reference.swir")
