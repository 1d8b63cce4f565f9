"""swir-cg's output directory: written completely or not at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from swir.codegen import project
from swir.codegen.project import WriteError, write_project


def test_a_failed_write_leaves_the_old_directory_and_no_debris(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.c").write_text("old")
    calls = []
    real = Path.write_bytes

    def flaky(self, data):
        calls.append(self.name)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", flaky)
    files = {"a.c": b"1", "b.c": b"2", "emu/c.h": b"3", "d.c": b"4"}
    with pytest.raises(WriteError, match="No space left on device"):
        write_project(files, str(out), force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]      # no temporaries left
    assert sorted(p.name for p in out.iterdir()) == ["old.c"]


def test_replacing_needs_force_and_a_directory(tmp_path):
    out = tmp_path / "out"
    write_project({"a.c": b"1"}, str(out), force=False)
    with pytest.raises(WriteError, match="use --force"):
        write_project({"b.c": b"2"}, str(out), force=False)
    write_project({"b.c": b"2"}, str(out), force=True)
    assert sorted(p.name for p in out.iterdir()) == ["b.c"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(WriteError, match="not a directory"):
        write_project({"a.c": b"1"}, str(tmp_path / "file"), force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "out"]


def test_runtime_sources_ship_with_the_package():
    files = project.RUNTIME_FILES
    from importlib import resources
    root = resources.files("swir.codegen") / "runtime"
    assert all((root / f).is_file() for f in files)


# -- regressions found in review: modules the generator once mishandled -------------------

REVIEW = Path(__file__).parents[1] / "Inputs" / "codegen"


def _arrays(f, rng):
    import numpy as np
    from swir.kernels import dtype_of
    from swir.ir.types import ShapedType
    out = []
    for p in f.params[:len(f.params) - f.attrs.get("outputs", 0)]:
        shape = p.type.shape if isinstance(p.type, ShapedType) else ()
        out.append(np.asarray(rng.integers(-3, 4, shape)).astype(dtype_of(p.type)))
    return out


@pytest.mark.parametrize("name", ["global-param-clash", "host-scalars", "host-branches",
                                  "cpe-call-chain", "spawned-and-called", "nested-ldm-unused",
                                  "libm-name", "libc-kernel-name", "athread-header-names"])
def test_review_modules_compile_and_match_the_interpreter(tmp_path, name):
    import subprocess
    import sys

    import numpy as np

    from swir.codegen import emulate
    from swir.interp.loop import io_signature
    from swir.interp.run import interpreter_for
    from swir.parser import parse_module
    path = REVIEW / f"{name}.swir"
    out = tmp_path / "out"
    r = subprocess.run([str(Path(sys.executable).with_name("swir-cg")), str(path), "-o", str(out)],
                       capture_output=True, text=True, cwd=tmp_path, check=False)
    assert r.returncode == 0, r.stderr
    m = parse_module(path.read_text(), str(path))
    program = emulate.build(out, m.name)
    f = m.lookup("main")
    ins, outs = io_signature(f)
    rng = np.random.default_rng(3)
    for _ in range(2):          # both sides of a branch, most likely
        args = _arrays(f, rng) if m.stage != "dma" else \
            [rng.standard_normal(p.type.shape).astype(np.float32) for p in ins]
        run = emulate.run(program, args, [p.type for p in ins], outs)
        want = interpreter_for(m, path.parent).run("main", args)
        for got, w in zip(run.outputs, want):
            np.testing.assert_array_equal(got, np.asarray(w).reshape(got.shape))


def test_passing_a_constant_to_a_writing_parameter_is_an_error(tmp_path):
    import subprocess
    import sys
    path = REVIEW / "const-write.swir"
    r = subprocess.run([str(Path(sys.executable).with_name("swir-cg")), str(path), "-o",
                        str(tmp_path / "out")], capture_output=True, text=True, cwd=tmp_path,
                       check=False)
    assert r.returncode == 1
    assert "spawn passes @cst, a constant global, to parameter %B of @k, which writes it" \
        in r.stderr
    assert not (tmp_path / "out").exists()


def test_emulation_holds_kernels_to_the_planned_ldm_size(tmp_path):
    """The Makefile carries the LDM size the plan was made for (--ldm-size),
    and the emulation holds every kernel to it, not to the hardware's 64 KB:
    the project runs as planned, and fails when built for less LDM."""
    import subprocess
    import sys

    import numpy as np

    from swir.codegen import emulate
    from swir.parser import parse_module
    src = Path(__file__).parents[2] / "examples" / "mlp.swir"
    out = tmp_path / "out"
    r = subprocess.run([str(Path(sys.executable).with_name("swir-cg")), "--ldm-size=8192",
                        str(src), "-o", str(out)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    make = (out / "Makefile").read_text()
    assert "\nLDM_BYTES = 8192\n" in make and "\nLDM_RESERVE = 512\n" in make
    m = parse_module(src.read_text(), str(src))
    f = m.lookup("main")
    x = np.load(src.with_name("mlp_input.npy"))
    run = emulate.run(emulate.build(out, m.name), [x], [f.params[0].type], f.result_types)
    peak = max(k["ldm_peak"] for k in run.stats["functions"].values())
    assert 1536 < peak <= 8192 - 512
    # The same sources built for 2 KB of LDM: the first kernel does not fit.
    subprocess.run(["make", "-s", "-C", str(out), "clean"], check=True, capture_output=True)
    subprocess.run(["make", "-s", "-C", str(out), "emu", "LDM_BYTES=2048"], check=True,
                   capture_output=True)
    with pytest.raises(emulate.EmulationError, match=r"the capacity is 1536 \(2048 bytes of LDM"):
        emulate.run(out / f"{m.name}_emu", [x], [f.params[0].type], f.result_types)


def test_the_reserve_is_the_same_wherever_the_plan_was_made_and_must_leave_ldm(tmp_path):
    import shutil
    import subprocess
    import sys
    bin_ = Path(sys.executable).parent
    examples = Path(__file__).parents[2] / "examples"
    for name in ("mlp.swir", "mlp.weights"):
        shutil.copy(examples / name, tmp_path / name)
    src = tmp_path / "mlp.swir"
    # Planned by swir-cg, and planned first by swir-opt: the same Makefile sizes.
    r = subprocess.run([str(bin_ / "swir-cg"), "--ldm-size=32768", str(src), "-o",
                        str(tmp_path / "a")], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    dma = tmp_path / "mlp.dma.swir"   # beside mlp.weights
    r = subprocess.run([str(bin_ / "swir-opt"), "-lower-loops", "-ldm-plan{ldm-size=32768}",
                        "-insert-dma", str(src), "-o", str(dma)], capture_output=True, text=True,
                       check=False)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(bin_ / "swir-cg"), str(dma), "-o", str(tmp_path / "b")],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    sizes = [[line for line in (tmp_path / d / "Makefile").read_text().splitlines()
              if line.startswith("LDM_")] for d in "ab"]
    assert sizes[0] == sizes[1] == ["LDM_BYTES = 32768", "LDM_RESERVE = 2048"]
    # More LDM than the SW26010's 64 KB is an error, not a project whose program
    # stops at run time (issue 41; test_failure_contract.py), and a reserve that
    # leaves no room is one too, not a project whose emulation build stops at an
    # #error.
    r = subprocess.run([str(bin_ / "swir-cg"), "--ldm-size=131072", str(src), "-o",
                        str(tmp_path / "c")], capture_output=True, text=True, check=False)
    assert r.returncode == 1 and "more than the SW26010 has" in r.stderr
    r = subprocess.run([str(bin_ / "swir-cg"), "--ldm-size=65536", "--ldm-reserve=65536",
                        str(src), "-o", str(tmp_path / "c")], capture_output=True, text=True,
                       check=False)
    assert r.returncode == 1 and "ldm-reserve must be below ldm-size" in r.stderr
    assert not (tmp_path / "c").exists()
