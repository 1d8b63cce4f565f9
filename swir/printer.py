"""IR → canonical text.

Canonical means: one spelling per module, so ``print(parse(print(m)))`` is
byte-identical to ``print(m)``. Values keep their names; unnamed values are
numbered; a name that would clash with one visible in the same scope gets a
``_N`` suffix, so printed IR always parses back.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

from swir.ir.affine import Expr, format_expr
from swir.ir.core import (
    ArrayInit,
    Access,
    Apply,
    Block,
    Constraint,
    Dense,
    DenseSlot,
    FileInit,
    Function,
    Global,
    Instruction,
    Literal,
    Module,
    Range,
    Region,
    Successor,
    SymbolRef,
    Value,
)
from swir.ir.types import Type
from swir.limits import deep_recursion
from swir.ops.util import attr_or_default

_BARE = re.compile(r"[A-Za-z0-9_.$]+")
INDENT = "  "


def quote_name(sigil: str, name: str) -> str:
    return sigil + (name if _BARE.fullmatch(name) else json.dumps(name))


def format_float(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(float(x))


def format_number(x: Any) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    return format_float(x)


def format_dense(d: Dense) -> str:
    def walk(v: Any) -> str:
        if isinstance(v, tuple):
            return "[" + ", ".join(walk(x) for x in v) + "]"
        return format_number(v)
    return f"dense<{walk(d.value)}>"


def format_attr(v: Any) -> str:
    if isinstance(v, SymbolRef):
        return quote_name("@", v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (bool, int, float)):
        return format_number(v)
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(format_attr(x) for x in v) + "]"
    if isinstance(v, Type):
        return str(v)
    if isinstance(v, Dense):
        return format_dense(v)
    raise TypeError(f"cannot print attribute value {v!r}")


class _Names:
    """Scoped naming that mirrors the parser's scoping rules."""

    def __init__(self) -> None:
        self.scopes: list[set[str]] = [set()]
        self.names: dict[int, str] = {}
        self.counter = 0
        self.labels: dict[int, str] = {}
        self.order: dict[int, str] = {}  # unnamed value -> its number (see number())

    def visible(self, name: str) -> bool:
        return any(name in s for s in self.scopes)

    def number(self, f: Function) -> None:
        """Number f's unnamed values in textual order (outer code, a loop's
        body, then the code after it), so %0, %1, ... read top-down; numbers
        used as names in f are skipped."""
        values: list[Value] = list(f.params)

        def region(r: Region) -> None:
            for b in r.blocks:
                values.extend(b.args)
                for inst in b.instructions:
                    values.extend(inst.results)
                    for sub in inst.regions:
                        region(sub)
        if f.body is not None:
            region(f.body)
        explicit = {v.name for v in values if v.name is not None}
        n = 0
        for v in values:
            if v.name is None:
                while str(n) in explicit:
                    n += 1
                self.order[id(v)] = str(n)
                n += 1

    def declare(self, v: Value) -> None:
        base = v.name or self.order.get(id(v))
        if base is None:
            while self.visible(str(self.counter)):
                self.counter += 1
            base = str(self.counter)
            self.counter += 1
        name, n = base, 0
        while self.visible(name):
            n += 1
            name = f"{base}_{n}"
        self.scopes[-1].add(name)
        self.names[id(v)] = name

    def __call__(self, v: Value) -> str:
        if isinstance(v, Global):
            return quote_name("@", v.name)
        name = self.names.get(id(v))
        if name is None:  # a value not defined where the printer can see it
            name = f"<<unknown {v.name}>>"
        return quote_name("%", name)

    def declare_labels(self, blocks: list[Block]) -> None:
        """Unique labels in one region: unnamed blocks get 'entry / 'bbN, and a
        repeated label gets a _N suffix, so the output always parses."""
        used: set[str] = set()
        for i, b in enumerate(blocks):
            base = b.label or ("entry" if i == 0 else f"bb{i}")
            label, n = base, 0
            while label in used:
                n += 1
                label = f"{base}_{n}"
            used.add(label)
            self.labels[id(b)] = label

    def label(self, b: Block) -> str:
        return self.labels.get(id(b), b.label or "<<unknown block>>")

    def push(self) -> None:
        self.scopes.append(set())

    def pop(self) -> None:
        self.scopes.pop()


INLINE_ELEMENTS = 16  # computed constants up to this size are printed inline


def is_splat(a: Any) -> bool:
    """Every element has the same bits (so -0.0 and NaN payloads count)."""
    bits = a.reshape(-1).view(f"u{a.itemsize}")
    return bool(bits.size) and bool((bits == bits[0]).all())


def array_dense(a: Any) -> Dense:
    """A numpy array as a ``dense<...>`` literal: a splat when is_splat, else
    nested lists."""
    if is_splat(a):
        return Dense(a.reshape(-1)[0].item())

    def nest(v: Any) -> Any:
        return tuple(nest(x) for x in v) if isinstance(v, list) else v
    return Dense(nest(a.reshape(a.shape or (1,)).tolist()))


class WeightSink:
    """Where the printer puts computed constants (``ArrayInit``) larger than
    INLINE_ELEMENTS: bytes for a sidecar file, ``path`` as the module names it
    (relative to the module file), each array aligned to ``align`` bytes (the
    target's main-memory alignment, Target.mem_align), little-endian."""

    def __init__(self, path: str, align: int) -> None:
        self.path = path
        self.align = align
        self.data = bytearray()

    def add(self, a: Any) -> FileInit:
        self.data += b"\0" * (-len(self.data) % self.align)
        offset = len(self.data)
        self.data += a.astype(a.dtype.newbyteorder("<")).tobytes()
        return FileInit(self.path, offset)


class Printer:
    def __init__(self, weights: WeightSink | None = None) -> None:
        self.out: list[str] = []
        self.weights = weights

    # -- module ---------------------------------------------------------------------------
    def module(self, m: Module) -> str:
        stage = f"stage {m.stage}" + self.attr_dict(m.attrs, ())
        self.out = [f"module {json.dumps(m.name)}\n", stage + "\n"]
        prev: Global | Function | None = None
        for item in m.items:
            if prev is None or isinstance(item, Function) or isinstance(prev, Function):
                self.out.append("\n")
            if isinstance(item, Global):
                self.out.append(self.global_(item) + "\n")
            else:
                self.function(item)
            prev = item
        return "".join(self.out)

    def global_(self, g: Global) -> str:
        text = f"{g.kind} {quote_name('@', g.name)} : {g.type}"
        init = g.init
        if isinstance(init, ArrayInit):
            a = init.array
            big = self.weights is not None and a.size > INLINE_ELEMENTS and not is_splat(a)
            init = self.weights.add(a) if big else array_dense(a)
        if isinstance(init, FileInit):
            text += f" = file {json.dumps(init.path)} offset {init.offset}"
        elif isinstance(init, Dense):
            text += f" = {format_dense(init)}"
        return text + self.attr_dict(g.attrs, ())

    def attr_dict(self, attrs: dict[str, Any], order: tuple[str, ...],
                  skip: tuple[str, ...] = ()) -> str:
        keys = [k for k in order if k in attrs and k not in skip]
        keys += sorted(k for k in attrs if k not in order and k not in skip)
        if not keys:
            return ""
        return " {" + ", ".join(f"{k} = {format_attr(attrs[k])}" for k in keys) + "}"

    def function(self, f: Function) -> None:
        names = _Names()
        names.number(f)
        for p in f.params:
            names.declare(p)
        head = f"{f.target} " if f.target else ""
        params = ", ".join(f"{names(p)}: {p.type}" for p in f.params)
        head += f"{f.kind} {quote_name('@', f.name)}({params})"
        if len(f.result_types) == 1:
            head += f" -> {f.result_types[0]}"
        elif f.result_types:
            head += " -> (" + ", ".join(map(str, f.result_types)) + ")"
        if f.attrs:
            head += " attributes" + self.attr_dict(f.attrs, ())
        if f.body is None:
            self.out.append(head + "\n")
            return
        self.out.append(head + " {\n")
        self.region_body(f.body, names, 0, labelled=f.kind == "func")
        self.out.append("}\n")

    # -- regions ----------------------------------------------------------------------------
    def region_body(self, region: Region, names: _Names, depth: int, labelled: bool,
                    entry_args_in_head: bool = False) -> None:
        names.push()
        blocks = region.blocks
        names.declare_labels(blocks)
        for b in blocks:
            if not (entry_args_in_head and b is blocks[0]):
                for a in b.args:
                    names.declare(a)
            for inst in b.instructions:
                for r in inst.results:
                    names.declare(r)
        show_labels = labelled or len(blocks) > 1 or (blocks and blocks[0].args
                                                      and not entry_args_in_head)
        for b in blocks:
            if show_labels:
                self.out.append(INDENT * depth + self.block_label(b, names) + "\n")
            for inst in b.instructions:
                self.instruction(inst, names, depth + 1)
        names.pop()

    def block_label(self, b: Block, names: _Names) -> str:
        text = quote_name("'", names.labels[id(b)])
        if b.args:
            text += "(" + ", ".join(f"{names(a)}: {a.type}" for a in b.args) + ")"
        return text + ":"

    # -- instructions ---------------------------------------------------------------------
    def instruction(self, inst: Instruction, names: _Names, depth: int) -> None:
        pad = INDENT * depth
        head = ""
        if inst.results:
            head = ", ".join(names(r) for r in inst.results) + " = "
        d = inst.opdef
        order = d.attr_names if d is not None else ()
        if d is not None and d.syntax == "loop" and inst.regions and inst.regions[0].blocks \
                and inst.regions[0].blocks[0].args:
            body = inst.regions[0]
            iv = body.blocks[0].args[0]
            names.push()
            names.declare(iv)
            lb, ub = (self.slot(s, names) for s in inst.args[:2])
            step = attr_or_default(inst, "step")
            text = f"{pad}{head}{inst.opname} {names(iv)} = {lb} to {ub}"
            if step != 1:
                text += f" step {step}"
            text += self.attr_dict(inst.attrs, order, skip=("step",))
            self.out.append(text + " {\n")
            self.region_body(body, names, depth, labelled=False, entry_args_in_head=True)
            names.pop()
            self.out.append(pad + "}\n")
            return
        text = pad + head + inst.opname
        args = [self.slot(s, names) for s in inst.args]
        if inst.arrow is not None:
            src, dst = args[:inst.arrow], args[inst.arrow:]
            if src:
                text += " " + ", ".join(src)
            text += " -> " + ", ".join(dst)
        elif args:
            text += " " + ", ".join(args)
        text += self.attr_dict(inst.attrs, order)
        if inst.results:
            text += " : " + ", ".join(str(r.type) for r in inst.results)
        if not inst.regions:
            self.out.append(text + "\n")
            return
        self.out.append(text + " {\n")
        for i, region in enumerate(inst.regions):
            if i:
                self.out.append(pad + "} else {\n")
            self.region_body(region, names, depth, labelled=False)
        self.out.append(pad + "}\n")

    def slot(self, s: Any, names: Callable[[Value], str]) -> str:
        if isinstance(s, Value):
            return names(s)
        if isinstance(s, Expr):
            return format_expr(s, names)
        if isinstance(s, Access):
            idx = ", ".join(format_expr(i, names) if isinstance(i, Expr) else
                            f"{format_expr(i.lo, names)} : {format_expr(i.hi, names)}"
                            for i in s.indices)
            return f"{names(s.base)}[{idx}]"
        if isinstance(s, Successor):
            label = quote_name("'", names.label(s.block))
            if not s.args:
                return label
            return label + "(" + ", ".join(names(a) for a in s.args) + ")"
        if isinstance(s, Apply):
            return quote_name("@", s.callee) + "(" + ", ".join(names(a) for a in s.args) + ")"
        if isinstance(s, Constraint):
            return f"{format_expr(s.lhs, names)} {s.rel} {format_expr(s.rhs, names)}"
        if isinstance(s, Literal):
            return format_number(s.value)
        if isinstance(s, DenseSlot):
            return format_dense(s.dense)
        if isinstance(s, Range):
            return f"{format_expr(s.lo, names)} : {format_expr(s.hi, names)}"
        raise TypeError(f"cannot print operand {s!r}")


def print_module(m: Module, weights: WeightSink | None = None) -> str:
    """The module's text. Computed constants go to ``weights`` when given
    (except small ones), else they are printed inline."""
    with deep_recursion():
        return Printer(weights).module(m)
