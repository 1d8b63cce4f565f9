"""The "fifty mutants" acceptance test: damaged input never crashes swir.

Valid modules (test/IR/loop-stage.swir and a graph-stage fixture below) are
truncated or mutated at random with a fixed seed by bench/fuzz.py's mutators:
byte deletions, insertions of printable and non-printable characters (including
bytes that are not UTF-8), duplicated lines, swapped tokens, truncation, replaced
digits and sigils, huge numbers, long names, deep nesting, ...
For each mutant ``swir-opt`` either succeeds (exit 0, and its output is valid IR)
or fails cleanly (exit 1, the first line of stderr is ``PATH:LINE:COL: error: ``,
no traceback) -- never anything else. In process, parse_module and verify may
raise only Diagnostic or VerificationError.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import siblings

from swir.diagnostics import Diagnostic
from swir.parser import parse_module, read_source
from swir.printer import print_module
from swir.verifier import VerificationError, verify

# bench/fuzz.py's mutators (the long fuzz campaign uses the same ones).
fuzz = siblings.load(Path(__file__).parents[2] / "bench" / "fuzz.py")

TEST_ROOT = Path(__file__).resolve().parent.parent
SWIR_OPT = Path(sys.executable).parent / "swir-opt"

GRAPH_FIXTURE = """\
// A small convolutional classifier at the graph stage.
module "convnet"
stage graph

global @k1 : <8 x 3 x 3 x 3 x f32> = file "convnet.weights" offset 0
global @b1 : <8 x f32> = dense<0.0>
global @w2 : <128 x 10 x f32> = file "convnet.weights" offset 864
global @b2 : <10 x f32> = dense<[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]>

func @classify(%img: <1 x 3 x 8 x 8 x f32>) -> <1 x 10 x f32> {
'entry:
  %c = conv2d %img, @k1, @b1 {stride = [2, 2], pad = [1, 1, 1, 1], dilation = [1, 1], groups = 1} : <1 x 8 x 4 x 4 x f32>
  %r = relu %c : <1 x 8 x 4 x 4 x f32>
  %f = reshape %r {shape = [1, -1]} : <1 x 128 x f32>
  %m = matmul %f, @w2 : <1 x 10 x f32>
  %a = add %m, @b2 : <1 x 10 x f32>
  %p = softmax %a {axis = -1} : <1 x 10 x f32>
  return %p
}

func @main(%x: <1 x 3 x 8 x 8 x f32>, %flag: i1) -> <1 x 10 x f32> {
'entry:
  %y = call @classify(%x) : <1 x 10 x f32>
  cond_br %flag, 'scale(%y), 'done(%y)
'scale(%s: <1 x 10 x f32>):
  %two = const dense<2.0> : <1 x 10 x f32>
  %z = mul %s, %two : <1 x 10 x f32>
  br 'done(%z)
'done(%out: <1 x 10 x f32>):
  return %out
}
"""

def _base_modules() -> list[tuple[str, bytes]]:
    loop = (TEST_ROOT / "IR" / "loop-stage.swir").read_bytes()
    return [("loop", loop), ("graph", GRAPH_FIXTURE.encode())]


def make_mutants(count: int, seed: int) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    bases = _base_modules()
    out = []
    for n in range(count):
        name, data = bases[n % len(bases)]
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            data = fuzz.mutate_text(rng, data)
        out.append((f"{n:03d}-{name}", data))
    return out


def _check_accepted_output(text: str, what: str) -> None:
    m = parse_module(text, f"<output of {what}>")
    verify(m)
    assert print_module(m) == text, f"{what}: output of swir-opt is not a fixed point"


def test_base_modules_are_valid():
    for name, data in _base_modules():
        m = parse_module(data.decode(), name)
        verify(m)


def test_mutants_are_deterministic_and_varied():
    a, b = make_mutants(50, 1), make_mutants(50, 1)
    assert a == b
    bases = dict(_base_modules())
    changed = [d for n, d in a if d != bases[n.split("-")[1]]]
    assert len(changed) >= 45


def test_fifty_mutants_through_swir_opt(tmp_path):
    mutants = make_mutants(50, seed=20240611)
    paths = []
    for name, data in mutants:
        p = tmp_path / f"mutant-{name}.swir"
        p.write_bytes(data)
        paths.append(p)

    def run(p: Path) -> subprocess.CompletedProcess:
        return subprocess.run([str(SWIR_OPT), str(p)], capture_output=True, timeout=60)

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(run, paths))

    rejected = 0
    problems = []
    for p, r in zip(paths, results):
        out = r.stdout.decode("utf-8", "replace")
        err = r.stderr.decode("utf-8", "replace")
        if "Traceback" in err or "Traceback" in out:
            problems.append(f"{p.name}: traceback (exit {r.returncode}):\n{err}")
        elif r.returncode == 0:
            try:
                _check_accepted_output(out, p.name)
            except (Diagnostic, VerificationError, AssertionError) as e:
                problems.append(f"{p.name}: exit 0 but bad output: {e}")
        elif r.returncode == 1:
            rejected += 1
            first = err.split("\n", 1)[0]
            if not re.match(rf"^{re.escape(str(p))}:\d+:\d+: error: ", first):
                problems.append(f"{p.name}: exit 1 but first stderr line is {first!r}")
        else:
            problems.append(f"{p.name}: exit status {r.returncode}:\n{err}")
    assert not problems, "\n\n".join(problems)
    assert rejected > len(paths) // 2, f"only {rejected} of {len(paths)} mutants rejected"


def _in_process(name: str, data: bytes, tmp_path: Path) -> str:
    """'ok' or 'rejected'; anything but Diagnostic / VerificationError propagates."""
    p = tmp_path / f"{name}.swir"
    p.write_bytes(data)
    try:
        text = read_source(str(p))
        m = parse_module(text, str(p))
        verify(m)
    except Diagnostic as d:
        assert d.loc is not None and d.loc.file == str(p), f"{name}: unlocated {d!r}"
        return "rejected"
    except VerificationError as e:
        assert e.diagnostics
        return "rejected"
    printed = print_module(m)
    _check_accepted_output(printed, name)
    return "ok"


def test_five_hundred_mutants_in_process(tmp_path):
    outcomes = {"ok": 0, "rejected": 0}
    for name, data in make_mutants(500, seed=7):
        outcomes[_in_process(name, data, tmp_path)] += 1
    assert outcomes["rejected"] > 250, outcomes


# --------------------------------------------------------------------------------------
# Numbers at the edge: mutations that the random ones rarely hit
# --------------------------------------------------------------------------------------

_BIG = "9" * 400


def _graph_op(op: str, attrs: str, result: str = "<4 x f32>", x: str = "<4 x f32>") -> str:
    return (f'module "m"\nstage graph\nfunc @h(%x: {x}) {{\n\'entry:\n'
            f'  %y = {op} %x {attrs} : {result}\n  return\n}}\n')


_EDGE_CASES = [
    pytest.param(_graph_op("softmax", f"{{axis = {_BIG}}}"), id="huge-int-axis"),
    pytest.param(_graph_op("resize_nearest", "{scales = [1e-320]}"), id="denormal-scale"),
    pytest.param(_graph_op("resize_nearest", "{scales = [nan]}"), id="nan-scale"),
    pytest.param(_graph_op("reshape", "{shape = [-1]}", f"<{_BIG} x f32>", f"<{_BIG} x f32>"),
                 id="huge-dimension"),
    pytest.param(_graph_op("slice", f"{{starts = [-{_BIG}], ends = [{_BIG}]}}"),
                 id="huge-slice"),
    pytest.param(f'module "m"\nstage graph\nglobal @g : <1 x f32> = file "w" offset {_BIG}\n',
                 id="huge-offset"),
    pytest.param(f'module "m"\nstage loop\nkernel @k(%A: buf<4 x f32>) {{\n'
                 f'  for %i = 0 to {_BIG} step {_BIG} {{\n    %v = load %A[%i mod 4] : f32\n'
                 f'  }}\n}}\n', id="huge-loop"),
    pytest.param(f'module "m"\nstage dma\ncpe kernel @k(%A: buf<4 x f32>) {{\n'
                 f'  %L = ldm_alloc : ldm<4 x f32>\n'
                 f'  dma_get %A[0] -> %L {{count = {_BIG}, bsize = 1, stride = {_BIG}, '
                 f'reply = 0}}\n}}\n', id="huge-dma"),
    pytest.param(_graph_op("leaky_relu", f"{{alpha = {_BIG}}}"), id="huge-int-alpha"),
    pytest.param(_graph_op("clip", f"{{min = -{_BIG}, max = {_BIG}}}"), id="huge-int-clip"),
    pytest.param(_graph_op("pad", f"{{pads = [1, 1], value = {_BIG}}}", "<6 x f32>"),
                 id="huge-int-pad-value"),
    pytest.param(_graph_op("resize_nearest", f"{{scales = [{_BIG}]}}"), id="huge-int-scale"),
    pytest.param(_graph_op("resize_nearest", "{scales = [1e308]}"), id="huge-float-scale"),
]


@pytest.mark.parametrize("text", _EDGE_CASES)
def test_extreme_numbers_are_diagnosed_not_crashes(text):
    try:
        m = parse_module(text, "edge.swir")
        verify(m)
    except (Diagnostic, VerificationError):
        return
    _check_accepted_output(print_module(m), "edge.swir")


def test_swir_opt_exit_status_on_overflowing_scale(tmp_path):
    p = tmp_path / "scale.swir"
    p.write_text(_graph_op("resize_nearest", "{scales = [1e308]}"))
    r = subprocess.run([str(SWIR_OPT), str(p)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert re.match(rf"^{re.escape(str(p))}:\d+:\d+: error: ", r.stderr)
