"""Interpreter kernels of the training ops (swir/ops/training.py): losses,
optimiser steps and training-mode batch normalisation, written from PyTorch's
definitions in numpy, independently of the ops' decompositions (which the
tests hold to these). Sums and the whole computation are in f64, rounded once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from swir.kernels.base import DataError, kernel
from swir.ops.training import (ADAM_UPDATE, BATCH_NORM_TRAIN, MSE_LOSS, SGD_UPDATE,
                               SOFTMAX_CROSS_ENTROPY)


def _f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


@kernel(SOFTMAX_CROSS_ENTROPY)
def _softmax_cross_entropy(attrs: dict[str, Any], result_types, logits, labels):
    x = _f64(logits)
    n, c = x.shape
    bad = (labels < 0) | (labels >= c)
    if bad.any():
        row = int(np.argmax(bad))
        raise DataError(f"label {int(labels[row])} of row {row} is not a class in [0, {c})")
    shifted = x - x.max(axis=1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return [np.array(-log_p[np.arange(n), labels.astype(np.int64)].mean())]


@kernel(MSE_LOSS)
def _mse_loss(attrs: dict[str, Any], result_types, pred, target):
    d = _f64(pred) - _f64(target)
    return [np.array(np.mean(d * d))]


@kernel(SGD_UPDATE)
def _sgd_update(attrs: dict[str, Any], result_types, p, g, v=None):
    p, g = _f64(p), _f64(g)
    g = g + float(attrs["weight_decay"]) * p
    if v is None:
        return [p - float(attrs["lr"]) * g]
    v = float(attrs["momentum"]) * _f64(v) + g
    return [p - float(attrs["lr"]) * v, v]


@kernel(ADAM_UPDATE)
def _adam_update(attrs: dict[str, Any], result_types, p, g, m, v, step):
    p, g = _f64(p), _f64(g)
    b1, b2 = float(attrs["beta1"]), float(attrs["beta2"])
    t = float(step)
    g = g + float(attrs["weight_decay"]) * p
    m = b1 * _f64(m) + (1 - b1) * g
    v = b2 * _f64(v) + (1 - b2) * g * g
    m_hat = m / (1 - b1 ** t)
    v_hat = v / (1 - b2 ** t)
    return [p - float(attrs["lr"]) * m_hat / (np.sqrt(v_hat) + float(attrs["epsilon"])), m, v]


@kernel(BATCH_NORM_TRAIN)
def _batch_norm_train(attrs: dict[str, Any], result_types, x, scale, bias, r_mean, r_var):
    x = _f64(x)
    axes = tuple(a for a in range(x.ndim) if a != 1)
    count = x.size // x.shape[1]
    mean = x.mean(axis=axes)
    var = x.var(axis=axes)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + float(attrs["epsilon"]))
    y = y * _f64(scale).reshape(shape) + _f64(bias).reshape(shape)
    mom = float(attrs["momentum"])
    new_mean = (1 - mom) * _f64(r_mean) + mom * mean
    new_var = (1 - mom) * _f64(r_var) + mom * var * count / (count - 1)
    return [y, new_mean, new_var]
