"""The module a picture is drawn from: the IR as swir-opt prints it."""

from __future__ import annotations

from swir.ir.core import Module
from swir.parser import parse_module
from swir.printer import print_module


def as_printed(module: Module, what: str) -> Module:
    """A copy of ``module`` whose values have the names its text gives them.
    A pass may leave several values one name, which the printer tells apart
    (%mv, %mv_1, ...); drawing from the text's names makes a picture that
    matches the IR the user reads. ``what`` names the copy in messages."""
    copy = parse_module(print_module(module), f"<{what}>")
    copy.base_dir = module.base_dir
    copy.attrs = dict(module.attrs)
    return copy
