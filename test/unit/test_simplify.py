"""-simplify: each rewrite leaves a verified module with fewer ops that the
graph interpreter runs to the same bits as before, on random inputs seeded
with the awkward values (signed zeros, infinities, NaN, subnormals, the
integer extremes); and what must not be rewritten is left alone."""

from __future__ import annotations

import numpy as np
import pytest

from swir.interp.graph import GraphInterpreter
from swir.kernels import dtype_of
from swir.interp.arguments import shape_of
from swir.ir.core import Module
from swir.ops.registry import lookup
from swir.parser import parse_module
from swir.passes import pass_class
from swir.passes.manager import PassFailure, PassManager
from swir.printer import print_module
from swir.verifier import verify

SEEDS = range(4)


def simplify(m: Module) -> dict[str, int]:
    """Run -simplify as swir-opt does (verifying after it); its statistics."""
    p = pass_class("simplify")()
    PassManager([p], verify_each=True).run(m)
    verify(m)
    return p.statistics


def op_count(m: Module, opname: str | None = None) -> int:
    return sum(1 for i in m.walk() if opname is None or i.opname == opname)


def module(signature: str, body: str, globals_: str = "") -> str:
    return (f'module "m"\nstage graph\n{globals_}\nfunc @f{signature} {{\n'
            f"'entry:\n{body}\n}}\n")


# -- inputs and comparison -----------------------------------------------------------

def special_values(dtype: np.dtype) -> list:
    if dtype.kind == "f":
        info = np.finfo(dtype)
        return [0.0, -0.0, np.inf, -np.inf, np.nan, info.smallest_subnormal,
                -info.smallest_subnormal, info.max, -info.max, 1.0, -1.0]
    if dtype.kind == "b":
        return [False, True]
    info = np.iinfo(dtype)
    return [info.min, info.max, 0, -1, 1]


def random_array(t, seed: int) -> np.ndarray:
    """Random elements of type t, the first ones special values: consecutive
    seeds take consecutive windows of them, so SEEDS cover them all."""
    rng = np.random.default_rng(seed)
    dtype, shape = dtype_of(t), shape_of(t)
    size = int(np.prod(shape))
    if dtype.kind == "f":
        with np.errstate(over="ignore"):  # big scales overflow f16 to inf: fine
            flat = (rng.standard_normal(size) * 2.0 ** rng.integers(-20, 20, size))
            flat = flat.astype(dtype)
    elif dtype.kind == "b":
        flat = rng.integers(0, 2, size).astype(bool)
    else:
        info = np.iinfo(dtype)
        flat = rng.integers(info.min, info.max, size, endpoint=True, dtype=dtype)
    special = np.array(special_values(dtype), dtype=dtype)
    n = min(size, len(special))
    flat[:n] = np.roll(special, -seed * n)[:n]
    return flat.reshape(shape)


def assert_same_bits(before: list[np.ndarray], after: list[np.ndarray]) -> None:
    assert len(before) == len(after)
    for a, b in zip(before, after):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape
        if a.dtype.kind != "f":
            np.testing.assert_array_equal(a, b)
            continue
        # NaN positions must agree; a NaN's sign and payload may differ (x * -1
        # keeps the operand's sign where neg flips it). Every other element,
        # zeros' signs included, must have the same bits.
        nan = np.isnan(a)
        np.testing.assert_array_equal(nan, np.isnan(b))
        bits = f"u{a.dtype.itemsize}"
        np.testing.assert_array_equal(a[~nan].view(bits), b[~nan].view(bits))


def check_rewrite(text: str, stat: str, saved: int = 1) -> Module:
    """Simplify text's @f: the statistic counts, at least ``saved`` ops go, and
    the results keep their bits."""
    before, after = parse_module(text), parse_module(text)
    stats = simplify(after)
    assert stats.get(stat, 0) > 0, stats
    assert op_count(after) <= op_count(before) - saved
    f = before.lookup("f")
    for seed in SEEDS:
        args = [random_array(p.type, seed) for p in f.params]
        with np.errstate(all="ignore"):  # inf - inf and the like are the point
            want = GraphInterpreter(before).run("f", args)
            got = GraphInterpreter(after).run("f", args)
        assert_same_bits(want, got)
    return after


# -- neutral operands -------------------------------------------------------------------

NEUTRAL = {
    "mul-one": ("(%x: <2 x 4 x f32>) -> <2 x 4 x f32>", """
  %one = const dense<1.0> : <4 x f32>
  %y = mul %x, %one : <2 x 4 x f32>
  return %y"""),
    "one-mul-int": ("(%x: <4 x i32>) -> <4 x i32>", """
  %one = const 1 : i32
  %y = mul %one, %x : <4 x i32>
  return %y"""),
    "add-negative-zero": ("(%x: <4 x f32>) -> <4 x f32>", """
  %nz = const dense<-0.0> : <4 x f32>
  %y = add %x, %nz : <4 x f32>
  return %y"""),
    "negative-zero-add-f64": ("(%x: <2 x 3 x f64>) -> <2 x 3 x f64>", """
  %nz = const -0.0 : f64
  %y = add %nz, %x : <2 x 3 x f64>
  return %y"""),
    "sub-positive-zero-f16": ("(%x: <8 x f16>) -> <8 x f16>", """
  %pz = const dense<0.0> : <8 x f16>
  %y = sub %x, %pz : <8 x f16>
  return %y"""),
    "int-zero": ("(%x: <8 x i8>) -> <8 x i8>", """
  %z = const 0 : i8
  %a = add %x, %z : <8 x i8>
  %b = add %z, %a : <8 x i8>
  %y = sub %b, %z : <8 x i8>
  return %y"""),
    "div-one": ("(%x: <4 x f32>, %i: <4 x i64>) -> (<4 x f32>, <4 x i64>)", """
  %one = const 1.0 : f32
  %y = div %x, %one : <4 x f32>
  %k = const 1 : i64
  %j = div %i, %k : <4 x i64>
  return %y, %j"""),
    "bool": ("(%p: <8 x i1>) -> <8 x i1>", """
  %f = const dense<false> : <8 x i1>
  %t = const dense<true> : <8 x i1>
  %a = add %p, %f : <8 x i1>
  %b = sub %a, %f : <8 x i1>
  %y = mul %t, %b : <8 x i1>
  return %y"""),
}


@pytest.mark.parametrize("name", NEUTRAL)
def test_neutral_operands_go(name):
    signature, body = NEUTRAL[name]
    m = check_rewrite(module(signature, body), "neutral operations removed")
    assert op_count(m) == 1  # only the return is left


def test_neutral_global_constant():
    text = module("(%x: <4 x f32>) -> <4 x f32>", "  %y = mul @one, %x : <4 x f32>\n  return %y",
                  "global @one : <4 x f32> = dense<[1.0, 1.0, 1.0, 1.0]>")
    check_rewrite(text, "neutral operations removed")


# -- multiplying and dividing by constants -------------------------------------------

def test_mul_by_minus_one_is_neg():
    text = module("(%x: <4 x f32>, %i: <2 x 8 x i32>) -> (<4 x f32>, <2 x 8 x i32>)", """
  %m = const dense<-1.0> : <4 x f32>
  %y = mul %m, %x : <4 x f32>
  %k = const -1 : i32
  %j = mul %i, %k : <2 x 8 x i32>
  return %y, %j""")
    m = check_rewrite(text, "multiplications by -1 made negations")
    assert op_count(m, "neg") == 2 and op_count(m, "mul") == 0


DIVISIONS = {
    "global-per-element": ("(%x: <3 x 4 x f32>) -> <3 x 4 x f32>",
                           "  %y = div %x, @s : <3 x 4 x f32>\n  return %y",
                           "global @s : <4 x f32> = dense<[2.0, -0.125, 1024.0, 0.5]>"),
    # 2^14 in f16: its reciprocal 2^-14 is the smallest normal f16.
    "f16-normal-reciprocal": ("(%x: <16 x f16>) -> <16 x f16>", """
  %c = const dense<16384.0> : <16 x f16>
  %y = div %x, %c : <16 x f16>
  return %y""", ""),
    "f64-scalar": ("(%x: <8 x f64>) -> <8 x f64>", """
  %c = const 0.25 : f64
  %y = div %x, %c : <8 x f64>
  return %y""", ""),
}


@pytest.mark.parametrize("name", DIVISIONS)
def test_division_by_power_of_two_is_multiplication(name):
    signature, body, globals_ = DIVISIONS[name]
    # A const divisor gives way to its reciprocal (as many ops); a global
    # divisor stays, so its reciprocal is one op more.
    saved = -1 if globals_ else 0
    m = check_rewrite(module(signature, body, globals_), "divisions made multiplications",
                      saved)
    assert op_count(m, "div") == 0 and op_count(m, "mul") == 1


def test_division_with_a_subnormal_reciprocal_stays():
    """2^15 in f16: 2^-15 is exact but subnormal, and the C may run with
    subnormals flushed to zero, where x * 2^-15 would be 0."""
    m = parse_module(module("(%x: <16 x f16>) -> <16 x f16>", """
  %c = const dense<32768.0> : <16 x f16>
  %y = div %x, %c : <16 x f16>
  return %y"""))
    assert simplify(m) == {} and op_count(m, "div") == 1


def test_division_by_minus_one_becomes_neg():
    text = module("(%x: <4 x f32>) -> <4 x f32>", """
  %c = const dense<-1.0> : <4 x f32>
  %y = div %x, %c : <4 x f32>
  return %y""")
    m = check_rewrite(text, "multiplications by -1 made negations")
    assert [i.opname for i in m.walk()] == ["neg", "return"]


# -- data movement ---------------------------------------------------------------------

TRANSPOSES = {
    "default-twice": ("(%x: <2 x 3 x 4 x f32>) -> <2 x 3 x 4 x f32>", """
  %a = transpose %x : <4 x 3 x 2 x f32>
  %y = transpose %a : <2 x 3 x 4 x f32>
  return %y""", []),
    "composed": ("(%x: <2 x 3 x 4 x f32>) -> <4 x 2 x 3 x f32>", """
  %a = transpose %x {perm = [1, 2, 0]} : <3 x 4 x 2 x f32>
  %b = transpose %a {perm = [0, 2, 1]} : <3 x 2 x 4 x f32>
  %y = transpose %b {perm = [2, 1, 0]} : <4 x 2 x 3 x f32>
  return %y""", [(2, 0, 1)]),
    "identity-perm": ("(%x: <2 x 3 x f32>) -> <2 x 3 x f32>", """
  %y = transpose %x {perm = [0, 1]} : <2 x 3 x f32>
  return %y""", []),
    "inner-shared": ("(%x: <2 x 3 x i16>) -> (<3 x 2 x i16>, <2 x 3 x i16>)", """
  %a = transpose %x : <3 x 2 x i16>
  %y = transpose %a : <2 x 3 x i16>
  return %a, %y""", [None]),
}


@pytest.mark.parametrize("name", TRANSPOSES)
def test_transposes_compose(name):
    signature, body, perms = TRANSPOSES[name]
    stat = "identity transposes removed" if name == "identity-perm" else "transposes composed"
    m = check_rewrite(module(signature, body), stat)
    assert [i.attrs.get("perm") for i in m.walk() if i.opname == "transpose"] == perms


def test_reshape_chain_is_one_reshape():
    text = module("(%x: <2 x 4 x f32>) -> (<1 x 8 x f32>, <2 x 4 x f32>)", """
  %a = reshape %x {shape = [8, 1]} : <8 x 1 x f32>
  %b = squeeze %a : <8 x f32>
  %c = unsqueeze %b {axes = [0, 2]} : <1 x 8 x 1 x f32>
  %d = flatten %c {axis = 2} : <8 x 1 x f32>
  %y = reshape %d {shape = [1, -1]} : <1 x 8 x f32>
  %z = flatten %x : <2 x 4 x f32>
  return %y, %z""")
    m = check_rewrite(text, "reshapes composed")
    (only,) = [i for i in m.walk() if i.opname != "return"]
    assert only.opname == "reshape" and tuple(only.attrs["shape"]) == (1, 8)


def test_reshape_back_to_the_input_type_is_the_input():
    text = module("(%x: <2 x 3 x f64>) -> <2 x 3 x f64>", """
  %a = reshape %x {shape = [3, 2]} : <3 x 2 x f64>
  %y = reshape %a {shape = [2, 3]} : <2 x 3 x f64>
  return %y""")
    m = check_rewrite(text, "reshapes composed")
    assert op_count(m) == 1


# -- casts ---------------------------------------------------------------------------------

CASTS = {
    "same-type": ("(%x: <4 x f32>) -> <4 x f32>",
                  "  %y = cast %x {to = f32} : <4 x f32>\n  return %y", "no-op casts removed"),
    "float-widening": ("(%x: <8 x f16>) -> <8 x f64>", """
  %a = cast %x {to = f32} : <8 x f32>
  %y = cast %a {to = f64} : <8 x f64>
  return %y""", "casts composed"),
    "int-widening": ("(%x: <8 x i8>) -> <8 x i64>", """
  %a = cast %x {to = i16} : <8 x i16>
  %y = cast %a {to = i64} : <8 x i64>
  return %y""", "casts composed"),
    "int-round-trip": ("(%x: <8 x i8>) -> <8 x i8>", """
  %a = cast %x {to = i32} : <8 x i32>
  %y = cast %a {to = i8} : <8 x i8>
  return %y""", "casts composed"),
    "widening-then-float": ("(%x: <8 x i8>) -> <8 x f16>", """
  %a = cast %x {to = i32} : <8 x i32>
  %y = cast %a {to = f16} : <8 x f16>
  return %y""", "casts composed"),
    "bool-widening": ("(%p: <8 x i1>) -> <8 x i32>", """
  %a = cast %p {to = i8} : <8 x i8>
  %y = cast %a {to = i32} : <8 x i32>
  return %y""", "casts composed"),
}


@pytest.mark.parametrize("name", CASTS)
def test_casts(name):
    signature, body, stat = CASTS[name]
    m = check_rewrite(module(signature, body), stat)
    assert op_count(m, "cast") <= 1


# -- unary pairs ---------------------------------------------------------------------------

UNARY = {
    "neg-neg": ("neg", "neg", "f32", 0),
    "neg-neg-int": ("neg", "neg", "i8", 0),  # INT_MIN: both wrap to itself
    "relu-relu": ("relu", "relu", "f32", 1),
    "relu-relu-int": ("relu", "relu", "i32", 1),
    "abs-abs": ("abs", "abs", "f16", 1),
    "abs-neg": ("neg", "abs", "f32", 1),
    "abs-neg-int": ("neg", "abs", "i64", 1),
}


@pytest.mark.parametrize("name", UNARY)
def test_unary_pairs(name):
    inner, outer, elem, left = UNARY[name]
    t = f"<16 x {elem}>"
    text = module(f"(%x: {t}) -> {t}",
                  f"  %a = {inner} %x : {t}\n  %y = {outer} %a : {t}\n  return %y")
    m = check_rewrite(text, "unary pairs folded")
    assert op_count(m) == 1 + left
    assert op_count(m, "neg") == 0 or name == "neg-neg"


# -- fixpoint, regions, what stays -------------------------------------------------------

def test_one_run_reaches_the_fixpoint():
    text = module("(%x: <4 x 2 x f32>) -> <4 x 2 x f32>", """
  %one = const dense<1.0> : <4 x 2 x f32>
  %a = mul %x, %one : <4 x 2 x f32>
  %b = transpose %a : <2 x 4 x f32>
  %c = neg %b : <2 x 4 x f32>
  %d = neg %c : <2 x 4 x f32>
  %e = transpose %d : <4 x 2 x f32>
  %h = const dense<2.0> : <4 x 2 x f32>
  %y = div %e, %h : <4 x 2 x f32>
  return %y""")
    m = check_rewrite(text, "transposes composed")
    assert [i.opname for i in m.walk()] == ["const", "mul", "return"]
    assert simplify(m) == {}  # a second run finds nothing


@pytest.mark.skipif(lookup("fused") is None, reason="no fused op")
def test_rewrites_inside_a_fused_group():
    text = module("(%x: <2 x 4 x f32>) -> <2 x 4 x f32>", """
  %y = fused %x : <2 x 4 x f32> {
  'g(%a: <2 x 4 x f32>):
    %one = const dense<1.0> : <2 x 4 x f32>
    %m = mul %a, %one : <2 x 4 x f32>
    %n = neg %m : <2 x 4 x f32>
    %n2 = neg %n : <2 x 4 x f32>
    %e = exp %n2 : <2 x 4 x f32>
    yield %e
  }
  return %y""")
    m = check_rewrite(text, "unary pairs folded")
    assert [i.opname for i in m.walk()] == ["fused", "exp", "yield", "return"]


KEPT = {
    "broadcasting-one": ("(%x: <4 x f32>) -> <2 x 4 x f32>", """
  %one = const dense<1.0> : <2 x 4 x f32>
  %y = mul %x, %one : <2 x 4 x f32>
  return %y"""),
    "rank-raising-one": ("(%x: <4 x f32>) -> <1 x 4 x f32>", """
  %one = const dense<1.0> : <1 x 4 x f32>
  %y = mul %one, %x : <1 x 4 x f32>
  return %y"""),
    "add-positive-zero": ("(%x: <4 x f32>) -> <4 x f32>", """
  %z = const 0.0 : f32
  %y = add %x, %z : <4 x f32>
  return %y"""),
    "sub-negative-zero": ("(%x: <4 x f32>) -> <4 x f32>", """
  %z = const -0.0 : f32
  %y = sub %x, %z : <4 x f32>
  return %y"""),
    "div-three": ("(%x: <4 x f32>) -> <4 x f32>", """
  %c = const 3.0 : f32
  %y = div %x, %c : <4 x f32>
  return %y"""),
    "div-int-two": ("(%x: <4 x i32>) -> <4 x i32>", """
  %c = const 2 : i32
  %y = div %x, %c : <4 x i32>
  return %y"""),
    "div-reciprocal-overflows": ("(%x: <4 x f16>) -> <4 x f16>", """
  %c = const dense<5.960464477539063e-08> : <4 x f16>
  %y = div %x, %c : <4 x f16>
  return %y"""),
    "narrowing-cast": ("(%x: <4 x f32>) -> <4 x f32>", """
  %a = cast %x {to = f16} : <4 x f16>
  %y = cast %a {to = f32} : <4 x f32>
  return %y"""),
    "kind-changing-cast": ("(%x: <4 x i32>) -> <4 x i32>", """
  %a = cast %x {to = f32} : <4 x f32>
  %y = cast %a {to = i32} : <4 x i32>
  return %y"""),
    "single-transpose": ("(%x: <2 x 3 x f32>) -> <3 x 2 x f32>", """
  %y = transpose %x : <3 x 2 x f32>
  return %y"""),
    "neg-abs": ("(%x: <4 x f32>) -> <4 x f32>", """
  %a = abs %x : <4 x f32>
  %y = neg %a : <4 x f32>
  return %y"""),
}


@pytest.mark.parametrize("name", KEPT)
def test_kept(name):
    signature, body = KEPT[name]
    m = parse_module(module(signature, body))
    text = print_module(m)
    assert simplify(m) == {}
    assert print_module(m) == text


def test_big_and_file_constants_are_never_read(monkeypatch):
    import swir.passes.graph.simplify as simplify_module
    read = []
    real = simplify_module.constant_value
    monkeypatch.setattr(simplify_module, "constant_value", lambda v: read.append(v) or real(v))
    text = module("(%x: <2048 x f32>, %y: <4 x f32>) -> (<2048 x f32>, <4 x f32>)", """
  %a = mul %x, @ones : <2048 x f32>
  %b = div %y, @w : <4 x f32>
  return %a, %b""", 'global @ones : <2048 x f32> = dense<1.0>\n'
                    'global @w : <4 x f32> = file "missing.weights" offset 0')
    m = parse_module(text)
    assert simplify(m) == {}
    assert read == []


def test_dead_code_is_left_to_dce():
    text = module("(%x: <4 x f32>) -> <4 x f32>", """
  %a = neg %x : <4 x f32>
  %b = neg %a : <4 x f32>
  return %x""")
    m = parse_module(text)
    assert simplify(m) == {}
    assert op_count(m) == 3


def test_refuses_other_stages():
    m = parse_module('module "m"\nstage loop\n')
    with pytest.raises(PassFailure, match="runs on the graph stage, but the module is at "
                                          "the loop stage"):
        simplify(m)
