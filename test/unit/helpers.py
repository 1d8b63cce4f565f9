"""Helpers the unit tests share: test data, the kernels' f32 reference, and
ONNX models run by onnxruntime as the oracles do."""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest


def f32(*shape: int, seed: int = 0) -> np.ndarray:
    """Standard normal f32 data of ``shape``, the same for the same seed."""
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def in_order_matmul(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """f32 sums over k in order: what the kernels compute, bit for bit."""
    C = np.zeros((A.shape[0], B.shape[1]), np.float32)
    for k in range(A.shape[1]):
        C += A[:, k:k + 1] * B[k]
    return C


def rng_for(*key: Any) -> np.random.Generator:
    """A generator seeded by ``key`` (a test's name and parameters): each case
    draws its own data, whatever runs before it."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def onnx_model(graph: Any, opset: int = 17, ir_version: int | None = None) -> Any:
    """The ONNX model of ``graph`` in the default domain at ``opset`` (and
    ``ir_version`` when given; otherwise onnx's own)."""
    from onnx import helper
    extra = {} if ir_version is None else {"ir_version": ir_version}
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], **extra)


def ort_session(model: Any) -> Any:
    """An onnxruntime session of ``model`` (serialized bytes or a path) as the
    oracles run it: CPU, graph optimisations off (nothing fused or rewritten),
    one thread, errors only in the log."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


@contextlib.contextmanager
def compile_cache(directory: Any) -> Iterator[None]:
    """swir's compile cache (swir/cache.py) in ``directory`` while the block
    runs, for the tools it starts ($SWIR_CACHE_DIR) and for passes run in this
    process; as before afterwards. A test that compiles one module twice (by
    swir-cg, and by swir-opt for the interpreters) plans each loop nest once:
    the second compile reads the first one's plans, which the cache checks as
    strictly as plans it searched (test_compile_cache.py: the same C)."""
    from swir import cache
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(cache.ENV, str(directory))
        mp.setattr(cache, "_configured", False)     # read the variable again
        mp.setattr(cache, "_directory", None)
        yield
