"""Fixtures shared by the unit tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

# Tests import siblings.py (loading files by path) by name.
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def interpretable_example(tmp_path):
    """A bundled example the interpreters run in seconds: the example itself,
    or for the ResNet (83 million interpreted steps at 32x32) its 8x8 variant
    from the same generator; swir-cg's tests run the full-size one in C
    (test_examples_codegen.py)."""
    def choose(path: Path) -> Path:
        if path.name != "resnet.swir":
            return path
        spec = importlib.util.spec_from_file_location("_make_resnet",
                                                      path.with_name("make_resnet.py"))
        gen = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(gen)
        return gen.write(tmp_path, size=8)[0]
    return choose
