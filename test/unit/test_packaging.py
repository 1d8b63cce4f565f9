"""The installed package is complete: every swir subpackage is listed in
pyproject.toml, the grammar ships as package data, and swir-opt runs from any
directory."""

from __future__ import annotations

import os
import re
import shutil
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


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if "__pycache__" not in p.parts}


def test_lit_writes_nothing_into_the_source_tree(tmp_path):
    """lit's temporary files (%t) go to a temporary folder, not test/Output."""
    before = _tree(ROOT / "test")
    lit = Path(sys.executable).parent / "lit"
    env = {**os.environ, "PATH": f"{lit.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("SWIR_LIT_OUTPUT", None)
    p = subprocess.run([str(lit), "-q", str(ROOT / "test" / "Parser" / "byte-order-mark.swir")],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert _tree(ROOT / "test") == before
    assert not (ROOT / "test" / "Output").exists()


def test_hypothesis_keeps_its_files_out_of_the_source_tree():
    """Hypothesis's home (its caches) and example database are outside the
    checkout. Under CI (the environment variable CI set) Hypothesis loads its
    "ci" profile, which keeps no database: then only the home is checked."""
    from hypothesis import settings
    from hypothesis.configuration import storage_directory
    folders = [Path(storage_directory(intent_to_write=False).path).resolve()]
    database = settings.default.database
    if database is not None:
        folders.append(Path(database.path).resolve())
    for folder in folders:
        assert folder != ROOT.resolve() and ROOT.resolve() not in folder.parents, folder


# setuptools's deprecation and configuration warnings (a license table, package
# data in a folder that is not a listed package, ...).
BUILD_WARNING = re.compile(r"Warning|deprecated|absent from the `packages` configuration|!!",
                           re.I)


def test_the_package_builds_without_warnings(tmp_path):
    """`pip install .` builds this wheel: nothing in its build log is a
    setuptools warning (lines about this machine's pip configuration and
    byte-compiling switched off are not the package's). Built from a copy:
    setuptools writes build/ and *.egg-info/ beside the sources."""
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__", "out"))
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w",
                        str(tmp_path / "wheel"), str(src)], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    noise = ("byte-compiling is disabled", "is ignored: it is neither a file nor a directory")
    warnings = [line for line in (p.stdout + p.stderr).splitlines()
                if BUILD_WARNING.search(line) and not any(n in line for n in noise)]
    assert warnings == [], "\n".join(warnings)
    _check_shipped_tables(next((tmp_path / "wheel").glob("swir-*.whl")))


def _check_shipped_tables(wheel: Path) -> None:
    """The wheel ships the grammar's parse tables, built from this grammar
    (swir/parse_tables.py; setup.py's build step)."""
    import json
    import zipfile

    from swir import parse_tables
    with zipfile.ZipFile(wheel) as z:
        entry = json.loads(z.read(f"swir/grammar/{parse_tables.FILE_NAME}"))
    grammar = (ROOT / "grammar" / "swir.lark").read_text()
    assert entry["fingerprint"]["grammar"] == parse_tables.fingerprint(grammar)["grammar"]


def test_an_installed_swir_parses_with_its_shipped_tables():
    """Installed as users install it (not from the source tree), the parser's
    tables are the package's own and match its grammar and Lark: no tool
    builds them at start-up."""
    from swir import parse_tables, parser
    folder = parser._grammar_folder()
    assert folder is not None
    if folder.resolve() == (ROOT / "grammar").resolve():
        return          # an editable install of the source tree: tables built in memory
    tables = parse_tables._read(folder / parse_tables.FILE_NAME, parser.grammar_text())
    assert tables is not None, f"no usable {parse_tables.FILE_NAME} in {folder}"


def test_every_package_of_the_source_tree_is_installed():
    """A package folder missing from pyproject's list is left out of the wheel
    (swir.verifier once was: every tool failed to import, installed)."""
    import tomllib
    root = Path(__file__).resolve().parents[2]
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())
                 ["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(root).parts)
             for p in (root / "swir").rglob("__init__.py")}
    assert found - listed == set()
