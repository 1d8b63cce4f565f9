"""The side-by-side benchmarks in their --smoke mode, as CI runs them:
bench/compile_time.py (swir against Apache TVM, a reduced ResNet-18, target
llvm) and bench/ir_throughput.py (swir against xDSL, 200-op modules). Each
runs once, as a subprocess, and its Markdown table must have the expected
rows and columns, positive times, a TVM build that matches onnxruntime and
round trips that give back their input. About 40 s on the 2-core CI machine,
most of it swir-cg -O3 (cold and with a warm cache, each run twice: the
command and in process).
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import siblings

BENCH = siblings.ROOT / "bench"
# The TVM build against onnxruntime: the largest difference, absolute and
# relative to the largest output (f32 kernels summing in other orders).
ATOL, RTOL = 1e-4, 1e-5


def run_smoke(script: str, work) -> list[dict[str, str]]:
    """The rows of the table ``script --smoke`` prints, as column -> cell."""
    r = subprocess.run([sys.executable, str(BENCH / script), "--smoke", "--work", str(work)],
                       capture_output=True, text=True, check=False, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [dict(zip(header, (c.strip() for c in ln.strip("|").split("|"))))
            for ln in lines[2:]]
    assert all(len(row) == len(header) for row in rows)
    return rows


def seconds(cell: str) -> float:
    assert cell.endswith(" s"), cell
    t = float(cell[:-2])
    assert t > 0, cell
    return t


def times(cell: str) -> float:
    assert cell.endswith("x"), cell
    x = float(cell[:-1])
    assert x > 0, cell
    return x


@pytest.fixture(scope="module")
def compile_time(tmp_path_factory) -> list[dict[str, str]]:
    return run_smoke("compile_time.py", tmp_path_factory.mktemp("compile_time"))


@pytest.fixture(scope="module")
def ir_throughput(tmp_path_factory) -> list[dict[str, str]]:
    return run_smoke("ir_throughput.py", tmp_path_factory.mktemp("ir_throughput"))


def test_compile_time_rows(compile_time):
    assert [(r["model"], r["compiler"], r["target"]) for r in compile_time] == \
        [("resnet18", "TVM", "llvm"), ("resnet18", "swir", "C (athread), -O0"),
         ("resnet18", "swir", "C (athread), -O3"), ("resnet18", "swir", "C (athread), -O3 warm")]
    assert list(compile_time[0]) == ["model", "compiler", "target", "import", "build", "total",
                                     "import, wall", "build, wall", "total, wall", "total, CPU",
                                     "swir / TVM, wall", "swir / TVM, CPU", "vs onnxruntime"]


def test_compile_time_figures(compile_time):
    tvm, *swir = compile_time           # the ratios are against TVM's llvm build
    assert tvm["swir / TVM, wall"] == tvm["swir / TVM, CPU"] == "–"
    for r in compile_time:
        assert not any(c.startswith("error") for c in r.values()), r
        assert seconds(r["total"]) == pytest.approx(seconds(r["import"]) + seconds(r["build"]),
                                                     abs=0.011)
        seconds(r["total, wall"])
        seconds(r["total, CPU"])
    for r in swir:
        # swir's wall time is its two commands', TVM's one process's
        assert seconds(r["total, wall"]) == pytest.approx(
            seconds(r["import, wall"]) + seconds(r["build, wall"]), abs=0.011)
        assert times(r["swir / TVM, wall"]) == pytest.approx(
            seconds(r["total, wall"]) / seconds(tvm["total, wall"]), rel=0.05, abs=0.01)
        assert times(r["swir / TVM, CPU"]) == pytest.approx(
            seconds(r["total, CPU"]) / seconds(tvm["total, CPU"]), rel=0.05, abs=0.01)
    assert tvm["import, wall"] == tvm["build, wall"] == "–"
    # the wall time includes what the in-process time leaves out
    assert seconds(tvm["total, wall"]) > seconds(tvm["total"])


def test_compile_time_tvm_matches_onnxruntime(compile_time):
    tvm, swir = compile_time[:2]
    assert swir["vs onnxruntime"] == "–"
    diff, rel = tvm["vs onnxruntime"].removesuffix(" rel.").split(", ")
    assert 0 <= float(diff) <= ATOL and 0 <= float(rel) <= RTOL, tvm["vs onnxruntime"]


def test_ir_throughput_rows(ir_throughput):
    assert [(r["N"], r["tool"]) for r in ir_throughput] == [("200", "swir"), ("200", "xDSL")]
    assert list(ir_throughput[0]) == ["N", "tool", "ops", "bytes", "parse + print", "ops/s",
                                      "CLI round trip", "CLI ops/s", "xDSL / swir",
                                      "xDSL / swir (CLI)", "round trip"]


def test_ir_throughput_figures(ir_throughput):
    swir, xdsl = ir_throughput
    for r in ir_throughput:
        assert r["ops"] == "200", r
        assert int(r["bytes"].replace(",", "")) > 0
        for column in ("parse + print", "CLI round trip"):
            seconds(r[column])
        for column in ("ops/s", "CLI ops/s"):
            assert float(r[column].replace(",", "")) > 0
        # both tools print back exactly the canonical text they parsed
        assert r["round trip"] == "identical", r
    assert times(xdsl["xDSL / swir"]) == pytest.approx(
        seconds(xdsl["parse + print"]) / seconds(swir["parse + print"]), rel=0.1)
    times(xdsl["xDSL / swir (CLI)"])


def _zoo_bench(monkeypatch):
    """bench/zoo.py, which imports its sibling bench/common.py by name."""
    monkeypatch.syspath_prepend(str(BENCH))
    return siblings.load(BENCH / "zoo.py")


@pytest.mark.parametrize("argv, names, run", [
    (["--run", "resnet18"], ["resnet18"], {"resnet18"}),     # --run used to swallow the name
    (["resnet18", "--run"], ["resnet18"], {"resnet18"}),
    (["--run", "all"], "all", "all"),
    (["dcgan", "bert"], ["dcgan", "bert"], set()),
    ([], "all", set()),
])
def test_zoo_command_line(argv, names, run, monkeypatch):
    zoo_bench = _zoo_bench(monkeypatch)
    models = list(siblings.zoo().MODELS)
    a = zoo_bench.parse_args(argv, models)
    assert a.names == (models if names == "all" else names)
    assert a.run == (set(models) if run == "all" else run)


def test_zoo_command_line_refuses_unknown_models(capsys, monkeypatch):
    zoo_bench = _zoo_bench(monkeypatch)
    with pytest.raises(SystemExit):
        zoo_bench.parse_args(["--run", "resnet19"], list(siblings.zoo().MODELS))
    assert "no model 'resnet19'" in capsys.readouterr().err


def test_plan_traffic_smoke():
    """bench/plan_traffic.py --smoke (ResNet-18 at 32 x 32, width 4, -O3):
    no padded copies are left (only the flatten moves data without
    computing), and no conv / dense kernel moves less than its I/O lower
    bound, which would make the bound no bound."""
    r = subprocess.run([sys.executable, str(BENCH / "plan_traffic.py"), "--smoke"],
                       capture_output=True, text=True, check=False, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    (row,) = [dict(zip(header, (c.strip() for c in ln.strip("|").split("|"))))
              for ln in lines[2:]]
    assert row["model"] == "resnet18"
    assert int(row["no-flop"]) <= 1 < int(row["kernels"])
    assert float(row["least traffic/LB"]) >= 1.0 and float(row["traffic/LB"]) >= 1.0
    reads, ldm = (int(x.split()[1]) for x in row["LB binds"].split(", "))
    assert reads + ldm > 0
