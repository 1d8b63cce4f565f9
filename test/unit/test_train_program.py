"""The training program (swir-cg --train, issue 45 items 4 and 5): a hand-written
linear-regression step (forward, mean squared error, its gradient written out,
SGD with momentum) compiled and run for several steps under the emulation; its
loss log and the weights it saves equal the same steps run in the graph
interpreter (each step's new values fed back as the next step's parameters)
within f32 tolerance; the saved file is the module's weights file with only the
trained values changed; bad inputs are one-line errors before any step; and a
2-rank data-parallel program (the step's gradients summed by allreduce) equals
one rank on the whole batch.

Tolerance: f32 rtol 1e-5, atol 1e-6: the C adds a matmul's products in the
order the interpreter does, but the CPE kernels may contract or vectorise them
differently; the 2-rank run adds the two halves' partial sums (rtol 1e-5).
"""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from swir.codegen import emulate
from swir.interp.run import run_function
from swir.ir.constants import global_array
from swir.parser import parse_module

BIN = Path(sys.executable).parent
RTOL, ATOL = 1e-5, 1e-6
STEPS = 7                      # more than the 3 batches: step 4 reads batch 1 again
W0 = np.array([[0.5], [-0.25], [1.0]], np.float32)
B0 = np.array([0.1], np.float32)
FROZEN = np.full(4, 7.0, np.float32)     # after the trained values: --save keeps it


def step_module(batch: int, ranks: int = 1) -> str:
    """One SGD-with-momentum step of linear regression on ``batch`` rows (of
    4 * ranks in all): with ranks, each rank's gradient and loss are its
    share of the whole batch's, summed by allreduce."""
    attrs = f' {{ranks = {ranks}, split = "data"}}' if ranks > 1 else ""
    scale = 2.0 / (batch * ranks)         # d mean(e^2) / de over the whole batch

    def summed(name: str, t: str) -> str:
        if ranks == 1:          # one rank's part is the whole: + 0
            return f"  %{name}_zero = const dense<0.0> : {t}\n" \
                   f"  %{name} = add %{name}_part, %{name}_zero : {t}\n"
        return f"  %{name} = allreduce %{name}_part {{ranks = {ranks}}} : {t}\n"
    return f"""module "lin"
stage graph{attrs}

global @w : <3 x 1 x f32> = file "lin.weights" offset 0
global @b : <1 x f32> = file "lin.weights" offset 12
global @w_velocity : <3 x 1 x f32> = dense<0.0>

func @main(%x: <{batch} x 3 x f32>, %y: <{batch} x 1 x f32>, %w0: <3 x 1 x f32>, %b0: <1 x f32>, %v0: <3 x 1 x f32>) -> (<1 x f32>, <3 x 1 x f32>, <1 x f32>, <3 x 1 x f32>) attributes {{carried = [@w, @b, @w_velocity]}} {{
'entry:
  %p = matmul %x, %w0 : <{batch} x 1 x f32>
  %q = add %p, %b0 : <{batch} x 1 x f32>
  %e = sub %q, %y : <{batch} x 1 x f32>
  %e2 = mul %e, %e : <{batch} x 1 x f32>
  %sq = reduce_sum %e2 {{axes = [0], keepdims = false}} : <1 x f32>
  %share = const dense<{1.0 / (batch * ranks)}> : <1 x f32>
  %loss_part = mul %sq, %share : <1 x f32>
{summed("loss", "<1 x f32>")}  %scale = const dense<{scale}> : <{batch} x 1 x f32>
  %de = mul %e, %scale : <{batch} x 1 x f32>
  %xt = transpose %x {{perm = [1, 0]}} : <3 x {batch} x f32>
  %gw_part = matmul %xt, %de : <3 x 1 x f32>
  %gb_part = reduce_sum %de {{axes = [0], keepdims = false}} : <1 x f32>
{summed("gw", "<3 x 1 x f32>")}{summed("gb", "<1 x f32>")}  %mu = const dense<0.9> : <3 x 1 x f32>
  %vm = mul %v0, %mu : <3 x 1 x f32>
  %v1 = add %vm, %gw : <3 x 1 x f32>
  %lr = const dense<0.05> : <3 x 1 x f32>
  %dw = mul %v1, %lr : <3 x 1 x f32>
  %w1 = sub %w0, %dw : <3 x 1 x f32>
  %lrb = const dense<0.05> : <1 x f32>
  %db = mul %gb, %lrb : <1 x f32>
  %b1 = sub %b0, %db : <1 x f32>
  return %loss, %w1, %b1, %v1
}}
"""


QUADRATIC = """module "quad"
stage graph

global @w : <2 x 2 x f32> = dense<[[1.0, -2.0], [3.0, 0.5]]>

func @main(%w0: <2 x 2 x f32>) -> (<f32>, <2 x 2 x f32>) attributes {carried = [@w]} {
'entry:
  %sq = mul %w0, %w0 : <2 x 2 x f32>
  %loss = reduce_sum %sq {axes = [0, 1], keepdims = false} : <f32>
  %k = const dense<0.75> : <2 x 2 x f32>
  %w1 = mul %w0, %k : <2 x 2 x f32>
  return %loss, %w1
}
"""


def write_data(d: Path) -> tuple[np.ndarray, np.ndarray]:
    """lin.weights (w, b, then a frozen tensor) and 3 batches of 4 rows."""
    (d / "lin.weights").write_bytes(W0.tobytes() + B0.tobytes() + FROZEN.tobytes())
    rng = np.random.default_rng(45)
    x = rng.standard_normal((12, 3)).astype(np.float32)
    y = (x @ np.array([[1.0], [2.0], [-1.0]], np.float32) + 0.5).astype(np.float32)
    np.save(d / "x.npy", x)
    np.save(d / "y.npy", y)
    return x, y


def swir_cg(*args) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "swir-cg"), "-q", *map(str, args)], capture_output=True,
                          text=True, timeout=600)


def build(d: Path, source: str) -> Path:
    (d / "lin.swir").write_text(source)
    r = swir_cg("--train", d / "lin.swir", "-o", d / "proj")
    assert r.returncode == 0, r.stderr
    return emulate.build(d / "proj", "lin")


@pytest.fixture(scope="module")
def lin(tmp_path_factory) -> tuple[Path, Path]:
    """The one-rank program and its folder (with lin.weights, x.npy, y.npy)."""
    d = tmp_path_factory.mktemp("train")
    write_data(d)
    return build(d, step_module(4)), d


def interpreted(d: Path, steps: int) -> tuple[list[float], list[np.ndarray]]:
    """The losses and the final carried values of ``steps`` steps in the graph
    interpreter, batch s mod 3 at step s."""
    module = parse_module(step_module(4), str(d / "lin.swir"))
    f = module.lookup("main")
    state = [global_array(module.lookup(n), d) for n in ("w", "b", "w_velocity")]
    x, y = np.load(d / "x.npy"), np.load(d / "y.npy")
    losses = []
    for s in range(steps):
        b = s % 3
        loss, *state = run_function(module, f, [x[4 * b:4 * b + 4], y[4 * b:4 * b + 4], *state],
                                    d)
        losses.append(float(loss[0]))
    return losses, state


def train(program: Path, d: Path, *args, ranks: int | None = None
          ) -> subprocess.CompletedProcess:
    prefix, env = emulate.mpirun(ranks) if ranks else ([], {})
    return subprocess.run([*prefix, str(program), "--input", d / "x.npy", "--input",
                           d / "y.npy", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **env})


def read_log(path: Path) -> tuple[list[int], list[float]]:
    rows = [line.split() for line in path.read_text().splitlines()]
    return [int(s) for s, _ in rows], [float(v) for _, v in rows]


def saved(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """w, b and the frozen tensor, at the module's offsets in a weights file."""
    data = path.read_bytes()
    assert len(data) == 32
    return (np.frombuffer(data, np.float32, 3, 0).reshape(3, 1),
            np.frombuffer(data, np.float32, 1, 12), np.frombuffer(data, np.float32, 4, 16))


def test_losses_and_saved_weights_equal_the_interpreter(lin, tmp_path):
    program, d = lin
    r = train(program, d, "--steps", STEPS, "--save", tmp_path / "trained.weights",
              "--loss-log", tmp_path / "loss.txt", "--stats", tmp_path / "stats.json")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert json.loads((tmp_path / "stats.json").read_text())["runs"] == STEPS
    losses, (w, b, _) = interpreted(d, STEPS)
    steps, logged = read_log(tmp_path / "loss.txt")
    assert steps == list(range(1, STEPS + 1))
    np.testing.assert_allclose(logged, losses, rtol=RTOL, atol=ATOL)
    assert logged[-1] < logged[0] / 4          # it learns: the test can fail
    tw, tb, frozen = saved(tmp_path / "trained.weights")
    np.testing.assert_allclose(tw, w, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(tb, b, rtol=RTOL, atol=ATOL)
    assert not np.allclose(tw, W0)
    np.testing.assert_array_equal(frozen, FROZEN)     # not carried: the original bytes
    # One step is the default.
    r = train(program, d, "--loss-log", tmp_path / "one.txt")
    assert r.returncode == 0 and read_log(tmp_path / "one.txt")[0] == [1]


def test_the_c_has_no_backslash_outside_comments_and_strings(lin):
    """As test_codegen_names asks of every generated file (main.c's training
    support, program_train.c, included)."""
    program, _ = lin
    for name in ("main.c", "layers.c", "layers_slave.c", "layers_mix.h"):
        text = (program.parent / name).read_text()
        code = re.sub(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'", " ",
                      text, flags=re.DOTALL)
        assert "\\" not in code, name
    assert "check_replicas" in (program.parent / "main.c").read_text()


def one_line_error(r: subprocess.CompletedProcess, text: str) -> None:
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and text in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_bad_inputs_are_one_line_errors_before_any_step(lin, tmp_path):
    program, d = lin
    rows10 = tmp_path / "rows10.npy"
    np.save(rows10, np.zeros((10, 3), np.float32))
    wide = tmp_path / "wide.npy"
    np.save(wide, np.zeros((12, 4), np.float32))
    empty = tmp_path / "empty.npy"
    np.save(empty, np.zeros((0, 3), np.float32))
    y8 = tmp_path / "y8.npy"
    np.save(y8, np.zeros((8, 1), np.float32))
    save = tmp_path / "w.out"
    cases = [
        ([rows10, d / "y.npy"], "a multiple of 4"),
        ([wide, d / "y.npy"], "has shape (12, 4); expected whole batches of buf<4 x 3 x f32>"),
        ([empty, d / "y.npy"], "holds no batch"),
        ([d / "x.npy", y8], "holds 2 batches; input 1 holds 3"),
        ([d / "x.npy"], "expected 2 --input files (one per data parameter), got 1"),
    ]
    for inputs, message in cases:
        args = [a for p in inputs for a in ("--input", p)]
        r = subprocess.run([str(program), *map(str, args), "--save", str(save)],
                           capture_output=True, text=True, timeout=60)
        one_line_error(r, message)
    for args, message in [(["--save", tmp_path / "no" / "w"], "cannot write output"),
                          (["--save", tmp_path / "w.npy"], "not a .npy file"),
                          (["--steps", "0"], "--steps needs a count from 1"),
                          (["--loss-log", save, "--save", save], "")]:
        one_line_error(train(program, d, *args), message)
    assert not save.exists()


def test_without_carried_train_is_one_line_error(tmp_path):
    source = step_module(4).replace(" attributes {carried = [@w, @b, @w_velocity]}", "")
    (tmp_path / "m.swir").write_text(source)
    r = swir_cg("--train", tmp_path / "m.swir", "-o", tmp_path / "out")
    one_line_error(r, "--train: @main has no 'carried' attribute")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("old, new, message", [
    ("carried = [@w]", "carried = [@nope]", "'carried': @nope is not a global"),
    ("carried = [@w]", "carried = 3", "'carried' must be a non-empty list of globals"),
    ("(<f32>, <2 x 2 x f32>)", "(<2 x f32>, <2 x 2 x f32>)",
     "result 0 of a training step is its loss, one float; got <2 x f32>")])
def test_a_step_that_does_not_match_its_globals_is_refused(tmp_path, old, new, message):
    """A located error (the function's line under it), exit 1, no project."""
    source = QUADRATIC.replace(old, new)
    if "<2 x f32>, " in new:
        source = source.replace("%loss = reduce_sum %sq {axes = [0, 1], keepdims = false} : <f32>",
                                "%loss = reduce_sum %sq {axes = [0], keepdims = false} : <2 x f32>")
    (tmp_path / "m.swir").write_text(source)
    r = swir_cg("--train", tmp_path / "m.swir", "-o", tmp_path / "out")
    assert r.returncode == 1 and message in r.stderr.splitlines()[0], r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "out").exists()


def test_a_terminal_gets_a_progress_bar(lin, tmp_path):
    program, d = lin
    main, other = pty.openpty()
    try:
        r = subprocess.run([str(program), "--input", str(d / "x.npy"), "--input",
                            str(d / "y.npy"), "--steps", "3"], stderr=other,
                           stdout=subprocess.DEVNULL, timeout=60)
        os.close(other)
        other = -1
        text = os.read(main, 65536).decode()
    finally:
        os.close(main)
        if other >= 0:
            os.close(other)
    assert r.returncode == 0
    assert "training |" in text and "3/3 steps, loss" in text and text.endswith("\r\n"), text
    # Not a terminal: nothing on stderr (the other tests' runs).


HAVE_MPI = all(shutil.which(t) for t in ("mpicc", "mpirun"))


@pytest.mark.skipif(not HAVE_MPI and not os.environ.get("SWIR_REQUIRE_MPI"),
                    reason="no mpicc / mpirun (Open MPI) on PATH")
def test_two_ranks_equal_one_rank_on_the_whole_batch(lin, tmp_path):
    """Each rank reads 2 rows of each batch of 4; the allreduce of the partial
    gradients leaves every rank the same parameters (checked by the program
    after every step), equal to one rank's on all 4 rows. A step without
    that allreduce fails the check."""
    one, d = lin
    for name in ("lin.weights", "x.npy", "y.npy"):
        shutil.copy(d / name, tmp_path / name)
    program = build(tmp_path, step_module(2, ranks=2))
    r = train(program, tmp_path, "--steps", STEPS, "--save", tmp_path / "two.weights",
              "--loss-log", tmp_path / "two.txt", ranks=2)
    assert r.returncode == 0, r.stderr
    r = train(one, d, "--steps", STEPS, "--save", tmp_path / "one.weights",
              "--loss-log", tmp_path / "one.txt")
    assert r.returncode == 0, r.stderr
    np.testing.assert_allclose(read_log(tmp_path / "two.txt")[1],
                               read_log(tmp_path / "one.txt")[1], rtol=RTOL, atol=ATOL)
    for two_part, one_part in zip(saved(tmp_path / "two.weights"),
                                  saved(tmp_path / "one.weights")):
        np.testing.assert_allclose(two_part, one_part, rtol=RTOL, atol=ATOL)
    # Without the allreduce of the weight's gradient each rank steps on its own
    # rows: the check after step 1 stops the program, nothing is saved.
    diverging = step_module(2, ranks=2).replace("%gw = allreduce %gw_part {ranks = 2}",
                                                "%gw = add %gw_part, %gw_part")
    assert diverging != step_module(2, ranks=2)
    shutil.rmtree(tmp_path / "proj")
    program = build(tmp_path, diverging)
    r = train(program, tmp_path, "--steps", STEPS, "--save", tmp_path / "bad.weights",
              ranks=2)
    lines = [line for line in r.stderr.splitlines() if ": error: " in line]
    assert r.returncode != 0 and len(lines) == 1, r.stderr      # rank 0 says it once
    assert "after step 1 the ranks hold different values of @w (carried state 1)" in lines[0]
    assert not (tmp_path / "bad.weights").exists()


def test_a_step_without_data_from_a_dense_state(tmp_path):
    """No data parameter, a rank-0 loss, a non-splat dense first value (in
    carried.bin, after the weights file, here none): each step scales w by
    0.75, so the loss (the sum of squares) by 0.5625. Nothing to --save."""
    (tmp_path / "quad.swir").write_text(QUADRATIC)
    r = swir_cg("--train", tmp_path / "quad.swir", "-o", tmp_path / "proj")
    assert r.returncode == 0, r.stderr
    program = emulate.build(tmp_path / "proj", "quad")
    log = tmp_path / "loss.txt"
    r = subprocess.run([str(program), "--steps", "3", "--loss-log", str(log)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    steps, losses = read_log(log)
    # Exact: every product is a short binary fraction; the log's 9 digits read back to the f32.
    assert steps == [1, 2, 3]
    np.testing.assert_array_equal(np.float32(losses),
                                  np.float32([14.25, 14.25 * 0.5625, 14.25 * 0.5625 ** 2]))
    one_line_error(subprocess.run([str(program), "--save", str(tmp_path / "w")],
                                  capture_output=True, text=True, timeout=60),
                   "--save: no carried value comes from a weights file")
