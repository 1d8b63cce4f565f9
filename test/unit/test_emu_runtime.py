"""The athread emulation runtime (swir/codegen/runtime: athread.h, slave.h,
swir_emu.h, swir_emu.c) driven by small hand-written C programs built the way
a generated project builds with `make emu`: strided gets and puts move exactly
the right bytes (against numpy); the DMA counters in the JSON match the
dma-stage interpreter's definitions (swir.interp.dma) for a known pattern;
DMAs are deferred until their wait; every detected error is one line and exit
status 1; the 64 CPE threads live from athread_init to athread_halt, their
__thread_local variables kept between spawns like LDM; and the runtime is clean
under ASan/UBSan and TSan, while TSan does report a real race between CPEs,
also in a later spawn."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import swir
from swir.codegen.project import TARGET_HEADER
from swir.interp.dma import SMALL_TRANSFER, size_bucket
from swir.codegen.project import RUNTIME_FILES
from swir.target import SW26010

RUNTIME = Path(swir.__file__).parent / "codegen" / "runtime"
CC = shutil.which("cc")
CFLAGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-DSWIR_EMU", "-Iemu"]
CPES = 64

pytestmark = pytest.mark.skipif(CC is None, reason="no host C compiler (cc) on PATH")

SAN_ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
    "TSAN_OPTIONS": "halt_on_error=1",
}

# What the generated layers_mix.h does: the runtime's hooks under SWIR_EMU,
# no-ops and the hardware spin loop otherwise.
MIX_H = r"""
#ifndef MIX_H
#define MIX_H
#ifdef SWIR_EMU
#include "swir_emu.h"
#else
#define SWIR_KERNEL(name) ((void)0)
#define SWIR_LDM_FRAME(base, bytes) ((void)0)
#define SWIR_WAIT(reply, n) do { while ((reply) != (n)) ; (reply) = 0; } while (0)
#define SWIR_MEMORY(base, bytes, name) ((void)0)
#define SWIR_SYN(next) athread_syn(ARRAY_SCOPE, 0xffff)
#endif
#include <stddef.h>
%s
#endif
"""

# ---------------------------------------------------------------------------
# The "good" program: strided and contiguous DMAs with a known pattern.
# ---------------------------------------------------------------------------

ROWS, COLS, W, GET_COL, PUT_COL, PART = 4, 24, 10, 2, 5, 25
# Each CPE's slot of `part` and `tiny2`, in doubles: whole 32-byte blocks, as no
# two CPEs may write by DMA into one block (the runtime checks it at the join).
PART_SLOT, TINY2_SLOT = 28, 4

GOOD_DEFS = f"""
#define CPES {CPES}
#define ROWS {ROWS}      /* rows of `in` / `out` per CPE */
#define COLS {COLS}     /* doubles per row in main memory */
#define W {W}        /* doubles per row a CPE moves */
#define GET_COL {GET_COL}
#define PUT_COL {PUT_COL}
#define PART {PART}     /* doubles of the partial strided get: 2 rows of W and 5 */
#define PART_SLOT {PART_SLOT}
#define TINY2_SLOT {TINY2_SLOT}
struct args {{
    const double *in; double *out; const double *coef;
    double *seen; double *part; double *tiny; double *tiny2; double *ring;
}};
struct ldm {{
    double tile[ROWS * W]; double part[PART]; double coef[2]; double small[8]; double pad[8];
}};
"""

GOOD_SLAVE = r"""
#include <slave.h>
#include "mix.h"

__thread_local struct ldm ldm;
__thread_local double one;
__thread_local volatile int rget, rput;

void strided_kernel(void *p)
{
    const struct args *a = p;
    int id = athread_get_id(-1), i;
    const double *in = a->in + (size_t)id * ROWS * COLS;
    SWIR_LDM_FRAME(&ldm, sizeof ldm - (size_t)(id % 8) * 8);
    ldm.tile[0] = -1.0;
    /* 320 bytes in 4 blocks of 80, 112 skipped between them */
    athread_get(PE_MODE, (void *)(in + GET_COL), ldm.tile, ROWS * W * 8,
                (void *)&rget, 0, (COLS - W) * 8, W * 8);
    a->seen[id] = ldm.tile[0];            /* deferred: still -1 */
    /* 200 bytes: 2 full blocks of 80 and a partial one of 40 */
    athread_get(PE_MODE, (void *)(in + GET_COL), ldm.part, PART * 8,
                (void *)&rget, 0, (COLS - W) * 8, W * 8);
    athread_get(PE_MODE, (void *)(a->coef + 2 * id), ldm.coef, 16, (void *)&rget, 0, 0, 0);
    /* bsize >= len: one contiguous block, the stride ignored */
    athread_get(PE_MODE, (void *)in, ldm.small, 64, (void *)&rget, 0, 8, 512);
    SWIR_WAIT(rget, 4);
    a->seen[CPES + id] = ldm.tile[0];
    for (i = 0; i < ROWS * W; i++)
        ldm.tile[i] = ldm.tile[i] * ldm.coef[0] + ldm.coef[1];
    athread_put(PE_MODE, ldm.tile, a->out + (size_t)id * ROWS * COLS + PUT_COL, ROWS * W * 8,
                (void *)&rput, (COLS - W) * 8, W * 8);
    athread_put(PE_MODE, ldm.small, a->tiny + 8 * id, 64, (void *)&rput, 0, 0);
    ldm.small[0] = 12345.0;               /* deferred: the put sends this */
    athread_put(PE_MODE, ldm.part, a->part + (size_t)id * PART_SLOT, PART * 8, (void *)&rput,
                0, 0);
    SWIR_WAIT(rput, 3);
    athread_syn(ARRAY_SCOPE, 0xffff);
}

void tiny_kernel(void *p)
{
    const struct args *a = p;
    int id = athread_get_id(-1);
    SWIR_LDM_FRAME(&one, sizeof one);
    one = id;
    athread_put(PE_MODE, &one, a->tiny2 + TINY2_SLOT * id, 8, (void *)&rput, 0, 0);
    SWIR_WAIT(rput, 1);
}

/* Direct main-memory stores ordered only by the barrier: TSan checks that
 * athread_syn orders them, the result that every CPE waits for all. */
void noname_kernel(void *p)
{
    const struct args *a = p;
    int id = athread_get_id(-1);
    double next;
    a->ring[id] = 100.0 + id;
    athread_syn(ARRAY_SCOPE, 0xffff);
    next = a->ring[(id + 1) % CPES];
    athread_syn(ARRAY_SCOPE, 0xffff);
    a->ring[id] = next;
}
"""

GOOD_MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
#include <athread.h>
#include "mix.h"

extern void SLAVE_FUN(strided_kernel)(void *);
extern void SLAVE_FUN(tiny_kernel)(void *);
extern void SLAVE_FUN(noname_kernel)(void *);

/* 64-byte aligned, as the generated program's blocks are: the CPEs' slots
 * are whole 32-byte blocks of main memory. */
#define BLOCK __attribute__((aligned(64)))
static double in[CPES * ROWS * COLS] BLOCK, out[CPES * ROWS * COLS] BLOCK, coef[2 * CPES] BLOCK;
static double seen[2 * CPES] BLOCK, part[CPES * PART_SLOT] BLOCK, tiny[CPES * 8] BLOCK;
static double tiny2[CPES * TINY2_SLOT] BLOCK, ring[CPES] BLOCK;

static void dump(const char *dir, const char *name, const double *x, size_t n)
{
    char path[4096];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    f = fopen(path, "wb");
    if (!f || fwrite(x, sizeof *x, n, f) != n || fclose(f) != 0) {
        perror(path);
        exit(2);
    }
}

int main(int argc, char **argv)
{
    struct args a = {in, out, coef, seen, part, tiny, tiny2, ring};
    size_t i;
    if (argc != 3)
        return 2;
    for (i = 0; i < CPES * ROWS * COLS; i++) {
        in[i] = (double)i * 0.5 - 3.0;
        out[i] = -7.0;
    }
    for (i = 0; i < CPES; i++) {
        coef[2 * i] = 1.0 + (double)i;
        coef[2 * i + 1] = (double)i * 0.25;
    }
    athread_init();
    athread_init();
    SWIR_MEMORY(in, sizeof in, "in");
    SWIR_MEMORY(out, sizeof out, "out");
    SWIR_MEMORY(coef, sizeof coef, "coef");
    SWIR_MEMORY(part, sizeof part, "part");
    SWIR_MEMORY(tiny, sizeof tiny, "tiny");
    SWIR_MEMORY(tiny2, sizeof tiny2, "tiny2");
    SWIR_MEMORY(in, sizeof in, "in");     /* again: renames, adds nothing */
    for (i = 0; i < 2; i++) {
        SWIR_KERNEL("strided");
        athread_spawn(strided_kernel, &a);
        athread_join();
    }
    SWIR_KERNEL("odd \"name\" \\ \n\t");
    athread_spawn(tiny_kernel, &a);
    athread_join();
    athread_spawn(noname_kernel, &a);
    athread_join();
    if (swir_emu_write_stats(argv[1], 2) != 0)
        return 3;
    athread_halt();
    dump(argv[2], "out", out, sizeof out / sizeof *out);
    dump(argv[2], "part", part, sizeof part / sizeof *part);
    dump(argv[2], "tiny", tiny, sizeof tiny / sizeof *tiny);
    dump(argv[2], "tiny2", tiny2, sizeof tiny2 / sizeof *tiny2);
    dump(argv[2], "seen", seen, sizeof seen / sizeof *seen);
    dump(argv[2], "ring", ring, sizeof ring / sizeof *ring);
    printf("%zu\n", sizeof(struct ldm));
    return 0;
}
"""

# (get, len, bsize) of each DMA one CPE issues in strided_kernel, in bytes.
STRIDED_DMAS = [(True, ROWS * W * 8, W * 8), (True, PART * 8, W * 8), (True, 16, 0),
                (True, 64, 512), (False, ROWS * W * 8, W * 8), (False, 64, 0),
                (False, PART * 8, 0)]

# ---------------------------------------------------------------------------
# The error program: argv[1] picks the mistake.
# ---------------------------------------------------------------------------

ERR_DEFS = r"""
#include <string.h>
struct args { const char *mode; unsigned char *mem; };
#define MODE(m) (strcmp(a->mode, (m)) == 0)
"""

ERR_SLAVE = r"""
#include <slave.h>
#include "mix.h"

__thread_local unsigned char buf[512];
__thread_local volatile int reply;

void err_kernel(void *p)
{
    const struct args *a = p;
    if (MODE("ldm_over")) {
        SWIR_LDM_FRAME(buf, 70000);
        return;
    }
    if (MODE("no_frame")) {
        athread_get(PE_MODE, a->mem, buf, 256, (void *)&reply, 0, 0, 0);
        SWIR_WAIT(reply, 1);
        return;
    }
    SWIR_LDM_FRAME(buf, MODE("outside_frame") ? 256 : sizeof buf);
    if (MODE("wait_mismatch")) {
        athread_get(PE_MODE, a->mem, buf, 256, (void *)&reply, 0, 0, 0);
        SWIR_WAIT(reply, 2);
    } else if (MODE("not_waited")) {
        athread_get(PE_MODE, a->mem, buf, 256, (void *)&reply, 0, 0, 0);
    } else if (MODE("outside_frame")) {
        athread_get(PE_MODE, a->mem, buf + 128, 256, (void *)&reply, 0, 0, 0);
    } else if (MODE("outside_memory")) {
        athread_put(PE_MODE, buf, a->mem + 900, 256, (void *)&reply, 0, 0);
    } else if (MODE("strided_outside_memory")) {
        /* 256 bytes, but 4 blocks of 64 with 192 skipped span 832 bytes */
        athread_get(PE_MODE, a->mem + 256, buf, 256, (void *)&reply, 0, 192, 64);
    } else if (MODE("swapped")) {
        athread_get(PE_MODE, buf + 256, a->mem, 256, (void *)&reply, 0, 0, 0);
    } else if (MODE("bad_mode")) {
        athread_get(ROW_MODE, a->mem, buf, 256, (void *)&reply, 0, 0, 0);
    } else if (MODE("bad_mask")) {
        athread_get(BCAST_MODE, a->mem, buf, 256, (void *)&reply, 0x0f, 0, 0);
    } else if (MODE("shared_block")) {
        /* 8 bytes per CPE side by side: CPEs 0 to 3 write into one 32-byte block */
        athread_put(PE_MODE, buf, a->mem + 8 * athread_get_id(-1), 8, (void *)&reply, 0, 0);
        SWIR_WAIT(reply, 1);
    } else if (MODE("synced_blocks") || MODE("synced_shared_block")) {
        /* One 32-byte block: CPE 0 writes its bytes 0 to 7 before the barrier
         * between two kernels of the spawn, CPE 1 bytes 8 to 15 after it (the
         * barrier orders them: allowed); in synced_shared_block CPE 2 writes
         * bytes 16 to 23 after it too, beside CPE 1 (not allowed). */
        int id = athread_get_id(-1);
        if (id == 0) {
            athread_put(PE_MODE, buf, a->mem, 8, (void *)&reply, 0, 0);
            SWIR_WAIT(reply, 1);
        }
        SWIR_SYN("next");
        if (id == 1 || (id == 2 && MODE("synced_shared_block"))) {
            athread_put(PE_MODE, buf, a->mem + 8 * id, 8, (void *)&reply, 0, 0);
            SWIR_WAIT(reply, 1);
        }
    } else if (MODE("syn_unwaited")) {
        athread_get(PE_MODE, a->mem, buf, 256, (void *)&reply, 0, 0, 0);
        SWIR_SYN("next");
    } else if (MODE("row_scope")) {
        athread_syn(ROW_SCOPE, 0xff);
    } else if (MODE("syn_mismatch")) {
        if (athread_get_id(-1) != 7)
            athread_syn(ARRAY_SCOPE, 0xffff);
    }
    if (reply)
        SWIR_WAIT(reply, 1);
}
"""

ERR_MAIN = r"""
#include <stdio.h>
#include <athread.h>
#include <slave.h>
#include "mix.h"

extern void SLAVE_FUN(err_kernel)(void *);
static unsigned char mem[1024] __attribute__((aligned(64)));

int main(int argc, char **argv)
{
    struct args args = {argv[1], mem};
    const struct args *a = &args;
    if (argc != 2)
        return 2;
    athread_init();
    if (MODE("join_without_spawn"))
        athread_join();
    if (MODE("get_id_mpe"))
        return athread_get_id(-1);
    if (MODE("stats_unwritable"))
        return swir_emu_write_stats("/nonexistent-dir/x/stats.json", 1) == -1 ? 0 : 4;
    SWIR_MEMORY(mem, sizeof mem, "in");
    SWIR_KERNEL(MODE("ldm_over") ? "matmul_0" : "err");
    athread_spawn(err_kernel, &args);
    if (MODE("spawn_twice"))
        athread_spawn(err_kernel, &args);
    if (MODE("halt_running"))
        athread_halt();
    athread_join();
    if (MODE("synced_blocks"))
        swir_emu_write_stats_to(stdout, 1);
    athread_halt();
    return 0;
}
"""

RACE_SLAVE = r"""
#include <slave.h>
#include "mix.h"

void race_kernel(void *p)
{
    int *word = p;
    *word = athread_get_id(-1);           /* every CPE stores to the same word */
}

/* Each CPE stores to its own word: no race. */
void calm_kernel(void *p)
{
    int *words = p;
    words[athread_get_id(-1)] += 1;
}
"""

RACE_MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
#include <athread.h>
#include "mix.h"

extern void SLAVE_FUN(race_kernel)(void *);
extern void SLAVE_FUN(calm_kernel)(void *);
static int word, words[64];

/* argv[1]: spawns of calm_kernel before race_kernel's (default 0). */
int main(int argc, char **argv)
{
    int i, calm = argc > 1 ? atoi(argv[1]) : 0;
    athread_init();
    for (i = 0; i < calm; i++) {
        athread_spawn(calm_kernel, words);
        athread_join();
    }
    athread_spawn(race_kernel, &word);
    athread_join();
    athread_halt();
    printf("%d\n", word);
    return 0;
}
"""

# ---------------------------------------------------------------------------
# The pool program: the CPE threads live from athread_init to athread_halt.
# ---------------------------------------------------------------------------

POOL_DEFS = r"""
#define CPES 64
#define SPAWNS 20
struct args { int spawn; long *runs; long *tids; double *ring; };
"""

POOL_SLAVE = r"""
#define _GNU_SOURCE
#include <unistd.h>
#include <sys/syscall.h>
#include <slave.h>
#include "mix.h"

/* LDM: kept by the CPE from one spawn to the next. */
__thread_local long runs;
__thread_local double ldm_word;
__thread_local volatile int reply;

void pool_kernel(void *p)
{
    const struct args *a = p;
    int id = athread_get_id(-1), s = a->spawn;
    SWIR_LDM_FRAME(&ldm_word, sizeof ldm_word);
    runs++;
    a->runs[s * CPES + id] = runs;
    a->tids[s * CPES + id] = (long)syscall(SYS_gettid);
    /* Read what the next CPE wrote in the last spawn (join and spawn order
     * it), write this spawn's slot: clean under TSan. */
    ldm_word = (s ? a->ring[((s - 1) % 2) * CPES + (id + 1) % CPES] : 0.0) + 1.0;
    a->ring[(s % 2) * CPES + id] = ldm_word;
    athread_syn(ARRAY_SCOPE, 0xffff);
    athread_put(PE_MODE, &ldm_word, a->ring + 2 * CPES + 4 * id, 8, (void *)&reply, 0, 0);
    SWIR_WAIT(reply, 1);
}

void trap_kernel(void *p)
{
    (void)p;
    swir_emu_trap("trapped in the second spawn");
}
"""

POOL_MAIN = r"""
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <athread.h>
#include "mix.h"

extern void SLAVE_FUN(pool_kernel)(void *);
extern void SLAVE_FUN(trap_kernel)(void *);
static long runs[SPAWNS * CPES], tids[SPAWNS * CPES];
static double ring[6 * CPES] __attribute__((aligned(64)));

/* Every pthread_create of the program (linked with -Wl,--wrap=pthread_create). */
static int creates;
int __real_pthread_create(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *at, void *(*f)(void *), void *arg)
{
    creates++;
    return __real_pthread_create(t, at, f, arg);
}

/* The threads of this process now. */
static int threads(void)
{
    int n = 0;
    struct dirent *e;
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void spawns(struct args *a, int n)
{
    for (a->spawn = 0; a->spawn < n; a->spawn++) {
        SWIR_KERNEL("pool");
        athread_spawn(pool_kernel, a);
        athread_join();
    }
}

int main(int argc, char **argv)
{
    struct args a = {0, runs, tids, ring};
    int i;
    if (argc != 2)
        return 2;
    SWIR_MEMORY(ring, sizeof ring, "ring");
    athread_init();
    if (strcmp(argv[1], "trap") == 0) {
        spawns(&a, 1);
        SWIR_KERNEL("second");
        athread_spawn(trap_kernel, &a);
        athread_join();
        return 0;
    }
    printf("after_init %d %d\n", creates, threads());
    spawns(&a, SPAWNS);
    printf("after_spawns %d %d\n", creates, threads());
    for (i = 0; i < SPAWNS * CPES; i++)
        printf("%s%ld", i ? " " : "runs ", runs[i]);
    for (i = 0; i < SPAWNS * CPES; i++)
        printf("%s%ld", i ? " " : "\ntids ", tids[i]);
    for (i = 0; i < 2 * CPES; i++)
        printf("%s%g", i ? " " : "\nring ", ring[((SPAWNS - 1) % 2) * CPES + i % CPES]);
    athread_halt();
    printf("\nafter_halt %d %d\n", creates, threads());
    athread_init();                       /* new threads: their LDM starts afresh */
    spawns(&a, 1);
    athread_halt();
    printf("again %d %d %ld\n", creates, threads(), runs[0]);
    return swir_emu_write_stats_to(stdout, 1);
}
"""


# ---------------------------------------------------------------------------
# Building and running
# ---------------------------------------------------------------------------

def build(d: Path, defs: str, main: str, slave: str, flags: tuple[str, ...] = ()) -> Path:
    """A project in d laid out like a generated one (main.c, layers_slave.c,
    emu/ with the runtime), built with the `make emu` command line."""
    d.mkdir(parents=True, exist_ok=True)
    emu = d / "emu"
    emu.mkdir(exist_ok=True)
    for name in RUNTIME_FILES:
        shutil.copy(RUNTIME / name, emu / name)
    (emu / TARGET_HEADER).write_text(SW26010.c_defines())    # as swir-cg writes it
    (d / "mix.h").write_text(MIX_H % defs)
    (d / "main.c").write_text(main)
    (d / "layers_slave.c").write_text(slave)
    cmd = [CC, *CFLAGS, *flags, "main.c", "layers_slave.c", "emu/swir_emu.c",
           "-o", "prog", "-lpthread", "-lm"]
    r = subprocess.run(cmd, cwd=d, capture_output=True, text=True, check=False)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr}"
    return d / "prog"


def run(prog: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(prog), *args], cwd=prog.parent, capture_output=True, text=True,
                          env={**os.environ, **SAN_ENV, **(env or {})}, timeout=60,
                          check=False)


def sanitizer_missing(flag: str, tmp: Path) -> str | None:
    """Why `cc` cannot link a threaded program with `flag`, or None."""
    src = tmp / "san.c"
    src.write_text("#include <pthread.h>\nstatic void *f(void *p) { return p; }\n"
                   "int main(void) { pthread_t t; pthread_create(&t, 0, f, 0); "
                   "return pthread_join(t, 0); }\n")
    r = subprocess.run([CC, flag, str(src), "-o", str(tmp / "san"), "-lpthread"],
                       capture_output=True, text=True, check=False)
    if r.returncode != 0:
        return f"cc cannot link {flag}: {r.stderr.strip().splitlines()[-1:]}"
    return None


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("good")
    return build(d, GOOD_DEFS, GOOD_MAIN, GOOD_SLAVE)


@pytest.fixture(scope="module")
def err(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("err")
    return build(d, ERR_DEFS, ERR_MAIN, ERR_SLAVE)


def run_good(prog: Path) -> tuple[dict, dict[str, np.ndarray], int]:
    """Run the good program: its JSON counters, its output arrays and
    sizeof(struct ldm)."""
    out = prog.parent / "out"
    out.mkdir(exist_ok=True)
    stats = prog.parent / "stats.json"
    r = run(prog, str(stats), str(out))
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    arrays = {p.stem: np.fromfile(p, np.float64) for p in out.glob("*.bin")}
    return json.loads(stats.read_text()), arrays, int(r.stdout)


def expected_arrays() -> dict[str, np.ndarray]:
    """What strided_kernel and tiny_kernel leave in main memory, by numpy."""
    inp = (np.arange(CPES * ROWS * COLS) * 0.5 - 3.0).reshape(CPES, ROWS, COLS)
    coef = np.array([[1.0 + i, i * 0.25] for i in range(CPES)])
    out = np.full((CPES, ROWS, COLS), -7.0)
    out[:, :, PUT_COL:PUT_COL + W] = (inp[:, :, GET_COL:GET_COL + W] * coef[:, :1, None]
                                     + coef[:, 1:, None])
    part = np.zeros((CPES, PART_SLOT))
    part[:, :PART] = inp[:, :, GET_COL:GET_COL + W].reshape(CPES, ROWS * W)[:, :PART]
    tiny2 = np.zeros((CPES, TINY2_SLOT))
    tiny2[:, 0] = np.arange(CPES)
    tiny = inp.reshape(CPES, -1)[:, :8].copy()
    tiny[:, 0] = 12345.0
    seen = np.concatenate([np.full(CPES, -1.0), inp[:, 0, GET_COL]])
    return {"out": out.ravel(), "part": part.ravel(), "tiny": tiny.ravel(),
            "tiny2": tiny2.ravel(), "seen": seen,
            "ring": np.roll(np.arange(CPES) + 100.0, -1)}


def counters(dmas: list[tuple[bool, int, int]], times: int) -> dict:
    """The interpreter's DMA counters (swir.interp.dma.DMAInterpreter.transfer,
    with one-byte elements) of `dmas` issued `times` times."""
    c = {"gets": 0, "puts": 0, "bytes_in": 0, "bytes_out": 0, "small_transfers": 0,
         "blocks": 0}
    sizes: Counter = Counter()
    blocks: Counter = Counter()
    for get, n, bsize in dmas:
        c["gets" if get else "puts"] += times
        c["bytes_in" if get else "bytes_out"] += n * times
        sizes[size_bucket(n)] += times
        c["small_transfers"] += times * (n < SMALL_TRANSFER)
        if 0 < bsize < n:
            full, rem = divmod(n, bsize)
            c["blocks"] += times * (full + (rem > 0))
            blocks[size_bucket(bsize)] += times * full
            if rem:
                blocks[size_bucket(rem)] += times
        else:
            c["blocks"] += times
            blocks[size_bucket(n)] += times
    c["transfers"] = c["gets"] + c["puts"]
    c["small_share"] = c["small_transfers"] / c["transfers"] if c["transfers"] else 0.0
    hist = (lambda h: {str(k): v for k, v in sorted(h.items())})
    c["size_histogram"], c["block_histogram"] = hist(sizes), hist(blocks)
    return c


def check_good(prog: Path) -> None:
    stats, arrays, ldm_size = run_good(prog)
    for name, want in expected_arrays().items():
        np.testing.assert_array_equal(arrays[name], want, err_msg=name)

    odd = "odd \"name\" \\ \n\t"
    assert stats["runs"] == 2
    assert list(stats["functions"]) == ["strided", odd, "noname_kernel"]
    s = stats["functions"]["strided"]
    want = counters(STRIDED_DMAS, 2 * CPES)
    assert {k: s[k] for k in want} == want
    assert s["small_share"] == 5 / 7
    peaks = [ldm_size - (i % 8) * 8 for i in range(CPES)]
    assert (s["spawns"], s["calls"], s["waits"]) == (2, 2 * CPES, 2 * 2 * CPES)
    assert (s["ldm_peak"], s["ldm_peak_cpe"]) == (ldm_size, peaks)

    t = stats["functions"][odd]
    assert {k: t[k] for k in want} == counters([(False, 8, 0)], CPES)
    assert (t["spawns"], t["calls"], t["waits"], t["ldm_peak_cpe"]) == (1, CPES, CPES, [8] * CPES)
    n = stats["functions"]["noname_kernel"]
    assert {k: n[k] for k in want} == counters([], 0)
    assert (n["spawns"], n["ldm_peak"], n["ldm_peak_cpe"]) == (1, 0, [0] * CPES)

    total = stats["total"]
    assert {k: total[k] for k in want} == counters(STRIDED_DMAS * 2 + [(False, 8, 0)], CPES)
    assert (total["spawns"], total["calls"], total["waits"]) == (4, 4 * CPES, 5 * CPES)
    assert total["ldm_peak_cpe"] == peaks and total["ldm_peak"] == ldm_size
    for k in (s, t, n, total):
        assert isinstance(k["wall_seconds"], float) and k["wall_seconds"] > 0
    assert total["wall_seconds"] == pytest.approx(
        s["wall_seconds"] + t["wall_seconds"] + n["wall_seconds"])


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------

def test_strided_dmas_counters_and_deferral(good):
    """Strided and partial-block gets and puts move the right bytes; the
    counters match the interpreter's; a get's LDM destination read before its
    wait still holds the old contents, and a put's source overwritten before
    its wait sends the new ones."""
    check_good(good)


def test_alignment_counters(good):
    """mem_misaligned, blocks_32 by hand for strided_kernel's DMAs on one CPE
    (main memory 64-byte aligned): the tile get and put start 16 and 40 bytes
    into a CPE's rows, the part get 16, the coef get 16*id (odd ids: 16 past a
    block): 3 or 4 misaligned; the 64-byte small get and put are one block of
    a multiple of 32 each, the 80-byte blocks and the 200- and 16-byte
    transfers are not: 2. Two spawns of 64 CPEs."""
    stats = good.parent / "stats.json"
    if not stats.exists():
        run_good(good)
    s = json.loads(stats.read_text())["functions"]["strided"]
    assert s["mem_misaligned"] == 2 * (64 * 3 + 32)
    assert s["blocks_32"] == 2 * 64 * 2


def test_json_escapes_kernel_names(good):
    stats = good.parent / "stats.json"
    if not stats.exists():
        run_good(good)
    text = stats.read_text()
    assert '"odd \\"name\\" \\\\ \\u000a\\u0009"' in text


ERRORS = {
    "ldm_over": r"kernel 'matmul_0', CPE \d+: needs 70000 bytes of LDM; the capacity is 61440 "
                r"\(65536 bytes of LDM minus 4096 reserved for the stack and reply words\)",
    "wait_mismatch": r"kernel 'err', CPE \d+: SWIR_WAIT waits for 2 completions on a reply word "
                     r"that has 1 \(on Sunway the CPE would spin forever\)",
    "not_waited": r"kernel 'err', CPE \d+: returned with 1 DMA not waited for \(athread_get of "
                  r"256 bytes on reply word at LDM 0x[0-9a-f]+\)",
    "outside_frame": r"kernel 'err', CPE \d+: athread_get of 256 bytes into LDM at offset 128 of "
                     r"the LDM frame runs 128 bytes past its end \(the frame is 256 bytes\)",
    "no_frame": r"kernel 'err', CPE \d+: athread_get of 256 bytes into LDM before the kernel "
                r"declared its LDM .*",
    "outside_memory": r"kernel 'err', CPE \d+: athread_put writes main memory outside block 'in' "
                      r"\(1024 bytes\): 256 bytes from its byte 900 reach byte 1155, past its end",
    "strided_outside_memory":
        r"kernel 'err', CPE \d+: athread_get reads main memory outside block 'in' \(1024 bytes\): "
        r"256 bytes in 4 blocks of 64 with 192 skipped between them from its byte 256 reach "
        r"byte 1087, past its end",
    "swapped": r"kernel 'err', CPE \d+: athread_get reads main memory at 0x[0-9a-f]+ \(256 bytes\) "
               r"that overlaps this CPE's LDM frame: are the source and the destination swapped\?",
    "bad_mode": r"kernel 'err', CPE \d+: athread_get in ROW_MODE is not supported by the "
                r"emulation \(only PE_MODE, and BCAST_MODE for athread_get\)",
    "bad_mask": r"kernel 'err', CPE \d+: athread_get in BCAST_MODE with mask 0xf is not "
                r"supported by the emulation \(only 0xff, every row\)",
    "shared_block": r"kernel 'err', CPE 1: CPEs 0 and 1 both write by DMA into the 32-byte block of "
                    r"main memory at block 'in' bytes 0 to 31 in one spawn; whether a DMA writes "
                    r"part of a block without touching the rest is not known, so no two CPEs may "
                    r"share one",
    "synced_shared_block": r"kernel 'next', CPE 2: CPEs 1 and 2 both write by DMA into the "
                           r"32-byte block of main memory at block 'in' bytes 0 to 31 in one "
                           r"spawn; .*",
    "syn_unwaited": r"kernel 'err', CPE \d+: reached the barrier before 'next' with 1 DMA not "
                    r"waited for \(athread_get of 256 bytes on reply word at LDM 0x[0-9a-f]+\)",
    "row_scope": r"kernel 'err', CPE \d+: athread_syn\(ROW_SCOPE, \.\.\.\) is not supported by the "
                 r"emulation \(only ARRAY_SCOPE\)",
    "syn_mismatch": r"kernel 'err', CPE \d+: athread_syn can never complete: CPE 7 returned "
                    r"without reaching it \(on Sunway the CPEs would wait forever\)",
    "join_without_spawn": r"athread_join without a running athread_spawn",
    "spawn_twice": r"kernel 'err_kernel': athread_spawn while kernel 'err' is still running: "
                   r"athread_join it first",
    "halt_running": r"kernel 'err': athread_halt while the kernel is running: athread_join it "
                    r"first",
    "get_id_mpe": r"athread_get_id called outside a CPE \(it is CPE code; this thread is the MPE\)",
}


@pytest.mark.parametrize("mode", sorted(ERRORS))
def test_errors_are_one_line_and_exit_1(err, mode):
    r = run(err, mode)
    assert r.returncode == 1, (r.returncode, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert re.fullmatch("swir-emu: error: " + ERRORS[mode], lines[0]), lines[0]


def test_barrier_between_kernels_of_one_spawn(err):
    """SWIR_SYN, the barrier between two kernels of one spawn: the write-block
    check covers each kernel alone (a block written before the barrier by one
    CPE and after it by another is allowed; two CPEs after it is the error
    above), and the counters after it go to the kernel it names, counted as
    a run after a barrier, not a spawn."""
    r = run(err, "synced_blocks")
    assert r.returncode == 0, r.stderr
    k = json.loads(r.stdout)["functions"]
    assert (k["err"]["spawns"], k["err"]["barriers"], k["err"]["puts"]) == (1, 0, 1)
    assert (k["next"]["spawns"], k["next"]["barriers"], k["next"]["calls"],
            k["next"]["puts"]) == (0, 1, CPES, 1)


def test_unwritable_stats_file_returns_minus_1(err):
    r = run(err, "stats_unwritable")
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(r"swir-emu: error: cannot write the counters to "
                        r"'/nonexistent-dir/x/stats\.json': .+\n", r.stderr)


def test_ldm_capacity_can_be_overridden(tmp_path):
    prog = build(tmp_path, ERR_DEFS, ERR_MAIN, ERR_SLAVE,
                 ("-DSWIR_LDM_BYTES=131072", "-DSWIR_LDM_RESERVE=8192"))
    r = run(prog, "ldm_over")
    assert r.returncode == 0, r.stderr     # 70000 bytes fit in 131072 - 8192
    prog = build(tmp_path, ERR_DEFS, ERR_MAIN, ERR_SLAVE, ("-DSWIR_LDM_RESERVE=8192",))
    r = run(prog, "ldm_over")
    assert r.returncode == 1
    assert "the capacity is 57344 (65536 bytes of LDM minus 8192 reserved" in r.stderr


def test_clean_under_address_and_undefined_sanitizers(tmp_path):
    flag = "-fsanitize=address,undefined"
    why = sanitizer_missing(flag, tmp_path)
    if why:
        pytest.skip(why)
    check_good(build(tmp_path / "p", GOOD_DEFS, GOOD_MAIN, GOOD_SLAVE,
                     (flag, "-fno-omit-frame-pointer")))


def test_clean_under_thread_sanitizer(tmp_path):
    flag = "-fsanitize=thread"
    why = sanitizer_missing(flag, tmp_path)
    if why:
        pytest.skip(why)
    check_good(build(tmp_path / "p", GOOD_DEFS, GOOD_MAIN, GOOD_SLAVE, (flag,)))


def test_thread_sanitizer_reports_a_race_between_cpes(tmp_path):
    flag = "-fsanitize=thread"
    why = sanitizer_missing(flag, tmp_path)
    if why:
        pytest.skip(why)
    prog = build(tmp_path / "p", "", RACE_MAIN, RACE_SLAVE, (flag,))
    r = run(prog)
    assert r.returncode != 0
    assert "WARNING: ThreadSanitizer: data race" in r.stderr
    assert "race_kernel" in r.stderr


def pool_build(d: Path, flags: tuple[str, ...] = ()) -> Path:
    return build(d, POOL_DEFS, POOL_MAIN, POOL_SLAVE, ("-Wl,--wrap=pthread_create", *flags))


def check_pool(prog: Path, threads_run: bool) -> None:
    """Run the pool program: 20 spawns of one kernel on threads athread_init
    started, then athread_halt, then athread_init and one spawn again.
    ``threads_run``: each CPE ran on its own thread (the threaded build), not
    as a coroutine on the MPE's thread, lent its CPE thread's thread-locals."""
    r = run(prog, "reuse")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)
    spawns = 20
    # (pthread_create calls so far, threads of the process: the MPE, the CPEs
    # and under TSan its background thread, which starts with the first thread)
    creates, threads = zip(*(map(int, lines[k].split())
                             for k in ("after_init", "after_spawns", "after_halt")))
    assert creates == (CPES, CPES, CPES)
    assert threads[0] == threads[1] == threads[2] + CPES   # athread_halt joined them all
    runs = np.array(lines["runs"].split(), dtype=np.int64).reshape(spawns, CPES)
    tids = np.array(lines["tids"].split(), dtype=np.int64).reshape(spawns, CPES)
    # one thread per CPE for all spawns, 64 different ones; or all on one
    assert (tids == tids[0]).all() and len(set(tids[0])) == (CPES if threads_run else 1)
    # __thread_local `runs` counts this CPE's spawns: LDM kept between spawns
    np.testing.assert_array_equal(runs, np.repeat(np.arange(1, spawns + 1)[:, None], CPES, 1))
    # each spawn read the last one's ring: spawn s holds s + 1
    assert lines["ring"].split() == [str(spawns)] * (2 * CPES)
    # after athread_halt and athread_init: 64 new threads, `runs` fresh
    assert list(map(int, lines["again"].split())) == [2 * CPES, threads[2], 1]
    stats = json.loads(r.stdout[r.stdout.index("{"):])["functions"]["pool"]
    assert (stats["spawns"], stats["calls"], stats["puts"], stats["waits"]) == (
        spawns + 1, (spawns + 1) * CPES, (spawns + 1) * CPES, (spawns + 1) * CPES)
    assert stats["ldm_peak_cpe"] == [8] * CPES


@pytest.fixture(scope="module")
def pool(tmp_path_factory) -> Path:
    return pool_build(tmp_path_factory.mktemp("pool"))


def test_cpe_threads_persist_between_spawns(pool):
    """athread_init creates the 64 CPE threads (64 pthread_create calls, 64
    more threads), 20 spawns run as coroutines on the MPE's thread, each CPE's
    __thread_local variables (its thread's) keep their values from one spawn
    to the next (as LDM does), athread_halt joins the threads (none left), and
    athread_init after it starts 64 new ones, with fresh thread-locals."""
    check_pool(pool, threads_run=False)


def test_cpe_threads_persist_between_spawns_threaded(tmp_path):
    """The same with SWIR_EMU_THREADS: the 20 spawns run on the same 64
    threads, each CPE on its own."""
    check_pool(pool_build(tmp_path / "p", ("-DSWIR_EMU_THREADS",)), threads_run=True)


def test_trap_in_a_later_spawn_is_one_line(pool):
    """A trap on every CPE of the second spawn, on threads that ran the first:
    one line naming the second kernel, exit status 1."""
    r = run(pool, "trap")
    assert r.returncode == 1, (r.returncode, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert re.fullmatch(r"swir-emu: error: kernel 'second', CPE \d+: trapped in the second "
                        r"spawn", lines[0]), lines[0]


@pytest.mark.parametrize("flag", ["-fsanitize=thread", "-fsanitize=address,undefined"])
def test_persistent_threads_clean_under_sanitizers(tmp_path, flag):
    """The pool program (many spawns, halt, init again) under TSan: the
    wake-ups and joins order the CPEs' accesses across spawns; under ASan and
    LeakSanitizer: nothing leaks once athread_halt joined the threads."""
    why = sanitizer_missing(flag, tmp_path)
    if why:
        pytest.skip(why)
    check_pool(pool_build(tmp_path / "p", (flag, "-g")), threads_run=True)


def test_thread_sanitizer_reports_a_race_in_a_later_spawn(tmp_path):
    """The threads that ran 5 race-free spawns still race in the sixth: a
    CPE's wake-up is not ordered after another CPE's kernel of that spawn."""
    flag = "-fsanitize=thread"
    why = sanitizer_missing(flag, tmp_path)
    if why:
        pytest.skip(why)
    prog = build(tmp_path / "p", "", RACE_MAIN, RACE_SLAVE, (flag,))
    r = run(prog, "5")
    assert r.returncode != 0
    assert "WARNING: ThreadSanitizer: data race" in r.stderr
    assert "race_kernel" in r.stderr
    assert "calm_kernel" not in r.stderr
