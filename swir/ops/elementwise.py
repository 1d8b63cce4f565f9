"""Element-wise ops, legal at every stage: on tensors at the graph stage (with
numpy broadcasting), on scalars in loop bodies.

Following DLVM (Table 1 of 003_681e582b83c72c5d.txt) the set is primitive;
composites such as gelu or softmax are defined in swir.ops.graph.
"""

from __future__ import annotations

from swir.ir.core import Instruction
from swir.ir.types import I1, ScalarType, ShapedType, TensorType, Type
from swir.ops.references import BINARY_REFS, UNARY_REFS
from swir.ops.registry import (ALL_STAGES, FLOP, INLINABLE, ONE, SCALAR_FORM, X0, X1, X2, Attr,
                               Category, CCall, CConst, CExpr, COp, CSelect, OpDef, OpError,
                               op_def, register)
from swir.ops.util import value_arg


def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """numpy's broadcasting rule: align right; sizes equal or one of them 1."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            raise OpError(f"shapes {_fmt(a)} and {_fmt(b)} do not broadcast "
                          f"(dimension -{i}: {x} vs {y})")
        out.append(max(x, y))
    return tuple(reversed(out))


def _fmt(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ")"


def _element(t: Type) -> ScalarType:
    if isinstance(t, ScalarType):
        return t
    if isinstance(t, TensorType):
        return t.element
    raise OpError(f"element-wise ops take tensors or scalars, got {t}")


def _combine(types: list[Type], result_element: ScalarType | None) -> Type:
    elems = {_element(t) for t in types}
    if len(elems) != 1:
        raise OpError("operand element types differ: " + ", ".join(map(str, types)))
    elem = result_element or elems.pop()
    if all(isinstance(t, ScalarType) for t in types):
        return elem
    if any(isinstance(t, ShapedType) and not isinstance(t, TensorType) for t in types):
        raise OpError("element-wise ops do not take buffers")
    shape: tuple[int, ...] = ()
    for t in types:
        shape = broadcast_shapes(shape, t.shape if isinstance(t, TensorType) else ())
    return TensorType(shape, elem)


def _kind_check(kind: str, t: Type, name: str) -> None:
    e = _element(t)
    if kind == "float" and not e.is_float:
        raise OpError(f"'{name}' needs a floating-point operand, got {t}")
    if kind == "int" and e.is_float:
        raise OpError(f"'{name}' needs an integer operand, got {t}")
    if kind == "bool" and e != I1:
        raise OpError(f"'{name}' needs an i1 operand, got {t}")


def _elementwise_rule(n: int, kind: str, result_bool: bool):
    def infer(inst: Instruction) -> list[Type]:
        types = [value_arg(inst, i).type for i in range(n)]
        for t in types[-2:] if inst.opname == "select" else types:
            _kind_check(kind, t, inst.opname)
        if inst.opname == "select":
            _kind_check("bool", types[0], "select condition")
            cond_shape = types[0].shape if isinstance(types[0], TensorType) else ()
            out = _combine(types[1:], None)
            if isinstance(out, TensorType) or cond_shape:
                shape = broadcast_shapes(cond_shape, out.shape if isinstance(out, TensorType) else ())
                return [TensorType(shape, _element(out))]
            return [out]
        return [_combine(types, I1 if result_bool else None)]
    return infer


UNARY = {
    "neg": ("any", "negation, -x"),
    "abs": ("any", "absolute value"),
    "exp": ("float", "e^x"),
    "log": ("float", "natural logarithm"),
    "sqrt": ("float", "square root"),
    "rsqrt": ("float", "1 / sqrt(x)"),
    "reciprocal": ("float", "1 / x"),
    "tanh": ("float", "hyperbolic tangent"),
    "sigmoid": ("float", "1 / (1 + e^-x)"),
    "erf": ("float", "Gauss error function"),
    "erfc": ("float", "complementary error function, 1 - erf(x) without cancellation"),
    "relu": ("any", "max(x, 0)"),
    "floor": ("float", "round toward -inf"),
    "ceil": ("float", "round toward +inf"),
    "not": ("bool", "logical not of an i1"),
}
BINARY = {
    "add": ("any", "x + y", True),
    "sub": ("any", "x - y", False),
    "mul": ("any", "x * y", True),
    "div": ("any", "x / y (integers: truncating toward zero, as C)", False),
    "pow": ("float", "x ^ y", False),
    "max": ("any", "larger of x and y (NaN if either is NaN)", True),
    "min": ("any", "smaller of x and y (NaN if either is NaN)", True),
    "and": ("bool", "logical and of i1", True),
    "or": ("bool", "logical or of i1", True),
}
COMPARE = {"eq": "x == y", "ne": "x != y", "lt": "x < y", "le": "x <= y",
           "gt": "x > y", "ge": "x >= y"}

# The C expressions that do not depend on the operand type beyond float / not
# (the others, which wrap integers or treat i1 specially, are written in
# swir.codegen.scalar).
def _libm(fn: str) -> CExpr:
    return CExpr(CCall(fn, (X0,)), in_double=True)


def _infix(sym: str) -> CExpr:
    return CExpr(COp(sym, (X0, X1)), float_only=False)


C_EXPRS = {
    "exp": _libm("exp"), "log": _libm("log"), "sqrt": _libm("sqrt"), "tanh": _libm("tanh"),
    "erf": _libm("swir_erf"), "erfc": _libm("swir_erfc"),
    "floor": _libm("floor"), "ceil": _libm("ceil"),
    "rsqrt": CExpr(COp("/", (CConst("1.0"), CCall("sqrt", (X0,)))), in_double=True),
    "sigmoid": CExpr(COp("/", (CConst("1.0"), COp("+", (CConst("1.0"),
                                                        CCall("exp", (COp("-", (X0,)),)))))),
                     in_double=True),
    "reciprocal": CExpr(COp("/", (ONE, X0))),
    "pow": CExpr(CCall("pow", (X0, X1)), in_double=True),
    "eq": _infix("=="), "ne": _infix("!="), "lt": _infix("<"), "le": _infix("<="),
    "gt": _infix(">"), "ge": _infix(">="),
    "and": _infix("&&"), "or": _infix("||"), "not": CExpr(COp("!", (X0,)), float_only=False),
    "select": CExpr(CSelect(X0, X1, X2), float_only=False),
}
# The numpy references (swir/ops/references.py).
NUMPY_REFS = {**UNARY_REFS, **BINARY_REFS}
# ONNX ops converted 1:1 (same operands, no attributes).
ONNX_NAMES = {
    "relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "erf": "Erf", "sqrt": "Sqrt",
    "exp": "Exp", "log": "Log", "abs": "Abs", "neg": "Neg", "reciprocal": "Reciprocal",
    "floor": "Floor", "ceil": "Ceil", "not": "Not",
    "add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "eq": "Equal", "lt": "Less",
    "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual", "and": "And", "or": "Or",
}

ARITHMETIC = frozenset({SCALAR_FORM, INLINABLE, FLOP})
NOT_ARITHMETIC = frozenset({SCALAR_FORM, INLINABLE})  # conversions, choices, logic


def elementwise_op(name: str, summary: str, arity: int, kind: str = "any", *,
                   result_bool: bool = False, traits: frozenset = ARITHMETIC,
                   **facts) -> OpDef:
    """The definition of an element-wise op legal at every stage: operands of
    ``kind`` ("any", "float", "int" or "bool") broadcasting, numpy's rule.
    ``facts`` are OpDef's fields: ``numpy``, ``c_expr``, ``onnx``, ``commutative``.
    Not registered: pass it to :func:`register`."""
    return OpDef(name, summary, stages=ALL_STAGES, num_args=(arity, arity),
                 infer=_elementwise_rule(arity, kind, result_bool), category=Category.ELEMENTWISE,
                 traits=traits, **facts)


def _table_facts(name: str) -> dict:
    return {"numpy": NUMPY_REFS.get(name), "c_expr": C_EXPRS.get(name),
            "onnx": ONNX_NAMES.get(name)}


for _name, (_kind, _doc) in UNARY.items():
    register(elementwise_op(_name, f"Element-wise {_doc}.", 1, _kind,
                            traits=NOT_ARITHMETIC if _kind == "bool" else ARITHMETIC,
                            **_table_facts(_name)))
for _name, (_kind, _doc, _comm) in BINARY.items():
    register(elementwise_op(_name, f"Element-wise {_doc}, broadcasting.", 2, _kind,
                            traits=NOT_ARITHMETIC if _kind == "bool" else ARITHMETIC,
                            commutative=_comm, **_table_facts(_name)))
for _name, _doc in COMPARE.items():
    register(elementwise_op(_name, f"Element-wise comparison {_doc}, giving i1, broadcasting.",
                            2, result_bool=True, traits=NOT_ARITHMETIC,
                            commutative=_name in ("eq", "ne"), **_table_facts(_name)))
(NEG, ABS, EXP, LOG, SQRT, RSQRT, RECIPROCAL, TANH, SIGMOID, ERF, ERFC, RELU, FLOOR, CEIL,
 NOT) = map(op_def, UNARY)
ADD, SUB, MUL, DIV, POW, MAX, MIN, AND, OR = map(op_def, BINARY)
EQ, NE, LT, LE, GT, GE = map(op_def, COMPARE)
SELECT = register(elementwise_op("select", "Element-wise c ? x : y, broadcasting all three.",
                                 3, traits=NOT_ARITHMETIC, **_table_facts("select")))


def _infer_cast(inst: Instruction) -> list[Type]:
    t = value_arg(inst, 0).type
    to = inst.attrs.get("to")
    if not isinstance(to, ScalarType):
        raise OpError("'cast' needs attribute 'to' naming a scalar type, e.g. {to = f16}")
    if isinstance(t, TensorType):
        return [TensorType(t.shape, to)]
    if isinstance(t, ScalarType):
        return [to]
    raise OpError(f"'cast' takes a tensor or a scalar, got {t}")


CAST = register(OpDef("cast", "Element-wise conversion to another scalar type (C semantics; "
                             "float to int truncates toward zero).",
                      num_args=(1, 1), attrs=(Attr("to", "type", required=True),),
                      infer=_infer_cast, category=Category.ELEMENTWISE, traits=NOT_ARITHMETIC))
