"""The README's commands work as pasted: every line of its "Using it" block,
and of its "Your own ONNX model" section, runs, in order, in bash from a
folder laid out like the repository (examples/, bench/ and scripts/ linked
in), with the installed tools first on PATH; the benchmark block names
scripts that exist and accept its arguments' flags."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).parents[2]
BIN = Path(sys.executable).parent


def blocks(title: str = "Using it") -> list[str]:
    """The ```sh blocks of the README's section ``## title``."""
    text = (ROOT / "README.md").read_text()
    assert f"\n## {title}\n" in text, title
    section = text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


def run_as_pasted(commands: str, folder: Path, timeout: float) -> subprocess.CompletedProcess:
    """``commands`` run by bash, stopping at the first that fails, in
    ``folder`` laid out like the repository, the installed tools first on PATH."""
    for name in ("examples", "bench", "scripts"):
        (folder / name).symlink_to(ROOT / name)
    script = "set -euo pipefail\n" + commands
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    p = subprocess.run(["bash", "-c", script], cwd=folder, env=env, capture_output=True,
                       text=True, timeout=timeout)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-4000:]
    return p


def test_the_using_it_commands_run_as_pasted(tmp_path):
    walkthrough = blocks()[0]
    assert "'-split-loop{" in walkthrough and "-split-loop{" not in walkthrough.replace(
        "'-split-loop{", "")                       # braced flags are quoted for bash
    p = run_as_pasted(walkthrough, tmp_path, timeout=900)
    out = tmp_path / "out"
    for made in ("mlp.dma.swir", "mlp.split.swir", "stats.json", "mlp/mlp_emu", "y.npy",
                 "s.json", "roofline.png", "cost.json", "dcgan.swir", "dcgan/main.c",
                 "resnet4/resnet_emu", "y4.npy"):
        assert (out / made).exists(), made
    assert "swir-cg: wrote out/mlp" in p.stderr and "builds out/mlp/mlp_emu" in p.stderr


def test_the_benchmark_commands_name_real_scripts_and_flags():
    for line in blocks()[1].splitlines():
        for command in line.split("#")[0].split(";"):
            words = command.split()
            if not words:
                continue
            assert words[0] == "python" and (ROOT / words[1]).is_file(), command
            flags = [w for w in words[2:] if w.startswith("-")]
            text = (ROOT / words[1]).read_text()
            for flag in flags:
                assert f'"{flag}"' in text, (command, flag)


def test_the_own_model_section_runs_as_pasted(tmp_path):
    """The new user's path: ONNX in, a program built, an input made, the run
    checked against onnxruntime, the modeled time. Its one block is all of
    the section's commands; the model is the zoo's DCGAN at 16 x 16, which
    takes the whole path in about 12 s (the smallest the zoo writes)."""
    (steps,) = blocks("Your own ONNX model")
    p = run_as_pasted(steps, tmp_path, timeout=600)
    out = tmp_path / "out"
    for made in ("model.onnx", "model.swir", "model.weights", "model/model_emu", "x.npy",
                 "ref.npy", "y.npy"):
        assert (out / made).exists(), made
    assert "func @main(%z: <1 x 100 x 1 x 1 x f32>)" in p.stdout       # the grep line
    assert "builds out/model/model_emu" in p.stderr
    # emu_check's verdict, its last line; swir-report's table after it
    checked = p.stdout.split("\nPASS\n", 1)
    assert len(checked) == 2 and "result #0 float32[1, 3, 16, 16] vs out/ref.npy: PASS" \
        in checked[0], p.stdout[-3000:]
    assert "\n   total (" in checked[1]
    # the program's own output, as written by the line that runs it
    np.testing.assert_allclose(np.load(out / "y.npy"), np.load(out / "ref.npy"), rtol=1e-4,
                               atol=1e-5)
