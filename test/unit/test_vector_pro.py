"""The SW26010-Pro's 512-bit vectors (issue 47, item 1): the vector plan, the
cost model and the LDM plan search take the lanes from the target (8 on the
Pro: floatv8 / doublev8; 4 on the SW26010: floatv4 / doublev4), and the
Pro's C written with 8 lanes passes its dialect check (test/sunway/swgcc)
and runs under the emulation as the interpreter computes."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from swir.analysis import vector_plan as V
from swir.codegen import emulate
from swir.codegen.project import Options, generate, write_project
from swir.costmodel import trial
from swir.costmodel.cost import cost_report
from swir.interp.loop import io_signature
from swir.interp.run import run_function
from swir.ir.core import Module
from swir.parser import parse_module
from swir.passes import pass_class
from swir.passes.buffered.ldm_search import nest_cycles, nest_cycles_floor, tiled
from swir.passes.manager import PassManager
from swir.target import SW26010, SW26010_PRO, Target, record_target
from swir.verifier import verify

from test_search_shortcuts import nests, sample_tilings
from test_vector_plan import plans

PIPELINE = ["dce", "cse", "dce", "lower-loops", "ldm-plan", "insert-dma"]


def graph(body: str, args: str, result: str) -> str:
    return f"""module "pro"
stage graph
func @main({args}) -> {result} {{
'entry:
{body}
}}
"""


CONV = graph("  %y = conv2d %x, %w {pad = [1, 1, 1, 1]} : <1 x 16 x 20 x 21 x {t}>\n  return %y",
             "%x: <1 x 8 x 20 x 21 x {t}>, %w: <16 x 8 x 3 x 3 x {t}>",
             "<1 x 16 x 20 x 21 x {t}>")
MATMUL = graph("  %c = matmul %a, %b : <24 x 40 x {t}>\n  return %c",
               "%a: <24 x 37 x {t}>, %b: <37 x 40 x {t}>", "<24 x 40 x {t}>")
RELU = graph("  %y = relu %x : <4 x 64 x f32>\n  return %y", "%x: <4 x 64 x f32>",
             "<4 x 64 x f32>")
# a stride-2 conv: its input gathered lane by lane (simd_set_*)
STRIDED = graph("  %y = conv2d %x, %w {stride = [2, 2], pad = [1, 1, 1, 1]} : "
                "<1 x 8 x 10 x 10 x {t}>\n  return %y",
                "%x: <1 x 4 x 20 x 20 x {t}>, %w: <8 x 4 x 3 x 3 x {t}>",
                "<1 x 8 x 10 x 10 x {t}>")
# 7 columns, fewer than the Pro's lanes: one tail block of gathered lanes
CONV7 = graph("  %y = conv2d %x, %w {pad = [1, 1, 1, 1]} : <1 x 8 x 7 x 7 x {t}>\n  return %y",
              "%x: <1 x 4 x 7 x 7 x {t}>, %w: <8 x 4 x 3 x 3 x {t}>", "<1 x 8 x 7 x 7 x {t}>")
# 13 columns: a map whose last 5 columns are the vector ending at the bound
CLIP = graph("  %y = clip %x {min = -1.0, max = 2.0} : <3 x 5 x 13 x {t}>\n  return %y",
             "%x: <3 x 5 x 13 x {t}>", "<3 x 5 x 13 x {t}>")


@pytest.fixture
def wide(monkeypatch) -> Target:
    """The SW26010-Pro, with the trial lowerings' cache emptied."""
    monkeypatch.setattr(trial, "_CACHE", {})
    return SW26010_PRO


def lowered(text: str, target: Target = SW26010) -> Module:
    m = parse_module(text, "<pro>")
    verify(m)
    PassManager([pass_class(n)() for n in PIPELINE], verify_each=True, target=target).run(m)
    return m


def test_the_vector_unit_follows_the_targets_vector_width():
    four, eight = V.vector_unit(SW26010), V.vector_unit(SW26010_PRO)
    assert four.lanes == 4 and eight.lanes == 8
    assert [four.type_name(t) for t in ("f32", "f64")] == ["floatv4", "doublev4"]
    assert [eight.type_name(t) for t in ("f32", "f64")] == ["floatv8", "doublev8"]
    assert eight.set_name("f64") == "simd_set_doublev8" and eight.fma_name("f32") == "simd_vmas"
    assert [four.align_bytes(b) for b in (4, 8)] == [16, 32]
    assert [eight.align_bytes(b) for b in (4, 8)] == [32, 64]
    assert (four.set_memory, eight.set_memory) == (5, 9)
    assert (four.cast_memory, eight.cast_memory) == (10, 18)


def test_the_pros_plans_have_8_lanes():
    for text in (CONV, MATMUL, RELU):
        found = plans(lowered(text.replace("{t}", "f32"), SW26010_PRO))
        assert found and all(p.lanes == 8 and p.target is SW26010_PRO for p in found)
    reduce = [p for p in plans(lowered(CONV.replace("{t}", "f32"), SW26010_PRO))
              if p.kind == "reduce"]
    assert reduce and all(p.U * p.M + p.U + p.M <= SW26010_PRO.vector_registers
                          - V.SPARE_REGISTERS for p in reduce)


def test_a_block_costs_per_point_what_its_lanes_give():
    """docs/cost-model.md, "Compute": a 4 x 4 block of FMAs with a vector
    load and a broadcast per row and column issues 16 FMAs per step; the
    step covers 4 x 4 x lanes points: 16 / 64 on the SW26010, 16 / 128 on
    the Pro. A gathered input costs a load per lane and simd_set's lanes + 1."""
    bcast = V._Profile(loads=((False, "contig"), (True, "invariant")), ops=0,
                       reduction_points=None)
    assert V._reduce_cost(bcast, 4, 4, SW26010) == 16 / 64
    assert V._reduce_cost(bcast, 4, 4, SW26010_PRO) == 16 / 128
    gathered = V._Profile(loads=((False, "gather"), (True, "invariant")), ops=0,
                          reduction_points=None)
    assert V._reduce_cost(gathered, 4, 4, SW26010_PRO) == (4 * (8 + 9) + 4) / 128
    # 13 known columns, 8 rows: one block of 2 vectors, the second the 8
    # columns ending at the bound (5 new): 16 FMAs per 8 x 13 points
    assert V._block_point_cost(bcast, 13, 8, 8, 2, SW26010_PRO, True) == 16 / 104


def test_the_cost_model_charges_the_pros_lanes():
    """The same plan (the SW26010's tiles) costed on the Pro: the relu's map
    takes 4 vector instructions (its select form) per step of 8 columns
    instead of 4, so half the cycles over its 256 points (the compute time
    is the cycles over the busy CPEs at the target's clock)."""
    m = lowered(RELU)
    four = {k.name: k for k in cost_report(m).kernels}
    record_target(m.attrs, SW26010_PRO)
    eight = {k.name: k for k in cost_report(m).kernels}
    relu = [n for n, k in four.items() if k.vector_flops]
    assert relu
    for n in relu:
        def cycles(k, target: Target) -> float:
            return k.compute_s * k.busy_cpes * target.clock_hz
        assert cycles(four[n], SW26010) == pytest.approx(256 * 4 / 4)
        assert cycles(eight[n], SW26010_PRO) == pytest.approx(256 * 4 / 8)
        assert eight[n].vector_flops == four[n].vector_flops == 256


def test_the_plan_search_charges_the_pros_lanes():
    """nest_cycles (what -ldm-plan's search scores a tiling by) and its lower
    bound, on the Pro: a conv's body (a mul and an add, fused) is at least
    1 / 8 cycle per point in 8 lanes, 1 / 4 in 4; no sampled tiling costs
    less than the floor (a tile of fewer than 8 columns is scalar code on
    the Pro: it may cost more there), and the 3 x 3 conv as one tile (14
    columns: a block of floatv8 accumulators) costs less on the Pro. The
    1 x 1 conv's 7 columns are one tail block on the Pro: per step of its
    32 input channels, 8 rows of FMAs (8 on the FP pipe), the input's 7
    lanes gathered (7 loads, simd_set's 8 stores and a load) and 8 weight
    splats on the memory pipe, 24 cycles; then 8 x (1 + 3 x 7) to add the
    lanes to Y, over the 32 steps; for 8 x 7 points."""
    for nest, _ in nests():
        every = np.prod([v.extent for v in nest.vars])
        assert V.point_cycles_floor(nest.body, SW26010) == 1 / 4
        assert V.point_cycles_floor(nest.body, SW26010_PRO) == 1 / 8
        assert nest_cycles_floor(nest, SW26010_PRO) < nest_cycles_floor(nest, SW26010)
        assert nest_cycles_floor(nest, SW26010_PRO) >= every / 8
        for tiles in sample_tilings(nest, 20):
            with tiled(nest, tiles):
                assert nest_cycles_floor(nest, SW26010_PRO) <= nest_cycles(nest, SW26010_PRO)
    nest = nests()[0][0]
    whole = tuple(v.extent for v in nest.vars)
    assert whole[3] == 14
    with tiled(nest, whole):
        four = V.tile_plan(nest.body, [v.iv for v in nest.vars], list(whole), {}, SW26010)
        eight = V.tile_plan(nest.body, [v.iv for v in nest.vars], list(whole), {}, SW26010_PRO)
        assert four is not None and eight is not None and (four.lanes, eight.lanes) == (4, 8)
        assert nest_cycles(nest, SW26010_PRO) < nest_cycles(nest, SW26010)
    nest = nests()[1][0]
    whole = tuple(v.extent for v in nest.vars)
    assert whole[3] == 7 and whole[4] == 32
    with tiled(nest, whole):
        p = V.tile_plan(nest.body, [v.iv for v in nest.vars], list(whole), {}, SW26010_PRO)
        assert p is not None and p.kind == "reduce" and (p.lanes, p.M, p.U) == (8, 8, 1)
        cost = V.body_cost(nest.body, p, SW26010_PRO)
        assert cost.cycles == pytest.approx((24 + 8 * (1 + 3 * 7) / 32) / 56)
        assert cost.cycles < V.body_cost(nest.body, None, SW26010_PRO).cycles / 10


needs_cc = pytest.mark.skipif(shutil.which("cc") is None or shutil.which("make") is None,
                              reason="needs a host C compiler (cc) and make")


@needs_cc
@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("name, text", [("conv", CONV), ("matmul", MATMUL), ("clip", CLIP),
                                        ("strided", STRIDED), ("conv7", CONV7)])
def test_8_lane_code_runs_as_the_interpreter_computes(wide, tmp_path, name, text, t):
    """The kernels written with floatv8 / doublev8 (their micro-kernels, the
    tails of columns that are not a multiple of 8, the map's last columns as
    the vector ending at the bound) built against the emulation's simd.h
    and run: the interpreter's result (f32 to its tolerance: blocked sums
    add in another order)."""
    text = text.replace("{t}", t)
    m = lowered(text, wide)
    assert all(p.lanes == 8 for p in plans(m))
    out = tmp_path / "p"
    write_project(generate(m, Options(source="<pro>")), str(out), force=False)
    c = (out / "layers_slave.c").read_text()
    vtype = "floatv8" if t == "f32" else "doublev8"
    assert "#include <crts.h>" in c and "CRTS_tid" in c
    assert vtype in c and ("floatv4" not in c and "doublev4" not in c)
    assert "8 lanes of" in c
    if name == "clip":
        assert "the last 5 columns: the 8 ending at the bound, 5 lanes stored" in c
    if name == "conv7":
        assert "/* the last 7 columns, lanes past them repeating the first */" in c
    if t == "f64":          # LDM buffers start 32-byte aligned: a doublev8 loads unaligned
        assert "simd_load(" not in c
    elif name == "matmul":  # rows of 40 columns: floatv8 (32 bytes) aligned
        assert "simd_load(" in c and "simd_store(" in c
    g = parse_module(text, "<pro>")
    main = g.lookup("main")
    dtype = np.float32 if t == "f32" else np.float64
    rng = np.random.default_rng(47)
    args = [rng.standard_normal(p.type.shape).astype(dtype) for p in main.params]
    want = run_function(g, main, args)[0]
    ins, outs = io_signature(m.lookup("main"))
    got = emulate.run(emulate.build(out, "pro"), args, [p.type for p in ins], outs).outputs[0]
    tol = 1e-5 if t == "f32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


# The Pro's dialect check stand-in for simd.h (test/sunway/include-pro).
PRO_INCLUDE = Path(__file__).parents[1] / "sunway" / "include-pro"
CHECK = ["-std=c99", "-pedantic-errors", "-Wall", "-Wextra", "-Werror", "-fsyntax-only"]
# What swir's vector code writes on the Pro, every intrinsic it may call
USES = r"""
#include <simd.h>
void k(float *f, double *d);
void k(float *f, double *d)
{
    floatv8 a, b;
    doublev8 x, y;
    simd_load(a, f);
    simd_loadu(b, f + 1);
    simd_loade(b, &f[3]);
    simd_load(x, d);
    simd_loadu(y, d + 1);
    simd_loade(y, &d[2]);
    a = simd_vmas(a, b, a) + simd_vmss(a, b, a) - simd_vnmas(a, b, a) * simd_vnmss(a, b, a);
    x = simd_vmad(x, y, x) / simd_vmsd(x, y, x) + simd_vnmad(x, y, x) - simd_vnmsd(x, y, x);
    a = simd_vseleq(simd_vfcmpun(a, a), simd_vseleq(simd_vfcmplt(b, a), b, a), a);
    x = simd_vsellt(simd_vfcmpeq(x, y), x, y) + simd_vselle(simd_vfcmple(x, y), x, y);
    a = simd_set_floatv8(f[0], f[1], f[2], f[3], f[4], f[5], f[6], -f[7]);
    x = simd_set_doublev8(d[0], d[1], d[2], d[3], d[4], d[5], d[6], -d[7]);
    simd_store(a, f);
    simd_storeu(b, f + 1);
    simd_store(x, d);
    simd_storeu(-y, d + 1);
}
"""


def check_compile(tmp_path: Path, source: str, msimd: bool = True
                  ) -> subprocess.CompletedProcess:
    (tmp_path / "k.c").write_text(source)
    flags = ["-D__SWIR_SWGCC_MSIMD=1"] if msimd else []
    return subprocess.run([shutil.which("cc") or "cc", *CHECK, *flags, f"-I{PRO_INCLUDE}",
                           "k.c"], cwd=tmp_path, capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a host C compiler (cc)")
def test_the_pro_check_header_takes_the_8_lane_code_pedantically(tmp_path):
    r = check_compile(tmp_path, USES)
    assert r.returncode == 0, r.stderr
    r = check_compile(tmp_path, USES, msimd=False)
    assert r.returncode != 0 and "needs swgcc -msimd" in r.stderr


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a host C compiler (cc)")
@pytest.mark.parametrize("line, error", [
    ("floatv4 v; (void)v;", "floatv4"),                                  # the SW26010's type
    ("doublev8 x = {0}; simd_putr(x, 8);", "simd_putr"),                 # no register buses
    ("doublev8 x = {0}; x = simd_vmas(x, x, x); (void)x;", "simd_vmas"),  # f32's FMA on f64
    ("floatv8 a = {0}; doublev8 x = {0}; x = simd_vseleq(a, x, x); (void)x;", "simd_vseleq"),
    ("float f = 0; floatv8 a; simd_loade(a, &f); simd_loade(a, (double *)0);", "simd_loade"),
])
def test_the_pro_check_header_refuses_what_it_does_not_declare(tmp_path, line, error):
    r = check_compile(tmp_path, "#include <simd.h>\nvoid k(void);\nvoid k(void)\n{\n    "
                      + line + "\n}\n")
    assert r.returncode != 0 and error in r.stderr, r.stderr


def _declared(header: Path) -> set[str]:
    """The simd_ names ``header`` declares: functions and function-like macros."""
    text = re.sub(r"/\*.*?\*/", " ", header.read_text(), flags=re.S)
    macros = re.findall(r"^#define\s+(simd_\w+)\(", text, re.M)
    functions = re.findall(r"^extern\s+[\w ]+?\b(simd_\w+)\s*\(", text, re.M)
    return set(macros) | set(functions)


def test_the_8_lane_code_calls_only_what_the_pro_check_header_declares(wide):
    declared = _declared(PRO_INCLUDE / "simd.h")
    called: set[str] = set()
    for text in (CONV, MATMUL, CLIP, RELU, STRIDED, CONV7):
        for t in ("f32", "f64"):
            m = lowered(text.replace("{t}", t), wide)
            c = generate(m, Options(source="<pro>"))["layers_slave.c"].decode()
            called |= set(re.findall(r"\b(simd_\w+)\s*\(", re.sub(r"/\*.*?\*/", " ", c,
                                                                    flags=re.S)))
    assert {"simd_loade", "simd_vmas", "simd_vmad", "simd_vseleq", "simd_vfcmplt",
            "simd_set_floatv8", "simd_set_doublev8"} <= called
    assert called <= declared, called - declared


# The emulation's simd.h on the 8-lane types, as test_emu_simd checks the
# 4-lane ones: values lane by lane, and an aligned access at the Pro's
# alignment (the vector's size, an assumption) or a loud error.
PROGRAM_8 = r"""
#include <stdio.h>
#include <string.h>
#include "simd.h"

static float fbuf[32] __attribute__((aligned(64)));
static double dbuf[32] __attribute__((aligned(64)));

static void put_f(floatv8 v) { for (int i = 0; i < 8; i++) printf("%a ", v[i]); printf("\n"); }
static void put_d(doublev8 v) { for (int i = 0; i < 8; i++) printf("%a ", v[i]); printf("\n"); }

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "values";
    floatv8 f, g;
    doublev8 d, e;
    for (int i = 0; i < 32; i++) {
        fbuf[i] = (float)(i + 1);
        dbuf[i] = (double)(i + 1);
    }
    if (strcmp(mode, "load_f") == 0)
        simd_load(f, &fbuf[4]);           /* 16-byte aligned: not 32 */
    if (strcmp(mode, "load_d") == 0)
        simd_load(d, &dbuf[4]);           /* 32-byte aligned: not 64 */
    if (strcmp(mode, "store_d") == 0)
        simd_store(simd_set_doublev8(1, 2, 3, 4, 5, 6, 7, 8), &dbuf[2]);
    if (strcmp(mode, "values") != 0)
        return 0;
    simd_load(f, &fbuf[8]);                                   /* 32-byte aligned */
    put_f(f);
    simd_loadu(g, &fbuf[1]);
    put_f(g);
    simd_load(d, &dbuf[8]);                                   /* 64-byte aligned */
    put_d(d);
    simd_loadu(e, &dbuf[3]);
    put_d(e);
    put_f(simd_set_floatv8(1.5f, -2.0f, 3.25f, 0.0f, 5, 6, 7, 8));
    /* Fused in every lane: (1 + 2^-23)(1 - 2^-23) - 1 = -2^-46, 0 if rounded twice. */
    floatv8 a = simd_set_floatv8(1.0f + 0x1p-23f, 2, -3, 0.5f, 1.0f + 0x1p-23f, 1, 1, 1.0f + 0x1p-23f);
    floatv8 b = simd_set_floatv8(1.0f - 0x1p-23f, 4, 5, 0.25f, 1.0f - 0x1p-23f, 1, 1, 1.0f - 0x1p-23f);
    floatv8 c = simd_set_floatv8(-1, 1, 1, 1, -1, 0, 0, -1);
    put_f(simd_vmas(a, b, c));
    put_f(simd_vnmss(a, b, c));
    doublev8 x = simd_set_doublev8(1.0 + 0x1p-52, 2, -3, 0.5, 1, 1, 1, 1.0 + 0x1p-52);
    doublev8 y = simd_set_doublev8(1.0 - 0x1p-52, 4, 5, 0.25, 1, 1, 1, 1.0 - 0x1p-52);
    doublev8 z = simd_set_doublev8(-1, 1, 1, 1, 0, 0, 0, -1);
    put_d(simd_vmad(x, y, z));
    put_d(simd_vmsd(x, y, z));
    simd_loade(f, &fbuf[6]);                                  /* one element, every lane */
    put_f(f);
    simd_loade(d, &dbuf[3]);
    put_d(d);
    /* swir's max(p, q) in the select form swir/codegen/vector.py writes */
    floatv8 p = simd_set_floatv8(1, -2, 3, -4, 0.0f / 0.0f, 6, -0.0f, 8);
    floatv8 q = simd_set_floatv8(-1, 2, -3, 4, 5, 0.0f / 0.0f, 0.0f, 8);
    put_f(simd_vseleq(simd_vfcmpun(p, p), simd_vseleq(simd_vfcmplt(q, p), q, p), p));
    put_d(simd_vfcmple(simd_set_doublev8(1, -2, 3, -4, 5, 6, 7, 8),
                       simd_set_doublev8(-1, 2, 3, 4, 5, 7, 6, 8)));
    simd_store(g * 2.0f, &fbuf[16]);
    simd_storeu(e, &dbuf[1]);
    printf("%a %a %a %a\n", fbuf[16], fbuf[23], dbuf[1], dbuf[8]);
    return 0;
}
"""


@pytest.fixture(scope="module")
def program_8(tmp_path_factory) -> Path:
    from test_emu_simd import CC, CFLAGS, RUNTIME
    from swir.codegen.project import RUNTIME_FILES, TARGET_HEADER
    if CC is None:
        pytest.skip("no host C compiler (cc) on PATH")
    d = tmp_path_factory.mktemp("simd8")
    (d / "emu").mkdir()
    for name in RUNTIME_FILES:
        shutil.copy(RUNTIME / name, d / "emu" / name)
    (d / "emu" / TARGET_HEADER).write_text(SW26010_PRO.c_defines())
    (d / "main.c").write_text(PROGRAM_8)
    cmd = [CC, *CFLAGS, "main.c", "emu/swir_emu.c", "-o", "prog", "-lpthread", "-lm"]
    r = subprocess.run(cmd, cwd=d, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    return d / "prog"


def test_the_8_lane_intrinsics_lane_by_lane(program_8):
    r = subprocess.run([str(program_8)], capture_output=True, text=True, check=True, timeout=30)
    out = [[float.fromhex(x) for x in line.split()] for line in r.stdout.splitlines()]
    assert out[0] == list(range(9, 17)) and out[1] == list(range(2, 10))   # load, loadu (f32)
    assert out[2] == list(range(9, 17)) and out[3] == list(range(4, 12))   # load, loadu (f64)
    assert out[4] == [1.5, -2.0, 3.25, 0.0, 5, 6, 7, 8]                     # lane 0 first
    # fused: lanes 0, 4 and 7 give -2^-46 (0 if a*b were rounded first)
    assert [out[5][k] for k in (0, 4, 7)] == [-(2.0**-46)] * 3
    assert out[5][1:4] == [9.0, -14.0, 1.125] and out[5][5:7] == [1.0, 1.0]
    assert [out[6][k] for k in (0, 4, 7)] == [2.0**-46] * 3 and out[6][1] == -9.0   # -a*b-c
    assert [out[7][k] for k in (0, 7)] == [-(2.0**-104)] * 2 and out[7][4] == 1.0
    assert out[8][:3] == [2.0, 7.0, -16.0]                                     # a*b-c
    assert out[9] == [7.0] * 8 and out[10] == [4.0] * 8                      # simd_loade
    # swir's max: a where a > b or a is NaN, else b (a NaN either side gives
    # NaN; max(-0, 0) is b, +0)
    m = out[11]
    assert m[:4] == [1, 2, 3, 4] and str(m[4]) == str(m[5]) == "nan" and m[7] == 8
    assert str(m[6]) == "0.0"
    assert out[12] == [0, 2, 2, 2, 2, 2, 0, 2]                                 # le: 2.0 or 0.0
    assert out[13] == [4.0, 18.0, 4.0, 11.0]                                   # stores


@pytest.mark.parametrize("mode, what, size", [("load_f", "simd_load", 32),
                                              ("load_d", "simd_load", 64),
                                              ("store_d", "simd_store", 64)])
def test_a_misaligned_8_lane_access_is_one_error_line(program_8, mode, what, size):
    r = subprocess.run([str(program_8), mode], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, (r.returncode, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert f"error: {what} at 0x" in lines[0]
    assert f"a {size}-byte vector access must be {size}-byte aligned" in lines[0]
