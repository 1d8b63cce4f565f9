"""The docs' examples are what the tools print now: every command docs/*.md
shows with its output is run, and its output compared with the block.

An example is marked by an HTML comment starting ``<!-- test_docs_commands``
right before a fenced block; the block holds one or more ``$ COMMAND`` lines,
each followed by what that command prints (stdout and stderr, as a terminal
shows them: one pipe, Python unbuffered). The commands of a block run in
order, from a fresh folder laid out like the repository (examples/, test/,
bench/, scripts/ linked in), with the installed tools first on PATH; each is
split into words as the shell would (shlex) and run without a shell, so no
pipes or redirections. Their exit status is not compared: the output shows
it (an error example prints its error). A fenced block of docs/ that starts
with ``$ `` and has no marker is an error, so no example escapes the test.

Nothing is normalised but trailing blanks: the examples' output has no
timing, and the folder is given as relative paths. Two things of the
environment are fixed instead: PATH leaves out any folder holding sw5cc (the
docs show a machine without the Sunway toolchain, as make -C out prints it
there), and COLUMNS / LINES are unset.

Also: the column table of docs/swir-report.md names every column swir-report
prints, and its JSON section every key --json writes (swir-report --help sends
the reader there)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
BIN = Path(sys.executable).parent
DOCS = sorted((ROOT / "docs").glob("*.md"))
MARKER = "<!-- test_docs_commands"
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)


def examples() -> tuple[list[tuple[str, list[tuple[str, str]]]], list[str]]:
    """Each marked block, as its place (file:line) and its (command, output)
    pairs; and the places of blocks that are marked and do not start with
    ``$ ``, or start with ``$ `` and are not marked."""
    found, wrong = [], []
    for doc in DOCS:
        text = doc.read_text()
        for m in FENCE.finditer(text):
            body = m.group(1)
            before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            place = f"{doc.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}"
            if before.startswith(MARKER) != body.startswith("$ "):
                wrong.append(place)
            if not before.startswith(MARKER) or not body.startswith("$ "):
                continue
            pairs: list[tuple[str, str]] = []
            for line in body.splitlines(keepends=True):
                if line.startswith("$ "):
                    pairs.append((line[2:].strip(), ""))
                else:
                    pairs[-1] = (pairs[-1][0], pairs[-1][1] + line)
            found.append((place, pairs))
    return found, wrong


EXAMPLES, UNMARKED = examples()


def test_the_docs_show_commands_with_their_output():
    """Every command shown with its output is marked, and the finder finds
    what the docs hold (it cannot silently find nothing)."""
    assert UNMARKED == [], f"a '$ ' block without the {MARKER} marker, or the reverse"
    places = {p.split(":")[0] for p, _ in EXAMPLES}
    assert {"docs/swir-report.md", "docs/codegen.md"} <= places, places
    commands = [c for _, pairs in EXAMPLES for c, _ in pairs]
    assert any(c.startswith("swir-report ") for c in commands)
    assert any("--print-pipeline" in c for c in commands)


def environment() -> dict[str, str]:
    """The tools first on PATH, no folder holding sw5cc; no COLUMNS / LINES;
    Python's output unbuffered, so stdout and stderr interleave as on a terminal."""
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not (Path(d) / "sw5cc").exists()]
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return {**env, "PATH": os.pathsep.join([str(BIN), *path]), "PYTHONUNBUFFERED": "1"}


def normalised(text: str) -> str:
    """Trailing blanks go: editors strip them from the docs."""
    return "\n".join(line.rstrip() for line in text.splitlines())


@pytest.mark.parametrize("place, pairs", EXAMPLES, ids=[
    f"{p.split(':')[0]}: {' && '.join(c for c, _ in pairs)}" for p, pairs in EXAMPLES])
def test_a_documented_command_prints_what_the_docs_show(place, pairs, tmp_path):
    for name in ("examples", "test", "bench", "scripts"):
        (tmp_path / name).symlink_to(ROOT / name)
    for command, shown in pairs:
        p = subprocess.run(shlex.split(command), cwd=tmp_path, env=environment(),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=300)
        assert normalised(p.stdout) == normalised(shown), (
            f"{place}: `{command}` now prints (exit status {p.returncode}):\n{p.stdout}")


# -- swir-report's columns and JSON keys, documented -------------------------------------

REPORT_DOC = ROOT / "docs" / "swir-report.md"
PAPER = ROOT / "test" / "Tools" / "swir-report.swir"


def test_the_column_table_names_every_column_swir_report_prints():
    out = subprocess.run([str(BIN / "swir-report"), str(PAPER), "--strategy=greedy"],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    header = next(line for line in out.splitlines() if line.startswith("#  "))
    columns = re.split(r"\s{2,}", header.strip())
    doc = REPORT_DOC.read_text()
    table = doc.split("| column | what", 1)[1].split("\n\n", 1)[0]
    described = [c.strip().strip("`") for row in table.splitlines()[2:]
                 for c in row.split("|")[1].split(",")]
    assert [c for c in columns if c not in described] == [], described


def test_the_json_section_names_every_key(tmp_path):
    subprocess.run([str(BIN / "swir-report"), "-q", str(PAPER), "--strategy=greedy", "--json",
                    str(tmp_path / "c.json")], capture_output=True, check=True, timeout=120)
    report = json.loads((tmp_path / "c.json").read_text())
    section = REPORT_DOC.read_text().split("\n## JSON\n", 1)[1]
    keys = (set(report) | set(report["machine"]) | set(report["kernels"][0])
            | set(report["totals"]))
    assert sorted(k for k in keys if f"`{k}`" not in section) == []
