"""The emulation's simd.h (swir/codegen/runtime/simd.h): the Sunway vector
types and intrinsics on the host compiler's vector extensions. A small C
program, built with `make emu`'s flags against the runtime, prints what each
intrinsic gives on chosen values; Python checks it lane by lane (lane order of
simd_set_*, simd_loade's splat, fused multiply-adds rounded once, the
compares and selects on NaN, infinities and signed zeros in every lane,
the operators) and that an aligned load or store at a
misaligned address is one error line and exit status 1, while the unaligned
forms take any address."""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import swir
from swir.codegen.project import RUNTIME_FILES, TARGET_HEADER
from swir.target import SW26010

RUNTIME = Path(swir.__file__).parent / "codegen" / "runtime"
CC = shutil.which("cc")
CFLAGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-DSWIR_EMU", "-Iemu"]

pytestmark = pytest.mark.skipif(CC is None, reason="no host C compiler (cc) on PATH")

PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "simd.h"

static float fbuf[16] __attribute__((aligned(32)));
static double dbuf[16] __attribute__((aligned(32)));

static void put_f(floatv4 v) { printf("%a %a %a %a\n", v[0], v[1], v[2], v[3]); }
static void put_d(doublev4 v) { printf("%a %a %a %a\n", v[0], v[1], v[2], v[3]); }

/* Every pair (a, b) of SPECIAL values, in every lane position: rotation r
 * puts pair 4j + (l + r) % 4 in lane l. Per vector, the four compares of
 * (a, b) and the three selects on a (of b, else 7). */
#define SPECIAL_PAIRS(type, put, nan, inf)                                        \
    static void special_##type(void)                                            \
    {                                                                           \
        const type s[8] = {nan, -inf, inf, 0, -(type)0, 1, -1, 2};              \
        type##v4 seven;                                                         \
        for (int l = 0; l < 4; l++)                                             \
            seven[l] = 7;                                                       \
        for (int r = 0; r < 4; r++)                                             \
            for (int j = 0; j < 16; j++) {                                      \
                type##v4 a, b;                                                  \
                for (int l = 0; l < 4; l++) {                                   \
                    int k = 4 * j + (l + r) % 4;                                \
                    a[l] = s[k / 8];                                            \
                    b[l] = s[k % 8];                                            \
                }                                                               \
                put(simd_vfcmpeq(a, b)); put(simd_vfcmple(a, b));               \
                put(simd_vfcmplt(a, b)); put(simd_vfcmpun(a, b));               \
                put(simd_vseleq(a, b, seven)); put(simd_vsellt(a, b, seven));   \
                put(simd_vselle(a, b, seven));                                  \
            }                                                                   \
    }
SPECIAL_PAIRS(float, put_f, NAN, INFINITY)
SPECIAL_PAIRS(double, put_d, (double)NAN, (double)INFINITY)

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "values";
    floatv4 f, g;
    doublev4 d, e;
    for (int i = 0; i < 16; i++) {
        fbuf[i] = (float)(i + 1);
        dbuf[i] = (double)(i + 1);
    }
    if (strcmp(mode, "load_f") == 0)
        simd_load(f, &fbuf[1]);           /* 4-byte aligned: not 16 */
    if (strcmp(mode, "load_d") == 0)
        simd_load(d, &dbuf[2]);           /* 16-byte aligned: not 32 */
    if (strcmp(mode, "store_d") == 0)
        simd_store(simd_set_doublev4(1, 2, 3, 4), &dbuf[1]);
    if (strcmp(mode, "special") == 0) {
        special_float();
        special_double();
    }
    if (strcmp(mode, "values") != 0)
        return 0;
    simd_load(f, &fbuf[4]);                                   /* 16-byte aligned */
    put_f(f);
    simd_loadu(g, &fbuf[1]);
    put_f(g);
    simd_load(d, &dbuf[4]);                                   /* 32-byte aligned */
    put_d(d);
    simd_loadu(e, &dbuf[1]);
    put_d(e);
    put_f(simd_set_floatv4(1.5f, -2.0f, 3.25f, 0.0f));
    /* Fused: (1 + 2^-23)(1 - 2^-23) - 1 = -2^-46 exactly, 0 if rounded twice. */
    floatv4 a = simd_set_floatv4(1.0f + 0x1p-23f, 2.0f, -3.0f, 0.5f);
    floatv4 b = simd_set_floatv4(1.0f - 0x1p-23f, 4.0f, 5.0f, 0.25f);
    floatv4 c = simd_set_floatv4(-1.0f, 1.0f, 1.0f, 1.0f);
    put_f(simd_vmas(a, b, c));
    put_f(simd_vmss(a, b, c));
    put_f(simd_vnmas(a, b, c));
    put_f(simd_vnmss(a, b, c));
    doublev4 x = simd_set_doublev4(1.0 + 0x1p-52, 2.0, -3.0, 0.5);
    doublev4 y = simd_set_doublev4(1.0 - 0x1p-52, 4.0, 5.0, 0.25);
    doublev4 z = simd_set_doublev4(-1.0, 1.0, 1.0, 1.0);
    put_d(simd_vmad(x, y, z));
    put_d(simd_vnmsd(x, y, z));
    /* The lanes in order: see the test. */
    floatv4 splat_f;
    doublev4 splat_d;
    simd_loade(splat_f, &fbuf[6]);                            /* one element, every lane */
    put_f(splat_f);
    simd_loade(splat_d, &dbuf[3]);
    put_d(splat_d);
    put_f(simd_vseleq(simd_vfcmplt(simd_set_floatv4(1, -2, 3, -4), simd_set_floatv4(-1, 2, -3, 4)),
                      simd_set_floatv4(10, 20, 30, 40), simd_set_floatv4(-10, -20, -30, -40)));
    put_d(simd_vfcmple(simd_set_doublev4(1, -2, 3, -4), simd_set_doublev4(-1, 2, 3, 4)));
    put_f(f * g + f);
    simd_store(f * 2.0f, &fbuf[8]);
    simd_storeu(d, &dbuf[3]);
    printf("%a %a %a\n", fbuf[8], fbuf[11], dbuf[3]);
    int n = 0;                                  /* each address evaluated once */
    simd_load(f, (n++, &fbuf[4]));
    simd_loadu(g, (n++, &fbuf[1]));
    simd_store(f, (n++, &fbuf[8]));
    simd_storeu(g, (n++, &fbuf[1]));
    printf("%d\n", n);
    return 0;
}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("simd")
    (d / "emu").mkdir()
    assert "simd.h" in RUNTIME_FILES    # swir-cg copies it into every project
    for name in RUNTIME_FILES:
        shutil.copy(RUNTIME / name, d / "emu" / name)
    (d / "emu" / TARGET_HEADER).write_text(SW26010.c_defines())
    (d / "main.c").write_text(PROGRAM)
    cmd = [CC, *CFLAGS, "main.c", "emu/swir_emu.c", "-o", "prog", "-lpthread", "-lm"]
    r = subprocess.run(cmd, cwd=d, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    return d / "prog"


def _values(program: Path) -> list[list[float]]:
    r = subprocess.run([str(program)], capture_output=True, text=True, check=True, timeout=30)
    return [[float.fromhex(x) for x in line.split()] for line in r.stdout.splitlines()]


def test_lanes_fused_multiply_adds_splats_and_selects(program):
    out = _values(program)
    assert out[0] == [5, 6, 7, 8] and out[1] == [2, 3, 4, 5]          # load, loadu (f32)
    assert out[2] == [5, 6, 7, 8] and out[3] == [2, 3, 4, 5]          # load, loadu (f64)
    assert out[4] == [1.5, -2.0, 3.25, 0.0]                            # lane 0 first
    a = np.array([1 + 2.0**-23, 2, -3, 0.5], np.float32)
    b = np.array([1 - 2.0**-23, 4, 5, 0.25], np.float32)
    c = np.array([-1, 1, 1, 1], np.float32)
    exact = a.astype(np.float64) * b   # exact in f64: the fused result, rounded once
    assert out[5] == list((exact + c).astype(np.float32))
    assert out[5][0] == -(2.0**-46)    # rounding a*b first would give 0
    assert out[6] == list((exact - c).astype(np.float32))
    assert out[7] == list((-exact + c).astype(np.float32))
    assert out[8] == list((-exact - c).astype(np.float32))
    assert out[9][0] == -(2.0**-104) and out[9][1:] == [9.0, -14.0, 1.125]
    assert out[10] == [2.0**-104, -9.0, 14.0, -1.125]                 # -x*y - z
    assert out[11] == [7, 7, 7, 7] and out[12] == [4, 4, 4, 4]        # simd_loade
    # the select keeps its second operand where the compare gave 0.0
    assert out[13] == [10, -20, 30, -40] and out[14] == [0, 2, 2, 2]  # true is 2.0
    assert out[15] == [5 * 2 + 5, 6 * 3 + 6, 7 * 4 + 7, 8 * 5 + 8]
    assert out[16] == [10, 16, 5]
    assert out[17] == [4]


@pytest.mark.parametrize("mode, what", [("load_f", "simd_load"), ("load_d", "simd_load"),
                                        ("store_d", "simd_store")])
def test_a_misaligned_aligned_access_is_one_error_line(program, mode, what):
    r = subprocess.run([str(program), mode], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, (r.returncode, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    size = 16 if mode == "load_f" else 32
    assert f"error: {what} at 0x" in lines[0]
    assert f"a {size}-byte vector access must be {size}-byte aligned" in lines[0]


SPECIAL = [math.nan, -math.inf, math.inf, 0.0, -0.0, 1.0, -1.0, 2.0]


def _lanes_expected(a: float, b: float) -> list[float]:
    """The four compares of (a, b) (2.0 or 0.0; an unordered lt / le is
    false, as openeuler-mirror/kernel's simd_cmp_emul_d) and the three
    selects on a (b where a == 0, a < 0, a <= 0, else 7)."""
    def flag(x: bool) -> float:
        return 2.0 if x else 0.0
    un = math.isnan(a) or math.isnan(b)
    return [flag(a == b), flag(a <= b), flag(a < b), flag(un),
            b if a == 0 else 7.0, b if a < 0 else 7.0, b if a <= 0 else 7.0]


def test_compares_and_selects_on_nan_infinities_and_signed_zeros_in_every_lane(program):
    r = subprocess.run([str(program), "special"], capture_output=True, text=True, check=True,
                       timeout=30)
    rows = [[float.fromhex(x) for x in line.split()] for line in r.stdout.splitlines()]
    assert len(rows) == 2 * 4 * 16 * 7          # f32, then f64
    for half in (rows[:448], rows[448:]):
        seen = set()
        for n in range(4 * 16):
            rot, j = divmod(n, 16)
            got = half[7 * n: 7 * n + 7]
            for lane in range(4):
                k = 4 * j + (lane + rot) % 4
                a, b = SPECIAL[k // 8], SPECIAL[k % 8]
                want = _lanes_expected(a, b)
                have = [row[lane] for row in got]
                assert [str(x) for x in have] == [str(x) for x in want], (a, b, lane)
                seen.add((k, lane))
        assert len(seen) == 64 * 4              # every pair in every lane
