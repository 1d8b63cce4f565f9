"""The verifier as a safety net: a pass that leaves invalid IR behind, or
raises, inside swir-cg's real pipeline is an internal error (exit 2) naming
the pass, and the IR the pass was given is saved to a file for the bug
report: valid IR, equal to what the passes before it produce, on which the
pass (once fixed) runs. No output is written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from swir.tools import swir_cg, swir_opt
from swir.tools.driver import run_tool

from swir.parser import parse_module
from swir.passes import testing
from swir.passes.dma.insert_dma import InsertDMA
from swir.passes.graph.fuse import Fuse
from swir.passes.pipelines import pipeline_flags
from swir.printer import print_module
from swir.verifier import verify

MLP = Path(__file__).parents[2] / "examples" / "mlp.swir"


def _corrupting(cls):
    """``cls.run`` followed by a corruption of a result type, as a buggy pass would."""
    real = cls.run

    def run(self, module, analyses):
        real(self, module, analyses)
        return testing.TestInvalidIR().run(module, analyses)
    return run


def _crashing(self, module, analyses):
    raise IndexError("list index out of range")


# -O0 for -insert-dma: at -O1 -fuse's traffic check runs -insert-dma on its
# own, and the bug would be caught (and reported) there first.
@pytest.mark.parametrize("cls, fault, problem, level", [
    (InsertDMA, _corrupting(InsertDMA), "produced invalid IR", "O0"),
    (Fuse, _crashing, "crashed", "O1"),
])
def test_faulty_pass_is_an_internal_error_with_the_ir_before_it_saved(
        tmp_path, monkeypatch, capsys, cls, fault, problem, level):
    crash = tmp_path / "crash"
    crash.mkdir()
    monkeypatch.setenv("SWIR_CRASH_DIR", str(crash))
    monkeypatch.setattr(cls, "run", fault)
    out = tmp_path / "out"

    status = run_tool("swir-cg", swir_cg.main, [f"-{level}", str(MLP), "-o", str(out)])

    err = capsys.readouterr().err
    assert status == 2, err
    # The pass is named as it ran, with its options: -fuse{check-traffic=true,...}.
    assert re.search(rf"^swir-cg: internal error: pass -{cls.name}(\{{[^}}]*\}})? {problem} "
                     r"\(a bug in swir, not in the input\)$", err, re.MULTILINE), err
    assert "Traceback" not in err
    assert not out.exists()
    (saved,) = crash.glob("*.swir")
    assert saved.name.startswith(f"swir-before-{cls.name}-") and saved.suffix == ".swir"
    assert err.rstrip().endswith(f" {saved}") and f"reproduce with: swir-opt '-{cls.name}" in err

    # The saved IR is what the passes before the faulty one produce.
    monkeypatch.undo()
    flags = pipeline_flags("graph", level)
    index = [f.split("{")[0] for f in flags].index(f"-{cls.name}")
    expected = tmp_path / "expected.swir"
    assert swir_opt.main(flags[:index] + [str(MLP), "-o", str(expected)]) == 0
    got = parse_module(saved.read_text(), str(saved))
    verify(got)
    # (Both carry their weights in a sidecar of their own name: weights are
    # read only from a module's own folder.)
    want = parse_module(expected.read_text(), str(expected))
    assert print_module(got).replace(f"{saved.name}.weights", "W") == \
        print_module(want).replace(f"{expected.name}.weights", "W")
    assert Path(f"{saved}.weights").read_bytes() == Path(f"{expected}.weights").read_bytes()
    # ... and the fixed pass takes it on: the bug report is a working reproducer.
    assert swir_opt.main([flags[index], str(saved), "-o", str(tmp_path / "after.swir")]) == 0


def test_without_a_writable_crash_dir_the_error_still_names_the_pass(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SWIR_CRASH_DIR", str(tmp_path / "missing"))
    status = run_tool("swir-opt", swir_opt.main, ["-dce", "-test-invalid-ir", str(MLP)])
    err = capsys.readouterr().err
    assert status == 2
    assert "internal error: pass -test-invalid-ir produced invalid IR" in err
    assert "could not be saved" in err and "Traceback" not in err


def test_input_errors_inside_a_pass_stay_user_errors(tmp_path, capsys):
    """A pass that refuses the input (here -insert-dma given a graph-stage
    module) is exit 1 with a diagnostic, not an internal error."""
    status = run_tool("swir-opt", swir_opt.main,
                      ["-insert-dma", str(MLP), "-o", str(tmp_path / "out.swir")])
    err = capsys.readouterr().err
    assert status == 1, err
    assert "internal error" not in err and "runs on the buffered stage" in err
    assert not (tmp_path / "out.swir").exists()


def test_a_bug_in_a_pipeline_inside_a_pass_is_reported_against_that_pass(
        tmp_path, monkeypatch, capsys):
    """-ldm-plan{strategy=search} runs -insert-dma on its candidates in a
    pipeline of its own that does not verify, so cannot save its input: the
    crash is reported as -ldm-plan's, with -ldm-plan's input saved."""
    crash = tmp_path / "crash"
    crash.mkdir()
    monkeypatch.setenv("SWIR_CRASH_DIR", str(crash))
    monkeypatch.setattr(InsertDMA, "run", _crashing)
    status = run_tool("swir-opt", swir_opt.main,
                      ["-lower-loops", "-ldm-plan{strategy=search}", str(MLP)])
    err = capsys.readouterr().err
    assert status == 2, err
    assert re.search(r"^swir-opt: internal error: pass -ldm-plan\{[^}]*\} crashed", err, re.M), err
    assert "pass -insert-dma" in err          # the inner failure, as the cause
    (saved,) = crash.glob("*.swir")
    assert saved.name.startswith("swir-before-ldm-plan-")
    monkeypatch.undo()
    assert swir_opt.main(["-ldm-plan{strategy=search}", str(saved), "-o",
                          str(tmp_path / "after.swir")]) == 0


def test_the_saved_ir_carries_its_weights(tmp_path, monkeypatch, capsys):
    """The saved IR has its weights in a sidecar beside it (NAME.swir.weights),
    so the reproducer alone, attached anywhere, runs (the resnet example reads
    resnet.weights; weights are read only from a module's own folder)."""
    resnet = MLP.with_name("resnet.swir")
    crash = tmp_path / "crash"
    crash.mkdir()
    monkeypatch.setenv("SWIR_CRASH_DIR", str(crash))
    monkeypatch.setattr(InsertDMA, "run", _crashing)
    assert run_tool("swir-opt", swir_opt.main,
                    ["-O0", "-lower-loops", "-ldm-plan", "-insert-dma", str(resnet)]) == 2
    capsys.readouterr()
    (saved,) = crash.glob("*.swir")
    assert sorted(p.name for p in crash.iterdir()) == [saved.name, saved.name + ".weights"]
    assert f'file "{saved.name}.weights"' in saved.read_text()
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    for p in crash.iterdir():
        p.rename(moved / p.name)
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    assert swir_opt.main(["-insert-dma", str(moved / saved.name), "-o",
                          str(tmp_path / "after.swir")]) == 0


def test_the_reproducer_names_a_target_that_is_not_the_default(tmp_path, monkeypatch, capsys):
    """The target travels in the pass context, in no pass option: a crash under
    --target names it in the command, and the saved weights are aligned as that
    target aligns them (here 256 bytes: mlp's third weight moves from 8320, where
    64-byte alignment puts it, to 8448), so the command replays the run."""
    import dataclasses
    from swir.target import TARGETS
    wide = dataclasses.replace(TARGETS["sw26010pro"], name="wide-align", mem_align=256)
    monkeypatch.setitem(TARGETS, wide.name, wide)
    monkeypatch.setenv("SWIR_CRASH_DIR", str(tmp_path))
    monkeypatch.setattr(Fuse, "run", _crashing)
    status = run_tool("swir-opt", swir_opt.main,
                      ["--target", wide.name, "-fuse", str(MLP), "-o", str(tmp_path / "o.swir")])
    err = capsys.readouterr().err
    assert status == 2, err
    (saved,) = tmp_path.glob("swir-before-fuse-*.swir")
    assert f"reproduce with: swir-opt --target {wide.name} '-fuse" in err, err
    offsets = [int(o) for o in re.findall(r"offset (\d+)", saved.read_text())]
    assert offsets == [0, 8192, 8448]
