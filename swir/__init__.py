"""swir: a compiler toolkit that lowers deep-learning models to C for the Sunway SW26010.

The package is laid out as the compiler is: ``ir`` (types, values, instructions,
blocks, modules, builder), ``ops`` (the op registry and each stage's op set),
``parser`` / ``printer`` for the textual IR, ``verifier``, ``passes`` grouped by
stage, ``api`` (the tools' jobs as Python functions, re-exported here:
``swir.import_model``, ``optimize``, ``run``, ``report``, ``compile``;
docs/api.md) and ``tools`` (the command-line drivers over it, kept in the
top-level ``tools/`` folder of the source tree).
"""

__version__ = "0.1.0"

# The IR core reads op definitions through a lookup the op set installs (the
# core sits below the ops): importing any part of swir loads the op set.
import swir.ops  # noqa: E402,F401


# The Python API (swir/api: docs/api.md), imported when first used, so that
# ``import swir`` stays as light as a tool's start-up needs.
_API = ("SwirError", "Report", "parse", "load", "to_text", "import_model", "optimize", "compile",
        "run", "report")


def __getattr__(name: str):
    if name in _API:
        import swir.api
        return getattr(swir.api, name)
    raise AttributeError(f"module 'swir' has no attribute '{name}'")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
