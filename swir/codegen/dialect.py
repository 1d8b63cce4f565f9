"""Each target's athread dialect: the calls the generated C makes to its
toolchain, as a small table the C generator reads instead of naming them.

One C generator writes both machines' code (docs/codegen.md, "The
SW26010-Pro"); what differs between the SW26010 and the SW26010-Pro is here:
the CPE header, how a CPE learns its id, how it moves data by DMA and waits
for it, its barrier and how a broadcast reaches every LDM (the Makefile's
compiler driver and job: swir.codegen.templates.makefile). The C of each entry cites its
public source in docs/codegen.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from swir.codegen import c_ast as C
from swir.target import SW26010, SW26010_PRO, Target

VOID_P = C.Pointer(C.VOID)


@dataclass(frozen=True)
class Dialect:
    name: str
    cpe_header: str             # what layers_slave.c includes for the CPE API
    reply_type: str             # a reply word's C type (an LDM word DMAs count on)
    cpe_id_text: str            # this CPE's id, 0..63, as C spells it

    @property
    def pro(self) -> bool:
        return self is PRO

    def cpe_id(self) -> C.Expr:
        return C.Id(self.cpe_id_text) if self.pro else C.call("athread_get_id", -1)

    def barrier(self) -> C.Expr:
        """All 64 CPEs of the core group meet."""
        if self.pro:
            return C.call("athread_ssync_array")
        return C.call("athread_syn", "ARRAY_SCOPE", C.Lit("0xffff"))

    def reply_address(self, word: C.Expr) -> C.Expr:
        """A reply word's address as the DMA calls take it."""
        return C.Unary("&", word) if self.pro else C.Cast(VOID_P, C.Unary("&", word))

    def get(self, mem: C.Expr, ldm: C.Expr, size: C.Expr, reply: C.Expr,
            stride: C.Expr, bsize: C.Expr) -> C.Expr:
        """Main memory -> LDM: ``size`` bytes, in blocks of ``bsize`` with
        ``stride`` bytes skipped between them (bsize 0: one block)."""
        if not self.pro:
            return C.call("athread_get", "PE_MODE", mem, ldm, size, reply, 0, stride, bsize)
        if _zero(bsize):
            return C.call("CRTS_dma_iget", ldm, mem, size, reply)
        return C.call("CRTS_dma_iget_stride", ldm, mem, size, bsize, stride, reply)

    def put(self, ldm: C.Expr, mem: C.Expr, size: C.Expr, reply: C.Expr,
            stride: C.Expr, bsize: C.Expr) -> C.Expr:
        """LDM -> main memory, the same block layout on the memory side."""
        if not self.pro:
            return C.call("athread_put", "PE_MODE", ldm, mem, size, reply, stride, bsize)
        if _zero(bsize):
            return C.call("CRTS_dma_iput", mem, ldm, size, reply)
        return C.call("CRTS_dma_iput_stride", mem, ldm, size, bsize, stride, reply)

    def broadcast(self, mem: C.Expr, ldm: C.Expr, size: C.Expr, reply: C.Expr,
                  stride: C.Expr, bsize: C.Expr) -> C.Expr:
        """The get that fills every CPE's LDM at ``ldm``, issued by CPE 0
        between barriers: in BCAST_MODE on the SW26010; on the Pro by DMA
        into CPE 0's LDM, then by RMA along row 0 and down every column
        (swir_rma_bcast, layers_mix.h)."""
        if not self.pro:
            return C.call("athread_get", "BCAST_MODE", mem, ldm, size, reply,
                          C.Lit("(char)0xff"), stride, bsize)
        return C.call("swir_rma_bcast", ldm, mem, size, bsize, stride, reply)


def _zero(e: C.Expr) -> bool:
    return isinstance(e, C.Lit) and e.text() == "0"


SW5 = Dialect(
    name="sw26010", cpe_header="slave.h", reply_type="volatile int",
    cpe_id_text="athread_get_id(-1)")

PRO = Dialect(
    name="sw26010pro", cpe_header="crts.h", reply_type="crts_rply_t",
    cpe_id_text="CRTS_tid")

DIALECTS = {SW26010.name: SW5, SW26010_PRO.name: PRO}


def dialect_of(target: Target) -> Dialect:
    """The C dialect swir-cg writes for ``target``."""
    return DIALECTS[target.name]
