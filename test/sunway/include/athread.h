/* The MPE side of the Sunway athread API, for swir's Sunway dialect check
 * (test/sunway/sw5cc): test tooling, never copied into a generated project.
 *
 * It declares what the Sunway toolchain's athread.h declares, with the same
 * prototypes, as a public copy of that header shows them
 * (qzwlecr/stencil-computation, include/athread.h), written out here in our
 * own words, so that the generated MPE sources are compiled against the real
 * interface: a call the real header would reject, or a model name that would
 * collide with one of its names, fails here too. What generated code must not
 * use (the group, task and signal calls) is left out.
 *
 * One deliberate difference, the spawn: the real macro passes slave_f to
 * `int __real_athread_spawn(void *fpc, void *arg)`, converting a function
 * pointer to `void *`, which ISO C does not define and -pedantic-errors
 * rejects. Here the parameter has the kernel's own type, void (*)(void *):
 * stricter than the real header (a kernel of another type is an error), with
 * no conversion, so the check can stay pedantic on everything else. */
#ifndef SWIR_SW5CC_CHECK_ATHREAD_H
#define SWIR_SW5CC_CHECK_ATHREAD_H

#ifdef __SWIR_SW5CC_SLAVE
#error "athread.h is the MPE header; a -slave source includes slave.h"
#endif

/* The real header includes these; generated code must not rely on it, but
 * their names are taken in an MPE source all the same. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* A CPE function f, compiled with -slave, is the symbol slave_f (qzwlecr/stencil-computation include/athread.h:
 * its SLAVE_FUN macro). */
#define SLAVE_FUN(f) slave_##f

/* Start f(arg) on the 64 CPEs of the core group; returns at once (qzwlecr/stencil-computation include/athread.h:
 * the athread_spawn macro over __real_athread_spawn; athread_init,
 * athread_join, athread_halt declared beside it). */
#define athread_spawn(f, arg) __real_athread_spawn(slave_##f, arg)
extern int __real_athread_spawn(void (*fpc)(void *), void *arg);

extern int athread_init(void);   /* once, before any spawn */
extern int athread_join(void);   /* wait until every CPE of the spawn returned */
extern int athread_halt(void);   /* release the CPEs at program end */

/* Further names the real header declares at file scope (types, a variable,
 * function-like macros; all in qzwlecr/stencil-computation include/athread.h): taken, so a generated name equal
 * to one fails here as it would on Sunway. */
typedef void *(*start_routine)(void *);
typedef struct en_get_user_mod { int user_mode; } en_get_user_mode_t;
extern unsigned long START_ADDR;
#define EN_GET_USER_MODE 2
extern int sys_m_en(int cgid, int en_no, void *dt);
extern int athread_wait(int id);
extern int athread_end(int id);
extern int athread_get_max_threads(void);
extern int athread_set_num_threads(int num_threads);
extern int athread_get_num_threads(void);
extern int athread_cancel(int id);
extern void *malloc_cross(size_t size);
extern void *get_tdata_slave_addr(int cgid, void *addr);
#define h2ldm(element, penum, cgn) swir_check_no_h2ldm
#define IO_addr(element, penum, cgn) swir_check_no_IO_addr

/* The MPE's own __thread (the real header's __thread_mix). */
#define __thread_mix __thread

#endif /* SWIR_SW5CC_CHECK_ATHREAD_H */
