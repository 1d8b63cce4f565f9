#!/usr/bin/env python3
"""Run an ONNX model in onnxruntime (CPU, graph optimisations off) and save
its outputs as .npy: the reference a swir-compiled program is checked against.

    python scripts/onnx_reference.py MODEL.onnx --input X.npy [...] --output REF.npy [...]
    python scripts/onnx_reference.py MODEL.onnx --random SEED --input X.npy --output REF.npy

With --random the inputs are made up and written to the --input paths: floats
standard normal, integers uniform in [0, 100) (token ids). Exit status 1 with
a one-line error if the model or an input cannot be read.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def random_input(shape, dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    return rng.integers(0, 100, shape).astype(dtype)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("--input", action="append", default=[], metavar="X.npy")
    p.add_argument("--output", action="append", default=[], metavar="REF.npy")
    p.add_argument("--random", type=int, metavar="SEED",
                   help="make up the inputs (seeded) and write them to the --input paths")
    a = p.parse_args(argv)
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    try:
        sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001  onnxruntime's errors have many types
        print(f"{a.model}: error: onnxruntime cannot load it: {str(e).splitlines()[0]}",
              file=sys.stderr)
        return 1
    inputs = sess.get_inputs()
    if len(a.input) != len(inputs) or len(a.output) != len(sess.get_outputs()):
        print(f"{a.model}: error: the model has {len(inputs)} input(s) and "
              f"{len(sess.get_outputs())} output(s); give as many --input and --output",
              file=sys.stderr)
        return 1
    rng = np.random.default_rng(a.random)
    feeds = {}
    for spec, path in zip(inputs, a.input):
        if a.random is not None:
            dtype = np.dtype({"tensor(float)": np.float32, "tensor(int64)": np.int64,
                              "tensor(double)": np.float64}.get(spec.type, np.float32))
            feeds[spec.name] = random_input([int(d) for d in spec.shape], dtype, rng)
            np.save(path, feeds[spec.name])
        else:
            feeds[spec.name] = np.load(path, allow_pickle=False)
    for path, out in zip(a.output, sess.run(None, feeds)):
        np.save(path, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
