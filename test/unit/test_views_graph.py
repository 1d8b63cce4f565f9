"""-view-graph (swir/passes/graph/view_graph.py, swir/views/graph.py): the
DOT it writes renders with Graphviz, its labels survive any name, and its
file output is all or nothing, never onto a directory, FIFO or device.

Rendering needs Graphviz's `dot`. scripts/test installs it and sets
SWIR_REQUIRE_GRAPHVIZ, which turns the skip where `dot` is missing into a
failure (as SWIR_REQUIRE_MPI does for MPI)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from swir.parser import parse_module
from swir.views.graph import graph_dot, quote

BIN = Path(sys.executable).parent
ROOT = Path(__file__).parents[2]
MLP = ROOT / "examples" / "mlp.swir"
# Where Graphviz is required (scripts/test), the checks that read DOT back
# with `dot` run, and fail if it is missing, rather than being left out.
HAVE_DOT = shutil.which("dot") is not None or bool(os.environ.get("SWIR_REQUIRE_GRAPHVIZ"))
needs_dot = pytest.mark.skipif(not HAVE_DOT and not os.environ.get("SWIR_REQUIRE_GRAPHVIZ"),
                               reason="no Graphviz `dot` on PATH (apt install graphviz)")
SVG = "{http://www.w3.org/2000/svg}"


def swir_opt(*argv: str | Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "swir-opt"), *map(str, argv)], capture_output=True,
                          text=True, timeout=300, env=env)


@needs_dot
def test_renders_svg_of_fused_mlp(tmp_path: Path) -> None:
    out = tmp_path / "mlp.svg"
    p = swir_opt("-O3", f"-view-graph{{file={out}}}", MLP)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith('module "mlp"')         # the module passes through
    root = ET.parse(out).getroot()
    assert root.tag == SVG + "svg"
    texts = [t.text for t in root.iter(SVG + "text")]
    assert "fused %h2" in texts and "matmul" in texts and "@w1" in texts
    # one cluster per fused group, drawn as a group titled cluster_N
    titles = [t.text for t in root.iter(SVG + "title")]
    assert sum(1 for t in titles if t and t.startswith("cluster_")) == 3


@needs_dot
def test_renders_png(tmp_path: Path) -> None:
    out = tmp_path / "mlp.png"
    p = swir_opt(f"-view-graph{{file={out}}}", MLP)
    assert p.returncode == 0, p.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_graphviz_writes_dot_and_says_how_to_render(tmp_path: Path) -> None:
    out = tmp_path / "g.svg"
    p = swir_opt(f"-view-graph{{file={out}}}", MLP, env={"PATH": str(BIN)})
    assert p.returncode == 0, p.stderr
    assert not out.exists()
    dot = tmp_path / "g.dot"
    assert p.stderr == ("-view-graph: install Graphviz (apt install graphviz) to render; "
                        f"DOT written to {dot}\n")
    assert dot.read_text().startswith('digraph "mlp" {')


def test_labels_are_escaped() -> None:
    assert quote('a"b\\c{d}|<e>\nf\tg') == '"a\\"b\\\\c{d}|<e>\\nf g"'
    text = 'module "we\\\\ird \\"q\\" {x}"\nstage graph\n' \
           "func @main(%x: <4 x f32>) -> <4 x f32> {\n'entry:\n" \
           "  %r = relu %x : <4 x f32>\n  return %r\n}\n"
    m = parse_module(text, "t.swir")
    dot = graph_dot(m, m.functions)
    assert dot.startswith('digraph "we\\\\ird \\"q\\" {x}" {')
    if HAVE_DOT:    # Graphviz reads it back with the name intact
        svg = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True,
                             check=True, timeout=60).stdout
        root = ET.fromstring(svg)
        assert any(t.text == 'module we\\ird "q" {x}: @main (graph stage)'
                   for t in root.iter(SVG + "text"))


def test_output_is_deterministic() -> None:
    a = swir_opt("-O3", "-view-graph", MLP)
    b = swir_opt("-O3", "-view-graph", MLP)
    assert a.returncode == 0 and a.stderr == b.stderr and a.stderr.count(" -> ") == 14


def decoys(tmp: Path) -> dict[str, Path]:
    """A FIFO, a directory and symlinks to each, in the test's own folder."""
    fifo, folder = tmp / "fifo.dot", tmp / "folder.dot"
    os.mkfifo(fifo)
    folder.mkdir()
    links = {"link-to-fifo": tmp / "lf.dot", "link-to-folder": tmp / "ld.svg"}
    links["link-to-fifo"].symlink_to(fifo)
    links["link-to-folder"].symlink_to(folder)
    return {"fifo": fifo, "folder": folder, **links}


@pytest.mark.parametrize("kind", ["fifo", "folder", "link-to-fifo", "link-to-folder"])
def test_refuses_what_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    path = decoys(tmp_path)[kind]
    before = sorted(os.listdir(tmp_path))
    p = swir_opt(f"-view-graph{{file={path}}}", MLP)
    assert p.returncode == 1 and p.stdout == ""
    why = "it is a directory" if "folder" in kind else "it is not a regular file"
    assert f"error: -view-graph: cannot write '{path}': {why}" in p.stderr
    assert "Traceback" not in p.stderr
    assert sorted(os.listdir(tmp_path)) == before       # no temporary file left


def test_symlink_to_a_file_replaces_the_file(tmp_path: Path) -> None:
    target, link = tmp_path / "real.dot", tmp_path / "link.dot"
    target.write_text("old")
    link.symlink_to(target)
    p = swir_opt(f"-view-graph{{file={link}}}", MLP)
    assert p.returncode == 0, p.stderr
    assert link.is_symlink() and target.read_text().startswith("digraph")


@needs_dot
def test_a_failed_render_leaves_the_old_picture(tmp_path: Path) -> None:
    """dot failing (here a stand-in that exits 1) is an error; the file
    already there is kept whole, no temporary file is left."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "dot").write_text("#!/bin/sh\necho 'Error: syntax error in line 1' >&2\nexit 1\n")
    (fake / "dot").chmod(0o755)
    out = tmp_path / "g.svg"
    out.write_text("<svg>old</svg>")
    p = swir_opt(f"-view-graph{{file={out}}}", MLP, env={"PATH": f"{fake}:{BIN}"})
    assert p.returncode == 1
    assert "error: -view-graph: Graphviz's dot failed: Error: syntax error in line 1" \
        in p.stderr
    assert out.read_text() == "<svg>old</svg>"
    assert sorted(os.listdir(tmp_path)) == ["bin", "g.svg"]


def test_several_functions_are_clusters_of_their_own() -> None:
    text = "module \"two\"\nstage graph\n" \
           "func @f(%x: <4 x f32>) -> <4 x f32> {\n'entry:\n  %r = relu %x : <4 x f32>\n" \
           "  return %r\n}\n" \
           "func @main(%x: <4 x f32>) -> <4 x f32> {\n'entry:\n" \
           "  %y = call @f(%x) : <4 x f32>\n  return %y\n}\n"
    m = parse_module(text, "t.swir")
    dot = graph_dot(m, m.functions)
    assert 'subgraph cluster_0 {\n    label="@f"' in dot
    assert 'subgraph cluster_1 {\n    label="@main"' in dot
    assert dot.count("->") == 4       # x -> relu -> result, x -> call -> result
    if HAVE_DOT:
        subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True,
                       check=True, timeout=60)
