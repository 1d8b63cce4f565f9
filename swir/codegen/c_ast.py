"""A small C syntax tree and its printer: the generator builds C from these
nodes rather than from strings it would have to read back.

Expressions print with the parentheses C's precedence needs and no others;
:class:`Paren` keeps a grouping the generated code shows for readability
(``(a > b) ? a : b``). Types print as declarators (``float (*const A)[64]``),
so a pointer to an array, a cast to it and a parameter of it come from one
:class:`CType`. Statements print at an indentation of four spaces per level;
a :class:`Function` gives its definition and its prototype, the one derived
from the other.

Adding a type: a :class:`Named` (``Named("floatv4")``) for anything C names
with one word, or a :class:`CType` subclass with ``declare``. Adding a call-like
intrinsic (``simd_vmuls(a, b)``): :class:`Call` with its name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

INDENT = "    "

# C's precedence levels, tightest first (C99 6.5): higher binds tighter.
PRIMARY, UNARY, TERNARY, ASSIGN = 16, 15, 3, 2
BINARY_PRECEDENCE = {
    "*": 13, "/": 13, "%": 13, "+": 12, "-": 12, "<<": 11, ">>": 11,
    "<": 10, "<=": 10, ">": 10, ">=": 10, "==": 9, "!=": 9,
    "&": 8, "^": 7, "|": 6, "&&": 5, "||": 4,
}


# ---------------------------------------------------------------------------
# Types
# ---------------------------------------------------------------------------

class CType:
    """A C type; ``declare(name)`` writes a declaration of ``name`` with it."""

    def declare(self, inner: str = "") -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        """The type as a cast or sizeof writes it (an abstract declarator)."""
        return self.declare("")


@dataclass(frozen=True)
class Named(CType):
    """A type C names with a word or two: ``float``, ``swir_f16``, a typedef,
    ``struct port``, a vector type; ``const`` qualifies it."""
    name: str
    const: bool = False

    def declare(self, inner: str = "") -> str:
        text = ("const " if self.const else "") + self.name
        if not inner or inner.startswith("["):     # long[]: an abstract array
            return text + inner
        return f"{text} {inner}"


@dataclass(frozen=True)
class Pointer(CType):
    """A pointer to ``to``; ``const``: the pointer itself is const."""
    to: CType
    const: bool = False

    def declare(self, inner: str = "") -> str:
        return self.to.declare("*" + ("const " if self.const else "") + inner)


@dataclass(frozen=True)
class Array(CType):
    """``of[length]``; no length: ``of[]`` (a compound literal's, a parameter's)."""
    of: CType
    length: int | None = None

    def declare(self, inner: str = "") -> str:
        if inner.startswith("*"):          # a pointer to an array: (*p)[n]
            inner = f"({inner})"
        return self.of.declare(f"{inner}[{'' if self.length is None else self.length}]")


def array(of: CType, dims: tuple[int, ...] | list[int]) -> CType:
    """``of`` in an array of ``dims`` (row-major: ``float x[4][5]``)."""
    for d in reversed(dims):
        of = Array(of, d)
    return of


@dataclass(frozen=True)
class Record(CType):
    """A ``struct`` or ``union``. A tagged one is named ``kind tag``; its
    members are written where it is defined: a :class:`RecordDef` for a
    tagged one, a :class:`Decl` of the record for an anonymous one (a member,
    a variable, a typedef)."""
    kind: str                           # "struct" or "union"
    members: tuple["Decl", ...] = ()
    tag: str = ""

    def declare(self, inner: str = "") -> str:
        if not self.tag:
            raise TypeError("an anonymous record is declared by a Decl of it")
        return Named(f"{self.kind} {self.tag}").declare(inner)

    def body(self, depth: int, opening: str, closing: str) -> list[str]:
        """``opening`` (``struct {``), the members one level in, ``closing``."""
        pad = INDENT * depth
        members = [line for m in self.members for line in m.lines(depth + 1)]
        return [pad + opening, *members, pad + closing]


def const(t: CType) -> CType:
    """``t`` with its outermost level const (a const pointer, a const scalar)."""
    if isinstance(t, Pointer):
        return Pointer(t.to, True)
    if isinstance(t, Named):
        return Named(t.name, True)
    raise TypeError(f"no const form of {t!r}")


VOID = Named("void")
LONG = Named("long")
INT = Named("int")
CHAR = Named("char")


# ---------------------------------------------------------------------------
# Expressions
# ---------------------------------------------------------------------------

class Expr:
    precedence = PRIMARY

    def text(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.text()


def _operand(e: Expr, least: int) -> str:
    """``e`` as an operand whose position needs precedence ``least`` or tighter."""
    return e.text() if e.precedence >= least else f"({e.text()})"


@dataclass(frozen=True)
class Id(Expr):
    name: str

    def text(self) -> str:
        return self.name


@dataclass(frozen=True)
class Lit(Expr):
    """A constant as C spells it (``1.0f``, ``INT64_C(5)``, ``-3``, ``"text"``);
    a leading minus makes it a unary expression."""
    spelling: str

    @property
    def precedence(self) -> int:  # type: ignore[override]
        return UNARY if self.spelling.startswith("-") else PRIMARY

    def text(self) -> str:
        return self.spelling


@dataclass(frozen=True)
class Paren(Expr):
    """Parentheses the generated code keeps for readability, not precedence."""
    inner: Expr

    def text(self) -> str:
        return f"({self.inner.text()})"


@dataclass(frozen=True)
class Unary(Expr):
    """A prefix operator: ``-``, ``!``, ``~``, ``*`` (deref), ``&`` (address)."""
    op: str
    operand: Expr
    precedence = UNARY

    def text(self) -> str:
        inner = _operand(self.operand, UNARY)
        if inner.startswith(self.op[-1]):   # - -x is not --x, & &x is not &&x
            inner = f"({inner})"
        return self.op + inner


@dataclass(frozen=True)
class Postfix(Expr):
    """``i++`` / ``i--``."""
    operand: Expr
    op: str = "++"

    def text(self) -> str:
        return _operand(self.operand, PRIMARY) + self.op


@dataclass(frozen=True)
class Cast(Expr):
    type: CType
    operand: Expr
    precedence = UNARY

    def text(self) -> str:
        return f"({self.type}){_operand(self.operand, UNARY)}"


@dataclass(frozen=True)
class SizeOf(Expr):
    """``sizeof x`` (an expression operand, as the generated code writes it)."""
    operand: Expr
    precedence = UNARY

    def text(self) -> str:
        return f"sizeof {_operand(self.operand, UNARY)}"


@dataclass(frozen=True)
class Binary(Expr):
    """``a OP b``, left-associative as all of C's binary operators are;
    ``tight``: without spaces (``2*i``, as swir writes an index's coefficient)."""
    op: str
    left: Expr
    right: Expr
    tight: bool = False

    @property
    def precedence(self) -> int:  # type: ignore[override]
        return BINARY_PRECEDENCE[self.op]

    def text(self) -> str:
        p = self.precedence
        op = self.op if self.tight else f" {self.op} "
        return f"{_operand(self.left, p)}{op}{_operand(self.right, p + 1)}"


@dataclass(frozen=True)
class Ternary(Expr):
    cond: Expr
    yes: Expr
    no: Expr
    precedence = TERNARY

    def text(self) -> str:
        return (f"{_operand(self.cond, TERNARY + 1)} ? {_operand(self.yes, ASSIGN + 1)} : "
                f"{_operand(self.no, TERNARY)}")


@dataclass(frozen=True)
class Assign(Expr):
    """``target = value`` (or ``+=`` and the like), right-associative."""
    target: Expr
    value: Expr
    op: str = "="
    precedence = ASSIGN

    def text(self) -> str:
        return f"{_operand(self.target, UNARY)} {self.op} {_operand(self.value, ASSIGN)}"


@dataclass(frozen=True)
class Call(Expr):
    """A call of a function, a function-like macro or an intrinsic."""
    function: str | Expr
    args: tuple[Expr, ...] = ()

    def text(self) -> str:
        fn = self.function if isinstance(self.function, str) else \
            _operand(self.function, PRIMARY)
        return f"{fn}({', '.join(_operand(a, ASSIGN) for a in self.args)})"


@dataclass(frozen=True)
class Index(Expr):
    base: Expr
    index: Expr

    def text(self) -> str:
        return f"{_operand(self.base, PRIMARY)}[{self.index.text()}]"


@dataclass(frozen=True)
class Member(Expr):
    """``base.name``, or ``base->name`` with ``arrow``."""
    base: Expr
    name: str
    arrow: bool = False

    def text(self) -> str:
        return f"{_operand(self.base, PRIMARY)}{'->' if self.arrow else '.'}{self.name}"


@dataclass(frozen=True)
class InitList(Expr):
    """``{a, b, c}``: an initializer (or a compound literal's body)."""
    items: tuple[Expr, ...]

    def text(self) -> str:
        return "{" + ", ".join(_operand(i, ASSIGN) for i in self.items) + "}"


def call(function: str, *args: Expr | str) -> Call:
    """``function(args)``; a str argument is an identifier."""
    return Call(function, tuple(as_expr(a) for a in args))


def as_expr(e: Expr | str | int) -> Expr:
    """A node for ``e``: an int is a literal, a str an identifier."""
    if isinstance(e, Expr):
        return e
    return Lit(str(e)) if isinstance(e, int) else Id(e)


def index(base: Expr | str, *subscripts: Expr | str | int) -> Expr:
    """``base[i][j]...``."""
    out = as_expr(base)
    for s in subscripts:
        out = Index(out, as_expr(s))
    return out


def member(base: Expr | str, path: str) -> Expr:
    """``base.a.b`` for the dotted ``path`` ``a.b``."""
    out = as_expr(base)
    for name in path.split("."):
        out = Member(out, name)
    return out


# ---------------------------------------------------------------------------
# Statements
# ---------------------------------------------------------------------------

class Stmt:
    def lines(self, depth: int) -> list[str]:
        raise NotImplementedError


@dataclass(frozen=True)
class ExprStmt(Stmt):
    expr: Expr

    def lines(self, depth: int) -> list[str]:
        return [INDENT * depth + self.expr.text() + ";"]


@dataclass(frozen=True)
class Decl(Stmt):
    """``[storage] TYPE name [= init]; [/* comment */]``."""
    type: CType
    name: str
    init: Expr | None = None
    storage: str = ""               # "static", "extern", ...
    attributes: str = ""            # "__attribute__((aligned(64)))"
    comment: str = ""

    def text(self) -> str:
        head = (self.storage + " " if self.storage else "") + self.type.declare(self.name)
        return head + self._tail()

    def _tail(self) -> str:
        tail = " " + self.attributes if self.attributes else ""
        if self.init is not None:
            tail += " = " + _operand(self.init, ASSIGN)
        return tail + ";" + (f"   /* {self.comment} */" if self.comment else "")

    def lines(self, depth: int) -> list[str]:
        t = self.type
        if isinstance(t, Record) and not t.tag:     # the record's members, then the name
            storage = self.storage + " " if self.storage else ""
            return t.body(depth, f"{storage}{t.kind} {{", f"}} {self.name}{self._tail()}")
        return [INDENT * depth + self.text()]


@dataclass(frozen=True)
class RecordDef(Stmt):
    """The definition of a tagged record: ``struct tag {   /* comment */ ... };``."""
    record: Record
    comment: str = ""

    def lines(self, depth: int) -> list[str]:
        r = self.record
        note = f"   /* {self.comment} */" if self.comment else ""
        return r.body(depth, f"{r.kind} {r.tag} {{{note}", "};")


@dataclass(frozen=True)
class Line(Stmt):
    """A line as it stands: a preprocessor line (``#define N 4``), a label
    (``bb_loop:;``) or a blank line; at column 0 unless ``indented``."""
    text: str
    indented: bool = False

    def lines(self, depth: int) -> list[str]:
        return [(INDENT * depth if self.indented else "") + self.text]


@dataclass(frozen=True)
class Comment(Stmt):
    """``/* text */``; the text may hold line breaks (" * " continues a line)."""
    text: str

    def lines(self, depth: int) -> list[str]:
        return [INDENT * depth + f"/* {self.text} */"]


@dataclass
class Block(Stmt):
    """``{ ... }``: after a head (``for (...)``, ``if (...)``) on its line, or
    on its own as a nested scope."""
    body: list[Stmt] = field(default_factory=list)

    def inner(self, depth: int) -> list[str]:
        return [line for s in self.body for line in s.lines(depth)]

    def lines(self, depth: int) -> list[str]:
        # A scope on its own opens with " {": as the generator has always
        # written it (kept byte-identical).
        return [INDENT * depth + " {", *self.inner(depth + 1), INDENT * depth + "}"]


@dataclass(frozen=True)
class If(Stmt):
    cond: Expr
    then: Block
    orelse: Block | None = None

    def lines(self, depth: int) -> list[str]:
        pad = INDENT * depth
        out = [f"{pad}if ({self.cond.text()}) {{", *self.then.inner(depth + 1)]
        if self.orelse is not None:
            out += [f"{pad}}} else {{", *self.orelse.inner(depth + 1)]
        return out + [pad + "}"]


@dataclass(frozen=True)
class For(Stmt):
    """``for (init; cond; step) { body }``; a body that is one statement and
    no Block goes on the next line, without braces."""
    init: Decl | Expr
    cond: Expr
    step: Expr
    body: Block | Stmt

    def lines(self, depth: int) -> list[str]:
        pad = INDENT * depth
        init = self.init.text()     # a Decl's text ends with its ';'
        init = init if isinstance(self.init, Decl) else init + ";"
        head = f"{pad}for ({init} {self.cond.text()}; {self.step.text()})"
        if not isinstance(self.body, Block):
            return [head, *self.body.lines(depth + 1)]
        return [head + " {", *self.body.inner(depth + 1), pad + "}"]


@dataclass(frozen=True)
class Return(Stmt):
    value: Expr | None = None

    def lines(self, depth: int) -> list[str]:
        return [INDENT * depth + ("return;" if self.value is None
                                  else f"return {self.value.text()};")]


@dataclass(frozen=True)
class Goto(Stmt):
    label: str

    def lines(self, depth: int) -> list[str]:
        return [INDENT * depth + f"goto {self.label};"]


# ---------------------------------------------------------------------------
# Functions
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Param:
    type: CType
    name: str

    def text(self) -> str:
        return self.type.declare(self.name)


@dataclass
class Function:
    """A function definition; :meth:`prototype` is the declaration derived from it."""
    name: str
    params: list[Param]
    body: Block
    returns: CType = VOID
    storage: str = ""               # "static", or "" for external linkage
    comment: str = ""               # the comment line above the definition

    def signature(self) -> str:
        params = ", ".join(p.text() for p in self.params) or "void"
        head = (self.storage + " " if self.storage else "")
        return head + self.returns.declare(f"{self.name}({params})")

    def prototype(self) -> str:
        return self.signature() + ";"

    def lines(self) -> list[str]:
        head = [f"/* {self.comment} */"] if self.comment else []
        body = self.body.inner(1)
        return [*head, self.signature(), "{", *(body or [""]), "}"]

    def text(self) -> str:
        return "\n".join(self.lines()) + "\n"


def render(statements: list[Stmt], depth: int = 0) -> str:
    """Statements as text, one per line (no trailing newline)."""
    return "\n".join(line for s in statements for line in s.lines(depth))
