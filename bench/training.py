"""Training benchmarks (issue 45; docs/performance.md, "Training").

    python bench/training.py modeled [--batch 4] [--size 224]
        ResNet-18 (bench/resnet18_graph.py): its training step's modeled time
        against its forward pass's (swir-report, -O3), and the step's arena
        against the peak-live lower bound (-lower-loops --stats).
    python bench/training.py pytorch [--batch 4] [--size 224]
        ResNet-18 in PyTorch (random weights, seed 0): one SGD step compiled
        (swir-cg --train) and run in the emulation, against PyTorch's step.

Each prints its figures and the wall time it took.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def tool(name: str, *args: str) -> str:
    out = subprocess.run([str(BIN / name), *args], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{name} {' '.join(args)} failed:\n{out.stderr}")
    return out.stdout + out.stderr


def modeled(a: argparse.Namespace, work: Path) -> None:
    forward = work / "r18.swir"
    subprocess.run([sys.executable, str(ROOT / "bench" / "resnet18_graph.py"), "--batch",
                    str(a.batch), "--size", str(a.size), "-o", str(forward)], check=True)
    step = work / "r18_step.swir"
    tool("swir-opt", f"-train-step{{lr=0.01,momentum=0.9,recompute={a.recompute}}}",
         str(forward), "-o", str(step))
    times = {}
    for name, path in (("forward", forward), ("training step", step)):
        t0 = time.time()
        tool("swir-report", str(path), "-q", f"--strategy={a.strategy}", "--json",
             str(work / f"{path.stem}.json"))
        report = json.loads((work / f"{path.stem}.json").read_text())
        times[name] = report["totals"]["modeled_s"]
        print(f"{name}: modeled {times[name] * 1e3:.2f} ms ({len(report['kernels'])} "
              f"kernels; report took {time.time() - t0:.0f} s)")
    print(f"training step / forward: {times['training step'] / times['forward']:.2f}x")
    stats = tool("swir-opt", "-O3", "-lower-loops", "--stats", str(step), "-o",
                 str(work / "step.loop.swir"))
    arena = _stat(stats, "arena size")
    peak = _stat(stats, "peak live size")
    print(f"training step arena {arena:,} bytes; peak-live lower bound {peak:,} bytes "
          f"({arena / peak:.3f}x)")


def resnet18(nn):
    """torchvision's ResNet-18 (He et al. 2016: BasicBlocks [2, 2, 2, 2], 1000
    classes), written out: its layers, names and initialisation are PyTorch's
    defaults, which is all the comparison needs."""
    def block(cin: int, cout: int, stride: int):
        down = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
        return basic_block(nn, cin, cout, stride, down)
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [block(cin, cout, stride), block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)]
    return nn.Sequential(*layers)


def basic_block(nn, cin: int, cout: int, stride: int, down):
    """ResNet's BasicBlock (torch is imported only when this benchmark runs)."""
    class BasicBlock(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = down

        def forward(self, x):
            y = self.bn2(self.conv2(nn.functional.relu(self.bn1(self.conv1(x)))))
            return nn.functional.relu(y + (x if self.down is None else self.down(x)))
    return BasicBlock()


def pytorch(a: argparse.Namespace, work: Path) -> None:
    """One SGD step of ResNet-18, compiled and emulated, against PyTorch's."""
    import torch
    torch.manual_seed(0)
    model = resnet18(torch.nn)
    shape = (a.batch, 3, a.size, a.size)
    model.eval()
    torch.onnx.export(model, (torch.zeros(shape),), str(work / "r18.onnx"), dynamo=False,
                      input_names=["x"], output_names=["y"], do_constant_folding=False)
    model.train()
    tool("swir-import", str(work / "r18.onnx"), "-o", str(work / "r18.swir"), "--inline-max", "0")
    tool("swir-opt", f"-train-step{{lr=0.01,momentum=0.9,recompute={a.recompute}}}",
         str(work / "r18.swir"), "-o", str(work / "step.swir"))
    t0 = time.time()
    tool("swir-cg", "-q", "--train", f"--strategy={a.strategy}", str(work / "step.swir"), "-o",
         str(work / "proj"))
    subprocess.run(["make", "-s", "-C", str(work / "proj"), "emu"], check=True,
                   capture_output=True)
    print(f"compiled in {time.time() - t0:.0f} s")
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.integers(0, 1000, a.batch).astype(np.int64)
    np.save(work / "x.npy", x)
    np.save(work / "y.npy", y)
    program = next((work / "proj").glob("*_emu"))
    t0 = time.time()
    subprocess.run([str(program), "--input", str(work / "x.npy"), "--input", str(work / "y.npy"),
                    "--save", str(work / "trained.weights"), "--loss-log",
                    str(work / "loss.txt")], check=True)
    print(f"one step emulated in {time.time() - t0:.0f} s; loss "
          f"{(work / 'loss.txt').read_text().split()[1]}")
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss = torch.nn.functional.cross_entropy(model(torch.tensor(x)), torch.tensor(y))
    loss.backward()
    opt.step()
    print(f"PyTorch loss {loss.item():.7g}")
    _compare_weights(work, model)


def _compare_weights(work: Path, model) -> None:
    """Every trained parameter in the saved weights file against PyTorch's."""
    from swir.parser import parse_file
    step = parse_file(str(work / "step.swir"))
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    blob = (work / "trained.weights").read_bytes()
    worst, failed = 0.0, []
    for name in step.lookup("main").attrs["carried"]:
        g = step.lookup(name)
        key = name[:-2] if name.endswith(".T") else name
        if key not in state or not hasattr(g.init, "offset"):
            continue
        got = np.frombuffer(blob, np.float32, g.type.num_elements, g.init.offset)
        want = state[key].T if name.endswith(".T") else state[key]
        got = got.reshape(want.shape)
        err = np.abs(got - want) / (1e-5 / 1e-4 + np.abs(want))
        worst = max(worst, float(err.max()))
        if not np.allclose(got, want, rtol=1e-4, atol=1e-5):
            failed.append(name)
    print(f"weights after the step: {'equal' if not failed else 'DIFFER'} to PyTorch's "
          f"(rtol 1e-4, atol 1e-5); differing: {failed or 'none'}")


def _stat(text: str, name: str) -> int:
    """A figure of swir-opt --stats: ``NAME (bytes): N``."""
    found = re.search(re.escape(name) + r" \(bytes\): (\d+)", text)
    if found is None:
        sys.exit(f"no '{name}' in the statistics:\n{text}")
    return int(found.group(1))


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=("modeled", "pytorch"))
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--recompute", default="none")
    # The LDM plan search has a time budget, so its plans (and the modeled
    # times) depend on the machine's load; greedy plans do not.
    p.add_argument("--strategy", default="search", choices=("search", "greedy"))
    a = p.parse_args(argv)
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        {"modeled": modeled, "pytorch": pytorch}[a.what](a, Path(tmp))
    print(f"({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main(sys.argv[1:])
