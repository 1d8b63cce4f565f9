"""Progress of long work (swir-cg -O3 and swir-report on a large model can
take a minute): a tqdm bar on stderr saying which stage runs and which kernel
of how many, shown only when stderr is a terminal; nothing otherwise.

The pass manager opens one bar per pass; a pass that works item by item
(-ldm-plan per loop nest, the graph passes per trial kernel) sets the total
and advances it. Library code holds :data:`QUIET` unless a tool hands it a
real one, so nested pipelines (trial lowerings) never draw.

The bar is as wide as the terminal, asked again at every step (a resized
window gets a resized bar). A terminal that reports 0 columns or rows (the
one `script` gives its child, some CI runners' and serial consoles) gets
$COLUMNS / $LINES where they are set, else 80 x 24: tqdm's own sizing would
make a bar -1 column wide there, which it never draws.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

# A stage whose items are not counted: its name and the time it has taken.
UNCOUNTED = "{desc} {elapsed}"

# The size assumed when the terminal reports none (0 x 0) and the environment
# says nothing either: the classic terminal's.
FALLBACK_SIZE = (80, 24)


def terminal_size(stream: TextIO) -> tuple[int, int]:
    """(columns, rows) of the terminal ``stream`` writes to; each that the
    terminal reports as 0 (or cannot report) is taken from $COLUMNS / $LINES
    when that is a positive integer, else from FALLBACK_SIZE."""
    try:
        reported = tuple(os.get_terminal_size(stream.fileno()))
    except (AttributeError, OSError, ValueError):
        reported = (0, 0)
    size = []
    for n, variable, fallback in zip(reported, ("COLUMNS", "LINES"), FALLBACK_SIZE):
        if n <= 0:
            value = os.environ.get(variable, "")
            n = int(value) if value.isascii() and value.isdigit() and int(value) > 0 \
                else fallback
        size.append(n)
    return size[0], size[1]


class Progress:
    """One bar at a time; every method is a no-op when disabled."""

    def __init__(self, enabled: bool, stream: TextIO | None = None) -> None:
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self._bar: Any = None
        self._working = False     # an item has started and is not counted yet

    def begin(self, what: str) -> None:
        """A new bar for the stage ``what`` (the previous one is closed); its
        items are counted once total() says how many there are."""
        if not self.enabled:
            return
        from tqdm import tqdm
        self.end()
        self._bar = tqdm(desc=what, file=self.stream, leave=False, bar_format=UNCOUNTED,
                         **self._size())

    def _size(self) -> dict[str, int]:
        """tqdm's ncols and nrows for the terminal now: its size less one
        column and one row, as tqdm's dynamic_ncols takes it (a line as wide
        as the terminal would wrap)."""
        columns, rows = terminal_size(self.stream)
        return {"ncols": max(columns - 1, 1), "nrows": max(rows - 1, 1)}

    def _resize(self) -> None:
        size = self._size()
        self._bar.ncols, self._bar.nrows = size["ncols"], size["nrows"]

    def total(self, n: int, unit: str = "kernel") -> None:
        """The current stage has ``n`` items (kernels, trial measurements)."""
        if self._bar is not None:
            self._resize()
            self._bar.bar_format, self._bar.unit = None, unit
            self._bar.reset(total=n)
            self._working = False

    def advance(self, note: str = "") -> None:
        """The next item starts (``note`` names it: ``@conv2d_3``); the bar
        counts the items finished."""
        if self._bar is not None:
            self._resize()
            if note:
                self._bar.set_postfix_str(note, refresh=False)
            self._bar.update(1 if self._working else 0)
            self._working = True

    def end(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
            self._working = False


QUIET = Progress(False)


def for_terminal(quiet: bool = False, stream: TextIO | None = None) -> Progress:
    """A Progress that draws when ``stream`` (stderr) is a terminal and not ``quiet``."""
    stream = stream or sys.stderr
    isatty = getattr(stream, "isatty", None)
    return Progress(bool(not quiet and isatty is not None and isatty()), stream)
