"""Loop transformations on ``for`` / ``parallel`` instructions: split (strip-mine)
a loop, permute a perfect nest, fuse adjacent loops, mark a loop parallel.

Each function rewrites the IR in place and raises :class:`TransformError` (a
message and the loop's location) when the transformation is malformed or would
change the result; legality comes from :mod:`swir.analysis.dependence`, which
answers conservatively, so an accepted transformation never changes what the
program computes. The passes ``-split-loop``, ``-reorder-loops``,
``-fuse-loops`` and ``-parallelize`` are thin drivers over these functions,
and the LDM planner builds its tiling on :func:`split_loop` and
:func:`reorder_loops`.

``check=False`` (reorder, fuse, parallel) skips the dependence test: for
callers that have proved legality another way, and for tests that show what
an illegal transformation would compute.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from swir.analysis.dependence import (
    Dependence,
    ancestors,
    carried_dependence,
    fusion_preventing_dependence,
    nest_dependences,
    value_name,
)
from swir.diagnostics import Diagnostic, Location
from swir.ir.affine import Compound, Expr, format_expr
from swir.ir.builder import Builder
from swir.ir.core import (
    Access,
    Apply,
    Block,
    BlockArgument,
    Constraint,
    Function,
    Instruction,
    Module,
    Region,
    Successor,
    Value,
)
from swir.ir.types import INDEX
from swir.ops import CHUNK, CONST, FOR, PARALLEL
from swir.ops.util import attr_or_default

LOOP_OPS = (FOR, PARALLEL)


class TransformError(Exception):
    """A transformation refused: why, where (the loop), and notes (e.g. the
    conflicting accesses)."""

    def __init__(self, message: str, loc: Location | None = None,
                 notes: Iterable[tuple[str, Location | None]] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.loc = loc
        self.notes = list(notes)

    def diagnostic(self, prefix: str = "") -> Diagnostic:
        return Diagnostic(prefix + self.message, self.loc, notes=list(self.notes))


# --------------------------------------------------------------------------
# Loop anatomy
# --------------------------------------------------------------------------

def is_loop(inst: object) -> bool:
    return isinstance(inst, Instruction) and inst.isa(*LOOP_OPS)


def loop_body(loop: Instruction) -> Block:
    return loop.regions[0].blocks[0]


def loop_iv(loop: Instruction) -> BlockArgument:
    return loop_body(loop).args[0]


def loop_bounds(loop: Instruction) -> tuple[Expr, Expr, int]:
    """``(lb, ub, step)`` of ``for %i = lb to ub step s``."""
    return Expr.of(loop.args[0]), Expr.of(loop.args[1]), int(attr_or_default(loop, "step"))


def trip_count(loop: Instruction) -> Expr:
    """``ceildiv(ub - lb, step)`` (a constant when the bounds are; may be <= 0)."""
    lb, ub, step = loop_bounds(loop)
    return (ub - lb).ceildiv(step)


def loop_name(loop: Instruction) -> str:
    return f"%{loop_iv(loop).name}"


def expr_text(e: Expr) -> str:
    """An index expression as the printer spells it (``4*%yo + %yi``)."""
    return format_expr(e, lambda v: value_name(v) if isinstance(v, Value) else str(v))


def _require_loop(inst: object, what: str) -> Instruction:
    if not is_loop(inst):
        loc = inst.loc if isinstance(inst, Instruction) else None
        name = inst.opname if isinstance(inst, Instruction) else type(inst).__name__
        raise TransformError(f"{what} needs a 'for' or 'parallel' loop, got '{name}'", loc)
    return inst  # type: ignore[return-value]


# --------------------------------------------------------------------------
# split
# --------------------------------------------------------------------------

def split_loop(loop: Instruction, factor: int, outer_name: str | None = None,
               inner_name: str | None = None) -> tuple[Instruction, Instruction]:
    """Strip-mine ``for %y = lb to ub step s`` by ``factor``::

        for %yo = 0 to ceildiv(ub - lb, s*factor) {
          for %yi = 0 to min(factor, ceildiv(ub - lb, s) - factor*%yo) {
            body with %y := lb + s*(factor*%yo + %yi)
          }
        }

    The ``min`` is left out when the trip count is a constant multiple of
    ``factor`` (the inner bound is ``factor``) or at most ``factor`` (it is the
    trip count). Names default to the induction variable's name + ``o`` / ``i``,
    made unique in the function. The outer loop keeps the op (``for`` or
    ``parallel``) and its ``workers``; the inner loop is a ``for``. Uses of
    ``%y`` as a plain SSA operand (not in an index expression) read a value
    computed at the top of the inner body with index ``mul``/``add``, named
    like ``%y``; that needs a lower bound without floordiv/mod/min/max atoms.
    Always legal (the iterations run in the same order); refuses ``factor < 1``,
    and a non-constant trip count with a step other than 1 (its
    ``ceildiv(ub - lb, step)`` could not be bounded by the verifier).
    Returns ``(outer, inner)``.
    """
    _require_loop(loop, "split")
    if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
        raise TransformError(f"split factor must be an integer >= 1, got {factor!r}", loop.loc)
    iv = loop_iv(loop)
    lb, ub, step = loop_bounds(loop)
    count, outer_ub, inner_ub = _split_bounds(loop, factor)

    # Plain-value uses need the value computed (under the old name); check first.
    plain = [u for u in iv.users if _has_plain_use(u, iv)]
    if plain and any(isinstance(a, Compound) for a, _ in lb.terms):
        raise TransformError(
            f"cannot split loop %{iv.name}: it is used as a value (not in an index "
            f"expression) and its lower bound {expr_text(lb)} cannot be computed with index "
            "arithmetic",
            plain[0].loc)
    taken = _names_in(loop.function)
    if not plain:
        taken.discard(iv.name or "")  # the old variable goes away
    base = iv.name or "i"
    outer_block = Block(None)
    yo = outer_block.add_argument(INDEX, _unique(outer_name or base + "o", taken))
    inner_block = Block(None)
    yi = inner_block.add_argument(INDEX, _unique(inner_name or base + "i", taken))
    if inner_ub is None:
        inner_ub = Expr.minmax("min", [Expr.of(factor), count - Expr.of(yo).scale(factor)])
    attrs = {k: v for k, v in loop.attrs.items() if k != "step"}
    outer = Instruction(loop.opname, [Expr.of(0), outer_ub], attrs=attrs,
                        regions=[Region([outer_block])], loc=loop.loc)
    inner = Instruction("for", [Expr.of(0), inner_ub], regions=[Region([inner_block])],
                        loc=loop.loc)
    outer_block.append(inner)

    new_iv = lb + (Expr.of(yo).scale(factor) + yi).scale(step)
    for inst in list(loop_body(loop).instructions):
        inner_block.append(inst)
    value: Value | None = None
    if plain:
        value = _materialise(inner_block, new_iv, iv.name)
    for user in iv.users:
        user.set_args([_replace_iv(user, i, s, iv, new_iv, value)
                       for i, s in enumerate(user.args)])
    loop.insert_before(outer)
    loop.erase()
    return outer, inner


def _split_bounds(loop: Instruction, factor: int) -> tuple[Expr, Expr, Expr | None]:
    """The trip count of ``loop`` and the bounds of its split loops: the outer
    loop's and the inner loop's (None: ``min(factor, count - factor*%yo)``, a
    remainder tile)."""
    iv = loop_iv(loop)
    lb, ub, step = loop_bounds(loop)
    count = (ub - lb).ceildiv(step)
    if count.is_constant:
        n = count.const
        inner_ub: Expr | None = None
        if n % factor == 0 and n > 0:
            inner_ub = Expr.of(factor)
        elif n <= factor:  # one tile (or none)
            inner_ub = Expr.of(max(n, 0))
        return count, Expr.of(max(0, -(-n // factor))), inner_ub
    if step != 1:
        # ceildiv(ub - lb, step) of a symbolic extent: the verifier bounds the
        # ceildiv apart from lb (their correlation is lost), so the split loop
        # could not be verified; a step-1 loop has the exact extent ub - lb.
        raise TransformError(
            f"cannot split loop %{iv.name}: its trip count ({expr_text(ub)} - "
            f"{expr_text(lb)}) ceildiv {step} is not a constant; only step-1 loops with a "
            "symbolic trip count are split", loop.loc)
    return count, (ub - lb).ceildiv(factor), None


def _has_plain_use(inst: Instruction, iv: Value) -> bool:
    for i, s in enumerate(inst.args):
        if s is iv and not _is_index_slot(inst, i):
            return True
        if isinstance(s, (Successor, Apply)) and iv in s.args:
            return True
    return False


def _is_index_slot(inst: Instruction, i: int) -> bool:
    """Is slot i an index expression (a bare value there is normalised from one)?"""
    d = inst.opdef
    if d is not None and d.syntax == "loop":
        return i < 2
    return inst.isa(CHUNK, CONST) and i == 0


def _replace_iv(inst: Instruction, i: int, s: object, iv: Value, expr: Expr,
                value: Value | None) -> object:
    if s is iv:
        return expr if _is_index_slot(inst, i) else value
    if isinstance(s, (Expr, Access, Constraint)):
        return s.substitute({iv: expr})
    if isinstance(s, (Successor, Apply)):
        return s.substitute({iv: value})
    return s


def _materialise(block: Block, e: Expr, name: str | None) -> Value:
    """Compute the affine ``e`` (values and constants only) with index const/mul/add
    at the top of ``block``; the last result gets ``name``."""
    b = Builder(block, before=block.instructions[0] if block.instructions else None)
    acc: Value | None = None
    for atom, coef in e.terms:
        assert isinstance(atom, Value)
        term = atom if coef == 1 else b.create("mul", atom, b.const(coef, INDEX))
        acc = term if acc is None else b.create("add", acc, term)
    if e.const or acc is None:
        c = b.const(e.const, INDEX)
        acc = c if acc is None else b.create("add", acc, c)
    assert acc is not None
    acc.name = name
    return acc


def _names_in(f: Function | None) -> set[str]:
    names: set[str] = set()
    if f is None:
        return names
    names.update(p.name for p in f.params if p.name)
    for inst in f.walk():
        names.update(r.name for r in inst.results if r.name)
        for region in inst.regions:
            for blk in region.blocks:
                names.update(a.name for a in blk.args if a.name)
    if f.body is not None:
        for blk in f.body.blocks:
            names.update(a.name for a in blk.args if a.name)
    return names


def _unique(name: str, taken: set[str]) -> str:
    out, n = name, 0
    while out in taken:
        n += 1
        out = f"{name}_{n}"
    taken.add(out)
    return out


# --------------------------------------------------------------------------
# reorder
# --------------------------------------------------------------------------

def perfect_nest(outermost: Instruction, depth: int | None = None) -> list[Instruction]:
    """The loops of the perfect nest rooted at ``outermost`` (each body is exactly
    the next loop), outermost first: ``depth`` loops (TransformError if there are
    not that many), or as many as there are."""
    _require_loop(outermost, "a loop nest")
    loops = [outermost]
    while depth is None or len(loops) < depth:
        body = loop_body(loops[-1]).instructions
        if len(body) == 1 and is_loop(body[0]):
            loops.append(body[0])
            continue
        if depth is None:
            break
        inner = loops[-1]
        what = ("is empty" if not body else
                f"holds {len(body)} instructions, not just one loop" if len(body) > 1 else
                f"is a single '{body[0].opname}', not a loop")
        raise TransformError(
            f"not a perfect nest of depth {depth}: the body of loop {loop_name(inner)} "
            f"{what}", inner.loc)
    return loops


def reorder_loops(outermost: Instruction, order: Sequence[str | Value | Instruction],
                  *, check: bool = True) -> list[Instruction]:
    """Permute the perfect nest rooted at ``outermost`` so its loops run in
    ``order`` (outermost first; loops named by induction-variable name, with or
    without ``%``, by induction variable, or by loop instruction); the nest's
    depth is ``len(order)``. Loops move with their bounds, step and kind; the
    innermost body is unchanged. Refuses an imperfect nest, a loop whose bounds
    use a loop that would end up inside it, and a permutation that reverses a
    dependence (a direction vector lexicographically positive in the old order
    and negative in the new one) or makes a ``parallel`` loop carry one.
    Returns the loops in their new order, outermost first."""
    nest = perfect_nest(outermost, len(order))
    new = _resolve_order(nest, order)
    if new == nest:
        return nest
    pos = {id(lp): k for k, lp in enumerate(new)}
    for k, lp in enumerate(new):
        lb, ub, _ = loop_bounds(lp)
        for v in list(lb.values()) + list(ub.values()):
            dep = next((m for m in nest if loop_iv(m) is v), None)
            if dep is not None and pos[id(dep)] > k:
                raise TransformError(
                    f"cannot move loop {loop_name(dep)} inside loop {loop_name(lp)}: the "
                    f"bounds of {loop_name(lp)} use {loop_name(dep)}", lp.loc)
    if check:
        perm = [nest.index(lp) for lp in new]
        for dep in nest_dependences(nest):
            _check_permutation(dep, nest, new, perm)
    _rebuild_nest(nest, new)
    return new


def _resolve_order(nest: list[Instruction], order: Sequence[str | Value | Instruction]
                   ) -> list[Instruction]:
    def match(x: str | Value | Instruction) -> list[Instruction]:
        if isinstance(x, Instruction):
            return [lp for lp in nest if lp is x]
        if isinstance(x, Value):
            return [lp for lp in nest if loop_iv(lp) is x]
        name = x.removeprefix("%")
        return [lp for lp in nest if loop_iv(lp).name == name]

    out: list[Instruction] = []
    for x in order:
        m = match(x)
        if len(m) != 1 or m[0] in out:
            shown = ", ".join(_spell(o) for o in order)
            raise TransformError(
                f"order ({shown}) must name each loop of the nest "
                f"({', '.join(loop_name(lp) for lp in nest)}) exactly once", nest[0].loc)
        out.append(m[0])
    return out


def _spell(x: str | Value | Instruction) -> str:
    if isinstance(x, Instruction):
        return loop_name(x) if is_loop(x) else f"'{x.opname}'"
    if isinstance(x, Value):
        return f"%{x.name}"
    return x if x.startswith("%") else f"%{x}"


def _lex_sign(v: Sequence[str]) -> str:
    return next((d for d in v if d != "="), "=")


def _check_permutation(dep: Dependence, nest: list[Instruction], new: list[Instruction],
                       perm: list[int]) -> None:
    for v in sorted(dep.directions):
        pv = tuple(v[i] for i in perm)
        if _lex_sign(v) != _lex_sign(pv):
            why = _opaque(dep) or "it would reverse the dependence " + _oriented(dep, v)
            raise TransformError(
                f"cannot reorder loops ({', '.join(loop_name(lp) for lp in nest)}) to "
                f"({', '.join(loop_name(lp) for lp in new)}): {why}", nest[0].loc,
                _access_notes(dep))
        for k, lp in enumerate(new):
            if lp.isa(PARALLEL) and pv[k] != "=" and all(d == "=" for d in pv[:k]):
                why = _opaque(dep) or "the dependence " + _oriented(dep, v)
                raise TransformError(
                    f"cannot reorder loops ({', '.join(loop_name(x) for x in nest)}) to "
                    f"({', '.join(loop_name(x) for x in new)}): parallel loop "
                    f"{loop_name(lp)} would carry {why}", lp.loc, _access_notes(dep))


def _rebuild_nest(nest: list[Instruction], new: list[Instruction]) -> None:
    parent = nest[0].parent
    assert parent is not None, "loop nest is not in a block"
    where = parent.index_of(nest[0])
    body = list(loop_body(nest[-1]).instructions)
    for inst in body:
        inst.detach()
    for lp in nest:
        lp.detach()
    for k, lp in enumerate(new):
        blk = loop_body(lp)
        if k + 1 < len(new):
            blk.append(new[k + 1])
        else:
            for inst in body:
                blk.append(inst)
    parent.insert(where, new[0])


# --------------------------------------------------------------------------
# fuse
# --------------------------------------------------------------------------

def fuse_loops(first: Instruction, second: Instruction, *, check: bool = True) -> Instruction:
    """Fuse ``second`` into ``first``: two adjacent loops of one block (``second``
    right after ``first``) with the same bounds and step become one loop whose
    body is ``first``'s body then ``second``'s (its induction variable replaced
    by ``first``'s). The result is ``parallel`` when both were (with the same
    ``workers``), else ``for``. Refuses different bounds, non-adjacent loops, and a
    fusion-preventing dependence: an iteration of ``second`` touching an element
    a *later* iteration of ``first`` touches, one of them writing (for a
    ``parallel`` result, any two different iterations). Returns the fused loop
    (``first``)."""
    _require_loop(first, "fuse")
    _require_loop(second, "fuse")
    blk = first.parent
    if blk is None or second.parent is not blk or \
            blk.index_of(second) != blk.index_of(first) + 1:
        raise TransformError(f"cannot fuse loop {loop_name(first)} with loop "
                             f"{loop_name(second)}: the second loop must come right after "
                             "the first in the same block", first.loc)
    b1, b2 = loop_bounds(first), loop_bounds(second)
    if b1 != b2:
        raise TransformError(
            f"cannot fuse loop {loop_name(first)} ({_bounds_text(b1)}) with loop "
            f"{loop_name(second)} ({_bounds_text(b2)}): their bounds differ",
            first.loc, [(f"loop {loop_name(second)} is here", second.loc)])
    parallel = first.isa(PARALLEL) and second.isa(PARALLEL)
    if parallel and first.attrs.get("workers") != second.attrs.get("workers"):
        raise TransformError(f"cannot fuse parallel loops {loop_name(first)} and "
                             f"{loop_name(second)}: their workers differ", first.loc)
    if check:
        dep = fusion_preventing_dependence(first, second, parallel=parallel)
        if dep is not None:
            later = any(d == ">" for (d,) in dep.directions)
            why = _opaque(dep) or (
                "an iteration of the second loop would run before a later iteration of the "
                "first that touches the same element" if later or not parallel else
                "the fused parallel loop would carry a dependence between iterations")
            raise TransformError(
                f"cannot fuse loop {loop_name(first)} with loop {loop_name(second)}: {why}"
                + ("" if _opaque(dep) else f" (dependence {_between(dep)})"), first.loc,
                _access_notes(dep))
    iv1, iv2 = loop_iv(first), loop_iv(second)
    iv2.replace_all_uses_with(iv1)
    target = loop_body(first)
    for inst in list(loop_body(second).instructions):
        target.append(inst)
    if not parallel and first.isa(PARALLEL):
        first.opname = "for"
        first.attrs.pop("workers", None)
    second.erase()
    return first


def _carried_distance(dep: Dependence) -> str:
    d = dep.distance[0] if dep.distance else None
    return "" if d is None or d == 0 else f" (distance {abs(d)})"


def _bounds_text(b: tuple[Expr, Expr, int]) -> str:
    lb, ub, step = b
    return f"{expr_text(lb)} to {expr_text(ub)}" + (f" step {step}" if step != 1 else "")


# --------------------------------------------------------------------------
# parallel
# --------------------------------------------------------------------------

def mark_parallel(loop: Instruction, workers: int | None = None, *,
                  check: bool = True) -> Instruction:
    """Turn ``for`` into ``parallel`` (optionally with ``workers``). Refuses when
    the loop carries a dependence: two different iterations (in one iteration of
    the loops around it) touch the same element and at least one writes — e.g.
    the reduction loop ``%k`` of ``C[x, y] += A[x, k] * B[k, y]``. A loop that is
    already parallel only gets its ``workers`` set."""
    _require_loop(loop, "parallelize")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers <= 0):
        raise TransformError(f"workers must be a positive integer, got {workers!r}", loop.loc)
    if check and not loop.isa(PARALLEL):
        dep = carried_dependence(loop)
        if dep is not None:
            why = _opaque(dep) or ("it carries a dependence " + _between(
                dep, " in different iterations") + _carried_distance(dep))
            raise TransformError(f"cannot mark loop {loop_name(loop)} parallel: {why}",
                                 loop.loc, _access_notes(dep))
    loop.opname = "parallel"
    if workers is not None:
        loop.attrs["workers"] = workers
    return loop


# --------------------------------------------------------------------------
# diagnostics helpers
# --------------------------------------------------------------------------

def _opaque(dep: Dependence) -> str | None:
    for a in (dep.first, dep.second):
        if a.buffer is None:
            return f"'{a.inst.opname}' has memory effects the analysis does not model"
    return None


def _between(dep: Dependence, suffix: str = "") -> str:
    """``on %C between the 'load' (read) and the 'store' (write)``."""
    a, b = dep.first, dep.second
    if a is b:
        return f"on {value_name(a.buffer)} between instances of the '{a.inst.opname}'{suffix}"
    return (f"on {value_name(a.buffer)} between the '{a.inst.opname}' ({a.kind}) and the "
            f"'{b.inst.opname}' ({b.kind}){suffix}")


def _oriented(dep: Dependence, v: Sequence[str]) -> str:
    """The dependence from the access that runs first, with its (positive) direction."""
    a, b, dist = dep.first, dep.second, dep.distance
    if _lex_sign(v) == ">":
        a, b = b, a
        v = tuple({"<": ">", ">": "<", "=": "="}[d] for d in v)
        dist = tuple(None if d is None else -d for d in dist)
    text = (f"on {value_name(a.buffer)} from the '{a.inst.opname}' ({a.kind}) to the "
            f"'{b.inst.opname}' ({b.kind})" if a is not b else _between(dep))
    text += f", direction ({', '.join(v)})"
    if any(d is not None for d in dist):
        text += f", distance ({', '.join('?' if d is None else str(d) for d in dist)})"
    return text


def _access_notes(dep: Dependence) -> list[tuple[str, Location | None]]:
    notes = [(f"{dep.first.describe()} here", dep.first.inst.loc)]
    if dep.second is not dep.first:
        notes.append((f"{dep.second.describe()} here", dep.second.inst.loc))
    return notes


# --------------------------------------------------------------------------
# finding loops by name (for passes and tools)
# --------------------------------------------------------------------------

def find_loops(f: Function, name: str) -> list[Instruction]:
    """The loops of ``f`` whose induction variable is named ``name`` (``%`` optional)."""
    name = name.removeprefix("%")
    return [i for i in f.walk() if is_loop(i) and loop_iv(i).name == name]


def _functions(module: Module, kernel: str | None) -> list[Function]:
    if not kernel:
        return [f for f in module.functions if f.body is not None]
    name = kernel.removeprefix("@")
    f = module.lookup(name)
    if not isinstance(f, Function) or f.body is None:
        raise TransformError(f"no function or kernel @{name} with a body in the module",
                             module.loc)
    return [f]


def select_loop(module: Module, name: str, kernel: str | None = None) -> Instruction:
    """The one loop named ``name`` in function ``kernel`` (any function when None).
    TransformError when there is none, or several (notes list them)."""
    fns = _functions(module, kernel)
    matches = [lp for f in fns for lp in find_loops(f, name)]
    shown = name if name.startswith("%") else f"%{name}"
    where = f" in @{fns[0].name}" if kernel else ""
    if not matches:
        raise TransformError(f"no loop {shown}{where}", module.loc)
    if len(matches) > 1:
        owners = list(dict.fromkeys(lp.function.name for lp in matches))
        hint = (f" in {len(owners)} functions ({', '.join('@' + o for o in owners)}); "
                "choose one with kernel=NAME" if len(owners) > 1 else
                f" in @{owners[0]}; rename one of them")
        raise TransformError(f"loop name {shown} is ambiguous: it names {len(matches)} loops"
                             + hint, module.loc,
                             [(f"loop {shown} here", lp.loc) for lp in matches])
    return matches[0]


def select_nest(module: Module, names: Sequence[str], kernel: str | None = None
                ) -> Instruction:
    """The outermost loop of the perfect nest whose loops are named ``names``
    (in any order). When the names pick out exactly one loop each, that
    outermost loop is returned even if the nest is not perfect (reorder_loops
    then explains why); TransformError if a name is missing or the choice is
    ambiguous."""
    fns = _functions(module, kernel)
    wanted = [n.removeprefix("%") for n in names]
    cands = {n: [lp for f in fns for lp in find_loops(f, n)] for n in wanted}
    for n in wanted:
        if not cands[n]:
            where = f" in @{fns[0].name}" if kernel else ""
            raise TransformError(f"no loop %{n}{where}", module.loc)
    roots = []
    for lp in {id(x): x for c in cands.values() for x in c}.values():
        nest = perfect_nest(lp)[:len(wanted)]
        if len(nest) == len(wanted) and \
                sorted(loop_iv(x).name or "" for x in nest) == sorted(wanted):
            roots.append(lp)
    if len(roots) == 1:
        return roots[0]
    shown = ", ".join(f"%{n}" for n in wanted)
    if len(roots) > 1:
        raise TransformError(f"loops ({shown}) are ambiguous: {len(roots)} loop nests match",
                             module.loc, [("a nest starts here", r.loc) for r in roots])
    if all(len(c) == 1 for c in cands.values()):
        loops = [c[0] for c in cands.values()]
        outer = [lp for lp in loops
                 if all(o is lp or any(a is lp for a in ancestors(o)) for o in loops)]
        if outer:
            return outer[0]
        raise TransformError(f"loops ({shown}) are not nested in one another", module.loc,
                             [(f"loop {loop_name(lp)} here", lp.loc) for lp in loops])
    raise TransformError(f"loops ({shown}) do not form a perfect nest (and some of the "
                         "names are ambiguous)", module.loc,
                         [(f"loop {loop_name(lp)} here", lp.loc)
                          for c in cands.values() for lp in c])

