"""The Python API (swir/api, docs/api.md): each function on the bundled
examples gives what its tool gives (the same IR, outputs, project files,
report); bad input raises SwirError with the tool's located message and
writes nothing; ``import swir`` stays light; docs/api.md's example runs as
shown (doctest)."""

from __future__ import annotations

import doctest
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import siblings

import swir
from swir.tools import swir_cg, swir_import, swir_opt, swir_report, swir_run
from swir.tools.driver import run_tool

ROOT = siblings.ROOT
EXAMPLES = ROOT / "examples"
MLP = EXAMPLES / "mlp.swir"
RESNET = EXAMPLES / "resnet.swir"


def tool(capsys, prog: str, main, *args) -> str:
    """Run a tool in process; its stdout (it must succeed)."""
    code = run_tool(prog, main, [str(a) for a in args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (but the built program), by relative path."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


# -- import swir stays light -----------------------------------------------------------

def test_import_swir_imports_neither_the_api_nor_heavy_packages(tmp_path):
    probe = ("import sys, swir; heavy = ('onnx', 'onnxruntime', 'matplotlib', 'torch'); "
             "print(sorted({m.split('.')[0] for m in sys.modules if m.split('.')[0] in heavy}"
             " | ({'swir.api'} & set(sys.modules)))); swir.compile; "
             "print('swir.api' in sys.modules, 'onnx' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, cwd=tmp_path, timeout=120).stdout
    assert out.splitlines() == ["[]", "True False"]


def test_the_tools_start_without_the_c_generator_or_the_cost_model(tmp_path):
    """swir-run and swir-opt import swir.api (its errors, its pass flags),
    which loads neither codegen nor the cost model until compile / report."""
    probe = ("import sys, swir.tools.swir_run, swir.tools.swir_opt; "
             "print(sorted(m for m in ('swir.codegen.project', 'swir.costmodel.cost', "
             "'swir.frontend.onnx_import') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, cwd=tmp_path, timeout=120).stdout
    assert out.strip() == "[]"


def test_the_api_is_reexported_by_swir():
    import swir.api
    for name in swir.api.__all__:
        assert getattr(swir, name) is getattr(swir.api, name), name
    assert set(swir.api.__all__) <= set(dir(swir))
    with pytest.raises(AttributeError):
        swir.no_such_function  # noqa: B018


# -- each function equals its tool ------------------------------------------------------

def test_optimize_prints_what_swir_opt_prints(capsys):
    want = tool(capsys, "swir-opt", swir_opt.main, "-O3", "--strategy=greedy", "-lower-loops",
                "-ldm-plan", "-insert-dma", MLP)
    module = swir.load(MLP)
    assert swir.optimize(module, "-O3 --strategy=greedy -lower-loops -ldm-plan -insert-dma") \
        is module
    assert swir.to_text(module) == want
    listed = swir.optimize(swir.load(MLP), ["-O1", "-lower-loops"])
    assert listed.stage == "loop"


def test_run_gives_what_swir_run_writes(tmp_path, capsys):
    x = np.load(EXAMPLES / "resnet_input.npy")
    out, stats_file = tmp_path / "y.npy", tmp_path / "stats.json"
    tool(capsys, "swir-run", swir_run.main, RESNET, "--input", EXAMPLES / "resnet_input.npy",
         "--output", out, "--stats", stats_file)
    stats: dict = {}
    (y,) = swir.run(RESNET, [x], stats=stats)
    assert y.dtype == np.float32 and np.array_equal(y, np.load(out))
    assert json.loads(json.dumps(stats)) == json.loads(stats_file.read_text())
    (again,) = swir.run(swir.load(RESNET), [x], func="main")
    assert np.array_equal(again, y)


def test_compile_writes_what_swir_cg_writes(tmp_path, capsys):
    options = ["-O1", "--strategy=greedy", "--ldm-size=32768"]
    tool(capsys, "swir-cg", swir_cg.main, MLP, "-o", tmp_path / "cg", "-q", *options)
    project = swir.compile(MLP, tmp_path / "api", level="O1",
                           options={"strategy": "greedy", "ldm_size": 32768})
    assert project == tmp_path / "api"
    want = tree(tmp_path / "cg")
    assert len(want) > 8 and tree(project) == want
    # From a Module (its weights read from its own folder): the same C.
    module = swir.load(MLP)
    before = swir.to_text(module)
    swir.compile(module, tmp_path / "mod", level="O1", options={"strategy": "greedy",
                                                                "ldm-size": 32768})
    assert swir.to_text(module) == before        # compile lowers a copy
    got = tree(tmp_path / "mod")
    # the same but for the comments naming the source (the module, as a file in its folder)
    assert {f: without_source(d) for f, d in got.items()} == \
        {f: without_source(d) for f, d in want.items()}
    assert b"<module mlp>" in got["layers.c"]


def without_source(data: bytes) -> bytes:
    return b"\n".join(line for line in data.split(b"\n") if b"/examples/" not in line)


def test_report_is_what_swir_report_prints_and_writes(tmp_path, capsys):
    path = tmp_path / "r.json"
    out = tool(capsys, "swir-report", swir_report.main, RESNET, "-O1", "--strategy=greedy",
               "--json", path, "-q")
    r = swir.report(RESNET, level="O1", options={"strategy": "greedy"})
    assert r.json() == path.read_text()
    assert r.text() == out
    d = json.loads(r.json())
    assert d["totals"]["modeled_s"] == pytest.approx(r.costs.modeled_s)
    assert [k["name"] for k in d["kernels"]] == [k.name for k in r.costs.kernels]
    wide = tool(capsys, "swir-report", swir_report.main, RESNET, "-O1", "--strategy=greedy",
                "--wide")
    assert r.text(wide=True) == wide
    piped = swir.report(swir.load(RESNET), pipeline="-O1 -lower-loops -ldm-plan -insert-dma",
                        options={"strategy": "greedy"}, machine="optimistic")
    assert piped.info["level"] is None and piped.info["machine_name"] == "optimistic"
    assert {k.name for k in piped.costs.kernels} == {k.name for k in r.costs.kernels}


def test_import_onnx_writes_what_swir_import_writes(tmp_path, capsys):
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    zoo = siblings.zoo()
    model = tmp_path / "dcgan.onnx"
    zoo.save(zoo.build("dcgan", resolution=16, width=8), model, external_data=False)
    (tmp_path / "tool").mkdir()
    (tmp_path / "api").mkdir()
    run_tool("swir-import", swir_import.main, [str(model), "-o", str(tmp_path / "tool" / "m.swir"),
                                               "-q"])
    capsys.readouterr()
    module = swir.import_model(model, tmp_path / "api" / "m.swir")
    for name in ("m.swir", "m.weights"):
        assert (tmp_path / "api" / name).read_bytes() == (tmp_path / "tool" / name).read_bytes()
    assert module.stage == "graph" and swir.to_text(module) == swir.to_text(
        swir.load(tmp_path / "tool" / "m.swir"))
    # From an onnx.ModelProto: the same module.
    swir.import_model(onnx.load(str(model)), tmp_path / "api" / "p.swir", weights=tmp_path / "api"
                     / "p.bin")
    api = tmp_path / "api"
    assert (api / "p.bin").read_bytes() == (api / "m.weights").read_bytes()
    z = np.random.default_rng(0).standard_normal((1, 100, 1, 1)).astype(np.float32)
    assert np.array_equal(swir.run(tmp_path / "api" / "p.swir", [z])[0], swir.run(module, [z])[0])


# -- errors: located, and nothing written ---------------------------------------------

def raised(call) -> swir.SwirError:
    with pytest.raises(swir.SwirError) as info:
        call()
    return info.value


def test_malformed_ir_is_a_located_error():
    e = raised(lambda: swir.parse('module "m"\nstage graph\nfunc @main( {\n', "bad.swir"))
    assert str(e).splitlines()[0] == "bad.swir:3:13: error: unexpected '{'; expected ')' or a " \
                                     "value (%name)"
    assert str(e).splitlines()[1:] == ["func @main( {", "            ^"]
    assert (e.location.file, e.location.line, e.location.col) == ("bad.swir", 3, 13)
    assert e.message.startswith("unexpected '{'")


def test_a_missing_file_is_a_located_error(tmp_path):
    missing = tmp_path / "none.swir"
    for call in (lambda: swir.load(missing), lambda: swir.run(missing, []),
                 lambda: swir.compile(missing, tmp_path / "out"),
                 lambda: swir.report(missing)):
        assert str(raised(call)) == f"{missing}:1:1: error: cannot read '{missing}': No such " \
                                    "file or directory"
    assert sorted(tmp_path.iterdir()) == []


@pytest.mark.parametrize("call, message", [
    (lambda out: swir.compile(MLP, out, options={"ldm-size": "big"}),
     "swir.compile: error: --ldm-size expects int, got 'big'"),
    (lambda out: swir.compile(MLP, out, options={"ldm-size": 10**9}),
     "<command-line>:1:14: error: an LDM of 1000000000 bytes is more than the SW26010 has "
     "(65536 bytes per CPE); swir-cg writes code for the machine (swir-opt and swir-report "
     "plan and model larger ones)\nswir.compile --ldm-size=1000000000\n             ^"),
    (lambda out: swir.compile(MLP, out, options={"no-such-option": 1}),
     "<command-line>:1:14: error: unknown option '--no-such-option' (no pass in the pipeline "
     "takes it)\nswir.compile --no-such-option=1\n             ^"),
    (lambda out: swir.compile(MLP, out, level="O7"),
     "swir.compile: error: unknown optimisation level 'O7' (levels: O0, O1, O3)"),
    (lambda out: swir.compile(MLP, out, ranks=0),
     "swir.compile: error: ranks is a whole number of MPI ranks, at least 1, got 0"),
    (lambda out: swir.compile(MLP, out, split="model"),
     "swir.compile: error: split says how ranks share the work: give ranks too"),
    (lambda out: swir.report(MLP, ranks=2, pipeline="-O1"),
     "swir.report: error: ranks adds -distribute to the level's pipeline; with a pipeline, put "
     "-distribute{ranks=N} into it"),
    (lambda out: swir.compile(MLP, out, train=True),
     "swir.compile: error: --train: @main has no 'carried' attribute, so it is not a training "
     "step (attributes {carried = [@w, @b, ...]}: the globals its last parameters carry)"),
    (lambda out: swir.optimize(swir.load(MLP), "-O3 -no-such-pass"),
     "<command-line>:1:19: error: unknown pass '-no-such-pass' (see swir-opt --help)\n"
     "swir.optimize -O3 -no-such-pass\n                  ^"),
    (lambda out: swir.report(MLP, machine="fast"),
     "swir.report: error: unknown machine 'fast' (machines: pessimistic, default, optimistic)"),
    (lambda out: swir.report(MLP, pipeline="-lower-loops"),
     "swir.report: error: the pipeline (-lower-loops) leaves the module at the loop stage; "
     "swir-report models the dma stage (end it with -insert-dma)"),
    (lambda out: swir.run(MLP, [np.zeros((2, 2), np.float32)], func="nothing"),
     f"swir.run: error: no function @nothing in {MLP}"),
])
def test_a_bad_option_is_the_tools_error_and_writes_nothing(tmp_path, call, message):
    out = tmp_path / "out"
    assert str(raised(lambda: call(out))) == message
    assert not out.exists()


def test_the_tools_print_the_same_error(tmp_path, capsys):
    """swir-cg's message for the option the API gives as a keyword."""
    out = tmp_path / "out"
    assert run_tool("swir-cg", swir_cg.main, [str(MLP), "-o", str(out), "--ldm-size=big"]) == 1
    assert capsys.readouterr().err == "swir-cg: error: --ldm-size expects int, got 'big'\n"
    assert str(raised(lambda: swir.compile(MLP, out, options={"ldm-size": "big"}))) == \
        "swir.compile: error: --ldm-size expects int, got 'big'"


def test_an_unreadable_model_is_an_error_naming_it(tmp_path):
    pytest.importorskip("onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    e = raised(lambda: swir.import_model(bad, tmp_path / "m.swir"))
    assert str(e).startswith(f"{bad}: error: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.onnx"]
    assert str(raised(lambda: swir.import_model(42, tmp_path / "m.swir"))) == \
        "swir.import_model: error: a model is a path or an onnx.ModelProto, not a int"


# -- docs/api.md ------------------------------------------------------------------------

def test_the_docs_example_runs_as_shown(tmp_path, monkeypatch):
    """docs/api.md's example, as doctest runs it, from a folder laid out like
    the repository: import an ONNX model, optimize, run, report, compile,
    build with make emu and run the program."""
    pytest.importorskip("onnx")
    for name in ("examples", "bench"):
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)
    result = doctest.testfile(str(ROOT / "docs" / "api.md"), module_relative=False,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
                              globs={}, report=True)
    assert result.attempted > 10 and result.failed == 0


def test_ranks_reach_the_pipeline_as_swir_cg_gives_them(tmp_path, capsys):
    """ranks / split: the MPI program of swir-cg --ranks 2 --split model."""
    tool(capsys, "swir-cg", swir_cg.main, MLP, "-o", tmp_path / "cg", "-q", "-O1",
         "--strategy=greedy", "--ranks", "2", "--split", "model")
    swir.compile(MLP, tmp_path / "api", level="O1", options={"strategy": "greedy"}, ranks=2,
                 split="model")
    assert tree(tmp_path / "api") == tree(tmp_path / "cg")
    r = swir.report(MLP, ranks=2, split="model")
    assert r.costs.ranks == 2 and r.info["split"] == "model" and r.info["one_core_group_s"] > 0
