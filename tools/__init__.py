"""The command-line drivers (installed as the ``swir.tools`` package)."""
