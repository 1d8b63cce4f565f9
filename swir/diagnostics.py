"""Located diagnostics: ``FILE:LINE:COL: error: MESSAGE``, the source line, a caret.

Every error swir reports to a user is a :class:`Diagnostic`. The tools catch it,
render it and exit with status 1; nothing else may escape as a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Location:
    """A position in a source file; ``line`` and ``col`` count from 1."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class SourceManager:
    """Keeps the text of every file read so diagnostics can quote its lines."""

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}

    def add(self, name: str, text: str) -> None:
        self._texts[name] = text

    def line(self, loc: Location) -> str | None:
        text = self._texts.get(loc.file)
        if text is None:
            return None
        lines = text.split("\n")
        if 1 <= loc.line <= len(lines):
            return lines[loc.line - 1].rstrip("\r")
        return None


SOURCES = SourceManager()


@dataclass
class Diagnostic(Exception):
    """An error in the user's input (or a pass's output), with where it is."""

    message: str
    loc: Location | None = None
    notes: list[tuple[str, Location | None]] = field(default_factory=list)
    file: str | None = None  # when there is no line to point at

    def __str__(self) -> str:
        return self.render()

    def render(self, sources: SourceManager = SOURCES) -> str:
        out = [_render_one("error", self.message, self.loc, self.file, sources)]
        for note, loc in self.notes:
            out.append(_render_one("note", note, loc, None, sources))
        return "\n".join(out)


def one_line(text: str) -> str:
    """``text`` with each non-printable character (control, format, line and
    paragraph separators) written as a backslash escape: messages quote names
    from the input, which may hold a newline or a terminal escape sequence."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable():
            out.append(ch)
        else:
            o = ord(ch)
            out.append(f"\\x{o:02x}" if o < 256 else f"\\u{o:04x}" if o < 0x10000
                       else f"\\U{o:08x}")
    return "".join(out)


def _render_one(kind: str, message: str, loc: Location | None, file: str | None,
                sources: SourceManager) -> str:
    message = one_line(message)
    if loc is None:
        where = f"{file}: " if file else ""
        return f"{where}{kind}: {message}"
    head = f"{loc}: {kind}: {message}"
    line = sources.line(loc)
    if line is None:
        return head
    start = max(loc.col - 1 - _WINDOW // 2, 0) if len(line) > _WINDOW else 0
    shown = line[start:start + _WINDOW]
    prefix = "..." if start else ""
    suffix = "..." if start + _WINDOW < len(line) else ""
    caret_col = len(prefix) + len(_printable(line[start: max(loc.col - 1, start)]))
    return f"{head}\n{prefix}{_printable(shown)}{suffix}\n{' ' * caret_col}^"


_WINDOW = 160  # longest stretch of a source line quoted under a diagnostic


def _printable(text: str) -> str:
    """Quote a source line safely: control characters and tabs would misplace the caret."""
    return "".join(ch if ch.isprintable() else "?" for ch in text.replace("\t", " "))
