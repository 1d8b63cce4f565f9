#!/usr/bin/env python3
"""Where the test suite's CPU goes: a pytest plugin and its report.

pytest's ``--durations`` gives wall time, which on a loaded 2-core machine says
as much about the other jobs as about the test. This plugin records, per test,
the CPU time of the worker process and of every child it waited for (make, cc,
the tools, mpirun), which depends much less on the load. Threads of a test (the
zoo's compile pool) count in their process.

    PYTHONPATH=bench pytest -p suite_cpu -n 2 --dist loadfile test   # records
    python bench/suite_cpu.py                                        # per file

Records go to $SWIR_SUITE_CPU (default /tmp/swir-suite-cpu), one JSON line per
test and worker; remove the folder before a new run.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import time
from pathlib import Path

OUT = Path(os.environ.get("SWIR_SUITE_CPU", "/tmp/swir-suite-cpu"))


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _record_file():
    OUT.mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    return open(OUT / f"{worker}.jsonl", "a", encoding="utf-8")


try:
    import pytest
except ImportError:         # the report needs no pytest
    pytest = None

if pytest is not None:
    _records = None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        global _records
        if _records is None:
            _records = _record_file()
        cpu, wall = _cpu_seconds(), time.monotonic()
        yield
        _records.write(json.dumps([item.nodeid, _cpu_seconds() - cpu,
                                   time.monotonic() - wall]) + "\n")
        _records.flush()


def per_file(folder: Path) -> tuple[dict[str, list[float]], float, float]:
    """{test file: [CPU s, wall s, tests]}, and the CPU and wall totals."""
    files: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            nodeid, cpu, wall = json.loads(line)
            row = files[nodeid.split("::")[0]]
            row[0] += cpu
            row[1] += wall
            row[2] += 1
    return files, sum(r[0] for r in files.values()), sum(r[1] for r in files.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", nargs="?", type=Path, default=OUT)
    ap.add_argument("--top", type=int, default=25, help="files to list (default 25)")
    args = ap.parse_args()
    files, cpu, wall = per_file(args.folder)
    if not files:
        print(f"suite_cpu: no records in {args.folder}")
        return 1
    print(f"| test file | CPU s | share | wall s | tests |\n|---|---:|---:|---:|---:|")
    for name, (c, w, n) in sorted(files.items(), key=lambda kv: -kv[1][0])[:args.top]:
        print(f"| {name} | {c:.0f} | {100 * c / cpu:.1f}% | {w:.0f} | {n} |")
    tests = sum(r[2] for r in files.values())
    print(f"| all {len(files)} files | {cpu:.0f} | 100% | {wall:.0f} | {tests} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
