"""The op registry and each stage's op set (see docs/ir.md)."""

# The op set: each module registers its ops in swir.ops.registry when imported.
from swir.ops import collective, common, elementwise, graph, loop  # noqa: F401
