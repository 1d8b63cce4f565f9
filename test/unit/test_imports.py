"""The import structure of the installed package (docs/architecture.md, "Layers"):

- every module imports first, in a fresh interpreter: no import cycle that only
  an earlier import happens to break (``python -c "import swir.ops.registry"``
  used to fail);
- no module imports another module's private (``_name``) name;
- no import cycle between modules, counting imports inside functions.

The layer order itself is import-linter's contract (pyproject.toml,
``[tool.importlinter]``), which scripts/test checks on the source tree with
``lint-imports`` before pytest runs.
"""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import swir
import swir.tools

# One process loads the third-party packages swir imports at its top level,
# then forks a child per module: each child imports its module first, with no
# swir module loaded, exactly as a new interpreter would (fork shares numpy's
# import cost instead of paying it per module).
PROBE = """
import importlib, os, sys, traceback
import lark, numpy, tqdm  # noqa: F401
assert not any(m == "swir" or m.startswith("swir.") for m in sys.modules)
failed = 0
for name in sys.argv[1:]:
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(name)
        except BaseException:
            print(name + ": " + traceback.format_exc().strip().splitlines()[-1], flush=True)
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    failed += status != 0
sys.exit(1 if failed else 0)
"""


def modules() -> list[str]:
    # swir.tools is listed on its own: a source checkout keeps it in tools/
    names = {m.name for pkg in (swir, swir.tools)
             for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")}
    return sorted(names | {"swir", "swir.tools"})


def test_every_module_imports_first(tmp_path):
    names = modules()
    assert "swir.ops.registry" in names and "swir.tools.driver" in names
    # (run from an empty folder: `python -c` puts the working directory first
    # on sys.path, and the checkout's swir/ would shadow the installed package)
    p = subprocess.run([sys.executable, "-c", PROBE, *names], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip() == "", p.stdout


def test_the_registry_imports_in_a_new_interpreter(tmp_path):
    subprocess.run([sys.executable, "-c", "import swir.ops.registry"], check=True, timeout=60,
                   cwd=tmp_path)


# -- the source of every module -------------------------------------------------------

def sources() -> dict[str, Path]:
    """Every module of the installed package: its name and its file."""
    out = {}
    for pkg in (swir, swir.tools):
        root = Path(pkg.__path__[0])
        for path in root.rglob("*.py"):
            rel = path.relative_to(root).with_suffix("").parts
            parts = rel[:-1] if rel[-1] == "__init__" else rel
            out[".".join((pkg.__name__, *parts))] = path
    return out


SOURCES = sources()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _run_time_nodes(tree: ast.AST):
    """Every node of the module except those under ``if TYPE_CHECKING:`` (imports
    there never run), at any depth: imports inside functions count."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                todo.extend(child.orelse)
            else:
                todo.append(child)


def _imported_module(module: str, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` reads from, relative imports resolved."""
    if not node.level:
        return node.module or ""
    is_package = SOURCES[module].name == "__init__.py"
    base = module.split(".")[:len(module.split(".")) - node.level + is_package]
    return ".".join(base + ([node.module] if node.module else []))


def _owner(name: str) -> str | None:
    """The swir module that ``name`` (a module or a module's attribute) is in."""
    while name and name not in SOURCES:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str) -> list[tuple[str, str | None, int]]:
    """(module imported, private name imported from it or None, line) for every
    run-time import of a swir module in ``module``'s source."""
    tree = ast.parse(SOURCES[module].read_text(), str(SOURCES[module]))
    out: list[tuple[str, str | None, int]] = []
    for node in _run_time_nodes(tree):
        if isinstance(node, ast.Import):
            out += [(t, None, node.lineno) for a in node.names if (t := _owner(a.name))]
        elif isinstance(node, ast.ImportFrom):
            base = _imported_module(module, node)
            for a in node.names:
                full = f"{base}.{a.name}"
                target = full if full in SOURCES else _owner(base)
                if target is None:
                    continue
                private = a.name.startswith("_") and not a.name.startswith("__") \
                    and full not in SOURCES
                out.append((target, a.name if private else None, node.lineno))
    return out


def _module_aliases(module: str, tree: ast.AST) -> dict[str, str]:
    """Local names bound to swir modules by imports (``from swir import kernels``)."""
    out = {}
    for node in _run_time_nodes(tree):
        if isinstance(node, ast.ImportFrom):
            base = _imported_module(module, node)
            for a in node.names:
                if f"{base}.{a.name}" in SOURCES:
                    out[a.asname or a.name] = f"{base}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and a.name in SOURCES:
                    out[a.asname] = a.name
    return out


def private_uses(module: str) -> list[str]:
    """Private names of other modules ``module`` imports or reads (``m._name``)."""
    found = [f"{module}:{line} imports {name} from {target}"
             for target, name, line in imports(module) if name and target != module]
    tree = ast.parse(SOURCES[module].read_text(), str(SOURCES[module]))
    aliases = _module_aliases(module, tree)
    for node in _run_time_nodes(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in aliases and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            found.append(f"{module}:{node.lineno} reads {aliases[node.value.id]}.{node.attr}")
    return found


def test_no_module_imports_another_modules_private_name():
    assert "swir.tools.swir_opt" in SOURCES and "swir.ir.core" in SOURCES
    found = [use for m in sorted(SOURCES) for use in private_uses(m)]
    assert not found, "\n".join(found)


def test_the_private_name_check_sees_imports_inside_functions(tmp_path):
    source = "def f():\n    from swir.interp.loop import _x\n    return _x\n"
    SOURCES["swir.probe_module"] = tmp_path / "probe_module.py"
    try:
        SOURCES["swir.probe_module"].write_text(source)
        assert private_uses("swir.probe_module") == [
            "swir.probe_module:2 imports _x from swir.interp.loop"]
    finally:
        del SOURCES["swir.probe_module"]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles_between_modules():
    graph = {m: {t for t, _, _ in imports(m) if t != m} for m in SOURCES}
    assert cycles(graph) == []
