"""TensorFlow / Keras models end to end: Keras models built here, saved as
``.keras`` files, imported by swir-import (through tf2onnx), compiled by
swir-cg, built with ``make emu`` and run on the athread emulation; the
program's output must be TensorFlow's own (``model(x)``). Covered: a CNN with
batch norm and both poolings, a MobileNet-style block (depthwise convolutions,
ReLU6, a residual add), recurrent layers (LSTM and bidirectional LSTM, which
tf2onnx writes as ONNX LSTM nodes; GRU and SimpleRNN, which it writes as ONNX
Loops, and with ``unroll=True`` as plain steps), the SavedModel and TFLite
routes, and what is refused: a ``Lambda`` layer (Keras's safe mode), and the
error without tf2onnx. docs/frontend.md, "TensorFlow and Keras".

TensorFlow and tf2onnx are the ``tensorflow`` extra; scripts/test installs it
and sets SWIR_REQUIRE_TENSORFLOW, which turns a missing TensorFlow into a
failure rather than a skip.

Tolerance: rtol 1e-4, atol 1e-5 (f32; as test_codegen_onnx against
onnxruntime): TensorFlow's kernels and swir's sum in different orders."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
if os.environ.get("SWIR_REQUIRE_TENSORFLOW"):
    import tensorflow as tf
    import tf2onnx  # noqa: F401
else:
    tf = pytest.importorskip("tensorflow", reason="TensorFlow is not installed "
                             "(pip install 'swir[tensorflow]')")
    pytest.importorskip("tf2onnx", reason="tf2onnx is not installed")
import keras  # noqa: E402

import swir  # noqa: E402

from swir.codegen import emulate  # noqa: E402
from swir.frontend.onnx_import import import_onnx  # noqa: E402
from swir.frontend.onnx_types import ImportFailure  # noqa: E402
from swir.interp.run import interpreter_for, signature  # noqa: E402
from swir.parser import parse_module  # noqa: E402

from helpers import compile_cache, rng_for  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5
BATCH = 2
needs_cc = pytest.mark.skipif(shutil.which("cc") is None or shutil.which("make") is None,
                              reason="needs a host C compiler (cc) and make")


def randomized(model: keras.Model, name: str) -> keras.Model:
    """Every weight drawn at random (batch norm's variances positive), so that
    no layer is an identity."""
    rng = rng_for("keras", name)
    for w in model.weights:
        shape = tuple(w.shape)
        value = rng.uniform(0.5, 1.5, shape) if "variance" in w.path else \
            rng.standard_normal(shape) * 0.5
        w.assign(value.astype(np.float32))
    return model


def cnn() -> keras.Model:
    inp = keras.Input((16, 16, 3), batch_size=BATCH, name="image")
    x = keras.layers.Conv2D(8, 3, padding="same")(inp)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.ReLU()(x)
    x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Conv2D(16, 3, strides=1)(x)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.ReLU()(x)
    x = keras.layers.AveragePooling2D(2)(x)
    x = keras.layers.Flatten()(x)
    return keras.Model(inp, keras.layers.Dense(10, activation="softmax")(x), name="cnn")


def mobilenet_block() -> keras.Model:
    inp = keras.Input((16, 16, 3), batch_size=BATCH, name="image")
    x = keras.layers.Conv2D(16, 3, strides=2, padding="same", use_bias=False)(inp)
    x = keras.layers.ReLU(6.0)(keras.layers.BatchNormalization()(x))
    y = keras.layers.DepthwiseConv2D(3, padding="same", use_bias=False)(x)
    y = keras.layers.ReLU(6.0)(keras.layers.BatchNormalization()(y))
    y = keras.layers.BatchNormalization()(keras.layers.Conv2D(16, 1, use_bias=False)(y))
    x = keras.layers.Add()([x, y])
    x = keras.layers.DepthwiseConv2D(3, strides=2, padding="same")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Dropout(0.2)(x)
    return keras.Model(inp, keras.layers.Dense(5)(x), name="mobilenet_block")


def recurrent(unroll: bool = False) -> keras.Model:
    """tf2onnx writes the LSTMs as ONNX LSTM nodes, the GRU and the SimpleRNN
    as ONNX Loops (or, with ``unroll``, as their steps written out)."""
    inp = keras.Input((6, 4), batch_size=BATCH, name="sequence")
    x = keras.layers.LSTM(8, return_sequences=True)(inp)
    x = keras.layers.Bidirectional(keras.layers.LSTM(5, return_sequences=True))(x)
    x = keras.layers.GRU(6, unroll=unroll, return_sequences=True)(x)
    x = keras.layers.SimpleRNN(4, unroll=unroll)(x)
    return keras.Model(inp, keras.layers.Dense(3)(x), name="recurrent")


MODELS = {f.__name__: f for f in (cnn, mobilenet_block, recurrent)}


def saved(model: keras.Model, name: str, folder: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    """The model saved as NAME.keras, an input, and TensorFlow's output on it."""
    model = randomized(model, name)
    path = folder / f"{name}.keras"
    model.save(path)
    shape = tuple(int(d) for d in model.inputs[0].shape)
    x = rng_for("input", name).standard_normal(shape).astype(np.float32)
    return path, x, np.asarray(model(x, training=False))


def swir_import(model: Path, out: Path) -> subprocess.CompletedProcess:
    tool = Path(sys.executable).with_name("swir-import")
    return subprocess.run([str(tool), str(model), "-o", str(out)], capture_output=True,
                          text=True, timeout=300)


def emulated(module_path: Path, x: np.ndarray) -> np.ndarray:
    """The program swir-cg writes for the module, built with make emu, run on x."""
    project = module_path.parent / "project"
    tool = Path(sys.executable).with_name("swir-cg")
    r = subprocess.run([str(tool), str(module_path), "-o", str(project)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    module = parse_module(module_path.read_text(), str(module_path))
    program = emulate.build(project, module.name)
    params, results = signature(module, module.lookup("main"))
    return emulate.run(program, [x], [p.type for p in params], results).outputs[0]


@needs_cc
@pytest.mark.parametrize("name", MODELS)
def test_keras_model_compiled_and_emulated_matches_tensorflow(name, tmp_path, compile_cache_dir):
    path, x, want = saved(MODELS[name](), name, tmp_path)
    module_path = tmp_path / f"{name}.swir"
    r = swir_import(path, module_path)
    assert r.returncode == 0, r.stderr
    # TensorFlow's and tf2onnx's chatter is kept out of swir-import's stderr.
    assert r.stderr.strip().splitlines() == [r.stderr.strip()], r.stderr
    assert r.stderr.startswith(f"swir-import: wrote {module_path}")
    with compile_cache(compile_cache_dir):
        got = emulated(module_path, x)
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=RTOL, atol=ATOL)


def _interpreted(source, x: np.ndarray, folder: Path, shapes=None) -> np.ndarray:
    """Imported by the Python API (swir.import_model), run by the graph interpreter."""
    module = swir.import_model(source, folder / f"{Path(source).stem}.swir", shapes=shapes)
    return interpreter_for(module, folder).run("main", [x])[0]


def test_saved_model_and_tflite_routes(tmp_path):
    """The same CNN exported as a SavedModel folder (batch left open: bound
    with a shape) and converted to TFLite, each imported and run by the
    graph interpreter."""
    model = randomized(cnn(), "routes")
    x = rng_for("input", "routes").standard_normal((BATCH, 16, 16, 3)).astype(np.float32)
    want = np.asarray(model(x, training=False))
    model.export(tmp_path / "saved", verbose=False)
    got = _interpreted(tmp_path / "saved", x, tmp_path, {"image": x.shape})
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    tflite = tmp_path / "cnn.tflite"
    tflite.write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    got = _interpreted(tflite, x, tmp_path)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_unrolled_recurrent_layers(tmp_path):
    """Keras's ``unroll=True``: tf2onnx writes the steps out, no Loop."""
    path, x, want = saved(recurrent(unroll=True), "unrolled", tmp_path)
    np.testing.assert_allclose(_interpreted(path, x, tmp_path), want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("suffix", [".keras", ".h5"])
def test_lambda_layers_are_not_run(tmp_path, suffix):
    """Keras files load in safe mode: a Lambda layer's Python code (bytecode in
    the file) is refused, never deserialized; in the legacy .h5 format too."""
    inp = keras.Input((4,), batch_size=1)
    model = keras.Model(inp, keras.layers.Lambda(lambda t: t * 2)(inp))
    path = tmp_path / f"lambda{suffix}"
    model.save(path)
    r = swir_import(path, tmp_path / "lambda.swir")
    assert r.returncode == 1
    assert r.stderr.startswith(f"{path}: error: cannot load the Keras model: "), r.stderr
    assert "Lambda" in r.stderr and "safe_mode" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "lambda.swir").exists()


def test_a_folder_that_is_no_saved_model_is_read_as_onnx(tmp_path):
    with pytest.raises(ImportFailure, match="cannot read the model: it is a directory"):
        import_onnx(tmp_path, "model.weights")


def test_without_tf2onnx_the_error_says_what_to_install(tmp_path, monkeypatch):
    path, _, _ = saved(cnn(), "missing", tmp_path)
    monkeypatch.setitem(sys.modules, "tf2onnx", None)   # import tf2onnx raises ImportError
    with pytest.raises(ImportFailure, match=r"needs tf2onnx: pip install 'swir\[tensorflow\]'"):
        import_onnx(path, "model.weights")
