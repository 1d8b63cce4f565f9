"""Element-wise ops, legal at every stage: on tensors at the graph stage (with
numpy broadcasting), on scalars in loop bodies.

Following DLVM (Table 1 of 003_681e582b83c72c5d.txt) the set is primitive;
composites such as gelu or softmax are defined in swir.ops.graph.
"""

from __future__ import annotations

from swir.ir.core import Instruction
from swir.ir.types import I1, ScalarType, ShapedType, TensorType, Type
from swir.ops import references as R
from swir.ops.registry import (ALL_STAGES, FLOP, INLINABLE, ONE, SCALAR_FORM, X0, X1, X2, Attr,
                               Category, CCall, CConst, CExpr, COp, CSelect, OpDef, OpError,
                               register)
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


# The C expressions that do not depend on the operand type beyond float / not
# (the ops without one, which wrap integers or treat i1 specially, are written
# in swir.codegen.scalar).
def _libm(fn: str) -> CExpr:
    return CExpr(CCall(fn, (X0,)), in_double=True)


def _infix(sym: str) -> CExpr:
    return CExpr(COp(sym, (X0, X1)), float_only=False)


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


# The ops of each shape by name, with their operand kind and description (for
# the tests that sweep them); each row below adds its op.
UNARY: dict[str, tuple[str, str]] = {}
BINARY: dict[str, tuple[str, str, bool]] = {}
COMPARE: dict[str, str] = {}


def _unary(name: str, kind: str, doc: str, numpy, *, onnx: str | None = None,
           c_expr: CExpr | None = None, differentiable: bool = True) -> OpDef:
    """One unary op: ``kind`` of operand, what it computes, its numpy reference,
    the ONNX op it imports from 1:1 and its C expression; ``differentiable``
    False for the piecewise-constant ones (their gradient is 0 wherever it
    exists, so a gradient through them says so instead)."""
    UNARY[name] = (kind, doc)
    return register(elementwise_op(
        name, f"Element-wise {doc}.", 1, kind,
        traits=NOT_ARITHMETIC if kind == "bool" else ARITHMETIC,
        numpy=numpy, onnx=onnx, c_expr=c_expr, differentiable=differentiable))


def _binary(name: str, kind: str, doc: str, numpy, *, commutative: bool,
            onnx: str | None = None, c_expr: CExpr | None = None,
            identity: tuple[float | None, float | None] = (None, None)) -> OpDef:
    """One binary op, as :func:`_unary`; ``identity``: its (right, left)
    identity elements (OpDef.right_identity)."""
    BINARY[name] = (kind, doc, commutative)
    return register(elementwise_op(
        name, f"Element-wise {doc}, broadcasting.", 2, kind,
        traits=NOT_ARITHMETIC if kind == "bool" else ARITHMETIC, commutative=commutative,
        numpy=numpy, onnx=onnx, c_expr=c_expr, differentiable=kind != "bool",
        right_identity=identity[0], left_identity=identity[1]))


def _compare(name: str, doc: str, numpy, sym: str, *, onnx: str | None = None,
             commutative: bool = False) -> OpDef:
    """One comparison, giving i1: ``sym`` is its C operator."""
    COMPARE[name] = doc
    return register(elementwise_op(
        name, f"Element-wise comparison {doc}, giving i1, broadcasting.", 2, result_bool=True,
        traits=NOT_ARITHMETIC, commutative=commutative, numpy=numpy, onnx=onnx,
        c_expr=_infix(sym), differentiable=False))


NEG = _unary("neg", "any", "negation, -x", R.ref_neg, onnx="Neg")
ABS = _unary("abs", "any", "absolute value", R.ref_abs, onnx="Abs")
EXP = _unary("exp", "float", "e^x", R.ref_exp, onnx="Exp", c_expr=_libm("exp"))
LOG = _unary("log", "float", "natural logarithm", R.ref_log, onnx="Log", c_expr=_libm("log"))
SQRT = _unary("sqrt", "float", "square root", R.ref_sqrt, onnx="Sqrt", c_expr=_libm("sqrt"))
RSQRT = _unary("rsqrt", "float", "1 / sqrt(x)", R.ref_rsqrt,
               c_expr=CExpr(COp("/", (CConst("1.0"), CCall("sqrt", (X0,)))), in_double=True))
RECIPROCAL = _unary("reciprocal", "float", "1 / x", R.ref_reciprocal, onnx="Reciprocal",
                    c_expr=CExpr(COp("/", (ONE, X0))))
TANH = _unary("tanh", "float", "hyperbolic tangent", R.ref_tanh, onnx="Tanh",
              c_expr=_libm("tanh"))
SIGMOID = _unary("sigmoid", "float", "1 / (1 + e^-x)", R.ref_sigmoid, onnx="Sigmoid",
                 c_expr=CExpr(COp("/", (CConst("1.0"), COp("+", (CConst("1.0"), CCall(
                     "exp", (COp("-", (X0,)),)))))), in_double=True))
ERF = _unary("erf", "float", "Gauss error function", R.ref_erf, onnx="Erf",
             c_expr=_libm("swir_erf"))
ERFC = _unary("erfc", "float", "complementary error function, 1 - erf(x) without "
              "cancellation", R.ref_erfc, c_expr=_libm("swir_erfc"))
RELU = _unary("relu", "any", "max(x, 0)", R.ref_relu, onnx="Relu")
FLOOR = _unary("floor", "float", "round toward -inf", R.ref_floor, onnx="Floor",
               c_expr=_libm("floor"), differentiable=False)
CEIL = _unary("ceil", "float", "round toward +inf", R.ref_ceil, onnx="Ceil",
              c_expr=_libm("ceil"), differentiable=False)
NOT = _unary("not", "bool", "logical not of an i1", R.ref_not, onnx="Not",
             c_expr=CExpr(COp("!", (X0,)), float_only=False), differentiable=False)

# Identity elements: floats need the zero's sign (x + (-0.0) keeps -0.0).
ADD = _binary("add", "any", "x + y", R.ref_add, commutative=True, onnx="Add",
              identity=(-0.0, -0.0))
SUB = _binary("sub", "any", "x - y", R.ref_sub, commutative=False, onnx="Sub",
              identity=(0.0, None))
MUL = _binary("mul", "any", "x * y", R.ref_mul, commutative=True, onnx="Mul",
              identity=(1.0, 1.0))
DIV = _binary("div", "any", "x / y (integers: truncating toward zero, as C)", R.ref_div,
              commutative=False, onnx="Div", identity=(1.0, None))
POW = _binary("pow", "float", "x ^ y", R.ref_pow, commutative=False,
              c_expr=CExpr(CCall("pow", (X0, X1)), in_double=True))
MAX = _binary("max", "any", "larger of x and y (NaN if either is NaN)", R.ref_max,
              commutative=True)
MIN = _binary("min", "any", "smaller of x and y (NaN if either is NaN)", R.ref_min,
              commutative=True)
AND = _binary("and", "bool", "logical and of i1", R.ref_and, commutative=True, onnx="And",
              c_expr=_infix("&&"))
OR = _binary("or", "bool", "logical or of i1", R.ref_or, commutative=True, onnx="Or",
             c_expr=_infix("||"))

EQ = _compare("eq", "x == y", R.ref_eq, "==", onnx="Equal", commutative=True)
NE = _compare("ne", "x != y", R.ref_ne, "!=", commutative=True)
LT = _compare("lt", "x < y", R.ref_lt, "<", onnx="Less")
LE = _compare("le", "x <= y", R.ref_le, "<=", onnx="LessOrEqual")
GT = _compare("gt", "x > y", R.ref_gt, ">", onnx="Greater")
GE = _compare("ge", "x >= y", R.ref_ge, ">=", onnx="GreaterOrEqual")

SELECT = register(elementwise_op("select", "Element-wise c ? x : y, broadcasting all three.",
                                 3, traits=NOT_ARITHMETIC,
                                 c_expr=CExpr(CSelect(X0, X1, X2), float_only=False)))


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
