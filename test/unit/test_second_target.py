"""A target swir does not ship, defined here and registered as swir/target.py
registers its own (TARGETS), is compiled for by the pipeline and simulated by
the interpreters with its own figures: the next target needs no edit outside
swir/target.py (and the code generator, which writes code for the SW26010
only: swir-cg refuses a target with ``codegen=False``, so this stops at the
dma stage and the interpreters).

The toy machine differs from the SW26010 in every figure the passes and the
interpreters read: 16 CPEs in a 4 x 4 grid, 16 KB of LDM, a 128-byte
main-memory alignment, 64-byte write blocks and half the vector registers.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from swir.costmodel import trial
from swir.interp.run import run_function
from swir.ops import CHUNK
from swir.parser import parse_module
from swir.passes import pass_class
from swir.passes.manager import PassContext, PassManager
from swir.passes.pipelines import compile_pipeline, level_options
from swir.target import SW26010, TARGETS, Target, target_of
from swir.tools import swir_opt
from swir.verifier import module_attr_ldm, verify

TOY = replace(SW26010, name="toy", title="Toy", cpes=16, cpe_grid=(4, 4),
              ldm_bytes=16 * 1024, mem_align=128, write_block=64, vector_registers=16,
              codegen=False, sources="a test's (test/unit/test_second_target.py)")

# A dense layer and an element-wise tail over a few kernels, with
# intermediate buffers for -mem-plan to place.
MODEL = """
module "toy"
stage graph
func @main(%x: <4 x 192 x f32>, %w: <192 x 96 x f32>, %b: <96 x f32>) -> (<4 x 96 x f32>) {
'entry:
  %h = matmul %x, %w : <4 x 96 x f32>
  %a = add %h, %b : <4 x 96 x f32>
  %r = relu %a : <4 x 96 x f32>
  %y = mul %r, %a : <4 x 96 x f32>
  return %y
}
"""


@pytest.fixture
def toy(monkeypatch) -> Target:
    monkeypatch.setitem(TARGETS, TOY.name, TOY)
    # The trial cache starts empty for each test, so a test sees only the
    # trials its own compile made.
    monkeypatch.setattr(trial, "_CACHE", {})
    return TOY


def compiled(target: Target, level: str, **plan: object):
    """The model through swir-cg's pipeline at ``level`` for ``target`` (the
    passes made without options: each takes the target's figures from the
    pass manager's context)."""
    m = parse_module(MODEL, "<toy>")
    verify(m)
    passes = []
    for name in compile_pipeline("graph", level):
        options = {k.replace("-", "_"): v for k, v in level_options(name, level).items()}
        if name == "ldm-plan":
            options.update(plan)
        passes.append(pass_class(name)(**options))  # type: ignore[misc]
    PassManager(passes, verify_each=True, target=target).run(m)
    return m, passes


def arguments() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [rng.standard_normal(s).astype(np.float32) for s in ((4, 192), (192, 96), (96,))]


def graph_result() -> np.ndarray:
    m = parse_module(MODEL, "<toy>")
    return run_function(m, m.lookup("main"), arguments())[0]


@pytest.mark.parametrize("level, plan", [("O1", {}), ("O3", {"search_budget": 5.0})])
def test_the_pipeline_plans_for_the_toy_target(toy, level, plan):
    m, passes = compiled(toy, level, **plan)
    assert m.stage == "dma"
    # -ldm-plan planned the toy's LDM and recorded the target.
    assert m.attrs == {"ldm_size": 16 * 1024, "target": "toy"}
    assert target_of(m.attrs) is toy and module_attr_ldm(m) == 16 * 1024
    ldm_plan = next(p for p in passes if p.name == "ldm-plan")
    assert (ldm_plan.ldm_size, ldm_plan.cpes) == (16 * 1024, 16)
    assert "ldm-size=16384" in ldm_plan.spelling() and "cpes=16" in ldm_plan.spelling()
    # The work is split over its 16 CPEs, no more.
    workers = {i.attrs["workers"] for i in m.walk() if i.isa(CHUNK)}
    assert workers and max(workers) == 16
    # -mem-plan placed the buffers at its 128-byte alignment.
    offsets = [g.attrs["offset"] for g in m.globals if g.kind == "buffer"]
    assert offsets and all(o % 128 == 0 for o in offsets)
    # -fuse's trial compiles were lowered for it too.
    assert any(("target", "toy") in key[1] for key in trial._CACHE)


def test_mem_plan_keeps_buffers_to_the_toys_write_blocks(toy):
    """-mem-plan's align must be at least the target's write block (64 bytes here)."""
    p = pass_class("mem-plan")(align=32)  # type: ignore[misc]
    assert p.option_errors() == []                       # the SW26010's 32-byte blocks
    p.enter(PassContext(toy))
    ((flag, message),) = p.option_errors()
    assert flag == "align" and "must be at least 64, got 32" in message


def test_the_dma_interpreter_runs_the_toy_plan_as_the_graph_does(toy):
    m, _ = compiled(toy, "O1")
    stats: dict = {}
    (got,) = run_function(m, m.lookup("main"), arguments(), stats=stats)
    np.testing.assert_allclose(got, graph_result(), rtol=1e-5, atol=1e-5)
    kernels = {n: s for n, s in stats["functions"].items() if "ldm_peak_cpe" in s}
    assert kernels
    for s in kernels.values():
        assert len(s["ldm_peak_cpe"]) == 16                    # its CPEs simulated
        assert max(s["ldm_peak_cpe"]) <= 16 * 1024 - TOY.default_reserve(16 * 1024)


def test_the_default_target_plans_otherwise():
    """The same passes in a pass manager without a target: the SW26010's figures."""
    m, passes = compiled(SW26010, "O1")
    assert m.attrs == {"ldm_size": 64 * 1024}
    assert max(i.attrs["workers"] for i in m.walk() if i.isa(CHUNK)) > 16


def test_swir_opt_takes_the_toy_target(toy, tmp_path, capsys):
    """--target names any target in TARGETS; --help prints its figures as the
    options' defaults."""
    src, out = tmp_path / "toy.swir", tmp_path / "toy.dma.swir"
    src.write_text(MODEL)
    assert swir_opt.main(["--target=toy", "-lower-loops", "-ldm-plan", "-insert-dma",
                          str(src), "-o", str(out)]) == 0
    m = parse_module(out.read_text(), str(out))
    assert m.attrs == {"ldm_size": 16 * 1024, "target": "toy"}
    assert swir_opt.main(["--target=toy", "--help"]) == 0
    help_text = capsys.readouterr().out
    assert "LDM bytes per CPE (default: 16384)" in help_text
    assert "(default: 16)" in help_text
