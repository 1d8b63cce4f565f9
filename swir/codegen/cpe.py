"""layers_slave.c, the CPE side: one C function per kernel (an entry a spawn
starts, a kernel run as one of several in a spawn, or one called from
another kernel), each kernel's LDM buffers as a struct in one union, the
Para copies in LDM, the reply words and the CPE's run-time error slots."""

from __future__ import annotations

from swir.codegen import c_ast as C
from swir.codegen import scalar, templates
from swir.codegen.body import VOID_P, BodyEmitter, declare_pointer, pointer_type, \
    reply_word, wait
from swir.codegen.dialect import dialect_of
from swir.codegen.layout import Layout, unused
from swir.codegen.names import Scope, c_string, comment_text
from swir.ir.core import Function
from swir.ir.types import ShapedType
from swir.ops import CALL, DMA_TRANSFERS, DMA_WAIT, LDM_ALLOC

PARA_REPLY = 0      # the reply word of a kernel's Para copy (waited for before any other DMA)


class CPECode:
    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.target = layout.opt.target
        self.dialect = dialect_of(self.target)
        self._para_copies: list[tuple[str, str]] = []  # (Para type, entry) of each copy
        self._frames: dict[str, C.RecordDef] = {}  # kernel C name -> its LDM struct

    def slave_c(self) -> str:
        lay = self.layout
        bodies = self._functions()
        out = [lay.header(f"layers_slave.c: the CPE kernels. Each runs on all {self.target.cpes} "
                          "CPEs, takes its share of\n * the work by CPE id, and moves data "
                          "between main memory and its LDM by DMA."),
               f"#include <{self.dialect.cpe_header}>"] + (["#include <simd.h>"] if lay.uses_simd else []) + \
            ["", '#include "layers_mix.h"', ""]
        out += self._ldm_state()
        for g in lay.slave_globals.values():
            out.append(lay.global_decl(g, "extern", "main memory, defined in main.c").text())
        if lay.slave_globals:
            out.append("")
        out += [b.prototype() for b in bodies[:len(lay.cpe_called)]]
        if lay.cpe_called:
            out.append("")
        out += [b.text() for b in bodies]
        return "\n".join(out)

    def _functions(self) -> list[C.Function]:
        """Every CPE function: those called from a kernel first (they are
        declared before all), then the runners, the entries of spawns of one
        kernel and those of spawns of several."""
        lay = self.layout
        bodies = []
        for f in lay.cpe_called:
            bodies.append(self._cpe_function(f, "cpe"))
        for f in lay.runners:
            bodies.append(self._cpe_function(f, "run"))
        for f in lay.spawned:
            if id(f) in lay.alone:
                bodies.append(self._cpe_function(f, "spawn"))
        for i, g in enumerate(lay.groups):
            bodies.append(self._entry_function(lay.group_names[i], lay.group_para[i], g,
                                               lay.group_members(i)))
        return bodies

    def _ldm_state(self) -> list[str]:
        """The file-scope state of each CPE: the LDM frames, the fault slot,
        the Para copies and the reply words."""
        lay = self.layout
        out = []
        if self._frames:
            out.append("/* Each CPE's LDM buffers. Kernels run one at a time, so their "
                       "buffers share the\n * space: one struct per kernel, in a union. */")
            out += [C.render([frame]) + "\n" for frame in self._frames.values()]
            members = tuple(C.Decl(C.Record("struct", tag=_frame_tag(k)), k)
                            for k in self._frames)
            out.append(_thread_local(C.Record("union", members), "ldm", 64))
        if lay.fault_sites:
            out.append(templates.CPE_FAULTS.replace("athread_get_id(-1)",
                                                    self.dialect.cpe_id_text))
        if self._para_copies:
            members = tuple(C.Decl(C.Named(t), k) for t, k in self._para_copies)
            out.append("/* Each kernel's copy of its Para struct, fetched by one DMA at entry "
                       "(kernels run\n * one at a time: one union). */")
            out.append(_thread_local(C.Record("union", members), "swir_para", 32))
        if lay.reply_words:
            out.append("/* DMA reply words: each completed DMA adds one to its word. */")
            out.append(_thread_local(C.Array(C.Named(self.dialect.reply_type),
                                             lay.reply_words), "reply"))
        if lay.broadcasts and self.dialect.pro:
            out.append(templates.RMA_BCAST)
        return out

    def _cpe_function(self, f: Function, mode: str) -> C.Function:
        """The C function of a CPE kernel: mode "spawn", the entry a spawn of
        it alone starts (it reads its Para from ``arg``); "run", the kernel
        as one of several in a spawn (its Para at ``p``, in LDM already);
        "cpe", called from another CPE kernel with plain parameters."""
        lay = self.layout
        if mode == "spawn" and any(g is f for g in lay.runners):
            return self._entry_function(lay.c_names[(id(f), "spawn")], lay.para[id(f)],
                                        (f,), [""])
        k = lay.c_names[(id(f), mode)]
        scope = Scope(lay.scope)
        scope.reserve("p", "arg")
        e = BodyEmitter(lay, f, "cpe", scope)
        allocs = [i for i in f.body.walk() if i.isa(LDM_ALLOC)]  # type: ignore[union-attr]
        used = any(p.has_uses for p in f.params)
        if mode == "spawn":
            self._cpe_prologue(e, f, k, bool(allocs), used)
        elif mode == "run":
            if allocs:
                self._frames[k] = self._frame(f, k)
            e.emit(_ldm_frame(k) if allocs else _ldm_frame(None))
            self._reset_replies(e, f, [])
            if not used:
                e.emit(unused("p"))
        params = self._parameters(e, f, mode)
        e.region(f.body.entry)  # type: ignore[union-attr]
        what = f"@{comment_text(f.name)} ({lay.where(f)})"
        if mode == "spawn":
            if not used:
                e.body.body.insert(0, C.ExprStmt(unused("arg")))
            return C.Function(k, [C.Param(VOID_P, "arg")], e.body, comment=what)
        if mode == "run":
            params = [C.Param(C.Pointer(C.Named(lay.para[id(f)], const=True)), "p")]
        return C.Function(k, params, e.body, storage="static", comment=what)

    def _parameters(self, e: BodyEmitter, f: Function, mode: str) -> list[C.Param]:
        """A CPE function's parameters: C parameters of one called from a
        kernel ("cpe"); else (read from its Para) a const local each."""
        written = set(self.layout.written_params(f))
        params: list[C.Param] = []
        for p in f.params:
            name = e.scope.declare(p.name or f"arg{p.index}", p, "a")
            t = p.type
            if mode != "cpe":
                if not p.has_uses:
                    continue
                field = C.Member(C.Id("p"), self.layout.param_field(p), arrow=True)
                if isinstance(t, ShapedType):
                    e.emit(declare_pointer(t, name, field, const=p.index not in written))
                else:
                    e.emit(C.Decl(C.Named(scalar.c_type(t), const=True), name, field))  # type: ignore[arg-type]
            else:
                params.append(C.Param(pointer_type(t, const=p.index not in written)
                                      if isinstance(t, ShapedType)
                                      else C.Named(scalar.c_type(t)), name))  # type: ignore[arg-type]
                if not p.has_uses:
                    e.emit(unused(name))
        return params

    def _entry_function(self, k: str, para: str, kernels: tuple[Function, ...],
                        members: list[str]) -> C.Function:
        """The entry of a spawn that runs kernels (each a "run" function): the
        Para copied into LDM by one DMA, then each kernel in turn, the CPEs
        meeting at a barrier (athread_syn) between two: the next kernel reads
        what the others' DMAs wrote."""
        lay = self.layout
        lay.note_reply(PARA_REPLY)
        declare, fetch = self._para_copy(para, k)
        body: list[C.Expr] = [_fp_init(), _ldm_frame(None), declare,
                              C.Assign(reply_word(PARA_REPLY), C.Lit("0")), *fetch]
        for n, (f, m) in enumerate(zip(kernels, members)):
            if n:
                body.append(C.call("SWIR_SYN", C.Lit(c_string(f.name))))
            para_copy = C.member("swir_para", k + ("." + m if m else ""))
            body.append(C.call(lay.c_names[(id(f), "run")], C.Unary("&", para_copy)))
        what = "spawn " + lay.group_text(kernels) if len(kernels) > 1 else \
            f"@{comment_text(kernels[0].name)} ({lay.where(kernels[0])})"
        return C.Function(k, [C.Param(VOID_P, "arg")],
                          C.Block([C.ExprStmt(x) for x in body]), comment=what)

    def _cpe_prologue(self, e: BodyEmitter, f: Function, k: str, allocs: bool,
                      used: bool) -> None:
        """A spawned kernel's entry: its floating-point mode, its LDM frame, its reply words zeroed,
        and its Para struct copied into LDM by one DMA (000_ba374e17f4714793
        Fig. 2(e)) rather than read field by field from main memory (a gld of
        hundreds of cycles each). The copy is a static outside the frame (one
        union for all kernels), taken from the LDM reserve."""
        para = self.layout.para[id(f)]
        e.emit(_fp_init())
        if allocs:
            self._frames[k] = self._frame(f, k)
            e.emit(_ldm_frame(k))
        elif used:
            e.emit(_ldm_frame(None))
        if used:
            declare, fetch = self._para_copy(para, k)
            e.emit(declare)
        self._reset_replies(e, f, [PARA_REPLY] if used else [])
        if used:
            for x in fetch:
                e.emit(x)
            para_ptr = C.Pointer(C.Named(para, const=True), const=True)
            e.emit(C.Decl(para_ptr, "p", C.Unary("&", C.member("swir_para", k))))

    def _para_copy(self, para: str, k: str) -> tuple[C.Expr, list[C.Expr]]:
        """Entry k's LDM copy of its Para (of type para), a member of the
        swir_para union: the line declaring it to the emulation, and the DMA
        that fetches it from ``arg`` on reply word PARA_REPLY (zeroed before)."""
        self._para_copies.append((para, k))
        copy = C.member("swir_para", k)
        return (C.call("SWIR_LDM_PARA", C.Unary("&", copy), C.SizeOf(copy)),
                [self.dialect.get(C.Id("arg"), C.Unary("&", copy), C.Cast(C.INT, C.SizeOf(copy)),
                                  self.dialect.reply_address(reply_word(PARA_REPLY)),
                                  C.Lit("0"), C.Lit("0")),
                 wait(PARA_REPLY)])

    def _reset_replies(self, e: BodyEmitter, f: Function, extra: list[int]) -> None:
        """Zero the reply words the kernel (and the kernels it calls) uses
        before its first DMA, as public Sunway codes do (``reply = 0;`` before
        issuing): LDM is not known to start at zero, and a word a previous
        kernel left non-zero would end a wait early. SWIR_WAIT resets each word
        after its wait, so every DMA starts on a zero word."""
        words: set[int] = set(extra)
        todo, seen = [f], set()
        while todo:
            g = todo.pop()
            if id(g) in seen or g.body is None:
                continue
            seen.add(id(g))
            for inst in g.body.walk():
                if inst.isa(*DMA_TRANSFERS, DMA_WAIT):
                    words.add(inst.attrs["reply"])
                elif inst.isa(CALL):
                    todo.append(self.layout.function(inst.args[0].callee, inst))  # type: ignore[union-attr]
        for w in sorted(words):
            self.layout.note_reply(w)
            e.emit(C.Assign(reply_word(w), C.Lit("0")))

    def _frame(self, f: Function, k: str) -> C.RecordDef:
        """The struct of kernel k's LDM buffers: a region's buffers side by side,
        the regions nested in it (alive one at a time) in a union after them.
        Each buffer starts LDM_ALIGN-aligned (what the planner counts), the
        larger elements first."""
        counter = [0]
        aligned = f"__attribute__((aligned({self.target.dma_align})))"
        ldm_paths = self.layout.ldm_paths

        def members(block, path: str) -> tuple[C.Decl, ...]:
            own = [i for i in block.instructions if i.isa(LDM_ALLOC)]
            own.sort(key=lambda i: -i.results[0].type.element.bytes)
            fields = Scope()
            out = []
            for inst in own:
                t = inst.results[0].type
                member = fields.declare(inst.results[0].name or "L", fallback="L")
                ldm_paths[id(inst)] = C.member("ldm", f"{path}.{member}")
                out.append(C.Decl(C.array(C.Named(scalar.c_type(t.element)), t.shape), member,
                                  attributes=aligned))
            nested = []
            for inst in block.instructions:
                for region in inst.regions:
                    for b in region.blocks:
                        if any(i.isa(LDM_ALLOC) for i in b.walk()):
                            counter[0] += 1
                            name = f"r{counter[0]}"
                            inner = members(b, f"{path}.nested.{name}")
                            nested.append(C.Decl(C.Record("struct", inner), name))
            if nested:
                out.append(C.Decl(C.Record("union", tuple(nested)), "nested"))
            return tuple(out)

        body = members(f.body.entry, k)   # paths below the ldm union  # type: ignore[union-attr]
        return C.RecordDef(C.Record("struct", body, _frame_tag(k)),
                           f"@{comment_text(f.name)}")


def _frame_tag(kernel: str) -> str:
    """The tag of a kernel's LDM struct (``struct conv1_ldm``)."""
    return f"{kernel}_ldm"


def _thread_local(t: C.CType, name: str, align: int = 0) -> str:
    """A CPE-private variable at file scope (``__thread_local``: in each CPE's
    LDM), and a blank line."""
    attributes = f"__attribute__((aligned({align})))" if align else ""
    return C.render([C.Decl(t, name, storage="static __thread_local",
                            attributes=attributes)]) + "\n"


def _fp_init() -> C.Expr:
    """A spawn entry's first statement: the CPE's floating-point mode
    (flush-to-zero on Sunway, MXCSR FTZ/DAZ in the emulation; layers_mix.h)."""
    return C.call("SWIR_CPE_FP_INIT")


def _ldm_frame(kernel: str | None) -> C.Expr:
    """The emulation's note of a kernel's LDM frame: its struct in the ``ldm``
    union, or (None) no buffers (the frame starts at the Para copy)."""
    if kernel is None:
        return C.call("SWIR_LDM_FRAME", C.Unary("&", C.Id("swir_para")), 0)
    frame = C.member("ldm", kernel)
    return C.call("SWIR_LDM_FRAME", C.Unary("&", frame), C.SizeOf(frame))
