"""The Python code generator of the reference interpreters and the cost
model's traffic counter: IR becomes Python source, compiled and run in a
namespace of its own.

- :class:`CodeSpace`: the namespace generated functions are defined in, the
  Python names of IR values, and the index constants spelled as literals
  (the interpreters, swir.interp.loop.LoopInterpreter and its later stages,
  are CodeSpaces, and so is the traffic counter);
- :class:`PyWriter`: writes the body of one generated function (statements,
  index expressions, value ranges); the traffic counter
  (swir.costmodel.traffic) writes its counting functions with it;
- :class:`Emit`: a PyWriter for the interpreters of the loop stage and later
  (swir.interp.loop, buffered, dma), which also executes instructions by the
  interpreter's op emitters, checks bounds and counts steps;
- the ``*_text`` functions spell IR values and index expressions as they
  appear in messages; ``*_reporter`` and :func:`raiser` make the callables
  that generated code calls to raise a diagnostic."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol

from swir.diagnostics import Diagnostic, Location
from swir.ir.affine import Compound, Expr
from swir.ir.core import Access, Block, Function, Global, Instruction, Value
from swir.ir.types import INDEX, ShapedType
from swir.ops import CONST

# Structured ops nested deeper than this inside one generated Python function go
# into a function of their own: CPython allows 20 statically nested blocks and
# 100 levels of indentation. The interpreters count structured ops
# (MAX_INLINE_DEPTH); the traffic counter, which keeps only some of them,
# counts the `for` statements and the indentation it writes.
MAX_INLINE_DEPTH = 10
MAX_NESTED_FOR = 12
MAX_INDENT = 48


def value_text(v: Any) -> str:
    if isinstance(v, Global):
        return f"@{v.name}"
    return f"%{getattr(v, 'name', None) or '?'}"


def expr_text(e: Any) -> str:
    from swir.ir.affine import format_expr
    return format_expr(Expr.of(e), value_text)


def access_text(acc: Access) -> str:
    return f"{value_text(acc.base)}[{', '.join(expr_text(i) for i in acc.indices)}]"


def function_values(f: Function) -> Iterator[Value]:
    """Every value f defines, in a fixed order: its parameters, then per
    instruction (walk order) its results and its regions' block arguments,
    then the arguments of f's own blocks."""
    yield from f.params
    for inst in f.walk():
        yield from inst.results
        for region in inst.regions:
            for b in region.blocks:
                yield from b.args
    if f.body is not None:
        for b in f.body.blocks:
            yield from b.args


def index_constant(inst: Instruction) -> int | None:
    """The value of an index ``const`` (which generated code spells as a
    literal), else None."""
    if inst.isa(CONST) and len(inst.results) == 1 and inst.results[0].type == INDEX \
            and isinstance(inst.args[0], Expr) and inst.args[0].is_constant:
        return inst.args[0].const
    return None


def free_values(inst: Instruction) -> list[Value]:
    """Values an instruction and its regions read but do not define (globals excluded)."""
    defined: set[int] = set()
    used: dict[int, Value] = {}
    for x in inst.walk():
        defined.update(id(r) for r in x.results)
        for region in x.regions:
            for b in region.blocks:
                defined.update(id(a) for a in b.args)
        for v in x.operands:
            if not isinstance(v, Global):
                used.setdefault(id(v), v)
    return [v for k, v in used.items() if k not in defined]


class Space(Protocol):
    """What a :class:`PyWriter` needs of the namespace its code runs in."""

    names: dict[int, str]
    int_consts: dict[int, int]

    def bind(self, obj: Any, prefix: str = "k") -> str: ...

    def fresh(self, prefix: str) -> str: ...


class EmitHost(Space, Protocol):
    """What :class:`Emit` needs of the interpreter it writes code for
    (swir.interp.loop.LoopInterpreter and its later stages)."""

    stage: str
    max_steps: int

    def name_of(self, v: Value) -> str: ...

    def global_name(self, g: Global) -> str: ...

    def emitter_for(self, inst: Instruction) -> Callable[[Emit, Instruction], None] | None: ...

    def compile_unit(self, parent: Emit, inst: Instruction) -> None: ...


class CodeSpace:
    """The namespace generated Python functions are defined and run in: the
    objects they call, bound by name (:meth:`bind`); the Python names of IR
    values (``names``); index constants, which the code spells as literals
    (``int_consts``)."""

    # Names the compiled code's file in tracebacks: <label @function>.
    label = "swir"

    def __init__(self, ns: Mapping[str, Any] | None = None) -> None:
        self.ns: dict[str, Any] = {"__builtins__": __builtins__, **(ns or {})}
        self.names: dict[int, str] = {}
        self.int_consts: dict[int, int] = {}
        self._ids = itertools.count()

    def fresh(self, prefix: str) -> str:
        return f"_{prefix}{next(self._ids)}"

    def bind(self, obj: Any, prefix: str = "k") -> str:
        name = self.fresh(prefix)
        self.ns[name] = obj
        return name

    def name_of(self, v: Value) -> str:
        """The Python name of value v (made on first ask, after its IR name)."""
        n = self.names.get(id(v))
        if n is None:
            base = re.sub(r"\W", "_", v.name or "")[:24]
            n = self.names[id(v)] = f"v{next(self._ids)}_{base}"
        return n

    def define(self, fname: str, source: str, f: Function) -> Callable[..., Any]:
        """Compile the source of the generated function ``fname`` (written for
        IR function f) into the namespace; return it."""
        code = compile(source, f"<{self.label} @{f.name}>", "exec")
        exec(code, self.ns)  # noqa: S102  (our own generated code)
        return self.ns[fname]


class PyWriter:
    """Writes the body of one generated Python function.

    Writers call :meth:`line` to write statements, :meth:`name` for the Python
    variable holding a value, :meth:`define` for the variable a result is
    assigned to, :meth:`expr` for the Python text of an index expression,
    :meth:`bind` to make a Python object available to the code, and
    :meth:`assemble` for the function's source."""

    def __init__(self, space: Space, function: Function) -> None:
        self.space = space
        self.function = function
        self.lines: list[str] = []
        self.indent = 1
        self.hoisted: dict[str, str] = {}  # local name -> namespace name (globals)
        # Inclusive value ranges of loop variables with constant bounds, to leave
        # out bounds checks that can never fail.
        self.ranges: dict[int, tuple[int, int]] = {}

    # -- writing code ------------------------------------------------------------
    def line(self, text: str) -> None:
        self.lines.append("    " * self.indent + text)

    @contextmanager
    def indented(self) -> Iterator[None]:
        self.indent += 1
        n = len(self.lines)
        try:
            yield
        finally:
            if len(self.lines) == n:
                self.line("pass")
            self.indent -= 1

    def bind(self, obj: Any, prefix: str = "k") -> str:
        return self.space.bind(obj, prefix)

    def fresh(self, prefix: str) -> str:
        return self.space.fresh(prefix)

    def assemble(self, fname: str, params: list[str]) -> str:
        head = [f"def {fname}({', '.join(params)}):"]
        head += [f"    {local} = {ns}" for local, ns in self.hoisted.items()]
        return "\n".join(head + (self.lines or ["    pass"])) + "\n"

    # -- values ------------------------------------------------------------------
    def name(self, v: Any) -> str:
        n = self.space.names.get(id(v))
        if n is None:
            raise Diagnostic(f"value {value_text(v)} is used where it is not defined",
                             self.function.loc)
        return n

    def define(self, v: Value) -> str:
        return self.name(v)

    def expr(self, e: Any) -> str:
        """Python text of an index expression (an int, a Value or an Expr)."""
        if isinstance(e, int) and not isinstance(e, bool):
            return str(e)
        if isinstance(e, Value):
            c = self.space.int_consts.get(id(e))
            return str(c) if c is not None else self.name(e)
        e = Expr.of(e)
        parts: list[str] = []
        for atom, coef in e.terms:
            a = self._atom(atom)
            term = a if coef == 1 else f"-{a}" if coef == -1 else f"{coef}*{a}"
            parts.append(term if not parts else
                         f" - {term[1:]}" if term.startswith("-") else f" + {term}")
        if e.const or not parts:
            c = e.const
            parts.append(str(c) if not parts else f" - {-c}" if c < 0 else f" + {c}")
        text = "".join(parts)
        return text if len(parts) == 1 else f"({text})"

    def _atom(self, atom: Any) -> str:
        if not isinstance(atom, Compound):
            return self.expr(atom)
        args = [self.expr(a) for a in atom.args]
        d = atom.divisor
        if atom.kind == "floordiv":
            return f"({args[0]} // {d})"
        if atom.kind == "ceildiv":
            return f"(-(-{args[0]} // {d}))"
        if atom.kind == "mod":
            return f"({args[0]} % {d})"
        return f"{atom.kind}({', '.join(args)})"  # Python's min / max

    def interval(self, e: Any) -> tuple[int, int] | None:
        """Inclusive bounds of an index expression from the constant loop bounds
        around it, or None when unknown."""
        if isinstance(e, Value):
            c = self.space.int_consts.get(id(e))
            return (c, c) if c is not None else self.ranges.get(id(e))
        e = Expr.of(e)
        lo = hi = e.const
        for atom, coef in e.terms:
            if isinstance(atom, Compound):
                rs = [self.interval(a) for a in atom.args]
                d = atom.divisor
                if atom.kind == "mod":
                    r = rs[0] if rs[0] is not None and 0 <= rs[0][0] and rs[0][1] < d \
                        else (0, d - 1)
                elif any(x is None for x in rs):
                    return None
                elif atom.kind == "floordiv":
                    r = (rs[0][0] // d, rs[0][1] // d)
                elif atom.kind == "ceildiv":
                    r = (-(-rs[0][0] // d), -(-rs[0][1] // d))
                elif atom.kind == "min":
                    r = (min(x[0] for x in rs), min(x[1] for x in rs))
                else:
                    r = (max(x[0] for x in rs), max(x[1] for x in rs))
            else:
                r = self.interval(atom)
                if r is None:
                    return None
            lo, hi = (lo + coef * r[0], hi + coef * r[1]) if coef > 0 else \
                (lo + coef * r[1], hi + coef * r[0])
        return lo, hi


class Emit(PyWriter):
    """A :class:`PyWriter` for an interpreter: :meth:`instruction` executes an
    instruction by the interpreter's op emitter, :meth:`region` a nested
    single-block region, :meth:`offset` checks an element access's bounds,
    :meth:`count` counts executed instructions; globals are read through
    names hoisted to the function's start."""

    def __init__(self, interp: EmitHost, function: Function) -> None:
        super().__init__(interp, function)
        self.interp = interp
        self.depth = 0  # structured nesting inside this generated function
        # Block -> its number, for branches in a func's CFG.
        self.blocks: dict[int, int] = {}
        # Per open structured region (the function body first): Python lines to
        # run when the region ends (see at_exit).
        self.exits: list[list[str]] = [[]]
        # Number of `parallel` loops enclosing the code being emitted, in this
        # generated function.
        self.parallel_depth = 0
        # Scratch space for a later stage's emitters (per generated function).
        self.data: dict[str, Any] = {}

    def name(self, v: Any) -> str:
        if isinstance(v, Global):
            local = f"g_{self.interp.name_of(v)}"
            if local not in self.hoisted:
                self.hoisted[local] = self.interp.global_name(v)
            return local
        return super().name(v)

    # -- memory accesses -----------------------------------------------------------
    def offset(self, inst: Instruction, acc: Access) -> str:
        """Emit the bounds check of an element access; return the Python text of
        its flat offset."""
        t = acc.base.type
        if not isinstance(t, ShapedType) or len(acc.indices) != t.rank \
                or not all(isinstance(i, (Expr, Value, int)) for i in acc.indices):
            raise Diagnostic(f"'{inst.opname}' needs one subscript per dimension of "
                             f"{value_text(acc.base)}", inst.loc)
        strides = [1] * t.rank
        for k in range(t.rank - 2, -1, -1):
            strides[k] = strides[k + 1] * t.shape[k + 1]
        subs: list[str] = []      # each subscript's value, for the error message
        checks: list[str] = []
        flat = Expr.of(0)         # the part of the offset proven in bounds
        checked: list[str] = []   # terms of checked subscripts
        for k, (ix, dim, stride) in enumerate(zip(acc.indices, t.shape, strides)):
            ix = Expr.of(ix)
            text = self.expr(ix)
            r = self.interval(ix)
            if r is not None and 0 <= r[0] and r[1] < dim:
                subs.append(text)
                flat = flat + ix.scale(stride)
                continue
            if not re.fullmatch(r"-?\w+", text):
                tmp = f"_s{k}"
                self.line(f"{tmp} = {text}")
                text = tmp
            subs.append(text)
            checks.append(f"0 <= {text} < {dim}")
            checked.append(text if stride == 1 else f"{text}*{stride}")
        if checks:
            fail = self.bind(oob_reporter(inst, acc), "oob")
            self.line(f"if not ({' and '.join(checks)}): {fail}({', '.join(subs)})")
        if not checked:
            return self.expr(flat)
        if flat.is_constant and flat.const == 0:
            return " + ".join(checked)
        return " + ".join([self.expr(flat)] + checked)

    # -- structure ------------------------------------------------------------------
    def count(self, n: int, inst: Instruction | None = None) -> None:
        """Count n executed instructions; with inst, check the step limit there."""
        if n:
            self.line(f"_st[0] += {n}")
        if inst is not None:
            self.line(f"if _st[0] > _MAX: {self.bind(limit_reporter(self.interp, inst), 'lim')}()")

    def instruction(self, inst: Instruction) -> None:
        if inst.regions and self.depth >= MAX_INLINE_DEPTH:
            self.interp.compile_unit(self, inst)
            return
        fn = self.interp.emitter_for(inst)
        if fn is None:
            raise Diagnostic(f"'{inst.opname}' cannot be executed at the {self.interp.stage} "
                             "stage (the interpreter has no rule for it)", inst.loc)
        fn(self, inst)

    def region(self, block: Block, count: bool = True) -> None:
        """Emit a structured region's single block one level deeper."""
        with self.indented():
            self.depth += 1
            self.exits.append([])
            try:
                if count:
                    self.count(len(block.instructions))
                for inst in block.instructions:
                    self.instruction(inst)
                self.exit_lines(1)
            finally:
                self.exits.pop()
                self.depth -= 1

    def at_exit(self, text: str) -> None:
        """Run the Python statement text when the innermost open region ends
        (after its last instruction, or before a ``return`` leaves it); the
        statements of one region run in the reverse order of registration."""
        self.exits[-1].append(text)

    def exit_lines(self, scopes: int) -> None:
        """Emit the at_exit statements of the innermost ``scopes`` open regions."""
        for lines in reversed(self.exits[len(self.exits) - scopes:]):
            for text in reversed(lines):
                self.line(text)


def oob_reporter(inst: Instruction, acc: Access) -> Callable[..., None]:
    t = acc.base.type

    def report(*subs: int) -> None:
        for k, (s, dim) in enumerate(zip(subs, t.shape)):
            if not 0 <= s < dim:
                raise Diagnostic(
                    f"'{inst.opname}' {access_text(acc)} is out of bounds: subscript #{k} "
                    f"({expr_text(acc.indices[k])}) is {s}, outside [0, {dim}) of "
                    f"{value_text(acc.base)} : {t}", inst.loc)
        raise AssertionError("bounds check failed without an out-of-bounds subscript")
    return report


def limit_reporter(interp: EmitHost, inst: Instruction) -> Callable[[], None]:
    def report() -> None:
        raise Diagnostic(f"execution did not finish within {interp.max_steps} instructions "
                         "(an endless loop?)", inst.loc)
    return report


def raiser(message: str, loc: Location | None) -> Callable[..., None]:
    def report(*_: Any) -> None:
        raise Diagnostic(message, loc)
    return report
