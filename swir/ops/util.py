"""Small checks shared by op rules; each raises OpError with a user-facing message."""

from __future__ import annotations

from typing import Any

from swir.ir.affine import Expr
from swir.ir.core import Access, Apply, Dense, Global, Instruction, Value
from swir.ir.types import INDEX, BufType, LDMType, ScalarType, ShapedType, TensorType
from swir.ops.registry import OpError


def value_arg(inst: Instruction, i: int) -> Value:
    s = inst.args[i]
    if not isinstance(s, Value):
        raise OpError(f"operand #{i} must be a value")
    return s


def tensor_arg(inst: Instruction, i: int) -> TensorType:
    t = value_arg(inst, i).type
    if not isinstance(t, TensorType):
        raise OpError(f"operand #{i} must be a tensor, got {t}")
    return t




def index_expr(inst: Instruction, i: int) -> Expr:
    s = inst.args[i]
    if isinstance(s, Value):
        if s.type != INDEX:
            raise OpError(f"operand #{i} must be of type index, got {s.type}")
        return Expr.of(s)
    if isinstance(s, Expr):
        return s
    raise OpError(f"operand #{i} must be an index expression")


def access_arg(inst: Instruction, i: int, memory: tuple[type, ...] = (BufType, LDMType)
               ) -> Access:
    s = inst.args[i]
    if not isinstance(s, Access):
        raise OpError(f"operand #{i} must be a subscripted buffer like %A[%i, %j]")
    t = s.base.type
    if not isinstance(t, memory):
        kinds = " or ".join(m.prefix for m in memory)
        raise OpError(f"subscripted operand must be a {kinds} buffer, got {t}")
    if len(s.indices) != t.rank:
        raise OpError(f"{len(s.indices)} subscripts for a rank-{t.rank} buffer {t}")
    return s


def apply_arg(inst: Instruction, i: int) -> Apply:
    s = inst.args[i]
    if not isinstance(s, Apply):
        raise OpError(f"operand #{i} must be a function application like @f(%x)")
    return s


def callee(inst: Instruction, slot: int = 0) -> Any:
    """The function an application ``@f(args)`` in ``slot`` names, with the
    arguments checked against its parameters (``call``, ``spawn``)."""
    from swir.ir.core import Function
    app = apply_arg(inst, slot)
    fn = inst.function
    module = fn.module if fn is not None else None
    target = module.lookup(app.callee) if module is not None else None
    if not isinstance(target, Function):
        raise OpError(f"call to undefined function @{app.callee}")
    if len(app.args) != len(target.params):
        raise OpError(f"@{app.callee} takes {len(target.params)} arguments, got {len(app.args)}")
    for i, (a, p) in enumerate(zip(app.args, target.params)):
        if a.type != p.type:
            raise OpError(f"argument #{i} of @{app.callee} has type {a.type}, expected {p.type}")
    return target


def value_ref(v: Value) -> str:
    """A value as the IR writes it: ``@global`` or ``%local``."""
    return f"@{v.name}" if isinstance(v, Global) else f"%{v.name}"


def check_writable(inst: Instruction, slot: int) -> None:
    """A write's destination may not be a constant ``global``."""
    from swir.ir.core import Global
    s = inst.args[slot]
    base = s.base if isinstance(s, Access) else s
    if isinstance(base, Global) and base.kind == "global":
        raise OpError(f"writes to @{base.name}, a constant global")




def normalise_axis(axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < max(rank, 1):
        raise OpError(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


# -- typed attribute access (graph ops) -------------------------------------------
# Each returns the attribute's value, or ``default`` when it is absent; with no
# default the attribute is required. Integers are accepted where floats are
# expected (``{alpha = 1}``); booleans are never taken for numbers.

_REQUIRED: Any = object()


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _to_float(v: int | float, name: str) -> float:
    try:
        return float(v)
    except OverflowError:
        raise OpError(f"attribute '{name}': {v} is too large for a float") from None


def _fetch(inst: Instruction, name: str, default: Any) -> tuple[Any, bool]:
    """The value and whether it was given; an absent attribute yields ``default``."""
    v = inst.attrs.get(name)
    if v is None:
        if default is _REQUIRED:
            raise OpError(f"missing attribute '{name}'")
        return default, False
    return v, True


def int_attr(inst: Instruction, name: str, default: Any = _REQUIRED) -> int:
    v, given = _fetch(inst, name, default)
    if not given:
        return v
    if not _is_int(v):
        raise OpError(f"attribute '{name}' must be an integer, got {v!r}")
    return v


def float_attr(inst: Instruction, name: str, default: Any = _REQUIRED) -> float:
    v, given = _fetch(inst, name, default)
    if not given:
        return v
    if not _is_number(v):
        raise OpError(f"attribute '{name}' must be a number, got {v!r}")
    return _to_float(v, name)


def bool_attr(inst: Instruction, name: str, default: Any = _REQUIRED) -> bool:
    v, given = _fetch(inst, name, default)
    if not given:
        return v
    if not isinstance(v, bool):
        raise OpError(f"attribute '{name}' must be true or false, got {v!r}")
    return v


def str_attr(inst: Instruction, name: str, default: Any = _REQUIRED,
             choices: tuple[str, ...] | None = None) -> str:
    v, given = _fetch(inst, name, default)
    if not given:
        return v
    if not isinstance(v, str):
        raise OpError(f"attribute '{name}' must be a string, got {v!r}")
    if choices is not None and v not in choices:
        allowed = ", ".join(f'"{c}"' for c in choices)
        raise OpError(f"attribute '{name}' must be one of {allowed}, got \"{v}\"")
    return v


def _list(inst: Instruction, name: str, length: int | None, default: Any,
          what: str, ok: Any) -> list:
    v, given = _fetch(inst, name, default)
    if not given:
        return list(v) if v is not None else v
    if not isinstance(v, (tuple, list)):
        raise OpError(f"attribute '{name}' must be a list of {what}s, got {v!r}")
    if length is not None and len(v) != length:
        raise OpError(f"attribute '{name}' needs {length} {what}s, got {len(v)}")
    for x in v:
        if not ok(x):
            raise OpError(f"attribute '{name}' must be a list of {what}s, got {x!r} in it")
    return list(v)


def ints_attr(inst: Instruction, name: str, length: int | None = None,
              default: Any = _REQUIRED) -> list[int]:
    """A list-of-integers attribute, its length and element kinds checked."""
    return _list(inst, name, length, default, "integer", _is_int)


def floats_attr(inst: Instruction, name: str, length: int | None = None,
                default: Any = _REQUIRED) -> list[float]:
    """A list-of-numbers attribute (integers allowed), returned as floats."""
    v = _list(inst, name, length, default, "number", _is_number)
    return [_to_float(x, name) for x in v] if v is not None else v


def attr_or_default(inst: Instruction, name: str) -> Any:
    """Attribute ``name`` of ``inst`` as given, or its op's declared default
    when absent (not checked: for code that runs on verified IR)."""
    return inst.opdef.attr_value(inst.attrs, name, operand_ranks(inst))


def operand_ranks(inst: Instruction) -> tuple[int, ...]:
    """The ranks of ``inst``'s operands (0 for a scalar or a non-value)."""
    return tuple(getattr(getattr(a, "type", None), "rank", 0) for a in inst.args)


def attr(inst: Instruction, name: str, length: int | None = None) -> Any:
    """Attribute ``name`` of ``inst``, read as its op declares it: kind checked,
    the declared default when absent (required: an error), then the declared
    ``check``; list kinds may be given the ``length`` they must have."""
    spec = inst.opdef.attr(name)
    if spec.required:
        default = _REQUIRED
    elif inst.attrs.get(name) is None:
        default = spec.default_for(inst.attrs, operand_ranks(inst))
    else:
        default = spec.default
    if spec.kind == "ints":
        value = ints_attr(inst, name, length, default)
    elif spec.kind == "floats":
        value = floats_attr(inst, name, length, default)
    elif spec.kind == "str":
        value = str_attr(inst, name, default, spec.choices)
    else:
        value = _SCALAR_READERS[spec.kind](inst, name, default)
    if spec.check is not None and value is not None:
        spec.check(value, name)
    return value


_SCALAR_READERS = {"int": int_attr, "float": float_attr, "bool": bool_attr}


def normalise_axes(axes: list[int], rank: int, what: str = "axes") -> list[int]:
    """Each axis in [-rank, rank), made non-negative; repeats are an error."""
    out: list[int] = []
    for a in axes:
        if not -rank <= a < rank:
            raise OpError(f"{what} entry {a} is out of range for rank {rank} "
                          f"(allowed {-rank}..{rank - 1})" if rank else
                          f"{what} entry {a} is out of range for a rank-0 tensor")
        n = a % rank
        if n in out:
            raise OpError(f"{what} {list(axes)} name axis {n} twice")
        out.append(n)
    return out


def check_dense(d: Dense, t: ShapedType) -> None:
    """A dense literal must be a splat or have exactly the type's shape."""
    if not d.is_splat:
        if _ragged(d.value):
            raise OpError("dense literal is not rectangular")
        shape = d.shape()
        flat = d.flat()
        if shape != t.shape and not (len(shape) == 1 and shape[0] == t.num_elements):
            shown = str(shape) if len(shape) <= 8 else f"{shape[:8]}... (rank {len(shape)})"
            raise OpError(f"dense literal has shape {shown}, type {t} needs {t.shape} "
                          f"(or a flat list of {t.num_elements})")
        values = flat
    else:
        values = [d.value]
    for v in values:
        if isinstance(v, float) and not t.element.is_float:
            raise OpError(f"float {v!r} in a dense literal of integer type {t}")
        if isinstance(v, bool) and t.element.name != "i1":
            raise OpError(f"boolean in a dense literal of type {t}")
        if isinstance(v, int) and not isinstance(v, bool) and not int_fits(v, t.element):
            raise OpError(f"{v} does not fit the element type {t.element} of {t}")


_INT_RANGES = {"i1": (0, 1), "i8": (-2 ** 7, 2 ** 7 - 1), "i16": (-2 ** 15, 2 ** 15 - 1),
               "i32": (-2 ** 31, 2 ** 31 - 1), "i64": (-2 ** 63, 2 ** 63 - 1),
               "index": (-2 ** 63, 2 ** 63 - 1)}


def int_fits(v: int, t: ScalarType) -> bool:
    """Does integer v fit scalar type t (any float type takes ints up to 2**1024)?"""
    lo, hi = _INT_RANGES.get(t.name, (-2 ** 1024, 2 ** 1024))
    return lo <= v <= hi


def _ragged(v: Any) -> bool:
    if not isinstance(v, tuple):
        return False
    kinds = {isinstance(x, tuple) for x in v}
    if len(kinds) > 1:
        return True
    if kinds == {True}:
        if len({len(x) for x in v}) > 1:
            return True
        return any(_ragged(x) for x in v)
    return False


def element_offset(indices, shape) -> Expr:
    """The flat (row-major) element offset of the subscripts ``indices`` in a
    buffer of ``shape``, as an index expression."""
    out, stride = Expr.of(0), 1
    for ix, n in zip(reversed(list(indices)), reversed(list(shape))):
        out = out + Expr.of(ix).scale(stride)
        stride *= n
    return out


# -- checks shared by the graph ops' rules (swir.ops.graph, swir.ops.gradients) -------------

def shape_text(s: tuple[int, ...] | list[int]) -> str:
    """A shape as messages write it: ``[1, 2, 3]``."""
    return "[" + ", ".join(map(str, s)) + "]"


def check_arity(inst: Instruction) -> None:
    """The operand count the op's ``Operands`` declare (``infer`` may run before
    the verifier has checked it)."""
    operands = inst.opdef.operands
    lo, hi = operands.count
    n = len(inst.args)
    if n < lo or (hi is not None and n > hi):
        if hi == lo:
            count = f"{lo} operand" + ("" if lo == 1 else "s")
        elif hi is None:
            count = f"at least {lo} operand" + ("" if lo == 1 else "s")
        else:
            count = f"{lo} to {hi} operands"
        raise OpError(f"takes {count} ({operands.doc}), got {n}")


def check_same_element(types: list[TensorType], names: list[str]) -> None:
    for t, name in zip(types[1:], names[1:]):
        if t.element != types[0].element:
            raise OpError(f"{name} has element type {t.element} but "
                          f"{names[0]} has {types[0].element}")


def check_rank(t: TensorType, rank: int, what: str) -> None:
    if t.rank != rank:
        raise OpError(f"{what} must have rank {rank}, got {t}")


def check_float(t: TensorType, what: str = "operand") -> None:
    if not t.element.is_float:
        raise OpError(f"needs a floating-point {what}, got {t}")


def check_positive(values: list[int], name: str) -> None:
    for v in values:
        if v <= 0:
            raise OpError(f"'{name}' entries must be positive, got {shape_text(values)}")
