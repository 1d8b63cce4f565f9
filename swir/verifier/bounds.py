"""Static bounds of index expressions inside loop nests and ``if`` guards,
for the verifier's checks that subscripts, copies, DMAs and work shares stay
in range.

Bounds of index expressions: min/max are distributed first (so terms in the
same loop variable cancel), then loop variables are replaced, innermost
first, by their (possibly symbolic) bounds, so remainder tiles like
``64*%io + %ii`` with ``%ii < min(64, 1000 - 64*%io)`` are bounded exactly (by
999) rather than by plain interval arithmetic.
"""

from __future__ import annotations

from typing import Any

from swir.ir.affine import Compound, Expr
from swir.ir.core import Constraint, Instruction, Result, Value
from swir.ir.module_attrs import module_target
from swir.ops import CHUNK, CONST, CPE_ID, DYN_INDEX

_INF = float("inf")
# Steps of the symbolic bounds analysis allowed per instruction; beyond it the
# access is reported as too complex (failing closed, never silently accepted).
BOUNDS_BUDGET = 20000


class TooComplex(Exception):
    """An index expression the bounds analysis gives up on (its step budget ran out)."""


def _add_guard(out: dict[tuple, list[int]], d: Expr, rel: str) -> None:
    """Record ``d REL 0`` as bounds on d's linear part (and, for one scaled
    variable, c*x + k REL 0, on the variable itself)."""
    if len(d.terms) == 1 and abs(d.terms[0][1]) > 1 and rel in (">=", ">", "<=", "<"):
        (atom, c), k = d.terms[0], d.const
        if rel in (">", "<"):  # integers: x > 0 is x - 1 >= 0
            k, rel = (k - 1, ">=") if rel == ">" else (k + 1, "<=")
        if rel == "<=":
            c, k = -c, -k      # now c*x + k >= 0
        x = Expr.of(atom)
        if c > 0:   # x >= ceil(-k / c)
            _add_guard(out, x - (-(k // c)), ">=")
        else:       # x <= floor(k / -c)
            _add_guard(out, x - (k // -c), "<=")
    lin = d.linear_part()
    key = lin.key()
    lo, hi = out.get(key, [-_INF, _INF])[:2]
    c = d.const
    if rel in (">=", "=="):
        lo = max(lo, -c)
    if rel == ">":
        lo = max(lo, -c + 1)
    if rel in ("<=", "=="):
        hi = min(hi, -c)
    if rel == "<":
        hi = min(hi, -c - 1)
    out[key] = [lo, hi, lin]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class IndexBounds:
    """The loop variables and ``if`` guards around the instruction being
    checked (the verifier pushes and pops them as it walks regions), and the
    bounds they give index expressions."""

    def __init__(self) -> None:
        # id(loop variable) -> (lower bound, upper bound, nesting depth)
        self.loop_bounds: dict[int, tuple[Expr, Expr, int]] = {}
        self.guards: list[dict[tuple, list[int]]] = []
        self._budget = BOUNDS_BUDGET
        self._substituted: set[int] = set()  # symbols being bounded through a guard

    def reset_budget(self) -> None:
        """A fresh step budget, for the next instruction."""
        self._budget = BOUNDS_BUDGET

    def bounds(self, e: Expr) -> tuple[int, int] | None:
        hi, lo = self.hi(e), self.hi(-e)
        if hi is None or lo is None:
            return None
        return -lo, hi

    def hi(self, e: Expr) -> int | None:
        """An upper bound of e over every iteration, or None if unbounded."""
        best = self._guard_hi(e)
        found = self._hi_unguarded(e)
        if found is None:
            return best
        return found if best is None else min(best, found)

    def _guard_hi(self, e: Expr) -> int | None:
        """The tightest upper bound enclosing ``if`` guards give e (or its negation)."""
        lin = e.linear_part()
        key, neg_key, out = lin.key(), (-lin).key(), None
        for guards in self.guards:
            cands = []
            g = guards.get(key)
            if g is not None and g[1] < _INF:
                cands.append(g[1])
            g = guards.get(neg_key)
            if g is not None and g[0] > -_INF:
                cands.append(-g[0])
            for c in cands:
                out = c + e.const if out is None else min(out, c + e.const)
        return out

    def _guard_bounds(self, iv: Value) -> tuple[list[Expr], list[Expr]]:
        """Upper and lower bounds of ``iv`` from enclosing guards lo <= L <= hi
        whose linear part L has ``iv`` with coefficient +-1 (the rest of L may
        hold other symbols: t < %hi - 1 bounds t by %hi - 2)."""
        tops: list[Expr] = []
        bottoms: list[Expr] = []
        for guards in self.guards:
            for entry in guards.values():
                lo, hi, lin = entry
                c = next((c for a, c in lin.terms if a is iv), 0)
                if c in (1, -1) and any(id(a) in self._substituted
                                         for a in lin.values() if a is not iv):
                    continue
                if c not in (1, -1):
                    continue
                rest = lin - Expr.of(iv).scale(c)      # L = c*iv + rest
                if any(id(a) in self.loop_bounds for a in rest.values()):
                    continue   # a guard between loop variables: may go in circles
                if c == 1:
                    if hi < _INF:
                        tops.append(Expr.of(hi) - rest)
                    if lo > -_INF:
                        bottoms.append(Expr.of(lo) - rest)
                else:
                    if hi < _INF:
                        bottoms.append(rest - hi)
                    if lo > -_INF:
                        tops.append(rest - lo)
        return tops, bottoms

    def _hi_unguarded(self, e: Expr) -> int | None:
        self._budget -= 1
        if self._budget < 0:  # distributing min/max is exponential in the worst case
            raise TooComplex
        for atom, coef in e.terms:
            if isinstance(atom, Compound) and atom.kind in ("min", "max"):
                rest = Expr(tuple((a, c) for a, c in e.terms if a is not atom), e.const)
                his = [self.hi(rest + a.scale(coef)) for a in atom.args]
                if (atom.kind == "min") == (coef > 0):  # behaves as a min
                    known = [h for h in his if h is not None]
                    return min(known) if known else None
                return None if any(h is None for h in his) else max(his)
        iv = self._innermost_loop_var(e)
        if iv is not None:
            coef = dict((id(a), c) for a, c in e.terms)[id(iv)]
            lb, ub, _ = self.loop_bounds[id(iv)]
            rest = Expr(tuple((a, c) for a, c in e.terms if a is not iv), e.const)
            # Enclosing guards on the variable (if %t < 15, if %t < %hi - 1)
            # tighten its bounds.
            tops, bottoms = self._guard_bounds(iv)
            top = Expr.minmax("min", [ub - 1] + tops)
            bottom = Expr.minmax("max", [lb] + bottoms)
            return self.hi(rest + (top if coef > 0 else bottom).scale(coef))
        # A symbol isolated by a guard (if %lo < %hi) is bounded by the other
        # symbols, once per symbol on the way (guards may relate them in circles).
        for atom, coef in e.terms:
            if isinstance(atom, Compound) or id(atom) in self._substituted:
                continue
            tops, bottoms = self._guard_bounds(atom)
            cands = tops if coef > 0 else bottoms
            if not cands:
                continue
            rest = Expr(tuple((a, c) for a, c in e.terms if a is not atom), e.const)
            self._substituted.add(id(atom))
            try:
                plain = self._hi_plain(e)
                tight = [h for h in (self.hi(rest + c.scale(coef)) for c in cands)
                         if h is not None]
            finally:
                self._substituted.discard(id(atom))
            known = [h for h in [plain] + tight if h is not None]
            return min(known) if known else None
        return self._hi_plain(e)

    def _hi_plain(self, e: Expr) -> int | None:
        total = e.const
        for atom, coef in e.terms:
            r = self._atom_range(atom)
            if r is None:
                return None
            total += coef * (r[1] if coef > 0 else r[0])
        return total

    def _innermost_loop_var(self, e: Expr) -> Value | None:
        best, depth = None, -1
        for atom, _ in e.terms:
            entry = self.loop_bounds.get(id(atom))
            if entry is not None and entry[2] > depth:
                best, depth = atom, entry[2]
        return best

    def _atom_range(self, atom: object) -> tuple[int, int] | None:
        # min/max atoms never get here: _hi_unguarded distributes them first.
        hi, lo = self._guard_hi(Expr.of(atom)), self._guard_hi(-Expr.of(atom))
        if isinstance(atom, Compound):  # floordiv / ceildiv / mod of one expression
            r = self._compound_range(atom)
        else:
            r = self._symbol_range(atom)
        if r is None:
            return None if hi is None or lo is None else (-lo, hi)
        return (r[0] if lo is None else max(r[0], -lo), r[1] if hi is None else min(r[1], hi))

    def _compound_range(self, atom: Compound) -> tuple[int, int] | None:
        r = self.bounds(atom.args[0])
        d = atom.divisor
        if atom.kind == "mod":
            return (r[0], r[1]) if r is not None and r[0] >= 0 and r[1] < d else (0, d - 1)
        if r is None:
            return None
        if atom.kind == "floordiv":
            return r[0] // d, r[1] // d
        return -(-r[0] // d), -(-r[1] // d)

    def _symbol_range(self, v: object) -> tuple[int, int] | None:
        if isinstance(v, Result) and v.owner.isa(CPE_ID):
            return 0, module_target(v.owner).cpes - 1
        # The attributes are checked when their op is, which may be later: a
        # malformed one leaves the range unknown here.
        if isinstance(v, Result) and v.owner.isa(CHUNK):
            extent = v.owner.attrs.get("extent", 0)
            return (0, extent) if _is_int(extent) else None
        if isinstance(v, Result) and v.owner.isa(DYN_INDEX):
            bound = v.owner.attrs.get("bound", 1)
            return (0, bound - 1) if _is_int(bound) else None
        if isinstance(v, Result) and v.owner.isa(CONST):
            c = v.owner.args[0]
            return (c.const, c.const) if isinstance(c, Expr) and c.is_constant else None
        return None

    def guards_of(self, inst: Instruction) -> dict[tuple, list[int]]:
        out: dict[tuple, list[int]] = {}
        for c in inst.args:
            if isinstance(c, Constraint):
                _add_guard(out, c.lhs - c.rhs, c.rel)
        return out

    def negated_guards(self, inst: Instruction) -> dict[tuple, list[int]]:
        out: dict[tuple, list[int]] = {}
        if len(inst.args) == 1 and isinstance(inst.args[0], Constraint):
            c = inst.args[0]
            neg = {">=": "<", "<=": ">", ">": "<=", "<": ">=", "==": "!=", "!=": "=="}[c.rel]
            _add_guard(out, c.lhs - c.rhs, neg)
        return out

