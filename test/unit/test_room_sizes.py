"""Rooms of a size one can hold (issue 42, item 5): no class over 400 lines
and no function over 80 in swir/ or tools/, measured from the source with
the ast module (first line of the definition, decorators excluded, to its
last line; a nested function counts in its own right and inside its outer
one).

ALLOWED lists the offenders that other items of the issue are splitting;
each names the owner's item. An entry may not grow, and an entry that no
longer offends must be removed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIMITS = {"class": 400, "function": 80}

# (path, qualified name) -> lines: an offender allowed while it is being split (none now).
ALLOWED: dict[tuple[str, str], int] = {
}


def _rooms(tree: ast.AST, outer: str = ""):
    """(kind, qualified name, lines) of every class and function in tree."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{outer}{node.name}"
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            yield kind, name, node.end_lineno - node.lineno + 1  # type: ignore[operator]
            yield from _rooms(node, name + ".")
        else:
            yield from _rooms(node, outer)


def _measured() -> list[tuple[str, str, str, int]]:
    out = []
    for top in ("swir", "tools"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"), rel)
            out += [(rel, kind, name, n) for kind, name, n in _rooms(tree)]
    return out


def _offenders() -> dict[tuple[str, str], tuple[str, int]]:
    return {(rel, name): (kind, n) for rel, kind, name, n in _measured()
            if n > LIMITS[kind]}


def test_no_room_over_its_size():
    too_big = [f"{rel}: {kind} {name} has {n} lines (at most {LIMITS[kind]})"
               for (rel, name), (kind, n) in sorted(_offenders().items())
               if n > ALLOWED.get((rel, name), 0)]
    assert not too_big, "\n".join(too_big)


def test_allowed_offenders_still_offend():
    offenders = _offenders()
    stale = [f"{rel}: {name} is within its limit now; remove it from ALLOWED"
             for rel, name in sorted(ALLOWED) if (rel, name) not in offenders]
    assert not stale, "\n".join(stale)


@pytest.mark.parametrize("source, expected", [
    ("def f():\n" + "    x = 1\n" * 80, [("function", "f", 81)]),
    ("class A:\n    def g(self):\n        pass\n",
     [("class", "A", 3), ("function", "A.g", 2)]),
])
def test_rooms_are_measured(source, expected):
    assert list(_rooms(ast.parse(source))) == expected
