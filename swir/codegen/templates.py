"""The fixed parts of the generated files, and the code that fills them in:
layers_mix.h's prelude, main.c's program support (options, files, memory),
and the Makefile."""

from __future__ import annotations

import re
from collections.abc import Callable

from swir.codegen import scalar
from swir.codegen.names import comment_text, display_text
from swir.ir.core import FuncParam
from swir.ir.types import ScalarType, ShapedType, Type

# Identifiers the fixed code below declares or uses: model names must avoid them.
NAMES = frozenset("""
    program fail blocks n_blocks alloc_block free_blocks read_exact temporary_name write_all
    port options usage parse_options input_ports output_ports load_constants place_buffers
    in out opt message i j r w raw grown tmp done size bytes what path dst src ok f n v a
    end slash dir inputs outputs n_inputs n_outputs stats weights_default va_list va_start
    va_end vfprintf fputc strrchr SEEK_END SEEK_SET N_INPUTS N_OUTPUTS WEIGHTS_BYTES
    ARENA_BYTES
""".split())

MIX_PRELUDE = r"""#ifndef SWIR_LAYERS_MIX_H
#define SWIR_LAYERS_MIX_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Hooks of swir's athread emulation (make emu), and what they are on Sunway:
 * SWIR_KERNEL names the next spawn for the counters, SWIR_LDM_FRAME declares a
 * CPE's LDM buffers, SWIR_MEMORY a main-memory block DMA may touch, and
 * SWIR_WAIT waits for N completions on a reply word, then resets it. */
#ifdef SWIR_EMU
#include "swir_emu.h"
#else
#define SWIR_KERNEL(name) ((void)0)
#define SWIR_LDM_FRAME(base, bytes) ((void)0)
#define SWIR_MEMORY(base, bytes, name) ((void)0)
#define SWIR_WAIT(reply, n) do { while ((reply) != (n)) ; (reply) = 0; } while (0)
#endif

/* A run-time error in generated code (an out-of-range data-dependent index):
 * the message on one line, exit status 1. In the emulation the runtime ends
 * the process, as for its own errors: one line even when several CPEs trap at
 * once, and no sanitizer report of the CPE threads the exit abandons. */
#ifdef SWIR_EMU
#define SWIR_TRAP(message) swir_emu_trap(message)
#else
#define SWIR_TRAP(message) (fprintf(stderr, "%s\n", (message)), exit(1))
#endif

/* Index arithmetic: floor division and modulo as in swir (rounding to -inf). */
static inline long swir_floordiv(long a, long b)
{ long q = a / b; return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q; }
static inline long swir_ceildiv(long a, long b) { return -swir_floordiv(-a, b); }
static inline long swir_mod(long a, long b)
{ long r = a % b; return (r != 0 && (r < 0) != (b < 0)) ? r + b : r; }
static inline long swir_min(long a, long b) { return a < b ? a : b; }
static inline long swir_max(long a, long b) { return a > b ? a : b; }

/* Worker id's share [lo, hi) of `extent` iterations over `workers`: sizes
 * differ by at most one, the larger shares first (swir's `chunk`). */
static inline long swir_chunk_lo(long id, long extent, long workers)
{ return id * (extent / workers) + swir_min(id, extent % workers); }
static inline long swir_chunk_hi(long id, long extent, long workers)
{ return swir_chunk_lo(id, extent, workers) + extent / workers + (id < extent % workers); }

/* A data-dependent subscript (swir's dyn_index): negative counts from the end. */
static inline long swir_dyn_index(long v, long bound, const char *error)
{
    if (v < 0)
        v += bound;
    if (v < 0 || v >= bound)
        SWIR_TRAP(error);
    return v;
}
"""

F16 = r"""/* f16: the compiler's _Float16 (GCC >= 12 on x86-64; arithmetic rounds each
 * operation to f16, as swir's reference does). */
#ifdef __FLT16_MAX__
typedef _Float16 swir_f16;
#else
#error "this model uses f16, which needs a C compiler with _Float16"
#endif
"""

SUPPORT = r"""/* ---- Program support: errors, memory, files, options ------------------ */

static const char *program = "program";

static void fail(const char *format, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    fprintf(stderr, "%s: error: ", program);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
    exit(1);
}

/* Every block of main memory, 64-byte aligned, kept to be freed at exit. */
static void **blocks;
static long n_blocks;

static void *alloc_block(size_t bytes, const char *what)
{
    unsigned char *raw = malloc(bytes + 64);
    void **grown = realloc(blocks, (size_t)(n_blocks + 1) * sizeof *blocks);
    if (raw == NULL || grown == NULL)
        fail("out of memory allocating %s (%ld bytes)", what, (long)bytes);
    blocks = grown;
    blocks[n_blocks++] = raw;
    unsigned char *p = raw + (64 - (uintptr_t)raw % 64) % 64;
    /* Poison: memory nothing wrote reads as NaN (0x7FFA...), as in swir-run. */
    for (size_t i = 0; i < bytes; i++)
        p[i] = i % 2 ? 0x7F : 0xFA;
    SWIR_MEMORY(p, bytes, what);
    return p;
}

static void free_blocks(void)
{
    for (long i = 0; i < n_blocks; i++)
        free(blocks[i]);
    free(blocks);
}

/* Read exactly `bytes` bytes of `path` into dst: a file of any other size is an error. */
static void read_exact(const char *path, void *dst, size_t bytes, const char *what)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail("cannot open %s '%s'", what, path);
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        size = ftell(f);
    if (size < 0 || size == LONG_MAX || fseek(f, 0, SEEK_SET) != 0)
        fail("cannot read %s '%s' (not a regular file?)", what, path);
    if ((size_t)size != bytes)
        fail("%s '%s' has %ld bytes; expected %ld", what, path, size, (long)bytes);
    if (bytes && fread(dst, 1, bytes, f) != bytes)
        fail("cannot read %s '%s'", what, path);
    fclose(f);
}

/* Outputs go to PATH.tmp first and are renamed only when all are written. */
static char *temporary_name(const char *path)
{
    size_t n = strlen(path);
    char *tmp = malloc(n + 5);
    if (tmp == NULL)
        fail("out of memory");
    memcpy(tmp, path, n);
    memcpy(tmp + n, ".tmp", 5);
    return tmp;
}

static int write_all(const char *path, const void *src, size_t bytes)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    int ok = fwrite(src, 1, bytes, f) == bytes;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

struct port {
    const char *name;   /* the swir parameter */
    const char *type;   /* its swir type */
    size_t bytes;       /* raw little-endian, C order */
};

struct options {
    const char **inputs;
    const char **outputs;
    long n_inputs, n_outputs, repeat;
    const char *stats;
    const char *weights;
    char *weights_default;
};

static void usage(FILE *to)
{
    fprintf(to, "usage: %s --input FILE ... [--output FILE ...] [--stats FILE.json] "
                "[--repeat N] [--weights FILE]\n"
                "Inputs and outputs are raw little-endian arrays in C order, in the order "
                "of the\nfunction's parameters; --stats needs the emulation build "
                "(make emu).\n", program);
}

static void parse_options(int argc, char **argv, struct options *o)
{
    o->inputs = calloc((size_t)argc, sizeof *o->inputs);
    o->outputs = calloc((size_t)argc, sizeof *o->outputs);
    if (o->inputs == NULL || o->outputs == NULL)
        fail("out of memory");
    o->repeat = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        if (i + 1 >= argc)
            fail("%s: unknown option or missing value (see --help)", a);
        const char *v = argv[++i];
        if (strcmp(a, "--input") == 0)
            o->inputs[o->n_inputs++] = v;
        else if (strcmp(a, "--output") == 0)
            o->outputs[o->n_outputs++] = v;
        else if (strcmp(a, "--stats") == 0)
            o->stats = v;
        else if (strcmp(a, "--weights") == 0)
            o->weights = v;
        else if (strcmp(a, "--repeat") == 0) {
            char *end;
            o->repeat = strtol(v, &end, 10);
            if (*v == '\0' || *end != '\0' || o->repeat < 1 || o->repeat > 1000000000)
                fail("--repeat needs a count from 1 to 1000000000, got '%s'", v);
        } else
            fail("unknown option '%s' (see --help)", a);
    }
#ifndef SWIR_EMU
    if (o->stats != NULL)
        fail("--stats needs the emulation build (make emu)");
#endif
    if (o->weights == NULL) {   /* default: weights.bin beside the program */
        const char *slash = strrchr(argv[0], '/');
        size_t dir = slash ? (size_t)(slash - argv[0]) + 1 : 0;
        o->weights_default = malloc(dir + sizeof "weights.bin");
        if (o->weights_default == NULL)
            fail("out of memory");
        memcpy(o->weights_default, argv[0], dir);
        memcpy(o->weights_default + dir, "weights.bin", sizeof "weights.bin");
        o->weights = o->weights_default;
    }
}
"""


def _fill_loop(name: str, t: ShapedType, value: object) -> str:
    lit = scalar.literal(value, t.element)
    return (f"    for (long i = 0; i < {t.num_elements}; i++)\n"
            f"        {name}[i] = {lit};")


def constants_code(decls: list[str], read: list, fill: list, file_bytes: int,
                   c_string: Callable[[str], str]) -> str:
    """Declarations of the constants and load_constants(), which reads
    weights.bin (exactly WEIGHTS_BYTES long) and fills the splat constants."""
    lines = ["/* ---- Constants: weights.bin (read whole, size checked) and splat values */",
             ""]
    lines += decls
    lines += ["", f"#define WEIGHTS_BYTES {file_bytes}", "",
              "static void load_constants(const char *path)", "{"]
    if read:
        lines.append('    unsigned char *w = alloc_block(WEIGHTS_BYTES, "weights");')
        lines.append('    read_exact(path, w, WEIGHTS_BYTES, "weights file");')
        for name, t, off in read:
            ct = scalar.c_type(t.element)
            lines.append(f"    {name} = ({ct} *)(w + {off});")
    else:
        lines.append('    read_exact(path, NULL, 0, "weights file");')
    for name, t, value in fill:
        ct = scalar.c_type(t.element)
        lines.append(f"    {name} = alloc_block({t.bytes}, {c_string(name)});")
        lines.append(_fill_loop(name, t, value))
    lines.append("}")
    return "\n".join(lines) + "\n"


def buffers_code(decls: list[str], placed: list, own: list, arena: int,
                 c_string: Callable[[str], str]) -> str:
    """The buffers and place_buffers(): one arena at the offsets -mem-plan
    chose (buffers whose lifetimes do not overlap share bytes)."""
    lines = ["/* ---- Buffers: one arena, each buffer at its planned offset ---------- */",
             ""]
    lines += decls
    lines += ["", f"#define ARENA_BYTES {arena}", "", "static void place_buffers(void)", "{"]
    if placed:
        lines.append('    unsigned char *arena = alloc_block(ARENA_BYTES, "arena");')
        for name, g, off in placed:
            ct = scalar.c_type(g.type.element)
            lines.append(f"    {name} = ({ct} *)(arena + {off});")
    for name, g in own:
        ct = scalar.c_type(g.type.element)
        lines.append(f"    {name} = ({ct} *)alloc_block({g.type.bytes}, "
                     f"{c_string(display_text(g.name))});")
    if not placed and not own:
        lines.append("    /* no buffers */")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _port(p: FuncParam | None, t: Type, name: str, c_string) -> str:
    # The name is for messages only ("input 1 (NAME : TYPE) ... has 7 bytes"):
    # one printable line, however the model spelled it.
    return (f"    {{{c_string(display_text(name))}, {c_string(str(t))}, "  # type: ignore[union-attr]
            f"{t.bytes}}},")


def main_c(header: str, constants: str, buffers: str, functions: list[str], entry: str,
           entry_name: str, inputs: list[FuncParam], outputs: list[FuncParam], results: list[Type],
           c_string: Callable[[str], str]) -> str:
    in_ports = [_port(p, p.type, p.name or f"arg{p.index}", c_string) for p in inputs]
    out_ports = [_port(p, p.type, p.name or f"arg{p.index}", c_string) for p in outputs]
    out_ports += [_port(None, t, f"result {i}", c_string) for i, t in enumerate(results)]
    args = []
    for i, p in enumerate(inputs):
        t = p.type
        if isinstance(t, ShapedType):
            args.append(f"({scalar.c_type(t.element)} *)in[{i}]")
        else:
            args.append(f"*({scalar.c_type(t)} *)in[{i}]")  # type: ignore[arg-type]
    for i, p in enumerate(outputs):
        args.append(f"({scalar.c_type(p.type.element)} *)out[{i}]")  # type: ignore[union-attr]
    for i, t in enumerate(results):
        args.append(f"({scalar.c_type(t)} *)out[{len(outputs) + i}]")  # type: ignore[arg-type]
    n_in, n_out = len(in_ports), len(out_ports)
    protos = [f.split("\n", 2)[1] + ";" for f in functions]
    body = f"""{header}
#include <athread.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"

{SUPPORT}
/* What the program reads and writes, in @{comment_text(entry_name)}'s parameter order
 * (then its scalar results, if any). */
#define N_INPUTS {n_in}
#define N_OUTPUTS {n_out}
static const struct port input_ports[] = {{
{chr(10).join(in_ports + ['    {NULL, NULL, 0}'])}
}};
static const struct port output_ports[] = {{
{chr(10).join(out_ports + ['    {NULL, NULL, 0}'])}
}};

{constants}
{buffers}
/* ---- The host functions (MPE) ------------------------------------------ */

{chr(10).join(protos)}

{chr(10).join(functions)}
/* ---- main ---------------------------------------------------------------- */

int main(int argc, char **argv)
{{
    struct options opt = {{0}};
    void *in[N_INPUTS + 1], *out[N_OUTPUTS + 1];
    char message[160];
    program = argc > 0 ? argv[0] : "program";
    parse_options(argc, argv, &opt);
    if (opt.n_inputs != N_INPUTS)
        fail("expected %d --input files, got %ld", N_INPUTS, opt.n_inputs);
    if (opt.n_outputs != 0 && opt.n_outputs != N_OUTPUTS)
        fail("expected %d --output files (or none), got %ld", N_OUTPUTS, opt.n_outputs);
    athread_init();
    load_constants(opt.weights);
    place_buffers();
    for (long i = 0; i < N_INPUTS; i++) {{
        const struct port *p = &input_ports[i];
        snprintf(message, sizeof message, "input %ld (%s : %s)", i + 1, p->name, p->type);
        in[i] = alloc_block(p->bytes, p->name);
        read_exact(opt.inputs[i], in[i], p->bytes, message);
    }}
    for (long i = 0; i < N_OUTPUTS; i++)
        out[i] = alloc_block(output_ports[i].bytes, output_ports[i].name);
    for (long r = 0; r < opt.repeat; r++)
        {entry}({", ".join(args)});
#ifdef SWIR_EMU
    if (opt.stats != NULL && swir_emu_write_stats(opt.stats, (int)opt.repeat) != 0)
        fail("cannot write statistics '%s'", opt.stats);
#endif
    for (long i = 0; i < opt.n_outputs; i++) {{
        char *tmp = temporary_name(opt.outputs[i]);
        if (write_all(tmp, out[i], output_ports[i].bytes) != 0) {{
            remove(tmp);
            for (long j = 0; j < i; j++) {{
                char *done = temporary_name(opt.outputs[j]);
                remove(done);
                free(done);
            }}
            fail("cannot write output '%s'", opt.outputs[i]);
        }}
        free(tmp);
    }}
    for (long i = 0; i < opt.n_outputs; i++) {{
        char *tmp = temporary_name(opt.outputs[i]);
        if (rename(tmp, opt.outputs[i]) != 0)
            fail("cannot write output '%s'", opt.outputs[i]);
        free(tmp);
    }}
    athread_halt();
    free_blocks();
    free(opt.inputs);
    free(opt.outputs);
    free(opt.weights_default);
    return 0;
}}
"""
    return body


_MAKE_SAFE = re.compile(r"[^A-Za-z0-9_./ -]")


def makefile(stem: str, source: str, reserve: int, ldm_bytes: int = 65536) -> str:
    src = _MAKE_SAFE.sub("_", source)
    return f"""# Makefile for {stem}, generated by swir-cg from {src}.
#
#   make            build {stem} for the Sunway SW26010: MPE sources with sw5cc -host,
#                   CPE sources with sw5cc -slave, linked into one static executable
#   make emu        build {stem}_emu for this machine: the same sources, the host C
#                   compiler and swir's athread emulation in emu/ (one thread per CPE)
#   make emu-asan   {stem}_emu_asan, under AddressSanitizer and UndefinedBehaviorSanitizer
#   make emu-tsan   {stem}_emu_tsan, under ThreadSanitizer
#   make clean

PROGRAM = {stem}
SW5CC = sw5cc
SWFLAGS = -O2
SWLIBS = -lm_slave
CC = cc
CFLAGS = -std=c99 -O2 -Wall -Wextra -Werror
# The LDM per CPE the plan was made for, and the bytes of it the plan left free
# for the CPE stack and reply words; the emulation fails a kernel whose buffers
# exceed LDM_BYTES minus LDM_RESERVE.
LDM_BYTES = {ldm_bytes}
LDM_RESERVE = {reserve}
EMU_DEFS = -DSWIR_EMU -DSWIR_LDM_BYTES=$(LDM_BYTES) -DSWIR_LDM_RESERVE=$(LDM_RESERVE) -Iemu
EMU_SOURCES = main.c layers.c layers_slave.c emu/swir_emu.c
EMU_DEPS = $(EMU_SOURCES) layers.h layers_mix.h emu/athread.h emu/slave.h emu/swir_emu.h
EMU_LIBS = -lpthread -lm

all: $(PROGRAM)

$(PROGRAM): main.o layers.o layers_slave.o
\t$(SW5CC) -hybrid $(SWFLAGS) -o $@ main.o layers.o layers_slave.o $(SWLIBS)

main.o: main.c layers.h layers_mix.h
\t$(SW5CC) -host $(SWFLAGS) -c main.c -o $@

layers.o: layers.c layers.h layers_mix.h
\t$(SW5CC) -host $(SWFLAGS) -c layers.c -o $@

layers_slave.o: layers_slave.c layers_mix.h
\t$(SW5CC) -slave $(SWFLAGS) -c layers_slave.c -o $@

emu: $(PROGRAM)_emu

$(PROGRAM)_emu: $(EMU_DEPS)
\t$(CC) $(CFLAGS) $(EMU_DEFS) $(EMU_SOURCES) -o $@ $(EMU_LIBS)

emu-asan: $(PROGRAM)_emu_asan

$(PROGRAM)_emu_asan: $(EMU_DEPS)
\t$(CC) $(CFLAGS) -g -fno-omit-frame-pointer -fsanitize=address,undefined \\
\t\t$(EMU_DEFS) $(EMU_SOURCES) -o $@ $(EMU_LIBS)

emu-tsan: $(PROGRAM)_emu_tsan

$(PROGRAM)_emu_tsan: $(EMU_DEPS)
\t$(CC) $(CFLAGS) -g -fsanitize=thread $(EMU_DEFS) $(EMU_SOURCES) -o $@ $(EMU_LIBS)

clean:
\trm -f $(PROGRAM) $(PROGRAM)_emu $(PROGRAM)_emu_asan $(PROGRAM)_emu_tsan *.o

.PHONY: all emu emu-asan emu-tsan clean
"""


__all__ = [
    "F16",
    "MIX_PRELUDE",
    "ScalarType",
    "buffers_code",
    "constants_code",
    "main_c",
    "makefile",
]
