"""The target description (swir/target.py) is the only place that writes the
machine's figures down, and --target plans, interprets and models for the
SW26010-Pro.

The scan: in swir/ and tools/, no literal 65536 / 64 * 1024 or the clocks and
bandwidths, no range (0, 63) of CPE ids, and no name about CPEs (or busy
CPEs), small transfers, blocks or alignment set to, defaulting to or compared
with the SW26010's figure (64 CPEs, 256 bytes, 32 bytes, the 64-byte
main-memory alignment); in the C
runtime and the C templates, no #define of the target's constants to a
number. The scan is shown to catch each kind on planted text, and to catch
what e745b55 had (the commit before the target description) on its text.
And no module but swir/target.py reads DEFAULT_TARGET when it is imported
(into a constant, a class attribute or a parameter default): the target is
handed down, or read when the code runs; and no pass asks for the default
target but as a public function's default (the pass manager hands every pass
its context's target).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import swir
from swir.costmodel.cost import Machine, cost_report
from swir.codegen.project import TARGET_HEADER
from swir.parser import parse_module
from swir.target import DEFAULT_TARGET, SW26010, SW26010_PRO, TARGETS, target_named
from swir.verifier import module_attr_ldm

PACKAGE = Path(swir.__file__).parent
TOOLS = PACKAGE / "tools"
EXAMPLES = Path(__file__).parents[2] / "examples"
BIN = Path(sys.executable).parent

FIGURES = {"65536", "64 * 1024", "1.45e9", "34.1e9", "2.25e9", "51.2e9", "262144"}
NAMED = [(re.compile(r"cpe|busy", re.I), 64), (re.compile(r"small|transfer", re.I), 256),
         (re.compile(r"block|align", re.I), 32), (re.compile(r"align", re.I), 64)]
C_DEFINE = re.compile(r"#define SWIR_(CPES|LDM_BYTES|LDM_RESERVE|WRITE_BLOCK|SMALL_TRANSFER"
                      r"|FAULT_SLOTS) \d|-cgsp \d")


def _name(t: ast.AST) -> str:
    return t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else ""


def _assigned(node: ast.AST) -> list[tuple[str, ast.AST]]:
    """(name, value) pairs a node binds: assignments, keywords."""
    if isinstance(node, ast.Assign):
        return [(_name(t), node.value) for t in node.targets]
    if isinstance(node, ast.AnnAssign) and node.value is not None:
        return [(_name(node.target), node.value)]
    if isinstance(node, ast.keyword):
        return [(node.arg or "", node.value)]
    if isinstance(node, ast.arguments):     # parameter defaults: def f(cpes: int = 64)
        positional = node.posonlyargs + node.args
        pairs = list(zip(positional[len(positional) - len(node.defaults):], node.defaults))
        pairs += [(a, d) for a, d in zip(node.kwonlyargs, node.kw_defaults) if d is not None]
        return [(a.arg, d) for a, d in pairs]
    if isinstance(node, ast.Compare):       # comparisons: cpes == 64, 64 > busy
        sides = [node.left, *node.comparators]
        return [(_name(a) or _name(b), b if _name(a) else a)
                for a, b in zip(sides, sides[1:]) if _name(a) or _name(b)]
    return []


def _one_line_segment(lines: list[bytes], node: ast.AST) -> str:
    """ast.get_source_segment's text of a node on one line ("" for a node over
    several lines, which no figure is). get_source_segment splits the whole
    source at every call: over swir/ that made this test 800 s (issue 42)."""
    if node.end_lineno != node.lineno:
        return ""
    return lines[node.lineno - 1][node.col_offset:node.end_col_offset].decode()


def _ids_range(node: ast.Tuple) -> bool:
    """(0, 63): the range of the SW26010's CPE ids, the last one its CPEs less one."""
    return [e.value if isinstance(e, ast.Constant) else None for e in node.elts] == [0, 63]


def stray_figures(source: str, where: str) -> list[str]:
    """The target figures written in Python ``source``."""
    out = []
    lines = [line.encode() for line in re.split(r"\r\n|\r|\n", source)]   # as the parser counts
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Constant, ast.BinOp)):
            text = _one_line_segment(lines, node)
            if text in FIGURES:
                out.append(f"{where}:{node.lineno}: {text}")
        if isinstance(node, ast.Tuple) and _ids_range(node):     # return 0, 63
            out.append(f"{where}:{node.lineno}: the CPE ids (0, 63)")
        for name, value in _assigned(node):
            if isinstance(value, ast.Call) and value.args:   # option(64, ...)
                value = value.args[0]
            if isinstance(value, ast.Constant) and type(value.value) is int:
                out += [f"{where}:{value.lineno}: {name} = {value.value}"
                        for rx, figure in NAMED if rx.search(name) and value.value == figure]
    return out + [f"{where}: {m.group(0)}" for m in C_DEFINE.finditer(source)]


def stray_c(source: str, where: str) -> list[str]:
    return [f"{where}: {m.group(0)}" for m in C_DEFINE.finditer(source)] + \
        [f"{where}: 65536" for _ in re.finditer(r"\bSWIR_\w+ 65536\b", source)]


def test_no_target_figure_outside_the_target_description():
    found = []
    for root in (PACKAGE, TOOLS):
        for p in sorted(root.rglob("*.py")):
            if p.name != "target.py":
                found += stray_figures(p.read_text(encoding="utf-8"), str(p))
    for p in sorted((PACKAGE / "codegen").rglob("*")):
        if p.suffix in (".c", ".h"):
            found += stray_c(p.read_text(encoding="utf-8"), str(p))
    assert not found, "hardware figures outside swir/target.py:\n" + "\n".join(found)


@pytest.mark.parametrize("text", [
    "LDM = 65536", "x = 64 * 1024", "MAX_CPES = 64", "cpes: int = option(64, 'h')",
    "SMALL_TRANSFER = 256", "f(write_block=32)", "clock_hz: float = 1.45e9",
    "def f(cpes: int = 64): pass", "def f(m, busy: int = 64): pass",
    "def f(*, small: int = 256): pass", "if cpes == 64: pass", "ok = 32 == self.block",
    "ALIGN = 64", "align: int = option(64, 'h')",
    "T = '#define SWIR_CPES 64'", "M = '-cgsp 64 -share_size'",
    "def f(v):\n    return 0, 63"])
def test_the_scan_catches_planted_figures(text):
    assert stray_figures(text, "planted")


def default_target_reads_at_import(source: str, where: str) -> list[str]:
    """Where Python ``source`` reads DEFAULT_TARGET while it is imported: in
    module-level statements, class bodies, decorators and parameter defaults
    (function bodies run later)."""
    out: list[str] = []

    def reads(node: ast.AST) -> None:
        out.extend(f"{where}:{n.lineno}" for n in ast.walk(node)
                   if isinstance(n, ast.Name) and n.id == "DEFAULT_TARGET")

    def statements(body: list[ast.stmt]) -> None:
        for st in body:
            if isinstance(st, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for d in [*st.decorator_list, *st.args.defaults, *st.args.kw_defaults]:
                    if d is not None:
                        reads(d)
            elif isinstance(st, ast.ClassDef):
                for d in [*st.decorator_list, *st.bases, *st.keywords]:
                    reads(d)
                statements(st.body)
            else:
                reads(st)
    statements(ast.parse(source).body)
    return out


def test_no_module_reads_the_default_target_at_import():
    """None at all: the pass options whose defaults are figures are declared
    from_target (swir/passes/options.py), resolved from the pass's context."""
    found = []
    for root in (PACKAGE, TOOLS):
        for p in sorted(root.rglob("*.py")):
            if p.name != "target.py":
                found += default_target_reads_at_import(p.read_text(encoding="utf-8"), str(p))
    assert not found, "DEFAULT_TARGET read at import:\n" + "\n".join(found)


def default_target_uses(source: str, where: str) -> list[str]:
    """Where Python ``source`` names default_target or DEFAULT_TARGET (but in imports)."""
    return [f"{where}:{n.lineno}" for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Name) and n.id in ("default_target", "DEFAULT_TARGET")]


# A pass takes the target from its context (Pass.target), a module's target
# attribute or the search's context; the default is named only as the default
# of a public function or class for callers outside any pass (tests, scripts):
# the PassManager's target, a pass's outside a manager (its target and its
# options' figures), the LDM search's context and its nest_cycles,
# nest_cycles_floor and write_grain. And one comparison: a crash reproducer's
# command names the target unless it is the default.
DEFAULTS_IN_PASSES = {"manager.py": 4, "ldm_model.py": 1, "ldm_search.py": 3}


def test_no_pass_asks_for_the_default_target():
    found, counted = [], {}
    for p in sorted((PACKAGE / "passes").rglob("*.py")):
        uses = default_target_uses(p.read_text(encoding="utf-8"), str(p))
        if p.name in DEFAULTS_IN_PASSES:
            counted[p.name] = len(uses)
        else:
            found += uses
    assert not found, "default target asked for in a pass:\n" + "\n".join(found)
    assert counted == DEFAULTS_IN_PASSES


def test_the_pass_scan_catches_a_planted_default():
    assert default_target_uses("def run(self, m, a):\n    cpes = default_target().cpes\n",
                               "planted")
    assert not default_target_uses("from swir.target import default_target\n", "planted")


@pytest.mark.parametrize("text", [
    "CPES = DEFAULT_TARGET.cpes", "def f(t: Target = DEFAULT_TARGET): pass",
    "class A:\n    target: Target = DEFAULT_TARGET",
    "@dataclass\nclass A:\n    t: Target = field(default=DEFAULT_TARGET)"])
def test_the_import_scan_catches_planted_reads(text):
    assert default_target_reads_at_import(text, "planted")


def test_the_import_scan_leaves_reads_when_code_runs():
    assert not default_target_reads_at_import(
        "def f(t=None):\n    return t or DEFAULT_TARGET\n"
        "class A:\n    def g(self):\n        return DEFAULT_TARGET.cpes", "planted")


def test_the_scan_caught_the_figures_before_the_target_description():
    """Against the previous commit's sources: the scan finds what was there."""
    old = {}
    for path in ("swir/passes/options.py", "swir/interp/dma.py", "swir/analysis/cost.py",
                 "swir/codegen/runtime/swir_emu.h"):
        r = subprocess.run(["git", "show", f"e745b55:{path}"], capture_output=True, text=True,
                           cwd=Path(__file__).parents[2])
        if r.returncode != 0:
            pytest.skip("not a git checkout with e745b55 (an installed copy of the tests)")
        old[path] = r.stdout
    assert stray_figures(old["swir/passes/options.py"], "options")       # DEFAULT_LDM, MAX_CPES
    assert stray_figures(old["swir/interp/dma.py"], "dma")               # SMALL_TRANSFER
    assert stray_figures(old["swir/analysis/cost.py"], "cost")           # clock, LDM
    assert stray_c(old["swir/codegen/runtime/swir_emu.h"], "emu.h")      # #define SWIR_CPES 64


def test_targets_and_their_figures():
    assert DEFAULT_TARGET is SW26010 and set(TARGETS) == {"sw26010", "sw26010pro"}
    assert (SW26010.cpes, SW26010.ldm_bytes, SW26010.clock_hz) == (64, 64 * 1024, 1.45e9)
    assert (SW26010_PRO.ldm_bytes, SW26010_PRO.clock_hz, SW26010_PRO.vector_bits) == \
        (256 * 1024, 2.25e9, 512)
    assert SW26010.default_reserve(SW26010.ldm_bytes) == 4096
    # The cost model's default machine is the SW26010's (742.4 GFLOPS, sunway.md).
    assert Machine().peak_flops == pytest.approx(742.4e9)
    assert Machine.for_target(SW26010_PRO).peak_flops == pytest.approx(64 * 2.25e9 * 16)
    with pytest.raises(ValueError, match="unknown target 'x'"):
        target_named("x")


def test_the_emulation_header_is_generated_from_the_target(tmp_path):
    _tool("swir-cg", "-O0", "-q", str(EXAMPLES / "mlp.swir"), "-o", str(tmp_path / "out"))
    header = (tmp_path / "out" / "emu" / TARGET_HEADER).read_text()
    assert header == SW26010.c_defines()
    assert "#define SWIR_CPES 64\n" in header and "#define SWIR_LDM_BYTES 65536\n" in header
    assert '#include "swir_target.h"' in (tmp_path / "out" / "emu" / "swir_emu.h").read_text()


def _tool(name: str, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([str(BIN / name), *args], capture_output=True, text=True)
    assert (r.returncode == 0) == ok, r.stderr
    return r


def test_a_plan_for_the_pro_runs_as_the_graph_does(tmp_path):
    """The SW26010-Pro's plan of the bundled MLP, at the dma stage, computes
    what the graph stage computes (the interpreters simulate its 64 CPEs and
    hold each kernel to its 256 KB LDM)."""
    out = tmp_path / "mlp.dma.swir"
    _tool("swir-opt", "--target=sw26010pro", "-lower-loops", "-mem-plan", "-ldm-plan",
          "-insert-dma", str(EXAMPLES / "mlp.swir"), "-o", str(out))
    m = parse_module(out.read_text(), str(out))
    assert m.attrs == {"ldm_size": 256 * 1024, "target": "sw26010pro"}
    assert module_attr_ldm(m) == 256 * 1024
    got, want = tmp_path / "got.npy", tmp_path / "want.npy"
    x = str(EXAMPLES / "mlp_input.npy")
    _tool("swir-run", str(out), "--input", x, "--output", str(got))
    _tool("swir-run", str(EXAMPLES / "mlp.swir"), "--input", x, "--output", str(want))
    np.testing.assert_allclose(np.load(got), np.load(want), rtol=1e-5, atol=1e-6)


def test_swir_report_models_the_target(tmp_path):
    sw, pro = tmp_path / "sw.json", tmp_path / "pro.json"
    mlp = str(EXAMPLES / "mlp.swir")
    _tool("swir-report", mlp, "-O0", "-q", "--json", str(sw))
    _tool("swir-report", mlp, "-O0", "-q", "--target=sw26010pro", "--json", str(pro))
    a, b = json.loads(sw.read_text()), json.loads(pro.read_text())
    assert a["machine"]["clock_hz"] == 1.45e9 and b["machine"]["clock_hz"] == 2.25e9
    assert b["machine"]["ldm_bytes"] == 256 * 1024
    assert {k["ldm_capacity"] for k in b["kernels"]} == {256 * 1024}
    assert b["totals"]["modeled_s"] < a["totals"]["modeled_s"]    # a faster clock and DMA


def test_a_module_planned_for_the_pro_is_modeled_as_one(tmp_path):
    out = tmp_path / "mlp.dma.swir"
    _tool("swir-opt", "--target=sw26010pro", "-lower-loops", "-mem-plan", "-ldm-plan",
          "-insert-dma", str(EXAMPLES / "mlp.swir"), "-o", str(out))
    m = parse_module(out.read_text(), str(out))
    assert cost_report(m).machine == Machine.for_target(SW26010_PRO)


def test_swir_report_takes_the_modules_target(tmp_path):
    """A module planned for the Pro is reported as one without --target; an
    explicit --target wins."""
    out, pro, sw = tmp_path / "mlp.dma.swir", tmp_path / "pro.json", tmp_path / "sw.json"
    _tool("swir-opt", "--target=sw26010pro", "-lower-loops", "-mem-plan", "-ldm-plan",
          "-insert-dma", str(EXAMPLES / "mlp.swir"), "-o", str(out))
    _tool("swir-report", str(out), "-q", "--json", str(pro))
    _tool("swir-report", str(out), "-q", "--target=sw26010", "--json", str(sw))
    assert json.loads(pro.read_text())["machine"]["clock_hz"] == 2.25e9
    assert json.loads(sw.read_text())["machine"]["clock_hz"] == 1.45e9
