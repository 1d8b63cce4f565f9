"""swir: a compiler toolkit that lowers deep-learning models to C for the Sunway SW26010.

The package is laid out as the compiler is: ``ir`` (types, values, instructions,
blocks, modules, builder), ``ops`` (the op registry and each stage's op set),
``parser`` / ``printer`` for the textual IR, ``verifier``, ``passes`` grouped by
stage, and ``tools`` (the command-line drivers, kept in the top-level
``tools/`` folder of the source tree).
"""

__version__ = "0.1.0"
