"""Copying instructions with their regions, substituting values on the way
(used by transformations that duplicate code: double buffering's two
halves, kernel splitting)."""

from __future__ import annotations

from collections.abc import Iterable

from swir.ir.affine import Expr
from swir.ir.builder import Builder
from swir.ir.core import Block, Instruction, Region, Value


def clone(b: Builder, insts: Iterable[Instruction], mapping: dict) -> list[Instruction]:
    """Insert copies of ``insts`` at ``b``; ``mapping`` (Value -> Value or Expr)
    is applied to every operand and extended with the copies' results and
    block arguments. An Expr may replace a value only inside index
    expressions (ValueError otherwise)."""
    return [_clone(b, inst, mapping) for inst in insts]


def _clone(b: Builder, inst: Instruction, mapping: dict) -> Instruction:
    regions = []
    for r in inst.regions:
        nr = Region([])
        for blk in r.blocks:
            nb = Block(blk.label)
            for a in blk.args:
                mapping[a] = nb.add_argument(a.type, a.name)
            nr.add_block(nb)
        regions.append(nr)
    new = Instruction(inst.opname, [_slot(a, mapping) for a in inst.args],
                      result_types=[r.type for r in inst.results], attrs=dict(inst.attrs),
                      regions=regions, arrow=inst.arrow,
                      result_names=[r.name for r in inst.results], loc=inst.loc)
    b.insert(new)
    for r, nr in zip(inst.results, new.results):
        mapping[r] = nr
    for r, nr in zip(inst.regions, regions):
        for blk, nb in zip(r.blocks, nr.blocks):
            clone(Builder(nb), blk.instructions, mapping)
    return new


def _slot(a, mapping: dict):
    if isinstance(a, Value):
        new = mapping.get(a, a)
        if isinstance(new, Expr):
            if new.const == 0 and len(new.terms) == 1 and new.terms[0][1] == 1 \
                    and isinstance(new.terms[0][0], Value):
                return new.terms[0][0]
            raise ValueError(f"%{a.name} is used as a value, not in an index expression")
        return new
    if hasattr(a, "substitute"):
        return a.substitute(mapping)
    return a
