"""The arguments of a run: which function runs by default, and checking each
argument against its parameter (the interpreters and ``swir-run`` share them)."""

from __future__ import annotations

import numpy as np

from swir.diagnostics import Diagnostic
from swir.ir.core import FuncParam, Function, Module
from swir.ir.dtypes import dtype_of
from swir.ir.types import ShapedType, Type


def default_function(module: Module) -> Function:
    """``@main`` if there is one, else the only function with a body."""
    main = module.lookup("main")
    if isinstance(main, Function):
        return main
    bodies = [f for f in module.functions if f.body is not None]
    if len(bodies) == 1:
        return bodies[0]
    names = ", ".join(f"@{f.name}" for f in bodies) or "none"
    raise Diagnostic(f"module has no @main; choose a function with --func (functions: {names})")


def shape_of(t: Type) -> tuple[int, ...]:
    return tuple(t.shape) if isinstance(t, ShapedType) else ()


def check_arguments(f: Function, args: list[np.ndarray], names: list[str],
                    params: list[FuncParam] | None = None) -> None:
    """Each argument must have exactly its parameter's shape and dtype. ``params``
    are the parameters taking arguments (default: all of f's)."""
    params = list(f.params) if params is None else params
    if len(args) != len(params):
        outs = len(f.params) - len(params)
        why = ""
        if outs and f.kind == "func":
            why = (f" (its last {outs} parameter(s) are output buffers, allocated by the "
                   "run: attribute 'outputs')")
        raise Diagnostic(f"@{f.name} takes {len(params)} argument(s){why}, {len(args)} given")
    for i, (p, a, src) in enumerate(zip(params, args, names)):
        want_shape, want_dtype = shape_of(p.type), dtype_of(p.type)
        if a.shape != want_shape or a.dtype != want_dtype:
            raise Diagnostic(f"argument #{i} (%{p.name}) of @{f.name} expects {p.type}, "
                             f"i.e. shape {want_shape} {want_dtype}; {src} has shape "
                             f"{a.shape} {a.dtype}")
