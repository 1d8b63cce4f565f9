"""Failure modes of the process rather than of the input, for every tool:
an interrupt (exit 130), running out of memory (exit 1, one line), a closed
pipe on stdout; in each case no output file is left behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from swir.tools import swir_cg, swir_import, swir_opt, swir_report, swir_run
from swir.tools.driver import run_tool

BIN = Path(sys.executable).parent
MLP = Path(__file__).parents[2] / "examples" / "mlp.swir"


def _big_module(tmp_path: Path, ops: int = 60_000) -> Path:
    body = "".join(f"  %v{i + 1} = relu %v{i} : <4 x f32>\n" for i in range(ops))
    p = tmp_path / "big.swir"
    p.write_text('module "big"\nstage graph\nfunc @main(%v0: <4 x f32>) -> <4 x f32> {\n'
                 f"'entry:\n{body}  return %v{ops}\n}}\n")
    return p


def test_interrupt_exits_130_and_writes_nothing(tmp_path):
    src, out = _big_module(tmp_path), tmp_path / "out.swir"
    proc = subprocess.Popen([str(BIN / "swir-opt"), "-cse", "-dce", str(src), "-o", str(out)],
                            stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)          # inside the parse or the passes (the whole run takes seconds)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the run finished before the interrupt arrived")
    assert proc.returncode == 130, err
    assert err.strip() == "swir-opt: interrupted"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.swir"]   # no temp file either


@pytest.mark.parametrize("prog, main, argv", [
    ("swir-opt", swir_opt.main, ["-dce", "{src}", "-o", "{out}"]),
    ("swir-run", swir_run.main, ["{src}", "--func", "main", "-o", "{out}"]),
    ("swir-cg", swir_cg.main, ["{src}", "-o", "{out}"]),
    ("swir-report", swir_report.main, ["{src}", "--json", "{out}"]),
])
def test_out_of_memory_is_one_line_and_exit_1(tmp_path, monkeypatch, capsys, prog, main, argv):
    import swir.api.compiling
    import swir.api.reporting
    import swir.parser

    def exhausted(*args, **kwargs):
        raise MemoryError()
    monkeypatch.setattr(swir.parser, "parse_module", exhausted)
    # the tools' work is the API's (swir.api): its modules parse too
    for m in (swir_opt, swir_run, swir_cg, swir_report, swir.api.compiling, swir.api.reporting):
        if hasattr(m, "parse_module"):
            monkeypatch.setattr(m, "parse_module", exhausted)
    out = tmp_path / "out"
    args = [a.format(src=MLP, out=out) for a in argv]
    assert run_tool(prog, main, args) == 1
    assert capsys.readouterr().err == f"{prog}: error: out of memory\n"
    assert not out.exists()


def test_import_out_of_memory(tmp_path, monkeypatch, capsys):
    pytest.importorskip("onnx")
    import siblings
    fuzz = siblings.load(Path(__file__).parents[2] / "bench" / "fuzz.py")
    model = tmp_path / "m.onnx"
    model.write_bytes(fuzz.onnx_seeds()[0])
    out = tmp_path / "o.swir"
    assert run_tool("swir-import", swir_import.main, [str(model), "-o", str(out)]) == 0
    capsys.readouterr()             # its closing line

    def exhausted(*args, **kwargs):
        raise MemoryError()
    import swir.frontend.onnx_import     # what swir-import (through swir.api) calls
    monkeypatch.setattr(swir.frontend.onnx_import, "import_onnx", exhausted)
    out.unlink()
    assert run_tool("swir-import", swir_import.main, [str(model), "-o", str(out)]) == 1
    assert capsys.readouterr().err == "swir-import: error: out of memory\n"
    assert not out.exists()


def test_closed_stdout_is_quiet(tmp_path):
    src = _big_module(tmp_path, 5_000)
    p = subprocess.run(f"'{BIN / 'swir-opt'}' '{src}' | head -c 10", shell=True, check=False,
                       capture_output=True, text=True, timeout=120)
    assert len(p.stdout) == 10 and "Traceback" not in p.stderr and "error" not in p.stderr
