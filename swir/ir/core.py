"""The IR core: values with use lists, instructions, blocks, regions, functions, modules.

Structure (DLVM's, with MLIR's nested regions)::

    Module ── globals / buffers / functions
    Function ── params, body Region
    Region ── Blocks
    Block ── label, block arguments, Instructions
    Instruction ── opname, operand slots, attributes, results, nested Regions

An instruction's operands are *slots* as written in the text: a plain Value,
an index :class:`~swir.ir.affine.Expr`, an :class:`Access` (``%A[%i, 2*%j : 2*%j + 2]``),
a :class:`Successor` (``'bb1(%v)``), an :class:`Apply` (``@f(%x)``), a
:class:`Constraint` (``%i + 1 >= 0``) or a :class:`Literal` / :class:`Dense`
constant. Every Value a slot reads is a use, so replace-all-uses and erase keep
use lists exact however the value is referenced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Protocol

from swir.diagnostics import Location
from swir.ir.affine import Expr
from swir.ir.module_attrs import read_attr
from swir.ir.types import Type

STAGES = ("graph", "loop", "buffered", "dma")


# --------------------------------------------------------------------------
# Op definitions
# --------------------------------------------------------------------------

class OpError(Exception):
    """Raised by an op's rules; the verifier adds the op's location and name."""


class OpDefinition(Protocol):
    """What the core and the builder read of an op's definition
    (swir.ops.registry.OpDef has more)."""

    name: str
    terminator: bool
    constant_like: bool     # its result is operand 0, a literal (swir.ir.constants)
    # Result-type rule: the result types, or raises OpError; None: no results.
    infer: Callable[[Any], list[Type]] | None


# The core knows ops only by name: the op set sits a layer above the IR, so it
# installs the lookup from a name to its definition (swir.ops.registry does;
# importing the swir package loads the op set).
_op_definitions: Callable[[str], OpDefinition | None] | None = None


def install_op_definitions(lookup: Callable[[str], OpDefinition | None]) -> None:
    """Make ``lookup`` the source of :attr:`Instruction.opdef`."""
    global _op_definitions
    _op_definitions = lookup


def op_definition(opname: str) -> OpDefinition | None:
    """The installed op set's definition of ``opname`` (None: no such op)."""
    if _op_definitions is None:
        raise RuntimeError("no op set installed: import swir.ops")
    return _op_definitions(opname)


# --------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------

class Value:
    """An SSA value: defined once, used by instructions (counted per occurrence)."""

    __slots__ = ("type", "name", "_uses", "__weakref__")

    def __init__(self, type: Type, name: str | None = None) -> None:
        self.type = type
        self.name = name
        self._uses: list[Instruction] = []

    @property
    def uses(self) -> list["Instruction"]:
        """The using instructions, one entry per occurrence."""
        return list(self._uses)

    @property
    def users(self) -> list["Instruction"]:
        """The distinct using instructions, in first-use order."""
        return list(dict.fromkeys(self._uses))

    @property
    def has_uses(self) -> bool:
        return bool(self._uses)

    def replace_all_uses_with(self, new: "Value") -> None:
        if new is self:
            return
        for user in self.users:
            user.replace_uses_of(self, new)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} %{self.name}: {self.type}>"

    # Index arithmetic, so builders can write ``2 * oh + kh - 3``.
    def __add__(self, o: Any) -> Expr: return Expr.of(self) + o
    def __radd__(self, o: Any) -> Expr: return Expr.of(o) + self
    def __sub__(self, o: Any) -> Expr: return Expr.of(self) - o
    def __rsub__(self, o: Any) -> Expr: return Expr.of(o) - self
    def __mul__(self, o: Any) -> Expr: return Expr.of(self) * o
    def __rmul__(self, o: Any) -> Expr: return Expr.of(o) * self
    def __neg__(self) -> Expr: return -Expr.of(self)


class _OwnedValue(Value):
    """A value defined at position ``index`` of its ``owner``."""

    __slots__ = ("owner", "index")

    def __init__(self, type: Type, owner: Any, index: int, name: str | None = None) -> None:
        super().__init__(type, name)
        self.owner = owner
        self.index = index


class Result(_OwnedValue):
    """Result ``index`` of instruction ``owner``."""

    __slots__ = ()
    owner: "Instruction"


class BlockArgument(_OwnedValue):
    """Argument ``index`` of block ``owner`` (a loop body's induction variable, too)."""

    __slots__ = ()
    owner: "Block"


class FuncParam(_OwnedValue):
    """Parameter ``index`` of function ``owner``."""

    __slots__ = ()
    owner: "Function"


# --------------------------------------------------------------------------
# Module-level symbols
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class FileInit:
    """Contents stored in a sidecar file: ``file "x.weights" offset N`` (bytes)."""

    path: str
    offset: int


@dataclass(frozen=True, eq=False)
class ArrayInit:
    """Contents computed at compile time (folded constants, folded batch norm,
    weights in a new layout): a numpy array of the global's shape and element
    type, held in memory. The printer writes it as a ``dense<...>`` literal, or
    into a sidecar weight file when the tool writing the module gives one."""

    array: Any  # numpy.ndarray (core does not import numpy)


@dataclass(frozen=True, eq=False)
class Dense:
    """A constant: a splat scalar (``dense<0.0>``) or nested lists (``dense<[1.0, 2.0]>``)."""

    value: Any  # a number, or a (nested) tuple of numbers

    @property
    def is_splat(self) -> bool:
        return not isinstance(self.value, tuple)

    def flat(self) -> list:
        out: list = []

        def walk(v: Any) -> None:
            if isinstance(v, tuple):
                for x in v:
                    walk(x)
            else:
                out.append(v)
        walk(self.value)
        return out

    def shape(self) -> tuple[int, ...]:
        """The nesting shape of a literal list (checked rectangular by the verifier)."""
        dims: list[int] = []
        v = self.value
        while isinstance(v, tuple):
            dims.append(len(v))
            if not v:
                break
            v = v[0]
        return tuple(dims)

    def key(self) -> tuple:
        return ("dense", value_key(self.value))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Dense) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())


def value_key(v: Any) -> Any:
    """A hashable key equal exactly when two constants or attribute values are the
    same: floats compare by their spelling, so -0.0 differs from 0.0 and every nan
    is one value; 1 (int), 1.0 (float) and true (bool) all differ."""
    if isinstance(v, (tuple, list)):
        return tuple(value_key(x) for x in v)
    if isinstance(v, float):
        return ("float", "nan" if math.isnan(v) else repr(v))
    key = getattr(v, "key", None)
    if callable(key):
        return key()
    return (type(v).__name__, v)


class SymbolRef(str):
    """An attribute value naming a module symbol: ``{callee = @f}``."""

    __slots__ = ()


class Global(Value):
    """A module-level ``global`` (constant data) or ``buffer`` (memory to plan)."""

    __slots__ = ("kind", "init", "attrs", "module", "loc")

    def __init__(self, name: str, type: Type, kind: str = "global",
                 init: FileInit | Dense | ArrayInit | None = None, attrs: dict | None = None,
                 loc: Location | None = None):
        super().__init__(type, name)
        self.kind = kind
        self.init = init
        self.attrs = dict(attrs or {})
        self.module: Module | None = None
        self.loc = loc


# --------------------------------------------------------------------------
# Operand slots
# --------------------------------------------------------------------------

class Slot:
    """An operand position that reads Values."""

    __slots__ = ()

    def values(self) -> Iterator[Value]:
        raise NotImplementedError

    def substitute(self, mapping: Mapping[Value, Value]) -> "Slot":
        raise NotImplementedError

    def key(self) -> tuple:
        raise NotImplementedError


@dataclass(frozen=True, eq=False)
class Range:
    """``lo : hi`` inside a subscript: the half-open index range [lo, hi)."""

    lo: Expr
    hi: Expr

    def key(self) -> tuple:
        return ("range", self.lo.key(), self.hi.key())


@dataclass(frozen=True, eq=False)
class Access(Slot):
    """``%A[e0, e1 : e2, ...]``: one element, or a rectangular region with ranges."""

    base: Value
    indices: tuple[Expr | Range, ...]

    def values(self) -> Iterator[Value]:
        yield self.base
        for ix in self.indices:
            if isinstance(ix, Range):
                yield from ix.lo.values()
                yield from ix.hi.values()
            else:
                yield from ix.values()

    def substitute(self, mapping: Mapping[Value, Value]) -> "Access":
        def sub(ix: Expr | Range) -> Expr | Range:
            if isinstance(ix, Range):
                return Range(ix.lo.substitute(mapping), ix.hi.substitute(mapping))
            return ix.substitute(mapping)
        return Access(mapping.get(self.base, self.base), tuple(sub(i) for i in self.indices))

    def key(self) -> tuple:
        return ("access", id(self.base),
                tuple(i.key() for i in self.indices))

    @property
    def is_region(self) -> bool:
        return any(isinstance(i, Range) for i in self.indices)


@dataclass(frozen=True, eq=False)
class Successor(Slot):
    """``'bb1(%a, %b)``: a branch target and the values passed to its arguments."""

    block: "Block"
    args: tuple[Value, ...] = ()

    def values(self) -> Iterator[Value]:
        yield from self.args

    def substitute(self, mapping: Mapping[Value, Value]) -> "Successor":
        return Successor(self.block, tuple(mapping.get(a, a) for a in self.args))

    def key(self) -> tuple:
        return ("succ", id(self.block), tuple(id(a) for a in self.args))


@dataclass(frozen=True, eq=False)
class Apply(Slot):
    """``@f(%x, %y)``: a function symbol applied to arguments (call, spawn)."""

    callee: str
    args: tuple[Value, ...] = ()

    def values(self) -> Iterator[Value]:
        yield from self.args

    def substitute(self, mapping: Mapping[Value, Value]) -> "Apply":
        return Apply(self.callee, tuple(mapping.get(a, a) for a in self.args))

    def key(self) -> tuple:
        return ("apply", self.callee, tuple(id(a) for a in self.args))


RELATIONS = (">=", "<=", "==", "!=", ">", "<")


@dataclass(frozen=True, eq=False)
class Constraint(Slot):
    """``lhs REL rhs`` between index expressions (``if`` guards)."""

    lhs: Expr
    rel: str
    rhs: Expr

    def __post_init__(self) -> None:
        # Accept Values and ints on either side, as the builder's users write them.
        object.__setattr__(self, "lhs", Expr.of(self.lhs))
        object.__setattr__(self, "rhs", Expr.of(self.rhs))
        if self.rel not in RELATIONS:
            raise ValueError(f"unknown relation '{self.rel}'")

    def values(self) -> Iterator[Value]:
        yield from self.lhs.values()
        yield from self.rhs.values()

    def substitute(self, mapping: Mapping[Value, Value]) -> "Constraint":
        return Constraint(self.lhs.substitute(mapping), self.rel, self.rhs.substitute(mapping))

    def key(self) -> tuple:
        return ("cons", self.lhs.key(), self.rel, self.rhs.key())

    def holds(self, env: Mapping[Value, int]) -> bool:
        a, b = self.lhs.evaluate(env), self.rhs.evaluate(env)
        return {">=": a >= b, "<=": a <= b, "==": a == b, "!=": a != b,
                ">": a > b, "<": a < b}[self.rel]


@dataclass(frozen=True, eq=False)
class Literal(Slot):
    """A float or boolean constant operand (``const 0.5 : f32``); integers are Exprs."""

    value: float | bool

    def values(self) -> Iterator[Value]:
        return iter(())

    def substitute(self, mapping: Mapping[Value, Value]) -> "Literal":
        return self

    def key(self) -> tuple:
        return ("lit", value_key(self.value))


@dataclass(frozen=True, eq=False)
class DenseSlot(Slot):
    """A ``dense<...>`` constant operand."""

    dense: Dense

    def values(self) -> Iterator[Value]:
        return iter(())

    def substitute(self, mapping: Mapping[Value, Value]) -> "DenseSlot":
        return self

    def key(self) -> tuple:
        return self.dense.key()


SlotLike = Value | Expr | Slot


def slot_values(slot: SlotLike) -> Iterator[Value]:
    if isinstance(slot, Value):
        yield slot
    else:
        yield from slot.values()


def slot_substitute(slot: SlotLike, mapping: Mapping[Value, Value]) -> SlotLike:
    if isinstance(slot, Value):
        return mapping.get(slot, slot)
    return slot.substitute(mapping)


def slot_key(slot: SlotLike) -> tuple:
    if isinstance(slot, Value):
        return ("value", id(slot))
    return slot.key()


# --------------------------------------------------------------------------
# Instructions, blocks, regions
# --------------------------------------------------------------------------

class Instruction:
    """One operation: ``%r = opname slots -> slots {attrs} : types regions``."""

    __slots__ = ("opname", "args", "arrow", "attrs", "results", "regions", "parent",
                 "loc", "__weakref__")

    def __init__(self, opname: str, args: list[SlotLike] | None = None,
                 result_types: list[Type] | None = None, attrs: dict | None = None,
                 regions: list["Region"] | None = None, arrow: int | None = None,
                 result_names: list[str | None] | None = None,
                 loc: Location | None = None) -> None:
        self.opname = opname
        self.args: list[SlotLike] = []
        self.arrow = arrow  # slots from this index on were written after "->"
        self.attrs: dict[str, Any] = dict(attrs or {})
        names = _padded(result_names, len(result_types or []))
        self.results = [Result(t, self, i, n)
                        for i, (t, n) in enumerate(zip(result_types or [], names))]
        self.regions: list[Region] = []
        self.parent: Block | None = None
        self.loc = loc
        self.set_args(list(args or []))
        for r in regions or []:
            self.add_region(r)

    # -- operands ------------------------------------------------------------
    @property
    def opdef(self) -> OpDefinition | None:
        return op_definition(self.opname)

    def isa(self, *defs: OpDefinition) -> bool:
        """Is this an instance of one of the op definitions ``defs``
        (``inst.isa(LOAD, STORE)``, as MLIR's ``isa<LoadOp, StoreOp>``)?
        Compared by name: the registry holds one definition per name."""
        name = self.opname
        return any(d.name == name for d in defs)

    @property
    def operands(self) -> list[Value]:
        """Every Value this instruction reads, in slot order (with repeats)."""
        return [v for s in self.args for v in slot_values(s)]

    def set_args(self, args: list[SlotLike]) -> None:
        for v in self.operands:
            v._uses.remove(self)
        self.args = [_normalise_slot(a) for a in args]
        for v in self.operands:
            v._uses.append(self)

    def replace_uses_of(self, old: Value, new: Value) -> None:
        self.set_args([slot_substitute(s, {old: new}) for s in self.args])

    def set_result_types(self, types: list[Type], names: list[str | None] | None = None) -> None:
        """Replace the results (none may be in use) with fresh ones of these types."""
        if any(r.has_uses for r in self.results):
            raise ValueError(f"cannot retype '{self.opname}': its results are in use")
        self.results = [Result(t, self, i, n)
                        for i, (t, n) in enumerate(zip(types, _padded(names, len(types))))]

    @property
    def result(self) -> Result:
        if len(self.results) != 1:
            raise ValueError(f"'{self.opname}' has {len(self.results)} results, not one")
        return self.results[0]

    # -- regions -------------------------------------------------------------
    def add_region(self, region: "Region") -> "Region":
        region.parent = self
        self.regions.append(region)
        return region

    # -- placement -----------------------------------------------------------
    @property
    def function(self) -> "Function | None":
        b = self.parent
        return b.function if b is not None else None

    def insert_before(self, new: "Instruction") -> "Instruction":
        assert self.parent is not None, "instruction is not in a block"
        new.detach()  # first: moving within this block shifts the indices
        return self.parent.insert(self.parent.index_of(self), new)

    def insert_after(self, new: "Instruction") -> "Instruction":
        assert self.parent is not None, "instruction is not in a block"
        new.detach()
        return self.parent.insert(self.parent.index_of(self) + 1, new)

    def detach(self) -> "Instruction":
        """Remove from its block, keeping operands and results intact (for moves)."""
        if self.parent is not None:
            del self.parent.instructions[self.parent.index_of(self)]
            self.parent = None
        return self

    def erase(self) -> None:
        """Delete this instruction; its results must have no uses left."""
        for r in self.results:
            if r.has_uses:
                raise ValueError(f"cannot erase '{self.opname}': result %{r.name} still has uses")
        self.drop_references()
        self.detach()

    def drop_references(self) -> None:
        """Release every use this instruction (and its regions) hold."""
        for region in self.regions:
            for block in region.blocks:
                for inst in block.instructions:
                    inst.drop_references()
        self.set_args([])

    def walk(self) -> Iterator["Instruction"]:
        """This instruction, then every instruction nested in its regions (pre-order)."""
        yield self
        for region in self.regions:
            yield from region.walk()

    def __repr__(self) -> str:
        return f"<Instruction {self.opname} at {self.loc}>"


def _padded(names: list[str | None] | None, n: int) -> list[str | None]:
    """Names for n values: missing ones are None (printed as numbers); extra ones are an error."""
    names = list(names or [])
    if len(names) > n:
        raise ValueError(f"{len(names)} names given for {n} values")
    return names + [None] * (n - len(names))


def _normalise_slot(s: SlotLike) -> SlotLike:
    """A bare Value stays a Value; a one-value Expr becomes that Value."""
    if isinstance(s, Expr):
        v = s.as_value()
        return v if v is not None else s
    if isinstance(s, int) and not isinstance(s, bool):
        return Expr.of(s)
    return s


class Block:
    """A basic block: label, arguments, and a list of instructions."""

    __slots__ = ("label", "args", "instructions", "parent", "loc", "_hint")

    def __init__(self, label: str | None = None, arg_types: list[Type] | None = None,
                 arg_names: list[str | None] | None = None, loc: Location | None = None):
        self.label = label
        names = _padded(arg_names, len(arg_types or []))
        self.args = [BlockArgument(t, self, i, n)
                     for i, (t, n) in enumerate(zip(arg_types or [], names))]
        self.instructions: list[Instruction] = []
        self.parent: Region | None = None
        self.loc = loc
        self._hint = 0  # where index_of found an instruction last

    def add_argument(self, type: Type, name: str | None = None) -> BlockArgument:
        a = BlockArgument(type, self, len(self.args), name)
        self.args.append(a)
        return a

    def append(self, inst: Instruction) -> Instruction:
        return self.insert(len(self.instructions), inst)

    def insert(self, index: int, inst: Instruction) -> Instruction:
        if inst.parent is not None:
            inst.detach()
        inst.parent = self
        self.instructions.insert(index, inst)
        return inst

    def index_of(self, inst: Instruction) -> int:
        """The position of ``inst`` (an instruction is in a block at most once).

        Passes that rewrite a block insert before and remove instructions in
        order, so the search starts a little before the position this block
        last returned (with list.index: Instruction has no __eq__, so it
        compares identities, in C); only a miss scans the rest. A scan from
        the start for each insertion made rewriting a long block quadratic."""
        insts = self.instructions
        start = max(0, min(self._hint, len(insts)) - 8)
        try:
            i = insts.index(inst, start)
        except ValueError:
            try:
                i = insts.index(inst, 0, start)
            except ValueError:
                raise ValueError("instruction not in block") from None
        self._hint = i
        return i

    @property
    def terminator(self) -> Instruction | None:
        if self.instructions:
            last = self.instructions[-1]
            d = last.opdef
            if d is not None and d.terminator:
                return last
        return None

    @property
    def successors(self) -> list["Block"]:
        t = self.terminator
        if t is None:
            return []
        return [s.block for s in t.args if isinstance(s, Successor)]

    @property
    def function(self) -> "Function | None":
        r = self.parent
        while r is not None:
            owner = r.parent
            if isinstance(owner, Function):
                return owner
            if owner is None or owner.parent is None:
                return None
            r = owner.parent.parent
        return None

    def walk(self) -> Iterator[Instruction]:
        for inst in list(self.instructions):
            yield from inst.walk()


class Region:
    """A list of blocks owned by a function or a structured instruction."""

    __slots__ = ("blocks", "parent")

    def __init__(self, blocks: list[Block] | None = None) -> None:
        self.blocks: list[Block] = []
        self.parent: Instruction | Function | None = None
        for b in blocks or []:
            self.add_block(b)

    def add_block(self, block: Block) -> Block:
        block.parent = self
        self.blocks.append(block)
        return block

    @property
    def entry(self) -> Block:
        return self.blocks[0]

    def walk(self) -> Iterator[Instruction]:
        for b in self.blocks:
            yield from b.walk()


# --------------------------------------------------------------------------
# Functions and modules
# --------------------------------------------------------------------------

FUNC_KINDS = ("func", "kernel")
FUNC_TARGETS = (None, "host", "cpe")


class Function:
    """``[host|cpe] func|kernel @name(params) -> results { body }``.

    A ``func`` returns values through ``return``; a ``kernel`` (loop stage and
    later) works on buffers and returns nothing. A function without a body is
    a declaration.
    """

    def __init__(self, name: str, param_types: list[Type], result_types: list[Type],
                 kind: str = "func", target: str | None = None,
                 param_names: list[str | None] | None = None, attrs: dict | None = None,
                 loc: Location | None = None, body: Region | None = None) -> None:
        self.name = name
        self.kind = kind
        self.target = target
        names = _padded(param_names, len(param_types))
        self.params = [FuncParam(t, self, i, n) for i, (t, n) in enumerate(zip(param_types, names))]
        self.result_types = list(result_types)
        self.attrs = dict(attrs or {})
        self.loc = loc
        self.module: Module | None = None
        self.body: Region | None = None
        if body is not None:
            self.set_body(body)

    def add_param(self, type: Type, name: str | None = None) -> "FuncParam":
        """Append a parameter (callers must pass one more argument)."""
        p = FuncParam(type, self, len(self.params), name)
        self.params.append(p)
        return p

    def set_body(self, body: Region) -> Region:
        body.parent = self
        self.body = body
        return body

    @property
    def is_declaration(self) -> bool:
        return self.body is None

    def walk(self) -> Iterator[Instruction]:
        if self.body is not None:
            yield from self.body.walk()


class _Items(list):
    """A module's items: a list that counts its changes (``version``), so the
    module can remember facts about their order (where the first function
    is) until the list changes."""

    __slots__ = ("version",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.version = 0


def _counting(name: str) -> Any:
    method = getattr(list, name)

    def changed(self: _Items, *args: Any, **kwargs: Any) -> Any:
        self.version += 1
        return method(self, *args, **kwargs)
    changed.__name__ = name
    return changed


for _name in ("append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse",
              "__setitem__", "__delitem__", "__iadd__", "__imul__"):
    setattr(_Items, _name, _counting(_name))


class Module:
    """``module "name"`` / ``stage S``, then globals, buffers and functions in order."""

    def __init__(self, name: str, stage: str = "graph") -> None:
        self.name = name
        self.stage = stage
        self.items: list[Global | Function] = []
        self._symbols: dict[str, Global | Function] = {}
        # unique_name's memory: base -> n with base, base_1, ..., base_n all
        # symbols (forgotten when a symbol is removed), so asking for the same
        # base again and again does not probe from base_1 each time.
        self._taken: dict[str, int] = {}
        # ranks, split, target, ldm_size: read them by attr(name)
        self.attrs: dict[str, Any] = {}
        self.loc: Location | None = None
        # The directory that sidecar weight files (``file "x.weights"``) are
        # relative to: the module file's, set by the parser (None: unknown).
        self.base_dir: str | None = None

    def attr(self, name: str) -> Any:
        """The module attribute ``name`` (swir/ir/module_attrs.py): its value if
        written and legal, else its default (the target of an unset ``target``
        is the default target, its ``ldm_size`` that target's LDM)."""
        return read_attr(self.attrs, name)

    @property
    def items(self) -> list[Global | Function]:
        return self._items

    @items.setter
    def items(self, items: list[Global | Function]) -> None:
        self._items = _Items(items)
        self._first_function: tuple[int, int] | None = None  # (items.version, index)

    def move_weight_files(self, directory: str | None) -> None:
        """Name every sidecar weight file (``file "x.weights"``) as a module
        file in ``directory`` must (paths are relative to the module's file),
        or by absolute path when ``directory`` is None: before writing the
        module somewhere else than the file it was read from."""
        import os
        for g in self.globals:
            init = g.init
            if isinstance(init, FileInit) and not os.path.isabs(init.path):
                # real paths: the system resolves ".." after following symlinks
                where = os.path.realpath(os.path.join(self.base_dir or ".", init.path))
                path = where if directory is None else \
                    os.path.relpath(where, os.path.realpath(directory or "."))
                g.init = FileInit(path, init.offset)
        self.base_dir = os.path.abspath(directory) if directory is not None else self.base_dir

    def unique_name(self, base: str) -> str:
        """``base``, or ``base_1``, ``base_2``, ... : the first name no symbol has."""
        if base not in self._symbols:
            return base
        n = self._taken.get(base, 0)  # base_1 .. base_n are symbols
        name = f"{base}_{n + 1}"
        while name in self._symbols:
            n += 1
            name = f"{base}_{n + 1}"
        self._taken[base] = n
        return name

    def add(self, item: Global | Function, index: int | None = None) -> Global | Function:
        """Add ``item`` at the end of the items, or at position ``index``."""
        if item.name in self._symbols:
            raise ValueError(f"symbol @{item.name} is already defined")
        item.module = self
        first = self._first_function
        if index is None:
            self.items.append(item)
        else:
            self.items.insert(index, item)
        if first is not None and first[0] == self.items.version - 1 and \
                not isinstance(item, Function) and index is not None and 0 <= index <= first[1]:
            # A symbol placed before the first function: it moved one place on.
            self._first_function = (self.items.version, first[1] + 1)
        self._symbols[item.name] = item
        return item

    def remove(self, item: Global | Function) -> None:
        self.items.remove(item)
        del self._symbols[item.name]
        self._taken.clear()
        item.module = None

    def first_function_index(self) -> int:
        """The position of the first function among the items (their number
        if there is none). Remembered until the items change, or moved on by
        :meth:`add` placing a symbol before it: passes that add many
        constants before the functions do not scan the items for each."""
        items = self.items
        first = self._first_function
        if first is None or first[0] != items.version:
            index = next((k for k, item in enumerate(items) if isinstance(item, Function)),
                         len(items))
            first = self._first_function = (items.version, index)
        return first[1]

    def lookup(self, name: str) -> Global | Function | None:
        return self._symbols.get(name)

    @property
    def functions(self) -> list[Function]:
        return [i for i in self.items if isinstance(i, Function)]

    @property
    def globals(self) -> list[Global]:
        return [i for i in self.items if isinstance(i, Global)]

    def walk(self) -> Iterator[Instruction]:
        for f in self.functions:
            yield from f.walk()
