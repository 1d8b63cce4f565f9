"""The reference kernels: each graph op's semantics in numpy.

The graph-stage interpreter runs them op by op, and -fold-constants evaluates
constant instructions with them, so a folded value is bit for bit what the
interpreter computes at run time. They sit below both (above the op set only):
a pass that folds needs no interpreter. Each kernel is attached to its op's
definition (the REFERENCE hook, :func:`kernel`); importing this package loads
them all and checks every graph op has one.
"""

from swir.kernels.base import (KERNELS, DataError, Kernel, KernelError,  # noqa: F401
                               dtype_of, evaluate, kernel, kernel_for)
from swir.kernels import nn, tensor, training  # noqa: E402,F401  (each registers its kernels)
from swir.ops.registry import REFERENCE

REFERENCE.check_complete()
