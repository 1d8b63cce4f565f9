"""What a user sees of long work: a progress bar on a terminal (which pass,
which kernel of how many), nothing of it otherwise or with -q, one closing
line saying what was written where; and --help stating each pass option's
effective default at each -O level."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

from swir.codegen import emulate

BIN = Path(sys.executable).parent
ROOT = Path(__file__).parents[2]
MLP = ROOT / "examples" / "mlp.swir"


def on_a_terminal(*argv: str | Path, size: tuple[int, int] = (30, 120),
                  env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run a tool with its stdin, stdout and stderr on a pseudo-terminal of
    ``size`` (rows, columns), without $COLUMNS / $LINES unless ``env`` sets
    them; what it wrote there, and its exit status."""
    pid, fd = pty.fork()
    if pid == 0:                                # the child: size the terminal, run the tool
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", *size, 0, 0))
        # tqdm redraws at most every 0.1 s: on a fast machine a short pass would
        # show no frame after its first; every update drawn instead
        environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        environ = {**environ, "TQDM_MININTERVAL": "0", **(env or {})}
        os.execve(str(BIN / argv[0]), [str(a) for a in argv], environ)
    out = b""
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:                         # EIO: the child closed the terminal
            break
        if not data:
            break
        out += data
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), out.decode("utf-8", "replace")


def test_swir_cg_shows_passes_and_kernels_on_a_terminal(tmp_path):
    status, text = on_a_terminal("swir-cg", "-O3", MLP, "-o", tmp_path / "p")
    assert status == 0, text
    frames = [f for f in re.split(r"[\r\n]", text) if f.strip()]
    assert any(re.match(r"-ldm-plan \(\d+/\d+\):.*\d+/\d+ \[.*nest.*@", f) for f in frames), frames
    assert any(f.startswith("-fuse (") for f in frames), frames
    assert re.fullmatch(f"swir-cg: wrote {tmp_path / 'p'} \\(\\d+ CPE kernels\\); make -C "
                        f"{tmp_path / 'p'} emu builds {tmp_path / 'p' / 'mlp_emu'}", frames[-1])


def bar_frames(text: str, stage: str) -> list[str]:
    """The frames drawn of ``stage``'s bar once it counts items (``|`` ... ``n/N [``)."""
    return [f for f in re.split(r"[\r\n]", text)
            if f.startswith(stage) and re.search(r"\| \d+/\d+ \[", f)]


def test_a_terminal_of_size_0x0_gets_an_80_column_bar_that_advances(tmp_path):
    """`script` gives its child a terminal that reports 0 x 0: tqdm sized its
    bar -1 columns there and drew nothing; -ldm-plan's bar never showed."""
    status, text = on_a_terminal("swir-cg", "-O3", MLP, "-o", tmp_path / "p", size=(0, 0))
    assert status == 0, text
    frames = bar_frames(text, "-ldm-plan (")
    assert frames, text
    done = [int(re.search(r"\| (\d+)/(\d+) \[", f).group(1)) for f in frames]
    assert done == sorted(done) and done[-1] > 0, frames          # it advances
    assert {len(f) for f in frames} == {79}, frames                # 80 columns, less tqdm's one
    assert text.rstrip().endswith(f"make -C {tmp_path / 'p'} emu builds "
                                  f"{tmp_path / 'p' / 'mlp_emu'}")


def test_a_terminal_of_size_0x0_takes_columns_from_the_environment(tmp_path):
    status, text = on_a_terminal("swir-report", "-O0", MLP, size=(0, 0),
                                 env={"COLUMNS": "100"})
    assert status == 0, text
    frames = bar_frames(text, "-ldm-plan (")
    assert frames and {len(f) for f in frames} == {99}, frames


def test_swir_cg_quiet_on_a_terminal(tmp_path):
    status, text = on_a_terminal("swir-cg", "-q", MLP, "-o", tmp_path / "p")
    assert status == 0 and text == "", text


def test_swir_cg_not_on_a_terminal_prints_only_its_closing_line(tmp_path):
    p = subprocess.run([str(BIN / "swir-cg"), str(MLP), "-o", str(tmp_path / "p")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout == ""
    assert re.fullmatch(f"swir-cg: wrote {tmp_path / 'p'} \\(\\d+ CPE kernels\\); make -C "
                        f"{tmp_path / 'p'} emu builds {tmp_path / 'p' / 'mlp_emu'}\n", p.stderr)
    q = subprocess.run([str(BIN / "swir-cg"), "--quiet", str(MLP), "-o", str(tmp_path / "q")],
                       capture_output=True, text=True, timeout=300)
    assert q.returncode == 0 and q.stderr == ""


def test_the_closing_line_names_the_program_make_emu_builds(tmp_path):
    src = tmp_path / "m.swir"
    src.write_text(MLP.read_text().replace('module "mlp"', 'module "my model"'))
    (tmp_path / "mlp.weights").write_bytes((ROOT / "examples" / "mlp.weights").read_bytes())
    p = subprocess.run([str(BIN / "swir-cg"), "-O0", str(src), "-o", str(tmp_path / "p")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    program = p.stderr.split(" builds ")[1].strip()
    subprocess.run(["make", "-s", "-C", str(tmp_path / "p"), "emu"], check=True,
                   capture_output=True)
    assert Path(program).is_file() and os.access(program, os.X_OK)
    emulate.sunway_check(tmp_path / "p")


def test_swir_report_progress_and_closing_line(tmp_path):
    status, text = on_a_terminal("swir-report", "-O0", MLP, "--json", tmp_path / "r.json")
    assert status == 0, text
    assert "-ldm-plan (2/3)" in text and "modeling" in text
    assert text.rstrip().endswith(f"swir-report: wrote {tmp_path / 'r.json'}")
    p = subprocess.run([str(BIN / "swir-report"), "-q", "-O0", str(MLP), "--json",
                        str(tmp_path / "q.json")], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stderr == "" and "matmul" in p.stdout


def test_swir_opt_draws_nothing_when_not_on_a_terminal(tmp_path):
    p = subprocess.run([str(BIN / "swir-opt"), "-O3", str(MLP)], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0 and p.stderr == ""


# -- --help -----------------------------------------------------------------------------------

def _help(tool: str) -> dict[str, str]:
    out = subprocess.run([str(BIN / tool), "--help"], capture_output=True, text=True,
                         check=True).stdout
    return {m.group(1): m.group(0) for m in re.finditer(r"^  --([a-z-]+)=<\w+>.*$", out, re.M)}


def test_help_states_the_default_at_each_level():
    for tool in ("swir-cg", "swir-report"):
        lines = _help(tool)
        assert lines["strategy"].endswith("(-ldm-plan; default: greedy at -O0, -O1; "
                                          "search at -O3)"), lines["strategy"]
        # -insert-dma double-buffers by default; the planners leave no room unless asked
        assert lines["double-buffer"].endswith("default: true (-insert-dma); false (-ldm-plan, "
                                               "-layout))"), lines["double-buffer"]
        # the lowering's own description, not a trial lowering's
        assert "--ldm-size=<int>           LDM bytes per CPE (-ldm-plan; also " \
            in lines["ldm-size"], lines["ldm-size"]
        assert "trial" not in lines["ldm-size"]
