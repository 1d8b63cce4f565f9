"""Fitting text to a width: kernel names shortened with an ellipsis (and
kept unique), long lines wrapped at blanks."""

from __future__ import annotations

import re
import textwrap

# A number and its unit stay on one line ("349.68 µs", "330 B blocks").
_UNIT = re.compile(r"(\d) (?=(µs|us|ms|s|B|GB/s|GFLOPS|cycles)\b)")
_HELD = "\u00a0"     # textwrap breaks at ASCII blanks only


def fitted_names(names: list[str], width: int, ascii_only: bool = False) -> list[str]:
    """Each name, at most ``width`` characters: a longer one keeps its head
    and its tail (the ``_N`` that numbers kernels of one kind) around an
    ellipsis; the tail grows until no two shortened names are equal."""
    dots = "..." if ascii_only else "…"
    long = [n for n in names if len(n) > width]
    if not long:
        return list(names)
    tail = max(min(len(n) - n.rfind("_") for n in long), 1)
    while True:
        short = [n if len(n) <= width else shortened(n, width, tail, dots) for n in names]
        if len(set(short)) == len(set(names)) or tail >= width - len(dots) - 1:
            return short
        tail += 1


def shortened(name: str, width: int, tail: int, dots: str) -> str:
    """``name`` as its first characters, ``dots`` and its last ``tail`` characters."""
    tail = min(tail, width - len(dots) - 1)
    return name[:width - len(dots) - tail] + dots + name[len(name) - tail:]


def wrapped(lines: list[str], width: int) -> list[str]:
    """The lines, each longer than ``width`` wrapped at blanks; continuation
    lines are indented two more than the line's own indent."""
    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip(" ")))
        parts = textwrap.wrap(_UNIT.sub(r"\1" + _HELD, line), width,
                              subsequent_indent=indent + "  ", break_long_words=False,
                              break_on_hyphens=False)
        out += [part.replace(_HELD, " ") for part in parts]
    return out
