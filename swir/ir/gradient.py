"""Gradient declarations (DLVM's ``[gradient @f wrt 1 keeping 0]``), written as
function attributes on a function without a body:

    func @f_grad(%x: <4 x f32>, %w: <4 x f32>) -> (<f32>, <4 x f32>)
        attributes {gradient = @f, wrt = [1], keeping = [0]}

declares that @f_grad takes @f's arguments and returns @f's results number
``keeping`` (in that order) followed by the gradient of @f's result
``output`` (default 0) with respect to each argument in ``wrt``. The
differentiated result must be a single element, unless ``seedable = true``:
then the function takes one more argument, the result's adjoint (the seed),
and returns the vector-Jacobian product. -differentiate writes the body and
drops the attributes. docs/ir.md ("Gradient declarations") has the rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from swir.ir.core import Function, Module, SymbolRef
from swir.ir.types import TensorType, Type

GRADIENT_ATTRS = ("gradient", "wrt", "keeping", "output", "seedable")


class GradientError(Exception):
    """A gradient declaration that is malformed or does not match its function."""


@dataclass(frozen=True)
class GradientDecl:
    of: Function                # the function differentiated
    wrt: tuple[int, ...]        # its arguments the gradients are taken for
    keeping: tuple[int, ...]    # its results returned as well, first
    output: int                 # its result differentiated
    seedable: bool              # the result's adjoint is an extra last argument

    def signature(self) -> tuple[list[Type], list[Type]]:
        """The parameter and result types the declaration must have."""
        params = [p.type for p in self.of.params]
        if self.seedable:
            params.append(self.of.result_types[self.output])
        results = [self.of.result_types[k] for k in self.keeping]
        results += [self.of.params[i].type for i in self.wrt]
        return params, results


def is_gradient(f: Function) -> bool:
    return any(a in f.attrs for a in GRADIENT_ATTRS)


def gradient_decl(f: Function, module: Module) -> GradientDecl:
    """The declaration f's attributes make, checked against the function it
    names (GradientError says what is wrong)."""
    a = f.attrs
    if "gradient" not in a:
        raise GradientError(f"'{next(k for k in GRADIENT_ATTRS if k in a)}' is a gradient "
                            "declaration's attribute: add gradient = @function")
    name = a["gradient"]
    of = module.lookup(name) if isinstance(name, SymbolRef) else None
    if not isinstance(of, Function):
        raise GradientError(f"'gradient' must name a function of the module, got {_show(name)}")
    if of is f:
        raise GradientError("a function cannot be its own gradient")
    if f.body is not None:
        raise GradientError("a gradient declaration has no body: -differentiate writes it")
    wrt = _indices(a.get("wrt"), "wrt", len(of.params), "argument", required=True)
    for i in wrt:
        _differentiable_argument(of, i)
    keeping = _indices(a.get("keeping", ()), "keeping", len(of.result_types), "result")
    output = _index(a.get("output", 0), "output", len(of.result_types), "result")
    seedable = a.get("seedable", False)
    if not isinstance(seedable, bool):
        raise GradientError(f"'seedable' must be true or false, got {_show(seedable)}")
    t = of.result_types[output]
    if not _float_tensor(t):
        raise GradientError(f"result {output} of @{of.name} ({t}) is not a float tensor: "
                            "it has no gradient")
    if not seedable and t.num_elements != 1:
        raise GradientError(f"result {output} of @{of.name} ({t}) is not a single element: "
                            "add seedable = true to take its adjoint as the last argument")
    decl = GradientDecl(of, wrt, keeping, output, seedable)
    _check_signature(f, decl)
    return decl


def _differentiable_argument(of: Function, i: int) -> None:
    p = of.params[i]
    if not _float_tensor(p.type):
        raise GradientError(f"argument {i} of @{of.name} (%{p.name}: {p.type}) is not "
                            "differentiable: only float tensors carry gradients")


def _float_tensor(t: Type) -> bool:
    return isinstance(t, TensorType) and t.element.is_float


def _check_signature(f: Function, decl: GradientDecl) -> None:
    params, results = decl.signature()
    have = [p.type for p in f.params]
    if have != params:
        raise GradientError(f"the gradient of @{decl.of.name} takes ({_types(params)}), "
                            f"not ({_types(have)})")
    if list(f.result_types) != results:
        raise GradientError(f"the gradient of @{decl.of.name} returns ({_types(results)}), "
                            f"not ({_types(f.result_types)})")


def _indices(v, name: str, n: int, what: str, required: bool = False) -> tuple[int, ...]:
    if v is None or not isinstance(v, (list, tuple)) or (required and not v):
        raise GradientError(f"'{name}' must be a {'non-empty ' if required else ''}list of "
                            f"{what} numbers, got {_show(v)}")
    out = tuple(_index(x, name, n, what) for x in v)
    if len(set(out)) != len(out):
        raise GradientError(f"'{name}' names {what} {_show(list(out))} more than once")
    return out


def _index(x, name: str, n: int, what: str) -> int:
    if not isinstance(x, int) or isinstance(x, bool) or not 0 <= x < n:
        raise GradientError(f"'{name}': {_show(x)} is not in 0..{n - 1} (the {what}s)")
    return x


def _types(ts) -> str:
    return ", ".join(map(str, ts))


def _show(v) -> str:
    if isinstance(v, SymbolRef):
        return f"@{v}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(map(_show, v)) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(v) if isinstance(v, str) else str(v)
