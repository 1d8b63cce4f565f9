"""The emulation's simd.h (swir/codegen/runtime/simd.h): the Sunway vector
types and intrinsics on the host compiler's vector extensions. A small C
program, built with `make emu`'s flags against the runtime, prints what each
intrinsic gives on chosen values; Python checks it lane by lane (lane order of
simd_set_*, fused multiply-adds rounded once, the reduction's order,
lane-wise max / min, the operators) and that an aligned load or store at a
misaligned address is one error line and exit status 1, while the unaligned
forms take any address."""

from __future__ import annotations

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
    printf("%a\n", simd_reduc_pluss(simd_set_floatv4(0x1p24f, 1.0f, 1.0f, 2.0f)));
    printf("%a\n", simd_reduc_plusd(simd_set_doublev4(0x1p53, 1.0, 1.0, 2.0)));
    put_f(simd_smaxs(simd_set_floatv4(1, -2, 3, -4), simd_set_floatv4(-1, 2, -3, 4)));
    put_d(simd_smind(simd_set_doublev4(1, -2, 3, -4), simd_set_doublev4(-1, 2, -3, 4)));
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


def test_lanes_fused_multiply_adds_and_reductions(program):
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
    # ((2^24 + 1) + 1) + 2: 2^24 + 1 rounds to 2^24 (ties to even), so does
    # the next step, then + 2 is exact: 2^24 + 2 (a pairwise sum gives 2^24 + 4).
    assert out[11] == [2.0**24 + 2]
    assert out[12] == [2.0**53 + 2]
    assert out[13] == [1, 2, 3, 4] and out[14] == [-1, -2, -3, -4]
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
