/* The CPE side of the SW26010-Pro's athread / CRTS interface, for swir's
 * Sunway dialect check (test/sunway/swgcc): test tooling, never copied into a
 * generated project.
 *
 * What the generated CPE code calls, with the prototypes public code shows
 * (our own words; docs/codegen.md, "The SW26010-Pro"):
 * - HPUedCSLearner/SW-code, README.md ("常用接口汇总", the interface summary):
 *   CRTS_tid / CRTS_rid / CRTS_cid / CRTS_cgn, CRTS_dma_iget / iput (dst, src,
 *   len, crts_rply_t *), CRTS_dma_iget_stride / iput_stride (dst, src, len,
 *   bsize, stride, crts_rply_t *), CRTS_dma_wait_value (crts_rply_t *, int),
 *   athread_rma_wait_value (athread_rply_t *, int), ldm_malloc / ldm_free;
 * - SYSU-SCC/swops, slave.c: #include <crts.h>, athread_ssync_array(),
 *   athread_rma_row_ibcast / athread_rma_col_ibcast (dst, src, len,
 *   &local_reply, &remote_reply), floatv8, ldm_malloc;
 * - heptagonhust/CPC2023-Preliminary (spmv_slave.c, vector_slave.c):
 *   `__thread_local` LDM arrays, CRTS_dma_iget + CRTS_dma_wait_value with a
 *   counted reply word.
 * Not public, so assumed: the reply-word types' definitions (declared here as
 * volatile ints: public code declares words both with and without
 * `volatile`, and the generated code never reads one itself, it waits
 * through the calls) and the exact C types of CRTS_tid and its kin (int
 * variables here). A call the generated code makes that this header does not
 * declare is an error (-Werror=implicit-function-declaration). */
#ifndef SWIR_SWGCC_CHECK_CRTS_H
#define SWIR_SWGCC_CHECK_CRTS_H

#ifdef __SWIR_SWGCC_HOST
#error "crts.h here is the CPE header; an -mhost source includes athread.h"
#endif

#include <stddef.h>

/* LDM: each CPE's own copy (under swgcc the section attribute alone; the host
 * compiler needs __thread). */
#define __thread_local __thread __attribute__((section(".tdata_local")))

typedef volatile int crts_rply_t;
typedef volatile int athread_rply_t;

extern int CRTS_tid, CRTS_rid, CRTS_cid, CRTS_cgn;

extern int CRTS_dma_iget(void *dst, void *src, int len, crts_rply_t *rply);
extern int CRTS_dma_iput(void *dst, void *src, int len, crts_rply_t *rply);
extern int CRTS_dma_iget_stride(void *dst, void *src, int len, int bsize, int stride,
                                crts_rply_t *rply);
extern int CRTS_dma_iput_stride(void *dst, void *src, int len, int bsize, int stride,
                                crts_rply_t *rply);
extern int CRTS_dma_wait_value(crts_rply_t *rply, int value);

extern void athread_ssync_array(void);

extern int athread_rma_row_ibcast(void *dst, void *src, int len, athread_rply_t *local,
                                  athread_rply_t *remote);
extern int athread_rma_col_ibcast(void *dst, void *src, int len, athread_rply_t *local,
                                  athread_rply_t *remote);
extern int athread_rma_wait_value(athread_rply_t *rply, int value);

extern void *ldm_malloc(size_t size);
extern void ldm_free(void *p, size_t size);

#endif /* SWIR_SWGCC_CHECK_CRTS_H */
