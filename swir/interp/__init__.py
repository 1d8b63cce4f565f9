"""The reference interpreter: executes IR on numpy arrays. Every later stage is
checked against what the graph-stage interpreter computes."""

import swir.kernels  # noqa: F401  (the graph ops' kernels, checked complete)
