/* CPE side of swir's athread emulation for the SW26010-Pro: the names,
 * types and prototypes of the Pro's CRTS interface and RMA calls that the
 * generated code uses, as public code shows them (docs/codegen.md, "The
 * SW26010-Pro"; the dialect check's test/sunway/include-pro/crts.h cites each):
 *
 *   CRTS_tid, CRTS_rid, CRTS_cid: the CPE's id (0..63), row and column (0..7);
 *   CRTS_dma_iget(dst, src, len, rply), CRTS_dma_iput(dst, src, len, rply),
 *   CRTS_dma_iget_stride / CRTS_dma_iput_stride(dst, src, len, bsize, stride,
 *   rply): the DMAs, destination first, counting on a crts_rply_t reply word;
 *   athread_ssync_array(): all 64 CPEs meet;
 *   athread_rma_row_ibcast / athread_rma_col_ibcast(dst, src, len, &local,
 *   &remote): `len` bytes at `src` of this CPE's LDM to `dst` of the LDM of
 *   every CPE of its row / column; `local` counts the send's completion on
 *   the sender, `remote` the arrival on each receiver (the sender among them:
 *   an assumption, docs/codegen.md); athread_rma_wait_value(&word, n): until
 *   the word has counted n.
 *
 * The DMAs are the SW26010's PE_MODE gets and puts of the emulation (the same
 * checks and counters). An RMA broadcast is delivered when it is issued: the
 * data lands in every receiver's LDM and the reply words count at once; a
 * wait for a word that has not counted enough yields until it has (with
 * threads: sleeps), and CPEs that can never go on end the run (a deadlock). */
#ifndef SWIR_EMU_CRTS_H
#define SWIR_EMU_CRTS_H

#include "slave.h"

typedef volatile int crts_rply_t;
typedef volatile int athread_rply_t;

#define CRTS_tid (athread_get_id(-1))
#define CRTS_rid (athread_get_id(-1) / 8)
#define CRTS_cid (athread_get_id(-1) % 8)

int CRTS_dma_iget(void *dst, void *src, int len, crts_rply_t *rply);
int CRTS_dma_iput(void *dst, void *src, int len, crts_rply_t *rply);
int CRTS_dma_iget_stride(void *dst, void *src, int len, int bsize, int stride, crts_rply_t *rply);
int CRTS_dma_iput_stride(void *dst, void *src, int len, int bsize, int stride, crts_rply_t *rply);

void athread_ssync_array(void);

int athread_rma_row_ibcast(void *dst, void *src, int len, athread_rply_t *local,
                           athread_rply_t *remote);
int athread_rma_col_ibcast(void *dst, void *src, int len, athread_rply_t *local,
                           athread_rply_t *remote);
int athread_rma_wait_value(athread_rply_t *rply, int value);

/* The emulation's hook before a broadcast's DMA (SWIR_BCAST_SOURCE in the
 * generated code; nothing on Sunway): the next get of this CPE is the source
 * of a broadcast, counted as one (bcasts, bcast_bytes) as the SW26010's
 * BCAST_MODE get is, so the counters compare with the interpreter's. */
void swir_emu_bcast_source(void);

#endif /* SWIR_EMU_CRTS_H */
