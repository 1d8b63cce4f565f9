"""Running a module function on numpy inputs: binding and checking arguments.
The entry point ``swir-run`` and the tests use; it picks the interpreter for
the module's stage (graph now; loop, buffered and dma come with their stages)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from swir.diagnostics import Diagnostic
from swir.interp.graph import GraphInterpreter
from swir.interp.kernels import dtype_of
from swir.ir.core import Function, Module
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


def check_arguments(f: Function, args: list[np.ndarray], names: list[str]) -> None:
    """Each argument must have exactly its parameter's shape and dtype."""
    if len(args) != len(f.params):
        raise Diagnostic(f"@{f.name} takes {len(f.params)} argument(s), {len(args)} given")
    for i, (p, a, src) in enumerate(zip(f.params, args, names)):
        want_shape, want_dtype = shape_of(p.type), dtype_of(p.type)
        if a.shape != want_shape or a.dtype != want_dtype:
            raise Diagnostic(f"argument #{i} (%{p.name}) of @{f.name} expects {p.type}, "
                             f"i.e. shape {want_shape} {want_dtype}; {src} has shape "
                             f"{a.shape} {a.dtype}")


def run_function(module: Module, f: Function, args: list[np.ndarray],
                 base_dir: str | Path = ".", arg_names: list[str] | None = None
                 ) -> list[np.ndarray]:
    check_arguments(f, args, arg_names or [f"argument #{i}" for i in range(len(args))])
    if module.stage == "graph":
        return GraphInterpreter(module, base_dir).call(f, args)
    raise Diagnostic(f"swir-run cannot execute the {module.stage} stage yet "
                     "(only the graph stage has an interpreter)", module.loc)
