/* The MPE side of the SW26010-Pro's athread interface, for swir's Sunway
 * dialect check (test/sunway/swgcc): test tooling, never copied into a
 * generated project.
 *
 * What the generated MPE code calls: athread_init, athread_spawn(f, arg),
 * athread_join, athread_halt. Public Pro code: SYSU-SCC/swops master.c
 * (SLAVE_FUN, slave_-prefixed CPE functions, athread_init_cgs /
 * athread_spawn_cgs / athread_join_cgs, which spawn on all 6 core groups of
 * one process: swir's program runs one process per core group instead);
 * Pro runtime wrappers found by code search (the index did not record their
 * repository) call athread_init() and __real_athread_spawn(entry, arg, 1),
 * whose third parameter is flush_slave_dcache, then athread_join(). As the
 * SW26010's check does (test/sunway/include/athread.h), the spawn takes the
 * kernel's own type instead of converting a function pointer to void *, which
 * -pedantic-errors rejects. */
#ifndef SWIR_SWGCC_CHECK_ATHREAD_H
#define SWIR_SWGCC_CHECK_ATHREAD_H

#ifdef __SWIR_SWGCC_SLAVE
#error "athread.h is the MPE header; an -mslave source includes crts.h"
#endif

#include <stdlib.h>
#include <string.h>

#define SLAVE_FUN(f) slave_##f

#define athread_spawn(f, arg) __real_athread_spawn(slave_##f, arg, 1)
extern int __real_athread_spawn(void (*fpc)(void *), void *arg, int flush_slave_dcache);

extern int athread_init(void);
extern int athread_join(void);
extern int athread_halt(void);

#endif /* SWIR_SWGCC_CHECK_ATHREAD_H */
