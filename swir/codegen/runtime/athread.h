/* MPE side of swir's athread emulation (see swir_emu.h): the same names and
 * prototypes as the Sunway toolchain's athread.h (as public copies show it,
 * e.g. qzwlecr/stencil-computation include/athread.h). */
#ifndef SWIR_EMU_ATHREAD_H
#define SWIR_EMU_ATHREAD_H

#include "swir_emu.h"

/* On Sunway a CPE function f is linked as slave_f (SLAVE_FUN(f) is slave_f,
 * and athread_spawn(f, arg) passes slave_f); in the emulation the CPE code is
 * ordinary host code, linked into the same program, and keeps its name. The
 * Sunway dialect check (test/sunway) compiles the MPE sources with the real
 * slave_ naming. */
#define SLAVE_FUN(f) f

/* Start f(arg) on the 64 CPEs and return at once (the threads are woken; the
 * coroutines run in athread_join). `arg` converts to void *
 * implicitly, as with the real prototype (no cast: a const pointer is an
 * error, as there). */
#define athread_spawn(f, arg) swir_emu_spawn(#f, SLAVE_FUN(f), arg)

/* Start the 64 CPE threads (they wait for spawns, or with coroutines lend
 * their thread-local storage, until athread_halt); calling it again is
 * harmless. */
int athread_init(void);

/* Wait until every CPE of the last spawn returned from it (with coroutines:
 * run them), and record its counters. The CPE threads stay for the next
 * spawn. */
int athread_join(void);

/* Stop and join the CPE threads at program end (a spawn must have been
 * joined); athread_init starts new ones. */
int athread_halt(void);

#endif /* SWIR_EMU_ATHREAD_H */
