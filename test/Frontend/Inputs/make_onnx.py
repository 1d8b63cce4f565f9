#!/usr/bin/env python3
"""Writes the small ONNX models the Frontend lit tests import.

    python make_onnx.py CASE OUT.onnx

Each case is a function below; the cases that are not valid ONNX write bytes
directly (truncated, not-onnx). Weights are deterministic (fixed seeds).
"""

from __future__ import annotations

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def model(nodes, inputs, outputs, inits=(), opset=OPSET, name="g"):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=9, producer_name="swir-lit")


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def init(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def conv_block():
    """Conv (bias, SAME_UPPER, stride 2) -> BatchNormalization -> Relu ->
    GlobalAveragePool -> Flatten -> Gemm (transB) -> Softmax."""
    rng = np.random.default_rng(1)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv1", auto_pad="SAME_UPPER",
                         strides=[2, 2], kernel_shape=[3, 3]),
        helper.make_node("BatchNormalization", ["c", "s", "o", "m", "v"], ["n"], name="bn1",
                         epsilon=1e-3),
        helper.make_node("Relu", ["n"], ["r"], name="relu1"),
        helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["prob"], name="softmax"),
    ]
    inits = [init("w", rng.standard_normal((8, 3, 3, 3)).astype(np.float32)),
             init("b", np.zeros(8, np.float32)),
             init("s", np.ones(8, np.float32)), init("o", np.full(8, 0.5, np.float32)),
             init("m", rng.standard_normal(8).astype(np.float32)),
             init("v", np.ones(8, np.float32)),
             init("fc_w", rng.standard_normal((10, 8)).astype(np.float32)),
             init("fc_b", np.arange(10, dtype=np.float32))]
    return model(nodes, [f32("x", ["N", 3, 9, 9])], [f32("prob", ["N", 10])], inits,
                 name="conv_block")


def shape_reshape():
    """The pattern torch.onnx.export writes to split heads: Shape -> Gather ->
    Unsqueeze -> Concat -> Reshape, then Transpose."""
    k = lambda n, v: init(n, np.array(v, np.int64))
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], name="batch", axis=0),
        helper.make_node("Gather", ["shape", "one"], ["seq"], name="seq", axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes0"], ["b1"], name="unsq_b"),
        helper.make_node("Unsqueeze", ["seq", "axes0"], ["s1"], name="unsq_s"),
        helper.make_node("Concat", ["b1", "s1", "heads"], ["target"], name="target", axis=0),
        helper.make_node("Reshape", ["x", "target"], ["split"], name="split_heads"),
        helper.make_node("Transpose", ["split"], ["y"], name="to_heads", perm=[0, 2, 1, 3]),
    ]
    inits = [k("zero", 0), k("one", 1), k("axes0", [0]), k("heads", [4, 8])]
    return model(nodes, [f32("x", ["batch", "seq", 32])], [f32("y", ["batch", 4, "seq", 8])], inits,
                 name="shape_reshape")


def unsupported_op():
    nodes = [helper.make_node("Einsum", ["x", "x"], ["y"], name="contract",
                              equation="ij,ij->i")]
    return model(nodes, [f32("x", [2, 3])], [f32("y", [2])])


def unsupported_attr():
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["y"], name="upsample",
                              mode="linear")]
    return model(nodes, [f32("x", [1, 1, 2, 2])], [f32("y", [1, 1, 4, 4])],
                 [init("scales", np.array([1, 1, 2, 2], np.float32))])


def unsupported_dtype():
    x = helper.make_tensor_value_info("x", TensorProto.UINT8, [4])
    y = helper.make_tensor_value_info("y", TensorProto.UINT8, [4])
    return model([helper.make_node("Relu", ["x"], ["y"], name="r")], [x], [y], opset=14)


def dynamic():
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    return model(nodes, [f32("x", ["batch", 3, 32, 32])], [f32("y", ["batch", 3, 32, 32])])


def old_opset():
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    return model(nodes, [f32("x", [4])], [f32("y", [4])], opset=11)


def truncated() -> bytes:
    return conv_block().SerializeToString()[:300]


def not_onnx() -> bytes:
    return b"module \"m\"\nstage graph\n// a swir file, not an ONNX model\n"


CASES = {f.__name__: f for f in (conv_block, shape_reshape, unsupported_op, unsupported_attr,
                                 unsupported_dtype, dynamic, old_opset, truncated, not_onnx)}


def main() -> int:
    if len(sys.argv) != 3 or sys.argv[1] not in CASES:
        print(f"usage: make_onnx.py {{{','.join(CASES)}}} OUT.onnx", file=sys.stderr)
        return 1
    made = CASES[sys.argv[1]]()
    if isinstance(made, bytes):
        with open(sys.argv[2], "wb") as fh:
            fh.write(made)
    else:
        onnx.save(made, sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
