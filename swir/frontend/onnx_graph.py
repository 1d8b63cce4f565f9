"""Graph-level work of swir-import: binding input shapes, the types a model
declares, and the live nodes in dependency order."""

from __future__ import annotations

import heapq
from typing import Any

from swir.frontend.onnx_types import ImportFailure

Dims = list  # per axis: an int (static), a str (symbolic) or None (unknown)


def describe(node, index: int) -> str:
    """How diagnostics name a node: by name if it has one, else by position."""
    who = f"'{node.name}'" if node.name else f"#{index}"
    return f"node {who} ({node.op_type})"


def declared_dims(vi) -> Dims | None:
    """The dims a ValueInfo declares, or None when it declares no shape."""
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    dims: Dims = []
    for d in t.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return dims


def _format_dims(dims: Dims) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def bind_shapes(inputs, shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """The static shape of every graph input: declared, or bound by ``shapes``
    (NAME is an input, binding its whole shape, or a symbolic dimension,
    binding that symbol wherever it occurs)."""
    names = {vi.name for vi in inputs}
    symbols = {d for vi in inputs if vi.type.HasField("tensor_type")
               for d in (declared_dims(vi) or []) if isinstance(d, str)}
    for key, value in shapes.items():
        if key not in names and key not in symbols:
            raise ImportFailure(f"--shape {key}: the model has no input or symbolic "
                                f"dimension named '{key}'")
        if any(v <= 0 for v in value):
            raise ImportFailure(f"--shape {key}: dimensions must be positive")
        if key not in names and len(value) != 1:
            raise ImportFailure(f"--shape {key}: '{key}' is a dimension; give one size")
    return {vi.name: _bind_input(vi, shapes) for vi in inputs}


def _bind_input(vi, shapes: dict[str, tuple[int, ...]]) -> tuple[int, ...]:
    if not vi.type.HasField("tensor_type"):
        kind = vi.type.WhichOneof("value") or "no type"
        raise ImportFailure(f"input '{vi.name}' is not a tensor ({kind}); swir-import "
                            "takes tensor inputs only")
    dims = declared_dims(vi)
    given = shapes.get(vi.name)
    if given is not None:
        if dims is not None and len(dims) != len(given):
            raise ImportFailure(f"--shape {vi.name}: the input has rank {len(dims)} "
                                f"{_format_dims(dims)}, the binding has {len(given)} dimensions")
        for axis, (d, g) in enumerate(zip(dims or [], given)):
            if isinstance(d, int) and d != g:
                raise ImportFailure(f"--shape {vi.name}: axis {axis} is {d} in the model, "
                                    f"the binding says {g}")
        return tuple(given)
    if dims is None:
        raise ImportFailure(f"input '{vi.name}' has no declared shape; bind it with "
                            f"--shape {vi.name}=D0,D1,...")
    out = []
    for axis, d in enumerate(dims):
        if isinstance(d, str) and d in shapes:
            d = shapes[d][0]
        if d is None or isinstance(d, str):
            what = f"dynamic dimension '{d}'" if d else "an unknown dimension"
            raise ImportFailure(f"input '{vi.name}' has {what} (axis {axis} of "
                                f"{_format_dims(dims)}); bind it with --shape "
                                f"{vi.name}=D0,D1,...{' or --shape ' + d + '=SIZE' if d else ''}")
        if d <= 0:
            raise ImportFailure(f"input '{vi.name}' has size {d} on axis {axis}; swir tensors "
                                "have positive dimensions")
        out.append(d)
    return tuple(out)


def bound_symbols(inputs, bound: dict[str, tuple[int, ...]],
                  shapes: dict[str, tuple[int, ...]]) -> dict[str, int]:
    """Symbolic dimension → its size, from the bindings; a symbol bound to two
    sizes is an error (the model says they are equal)."""
    symbols: dict[str, int] = {}
    for vi in inputs:
        for axis, d in enumerate(declared_dims(vi) or []):
            if not isinstance(d, str):
                continue
            size = bound[vi.name][axis]
            if symbols.setdefault(d, size) != size:
                raise ImportFailure(f"dimension '{d}' is bound to {symbols[d]} and to {size} "
                                    f"(axis {axis} of input '{vi.name}')")
    for key, value in shapes.items():
        if key in bound:
            continue
        if symbols.get(key, value[0]) != value[0]:
            raise ImportFailure(f"--shape {key}={value[0]} contradicts another binding, which "
                                f"makes '{key}' {symbols[key]}")
        symbols[key] = value[0]
    return symbols


def declared_types(graph) -> dict[str, tuple[int, Any]]:
    """ONNX name → (element type, dims or None) for what the model declares:
    graph outputs and value_info."""
    out = {}
    for vi in list(graph.value_info) + list(graph.output):
        if vi.type.HasField("tensor_type"):
            out[vi.name] = (vi.type.tensor_type.elem_type, declared_dims(vi))
    return out


def live_nodes(graph, available: set[str]) -> tuple[list[tuple[Any, int]], set[str]]:
    """The nodes the graph outputs depend on, each after its producers, with
    their positions in the model; and the names some live node or the graph
    outputs read."""
    _unique([vi.name for vi in graph.input], "graph input")
    _unique([t.name for t in graph.initializer], "initializer")
    producer: dict[str, int] = {}
    for i, node in enumerate(graph.node):
        for out in node.output:
            if not out:
                continue
            if out in producer or out in available or out in _input_names(graph):
                first = (describe(graph.node[producer[out]], producer[out])
                         if out in producer else "a graph input or initializer")
                raise ImportFailure(f"{describe(node, i)}: tensor '{out}' is also defined by "
                                    f"{first}")
            producer[out] = i
    live, used = _mark_live(graph, producer, available | _input_names(graph))
    return _dependency_order(graph, live, producer), used


def reads(node) -> list[str]:
    """The names a node reads: its inputs, then the outer-scope names its
    subgraphs (Loop's body, If's branches) read, which are inputs as much."""
    names = [n for n in node.input if n]
    for a in node.attribute:
        for g in ([a.g] if a.type == 5 else list(a.graphs) if a.type == 10 else []):  # GRAPH(S)
            names += [n for n in outer_names(g) if n not in names]
    return names


def outer_names(graph) -> list[str]:
    """The names a subgraph reads from the scopes around it."""
    defined = {vi.name for vi in graph.input} | {t.name for t in graph.initializer}
    defined |= {o for node in graph.node for o in node.output if o}
    read = [n for node in graph.node for n in reads(node)] + [o.name for o in graph.output]
    return list(dict.fromkeys(n for n in read if n not in defined))


def _unique(names: list[str], what: str) -> None:
    seen = set()
    for name in names:
        if name in seen:
            raise ImportFailure(f"{what} '{name}' is defined twice")
        seen.add(name)


def _input_names(graph) -> set[str]:
    return {vi.name for vi in graph.input}


def _mark_live(graph, producer: dict[str, int], sources: set[str]) -> tuple[set[int], set[str]]:
    used = {o.name for o in graph.output}
    for name in used:
        if name not in producer and name not in sources:
            raise ImportFailure(f"graph output '{name}' is not produced by any node, "
                                "initializer or input")
    live: set[int] = set()
    stack = [producer[n] for n in used if n in producer]
    while stack:
        i = stack.pop()
        if i in live:
            continue
        live.add(i)
        node = graph.node[i]
        for name in reads(node):
            used.add(name)
            if name in producer:
                stack.append(producer[name])
            elif name not in sources:
                raise ImportFailure(f"{describe(node, i)}: input '{name}' is not produced by "
                                    "any node, initializer or graph input")
    return live, used


def _dependency_order(graph, live: set[int], producer: dict[str, int]) -> list[tuple[Any, int]]:
    """Kahn's algorithm, preferring model order (models are usually sorted)."""
    deps = {i: {producer[n] for n in reads(graph.node[i]) if n in producer} for i in live}
    users: dict[int, list[int]] = {i: [] for i in live}
    for i, ds in deps.items():
        for d in ds:
            users[d].append(i)
    waiting = {i: len(ds) for i, ds in deps.items()}
    ready = [i for i, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append((graph.node[i], i))
        for u in users[i]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(live):
        stuck = min(i for i, n in waiting.items() if n > 0)
        raise ImportFailure(f"{describe(graph.node[stuck], stuck)}: the graph has a cycle "
                            "through this node")
    return order
