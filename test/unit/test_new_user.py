"""A new user's rough edges: what scripts/emu_check.py says it checked, a
help text for every flag of bench/models/zoo.py, and `make` (the Sunway
build) on a machine without sw5cc saying so in one line and naming `make
emu`, for the Makefile of one core group and of an MPI program."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from swir.codegen import emulate

ROOT = Path(__file__).parents[2]
BIN = Path(sys.executable).parent
MLP = ROOT / "examples" / "mlp.swir"
SW5CC = ROOT / "test" / "sunway" / "sw5cc"


def load(path: Path):
    """A script of the repository (not a package) as a module."""
    name = f"_swir_script_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module          # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


# -- scripts/emu_check.py: the verdict names its criterion -------------------------------

CRITERION = "|out - ref| <= atol + rtol * |ref| (rtol 0.0001, atol 1e-05)"


@pytest.fixture
def checker(monkeypatch, tmp_path, capsys):
    """emu_check's main() on examples/mlp.swir, the program's run replaced by
    one returning ``got``: its stdout and exit status."""
    check = load(ROOT / "scripts" / "emu_check.py")
    monkeypatch.chdir(tmp_path)

    def run_with(got: np.ndarray, want: np.ndarray) -> tuple[str, int]:
        monkeypatch.setattr(check, "run", lambda *a, **k: emulate.Run(
            [got], {"runs": 1, "functions": {}, "total": {}}, ""))
        np.save(tmp_path / "ref.npy", want)
        status = check.main([str(MLP), "prog", "--input", str(ROOT / "examples" / "mlp_input.npy"),
                             "--reference", "ref.npy"])
        return capsys.readouterr().out, status
    return run_with


def result_lines(text: str) -> list[str]:
    lines = text.splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith("result #0"))
    return lines[i:i + 2]


def test_a_pass_says_what_held_and_why_a_large_relative_diff_passes(checker):
    """The demo's ShuffleNet printed "max rel diff 0.00594 (rtol 0.0001, ...):
    PASS", which reads as a contradiction: near 0, atol allows it."""
    want = np.linspace(-1, 1, 10, dtype=np.float32).reshape(1, 10)
    want[0, 2] = 1e-4                                  # |ref| small: atol decides
    got = want.copy()
    got[0, 2] += 6e-6                                  # rel 0.06, under atol
    got[0, 9] *= 1 + 5e-5                              # rel 5e-5 on 1.0: half of rtol * |ref|
    text, status = checker(got, want)
    head, worst = result_lines(text)
    assert status == 0 and text.splitlines()[-1] == "PASS"
    assert head == (f"result #0 float32[1, 10] vs ref.npy: PASS: {CRITERION} holds at all 10 "
                    "elements")
    m = re.fullmatch(r"  worst element: \|out - ref\| at ([\d.]+)% of its bound; max abs diff "
                     r"([\d.e-]+), max rel diff ([\d.e-]+) \(over rtol only where \|ref\| < atol "
                     r"/ rtol = 0.1, which atol covers\)", worst)
    assert m, worst
    bound = 1e-5 + 1e-4 * np.abs(want.astype(np.float64))
    margin = np.max(np.abs(got.astype(np.float64) - want) / bound)
    assert float(m.group(1)) == pytest.approx(100 * margin, rel=1e-2)
    assert float(m.group(3)) == pytest.approx(0.06, rel=1e-2)
    assert "): PASS" not in text                        # the old, contradictory form


def test_a_fail_says_what_did_not_hold_where_and_by_how_much(checker):
    want = np.linspace(-1, 1, 10, dtype=np.float32).reshape(1, 10)
    got = want.copy()
    got[0, 3] += 1e-3
    text, status = checker(got, want)
    head, worst = result_lines(text)
    assert status == 1 and text.splitlines()[-1] == "FAIL"
    assert head.startswith(f"result #0 float32[1, 10] vs ref.npy: FAIL: {CRITERION} does not "
                           "hold: 1 of 10 elements out of tolerance, first at (0, 3): ")
    assert re.match(r"  worst element: \|out - ref\| at [\d.]+x its bound; max abs diff 0.001,",
                    worst), worst


def test_the_verdict_for_exact_types_nan_and_shapes():
    check = load(ROOT / "scripts" / "emu_check.py")
    ints = np.array([1, 2, 3])
    assert check.verdict(check.compare(ints, ints, 0.0, 0.0), 0.0, 0.0) == [
        "PASS: out == ref (exact) holds at all 3 elements", "  max abs diff 0"]
    head, _ = check.verdict(check.compare(ints, ints + [0, 1, 0], 0.0, 0.0), 0.0, 0.0)
    assert head.startswith("FAIL: out == ref (exact) does not hold: 1 of 3 elements")
    x = np.array([np.nan, 1.0], dtype=np.float32)
    assert check.compare(x, x, 1e-4, 1e-5).ok                     # NaN matches NaN
    c = check.compare(x, np.array([0.5, 1.0], dtype=np.float32), 1e-4, 1e-5)
    assert not c.ok
    assert check.verdict(c, 1e-4, 1e-5)[1].startswith(
        "  worst element: a NaN against a number, or a difference where the bound is 0")
    c = check.compare(np.zeros((2, 3)), np.zeros((3, 2)), 1e-4, 1e-5)
    assert check.verdict(c, 1e-4, 1e-5) == [
        f"FAIL: {CRITERION} does not hold: shape (2, 3), reference (3, 2)"]


# -- bench/models/zoo.py --help -------------------------------------------------------------

def test_every_zoo_flag_has_a_help_text():
    zoo = load(ROOT / "bench" / "models" / "zoo.py")
    parser = zoo._parser()
    missing = [a.option_strings or a.dest for a in parser._actions if not (a.help or "").strip()]
    assert missing == []
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "models" / "zoo.py"), "--help"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    flags = set(re.findall(r"^  (--[a-z-]+)", out, re.M))
    assert {"--batch", "--resolution", "--width", "--seq", "--layers", "--hidden", "--heads",
            "--classes", "--opset", "--seed", "--weights", "--external-data"} <= flags
    # each model's default, read from its builder: what a flag left out gives
    text = " ".join(out.split())
    assert "(default 224; yolov3 416, dcgan 64; not bert)" in text
    assert "(default 1000; yolov3 80; not dcgan, bert)" in text
    assert "tokens per input sequence (bert only, default 16)" in text
    assert "ONNX opset, 13 to 20 (default 17)" in text


# -- make on a machine without sw5cc -----------------------------------------------------------

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
needs_cc = pytest.mark.skipif(shutil.which("cc") is None,
                              reason="the stand-in for sw5cc compiles with cc")


def without_sw5cc(extra: Path | None = None) -> dict[str, str]:
    """The environment with no folder holding sw5cc on PATH (``extra`` first)."""
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not (Path(d) / "sw5cc").exists()]
    return {**os.environ, "PATH": os.pathsep.join(([str(extra)] if extra else []) + path)}


@pytest.fixture(scope="module")
def projects(tmp_path_factory):
    """examples/mlp.swir at -O0 for one core group and for 2 ranks."""
    d = tmp_path_factory.mktemp("projects")
    for name, flags in (("one", ()), ("mpi", ("--ranks", "2"))):
        subprocess.run([str(BIN / "swir-cg"), "-q", "-O0", *flags, str(MLP), "-o", str(d / name)],
                       check=True, capture_output=True, timeout=300)
    return d


@needs_make
@pytest.mark.parametrize("name, tail", [
    ("one", "builds mlp_emu against swir's athread emulation.  Stop."),
    ("mpi", "builds mlp_emu against swir's athread emulation, and `make emu-run` runs it on "
            "2 ranks.  Stop."),
])
@pytest.mark.parametrize("target", ["all", "run"])
def test_the_sunway_build_without_sw5cc_says_so_in_one_line(projects, name, tail, target):
    p = subprocess.run(["make", "-C", str(projects / name), target], capture_output=True,
                       text=True, env=without_sw5cc(), timeout=60)
    assert p.returncode != 0
    assert re.fullmatch(r"Makefile:\d+: \*\*\* sw5cc not found: `make` is the Sunway build "
                        r"\(sw5cc, on a Sunway login node\); on this machine, `make emu` "
                        + re.escape(tail) + "\n", p.stderr), p.stderr
    # nothing else: make's own directory lines, no compiler run, no object left
    assert all(line.startswith(("make: Entering", "make: Leaving"))
               for line in p.stdout.splitlines()), p.stdout
    assert not list((projects / name).glob("*.o"))


@needs_make
@needs_cc
def test_with_sw5cc_there_is_no_such_line(projects, tmp_path, monkeypatch):
    """The Sunway dialect check's stand-in, given as SW5CC= (as every test's
    build runs it) or found as sw5cc on PATH, builds without the message."""
    monkeypatch.setenv(emulate.SW5CC_CHECK, str(SW5CC))
    assert emulate.sunway_check(projects / "one")
    if shutil.which("mpicc"):
        assert emulate.sunway_check(projects / "mpi")
    decoys = tmp_path / "bin"
    decoys.mkdir()
    (decoys / "sw5cc").write_text(f'#!/bin/sh\nexec "{SW5CC}" "$@"\n')
    (decoys / "sw5cc").chmod(0o755)
    p = subprocess.run(["make", "-s", "-B", "-C", str(projects / "one"), "all"],
                       capture_output=True, text=True, env=without_sw5cc(decoys), timeout=120)
    assert p.returncode == 0 and "not found" not in p.stdout + p.stderr, p.stderr
