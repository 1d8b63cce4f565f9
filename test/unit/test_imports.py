"""Every module of the installed package imports first, in a fresh
interpreter: no import cycle that only an earlier import happens to break
(``python -c "import swir.ops.registry"`` used to fail)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import swir
import swir.tools

# One process for all modules; before each import every swir module is
# forgotten, so each is imported as the first, exactly as in a new
# interpreter (numpy, lark and the standard library may stay loaded).
PROBE = """
import importlib, sys, traceback
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "swir" or m.startswith("swir.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception:
        failed.append(name + ": " + traceback.format_exc().strip().splitlines()[-1])
print("\\n".join(failed))
"""


def modules() -> list[str]:
    # swir.tools is listed on its own: a source checkout keeps it in tools/
    names = {m.name for pkg in (swir, swir.tools)
             for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")}
    return sorted(names | {"swir.tools"})


def test_every_module_imports_first(tmp_path):
    names = modules()
    assert "swir.ops.registry" in names and "swir.tools.driver" in names
    # (run from an empty folder: `python -c` puts the working directory first
    # on sys.path, and the checkout's swir/ would shadow the installed package)
    p = subprocess.run([sys.executable, "-c", PROBE, *names], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "", p.stdout


def test_the_registry_imports_in_a_new_interpreter(tmp_path):
    subprocess.run([sys.executable, "-c", "import swir.ops.registry"], check=True, timeout=60,
                   cwd=tmp_path)
