"""Graphviz DOT of graph-stage functions (what -view-graph draws).

One ``digraph`` for the module: every op a box labelled with its name and
result types, an edge per value from its producer to each op that reads it,
function arguments (green) and results (orange) as ellipses, globals and
``const`` ops (the weights) dimmed, and every ``fused`` group a cluster
holding its ops, named after the value it produces. Edges go to the op
inside a group that reads the value (a group's block arguments stand for its
operands, its ``yield`` for its results), so the picture shows the dataflow,
not the nesting. Node ids are numbered in IR order (arguments, then ops as
printed, then results), so the text is deterministic and FileCheck can pin it.
"""

from __future__ import annotations

from swir.ir.core import Function, Global, Instruction, Module, Value

ARGUMENT = 'shape=ellipse, fillcolor="#d5e8d4", color="#82b366"'
RESULT = 'shape=ellipse, fillcolor="#ffe6cc", color="#d79b00"'
WEIGHT = 'style="filled,dashed", fillcolor="#f5f5f5", color="#b3b3b3", fontcolor="#8c8c8c"'
WEIGHT_EDGE = 'color="#b3b3b3", style=dashed'
CLUSTER = 'style="rounded,filled"; fillcolor="#eef3fb"; color="#6c8ebf"'
WEIGHT_OPS = ("const",)


def quote(text: str) -> str:
    """``text`` as a DOT double-quoted string: backslashes and quotes escaped,
    line breaks as DOT's ``\\n``, other control characters as spaces. Braces,
    ``<`` and ``|`` stay literal: every label here is a quoted string on a
    plain (non-record) shape, where they mean nothing to Graphviz."""
    out = []
    for c in text:
        if c in '\\"':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif ord(c) < 32 or ord(c) == 127:
            out.append(" ")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def value_label(v: Value) -> str:
    return f"%{v.name}" if v.name else "%?"


class GraphDrawing:
    """The DOT of one module's graph-stage functions, built in IR order."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self.lines: list[str] = []
        self.node_of: dict[Value, str] = {}   # a value -> the node that produces it
        self.weights: set[str] = set()        # nodes drawn dimmed
        self.edges: dict[tuple[str, str], None] = {}
        # Nodes of values no function defines (globals): drawn outside every cluster.
        self.outside: list[str] = []
        self.count = 0
        self.clusters = 0

    def dot(self, functions: list[Function]) -> str:
        name = self.module.name
        self.lines = [f"digraph {quote(name)} {{",
                      f"  // -view-graph of module {quote(name)}, stage {self.module.stage}",
                      f"  graph [fontname=\"Helvetica\", labelloc=t, label={quote(self._title(functions))}];",
                      "  node [shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\", "
                      "fontname=\"Helvetica\", fontsize=10];",
                      "  edge [color=\"#555555\", arrowsize=0.6];"]
        for f in functions:
            self._function(f, nested=len(functions) > 1)
        self.lines += self.outside
        for src, dst in self.edges:
            style = f" [{WEIGHT_EDGE}]" if src in self.weights else ""
            self.lines.append(f"  {src} -> {dst}{style};")
        self.lines.append("}")
        return "\n".join(self.lines) + "\n"

    def _title(self, functions: list[Function]) -> str:
        names = ", ".join(f"@{f.name}" for f in functions)
        return f"module {self.module.name}: {names} (graph stage)"

    def _node(self, label: str, style: str = "", indent: int = 1,
              outside: bool = False) -> str:
        node = f"n{self.count}"
        self.count += 1
        attrs = f"label={quote(label)}" + (f", {style}" if style else "")
        (self.outside if outside else self.lines).append("  " * indent + f"{node} [{attrs}];")
        return node

    def _function(self, f: Function, nested: bool) -> None:
        indent = 1
        if nested:
            self.lines.append(f"  subgraph cluster_{self.clusters} {{")
            self.lines.append(f"    label={quote('@' + f.name)}; style=dashed; color=\"#999999\";")
            self.clusters += 1
            indent = 2
        for p in f.params:
            self.node_of[p] = self._node(f"{value_label(p)}\n{p.type}", ARGUMENT, indent)
        assert f.body is not None
        for block in f.body.blocks:
            for a in block.args:
                self.node_of[a] = self._node(f"{value_label(a)}\n{a.type}", ARGUMENT, indent)
            for inst in block.instructions:
                self._instruction(inst, indent)
        if nested:
            self.lines.append("  }")

    def _instruction(self, inst: Instruction, indent: int) -> None:
        if inst.opname == "return":
            for k, v in enumerate(inst.operands):
                node = self._node(f"result {k}\n{v.type}", RESULT, indent)
                self._edge(v, node, indent)
            return
        if inst.opname == "fused" and len(inst.regions) == 1 \
                and len(inst.regions[0].blocks) == 1:
            self._fused(inst, indent)
            return
        types = "\n".join(f"{value_label(r)}: {r.type}" for r in inst.results)
        regions = f"\n({len(inst.regions)} region{'s' * (len(inst.regions) > 1)})" \
            if inst.regions else ""
        weight = inst.opname in WEIGHT_OPS
        node = self._node(f"{inst.opname}\n{types}{regions}".rstrip("\n"),
                          WEIGHT if weight else "", indent)
        if weight:
            self.weights.add(node)
        for v in _read_values(inst):
            self._edge(v, node, indent)
        for r in inst.results:
            self.node_of[r] = node

    def _fused(self, inst: Instruction, indent: int) -> None:
        block = inst.regions[0].blocks[0]
        for arg, operand in zip(block.args, inst.operands):
            self.node_of[arg] = self._source(operand, indent)
        pad = "  " * indent
        self.lines.append(f"{pad}subgraph cluster_{self.clusters} {{")
        self.clusters += 1
        label = "fused " + ", ".join(value_label(r) for r in inst.results)
        self.lines.append(f"{pad}  label={quote(label)}; {CLUSTER};")
        for inner in block.instructions:
            if inner.opname == "yield":
                for r, v in zip(inst.results, inner.operands):
                    self.node_of[r] = self._source(v, indent)
            else:
                self._instruction(inner, indent + 1)
        self.lines.append(f"{pad}}}")

    def _source(self, v: Value, indent: int) -> str:
        """The node producing ``v``: a global's node is made where first read."""
        node = self.node_of.get(v)
        if node is None:
            if isinstance(v, Global):
                node = self._node(f"@{v.name}\n{v.type}", WEIGHT, outside=True)
                self.weights.add(node)
            else:   # a value from a region the picture does not open
                node = self._node(f"{value_label(v)}\n{v.type}", "shape=ellipse",
                                  outside=True)
            self.node_of[v] = node
        return node

    def _edge(self, v: Value, node: str, indent: int) -> None:
        src = self._source(v, indent)
        if src != node:
            self.edges.setdefault((src, node))


def _read_values(inst: Instruction) -> list[Value]:
    """The values ``inst`` reads, its regions' reads from outside included,
    each once, in order."""
    found: dict[Value, None] = {}
    for v in inst.operands:
        found.setdefault(v)
    inside: set[Value] = set()
    for region in inst.regions:
        for block in region.blocks:
            inside.update(block.args)
        for nested in region.walk():
            inside.update(nested.results)
            for v in nested.operands:
                if v not in inside:
                    found.setdefault(v)
    return list(found)


def graph_dot(module: Module, functions: list[Function]) -> str:
    """The DOT picture of ``functions`` (graph stage, with bodies) of ``module``."""
    return GraphDrawing(module).dot(functions)
