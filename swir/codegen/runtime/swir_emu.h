/* swir's emulation of the Sunway athread runtime: the declarations shared by
 * the MPE side (athread.h) and the CPE side (slave.h), and the SWIR_* hooks the
 * generated code calls.
 *
 * The generated project builds for the real machine with sw5cc and, with
 * -DSWIR_EMU, for the host with `cc ... emu/swir_emu.c -lpthread`: a thread
 * per CPE, alive from athread_init to athread_halt, each CPE's
 * `__thread_local` LDM private to its thread (and, as real LDM, keeping its
 * contents from one spawn to the next). By default (x86-64 Linux) the CPEs of
 * a spawn run as coroutines on the MPE's thread, each under its own thread's
 * thread-local storage, switching only at barriers, at register sends and
 * receives that must wait, and when they return;
 * with -DSWIR_EMU_THREADS, under ThreadSanitizer or AddressSanitizer and on
 * other hosts each runs on its own thread, woken for each spawn. Every
 * DMA checked and counted the way swir's dma-stage interpreter counts it
 * (swir/interp/dma.py). Without SWIR_EMU the generated layers_mix.h defines
 * the SWIR_* hooks as no-ops and SWIR_WAIT as the hardware spin loop.
 *
 * Every error the runtime detects prints one line to stderr,
 *     swir-emu: error: kernel 'NAME', CPE N: MESSAGE
 * and ends the process with exit status 1, in every build (emu, emu-asan,
 * emu-tsan): the checks are not conditional. */
#ifndef SWIR_EMU_H
#define SWIR_EMU_H

#include <stddef.h>
#include <stdio.h>

#ifndef SWIR_EMU
#define SWIR_EMU 1
#endif

/* The machine's figures (SWIR_CPES, SWIR_LDM_BYTES, SWIR_LDM_RESERVE,
 * SWIR_WRITE_BLOCK, SWIR_SMALL_TRANSFER): swir-cg writes them beside this file
 * from its target description (swir/target.py). Override the LDM sizes with
 * -DSWIR_LDM_BYTES=... / -DSWIR_LDM_RESERVE=... (when compiling swir_emu.c;
 * the generated code only passes sizes). */
#include "swir_target.h"

/* MPE, before a spawn: the swir kernel name the next spawn's counters are
 * recorded under (and its error messages name); without it the spawned C
 * function's name is used. */
#define SWIR_KERNEL(name) swir_emu_kernel(name)

/* CPE, at kernel entry: this CPE's LDM buffers are the `bytes` bytes at
 * `base` (one __thread_local object). Checked against the LDM capacity,
 * recorded as the LDM high-water mark, and used to bounds-check DMAs. */
#define SWIR_LDM_FRAME(base, bytes) \
    swir_emu_ldm_frame((const void *)(base), (size_t)(bytes))

/* CPE: wait until the reply word `reply` (a volatile int lvalue) has counted
 * `n` completed DMAs, then reset it to 0. The emulation performs the DMAs on
 * that word here, not when they were issued (see swir_emu_wait). */
#define SWIR_WAIT(reply, n) swir_emu_wait(&(reply), (n))

/* CPE, at kernel entry after SWIR_LDM_FRAME: the kernel's LDM copy of its
 * Para struct, `bytes` at `base` (a static outside the frame, taken from the
 * reserve). A get into it is the Para's copy: checked, counted as para_gets
 * and not with the plan's DMAs (the interpreters do not model it). */
#define SWIR_LDM_PARA(base, bytes) \
    swir_emu_ldm_para((const void *)(base), (size_t)(bytes))

/* CPE: the barrier between two kernels of one spawn, athread_syn(ARRAY_SCOPE,
 * 0xffff) on Sunway; `next` names the kernel that follows, for the counters
 * (and the write-block check ends the kernel before it). */
#define SWIR_SYN(next) swir_emu_syn(next)

/* CPE, a kernel's first statement: compute as a CPE does, denormal operands
 * and results flushed to zero (on Sunway the kernel sets flush-to-zero in its
 * floating-point control register). In the emulation the calling CPE sets
 * MXCSR's FTZ (bit 15) and DAZ (bit 6); the MPE's floating-point environment
 * is not changed, as the MPE's is not on Sunway: each CPE has its own MXCSR
 * (its thread's, or saved and restored with its coroutine). On a host without
 * SSE2 it only checks that a CPE calls it (the CPE code then keeps the host's
 * denormals). Calling it on the MPE is an error. */
#define SWIR_CPE_FP_INIT() swir_emu_cpe_fp_init()

/* MPE, before spawning: `bytes` bytes of main memory at `base` that DMAs may
 * touch, named `name` in error messages. Once one block is registered, every
 * DMA's main-memory extent must lie inside one registered block. */
#define SWIR_MEMORY(base, bytes, name) \
    swir_emu_memory((const void *)(base), (size_t)(bytes), (name))

/* Any thread: print `PROGRAM: error: kernel 'K', CPE N: MESSAGE` (the kernel
 * and CPE when a CPE traps) to stderr and end the process with exit status 1,
 * as the runtime's own errors do: one message even when several CPEs trap at
 * once. The generated SWIR_TRAP under SWIR_EMU. */
#ifdef __GNUC__
__attribute__((noreturn))
#endif
void swir_emu_trap(const char *message);

/* The program's name for swir_emu_trap's messages (default "swir-emu"). The
 * generated SWIR_PROGRAM under SWIR_EMU. */
void swir_emu_program(const char *name);

void swir_emu_kernel(const char *name);
void swir_emu_ldm_frame(const void *base, size_t bytes);
void swir_emu_ldm_para(const void *base, size_t bytes);
void swir_emu_wait(volatile int *reply, int n);
void swir_emu_cpe_fp_init(void);
int swir_emu_syn(const char *next);
void swir_emu_memory(const void *base, size_t bytes, const char *name);

/* CPE: register communication (emu/simd.h's simd_putr / simd_putc /
 * simd_getr / simd_getc). Send the `bytes`-byte vector at `v` (a floatv4, 16,
 * or a doublev4, 32) on bus 0 (the CPE's row) or 1 (its column) to the CPE at
 * place `dst` of it (its column on the row bus, its row on the column bus),
 * or to all the others (dst 8); or receive the next vector of that bus into
 * `v`. A send waits while a receiver's buffer (SWIR_REG_BUFFER vectors per
 * bus) is full, a receive until a vector has arrived; CPEs that can never go
 * on end the run with one line naming them (a deadlock), as does a kernel
 * that ends with a vector sent and never received. */
void swir_emu_reg_put(int bus, const void *v, size_t bytes, int dst);
void swir_emu_reg_get(int bus, void *v, size_t bytes);

/* Run fn(arg) on the 64 CPE threads athread_init started; `cname` is the C name of fn, the kernel's
 * name when SWIR_KERNEL was not called. Used by athread_spawn. */
int swir_emu_spawn(const char *cname, void (*fn)(void *), void *arg);

/* MPE: write the per-kernel counters as JSON to `path` (`runs` is recorded as
 * is: how many times the program ran the model). Returns 0, or -1 with a
 * message on stderr when the file cannot be written. */
int swir_emu_write_stats(const char *path, int runs);

/* The same JSON, written to an open stream; returns 0, or -1 when writing
 * failed (the caller reports it). */
int swir_emu_write_stats_to(FILE *f, int runs);

/* MPE: forget all counters (and the kernels they belong to). */
void swir_emu_reset_stats(void);

#endif /* SWIR_EMU_H */
