"""Index expressions: affine combinations of SSA index values, plus the
quasi-affine atoms loop tiling needs (floordiv, ceildiv, mod by a constant,
min and max).

An :class:`Expr` is ``sum(coef * atom) + const``; an atom is a Value or a
:class:`Compound` (``floordiv``/``ceildiv``/``mod``/``min``/``max``). Exprs are
immutable and normalised (like terms merged, zero terms dropped), so printing
is canonical. Products of two non-constant expressions are not representable:
building one raises :class:`NonAffine`, which the parser turns into a located
diagnostic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Mapping


class NonAffine(ValueError):
    """An index expression that is not (quasi-)affine."""


@dataclass(frozen=True, slots=True, eq=False)
class Compound:
    """``floordiv``/``ceildiv``/``mod`` of an expression by a positive constant,
    or ``min``/``max`` of expressions."""

    kind: str
    args: tuple["Expr", ...]
    divisor: int = 0

    def key(self) -> tuple:
        return (self.kind, tuple(a.key() for a in self.args), self.divisor)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Compound) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())


def _atom_key(atom: object) -> object:
    return atom.key() if isinstance(atom, Compound) else ("v", id(atom))


@dataclass(frozen=True, slots=True, eq=False)
class Expr:
    terms: tuple[tuple[object, int], ...] = ()
    const: int = 0

    # -- construction -------------------------------------------------------
    @staticmethod
    def of(x: "Expr | int | object") -> "Expr":
        """Lift an int, a Value or an Expr to an Expr."""
        if isinstance(x, Expr):
            return x
        if isinstance(x, bool):
            raise TypeError("bool is not an index")
        if isinstance(x, int):
            return Expr((), x)
        return Expr(((x, 1),), 0)

    @staticmethod
    def _make(terms: list[tuple[object, int]], const: int) -> "Expr":
        merged: dict[object, list] = {}
        for atom, coef in terms:
            k = _atom_key(atom)
            if k in merged:
                merged[k][1] += coef
            else:
                merged[k] = [atom, coef]
        kept = [(a, c) for a, c in merged.values() if c != 0]
        folded = _fold_divmod(kept)
        if folded is not None:
            return Expr._make(folded[0], const + folded[1])
        return Expr(tuple(kept), const)

    def __add__(self, other: "Expr | int | object") -> "Expr":
        o = Expr.of(other)
        return Expr._make(list(self.terms) + list(o.terms), self.const + o.const)

    __radd__ = __add__

    def __neg__(self) -> "Expr":
        return self.scale(-1)

    def __sub__(self, other: "Expr | int | object") -> "Expr":
        return self + (-Expr.of(other))

    def __rsub__(self, other: "Expr | int | object") -> "Expr":
        return Expr.of(other) - self

    def scale(self, k: int) -> "Expr":
        if k == 0:
            return Expr((), 0)
        return Expr(tuple((a, c * k) for a, c in self.terms), self.const * k)

    def __mul__(self, other: "Expr | int | object") -> "Expr":
        o = Expr.of(other)
        if o.is_constant:
            return self.scale(o.const)
        if self.is_constant:
            return o.scale(self.const)
        raise NonAffine("product of two non-constant index expressions is not affine")

    __rmul__ = __mul__

    def _divmod(self, kind: str, other: "Expr | int") -> "Expr":
        o = Expr.of(other)
        if not o.is_constant:
            raise NonAffine(f"{kind} by a non-constant is not affine")
        if o.const <= 0:
            raise NonAffine(f"{kind} needs a positive constant divisor, got {o.const}")
        if self.is_constant:
            a, d = self.const, o.const
            return Expr.of({"floordiv": a // d, "ceildiv": -(-a // d), "mod": a % d}[kind])
        if o.const == 1:
            return self if kind != "mod" else Expr.of(0)
        return Expr(((Compound(kind, (self,), o.const), 1),), 0)

    def floordiv(self, d: "Expr | int") -> "Expr":
        return self._divmod("floordiv", d)

    def ceildiv(self, d: "Expr | int") -> "Expr":
        return self._divmod("ceildiv", d)

    def mod(self, d: "Expr | int") -> "Expr":
        return self._divmod("mod", d)

    @staticmethod
    def minmax(kind: str, args: list["Expr | int | object"]) -> "Expr":
        exprs = [Expr.of(a) for a in args]
        if len(exprs) == 1:
            return exprs[0]
        if all(e.is_constant for e in exprs):
            pick = min if kind == "min" else max
            return Expr.of(pick(e.const for e in exprs))
        return Expr(((Compound(kind, tuple(exprs)), 1),), 0)

    # -- queries ------------------------------------------------------------
    @property
    def is_constant(self) -> bool:
        return not self.terms

    def as_value(self) -> object | None:
        """The Value if this expression is exactly one value, else None."""
        if len(self.terms) == 1 and self.const == 0 and self.terms[0][1] == 1:
            atom = self.terms[0][0]
            if not isinstance(atom, Compound):
                return atom
        return None

    def key(self) -> tuple:
        return (tuple((_atom_key(a), c) for a, c in self.terms), self.const)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Expr) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def values(self) -> Iterator[object]:
        """Every Value this expression reads, in order, with repeats."""
        for atom, _ in self.terms:
            if isinstance(atom, Compound):
                for a in atom.args:
                    yield from a.values()
            else:
                yield atom

    def substitute(self, mapping: Mapping[object, "Expr | object"]) -> "Expr":
        """Replace values by values or expressions (used by replace-all-uses)."""
        out = Expr.of(self.const)
        for atom, coef in self.terms:
            if isinstance(atom, Compound):
                args = [a.substitute(mapping) for a in atom.args]
                if atom.kind in ("min", "max"):
                    new = Expr.minmax(atom.kind, args)
                else:
                    new = args[0]._divmod(atom.kind, atom.divisor)
            else:
                new = Expr.of(mapping.get(atom, atom))
            out = out + new.scale(coef)
        return out

    def evaluate(self, env: Mapping[object, int]) -> int:
        total = self.const
        for atom, coef in self.terms:
            total += coef * _eval_atom(atom, env)
        return total

    def linear_part(self) -> "Expr":
        return Expr(self.terms, 0)

    def __str__(self) -> str:
        return format_expr(self, str)


def _fold_divmod(terms: list[tuple[object, int]]) -> tuple[list, int] | None:
    """``k*c*(E floordiv k) + c*(E mod k)`` is ``c*E``: the terms with one such
    pair replaced by E's (and E's constant), or None. An element's flat
    offset split into subscripts by floordiv and mod adds up to the offset
    again, so a bound on it is as tight as on the offset."""
    mods = {atom.args[0].key() + (atom.divisor,): (atom, c) for atom, c in terms
            if isinstance(atom, Compound) and atom.kind == "mod"}
    if not mods:
        return None
    for atom, c in terms:
        if not (isinstance(atom, Compound) and atom.kind == "floordiv"):
            continue
        pair = mods.get(atom.args[0].key() + (atom.divisor,))
        if pair is None or pair[1] * atom.divisor != c:
            continue
        e = atom.args[0]
        rest = [(a, k) for a, k in terms if a is not atom and a is not pair[0]]
        return rest + [(a, k * pair[1]) for a, k in e.terms], e.const * pair[1]
    return None


def _eval_atom(atom: object, env: Mapping[object, int]) -> int:
    if not isinstance(atom, Compound):
        return env[atom]
    vals = [a.evaluate(env) for a in atom.args]
    if atom.kind == "min":
        return min(vals)
    if atom.kind == "max":
        return max(vals)
    d = atom.divisor
    return {"floordiv": vals[0] // d, "ceildiv": -(-vals[0] // d), "mod": vals[0] % d}[atom.kind]


def format_expr(e: Expr, name: Callable[[object], str],
                atom_text: Callable[[object, bool], str] | None = None) -> str:
    """Canonical text: ``2*%oh + %kh - 3``; ``name`` spells a Value.
    ``atom_text(atom, bare)``, if given, spells every atom instead (the C
    emitter writes floordiv and friends as calls)."""
    parts: list[str] = []
    for atom, coef in e.terms:
        text = atom_text(atom, coef == 1) if atom_text is not None \
            else _format_atom(atom, name, bare=coef == 1)
        mag = abs(coef)
        body = text if mag == 1 else f"{mag}*{text}"
        if not parts:
            parts.append(body if coef > 0 else f"-{body}")
        else:
            parts.append(f" + {body}" if coef > 0 else f" - {body}")
    if e.const or not parts:
        if not parts:
            parts.append(str(e.const))
        else:
            parts.append(f" + {e.const}" if e.const > 0 else f" - {-e.const}")
    return "".join(parts)


def _format_atom(atom: object, name: Callable[[object], str], bare: bool) -> str:
    if not isinstance(atom, Compound):
        return name(atom)
    if atom.kind in ("min", "max"):
        return f"{atom.kind}({', '.join(format_expr(a, name) for a in atom.args)})"
    inner = atom.args[0]
    inner_text = format_expr(inner, name)
    if inner.as_value() is None:
        inner_text = f"({inner_text})"
    text = f"{inner_text} {atom.kind} {atom.divisor}"
    # A scaled or negated div/mod needs parentheses to keep its precedence.
    return text if bare else f"({text})"
