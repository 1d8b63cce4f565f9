"""Summing what a loop's iterations count without running every iteration.

The DMA traffic counter (:mod:`swir.costmodel.traffic`) adds up, per DMA, how
often it runs. A tile loop whose variable decides a guard (double buffering's
``if %t < %hi - 1``) or the trip count of a loop inside it (a remainder tile's
``min(4096, %n - 4096*%t)``) cannot simply be multiplied out, and walking it
one iteration at a time takes as long as the loop is long: 2^42 iterations for
a relu over a 2^62-byte tensor.

The loop's iterations split into a few *pieces* in which every guard that
reads the variable keeps its truth value, every ``min``/``max`` reading it
keeps its winner, and every inner trip count reading it is affine in the
iteration number. Within a piece the counts of one iteration are a polynomial
in the iteration number of degree at most the number of nested loops whose
trip count reads the variable, so the piece's sum is exact from that degree
plus one evaluations (Newton's forward differences, in integers).

:func:`piecewise_forms` finds, for one index expression, the affine forms
whose signs decide its piece (``None`` when it reads the variable through a
``floordiv``, ``ceildiv`` or ``mod``, which are not piecewise affine in it).
:func:`piece_cuts` turns the forms' values at the first two iterations into
the iteration numbers where pieces begin; :func:`sum_of_polynomial` sums a
piece from its first values.
"""

from __future__ import annotations

import itertools
from math import comb

from swir.ir.affine import Compound, Expr

# At most this many affine forms per expression (min/max choices multiply).
MAX_FORMS = 64


def reads(e: Expr, v: object) -> bool:
    return any(x is v for x in e.values())


def piecewise_forms(e: Expr, v: object) -> tuple[list[Expr], list[Expr]] | None:
    """``(kinks, pieces)`` for ``e`` as a function of ``v``: where the signs of
    every kink (an affine form in ``v``) stay the same, ``e`` equals one of
    ``pieces`` (each affine in ``v``). None if ``e`` is not piecewise affine in
    ``v`` or needs more than MAX_FORMS forms."""
    kinks: list[Expr] = []
    choices: list[list[Expr]] = []
    for atom, coef in e.terms:
        if not isinstance(atom, Compound) or not any(reads(a, v) for a in atom.args):
            choices.append([Expr(((atom, coef),), 0)])
            continue
        if atom.kind not in ("min", "max"):
            return None
        options: list[Expr] = []
        for arg in atom.args:
            sub = piecewise_forms(arg, v)
            if sub is None:
                return None
            kinks += sub[0]
            options += sub[1]
        # where two candidates cross, the winner may change
        kinks += [a - b for a, b in itertools.combinations(options, 2)]
        choices.append([o.scale(coef) for o in options])
    n = 1
    for c in choices:
        n *= len(c)
    if n > MAX_FORMS or len(kinks) > MAX_FORMS:
        return None
    pieces = [sum(combo, Expr.of(e.const)) for combo in itertools.product(*choices)]
    return kinks, pieces


def slope(e: Expr, v: object) -> int:
    """The coefficient of ``v`` in an affine form."""
    return sum(c for a, c in e.terms if a is v)


def piece_cuts(first: tuple[int, ...], second: tuple[int, ...], n: int) -> list[int]:
    """Iteration numbers in (0, n) where some form changes sign class (<0, 0,
    >0), given every form's value at iterations 0 and 1 (forms are affine in
    the iteration number)."""
    cuts = set()
    for a, b in zip(first, second):
        d = b - a
        if d == 0:
            continue
        if d < 0:
            a, d = -a, -d
        # a + k*d: negative before the first, zero from the first to the second
        for k in (-(a // d), (-a) // d + 1):
            if 0 < k < n:
                cuts.add(k)
    return sorted(cuts)


def sum_of_polynomial(values: list[list[int]], length: int) -> list[int]:
    """Per slot, the sum over k in [0, length) of a polynomial f(k) of degree
    below len(values), given values[j] = f(j) (Newton's forward differences:
    sum = sum_j C(length, j + 1) * delta^j f(0))."""
    total = [0] * len(values[0])
    diffs = [list(v) for v in values]
    for j in range(len(values)):
        c = comb(length, j + 1)
        if c:
            head = diffs[0]
            for s, x in enumerate(head):
                if x:
                    total[s] += c * x
        diffs = [[b - a for a, b in zip(p, q)] for p, q in zip(diffs, diffs[1:])]
        if not diffs:
            break
    return total
