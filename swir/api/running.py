"""Running a function in the reference interpreter: which function, as
swir-run and :func:`swir.run` choose it."""

from __future__ import annotations

from swir.ir.core import Function, Module

from .errors import usage_error


def entry_function(module: Module, func: str | None, where: str) -> Function:
    """The function named ``func`` (``@`` optional), else @main, else the
    only function with a body; ``where`` names the module in the error."""
    from swir.interp.arguments import default_function
    if func is None:
        return default_function(module)
    f = module.lookup(func.lstrip("@"))
    if not isinstance(f, Function):
        raise usage_error(f"no function @{func.lstrip('@')} in {where}")
    return f
