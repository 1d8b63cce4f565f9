"""The build step pyproject.toml cannot state: the IR grammar's LALR tables,
built once when the package is built and shipped inside it
(swir/parse_tables.py says why: nothing executable from a writable place)."""

import importlib.util
import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name: str, path: str):
    """A module of the source tree by its file (swir itself is not importable
    yet: it needs numpy, which the build environment has not)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class BuildWithParseTables(build_py):
    def run(self) -> None:
        super().run()
        tables = _load("_swir_parse_tables", "swir/parse_tables.py")
        lexer = _load("_swir_lexer", "swir/lexer.py")
        with open(os.path.join(HERE, "grammar", "swir.lark"), encoding="utf-8") as f:
            grammar = f.read()
        if not self.dry_run:
            folder = os.path.join(self.build_lib, "swir", "grammar")
            os.makedirs(folder, exist_ok=True)
            tables.write(os.path.join(folder, tables.FILE_NAME), grammar, lexer.SwirLexer)


setup(cmdclass={"build_py": BuildWithParseTables})
