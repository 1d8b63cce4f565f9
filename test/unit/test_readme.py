"""The README's commands work as pasted: every line of its "Using it" block
runs, in order, in bash from a folder laid out like the repository (examples/
and bench/ linked in), with the installed tools first on PATH; the benchmark
block names scripts that exist and accept its arguments' flags."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
BIN = Path(sys.executable).parent


def blocks() -> list[str]:
    """The ```sh blocks of the README's "Using it" section."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Using it", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


def test_the_using_it_commands_run_as_pasted(tmp_path):
    walkthrough = blocks()[0]
    assert "'-split-loop{" in walkthrough and "-split-loop{" not in walkthrough.replace(
        "'-split-loop{", "")                       # braced flags are quoted for bash
    for name in ("examples", "bench"):
        (tmp_path / name).symlink_to(ROOT / name)
    script = "set -euo pipefail\n" + walkthrough
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    p = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-4000:]
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
