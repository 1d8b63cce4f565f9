"""The installed package is complete: every swir subpackage is listed in
pyproject.toml, the grammar ships as package data, and swir-opt runs from any
directory."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _listed_packages() -> set[str]:
    text = (ROOT / "pyproject.toml").read_text()
    block = re.search(r"^packages = \[(.*?)\]", text, re.S | re.M)
    assert block, "pyproject.toml lists no packages"
    return set(re.findall(r'"([\w.]+)"', block.group(1)))


def test_every_subpackage_is_listed_in_pyproject():
    found = {"swir." + ".".join(p.parent.relative_to(ROOT / "swir").parts)
             for p in (ROOT / "swir").rglob("__init__.py")}
    found = {f.rstrip(".") for f in found} | {"swir.tools", "swir.grammar"}
    missing = found - _listed_packages()
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {sorted(missing)}"


def test_grammar_is_package_data():
    text = resources.files("swir.grammar").joinpath("swir.lark").read_text()
    assert "start:" in text
    assert text == (ROOT / "grammar" / "swir.lark").read_text()


def _tool(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def test_swir_opt_runs_from_another_directory(tmp_path):
    out = subprocess.run([_tool("swir-opt"), "--help"], cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout
    assert "-dce" in out and "-cse" in out


def test_swir_opt_pipeline_on_bundled_example(tmp_path):
    res = subprocess.run([_tool("swir-opt"), "-dce", "-cse", str(ROOT / "examples" / "mlp.swir")],
                         cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith('module "mlp"\nstage graph\n')
    assert "%debug" not in res.stdout and "%again" not in res.stdout
