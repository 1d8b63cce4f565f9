"""swir-report: the per-kernel cost table, its JSON and its roofline plot.

The paper matmul's figures are worked out by hand below from its LDM plan
and the formulas of swir.costmodel.cost (docs/swir-report.md); a small conv's
from its shape. Then the tool itself: bad inputs are one diagnostic, exit
status 1 and no output file; the JSON round-trips; the plot is a PNG. Last,
every model of the benchmark zoo (reduced, as test_zoo_e2e.py builds them)
goes ONNX -> swir-import -> swir-report, and every CPE kernel is reported.
"""

from __future__ import annotations

import json
import math
import re
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, fields
from pathlib import Path

import pytest
import siblings
from swir.tools import swir_opt, swir_report
from swir.tools.driver import run_tool

from swir.costmodel.cost import KernelCost, Machine, cost_report
from swir.parser import parse_module
from swir.passes.pipelines import pipeline_flags

ROOT = siblings.ROOT
BIN = Path(sys.executable).parent
PAPER = ROOT / "test" / "Transforms" / "LDMPlan" / "paper-matmul.swir"
EXAMPLES = ROOT / "examples"


def report(capsys, *args: str) -> tuple[int, str, str]:
    """swir-report in process: exit status, stdout, stderr."""
    code = run_tool("swir-report", swir_report.main, [str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def table(out: str) -> tuple[dict[str, list[str]], list[str]]:
    """The table's kernel rows by name (cells split at the column gaps) and
    the totals row (its empty cells dropped)."""
    lines = out.splitlines()
    rules = [i for i, line in enumerate(lines) if line and set(line) == {"-"}]
    assert len(rules) == 2, out
    split = [re.split(r"\s{2,}", line.strip()) for line in lines[rules[0] + 1:rules[1]]]
    rows = {cells[1]: cells for cells in split}
    assert len(rows) == len(split), "kernel names repeat"
    return rows, re.split(r"\s{2,}", lines[rules[1] + 1].strip())


def number(cell: str) -> int:
    return int(cell.replace(",", ""))


def micros(cell: str) -> float:
    value, unit = cell.split()
    return float(value.replace(",", "")) * {"µs": 1e-6, "ms": 1e-3, "s": 1.0}[unit]


# ---------------------------------------------------------------------------
# The paper matmul, by hand
# ---------------------------------------------------------------------------

# The default machine (swir.costmodel.cost.Machine), constant by constant.
CPE_FLOPS = 1.45e9 * 8          # 1.45 GHz x 8 flop/cycle = 11.6 GFLOP/s per CPE
PEAK = 64 * CPE_FLOPS           # 742.4 GFLOP/s
BANDWIDTH = 34.1e9 * 0.6        # 60% of 34.1 GB/s = 20.46 GB/s (fitted, test_dma_calibration.py)
HALF_BLOCK = 330                # a block of 330 bytes streams at half the bandwidth
STARTUP = 1650 / 1.45e9         # 1650 cycles per DMA of at least STARTUP_BYTES
STARTUP_BYTES = 96
# S: f32 words tiles can use on the 64 CPEs together (each LDM less the 1/16
# reserve; broadcasts fill them all by one read: docs/cost-model.md, "Bounds")
LDM_WORDS = 64 * ((65536 - 65536 // 16) // 4)


BCAST_BANDWIDTH = 8.7e9         # broadcasts: memory-side bandwidth (sunway-measured.md 1c)
BCAST_HALF_BLOCK = 45           # a broadcast block of 45 bytes streams at half of it
BCAST_FIXED = 2175 / 1.45e9     # at most 1.5 us per small broadcast (sunway-measured.md 2)


def test_the_machine_constants_are_those_used_by_hand():
    m = Machine()
    assert (m.cpe_flops, m.peak_flops, m.bandwidth, m.half_block, m.dma_startup) == \
        pytest.approx((CPE_FLOPS, PEAK, BANDWIDTH, HALF_BLOCK, STARTUP), rel=1e-15)
    assert m.startup_bytes == STARTUP_BYTES
    assert (m.bcast_bandwidth, m.bcast_half_block, m.bcast_fixed_cycles / m.clock_hz) == \
        pytest.approx((BCAST_BANDWIDTH, BCAST_HALF_BLOCK, BCAST_FIXED), rel=1e-15)


def paper_plan_ir(tmp_path: Path, resident: bool = False) -> str:
    out = tmp_path / "paper.dma.swir"
    plan = "-ldm-plan{strategy=greedy" + ("}" if resident else ",resident=false}")
    assert swir_opt.main([plan, "-insert-dma", str(PAPER), "-o", str(out)]) == 0
    return out.read_text()


def test_paper_matmul_by_hand(tmp_path, capsys):
    # The plan (test/Transforms/LDMPlan/paper-matmul.swir): tiles x = 1,
    # y = 128, k = 64. 1024 / 128 = 8 y tiles, one per CPE (8 busy CPEs of
    # 64); each runs 1024 / 64 = 16 k steps. The dma-stage IR moves, per k
    # step, an A tile of 64 f32 (one 256-byte block) and a B tile of 64 x 128
    # f32 (count 8192 in blocks of bsize 128 f32: 64 blocks of 512 bytes);
    # per y tile, the C tile of 128 f32 (one 512-byte block). Every get
    # waits on reply word 0 before the compute: nothing is double-buffered.
    ir = paper_plan_ir(tmp_path)
    assert "chunk %id {extent = 8, workers = 64}" in ir
    assert "for %ko = 0 to 16" in ir
    assert "-> %A_ldm {count = 64, reply = 0}" in ir
    assert "-> %B_ldm {count = 8192, bsize = 128, stride = 896, reply = 0}" in ir
    assert "dma_put %C_ldm -> %C[0, 128*%yo] {count = 128, reply = 1}" in ir

    flops = 2 * 1024 * 1024                    # a multiply and an add per MAC
    macs = 1024 * 1024
    busy = 8
    a_gets = b_gets = 8 * 16
    puts = 8
    gets = a_gets + b_gets                     # 256
    bytes_in = a_gets * 64 * 4 + b_gets * 64 * 128 * 4          # 4,227,072
    bytes_out = puts * 128 * 4                                  # 4,096
    ldm = 4 * (128 + 64 + 64 * 128)                             # C, A, B tiles: 33,536
    streamed = (a_gets * (256 + HALF_BLOCK)                     # each block pays half_block
                + b_gets * 64 * (512 + HALF_BLOCK)
                + puts * (512 + HALF_BLOCK))                    # 6,979,408 byte-equivalents
    # Every DMA moves at least STARTUP_BYTES (256, 32,768 or 512): a whole start-up each.
    dma_s = streamed / BANDWIDTH + (gets + puts) * STARTUP / busy
    # The vector code (docs/cost-model.md, "Compute"; test_cost.py derives it):
    # 9.25 cycles per 32 multiply-adds, a quarter cycle per zero-filled column.
    cycles = macs * (9 + 16 / 64) / 32 + 1024 / 4
    compute_s = cycles / (busy * 1.45e9)
    efficiency = flops / (busy * CPE_FLOPS) / compute_s       # 86%
    modeled_s = compute_s + dma_s              # nothing overlaps: max(compute, 0) + dma
    compulsory = 4 * 1024 + 4 * 1024 * 1024 + 4 * 1024         # A, B read; C written: 4,202,496
    roofline_s = max(flops / PEAK, compulsory / BANDWIDTH)      # the DMA side: 205.4 µs
    words = max(0, math.ceil(macs / (2 * math.sqrt(2 * LDM_WORDS))) - LDM_WORDS)  # 374 - S: 0
    bound = max(compulsory, words * 4)
    assert (flops, gets, puts, bytes_in, bytes_out, ldm, compulsory, words) == \
        (2_097_152, 256, 8, 4_227_072, 4_096, 33_536, 4_202_496, 0)
    assert bound == compulsory

    path = tmp_path / "paper.json"
    code, out, err = report(capsys, PAPER, "--wide", "--strategy=greedy", "--resident=false",
                            "--json", path)
    assert code == 0, err
    d = json.loads(path.read_text())
    assert d["pipeline"][0].startswith("-ldm-plan{") and "strategy=greedy" in d["pipeline"][0]
    (k,) = d["kernels"]
    assert {key: k[key] for key in ("name", "shape", "spawns", "flops", "macs", "busy_cpes",
                                    "ldm_bytes", "ldm_capacity", "gets", "puts", "bytes_in",
                                    "bytes_out", "dma_ops", "dma_bytes", "compulsory_bytes",
                                    "io_lower_bound_bytes", "small_share", "blocks",
                                    "blocks_32", "mem_unaligned", "ldm_unaligned")} == {
        "name": "matmul_0", "shape": "1x1024", "spawns": 1, "flops": flops, "macs": macs,
        "busy_cpes": busy, "ldm_bytes": ldm, "ldm_capacity": 65536, "gets": gets,
        "puts": puts, "bytes_in": bytes_in, "bytes_out": bytes_out, "dma_ops": gets + puts,
        "dma_bytes": bytes_in + bytes_out, "compulsory_bytes": compulsory,
        "io_lower_bound_bytes": bound, "small_share": 0.0,
        # A's 128 gets of one 256-byte block, B's 128 of 64 blocks of 512, C's 8
        # puts of 512: all multiples of 32 bytes, all starting 32-byte aligned.
        "blocks": 128 + 128 * 64 + 8, "blocks_32": 128 + 128 * 64 + 8, "mem_unaligned": 0,
        "ldm_unaligned": 0}
    for key, want in (("compute_s", compute_s), ("compute_efficiency", efficiency),
                      ("vector_share", 1.0), ("dma_s", dma_s), ("overlapped_dma_s", 0.0),
                      ("modeled_s", modeled_s), ("roofline_s", roofline_s),
                      ("roofline_share", roofline_s / modeled_s),
                      ("traffic_over_bound", (bytes_in + bytes_out) / bound)):
        assert k[key] == pytest.approx(want, rel=1e-12, abs=1e-18), key
    assert d["totals"]["modeled_s"] == pytest.approx(modeled_s, rel=1e-12)

    # The printed row: 404.83 µs, 50.7% of it the roofline bound, 1.01 x the I/O bound.
    rows, total = table(out)
    assert rows["matmul_0"] == ["1", "matmul_0", "1x1024", "2,097,152", "100%", "86%",
                                "33,536 / 65,536", "264",
                                "4,231,168", "0%", "100%", "0 / 0", f"{modeled_s * 1e6:.2f} µs",
                                f"{100 * roofline_s / modeled_s:.1f}%", "1.01", "reads"]
    assert f"{modeled_s * 1e6:.2f}" == "404.83"
    assert total == ["total (1 kernel)", "2,097,152", "100%", "86%", "max 33,536 / 65,536", "264",
                     "4,231,168", "0%", "100%", "0 / 0", "404.83 µs", "50.7%", "1.01",
                     "reads 1, LDM 0"]
    assert "peak 742.4 GFLOPS" in out and "DMA 20.46 GB/s achievable" in out


def test_paper_matmul_with_a_broadcast_by_hand(tmp_path, capsys):
    # swir's default plan keeps A whole (4 KB, read alike by every y tile):
    # -insert-dma broadcasts it once, before the CPEs' tiles, and every CPE
    # waits for it. B and C move as in the paper's plan above.
    ir = paper_plan_ir(tmp_path, resident=True)
    assert "dma_bcast %A[0, 0] -> %A_ldm {count = 1024, reply = 5}" in ir
    busy = 8
    b_gets, puts = 8 * 16, 8
    gets = 1 + b_gets                          # the broadcast counts once
    bytes_in = 1024 * 4 + b_gets * 64 * 128 * 4                 # 4,198,400
    bytes_out = puts * 128 * 4
    ldm = 4 * (128 + 1024 + 64 * 128)                           # A whole: 37,376
    streamed = b_gets * 64 * (512 + HALF_BLOCK) + puts * (512 + HALF_BLOCK)
    bcast_s = (4096 + BCAST_HALF_BLOCK) / BCAST_BANDWIDTH + BCAST_FIXED
    dma_s = streamed / BANDWIDTH + (b_gets + puts) * STARTUP / busy + bcast_s
    cycles = 1024 * 1024 * (9 + 16 / 64) / 32 + 1024 / 4
    modeled_s = cycles / (busy * 1.45e9) + dma_s
    path = tmp_path / "bcast.json"
    code, out, err = report(capsys, PAPER, "--wide", "--strategy=greedy", "--json", path)
    assert code == 0, err
    (k,) = json.loads(path.read_text())["kernels"]
    assert (k["gets"], k["puts"], k["bytes_in"], k["bytes_out"], k["ldm_bytes"],
            k["busy_cpes"]) == (gets, puts, bytes_in, bytes_out, ldm, busy)
    assert k["dma_s"] == pytest.approx(dma_s, rel=1e-12)
    assert k["modeled_s"] == pytest.approx(modeled_s, rel=1e-12)
    assert f"{modeled_s * 1e6:.2f}" == "384.93"      # against 404.83 µs without it
    rows, _ = table(out)
    assert rows["matmul_0"][6:8] == ["37,376 / 65,536", "137"]


# ---------------------------------------------------------------------------
# A small conv, from its shape
# ---------------------------------------------------------------------------

CONV = """\
module "conv"
stage graph

func @main(%x: <1 x 4 x 8 x 8 x f32>, %w: <8 x 4 x 3 x 3 x f32>, %b: <8 x f32>) -> <1 x 8 x 8 x 8 x f32> {
'entry:
  %y = conv2d %x, %w, %b {pad = [1, 1, 1, 1]} : <1 x 8 x 8 x 8 x f32>
  return %y
}
"""


def test_small_conv(tmp_path, capsys):
    src = tmp_path / "conv.swir"
    src.write_text(CONV)
    path = tmp_path / "conv.json"
    code, out, err = report(capsys, src, "-O0", "--wide", "--json", path)
    assert code == 0, err
    d = json.loads(path.read_text())

    n, co, ho, wo, ci, kh, kw = 1, 8, 8, 8, 4, 3, 3
    macs = n * co * ho * wo * ci * kh * kw              # 18,432
    flops = 2 * macs + n * co * ho * wo                 # + the bias, added once per output
    # the input read in place, its padding filled in LDM (pad-in-load): 1,024 B
    unpadded = n * ci * 8 * 8 * 4
    compulsory = unpadded + co * ci * kh * kw * 4 + co * 4 + n * co * ho * wo * 4
    bound = max(compulsory, max(0, math.ceil(macs / (2 * math.sqrt(2 * LDM_WORDS)))
                                - LDM_WORDS) * 4)
    assert (macs, flops, compulsory, bound) == (18_432, 37_376, 4_256, 4_256)

    # -O0 lowers the conv into one kernel (no zero fill, no padded copy).
    (conv,) = [k for k in d["kernels"] if k["flops"]]
    assert (conv["flops"], conv["macs"], conv["compulsory_bytes"],
            conv["io_lower_bound_bytes"]) == (flops, macs, compulsory, bound)
    assert conv["shape"] == "1x8x8x8"
    assert d["totals"]["flops"] == flops
    assert all(k["io_lower_bound_bytes"] is None for k in d["kernels"] if not k["flops"])

    # The table's rows are cost_report's numbers for the module swir-opt lowers.
    lowered = tmp_path / "conv.dma.swir"
    assert swir_opt.main(pipeline_flags("graph", "O0") + [str(src), "-o", str(lowered)]) == 0
    want = cost_report(parse_module(lowered.read_text(), str(lowered))).kernels
    rows, total = table(out)
    assert sorted(rows) == sorted(k.name for k in want)
    assert [number(r[0]) for r in sorted(rows.values(), key=lambda r: number(r[0]))] == \
        list(range(1, len(want) + 1))
    for k in want:
        check_row(rows[k.name], k)
    assert number(total[1]) == sum(k.flops for k in want)
    assert micros(total[10]) == pytest.approx(sum(k.modeled_s for k in want), abs=0.006e-6)


def check_row(row: list[str], k: KernelCost) -> None:
    _, name, shape, flops, vector, eff, ldm, ops, nbytes, small, b32, unaligned, modeled, roof, \
        over, binds = row
    assert binds == (k.bound_binds or "-")
    assert (name, shape, number(flops), number(ops), number(nbytes)) == \
        (k.name, k.shape, k.flops, k.dma_ops, k.dma_bytes)
    if k.flops:
        assert vector == f"{round(100 * k.vector_share)}%"
        assert eff == f"{round(100 * k.compute_efficiency)}%"
    else:
        assert vector == eff == "-"
    assert [number(x) for x in ldm.split(" / ")] == [k.ldm_bytes, k.ldm_capacity]
    assert small == f"{round(100 * k.small_share)}%"
    assert b32 == (f"{round(100 * k.blocks_32 / k.blocks)}%" if k.blocks else "-")
    assert [number(x) for x in unaligned.split(" / ")] == [k.mem_unaligned, k.ldm_unaligned]
    assert micros(modeled) == pytest.approx(k.modeled_s, abs=0.006e-6)
    assert float(roof.rstrip("%")) == pytest.approx(100 * k.roofline_share, abs=0.051)
    if k.traffic_over_bound is None:
        assert over == "-"
    else:
        assert float(over) == pytest.approx(k.traffic_over_bound, abs=0.0051)


def test_rows_are_sorted_by_modeled_time(capsys):
    code, out, err = report(capsys, EXAMPLES / "mlp.swir")
    assert code == 0, err
    rows, _ = table(out)
    ordered = sorted(rows.values(), key=lambda r: number(r[0]))
    times = [micros(r[3]) for r in ordered]
    assert len(times) > 3 and times == sorted(times, reverse=True)


# ---------------------------------------------------------------------------
# The tool: errors, JSON, plot
# ---------------------------------------------------------------------------

BRANCHES = ROOT / "test" / "Inputs" / "codegen" / "host-branches.swir"
BAD = [
    (["nofile.swir"], r"^nofile\.swir:1:1: error: cannot read 'nofile\.swir'"),
    ([PAPER, "-frob"], r"^<command-line>:1:\d+: error: unknown option '-frob'"),
    ([PAPER, "--frob=1"], r"error: unknown option '--frob' \(no pass in the pipeline takes it\)"),
    ([PAPER, "-O2"], r"error: unknown optimisation level '-O2'"),
    ([PAPER, "--machine", "fast"], r"error: unknown machine 'fast' \(machines: pessimistic, "),
    ([PAPER, "--json"], r"error: '--json' needs a value"),
    ([PAPER, "--pipeline", "-ldm-plan"],
     r"^swir-report: error: the pipeline \(-ldm-plan\) leaves the module at the buffered stage"),
    ([PAPER, "--pipeline", "-ldm-plan -frob"],
     r"^<command-line>:1:\d+: error: unknown pass '-frob'"),
    ([PAPER, "--pipeline", "-ldm-plan{nope=1} -insert-dma"],
     r"error: pass -ldm-plan has no option 'nope'"),
    ([PAPER, "--pipeline", "-ldm-plan --stats"], r"error: '--stats' is a swir-opt flag"),
    ([PAPER, "--pipeline", "-insert-dma"],
     r"^.*paper-matmul\.swir:\d+:\d+: error: pass -insert-dma runs on the buffered stage"),
    ([PAPER, "-O1", "--pipeline", "-ldm-plan -insert-dma"],
     r"^swir-report: error: -O1 and --pipeline both choose the passes"),
    ([PAPER, "--func", "nope"], r"^swir-report: error: no function @nope"),
    ([PAPER, "--strategy=nope"], r"error: -ldm-plan: option strategy must be greedy or search, "
                                 r"got .nope."),
    ([BRANCHES], r"^swir-report: error: the DMA traffic of @main is not static"),
]


@pytest.mark.parametrize("args, message", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_input_is_one_error_and_no_output(tmp_path, capsys, args, message):
    outs = [tmp_path / "r.json", tmp_path / "r.png"]
    extra = [] if "--json" in args else ["--json", outs[0], "--plot", outs[1]]
    code, out, err = report(capsys, *args, *extra)
    assert code == 1
    assert re.search(message, err, re.MULTILINE), err
    assert err.count("error:") == 1 and "Traceback" not in err
    assert out == ""
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where", ["missing-dir/r.json", "."])
def test_unwritable_json_fails_before_lowering(tmp_path, capsys, where):
    code, out, err = report(capsys, PAPER, "--json", tmp_path / where)
    assert code == 1 and out == ""
    assert re.fullmatch(r"swir-report: error: cannot write --json '.*': "
                        r"(no directory '.*'|it is a directory)\n", err), err
    assert list(tmp_path.iterdir()) == []


def test_failure_keeps_an_existing_output(tmp_path, capsys):
    old = tmp_path / "r.json"
    old.write_text("old")
    code, _, err = report(capsys, BRANCHES, "--json", old)
    assert code == 1 and "not static" in err
    assert old.read_text() == "old" and sorted(tmp_path.iterdir()) == [old]


def test_help_and_version(capsys):
    code, out, _ = report(capsys, "--help")
    assert code == 0
    for option in ("-O0, -O1, -O3", "--pipeline", "--func", "--machine", "--json", "--plot",
                   "--strategy=<str>", "--ldm-size=<int>"):
        assert option in out, option
    code, out, _ = report(capsys, "--version")
    assert code == 0 and out.startswith("swir-report ")


def test_the_installed_command_reports_errors_without_a_traceback(tmp_path):
    r = subprocess.run([str(BIN / "swir-report"), str(tmp_path / "nofile.swir")],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.count("\n") <= 1 and "error: cannot read" in r.stderr


def test_json_schema_round_trip(tmp_path, capsys):
    path = tmp_path / "mlp.json"
    code, _, err = report(capsys, EXAMPLES / "mlp.swir", "--machine", "optimistic",
                          "--json", path)
    assert code == 0, err
    d = json.loads(path.read_text())
    assert set(d) == {"input", "module", "stage", "level", "pipeline", "machine_name",
                      "function", "machine", "ranks", "kernels", "collectives", "totals"}
    assert d["ranks"] == 1 and d["collectives"] == [] and d["totals"]["communication_s"] == 0
    assert (d["module"], d["stage"], d["level"], d["machine_name"], d["function"]) == \
        ("mlp", "graph", "O3", "optimistic", "main")
    optimistic = Machine(dma_efficiency=0.65, half_block=200, dma_startup_cycles=300)
    # ... no cap on one CPE's share of the bandwidth, and the fast end of the
    # register-communication range.
    assert d["machine"] == asdict(optimistic.with_(cpe_bandwidth=optimistic.bandwidth,
                                                   reg_latency_cycles=5, reg_cycles_per_vector=1))
    assert all(p.startswith("-") for p in d["pipeline"])
    assert d["pipeline"][-4].startswith("-lower-loops")
    assert "strategy=search" in d["pipeline"][-3]
    assert d["pipeline"][-1].startswith("-mesh-broadcast")
    names = [f.name for f in fields(KernelCost)]
    for k in d["kernels"]:
        again = KernelCost(**{n: k[n] for n in names})
        assert again.as_dict() == k          # the derived keys too
    times = [k["modeled_s"] for k in d["kernels"]]
    assert times == sorted(times, reverse=True)
    for key, value in d["totals"].items():
        if key != "communication_s":
            assert value == pytest.approx(sum(k[key] for k in d["kernels"]), rel=1e-12)
    # The recorded pipeline reproduces the report.
    again = tmp_path / "again.json"
    code, _, err = report(capsys, EXAMPLES / "mlp.swir", "--machine", "optimistic",
                          "--pipeline", " ".join(d["pipeline"]), "--json", again)
    assert code == 0, err
    d2 = json.loads(again.read_text())
    assert d2["kernels"] == d["kernels"] and d2["level"] is None
    assert d2["pipeline"] == d["pipeline"]


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_plot_is_a_png(tmp_path, capsys):
    path = tmp_path / "roofline.png"
    code, _, err = report(capsys, EXAMPLES / "resnet.swir", "-O0", "--plot", path)
    assert code == 0, err
    data = path.read_bytes()
    assert png_size(data) == (1800, 1050)                # 12 x 7 inches at 150 dpi
    assert 50_000 < len(data) < 2_000_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["roofline.png"]   # no temp file


def test_plot_key():
    """The key numbers kernels as the table does, marks the copies (left off
    the log axes) and, past 40 kernels, says only the 40 slowest are numbered."""
    pytest.importorskip("matplotlib")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    def kernel(i: int) -> KernelCost:      # k3 is a copy; k0 is the slowest
        return KernelCost(
            name=f"k{i}", shape="4", spawns=1, barriers=0, flops=0 if i == 3 else 1000 * (i + 1), macs=0,
            busy_cpes=8, ldm_bytes=1024, ldm_capacity=65536, gets=4, puts=4, bytes_in=4096,
            bytes_out=4096, small_share=0.0, blocks=8, blocks_32=8, mem_unaligned=0,
            ldm_unaligned=0, compulsory_bytes=8192, vector_flops=0, peak_compute_s=1e-6,
            compute_s=1e-6,
            dma_s=2e-6, overlapped_dma_s=0.0, modeled_s=(50 - i) * 1e-6, roofline_s=1e-6,
            io_lower_bound_bytes=None)

    ks = [kernel(i) for i in range(45)]
    points = swir_report.plotted(ks)
    assert [p.number for p in points] == [n for n in range(1, 46) if n != 4]
    assert (points[1].x, points[1].y) == pytest.approx((2000 / 8192, 2000 / 49e-6 / 1e9))
    fig = Figure(figsize=(12, 7), dpi=150)
    FigureCanvasAgg(fig)
    swir_report.key_text(fig.add_axes((0.65, 0.05, 0.3, 0.9)), ks, points)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts[1].strip() == "1: k0 (50.00 µs)"
    assert [t.strip() for t in texts if t.endswith("*")] == ["4: k3 (47.00 µs)  *"]
    assert sum(1 for t in texts if re.match(r"\s*\d+: ", t)) == 40
    assert any("5 more kernels (only the 40 slowest are numbered)" in t for t in texts)
    assert any("not plotted: no flops" in t for t in texts)


# ---------------------------------------------------------------------------
# The zoo
# ---------------------------------------------------------------------------

def zoo_report(name: str, root: Path) -> tuple[dict, set[str]]:
    """ONNX -> swir-import -> swir-report -O0 --json; and the CPE kernels of
    the same module lowered by swir-opt."""
    zoo, reduced = siblings.zoo(), siblings.sibling("test_zoo_e2e").REDUCED
    kwargs, external = reduced[name]
    d = root / name
    d.mkdir()
    onnx_path, swir_path = d / f"{name}.onnx", d / f"{name}.swir"
    zoo.save(zoo.build(name, **kwargs), onnx_path, external_data=external)
    run("swir-import", onnx_path, "-o", swir_path)
    printed = run("swir-report", "-O0", swir_path, "--json", d / "report.json")
    assert max(len(line) for line in printed.splitlines()) <= 120, name    # the default width
    lowered = d / f"{name}.dma.swir"
    run("swir-opt", *pipeline_flags("graph", "O0"), swir_path, "-o", lowered)
    module = parse_module(lowered.read_text(), str(lowered))
    cpe = {f.name for f in module.items if getattr(f, "target", None) == "cpe"}
    return json.loads((d / "report.json").read_text()), cpe


def run(tool: str, *args) -> str:
    r = subprocess.run([str(BIN / tool), *map(str, args)], capture_output=True, text=True,
                       check=False)
    assert r.returncode == 0, f"{tool} failed ({r.returncode}):\n{r.stderr}"
    return r.stdout


def test_every_zoo_model(tmp_path):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    names = list(siblings.sibling("test_zoo_e2e").REDUCED)
    assert len(names) == 8
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(names, pool.map(lambda n: zoo_report(n, tmp_path), names)))
    for name, (d, cpe) in results.items():
        kernels = {k["name"] for k in d["kernels"]}
        assert kernels == cpe, (name, kernels ^ cpe)
        assert all(k["modeled_s"] > 0 and k["dma_bytes"] > 0 for k in d["kernels"]), name
        totals = d["totals"]
        assert min(totals["flops"], totals["bytes_in"], totals["bytes_out"],
                   totals["modeled_s"], totals["roofline_s"]) > 0, name
        assert totals["roofline_s"] <= totals["modeled_s"], name


def test_plot_without_matplotlib_names_the_extra(tmp_path, capsys, monkeypatch):
    """From an install, the report extra; from a source checkout, '.[report]'
    (pip install 'swir[report]' finds no package there)."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)     # import matplotlib fails
    code, _, err = report(capsys, str(PAPER), "--plot", str(tmp_path / "r.png"))
    assert code == 1 and err.count("\n") == 1, err
    assert "pip install 'swir[report]'" in err and "pip install '.[report]'" in err
    assert not (tmp_path / "r.png").exists()


def test_ranks_add_the_collectives_and_the_speedup(tmp_path, capsys):
    """--ranks 2: the mlp split by channels; its collectives' modeled time is
    added to the kernels', and the speed-up is over the module on one core
    group (the report without --ranks)."""
    path, alone = tmp_path / "r2.json", tmp_path / "r1.json"
    code, out, err = report(capsys, EXAMPLES / "mlp.swir", "--ranks", "2", "--split", "model",
                            "--json", path)
    assert code == 0, err
    assert "2 ranks, split model" in out and "speed-up on 2 ranks" in out
    # Per layer, in program order: the input's broadcast first, then each
    # gather right after the kernel whose slice it gathers.
    layers = out.split("per layer, in program order", 1)[1].split("\nper rank:", 1)[0]
    steps = [line.split()[1] for line in layers.splitlines()[2:]]
    assert steps == ["bcast", "matmul_add_relu_0", "add_0", "allgather", "mul_0",
                     "matmul_add_0", "allgather", "softmax_0", "softmax_0_1", "softmax_0_2"]
    d = json.loads(path.read_text())
    assert d["ranks"] == 2 and d["split"] == "model"
    kinds = [c["kind"] for c in d["collectives"]]
    assert kinds.count("bcast") == 1 and "allgather" in kinds
    comm = sum(c["seconds"] for c in d["collectives"])
    assert d["totals"]["communication_s"] == pytest.approx(comm)
    assert d["totals"]["modeled_s"] == pytest.approx(
        sum(k["modeled_s"] for k in d["kernels"]) + comm)
    assert report(capsys, EXAMPLES / "mlp.swir", "--json", alone)[0] == 0
    one = json.loads(alone.read_text())["totals"]["modeled_s"]
    assert d["one_core_group_s"] == pytest.approx(one)
    assert d["speedup"] == pytest.approx(one / d["totals"]["modeled_s"])


# ---------------------------------------------------------------------------
# Width, names and the plot's legend (issue 46)
# ---------------------------------------------------------------------------

def test_the_default_report_fits_120_columns_on_resnet18(tmp_path):
    """ResNet-18 (bench/resnet18_graph.py, the largest model the repository
    writes without onnx): every line of the default report is at most 120
    columns; --wide has every column (216 columns wide before issue 46)."""
    import swir
    from swir.api import report_table
    model = tmp_path / "resnet18.swir"
    subprocess.run([sys.executable, str(ROOT / "bench" / "resnet18_graph.py"), "--batch", "1",
                    "--size", "224", "-o", str(model)], check=True, timeout=120)
    r = swir.report(model, options={"strategy": "greedy"})
    brief, wide = r.text(), r.text(wide=True)
    assert max(len(line) for line in brief.splitlines()) <= 120
    assert max(len(line) for line in wide.splitlines()) > 200
    head = re.split(r"\s{2,}", next(ln for ln in brief.splitlines() if ln.startswith(" #")).strip())
    assert head == list(report_table.BRIEF)
    wide_head = next(ln for ln in wide.splitlines() if ln.startswith(" #"))
    assert re.split(r"\s{2,}", wide_head.strip()) == list(report_table.columns(r.info["_target"]))
    rows, _ = table(brief)
    assert len(rows) == len(r.costs.kernels) > 20


def test_long_kernel_names_keep_their_number_and_stay_unique():
    from swir.api.names import fitted_names
    names = ["transpose_conv2d_add_relu_0", "transpose_conv2d_add_relu_10",
             "transpose_conv2d_add_relu_1", "conv2d_0"]
    short = fitted_names(names, 16)
    assert short == ["transpose_con…_0", "transpose_con…10", "transpose_con…_1", "conv2d_0"]
    assert all(len(n) <= 16 for n in short) and len(set(short)) == len(names)
    # a shared tail: more of it is kept until the names differ
    short = fitted_names(["abcdefghij_x_1", "abcdefghij_y_1"], 10)
    assert short == ["abcdef…x_1", "abcdef…y_1"]
    assert fitted_names(["a_very_long_name_1"], 12, ascii_only=True) == ["a_very_..._1"]


def test_long_lines_wrap_between_words_not_between_a_number_and_its_unit():
    from swir.api.names import wrapped
    line = "  per rank: kernels 287.50 µs, communication 62.17 µs; modeled 349.68 µs"
    assert wrapped([line], 66) == ["  per rank: kernels 287.50 µs, communication 62.17 µs; modeled",
                                   "    349.68 µs"]
    assert wrapped(["short"], 66) == ["short"]


def test_the_plot_is_png_and_svg_with_a_legend(tmp_path):
    """On the mlp: a PNG and an SVG (each a whole image), whose legend says
    what the colours mean."""
    pytest.importorskip("matplotlib")
    import xml.etree.ElementTree as ET

    import swir
    from swir.api import roofline
    r = swir.report(EXAMPLES / "mlp.swir", level="O0")
    png, svg = r.plot(tmp_path / "r.png"), r.plot(tmp_path / "r.svg")
    assert png_size(png.read_bytes()) == (1800, 1050)
    assert ET.parse(svg).getroot().tag.endswith("svg")
    legend = roofline.roofline_figure(r.costs, r.info).axes[0].get_legend()
    texts = [t.get_text() for t in legend.get_texts()]
    kinds = {roofline.kind_of(p, r.costs.machine.peak_flops / r.costs.machine.bandwidth)
             for p in roofline.plotted(r.costs.kernels)}
    assert texts == [roofline.LEGEND[k] for k in roofline.KINDS if k in kinds]
    assert legend.get_title().get_text() == "colour: what bounds the modeled time"


def synthetic(name: str, flops: int, dma_bytes: int, compute_s: float, dma_s: float
              ) -> KernelCost:
    return KernelCost(
        name=name, shape="4", spawns=1, barriers=0, flops=flops, macs=0, busy_cpes=64,
        ldm_bytes=1024, ldm_capacity=65536, gets=4, puts=4, bytes_in=dma_bytes // 2,
        bytes_out=dma_bytes - dma_bytes // 2, small_share=0.0, blocks=8, blocks_32=8,
        mem_unaligned=0, ldm_unaligned=0, compulsory_bytes=dma_bytes, vector_flops=flops,
        peak_compute_s=compute_s, compute_s=compute_s, dma_s=dma_s, overlapped_dma_s=0.0,
        modeled_s=max(compute_s, dma_s), roofline_s=compute_s, io_lower_bound_bytes=None)


def test_coinciding_points_are_drawn_apart_and_dma_right_of_the_ridge_is_explained():
    """Three kernels with the same figures are three markers at least
    SEPARATION points apart, each numbered at its own place; a DMA-bound
    kernel right of the ridge has its own marker, legend entry and a hollow
    marker at its effective intensity, left of the ridge."""
    pytest.importorskip("matplotlib")
    from swir.api import roofline
    from swir.costmodel.cost import CostReport
    m = Machine()
    ridge = m.peak_flops / m.bandwidth
    same = [synthetic(f"same_{i}", 10**6, 10**5, 2e-6, 3e-6) for i in range(3)]
    right = synthetic("small_dmas", 10**8, 10**6, 2e-4, 5e-4)      # 100 flop/B > ridge
    assert right.intensity > ridge
    r = CostReport("main", m, same + [right])
    fig = roofline.roofline_figure(r, {"module": "m", "level": "O3", "machine_name": "default"})
    ax = fig.axes[0]
    centres = [tuple(c) for coll in ax.collections[:2] for c in
               ax.transData.transform(coll.get_offsets())]
    assert len(centres) == 4
    gap = roofline.SEPARATION * fig.dpi / 72
    assert all(math.dist(a, b) >= gap - 1e-6 for i, a in enumerate(centres)
               for b in centres[i + 1:])
    labels = [(t.get_text(), t.xy) for t in ax.texts if t.get_text().isdigit()]
    assert sorted(n for n, _ in labels) == ["1", "2", "3", "4"]
    assert len({xy for _, xy in labels}) == 4                     # no two at one place
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts == [roofline.LEGEND["dma"], roofline.LEGEND["dma-right"]]
    hollow = ax.collections[2].get_offsets()[0]
    assert hollow[0] == pytest.approx(right.flops / (m.bandwidth * right.dma_s)) and \
        hollow[0] < ridge
