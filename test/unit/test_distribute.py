"""-distribute and the programs it makes (issue 26), checked against the
interpreters: a module split over N ranks computes what the module did, at
every stage, and the MPI program swir-cg writes for it moves what the
interpreters say it moves (per rank: MPI bytes per collective, DMA).

The interpreters run every rank in a thread of its own (swir.interp.ranks),
meeting at each collective as the MPI ranks do.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

from swir.costmodel.network import Network
from swir.codegen import emulate
from swir.codegen.project import Options, generate, write_project
from swir.interp.ranks import RankAborted, World, run_ranks
from swir.interp.run import run_function
from swir.parser import parse_module
from swir.passes.manager import PassManager
from swir.passes import pass_class
from swir.target import SW26010

ROOT = Path(__file__).parents[2]
EXAMPLES = ROOT / "examples"


def load(path: Path, text: str | None = None):
    return parse_module(text if text is not None else path.read_text(), str(path))


def lowered(module, *passes: str, **options):
    """The module after the named passes (options: for -distribute)."""
    made = []
    for name in passes:
        cls = pass_class(name)
        made.append(cls(**options) if name == "distribute" else cls())
    PassManager(made).run(module)
    return module


def run(module, args, base=EXAMPLES, stats=None):
    return run_function(module, module.lookup("main"), args, base, stats=stats)


def resnet_input():
    return [np.load(EXAMPLES / "resnet_input.npy")]


@pytest.fixture(scope="module")
def resnet_whole():
    m = lowered(load(EXAMPLES / "resnet.swir"), "fold-batchnorm", "dce")
    return run(m, resnet_input())


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_model_split_graph_equals_the_whole(resnet_whole, ranks):
    m = lowered(load(EXAMPLES / "resnet.swir"), "fold-batchnorm", "dce", "distribute",
                ranks=ranks, split="model")
    assert m.attrs == {"ranks": ranks, "split": "model"}
    ops = {i.opname for i in m.walk()}
    assert ("reduce_scatter" in ops) == (ranks > 1)
    got = run(m, resnet_input())
    np.testing.assert_allclose(got[0], resnet_whole[0], rtol=1e-5, atol=1e-7)


def batched_mlp(batch: int) -> str:
    """The mlp example for a batch (its constant 0.5 stays one row, broadcast)."""
    text = (EXAMPLES / "mlp.swir").read_text().replace("<1 x", f"<{batch} x")
    return text.replace(f"dense<0.5> : <{batch} x 32", "dense<0.5> : <1 x 32")


@pytest.mark.parametrize("ranks", [2, 4])
def test_data_split_equals_the_whole(ranks):
    x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    whole = run(load(EXAMPLES / "mlp.swir", batched_mlp(4)), [x])
    m = lowered(load(EXAMPLES / "mlp.swir", batched_mlp(4)), "distribute", ranks=ranks,
                split="data")
    assert m.lookup("main").params[0].type.shape == (4 // ranks, 64)
    stats: dict = {}
    got = run(m, [x], stats=stats)
    np.testing.assert_allclose(got[0], whole[0], rtol=1e-6)
    # Each rank reads its block of the input; rank 0 gathers the others' results.
    assert all(r["mpi"]["scatter"]["calls"] == 0 for r in stats["ranks"])
    assert stats["ranks"][1]["mpi"]["gather"] == {"calls": 1, "bytes_sent": got[0].nbytes // ranks}


def test_data_split_refuses_a_constant_of_the_whole_batch():
    text = (EXAMPLES / "mlp.swir").read_text().replace("<1 x", "<4 x")
    with pytest.raises(Exception, match="'mul' cannot take a batch of 2"):
        lowered(load(EXAMPLES / "mlp.swir", text), "distribute", ranks=2, split="data")


def test_data_split_checks_the_whole_batch():
    m = lowered(load(EXAMPLES / "mlp.swir", batched_mlp(4)), "distribute", ranks=2, split="data")
    with pytest.raises(Exception, match="the 2 ranks take a batch of 4"):
        run(m, [np.zeros((2, 64), np.float32)])


MLP_STAGES = {"graph": (), "loop": ("lower-loops",), "buffered": ("lower-loops", "ldm-plan"),
              "dma": ("lower-loops", "ldm-plan", "insert-dma")}


@pytest.fixture(scope="module")
def mlp_runs():
    """The mlp example split by channels over 2 ranks, run at every stage."""
    x = [np.load(EXAMPLES / "mlp_input.npy")]
    out = {}
    for stage, passes in MLP_STAGES.items():
        m = lowered(load(EXAMPLES / "mlp.swir"), "cse", "dce", "distribute", "fuse", "dce",
                    *passes, ranks=2, split="model")
        stats: dict = {}
        out[stage] = (m, run(m, x, stats=stats), stats)
    return out


@pytest.mark.parametrize("stage", ["loop", "buffered", "dma"])
def test_every_stage_computes_what_the_graph_does(mlp_runs, stage):
    np.testing.assert_allclose(mlp_runs[stage][1][0], mlp_runs["graph"][1][0], rtol=1e-6)
    assert [r["mpi"] for r in mlp_runs[stage][2]["ranks"]] == \
        [r["mpi"] for r in mlp_runs["graph"][2]["ranks"]]


def test_allgather_bytes(mlp_runs):
    """The mlp's two gathers: 16 + 5 floats from each rank to the other."""
    mpi = mlp_runs["graph"][2]["ranks"][1]["mpi"]
    assert mpi["allgather"] == {"calls": 2, "bytes_sent": (16 + 5) * 4}
    assert mpi["bcast"] == {"calls": 1, "bytes_sent": 0}
    assert mlp_runs["graph"][2]["ranks"][0]["mpi"]["bcast"]["bytes_sent"] == 64 * 4


HAVE_MPI = all(shutil.which(t) for t in ("mpicc", "mpirun", "cc", "make"))
needs_mpi = pytest.mark.skipif(not HAVE_MPI and not os.environ.get("SWIR_REQUIRE_MPI"),
                               reason="no mpicc / mpirun (Open MPI) on PATH")


@needs_mpi
@pytest.mark.parametrize("split", ["model", "data"])
def test_program_moves_what_the_interpreter_counts(tmp_path, split):
    """The MPI program of the dma-stage module, on 2 ranks: the same outputs,
    and per rank the same MPI bytes per collective and the same DMA as the
    dma-stage interpreter running both ranks."""
    batch = 1 if split == "model" else 4
    text = batched_mlp(batch)
    m = lowered(load(EXAMPLES / "mlp.swir", text), "cse", "dce", "distribute", "fuse", "dce",
                *MLP_STAGES["dma"], ranks=2, split=split)
    x = np.random.default_rng(1).standard_normal((batch, 64)).astype(np.float32)
    stats: dict = {}
    want = run(m, [x], stats=stats)
    project = tmp_path / "p"
    write_project(generate(m, Options(source=str(EXAMPLES / "mlp.swir"))), str(project), False)
    program = emulate.build(project, m.name)
    whole = load(EXAMPLES / "mlp.swir", text).lookup("main")
    got = emulate.run(program, [x], [p.type for p in whole.params], list(whole.result_types),
                      ranks=2)
    np.testing.assert_allclose(got.outputs[0], want[0], rtol=1e-6)
    for mine, program_rank in zip(stats["ranks"], got.stats["ranks"]):
        assert program_rank["mpi"] == mine["mpi"]
        assert emulate.dma_counters(program_rank) == emulate.dma_counters(mine)


@needs_mpi
def test_scatter_reads_the_inputs_on_rank_0(tmp_path):
    """--scatter (input files only rank 0 sees): rank 0 reads the whole batch
    and scatters it; the results are those of every rank reading its block."""
    x = np.random.default_rng(2).standard_normal((4, 64)).astype(np.float32)
    m = lowered(load(EXAMPLES / "mlp.swir", batched_mlp(4)), "distribute", "fuse",
                *MLP_STAGES["dma"], ranks=2, split="data")
    want = run(m, [x])
    project = tmp_path / "p"
    write_project(generate(m, Options(source=str(EXAMPLES / "mlp.swir"))), str(project), False)
    program = emulate.build(project, m.name)
    prefix, env = emulate.mpirun(2)
    raw = tmp_path / "x.npy"
    np.save(raw, x)
    for flags in ([], ["--scatter"]):
        out, stats = tmp_path / "y.npy", tmp_path / "s.json"
        r = subprocess.run([*prefix, str(program), "--input", str(raw), "--output", str(out),
                            "--stats", str(stats), *flags], capture_output=True, text=True,
                           timeout=120, env={**os.environ, **env})
        assert r.returncode == 0, r.stderr
        np.testing.assert_allclose(np.load(out), want[0], rtol=1e-6)
        mpi = [rank["mpi"]["scatter"] for rank in json.loads(stats.read_text())["ranks"]]
        assert mpi == ([{"calls": 1, "bytes_sent": x.nbytes // 2}, {"calls": 1, "bytes_sent": 0}]
                       if flags else [{"calls": 0, "bytes_sent": 0}] * 2)


def test_scatter_is_refused_on_one_core_group(tmp_path):
    m = lowered(load(EXAMPLES / "mlp.swir"), *MLP_STAGES["dma"])
    project = tmp_path / "p"
    write_project(generate(m, Options(source=str(EXAMPLES / "mlp.swir"))), str(project), False)
    program = emulate.build(project, m.name)
    r = subprocess.run([str(program), "--input", str(EXAMPLES / "mlp_input.npy"), "--scatter"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip().endswith("error: --scatter: only a program whose ranks share the "
                                     "batch reads its inputs on one rank and scatters them "
                                     "(swir-cg --ranks N --split data)")


F16_CONVS = """
module "half"
stage graph
global @w1 : <4 x 2 x 1 x 1 x f16> = dense<0.5>
global @w2 : <4 x 4 x 1 x 1 x f16> = dense<0.25>
func @main(%x: <1 x 2 x 3 x 3 x f16>) -> <1 x 4 x 3 x 3 x f16> {
'entry:
  %c1 = conv2d %x, @w1 : <1 x 4 x 3 x 3 x f16>
  %c2 = conv2d %c1, @w2 : <1 x 4 x 3 x 3 x f16>
  return %c2
}
"""


def test_f16_layers_are_gathered_not_summed_over_ranks():
    """MPI_SUM adds f32 and f64: an f16 conv whose input is split by channels
    gets it gathered and splits its output channels instead."""
    x = np.random.default_rng(3).standard_normal((1, 2, 3, 3)).astype(np.float16)
    whole = run(load(Path("half.swir"), F16_CONVS), [x])
    m = lowered(load(Path("half.swir"), F16_CONVS), "distribute", ranks=2, split="model")
    ops = [i.opname for i in m.walk()]
    assert "reduce_scatter" not in ops and ops.count("allgather") == 2
    np.testing.assert_array_equal(run(m, [x])[0], whole[0])


def test_constant_folding_leaves_collectives_alone():
    text = """
module "k"
stage graph {ranks = 2, split = "model"}
global @k : <1 x 2 x f32> = dense<1.0>
func @main(%x: <1 x 4 x f32>) -> <1 x 4 x f32> {
'entry:
  %g = allgather @k {axis = 1, ranks = 2} : <1 x 4 x f32>
  %y = add %x, %g : <1 x 4 x f32>
  return %y
}
"""
    m = lowered(load(Path("k.swir"), text), "fold-constants", "cse", "dce")
    assert [i.opname for i in m.walk()][:1] == ["allgather"]
    got = run(m, [np.zeros((1, 4), np.float32)])
    np.testing.assert_array_equal(got[0], np.ones((1, 4), np.float32))


@needs_mpi
def test_a_program_without_weight_files_builds_and_helps_once(tmp_path):
    """Weights that are all splats: nothing to read from weights.bin (the MPI
    support's reader unused, which -Werror would refuse). --help under mpirun:
    the usage once, exit 0 on every rank."""
    text = batched_mlp(4).replace('file "mlp.weights" offset 0', "dense<0.5>") \
        .replace('file "mlp.weights" offset 8192', "dense<0.0>") \
        .replace('file "mlp.weights" offset 8320', "dense<0.25>") \
        .replace('file "mlp.weights" offset 9600', "dense<0.0>")
    assert "file \"mlp.weights\"" not in text
    m = lowered(load(tmp_path / "mlp.swir", text), "distribute", "fuse", *MLP_STAGES["dma"],
                ranks=2, split="data")
    project = tmp_path / "p"
    write_project(generate(m, Options(source=str(tmp_path / "mlp.swir"))), str(project), False)
    program = emulate.build(project, m.name)
    prefix, env = emulate.mpirun(2)
    r = subprocess.run([*prefix, str(program), "--help"], capture_output=True, text=True,
                       timeout=120, env={**os.environ, **env})
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("usage:") == 1
    x = np.ones((4, 64), np.float32)
    whole = load(tmp_path / "w.swir", text).lookup("main")
    got = emulate.run(program, [x], [p.type for p in whole.params], list(whole.result_types),
                      ranks=2)
    np.testing.assert_allclose(got.outputs[0], run(m, [x], base=tmp_path)[0], rtol=1e-6)


def test_a_failing_rank_stops_the_others():
    """Rank 1 fails before a collective the others wait in: they stop, and
    the failure is what run_ranks raises (no hang)."""
    def rank_body(rank: int, world: World, args):
        if rank == 1:
            raise ValueError("rank 1 failed")
        return [world.allgather(rank, np.ones(2), 0)]

    done = threading.Event()
    errors = []

    def go():
        try:
            run_ranks(3, "model", [], rank_body)
        except ValueError as e:
            errors.append(str(e))
        done.set()

    threading.Thread(target=go, daemon=True).start()
    assert done.wait(30), "run_ranks hung"
    assert errors == ["rank 1 failed"]


def test_world_gathers_and_sums_in_rank_order():
    world = World(3)
    out: list = [None] * 3

    def body(r):
        out[r] = (world.allgather(r, np.full(2, r), 0), world.reduce(r, np.full(2, float(r))))

    threads = [threading.Thread(target=body, args=(r,)) for r in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for gathered, total in out:
        np.testing.assert_array_equal(gathered, [0, 0, 1, 1, 2, 2])
        np.testing.assert_array_equal(total, [3.0, 3.0])
    assert issubclass(RankAborted, Exception)


# -- the network model -----------------------------------------------------------------

def test_one_rank_communicates_nothing():
    net = Network.for_target(SW26010, 1)
    assert net.allgather(1e6) == net.reduce_scatter(1e6) == net.bcast(1e6) == 0.0


def test_allgather_on_one_chip_uses_the_noc():
    net = Network.for_target(SW26010, 4)
    block = 1e6
    assert net.allgather(block) == pytest.approx(2 * SW26010.noc_latency
                                                 + 3 * block / SW26010.noc_bandwidth)


def test_allgather_across_chips_shares_each_nodes_link():
    """8 ranks on 2 chips: each node's 4 core groups take in the other node's 4
    blocks each through one injection link, 16 blocks, plus 3 over the NoC."""
    net = Network.for_target(SW26010, 8)
    block = 1e6
    assert net.allgather(block) == pytest.approx(3 * SW26010.net_latency
                                                 + 16 * block / SW26010.net_bandwidth
                                                 + 3 * block / SW26010.noc_bandwidth)


def test_more_ranks_cost_more_per_collective():
    times = [Network.for_target(SW26010, p).allgather(1e5) for p in (2, 4, 8, 64, 256)]
    assert times == sorted(times)


def test_a_pro_chip_holds_six_ranks():
    """The SW26010-Pro has 6 core groups per chip: 6 ranks exchange over the
    NoC alone, as one chip; a 7th rank is on the next chip, so the
    allgather crosses the interconnect (with 4 per chip, 6 ranks would)."""
    from swir.target import SW26010_PRO as PRO
    block = 1e6
    six = Network.for_target(PRO, 6)
    assert six.nodes == 1
    assert six.allgather(block) == pytest.approx(3 * PRO.noc_latency
                                                 + 5 * block / PRO.noc_bandwidth)
    seven = Network.for_target(PRO, 7)
    assert seven.nodes == 2
    # Ranks 0-5 take in rank 6's block through their node's link; 5 blocks over the NoC.
    assert seven.allgather(block) == pytest.approx(3 * PRO.net_latency
                                                   + 6 * block / PRO.net_bandwidth
                                                   + 5 * block / PRO.noc_bandwidth)
    assert Network.for_target(SW26010, 6).nodes == 2     # the SW26010's chip holds 4
