/* swir's emulation of the Sunway athread runtime on the host: a pthread per
 * CPE, checked and counted DMAs, JSON counters. See swir_emu.h for the model.
 *
 * Two ways to run the CPEs, the same checks and counters in both:
 *
 * Coroutines (the default on x86-64 Linux): athread_join runs the 64 CPEs of
 * a spawn one after another on the MPE's thread, each on its own stack,
 * switching only where a CPE must wait for the others (a barrier, a register
 * send or receive) and when it returns: deterministic, no futex. Waking 64 threads at every barrier made
 * the emulation spend more time in the kernel than computing (issue 43). Each
 * CPE's thread still exists, blocked from athread_init to athread_halt, for
 * its thread-local storage alone: the generated code's LDM is `static
 * __thread_local` (`__thread`) variables, so while a CPE runs, the thread
 * pointer (the fs base) is its thread's, and its LDM, its `self` and its
 * errno are its own; the switch also saves each context's MXCSR (its
 * floating-point mode). See "Coroutines" below.
 *
 * Threads (SWIR_EMU_THREADS; the ThreadSanitizer and AddressSanitizer builds;
 * other hosts): as real CPEs stay alive between spawns, the 64 CPE threads are
 * created once, by athread_init, and live until athread_halt joins them.
 * Between spawns each waits on its own slot's condition variable (`wake`,
 * under the slot's `lock`) for the slot's spawn number `gen` to change;
 * athread_spawn bumps every slot's `gen` and signals it, and each CPE, after
 * running the kernel, counts itself in `pool.done` (under `pool.lock`), which
 * athread_join waits to reach 64. Each CPE's wake-up lock is its own and the
 * MPE takes those locks only in athread_spawn (before any CPE of the spawn can
 * have finished) and athread_halt, so no CPE's start is ordered after another
 * CPE's kernel of the same spawn: ThreadSanitizer still sees the races between
 * the CPEs of one spawn that it saw when each spawn created its threads.
 *
 * Threading: the MPE thread owns the kernel table, the main-memory registry
 * and the spawn state, and changes them only while no kernel runs. Each CPE
 * thread touches only its own slot of `cpes` (found through the thread-local
 * `self`); the MPE resets the slots before waking the threads and reads them
 * after they all counted themselves done, so the wake-up and `pool.lock`
 * order every access. One exception: at SWIR_SYN's barrier the last CPE to arrive, holding syn.lock
 * while the other 63 wait on it and the MPE waits in athread_join (it calls
 * nothing of the emulation between spawn and join), ends the kernel before:
 * it reads and clears every slot and switches the kernel table's entry.
 * Register communication, too, touches other CPEs' slots (their receive
 * buffers, wait state and register counters): always under syn.lock. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE               /* MAP_ANONYMOUS, MAP_NORESERVE: the coroutine stacks */

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "athread.h"
#include "crts.h"
#include "slave.h"

/* ThreadSanitizer must see the CPEs as threads to report races between
 * them; AddressSanitizer keeps its own per-thread state in the thread-local
 * storage the coroutines switch. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define SWIR_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SWIR_SANITIZED 1
#endif
#if !defined(SWIR_EMU_THREADS) && !defined(SWIR_SANITIZED) && defined(__x86_64__) && \
    defined(__linux__) && defined(__GNUC__)
#define SWIR_COROUTINES 1
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>
#else
#define SWIR_COROUTINES 0
#endif

#if defined(__SSE2__) || defined(__x86_64__)
#include <xmmintrin.h>
#define SWIR_HAVE_MXCSR 1
/* MXCSR bits: flush denormal results to zero, treat denormal operands as zero. */
#define MXCSR_FTZ 0x8000u
#define MXCSR_DAZ 0x0040u
#else
#define SWIR_HAVE_MXCSR 0
#endif

#if SWIR_LDM_RESERVE < 0 || SWIR_LDM_RESERVE >= SWIR_LDM_BYTES
#error "SWIR_LDM_RESERVE must be at least 0 and less than SWIR_LDM_BYTES"
#endif

/* The bytes of LDM a kernel's buffers may use. */
#define LDM_CAPACITY ((size_t)(SWIR_LDM_BYTES) - (size_t)(SWIR_LDM_RESERVE))

/* Histogram buckets are powers of two 2**k; k < 64 covers every size. */
#define BUCKETS 64

/* Kernel names are printed at most this long in error messages. */
#define NAME_TEXT 160

#ifdef __GNUC__
#define SWIR_NORETURN __attribute__((noreturn))
#define SWIR_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define SWIR_NORETURN
#define SWIR_PRINTF(f, a)
#endif

/* ------------------------------------------------------------------------
 * State
 * ------------------------------------------------------------------------ */

/* DMA counters; the same meaning as the dma-stage interpreter's DMAStats. */
struct counters {
    long long gets, puts, waits, bytes_in, bytes_out;
    long long small;                  /* transfers under SWIR_SMALL_TRANSFER bytes */
    long long blocks;                 /* contiguous main-memory blocks moved */
    long long blocks32;               /* of them, those a multiple of 32 bytes long */
    long long para_gets;              /* gets of the kernel's Para into LDM (not counted above) */
    long long bcasts;                 /* BCAST_MODE gets (also counted once in gets, bytes_in) */
    long long bcast_bytes;            /* bytes they delivered, into every CPE's LDM */
    long long reg_sends;              /* putr / putc completed (a broadcast is one) */
    long long reg_recvs;              /* getr / getc completed */
    long long reg_bytes;              /* bytes received by them */
    long long rma_bcasts;             /* RMA row / column broadcasts sent (the Pro) */
    long long rma_bytes;              /* bytes they delivered, into every receiver's LDM */
    long long mem_misaligned;         /* transfers whose main-memory start is not 32-aligned */
    long long ldm_misaligned;         /* transfers whose LDM start is not 32-aligned */
    long long size_hist[BUCKETS];     /* transfers by log2(size bucket) */
    long long block_hist[BUCKETS];    /* blocks by log2(size bucket) */
};

struct kernel {
    char *name;
    long long spawns, calls;
    long long barriers;               /* runs after a barrier inside a spawn (SWIR_SYN) */
    struct counters c;
    long long ldm_peak_cpe[SWIR_CPES];
    double wall_seconds;
};

/* The block layout of one DMA on its main-memory side. A contiguous DMA is
 * one full block of `len` bytes. */
struct shape {
    size_t len;       /* total bytes */
    size_t bsize;     /* bytes per full block */
    size_t pitch;     /* main-memory bytes from one block's start to the next */
    size_t full;      /* full blocks */
    size_t rem;       /* bytes of the partial last block (0: none) */
    size_t blocks;    /* full + (rem > 0) */
    size_t extent;    /* main-memory bytes from the first byte to the last */
};

/* A DMA issued and not yet performed: blocks of the shape are copied from
 * `from` to `to`, stepping `from_step` / `to_step` bytes per block (pitch on
 * the main-memory side, bsize on the packed LDM side). */
struct dma {
    int get;
    const unsigned char *from;
    unsigned char *to;
    size_t from_step, to_step;
    struct shape s;
    volatile int *reply;
    int para;                         /* the get of the kernel's Para copy */
    int bcast;                        /* a BCAST_MODE get: `to` is at this offset of every
                                         CPE's LDM frame */
    int bcast_source;                 /* the Pro's broadcast: CPE 0's get before the RMA */
    size_t ldm_offset;
};

/* Register communication: a message is one vector register, 256 bits (a
 * doublev4; a floatv4 fills 16 bytes of it in memory). Each CPE has a receive
 * buffer of SWIR_REG_BUFFER vectors per bus, a FIFO. */
#if !defined(SWIR_REG_BUFFER) || SWIR_REG_BUFFER < 1
#error "SWIR_REG_BUFFER (swir_target.h) must be at least 1"
#endif
#define REG_BYTES 32
#define BUS_ROW 0
#define BUS_COL 1
#define REG_ALL 8                     /* the place of a send to all the others */

struct reg_vector {
    unsigned char bytes[REG_BYTES];
    size_t size;                      /* 16 (floatv4) or 32 (doublev4) */
    int from;                         /* the sending CPE */
};

struct inbox {
    struct reg_vector v[SWIR_REG_BUFFER];
    int head, count;
};

/* Where a CPE waits on a bus (reported when the CPEs deadlock). */
enum reg_wait { REG_NONE, REG_GETR, REG_GETC, REG_PUTR, REG_PUTC, RMA_WAIT };

/* An RMA broadcast's arrival at one receiver: the bytes as sent (copied at
 * the send), where they land in its LDM, and its remote reply word. */
struct rma_in {
    unsigned char *dst;
    unsigned char *data;
    size_t len;
    volatile int *word;
    int from;
};

struct cpe {
    int id;
    pthread_t thread;
    /* The thread's wake-up: `gen` counts the spawns it was woken for, `stop`
     * asks it to end (athread_halt). Both guarded by `lock`. */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    unsigned long gen;
    int stop;
#if SWIR_COROUTINES
    uintptr_t tp;                     /* its thread's thread pointer (fs base) */
    unsigned char *stack;             /* its coroutine stack, a guard page below */
    void *sp;                         /* the saved stack pointer of its context */
    enum { CPE_READY, CPE_AT_BARRIER, CPE_ON_BUS, CPE_DONE } state;
    /* Its floating-point mode, from one spawn to the next (a thread keeps it). */
    unsigned mxcsr, x87_cw;
#endif
    struct counters c;
    /* Register communication, guarded by syn.lock with threads: its receive
     * buffers (BUS_ROW, BUS_COL); while `blocked` (counted in syn.on_bus),
     * the call it waits in and the place it sends to. A CPE that changes what it
     * waits for clears `blocked` (bus_wake), so syn.on_bus never counts a
     * CPE that can go on. */
    struct inbox inbox[2];
    enum reg_wait reg_op;
    int reg_to;
    volatile int *rma_word;           /* RMA_WAIT: the reply word it waits on (reg_to: for what) */
    struct rma_in *rma_in;            /* RMAs sent to it, delivered when it waits on their word */
    size_t rma_pending, rma_cap;
    int blocked;
#if !SWIR_COROUTINES
    pthread_cond_t bus_wake;
#endif
    size_t ldm_peak;
    int framed;                       /* SWIR_LDM_FRAME called in this run */
    int bcast_source;                 /* its next get is a broadcast's (swir_emu_bcast_source) */
    const unsigned char *para;        /* the kernel's copy of its Para (SWIR_LDM_PARA) */
    size_t para_bytes;
    const unsigned char *frame;
    size_t frame_bytes;
    struct dma *queue;                /* DMAs not yet waited for, in issue order */
    size_t queued, queue_cap;
    /* The registered block the last DMA was in, tried first by the next. */
    size_t last_block;
    /* The 32-byte main-memory blocks this CPE's puts wrote in this spawn, as
     * ranges [first, last] of block numbers (address / SWIR_WRITE_BLOCK). */
    struct written *written;
    size_t n_written, written_cap;
};

/* Main-memory blocks one CPE's puts wrote: block numbers first..last. */
struct written {
    uintptr_t first, last;
    int cpe;
};

/* A registered main-memory block. */
struct block {
    const unsigned char *base;
    size_t bytes;
    char *name;
};

static struct cpe cpes[SWIR_CPES];
static __thread struct cpe *self;     /* this thread's CPE; NULL on the MPE */

static struct kernel *kernels;        /* in order of first spawn */
static size_t n_kernels, cap_kernels;

static struct block *blocks;
static size_t n_blocks, cap_blocks;

static struct {
    int initialized;
    int running;                      /* spawned and not joined */
    char *next_name;                  /* from SWIR_KERNEL, for the next spawn */
    size_t kernel;                    /* the running (or last) kernel's index */
    const char *kernel_name;          /* its name; CPE threads read it */
    void (*fn)(void *);
    void *arg;
    double start;
} mpe;

/* The CPE threads' end of a spawn: `done` counts the CPEs that finished the
 * running spawn (guarded by `lock`; athread_join waits on `all_done`).
 * `started`: athread_init created the threads (MPE only). */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t all_done;
    int done;
    int started;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};

/* athread_syn's barrier, by hand rather than a pthread_barrier_t so that a
 * CPE returning while others wait for it (a hang on Sunway) is an error, not
 * a hang. Guarded by `lock`; reset by the MPE at each spawn. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int waiting;                      /* CPEs arrived in the current round */
    unsigned long round;              /* rounds completed */
    int returned;                     /* CPEs of this spawn that have returned */
    int first_returned;               /* the first of them */
    int on_bus;                       /* CPEs blocked in a register send or receive */
} syn = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, -1, 0};

/* ------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------ */

static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;

/* `name` made safe for a one-line message in `buf`: control characters and
 * backslashes escaped, long names cut with "...". */
static const char *printable(char *buf, size_t size, const char *name)
{
    size_t n = 0;
    const unsigned char *p;
    for (p = (const unsigned char *)name; *p && n + 8 < size; p++) {
        if (*p < 0x20 || *p == 0x7f)
            n += (size_t)snprintf(buf + n, size - n, "\\x%02x", *p);
        else if (*p == '\\')
            n += (size_t)snprintf(buf + n, size - n, "\\\\");
        else
            buf[n++] = (char)*p;
    }
    strcpy(buf + n, *p ? "..." : "");
    return buf;
}

static void fail(const char *kernel, int cpe, const char *fmt, ...)
    SWIR_NORETURN SWIR_PRINTF(3, 4);

/* End the process with status 1 after an error message, from any thread.
 * _Exit, not exit: the error usually happens on a CPE thread while the other
 * CPE threads run, wait or have returned unjoined, and exit's end-of-process
 * hooks would add to the one-line message. ThreadSanitizer reports those
 * threads as a "thread leak" and turns the status into its exitcode (66);
 * LeakSanitizer would check the heap of a run that already failed. (The
 * sanitizers run those checks at exit and in their _exit interceptor; _Exit
 * skips them.) Output streams are flushed first, as exit would. */
static void die(void) SWIR_NORETURN;
static void die(void)
{
    fflush(NULL);
    _Exit(1);
}

/* Print `swir-emu: error: kernel 'K', CPE N: MESSAGE` and end the process
 * with status 1. The lock is never released: a second thread failing at the
 * same moment waits here until the process ends, so exactly one message is
 * printed. */
static void fail(const char *kernel, int cpe, const char *fmt, ...)
{
    char name[NAME_TEXT];
    va_list ap;
    pthread_mutex_lock(&fail_lock);
    fputs("swir-emu: error: ", stderr);
    if (kernel)
        fprintf(stderr, "kernel '%s'%s", printable(name, sizeof name, kernel),
                cpe >= 0 ? ", " : ": ");
    if (cpe >= 0)
        fprintf(stderr, "CPE %d: ", cpe);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    die();
}

static const char *program_name = "swir-emu";

void swir_emu_program(const char *name)
{
    if (name != NULL)
        program_name = name;
}

void swir_emu_trap(const char *message)
{
    char name[NAME_TEXT];
    pthread_mutex_lock(&fail_lock);   /* never released, as in fail */
    fprintf(stderr, "%s: error: ", program_name);
    if (self && mpe.kernel_name)
        fprintf(stderr, "kernel '%s', ", printable(name, sizeof name, mpe.kernel_name));
    if (self)
        fprintf(stderr, "CPE %d: ", self->id);
    fputs(message ? message : "(no message)", stderr);
    fputc('\n', stderr);
    fflush(stderr);
    die();
}

/* The calling CPE, or an error naming `what` when the MPE calls CPE code. */
static struct cpe *cpe_self(const char *what)
{
    if (!self)
        fail(mpe.running ? mpe.kernel_name : NULL, -1,
             "%s called outside a CPE (it is CPE code; this thread is the MPE)", what);
    return self;
}

/* An error naming `what` when a CPE calls MPE code. */
static void mpe_only(const char *what)
{
    if (self)
        fail(mpe.kernel_name, self->id, "%s called on a CPE (it is MPE code)", what);
}

/* ------------------------------------------------------------------------
 * Small helpers
 * ------------------------------------------------------------------------ */

/* `p` resized to hold at least `need` items of `size` bytes (doubling). */
static void *grow(void *p, size_t *cap, size_t need, size_t size)
{
    size_t n = *cap ? *cap : 8;
    if (need <= *cap)
        return p;
    while (n < need)
        n *= 2;
    p = realloc(p, n * size);
    if (!p)
        fail(NULL, -1, "out of host memory");
    *cap = n;
    return p;
}

static char *copy_string(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (!p)
        fail(NULL, -1, "out of host memory");
    return memcpy(p, s, n);
}

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* k with 2**k <= n < 2**(k+1), for n > 0: the histogram bucket of n. */
static int bucket_index(size_t n)
{
    int k = -1;
    while (n) {
        n >>= 1;
        k++;
    }
    return k;
}

static void counters_add(struct counters *to, const struct counters *from)
{
    int k;
    to->gets += from->gets;
    to->puts += from->puts;
    to->waits += from->waits;
    to->bytes_in += from->bytes_in;
    to->bytes_out += from->bytes_out;
    to->small += from->small;
    to->blocks += from->blocks;
    to->blocks32 += from->blocks32;
    to->para_gets += from->para_gets;
    to->bcasts += from->bcasts;
    to->bcast_bytes += from->bcast_bytes;
    to->reg_sends += from->reg_sends;
    to->reg_recvs += from->reg_recvs;
    to->reg_bytes += from->reg_bytes;
    to->rma_bcasts += from->rma_bcasts;
    to->rma_bytes += from->rma_bytes;
    to->mem_misaligned += from->mem_misaligned;
    to->ldm_misaligned += from->ldm_misaligned;
    for (k = 0; k < BUCKETS; k++) {
        to->size_hist[k] += from->size_hist[k];
        to->block_hist[k] += from->block_hist[k];
    }
}

/* ------------------------------------------------------------------------
 * MPE: init, spawn, join, halt
 * ------------------------------------------------------------------------ */

static void *cpe_main(void *arg);
#if !SWIR_COROUTINES
static int stuck(void);
#endif
static void bus_deadlock(void);
static void check_inboxes(void);
static void check_rma_delivered(void);
#if SWIR_COROUTINES
static void start_coroutines(void);
static void stop_coroutines(void);
static void run_coroutines(void);
static void park(struct cpe *c);
static void coroutine_returned(struct cpe *c);
#endif

/* Start the 64 CPE threads, each waiting for its first spawn. */
int athread_init(void)
{
    int i;
    mpe_only("athread_init");
    if (mpe.initialized)
        return 0;                     /* called again: the threads are running */
    for (i = 0; i < SWIR_CPES; i++) {
        struct cpe *c = &cpes[i];
        c->id = i;
        c->gen = 0;
        c->stop = 0;
        if (pthread_mutex_init(&c->lock, NULL) != 0 || pthread_cond_init(&c->wake, NULL) != 0)
            fail(NULL, -1, "cannot create the wake-up of CPE %d", i);
#if !SWIR_COROUTINES
        if (pthread_cond_init(&c->bus_wake, NULL) != 0)
            fail(NULL, -1, "cannot create the bus wake-up of CPE %d", i);
#endif
        if (pthread_create(&c->thread, NULL, cpe_main, c) != 0)
            fail(NULL, -1, "cannot start the thread of CPE %d", i);
    }
#if SWIR_COROUTINES
    start_coroutines();
#endif
    pool.started = 1;
    mpe.initialized = 1;
    return 0;
}

/* Stop the CPE threads, join them and free what they kept. */
int athread_halt(void)
{
    int i;
    mpe_only("athread_halt");
    if (mpe.running)
        fail(mpe.kernel_name, -1, "athread_halt while the kernel is running: "
             "athread_join it first");
    if (pool.started) {
        for (i = 0; i < SWIR_CPES; i++) {
            pthread_mutex_lock(&cpes[i].lock);
            cpes[i].stop = 1;
            pthread_cond_signal(&cpes[i].wake);
            pthread_mutex_unlock(&cpes[i].lock);
        }
        for (i = 0; i < SWIR_CPES; i++) {
            if (pthread_join(cpes[i].thread, NULL) != 0)
                fail(NULL, -1, "cannot join the thread of CPE %d", i);
            pthread_cond_destroy(&cpes[i].wake);
            pthread_mutex_destroy(&cpes[i].lock);
#if !SWIR_COROUTINES
            pthread_cond_destroy(&cpes[i].bus_wake);
#endif
        }
        pool.started = 0;
#if SWIR_COROUTINES
        stop_coroutines();
#endif
    }
    for (i = 0; i < SWIR_CPES; i++) {
        free(cpes[i].queue);
        cpes[i].queue = NULL;
        cpes[i].queue_cap = 0;
        free(cpes[i].written);
        cpes[i].written = NULL;
        cpes[i].written_cap = 0;
        cpes[i].n_written = 0;
    }
    mpe.initialized = 0;
    return 0;
}

void swir_emu_kernel(const char *name)
{
    mpe_only("SWIR_KERNEL");
    if (!name)
        fail(NULL, -1, "SWIR_KERNEL with a null name");
    free(mpe.next_name);
    mpe.next_name = copy_string(name);
}

/* The index of kernel `name` in the table, added at the end if new. */
static size_t kernel_index(const char *name)
{
    size_t i;
    for (i = 0; i < n_kernels; i++)
        if (strcmp(kernels[i].name, name) == 0)
            return i;
    kernels = grow(kernels, &cap_kernels, n_kernels + 1, sizeof *kernels);
    memset(&kernels[n_kernels], 0, sizeof *kernels);
    kernels[n_kernels].name = copy_string(name);
    return n_kernels++;
}

/* One spawn on CPE `c`: run the kernel and insist every DMA it issued was
 * waited for. */
static void run_kernel(struct cpe *c)
{
    mpe.fn(mpe.arg);
    if (c->queued) {
        const struct dma *d = &c->queue[0];
        fail(mpe.kernel_name, c->id,
             "returned with %zu DMA%s not waited for (%s%s of %zu bytes on reply word at LDM %p)",
             c->queued, c->queued == 1 ? "" : "s", c->queued == 1 ? "" : "the first: ",
             d->get ? "athread_get" : "athread_put", d->s.len, (void *)d->reply);
    }
}

#if !SWIR_COROUTINES
/* After run_kernel on a CPE thread: count the CPE done. */
static void kernel_returned(struct cpe *c)
{
    /* From now on this CPE never reaches an athread_syn: wake the CPEs
     * waiting in one so that they report it. */
    pthread_mutex_lock(&syn.lock);
    if (syn.returned++ == 0)
        syn.first_returned = c->id;
    if (stuck())                      /* the others wait on a bus, maybe for this CPE */
        bus_deadlock();
    if (syn.waiting)
        pthread_cond_broadcast(&syn.cond);
    pthread_mutex_unlock(&syn.lock);
    /* After this the CPE touches nothing of its slot but the wake-up: the
     * MPE may already be resetting the slot for the next spawn. */
    pthread_mutex_lock(&pool.lock);
    if (++pool.done == SWIR_CPES)
        pthread_cond_signal(&pool.all_done);
    pthread_mutex_unlock(&pool.lock);
}

/* A CPE thread's life in the threaded build: wait for a spawn, run it, wait
 * for the next, until athread_halt. */
static void serve(struct cpe *c)
{
    unsigned long seen = 0;
    for (;;) {
        pthread_mutex_lock(&c->lock);
        while (c->gen == seen && !c->stop)
            pthread_cond_wait(&c->wake, &c->lock);
        if (c->stop) {                /* athread_halt, never during a spawn */
            pthread_mutex_unlock(&c->lock);
            break;
        }
        seen = c->gen;
        pthread_mutex_unlock(&c->lock);
        run_kernel(c);
        kernel_returned(c);
    }
}
#endif

/* A CPE thread, from athread_init to athread_halt. Its thread-local state
 * (`self`, the program's __thread_local LDM variables) lives as long as the
 * thread, as a real CPE's LDM keeps its contents between spawns; with
 * coroutines the thread only lends it to the CPE's coroutine. */
static void *cpe_main(void *arg)
{
    struct cpe *c = arg;
    self = c;
#if SWIR_COROUTINES
    park(c);
#else
    serve(c);
#endif
    self = NULL;
    return NULL;
}

static void reset_cpe(struct cpe *c, int id)
{
    memset(&c->c, 0, sizeof c->c);
    c->id = id;
    c->ldm_peak = 0;
    c->framed = 0;
    c->frame = NULL;
    c->frame_bytes = 0;
    c->para = NULL;
    c->para_bytes = 0;
    c->queued = 0;
    c->n_written = 0;
    memset(c->inbox, 0, sizeof c->inbox);
    c->reg_op = REG_NONE;
    c->blocked = 0;
}

int swir_emu_spawn(const char *cname, void (*fn)(void *), void *arg)
{
    const char *name;
    char other[NAME_TEXT];
    size_t k;
    int i;
    mpe_only("athread_spawn");
    name = mpe.next_name ? mpe.next_name : cname;
    if (!mpe.initialized)
        fail(name, -1, "athread_spawn before athread_init (or after athread_halt)");
    if (mpe.running)
        fail(name, -1, "athread_spawn while kernel '%s' is still running: athread_join it first",
             printable(other, sizeof other, mpe.kernel_name));
    if (!fn)
        fail(name, -1, "athread_spawn of a null function");
    k = kernel_index(name);
    free(mpe.next_name);
    mpe.next_name = NULL;
    kernels[k].spawns += 1;
    kernels[k].calls += SWIR_CPES;
    mpe.kernel = k;
    mpe.kernel_name = kernels[k].name;
    mpe.fn = fn;
    mpe.arg = arg;
    mpe.running = 1;
    for (i = 0; i < SWIR_CPES; i++)
        reset_cpe(&cpes[i], i);
    pthread_mutex_lock(&syn.lock);
    syn.waiting = syn.returned = syn.on_bus = 0;
    syn.first_returned = -1;
    pthread_mutex_unlock(&syn.lock);
    pthread_mutex_lock(&pool.lock);
    pool.done = 0;
    pthread_mutex_unlock(&pool.lock);
    mpe.start = now_seconds();
#if !SWIR_COROUTINES
    for (i = 0; i < SWIR_CPES; i++) {  /* wake each CPE; none waits for another */
        pthread_mutex_lock(&cpes[i].lock);
        cpes[i].gen++;
        pthread_cond_signal(&cpes[i].wake);
        pthread_mutex_unlock(&cpes[i].lock);
    }
#endif
    return 0;
}

static void check_written(void);

/* The end of the running kernel, all CPEs stopped (at the join, or in the
 * barrier before the next kernel of one spawn): no two CPEs wrote one
 * 32-byte block, and the CPEs' counters go to the kernel. */
static void end_kernel(void)
{
    struct kernel *k;
    int i;
    double t = now_seconds();
    check_written();
    check_rma_delivered();
    check_inboxes();
    k = &kernels[mpe.kernel];
    k->wall_seconds += t - mpe.start;
    mpe.start = t;
    for (i = 0; i < SWIR_CPES; i++) {
        counters_add(&k->c, &cpes[i].c);
        memset(&cpes[i].c, 0, sizeof cpes[i].c);
        if ((long long)cpes[i].ldm_peak > k->ldm_peak_cpe[i])
            k->ldm_peak_cpe[i] = (long long)cpes[i].ldm_peak;
        cpes[i].ldm_peak = 0;
        cpes[i].n_written = 0;
    }
}

int athread_join(void)
{
    mpe_only("athread_join");
    if (!mpe.running)
        fail(NULL, -1, "athread_join without a running athread_spawn");
#if SWIR_COROUTINES
    run_coroutines();                 /* the CPEs run here, the MPE waiting */
#else
    pthread_mutex_lock(&pool.lock);
    while (pool.done < SWIR_CPES)
        pthread_cond_wait(&pool.all_done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
#endif
    end_kernel();
    mpe.running = 0;
    return 0;
}

#if SWIR_COROUTINES
/* ------------------------------------------------------------------------
 * Coroutines
 *
 * athread_join runs the spawn: each CPE ready to run is resumed in turn, CPE
 * 0 to 63, and runs until it arrives at a barrier or returns; when all 64
 * have arrived at the barrier, the next pass resumes them all. Contexts
 * switch only between the MPE and a CPE: the MPE's thread pointer is swapped
 * for the CPE thread's (wrfsbase where the kernel allows it, as Linux does
 * on CPUs with FSGSBASE since 5.9; arch_prctl otherwise), then the stack. GCC
 * treats the thread pointer as fixed within a function, so each context only
 * ever runs under its own: set just before the stack switch, by the side that
 * switches.
 * ------------------------------------------------------------------------ */

/* Each CPE's stack: the size of a default pthread stack on Linux, the
 * threaded build's reference, mapped without reserving memory (pages are
 * used only as the kernel touches them), a guard page below it so that an
 * overflow faults instead of corrupting the next stack. */
#ifndef SWIR_EMU_CPE_STACK
#define SWIR_EMU_CPE_STACK ((size_t)8 << 20)
#endif

#ifndef AT_HWCAP2
#define AT_HWCAP2 26
#endif
#define HWCAP2_FSGSBASE_BIT 2         /* Linux's HWCAP2_FSGSBASE */
/* -DSWIR_EMU_ARCH_PRCTL: always switch it by system call (to test that path) */
#define SYSCALL_ARCH_PRCTL 158        /* x86-64 Linux */
#define ARCH_SET_FS_CODE 0x1002

/* Save the callee-saved registers, MXCSR and the x87 control word (the
 * psABI's callee-saved state) on this stack, store the stack pointer at
 * *from, continue on stack `to` and restore what it saved there. */
void swir_emu_switch(void **from, void *to);
__asm__(".pushsection .text\n"
        ".p2align 4\n"
        ".globl swir_emu_switch\n"
        ".hidden swir_emu_switch\n"
        ".type swir_emu_switch, @function\n"
        "swir_emu_switch:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $8, %rsp\n"
        "    stmxcsr (%rsp)\n"
        "    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n"
        "    fldcw 4(%rsp)\n"
        "    addq $8, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size swir_emu_switch, .-swir_emu_switch\n"
        ".popsection\n");

static struct {
    int wrfsbase;                     /* the kernel lets user code write the fs base */
    size_t page;
    void *sp;                         /* the MPE's saved stack pointer */
    uintptr_t tp;                     /* the MPE's thread pointer */
} coro;

/* The thread pointer: glibc's x86-64 thread control block starts with a
 * pointer to itself, which the fs base points at. */
static uintptr_t thread_pointer(void)
{
    uintptr_t tp;
    __asm__ volatile("movq %%fs:0, %0" : "=r"(tp));
    return tp;
}

static void set_thread_pointer(uintptr_t tp)
{
    long r;
    if (coro.wrfsbase) {
        __asm__ volatile("wrfsbase %0" : : "r"(tp) : "memory");
        return;
    }
    __asm__ volatile("syscall" : "=a"(r) : "0"((long)SYSCALL_ARCH_PRCTL),
                     "D"((long)ARCH_SET_FS_CODE), "S"(tp) : "rcx", "r11", "memory");
    if (r != 0)
        fail(NULL, -1, "cannot switch the thread pointer (arch_prctl: %ld)", r);
}

static void resume(struct cpe *c)
{
    set_thread_pointer(c->tp);
    swir_emu_switch(&coro.sp, c->sp);
}

static void yield_to_mpe(struct cpe *c)
{
    set_thread_pointer(coro.tp);
    swir_emu_switch(&c->sp, coro.sp);
}

/* A CPE thread with coroutines: publish its thread pointer, then block until
 * athread_halt, lending its thread-local storage to the CPE's coroutine. */
static void park(struct cpe *c)
{
    pthread_mutex_lock(&pool.lock);
    c->tp = thread_pointer();
    if (++pool.done == SWIR_CPES)
        pthread_cond_signal(&pool.all_done);
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_lock(&c->lock);
    while (!c->stop)
        pthread_cond_wait(&c->wake, &c->lock);
    pthread_mutex_unlock(&c->lock);
}

/* athread_init, after creating the threads: wait until each published its
 * thread pointer; map the stacks; the CPEs start in the MPE's FP mode, as a
 * new thread does. */
static void start_coroutines(void)
{
    unsigned mxcsr, cw = 0;
    int i;
    long page = sysconf(_SC_PAGESIZE);
    coro.page = page > 0 ? (size_t)page : 4096;
#ifndef SWIR_EMU_ARCH_PRCTL
    coro.wrfsbase = (getauxval(AT_HWCAP2) & HWCAP2_FSGSBASE_BIT) != 0;
#endif
    pthread_mutex_lock(&pool.lock);
    while (pool.done < SWIR_CPES)
        pthread_cond_wait(&pool.all_done, &pool.lock);
    pool.done = 0;
    pthread_mutex_unlock(&pool.lock);
    __asm__ volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(mxcsr), "=m"(cw));
    for (i = 0; i < SWIR_CPES; i++) {
        struct cpe *c = &cpes[i];
        void *m = mmap(NULL, SWIR_EMU_CPE_STACK + coro.page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED || mprotect(m, coro.page, PROT_NONE) != 0)
            fail(NULL, -1, "cannot map the %zu-byte stack of CPE %d", SWIR_EMU_CPE_STACK, i);
        c->stack = (unsigned char *)m + coro.page;
        c->mxcsr = mxcsr & ~0x3fu;    /* its mode, not the MPE's exception flags */
        c->x87_cw = cw & 0xffffu;
    }
}

static void stop_coroutines(void)
{
    int i;
    for (i = 0; i < SWIR_CPES; i++) {
        munmap(cpes[i].stack - coro.page, SWIR_EMU_CPE_STACK + coro.page);
        cpes[i].stack = NULL;
    }
}

/* A CPE's coroutine, entered by the first resume of a spawn (its thread
 * pointer already the CPE thread's, so `self` is the CPE); never resumed after
 * it returned. */
static void cpe_start(void)
{
    struct cpe *c = self;
    run_kernel(c);
    coroutine_returned(c);
    yield_to_mpe(c);
    fail(mpe.kernel_name, c->id, "a returned CPE was resumed");
}

static void coroutine_returned(struct cpe *c)
{
    __asm__ volatile("stmxcsr %0" : "=m"(c->mxcsr));
    c->mxcsr &= ~0x3fu;
    if (syn.returned++ == 0)
        syn.first_returned = c->id;
    c->state = CPE_DONE;
}

/* A fresh context on the CPE's stack whose first switch "returns" into
 * cpe_start, as if called (the stack 16-byte aligned at the call), with the
 * CPE's FP mode. */
static void make_context(struct cpe *c)
{
    uintptr_t top = ((uintptr_t)c->stack + SWIR_EMU_CPE_STACK) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)top;
    int r;
    *--sp = 0;                        /* cpe_start's own return address: none */
    *--sp = (uint64_t)(uintptr_t)cpe_start;
    for (r = 0; r < 6; r++)
        *--sp = 0;                    /* rbp, rbx, r12-r15 */
    *--sp = (uint64_t)c->mxcsr | (uint64_t)c->x87_cw << 32;
    c->sp = sp;
    c->state = CPE_READY;
}

/* The spawn, from athread_join: passes over the CPEs until all returned. A
 * pass that leaves some at a barrier without completing it means a CPE
 * returned without reaching it (on Sunway the others would wait forever). */
static void run_coroutines(void)
{
    int i, at_barrier, ran;
    unsigned long round;
    coro.tp = thread_pointer();
    for (i = 0; i < SWIR_CPES; i++)
        make_context(&cpes[i]);
    for (;;) {
        round = syn.round;
        do {                          /* until none can run: a CPE waiting on a bus is
                                         made ready again by the step it waits for */
            for (i = 0, ran = 0; i < SWIR_CPES; i++)
                if (cpes[i].state == CPE_READY) {
                    resume(&cpes[i]);
                    ran = 1;
                }
        } while (ran);
        if (syn.on_bus)
            bus_deadlock();
        for (i = 0, at_barrier = -1; i < SWIR_CPES && at_barrier < 0; i++)
            if (cpes[i].state == CPE_AT_BARRIER)
                at_barrier = i;
        if (at_barrier < 0)
            return;
        if (syn.round == round)
            fail(mpe.kernel_name, at_barrier, "athread_syn can never complete: CPE %d returned "
                 "without reaching it (on Sunway the CPEs would wait forever)",
                 syn.first_returned);
        for (i = 0; i < SWIR_CPES; i++)
            cpes[i].state = CPE_READY;
    }
}
#endif /* SWIR_COROUTINES */

/* ------------------------------------------------------------------------
 * Main memory registry
 * ------------------------------------------------------------------------ */

void swir_emu_memory(const void *base, size_t bytes, const char *name)
{
    size_t i;
    mpe_only("SWIR_MEMORY");
    if (mpe.running)
        fail(mpe.kernel_name, -1, "SWIR_MEMORY while the kernel is running: register "
             "main memory before spawning");
    if (!name)
        name = "(unnamed)";
    if (bytes == 0)
        return;                       /* an empty block admits no DMA anyway */
    if (!base)
        fail(NULL, -1, "SWIR_MEMORY of %zu bytes at a null address ('%s')", bytes, name);
    for (i = 0; i < n_blocks; i++)
        if (blocks[i].base == base && blocks[i].bytes == bytes) {
            free(blocks[i].name);     /* registered again (e.g. each run): rename */
            blocks[i].name = copy_string(name);
            return;
        }
    blocks = grow(blocks, &cap_blocks, n_blocks + 1, sizeof *blocks);
    blocks[n_blocks].base = base;
    blocks[n_blocks].bytes = bytes;
    blocks[n_blocks].name = copy_string(name);
    n_blocks++;
}

/* Whether block `b` holds all of [lo, hi). */
static int block_holds(const struct block *b, uintptr_t lo, uintptr_t hi)
{
    uintptr_t base = (uintptr_t)b->base;
    return lo >= base && hi - base <= b->bytes;
}

/* The registered block holding byte `p`, or NULL. */
static const struct block *block_at(uintptr_t p)
{
    size_t i;
    for (i = 0; i < n_blocks; i++) {
        uintptr_t lo = (uintptr_t)blocks[i].base;
        if (p >= lo && p - lo < blocks[i].bytes)
            return &blocks[i];
    }
    return NULL;
}

/* ------------------------------------------------------------------------
 * CPE: id, LDM frame, barrier
 * ------------------------------------------------------------------------ */

int athread_get_id(int core)
{
    struct cpe *c = cpe_self("athread_get_id");
    if (core != -1)
        fail(mpe.kernel_name, c->id, "athread_get_id(%d): the emulation supports only -1 "
             "(this CPE)", core);
    return c->id;
}

void swir_emu_ldm_frame(const void *base, size_t bytes)
{
    struct cpe *c = cpe_self("SWIR_LDM_FRAME");
    if (bytes > LDM_CAPACITY)
        fail(mpe.kernel_name, c->id, "needs %zu bytes of LDM; the capacity is %zu (%lld bytes "
             "of LDM minus %lld reserved for the stack and reply words)", bytes, LDM_CAPACITY,
             (long long)(SWIR_LDM_BYTES), (long long)(SWIR_LDM_RESERVE));
    if (!base && bytes)
        fail(mpe.kernel_name, c->id, "SWIR_LDM_FRAME of %zu bytes at a null address", bytes);
    if (c->para && bytes + c->para_bytes > (size_t)(SWIR_LDM_BYTES))
        fail(mpe.kernel_name, c->id, "needs %zu bytes of LDM for its buffers and %zu for its "
             "Para: more than the %lld bytes of LDM", bytes, c->para_bytes,
             (long long)(SWIR_LDM_BYTES));
    c->framed = 1;
    c->frame = base;
    c->frame_bytes = bytes;
    if (bytes > c->ldm_peak)
        c->ldm_peak = bytes;
}

void swir_emu_ldm_para(const void *base, size_t bytes)
{
    struct cpe *c = cpe_self("SWIR_LDM_PARA");
    if (!c->framed)
        fail(mpe.kernel_name, c->id, "SWIR_LDM_PARA before SWIR_LDM_FRAME");
    if (c->frame_bytes + bytes > (size_t)(SWIR_LDM_BYTES))
        fail(mpe.kernel_name, c->id, "needs %zu bytes of LDM for its buffers and %zu for its "
             "Para: more than the %lld bytes of LDM", c->frame_bytes, bytes,
             (long long)(SWIR_LDM_BYTES));
    c->para = base;
    c->para_bytes = bytes;
}

/* Denormals flushed on this CPE only: MXCSR belongs to the thread (or the
 * coroutine's saved context), so the MPE keeps its own mode. SSE arithmetic
 * only: x87 code (long double) is not affected, as it is not on x86 either. */
void swir_emu_cpe_fp_init(void)
{
    (void)cpe_self("SWIR_CPE_FP_INIT");
#if SWIR_HAVE_MXCSR
    _mm_setcsr(_mm_getcsr() | MXCSR_FTZ | MXCSR_DAZ);
#endif
}

static int barrier(struct cpe *c, const char *next);
#if SWIR_COROUTINES
static void yield_to_mpe(struct cpe *c);
#endif

int athread_syn(scope scp, int mask)
{
    struct cpe *c = cpe_self("athread_syn");
    if (scp != ARRAY_SCOPE)
        fail(mpe.kernel_name, c->id, "athread_syn(%s, ...) is not supported by the emulation "
             "(only ARRAY_SCOPE)", scp == ROW_SCOPE ? "ROW_SCOPE" :
             scp == COL_SCOPE ? "COL_SCOPE" : "an unknown scope");
    if ((mask & 0xffff) != 0xffff)
        fail(mpe.kernel_name, c->id, "athread_syn(ARRAY_SCOPE, 0x%x) is not supported by the "
             "emulation (only the mask 0xffff, all 64 CPEs)", (unsigned)mask);
    return barrier(c, NULL);
}

/* The barrier between two kernels of one spawn: athread_syn(ARRAY_SCOPE,
 * 0xffff) on Sunway. Here the last CPE to arrive also ends the kernel before
 * it (end_kernel: the write-block check, its counters) and counts what
 * follows as kernel `next`, run after a barrier. */
int swir_emu_syn(const char *next)
{
    struct cpe *c = cpe_self("SWIR_SYN");
    if (!next)
        fail(mpe.kernel_name, c->id, "SWIR_SYN with a null name");
    return barrier(c, next);
}

/* One CPE arrives at the barrier (under syn.lock with threads). The last of
 * the 64, while every other waits and none runs, ends the kernel before a
 * SWIR_SYN and completes the round; returns whether it did. */
static int arrive(const char *next)
{
    size_t k;
    if (++syn.waiting < SWIR_CPES)
        return 0;
    if (next) {
        end_kernel();
        k = kernel_index(next);
        kernels[k].barriers += 1;
        kernels[k].calls += SWIR_CPES;
        mpe.kernel = k;
        mpe.kernel_name = kernels[k].name;
    }
    syn.waiting = 0;
    syn.round++;
    return 1;
}

static int barrier(struct cpe *c, const char *next)
{
    unsigned long round;
    if (next && c->queued) {          /* as at a return: the kernel before must be done */
        const struct dma *d = &c->queue[0];
        fail(mpe.kernel_name, c->id,
             "reached the barrier before '%s' with %zu DMA%s not waited for (%s%s of %zu bytes "
             "on reply word at LDM %p)", next, c->queued, c->queued == 1 ? "" : "s",
             c->queued == 1 ? "" : "the first: ", d->get ? "athread_get" : "athread_put",
             d->s.len, (void *)d->reply);
    }
#if SWIR_COROUTINES
    (void)round;
    arrive(next);
    c->state = CPE_AT_BARRIER;
    yield_to_mpe(c);                  /* back when all 64 have arrived */
    return 0;
#else
    pthread_mutex_lock(&syn.lock);
    round = syn.round;
    if (arrive(next))
        pthread_cond_broadcast(&syn.cond);
    else if (stuck())                 /* the others wait on a bus, or returned */
        bus_deadlock();
    while (round == syn.round) {
        if (syn.returned)
            fail(mpe.kernel_name, c->id, "athread_syn can never complete: CPE %d returned "
                 "without reaching it (on Sunway the CPEs would wait forever)",
                 syn.first_returned);
        pthread_cond_wait(&syn.cond, &syn.lock);
    }
    pthread_mutex_unlock(&syn.lock);
    return 0;
#endif
}

/* ------------------------------------------------------------------------
 * CPE: register communication
 *
 * simd_putr / simd_putc send one vector to a CPE of the sender's row / column
 * (or, to place 8, to all the others of it); simd_getr / simd_getc receive the
 * next vector from the row / column bus (emu/simd.h maps them here). A send
 * waits while its receiver's buffer is full (a broadcast until all 7 have
 * room, then lands in all at once); a receive waits until a vector has
 * arrived. Vectors from one sender arrive in order. With
 * threads every step is under syn.lock; with coroutines a CPE that must wait
 * yields, and the MPE resumes the others (run_coroutines).
 *
 * Deadlock: when every CPE of the spawn still running waits on a bus or at a
 * barrier, and at least one on a bus, none can go on; the run ends with one
 * line naming them (bus_deadlock). Checked by the CPE that is about to wait,
 * arrives at the barrier or returns last (threads), or by the MPE after a
 * pass in which no CPE could run (coroutines).
 * ------------------------------------------------------------------------ */

static const char *const reg_call[] = {"", "getr", "getc", "putr", "putc",
                                        "athread_rma_wait_value"};

/* CPEs per row and per column: the grid is square (8 x 8 on the SW26010). */
static int grid_side(void)
{
    int n = 1;
    while (n * n < SWIR_CPES)
        n++;
    return n * n == SWIR_CPES ? n : 0;
}

/* The CPE at place k of CPE id's row (BUS_ROW: column k) or column (row k). */
static int bus_peer(int id, int bus, int k)
{
    int side = grid_side();
    return bus == BUS_ROW ? id / side * side + k : k * side + id % side;
}

/* CPE id's own place on the bus: its column on the row bus, its row on the column bus. */
static int bus_place(int id, int bus)
{
    int side = grid_side();
    return bus == BUS_ROW ? id % side : id / side;
}

static int full_receivers(const struct cpe *c, int bus, unsigned to);
static unsigned receivers(const struct cpe *c, int bus, int dst);

/* "CPE 3 waits in getr (row) after 2 receives", of a blocked CPE. */
static int describe_wait(char *buf, size_t size, const struct cpe *c)
{
    int bus = c->reg_op == REG_GETR || c->reg_op == REG_PUTR ? BUS_ROW : BUS_COL;
    if (c->reg_op == RMA_WAIT)
        return snprintf(buf, size, "CPE %d waits in athread_rma_wait_value for %d (the word "
                        "has %d)", c->id, c->reg_to, *c->rma_word);
    if (c->reg_op == REG_GETR || c->reg_op == REG_GETC)
        return snprintf(buf, size, "CPE %d waits in %s (%s) after %lld receive%s", c->id,
                        reg_call[c->reg_op], bus == BUS_ROW ? "row" : "column", c->c.reg_recvs,
                        c->c.reg_recvs == 1 ? "" : "s");
    if (c->reg_to == REG_ALL)
        return snprintf(buf, size, "CPE %d waits in %s to all (%d of %d buffers full) after "
                        "%lld send%s", c->id, reg_call[c->reg_op],
                        full_receivers(c, bus, receivers(c, bus, REG_ALL)),
                        grid_side() - 1, c->c.reg_sends, c->c.reg_sends == 1 ? "" : "s");
    return snprintf(buf, size, "CPE %d waits in %s to CPE %d after %lld send%s", c->id,
                    reg_call[c->reg_op], bus_peer(c->id, bus, c->reg_to), c->c.reg_sends,
                    c->c.reg_sends == 1 ? "" : "s");
}

/* Most CPEs a one-line deadlock message lists by name. */
#define DEADLOCK_LISTED 4

/* The CPEs are deadlocked (no CPE can go on; at least one waits on a bus):
 * one line naming the first few waiting on a bus, then how many more, and
 * how many wait at a barrier or have returned. */
static void bus_deadlock(void)
{
    char line[1024], one[160];
    size_t n = 0;
    int i, listed = 0, more = 0, returned = 0, at_barrier;
    line[0] = '\0';
    for (i = 0; i < SWIR_CPES; i++) {
        const struct cpe *c = &cpes[i];
        if (!c->blocked)
            continue;
        if (listed == DEADLOCK_LISTED) {
            more++;
            continue;
        }
        describe_wait(one, sizeof one, c);
        n += (size_t)snprintf(line + n, sizeof line - n, "%s%s", listed ? ", " : "", one);
        listed++;
    }
    if (more)
        n += (size_t)snprintf(line + n, sizeof line - n, " and %d more", more);
    returned = syn.returned;
    at_barrier = syn.waiting;
    if (at_barrier)
        n += (size_t)snprintf(line + n, sizeof line - n, "; %d wait%s at athread_syn",
                              at_barrier, at_barrier == 1 ? "s" : "");
    if (returned)
        snprintf(line + n, sizeof line - n, "; %d returned (CPE %d first)", returned,
                 syn.first_returned);
    fail(mpe.kernel_name, -1, "deadlock (on Sunway the CPEs would wait forever): %s", line);
}

#if !SWIR_COROUTINES
/* Whether no CPE of the spawn can go on while some wait on a bus (under
 * syn.lock). (With coroutines: when a pass over the CPEs ran none.) */
static int stuck(void)
{
    return syn.on_bus > 0 && syn.on_bus + syn.waiting + syn.returned == SWIR_CPES;
}
#endif

/* CPE c waits, in call `op` (sending to place `to`), until another CPE's step
 * may let it go on (bus_wake); under syn.lock with threads. */
static void bus_wait(struct cpe *c, enum reg_wait op, int to)
{
    c->reg_op = op;
    c->reg_to = to;
    c->blocked = 1;
    syn.on_bus++;
#if SWIR_COROUTINES
    c->state = CPE_ON_BUS;
    yield_to_mpe(c);                  /* back when bus_wake made it ready */
#else
    if (stuck())
        bus_deadlock();
    while (c->blocked)
        pthread_cond_wait(&c->bus_wake, &syn.lock);
#endif
    c->reg_op = REG_NONE;
}

/* CPE w, if it waits on a bus, may go on: it checks again for itself. */
static void bus_wake(struct cpe *w)
{
    if (!w->blocked)
        return;
    w->blocked = 0;
    syn.on_bus--;
#if SWIR_COROUTINES
    w->state = CPE_READY;
#else
    pthread_cond_signal(&w->bus_wake);
#endif
}

static void bus_lock(void)
{
#if !SWIR_COROUTINES
    pthread_mutex_lock(&syn.lock);
#endif
}

static void bus_unlock(void)
{
#if !SWIR_COROUTINES
    pthread_mutex_unlock(&syn.lock);
#endif
}

/* The checks common to a send and a receive: a CPE, a square grid, a vector
 * of 16 or 32 bytes. */
static struct cpe *bus_caller(const char *call, size_t bytes)
{
    struct cpe *c = cpe_self(call);
    if (!grid_side())
        fail(mpe.kernel_name, c->id, "%s: the %d CPEs are not a square grid of rows and "
             "columns", call, SWIR_CPES);
    if (bytes != 16 && bytes != REG_BYTES)
        fail(mpe.kernel_name, c->id, "%s of a %zu-byte value: it moves one vector, a floatv4 "
             "(16 bytes) or a doublev4 (32)", call, bytes);
    return c;
}

/* How many of the receivers (a bit per place in `to`) on CPE c's bus have a
 * full buffer. A send waits for all of them: a broadcast lands in every
 * receiver at once, so a vector sent on by one receiver never reaches another
 * before the one it answers (swDNN's and the all-gather's steps rely on it). */
static int full_receivers(const struct cpe *c, int bus, unsigned to)
{
    int k, full = 0;
    for (k = 0; k < grid_side(); k++)
        full += (to >> k) & 1 && cpes[bus_peer(c->id, bus, k)].inbox[bus].count == SWIR_REG_BUFFER;
    return full;
}

/* The places a send of CPE c to place `dst` (REG_ALL: all the others) reaches, a bit each. */
static unsigned receivers(const struct cpe *c, int bus, int dst)
{
    if (dst != REG_ALL)
        return 1u << dst;
    return ((1u << grid_side()) - 1) & ~(1u << bus_place(c->id, bus));
}

void swir_emu_reg_put(int bus, const void *v, size_t bytes, int dst)
{
    const char *call = bus == BUS_ROW ? "simd_putr" : "simd_putc";
    struct cpe *c = bus_caller(call, bytes);
    int side = grid_side(), me = bus_place(c->id, bus), k;
    unsigned to;
    if (dst != REG_ALL && (dst < 0 || dst >= side))
        fail(mpe.kernel_name, c->id, "%s to place %d: the receiver's place in the %s is 0..%d, "
             "or %d for all the others", call, dst, bus == BUS_ROW ? "row" : "column",
             side - 1, REG_ALL);
    if (dst == me)
        fail(mpe.kernel_name, c->id, "%s to place %d, the sender's own place in its %s", call,
             dst, bus == BUS_ROW ? "row" : "column");
    bus_lock();
    to = receivers(c, bus, dst);
    while (full_receivers(c, bus, to))
        bus_wait(c, bus == BUS_ROW ? REG_PUTR : REG_PUTC, dst);
    for (k = 0; k < side; k++) {
        struct cpe *r = &cpes[bus_peer(c->id, bus, k)];
        struct inbox *in = &r->inbox[bus];
        struct reg_vector *slot;
        if (!((to >> k) & 1))
            continue;
        slot = &in->v[(in->head + in->count++) % SWIR_REG_BUFFER];
        memcpy(slot->bytes, v, bytes);
        slot->size = bytes;
        slot->from = c->id;
        if (r->reg_op == (bus == BUS_ROW ? REG_GETR : REG_GETC))
            bus_wake(r);
    }
    c->c.reg_sends++;
    bus_unlock();
}

void swir_emu_reg_get(int bus, void *v, size_t bytes)
{
    const char *call = bus == BUS_ROW ? "simd_getr" : "simd_getc";
    struct cpe *c = bus_caller(call, bytes);
    struct inbox *in = &c->inbox[bus];
    const struct reg_vector *got;
    int side = grid_side(), k;
    bus_lock();
    while (in->count == 0)
        bus_wait(c, bus == BUS_ROW ? REG_GETR : REG_GETC, 0);
    got = &in->v[in->head];
    if (got->size != bytes)
        fail(mpe.kernel_name, c->id, "%s into a %zu-byte vector received %zu bytes from CPE "
             "%d (a %s)", call, bytes, got->size, got->from,
             got->size == REG_BYTES ? "doublev4" : "floatv4");
    memcpy(v, got->bytes, bytes);
    in->head = (in->head + 1) % SWIR_REG_BUFFER;
    in->count--;
    c->c.reg_recvs++;
    c->c.reg_bytes += (long long)bytes;
    /* Room in its buffer: a sender of its row / column waiting on this bus
     * goes on if all its receivers now have room (woken only then: a
     * broadcast would otherwise wake at each of the 7 receives). */
    for (k = 0; k < side; k++) {
        struct cpe *s = &cpes[bus_peer(c->id, bus, k)];
        if (s != c && s->blocked && s->reg_op == (bus == BUS_ROW ? REG_PUTR : REG_PUTC) &&
            !full_receivers(s, bus, receivers(s, bus, s->reg_to)))
            bus_wake(s);
    }
    bus_unlock();
}

/* At the end of a kernel (every CPE stopped): a vector sent and never
 * received is an error, naming the CPEs that hold one. */
/* At a kernel's end, every RMA sent was waited for by its receiver (its data
 * is delivered at that wait, so one never waited for never landed). */
static void check_rma_delivered(void)
{
    int k;
    for (k = 0; k < SWIR_CPES; k++)
        if (cpes[k].rma_pending)
            fail(mpe.kernel_name, -1, "the kernel ended with an RMA into CPE %d's LDM (from CPE "
                 "%d) that it never waited for (athread_rma_wait_value on its remote reply word)",
                 k, cpes[k].rma_in[0].from);
}

static void check_inboxes(void)
{
    char line[768];
    size_t n = 0;
    int i, bus, listed = 0, more = 0;
    for (i = 0; i < SWIR_CPES; i++)
        for (bus = BUS_ROW; bus <= BUS_COL; bus++) {
            const struct inbox *in = &cpes[i].inbox[bus];
            if (!in->count)
                continue;
            if (listed == DEADLOCK_LISTED) {
                more++;
                continue;
            }
            n += (size_t)snprintf(line + n, sizeof line - n, "%sCPE %d has %d on its %s bus "
                                  "(the first from CPE %d)", listed ? ", " : "", i, in->count,
                                  bus == BUS_ROW ? "row" : "column", in->v[in->head].from);
            listed++;
        }
    if (!listed)
        return;
    if (more)
        snprintf(line + n, sizeof line - n, " and %d more", more);
    fail(mpe.kernel_name, -1, "the kernel ended with vectors sent and never received: %s",
         line);
}

/* ------------------------------------------------------------------------
 * CPE: DMA
 * ------------------------------------------------------------------------ */

/* The main-memory block layout of a DMA of `len` bytes (len > 0; bsize and
 * stride >= 0). Strided exactly when 0 < bsize < len, as in the interpreter. */
static struct shape shape_of(int len, int bsize, int stride)
{
    struct shape s;
    s.len = (size_t)len;
    if (bsize > 0 && bsize < len) {
        s.bsize = (size_t)bsize;
        s.pitch = (size_t)bsize + (size_t)stride;
        s.full = s.len / s.bsize;
        s.rem = s.len % s.bsize;
        s.blocks = s.full + (s.rem > 0);
        s.extent = (s.blocks - 1) * s.pitch + (s.rem ? s.rem : s.bsize);
    } else {
        s.bsize = s.pitch = s.extent = s.len;
        s.full = s.blocks = 1;
        s.rem = 0;
    }
    return s;
}

/* "4 blocks of 80 bytes with 112 skipped between them" or "320 bytes". */
static const char *shape_text(char *buf, size_t size, const struct shape *s)
{
    if (s->blocks == 1)
        snprintf(buf, size, "%zu bytes", s->len);
    else
        snprintf(buf, size, "%zu bytes in %zu blocks of %zu with %zu skipped between them",
                 s->len, s->blocks, s->bsize, s->pitch - s->bsize);
    return buf;
}

/* Whether [ldm, ldm + len) lies inside the kernel's copy of its Para. */
static int is_para(const struct cpe *c, const void *ldm, size_t len)
{
    uintptr_t lo = (uintptr_t)ldm, base = (uintptr_t)c->para;
    return c->para && lo >= base && lo - base <= c->para_bytes && len <= c->para_bytes - (lo - base);
}

/* The LDM side [ldm, ldm + len) must lie inside this CPE's LDM frame (or,
 * for the get of the kernel's Para, inside its copy). */
static void check_ldm(const struct cpe *c, const char *op, int get, const void *ldm, size_t len)
{
    uintptr_t lo = (uintptr_t)ldm, base = (uintptr_t)c->frame;
    const char *dir = get ? "into" : "from";
    if (is_para(c, ldm, len))
        return;
    if (lo >= base && lo - base <= c->frame_bytes) {
        size_t off = lo - base;
        if (len <= c->frame_bytes - off)
            return;
        fail(mpe.kernel_name, c->id, "%s of %zu bytes %s LDM at offset %zu of the LDM frame "
             "runs %zu bytes past its end (the frame is %zu bytes)", op, len, dir, off,
             off + len - c->frame_bytes, c->frame_bytes);
    }
    fail(mpe.kernel_name, c->id, "%s of %zu bytes %s LDM at %p: outside this CPE's LDM frame "
         "[%p, +%zu)", op, len, dir, ldm, (const void *)c->frame, c->frame_bytes);
}

/* The main-memory extent of a DMA must not be in this CPE's LDM frame (src
 * and dest swapped) and, once main memory is registered, must lie inside one
 * registered block. */
static void check_memory(struct cpe *c, const char *op, int get, const void *mem,
                         const struct shape *s)
{
    uintptr_t lo = (uintptr_t)mem, hi, flo = (uintptr_t)c->frame;
    const char *verb = get ? "reads" : "writes";
    const struct block *b;
    char what[128], name[NAME_TEXT];
    size_t i;
    shape_text(what, sizeof what, s);
    if (!mem)
        fail(mpe.kernel_name, c->id, "%s %s main memory at a null address", op, verb);
    if (lo > UINTPTR_MAX - s->extent)
        fail(mpe.kernel_name, c->id, "%s %s main memory at %p (%s) past the end of the "
             "address space", op, verb, mem, what);
    hi = lo + s->extent;
    if (c->frame_bytes && lo < flo + c->frame_bytes && flo < hi)
        fail(mpe.kernel_name, c->id, "%s %s main memory at %p (%s) that overlaps this CPE's "
             "LDM frame: are the source and the destination swapped?", op, verb, mem, what);
    if (n_blocks == 0)
        return;
    if (c->last_block < n_blocks && block_holds(&blocks[c->last_block], lo, hi))
        return;
    for (i = 0; i < n_blocks; i++)
        if (block_holds(&blocks[i], lo, hi)) {
            c->last_block = i;
            return;
        }
    if ((b = block_at(lo)) != NULL)
        fail(mpe.kernel_name, c->id, "%s %s main memory outside block '%s' (%zu bytes): %s "
             "from its byte %zu reach byte %zu, past its end", op, verb,
             printable(name, sizeof name, b->name), b->bytes, what,
             (size_t)(lo - (uintptr_t)b->base), (size_t)(hi - 1 - (uintptr_t)b->base));
    if ((b = block_at(hi - 1)) != NULL)
        fail(mpe.kernel_name, c->id, "%s %s main memory outside block '%s' (%zu bytes): %s "
             "start %zu bytes before it", op, verb, printable(name, sizeof name, b->name),
             b->bytes, what, (size_t)((uintptr_t)b->base - lo));
    fail(mpe.kernel_name, c->id, "%s %s main memory at %p (%s) outside every registered "
         "main-memory block (%zu registered)", op, verb, mem, what, n_blocks);
}

static void count(struct counters *k, int get, const struct shape *s, const void *mem,
                  const void *ldm)
{
    k->mem_misaligned += (uintptr_t)mem % SWIR_WRITE_BLOCK != 0;
    k->ldm_misaligned += (uintptr_t)ldm % SWIR_WRITE_BLOCK != 0;
    k->blocks32 += s->bsize % SWIR_WRITE_BLOCK == 0 ? (long long)s->full : 0;
    k->blocks32 += s->rem && s->rem % SWIR_WRITE_BLOCK == 0;
    if (get) {
        k->gets++;
        k->bytes_in += (long long)s->len;
    } else {
        k->puts++;
        k->bytes_out += (long long)s->len;
    }
    k->size_hist[bucket_index(s->len)]++;
    if (s->len < SWIR_SMALL_TRANSFER)
        k->small++;
    k->blocks += (long long)s->blocks;
    k->block_hist[bucket_index(s->bsize)] += (long long)s->full;
    if (s->rem)
        k->block_hist[bucket_index(s->rem)]++;
}

static const char *mode_name(dma_mode mode)
{
    switch (mode) {
    case PE_MODE: return "PE_MODE";
    case BCAST_MODE: return "BCAST_MODE";
    case ROW_MODE: return "ROW_MODE";
    case BROW_MODE: return "BROW_MODE";
    case RANK_MODE: return "RANK_MODE";
    }
    return "an unknown mode";
}

/* Record the 32-byte blocks a put of shape `s` at `mem` writes, merging
 * ranges that touch the previous one (tiles written in order stay one range). */
static void note_written(struct cpe *c, const void *mem, const struct shape *s)
{
    size_t i;
    for (i = 0; i < s->blocks; i++) {
        uintptr_t lo = (uintptr_t)mem + i * s->pitch;
        size_t n = (i == s->full) ? s->rem : s->bsize;
        uintptr_t first = lo / SWIR_WRITE_BLOCK, last = (lo + n - 1) / SWIR_WRITE_BLOCK;
        struct written *w = c->n_written ? &c->written[c->n_written - 1] : NULL;
        if (w && first <= w->last + 1 && last + 1 >= w->first) {
            if (first < w->first)
                w->first = first;
            if (last > w->last)
                w->last = last;
            continue;
        }
        c->written = grow(c->written, &c->written_cap, c->n_written + 1, sizeof *c->written);
        c->written[c->n_written].first = first;
        c->written[c->n_written].last = last;
        c->written[c->n_written].cpe = c->id;
        c->n_written++;
    }
}

/* CPE w->cpe and CPE `other` both wrote into main-memory block `blk`. */
static void conflict(const struct written *w, int other, uintptr_t blk)
{
    uintptr_t at = blk * SWIR_WRITE_BLOCK;
    const struct block *b = block_at(at);
    char name[NAME_TEXT], where[NAME_TEXT + 64];
    int lo = w->cpe < other ? w->cpe : other, hi = w->cpe < other ? other : w->cpe;
    if (b == NULL)
        b = block_at(at + SWIR_WRITE_BLOCK - 1);
    if (b != NULL)
        snprintf(where, sizeof where, "block '%s' bytes %ld to %ld",
                 printable(name, sizeof name, b->name), (long)at - (long)(uintptr_t)b->base,
                 (long)at - (long)(uintptr_t)b->base + SWIR_WRITE_BLOCK - 1);
    else
        snprintf(where, sizeof where, "%p", (void *)at);
    fail(mpe.kernel_name, hi, "CPEs %d and %d both write by DMA into the %d-byte block of main "
         "memory at %s in one spawn; whether a DMA writes part of a block without touching "
         "the rest is not known, so no two CPEs may share one", lo, hi, SWIR_WRITE_BLOCK, where);
}

static int by_first_block(const void *a, const void *b)
{
    const struct written *x = a, *y = b;
    return x->first < y->first ? -1 : x->first > y->first ? 1 : x->cpe - y->cpe;
}

/* After a join: no two CPEs may have written by DMA into one 32-byte block
 * of main memory. Whether the DMA engine writes sub-word or sub-block data
 * without touching the bytes around it is not public, so the generated code
 * must not depend on it. Sorted by first block, a range from another CPE
 * than the furthest-reaching range so far, starting before that one ends,
 * overlaps it (ranges of one CPE may overlap each other). */
static void check_written(void)
{
    struct written *all, *w;
    size_t n = 0, i;
    int c;
    uintptr_t end1 = 0, end2 = 0;         /* furthest last block, and the furthest of other CPEs */
    int cpe1 = -1, cpe2 = -1, have1 = 0, have2 = 0;
    for (c = 0; c < SWIR_CPES; c++)
        n += cpes[c].n_written;
    if (n < 2)
        return;
    all = malloc(n * sizeof *all);
    if (!all)
        fail(mpe.kernel_name, -1, "out of memory checking the CPEs' writes");
    for (c = 0, n = 0; c < SWIR_CPES; c++) {
        if (cpes[c].n_written)
            memcpy(all + n, cpes[c].written, cpes[c].n_written * sizeof *all);
        n += cpes[c].n_written;
    }
    qsort(all, n, sizeof *all, by_first_block);
    for (i = 0; i < n; i++) {
        w = &all[i];
        if (have1 && w->cpe != cpe1 && w->first <= end1)
            conflict(w, cpe1, w->first);
        if (have2 && w->cpe == cpe1 && w->first <= end2)
            conflict(w, cpe2, w->first);
        if (!have1 || w->last > end1) {
            if (have1 && w->cpe != cpe1) {
                end2 = end1;
                cpe2 = cpe1;
                have2 = 1;
            }
            end1 = w->last;
            cpe1 = w->cpe;
            have1 = 1;
        } else if (w->cpe != cpe1 && (!have2 || w->last > end2)) {
            end2 = w->last;
            cpe2 = w->cpe;
            have2 = 1;
        }
    }
    free(all);
}

/* Validate, count and queue one DMA; the copy happens in swir_emu_wait, so
 * using its LDM buffer before the wait gives wrong results on the host too. */
static void issue(const char *op, int get, dma_mode mode, const void *src, void *dest,
                  int len, volatile void *reply, int stride, int bsize)
{
    struct cpe *c = cpe_self(op);
    const void *mem = get ? src : dest, *ldm = get ? dest : src;
    struct dma *d;
    struct shape s;
    int source;
    if (mode != PE_MODE && !(get && mode == BCAST_MODE))
        fail(mpe.kernel_name, c->id, "%s in %s is not supported by the emulation (only "
             "PE_MODE, and BCAST_MODE for athread_get)", op, mode_name(mode));
    if (len <= 0)
        fail(mpe.kernel_name, c->id, "%s of %d bytes: the length must be positive", op, len);
    if (bsize < 0 || stride < 0)
        fail(mpe.kernel_name, c->id, "%s with bsize %d and stride %d: neither may be negative",
             op, bsize, stride);
    if (!reply)
        fail(mpe.kernel_name, c->id, "%s without a reply word", op);
    if (!c->framed)
        fail(mpe.kernel_name, c->id, "%s of %d bytes %s LDM before the kernel declared its "
             "LDM (SWIR_LDM_FRAME)", op, len, get ? "into" : "from");
    s = shape_of(len, bsize, stride);
    /* Main memory first: with source and destination swapped, its check says so. */
    check_memory(c, op, get, mem, &s);
    check_ldm(c, op, get, ldm, s.len);
    if (get && is_para(c, ldm, s.len))
        c->c.para_gets++;             /* the Para copy: not the plan's DMA */
    else
        count(&c->c, get, &s, mem, ldm);
    source = get && c->bcast_source;
    if (source) {                     /* the Pro's broadcast: CPE 0's get, then RMA */
        c->bcast_source = 0;
        c->c.bcasts++;
        c->c.bcast_bytes += (long long)s.len * SWIR_CPES;
    }
    if (mode == BCAST_MODE) {
        if (is_para(c, ldm, s.len))
            fail(mpe.kernel_name, c->id, "athread_get in BCAST_MODE into the kernel's Para "
                 "copy: the Para is not in the LDM frame every CPE shares the layout of");
        c->c.bcasts++;
        c->c.bcast_bytes += (long long)s.len * SWIR_CPES;
    }
    if (!get)
        note_written(c, dest, &s);

    c->queue = grow(c->queue, &c->queue_cap, c->queued + 1, sizeof *c->queue);
    d = &c->queue[c->queued++];
    d->get = get;
    d->from = src;
    d->to = dest;
    d->from_step = get ? s.pitch : s.bsize;
    d->to_step = get ? s.bsize : s.pitch;
    d->s = s;
    d->reply = (volatile int *)reply;
    d->para = get && is_para(c, ldm, s.len);
    d->bcast = mode == BCAST_MODE;
    d->bcast_source = source;
    /* inside the frame (check_ldm; a Para target was refused above) */
    d->ldm_offset = d->bcast ? (size_t)((const unsigned char *)ldm - c->frame) : 0;
}

/* BCAST_MODE: one CPE issues the get, the data lands at the same LDM address
 * of every CPE whose row the mask selects (0xff: all 8 rows; the only mask the
 * emulation supports). The generated code brackets it with athread_syn, so
 * the other CPEs wait at a barrier while it lands (swir_emu_wait delivers it). */
int athread_get(dma_mode mode, void *src, void *dest, int len, void *reply, char mask,
                int stride, int bsize)
{
    if (mode == BCAST_MODE && (unsigned char)mask != 0xff)
        fail(mpe.kernel_name, cpe_self("athread_get")->id, "athread_get in BCAST_MODE with "
             "mask 0x%x is not supported by the emulation (only 0xff, every row)",
             (unsigned)(unsigned char)mask);
    issue("athread_get", 1, mode, src, dest, len, reply, stride, bsize);
    return 0;
}

int athread_put(dma_mode mode, void *src, void *dest, int len, void *reply, int stride,
                int bsize)
{
    issue("athread_put", 0, mode, src, dest, len, reply, stride, bsize);
    return 0;
}

/* ------------------------------------------------------------------------
 * The SW26010-Pro's CPE interface (crts.h): its DMAs are the PE_MODE ones
 * above under their names; RMA broadcasts between the LDMs of a row or a
 * column are delivered when issued (docs/codegen.md, "The SW26010-Pro").
 * ------------------------------------------------------------------------ */

int CRTS_dma_iget(void *dst, void *src, int len, crts_rply_t *rply)
{
    issue("CRTS_dma_iget", 1, PE_MODE, src, dst, len, rply, 0, 0);
    return 0;
}

int CRTS_dma_iput(void *dst, void *src, int len, crts_rply_t *rply)
{
    issue("CRTS_dma_iput", 0, PE_MODE, src, dst, len, rply, 0, 0);
    return 0;
}

int CRTS_dma_iget_stride(void *dst, void *src, int len, int bsize, int stride, crts_rply_t *rply)
{
    issue("CRTS_dma_iget_stride", 1, PE_MODE, src, dst, len, rply, stride, bsize);
    return 0;
}

int CRTS_dma_iput_stride(void *dst, void *src, int len, int bsize, int stride, crts_rply_t *rply)
{
    issue("CRTS_dma_iput_stride", 0, PE_MODE, src, dst, len, rply, stride, bsize);
    return 0;
}

void athread_ssync_array(void)
{
    athread_syn(ARRAY_SCOPE, 0xffff);
}

void swir_emu_bcast_source(void)
{
    cpe_self("SWIR_BCAST_SOURCE")->bcast_source = 1;
}

/* The address in CPE r's LDM of `addr` in CPE c's: the same offset from its
 * frame (LDM variables have one layout on every CPE). */
static unsigned char *on_peer(const struct cpe *c, const struct cpe *r, const volatile void *addr)
{
    return (unsigned char *)r->frame + ((const unsigned char *)addr - c->frame);
}

/* The checks of an RMA broadcast `call` of `len` bytes from `src` to `dst`
 * (both in the sender's LDM frame, 4-byte aligned, len a positive multiple
 * of 4: the RMA rules public Pro notes state) with reply words. */
static struct cpe *rma_caller(const char *call, const void *dst, const void *src, int len,
                              const volatile void *local, const volatile void *remote)
{
    struct cpe *c = cpe_self(call);
    if (!grid_side())
        fail(mpe.kernel_name, c->id, "%s: the %d CPEs are not a square grid of rows and "
             "columns", call, SWIR_CPES);
    if (!c->framed)
        fail(mpe.kernel_name, c->id, "%s before the kernel declared its LDM (SWIR_LDM_FRAME)",
             call);
    if (len <= 0 || len % 4)
        fail(mpe.kernel_name, c->id, "%s of %d bytes: RMA moves a positive multiple of 4 bytes",
             call, len);
    if ((uintptr_t)dst % 4 || (uintptr_t)src % 4)
        fail(mpe.kernel_name, c->id, "%s from %p to %p: RMA addresses are 4-byte aligned", call,
             src, dst);
    if (!local || !remote)
        fail(mpe.kernel_name, c->id, "%s without its two reply words (local and remote)", call);
    check_ldm(c, call, 0, src, (size_t)len);
    check_ldm(c, call, 1, dst, (size_t)len);
    return c;
}

/* CPE c's RMA broadcast on `bus`: every CPE of its row or column (c among
 * them) gets the data and a count on its remote word; c's local word counts
 * the send. Receivers waiting for a word are woken to look again. */
static int rma_bcast(int bus, void *dst, void *src, int len, athread_rply_t *local,
                     athread_rply_t *remote)
{
    const char *call = bus == BUS_ROW ? "athread_rma_row_ibcast" : "athread_rma_col_ibcast";
    struct cpe *c = rma_caller(call, dst, src, len, local, remote);
    int k, side = grid_side();
    bus_lock();
    for (k = 0; k < side; k++) {
        struct cpe *r = &cpes[bus_peer(c->id, bus, k)];
        if (!r->framed || r->frame_bytes != c->frame_bytes)
            fail(mpe.kernel_name, c->id, "%s to CPE %d, which has not declared the same LDM "
                 "frame (it is in another kernel, or not yet at the broadcast)", call, r->id);
        struct rma_in *in;
        r->rma_in = grow(r->rma_in, &r->rma_cap, r->rma_pending + 1, sizeof *r->rma_in);
        in = &r->rma_in[r->rma_pending++];
        in->dst = on_peer(c, r, dst);
        in->data = malloc((size_t)len);
        if (!in->data)
            fail(mpe.kernel_name, c->id, "%s: out of memory for %d bytes in flight", call, len);
        memcpy(in->data, src, (size_t)len);
        in->len = (size_t)len;
        in->word = (volatile int *)on_peer(c, r, remote);
        in->from = c->id;
        if (r->reg_op == RMA_WAIT)
            bus_wake(r);
    }
    (*local)++;
    c->c.rma_bcasts++;
    c->c.rma_bytes += (long long)len * side;
    bus_unlock();
    return 0;
}

int athread_rma_row_ibcast(void *dst, void *src, int len, athread_rply_t *local,
                           athread_rply_t *remote)
{
    return rma_bcast(BUS_ROW, dst, src, len, local, remote);
}

int athread_rma_col_ibcast(void *dst, void *src, int len, athread_rply_t *local,
                           athread_rply_t *remote)
{
    return rma_bcast(BUS_COL, dst, src, len, local, remote);
}

/* The RMAs sent to CPE c that count on its word `rply`: their bytes land in
 * its LDM and the word counts them, in the order sent (under syn.lock). Data
 * read before the wait is the LDM's old contents, as on the machine. */
static void rma_deliver(struct cpe *c, volatile int *rply)
{
    size_t i, kept = 0;
    for (i = 0; i < c->rma_pending; i++) {
        struct rma_in *in = &c->rma_in[i];
        if (in->word != rply) {
            c->rma_in[kept++] = *in;
            continue;
        }
        memmove(in->dst, in->data, in->len);
        free(in->data);
        (*in->word)++;
    }
    c->rma_pending = kept;
}

int athread_rma_wait_value(athread_rply_t *rply, int value)
{
    struct cpe *c = cpe_self("athread_rma_wait_value");
    if (!rply)
        fail(mpe.kernel_name, c->id, "athread_rma_wait_value without a reply word");
    bus_lock();
    rma_deliver(c, rply);
    while (*rply < value) {
        c->rma_word = rply;
        bus_wait(c, RMA_WAIT, value);
        rma_deliver(c, rply);
    }
    bus_unlock();
    return 0;
}

static void copy_blocks(const struct dma *d, unsigned char *to)
{
    const struct shape *s = &d->s;
    size_t i;
    for (i = 0; i < s->full; i++)
        memcpy(to + i * d->to_step, d->from + i * d->from_step, s->bsize);
    if (s->rem)
        memcpy(to + s->full * d->to_step, d->from + s->full * d->from_step, s->rem);
}

/* Move the data of one DMA and count its completion on its reply word. A
 * broadcast lands at its offset in every CPE's LDM frame: the other CPEs are
 * waiting at the barrier before it, so none is using its LDM. */
static void perform(const struct cpe *c, const struct dma *d)
{
    int k;
    if (!d->bcast)
        copy_blocks(d, d->to);
    for (k = 0; d->bcast && k < SWIR_CPES; k++) {
        const struct cpe *o = &cpes[k];
        if (!o->framed || d->ldm_offset + d->s.len > o->frame_bytes)
            fail(mpe.kernel_name, c->id, "athread_get in BCAST_MODE of %zu bytes at offset %zu "
                 "of the LDM frame: CPE %d's frame (%zu bytes) does not hold it", d->s.len,
                 d->ldm_offset, k, o->framed ? o->frame_bytes : (size_t)0);
        copy_blocks(d, (unsigned char *)o->frame + d->ldm_offset);
    }
    (*d->reply)++;
}

void swir_emu_wait(volatile int *reply, int n)
{
    struct cpe *c = cpe_self("SWIR_WAIT");
    size_t i, kept = 0, plan = 0;
    int has;
    if (!reply)
        fail(mpe.kernel_name, c->id, "SWIR_WAIT on a null reply word");
    /* Perform this word's DMAs in issue order; keep the others queued. */
    for (i = 0; i < c->queued; i++) {
        if (c->queue[i].reply == reply) {
            perform(c, &c->queue[i]);
            /* neither the Para copy's wait nor a broadcast's (part of it) is the plan's */
            plan += !c->queue[i].para && !c->queue[i].bcast && !c->queue[i].bcast_source;
        } else
            c->queue[kept++] = c->queue[i];
    }
    c->queued = kept;
    has = *reply;
    if (has != n)
        fail(mpe.kernel_name, c->id, "SWIR_WAIT waits for %d completion%s on a reply word "
             "that has %d (%s)", n, n == 1 ? "" : "s", has,
             has < n ? "on Sunway the CPE would spin forever"
                     : "more DMAs completed on it than the wait counts");
    *reply = 0;
    if (plan || n == 0)               /* the wait for the Para copy alone is not the plan's */
        c->c.waits++;
}

/* ------------------------------------------------------------------------
 * Counters as JSON
 * ------------------------------------------------------------------------ */

void swir_emu_reset_stats(void)
{
    size_t i;
    mpe_only("swir_emu_reset_stats");
    if (mpe.running)
        fail(mpe.kernel_name, -1, "swir_emu_reset_stats while the kernel is running");
    for (i = 0; i < n_kernels; i++)
        free(kernels[i].name);
    n_kernels = 0;
}

static void json_string(FILE *f, const char *s)
{
    const unsigned char *p;
    fputc('"', f);
    for (p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);             /* other bytes as given (UTF-8 names stay UTF-8) */
    }
    fputc('"', f);
}

/* The shortest of %.15g..%.17g that reads back as x, always with a '.' or
 * an exponent so that JSON readers see a float. */
static void json_double(FILE *f, double x)
{
    char buf[40];
    int prec;
    for (prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, x);
        if (strtod(buf, NULL) == x)
            break;
    }
    fputs(buf, f);
    if (!strpbrk(buf, ".eEn"))
        fputs(".0", f);
}

static void json_histogram(FILE *f, const long long *h)
{
    const char *sep = "";
    int k;
    fputc('{', f);
    for (k = 0; k < BUCKETS; k++)
        if (h[k]) {
            fprintf(f, "%s\"%llu\": %lld", sep, 1ULL << k, h[k]);
            sep = ", ";
        }
    fputc('}', f);
}

static void json_kernel(FILE *f, const struct kernel *k)
{
    const struct counters *c = &k->c;
    long long transfers = c->gets + c->puts, peak = 0;
    int i;
    for (i = 0; i < SWIR_CPES; i++)
        if (k->ldm_peak_cpe[i] > peak)
            peak = k->ldm_peak_cpe[i];
    fprintf(f, "{\"spawns\": %lld, \"barriers\": %lld, \"calls\": %lld, \"gets\": %lld, "
            "\"puts\": %lld, \"transfers\": %lld, \"waits\": %lld, \"bytes_in\": %lld, "
            "\"bytes_out\": %lld, \"size_histogram\": ", k->spawns, k->barriers, k->calls,
            c->gets, c->puts, transfers,
            c->waits, c->bytes_in, c->bytes_out);
    json_histogram(f, c->size_hist);
    fprintf(f, ", \"small_transfers\": %lld, \"small_share\": ", c->small);
    json_double(f, transfers ? (double)c->small / (double)transfers : 0.0);
    fprintf(f, ", \"blocks\": %lld, \"block_histogram\": ", c->blocks);
    json_histogram(f, c->block_hist);
    fprintf(f, ", \"blocks_32\": %lld, \"mem_misaligned\": %lld, \"ldm_misaligned\": %lld, "
            "\"para_gets\": %lld, \"bcasts\": %lld, \"bcast_bytes\": %lld", c->blocks32,
            c->mem_misaligned, c->ldm_misaligned, c->para_gets, c->bcasts, c->bcast_bytes);
    fprintf(f, ", \"reg_sends\": %lld, \"reg_recvs\": %lld, \"reg_bytes\": %lld",
            c->reg_sends, c->reg_recvs, c->reg_bytes);
    fprintf(f, ", \"rma_bcasts\": %lld, \"rma_bytes\": %lld", c->rma_bcasts, c->rma_bytes);
    fprintf(f, ", \"ldm_peak\": %lld, \"ldm_peak_cpe\": [", peak);
    for (i = 0; i < SWIR_CPES; i++)
        fprintf(f, "%s%lld", i ? ", " : "", k->ldm_peak_cpe[i]);
    fputs("], \"wall_seconds\": ", f);
    json_double(f, k->wall_seconds);
    fputc('}', f);
}

/* Counters summed over kernels; LDM high-water marks are the maxima. */
static void total_of(struct kernel *t)
{
    size_t i;
    int j;
    memset(t, 0, sizeof *t);
    for (i = 0; i < n_kernels; i++) {
        const struct kernel *k = &kernels[i];
        t->spawns += k->spawns;
        t->barriers += k->barriers;
        t->calls += k->calls;
        t->wall_seconds += k->wall_seconds;
        counters_add(&t->c, &k->c);
        for (j = 0; j < SWIR_CPES; j++)
            if (k->ldm_peak_cpe[j] > t->ldm_peak_cpe[j])
                t->ldm_peak_cpe[j] = k->ldm_peak_cpe[j];
    }
}

int swir_emu_write_stats(const char *path, int runs)
{
    FILE *f;
    int bad;
    mpe_only("swir_emu_write_stats");
    f = path ? fopen(path, "w") : NULL;
    if (!f) {
        fprintf(stderr, "swir-emu: error: cannot write the counters to '%s': %s\n",
                path ? path : "(null)", path ? strerror(errno) : "no path");
        return -1;
    }
    bad = swir_emu_write_stats_to(f, runs);
    if (fclose(f) != 0 || bad) {
        fprintf(stderr, "swir-emu: error: cannot write the counters to '%s': %s\n", path,
                strerror(errno));
        return -1;
    }
    return 0;
}

int swir_emu_write_stats_to(FILE *f, int runs)
{
    struct kernel total;
    size_t i;
    mpe_only("swir_emu_write_stats");
    if (mpe.running)
        fail(mpe.kernel_name, -1, "swir_emu_write_stats while the kernel is running: "
             "athread_join it first");
    fprintf(f, "{\"runs\": %d, \"functions\": {", runs);
    for (i = 0; i < n_kernels; i++) {
        fputs(i ? ",\n  " : "\n  ", f);
        json_string(f, kernels[i].name);
        fputs(": ", f);
        json_kernel(f, &kernels[i]);
    }
    fputs("},\n \"total\": ", f);
    total_of(&total);
    json_kernel(f, &total);
    fputs("}\n", f);
    return ferror(f) ? -1 : 0;
}
