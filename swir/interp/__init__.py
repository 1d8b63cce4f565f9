"""The reference interpreter: executes IR on numpy arrays. Every later stage is
checked against what the graph-stage interpreter computes."""

# The kernels: each module attaches its kernels to the op definitions
# (swir.ops.registry.REFERENCE) when imported, so importing any part of the
# interpreter loads them all, and checks that every op that needs one has one.
from swir.interp import kernels_nn, kernels_tensor  # noqa: E402,F401
from swir.ops.registry import REFERENCE

REFERENCE.check_complete()
