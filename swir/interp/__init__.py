"""The reference interpreter: executes IR on numpy arrays. Every later stage is
checked against what the graph-stage interpreter computes."""

# The kernels: each module registers its kernels in swir.interp.kernels.KERNELS
# when imported, so importing any part of the interpreter loads them all.
from swir.interp import kernels_nn, kernels_tensor  # noqa: E402,F401
