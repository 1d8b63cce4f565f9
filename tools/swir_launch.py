"""The tools' entry points (pyproject.toml's [project.scripts]), installed as
the top-level module ``swir_launch``: importing it imports nothing of swir.

A tool spends its first 0.2 s importing swir (numpy, the op set). A Ctrl-C
or SIGTERM then used to end it with a Python traceback; here it ends the
tool as one during its work does: ``TOOL: interrupted``, exit 130
(``terminated``, 143), nothing written. run_tool takes over the signals
once the tool runs (docs/reliability.md)."""

import os
import signal
from importlib import import_module


def _launch(prog: str, module: str) -> None:
    def stop(signum, frame) -> None:
        word = "interrupted" if signum == signal.SIGINT else "terminated"
        os.write(2, f"{prog}: {word}\n".encode())
        os._exit(128 + signum)

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, stop)
    import_module(f"swir.tools.{module}").entry()


def swir_opt() -> None:
    _launch("swir-opt", "swir_opt")


def swir_run() -> None:
    _launch("swir-run", "swir_run")


def swir_cg() -> None:
    _launch("swir-cg", "swir_cg")


def swir_import() -> None:
    _launch("swir-import", "swir_import")


def swir_report() -> None:
    _launch("swir-report", "swir_report")
