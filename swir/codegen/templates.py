"""The fixed parts of the generated files, and the code that fills them in:
layers_mix.h's prelude, main.c's program support (options, files, memory),
and the Makefile."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

from swir.codegen import scalar, train
from swir.codegen import c_ast as C
from swir.codegen.train import TrainingStep
from swir.codegen.names import comment_text, display_text
from swir.ir.core import FuncParam
from swir.ir.types import ScalarType, ShapedType, Type
from swir.target import SW26010, Target

MIX_PRELUDE = r"""#ifndef SWIR_LAYERS_MIX_H
#define SWIR_LAYERS_MIX_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Hooks of swir's athread emulation (make emu), and what they are on Sunway:
 * SWIR_KERNEL names the next spawn for the counters, SWIR_LDM_FRAME declares a
 * CPE's LDM buffers, SWIR_LDM_PARA its LDM copy of the kernel's Para, SWIR_MEMORY a main-memory block DMA may touch, and
 * SWIR_WAIT waits for N completions on a reply word, then resets it;
 * SWIR_SYN is the barrier between two kernels of one spawn (its argument names
 * the next kernel for the emulation's counters); SWIR_CPE_FP_INIT, a CPE
 * kernel's first statement, sets the CPE's floating-point mode.
 *
 * On Sunway: the wait spins on the (volatile) reply word, then `memb`, the
 * memory barrier public CPE code puts after the spin (dxhisboy/lammps-sunway
 * sunway.h), so no LDM read the DMA fills moves above the wait. The FP mode
 * is flush-to-zero as public CPE kernels set it at their entry (CAM-SE's
 * vertical_remap_parallel_ `setftz`): FPCR bit 60 (UNDZ, underflow to zero,
 * in the SW64 kernel's uapi/asm/fpu.h) and bit 2 set, bit 48 (DNZ) cleared;
 * a CPE has no kernel to finish a denormal in software. See docs/codegen.md,
 * "Floating-point mode on the CPEs". */
#ifdef SWIR_EMU
#include "swir_emu.h"
#else
#define SWIR_KERNEL(name) ((void)0)
#define SWIR_LDM_FRAME(base, bytes) ((void)0)
#define SWIR_LDM_PARA(base, bytes) ((void)0)
#define SWIR_MEMORY(base, bytes, name) ((void)0)
#define SWIR_WAIT(reply, n) do { while ((reply) != (n)) ; __asm__ __volatile__("memb" ::: "memory"); (reply) = 0; } while (0)
#define SWIR_SYN(next) athread_syn(ARRAY_SCOPE, 0xffff)
#define SWIR_CPE_FP_INIT() swir_cpe_fp_init()
static inline void swir_cpe_fp_init(void)
{
    unsigned long swir_fpcr;
    __asm__ __volatile__("rfpcr %0" : "=r"(swir_fpcr));
    swir_fpcr = (swir_fpcr | 1UL << 60 | 1UL << 2) & ~(1UL << 48);
    __asm__ __volatile__("wfpcr %0" : : "r"(swir_fpcr));
}
#endif

/* A run-time error in generated code (an out-of-range data-dependent index):
 * the message on one line, exit status 1. In the emulation the runtime ends
 * the process, as for its own errors, naming the program (SWIR_PROGRAM), the
 * kernel and the CPE: one line even when several CPEs trap at once, and no
 * sanitizer report of the CPE threads the exit abandons. */
#ifdef SWIR_EMU
#define SWIR_TRAP(message) swir_emu_trap(message)
#define SWIR_PROGRAM(name) swir_emu_program(name)
#else
#define SWIR_TRAP(message) (fprintf(stderr, "error: %s\n", (message)), exit(1))
#define SWIR_PROGRAM(name) ((void)(name))
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

/* A data-dependent subscript (swir's dyn_index): negative counts from the
 * end; out of range, an error naming the op (`what`), the value and the
 * function. */
static inline long swir_dyn_index(long v, long bound, const char *what, const char *function)
{
    long i = v < 0 ? v + bound : v;
    if (i < 0 || i >= bound) {
        char error[1024];
        snprintf(error, sizeof error, "%s = %ld is outside [-%ld, %ld) (bound = %ld) in %s",
                 what, v, bound, bound, bound, function);
        SWIR_TRAP(error);
    }
    return i;
}
"""

# What the SW26010-Pro's layers_mix.h says differently: its waits and
# barrier in the Pro's CPE interface (the reply word waited for with
# CRTS_dma_wait_value, then reset; athread_ssync_array), and its hooks.
# docs/codegen.md, "The SW26010-Pro".
_PRO_MIX_EDITS = (
    (" * On Sunway: the wait spins on the (volatile) reply word, then `memb`, the\n"
     " * memory barrier public CPE code puts after the spin (dxhisboy/lammps-sunway\n"
     " * sunway.h), so no LDM read the DMA fills moves above the wait.",
     " * On the SW26010-Pro: the wait is CRTS_dma_wait_value, as public Pro code\n"
     " * waits (heptagonhust/CPC2023-Preliminary), then the word is reset."),
    ("#define SWIR_WAIT(reply, n) do { while ((reply) != (n)) ; "
     "__asm__ __volatile__(\"memb\" ::: \"memory\"); (reply) = 0; } while (0)\n"
     "#define SWIR_SYN(next) athread_syn(ARRAY_SCOPE, 0xffff)\n",
     "#define SWIR_WAIT(reply, n) do { CRTS_dma_wait_value(&(reply), (n)); (reply) = 0; } "
     "while (0)\n#define SWIR_SYN(next) athread_ssync_array()\n#define SWIR_BCAST_SOURCE() ((void)0)\n"),
    ("#ifdef SWIR_EMU\n#include \"swir_emu.h\"\n#else",
     "#ifdef SWIR_EMU\n#include \"swir_emu.h\"\n#define SWIR_BCAST_SOURCE() swir_emu_bcast_source()\n#else"),
)


def mix_prelude(target: Target) -> str:
    """layers_mix.h's hooks and helpers, for ``target``."""
    if target is SW26010:
        return MIX_PRELUDE
    text = MIX_PRELUDE
    for old, new in _PRO_MIX_EDITS:
        assert old in text, f"the layers_mix.h template no longer has {old!r}"
        text = text.replace(old, new)
    return text


# layers_slave.c on the SW26010-Pro, when a kernel broadcasts: the
# broadcast by DMA and RMA every CPE calls between two barriers.
RMA_BCAST = r"""/* A broadcast get on the SW26010-Pro, which has no BCAST_MODE DMA: every CPE
 * calls it between two barriers. CPE 0 gets the `len` bytes at `mem` (blocks
 * of `bsize` bytes, `stride` skipped between them; bsize 0: one block) into
 * its LDM at `ldm`, then sends them along row 0 by RMA; each CPE of row 0
 * sends them down its column. Each RMA counts on the sender's local word and
 * on every receiver's remote word, the sender among the receivers (public
 * Pro GEMMs wait for the remote word on every CPE of the row, the sender
 * too: docs/codegen.md, "The SW26010-Pro"). */
static __thread_local athread_rply_t swir_rma_local, swir_rma_remote;

static void swir_rma_bcast(void *ldm, void *mem, int len, int bsize, int stride,
                           crts_rply_t *reply)
{
    swir_rma_local = 0;
    swir_rma_remote = 0;
    athread_ssync_array();      /* every word is zero before any RMA counts on it */
    if (CRTS_tid == 0) {
        SWIR_BCAST_SOURCE();
        if (bsize == 0)
            CRTS_dma_iget(ldm, mem, len, reply);
        else
            CRTS_dma_iget_stride(ldm, mem, len, bsize, stride, reply);
        SWIR_WAIT(*reply, 1);
        athread_rma_row_ibcast(ldm, ldm, len, &swir_rma_local, &swir_rma_remote);
        athread_rma_wait_value(&swir_rma_local, 1);
        swir_rma_local = 0;
    }
    if (CRTS_rid == 0) {
        athread_rma_wait_value(&swir_rma_remote, 1);    /* row 0 has the data */
        athread_rma_col_ibcast(ldm, ldm, len, &swir_rma_local, &swir_rma_remote);
        athread_rma_wait_value(&swir_rma_local, 1);
    }
    athread_rma_wait_value(&swir_rma_remote, CRTS_rid == 0 ? 2 : 1);
}
"""

# layers_mix.h, when a CPE kernel can fail at run time.
FAULT_SLOTS = r"""/* A run-time error on a CPE (an out-of-range data-dependent index). exit is
 * not an athread operation on a CPE: the CPE records the first error of the
 * run in its slot of main memory (site: the error's number, from 1), goes on
 * with an in-range index, and the MPE reports it after the join
 * (swir_check_faults, layers.c). Each CPE writes only its own slot. */
#define SWIR_FAULT_SLOTS {cpes}
struct swir_fault { long site, value, bound; };
extern struct swir_fault swir_faults[SWIR_FAULT_SLOTS];
"""

# layers_slave.c, when a CPE kernel can fail at run time.
CPE_FAULTS = r"""/* A data-dependent subscript on a CPE (swir's dyn_index): negative counts
 * from the end; out of range, the error is recorded for the MPE (see
 * layers_mix.h) and index 0 is used, so the kernel runs to its end. */
static long swir_cpe_dyn_index(long v, long bound, long site)
{
    long i = v < 0 ? v + bound : v;
    struct swir_fault *f;
    if (i >= 0 && i < bound)
        return i;
    f = &swir_faults[athread_get_id(-1)];
    if (f->site == 0) {
        f->value = v;
        f->bound = bound;
        f->site = site;
    }
    return 0;
}
"""


def mpe_faults(sites: list[tuple[str, str]], c_string: Callable[[str], str]) -> str:
    """layers.c's half of the CPE error path: the slots, each error site's
    message, and the check the host code runs after every join."""
    rows = "\n".join(f"    {{{c_string(what)}, {c_string(fn)}}}," for what, fn in sites)
    return f"""/* The CPEs' run-time errors (layers_mix.h): one slot per CPE, zero until
 * an error; the kernel last spawned and each site's message, for the report. */
struct swir_fault swir_faults[SWIR_FAULT_SLOTS];
static const char *swir_spawned = "";
static const char *const swir_fault_sites[][2] = {{
    {{"", ""}},
{rows}
}};

void swir_check_faults(void)
{{
    int c;
    for (c = 0; c < SWIR_FAULT_SLOTS; c++) {{
        const struct swir_fault *f = &swir_faults[c];
        if (f->site > 0 && f->site < (long)(sizeof swir_fault_sites / sizeof swir_fault_sites[0])) {{
            char error[1024];
            snprintf(error, sizeof error, "kernel '%s', CPE %d: %s = %ld is outside [-%ld, %ld) "
                     "(bound = %ld) in %s", swir_spawned, c, swir_fault_sites[f->site][0],
                     f->value, f->bound, f->bound, f->bound, swir_fault_sites[f->site][1]);
            SWIR_TRAP(error);
        }}
    }}
}}
"""


F16 = r"""/* f16: the compiler's _Float16 (GCC >= 12 on x86-64; arithmetic rounds each
 * operation to f16, as swir's reference does). The Sunway compiler (GCC 4.1)
 * has none: this model builds only for the emulation. _Float16 is not C99:
 * __extension__ marks the one use, inside this guard (the Sunway dialect
 * check rejects any other). */
#ifdef __FLT16_MAX__
__extension__ typedef _Float16 swir_f16;
#else
#error "this model uses f16, which needs a C compiler with _Float16"
#endif
"""

# Errors, memory, inputs (raw or .npy), outputs (all or nothing, never
# replacing a device), options: the fixed part of main.c, kept as C.
SUPPORT = resources.files("swir.codegen").joinpath("program.c").read_text(encoding="utf-8")
# main(): check the files, load, run the entry function (swir_run), write.
MAIN = resources.files("swir.codegen").joinpath("program_main.c").read_text(encoding="utf-8")
# An MPI program's ranks: start, share the inputs, gather, the collectives.
RANKS_SUPPORT = resources.files("swir.codegen").joinpath("program_ranks.c") \
    .read_text(encoding="utf-8")

# Identifiers the fixed code declares or uses: model names must avoid them.
# (The generated parts of main.c name their own macros and locals swir_...,
# SWIR_..., which no model name takes.)
NAMES = frozenset(re.findall(r"[A-Za-z_]\w*", SUPPORT + MAIN))
TRAIN_NAMES = frozenset(re.findall(r"[A-Za-z_]\w*", train.MAIN)) | {
    "N_CARRIED", "SWIR_CARRIED_BYTES", "SWIR_SAVED_BYTES", "swir_loss", "carried_ports",
    "carried_at", "carried_saved", "fill_carried"}
RANKS_NAMES = frozenset(re.findall(r"[A-Za-z_]\w*", RANKS_SUPPORT))


def _fill_loop(name: str, t: ShapedType, value: object) -> C.Stmt:
    i = C.Id("swir_i")
    return C.For(C.Decl(C.LONG, "swir_i", C.Lit("0")), C.Binary("<", i, C.as_expr(t.num_elements)),
                 C.Postfix(i), C.ExprStmt(C.Assign(C.index(name, i),
                                                   scalar.literal(value, t.element))))


def _element_pointer(t: ShapedType) -> C.CType:
    return C.Pointer(C.Named(scalar.c_type(t.element)))


def _at(name: str, t: ShapedType, block: str, offset: int) -> C.Stmt:
    """``name = (float *)(block + offset);``: a buffer placed in a block."""
    return C.ExprStmt(C.Assign(C.Id(name), C.Cast(_element_pointer(t), C.Binary(
        "+", C.Id(block), C.as_expr(offset)))))


def _alloc(size: int, what: str, c_string: Callable[[str], str]) -> C.Expr:
    return C.call("alloc_block", size, C.Lit(c_string(what)))


def constants_code(decls: list[C.Decl], read: list, fill: list, file_bytes: int,
                   c_string: Callable[[str], str], ranked: bool = False) -> str:
    """Declarations of the constants and load_constants(), which reads
    weights.bin (checked to be exactly SWIR_WEIGHTS_BYTES long before anything was
    allocated) and fills the splat constants. ``read`` holds (name, type,
    offset, stride): a per-rank constant's slices are ``stride`` bytes apart
    (0: one for every rank). An MPI program (``ranked``) reads each constant
    on its own, and of a per-rank one only its rank's slice."""
    lines = ["/* ---- Constants: weights.bin (read whole, size checked) and splat values */",
             ""]
    lines += [d.text() for d in decls]
    lines += ["", f"#define SWIR_WEIGHTS_BYTES {file_bytes}",
              'static const struct port weights_port = {"weights", "bytes", SWIR_WEIGHTS_BYTES, '
              '"|u1", 0, NULL};', ""]
    body: list[C.Stmt] = []
    file = C.Lit(c_string("weights file"))
    if ranked:
        for name, t, off, stride in read:
            at = C.Binary("+", C.as_expr(off), C.Binary("*", C.Cast(C.LONG, C.Id("rank")),
                                                         C.as_expr(stride))) if stride else off
            body.append(C.ExprStmt(C.Assign(C.Id(name), _alloc(t.bytes, name, c_string))))
            body.append(C.ExprStmt(C.call("read_at", "swir_file", C.Id(name), t.bytes, at,
                                          "swir_path")))
        if not read:
            body.append(C.ExprStmt(C.Cast(C.VOID, C.Id("swir_path"))))
        body.append(C.ExprStmt(C.call("fclose", "swir_file")))
    elif read:
        body.append(C.Decl(C.Pointer(C.Named("unsigned char")), "swir_weights",
                           C.call("alloc_block", "SWIR_WEIGHTS_BYTES", C.Lit(c_string("weights")))))
        body.append(C.ExprStmt(C.call("read_input", "swir_file", "swir_weights",
                                       "SWIR_WEIGHTS_BYTES", "swir_path", file)))
        body += [_at(name, t, "swir_weights", off) for name, t, off, _ in read]
    else:
        body.append(C.ExprStmt(C.call("read_input", "swir_file", "NULL", 0, "swir_path", file)))
    for name, t, value in fill:
        body.append(C.ExprStmt(C.Assign(C.Id(name), _alloc(t.bytes, name, c_string))))
        body.append(_fill_loop(name, t, value))
    params = [C.Param(C.Pointer(C.Named("FILE")), "swir_file"),
              C.Param(C.Pointer(C.Named("char", const=True)), "swir_path")]
    lines += C.Function("load_constants", params, C.Block(body), storage="static",
                        comment="The weights file was opened and its size checked "
                                "(open_input).").lines()
    return "\n".join(lines) + "\n"


def buffers_code(decls: list[C.Decl], placed: list, own: list, arena: int,
                 c_string: Callable[[str], str]) -> str:
    """The buffers and place_buffers(): one arena at the offsets -mem-plan
    chose (buffers whose lifetimes do not overlap share bytes)."""
    lines = ["/* ---- Buffers: one arena, each buffer at its planned offset ---------- */",
             ""]
    lines += [d.text() for d in decls]
    lines += ["", f"#define SWIR_ARENA_BYTES {arena}", ""]
    body: list[C.Stmt] = []
    if placed:
        body.append(C.Decl(C.Pointer(C.Named("unsigned char")), "swir_arena",
                           C.call("alloc_block", "SWIR_ARENA_BYTES", C.Lit(c_string("arena")))))
        body += [_at(name, g.type, "swir_arena", off) for name, g, off in placed]
    for name, g in own:
        body.append(C.ExprStmt(C.Assign(C.Id(name), C.Cast(
            _element_pointer(g.type), _alloc(g.type.bytes, display_text(g.name), c_string)))))
    if not placed and not own:
        body.append(C.Comment("no buffers"))
    lines += C.Function("place_buffers", [], C.Block(body), storage="static").lines()
    return "\n".join(lines) + "\n"


def _port(t: Type, name: str, c_string) -> C.InitList:
    """A ``struct port``: name, type, bytes, .npy descr, rank, dimensions."""
    # The name is for messages only ("input 1 (NAME : TYPE) ... has 7 bytes"):
    # one printable line, however the model spelled it.
    shape = t.shape if isinstance(t, ShapedType) else ()
    elem = t.element if isinstance(t, ShapedType) else t
    dims = C.Cast(C.Array(C.Named("long", const=True)), C.InitList(tuple(map(C.as_expr, shape)))) \
        if shape else C.Id("NULL")
    return C.InitList((C.Lit(c_string(display_text(name))), C.Lit(c_string(str(t))),
                       C.as_expr(t.bytes), C.Lit(c_string(npy_descr(elem))),  # type: ignore
                       C.as_expr(len(shape)), dims))


def _port_table(ports: list[C.InitList]) -> str:
    """The rows of a port array, ended by an all-zero row."""
    end = C.InitList((C.Id("NULL"), C.Id("NULL"), C.Lit("0"), C.Id("NULL"), C.Lit("0"),
                      C.Id("NULL")))
    return "\n".join([*(f"    {p.text()}," for p in ports), f"    {end.text()}"])


def _entry_args(inputs: list[FuncParam], outputs: list[FuncParam],
                results: list[Type]) -> list[C.Expr]:
    """The entry function's arguments, from main()'s in[] and out[] blocks:
    a buffer as its element pointer, a scalar input by value, a scalar result
    by the pointer it is written through."""
    def block(array: str, i: int, t: object) -> C.Expr:
        return C.Cast(C.Pointer(C.Named(scalar.c_type(t))), C.index(array, i))  # type: ignore[arg-type]
    args = []
    for i, p in enumerate(inputs):
        t = p.type
        args.append(block("in", i, t.element) if isinstance(t, ShapedType)
                    else C.Unary("*", block("in", i, t)))
    for i, p in enumerate(outputs):
        args.append(block("out", i, p.type.element))  # type: ignore[union-attr]
    for i, t in enumerate(results):
        args.append(block("out", len(outputs) + i, t))
    return args


def npy_descr(t: ScalarType | Type) -> str:
    """The .npy dtype of a swir scalar type ('<f4', '|b1', ...)."""
    from swir.ir.dtypes import dtype_of
    return dtype_of(t).newbyteorder("<").str


# main.c's includes, after its header comment.
MAIN_INCLUDES = """/* realpath, mkstemp, lstat, fchmod (POSIX.1-2008 with XSI) */
#define _XOPEN_SOURCE 700

#include <athread.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "layers.h"
"""


@dataclass(frozen=True)
class Ranks:
    """A program for several ranks (-distribute): how many, and whether they
    share the batch (data) or each layer's channels (model)."""

    count: int
    split: str

    def whole(self, t: Type) -> Type:
        """What rank 0 reads or writes for a parameter of type t: with a data
        split, every rank's block of the batch."""
        if self.split != "data" or not isinstance(t, ShapedType) or not t.shape:
            return t
        return dataclasses.replace(t, shape=(t.shape[0] * self.count,) + t.shape[1:])

    def defines(self) -> str:
        return (f"#include <mpi.h>\n\n/* The ranks (MPI processes, one per core group) that "
                f"run the program, and how they share it. */\n#define SWIR_RANKS {self.count}\n"
                f"#define SWIR_SPLIT_DATA {int(self.split == 'data')}\n")


def main_c(header: str, constants: str, buffers: str, functions: list[C.Function], entry: str,
           entry_name: str, inputs: list[FuncParam], outputs: list[FuncParam], results: list[Type],
           c_string: Callable[[str], str], ranks: Ranks | None = None,
           training: TrainingStep | None = None) -> str:
    """main.c: the fixed program (SUPPORT, MAIN) around what the model
    decides: its ports, constants, buffers, host functions and the call of
    its entry function (``swir_run``, which MAIN calls). With ``ranks``, an
    MPI program (RANKS_SUPPORT). With ``training``, the training program
    (swir/codegen/train.py): the ports are the data parameters (a data split
    shares their batch) and the loss and new state (every rank's whole)."""
    whole = ranks.whole if ranks is not None else (lambda t: t)
    data = inputs if training is None else training.data
    in_ports = [_port(whole(p.type), p.name or f"arg{p.index}", c_string) for p in data]
    out_whole = whole if training is None else (lambda t: t)
    out_ports = [_port(out_whole(p.type), p.name or f"arg{p.index}", c_string) for p in outputs]
    out_ports += [_port(t, f"result {i}", c_string) for i, t in enumerate(results)]
    call = C.ExprStmt(C.call(entry, *_entry_args(inputs, outputs, results)))
    unused = [C.ExprStmt(C.Cast(C.VOID, C.Id(name)))
              for name, used in (("in", inputs), ("out", outputs or results)) if not used]
    run = C.Function("swir_run", [C.Param(_BLOCKS, "in"), C.Param(_BLOCKS, "out")],
                     C.Block([*unused, call]),
                     storage="static", comment=f"One run of @{comment_text(entry_name)} on "
                                               "main()'s input and output blocks.")
    ports = [C.Comment(f"What the program reads and writes, in @{comment_text(entry_name)}'s "
                       "parameter order\n * (then its scalar results, if any)."),
             C.Line(f"#define N_INPUTS {len(in_ports)}"),
             C.Line(f"#define N_OUTPUTS {len(out_ports)}")]
    functions_text = "\n".join(f.text() for f in functions)
    mpi = (ranks.defines(), RANKS_SUPPORT) if ranks is not None else ("", "")
    carried, main = ("", MAIN) if training is None else (
        train.carried_code(training, lambda t, n: _port(t, n, c_string)), train.MAIN)
    return (f"{header}\n{MAIN_INCLUDES}\n{mpi[0]}\n{SUPPORT}\n{mpi[1]}\n{C.render(ports)}\n"
            f"{_port_array('input_ports', in_ports)}\n"
            f"{_port_array('output_ports', out_ports)}\n\n"
            f"{constants}\n{carried}{buffers}\n{_HOST_BANNER}\n\n"
            + "\n".join(f.prototype() for f in functions)
            + f"\n\n{functions_text}\n{run.text()}\n{main}")


_HOST_BANNER = "/* ---- The host functions (MPE) ------------------------------------------ */"


# main()'s blocks: one pointer per input (or output) and a NULL after them.
_BLOCKS = C.Pointer(C.Pointer(C.VOID))


def _port_array(name: str, ports: list[C.InitList]) -> str:
    return f"static const struct port {name}[] = {{\n{_port_table(ports)}\n}};"


_MAKE_SAFE = re.compile(r"[^A-Za-z0-9_./ -]")


def makefile(stem: str, source: str, reserve: int, ldm_bytes: int = SW26010.ldm_bytes,
             target: Target = SW26010, ranks: Ranks | None = None) -> str:
    text = _makefile(stem, source, reserve, ldm_bytes, target.cpes)
    if ranks is not None:
        text = _mpi_makefile(text, stem, ranks.count, target.core_groups)
    if target is SW26010:
        return text
    text = _edit(text, _PRO_EDITS + (_PRO_MPI_EDITS if ranks is not None else ()), stem)
    return text.replace("SW5CC", "SWGCC").replace("sw5cc", "swgcc")   # its compiler driver


# The Makefile of the SW26010-Pro: what changes from the SW26010's. Its
# compiler driver is swgcc, which takes the side as -mhost / -mslave and links
# with -mhybrid; public Pro code compiles both sides with -msimd
# -faddress_align=64 and links the CPEs' libm with -lm_slave (SYSU-SCC/swops,
# Makefile). The job asks for the core group's CPEs with -cgsp as on the
# SW26010 (swops' run target); swops' -mpecg gives one process all the chip's
# core groups, which swir's program does not use (one process per core
# group, as on the SW26010).
_PRO_EDITS = (
    ("MPE sources with sw5cc -host,\n#                   CPE sources with sw5cc -slave,",
     "MPE sources with sw5cc -mhost,\n#                   CPE sources with sw5cc -mslave,"),
    ("for the Sunway SW26010:", "for the Sunway SW26010-Pro:"),
    ("(bsub on\n#                   TaihuLight", "(bsub on\n#                   a new Sunway system"),
    ("# The C dialect, stated: the CPE front end of sw5cc is GCC 4.1, whose default\n"
     "# (gnu89) rejects the generated C99",
     "# The C dialect, stated (as public Pro Makefiles do: SYSU-SCC/swops); GCC's\n"
     "# default before GCC 5 (gnu89) rejects the generated C99"),
    ("SWFLAGS = -O2\n", "SWFLAGS = -O2 -msimd -faddress_align=64\n"),
    ("as TaihuLight users submit one", "as Sunway users submit one"),
    ("$(SW5CC) -slave -msimd", "$(SW5CC) -mslave"),
    ("-hybrid $(SWFLAGS)", "-mhybrid $(SWFLAGS)"),
    ("-host $(SWSTD)", "-mhost $(SWSTD)"),
    ("emu/athread.h emu/slave.h", "emu/athread.h emu/crts.h emu/slave.h"),
)


# ... and of its MPI program (the processes per chip: _MPI_EDITS, from the target).
_PRO_MPI_EDITS = (
    ("mpicc, which wraps sw5cc on TaihuLight.", "mpicc, which wraps sw5cc."),
)


def _edit(text: str, edits: tuple[tuple[str, str], ...], stem: str, **values: int) -> str:
    """``text`` with each (old, new) replaced (formatted with the stem and
    ``values``); every old must be in it (the template is checked, not
    silently missed)."""
    for old, new in edits:
        old = old.format(stem=stem)
        assert old in text, f"the Makefile template no longer has {old!r}"
        text = text.replace(old, new.format(stem=stem, **values))
    return text


# The Makefile of an MPI program: what changes from one core group's. On
# TaihuLight the MPE side is compiled and linked by mpicc, which wraps sw5cc
# (-host, -hybrid), the CPE side by sw5cc -slave; a job runs -n N processes,
# -np (the target's core groups) per node, one per core group (public Sunway MPI codes: the Makefile of
# github.com/realwzct/SWsnn). Here, mpicc and mpirun of the host's MPI.
_MPI_EDITS = (
    ("#   make run        build {stem} and run it on one core group as a job (bsub on\n"
     "#                   TaihuLight)",
     "#   make run        build {stem} and run it on {ranks} core groups as a job (bsub on\n"
     "#                   TaihuLight: {ranks} MPI processes, {per_chip} per chip)"),
    ("#   make emu-tsan   {stem}_emu_tsan, under ThreadSanitizer\n",
     "#   make emu-tsan   {stem}_emu_tsan, under ThreadSanitizer\n"
     "#   make emu-run    run {stem}_emu on {ranks} ranks here: mpirun -np {ranks} "
     "--oversubscribe\n#                   (ARGS: the program's options)\n"),
    ("SW5CC = sw5cc\n",
     "SW5CC = sw5cc\n# The MPE side of an MPI program: mpicc, which wraps sw5cc on TaihuLight.\n"
     "MPICC = mpicc\n"),
    ("\t$(SW5CC) -hybrid", "\t$(MPICC) -hybrid"),
    ("\t$(SW5CC) -host $(SWSTD) $(SWFLAGS) -c main.c", "\t$(MPICC) -host $(SWSTD) $(SWFLAGS) -c main.c"),
    ("\t$(SW5CC) -host $(SWSTD) $(SWFLAGS) -c layers.c",
     "\t$(MPICC) -host $(SWSTD) $(SWFLAGS) -c layers.c"),
    ("-n 1 -cgsp", "-n {ranks} -np {per_node} -cgsp"),
    ("-q the queue, -n 1 process, -cgsp",
     "-q the queue, -n {ranks} processes, -np {per_node} per node, -cgsp"),
    ("CC = cc\n", "CC = mpicc\n# make emu-run: Open MPI's mpirun, which refuses to start as root unless\n"
     "# told it may (containers and CI machines run as root).\nMPIRUN = mpirun\n"
     "MPIRUN_ENV = OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n"),
    ("\nclean:\n", "\nemu-run: $(PROGRAM)_emu\n"
     "\t$(MPIRUN_ENV) $(MPIRUN) -np {ranks} --oversubscribe ./$(PROGRAM)_emu $(ARGS)\n\n"
     "clean:\n"),
    (".PHONY: all run emu ", ".PHONY: all run emu emu-run "),
    ("    swir's athread emulation\n",
     "    swir's athread emulation, and `make emu-run` runs it on {ranks} ranks\n"),
)


def _mpi_makefile(text: str, stem: str, ranks: int, per_chip: int) -> str:
    return _edit(text, _MPI_EDITS, stem, ranks=ranks, per_chip=per_chip,
                 per_node=min(ranks, per_chip))


def _makefile(stem: str, source: str, reserve: int, ldm_bytes: int, cpes: int) -> str:
    src = _MAKE_SAFE.sub("_", source)
    return f"""# Makefile for {stem}, generated by swir-cg from {src}.
#
#   make            build {stem} for the Sunway SW26010: MPE sources with sw5cc -host,
#                   CPE sources with sw5cc -slave, linked into one static executable
#   make run        build {stem} and run it on one core group as a job (bsub on
#                   TaihuLight): make run ARGS='--input x.npy --output y.npy'
#   make emu        build {stem}_emu for this machine: the same sources, the host C
#                   compiler and swir's athread emulation in emu/ (the CPEs as coroutines;
#                   threads under emu-tsan and emu-asan)
#   make emu-asan   {stem}_emu_asan, under AddressSanitizer and UndefinedBehaviorSanitizer
#   make emu-tsan   {stem}_emu_tsan, under ThreadSanitizer
#   make clean

PROGRAM = {stem}
SW5CC = sw5cc
# The C dialect, stated: the CPE front end of sw5cc is GCC 4.1, whose default
# (gnu89) rejects the generated C99 (`for (long i = ...)`, declarations after
# statements). GNU C99 for the GNU attributes (__thread_local's section).
SWSTD = -std=gnu99
SWFLAGS = -O2
# libm for the MPE code, the CPEs' libm (libm_slave) for the CPE code.
SWLIBS = -lm -lm_slave
# make run: the job, as TaihuLight users submit one: -I interactive (output
# here), -b the CPEs' stacks in LDM, -q the queue, -n 1 process, -cgsp {cpes} CPEs
# per core group, -share_size and -host_stack MB of shared memory and MPE stack.
# Set QUEUE to a queue your account may use; SHARE_SIZE must hold the model's
# weights, buffers, inputs and outputs. ARGS: the program's options.
BSUB = bsub
QUEUE = q_sw_expr
SHARE_SIZE = 4096
HOST_STACK = 1024
BSUBFLAGS = -I -b -q $(QUEUE) -n 1 -cgsp {cpes} -share_size $(SHARE_SIZE) -host_stack $(HOST_STACK)
ARGS =
CC = cc
CFLAGS = -std=c99 -O2 -Wall -Wextra -Werror
# The emulation on this machine's own instructions: simd.h's fused
# multiply-adds become one FMA instruction each, not a libm call per lane
# (the same bits: fmaf rounds once either way). -std=c99 keeps floating-point
# contraction off, so scalar code rounds as written. Empty it for a portable
# binary: make emu EMU_ARCH=
EMU_ARCH = -march=native
# The LDM per CPE the plan was made for, and the bytes of it the plan left free
# for the CPE stack and reply words; the emulation fails a kernel whose buffers
# exceed LDM_BYTES minus LDM_RESERVE.
LDM_BYTES = {ldm_bytes}
LDM_RESERVE = {reserve}
EMU_DEFS = $(EMU_ARCH) -DSWIR_EMU -DSWIR_LDM_BYTES=$(LDM_BYTES) -DSWIR_LDM_RESERVE=$(LDM_RESERVE) -Iemu
# The emulation's runtime, compiled with the program; an object compiled from it
# with the same CC, CFLAGS and EMU_DEFS may stand in (make emu EMU_RUNTIME=...o:
# swir's tests build it once for all the programs that share those flags).
EMU_RUNTIME = emu/swir_emu.c
EMU_SOURCES = main.c layers.c layers_slave.c $(EMU_RUNTIME)
EMU_DEPS = $(EMU_SOURCES) layers.h layers_mix.h emu/athread.h emu/slave.h emu/simd.h emu/swir_emu.h emu/swir_target.h
EMU_LIBS = -lpthread -lm

""" + _MAKE_RULES


# The Makefile's rules (no figures in them: _makefile writes those above).
_MAKE_RULES = """all: $(PROGRAM)

# The Sunway build on a machine without sw5cc: one line saying so, before any
# compile, instead of the shell's "sw5cc: not found" and make's error trail.
NO_SW5CC = $(firstword $(SW5CC)) not found: `make` is the Sunway build (sw5cc, on a \\
    Sunway login node); on this machine, `make emu` builds $(PROGRAM)_emu against \\
    swir's athread emulation
sunway-compiler:
\t$(if $(shell command -v $(firstword $(SW5CC)) 2>/dev/null),,$(error $(NO_SW5CC)))

$(PROGRAM): main.o layers.o layers_slave.o | sunway-compiler
\t$(SW5CC) -hybrid $(SWFLAGS) -o $@ main.o layers.o layers_slave.o $(SWLIBS)

main.o: main.c layers.h layers_mix.h | sunway-compiler
\t$(SW5CC) -host $(SWSTD) $(SWFLAGS) -c main.c -o $@

layers.o: layers.c layers.h layers_mix.h | sunway-compiler
\t$(SW5CC) -host $(SWSTD) $(SWFLAGS) -c layers.c -o $@

layers_slave.o: layers_slave.c layers_mix.h | sunway-compiler
\t$(SW5CC) -slave -msimd $(SWSTD) $(SWFLAGS) -c layers_slave.c -o $@

run: $(PROGRAM)
\t$(BSUB) $(BSUBFLAGS) ./$(PROGRAM) $(ARGS)

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

.PHONY: all run emu emu-asan emu-tsan clean sunway-compiler
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
