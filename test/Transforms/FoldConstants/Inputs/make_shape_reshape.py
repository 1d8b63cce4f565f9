"""Writes the inputs of fold-shape-reshape.test into OUTDIR.

    python make_shape_reshape.py OUTDIR

- sr.onnx: y = x * Reshape(W, [Shape(x)[0], -1]), W a 2x3x4 initializer and
  the target shape computed by Shape -> Gather -> Unsqueeze -> Concat (the
  pattern torch.onnx.export writes for a flatten that keeps the batch);
- unfolded.swir, unfolded.weights: that network as swir-import would write it
  if it left the reshape of the weight to the compiler (W in the sidecar file,
  ``reshape @W {shape = [1, -1]}``);
- x.npy: an input for both.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
# Halves from -3.0: every value prints exactly, so the test can check them.
WEIGHT = (np.arange(24, dtype=np.float32) * 0.5 - 3.0).reshape(2, 3, 4)

UNFOLDED = '''module "unfolded"
stage graph

global @W : <2 x 3 x 4 x f32> = file "unfolded.weights" offset 0

func @main(%x: <1 x 24 x f32>) -> <1 x 24 x f32> {
'entry:
  %wr = reshape @W {shape = [1, -1]} : <1 x 24 x f32>
  %y = mul %x, %wr : <1 x 24 x f32>
  return %y
}
'''


def ints(name: str, v) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(v, np.int64), name)


def shape_reshape_model() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], name="batch", axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes0"], ["batch1"], name="unsqueeze"),
        helper.make_node("Concat", ["batch1", "rest"], ["target"], name="target", axis=0),
        helper.make_node("Reshape", ["W", "target"], ["wr"], name="flatten_w"),
        helper.make_node("Mul", ["x", "wr"], ["y"], name="scale"),
    ]
    inits = [ints("zero", 0), ints("axes0", [0]), ints("rest", [-1]),
             numpy_helper.from_array(WEIGHT, "W")]
    graph = helper.make_graph(
        nodes, "sr", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 24])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 24])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                             ir_version=9, producer_name="swir-lit")


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    onnx.save(shape_reshape_model(), str(out / "sr.onnx"))
    (out / "unfolded.swir").write_text(UNFOLDED)
    (out / "unfolded.weights").write_bytes(WEIGHT.astype("<f4").tobytes())
    x = np.random.default_rng(7).standard_normal((1, 24)).astype(np.float32)
    np.save(out / "x.npy", x)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
