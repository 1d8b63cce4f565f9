"""The numpy dtype of each IR scalar type (interpreters, constant folding,
frontends and codegen read arrays through it)."""

from __future__ import annotations

import numpy as np

from swir.ir.types import ScalarType, ShapedType, Type

DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i1": np.bool_,
          "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
          "index": np.int64}


def dtype_of(t: Type) -> np.dtype:
    elem = t.element if isinstance(t, ShapedType) else t
    assert isinstance(elem, ScalarType)
    return np.dtype(DTYPES[elem.name])
