"""bench/plan_quality.py on a small input (CI's smoke run of the plan-quality
benchmark; the paper-size run is in docs/performance.md)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_plan_quality_smoke(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "plan_quality.py"), "--smoke",
                        "--work", str(tmp_path)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    tables = r.stdout.split("\n\n")
    summary = [line for line in tables[0].splitlines() if line.startswith("| resnet18 ")]
    assert len(summary) == 1
    cells = [c.strip() for c in summary[0].strip("|").split("|")]
    kernels = int(cells[1])
    assert kernels >= 10                                   # ResNet-18's convs and its dense layer
    greedy, search = (float(c.split()[0]) for c in cells[2:4])
    assert 0 < search < greedy                             # search is faster in total ...
    worst = float(cells[4].split("/")[2])
    assert worst <= 1.0 + 1e-6                             # ... and on every kernel
    assert cells[-2] == "0"                                # kernels of any kind made slower
    rows = [line for line in r.stdout.splitlines() if re.match(r"\| \w+_\d", line)]
    assert len(rows) == kernels
    for row in rows:                                       # per kernel: greedy / search
        time_cell = row.strip("|").split("|")[4]
        g, s = (float(x.replace(",", "")) for x in time_cell.replace("µs", "").split("/"))
        assert s <= g * (1 + 1e-9), row
