"""The numpy dtype of each IR scalar type (interpreters, constant folding,
frontends and codegen read arrays through it), and values of a dtype the
reference kernels and the lowering agree on."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from swir.ir.types import ScalarType, ShapedType, Type

DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i1": np.bool_,
          "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
          "index": np.int64}


def dtype_of(t: Type) -> np.dtype:
    elem = t.element if isinstance(t, ShapedType) else t
    assert isinstance(elem, ScalarType)
    return np.dtype(DTYPES[elem.name])


def lowest(dtype: np.dtype) -> Any:
    """The value padding takes in a max: never wins."""
    if dtype.kind == "f":
        return -np.inf
    if dtype.kind == "b":
        return False
    return np.iinfo(dtype).min


def to_dtype(value: float, dtype: np.dtype) -> Any:
    """A Python number converted to ``dtype`` as by ``cast`` (C conversion: a float
    truncates toward zero; here it also saturates to the integer type's range)."""
    dtype = np.dtype(dtype)
    if dtype == np.dtype(np.bool_):
        return np.bool_(value != 0)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        v = value if isinstance(value, int) else math.trunc(value) if math.isfinite(value) \
            else (info.max if value > 0 else info.min)
        return dtype.type(min(max(v, info.min), info.max))
    return dtype.type(value)
