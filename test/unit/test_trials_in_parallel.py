"""-fold-batchnorm, -layout and -fuse measure their trial lowerings in
forked processes (issue 25, item 5: trial.measure_ahead), then decide one
by one as before: the module, the statistics and every measurement are the
same as one process's; what the workers learn (the dependence answers)
comes back to the parent (swir.parallel.memo)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from swir import parallel
from swir.costmodel import trial
from swir.parser import parse_module
from swir.passes import pass_class
from swir.passes.manager import PassManager
from swir.printer import print_module

RESNET = Path(__file__).parents[2] / "examples" / "resnet.swir"
PASSES = ["fold-batchnorm", "layout", "cse", "dce", "fuse"]


def compile_graph(jobs: int, monkeypatch) -> tuple[str, list[dict], dict, int]:
    """The example ResNet after the passes (trials measured in ``jobs``
    processes, none remembered before), their statistics, every trial's
    measurement, and how many trials this process lowered itself."""
    monkeypatch.setattr(trial, "_CACHE", {})
    monkeypatch.setattr(parallel, "_MEMOS", {})
    lowered = []
    real = trial._measure
    monkeypatch.setattr(trial, "_measure", lambda m, plan: lowered.append(1) or real(m, plan))
    m = parse_module(RESNET.read_text(), str(RESNET))
    passes = [pass_class(n)(jobs=jobs) if n in ("fold-batchnorm", "layout", "fuse")
              else pass_class(n)() for n in PASSES]
    pm = PassManager(passes, verify_each=True)
    pm.run(m)
    return print_module(m), [p.statistics for p in passes], dict(trial._CACHE), len(lowered)


def test_trials_measured_ahead_decide_as_one_process(monkeypatch):
    from swir.passes.buffered.ldm_plan import DEPENDENCES
    text1, stats1, costs1, lowered1 = compile_graph(1, monkeypatch)
    tested1 = dict(parallel.memo(DEPENDENCES))
    text2, stats2, costs2, lowered2 = compile_graph(2, monkeypatch)
    # the nests the workers tested are known here, with the same answers
    assert tested1 and tested1.items() <= parallel.memo(DEPENDENCES).items()
    assert text2 == text1 and stats2 == stats1
    # every trial asked for has the measurement one process makes; ahead of
    # time, more were measured (a layout whose base trial fails, ...) but
    # none differs
    assert costs1.items() <= costs2.items()
    assert stats1[0].get("batch norms folded") and stats1[1].get("kernels measured")
    assert lowered1 == len(costs1)
    # most were lowered by the workers, not by this process
    assert lowered2 < lowered1 / 3


def test_a_worker_that_fails_leaves_the_trial_to_this_process(monkeypatch):
    """A trial whose lowering fails in a worker (here: every one, by an
    error no pass expects) is measured again when the pass asks, and the
    decisions are those of one process."""
    text1, stats1, costs1, lowered1 = compile_graph(1, monkeypatch)
    parent, real = os.getpid(), trial._measure

    def fails_in_workers(m, plan):
        if os.getpid() != parent:
            raise RuntimeError("a bug met only in a worker")
        return real(m, plan)
    monkeypatch.setattr(trial, "_measure", fails_in_workers)
    text2, stats2, costs2, lowered2 = compile_graph(2, monkeypatch)
    assert (text2, stats2) == (text1, stats1)
    assert costs1.items() <= costs2.items() and lowered2 >= lowered1


def test_a_worker_that_dies_leaves_the_rest_to_the_caller():
    """fork_map yields what the workers finished and returns, without
    hanging, when one dies; the caller does the rest."""
    def dies_on_two(n: int) -> int:
        if n == 2:
            os._exit(3)
        return n * 10
    got = dict(parallel.fork_map(dies_on_two, list(range(6)), 2))
    assert 2 not in got and all(got[i] == i * 10 for i in got)


FOLDS = """
module "folds"
stage graph

global @gx : <1 x 1 x 2 x 2 x f32> = dense<1.0>
global @w : <2 x 1 x 1 x 1 x f32> = dense<[[[[1.0]]], [[[2.0]]]]>
global @s : <2 x f32> = dense<[1.0, 2.0]>
global @o : <2 x f32> = dense<[0.5, -0.5]>
global @m : <2 x f32> = dense<[1.0, 3.0]>
global @v : <2 x f32> = dense<3.0>

func @chained(%x: <1 x 1 x 2 x 2 x f32>) -> <1 x 2 x 2 x 2 x f32> {
'entry:
  %c = conv2d %x, @w : <1 x 2 x 2 x 2 x f32>
  %b1 = batch_norm %c, @s, @o, @m, @v {epsilon = 1.0} : <1 x 2 x 2 x 2 x f32>
  %b2 = batch_norm %b1, @s, @o, @m, @v {epsilon = 1.0} : <1 x 2 x 2 x 2 x f32>
  return %b2
}

func @global_input() -> <1 x 2 x 2 x 2 x f32> {
'entry:
  %c = conv2d @gx, @w : <1 x 2 x 2 x 2 x f32>
  %b = batch_norm %c, @s, @o, @m, @v {epsilon = 1.0} : <1 x 2 x 2 x 2 x f32>
  return %b
}
"""


def test_folds_measured_ahead_chained_and_from_a_global(monkeypatch):
    """A batch norm whose producer is another batch norm (folded first, one
    by one) and a conv reading a global: the same folds at jobs=2 as at
    jobs=1, the global kept (the trial fold made ahead and undone removes
    only the weights it made), and a second run of the same pass object
    starts afresh."""
    from swir.passes.graph.fold_batchnorm import FoldBatchNorm
    outs = []
    for jobs in (1, 2):
        p = FoldBatchNorm(jobs=jobs)
        for _ in range(2):
            monkeypatch.setattr(trial, "_CACHE", {})
            m = parse_module(FOLDS, "<folds>")
            PassManager([p], verify_each=True).run(m)
            outs.append((print_module(m), dict(p.statistics)))
            p.statistics.clear()
    assert all(out == outs[0] for out in outs)
    text, stats = outs[0]
    assert "batch_norm" not in text and "conv2d @gx" in text
    assert stats["batch norms folded"] == 3


def test_what_forked_workers_learn_comes_back(monkeypatch):
    monkeypatch.setattr(parallel, "_MEMOS", {})
    parallel.memo("squares")[0] = 0

    def learn(n: int) -> int:
        parallel.memo("squares")[n] = n * n
        parallel.memo("cubes")[n] = n ** 3     # a memo the parent has not made
        return -n
    got = sorted(parallel.fork_map(learn, [1, 2, 3, 4, 5], 2))
    assert got == [(0, -1), (1, -2), (2, -3), (3, -4), (4, -5)]
    assert parallel.memo("squares") == {n: n * n for n in range(6)}
    assert parallel.memo("cubes") == {n: n ** 3 for n in range(1, 6)}


@pytest.mark.parametrize("name", ["fold-batchnorm", "layout", "fuse"])
def test_jobs_must_not_be_negative(name):
    p = pass_class(name)
    assert p(jobs=0).option_errors() == []
    ((flag, message),) = p(jobs=-1).option_errors()
    assert "jobs" in flag and "at least 0" in message
