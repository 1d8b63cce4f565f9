"""The one exception the Python API raises for bad input, and the helpers
the API and the tools share to say where an error is.

An error in what a user gave (IR text, a file, an option) is a
:class:`SwirError`: its text is the tools' diagnostics, ``FILE:LINE:COL:
error: MESSAGE`` with the quoted line and a caret (``<command-line>`` for an
option), or ``swir.FUNCTION: error: MESSAGE`` where there is no place to
point at. The tools print the same diagnostics with their own name.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

from swir.diagnostics import SOURCES, Diagnostic, Location
from swir.files import OutputError
from swir.passes.manager import PassFailure
from swir.verifier import VerificationError

F = TypeVar("F", bound=Callable)


class SwirError(Exception):
    """Bad input to a swir function: ``diagnostics`` says what and where.

    ``str(error)`` is what the tools print (without their name): one or more
    ``FILE:LINE:COL: error: MESSAGE`` diagnostics, each with its source line."""

    __module__ = "swir"         # users meet it as swir.SwirError

    def __init__(self, diagnostics: list[Diagnostic], function: str = "swir") -> None:
        self.diagnostics = diagnostics
        self.function = function
        super().__init__(self.render(function))

    @property
    def message(self) -> str:
        """The first diagnostic's message, without its place."""
        return self.diagnostics[0].message

    @property
    def location(self) -> Location | None:
        """Where the first diagnostic points (None: at no line)."""
        return self.diagnostics[0].loc

    def render(self, prog: str) -> str:
        """The diagnostics as ``prog`` (a tool, or an API function) prints them."""
        return "\n".join(render(prog, d) for d in self.diagnostics)


def render(prog: str, d: Diagnostic) -> str:
    """A diagnostic's text; one that names neither a place nor a file is
    prefixed with the tool's (or function's) name, as every other error is."""
    text = d.render()
    return text if d.loc is not None or d.file else f"{prog}: {text}"


def reported(function: str) -> Callable[[F], F]:
    """Decorate an API function: errors in its input (a Diagnostic, the
    verifier's or a pass's diagnostics, an unwritable output) leave it as
    one SwirError named ``swir.<function>``."""
    def wrap(f: F) -> F:
        @functools.wraps(f)
        def api_function(*args, **kwargs):
            try:
                return f(*args, **kwargs)
            except SwirError:
                raise
            except Diagnostic as d:
                raise SwirError([d], f"swir.{function}") from None
            except (VerificationError, PassFailure) as e:
                raise SwirError(e.diagnostics, f"swir.{function}") from None
            except OutputError as e:
                raise SwirError([Diagnostic(str(e))], f"swir.{function}") from None
        return api_function  # type: ignore[return-value]
    return wrap


def command_line_error(prog: str, argv: list[str], index: int, message: str) -> Diagnostic:
    """A diagnostic pointing into the command line itself, like clang's <command line>."""
    line = " ".join([prog] + argv)
    col = len(prog) + 2 + sum(len(a) + 1 for a in argv[:index])
    SOURCES.add("<command-line>", line)
    return Diagnostic(message, Location("<command-line>", 1, col))


def usage_error(message: str) -> Diagnostic:
    """An error about the options with no place to point at: a tool prints
    it as ``TOOL: error: MESSAGE``, the API as ``swir.FUNCTION: error: ...``."""
    return Diagnostic(message)
