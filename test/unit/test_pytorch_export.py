"""PyTorch models through both of its ONNX exporters, as docs/frontend.md
("PyTorch") tells users to call them: ``torch.onnx.export(..., dynamo=False)``
(TorchScript) and ``dynamo=True`` (torch.export, needs onnxscript), imported
by swir-import and run by the graph interpreter against PyTorch's own output;
a dynamic batch axis bound with ``--shape``; weights kept as external data;
and one export compiled by swir-cg and run on the athread emulation.

The model has what users' models have: convolution, batch norm, pooling, a
(batch-first) LSTM, a bidirectional GRU, a linear layer and softmax.

Tolerance: rtol 1e-4, atol 1e-5 (f32; PyTorch's kernels and swir's sum in
different orders)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (the test extra has it)")
try:
    import onnxscript  # noqa: F401
    HAVE_ONNXSCRIPT = True
except ImportError:
    HAVE_ONNXSCRIPT = False
# The test extra has onnxscript; without it only the TorchScript exporter's cases run.
needs_onnxscript = pytest.mark.skipif(not HAVE_ONNXSCRIPT, reason="torch.onnx.export("
                                      "dynamo=True) needs onnxscript (the test extra has it)")

from swir.codegen import emulate  # noqa: E402
from swir.interp.run import interpreter_for, signature  # noqa: E402
from swir.parser import parse_module  # noqa: E402

from helpers import compile_cache, rng_for  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5
BATCH = 2


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.lstm = torch.nn.LSTM(8, 6, batch_first=True)
        self.gru = torch.nn.GRU(6, 5, bidirectional=True)
        self.fc = torch.nn.Linear(10, 4)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        y = torch.nn.functional.max_pool2d(y, 2).mean(dim=2)      # N, C, W: a sequence
        y, _ = self.lstm(y.transpose(1, 2))
        y, _ = self.gru(y.transpose(0, 1))
        return torch.softmax(self.fc(y[-1]), -1)


@pytest.fixture(scope="module")
def net():
    torch.manual_seed(0)
    model = Net().eval()
    with torch.no_grad():   # running statistics that are not the identity
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 1.5)
    x = rng_for("pytorch-export").standard_normal((BATCH, 3, 8, 8)).astype(np.float32)
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    return model, x, want


def export(model, x: np.ndarray, path: Path, **options) -> Path:
    torch.onnx.export(model, (torch.from_numpy(x),), str(path), input_names=["x"],
                      output_names=["y"], opset_version=18, **options)
    return path


def swir_import(model: Path, *args: str) -> Path:
    out = model.with_suffix(".swir")
    tool = Path(sys.executable).with_name("swir-import")
    r = subprocess.run([str(tool), str(model), "-o", str(out), *args], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


def interpreted(module_path: Path, x: np.ndarray) -> np.ndarray:
    module = parse_module(module_path.read_text(), str(module_path))
    return interpreter_for(module, module_path.parent).run("main", [x])[0]


@pytest.mark.parametrize("dynamo", [False, pytest.param(True, marks=needs_onnxscript)],
                         ids=["torchscript", "dynamo"])
def test_both_exporters(net, tmp_path, dynamo):
    model, x, want = net
    path = export(model, x, tmp_path / "net.onnx", dynamo=dynamo)
    got = interpreted(swir_import(path), x)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_dynamic_batch_bound_at_import(net, tmp_path):
    model, x, want = net
    path = export(model, x, tmp_path / "net.onnx", dynamo=False,
                  dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    got = interpreted(swir_import(path, "--shape", f"batch={BATCH}"), x)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


@needs_onnxscript
def test_external_data(net, tmp_path):
    model, x, want = net
    path = export(model, x, tmp_path / "net.onnx", dynamo=True, external_data=True)
    assert (tmp_path / "net.onnx.data").is_file()
    got = interpreted(swir_import(path), x)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


@needs_onnxscript
@pytest.mark.skipif(shutil.which("cc") is None or shutil.which("make") is None,
                    reason="needs a host C compiler (cc) and make")
def test_dynamo_export_compiled_and_emulated(net, tmp_path, compile_cache_dir):
    model, x, want = net
    module_path = swir_import(export(model, x, tmp_path / "net.onnx", dynamo=True))
    tool = Path(sys.executable).with_name("swir-cg")
    with compile_cache(compile_cache_dir):
        r = subprocess.run([str(tool), str(module_path), "-o", str(tmp_path / "project")],
                           capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    module = parse_module(module_path.read_text(), str(module_path))
    program = emulate.build(tmp_path / "project", module.name)
    params, results = signature(module, module.lookup("main"))
    got = emulate.run(program, [x], [p.type for p in params], results).outputs[0]
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=RTOL, atol=ATOL)
