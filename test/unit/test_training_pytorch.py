"""Whole-model training against PyTorch: a small CNN and an MLP defined in
PyTorch, exported to ONNX, imported by swir-import, made a training step by
-train-step, and trained for 20 steps from the same initial weights in both.
The losses of every step and the final weights must agree within f32
tolerance, at the graph stage (the interpreter) and compiled under the
emulation (swir-cg --train's program: its loss log and saved weights file)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from swir.codegen import emulate
from swir.frontend.onnx_import import import_onnx
from swir.interp.run import run_function
from swir.ir.constants import global_array
from swir.ir.core import FileInit
from swir.passes import pass_class
from swir.passes.manager import PassManager
from swir.printer import print_module
from swir.verifier import verify

from helpers import rng_for

torch = pytest.importorskip("torch", reason="PyTorch is in the test extra")
pytest.importorskip("onnx")
nn = torch.nn

BIN = Path(sys.executable).parent
STEPS = 20
BATCH = 8


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(12, 16), nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.fc3(torch.tanh(self.fc2(torch.relu(self.fc1(x)))))


class CNN(nn.Module):
    """Convolutions (one grouped, one strided), training batch norm, pooling, a linear head."""

    def __init__(self) -> None:
        super().__init__()
        # No bias before the batch norm, which would cancel it: its true
        # gradient is 0, and Adam would follow the sign of rounding noise.
        self.c1 = nn.Conv2d(2, 4, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(4)
        self.c2 = nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=2)
        self.fc = nn.Linear(8 * 4 * 4, 5)

    def forward(self, x):
        x = torch.relu(self.bn(self.c1(x)))
        x = torch.relu(self.c2(x))
        x = nn.functional.avg_pool2d(x, 2)
        return self.fc(x.flatten(1))


MODELS = {"mlp": (MLP, (12,), 4), "cnn": (CNN, (2, 16, 16), 5)}
OPTIMISERS = {
    "sgd": ({"optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 1e-3},
            lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-3)),
    "adam": ({"optimizer": "adam", "lr": 0.01},
             lambda ps: torch.optim.Adam(ps, lr=0.01)),
}


def _data(name: str):
    _, shape, classes = MODELS[name]
    rng = rng_for("train", name)
    xs = rng.standard_normal((STEPS, BATCH) + shape).astype(np.float32)
    # Labels a model can learn: the class of a fixed random projection.
    projection = rng.standard_normal((int(np.prod(shape)), classes))
    ys = np.argmax(xs.reshape(STEPS, BATCH, -1) @ projection, axis=-1).astype(np.int64)
    return xs, ys


def exported(name: str, folder) -> tuple[nn.Module, object]:
    """The PyTorch model (seeded) and its swir module, weights all in the file."""
    cls, shape, _ = MODELS[name]
    torch.manual_seed(0)
    model = cls()
    path = folder / f"{name}.onnx"
    model.eval()
    torch.onnx.export(model, (torch.zeros((BATCH,) + shape),), str(path), dynamo=False,
                      input_names=["x"], output_names=["y"], do_constant_folding=False)
    model.train()
    imported = import_onnx(path, f"{name}.weights", inline_max=0)
    (folder / f"{name}.weights").write_bytes(bytes(imported.weights))
    verify(imported.module)
    return model, imported.module


def train_step_module(module, options: dict):
    step = pass_class("train-step")(**options)
    PassManager([step], verify_each=True).run(module)
    return module


def train_in_swir(module, folder, xs, ys, start: dict | None = None):
    """(losses, final carried values by global name) after len(xs) steps from
    the globals (or from ``start``)."""
    main = module.lookup("main")
    names = list(main.attrs["carried"])
    state = [start[n] if start else global_array(module.lookup(n), folder) for n in names]
    losses = []
    for x, y in zip(xs, ys):
        out = run_function(module, main, [x, y] + state, base_dir=folder)
        losses.append(float(out[0]))
        state = out[1:]
    return losses, dict(zip(names, state))


def train_compiled(module, folder, name: str, xs, ys, ranks: int = 1):
    """(losses, the saved weights file) of the same steps by the program
    swir-cg --train writes, run in the emulation (under mpirun with ranks)."""
    step = folder / f"{name}_step.swir"
    step.write_text(print_module(module))
    r = subprocess.run([str(BIN / "swir-cg"), "-q", "--train", str(step), "-o",
                        str(folder / "proj")], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    program = emulate.build(folder / "proj", module.name)
    np.save(folder / "xs.npy", xs.reshape((-1,) + xs.shape[2:]))
    np.save(folder / "ys.npy", ys.reshape(-1))
    prefix, env = emulate.mpirun(ranks) if ranks > 1 else ([], {})
    r = subprocess.run([*prefix, str(program), "--steps", str(len(xs)), "--input",
                        str(folder / "xs.npy"), "--input", str(folder / "ys.npy"), "--save",
                        str(folder / "out.weights"), "--loss-log", str(folder / "loss.txt")],
                       capture_output=True, text=True, timeout=900, env={**os.environ, **env})
    assert r.returncode == 0, r.stderr
    losses = [float(line.split()[1]) for line in (folder / "loss.txt").read_text().splitlines()]
    return losses, folder / "out.weights"


def train_in_torch(model, make_opt, xs, ys):
    opt = make_opt(model.parameters())
    losses = []
    for x, y in zip(xs, ys):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def torch_value(model, name: str) -> np.ndarray:
    """A swir global's value in the PyTorch model (swir-import stores Gemm's weight
    transposed as NAME.T)."""
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    if name.endswith(".T"):
        return state[name[:-2]].T
    return state[name]


@pytest.mark.parametrize("opt", sorted(OPTIMISERS))
@pytest.mark.parametrize("name", sorted(MODELS))
def test_training_matches_pytorch(name, opt, tmp_path):
    model, module = exported(name, tmp_path)
    options, make_opt = OPTIMISERS[opt]
    train_step_module(module, options)
    xs, ys = _data(name)
    losses, final = train_in_swir(module, tmp_path, xs, ys)
    want = train_in_torch(model, make_opt, xs, ys)
    # f32 through 20 steps: the interpreter rounds each op once from f64,
    # PyTorch every step in f32; the differences compound over the steps.
    np.testing.assert_allclose(losses, want, rtol=1e-4, atol=1e-5)
    # It learns (the oracle is not vacuous): the first batch's loss is lower
    # with the trained weights (a step's loss is computed before its update).
    again, _ = train_in_swir(module, tmp_path, xs[:1], ys[:1], final)
    assert again[0] < losses[0]
    params = [n for n in final if not n.endswith(("_velocity", "_m", "_v", "adam_step"))]
    assert params, "no parameter was trained"
    for n in params:
        np.testing.assert_allclose(final[n], torch_value(model, n), rtol=1e-4, atol=1e-5,
                                   err_msg=n)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_compiled_training_matches_pytorch(name, tmp_path):
    """The same 20 SGD steps by the compiled training program in the emulation:
    its loss log and the weights file it saves against PyTorch's."""
    model, module = exported(name, tmp_path)
    options, make_opt = OPTIMISERS["sgd"]
    train_step_module(module, options)
    xs, ys = _data(name)
    losses, saved = train_compiled(module, tmp_path, name, xs, ys)
    want = train_in_torch(model, make_opt, xs, ys)
    np.testing.assert_allclose(losses, want, rtol=1e-4, atol=1e-5)
    blob = saved.read_bytes()
    for g in module.globals:
        if not isinstance(g.init, FileInit) or g.name not in module.lookup("main").attrs["carried"]:
            continue
        got = np.frombuffer(blob, np.float32, g.type.num_elements, g.init.offset)
        np.testing.assert_allclose(got.reshape(g.type.shape), torch_value(model, g.name),
                                   rtol=1e-4, atol=1e-5, err_msg=g.name)


def _mlp_step(folder: Path, batch: int, ranks: int):
    """The MLP's SGD step for ``ranks`` ranks of ``batch`` rows each."""
    cls, shape, _ = MODELS["mlp"]
    torch.manual_seed(0)
    path = folder / f"mlp{ranks}.onnx"
    torch.onnx.export(cls().eval(), (torch.zeros((batch,) + shape),), str(path), dynamo=False,
                      input_names=["x"], output_names=["y"], do_constant_folding=False)
    imported = import_onnx(path, "mlp.weights", inline_max=0)
    (folder / "mlp.weights").write_bytes(bytes(imported.weights))
    return train_step_module(imported.module, {**OPTIMISERS["sgd"][0], "ranks": ranks})


@pytest.mark.skipif(not all(shutil.which(t) for t in ("mpicc", "mpirun"))
                    and not os.environ.get("SWIR_REQUIRE_MPI"),
                    reason="no mpicc / mpirun (Open MPI) on PATH")
def test_data_parallel_training_equals_one_rank_on_the_whole_batch(tmp_path):
    """4 ranks, batch 16 (4 each), 5 steps: every rank holds the same
    parameters after every step (the interpreter checks each step's carried
    results bit for bit across the ranks) and they equal one rank's on the
    whole batch; then the same by the compiled program under mpirun."""
    xs, ys = _data("mlp")
    xs, ys = xs[:10].reshape(5, 16, -1), ys[:10].reshape(5, 16)
    one = _mlp_step(tmp_path, 16, 1)
    losses1, final1 = train_in_swir(one, tmp_path, xs, ys)
    four = _mlp_step(tmp_path, 4, 4)
    assert four.attrs["ranks"] == 4
    losses4, final4 = train_in_swir(four, tmp_path, xs, ys)
    # The same sums in another order (per rank, then across the ranks).
    np.testing.assert_allclose(losses4, losses1, rtol=1e-5)
    for n in final1:
        np.testing.assert_allclose(final4[n], final1[n], rtol=1e-5, atol=1e-6, err_msg=n)
    losses, saved = train_compiled(four, tmp_path, "mlp", xs, ys, ranks=4)
    np.testing.assert_allclose(losses, losses1, rtol=1e-5)
    blob = saved.read_bytes()
    for g in four.globals:
        if isinstance(g.init, FileInit) and g.name in final1:
            got = np.frombuffer(blob, np.float32, g.type.num_elements, g.init.offset)
            np.testing.assert_allclose(got.reshape(g.type.shape), final1[g.name], rtol=1e-5,
                                       atol=1e-6, err_msg=g.name)
