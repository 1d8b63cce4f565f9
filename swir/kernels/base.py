"""Per-op kernels of the graph-stage interpreter, in numpy.

A kernel computes one instruction from its operand arrays; it is attached to
the op's definition (the REFERENCE hook):

    @kernel(MATMUL)
    def _matmul(attrs, result_types, a, b):
        return [np.matmul(a, b)]

``attrs`` is the instruction's attribute dict with the defaults its op definition
declares filled in (``OpDef.with_defaults``), ``result_types`` the declared
result types (shapes already verified by the op's result-type rule). A kernel
returns one array per result; :func:`evaluate` casts each to its result's dtype
and checks its shape. Kernels never mutate their operands.

The same kernels serve constant folding: :func:`evaluate` runs one instruction
on constant operands (a later ``-fold-constants`` pass calls it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from swir.ir.dtypes import dtype_of
from swir.ir.types import ShapedType, Type
from swir.ops.registry import REFERENCE, OpDef, all_ops, lookup

Kernel = Callable[..., list[np.ndarray]]


def kernel(*ops: OpDef) -> Callable[[Kernel], Kernel]:
    """Attach a kernel to one or more op definitions."""
    return REFERENCE.register(*ops)


class KernelError(Exception):
    """A kernel's result does not match the op's declared result (a swir bug)."""


class DataError(Exception):
    """The op cannot compute on these operand values (a data-dependent index
    out of range): an error in the input, not in swir."""


def evaluate(opname: str, attrs: dict[str, Any], result_types: list[Type],
             operands: list[np.ndarray]) -> list[np.ndarray]:
    """Run the kernel of ``opname`` on numpy operands; results have the declared
    dtypes and shapes (scalars are 0-d arrays)."""
    fn = kernel_for(opname)
    if fn is None:
        raise KeyError(f"no interpreter kernel for op '{opname}'")
    attrs = lookup(opname).with_defaults(attrs, tuple(np.ndim(x) for x in operands))
    # inf / nan follow IEEE, as in ONNX runtimes, also when the f64 result is
    # rounded to a narrower type below.
    with np.errstate(all="ignore"):
        outs = fn(attrs, result_types, *operands)
        if len(outs) != len(result_types):
            raise KernelError(f"kernel '{opname}' returned {len(outs)} results, "
                              f"expected {len(result_types)}")
        arrays = [np.asarray(out).astype(dtype_of(t), copy=False)
                  for out, t in zip(outs, result_types)]
    results = []
    for arr, t in zip(arrays, result_types):
        shape = t.shape if isinstance(t, ShapedType) else ()
        if arr.shape != tuple(shape):
            raise KernelError(f"kernel '{opname}' produced shape {arr.shape}, "
                              f"expected {tuple(shape)}")
        results.append(arr)
    return results


def kernel_for(opname: str) -> Kernel | None:
    """The op's kernel: its REFERENCE hook, or one running its definition's numpy
    reference."""
    op = lookup(opname)
    if op is None:
        return None
    fn = REFERENCE.of(op)
    if fn is None and op.numpy is not None:
        fn = _NUMPY_KERNELS.get(op.numpy)
        if fn is None:
            fn = _NUMPY_KERNELS[op.numpy] = _numpy_kernel(op.numpy)
    return fn


_NUMPY_KERNELS: dict[Callable[..., Any], Kernel] = {}


def _numpy_kernel(reference: Callable[..., Any]) -> Kernel:
    def run(attrs, result_types, *operands):
        return [np.asarray(reference(*map(np.asarray, operands)))]
    return run


class _Kernels(Mapping):
    """Every op's kernel by op name (kernel_for), for look-ups and coverage checks."""

    def __getitem__(self, name: str) -> Kernel:
        fn = kernel_for(name)
        if fn is None:
            raise KeyError(name)
        return fn

    def __iter__(self):
        return (op.name for op in all_ops() if kernel_for(op.name) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


KERNELS: Mapping[str, Kernel] = _Kernels()
