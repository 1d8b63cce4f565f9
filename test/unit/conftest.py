"""Fixtures shared by the unit tests."""

from __future__ import annotations

import atexit
import functools
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis.configuration import set_hypothesis_home_dir

from swir.codegen import emulate

# Tests import siblings.py (loading files by path) and the helper modules by name.
sys.path.insert(0, str(Path(__file__).parent))
import prebuilt_runtime  # noqa: E402  (found through the line above)

# Every project the tests build (swir.codegen.emulate.build, and the tests that
# run make themselves through emulate.sunway_check) is also compiled as the
# Sunway build would compile it, by test/sunway/sw5cc, a stand-in for sw5cc
# that checks the Makefile's flags and compiles each source pedantically in
# the stated dialect (docs/codegen.md, "The Sunway dialect check"). Set
# SWIR_SW5CC_CHECK to another stand-in, or to nothing to skip the check.
SW5CC_CHECK = Path(__file__).parents[1] / "sunway" / "sw5cc"
os.environ.setdefault("SWIR_SW5CC_CHECK", str(SW5CC_CHECK))
# SW26010-Pro projects: test/sunway/swgcc, the stand-in for its swgcc.
os.environ.setdefault("SWIR_SWGCC_CHECK", str(SW5CC_CHECK.with_name("swgcc")))

# The emulation's runtime is compiled once per set of flags in this process, not
# once per program (prebuilt_runtime.py); the objects go to a temporary folder.
RUNTIME_CACHE = Path(tempfile.mkdtemp(prefix="swir-emu-runtime-"))
atexit.register(shutil.rmtree, RUNTIME_CACHE, ignore_errors=True)
emulate.make_variables = functools.partial(prebuilt_runtime.make_variables, RUNTIME_CACHE)

# Hypothesis keeps its example database and caches in a folder of its own,
# .hypothesis/ in the working directory by default: a temporary one instead,
# so that the tests write nothing into the source tree.
HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="swir-hypothesis-")
set_hypothesis_home_dir(HYPOTHESIS_HOME)
atexit.register(shutil.rmtree, HYPOTHESIS_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def compile_cache_dir(tmp_path_factory):
    """One compile cache (swir/cache.py) for the end-to-end tests of a run, used
    through helpers.compile_cache: a loop nest planned by one of their compiles
    is not searched again by another (with pytest-xdist, one per worker)."""
    return tmp_path_factory.mktemp("compile-cache")


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


@pytest.fixture(autouse=True)
def _fresh_search_decisions(monkeypatch):
    """Each test starts with no -ldm-plan search decisions remembered from
    earlier tests in the process (ldm_plan._DECISIONS): a test that patches
    the search's insides (test_pass_bugs) must see the search run."""
    from swir import parallel
    from swir.passes.buffered import ldm_plan
    monkeypatch.setattr(ldm_plan, "_DECISIONS", {})
    monkeypatch.setattr(parallel, "_MEMOS", {})     # the dependence answers, ...
