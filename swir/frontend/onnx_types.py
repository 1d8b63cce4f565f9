"""What the pieces of swir-import share: its error, ONNX's modules (imported on
first use), and the swir scalar types of ONNX element types and numpy dtypes."""

from __future__ import annotations

import functools

import numpy as np

from swir.diagnostics import one_line
from swir.ir.core import Value
from swir.ir.types import F16, F32, F64, I1, I8, I16, I32, I64, ScalarType

Tensor = Value | np.ndarray   # an IR value, or a constant known at import time


class ImportFailure(Exception):
    """A model swir-import cannot translate; the message is one line.

    Messages quote the model's own names (nodes, tensors, attributes), which
    may hold anything: a newline, a terminal escape sequence, a right-to-left
    override. Every character that is not printable is shown as an escape,
    so the message stays one line and shows what the model really says."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


def first_line(e: BaseException) -> str:
    """The first line of an exception's message (its type's name if it has none)."""
    text = str(e).strip()
    return text.splitlines()[0].strip() if text else type(e).__name__


def onnx_modules():
    """onnx and its pieces, imported on first use (swir itself does not need onnx)."""
    try:
        import onnx
        from onnx import numpy_helper
        from onnx.reference import ReferenceEvaluator
    except ImportError as e:  # pragma: no cover - onnx is a dependency of swir-import
        raise ImportFailure(f"swir-import needs the 'onnx' package ({e})") from None
    return onnx, numpy_helper, ReferenceEvaluator


@functools.cache
def element_types() -> dict[int, ScalarType]:
    onnx, _, _ = onnx_modules()
    T = onnx.TensorProto
    return {T.FLOAT: F32, T.DOUBLE: F64, T.FLOAT16: F16, T.BOOL: I1, T.INT8: I8,
            T.INT16: I16, T.INT32: I32, T.INT64: I64}


def dtype_name(elem_type: int) -> str:
    onnx, _, _ = onnx_modules()
    try:
        return onnx.TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return f"data type {elem_type}"


def swir_element(elem_type: int, what: str) -> ScalarType:
    t = element_types().get(elem_type)
    if t is None:
        raise ImportFailure(f"{what} has element type {dtype_name(elem_type)}, which swir "
                            "does not support (f16, f32, f64, bool, int8, int16, int32, int64)")
    return t


NUMPY_ELEMENTS = {np.dtype(np.float32): F32, np.dtype(np.float64): F64,
                  np.dtype(np.float16): F16, np.dtype(np.bool_): I1, np.dtype(np.int8): I8,
                  np.dtype(np.int16): I16, np.dtype(np.int32): I32, np.dtype(np.int64): I64}


def numpy_element(a: np.ndarray, what: str) -> ScalarType:
    t = NUMPY_ELEMENTS.get(a.dtype)
    if t is None:
        raise ImportFailure(f"{what} has element type {a.dtype}, which swir does not support")
    return t
