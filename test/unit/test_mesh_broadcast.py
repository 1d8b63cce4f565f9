"""-mesh-broadcast's decision (swir/passes/mesh/mesh_broadcast.py): its
estimate of the relay is what the cost model charges for the code it writes,
on every machine of the assumed range, and it relays only where that is
faster on the default and the pessimistic figures."""

from pathlib import Path

import pytest

from swir.costmodel.cost import cost_report, dma_assumptions
from swir.parser import parse_module
from swir.passes.mesh.mesh_broadcast import broadcast_seconds, mesh_pays, relay_seconds
from swir.tools import swir_opt

MATMUL = Path(__file__).resolve().parents[1] / "Transforms" / "MeshBroadcast" / "Inputs" / "matmul.swir"


@pytest.fixture(scope="module")
def lowered(tmp_path_factory):
    """The paper matmul with its 4 KB broadcast, and the same relayed."""
    d = tmp_path_factory.mktemp("mesh")
    dma, mesh = d / "dma.swir", d / "mesh.swir"
    assert swir_opt.main(["-ldm-plan{strategy=greedy}", "-insert-dma", str(MATMUL),
                          "-o", str(dma)]) == 0
    assert swir_opt.main(["-mesh-broadcast{always=true}", str(dma), "-o", str(mesh)]) == 0
    return [parse_module(p.read_text(), str(p)) for p in (dma, mesh)]


@pytest.mark.parametrize("machine", ["pessimistic", "default", "optimistic"])
def test_the_estimate_is_what_the_cost_model_charges(lowered, machine):
    m = dma_assumptions()[machine]
    bcast, relayed = (cost_report(mod, m).kernels[0] for mod in lowered)
    assert relayed.reg_s > 0 and bcast.reg_s == 0
    # The relay's DMAs and messages are no CPE's own work: the 8 CPEs with
    # tiles stay the busy ones, and their own DMAs cost what they did.
    assert relayed.busy_cpes == bcast.busy_cpes == 8
    assert relayed.modeled_s - bcast.modeled_s == pytest.approx(
        relay_seconds(1024, 4, m) - broadcast_seconds(4096, m), rel=1e-9)


def test_relays_only_where_faster_on_default_and_pessimistic(lowered):
    bcast = next(i for i in lowered[0].lookup("matmul_0").walk() if i.opname == "dma_bcast")
    target = lowered[0].attr("target")
    machines = dma_assumptions(target)
    # 4 KB: the relay wins only on the optimistic figures.
    assert relay_seconds(1024, 4, machines["optimistic"]) < broadcast_seconds(4096, machines["optimistic"])
    assert relay_seconds(1024, 4, machines["default"]) > broadcast_seconds(4096, machines["default"])
    assert not mesh_pays(bcast, target)
    # 64 floats (a bias): the broadcast's fixed 2175 cycles dominate; the
    # relay wins on every machine.
    for m in machines.values():
        assert relay_seconds(64, 4, m) < broadcast_seconds(256, m)


LOCKSTEP = Path(__file__).resolve().parents[1] / "Transforms" / "InsertDMA" / "lockstep-broadcast.swir"


def test_relays_in_a_tile_loop_are_each_charged(tmp_path):
    """Broadcasts in the CPEs' tile loop (one per round; 2 rounds of 8 KB):
    relayed, each relay is charged its sends, receives and 16 steps."""
    dma, mesh = tmp_path / "dma.swir", tmp_path / "mesh.swir"
    assert swir_opt.main(["-ldm-plan{strategy=greedy,resident=false}", "-insert-dma",
                          str(LOCKSTEP), "-o", str(dma)]) == 0
    assert swir_opt.main(["-mesh-broadcast{always=true}", str(dma), "-o", str(mesh)]) == 0
    before, after = (parse_module(p.read_text(), str(p)) for p in (dma, mesh))
    bcast = cost_report(before).kernels[0]
    assert bcast.bcasts == 2
    relayed = cost_report(after).kernels[0]
    count = next(i for i in before.functions[0].walk() if i.opname == "dma_bcast").attrs["count"]
    m = dma_assumptions()["default"]
    assert relayed.bcasts == 0 and relayed.reg_sends == 2 * count // 4 * 9
    assert relayed.modeled_s - bcast.modeled_s == pytest.approx(
        2 * (relay_seconds(count, 4, m) - broadcast_seconds(count * 4, m)), rel=1e-9)
