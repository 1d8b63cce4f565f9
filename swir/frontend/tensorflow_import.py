"""TensorFlow, Keras and TFLite models → ONNX, through tf2onnx (the converter
the ecosystem uses), for :mod:`swir.frontend.onnx_import` to translate.

Which kind a path is: a folder holding ``saved_model.pb`` is a SavedModel
(its ``serving_default`` signature, or the only one); ``.keras`` and ``.h5``
files are Keras models; ``.tflite`` files are TFLite flatbuffers. Anything
else is read as ONNX. TensorFlow and tf2onnx are an optional extra
(``pip install 'swir[tensorflow]'``); without them, a TensorFlow model is a
one-line error saying so.

Keras files are loaded with Keras's ``safe_mode`` on: a model whose layers
carry Python code (``Lambda`` layers) is refused rather than run. The ONNX
opset asked of tf2onnx is :data:`OPSET` (inside what swir-import reads).
docs/frontend.md, "TensorFlow and Keras", says what converts and what not.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

from swir.frontend.onnx_types import ImportFailure, first_line

OPSET = 17
KERAS_SUFFIXES = (".keras", ".h5")
INSTALL_HINT = "pip install 'swir[tensorflow]' (TensorFlow and tf2onnx)"


def tensorflow_kind(path: Path) -> str | None:
    """'saved_model', 'keras', 'tflite', or None for a path that is none of them."""
    if path.is_dir():
        return "saved_model" if (path / "saved_model.pb").is_file() else None
    suffix = path.suffix.lower()
    if suffix in KERAS_SUFFIXES:
        return "keras"
    return "tflite" if suffix == ".tflite" else None


def convert_tensorflow(path: Path, kind: str) -> Any:
    """The ONNX ModelProto tf2onnx makes of the model at ``path``."""
    if kind != "saved_model" and not path.is_file():
        raise ImportFailure("cannot read the model: " + ("it is not a regular file"
                                                         if path.exists() else "no such file"))
    convert = {"saved_model": _from_saved_model, "keras": _from_keras,
               "tflite": _from_tflite}[kind]
    try:
        with _quiet():
            tf, tf2onnx = _modules()
            model = convert(tf, tf2onnx, path)
    except ImportFailure:
        raise
    except Exception as e:  # noqa: BLE001  whatever TensorFlow or tf2onnx raises
        raise ImportFailure(f"tf2onnx could not convert the {_KIND_NAMES[kind]}: "
                            f"{first_line(e)}") from None
    if not model.graph.name or model.graph.name.startswith(("tf2onnx", "/")):
        model.graph.name = path.stem if kind != "saved_model" else path.resolve().name
    return model


_KIND_NAMES = {"saved_model": "SavedModel", "keras": "Keras model", "tflite": "TFLite model"}


def _modules() -> tuple[Any, Any]:
    try:
        import tensorflow as tf
        import tf2onnx
    except ImportError as e:
        raise ImportFailure(f"reading a TensorFlow model needs {e.name or 'tf2onnx'}: "
                            f"{INSTALL_HINT}") from None
    for name in ("tf2onnx", "tensorflow", "absl"):
        logging.getLogger(name).setLevel(logging.ERROR)
    return tf, tf2onnx


def _from_keras(tf: Any, tf2onnx: Any, path: Path) -> Any:
    import keras
    try:
        model = keras.models.load_model(str(path), compile=False, safe_mode=True)
    except Exception as e:  # noqa: BLE001  whatever Keras raises on a bad file
        raise ImportFailure(f"cannot load the Keras model: {first_line(e)}") from None
    signature = [tf.TensorSpec(t.shape, t.dtype, name=_input_name(t, i))
                 for i, t in enumerate(model.inputs)]
    proto, _ = tf2onnx.convert.from_keras(model, input_signature=signature, opset=OPSET)
    return proto


def _input_name(t: Any, i: int) -> str:
    name = getattr(t, "name", None) or f"input_{i}"
    return name.split(":")[0]


def _from_saved_model(tf: Any, tf2onnx: Any, path: Path) -> Any:
    from tf2onnx import tf_loader
    graph_def, inputs, outputs, renames = tf_loader.from_saved_model(
        str(path), None, None, return_tensors_to_rename=True)
    proto, _ = tf2onnx.convert.from_graph_def(graph_def, name=path.resolve().name,
                                              input_names=inputs, output_names=outputs,
                                              opset=OPSET, tensors_to_rename=renames)
    return proto


def _from_tflite(tf: Any, tf2onnx: Any, path: Path) -> Any:
    proto, _ = tf2onnx.convert.from_tflite(str(path), opset=OPSET)
    return proto


@contextlib.contextmanager
def _quiet():
    """TensorFlow, TFLite and tf2onnx print progress and deprecation notices,
    from Python and from C++, to stdout and stderr: swir-import's stdout may be
    the module itself (-o -), and its stderr says only what went wrong. Both
    file descriptors are pointed at a scratch file while they run."""
    with tempfile.TemporaryFile() as sink, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sys.stdout.flush()
        sys.stderr.flush()
        saved: list[tuple[int, int]] = []
        try:
            for fd in (1, 2):
                saved.append((fd, os.dup(fd)))
                os.dup2(sink.fileno(), fd)
            with contextlib.redirect_stdout(io.StringIO()):
                yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in saved:
                os.dup2(copy, fd)
                os.close(copy)
