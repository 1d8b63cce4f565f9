"""The athread emulation's two ways of running the CPEs: as coroutines on the
MPE's thread (the default build) and as one thread per CPE (SWIR_EMU_THREADS,
and the sanitizer builds). The same program gives the same results and the
same counters both ways; the coroutines block on nothing while the CPEs run
(no voluntary context switch over 40 spawns of 16 barriers each, where the
threads make thousands); a CPE has a stack as deep as a thread's."""

from __future__ import annotations

import numpy as np
import pytest
from test_emu_runtime import (CC, GOOD_DEFS, GOOD_MAIN, GOOD_SLAVE, build, check_good, run,
                              run_good)

pytestmark = pytest.mark.skipif(CC is None, reason="no host C compiler (cc) on PATH")

THREADS = ("-DSWIR_EMU_THREADS",)


def without_times(stats: dict) -> dict:
    for k in [*stats["functions"].values(), stats["total"]]:
        k.pop("wall_seconds")
    return stats


@pytest.mark.parametrize("switch", [(), ("-DSWIR_EMU_ARCH_PRCTL",)], ids=["wrfsbase", "arch_prctl"])
def test_coroutines_and_threads_agree(tmp_path, switch):
    """The strided-DMA program (deferred DMAs, barriers, a 32-byte block
    written by two CPEs either side of a barrier) is right both ways, with the
    same output arrays and the same JSON counters, wall time aside; the
    coroutines also where the thread pointer is switched by system call (the
    path for kernels or CPUs without user-mode wrfsbase)."""
    co = build(tmp_path / "co", GOOD_DEFS, GOOD_MAIN, GOOD_SLAVE, switch)
    th = build(tmp_path / "th", GOOD_DEFS, GOOD_MAIN, GOOD_SLAVE, THREADS)
    check_good(co)
    check_good(th)
    (s_co, a_co, _), (s_th, a_th, _) = run_good(co), run_good(th)
    assert without_times(s_co) == without_times(s_th)
    assert a_co.keys() == a_th.keys()
    for name in a_co:
        np.testing.assert_array_equal(a_co[name], a_th[name])


SWITCH_DEFS = r"""
#define CPES 64
#define SPAWNS 40
#define BARRIERS 16
struct args { long *order; };  /* order: where the deep CPEs write */
"""

# Each CPE passes 16 barriers; with `order`, it also recurses 1 MB deep in
# 64 KB frames (a thread's stack holds that; a small coroutine stack would not).
SWITCH_SLAVE = r"""
#include <string.h>
#include <slave.h>
#include "mix.h"

__thread_local double ldm_word;

static long deep(int depth)
{
    volatile char frame[65536];
    memset((char *)frame, depth, sizeof frame);
    return depth ? frame[depth] + deep(depth - 1) : frame[0];
}

void switch_kernel(void *p)
{
    const struct args *a = p;
    int id = athread_get_id(-1), b;
    SWIR_LDM_FRAME(&ldm_word, sizeof ldm_word);
    for (b = 0; b < BARRIERS; b++)
        athread_syn(ARRAY_SCOPE, 0xffff);
    if (a->order)
        a->order[id] = deep(16);
}
"""

SWITCH_MAIN = r"""
#include <stdio.h>
#include <sys/resource.h>
#include <athread.h>
#include "mix.h"

extern void SLAVE_FUN(switch_kernel)(void *);
static long order[CPES];

static long voluntary_switches(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_nvcsw;
}

int main(void)
{
    struct args none = {0}, deep = {order};
    long before;
    int s, i;
    athread_init();
    athread_spawn(switch_kernel, &none);      /* the threads have started */
    athread_join();
    before = voluntary_switches();
    for (s = 0; s < SPAWNS; s++) {
        athread_spawn(switch_kernel, &none);
        athread_join();
    }
    printf("switches %ld\n", voluntary_switches() - before);
    athread_spawn(switch_kernel, &deep);
    athread_join();
    for (i = 0; i < CPES; i++)
        printf("%ld ", order[i]);
    printf("\n");
    athread_halt();
    return 0;
}
"""


def run_switches(prog) -> tuple[int, list[int]]:
    r = run(prog)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    first, second = r.stdout.splitlines()
    return int(first.split()[1]), [int(x) for x in second.split()]


def test_coroutines_block_on_nothing(tmp_path):
    """40 spawns of 16 barriers each: the coroutines make no voluntary
    context switch (nothing waits in the kernel), the threads thousands
    (each barrier puts 63 of them to sleep), which is what the test tells
    apart. Every CPE recursed 1 MB deep, its stack as deep as a thread's."""
    co, co_deep = run_switches(build(tmp_path / "co", SWITCH_DEFS, SWITCH_MAIN, SWITCH_SLAVE))
    th, th_deep = run_switches(build(tmp_path / "th", SWITCH_DEFS, SWITCH_MAIN, SWITCH_SLAVE,
                                     THREADS))
    # 0 expected; a few allowed: a CPE's first touch of its stack may wait
    # on the kernel's memory reclaim on a loaded machine, which is not the
    # emulation blocking. 640 barriers' worth apart from the threads either way.
    assert co <= 8, co
    assert th > 40 * 16, th
    # deep(16) sums frame[d] = d for d = 16..1 and frame[0] = 0
    assert co_deep == th_deep == [sum(range(17))] * 64

