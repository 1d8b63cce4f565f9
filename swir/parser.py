"""Textual IR → IR objects.

Two steps. Lark's LALR parser, with an inline transformer, turns text into a
light syntax tree of tuples that keep their tokens (for positions). A
top-down builder then creates the IR, resolving ``%names`` with region scoping:
a region sees its own definitions (forward references allowed, as in a CFG;
dominance is the verifier's job) and those of enclosing regions, so sibling
loops may reuse ``%i``. Every error is a :class:`~swir.diagnostics.Diagnostic`
pointing at the offending token.
"""

from __future__ import annotations

import gc
import json
import os
import sys
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import lark
from lark import Token, v_args

from swir.diagnostics import SOURCES, Diagnostic, Location
from swir.ir.affine import Expr, NonAffine
from swir.ir.core import (STAGES, Access, Apply, Block, Constraint, Dense, DenseSlot,
                          FileInit, Function, Global, Instruction, Literal, Module, Range,
                          Region, Successor, SymbolRef, Value)
from swir.ir.types import Type, parse_type
from swir.lexer import LexError, SwirLexer
from swir.limits import deep_recursion
from swir.ops.registry import lookup
from swir.parse_tables import load as load_tables


# --------------------------------------------------------------------------
# Grammar loading
# --------------------------------------------------------------------------

def grammar_text() -> str:
    """The packaged grammar (``swir.grammar``), or the source tree's ``grammar/``."""
    try:
        return resources.files("swir.grammar").joinpath("swir.lark").read_text()
    except (ModuleNotFoundError, FileNotFoundError):
        path = Path(__file__).resolve().parent.parent / "grammar" / "swir.lark"
        return path.read_text()


@lru_cache(maxsize=1)
def _lark() -> lark.Lark:
    # The LALR tables ship with the package, built at install time
    # (swir.parse_tables): nothing is read from, or written to, a place
    # another user or a planted file could control.
    return load_tables(grammar_text(), SwirLexer, _SyntaxBuilder(), _grammar_folder())


def _grammar_folder() -> Path | None:
    """The installed package's grammar folder (where its tables are), or None
    in a source tree (whose tables are built in memory)."""
    try:
        folder = resources.files("swir.grammar")
    except ModuleNotFoundError:
        return None
    return Path(str(folder)) if isinstance(folder, Path) else None


# --------------------------------------------------------------------------
# Step 1: syntax tree (tuples with tokens)
# --------------------------------------------------------------------------

class SInstr:
    __slots__ = ("results", "op", "slots", "arrow", "attrs", "types", "regions", "loop")

    def __init__(self, op: Token) -> None:
        self.op = op
        self.results: list[Token] = []
        self.slots: list = []
        self.arrow: int | None = None
        self.attrs: list = []
        self.types: list[Token] = []
        self.regions: list = []
        self.loop: tuple | None = None


@v_args(inline=True)
class _SyntaxBuilder(lark.Transformer):
    # -- module ---------------------------------------------------------------
    def start(self, header, *items):
        return (header, list(items))

    def module_header(self, name, stage, attrs):
        return (name, stage, attrs)

    def global_def(self, name, type_, init, attrs):
        return ("global", name, type_, init, attrs)

    def buffer_def(self, name, type_, attrs):
        return ("buffer", name, type_, None, attrs)

    def init_file(self, path, offset):
        return ("file", path, offset)

    def init_dense(self, dense):
        return dense

    def dense(self, value):
        return ("dense", value)

    def dense_list(self, *items):
        return tuple(x for x in items if x is not None) if items != (None,) else ()

    def func_def(self, qual, kind, name, *rest):
        *params, results, attrs, body = rest
        params = [p for p in params if p is not None]
        return ("func", qual, kind, name, params, results, attrs, body)

    def func_qual(self, tok):
        return tok

    def param(self, name, type_):
        return (name, type_)

    def one_result(self, t):
        return [t]

    def result_list(self, *types):
        return [t for t in types if t is not None]

    def func_attrs(self, attrs):
        return attrs

    # -- regions and blocks -----------------------------------------------------
    def region(self, entry, *blocks):
        return ("region", entry, list(blocks))

    def entry_block(self, *instrs):
        return [i for i in instrs if i is not None]

    def labelled_block(self, label, args, *instrs):
        return (label, args or [], list(instrs))

    def block_args(self, *params):
        return [p for p in params if p is not None]

    # -- instructions -----------------------------------------------------------
    def instr(self, *parts):
        if len(parts) == 2:
            parts[1].results = parts[0]
            return parts[1]
        return parts[0]

    def results(self, *names):
        return list(names)

    def generic_op(self, op, slots, arrow, attrs, types, regions):
        s = SInstr(op)
        s.slots = slots or []
        if arrow is not None:
            s.arrow = len(s.slots)
            s.slots = s.slots + arrow
        s.attrs = attrs or []
        s.types = types or []
        s.regions = regions or []
        return s

    def loop_op(self, op, iv, lb, ub, step, attrs, region):
        s = SInstr(op)
        s.loop = (iv, step)
        s.slots = [lb, ub]
        s.attrs = attrs or []
        s.regions = [region]
        return s

    def step(self, tok):
        return tok

    def slots(self, *items):
        return list(items)

    arrow = slots

    def type_sig(self, *types):
        return list(types)

    def regions(self, *rs):
        return [r for r in rs if r is not None]

    # -- slots ----------------------------------------------------------------------
    def access(self, base, *indices):
        return ("access", base, [i for i in indices if i is not None])

    def range(self, lo, hi):
        return ("range", lo, hi)

    def successor(self, label, *args):
        return ("succ", label, [a for a in args if a is not None])

    def apply(self, callee, *args):
        return ("apply", callee, [a for a in args if a is not None])

    def constraint(self, lhs, rel, rhs):
        return ("cons", lhs, rel, rhs)

    def value_ref(self, tok):
        return ("v", tok)

    def global_ref(self, tok):
        return ("g", tok)

    def int_lit(self, tok):
        return ("int", _int(tok), tok)

    def neg_int(self, tok):
        return ("int", -_int(tok), tok)

    def add(self, a, b):
        return ("add", a, b)

    def sub(self, a, b):
        return ("sub", a, b)

    def mul(self, a, b):
        return ("mul", a, b)

    def floordiv(self, a, b):
        return ("floordiv", a, b)

    def ceildiv(self, a, b):
        return ("ceildiv", a, b)

    def mod(self, a, b):
        return ("mod", a, b)

    def neg(self, a):
        return ("neg", a)

    def min(self, *args):
        return ("min", list(args))

    def max(self, *args):
        return ("max", list(args))

    def float_lit(self, tok):
        return ("float", float(tok), tok)

    def neg_float_lit(self, tok):
        return ("float", -float(tok), tok)

    def special_float(self, tok):
        return ("float", float(str(tok)), tok)

    def neg_special_float(self, tok):
        return ("float", -float(str(tok)), tok)

    def bool_lit(self, tok):
        return ("bool", tok == "true", tok)

    # -- attributes -------------------------------------------------------------------
    def attr_dict(self, *attrs):
        return list(attrs)

    def attr(self, name, value):
        return (name, value)

    def string_attr(self, tok):
        return ("str", tok)

    def type_attr(self, tok):
        return ("type", tok)

    def symbol_attr(self, tok):
        return ("sym", tok)

    def list_attr(self, *items):
        return ("list", [i for i in items if i is not None])


def _int(tok: Token) -> int:
    text = str(tok)
    return int(text, 16) if text[:2] in ("0x", "0X") else int(text, 10)


# --------------------------------------------------------------------------
# Step 2: IR builder with scoped name resolution
# --------------------------------------------------------------------------

_cached_type = lru_cache(maxsize=4096)(parse_type)  # types are immutable


class _Scope:
    """Names visible in one region, chained to the enclosing region's scope."""

    def __init__(self, parent: "_Scope | None") -> None:
        self.parent = parent
        self.values: dict[str, tuple[Value, Token]] = {}
        self.blocks: dict[str, Block] = {}

    def find(self, name: str) -> tuple[Value, Token] | None:
        s: _Scope | None = self
        while s is not None:
            hit = s.values.get(name)
            if hit is not None:
                return hit
            s = s.parent
        return None

    def define(self, name: str, value: Value, tok: Token) -> Token | None:
        """Define ``name``; if it is already visible, return its defining token instead."""
        prev = self.find(name)
        if prev is not None:
            return prev[1]
        self.values[name] = (value, tok)
        return None


class _IRBuilder:
    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.module: Module | None = None

    def _loc(self, tok: Any) -> Location | None:
        line = getattr(tok, "line", None)
        return None if line is None else Location(self.filename, line, tok.column)

    def _decode(self, tok: Token, text: str) -> str:
        try:
            return json.loads(text)
        except ValueError as e:
            raise Diagnostic(f"malformed string literal: {e.args[0].split(':')[0]}",
                             self._loc(tok)) from None

    def _define(self, scope: _Scope, name: str, value: Value, tok: Token) -> None:
        prev = scope.define(name, value, tok)
        if prev is not None:
            raise Diagnostic(f"redefinition of %{name}", self._loc(tok),
                             [("previous definition is here", self._loc(prev))])

    def _name(self, tok: Token) -> str:
        """``%x`` / ``@x`` / ``'x`` or their quoted forms → the bare name."""
        body = tok[1:]
        return self._decode(tok, body) if body.startswith('"') else body

    def _type(self, tok: Token) -> Type:
        try:
            return _cached_type(str(tok))
        except ValueError as e:
            raise Diagnostic(str(e), self._loc(tok)) from None

    # -- module -----------------------------------------------------------------------
    def build(self, tree: tuple) -> Module:
        (name_tok, stage_tok, attrs), items = tree
        if str(stage_tok) not in STAGES:
            raise Diagnostic(f"unknown stage '{stage_tok}'; expected one of "
                             f"{', '.join(STAGES)}", self._loc(stage_tok))
        m = Module(self._decode(name_tok, str(name_tok)), str(stage_tok))
        m.loc = self._loc(name_tok)
        m.attrs = self._attrs(attrs)
        self.module = m
        funcs: list[tuple[Function, tuple]] = []
        for item in items:
            sym_tok = item[1] if item[0] in ("global", "buffer") else item[3]
            name = self._name(sym_tok)
            prev = m.lookup(name)
            if prev is not None:
                raise Diagnostic(f"redefinition of symbol @{name}", self._loc(sym_tok),
                                 [("previous definition is here", prev.loc)])
            if item[0] == "func":
                f = self._function_header(item)
                funcs.append((f, item))
                m.add(f)
            else:
                m.add(self._global(item))
        for f, item in funcs:
            if item[7] is not None:
                self._function_body(f, item)
        return m

    def _global(self, item: tuple) -> Global:
        kind, name_tok, type_tok, init, attrs = item
        init_obj: FileInit | Dense | None = None
        if init is not None and init[0] == "file":
            init_obj = FileInit(self._decode(init[1], str(init[1])), _int(init[2]))
        elif init is not None:
            init_obj = self._dense(init)
        return Global(self._name(name_tok), self._type(type_tok), kind, init_obj,
                      self._attrs(attrs), self._loc(name_tok))

    def _dense(self, node: tuple) -> Dense:
        def conv(v: Any) -> Any:
            if isinstance(v, tuple) and v and isinstance(v[0], str):
                return v[1]  # ("int"|"float"|"bool", value, tok)
            return tuple(conv(x) for x in v)
        return Dense(conv(node[1]))

    def _function_header(self, item: tuple) -> Function:
        _, qual, kind, name_tok, params, results, attrs, _body = item
        f = Function(self._name(name_tok), [self._type(t) for _, t in params],
                     [self._type(t) for t in (results or [])], kind=str(kind),
                     target=str(qual) if qual is not None else None,
                     param_names=[self._name(n) for n, _ in params], attrs=self._attrs(attrs),
                     loc=self._loc(name_tok))
        return f

    def _function_body(self, f: Function, item: tuple) -> None:
        scope = _Scope(None)
        for (name_tok, _), p in zip(item[4], f.params):
            self._define(scope, p.name, p, name_tok)
        f.set_body(self._region(item[7], scope, entry_label="entry" if f.kind == "func" else None))

    # -- regions -----------------------------------------------------------------------
    def _region(self, node: tuple, parent_scope: _Scope, entry_label: str | None = None,
                entry_args: list[tuple[Token, Type]] | None = None) -> Region:
        _, entry_instrs, labelled = node
        scope = _Scope(parent_scope)
        region = Region()
        blocks: list[tuple[Block, list[SInstr]]] = []
        if entry_instrs or not labelled:
            b = Block(entry_label)
            for tok, t in entry_args or []:
                a = b.add_argument(t, self._name(tok))
                self._define(scope, a.name, a, tok)
            blocks.append((b, entry_instrs))
        elif entry_args:
            raise Diagnostic("a loop body cannot start with a labelled block",
                             self._loc(labelled[0][0]))
        for label_tok, args, instrs in labelled:
            label = self._name(label_tok)
            if label in scope.blocks:
                raise Diagnostic(f"redefinition of block '{label}", self._loc(label_tok))
            b = Block(label, loc=self._loc(label_tok))
            scope.blocks[label] = b
            for tok, ttok in args:
                a = b.add_argument(self._type(ttok), self._name(tok))
                self._define(scope, a.name, a, tok)
            blocks.append((b, instrs))
        # Create every instruction of the region first so forward references
        # (to later blocks' values) resolve; operands are filled in after.
        made: list[tuple[Instruction, SInstr]] = []
        for b, instrs in blocks:
            region.add_block(b)
            for s in instrs:
                inst = self._instruction_shell(s, scope)
                b.append(inst)
                made.append((inst, s))
        for inst, s in made:
            self._fill(inst, s, scope)
        return region

    def _instruction_shell(self, s: SInstr, scope: _Scope) -> Instruction:
        opname = str(s.op)
        if lookup(opname) is None:
            raise Diagnostic(f"unknown op '{opname}'", self._loc(s.op))
        types = [self._type(t) for t in s.types]
        if s.types and len(types) != len(s.results):
            raise Diagnostic(f"'{opname}' defines {len(s.results)} value(s) but lists "
                             f"{len(types)} result type(s)", self._loc(s.types[0]))
        if s.results and not s.types:
            raise Diagnostic(f"'{opname}' defines {len(s.results)} value(s) but gives no "
                             "result type: add ': TYPE'", self._loc(s.op))
        inst = Instruction(opname, result_types=types,
                           result_names=[self._name(t) for t in s.results], loc=self._loc(s.op))
        for tok, r in zip(s.results, inst.results):
            self._define(scope, r.name, r, tok)
        return inst

    def _fill(self, inst: Instruction, s: SInstr, scope: _Scope) -> None:
        args = [self._slot(x, scope) for x in s.slots]
        inst.set_args(args)
        inst.arrow = s.arrow
        inst.attrs = self._attrs(s.attrs)
        if s.loop is not None:
            iv_tok, step_tok = s.loop
            if step_tok is not None:
                if "step" in inst.attrs:
                    raise Diagnostic("the step is given twice (as 'step N' and as an attribute)",
                                     self._loc(step_tok))
                inst.attrs["step"] = _int(step_tok)
            from swir.ir.types import INDEX
            inst.add_region(self._region(s.regions[0], scope, entry_args=[(iv_tok, INDEX)]))
        else:
            for r in s.regions:
                inst.add_region(self._region(r, scope))

    # -- operand slots -----------------------------------------------------------------
    def _value(self, tok: Token, scope: _Scope) -> Value:
        hit = scope.find(self._name(tok))
        if hit is None:
            raise Diagnostic(f"use of undefined value %{self._name(tok)}", self._loc(tok))
        return hit[0]

    def _global_ref(self, tok: Token) -> Value:
        assert self.module is not None
        g = self.module.lookup(self._name(tok))
        if isinstance(g, Global):
            return g
        if g is None:
            raise Diagnostic(f"use of undefined global @{self._name(tok)}", self._loc(tok))
        raise Diagnostic(f"@{self._name(tok)} is a function, not a value; call it as @{self._name(tok)}(...)",
                         self._loc(tok))

    def _slot(self, node: tuple, scope: _Scope) -> Any:
        tag = node[0]
        if tag == "v":
            return self._value(node[1], scope)
        if tag == "g":
            return self._global_ref(node[1])
        if tag == "access":
            base = (self._value(node[1], scope) if str(node[1])[0] == "%"
                    else self._global_ref(node[1]))
            return Access(base, tuple(self._index(i, scope) for i in node[2]))
        if tag == "succ":
            block = self._block(node[1], scope)
            return Successor(block, tuple(self._plain_value(a, scope) for a in node[2]))
        if tag == "apply":
            return Apply(self._name(node[1]), tuple(self._plain_value(a, scope) for a in node[2]))
        if tag == "cons":
            return Constraint(self._expr(node[1], scope), str(node[2]), self._expr(node[3], scope))
        if tag in ("float", "bool"):
            return Literal(node[1])
        if tag == "dense":
            return DenseSlot(self._dense(node))
        return self._expr(node, scope)

    def _plain_value(self, node: tuple, scope: _Scope) -> Value:
        if node[0] == "v":
            return self._value(node[1], scope)
        if node[0] == "g":
            return self._global_ref(node[1])
        raise Diagnostic("expected a value (%name or @name) here", self._loc(_first_token(node)))

    def _block(self, tok: Token, scope: _Scope) -> Block:
        s: _Scope | None = scope
        while s is not None:
            if self._name(tok) in s.blocks:
                return s.blocks[self._name(tok)]
            s = s.parent
        raise Diagnostic(f"use of undefined block '{self._name(tok)}", self._loc(tok))

    def _index(self, node: tuple, scope: _Scope) -> Expr | Range:
        if node[0] == "range":
            return Range(self._expr(node[1], scope), self._expr(node[2], scope))
        return self._expr(node, scope)

    def _expr(self, node: tuple, scope: _Scope) -> Expr:
        tag = node[0]
        try:
            if tag == "v":
                return Expr.of(self._value(node[1], scope))
            if tag == "int":
                return Expr.of(node[1])
            if tag == "neg":
                return -self._expr(node[1], scope)
            if tag in ("min", "max"):
                return Expr.minmax(tag, [self._expr(a, scope) for a in node[1]])
            if tag in _BINARY:
                # Binary operators associate left: walk the left spine in a loop,
                # so a long chain (a + b + c + ...) does not recurse per term.
                rights = []
                while node[0] in _BINARY:
                    rights.append((node[0], node[2]))
                    node = node[1]
                acc = self._expr(node, scope)
                for op, right in reversed(rights):
                    acc = _BINARY[op](acc, self._expr(right, scope))
                return acc
        except NonAffine as e:
            raise Diagnostic(f"index expression is not affine: {e}", self._loc(_first_token(node))) from None
        if tag == "g":
            raise Diagnostic("a global cannot appear in an index expression", self._loc(node[1]))
        raise Diagnostic("expected an index expression here", self._loc(_first_token(node)))

    # -- attributes --------------------------------------------------------------------
    def _attrs(self, attrs: list | None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name_tok, value in attrs or []:
            name = str(name_tok)
            if name in out:
                raise Diagnostic(f"attribute '{name}' given twice", self._loc(name_tok))
            out[name] = self._attr_value(value)
        return out

    def _attr_value(self, node: tuple) -> Any:
        tag = node[0]
        if tag == "str":
            return self._decode(node[1], str(node[1]))
        if tag in ("int", "float", "bool"):
            return node[1]
        if tag == "type":
            return self._type(node[1])
        if tag == "sym":
            return SymbolRef(self._name(node[1]))
        if tag == "dense":
            return self._dense(node)
        if tag == "list":
            return tuple(self._attr_value(x) for x in node[1])
        raise Diagnostic("malformed attribute value", self._loc(_first_token(node)))


_BINARY = {"add": Expr.__add__, "sub": Expr.__sub__, "mul": Expr.__mul__,
           "floordiv": Expr.floordiv, "ceildiv": Expr.ceildiv, "mod": Expr.mod}


def _first_token(node: Any) -> Token | None:
    """The leftmost token of a syntax node (iterative down the left spine)."""
    while isinstance(node, (tuple, list)):
        for x in node:
            if isinstance(x, (tuple, list, Token)):
                node = x
                break
        else:
            return None
    return node if isinstance(node, Token) else None


# --------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------

_TOKEN_NAMES = {
    "_NL": "end of line", "VALUE": "a value (%name)", "GLOBAL": "a symbol (@name)",
    "LABEL": "a block label ('name)", "NAME": "a name", "INT": "an integer",
    "FLOAT": "a float", "STRING": "a string", "TYPE": "a type", "RELOP": "a comparison",
    "$END": "end of file", "FUNC_KIND": "'func', 'kernel'", "BOOL": "true or false",
    "SPECIAL_FLOAT": "inf or nan",
}


@lru_cache(maxsize=1)
def _terminal_spellings() -> dict[str, str]:
    """Readable names for the grammar's terminals: keywords and punctuation quoted."""
    out = dict(_TOKEN_NAMES)
    for t in _lark().terminals:
        if t.name not in out and t.pattern.type == "str":
            out[t.name] = f"'{t.pattern.value}'"
    return out


def _describe_expected(expected: set[str]) -> str:
    spell = _terminal_spellings()
    names = sorted({spell.get(e, e.lower()) for e in expected})
    if not names or len(names) > 6:
        return ""
    return "; expected " + (names[0] if len(names) == 1 else ", ".join(names[:-1]) +
                            " or " + names[-1])


def _syntax_error(e: lark.exceptions.UnexpectedInput, filename: str) -> Diagnostic:
    loc = Location(filename, max(e.line, 1), max(e.column, 1))
    if isinstance(e, lark.exceptions.UnexpectedCharacters):
        ch = e.char
        what = "NUL byte" if ch == "\0" else f"character {ch!r}"
        return Diagnostic(f"unexpected {what}{_describe_expected(set(e.allowed or ()))}", loc)
    if isinstance(e, lark.exceptions.UnexpectedToken):
        tok = e.token
        if tok.type == "$END":
            return Diagnostic("unexpected end of file" + _describe_expected(e.expected),
                              loc)
        text = "end of line" if tok.type == "_NL" else f"'{tok}'"
        return Diagnostic(f"unexpected {text}{_describe_expected(e.expected)}", loc)
    return Diagnostic("unexpected end of file", loc)


def parse_module(text: str, filename: str = "<input>") -> Module:
    """Parse a module; raises Diagnostic on any syntax or name error. A
    UTF-8 byte-order mark at the start (Windows editors write one) is
    skipped."""
    text = text.removeprefix(BYTE_ORDER_MARK)
    SOURCES.add(filename, text)
    if not text.strip():
        raise Diagnostic("empty input: expected 'module \"NAME\"'",
                         Location(filename, 1, 1))
    if not text.endswith("\n"):
        text += "\n"
    # The parse allocates millions of small objects that all stay alive; the
    # cyclic garbage collector would rescan them over and over (half the parse
    # time on large modules), so it is paused while parsing.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        with deep_recursion():
            tree = _lark().parse(text)
            module = _IRBuilder(filename).build(tree)
        # Sidecar weight files are relative to the module file ("<stdin>": here).
        module.base_dir = "." if filename.startswith("<") else os.path.dirname(filename) or "."
        return module
    except LexError as e:
        raise Diagnostic(str(e), Location(filename, e.line, e.col)) from None
    except RecursionError:
        raise Diagnostic("input is nested too deeply to build (regions or expressions "
                         f"nested beyond Python's recursion limit of {sys.getrecursionlimit()})",
                         Location(filename, 1, 1)) from None
    except lark.exceptions.UnexpectedInput as e:
        raise _syntax_error(e, filename) from None
    except lark.exceptions.VisitError as e:  # a Diagnostic raised inside the transformer
        if isinstance(e.orig_exc, Diagnostic):
            raise e.orig_exc from None
        raise
    finally:
        if gc_was_enabled:
            gc.enable()


BYTE_ORDER_MARK = "\ufeff"


def read_source(path: str) -> str:
    """Read a file as UTF-8 text; errors are Diagnostics naming the file."""
    try:
        data = Path(path).read_bytes() if path != "-" else _stdin_bytes()
    except OSError as e:
        raise Diagnostic(f"cannot read '{path}': {e.strerror or e}",
                         Location(path, 1, 1)) from None
    name = "<stdin>" if path == "-" else path
    if _looks_like_onnx(data):
        shown = path if path != "-" else "MODEL.onnx"
        raise Diagnostic("this is an ONNX model, not swir IR: translate it first with "
                         f"swir-import {shown} -o {Path(shown).stem}.swir",
                         Location(name, 1, 1))
    try:
        text = data.decode("utf-8").removeprefix(BYTE_ORDER_MARK)
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise Diagnostic(f"input is not UTF-8 text (byte 0x{data[e.start]:02x} at offset "
                         f"{e.start}); is this a binary file?", Location(name, line, col)) from None
    if "\0" in text:
        off = text.index("\0")
        line = text.count("\n", 0, off) + 1
        col = off - (text.rfind("\n", 0, off) + 1) + 1
        SOURCES.add(name, text)
        raise Diagnostic("input contains a NUL byte; is this a binary file?",
                         Location(name, line, col))
    return text


def _looks_like_onnx(data: bytes) -> bool:
    """An ONNX ModelProto: binary protobuf that starts with its field 1
    (ir_version: tag byte 0x08, then a small version number). swir text never
    starts with byte 0x08."""
    return len(data) >= 2 and data[0] == 0x08 and 1 <= data[1] <= 64


def _stdin_bytes() -> bytes:
    import sys
    return sys.stdin.buffer.read()


def parse_file(path: str) -> Module:
    text = read_source(path)
    return parse_module(text, "<stdin>" if path == "-" else path)

