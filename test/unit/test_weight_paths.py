"""Weight files are read only from a module's own folder and below (issue 41,
item 4), as ONNX external data is: a module from elsewhere cannot put a file
of the user's (``file "/etc/passwd"``, ``"../../x"``, a link out of its
folder) into a program or a result. ``--weights-from DIR`` allows another
folder. Only regular files are read. Decoys only, under temporary folders."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULE = '''module "m"
stage graph

global @w : <4 x i8> = file {path} offset 0

func @main(%x: <4 x i8>) -> <4 x i8> {{
  %y = add %x, @w : <4 x i8>
  return %y
}}
'''


def tool(name: str, *args, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / name), *map(str, args)],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.fixture
def layout(tmp_path):
    """A module folder and, beside it, a 'secret' decoy it must not read."""
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "s.txt").write_bytes(b"SECRETDATA")
    home = tmp_path / "model"
    home.mkdir()
    np.save(tmp_path / "x.npy", np.zeros(4, np.int8))
    return tmp_path, home, secret


def _module(home: Path, path: str) -> Path:
    m = home / "m.swir"
    m.write_text(MODULE.format(path=f'"{path}"'))
    return m


@pytest.mark.parametrize("how", ["absolute", "dot-dot", "link out"])
@pytest.mark.parametrize("which", ["swir-run", "swir-cg", "swir-opt"])
def test_weights_outside_the_modules_folder_are_refused(layout, how, which):
    tmp, home, secret = layout
    if how == "absolute":
        path = str(secret / "s.txt")
    elif how == "dot-dot":
        path = "../" * 12 + str(secret / "s.txt").lstrip("/")
    else:
        (home / "w.bin").symlink_to(secret / "s.txt")
        path = "w.bin"
    m = _module(home, path)
    args = {"swir-run": [m, "--input", tmp / "x.npy", "--print"],
            "swir-cg": [m, "-o", tmp / "out"],
            "swir-opt": ["-simplify", "-lower-loops", m, "-o", tmp / "out.swir"]}[which]
    r = tool(which, *args)
    assert r.returncode == 1, r.stderr
    assert f"is outside the module's folder '{home}'; give --weights-from DIR" in r.stderr
    assert "SECRET" not in r.stdout and "83" not in r.stdout
    assert not (tmp / "out").exists() and not (tmp / "out.swir").exists()
    # ... read when the user allows that folder
    r = tool(which, *args, "--weights-from", secret)
    assert r.returncode == 0, r.stderr


def test_a_folder_to_allow_must_be_one(layout):
    tmp, home, _ = layout
    m = _module(home, "w.bin")
    r = tool("swir-run", m, "--input", tmp / "x.npy", "--weights-from", tmp / "x.npy")
    assert r.returncode == 1
    assert r.stderr == f"swir-run: error: --weights-from '{tmp / 'x.npy'}': not a directory\n"


def test_weights_in_the_modules_folder_and_below_are_read(layout):
    tmp, home, _ = layout
    (home / "sub").mkdir()
    (home / "sub" / "w.bin").write_bytes(bytes([1, 2, 3, 4]))
    m = _module(home, "sub/w.bin")
    r = tool("swir-run", m, "--input", tmp / "x.npy", "--print")
    assert r.returncode == 0 and "[1 2 3 4]" in r.stdout, r.stderr


@pytest.mark.parametrize("kind", ["fifo", "directory", "loop"])
def test_weights_that_are_not_a_regular_file_are_named_as_what_they_are(layout, kind):
    """A FIFO is never opened to block the tool (it said 'Is a directory')."""
    tmp, home, _ = layout
    w = home / "w.bin"
    if kind == "fifo":
        os.mkfifo(w)
    elif kind == "directory":
        w.mkdir()
    else:
        w.symlink_to("w.bin")
    m = _module(home, "w.bin")
    r = tool("swir-run", m, "--input", tmp / "x.npy")
    assert r.returncode == 1
    want = {"fifo": "it is a FIFO, not a regular file",
            "directory": "it is a directory, not a regular file",
            "loop": "a loop of symbolic links"}[kind]
    assert want in r.stderr, r.stderr


def test_swir_opt_writes_a_module_that_reads_on_its_own(layout):
    """A module swir-opt writes into another folder carries its weights in a
    sidecar beside it (weights are read from its own folder only), so the
    README's path (swir-opt -o out/..., then swir-run out/...) works."""
    tmp, _, _ = layout
    out = tmp / "out"
    out.mkdir()
    r = tool("swir-opt", "-lower-loops", ROOT / "examples" / "mlp.swir", "-o",
             out / "mlp.loop.swir")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["mlp.loop.swir", "mlp.loop.swir.weights"]
    assert '"mlp.loop.swir.weights"' in (out / "mlp.loop.swir").read_text()
    x = ROOT / "examples" / "mlp_input.npy"
    got = tool("swir-run", out / "mlp.loop.swir", "--input", x, "--print")
    want = tool("swir-run", ROOT / "examples" / "mlp.swir", "--input", x, "--print")
    assert got.returncode == 0 and want.returncode == 0, got.stderr + want.stderr
    values = [np.array(s.split("\n", 1)[1].replace("[", " ").replace("]", " ").split(), float)
              for s in (got.stdout, want.stdout)]
    np.testing.assert_allclose(values[0], values[1], rtol=1e-6)
