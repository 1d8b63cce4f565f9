"""Generated programs under the sanitizers: the paper matmul, a padded strided
convolution and the bundled multi-layer example, built with ``make emu-asan``
(AddressSanitizer + UndefinedBehaviorSanitizer) and ``make emu-tsan``
(ThreadSanitizer: the 64 CPE threads really run at once), run with every
report fatal, and compared with the graph interpreter. test_zoo_e2e.py runs
the eight zoo models the same way, with ENV below.

The emulation runtime's own checks (swir/codegen/runtime/swir_emu.c: a
kernel's LDM frame over the capacity, a DMA not waited for when the kernel
returns, ...) are plain C, compiled into every make target that defines
SWIR_EMU (emu, emu-asan, emu-tsan; the Makefile's EMU_DEFS) with no macro to
turn them off. test_runtime_checks_are_on_under_sanitizers proves it for the
sanitizer builds: a generated project edited to break each rule is caught,
with the runtime's one-line message and nothing from the sanitizer."""

from __future__ import annotations

import re
import shutil
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
func @main(%a: <3 x 300 x f32>, %b: <300 x 64 x f32>) -> <3 x 64 x f32> {
'entry:
  %c = matmul %a, %b : <3 x 64 x f32>
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


FLAGS = {"emu-asan": "-fsanitize=address,undefined", "emu-tsan": "-fsanitize=thread"}


def links(flag: str, tmp: Path) -> bool:
    """Whether cc can link a program with ``flag`` (tmp: a scratch directory)."""
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
    flag = FLAGS[target]
    if not links(flag, tmp_path):
        pytest.skip(f"cc cannot link {flag} on this machine")
    path, module = _model(name, tmp_path)
    out = tmp_path / "out"
    r = subprocess.run([str(Path(sys.executable).with_name("swir-cg")), str(path), "-o", str(out),
                        "--ldm-size=8192"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # The sanitizers see the vector micro-kernels (docs/codegen.md).
    assert "simd_vmas(" in (out / "layers_slave.c").read_text()
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


# A generated project broken by hand, and the runtime's message for it.
FAULTS = {
    # The kernel's LDM struct grows by 64 KB: its frame cannot fit in the
    # 65536 - 4096 bytes the runtime allows (the Makefile's LDM_RESERVE).
    "ldm_over": r"kernel 'matmul_0', CPE \d+: needs (\d+) bytes of LDM; the capacity is 61440 "
                r"\(65536 bytes of LDM minus 4096 reserved for the stack and reply words\)",
    # The wait after the result's put is deleted: the CPEs that own a tile
    # return with that put in flight (each CPE runs at most one iteration, so
    # no later wait on the same word catches it first). The put's size is the
    # result tile the cost model's search picks (192 bytes under the old DMA
    # constants, 512 under the measured ones): any size, as long as it is the
    # one put left in flight.
    "not_waited": r"kernel 'matmul_0', CPE \d+: returned with 1 DMA not waited for "
                  r"\(athread_put of \d+ bytes on reply word at LDM 0x[0-9a-f]+\)",
}


def _break(project: Path, fault: str) -> None:
    path = project / "layers_slave.c"
    text = path.read_text()
    if fault == "ldm_over":
        broken = re.sub(r"(struct matmul_0_ldm \{[^\n]*\n)",
                        r"\1    float overflow[16384];\n", text, count=1)
    else:
        lines = text.splitlines(keepends=True)
        put = next(i for i, line in enumerate(lines) if "athread_put(" in line)
        wait = next(i for i in range(put + 1, len(lines)) if "SWIR_WAIT(" in lines[i])
        del lines[wait]
        broken = "".join(lines)
    assert broken != text, f"the generated kernel changed shape; update _break for {fault}"
    path.write_text(broken)


@pytest.fixture(scope="module")
def matmul_project(tmp_path_factory):
    """The matmul compiled by swir-cg with the default LDM size (64 KB, 4096
    bytes reserved), once for the module."""
    d = tmp_path_factory.mktemp("faulty")
    path = d / "matmul.swir"
    path.write_text(MATMUL)
    r = subprocess.run([str(Path(sys.executable).with_name("swir-cg")), str(path), "-o",
                        str(d / "project")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return d / "project", parse_module(MATMUL, str(path))


@pytest.mark.parametrize("target", ["emu-asan", "emu-tsan"])
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_runtime_checks_are_on_under_sanitizers(tmp_path, matmul_project, fault, target):
    if not links(FLAGS[target], tmp_path):
        pytest.skip(f"cc cannot link {FLAGS[target]} on this machine")
    original, m = matmul_project
    project = tmp_path / "project"
    shutil.copytree(original, project)
    _break(project, fault)
    program = emulate.build(project, m.name, target)
    f = m.lookup("main")
    rng = np.random.default_rng(7)
    args = [rng.standard_normal(p.type.shape).astype(np.float32) for p in f.params]
    with pytest.raises(emulate.EmulationError) as e:
        emulate.run(program, args, [p.type for p in f.params], f.result_types, env=ENV)
    # Exit status 1 and exactly the runtime's one line: no sanitizer report.
    head, _, stderr = str(e.value).partition("\n")
    assert head == f"{program.name} exited with status 1:", str(e.value)
    match = re.fullmatch("swir-emu: error: " + FAULTS[fault] + "\n", stderr)
    assert match, stderr
    if fault == "ldm_over":
        assert int(match.group(1)) > 65536


GATHER = """
module "gather"
stage graph
func @main(%x: <5 x 4 x f32>, %k: <7 x i32>) -> <7 x 4 x f32> {
'entry:
  %y = gather %x, %k {axis = 0} : <7 x 4 x f32>
  return %y
}
"""


@pytest.mark.parametrize("target", ["emu-asan", "emu-tsan"])
def test_a_cpe_error_is_reported_by_the_mpe_after_the_join(tmp_path, target):
    """A data-dependent index out of range on a CPE (a gather index of 9 into
    5 rows) is recorded in main memory; the CPEs run to their end and the MPE
    reports it after the join: one line naming the program, the kernel and
    the CPE, status 1, and nothing from the sanitizer (no thread abandoned,
    no exit on a CPE thread)."""
    if not links(FLAGS[target], tmp_path):
        pytest.skip(f"cc cannot link {FLAGS[target]} on this machine")
    path = tmp_path / "gather.swir"
    path.write_text(GATHER)
    r = subprocess.run([str(Path(sys.executable).with_name("swir-cg")), str(path), "-o",
                        str(tmp_path / "project")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    slave = (tmp_path / "project" / "layers_slave.c").read_text()
    assert "swir_cpe_dyn_index(" in slave and "SWIR_TRAP" not in slave
    m = parse_module(GATHER, str(path))
    program = emulate.build(tmp_path / "project", m.name, target)
    f = m.lookup("main")
    x = np.arange(20, dtype=np.float32).reshape(5, 4)
    good = np.array([0, 4, -1, 2, 3, 1, -5], np.int32)
    run = emulate.run(program, [x, good], [p.type for p in f.params], f.result_types, env=ENV)
    np.testing.assert_array_equal(run.outputs[0], x[good])
    bad = good.copy()
    bad[3] = 9
    with pytest.raises(emulate.EmulationError) as e:
        emulate.run(program, [x, bad], [p.type for p in f.params], f.result_types, env=ENV)
    head, _, stderr = str(e.value).partition("\n")
    assert head == f"{program.name} exited with status 1:", str(e.value)
    assert re.fullmatch(r".*: error: kernel '[^']*', CPE \d+: .*'dyn_index' of .* = 9 is outside "
                        r"\[-5, 5\) \(bound = 5\) in @\S+\n", stderr), stderr
