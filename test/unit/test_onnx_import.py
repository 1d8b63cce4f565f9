"""swir-import: ONNX models → graph-stage swir, checked against onnxruntime.

Every import test runs the imported module in swir's graph interpreter and
compares with onnxruntime (CPU, graph optimisations off) on the same inputs:
f32 rtol 1e-4 / atol 1e-5 (the issue's figures), f64 1e-12, f16 one ulp,
integers and booleans exactly. Covered:

* the twelve ONNX model pairs of test_codegen_onnx.py (every graph op), which
  were written with their swir twins before the importer existed: imported
  now from their ONNX side (the If model is the unsupported-op case);
* the attribute forms swir-import translates rather than copies: auto_pad,
  ConvTranspose output_shape, Gemm transA/transB/alpha/beta, Resize modes and
  sizes, Split num_outputs, opset-18 ReduceMean / Pad with axes inputs,
  Shape-derived constants, Clip, Dropout, HardSwish, Mean, Where, Cast;
* external data (MODEL.onnx.data);
* failures: each is one line naming the file (and node) with exit status 1,
  and nothing is written.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper

from swir.frontend.onnx_import import ImportFailure, import_onnx
from swir.interp.run import interpreter_for
from swir.parser import parse_module
from swir.printer import print_module
from swir.verifier import verify

import siblings
from siblings import sibling
from helpers import onnx_model, ort_session

IMPORT = str(Path(sys.executable).with_name("swir-import"))
TOL = {np.dtype(np.float32): (1e-4, 1e-5), np.dtype(np.float64): (1e-12, 1e-13),
       np.dtype(np.float16): (2.0 ** -10, 0.0)}


# -- helpers --------------------------------------------------------------------------

def make_model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "t", inputs, outputs, list(inits))
    return onnx_model(graph, opset, 9)


def vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def const(name, values, dtype=np.int64):
    return numpy_helper.from_array(np.asarray(values, dtype=dtype), name)


def onnxruntime_run(proto, inputs: dict[str, np.ndarray], path: Path | None = None
                    ) -> list[np.ndarray]:
    """onnxruntime's results; from ``path`` when the model has external data."""
    return ort_session(str(path) if path else proto.SerializeToString()).run(None, inputs)


def import_and_run(tmp_path: Path, proto, inputs: dict[str, np.ndarray],
                   shapes=None, external: bool = False) -> tuple[str, list[np.ndarray]]:
    """Import (in process), check the text round-trips and verifies, run the
    graph interpreter; return the module text and the results."""
    path = tmp_path / "model.onnx"
    if external:
        onnx.save(proto, path, save_as_external_data=True, all_tensors_to_one_file=True,
                  location="model.onnx.data", size_threshold=0)
    else:
        onnx.save(proto, path)
    imported = import_onnx(path, "model.weights", shapes)
    verify(imported.module)
    text = print_module(imported.module)
    (tmp_path / "model.weights").write_bytes(bytes(imported.weights))
    module = parse_module(text, "model.swir")
    assert print_module(module) == text
    results = interpreter_for(module, tmp_path).run("main", list(inputs.values()))
    return text, results


def compare(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, (i, g.shape, w.shape, g.dtype, w.dtype)
        if w.dtype in TOL:
            rtol, atol = TOL[w.dtype]
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64),
                                       rtol=rtol, atol=atol, equal_nan=True,
                                       err_msg=f"output {i}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"output {i}")


def check(tmp_path, proto, inputs, shapes=None, external=False) -> str:
    text, got = import_and_run(tmp_path, proto, inputs, shapes, external)
    compare(got, onnxruntime_run(proto, inputs, tmp_path / "model.onnx" if external else None))
    return text


def randn(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# -- the model pairs of the code generator's tests ------------------------------------

_pairs = sibling("test_codegen_onnx")
PAIRS = [m for m in _pairs.MODELS if m.__name__ != "control_flow"]


@pytest.mark.parametrize("make", PAIRS, ids=[m.__name__ for m in PAIRS])
def test_codegen_model_pairs_import_and_match_onnxruntime(tmp_path, make):
    m = make()
    twin = parse_module(m.text(), f"{m.name}.swir")
    proto = m.onnx_model(list(twin.lookup("main").result_types))
    _, got = import_and_run(tmp_path, proto, m.inputs)
    names = [n for n in m.outputs if n is not None]
    want = dict(zip([o.name for o in proto.graph.output], onnxruntime_run(proto, m.inputs)))
    kept = [g for g, n in zip(got, [o.name for o in proto.graph.output]) if n in names]
    compare(kept, [want[n] for n in names])


def test_an_if_on_a_graph_input_is_refused(tmp_path):
    """An If on a run-time condition (test_onnx_control.py: one on a constant
    is taken at import)."""
    m = _pairs.control_flow()
    twin = parse_module(m.text(), f"{m.name}.swir")
    proto = m.onnx_model(list(twin.lookup("main").result_types))
    onnx.save(proto, tmp_path / "cf.onnx")
    with pytest.raises(ImportFailure, match=r"node #\d+ \(If\): its condition is computed "
                                            r"at run time"):
        import_onnx(tmp_path / "cf.onnx", "cf.weights")


# -- attribute forms ----------------------------------------------------------------------

@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
@pytest.mark.parametrize("stride", [1, 2])
def test_conv_and_pool_auto_pad(tmp_path, auto_pad, stride):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], auto_pad=auto_pad,
                              strides=[stride, stride], kernel_shape=[4, 3]),
             helper.make_node("MaxPool", ["c"], ["y"], auto_pad=auto_pad,
                              kernel_shape=[3, 2], strides=[stride, 1]),
             helper.make_node("AveragePool", ["c"], ["z"], auto_pad=auto_pad,
                              kernel_shape=[2, 3], strides=[1, stride])]
    proto = make_model(nodes, [vi("x", [1, 2, 9, 8])], [vi("y", None), vi("z", None)],
                       [numpy_helper.from_array(randn((4, 2, 4, 3), 1), "w")])
    proto = onnx.shape_inference.infer_shapes(proto)
    check(tmp_path, proto, {"x": randn((1, 2, 9, 8))})


@pytest.mark.parametrize("attrs", [
    {"strides": [2, 2], "output_shape": [10, 11]},
    {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"strides": [3, 2], "auto_pad": "SAME_LOWER"},
    {"strides": [2, 2], "pads": [1, 0, 0, 1], "output_padding": [1, 1]},
], ids=["output_shape", "same_upper", "same_lower", "output_padding"])
def test_conv_transpose_padding_forms(tmp_path, attrs):
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=[3, 3],
                              **attrs)]
    proto = make_model(nodes, [vi("x", [1, 3, 5, 5])], [vi("y", None)],
                       [numpy_helper.from_array(randn((3, 2, 3, 3), 2), "w"),
                        numpy_helper.from_array(randn((2,), 3), "b")])
    check(tmp_path, onnx.shape_inference.infer_shapes(proto), {"x": randn((1, 3, 5, 5))})


@pytest.mark.parametrize("trans_a,trans_b,alpha,beta,c_const", [
    (0, 1, 1.0, 1.0, True), (1, 0, 0.5, 2.0, True), (1, 1, 2.0, 0.25, False),
    (0, 0, 1.0, 0.0, True)])
def test_gemm_forms(tmp_path, trans_a, trans_b, alpha, beta, c_const):
    a_shape = (5, 3) if trans_a else (3, 5)
    b_shape = (4, 5) if trans_b else (5, 4)
    inputs = {"a": randn(a_shape, 1)}
    inits = [numpy_helper.from_array(randn(b_shape, 2), "b")]
    ins = [vi("a", list(a_shape))]
    if c_const:
        inits.append(numpy_helper.from_array(randn((4,), 3), "c"))
    else:
        inputs["c"] = randn((3, 1), 4)
        ins.append(vi("c", [3, 1]))
    nodes = [helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=trans_a, transB=trans_b,
                              alpha=alpha, beta=beta)]
    text = check(tmp_path, make_model(nodes, ins, [vi("y", [3, 4])], inits), inputs)
    if trans_b:   # a constant B is transposed at import, not at run time
        assert "transpose %b" not in text and "matmul" in text and "@b.T" in text


def test_gemm_with_a_dynamic_transposed_operand(tmp_path):
    nodes = [helper.make_node("Gemm", ["a", "b"], ["y"], transB=1)]
    proto = make_model(nodes, [vi("a", [2, 3]), vi("b", [4, 3])], [vi("y", [2, 4])])
    text = check(tmp_path, proto, {"a": randn((2, 3), 1), "b": randn((4, 3), 2)})
    assert "transpose %b {perm = [1, 0]}" in text


@pytest.mark.parametrize("ctm,rounding,shape,scales,sizes", [
    ("asymmetric", "floor", (1, 2, 3, 4), [1, 1, 2, 3], None),
    ("half_pixel", "round_prefer_floor", (1, 1, 3, 5), [1, 1, 2, 2], None),
    ("pytorch_half_pixel", "round_prefer_ceil", (1, 1, 4, 4), [1, 1, 2, 4], None),
    ("asymmetric", "floor", (1, 1, 4, 6), None, [1, 1, 6, 9]),
    ("tf_half_pixel_for_nn", "floor", (1, 1, 4, 4), [1, 1, 2, 2], None),
    ("asymmetric", "floor", (1, 1, 4, 6), [1, 1, 0.5, 0.5], None),
], ids=["asymmetric", "half_pixel", "pytorch_half_pixel", "sizes", "tf_half_pixel",
        "downsample"])
def test_resize_nearest_modes(tmp_path, ctm, rounding, shape, scales, sizes):
    inputs = ["x", "", "scales" if scales else "", "sizes" if sizes else ""]
    inits = ([const("scales", scales, np.float32)] if scales else []) + \
        ([const("sizes", sizes)] if sizes else [])
    nodes = [helper.make_node("Resize", inputs, ["y"], mode="nearest",
                              coordinate_transformation_mode=ctm, nearest_mode=rounding)]
    proto = make_model(nodes, [vi("x", list(shape))], [vi("y", None)], inits)
    check(tmp_path, onnx.shape_inference.infer_shapes(proto), {"x": randn(shape)})


def test_resize_mode_swir_cannot_express_is_refused(tmp_path):
    # half_pixel downsampling by 2 picks the odd source rows; swir's
    # resize_nearest (asymmetric, floor) picks the even ones.
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["y"], name="down",
                              mode="nearest", coordinate_transformation_mode="half_pixel",
                              nearest_mode="round_prefer_ceil")]
    proto = make_model(nodes, [vi("x", [1, 1, 4, 4])], [vi("y", [1, 1, 2, 2])],
                       [const("scales", [1, 1, 0.5, 0.5], np.float32)])
    onnx.save(proto, tmp_path / "r.onnx")
    with pytest.raises(ImportFailure, match=r"node 'down' \(Resize\): axis 2 \(4 -> 2\): "
                                            r"coordinate_transformation_mode 'half_pixel'"):
        import_onnx(tmp_path / "r.onnx", "r.weights")


@pytest.mark.parametrize("opset", [13, 18])
def test_split_reduce_pad_across_opsets(tmp_path, opset):
    """Split sizes as an input (13) and num_outputs (18, uneven); ReduceMean
    axes as an attribute (13) and an input (18); Pad with axes (18)."""
    if opset >= 18:
        split = helper.make_node("Split", ["x"], ["s0", "s1", "s2"], axis=1, num_outputs=3)
        reduce = helper.make_node("ReduceMean", ["s0", "raxes"], ["m"], keepdims=0)
        pad = helper.make_node("Pad", ["s2", "pads", "pv", "paxes"], ["p"])
        inits = [const("raxes", [2]), const("pads", [1, 2]), const("pv", 0.5, np.float32),
                 const("paxes", [1])]
    else:
        split = helper.make_node("Split", ["x", "sizes"], ["s0", "s1", "s2"], axis=1)
        reduce = helper.make_node("ReduceMean", ["s0"], ["m"], axes=[2], keepdims=0)
        pad = helper.make_node("Pad", ["s2", "pads", "pv"], ["p"], mode="reflect")
        inits = [const("sizes", [3, 3, 1]), const("pads", [0, 0, 1, 0, 0, 2]),
                 const("pv", 0.0, np.float32)]
    proto = make_model([split, reduce, pad], [vi("x", [2, 7, 4])],
                       [vi("m", None), vi("s1", None), vi("p", None)], inits, opset=opset)
    check(tmp_path, onnx.shape_inference.infer_shapes(proto), {"x": randn((2, 7, 4))})


def test_shape_derived_constants_fold_at_import(tmp_path):
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape (torch.onnx.export's
    head split) and ConstantOfShape / Range: no shape computation is left."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
             helper.make_node("Unsqueeze", ["batch", "axes0"], ["b1"]),
             helper.make_node("Concat", ["b1", "heads"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"]),
             helper.make_node("Shape", ["y"], ["yshape"], start=-1),
             helper.make_node("ConstantOfShape", ["yshape"], ["ones"],
                              value=numpy_helper.from_array(np.array([2.0], np.float32))),
             helper.make_node("Mul", ["y", "ones"], ["z"])]
    inits = [const("zero", 0), const("axes0", [0]), const("heads", [3, -1])]
    proto = make_model(nodes, [vi("x", ["n", 12])], [vi("z", ["n", 3, 4])], inits)
    text = check(tmp_path, proto, {"x": randn((2, 12))}, shapes={"n": (2,)})
    body = text[text.index("func"):]
    assert "reshape %x {shape = [2, 3, -1]}" in body
    assert all(op not in body for op in ("gather", "concat", "unsqueeze", "Shape"))
    assert "dense<2.0>" in text


def test_elementwise_forms(tmp_path):
    """Clip (min only), Dropout with a ratio, Identity, HardSwish, variadic
    Mean and Sum, Where, Cast, Pow with an integer exponent, LeakyRelu."""
    nodes = [helper.make_node("Clip", ["x", "lo"], ["c"]),
             helper.make_node("Dropout", ["c", "ratio"], ["d"]),
             helper.make_node("Identity", ["d"], ["i"]),
             helper.make_node("HardSwish", ["i"], ["h"]),
             helper.make_node("Mean", ["x", "h", "c"], ["mean"]),
             helper.make_node("Sum", ["x", "h", "c"], ["sum"]),
             helper.make_node("Greater", ["x", "zero"], ["pos"]),
             helper.make_node("Where", ["pos", "mean", "sum"], ["w"]),
             helper.make_node("Pow", ["w", "two"], ["sq"]),
             helper.make_node("LeakyRelu", ["sq"], ["lr"], alpha=0.2),
             helper.make_node("Cast", ["lr"], ["y"], to=TensorProto.FLOAT16)]
    inits = [const("lo", -0.5, np.float32), const("ratio", 0.3, np.float32),
             const("zero", 0.0, np.float32), const("two", 2)]
    proto = make_model(nodes, [vi("x", [3, 4])], [vi("y", [3, 4], TensorProto.FLOAT16)], inits)
    check(tmp_path, proto, {"x": randn((3, 4)) * 3})


def test_dead_unsupported_nodes_are_ignored(tmp_path):
    """Only what the outputs depend on is imported: an unsupported op whose
    result nobody uses, and MaxPool's unused Indices output, are no error."""
    nodes = [helper.make_node("MaxPool", ["x"], ["y", "idx"], kernel_shape=[2, 2]),
             helper.make_node("Einsum", ["x", "x"], ["unused"], equation="nchw,nchw->n")]
    proto = make_model(nodes, [vi("x", [1, 1, 4, 4])], [vi("y", [1, 1, 3, 3])])
    check(tmp_path, proto, {"x": randn((1, 1, 4, 4))})


def test_external_data_is_read(tmp_path):
    w = randn((64, 32), 5)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
    proto = make_model(nodes, [vi("x", [2, 64])], [vi("y", [2, 32])],
                       [numpy_helper.from_array(w, "w")])
    check(tmp_path, proto, {"x": randn((2, 64))}, external=True)
    assert (tmp_path / "model.onnx.data").stat().st_size == w.nbytes
    assert (tmp_path / "model.weights").read_bytes() == w.tobytes()


def test_constants_inline_when_small_or_splat_and_aligned_in_the_sidecar(tmp_path):
    nodes = [helper.make_node("Add", ["x", "a"], ["t"]), helper.make_node("Mul", ["t", "b"], ["u"]),
             helper.make_node("Sub", ["u", "c"], ["y"])]
    inits = [numpy_helper.from_array(randn((17,), 1), "a"),       # sidecar, offset 0
             numpy_helper.from_array(np.full(17, 0.25, np.float32), "b"),   # splat
             numpy_helper.from_array(randn((17,), 2), "c")]       # sidecar, aligned
    proto = make_model(nodes, [vi("x", [17])], [vi("y", [17])], inits)
    text = check(tmp_path, proto, {"x": randn((17,))})
    assert 'global @a : <17 x f32> = file "model.weights" offset 0' in text
    assert "global @b : <17 x f32> = dense<0.25>" in text
    assert 'global @c : <17 x f32> = file "model.weights" offset 128' in text


# -- failures -----------------------------------------------------------------------------

def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([IMPORT, *args], capture_output=True, text=True, check=False)


def save(tmp_path: Path, proto, name="m.onnx") -> Path:
    p = tmp_path / name
    onnx.save(proto, p)
    return p


def relu_model(shape=(4,), elem=TensorProto.FLOAT, opset=17):
    return make_model([helper.make_node("Relu", ["x"], ["y"], name="act")],
                      [vi("x", list(shape), elem)], [vi("y", list(shape), elem)], opset=opset)


def assert_fails(r: subprocess.CompletedProcess, pattern: str, out: Path | None = None) -> None:
    assert r.returncode == 1, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert re.search(pattern, lines[0]), lines[0]
    if out is not None:
        assert not out.exists() and not out.with_suffix(".weights").exists()
        assert [p.name for p in out.parent.iterdir() if p.name.startswith(".")] == []


def test_cli_writes_the_module_and_its_weights(tmp_path):
    proto = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", [1, 32])],
                       [vi("y", [1, 8])], [numpy_helper.from_array(randn((32, 8)), "w")])
    out = tmp_path / "out" / "m.swir"
    out.parent.mkdir()
    r = cli(str(save(tmp_path, proto)), "-o", str(out), "--stats")
    assert r.returncode == 0, r.stderr
    assert 'file "m.weights" offset 0' in out.read_text()
    assert (out.parent / "m.weights").stat().st_size == 32 * 8 * 4
    assert "1 nodes: 0 folded at import, 1 swir ops" in r.stderr


@pytest.mark.parametrize("case,pattern", [
    ("unsupported_op", (r"m\.onnx: error: node 'contract' \(Einsum\): this operator is not "
                        r"supported by swir-import")),
    ("unsupported_attr", r"node 'upsample' \(Resize\): mode 'linear' is not supported"),
    ("unsupported_dtype", r"input 'x' has element type uint8, which swir does not support"),
    ("dynamic", (r"input 'x' has dynamic dimension 'batch' \(axis 0 of \[batch, 3, 32, 32\]\); "
                 r"bind it with --shape x=")),
    ("old_opset", r"opset 11 is not supported: swir-import reads opsets 13 to \d+"),
    ("truncated", r"m\.onnx: error: not an ONNX model, or a truncated one"),
    ("not_onnx", r"m\.onnx: error: not an ONNX model"),
])
def test_cli_rejects_bad_models(tmp_path, case, pattern):
    gen = Path(__file__).parents[1] / "Frontend" / "Inputs" / "make_onnx.py"
    model = tmp_path / "m.onnx"
    subprocess.run([sys.executable, str(gen), case, str(model)], check=True)
    out = tmp_path / "m.swir"
    assert_fails(cli(str(model), "-o", str(out)), pattern, out)


def test_a_failed_import_keeps_the_previous_output(tmp_path):
    out = tmp_path / "m.swir"
    out.write_text("previous")
    bad = save(tmp_path, relu_model(elem=TensorProto.UINT8, opset=14))
    assert_fails(cli(str(bad), "-o", str(out)), "uint8")
    assert out.read_text() == "previous"


@pytest.mark.parametrize("args,pattern", [
    (["--shape", "x"], r"--shape 'x': expected NAME=D0,D1,\.\.\."),
    (["--shape", "x=1,a"], r"expected NAME=D0,D1"),
    (["--shape", "y=4"], r"--shape y: the model has no input or symbolic dimension named 'y'"),
    (["--shape", "x=2,2"], r"--shape x: the input has rank 1 \[4\], the binding has 2"),
    (["--shape", "x=5"], r"--shape x: axis 0 is 4 in the model, the binding says 5"),
    (["--shape", "x=0"], r"dimensions must be positive"),
    (["--shape", "x=4", "--shape", "x=4"], r"--shape x is given twice"),
])
def test_cli_rejects_bad_shape_bindings(tmp_path, args, pattern):
    out = tmp_path / "o.swir"
    assert_fails(cli(str(save(tmp_path, relu_model())), "-o", str(out), *args), pattern, out)


def test_cli_rejects_missing_and_directory_inputs(tmp_path):
    assert_fails(cli(str(tmp_path / "nope.onnx"), "-o", str(tmp_path / "o.swir")),
                 r"nope\.onnx: error: cannot read the model: no such file")
    assert_fails(cli(str(tmp_path), "-o", str(tmp_path / "o.swir")),
                 r"error: cannot read the model: it is a directory")


def test_model_graph_errors(tmp_path):
    """Structural faults the checker would catch, found by swir-import's own
    checks too (--no-check): a cycle, a dangling input, a declared output
    shape that contradicts the model."""
    cycle = make_model([helper.make_node("Add", ["x", "b"], ["a"], name="n1"),
                        helper.make_node("Relu", ["a"], ["b"], name="n2")],
                       [vi("x", [2])], [vi("a", [2])])
    dangling = make_model([helper.make_node("Add", ["x", "ghost"], ["y"], name="add")],
                          [vi("x", [2])], [vi("y", [2])])
    wrong = make_model([helper.make_node("Transpose", ["x"], ["y"], name="t")],
                       [vi("x", [2, 3])], [vi("y", [2, 3])])
    for proto, pattern in [
            (cycle, r"node 'n1' \(Add\): the graph has a cycle through this node"),
            (dangling, r"node 'add' \(Add\): input 'ghost' is not produced by any node"),
            (wrong, (r"node 't' \(Transpose\): output 'y' has shape \[3, 2\], but the model "
                     r"declares \[2, 3\]"))]:
        out = tmp_path / "o.swir"
        assert_fails(cli(str(save(tmp_path, proto)), "-o", str(out), "--no-check"), pattern, out)
    assert_fails(cli(str(save(tmp_path, cycle)), "-o", str(tmp_path / "o.swir")),
                 r"error: invalid ONNX model: .*\(--no-check imports it anyway\)")


def test_training_mode_and_unused_outputs(tmp_path):
    bn = make_model([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"],
                                      ["y", "rm", "rv"], name="bn", training_mode=1)],
                    [vi("x", [1, 2, 2, 2])], [vi("y", [1, 2, 2, 2])],
                    [numpy_helper.from_array(np.ones(2, np.float32), n) for n in "sbmv"])
    assert_fails(cli(str(save(tmp_path, bn)), "-o", str(tmp_path / "o.swir")),
                 r"node 'bn' \(BatchNormalization\): training mode is not supported")
    ln = make_model([helper.make_node("LayerNormalization", ["x", "s"], ["y", "mean"],
                                      name="ln")],
                    [vi("x", [2, 4])], [vi("y", [2, 4]), vi("mean", [2, 1])],
                    [numpy_helper.from_array(np.ones(4, np.float32), "s")])
    assert_fails(cli(str(save(tmp_path, ln)), "-o", str(tmp_path / "o.swir")),
                 r"node 'ln' \(LayerNormalization\): output 1 \('mean'\) is not supported, "
                 r"and the model uses it")


def test_unsupported_attribute_is_named(tmp_path):
    proto = make_model([helper.make_node("Conv", ["x", "w"], ["y"], name="c",
                                         auto_pad="NOTSET", dilations=[1, 1])],
                       [vi("x", [1, 1, 3, 3])], [vi("y", [1, 1, 3, 3])],
                       [numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "w")])
    node = proto.graph.node[0]
    node.attribute.append(helper.make_attribute("frobnicate", 1))
    assert_fails(cli(str(save(tmp_path, proto)), "-o", str(tmp_path / "o.swir"), "--no-check"),
                 r"node 'c' \(Conv\): attribute 'frobnicate' is not supported")


# -- zoo models across opsets ----------------------------------------------------------

_zoo = siblings.zoo()


@pytest.mark.parametrize("name,kwargs", [
    ("shufflenet", {"resolution": 32, "width": 8}),
    ("bert", {"seq": 4, "layers": 1, "hidden": 32, "heads": 2, "intermediate": 64,
              "vocab": 50}),
])
@pytest.mark.parametrize("opset", [13, 15, 18, 20])
def test_zoo_models_import_at_every_opset(tmp_path, name, kwargs, opset):
    """Opset 13 (BERT's LayerNormalization decomposed into ReduceMean / Sub /
    Pow / Sqrt / Div, Shape-derived reshapes), 18 (ReduceMean and Split by
    inputs), 20 (BERT with the Gelu op), in swir's graph interpreter."""
    extra = {"gelu": "op"} if name == "bert" and opset >= 20 else {}
    model = _zoo.build(name, opset=opset, **kwargs, **extra)
    check(tmp_path, model, _zoo.random_inputs(model, seed=2))


def test_demo_reference_script(tmp_path):
    """scripts/onnx_reference.py (the demo's onnxruntime reference): seeded
    inputs written where asked, outputs as onnxruntime gives them; a bad
    model is one line and exit status 1."""
    script = Path(__file__).parents[2] / "scripts" / "onnx_reference.py"
    model = save(tmp_path, relu_model((2, 3)))
    x, ref = tmp_path / "x.npy", tmp_path / "ref.npy"
    r = subprocess.run([sys.executable, str(script), str(model), "--random", "3",
                        "--input", str(x), "--output", str(ref)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(ref), np.maximum(np.load(x), 0))
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    r = subprocess.run([sys.executable, str(script), str(bad), "--input", str(x),
                        "--output", str(ref)], capture_output=True, text=True)
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "bad.onnx: error: onnxruntime cannot load it" in r.stderr


# -- regressions from review --------------------------------------------------------------

def _f(name, shape, elem=TensorProto.FLOAT):
    return vi(name, shape, elem)


REFUSED = {
    # Resize whose result depends on f32 vs f64 rounding (onnxruntime: f32).
    "resize_third": (make_model([helper.make_node("Resize", ["x", "", "s"], ["y"], name="r",
                                                  coordinate_transformation_mode="asymmetric",
                                                  nearest_mode="floor")],
                                [_f("x", [1, 1, 1, 6])], [_f("y", [1, 1, 1, 2])],
                                [const("s", [1, 1, 1, 1 / 3], np.float32)], opset=13),
                     r"node 'r' \(Resize\): axis 3 \(6 -> 2\): the source indices .* depend "
                     r"on rounding"),
    "resize_huge": (make_model([helper.make_node("Resize", ["x", "", "s"], ["y"], name="r")],
                               [_f("x", [1, 2])], [_f("y", None)],
                               [const("s", [1, 1e30], np.float32)], opset=13),
                    r"node 'r' \(Resize\): axis 1: .* is too many"),
    "pad_axis_range": (make_model([helper.make_node("Pad", ["x", "p", "", "a"], ["y"], name="p")],
                                  [_f("x", [2, 3, 4])], [_f("y", [2, 6, 4])],
                                  [const("p", [1, 2]), const("a", [7])], opset=18),
                       r"node 'p' \(Pad\): axis 7 is out of range for rank 3"),
    "pad_axes_repeat": (make_model([helper.make_node("Pad", ["x", "p", "", "a"], ["y"], name="p")],
                                   [_f("x", [2, 3, 4])], [_f("y", None)],
                                   [const("p", [1, 1, 1, 1]), const("a", [1, -2])], opset=18),
                        r"axes \[1, -2\] repeat an axis"),
    "pad_count": (make_model([helper.make_node("Pad", ["x", "p", "", "a"], ["y"], name="p")],
                             [_f("x", [2, 3, 4])], [_f("y", None)],
                             [const("p", [1, 1]), const("a", [1, 2])], opset=18),
                  r"2 pads for 2 axes \(expected 4\)"),
    "dilated_same_pool": (make_model([helper.make_node("MaxPool", ["x"], ["y"], name="mp",
                                                       kernel_shape=[3, 3], dilations=[2, 2],
                                                       auto_pad="SAME_UPPER")],
                                     [_f("x", [1, 1, 8, 8])], [_f("y", None)]),
                          r"node 'mp' \(MaxPool\): auto_pad SAME with dilations is not "
                          r"supported"),
    "split_zero": (make_model([helper.make_node("Split", ["x"], ["a"], name="s", axis=1,
                                                num_outputs=0)],
                              [_f("x", [2, 3])], [_f("a", None)], opset=18),
                   r"node 's' \(Split\): num_outputs 0 must be positive"),
    "stride_zero": (make_model([helper.make_node("MaxPool", ["x"], ["y"], name="mp",
                                                 kernel_shape=[2, 2], strides=[0, 1],
                                                 auto_pad="SAME_UPPER")],
                               [_f("x", [1, 1, 4, 4])], [_f("y", None)]),
                    r"strides \[0, 1\] and dilations \[1, 1\] must be positive"),
    "sequence_fold": (make_model([helper.make_node("SequenceConstruct", ["a", "b"], ["q"],
                                                   name="seq"),
                                  helper.make_node("SequenceLength", ["q"], ["n"]),
                                  helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
                                  helper.make_node("Add", ["x", "nf"], ["y"])],
                                 [_f("x", [2])], [_f("y", [2])],
                                 [const("a", [1.0, 2.0], np.float32),
                                  const("b", [3.0], np.float32)]),
                      r"node 'seq' \(SequenceConstruct\): it makes a list, not a tensor"),
    "attr_type": (make_model([helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=1.5)],
                             [_f("x", [2, 3])], [_f("y", [2, 3])]),
                  r"node 'sm' \(Softmax\): attribute 'axis' must be INT, it is FLOAT"),
    "attr_missing": (make_model([helper.make_node("Cast", ["x"], ["y"], name="c")],
                                [_f("x", [2])], [_f("y", [2])]),
                     r"node 'c' \(Cast\): attribute 'to' is required"),
    "attr_other_opset": (make_model([helper.make_node("Split", ["x"], ["a", "b"], name="s",
                                                      num_outputs=2)],
                                    [_f("x", [4])], [_f("a", [2]), _f("b", [2])], opset=13),
                         r"node 's' \(Split\): attribute 'num_outputs' does not exist in "
                         r"opset 13"),
    "duplicate_input": (make_model([helper.make_node("Add", ["x", "x"], ["y"])],
                                   [_f("x", [2]), _f("x", [2])], [_f("y", [2])]),
                        r"graph input 'x' is defined twice"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_review_regressions_are_refused(tmp_path, case):
    proto, pattern = REFUSED[case]
    out = tmp_path / "o.swir"
    assert_fails(cli(str(save(tmp_path, proto)), "-o", str(out), "--no-check"), pattern, out)


def test_integer_clip_and_pad_bounds_stay_exact(tmp_path):
    big = 2 ** 60 + 1
    nodes = [helper.make_node("Clip", ["x", "lo", "hi"], ["c"]),
             helper.make_node("Pad", ["c", "pads", "pv"], ["y"])]
    inits = [const("lo", -big), const("hi", big), const("pads", [1, 1]), const("pv", big + 2)]
    proto = make_model(nodes, [vi("x", [2], TensorProto.INT64)],
                       [vi("y", [4], TensorProto.INT64)], inits)
    check(tmp_path, proto, {"x": np.array([-2 ** 62, 2 ** 62], np.int64)})


def test_large_splat_constants_are_one_literal(tmp_path):
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["ones"],
                              value=numpy_helper.from_array(np.array([-0.0], np.float32))),
             helper.make_node("Add", ["x", "ones"], ["y"])]
    proto = make_model(nodes, [vi("x", [512, 512])], [vi("y", [512, 512])],
                       [const("shape", [512, 512])])
    text = check(tmp_path, proto, {"x": randn((512, 512))})
    assert "dense<-0.0>" in text and not (tmp_path / "model.weights").read_bytes()


def test_conflicting_shape_bindings(tmp_path):
    proto = make_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", ["batch", 4])],
                       [vi("y", ["batch", 4])])
    assert_fails(cli(str(save(tmp_path, proto)), "-o", str(tmp_path / "o.swir"),
                     "--shape", "x=3,4", "--shape", "batch=5"),
                 r"--shape batch=5 contradicts another binding, which makes 'batch' 3")


def test_output_paths_that_would_clobber(tmp_path):
    proto = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", [1, 32])],
                       [vi("y", [1, 8])], [numpy_helper.from_array(randn((32, 8)), "w")])
    model = save(tmp_path, proto)
    same = tmp_path / "same.swir"
    assert_fails(cli(str(model), "-o", str(same), "--weights", str(same)),
                 r"the weights file '.*same\.swir' would overwrite the module")
    assert not same.exists()
    folder = tmp_path / "isdir"
    folder.mkdir()
    assert_fails(cli(str(model), "-o", str(folder)), r"cannot write '.*isdir': it is a "
                                                     r"directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["isdir", "m.onnx"]
