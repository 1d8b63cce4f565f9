"""swir-run end to end: correct results on the bundled example (checked against
onnxruntime running the same network), control flow and calls, and every kind
of bad input answered with a one-line error, exit status 1, and no output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers import onnx_model

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mlp.swir"
SWIR_RUN = str(Path(sys.executable).parent / "swir-run")


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([SWIR_RUN, *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def assert_one_line_error(r: subprocess.CompletedProcess, *fragments: str) -> None:
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    first = r.stderr.splitlines()[0]
    for frag in fragments:
        assert frag in first, (frag, r.stderr)


def _example_weights() -> dict[str, np.ndarray]:
    blob = (ROOT / "examples" / "mlp.weights").read_bytes()
    layout = [("w1", (64, 32), 0), ("b1", (32,), 8192), ("w2", (32, 10), 8320),
              ("b2", (10,), 9600)]
    return {n: np.frombuffer(blob, "<f4", int(np.prod(s)), off).reshape(s)
            for n, s, off in layout}


def _onnx_mlp(x: np.ndarray) -> np.ndarray:
    """The example network, written independently as an ONNX graph."""
    w = _example_weights()
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h2"]),
        helper.make_node("Add", ["h2", "h2"], ["s"]),
        helper.make_node("Mul", ["s", "half"], ["m"]),
        helper.make_node("MatMul", ["m", "w2"], ["o0"]),
        helper.make_node("Add", ["o0", "b2"], ["o1"]),
        helper.make_node("Softmax", ["o1"], ["y"], axis=-1),
    ]
    inits = [numpy_helper.from_array(np.ascontiguousarray(v), n) for n, v in w.items()]
    inits.append(numpy_helper.from_array(np.array(0.5, np.float32), "half"))
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    model = onnx_model(graph, 18)
    model.ir_version = 9
    onnx.checker.check_model(model)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def test_example_matches_onnxruntime(tmp_path):
    x = np.load(ROOT / "examples" / "mlp_input.npy")
    out = tmp_path / "y.npy"
    r = run(EXAMPLE, "--input", ROOT / "examples" / "mlp_input.npy", "--output", out,
            cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    y = np.load(out)
    assert y.shape == (1, 10) and y.dtype == np.float32
    np.testing.assert_allclose(y, _onnx_mlp(x), rtol=1e-5, atol=1e-6)
    assert abs(float(y.sum()) - 1.0) < 1e-5


def test_optimised_example_computes_the_same(tmp_path):
    opt = tmp_path / "mlp.swir"
    subprocess.run([str(Path(SWIR_RUN).parent / "swir-opt"), "-dce", "-cse", str(EXAMPLE),
                    "-o", str(opt)], check=True)
    (tmp_path / "mlp.weights").write_bytes((ROOT / "examples" / "mlp.weights").read_bytes())
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    inp = ROOT / "examples" / "mlp_input.npy"
    assert run(EXAMPLE, "-i", inp, "-o", a).returncode == 0
    assert run(opt, "-i", inp, "-o", b).returncode == 0
    np.testing.assert_array_equal(np.load(a), np.load(b))


def test_print(tmp_path):
    r = run(EXAMPLE, "--input", ROOT / "examples" / "mlp_input.npy", "--print")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("result #0: <1 x 10 x f32>\n[[")


CONTROL = '''module "control"
stage graph
global @one : <3 x f32> = dense<1.0>
func @step(%v: <3 x f32>) -> <3 x f32> {
'entry:
  %w = add %v, @one : <3 x f32>
  return %w
}
func @main(%p: i1, %x: <3 x f32>) -> (<3 x f32>, <3 x f32>) {
'entry:
  cond_br %p, 'yes(%x), 'no
'yes(%a: <3 x f32>):
  %b = call @step(%a) : <3 x f32>
  br 'done(%b, %a)
'no:
  %n = neg %x : <3 x f32>
  br 'done(%n, %x)
'done(%r: <3 x f32>, %s: <3 x f32>):
  return %r, %s
}
'''


@pytest.mark.parametrize("flag, expect", [(True, [2.0, 3.0, 4.0]), (False, [-1.0, -2.0, -3.0])])
def test_branches_block_arguments_and_calls(tmp_path, flag, expect):
    m = tmp_path / "control.swir"
    m.write_text(CONTROL)
    np.save(tmp_path / "p.npy", np.array(flag))
    np.save(tmp_path / "x.npy", np.array([1.0, 2.0, 3.0], np.float32))
    r = run(m, "-i", tmp_path / "p.npy", "-i", tmp_path / "x.npy", "-o", tmp_path / "r.npy",
            "-o", tmp_path / "s.npy")
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "r.npy"), np.array(expect, np.float32))
    np.testing.assert_array_equal(np.load(tmp_path / "s.npy"), np.array([1, 2, 3], np.float32))


# -- bad input --------------------------------------------------------------------------

@pytest.fixture
def example_dir(tmp_path):
    """A copy of the example that tests may break."""
    for name in ("mlp.swir", "mlp.weights", "mlp_input.npy"):
        (tmp_path / name).write_bytes((ROOT / "examples" / name).read_bytes())
    return tmp_path


def test_wrong_shape(example_dir):
    np.save(example_dir / "bad.npy", np.zeros((1, 63), np.float32))
    r = run(example_dir / "mlp.swir", "-i", example_dir / "bad.npy", "-o", example_dir / "y.npy")
    assert_one_line_error(r, "argument #0 (%x) of @main expects <1 x 64 x f32>",
                          "(1, 64) float32", "has shape (1, 63) float32")
    assert not (example_dir / "y.npy").exists()


def test_wrong_dtype(example_dir):
    np.save(example_dir / "bad.npy", np.zeros((1, 64), np.float64))
    r = run(example_dir / "mlp.swir", "-i", example_dir / "bad.npy")
    assert_one_line_error(r, "expects <1 x 64 x f32>", "has shape (1, 64) float64")


def test_missing_input_file(example_dir):
    r = run(example_dir / "mlp.swir", "-i", example_dir / "nope.npy")
    assert_one_line_error(r, "swir-run: error: cannot read input", "nope.npy",
                          "No such file or directory")


def test_not_an_npy_file(example_dir):
    (example_dir / "text.npy").write_text("hello, not numpy\n")
    r = run(example_dir / "mlp.swir", "-i", example_dir / "text.npy")
    assert_one_line_error(r, "swir-run: error: input", "text.npy' is not a .npy file")


def test_pickled_object_array_is_refused(example_dir):
    np.save(example_dir / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    r = run(example_dir / "mlp.swir", "-i", example_dir / "obj.npy")
    assert_one_line_error(r, "obj.npy' is not a .npy file")


def test_wrong_number_of_inputs_and_outputs(example_dir):
    inp = example_dir / "mlp_input.npy"
    r = run(example_dir / "mlp.swir", "-i", inp, "-i", inp)
    assert_one_line_error(r, "@main takes 1 argument(s), 2 given")
    r = run(example_dir / "mlp.swir", "-i", inp, "-o", example_dir / "a.npy",
            "-o", example_dir / "b.npy")
    assert_one_line_error(r, "@main has 1 result(s), 2 --output given")
    assert not (example_dir / "a.npy").exists()


def test_unknown_function_and_flags(example_dir):
    inp = example_dir / "mlp_input.npy"
    assert_one_line_error(run(example_dir / "mlp.swir", "-i", inp, "--func", "nope"),
                          "no function @nope")
    assert_one_line_error(run(example_dir / "mlp.swir", "--frobnicate"),
                          "swir-run: error: unrecognized arguments: --frobnicate")


def test_missing_weights_file(example_dir):
    (example_dir / "mlp.weights").unlink()
    r = run(example_dir / "mlp.swir", "-i", example_dir / "mlp_input.npy",
            "-o", example_dir / "y.npy")
    assert_one_line_error(r, "mlp.swir:", "error: @w1: cannot read weight file",
                          "No such file or directory")
    assert not (example_dir / "y.npy").exists()


def test_short_weights_file(example_dir):
    blob = (example_dir / "mlp.weights").read_bytes()
    (example_dir / "mlp.weights").write_bytes(blob[:9620])
    r = run(example_dir / "mlp.swir", "-i", example_dir / "mlp_input.npy")
    assert_one_line_error(r, "error: @b2:", "is too short: <10 x f32> needs 40 bytes at "
                          "offset 9600, the file has 20")


def test_offset_past_the_end(example_dir):
    text = (example_dir / "mlp.swir").read_text().replace("offset 9600", "offset 99999")
    (example_dir / "mlp.swir").write_text(text)
    r = run(example_dir / "mlp.swir", "-i", example_dir / "mlp_input.npy")
    assert_one_line_error(r, "error: @b2: offset 99999 is past the end", "(9640 bytes)")


def test_weight_diagnostics_point_at_the_global(example_dir):
    (example_dir / "mlp.weights").unlink()
    r = run(example_dir / "mlp.swir", "-i", example_dir / "mlp_input.npy")
    line = r.stderr.splitlines()[0]
    assert line.startswith(f"{example_dir / 'mlp.swir'}:9:8: error: @w1:"), line


def test_invalid_module_is_diagnosed_before_running(example_dir):
    (example_dir / "bad.swir").write_text('module "m"\nstage graph\nfunc @main() {\n')
    r = run(example_dir / "bad.swir")
    assert r.returncode == 1 and "bad.swir:" in r.stderr and "Traceback" not in r.stderr


def test_endless_loop_is_stopped(tmp_path):
    m = tmp_path / "loop.swir"
    m.write_text('module "m"\nstage graph\nfunc @main(%x: <2 x f32>) -> <2 x f32> {\n'
                 "'entry:\n  br 'spin(%x)\n'spin(%y: <2 x f32>):\n  %z = neg %y : <2 x f32>\n"
                 "  br 'spin(%z)\n}\n")
    from swir.interp.graph import GraphInterpreter
    from swir.parser import parse_file
    from swir.diagnostics import Diagnostic
    interp = GraphInterpreter(parse_file(str(m)), tmp_path, max_steps=1000)
    with pytest.raises(Diagnostic, match="did not finish within 1000 instructions"):
        interp.run("main", [np.zeros(2, np.float32)])


def test_corrupted_npy_inputs_are_errors_not_crashes(tmp_path):
    """Truncated and byte-flipped .npy files: loading either succeeds or raises
    the tool's one-line UsageError; binding then either matches or is a Diagnostic."""
    import io
    import random

    from swir.diagnostics import Diagnostic
    from swir.interp.arguments import check_arguments
    from swir.parser import parse_file
    from swir.tools.driver import UsageError
    from swir.tools.swir_run import load_input

    f = parse_file(str(EXAMPLE)).lookup("main")
    buf = io.BytesIO()
    np.save(buf, np.ones((1, 64), np.float32))
    good = buf.getvalue()
    rng = random.Random(7)
    outcomes = {"loaded": 0, "refused": 0}
    for i in range(300):
        data = bytearray(good)
        if i % 3 == 0:
            data = data[:rng.randrange(len(data))]
        else:
            for _ in range(rng.randrange(1, 6)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        path = tmp_path / f"m{i}.npy"
        path.write_bytes(bytes(data))
        try:
            arr = load_input(str(path))
            check_arguments(f, [arr], [path.name])
            outcomes["loaded"] += 1
        except (UsageError, Diagnostic):
            outcomes["refused"] += 1
    assert outcomes["loaded"] > 0 and outcomes["refused"] > 0, outcomes


# -- loop stage ---------------------------------------------------------------------------

LOOP = '''module "loop"
stage loop
global @w : buf<3 x f32> = dense<[1.0, 2.0, 4.0]>
kernel @scale(%X: buf<3 x f32>, %k: f32, %Y: buf<3 x f32>) {
  for %i = 0 to 3 {
    %x = load %X[%i] : f32
    %w = load @w[%i] : f32
    %a = mul %x, %w : f32
    %b = mul %a, %k : f32
    store %b, %Y[%i]
  }
}
kernel @pick(%X: buf<3 x f32>, %j: i64, %Y: buf<1 x f32>) {
  %d = dyn_index %j {bound = 3} : index
  %v = load %X[%d] : f32
  store %v, %Y[0]
}
func @main(%x: buf<3 x f32>, %k: f32, %j: i64, %y: buf<3 x f32>, %p: buf<1 x f32>) -> f32 attributes {outputs = 2} {
'entry:
  call @scale(%x, %k, %y)
  call @pick(%y, %j, %p)
  %s = load %p[0] : f32
  %t = add %s, %k : f32
  return %t
}
'''


@pytest.fixture
def loop_dir(tmp_path):
    (tmp_path / "loop.swir").write_text(LOOP)
    np.save(tmp_path / "x.npy", np.array([1.0, 2.0, 3.0], np.float32))
    np.save(tmp_path / "k.npy", np.array(0.5, np.float32))
    np.save(tmp_path / "j.npy", np.array(-1, np.int64))
    np.save(tmp_path / "bad.npy", np.array(3, np.int64))
    return tmp_path


def test_loop_stage_outputs_then_return_values(loop_dir):
    d = loop_dir
    r = run(d / "loop.swir", "-i", d / "x.npy", "-i", d / "k.npy", "-i", d / "j.npy",
            "-o", d / "y.npy", "-o", d / "p.npy", "-o", d / "t.npy")
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(d / "y.npy"), np.array([0.5, 2.0, 6.0], np.float32))
    np.testing.assert_array_equal(np.load(d / "p.npy"), np.array([6.0], np.float32))
    t = np.load(d / "t.npy")
    assert t.shape == () and t.dtype == np.float32 and t == 6.5


def test_loop_stage_print_names_the_result_types(loop_dir):
    d = loop_dir
    r = run(d / "loop.swir", "-i", d / "x.npy", "-i", d / "k.npy", "-i", d / "j.npy", "--print")
    assert r.returncode == 0, r.stderr
    heads = [line for line in r.stdout.splitlines() if line.startswith("result #")]
    assert heads == ["result #0: buf<3 x f32>", "result #1: buf<1 x f32>", "result #2: f32"]


def test_loop_stage_kernel_results_are_the_buffers_it_writes(loop_dir):
    d = loop_dir
    np.save(d / "y0.npy", np.zeros(3, np.float32))
    r = run(d / "loop.swir", "--func", "scale", "-i", d / "x.npy", "-i", d / "k.npy",
            "-i", d / "y0.npy", "-o", d / "y.npy")
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(d / "y.npy"), np.array([0.5, 2.0, 6.0], np.float32))
    r = run(d / "loop.swir", "--func", "scale", "-i", d / "x.npy", "-i", d / "k.npy",
            "-i", d / "y0.npy", "-o", d / "y.npy", "-o", d / "z.npy")
    assert_one_line_error(r, "@scale has 1 result(s), 2 --output given")


def test_loop_stage_inputs_do_not_include_outputs(loop_dir):
    d = loop_dir
    r = run(d / "loop.swir", "-i", d / "x.npy", "-i", d / "k.npy", "-i", d / "j.npy",
            "-i", d / "x.npy")
    assert_one_line_error(r, "@main takes 3 argument(s) (its last 2 parameter(s) are output "
                          "buffers", "4 given")
    r = run(d / "loop.swir", "-i", d / "x.npy", "-i", d / "k.npy", "-i", d / "j.npy",
            "-o", d / "y.npy")
    assert_one_line_error(r, "@main has 3 result(s), 1 --output given")
    r = run(d / "loop.swir", "-i", d / "x.npy", "-i", d / "j.npy", "-i", d / "j.npy")
    assert_one_line_error(r, "argument #1 (%k) of @main expects f32", "has shape () int64")


def test_loop_stage_runtime_error_is_located_and_writes_nothing(loop_dir):
    d = loop_dir
    r = run(d / "loop.swir", "-i", d / "x.npy", "-i", d / "k.npy", "-i", d / "bad.npy",
            "-o", d / "y.npy", "-o", d / "p.npy", "-o", d / "t.npy")
    assert_one_line_error(r, f"{d / 'loop.swir'}:14:8: error: 'dyn_index' of %j = 3 is "
                          "outside [-3, 3) (bound = 3)")
    assert "note: in @pick, called from here" in r.stderr
    assert not any((d / n).exists() for n in ("y.npy", "p.npy", "t.npy"))


def test_every_stage_runs(tmp_path):
    m = tmp_path / "b.swir"
    m.write_text('module "b"\nstage dma\nhost func @main() {\n\'entry:\n  return\n}\n')
    r = run(m)
    assert r.returncode == 0 and r.stdout == "", r.stderr


def _stats(tmp_path: Path, *args) -> dict:
    path = tmp_path / "stats.json"
    if path.exists():
        path.unlink()
    r = run(*args, "--stats", path)
    assert r.returncode == 0, r.stderr
    return json.loads(path.read_text())


def test_stats_at_every_stage(tmp_path, loop_dir):
    inp = ROOT / "examples" / "mlp_input.npy"
    g = _stats(tmp_path, EXAMPLE, "-i", inp, "-o", tmp_path / "y.npy")
    assert g["stage"] == "graph" and g["function"] == "main" and g["steps"] > 0
    assert (tmp_path / "y.npy").exists()
    d = loop_dir
    lo = _stats(tmp_path, d / "loop.swir", "-i", d / "x.npy", "-i", d / "k.npy", "-i",
                d / "j.npy")
    assert lo == {"stage": "loop", "function": "main", "steps": lo["steps"]} and lo["steps"] > 0
    buffered = ROOT / "test" / "Tools" / "swir-run-buffered.swir"
    b = _stats(tmp_path, buffered)
    assert b["stage"] == "buffered"
    k = b["functions"]["twice_transposed"]
    assert (k["copies_in"], k["bytes_in"], k["copies_out"], k["bytes_out"]) == (5, 60, 5, 60)
    assert k["ldm_peak_cpe"][:3] == [12, 12, 0] and k["cpe_iterations"][:3] == [3, 2, 0]
    assert set(b["functions"]) == {"main", "twice_transposed"}


def test_stats_are_written_only_on_success(tmp_path, loop_dir):
    d, path = loop_dir, tmp_path / "stats.json"
    r = run(d / "loop.swir", "-i", d / "x.npy", "-i", d / "k.npy", "-i", d / "bad.npy",
            "--stats", path)
    assert_one_line_error(r, "'dyn_index' of %j = 3 is outside [-3, 3)")
    assert not path.exists()
    r = run(d / "loop.swir", "-i", d / "x.npy", "--stats", path)
    assert_one_line_error(r, "@main takes 3 argument(s)")
    assert not path.exists()
    r = run(d / "loop.swir", "-i", d / "x.npy", "-i", d / "k.npy", "-i", d / "j.npy",
            "--stats", tmp_path / "no" / "such" / "dir.json")
    assert_one_line_error(r, "cannot write '", "dir.json': no directory '")


def test_no_verify_reaches_the_interpreters_own_checks(tmp_path):
    m = tmp_path / "m.swir"
    m.write_text('''module "v"
stage dma
cpe kernel @k(%X: buf<8 x f32>) {
  %id = cpe_id : index
  %L = ldm_alloc : ldm<4 x f32>
  dma_get %X[%id] -> %L {count = 4, reply = 0}
  dma_wait {reply = 0, times = 1}
}
''')
    np.save(tmp_path / "x.npy", np.zeros(8, np.float32))
    r = run(m, "--func", "k", "-i", tmp_path / "x.npy")
    assert_one_line_error(r, "m.swir:6:3: error: 'dma_get' op subscript 0 of %X ranges over "
                          "[0, 63]")
    r = run(m, "--func", "k", "-i", tmp_path / "x.npy", "--no-verify")
    assert_one_line_error(r, "m.swir:6:3: error: CPE 63: dma_get start element %X[...] is "
                          "outside %X : buf<8 x f32>: subscript #0 (%id) is 63, outside [0, 8)")


def test_lowered_example_gives_the_graph_result(tmp_path):
    """The bundled example lowered to the loop stage (-lower-loops, with memory
    planning) runs in the loop interpreter and gives the graph stage's result, up
    to the accumulation type (the loop kernels sum in f32, the graph kernels in f64)."""
    for name in ("mlp.swir", "mlp.weights"):
        (tmp_path / name).write_bytes((ROOT / "examples" / name).read_bytes())
    lowered = tmp_path / "mlp_loop.swir"
    subprocess.run([str(Path(SWIR_RUN).parent / "swir-opt"), "-lower-loops",
                    str(tmp_path / "mlp.swir"), "-o", str(lowered)], check=True)
    assert "stage loop" in lowered.read_text() and "offset = " in lowered.read_text()
    inp = ROOT / "examples" / "mlp_input.npy"
    g, lo = tmp_path / "g.npy", tmp_path / "l.npy"
    assert run(tmp_path / "mlp.swir", "-i", inp, "-o", g).returncode == 0
    r = run(lowered, "-i", inp, "-o", lo)
    assert r.returncode == 0, r.stderr
    want, got = np.load(g), np.load(lo)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def _gather_model(path: Path) -> Path:
    """One ONNX Gather with its indices an input (swir-import accepts it)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])
    i = helper.make_tensor_value_info("i", TensorProto.INT64, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    g = helper.make_graph([helper.make_node("Gather", ["x", "i"], ["y"], axis=0)], "g",
                          [x, i], [y])
    onnx.save(onnx_model(g, 17), str(path))
    return path


@pytest.mark.parametrize("index, shown", [(7, "index 7 (indices[1])"),
                                          (-4, "index -4 (indices[1])")])
def test_out_of_range_gather_index_names_the_op_and_the_index(tmp_path, index, shown):
    """A data-dependent index outside the axis is the input's fault: exit 1
    with the op, the index and where it is (it was an IndexError, exit 2)."""
    model = _gather_model(tmp_path / "g.onnx")
    subprocess.run([str(Path(SWIR_RUN).parent / "swir-import"), str(model), "-o", str(tmp_path / "g.swir")],
                   check=True)
    np.save(tmp_path / "x.npy", np.ones((3, 4), np.float32))
    np.save(tmp_path / "i.npy", np.array([1, index], np.int64))
    r = run(tmp_path / "g.swir", "-i", tmp_path / "x.npy", "-i", tmp_path / "i.npy",
            "--output", tmp_path / "y.npy")
    assert_one_line_error(r, f"g.swir:6:8: error: 'gather': {shown} is outside [-3, 3), "
                             "the size of axis 0")
    assert not (tmp_path / "y.npy").exists()
    np.save(tmp_path / "i.npy", np.array([-3, 2], np.int64))       # both ends are fine
    assert run(tmp_path / "g.swir", "-i", tmp_path / "x.npy", "-i", tmp_path / "i.npy",
               "--print").returncode == 0
