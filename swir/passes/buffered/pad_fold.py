"""Padding in the tile load (-ldm-plan): a padded convolution or pool reads
its tiles from the unpadded input.

-lower-loops writes a padded operand as two nests before the nests that read
it (docs/passes.md, "Padding is exact"): a fill of a scratch buffer %P with
the pad value, then a copy of the input %X into %P's interior. Once the
readers are planned and every read of %P is a ``copy_in`` of a tile, the
two nests are dead weight: each tile can come straight from %X, the part
outside %X filled in LDM. :func:`fold` rewrites those copies to
``copy_in %X[tile - offset] -> %L {fill = v}``, deletes the two nests, and
drops %P from the kernel, its callers and the module, so neither the pass
over the input nor the scratch buffer is left. -insert-dma lowers the
padded copy (a DMA of the part inside %X, the halo filled on the CPE).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from swir.ir.affine import Expr
from swir.ir.core import (
    Access,
    Apply,
    FuncParam,
    Function,
    Global,
    Instruction,
    Literal,
    Module,
    Range,
    Value,
)
from swir.ir.types import BufType
from swir.ops import CALL, CONST, COPY_IN, COPY_OUT, FOR, LOAD, PARALLEL, STORE
from swir.ops.util import attr_or_default


@dataclass(eq=False)
class PaddedCopy:
    """%P = %X padded by ``before`` elements per dimension with ``fill``,
    written by the kernel's top-level nests ``fill_nest`` and ``copy_nest``."""

    scratch: FuncParam
    source: Value
    before: tuple[int, ...]
    fill: Any
    fill_nest: Instruction
    copy_nest: Instruction

    @property
    def nests(self) -> tuple[Instruction, Instruction]:
        return self.fill_nest, self.copy_nest


def find_padded_copies(module: Module, f: Function) -> list[PaddedCopy]:
    """The pad-then-copy nest pairs of kernel f whose %P is private scratch:
    a parameter every caller passes a buffer of its own, read only by f's
    later nests, and whose %X f never writes."""
    tops = [i for i in f.body.blocks[0].instructions if i.isa(FOR, PARALLEL)]
    found = []
    for first, second in itertools.pairwise(tops):
        filled = _fill_nest(first)
        if filled is None:
            continue
        scratch, value = filled
        copied = _copy_nest(second, scratch)
        if copied is None:
            continue
        source, before = copied
        pc = PaddedCopy(scratch, source, before, value, first, second)
        if _private(module, f, pc) and not _written(f, source):
            found.append(pc)
    return found


def fold(module: Module, f: Function, pc: PaddedCopy) -> bool:
    """Read %P's tiles from %X if every read of %P left is a tile copy;
    False (nothing changed) otherwise."""
    inside = {id(i) for n in pc.nests for i in n.walk()}
    if not read_from_source(pc.scratch, pc.source, pc.before, pc.fill, inside):
        return False
    for n in pc.nests:
        n.erase()
    _drop_param(module, f, pc.scratch)
    return True


def read_from_source(scratch: Value, source: Value, before: tuple[int, ...], fill: Any,
                     skip: set[int] = frozenset()) -> bool:
    """Rewrite every tile copy of ``scratch`` (instructions in ``skip``
    aside) into a padded copy of ``source``, if those are all its reads;
    else change nothing and return False. The plan search measures its
    candidate plans so too (ldm_search.measure)."""
    users = [u for u in scratch.users if id(u) not in skip]
    if not users or any(not u.isa(COPY_IN) or u.args[0].base is not scratch for u in users):
        return False
    for u in users:
        acc = u.args[0]
        idx = tuple(Range(ix.lo - b, ix.hi - b) if isinstance(ix, Range) else ix - b
                    for ix, b in zip(acc.indices, before))
        u.set_args([Access(source, idx), u.args[1]])
        u.attrs["fill"] = fill
    return True


# -- the pattern -----------------------------------------------------------------------------

def _perfect(top: Instruction) -> tuple[list[Value], list[int], list[Instruction]] | None:
    """A perfect band of ``for`` loops from 0 by 1 to constants: its
    variables, extents and innermost statements."""
    ivs, extents, cur = [], [], top
    while True:
        lb, ub = cur.args[0], cur.args[1]
        if not cur.isa(FOR) or attr_or_default(cur, "step") != 1 or not lb.is_constant \
                or lb.const != 0 or not ub.is_constant:
            return None
        ivs.append(cur.regions[0].blocks[0].args[0])
        extents.append(ub.const)
        body = cur.regions[0].blocks[0].instructions
        if len(body) == 1 and body[0].isa(FOR):
            cur = body[0]
            continue
        if any(i.regions for i in body):
            return None
        return ivs, extents, list(body)


def _plain(ix: Any, iv: Value, offset: int = 0) -> bool:
    return isinstance(ix, Expr) and ix.const == offset and list(ix.terms) == [(iv, 1)]


def _fill_nest(top: Instruction) -> tuple[FuncParam, Any] | None:
    """``store %c, %P[i0, ..., in]`` over all of a parameter %P, %c a constant."""
    band = _perfect(top)
    if band is None or len(band[2]) != 1 or not band[2][0].isa(STORE):
        return None
    ivs, extents, (st,) = band
    value, acc = st.args
    if not isinstance(acc, Access) or not isinstance(acc.base, FuncParam) \
            or not isinstance(acc.base.type, BufType) or list(acc.base.type.shape) != extents \
            or not all(_plain(ix, iv) for ix, iv in zip(acc.indices, ivs)):
        return None
    const = getattr(value, "owner", None)
    if not isinstance(const, Instruction) or not const.isa(CONST):
        return None
    lit = const.args[0]
    if isinstance(lit, Literal):
        return acc.base, lit.value
    if isinstance(lit, Expr) and lit.is_constant:
        return acc.base, lit.const
    return None


def _copy_nest(top: Instruction, scratch: Value) -> tuple[Value, tuple[int, ...]] | None:
    """``%v = load %X[i..]; store %v, %P[i + b..]`` over all of %X, inside %P."""
    band = _perfect(top)
    if band is None or len(band[2]) != 2:
        return None
    ivs, extents, (ld, st) = band
    if not ld.isa(LOAD) or not st.isa(STORE) or st.args[0] is not ld.results[0]:
        return None
    src, dst = ld.args[0], st.args[1]
    if dst.base is not scratch or src.base is scratch \
            or not isinstance(src.base.type, BufType) \
            or src.base.type.element != scratch.type.element \
            or list(src.base.type.shape) != extents \
            or not all(_plain(ix, iv) for ix, iv in zip(src.indices, ivs)):
        return None
    before = []
    for ix, iv, n, size in zip(dst.indices, ivs, extents, scratch.type.shape):
        b = ix.const if isinstance(ix, Expr) else -1
        if b < 0 or b + n > size or not _plain(ix, iv, b):
            return None
        before.append(b)
    return src.base, tuple(before)


def _written(f: Function, buf: Value) -> bool:
    return any(u.function is f and u.isa(STORE, COPY_OUT, CALL)
               for u in buf.users)


def _calls(module: Module, f: Function) -> list[Instruction]:
    return [i for g in module.functions for i in g.walk()
            if i.isa(CALL) and isinstance(i.args[0], Apply) and i.args[0].callee == f.name]


def _private(module: Module, f: Function, pc: PaddedCopy) -> bool:
    """%P is scratch: f stores to it only in the pad nests, and every call
    of f (there is one at least) passes a ``buffer`` no other instruction names."""
    inside = {id(i) for n in pc.nests for i in n.walk()}
    if any(not u.isa(LOAD) and id(u) not in inside for u in pc.scratch.users):
        return False
    calls = _calls(module, f)
    k = pc.scratch.index
    for c in calls:
        arg = c.args[0].args[k]
        if not isinstance(arg, Global) or arg.kind != "buffer" or arg.users != [c] \
                or c.args[0].args.count(arg) != 1:
            return False
    return bool(calls)


def _drop_param(module: Module, f: Function, p: FuncParam) -> None:
    """Remove parameter p of f, the argument every call passes for it and
    the buffers no longer named."""
    k = p.index
    for c in _calls(module, f):
        app = c.args[0]
        arg = app.args[k]
        c.set_args([Apply(app.callee, app.args[:k] + app.args[k + 1:]), *c.args[1:]])
        if isinstance(arg, Global) and not arg.has_uses:
            module.remove(arg)
    f.params.remove(p)
    for i, q in enumerate(f.params):
        q.index = i
    for inst in f.walk():     # -ldm-plan's per-parameter counts (ldm_model.distinct_reads)
        if inst.isa(PARALLEL) and "reads" in inst.attrs:
            reads = tuple(r for i, r in enumerate(inst.attrs.pop("reads")) if i != k)
            if any(r >= 0 for r in reads):
                inst.attrs["reads"] = reads
