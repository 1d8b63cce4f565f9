"""The calling convention of IR functions: the buffer parameters a function
writes, a ``func``'s output buffers, and what a call from outside binds and
returns. The interpreters and the C generator share it (docs/ir.md,
"Executing IR")."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from swir.diagnostics import Diagnostic
from swir.ir.core import (Access, Apply, FuncParam, Function, Instruction, Module, SymbolRef,
                          Value)
from swir.ir.types import Type
from swir.ops import CALL, SPAWN



def _writes(inst: Instruction) -> tuple[int, ...]:
    """The operand slots inst writes memory through (OpDef.writes)."""
    d = inst.opdef
    return d.writes if d is not None else ()


def writes_global(functions: Iterable[Function], g: Value) -> bool:
    """Whether any of the functions writes the global g directly (a writing
    op (OpDef.writes) with g as its written buffer)."""
    for f in functions:
        if f.body is None:
            continue
        for inst in f.walk():
            for slot in _writes(inst):
                dst = inst.args[slot] if slot < len(inst.args) else None
                if (dst.base if isinstance(dst, Access) else dst) is g:
                    return True
    return False


def written_params(f: Function) -> list[int]:
    """Indices of the buffer parameters f writes: through a writing op (OpDef.writes),
    or by passing them to a function that writes the corresponding parameter
    (the fixpoint over f and the functions it calls, directly or not)."""
    funcs = _call_closure(f) if f.module is not None else [f]
    return sorted(_fixpoint(f.module, funcs).get(id(f), set()))


def _call_closure(f: Function) -> list[Function]:
    """f and every function of its module it calls or spawns, transitively."""
    assert f.module is not None
    found: dict[int, Function] = {id(f): f}
    work = [f]
    while work:
        g = work.pop()
        for inst in g.walk():
            if not inst.isa(CALL, SPAWN):
                continue
            for app in inst.args:
                callee = f.module.lookup(app.callee) if isinstance(app, Apply) else None
                if isinstance(callee, Function) and id(callee) not in found:
                    found[id(callee)] = callee
                    work.append(callee)
    return list(found.values())


def all_written_params(module: Module) -> dict[int, set[int]]:
    """:func:`written_params` of every function of ``module``, by ``id`` of
    the function, computed at once (a call of written_params walks its
    function and their callees; this, every function once or more: ask
    once when asking for many functions)."""
    return written_by_function(module, [])


def written_by_function(module: Module | None, fallback: list[Function]) -> dict[int, set[int]]:
    """The written parameters of every function of the module (of ``fallback``
    without a module), by id."""
    return _fixpoint(module, module.functions if module is not None else fallback)


def _fixpoint(module: Module | None, funcs: list[Function]) -> dict[int, set[int]]:
    """The written parameters of ``funcs`` (closed under calls), by id."""
    memo: dict[int, set[int]] = {}
    # Fixpoint over the call graph (recursion allowed): start from nothing written.
    for g in funcs:
        memo[id(g)] = set()
    changed = True
    while changed:
        changed = False
        for g in funcs:
            params = {id(p): i for i, p in enumerate(g.params)}
            out = memo[id(g)]
            before = len(out)
            for inst in g.walk():
                for v in _written_values(inst, module, memo):
                    i = params.get(id(v))
                    if i is not None:
                        out.add(i)
            changed |= len(out) != before
    return memo


def _written_values(inst: Instruction, module: Module | None,
                    memo: dict[int, set[int]]) -> Iterator[Value]:
    for slot in _writes(inst):
        if slot < len(inst.args):
            s = inst.args[slot]
            yield s.base if isinstance(s, Access) else s
    if not inst.isa(CALL, SPAWN):
        return
    for app in inst.args:                 # a spawn may run several kernels
        if not isinstance(app, Apply):
            continue
        callee = module.lookup(app.callee) if module is not None else None
        if isinstance(callee, Function):
            for i in memo.get(id(callee), ()):
                if i < len(app.args):
                    yield app.args[i]


def output_count(f: Function) -> int:
    """A func's ``outputs`` attribute: its last N parameters are result buffers."""
    n = f.attrs.get("outputs", 0)
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= len(f.params):
        raise Diagnostic(f"@{f.name}: 'outputs' must be an integer in [0, {len(f.params)}], "
                         f"got {n!r}", f.loc)
    return n


def carried_names(f: Function) -> tuple[str, ...]:
    """A training step's ``carried = [@g0, @g1, ...]`` attribute: its last
    len(carried) parameters start as those globals and its results 1.. are
    their new values (docs/codegen.md, "Training programs"); () when absent."""
    names = f.attrs.get("carried", ())
    if not isinstance(names, tuple) or not all(isinstance(n, SymbolRef) for n in names):
        raise Diagnostic(f"@{f.name}: 'carried' must be a list of globals ([@w, @b]), got "
                         f"{names!r}", f.loc)
    return names


def io_signature(f: Function) -> tuple[list[FuncParam], list[Type]]:
    """What running f from outside takes and gives: the parameters bound to
    arguments, and the types of the results.

    A ``func`` with ``attributes {outputs = N}`` takes all but its last N
    parameters; its results are those N buffers, then its ``return`` values.
    A ``kernel`` takes every parameter; its results are the buffer parameters
    it writes, in parameter order."""
    if f.kind == "kernel":
        return list(f.params), [f.params[i].type for i in written_params(f)]
    n = output_count(f)
    inputs = f.params[:len(f.params) - n]
    return list(inputs), [p.type for p in f.params[len(inputs):]] + list(f.result_types)
