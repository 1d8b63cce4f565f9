/* CPE side of swir's athread emulation (see swir_emu.h): the same names, types
 * and prototypes as the Sunway toolchain's slave.h (as public copies show it,
 * e.g. qzwlecr/stencil-computation include/slave.h), so code that compiles
 * here compiles against the real header: the DMA calls take plain `void *`
 * (a const source or a volatile reply word needs an explicit cast), and
 * athread_syn takes the `scope` enum. docs/codegen.md, "Exact prototypes". */
#ifndef SWIR_EMU_SLAVE_H
#define SWIR_EMU_SLAVE_H

#include "swir_emu.h"

/* LDM variables: each CPE thread has its own copy. */
#define __thread_local __thread

/* DMA modes; the emulation supports PE_MODE (one CPE <-> main memory). */
typedef enum { PE_MODE, BCAST_MODE, ROW_MODE, BROW_MODE, RANK_MODE } dma_mode;

/* Barrier scopes for athread_syn; the emulation supports ARRAY_SCOPE. */
typedef enum { ROW_SCOPE, COL_SCOPE, ARRAY_SCOPE } scope;

/* The calling CPE's id, 0..63 (core = -1: this CPE). */
int athread_get_id(int core);

/* Main memory -> LDM: `len` bytes in total; in main memory, blocks of `bsize`
 * contiguous bytes with `stride` bytes skipped between them (bsize == 0 or
 * bsize >= len: one contiguous block); packed in LDM. When the DMA completes,
 * the volatile int at `reply` (in LDM) is incremented. `mask` is unused in
 * PE_MODE. */
int athread_get(dma_mode mode, void *src, void *dest, int len, void *reply, char mask,
                int stride, int bsize);

/* LDM -> main memory, with the same block layout on the main-memory side. */
int athread_put(dma_mode mode, void *src, void *dest, int len, void *reply, int stride,
                int bsize);

/* Barrier: ARRAY_SCOPE with mask 0xffff waits for all 64 CPEs. */
int athread_syn(scope scp, int mask);

#endif /* SWIR_EMU_SLAVE_H */
