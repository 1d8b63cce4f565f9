"""What the benchmark scripts share. They run as ``python bench/NAME.py``,
so this directory is on sys.path and ``from common import load_zoo`` works."""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time
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


def zoo_models(doc: str, argv: list[str] | None):
    """The zoo, and the models a per-model bench was asked for on its command
    line (default: all eight); ``doc``'s first line is its description."""
    zoo = load_zoo()
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("models", nargs="*", default=sorted(zoo.PAPER_SIZES))
    return zoo, p.parse_args(argv).models


def timed(cmd: list[str]) -> float:
    """Wall time of a command; RuntimeError with its stderr's end if it fails."""
    start = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:2])} failed:\n{r.stderr[-2000:]}")
    return time.perf_counter() - start


def print_rows(rows: dict[str, dict[str, str]]) -> None:
    """A Markdown table: a row per model (the keys), a column per figure
    (the first row's keys, in order)."""
    cols = list(next(iter(rows.values())))
    print("| model | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for name, row in rows.items():
        print(f"| {name} | " + " | ".join(row[c] for c in cols) + " |")
