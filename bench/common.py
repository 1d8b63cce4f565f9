"""What the benchmark scripts share. They run as ``python bench/NAME.py``,
so this directory is on sys.path and ``from common import load_zoo`` works."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def load_zoo():
    """bench/models/zoo.py, the eight swTVM models, as a module (registered in
    sys.modules so its dataclasses work)."""
    spec = importlib.util.spec_from_file_location("_swir_bench_zoo", HERE / "models" / "zoo.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod
