/* The CPE side of the Sunway athread API, for swir's Sunway dialect check
 * (test/sunway/sw5cc): test tooling, never copied into a generated project.
 *
 * The types and prototypes of the Sunway toolchain's slave.h as a public copy
 * shows them (qzwlecr/stencil-computation, include/slave.h), in our own words:
 * the DMA calls take plain `void *` for source, destination and reply word,
 * so a const source or a volatile reply word must be cast explicitly, and
 * athread_syn takes the `scope` enum. Compiled with -pedantic-errors -Werror,
 * a call that needs a conversion the real prototype would warn about fails. */
#ifndef SWIR_SW5CC_CHECK_SLAVE_H
#define SWIR_SW5CC_CHECK_SLAVE_H

#ifdef __SWIR_SW5CC_HOST
#error "slave.h is the CPE header; a -host source includes athread.h"
#endif

#include <signal.h>

/* LDM: each CPE's own copy, in the .tdata_local section. (Under the Sunway
 * compiler the section attribute alone; the host compiler needs __thread.) */
#define __thread_local __thread __attribute__((section(".tdata_local")))
#define __thread_local_fix __thread __attribute__((section(".tdata_local_fix")))

/* DMA modes, DMA operations (for the descriptor API) and barrier scopes
 * (qzwlecr/stencil-computation include/slave.h: the enums dma_mode, DMA_OP, scope). */
typedef enum { PE_MODE, BCAST_MODE, ROW_MODE, BROW_MODE, RANK_MODE } dma_mode;
typedef enum { DMA_PUT, DMA_GET, DMA_PUT_P, DMA_GET_P, DMA_BARRIER = 5 } DMA_OP;
typedef enum { ROW_SCOPE, COL_SCOPE, ARRAY_SCOPE } scope;

/* qzwlecr/stencil-computation include/slave.h: the extern prototypes of athread_get, athread_put,
 * athread_get_core, athread_get_id, athread_syn. */
/* Main memory -> LDM (`mask` selects CPEs in the broadcast modes). */
extern int athread_get(dma_mode mode, void *src, void *dest, int len, void *reply, char mask,
                       int stride, int bsize);
/* LDM -> main memory. */
extern int athread_put(dma_mode mode, void *src, void *dest, int len, void *reply, int stride,
                       int bsize);
extern int athread_get_core(int id);
extern int athread_get_id(int core);          /* core -1: the calling CPE */
extern int athread_syn(scope scp, int mask);  /* barrier of a row, column or all 64 */

/* The CPE's coordinates, in fixed LDM (qzwlecr/stencil-computation include/slave.h: _CGN ... _MYID). */
extern __thread_local_fix char _CGN, _ROW, _COL, _PEN;
extern __thread_local_fix int _MYID;

/* Names of the real header's function-like macros (inline assembly there). */
#define PRINT(x, y) swir_check_no_PRINT
#define RPCC(x) swir_check_no_RPCC
#define RTC() swir_check_no_RTC
#define updt_addw(n, addr) swir_check_no_updt_addw
#define updt_subw(n, addr) swir_check_no_updt_subw
#define updt_addw_i updt_addw
#define updt_subw_i updt_subw
#define atomic_inc1_w(addr) swir_check_no_atomic_inc1_w
#define atomic_inc1_l(addr) swir_check_no_atomic_inc1_l

#endif /* SWIR_SW5CC_CHECK_SLAVE_H */
