"""The numpy reference semantics of the element-wise ops, which their
definitions carry (``OpDef.numpy``, swir/ops/elementwise.py): the graph
interpreter runs them on tensors, the loop-stage interpreters on scalars (0-d
arrays), and the generated C is checked against them.

Numerics (docs/ir.md, "Element-wise ops"):

- i1 arithmetic follows C (and numpy): the integer result converted back to i1 is
  ``result != 0``, so ``add`` is "or", ``sub`` is "xor", ``mul`` is "and", ``neg``
  and ``abs`` are the identity.
- Integer arithmetic wraps around (two's complement); integer ``div`` truncates
  toward zero; division by zero is undefined in swir (numpy gives 0 here).
- Transcendentals (exp, log, sqrt, rsqrt, tanh, sigmoid, erf, erfc, pow) of f16 and
  f32 are computed in f64 and rounded once, so results are (almost always)
  correctly rounded and do not depend on whether numpy took a SIMD or a scalar
  path: a scalar gives the same bits as the same element of a tensor. numpy has
  no erf: ``math.erf`` is vectorised.
- NaN wins: ``max`` and ``min`` propagate it.

They never promote: operands share one element type (the op rules check it)
and results keep it; the interpreter casts each result to its declared type.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

_BOOL = np.dtype(np.bool_)
_ERF = np.frompyfunc(math.erf, 1, 1)
_ERFC = np.frompyfunc(math.erfc, 1, 1)


def erf(x: np.ndarray) -> np.ndarray:
    """libm's erf, element-wise, in f64 (numpy has none; exact at +-inf and nan)."""
    return np.asarray(_ERF(np.asarray(x, dtype=np.float64)), dtype=np.float64)


def erfc(x: np.ndarray) -> np.ndarray:
    """libm's erfc, element-wise, in f64: keeps relative accuracy in the tail."""
    return np.asarray(_ERFC(np.asarray(x, dtype=np.float64)), dtype=np.float64)


def _arr(x: Any) -> np.ndarray:
    return np.asarray(x)


def _is_float(a: np.ndarray) -> bool:
    return a.dtype.kind == "f"


def _work(a: np.ndarray) -> np.ndarray:
    """The operand in the precision transcendentals are computed in (f64)."""
    return a.astype(np.float64) if a.dtype.kind == "f" and a.dtype != np.float64 else a


# -- unary -----------------------------------------------------------------

def _bool_arith(fn, *xs: np.ndarray) -> np.ndarray:
    """Integer arithmetic on i1 operands, converted back to i1 (C: nonzero is true)."""
    return _arr(fn(*(x.astype(np.int8) for x in xs))) != 0


def _neg(x: np.ndarray) -> np.ndarray:
    return x.copy() if x.dtype == _BOOL else np.negative(x)


def _abs(x: np.ndarray) -> np.ndarray:
    return x.copy() if x.dtype == _BOOL else np.abs(x)


def _relu(x: np.ndarray) -> np.ndarray:
    if x.dtype == _BOOL:
        return x.copy()
    return np.maximum(x, x.dtype.type(0))  # NaN stays NaN (ONNX Relu)


def _rsqrt(x: np.ndarray) -> np.ndarray:
    w = _work(x)
    return (w.dtype.type(1) / np.sqrt(w)).astype(x.dtype)


def _reciprocal(x: np.ndarray) -> np.ndarray:
    return x.dtype.type(1) / x  # IEEE division: correctly rounded in every float type


def _sigmoid(x: np.ndarray) -> np.ndarray:
    w = _work(x)
    one = w.dtype.type(1)
    # exp(-x) overflows to inf for very negative x, and 1 / inf = 0: no NaN.
    return (one / (one + np.exp(-w))).astype(x.dtype)


def _math(fn):
    def run(x: np.ndarray) -> np.ndarray:
        return fn(_work(x)).astype(x.dtype)
    return run


def _erf(x: np.ndarray) -> np.ndarray:
    return erf(x).astype(x.dtype)


def _erfc(x: np.ndarray) -> np.ndarray:
    return erfc(x).astype(x.dtype)


def _not(x: np.ndarray) -> np.ndarray:
    return np.logical_not(x)


# The reference of each element-wise op (its row in swir.ops.elementwise names it).
ref_neg = _neg
ref_abs = _abs
ref_relu = _relu
ref_exp = _math(np.exp)
ref_log = _math(np.log)
ref_sqrt = _math(np.sqrt)
ref_rsqrt = _rsqrt
ref_reciprocal = _reciprocal
ref_tanh = _math(np.tanh)
ref_sigmoid = _sigmoid
ref_erf = _erf
ref_erfc = _erfc
ref_floor = np.floor
ref_ceil = np.ceil
ref_not = _not


# -- binary ---------------------------------------------------------------

def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero (C, ONNX); x / 0 gives 0 (undefined)."""
    q = np.floor_divide(a, b)
    r = np.remainder(a, b)
    fix = (r != 0) & ((a < 0) != (b < 0))
    return q + fix.astype(q.dtype)


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if _is_float(a):
        return np.true_divide(a, b)
    if a.dtype == _BOOL:
        return _bool_arith(_int_div, a, b)
    return _int_div(a, b)


def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.power(_work(a), _work(b)).astype(a.dtype)


def _arith(fn):
    def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.dtype == _BOOL:
            return _bool_arith(fn, a, b)
        return fn(a, b)
    return run


ref_add = _arith(np.add)
ref_sub = _arith(np.subtract)
ref_mul = _arith(np.multiply)
ref_div = _div
ref_pow = _pow
ref_max = np.maximum  # NaN-propagating
ref_min = np.minimum
ref_and = np.logical_and
ref_or = np.logical_or
ref_eq = np.equal
ref_ne = np.not_equal
ref_lt = np.less
ref_le = np.less_equal
ref_gt = np.greater
ref_ge = np.greater_equal
