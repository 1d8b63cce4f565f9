"""Generated programs under the sanitizers: the paper matmul, a padded strided
convolution and the bundled multi-layer example, built with ``make emu-asan``
(AddressSanitizer + UndefinedBehaviorSanitizer) and ``make emu-tsan``
(ThreadSanitizer: the 64 CPE threads really run at once), run with every
report fatal, and compared with the graph interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from swir.codegen import emulate
from swir.interp.run import interpreter_for
from swir.parser import parse_module

ROOT = Path(__file__).parents[2]
ENV = {"ASAN_OPTIONS": "halt_on_error=1:detect_leaks=1:abort_on_error=0",
       "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
       "TSAN_OPTIONS": "halt_on_error=1:exitcode=66"}

MATMUL = """
module "matmul"
stage graph
func @main(%a: <3 x 300 x f32>, %b: <300 x 70 x f32>) -> <3 x 70 x f32> {
'entry:
  %c = matmul %a, %b : <3 x 70 x f32>
  return %c
}
"""

CONV = """
module "conv"
stage graph
func @main(%x: <1 x 3 x 17 x 15 x f32>, %w: <8 x 3 x 3 x 3 x f32>, %b: <8 x f32>) -> <1 x 8 x 9 x 8 x f32> {
'entry:
  %y = conv2d %x, %w, %b {stride = [2, 2], pad = [1, 1, 1, 1]} : <1 x 8 x 9 x 8 x f32>
  %z = relu %y : <1 x 8 x 9 x 8 x f32>
  return %z
}
"""


def _links(flag: str, tmp: Path) -> bool:
    src = tmp / "t.c"
    src.write_text("int main(void) { return 0; }\n")
    r = subprocess.run(["cc", flag, str(src), "-o", str(tmp / "t")], capture_output=True)
    return r.returncode == 0


def _model(name: str, tmp: Path) -> tuple[Path, str]:
    if name == "mlp":
        return ROOT / "examples" / "mlp.swir", "mlp"
    path = tmp / f"{name}.swir"
    path.write_text({"matmul": MATMUL, "conv": CONV}[name])
    return path, name


def _inputs(m, name: str, base: Path) -> list[np.ndarray]:
    f = m.lookup("main")
    if name == "mlp":
        return [np.load(ROOT / "examples" / "mlp_input.npy")]
    rng = np.random.default_rng(7)
    return [rng.standard_normal(p.type.shape).astype(np.float32) for p in f.params]


@pytest.mark.parametrize("target", ["emu-asan", "emu-tsan"])
@pytest.mark.parametrize("name", ["matmul", "conv", "mlp"])
def test_generated_program_runs_clean_under_sanitizers(tmp_path, name, target):
    flag = "-fsanitize=address,undefined" if target == "emu-asan" else "-fsanitize=thread"
    if not _links(flag, tmp_path):
        pytest.skip(f"cc cannot link {flag} on this machine")
    path, module = _model(name, tmp_path)
    out = tmp_path / "out"
    r = subprocess.run([str(Path(sys.executable).with_name("swir-cg")), str(path), "-o", str(out),
                        "--ldm-size=8192"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    program = emulate.build(out, module, target)
    m = parse_module(path.read_text(), str(path))
    args = _inputs(m, name, path.parent)
    f = m.lookup("main")
    run = emulate.run(program, args, [p.type for p in f.params], f.result_types, env=ENV)
    assert "Sanitizer" not in run.stderr and "runtime error" not in run.stderr, run.stderr
    want = interpreter_for(m, path.parent).run("main", args)
    for got, w in zip(run.outputs, want):
        # The plan tiles the reductions (up to 300 terms here), so f32 sums add in
        # another order: an error relative to the largest output, not to each.
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5 * float(np.abs(w).max()))
