"""Scalars in C: type names, exact literals, and one C expression per
element-wise op.

Each expression gives what the op's numpy reference (or interpreter kernel) gives
(swir/ops/references.py), so the generated program can be checked
against it: transcendentals are computed in double and rounded to the type, as
the kernels do (erf and erfc by our own ``swir_erf`` / ``swir_erfc``, not libm:
CPE code calls only the libm functions in ``CPE_LIBM``); integer arithmetic
wraps (through unsigned arithmetic, since signed overflow is undefined in C);
integer division truncates and x / 0 is 0; ``max`` / ``min`` / ``relu``
propagate NaN; float-to-integer ``cast`` saturates (NaN gives the type's
minimum), where C would be undefined.
"""

from __future__ import annotations

import math

import numpy as np

from swir.codegen.c_ast import (
    Binary,
    Cast,
    Expr,
    Id,
    Lit,
    Named,
    Paren,
    Ternary,
    Unary,
    call,
)
from swir.ir.types import INDEX, ScalarType
from swir.ops import ABS, ADD, CAST, DIV, MAX, MIN, MUL, NEG, RELU, SUB
from swir.ops.registry import (SCALAR_FORM, CArg, CCall, CConst, CExpr, CForm, COp, CSelect,
                               MissingHook, OpDef, all_ops, op_def)

C_TYPES = {"f16": "swir_f16", "f32": "float", "f64": "double", "i1": "bool",
           "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t",
           "index": "long"}
DOUBLE = Named("double")
_UNSIGNED = {"i32": "uint32_t", "i64": "uint64_t", "index": "unsigned long"}
_INT_LIMITS = {"i8": ("INT8_MIN", "INT8_MAX"), "i16": ("INT16_MIN", "INT16_MAX"),
               "i32": ("INT32_MIN", "INT32_MAX"), "i64": ("INT64_MIN", "INT64_MAX"),
               "index": ("INT64_MIN", "INT64_MAX")}
# Every libm function the generated code can call, on the MPE and on the CPEs
# alike (layers_slave.c and layers_mix.h's helpers: one code path, so the
# emulation runs what the CPEs will): what the CPE's math library (-lm_slave)
# must provide. erf and erfc are not here: swir_erf / swir_erfc (ERF_C, below)
# compute them. test/unit/test_cpe_math.py checks the generated files against
# this list; docs/codegen.md ("Math on the CPE") lists it.
CPE_LIBM = ("exp", "log", "sqrt", "tanh", "pow", "fabs", "floor", "ceil")


class Unsupported(Exception):
    """An op or type combination with no C form (the caller locates it)."""


def c_type(t: ScalarType) -> str:
    return C_TYPES[t.name]


def c_node_type(t: ScalarType) -> Named:
    return Named(C_TYPES[t.name])


def literal(value: object, t: ScalarType) -> Expr:
    """``value`` exactly, as a C constant of type ``t``."""
    if t.name == "i1":
        return Lit("true" if bool(value) else "false")
    if not t.is_float:
        v = int(value)  # type: ignore[arg-type]
        if t.name in ("i64", "index") and v == -(1 << 63):
            return Lit("INT64_MIN")
        text = Lit(str(v)) if abs(v) < (1 << 31) else call("INT64_C", Lit(str(v)))
        return text if t.name in ("i32", "i64", "index") else Cast(c_node_type(t), text)
    x = float(value)  # type: ignore[arg-type]
    if math.isnan(x):
        body = "NAN"
    elif math.isinf(x):
        body = "INFINITY" if x > 0 else "-INFINITY"
    else:
        # The shortest decimal that reads back as this value of the type.
        np_type = {"f16": np.float16, "f32": np.float32, "f64": np.float64}[t.name]
        body = np.format_float_scientific(np_type(x), unique=True, trim="-") \
            if (x != 0 and not 1e-4 <= abs(x) < 1e16) \
            else np.format_float_positional(np_type(x), unique=True, trim="0")
        if "." not in body and "e" not in body:
            body += ".0"
        body += "f" if t.name == "f32" else ""
    if t.name == "f16":
        return Cast(c_node_type(t), Lit(body))
    if t.name == "f32" and body in ("NAN", "INFINITY", "-INFINITY"):
        return Lit(body)     # float constants already
    if t.name == "f64" and body in ("NAN", "INFINITY", "-INFINITY"):
        return Cast(c_node_type(t), Lit(body))
    return Lit(body)


# How the TYPED_FORMS (below) are written: an operator. Every other
# element-wise op's C form is its definition's CExpr (swir.ops.elementwise).
ARITH = {ADD: "+", SUB: "-", MUL: "*"}
ORDER = {MAX: ">", MIN: "<"}
# On i1 (as the kernels do it: in integers, nonzero is true): an operator, or
# None for the operand itself.
BOOL_OPS = {ADD: "||", MAX: "||", SUB: "!=", MUL: "&&", MIN: "&&", DIV: "&&",
            NEG: None, ABS: None, RELU: None}
# The ops whose C form depends on the operand type beyond float or not (integers
# wrap, i1 is logic), written in :func:`node`; every other element-wise op of
# loop bodies has a CExpr in its definition.
TYPED_FORMS = frozenset({CAST, ADD, SUB, MUL, DIV, NEG, ABS, MAX, MIN, RELU})


def _wrap(t: ScalarType, sym: str, a: Expr, b: Expr) -> Expr:
    """a SYM b with two's-complement wrap-around instead of undefined overflow."""
    if t.name in _UNSIGNED:
        u = Named(_UNSIGNED[t.name])
        return Cast(c_node_type(t), Binary(sym, Cast(u, a), Cast(u, b)))
    # i8 / i16: int arithmetic cannot overflow
    return Cast(c_node_type(t), Binary(sym, a, b))


def _in_double(t: ScalarType, e: Expr) -> Expr:
    """A double-precision result rounded to ``t`` (as the kernels round f64 results)."""
    return e if t.name == "f64" else Cast(c_node_type(t), e)


def _d(t: ScalarType, a: Expr) -> Expr:
    return a if t.name == "f64" else Cast(DOUBLE, a)


def expression(opname: str, operand_types: list[ScalarType], args: list[str],
               result: ScalarType, attrs: dict) -> str:
    """The C expression computing element-wise op ``opname`` on scalar operands
    (named by ``args``), as text."""
    return node(op_def(opname), operand_types, [Id(a) for a in args], result, attrs).text()


def node(op: OpDef, operand_types: list[ScalarType], args: list[Expr],
         result: ScalarType, attrs: dict) -> Expr:
    """The C expression computing element-wise ``op`` on scalar operands: the
    op definition's ``c_expr``, or one of the TYPED_FORMS written here."""
    t = operand_types[-1]
    if op.c_expr is not None:
        return _from_definition(op, op.c_expr, t, args)
    a = args[0]
    b = args[1] if len(args) > 1 else a
    is_float = t.is_float
    if op is CAST:
        return _cast(operand_types[0], result, a)
    if t.name == "i1":
        if op not in BOOL_OPS:
            raise Unsupported(f"'{op.name}' on i1 has no C form")
        sym = BOOL_OPS[op]
        return a if sym is None else Binary(sym, a, b)
    if op in ARITH:
        return Binary(ARITH[op], a, b) if is_float else _wrap(t, ARITH[op], a, b)
    if op is DIV:
        return Binary("/", a, b) if is_float else call(f"swir_div_{t.name}", a, b)
    if op is NEG:
        return Unary("-", a) if is_float else _wrap(t, "-", Lit("0"), a)
    if op is ABS:
        if is_float:
            return _in_double(t, call("fabs", _d(t, a)))
        return Ternary(Binary("<", a, Lit("0")), _wrap(t, "-", Lit("0"), a), a)
    if op in ORDER:
        return Ternary(Paren(_keep_nan(Binary(ORDER[op], a, b), a, is_float)), a, b)
    if op is RELU:
        zero = literal(0, t)
        return Ternary(Paren(_keep_nan(Binary(">", a, zero), a, is_float)), a, zero)
    raise Unsupported(f"'{op.name}' on {t} has no C form")


def _keep_nan(test: Expr, a: Expr, is_float: bool) -> Expr:
    """``test``, or true when float ``a`` is NaN (NaN propagates)."""
    return Binary("||", test, Binary("!=", a, a)) if is_float else test


def _from_definition(op: OpDef, c: CExpr, t: ScalarType, args: list[Expr]) -> Expr:
    if c.float_only and not t.is_float:
        raise Unsupported(f"'{op.name}' on {t} has no C form")
    operands = [_d(t, a) for a in args] if c.in_double else args
    e = _build(c.form, t, operands)
    return _in_double(t, e) if c.in_double else e


def _build(form: CForm, t: ScalarType, args: list[Expr]) -> Expr:
    """The C syntax tree of a CExpr's form on these operands."""
    if isinstance(form, CArg):
        return args[form.index]
    if isinstance(form, CConst):
        return literal(1, t) if form.text is None else Lit(form.text)
    if isinstance(form, CCall):
        return call(form.fn, *(_build(x, t, args) for x in form.args))
    if isinstance(form, CSelect):
        return Ternary(*(_build(x, t, args) for x in (form.cond, form.a, form.b)))
    assert isinstance(form, COp)
    if len(form.args) == 1:
        return Unary(form.sym, _build(form.args[0], t, args))
    return Binary(form.sym, *(_build(x, t, args) for x in form.args))


def check_c_forms() -> None:
    """Every element-wise op of loop bodies has a C form (run when codegen loads)."""
    missing = [op.name for op in all_ops()
               if SCALAR_FORM in op.traits and "dma" in op.stages
               and op.c_expr is None and op not in TYPED_FORMS]
    if missing:
        raise MissingHook(f"no C expression for op(s): {', '.join(missing)}")


def _cast(src: ScalarType, dst: ScalarType, a: Expr) -> Expr:
    if dst.name == "i1":
        return Binary("!=", a, Lit("0"))
    if src.is_float and not dst.is_float:
        return call(f"swir_f2{'i64' if dst == INDEX else dst.name}", _d(src, a))
    return Cast(c_node_type(dst), a)


# erf and erfc in double, for the host and the CPEs alike (docs/codegen.md, "Math
# on the CPE"). The coefficients are Cody's, as printed in CALERF; the code is ours.
ERF_C = r"""/* erf and erfc, ours rather than libm's (whether the CPE's libm has them is not
 * public): W. J. Cody's rational Chebyshev approximations, "Rational Chebyshev
 * approximations for the error function", Math. Comp. 23 (1969) 631-637, with
 * the coefficients of his CALERF (SPECFUN, netlib, 1990). For y = |x|:
 *   y <= 0.46875:      erf(x)  = x P1(x^2) / Q1(x^2)
 *   0.46875 < y <= 4:  erfc(y) = e^(-y^2) P2(y) / Q2(y)
 *   y > 4:             erfc(y) = e^(-y^2) / y (1/sqrt(pi) - P3(1/y^2) / (y^2 Q3(1/y^2)))
 * and erf(-x) = -erf(x), erfc(-x) = 2 - erfc(x). e^(-y^2) is e^(-s^2) e^(-(y-s)(y+s))
 * with s = y truncated to a multiple of 1/16 (s^2 exact): erfc keeps its relative
 * accuracy in the tail, down to the subnormals. Max errors against glibc's erf
 * and erfc over 5 million points (test/unit/test_cpe_math.py): erf 1.5 ulp(1)
 * absolute (3.3e-16), erfc 4.9 ulps relative (1.1e-15) while normal. */
static inline double swir_erfc_tail(double y)
{   /* erfc(y) for 0.46875 < y < 27.5 (y >= 27.5 underflows to 0) */
    double s = (double)(long)(y * 16.0) / 16.0, r;   /* libm-free truncation */
    if (y <= 4.0) {
        r = ((((((((2.15311535474403846e-8 * y + 5.64188496988670089e-1) * y
               + 8.88314979438837594e0) * y + 6.61191906371416295e1) * y
               + 2.98635138197400131e2) * y + 8.81952221241769090e2) * y
               + 1.71204761263407058e3) * y + 2.05107837782607147e3) * y
               + 1.23033935479799725e3)
          / ((((((((y + 1.57449261107098347e1) * y + 1.17693950891312499e2) * y
               + 5.37181101862009858e2) * y + 1.62138957456669019e3) * y
               + 3.29079923573345963e3) * y + 4.36261909014324716e3) * y
               + 3.43936767414372164e3) * y + 1.23033935480374942e3);
    } else {
        double z = 1.0 / (y * y);
        r = z * (((((1.63153871373020978e-2 * z + 3.05326634961232344e-1) * z
                 + 3.60344899949804439e-1) * z + 1.25781726111229246e-1) * z
                 + 1.60837851487422766e-2) * z + 6.58749161529837803e-4)
          / (((((z + 2.56852019228982242e0) * z + 1.87295284992346047e0) * z
                 + 5.27905102951428412e-1) * z + 6.05183413124413191e-2) * z
                 + 2.33520497626869185e-3);
        r = (5.6418958354775628695e-1 - r) / y;   /* 1 / sqrt(pi) */
    }
    return exp(-s * s) * exp(-(y - s) * (y + s)) * r;
}
static inline double swir_erf_small(double x)
{   /* erf(x) for |x| <= 0.46875 */
    double z = x * x;
    return x * ((((1.85777706184603153e-1 * z + 3.16112374387056560e0) * z
                  + 1.13864154151050156e2) * z + 3.77485237685302021e2) * z
                  + 3.20937758913846947e3)
             / ((((z + 2.36012909523441209e1) * z + 2.44024637934444173e2) * z
                  + 1.28261652607737228e3) * z + 2.84423683343917062e3);
}
static inline double swir_erf(double x)
{
    double y = x < 0 ? -x : x, r;
    if (x != x)
        return x;
    if (y <= 0.46875)
        return swir_erf_small(x);
    r = y >= 6.0 ? 1.0 : (0.5 - swir_erfc_tail(y)) + 0.5;   /* erfc(6) < 2^-54 */
    return x < 0 ? -r : r;
}
static inline double swir_erfc(double x)
{
    double y = x < 0 ? -x : x, r;
    if (x != x)
        return x;
    if (y <= 0.46875)
        return 1.0 - swir_erf_small(x);
    r = y >= 27.5 ? 0.0 : swir_erfc_tail(y);
    return x < 0 ? 2.0 - r : r;
}
"""


def helpers() -> str:
    """The static inline functions the expressions above call (in layers_mix.h)."""
    out = ["/* Integer division as swir defines it: truncating, x / 0 == 0, MIN / -1 wraps. */"]
    for name in ("i8", "i16", "i32", "i64"):
        ct = C_TYPES[name]
        neg = _wrap(ScalarType(name), "-", Lit("0"), Id("a"))
        out.append(f"static inline {ct} swir_div_{name}({ct} a, {ct} b) "
                   f"{{ return b == 0 ? 0 : b == -1 ? {neg} : ({ct})(a / b); }}")
    out.append("static inline long swir_div_index(long a, long b) "
               "{ return b == 0 ? 0 : b == -1 ? (long)(0ul - (unsigned long)a) : a / b; }")
    out.append("/* Float to integer: truncate toward zero, saturate, NaN gives the minimum. */")
    for name in ("i8", "i16", "i32", "i64"):
        ct = C_TYPES[name]
        lo, hi = _INT_LIMITS[name]
        # The upper test is >= 2^(bits-1), exact in double (INT64_MAX is not).
        top = f"{float(1 << (int(name[1:]) - 1))!r}"
        out.append(f"static inline {ct} swir_f2{name}(double x) "
                   f"{{ return x != x || x <= (double){lo} ? {lo} : x >= {top} ? {hi} "
                   f": ({ct})x; }}")
    out.append(ERF_C.rstrip("\n"))
    return "\n".join(out) + "\n"


check_c_forms()
