"""Limits shared by the library and the tools.

The parser, verifier and printer recurse once per nested region; Python's
default recursion limit (1000) would stop them at a few hundred nested loops,
so their entry points raise it for the duration of the call.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator

RECURSION_LIMIT = 20000


@contextmanager
def deep_recursion() -> Iterator[None]:
    old = sys.getrecursionlimit()
    if old < RECURSION_LIMIT:
        sys.setrecursionlimit(RECURSION_LIMIT)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)
