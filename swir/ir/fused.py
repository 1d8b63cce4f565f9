"""Fused groups: building a ``fused`` op from graph instructions, and the
structural facts the passes need about one (its key for CSE and kernel
sharing, its unused inputs).

A group is a ``fused`` instruction whose region is one block; the block's
arguments take the op's operands, its instructions are the group's ops in
order, and ``yield`` gives the results (see docs/ir.md, "Fused groups").
"""

from __future__ import annotations

from swir.ir.core import Block, Global, Instruction, Region, Value, slot_key, value_key


def body(inst: Instruction) -> Block:
    """The single block of a fused op's region."""
    return inst.regions[0].blocks[0]


def group(ops: list[Instruction], name: str | None = None) -> Instruction:
    """Replace ``ops`` (in one block, in order, the last one's results used
    outside) by one ``fused`` op at the position of the last. Values the ops
    read from outside the group, globals included, become the operands (so
    groups that differ only in their weights share one kernel); results of
    earlier ops must be used only inside the group."""
    last = ops[-1]
    block = Block("g")
    # outside value -> block argument
    inputs = {v: block.add_argument(v.type, _arg_name(v)) for v in outside_values(ops)}
    fused = Instruction("fused", list(inputs), result_types=[r.type for r in last.results],
                        result_names=[r.name for r in last.results], loc=last.loc)
    last.insert_before(fused)
    for old, new in zip(last.results, fused.results):
        old.replace_all_uses_with(new)
    for inst in ops:
        inst.detach()
        for v, arg in inputs.items():
            inst.replace_uses_of(v, arg)
        block.append(inst)
    block.append(Instruction("yield", list(last.results), loc=last.loc))
    fused.add_region(Region([block]))
    return fused


def outside_values(ops: list[Instruction]) -> list[Value]:
    """The values ``ops`` read that none of them defines (globals included),
    each once, in the order first read."""
    members = {id(i) for i in ops}
    found: dict[Value, None] = {}
    for inst in ops:
        for v in inst.operands:
            if id(getattr(v, "owner", None)) not in members:
                found.setdefault(v)
    return list(found)


def _arg_name(v: Value) -> str | None:
    # Block arguments may not reuse a name visible outside the region.
    return f"{v.name}_in" if v.name else None


def structural_key(inst: Instruction) -> tuple:
    """Equal for two fused ops exactly when their regions compute the same
    function of their operands: op names, attributes, result types, and each
    operand as a block-argument position, an earlier result, a global or a
    literal."""
    b = body(inst)
    where: dict[int, tuple] = {id(a): ("arg", k, str(a.type)) for k, a in enumerate(b.args)}
    ops = []
    for n, i in enumerate(b.instructions):
        args = tuple(where.get(id(s), ("global", s.name) if isinstance(s, Global) else None)
                     if isinstance(s, Value) else slot_key(s) for s in i.args)
        attrs = tuple(sorted((k, value_key(v)) for k, v in i.attrs.items()))
        ops.append((i.opname, args, attrs, tuple(str(r.type) for r in i.results)))
        for k, r in enumerate(i.results):
            where[id(r)] = ("result", n, k)
    return ("fused", tuple(ops))


def drop_unused_inputs(inst: Instruction) -> int:
    """Remove operands whose block argument nothing in the region reads."""
    b = body(inst)
    keep = [k for k, a in enumerate(b.args) if a.has_uses]
    dropped = len(b.args) - len(keep)
    if dropped:
        operands = inst.operands
        inst.set_args([operands[k] for k in keep])
        b.args = [b.args[k] for k in keep]
        for k, a in enumerate(b.args):
            a.index = k
    return dropped
