"""The CPE stack a generated kernel needs, measured from GCC's call graph, and
the LDM reserve that must cover it (swir/codegen/cpe_stack.py; the zoo at
paper size: bench/cpe_stack.py, docs/performance.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from swir.codegen import cpe_stack

BIN = Path(sys.executable).parent
ROOT = Path(__file__).parents[2]

GRAPH = """graph: { title: "layers_slave.c"
node: { title: "a" label: "a\\nlayers_slave.c:1:6\\n100 bytes (static)" }
node: { title: "b" label: "b\\nlayers_slave.c:9:13\\n50 bytes (static)" }
node: { title: "c" label: "c\\nlayers_slave.c:19:13\\n30 bytes (static)" }
node: { title: "d" label: "d\\nlayers_slave.c:29:13\\n200 bytes (static)" }
node: { title: "e" label: "e\\nlayers_slave.c:39:6\\n16 bytes (static)" }
node: { title: "athread_get" label: "athread_get\\nemu/slave.h:29:5" shape : ellipse }
node: { title: "expf" label: "expf\\n<built-in>" shape : ellipse }
edge: { sourcename: "a" targetname: "b" label: "layers_slave.c:2:5" }
edge: { sourcename: "b" targetname: "c" label: "layers_slave.c:10:5" }
edge: { sourcename: "a" targetname: "d" label: "layers_slave.c:3:5" }
edge: { sourcename: "c" targetname: "expf" label: "layers_slave.c:20:5" }
edge: { sourcename: "e" targetname: "athread_get" label: "layers_slave.c:40:5" }
}
"""


def test_the_deepest_chain_adds_the_frames_along_it():
    entries = {e.name: e for e in cpe_stack.entry_stacks(GRAPH)}
    assert set(entries) == {"a", "e"}          # b, c, d are called: not entries
    assert entries["a"].bytes == 300 and entries["a"].chain == ("a", "d")
    assert entries["a"].outside == {"expf"}    # through b -> c, listed, not counted
    assert entries["e"].bytes == 16 and entries["e"].outside == {"athread_get"}


def test_an_unbounded_frame_is_refused():
    graph = GRAPH.replace("16 bytes (static)", "16 bytes (dynamic)")
    with pytest.raises(cpe_stack.StackError, match="e's stack has no bound"):
        cpe_stack.entry_stacks(graph)


def test_recursion_has_no_bound():
    graph = GRAPH + 'edge: { sourcename: "c" targetname: "a" label: "x" }\n'
    with pytest.raises(cpe_stack.StackError, match="recursion through a"):
        cpe_stack.entry_stacks(graph)


def project(tmp_path: Path, *options: str) -> Path:
    out = tmp_path / "p"
    subprocess.run([str(BIN / "swir-cg"), str(ROOT / "examples" / "mlp.swir"), "-o", str(out),
                    "-q", *options], check=True)
    return out


def test_a_known_chain_compiled_by_gcc(tmp_path):
    """GCC's own figures: two frames of at least 1000 and 500 bytes."""
    p = project(tmp_path)
    (p / "layers_slave.c").write_text(
        "__attribute__((noinline)) static int leaf(int i)\n"
        "{ volatile char b[500]; b[i] = 1; return b[0]; }\n"
        "int entry(int i) { volatile char a[1000]; a[i] = (char)leaf(i); return a[1]; }\n")
    (entry,) = cpe_stack.measure(p).entries
    assert entry.chain == ("entry", "leaf") and entry.bytes >= 1500


def test_the_default_reserve_covers_a_generated_project(tmp_path):
    r = cpe_stack.measure(project(tmp_path))
    assert r.reserve == 4096
    assert {e.name for e in r.entries} >= {"matmul_add_relu_0", "softmax_0_group"}
    assert all(e.bytes > 0 for e in r.entries)
    assert set(r.statics) == {"swir_para", "reply"} and r.static_bytes > 0
    assert r.required == r.static_bytes + 2 * r.worst.bytes + 1024
    assert r.covered


def test_a_reserve_too_small_for_the_stack_is_reported(tmp_path):
    r = cpe_stack.measure(project(tmp_path, "--ldm-reserve=512"))
    assert r.reserve == 512 and not r.covered


def test_a_missing_tool_or_an_empty_file_is_one_error(tmp_path):
    p = project(tmp_path)
    with pytest.raises(cpe_stack.StackError, match="no-such-cc is not installed"):
        cpe_stack.measure(p, cc="no-such-cc")
    (p / "layers_slave.c").write_text("static int unused;\n")
    with pytest.raises(cpe_stack.StackError, match="defines no CPE function"):
        cpe_stack.measure(p)
