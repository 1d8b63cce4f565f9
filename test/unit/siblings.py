"""Python files loaded by path: sibling test modules (pytest imports tests by
path, in importlib mode, not by name) and the generators under bench/ and
examples/. Each file is loaded once and shared (cached in sys.modules)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load(path: Path) -> ModuleType:
    path = Path(path).resolve()
    name = "_swir_" + "_".join(path.relative_to(ROOT).with_suffix("").parts)
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module   # dataclasses look their module up while it loads
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def sibling(name: str) -> ModuleType:
    """The test module test/unit/NAME.py."""
    return load(Path(__file__).with_name(f"{name}.py"))


def zoo() -> ModuleType:
    """bench/models/zoo.py, the benchmark model zoo."""
    return load(ROOT / "bench" / "models" / "zoo.py")
