"""bench/models/zoo.py: the eight benchmark models built with onnx.helper.

Small variants (every layer kept, channels divided by `width`, small inputs)
must pass onnx's full checker, get their output shapes from onnx shape
inference, and run in onnxruntime (CPU, graph optimisations off) to finite,
non-degenerate outputs; the same model written for any opset from 13 to 20
must compute the same. At the paper sizes the parameter counts must equal the
published ones (built with weights="zeros": counting needs shapes only).
Saving with external data and the command line are covered too.

zoo.py is loaded by path: bench/ is not a package.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import siblings

zoo = siblings.zoo()
ZOO_PATH = Path(zoo.__file__)

# name -> (small-variant kwargs, expected output shapes); batch 2 so that
# shapes built into the graph (channel shuffle, BERT's head reshapes) must
# follow the batch
SMALL = {
    "resnet18": ({"resolution": 64, "width": 8}, {"logits": (2, 1000)}),
    "resnet50": ({"resolution": 64, "width": 8}, {"logits": (2, 1000)}),
    "vgg16": ({"resolution": 32, "width": 8}, {"logits": (2, 1000)}),
    "yolov3": ({"resolution": 64, "width": 8},
               {"output_stride32": (2, 255, 2, 2), "output_stride16": (2, 255, 4, 4),
                "output_stride8": (2, 255, 8, 8)}),
    "dcgan": ({"resolution": 16, "width": 8}, {"image": (2, 3, 16, 16)}),
    "mobilenet": ({"resolution": 64, "width": 8}, {"logits": (2, 1000)}),
    "shufflenet": ({"resolution": 64, "width": 8}, {"logits": (2, 1000)}),
    "bert": ({"layers": 2, "hidden": 64, "heads": 4, "intermediate": 128, "vocab": 100, "seq": 8},
             {"last_hidden_state": (2, 8, 64), "pooler_output": (2, 64)}),
}
TANH_OUTPUTS = {"image", "pooler_output"}


def small(name: str, **kwargs) -> onnx.ModelProto:
    return zoo.build(name, batch=2, **{**SMALL[name][0], **kwargs})


def run(model, feeds=None) -> dict[str, np.ndarray]:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    source = model if isinstance(model, str) else model.SerializeToString()
    sess = ort.InferenceSession(source, so, providers=["CPUExecutionProvider"])
    feeds = zoo.random_inputs(model if not isinstance(model, str) else onnx.load(model)) \
        if feeds is None else feeds
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def inferred_output_shapes(model: onnx.ModelProto) -> dict[str, tuple]:
    """Output shapes as onnx shape inference derives them (the declared
    output shapes removed first, so that they are not just read back)."""
    bare = onnx.ModelProto()
    bare.CopyFrom(model)
    for out in bare.graph.output:
        out.type.tensor_type.ClearField("shape")
    inferred = onnx.shape_inference.infer_shapes(bare, strict_mode=True, data_prop=True)
    return {o.name: tuple(d.dim_value for d in o.type.tensor_type.shape.dim)
            for o in inferred.graph.output}


# --- 1. small variants: valid, shape-inferable, runnable, non-degenerate ------

@pytest.mark.parametrize("name", list(SMALL))
def test_small_variant_checks_infers_and_runs(name):
    model = small(name)
    expected = SMALL[name][1]
    assert model.ir_version == 9 and model.producer_name == "swir-zoo"
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 17)]
    onnx.checker.check_model(model, full_check=True)
    assert inferred_output_shapes(model) == expected
    names = [n.name for n in model.graph.node]
    assert all(names) and len(set(names)) == len(names)
    assert all(t.data_type != onnx.TensorProto.DOUBLE for t in model.graph.initializer)

    outputs = run(model)
    assert list(outputs) == list(expected)
    for out, y in outputs.items():
        assert y.shape == expected[out] and y.dtype == np.float32
        assert np.isfinite(y).all()
        assert 1e-3 < y.std() and np.abs(y).max() < 100, (out, y.std(), np.abs(y).max())
        if out in TANH_OUTPUTS:   # not saturated
            assert np.mean(np.abs(y) > 0.99) < 0.1, out


def test_random_inputs():
    feeds = zoo.random_inputs(small("bert"), seed=3)
    ids = feeds["input_ids"]
    assert ids.dtype == np.int64 and ids.shape == (2, 8)
    assert ids.min() >= 0 and ids.max() < 100 and len(np.unique(ids)) > 1
    z = zoo.random_inputs(small("dcgan"))["z"]
    assert z.dtype == np.float32 and z.shape == (2, 100, 1, 1)
    assert np.array_equal(z, zoo.random_inputs(small("dcgan"))["z"])


def test_weights_are_seeded():
    a, b, c = small("mobilenet"), small("mobilenet"), small("mobilenet", seed=1)
    assert a.SerializeToString() == b.SerializeToString()
    assert a.SerializeToString() != c.SerializeToString()


# --- 2. parameter counts at the paper sizes -----------------------------------

# Trainable parameters, as torchvision / PyTorch count them (sum of
# p.numel() over model.parameters()): BatchNorm's running mean and variance
# are buffers and do not count; zoo.param_count(model) counts the same way.
BERT_BASE = (
    30522 * 768 + 512 * 768 + 2 * 768 + 2 * 768          # word, position, token type embeddings; LayerNorm
    + 12 * (3 * (768 * 768 + 768)                          # per layer: Q, K, V
            + (768 * 768 + 768) + 2 * 768                  # attention output dense, LayerNorm
            + (768 * 3072 + 3072) + (3072 * 768 + 768)     # FFN in, FFN out
            + 2 * 768)                                     # output LayerNorm
    + 768 * 768 + 768)                                     # pooler dense
DCGAN_G = (
    100 * 512 * 16 + 512 * 256 * 16 + 256 * 128 * 16 + 128 * 64 * 16 + 64 * 3 * 16  # ConvT, no bias
    + 2 * (512 + 256 + 128 + 64))                          # BN weight + bias
PAPER_PARAMS = {
    "resnet18": 11_689_512,     # torchvision resnet18
    "resnet50": 25_557_032,     # torchvision resnet50
    "vgg16": 138_357_544,       # torchvision vgg16
    "mobilenet": 3_504_872,     # torchvision mobilenet_v2
    "shufflenet": 2_278_604,    # torchvision shufflenet_v2_x1_0
    "dcgan": DCGAN_G,           # = 3,576,704: PyTorch DCGAN example, nz=100 ngf=64 nc=3
    "bert": BERT_BASE,          # = 109,482,240: HuggingFace bert-base-uncased BertModel
    # Keras' YOLOv3 summary: "Trainable params: 61949149" (also Ultralytics'
    # yolov3.cfg model summary); see test_yolov3_counts_match_darknet_weights
    "yolov3": 61_949_149,
}


@pytest.mark.parametrize("name", list(PAPER_PARAMS))
def test_paper_size_parameter_count(name):
    model = zoo.build(name, weights="zeros", **zoo.PAPER_SIZES[name])
    assert zoo.param_count(model) == PAPER_PARAMS[name]


def test_canonical_arithmetic():
    assert DCGAN_G == 3_576_704 and BERT_BASE == 109_482_240


def test_yolov3_counts_match_darknet_weights():
    """With the BN running statistics, YOLOv3 has 62,001,757 floats: Keras'
    "Total params: 62001757" (52,608 non-trainable = 2 x 26,304 BN channels),
    and darknet's yolov3.weights is 248,007,048 bytes = a 20-byte header +
    4 bytes for each of them."""
    model = zoo.build("yolov3", weights="zeros")
    assert zoo.param_count(model, buffers=True) == (248_007_048 - 20) // 4 == 62_001_757


# --- 3. opsets ------------------------------------------------------------------

def _ops(model) -> set[str]:
    return {n.op_type for n in model.graph.node}


def test_bert_opset_variants_agree():
    m13, m17, m20 = small("bert", opset=13), small("bert", opset=17), small("bert", opset=20, gelu="op")
    assert "LayerNormalization" not in _ops(m13) and "ReduceMean" in _ops(m13)
    assert "LayerNormalization" in _ops(m17) and "Gelu" not in _ops(m17) and "Erf" in _ops(m17)
    assert "Gelu" in _ops(m20) and "Erf" not in _ops(m20)
    for m in (m13, m20):
        onnx.checker.check_model(m, full_check=True)
    feeds = zoo.random_inputs(m17)
    ref = run(m17, feeds)
    for m in (m13, m20):
        for out, y in run(m, feeds).items():
            np.testing.assert_allclose(y, ref[out], rtol=0, atol=1e-5)


def test_shufflenet_reduce_mean_axes_attribute_then_input():
    m13, m18 = small("shufflenet", opset=13), small("shufflenet", opset=18)
    mean13 = next(n for n in m13.graph.node if n.op_type == "ReduceMean")
    mean18 = next(n for n in m18.graph.node if n.op_type == "ReduceMean")
    assert len(mean13.input) == 1 and [a.name for a in mean13.attribute] == ["axes", "keepdims"]
    assert len(mean18.input) == 2 and [a.name for a in mean18.attribute] == ["keepdims"]
    onnx.checker.check_model(m18, full_check=True)
    np.testing.assert_allclose(run(m18)["logits"], run(m13)["logits"], rtol=0, atol=1e-6)


@pytest.mark.parametrize("opset", [13, 14, 15, 16, 18, 19, 20])
def test_every_model_at_every_opset(opset):
    for name in SMALL:
        model = small(name, opset=opset)
        onnx.checker.check_model(model)
        ref = small(name)   # opset 17
        feeds = zoo.random_inputs(ref)
        expected = run(ref, feeds)
        for out, y in run(model, feeds).items():
            np.testing.assert_allclose(y, expected[out], rtol=0, atol=1e-5, err_msg=f"{name} {out}")


@pytest.mark.parametrize("kwargs", [
    {"name": "bert", "opset": 16, "layernorm": "op"},
    {"name": "bert", "opset": 19, "gelu": "op"},
    {"name": "bert", "layernorm": "fused"},
    {"name": "bert", "hidden": 64, "heads": 5},
    {"name": "resnet18", "opset": 12},
    {"name": "resnet18", "opset": 21},
    {"name": "resnet18", "weights": "ones"},
    {"name": "yolov3", "resolution": 100},
    {"name": "dcgan", "resolution": 48},
    {"name": "vgg16", "resolution": 16},
    {"name": "alexnet"},
])
def test_bad_options_raise_value_error(kwargs):
    with pytest.raises(ValueError):
        zoo.build(**kwargs)


# --- 4. external data ----------------------------------------------------------

def test_save_with_external_data(tmp_path):
    model = small("resnet18")
    path = tmp_path / "resnet18.onnx"
    data = tmp_path / "resnet18.onnx.data"
    expected = run(model)
    serialized = model.SerializeToString()
    zoo.save(model, path, external_data=True)
    assert model.SerializeToString() == serialized   # the caller's model is left whole
    assert path.is_file() and data.is_file()
    size = data.stat().st_size
    assert size > 0 and path.stat().st_size < size
    zoo.save(model, path, external_data=True)
    assert data.stat().st_size == size   # saving again replaces the data, not appends
    loaded = onnx.load(str(path))
    onnx.checker.check_model(loaded)
    assert zoo.param_count(loaded) == zoo.param_count(model)
    for out, y in run(str(path), zoo.random_inputs(model)).items():
        np.testing.assert_array_equal(y, expected[out])
    for out, y in run(loaded).items():
        np.testing.assert_array_equal(y, expected[out])


def test_save_without_external_data(tmp_path):
    model = small("dcgan")
    zoo.save(model, tmp_path / "g.onnx")
    assert not (tmp_path / "g.onnx.data").exists()
    assert onnx.load(str(tmp_path / "g.onnx")).SerializeToString() == model.SerializeToString()


# --- 5. command line -------------------------------------------------------------

def cli(*args):
    return subprocess.run([sys.executable, str(ZOO_PATH), *map(str, args)],
                          capture_output=True, text=True, timeout=120, check=False)


def test_cli_list():
    result = cli("--list")
    assert result.returncode == 0 and result.stderr == ""
    assert [line.split()[0] for line in result.stdout.splitlines()] == list(zoo.MODELS)


@pytest.mark.parametrize("args", [
    ["alexnet", "-o", "x.onnx"],
    ["resnet18", "-o", "x.onnx", "--seq", "8"],
    ["resnet18", "-o", "x.onnx", "--batch", "0"],
    ["resnet18", "-o", "x.onnx", "--opset", "12"],
    ["resnet18", "--bogus"],
    ["resnet18"],
])
def test_cli_errors_are_one_line(tmp_path, args):
    result = subprocess.run([sys.executable, str(ZOO_PATH), *args], capture_output=True,
                            text=True, timeout=120, cwd=tmp_path, check=False)
    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 1 and "error" in result.stderr
    assert not (tmp_path / "x.onnx").exists()


def test_cli_writes_models(tmp_path):
    out = tmp_path / "shufflenet.onnx"
    result = cli("shufflenet", "-o", out, "--resolution", 64, "--width", 8, "--batch", 2,
                 "--opset", 18, "--seed", 5)
    assert result.returncode == 0, result.stderr
    model = onnx.load(str(out))
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == 18
    assert model.SerializeToString() == small("shufflenet", opset=18, seed=5).SerializeToString()

    out = tmp_path / "bert.onnx"
    result = cli("bert", "-o", out, "--seq", 8, "--layers", 1, "--hidden", 64, "--heads", 4,
                 "--opset", 13, "--external-data")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "bert.onnx.data").is_file()
    outputs = run(str(out), zoo.random_inputs(onnx.load(str(out))))
    assert outputs["last_hidden_state"].shape == (1, 8, 64)


def test_zoo_does_not_import_swir():
    source = ZOO_PATH.read_text()
    assert "import swir" not in source and "from swir" not in source
