"""SWIR_CPE_FP_INIT in the athread emulation: a CPE that calls it computes
with denormals flushed to zero (MXCSR FTZ and DAZ), as a CPE with flush-to-zero
set does, while the MPE's floating-point environment stays as it was, in the
default build (CPEs as coroutines on the MPE's thread, each with its own
MXCSR), the threaded build (SWIR_EMU_THREADS) and the sanitizer builds."""

from __future__ import annotations

import platform
import re

import pytest
from test_emu_runtime import CC, build, run, sanitizer_missing

pytestmark = [
    pytest.mark.skipif(CC is None, reason="no host C compiler (cc) on PATH"),
    pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                       reason="MXCSR is x86's; elsewhere SWIR_CPE_FP_INIT only checks its caller"),
]

FP_DEFS = r"""
#define CPES 64
struct fp_args { float *out; unsigned *csr; };
"""

# Each CPE: before SWIR_CPE_FP_INIT, 1e-30 * 1e-10 is the denormal 1e-40;
# after it, the product is flushed to 0 (FTZ) and the denormal 1e-40 read
# from memory counts as 0 (DAZ: 1e-40 + 0 is 0). The barrier between makes the
# other CPEs run in between (coroutines switch there; MXCSR must follow).
FP_SLAVE = r"""
#include <xmmintrin.h>
#include <slave.h>
#include "mix.h"

__thread_local float frame[8];

void fp_kernel(void *p)
{
    const struct fp_args *a = p;
    volatile float small = 1e-30f, tiny = 1e-10f, denormal = 1e-40f, zero = 0.0f;
    int id = athread_get_id(-1);
    SWIR_LDM_FRAME(frame, sizeof frame);
    a->out[4 * id + 0] = small * tiny;
    SWIR_CPE_FP_INIT();
    athread_syn(ARRAY_SCOPE, 0xffff);
    a->out[4 * id + 1] = small * tiny;
    a->out[4 * id + 2] = denormal + zero;
    a->csr[id] = _mm_getcsr();
}

void mpe_fp_init(void)
{
    SWIR_CPE_FP_INIT();
}
"""

FP_MAIN = r"""
#include <stdio.h>
#include <string.h>
#include <xmmintrin.h>
#include <athread.h>
#include "mix.h"

extern void SLAVE_FUN(fp_kernel)(void *);
extern void mpe_fp_init(void);
/* MXCSR's control bits (its low 6 are sticky exception flags, which the
 * MPE's own arithmetic sets) */
#define CONTROL(csr) ((csr) & ~0x3fu)
static float out[4 * CPES];
static unsigned csr[CPES];

int main(int argc, char **argv)
{
    struct fp_args a = {out, csr};
    volatile float small = 1e-30f, tiny = 1e-10f, denormal = 1e-40f, zero = 0.0f;
    unsigned before = CONTROL(_mm_getcsr());
    int i, spawn;
    if (argc > 1 && strcmp(argv[1], "mpe") == 0) {
        mpe_fp_init();
        return 0;
    }
    athread_init();
    for (spawn = 0; spawn < 2; spawn++) {
        athread_spawn(fp_kernel, &a);
        /* between spawn and join: the MPE's mode, whatever the CPEs did */
        printf("mpe_during %u %g\n", CONTROL(_mm_getcsr()) == before,
               (double)(small * tiny));
        athread_join();
        printf("spawn %d\n", spawn);
        for (i = 0; i < CPES; i++)
            printf("cpe %d %a %a %a %u %u\n", i, (double)out[4 * i], (double)out[4 * i + 1],
                   (double)out[4 * i + 2], (csr[i] & 0x8000u) != 0, (csr[i] & 0x40u) != 0);
    }
    printf("mpe_after %u %a %a\n", CONTROL(_mm_getcsr()) == before, (double)(small * tiny),
           (double)(denormal + zero));
    athread_halt();
    return 0;
}
"""

DENORMAL = float.fromhex("0x1.16c262p-133")    # 1e-40f, the f32 denormal nearest 1e-40


def check_fp(prog) -> None:
    r = run(prog)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    lines = r.stdout.splitlines()
    spawns = [i for i, line in enumerate(lines) if line.startswith("spawn ")]
    assert len(spawns) == 2
    for first in spawns:
        for line in lines[first + 1:first + 65]:
            _, _, before, after, daz, ftz_bit, daz_bit = line.split()
            # the product before SWIR_CPE_FP_INIT: flushed in the second spawn
            # only if the mode stayed from the first (the CPE's own, as LDM)
            assert float.fromhex(after) == 0.0 and float.fromhex(daz) == 0.0, line
            assert (ftz_bit, daz_bit) == ("1", "1"), line
            if first == spawns[0]:
                assert float.fromhex(before) == pytest.approx(DENORMAL, rel=1e-6), line
    mpe = [line.split() for line in lines if line.startswith("mpe_")]
    assert [m[1] for m in mpe] == ["1", "1", "1"], mpe
    assert all(float(m[2]) != 0.0 for m in mpe[:2]), mpe
    assert float.fromhex(mpe[2][2]) != 0.0 and float.fromhex(mpe[2][3]) != 0.0, mpe


@pytest.mark.parametrize("mode", [(), ("-DSWIR_EMU_THREADS",)], ids=["coroutines", "threads"])
def test_cpe_flushes_denormals_and_mpe_does_not(tmp_path, mode):
    """64 CPEs call SWIR_CPE_FP_INIT and pass a barrier: each computes the
    denormal product 1e-30 * 1e-10 as 0 after it (and not before it, in the
    first spawn), reads the denormal 1e-40 as 0, and has FTZ and DAZ set; the
    MPE's MXCSR is unchanged during the spawn and after the join, and its
    denormal arithmetic is not flushed."""
    check_fp(build(tmp_path / "p", FP_DEFS, FP_MAIN, FP_SLAVE, mode))


@pytest.mark.parametrize("flag", ["-fsanitize=thread", "-fsanitize=address,undefined"])
def test_fp_mode_under_sanitizers(tmp_path, flag):
    """The same under ThreadSanitizer and AddressSanitizer (their builds run
    the CPEs as threads)."""
    why = sanitizer_missing(flag, tmp_path)
    if why:
        pytest.skip(why)
    check_fp(build(tmp_path / "p", FP_DEFS, FP_MAIN, FP_SLAVE, (flag, "-g")))


def test_fp_init_on_the_mpe_is_an_error(tmp_path):
    """SWIR_CPE_FP_INIT is CPE code: on the MPE it would change the host
    code's mode, so it stops the run with one line."""
    r = run(build(tmp_path / "p", FP_DEFS, FP_MAIN, FP_SLAVE), "mpe")
    assert r.returncode == 1
    assert re.fullmatch(r"swir-emu: error: SWIR_CPE_FP_INIT called outside a CPE \(it is CPE "
                        r"code; this thread is the MPE\)\n", r.stderr), r.stderr
