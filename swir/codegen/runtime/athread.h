/* MPE side of swir's athread emulation (see swir_emu.h): the same names the
 * generated host code uses with the real athread.h. */
#ifndef SWIR_EMU_ATHREAD_H
#define SWIR_EMU_ATHREAD_H

#include "swir_emu.h"

/* On Sunway a CPE function f is linked as slave_f; in the emulation the CPE
 * code is ordinary host code and keeps its name. */
#define SLAVE_FUN(f) f

/* Start f(arg) on all 64 CPEs and return at once. */
#define athread_spawn(f, arg) swir_emu_spawn(#f, f, (void *)(arg))

/* Prepare the CPEs; calling it again is harmless. */
int athread_init(void);

/* Wait until every CPE of the last spawn returned, and record its counters. */
int athread_join(void);

/* Release the CPEs at program end (a spawn must have been joined). */
int athread_halt(void);

#endif /* SWIR_EMU_ATHREAD_H */
