"""Math on the CPE (docs/codegen.md, "Math on the CPE"): the generated code
calls only the libm functions of ``scalar.CPE_LIBM``, never libm's erf / erfc,
and our own ``swir_erf`` / ``swir_erfc`` (W. J. Cody's rational Chebyshev
approximations, in the helpers of layers_mix.h) are accurate to a few units in
the last place of a double.

The library check runs swir-cg (in process) on a model holding every
element-wise op of the registry in f16, f32 and f64, and on the other ops
that lower to transcendentals (softmax, layer_norm, ...), and reads
layers_slave.c and layers_mix.h. The accuracy check compiles the helper text
the generator emits into a small program with the host's cc and compares it
with Python's math.erf / math.erfc (glibc's) on 261,052 points over
[-30, 30], special values included.
"""

from __future__ import annotations

import math
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from siblings import sibling
from swir.tools import swir_cg

from swir.codegen import scalar
from swir.ir.builder import Builder
from swir.ir.core import Module
from swir.ir.types import I1, I64
from swir.ir.types import scalar as scalar_type
from swir.ops.elementwise import BINARY, UNARY
from swir.ops.registry import all_ops
from swir.printer import print_module
from swir.verifier import verify

_cases = sibling("test_ldm_plan")
T = _cases.T

# Every function of C99's <math.h> (7.12), with its f and l forms.
_C99_MATH = ["acos", "asin", "atan", "atan2", "cos", "sin", "tan", "acosh", "asinh",
             "atanh", "cosh", "sinh", "tanh", "exp", "exp2", "expm1", "frexp", "ilogb",
             "ldexp", "log", "log10", "log1p", "log2", "logb", "modf", "scalbn", "scalbln",
             "cbrt", "fabs", "hypot", "pow", "sqrt", "erf", "erfc", "lgamma", "tgamma",
             "ceil", "floor", "nearbyint", "rint", "lrint", "llrint", "round", "lround",
             "llround", "trunc", "fmod", "remainder", "remquo", "copysign", "nan",
             "nextafter", "nexttoward", "fdim", "fmax", "fmin", "fma"]
MATH_H = frozenset(n + s for n in _C99_MATH for s in ("", "f", "l"))

EPS = 2.0 ** -52          # ulp(1), DBL_EPSILON
DBL_MIN = 2.0 ** -1022    # the smallest normal double
DENORM = 2.0 ** -1074     # the smallest subnormal


def calls(c_text: str) -> set[str]:
    """The <math.h> functions a C text calls: identifiers followed by '(',
    outside comments and string literals."""
    code = re.sub(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'", " ",
                  c_text, flags=re.DOTALL)
    return {n for n in re.findall(r"\b([A-Za-z_]\w*)\s*\(", code) if n in MATH_H}


# -- the libm functions the generated code calls -------------------------------------------

_BOOL_ONLY = {n for n, v in {**UNARY, **BINARY}.items() if v[0] == "bool"}
_ATTRS = {"clip": [{"min": -0.5, "max": 0.5}], "leaky_relu": [{"alpha": 0.2}],
          "gelu": [{}, {"approximate": "tanh"}], "cast": [{"to": I64}]}


FLOATS = ("f16", "f32", "f64")


def elementwise_model() -> str:
    """A graph module applying every element-wise op of the registry that
    takes floats (each gelu form, ...) to f16, f32 and f64 operands."""
    m = Module("cpe_math", stage="graph")
    types = [T((7, 13), "i1")] + [T((7, 13), e) for e in FLOATS for _ in "xy"]
    f, b = Builder.function(m, "main", types)
    c, *xy = f.params
    results = []
    for x, y in zip(xy[::2], xy[1::2]):
        for o in all_ops():
            if o.category != "elementwise" or o.name in _BOOL_ONLY or o.composite:
                continue    # (an optimiser step is made of the element-wise ops)
            args = (c, x, y) if o.name == "select" else (x, y) if o.num_args[0] == 2 else (x,)
            for attrs in _ATTRS.get(o.name, [{}]):
                results += b.create_inst(o.name, *args, attrs=attrs).results
    f.result_types = [r.type for r in results]
    b.create_inst("return", *results)
    verify(m)
    return print_module(m)


# The other graph ops that lower to transcendentals (exp, log, sqrt), as
# test_ldm_plan.CASES has them.
_LOWERED = {"softmax", "log_softmax", "layer_norm", "batch_norm"}


def models() -> list[tuple[str, str]]:
    out = [("elementwise", elementwise_model())]
    for i, (op, types, attrs) in enumerate(_cases.CASES):
        if op in _LOWERED:
            out.append((f"{op}_{i}", _cases.build(op, types, attrs)))
    return out


@pytest.fixture(scope="module")
def projects(tmp_path_factory) -> dict[str, Path]:
    """Each model through swir-cg (-O3; the greedy LDM plan, which is faster to
    find and calls the same functions): {name: project}."""
    root = tmp_path_factory.mktemp("cpe_math")
    out = {}
    for name, text in models():
        src = root / f"{name}.swir"
        src.write_text(text)
        assert swir_cg.main([str(src), "-o", str(root / name), "-q", "--strategy=greedy"]) == 0
        out[name] = root / name
    return out


def test_cpe_code_calls_only_the_listed_libm_functions(projects):
    used: set[str] = set()
    for name, project in projects.items():
        for file in ("layers_slave.c", "layers_mix.h"):
            got = calls((project / file).read_text())
            assert got <= set(scalar.CPE_LIBM), (name, file, got - set(scalar.CPE_LIBM))
            used |= got
    # The list is what the code calls, nothing more: exp in swir_erfc, fabs for
    # abs, floor / ceil, pow, log, sqrt (rsqrt, layer_norm), tanh (gelu "tanh").
    assert used == set(scalar.CPE_LIBM)
    assert len(scalar.CPE_LIBM) == len(set(scalar.CPE_LIBM))


def test_erf_and_erfc_never_come_from_libm(projects):
    assert not {"erf", "erfc"} & set(scalar.CPE_LIBM)
    for name, project in projects.items():
        for file in sorted(project.glob("*.[ch]")):
            got = calls(file.read_text())
            assert not {"erf", "erfc", "erff", "erfcf", "erfl", "erfcl"} & got, (name, file.name)
    # The CPE kernels call ours, from the header the MPE code shares.
    slave = (projects["elementwise"] / "layers_slave.c").read_text()
    assert "swir_erf(" in slave and "swir_erfc(" in slave
    assert "static inline double swir_erfc(double x)" in \
        (projects["elementwise"] / "layers_mix.h").read_text()


def test_every_element_wise_expression_calls_only_the_listed_functions():
    """scalar.expression itself, for every element-wise op of the dma stage
    on every float type: the C forms the models above go through."""
    for o in all_ops():
        if o.category != "elementwise" or "dma" not in o.stages or o.name in _BOOL_ONLY:
            continue
        n = 3 if o.name == "select" else o.num_args[0]
        for elem in FLOATS:
            t = scalar_type(elem)
            types = [I1, t, t] if o.name == "select" else [t] * n
            result = I64 if o.name == "cast" else t
            text = scalar.expression(o.name, types, ["a", "b", "c"][:n], result, {})
            assert calls(text) <= set(scalar.CPE_LIBM), (o.name, elem, text)
    f32, f64 = scalar_type("f32"), scalar_type("f64")
    assert scalar.expression("erf", [f32], ["a"], f32, {}) == "(float)swir_erf((double)a)"
    assert scalar.expression("erfc", [f64], ["a"], f64, {}) == "swir_erfc(a)"


def test_helpers_call_only_the_listed_functions():
    assert calls(scalar.helpers()) <= set(scalar.CPE_LIBM)
    assert calls(scalar.ERF_C) == {"exp"}


# -- the accuracy of swir_erf / swir_erfc ---------------------------------------------------

HARNESS = r"""#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
%s
/* Doubles in on stdin; erf(x), erfc(x) out on stdout. */
int main(void)
{
    double x, r[2];
    while (fread(&x, sizeof x, 1, stdin) == 1) {
        r[0] = swir_erf(x);
        r[1] = swir_erfc(x);
        if (fwrite(r, sizeof r, 1, stdout) != 1)
            return 1;
    }
    return 0;
}
"""

# The same code with e^(-y^2) computed the naive way, exp(-y * y) (+ 0 s, to
# keep s used): the rounding of y * y (absolute up to y^2 2^-53) becomes a
# relative error of up to y^2 2^-53 in erfc: ~350 ulps near y = 26.5.
NAIVE = ("exp(-s * s) * exp(-(y - s) * (y + s))", "exp(-y * y + 0.0 * s)")

SPECIAL = [0.0, -0.0, DENORM, -DENORM, DBL_MIN, 1e-300, 1e-20, 1e-8, 0.46875,
           math.nextafter(0.46875, 1), 4.0, math.nextafter(4.0, 5), 5.9, 6.0,
           math.nextafter(6.0, 0), 10.0, 26.5, 26.543, 27.0, 27.2, 27.5,
           math.nextafter(27.5, 0), 30.0, 1e300, math.inf]
SPECIAL = np.array(SPECIAL + [-v for v in SPECIAL] + [math.nan])


def grid() -> np.ndarray:
    """261,052 points: [-30, 30] in steps of 2.5e-4, a geometric sweep of
    each sign from 1e-300 to 30, erfc's subnormal range, the special values."""
    sweep = np.geomspace(1e-300, 30.0, 10_000)
    return np.concatenate([np.linspace(-30.0, 30.0, 240_001), sweep, -sweep,
                           np.linspace(26.5, 27.3, 1_000), SPECIAL])


def build(tmp: Path, name: str, helpers: str) -> Path:
    src = tmp / f"{name}.c"
    src.write_text(HARNESS % helpers)
    program = tmp / name
    subprocess.run(["cc", "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", str(src),
                    "-o", str(program), "-lm"], check=True, capture_output=True, text=True)
    return program


def evaluate(program: Path, xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    out = subprocess.run([str(program)], input=xs.astype("<f8").tobytes(),
                         capture_output=True, check=True, timeout=60).stdout
    r = np.frombuffer(out, dtype="<f8").reshape(-1, 2)
    return r[:, 0], r[:, 1]


def errors(xs, erf, erfc) -> dict[str, float]:
    """Max errors against math.erf / math.erfc on the finite points: erf's
    absolute and relative (in ulps of 1, 2^-52), erfc's relative where it is
    normal (in 2^-52) and absolute where it is subnormal (in 2^-1074)."""
    fin = np.isfinite(xs)
    want = np.frompyfunc(math.erf, 1, 1)(xs[fin]).astype(np.float64)
    wantc = np.frompyfunc(math.erfc, 1, 1)(xs[fin]).astype(np.float64)
    e, c = erf[fin], erfc[fin]
    nz, normal = want != 0, wantc >= DBL_MIN
    return {
        "erf_abs": float(np.max(np.abs(e - want))) / EPS,
        "erf_rel": float(np.max(np.abs(e - want)[nz] / np.abs(want[nz]))) / EPS,
        "erfc_rel": float(np.max(np.abs(c - wantc)[normal] / wantc[normal])) / EPS,
        "erfc_sub": float(np.max(np.abs(c - wantc)[~normal], initial=0.0)) / DENORM,
    }


@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("erf"), "erf", scalar.helpers())


def test_erf_erfc_max_error(harness):
    """Measured on this grid (x86-64, gcc 12 -O2, glibc): erf 1.0 ulp(1)
    absolute (2.2e-16) and 2.0 ulps relative; erfc 4.0 ulps relative
    (8.8e-16, near x = 3.5) while normal, 2 x 2^-1074 absolute in the
    subnormals. Over 5 million points (uniform and random grids) the maxima
    are erf 1.5 ulp(1) absolute (3.3e-16, near x = 0.54), 2.7 relative, erfc
    4.9 relative (1.1e-15) and 3 x 2^-1074: the bounds below leave that
    margin. They fail by orders of magnitude for a single-precision-class
    approximation (Abramowitz & Stegun 7.1.26: 6e8 ulps absolute) and for a
    naive exp(-x^2) in the tail (257 ulps: the next test)."""
    xs = grid()
    assert xs.size == 261_052
    erf, erfc = evaluate(harness, xs)
    err = errors(xs, erf, erfc)
    assert err["erf_abs"] <= 2.0, err
    assert err["erf_rel"] <= 4.0, err
    assert err["erfc_rel"] <= 6.0, err
    assert err["erfc_sub"] <= 4.0, err


def test_erf_erfc_special_values(harness):
    erf, erfc = evaluate(harness, SPECIAL)
    got = {float(x): (float(e), float(c)) for x, e, c in zip(SPECIAL[:-1], erf, erfc)}
    assert got[math.inf] == (1.0, 0.0) and got[-math.inf] == (-1.0, 2.0)
    assert got[30.0] == (1.0, 0.0) and got[-30.0] == (-1.0, 2.0)
    assert got[1e300] == (1.0, 0.0) and got[-1e300] == (-1.0, 2.0)
    assert got[6.0][0] == 1.0 and got[-6.0][1] == 2.0
    zero, zeroc = evaluate(harness, np.array([0.0, -0.0]))
    assert list(zero) == [0.0, 0.0] and list(zeroc) == [1.0, 1.0]
    assert list(np.copysign(1.0, zero)) == [1.0, -1.0]     # erf(-0) = -0
    assert got[DENORM] == (DENORM, 1.0) and got[-DENORM][0] == -DENORM
    assert math.isnan(erf[-1]) and math.isnan(erfc[-1])
    # The tail keeps its relative accuracy: erfc(10) = 2.088e-45, erfc(26.5) = 2.2e-307.
    for x in (10.0, 26.5):
        assert abs(got[x][1] - math.erfc(x)) <= 6 * EPS * math.erfc(x), (x, got[x][1])
    assert 0 < got[27.0][1] < DBL_MIN and got[27.5][1] == 0.0
    # Odd and complementary: erf(-x) = -erf(x), erfc(-x) = 2 - erfc(x).
    for x in (1e-8, 0.46875, 4.0, 5.9, 10.0, 26.5):
        assert got[-x][0] == -got[x][0] and got[-x][1] == 2.0 - got[x][1]


def test_naive_tail_fails_the_bound(tmp_path):
    """The bound has teeth: exp(-y * y) instead of the split e^(-s^2) e^(-(y-s)(y+s))."""
    assert scalar.ERF_C.count(NAIVE[0]) == 1
    program = build(tmp_path, "naive", scalar.helpers().replace(*NAIVE))
    xs = grid()
    err = errors(xs, *evaluate(program, xs))
    assert err["erfc_rel"] > 100, err


def test_helpers_compile_as_strict_c99(tmp_path):
    """layers_mix.h's helpers as sw5cc's dialect sees them (gnu99, pedantic):
    C99 only, no warnings."""
    src = tmp_path / "strict.c"
    src.write_text(HARNESS % scalar.helpers())
    subprocess.run(["cc", "-std=gnu99", "-pedantic-errors", "-Wall", "-Wextra", "-Werror",
                    "-fsyntax-only", str(src)], check=True, capture_output=True, text=True)
