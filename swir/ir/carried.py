"""Training steps' carried parameters: ``attributes {carried = [@w, @b, ...]}``
on a function (written by -train-step) says that its last len(carried)
parameters are state carried from step to step: carried parameter k starts as
global carried[k] and result 1 + k is its next value; result 0 is the loss.
In a data-parallel module (``split = "data"``) the carried parameters and all
the results are the same on every rank (replicated), not cut by batch.
docs/ir.md ("Training steps") has the rules.
"""

from __future__ import annotations

from swir.ir.core import Function, Global, Module, SymbolRef
from swir.ir.types import ShapedType


def carried_globals(f: Function) -> tuple[str, ...]:
    return tuple(f.attrs.get("carried", ()))


def module_carried(module: Module) -> set[str]:
    """The globals some function of the module carries: kept though no op
    reads them (a malformed ``carried`` keeps nothing: the verifier reports it)."""
    return {n for f in module.functions if isinstance(f.attrs.get("carried"), tuple)
            for n in f.attrs["carried"] if isinstance(n, SymbolRef)}


def replicated_ports(f: Function) -> tuple[set[int], set[int]]:
    """(parameter indices, result indices) that a data split does not cut: the
    carried parameters and every result (from the loop stage on, the output
    buffers after the carried parameters)."""
    k = len(carried_globals(f))
    if not k:
        return set(), set()
    data = len(f.params) - f.attrs.get("outputs", 0) - k
    return set(range(max(data, 0), len(f.params))), set(range(len(f.result_types)))


def carried_error(f: Function, module: Module, graph: bool) -> str | None:
    """What is wrong with f's ``carried`` attribute (``graph``: also check the
    counts and types; the lowering turns them into buffers), or None."""
    names = f.attrs["carried"]
    if not isinstance(names, tuple) or not names or \
            not all(isinstance(n, SymbolRef) for n in names):
        return "'carried' must be a non-empty list of globals (@name, ...)"
    k = len(names)
    for name in names:
        if not isinstance(module.lookup(name), Global):
            return f"'carried': @{name} is not a global"
    if not graph:   # the lowering made the parameters and results buffers
        return None
    if k > len(f.params) or len(f.result_types) != k + 1:
        return (f"'carried' names {k} globals: the function must take at least {k} parameters "
                f"and return {k + 1} results (the loss, then each carried value)")
    loss = f.result_types[0]
    if not (isinstance(loss, ShapedType) and loss.num_elements == 1 and loss.element.is_float):
        return f"result 0 of a training step is its loss, one float; got {loss}"
    for i, name in enumerate(names):
        g = module.lookup(name)
        p = f.params[len(f.params) - k + i]
        if not (g.type == p.type == f.result_types[1 + i]):
            return (f"carried parameter %{p.name} ({p.type}), its global @{name} ({g.type}) "
                    f"and result {1 + i} ({f.result_types[1 + i]}) must have one type")
    return None
