"""The SW26010 cost model (swir.costmodel.cost): the counts and every formula
checked against hand computation on swTVM's worked matmul and a small conv."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from swir.costmodel.cost import (DMA_ASSUMPTIONS, Machine, NoRegisterCommunication,
                                 cost_report, dma_assumptions)
from swir.costmodel.traffic import dma_traffic
from swir.analysis.vector_plan import flops_of
from swir.parser import parse_module
from swir.passes import pass_class
from swir.passes.manager import PassManager
from swir.target import SW26010, SW26010_PRO
from swir.tools import swir_opt
from swir.verifier import verify

ROOT = Path(__file__).parents[2]
PAPER = ROOT / "test" / "Transforms" / "LDMPlan" / "paper-matmul.swir"


def lowered(text: str, passes: list[str], **options) -> object:
    m = parse_module(text, "<test>")
    ps = [pass_class(n)() for n in passes]
    for p in ps:
        for k, v in options.items():
            if hasattr(p, k):
                setattr(p, k, v)
    PassManager(ps, verify_each=True).run(m)
    verify(m)
    return m


@pytest.fixture(scope="module")
def paper():
    """The paper's plan: y = 128, k = 64; yo over 8 CPEs, ko inside (A in
    tiles of k: resident=false; test_swir_report.py derives A broadcast whole)."""
    m = lowered(PAPER.read_text(), ["ldm-plan", "insert-dma"], strategy="greedy",
                resident=False)
    (k,) = cost_report(m).kernels
    return k


def test_paper_matmul_counts(paper):
    assert paper.flops == 2 * 1024 * 1024          # a mul and an add per (y, k)
    assert paper.macs == 1024 * 1024
    assert paper.busy_cpes == 8                    # 1024 / 128 column tiles
    assert paper.ldm_bytes == 33_536               # (128 + 64 + 64 x 128) x 4
    assert (paper.gets, paper.puts) == (256, 8)    # A and B per (yo, ko); C per yo
    assert (paper.bytes_in, paper.bytes_out) == (4_227_072, 4_096)
    assert paper.compulsory_bytes == 4 * (1024 + 1024 * 1024 + 1024)
    assert paper.shape == "1x1024"


def test_paper_matmul_modeled_time(paper):
    m = Machine()
    bw = 34.1e9 * 0.6
    # A: 128 gets of one 256-byte block; B: 128 gets of 64 blocks of 512 bytes
    # (128 floats of a row); C: 8 puts of one 512-byte block. Each block pays
    # 330 bytes (half_block) of overhead.
    stream = (128 * (256 + 330) + 128 * 64 * (512 + 330) + 8 * (512 + 330)) / bw
    # 264 DMAs, every one of at least 96 bytes (startup_bytes): a whole
    # start-up each, spread over 8 CPEs.
    startup = 264 * (1650 / 1.45e9) / 8
    # The code (docs/cost-model.md, "Compute"): per y tile a vector zero fill
    # (one store per 4 columns) and a micro-kernel of 8 vectors (32 columns)
    # over each k step's 64 terms: per term 8 FMAs and a broadcast of A's
    # element (9 FP-pipe instructions), 8 vector loads of B's row and A's
    # scalar (9 memory ones): 9 cycles for 32 points; once per k step the 8
    # accumulators are added to C (8 loads, 8 stores): 16 / 64 per term.
    cycles = 1024 * 1024 * (9 + 16 / 64) / 32 + 1024 / 4
    compute = cycles / (8 * 1.45e9)
    assert paper.compute_s == pytest.approx(compute, rel=1e-12)
    assert paper.peak_compute_s == pytest.approx(2_097_152 / (8 * 1.45e9 * 8), rel=1e-12)
    assert paper.vector_share == 1.0
    assert paper.compute_efficiency == pytest.approx(2_097_152 / 8 / cycles, rel=1e-9)
    assert paper.dma_s == pytest.approx(stream + startup, rel=1e-12)
    assert paper.overlapped_dma_s == 0             # B's doubled tile would not fit
    assert paper.modeled_s == pytest.approx(compute + stream + startup, rel=1e-12)
    assert m.peak_flops == pytest.approx(742.4e9)
    # Roofline: the compulsory 4,202,496 bytes at 20.46 GB/s (205 us) against
    # 2.8 us of peak compute.
    assert paper.roofline_s == pytest.approx(4_202_496 / bw, rel=1e-12)
    assert paper.roofline_share == pytest.approx(paper.roofline_s / paper.modeled_s)
    # Hong-Kung: 2^20 MACs / (2 sqrt(2 S)) - S words with S = 64 x 15,360: 374
    # less 983,040 words, so 0; the compulsory bytes are the bound.
    s = 64 * 15360
    hk = max(0, math.ceil(1024 * 1024 / (2 * math.sqrt(2 * s))) - s) * 4
    assert hk == 0 and paper.hong_kung_bytes == hk
    assert paper.io_lower_bound_bytes == 4_202_496
    assert paper.traffic_over_bound == pytest.approx(4_231_168 / 4_202_496)



def test_few_busy_cpes_draw_less_than_the_core_group():
    """One CPE's DMAs draw at most cpe_bandwidth (assumed 8.7 GB/s): P busy
    CPEs stream at min(20.46 GB/s, P x 8.7 GB/s)."""
    m = Machine()
    assert m.drawn_bandwidth(64) == m.drawn_bandwidth(3) == pytest.approx(34.1e9 * 0.6)
    assert m.drawn_bandwidth(2) == pytest.approx(2 * 8.7e9)
    assert m.drawn_bandwidth(1) == pytest.approx(8.7e9)
    block = [(24_576, 1)]          # a 24 KB DMA: streaming dominates
    one, all_ = m.dma_seconds(block, busy=1), m.dma_seconds(block, busy=64)
    startup = 1650 / 1.45e9
    assert one - startup == pytest.approx((24_576 + 330) / 8.7e9, rel=1e-12)
    assert all_ - startup / 64 == pytest.approx((24_576 + 330) / (34.1e9 * 0.6), rel=1e-12)


def test_the_per_cpe_share_ranges_over_the_assumptions(paper):
    """Pessimistic: 16 CPEs to draw the core group's bandwidth; optimistic:
    no cap. The paper plan's 8 busy CPEs are capped only at the pessimistic
    end, where its streaming takes twice as long."""
    lo, mid, hi = (DMA_ASSUMPTIONS[k] for k in ("pessimistic", "default", "optimistic"))
    assert lo.cpe_bandwidth == pytest.approx(lo.bandwidth / 16)
    assert hi.cpe_bandwidth == hi.bandwidth and hi.drawn_bandwidth(1) == hi.bandwidth
    assert lo.drawn_bandwidth(8) == pytest.approx(lo.bandwidth / 2)
    assert mid.drawn_bandwidth(8) == mid.bandwidth

CONV = """module "conv"
stage graph
global @w : <8 x 4 x 3 x 3 x f32> = dense<0.5>
func @main(%x: <1 x 4 x 8 x 8 x f32>) -> <1 x 8 x 8 x 8 x f32> {
'entry:
  %y = conv2d %x, @w {pad = [1, 1, 1, 1]} : <1 x 8 x 8 x 8 x f32>
  return %y
}
"""


def test_small_conv_flops_and_bounds():
    m = lowered(CONV, ["lower-loops", "ldm-plan", "insert-dma"], strategy="greedy")
    report = cost_report(m)
    macs = 1 * 8 * 8 * 8 * 4 * 3 * 3                # N Co Ho Wo Ci Kh Kw
    conv = [k for k in report.kernels if k.macs]
    assert len(conv) == 1 and conv[0].macs == macs and conv[0].flops == 2 * macs
    assert report.total("flops") == 2 * macs
    k = conv[0]
    # Hong-Kung with the LDM plans can use on the 64 CPEs together: 65,536
    # bytes each less the 1/16 reserve
    s = 64 * (61440 // 4)
    assert k.hong_kung_bytes == max(0, math.ceil(macs / (2 * math.sqrt(2 * s))) - s) * 4
    assert k.io_lower_bound_bytes == max(k.compulsory_bytes, k.hong_kung_bytes)
    assert k.bound_binds == ("LDM" if k.hong_kung_bytes > k.compulsory_bytes else "reads")
    assert k.roofline_s <= k.modeled_s
    t = dma_traffic(m).counters()
    assert {n: (c["gets"], c["puts"]) for n, c in t.items()} == \
        {k.name: (k.gets, k.puts) for k in report.kernels}


STRIDED = """module "strided"
stage graph
func @main(%x: <1 x 8 x 16 x 16 x f32>, %w: <16 x 8 x 1 x 1 x f32>) -> <1 x 16 x 8 x 8 x f32> {
'entry:
  %y = conv2d %x, %w {stride = [2, 2]} : <1 x 16 x 8 x 8 x f32>
  return %y
}
"""


def test_the_io_bound_counts_only_the_input_a_strided_conv_reads():
    """A stride-2 1x1 conv reads every other row and column: a quarter of
    its input. -ldm-plan records it (the parallel loop's, then the cpe
    kernel's ``reads``), and the compulsory bytes count that quarter, the
    weights and the output, once each."""
    m = lowered(STRIDED, ["lower-loops", "ldm-plan", "insert-dma"], strategy="greedy")
    (k,) = [k for k in cost_report(m).kernels if k.macs]
    f = m.lookup(k.name)
    reads = dict(zip([p.name for p in f.params], f.attrs["reads"]))
    assert reads == {"X": 8 * 8 * 8, "W": -1, "Y": -1}
    x, w, y = 8 * 16 * 16 * 4, 16 * 8 * 4, 16 * 8 * 8 * 4
    assert k.compulsory_bytes == x // 4 + w + y
    assert k.io_lower_bound_bytes == max(k.compulsory_bytes, k.hong_kung_bytes)
    assert k.bound_binds == "reads"
    # the tiles still move whole rows: more than the true bound
    assert k.dma_bytes > k.io_lower_bound_bytes


def test_counting_compute_leaves_the_dma_counters_alone():
    m = lowered(CONV, ["lower-loops", "ldm-plan", "insert-dma"])
    assert dma_traffic(m).counters() == dma_traffic(m, count_compute=True).counters()


def test_double_buffered_gets_overlap_compute():
    """A plan that leaves room for double buffering: its gets run during
    the previous tile's compute, so the modeled time is max(compute, those
    gets) plus the rest."""
    m = lowered(PAPER.read_text(), ["ldm-plan", "insert-dma"], strategy="greedy",
                double_buffer=True)
    (k,) = cost_report(m).kernels
    assert k.overlapped_dma_s > 0
    assert k.modeled_s == pytest.approx(max(k.compute_s, k.overlapped_dma_s)
                                        + k.dma_s - k.overlapped_dma_s, rel=1e-12)


def test_flops_are_float_arithmetic_only():
    text = """module "f"
stage loop
kernel @k(%a: buf<4 x f32>, %b: buf<4 x i32>) {
  for %i = 0 to 4 {
    %x = load %a[%i] : f32
    %y = mul %x, %x : f32
    %z = exp %y : f32
    %c = gt %z, %x : i1
    %s = select %c, %z, %x : f32
    %n = load %b[%i] : i32
    %m = add %n, %n : i32
    store %s, %a[%i]
    store %m, %b[%i]
  }
}
"""
    m = parse_module(text, "<f>")
    counted = {i.opname: flops_of(i) for i in m.lookup("k").walk() if flops_of(i)}
    assert counted == {"mul": 1, "exp": 1}


def test_the_dma_assumptions_bracket_the_default(paper):
    m = lowered(PAPER.read_text(), ["ldm-plan", "insert-dma"], strategy="greedy",
                resident=False)
    times = {name: cost_report(m, machine).modeled_s for name, machine in DMA_ASSUMPTIONS.items()}
    assert times["optimistic"] < times["default"] < times["pessimistic"]
    assert times["default"] == pytest.approx(paper.modeled_s)


SEVERAL_LOADS = """module "loads"
stage loop
kernel @k(%A: buf<8 x 16 x f32>, %D: buf<8 x 8 x f32>, %Y: buf<4 x 8 x f32>) {
  for %i = 0 to 4 {
    for %j = 0 to 8 {
      %0 = load %A[2*%i, 2*%j] : f32
      %1 = load %A[2*%i + 1, 2*%j + 1] : f32
      %2 = load %D[%j, %j] : f32
      %3 = add %0, %1 : f32
      %4 = add %3, %2 : f32
      store %4, %Y[%i, %j]
    }
  }
}
"""


def test_the_read_counts_never_exceed_the_truth():
    """The counts feed a lower bound, so they may fall short of the distinct
    elements read, never exceed them: A's two loads read 32 elements each
    (64 in all; the product of the per-dimension unions, 8 x 16, would say
    128: the whole tensor), D's diagonal 8 (a loop variable in two
    dimensions: the largest projection, not the product 64)."""
    m = lowered(SEVERAL_LOADS, ["ldm-plan"], strategy="greedy")
    (loop,) = [i for i in m.lookup("k").walk() if i.opname == "parallel"]
    assert loop.attrs["reads"] == (32, 8, -1)


# -- broadcasts by RMA (the SW26010-Pro) -----------------------------------------------

LOCKSTEP = ROOT / "test" / "Transforms" / "InsertDMA" / "lockstep-broadcast.swir"
MESH_MATMUL = ROOT / "test" / "Transforms" / "MeshBroadcast" / "Inputs" / "matmul.swir"


def _planned(path: Path, target) -> object:
    m = parse_module(path.read_text(), str(path))
    PassManager([pass_class(n)() for n in ("ldm-plan", "insert-dma")], verify_each=True,
                target=target).run(m)
    return m


def test_the_sw26010_broadcast_is_one_bcast_mode_dma():
    m = Machine.for_target(SW26010)
    assert not m.rma
    assert m.bcast_seconds([(4096, 1)]) == pytest.approx((4096 + 45) / 8.7e9 + 2175 / 1.45e9)
    assert m.bcast_fixed == pytest.approx(2175 / 1.45e9)


def test_a_pro_broadcast_is_a_get_and_two_rma_hops():
    """CPE 0's get at one CPE's DMA curve (8.7 GB/s, 330 B per block), the
    row hop and the column hop (300 cycles and 32 B per cycle each), and the
    SW26010's fixed 2175 cycles (issue, completion, barriers)."""
    m = Machine.for_target(SW26010_PRO)
    assert m.rma and (m.rma_startup_cycles, m.rma_bandwidth) == (300, 32 * 2.25e9)
    get = 2 * (2048 + 330) / 8.7e9                        # two blocks of 2 KB
    hops = 2 * (300 / 2.25e9 + 4096 / (32 * 2.25e9))
    assert m.bcast_seconds([(2048, 2)]) == pytest.approx(get + hops + 2175 / 2.25e9)
    assert m.rma_hops_seconds([(2048, 2)]) == pytest.approx(hops)
    assert m.bcast_fixed == pytest.approx((2175 + 600) / 2.25e9)


def test_a_pro_kernels_broadcasts_are_charged_and_reported_as_rma():
    """The lock-step matmul planned for the Pro broadcasts %B's 16 KB tile once:
    its time is the get and the hops, in the kernel's unoverlapped DMA, and
    the report's JSON names it (bcast_s, rma_s)."""
    m = _planned(LOCKSTEP, SW26010_PRO)
    (k,) = cost_report(m).kernels
    machine = Machine.for_target(SW26010_PRO)
    assert k.bcasts == 1
    assert k.bcast_s == pytest.approx(machine.bcast_seconds([(16384, 1)]))
    assert k.rma_s == pytest.approx(2 * (300 / 2.25e9 + 16384 / 72e9))
    assert k.dma_s - k.overlapped_dma_s >= k.bcast_s
    assert {"bcast_s", "rma_s"} <= set(k.as_dict())
    # The same module modeled as an SW26010's: one BCAST_MODE DMA, no RMA.
    (sw,) = cost_report(m, Machine.for_target(SW26010)).kernels
    assert sw.rma_s == 0 and sw.bcast_s == pytest.approx(
        Machine.for_target(SW26010).bcast_seconds([(16384, 1)]))


def test_the_rma_assumptions_bracket_the_default():
    machines = dma_assumptions(SW26010_PRO)
    times = {n: mm.bcast_seconds([(4096, 1)]) for n, mm in machines.items()}
    assert times["optimistic"] < times["default"] < times["pessimistic"]
    assert [machines[n].rma_startup_cycles for n in ("optimistic", "default", "pessimistic")] \
        == [50, 300, 1650]
    assert not any(mm.rma for mm in DMA_ASSUMPTIONS.values())      # the SW26010's: no RMA


def test_register_communication_is_refused_on_an_rma_target(tmp_path):
    """A module relayed by -mesh-broadcast (the SW26010's register buses),
    modeled for the Pro: refused, not charged the SW26010's figures."""
    dma, mesh = tmp_path / "dma.swir", tmp_path / "mesh.swir"
    assert swir_opt.main(["-ldm-plan{strategy=greedy}", "-insert-dma", str(MESH_MATMUL),
                          "-o", str(dma)]) == 0
    assert swir_opt.main(["-mesh-broadcast{always=true}", str(dma), "-o", str(mesh)]) == 0
    relayed = parse_module(mesh.read_text(), str(mesh))
    assert cost_report(relayed).kernels[0].reg_s > 0                # the SW26010 models it
    with pytest.raises(NoRegisterCommunication, match="register communication"):
        cost_report(relayed, Machine.for_target(SW26010_PRO))
    r = subprocess.run([str(Path(sys.executable).parent / "swir-report"), str(mesh),
                        "--target=sw26010pro"], capture_output=True, text=True)
    assert r.returncode != 0 and "register communication" in r.stderr
    assert "Traceback" not in r.stderr
