"""Numeric facts of ops that the reference kernels (swir.interp) and the
lowering (swir.lowering) share, so both compute the same thing."""

from __future__ import annotations

import numpy as np


def pool_counts(size: int, out: int, k: int, s: int, p0: int, p1: int,
                 include_pad: bool) -> np.ndarray:
    """Per output index along one axis, how many window elements the divisor counts:
    those inside the input, or (``include_pad``) inside the padded input. Elements a
    ceil-mode window has past the end padding never count."""
    start = np.arange(out) * s - p0
    lo, hi = (-p0, size + p1) if include_pad else (0, size)
    return np.minimum(start + k, hi) - np.maximum(start, lo)
