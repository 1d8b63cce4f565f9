"""The loop-stage interpreter: the example kernels against numpy, the calling
convention, loops, guards and index arithmetic, the order of parallel loops,
dyn_index, the arena, poison, run-time errors, bit-identity of scalar ops with
the graph kernels, the step limit, and calls."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from swir.analysis.calling import written_params
from swir.diagnostics import Diagnostic
from swir import kernels
from swir.interp.loop import (
    LoopInterpreter,
    fast_template,
    io_signature,
)
from swir.interp.pycode import MAX_INLINE_DEPTH
from swir.interp.run import run_function, signature
from swir.ir.types import TensorType, scalar
from swir.parser import parse_module
from swir.verifier import verify
from helpers import f32

ROOT = Path(__file__).resolve().parents[2]
LOOP_STAGE = ROOT / "test" / "IR" / "loop-stage.swir"
POISON_F32 = 0x7FFA7FFA
POISON_I32 = 0x7FFA7FFA


def module(text: str, check: bool = True):
    m = parse_module(text, "<test>")
    if check:
        verify(m)
    return m


def run(text: str, name: str, args: list, check: bool = True, **kw) -> list[np.ndarray]:
    m = module(text, check)
    return LoopInterpreter(m, **kw).run(name, args)


# -- the kernels of test/IR/loop-stage.swir ------------------------------------------------

@pytest.fixture(scope="module")
def example():
    m = parse_module(LOOP_STAGE.read_text(), str(LOOP_STAGE))
    verify(m)
    return m


def test_example_matmul(example):
    A, B = f32(1, 784, seed=1), f32(784, 128, seed=2)
    C = f32(1, 128, seed=3)  # overwritten: the kernel stores zero first
    (c,) = LoopInterpreter(example).run("matmul_0", [A, B, C])
    # The kernel accumulates in f32, k in order: the same as numpy's f32 adds in order.
    want = np.zeros((1, 128), np.float32)
    for k in range(784):
        want += A[:, k:k + 1] * B[k]
    np.testing.assert_array_equal(c, want)


def test_example_pad_guard(example):
    I, O = f32(1, 4, 9, 9, seed=4), f32(1, 4, 5, 5, seed=5)
    (o,) = LoopInterpreter(example).run("pad_guard", [I, O])
    want = O.copy()
    for c in range(4):
        for oh in range(5):
            for kh in range(3):
                h = 2 * oh + kh - 1
                if 0 <= h < 9:
                    want[0, c, oh, oh] = I[0, c, h, oh]
                else:
                    want[0, c, oh, 4 - oh] = 0.0
    np.testing.assert_array_equal(o, want)


def test_example_tiles(example):
    X, Y = f32(1000, seed=6), f32(500, seed=7)
    (y,) = LoopInterpreter(example).run("tiles", [X, Y])
    want = Y.copy()
    for i in range(1000):
        want[i // 2] = X[i]
    for j in range(0, 1000, 7):
        want[j // 2] = X[j % 10]
    np.testing.assert_array_equal(y, want)


def test_example_main_reads_its_weights_next_to_the_module(tmp_path, example):
    shutil.copy(LOOP_STAGE, tmp_path / "m.swir")
    w = f32(784, 128, seed=8)
    (tmp_path / "mlp.weights").write_bytes(w.astype("<f4").tobytes())
    m = parse_module((tmp_path / "m.swir").read_text(), str(tmp_path / "m.swir"))
    interp = LoopInterpreter(m, tmp_path)
    x = f32(1, 784, seed=9)
    assert interp.run("main", [x, np.zeros((1, 128), np.float32)]) == []
    t0 = interp.memory.buffer("t0").reshape(1, 128)
    np.testing.assert_allclose(t0, x.astype(np.float64) @ w, rtol=1e-4, atol=1e-4)


def test_missing_weights_are_a_diagnostic_at_the_global(example):
    interp = LoopInterpreter(example, "/nonexistent")
    with pytest.raises(Diagnostic, match="@w1: cannot read weight file") as e:
        interp.run("main", [f32(1, 784), f32(1, 128)])
    assert e.value.loc is not None and e.value.loc.line == 10


# -- calling convention ---------------------------------------------------------------------

MATMUL_TEMPLATE = '''module "mm"
stage loop
kernel @mm(%A: buf<M x K x f32>, %B: buf<K x N x f32>, %C: buf<M x N x f32>) {
  for %i = 0 to M {
    for %j = 0 to N {
      %z = const 0.0 : f32
      store %z, %C[%i, %j]
      for %k = 0 to K {
        %a = load %A[%i, %k] : f32
        %b = load %B[%k, %j] : f32
        %c = load %C[%i, %j] : f32
        %m = mul %a, %b : f32
        %s = add %c, %m : f32
        store %s, %C[%i, %j]
      }
    }
  }
}
func @main(%a: buf<M x K x f32>, %b: buf<K x N x f32>, %c: buf<M x N x f32>) -> f32 attributes {outputs = 1} {
'entry:
  call @mm(%a, %b, %c)
  %r = load %c[M - 1, N - 1] : f32
  return %r
}
'''


def matmul(m: int, k: int, n: int) -> str:
    return MATMUL_TEMPLATE.replace("M", str(m)).replace("K", str(k)).replace("N", str(n))


MATMUL = matmul(4, 5, 3)


def test_matmul_through_a_func_with_an_output():
    A, B = f32(4, 5, seed=10), f32(5, 3, seed=11)
    c, r = run(MATMUL, "main", [A, B])
    want = np.zeros((4, 3), np.float32)
    for k in range(5):
        want += A[:, k:k + 1] * B[k]
    assert c.shape == (4, 3) and c.dtype == np.float32
    np.testing.assert_array_equal(c, want)
    assert r.shape == () and r.dtype == np.float32 and r == want[3, 2]


def test_signatures_follow_the_convention():
    m = module(MATMUL)
    main, mm = m.lookup("main"), m.lookup("mm")
    inputs, results = io_signature(main)
    assert [p.name for p in inputs] == ["a", "b"]
    assert [str(t) for t in results] == ["buf<4 x 3 x f32>", "f32"]
    assert signature(m, mm)[0] == mm.params and written_params(mm) == [2]
    assert [str(t) for t in signature(m, mm)[1]] == ["buf<4 x 3 x f32>"]


def test_wrong_arguments_are_diagnosed():
    with pytest.raises(Diagnostic, match=r"@main takes 2 argument\(s\) \(its last 1 parameter"):
        run(MATMUL, "main", [f32(4, 5), f32(5, 3), f32(4, 3)])
    with pytest.raises(Diagnostic, match=r"argument #1 \(%b\) of @main expects buf<5 x 3 x f32>"):
        run(MATMUL, "main", [f32(4, 5), f32(5, 4)])


def test_kernel_results_are_the_buffers_it_writes_and_inputs_are_not_mutated():
    A, B, C = f32(4, 5), f32(5, 3), f32(4, 3)
    before = C.copy()
    (c,) = run(MATMUL, "mm", [A, B, C])
    np.testing.assert_array_equal(C, before)
    assert not np.array_equal(c, before)


WRITERS = '''module "w"
stage loop
kernel @set(%X: buf<2 x f32>, %v: f32) {
  store %v, %X[0]
  store %v, %X[1]
}
kernel @outer(%P: buf<2 x f32>, %Q: buf<2 x f32>, %R: buf<2 x f32>, %v: f32) {
  call @set(%R, %v)
  %q = load %Q[0] : f32
  store %q, %P[1]
}
'''


def test_written_parameters_follow_calls_in_parameter_order():
    m = module(WRITERS)
    assert written_params(m.lookup("outer")) == [0, 2]
    p, r = LoopInterpreter(m).run("outer", [f32(2), np.full(2, 5.0, np.float32),
                                            f32(2), np.array(7.0, np.float32)])
    assert p[1] == 5.0 and list(r) == [7.0, 7.0]


# -- loops, guards and index arithmetic -------------------------------------------------------

INDEXING = '''module "ix"
stage loop
kernel @k(%F: buf<10 x index>, %C: buf<10 x index>, %M: buf<10 x index>, %S: buf<10 x index>, %G: buf<10 x index>) {
  for %i = 0 to 10 {
    %a = const 0 : index
    store %a, %S[%i]
    store %a, %G[%i]
  }
  for %i = 0 to 10 {
    %f = dyn_index %i {bound = 10} : index
    if %i - 5 >= 0 {
      store %i, %F[(%i - 5) floordiv 3 + 1]
    } else {
      %v = const -1 : index
      store %v, %F[(%i - 5) floordiv 3 + 2]
    }
    store %f, %C[(%i - 5) ceildiv 3 + 2]
    store %f, %M[(%i - 5) mod 3]
  }
  for %j = 1 to min(10, 3*2 + 1) step 3 {
    store %j, %S[%j]
  }
  for %j = max(2, 1) to 10 step 4 {
    if %j != 6 {
      store %j, %G[%j]
    }
  }
}
'''


def test_floordiv_ceildiv_mod_min_max_steps_and_guards():
    base = [np.full(10, 99, np.int64) for _ in range(5)]
    F, C, M, S, G = run(INDEXING, "k", base)
    want = {n: np.full(10, 99, np.int64) for n in "FCM"}
    for i in range(10):
        if i - 5 >= 0:
            want["F"][(i - 5) // 3 + 1] = i
        else:
            want["F"][(i - 5) // 3 + 2] = -1
        want["C"][-((5 - i) // 3) + 2] = i
        want["M"][(i - 5) % 3] = i
    np.testing.assert_array_equal(F, want["F"])
    np.testing.assert_array_equal(C, want["C"])
    np.testing.assert_array_equal(M, want["M"])
    assert list(S) == [0, 1, 0, 0, 4, 0, 0, 0, 0, 0]        # 1, 4 (7 is past min(10, 7))
    assert list(G) == [0, 0, 2, 0, 0, 0, 0, 0, 0, 0]        # 2, (6 skipped)


def test_loop_bounds_are_evaluated_once_at_entry():
    text = '''module "b"
stage loop
kernel @k(%n: index, %O: buf<8 x index>) {
  for %i = 0 to %n {
    for %j = %i to min(%n, 8) {
      store %j, %O[%j]
    }
  }
}
'''
    (o,) = run(text, "k", [np.array(3), np.zeros(8, np.int64)])
    assert list(o) == [0, 1, 2, 0, 0, 0, 0, 0]


ORDER = '''module "o"
stage loop
kernel @order(%N: buf<1 x index>, %O: buf<6 x index>) {
  %z = const 0 : index
  store %z, %N[0]
  LOOP %i = 0 to 6 {
    %c = load %N[0] : index
    store %c, %O[%i]
    %one = const 1 : index
    %d = add %c, %one : index
    store %d, %N[0]
  }
}
kernel @scan(%A: buf<6 x f32>) {
  LOOP %i = 1 to 6 {
    %p = load %A[%i - 1] : f32
    %q = load %A[%i] : f32
    %s = add %p, %q : f32
    store %s, %A[%i]
  }
}
'''


def test_parallel_iterations_run_in_reverse_order():
    seq, par = ORDER.replace("LOOP", "for"), ORDER.replace("LOOP", "parallel")
    n0, o = np.zeros(1, np.int64), np.zeros(6, np.int64)
    assert list(run(seq, "order", [n0, o])[1]) == [0, 1, 2, 3, 4, 5]
    assert list(run(par, "order", [n0, o])[1]) == [5, 4, 3, 2, 1, 0]
    # A loop-carried dependence wrongly marked parallel computes something else.
    a = np.arange(1, 7, dtype=np.float32)
    (prefix,) = run(seq, "scan", [a])
    (wrong,) = run(par, "scan", [a])
    assert list(prefix) == [1, 3, 6, 10, 15, 21]
    assert list(wrong) == [1, 3, 5, 7, 9, 11]


# -- dyn_index ---------------------------------------------------------------------------------

GATHER = '''module "g"
stage loop
kernel @gather(%T: buf<5 x f32>, %I: buf<4 x i32>, %O: buf<4 x f32>) {
  for %j = 0 to 4 {
    %v = load %I[%j] : i32
    %d = dyn_index %v {bound = 5} : index
    %x = load %T[%d] : f32
    store %x, %O[%j]
  }
}
'''


def test_dyn_index_counts_negative_values_from_the_end():
    T = np.arange(10, 15, dtype=np.float32)
    (o,) = run(GATHER, "gather", [T, np.array([0, 4, -1, -5], np.int32), f32(4)])
    assert list(o) == [10, 14, 14, 10]


@pytest.mark.parametrize("bad", [5, -6, 2**31 - 1])
def test_dyn_index_out_of_range_is_a_located_diagnostic(bad):
    with pytest.raises(Diagnostic) as e:
        run(GATHER, "gather", [f32(5), np.array([0, 1, bad, 2], np.int32), f32(4)])
    assert f"'dyn_index' of %v = {bad} is outside [-5, 5)" in e.value.message
    assert (e.value.loc.line, e.value.loc.col) == (6, 10)  # at the op name


# -- memory: arena and poison -----------------------------------------------------------------

ARENA = '''module "a"
stage loop
buffer @a : buf<16 x f32> {offset = 0}
buffer @b : buf<16 x f32> {offset = 0}
buffer @c : buf<16 x f32> {offset = 64}
buffer @d : buf<8 x f32> {offset = 32}
buffer @own : buf<16 x f32>
func @main(%ra: buf<16 x f32>, %rb: buf<16 x f32>, %rc: buf<16 x f32>) attributes {outputs = 3} {
'entry:
  call @fill(@a, 1.5)
  call @fill(@c, 2.5)
  call @copy(@b, %rb)
  call @copy(@c, %rc)
  call @fill(@d, 3.5)
  call @copy(@a, %ra)
  return
}
kernel @fill(%X: buf<16 x f32>, %v: f32) {
  for %i = 0 to 16 {
    store %v, %X[%i]
  }
}
kernel @copy(%X: buf<16 x f32>, %Y: buf<16 x f32>) {
  for %i = 0 to 16 {
    %v = load %X[%i] : f32
    store %v, %Y[%i]
  }
}
'''


def _arena_module() -> str:
    # @fill takes a 16-element buffer; @d (8 elements) gets its own 8-element fill.
    return ARENA.replace("  call @fill(@d, 3.5)\n", "  call @fill2(@d, 3.5)\n") + '''kernel @fill2(%X: buf<8 x f32>, %v: f32) {
  for %i = 0 to 8 {
    store %v, %X[%i]
  }
}
'''


def test_buffers_at_the_same_offset_share_memory_and_others_do_not():
    text = _arena_module().replace("call @fill(@a, 1.5)", "call @fill(@a, 1.5)")
    text = text.replace(", 1.5)", ", %one)").replace(", 2.5)", ", %two)").replace(", 3.5)", ", %three)")
    text = text.replace("'entry:\n", "'entry:\n  %one = const 1.5 : f32\n  %two = const 2.5 : f32\n"
                        "  %three = const 3.5 : f32\n")
    m = module(text)
    interp = LoopInterpreter(m)
    ra, rb, rc = interp.run("main", [])
    assert list(rb) == [1.5] * 16         # @b aliases @a (same offset)
    assert list(rc) == [2.5] * 16         # @c (bytes 64..127) is apart from @a
    assert list(ra) == [1.5] * 8 + [3.5] * 8  # @d (bytes 32..63) overlaps @a's second half
    mem = interp.memory
    assert np.shares_memory(mem.buffer("a"), mem.buffer("b"))
    assert not np.shares_memory(mem.buffer("a"), mem.buffer("c"))
    assert not np.shares_memory(mem.buffer("own"), mem.buffer("a"))
    assert mem.arena.nbytes == 128


POISON = '''module "p"
stage loop
buffer @t : buf<4 x f32>
buffer @u : buf<4 x i32> {offset = 0}
func @main(%o: buf<4 x f32>, %i: buf<4 x i32>) attributes {outputs = 2} {
'entry:
  call @half(%o)
  call @copy(@t, %o)
  call @copyi(@u, %i)
  return
}
kernel @half(%O: buf<4 x f32>) {
  %z = const 0.0 : f32
  for %j = 0 to 2 {
    store %z, %O[%j]
  }
}
kernel @copy(%X: buf<4 x f32>, %Y: buf<4 x f32>) {
  for %j = 2 to 3 {
    %v = load %X[%j] : f32
    store %v, %Y[%j]
  }
}
kernel @copyi(%X: buf<4 x i32>, %Y: buf<4 x i32>) {
  for %j = 0 to 4 {
    %v = load %X[%j] : i32
    store %v, %Y[%j]
  }
}
'''


def test_unwritten_memory_reads_as_poison():
    o, i = run(POISON, "main", [])
    assert list(o[:2]) == [0.0, 0.0]
    # o[2] was copied from the never-written buffer @t, o[3] never written at all
    assert np.isnan(o[2]) and np.isnan(o[3])
    assert o.view(np.uint32)[3] == POISON_F32 and o.view(np.uint32)[2] == POISON_F32
    assert list(i) == [POISON_I32] * 4   # the arena starts poisoned too


def test_memory_is_poisoned_again_for_every_call():
    m = module(POISON)
    interp = LoopInterpreter(m)
    interp.run("main", [])
    interp.memory.buffer("t")[:] = 1.0
    o, _ = interp.run("main", [])
    assert np.isnan(o[2])


# -- errors ----------------------------------------------------------------------------------

OOB = '''module "oob"
stage loop
kernel @k(%n: index, %A: buf<2 x 4 x f32>) {
  %z = const 0.0 : f32
  for %i = 0 to %n {
    store %z, %A[1, 2*%i + 1]
  }
}
'''


def test_out_of_bounds_store_is_a_located_diagnostic():
    (a,) = run(OOB, "k", [np.array(2), f32(2, 4)], check=False)
    assert a[1, 1] == 0 and a[1, 3] == 0
    with pytest.raises(Diagnostic) as e:
        run(OOB, "k", [np.array(3), f32(2, 4)], check=False)
    d = e.value
    assert "'store' %A[1, 2*%i + 1] is out of bounds: subscript #1 (2*%i + 1) is 5, " \
           "outside [0, 4) of %A : buf<2 x 4 x f32>" in d.message
    assert (d.loc.line, d.loc.col) == (6, 5)


def test_out_of_bounds_load_with_a_negative_subscript():
    text = OOB.replace("store %z, %A[1, 2*%i + 1]", "%v = load %A[0, %i - 1] : f32")
    with pytest.raises(Diagnostic, match=r"subscript #1 \(%i - 1\) is -1, outside \[0, 4\)"):
        run(text, "k", [np.array(1), f32(2, 4)], check=False)


def test_constant_global_passed_to_a_writing_kernel_is_refused():
    text = '''module "ro"
stage loop
global @w : buf<2 x f32> = dense<1.0>
kernel @set(%X: buf<2 x f32>) {
  %z = const 0.0 : f32
  store %z, %X[0]
}
func @main() {
'entry:
  call @set(@w)
  return
}
'''
    with pytest.raises(Diagnostic, match="passes @w, a constant global, to parameter %X of @set"):
        run(text, "main", [])


def test_unsupported_stage_and_declarations():
    m = parse_module('module "m"\nstage buffered\n', "<t>")
    with pytest.raises(Diagnostic, match="cannot run a buffered-stage module"):
        LoopInterpreter(m)
    m = parse_module('module "m"\nstage loop\nfunc @f(%x: f32) -> f32\n', "<t>")
    with pytest.raises(Diagnostic, match="only declared"):
        run_function(m, m.lookup("f"), [np.array(1.0, np.float32)])


# -- scalar ops are bit-identical to the graph kernels -----------------------------------------

def _awkward_f32(n: int) -> np.ndarray:
    specials = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45,
                         1.17549435e-38, 3.4028235e38, -3.4028235e38, 88.72, -103.9, 0.5,
                         1e-8, 9.0, -9.0, 4.0, 20.0], np.float32)
    bits = np.array([0x7FC00001, 0xFFC00000, 0x7FA00000, 0xFF800001], np.uint32).view(np.float32)
    rng = np.random.default_rng(42)
    rnd = (rng.standard_normal(n) * np.exp(rng.uniform(-20, 20, n))).astype(np.float32)
    return np.concatenate([specials, bits, rnd])


UNARY_OPS = ["exp", "tanh", "erf", "sigmoid", "log", "sqrt", "rsqrt", "reciprocal", "neg",
             "abs", "relu", "floor", "ceil"]
BINARY_OPS = ["div", "add", "sub", "mul", "max", "min", "pow", "lt", "eq"]
CASTS = ["f16", "f64", "i32", "i8", "i1", "index"]


def _elementwise_module(op: str, n: int, binary: bool, out: str, attrs: str = "") -> str:
    second = "    %y = load %Y[%i] : f32\n" if binary else ""
    operands = "%x, %y" if binary else "%x"
    return f'''module "e"
stage loop
kernel @k(%X: buf<{n} x f32>, %Y: buf<{n} x f32>, %O: buf<{n} x {out}>) {{
  for %i = 0 to {n} {{
    %x = load %X[%i] : f32
{second}    %r = {op} {operands}{attrs} : {out}
    store %r, %O[%i]
  }}
}}
'''


@pytest.mark.parametrize("op", UNARY_OPS + BINARY_OPS + [f"cast_{t}" for t in CASTS])
def test_scalar_ops_give_the_graph_kernels_bits(op):
    x = _awkward_f32(300)
    y = np.roll(x, 7)
    if op in ("pow",):
        with np.errstate(all="ignore"):
            x, y = np.abs(x) % 10, y % 4
    if op.startswith("cast_"):
        to = op[5:]
        if to not in ("f16", "f64", "i1"):  # out-of-range float -> int is undefined
            x = np.where(np.isfinite(x) & (np.abs(x) < 100), x, np.float32(3.7))
        text = _elementwise_module("cast", len(x), False, to, f" {{to = {to}}}")
        graph_op, attrs, out = "cast", {"to": scalar(to)}, to
    else:
        out = "i1" if op in ("lt", "eq") else "f32"
        text = _elementwise_module(op, len(x), op in BINARY_OPS, out)
        graph_op, attrs = op, {}
    o = np.zeros(len(x), kernels.dtype_of(scalar(out)))
    (got,) = run(text, "k", [x, y, o])
    operands = [x, y] if op in BINARY_OPS else [x]
    (want,) = kernels.evaluate(graph_op, attrs, [TensorType((len(x),), scalar(out))], operands)
    assert got.dtype == want.dtype
    assert got.tobytes() == want.tobytes(), np.flatnonzero(got.view(np.uint8) != want.view(np.uint8))


def test_fast_paths_are_used_for_plain_arithmetic():
    # The self-check found direct numpy scalar arithmetic exact for these here
    # (it falls back to the kernels on a platform where it is not).
    for op in ("add", "sub", "mul", "div", "max", "lt", "select"):
        assert fast_template(op, "f32") is not None, op
    assert fast_template("exp", "f32") is None
    assert fast_template("add", "index") is not None


def test_index_arithmetic_wraps_like_int64():
    text = '''module "w"
stage loop
func @main(%a: index, %b: index) -> (index, index, i1) {
'entry:
  %s = add %a, %b : index
  %m = mul %a, %b : index
  %l = lt %s, %a : index
  return %s, %m, %l
}
'''.replace(": index\n  return", ": i1\n  return")
    s, m, lt = run(text, "main", [np.array(2**63 - 1), np.array(3)])
    assert s.dtype == np.int64 and s == -2**63 + 2
    assert m == (np.array([2**63 - 1], np.int64) * 3)[0]
    assert lt.dtype == np.bool_ and bool(lt)


# -- step limit, calls, structure ------------------------------------------------------------

def test_endless_cfg_loop_is_stopped():
    text = '''module "m"
stage loop
func @main(%x: f32) -> f32 {
'entry:
  br 'spin(%x)
'spin(%y: f32):
  %z = neg %y : f32
  br 'spin(%z)
}
'''
    with pytest.raises(Diagnostic, match="did not finish within 1000 instructions"):
        run(text, "main", [np.array(1.0, np.float32)], max_steps=1000)


def test_step_limit_counts_loop_iterations():
    interp = LoopInterpreter(module(MATMUL))
    interp.run("mm", [f32(4, 5), f32(5, 3), f32(4, 3)])
    # 2 (kernel body: the loop + end) ... counted exactly: 1 + 4*(1 + 3*(3 + 5*6))
    assert interp.steps == 1 + 4 * (1 + 3 * (3 + 5 * 6))
    small = LoopInterpreter(module(MATMUL), max_steps=interp.steps - 1)
    with pytest.raises(Diagnostic, match="did not finish within"):
        small.run("mm", [f32(4, 5), f32(5, 3), f32(4, 3)])


CALLS = '''module "c"
stage loop
func @fact(%n: index) -> index {
'entry:
  %one = const 1 : index
  %done = le %n, %one : i1
  cond_br %done, 'base, 'rec
'base:
  return %one
'rec:
  %m = sub %n, %one : index
  %r = call @fact(%m) : index
  %p = mul %n, %r : index
  return %p
}
func @scale(%x: f32, %k: f32) -> f32 {
'entry:
  %y = mul %x, %k : f32
  return %y
}
kernel @apply(%A: buf<3 x f32>, %k: f32) {
  for %i = 0 to 3 {
    %a = load %A[%i] : f32
    %b = call @scale(%a, %k) : f32
    store %b, %A[%i]
  }
}
func @main(%x: buf<3 x f32>, %n: index, %o: buf<3 x f32>) -> (index, f32) attributes {outputs = 1} {
'entry:
  %k = const 2.0 : f32
  call @copy(%x, %o)
  call @apply(%o, %k)
  call @apply(%o, %k)
  %f = call @fact(%n) : index
  %z = const 0 : index
  br 'loop(%z, %k)
'loop(%i: index, %acc: f32):
  %three = const 3 : index
  %more = lt %i, %three : i1
  cond_br %more, 'body, 'exit(%acc)
'body:
  %d = dyn_index %i {bound = 3} : index
  %v = load %o[%d] : f32
  %acc2 = add %acc, %v : f32
  %one = const 1 : index
  %i2 = add %i, %one : index
  br 'loop(%i2, %acc2)
'exit(%r: f32):
  return %f, %r
}
kernel @copy(%X: buf<3 x f32>, %Y: buf<3 x f32>) {
  for %i = 0 to 3 {
    %v = load %X[%i] : f32
    store %v, %Y[%i]
  }
  return
}
'''


def test_calls_between_funcs_and_kernels():
    x = np.array([1.0, 2.0, 3.0], np.float32)
    o, f, r = run(CALLS, "main", [x, np.array(5)])
    assert list(o) == [4.0, 8.0, 12.0]            # buffers by reference
    assert f.dtype == np.int64 and f == 120         # recursion, index results
    assert r.dtype == np.float32 and r == 2.0 + 4 + 8 + 12  # block arguments
    assert list(x) == [1.0, 2.0, 3.0]


def test_unbounded_recursion_is_a_diagnostic():
    text = CALLS.replace("%done = le %n, %one : i1", "%done = lt %n, %one : i1") \
        .replace("%m = sub %n, %one : index", "%m = add %n, %one : index")
    with pytest.raises(Diagnostic, match="calls nested more than") as e:
        run(text, "main", [np.zeros(3, np.float32), np.array(5)])
    assert any("called from here" in note for note, _ in e.value.notes)


def test_deep_loop_nests_beyond_the_inline_depth():
    depth = MAX_INLINE_DEPTH + 5
    vs = [f"%i{d}" for d in range(depth)]
    body = "  " * (depth + 1) + "%one = const 1.0 : f32\n" + "  " * (depth + 1) + \
        f"%c = load %A[{vs[-1]}] : f32\n" + "  " * (depth + 1) + "%s = add %c, %one : f32\n" + \
        "  " * (depth + 1) + f"store %s, %A[{vs[-1]}]\n"
    heads = "".join("  " * (d + 1) + f"for {v} = 0 to 2 {{\n" for d, v in enumerate(vs))
    tails = "".join("  " * (d + 1) + "}\n" for d in reversed(range(depth)))
    text = f'module "d"\nstage loop\nkernel @k(%A: buf<2 x f32>) {{\n{heads}{body}{tails}}}\n'
    (a,) = run(text, "k", [np.zeros(2, np.float32)])
    assert list(a) == [2.0 ** (depth - 1)] * 2


def test_generated_code_is_compiled_once_per_function():
    interp = LoopInterpreter(module(CALLS))
    for _ in range(3):
        interp.run("main", [np.ones(3, np.float32), np.array(3)])
    # main, copy, apply, scale, fact: one generated function each
    assert len([n for n in interp.sources if n.startswith("_f_")]) == 5


def test_kernel_with_an_if_on_a_scalar_parameter_and_select():
    text = '''module "s"
stage loop
kernel @k(%n: index, %A: buf<4 x f32>, %B: buf<4 x f32>) {
  for %i = 0 to 4 {
    %a = load %A[%i] : f32
    %z = const 0.0 : f32
    %pos = gt %a, %z : i1
    %r = select %pos, %a, %z : f32
    if %i < %n {
      store %r, %B[%i]
    } else {
      %m = neg %a : f32
      store %m, %B[%i]
    }
  }
}
'''
    A = np.array([1.0, -2.0, 3.0, -4.0], np.float32)
    (b,) = run(text, "k", [np.array(2), A, np.zeros(4, np.float32)])
    assert list(b) == [1.0, 0.0, -3.0, 4.0]


def test_matmul_speed_is_reported(capsys):
    """Not a benchmark: the 32x32x32 matmul runs 200k instructions quickly."""
    import time
    interp = LoopInterpreter(module(matmul(32, 32, 32)))
    args = [f32(32, 32), f32(32, 32), f32(32, 32)]
    t = time.perf_counter()
    interp.run("mm", args)
    dt = time.perf_counter() - t
    assert interp.steps == 1 + 32 * (1 + 32 * (3 + 32 * 6))
    assert dt < 30
    print(f"{interp.steps / dt / 1e6:.1f}M instructions/s")
    assert math.isfinite(dt)
