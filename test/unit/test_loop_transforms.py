"""Loop transformations (swir.transforms.loops) and the dependence analysis.

Property tests build random small loop nests from a Python model, so the
ground truth is known: which instance pairs touch the same element, in which
order they run before and after a transformation. Two properties:

- soundness: a transformation the library accepts never reorders two
  conflicting accesses (checked against brute-force enumeration of the model);
- numerics: an accepted transformation gives bit-identical results in the
  loop-stage interpreter (which runs a ``parallel`` loop's iterations in
  reverse, so every pair of its iterations runs in the other order).

Targeted cases show that each refusal is required: applied unchecked, the
transformation changes the result.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swir.analysis.dependence import (Lin, _eliminate_equalities, _fourier_motzkin,
                                      carried_dependence, memory_accesses, nest_dependences)
from swir.ir.affine import Expr
from swir.ir.core import Instruction, Module
from swir.parser import parse_module
from swir.printer import print_module
from swir.transforms.loops import (TransformError, fuse_loops, is_loop, loop_iv, mark_parallel,
                                   perfect_nest, reorder_loops, select_loop, select_nest,
                                   split_loop)
from swir.verifier import verify

FAST = settings(max_examples=60, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])
D = 12  # buffer dimension in the random programs


# --------------------------------------------------------------------------
# Running modules
# --------------------------------------------------------------------------

def run(module: Module, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Run @main (attributes {outputs = N}) in the loop-stage interpreter."""
    from swir.interp.run import run_function
    f = module.lookup("main")
    return [np.asarray(x) for x in run_function(module, f, [x.copy() for x in inputs])]


def same_bits(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(x.dtype == y.dtype and x.shape == y.shape
                                    and x.tobytes() == y.tobytes() for x, y in zip(a, b))


def parse(text: str) -> Module:
    m = parse_module(text, "t.swir")
    verify(m)
    return m


def loop(m: Module, name: str, kernel: str | None = None) -> Instruction:
    return select_loop(m, name, kernel)


# --------------------------------------------------------------------------
# Random programs: a model with known semantics, printed as IR
# --------------------------------------------------------------------------

@dataclass
class LoopM:
    name: str
    lb: int
    ub: int
    step: int = 1
    lb_iv: str | None = None  # triangular: lb = that outer loop's variable

    def values(self, env: dict[str, int]) -> range:
        lo = env[self.lb_iv] if self.lb_iv else self.lb
        return range(lo, self.ub, self.step)


@dataclass
class Sub:
    """One subscript: sum(coef * iv) + const, optionally floordiv 2."""
    coefs: dict[str, int]
    const: int
    div2: bool = False

    def eval(self, env: dict[str, int]) -> int:
        v = sum(c * env[n] for n, c in self.coefs.items()) + self.const
        return v // 2 if self.div2 else v

    def text(self) -> str:
        parts = [f"{c}*%{n}" for n, c in self.coefs.items() if c]
        e = " + ".join(parts + [str(self.const)]) if parts else str(self.const)
        return f"({e}) floordiv 2" if self.div2 else e


@dataclass
class StmtM:
    loads: list[tuple[str, tuple[Sub, Sub]]]
    store: tuple[str, tuple[Sub, Sub]]
    scale: float


@dataclass
class NestM:
    loops: list[LoopM]
    stmts: list[StmtM]


@dataclass
class ProgM:
    nests: list[NestM] = field(default_factory=list)

    def text(self) -> str:
        t = f"buf<{D} x {D} x f32>"
        lines = ['module "rand"', "stage loop", "",
                 f"kernel @k(%A: {t}, %B: {t}) {{"]
        names = iter(range(10**6))
        for nest in self.nests:
            depth = 1
            for lp in nest.loops:
                lb = f"%{lp.lb_iv}" if lp.lb_iv else str(lp.lb)
                step = f" step {lp.step}" if lp.step != 1 else ""
                lines.append("  " * depth + f"for %{lp.name} = {lb} to {lp.ub}{step} {{")
                depth += 1
            pad = "  " * depth
            for st_ in nest.stmts:
                vals = []
                for buf, (s0, s1) in st_.loads:
                    v = f"%v{next(names)}"
                    lines.append(f"{pad}{v} = load %{buf}[{s0.text()}, {s1.text()}] : f32")
                    vals.append(v)
                c = f"%c{next(names)}"
                lines.append(f"{pad}{c} = const {st_.scale!r} : f32")
                acc = f"%m{next(names)}"
                lines.append(f"{pad}{acc} = mul {vals[0]}, {c} : f32")
                for v in vals[1:]:
                    nxt = f"%s{next(names)}"
                    lines.append(f"{pad}{nxt} = add {acc}, {v} : f32")
                    acc = nxt
                buf, (s0, s1) = st_.store
                lines.append(f"{pad}store {acc}, %{buf}[{s0.text()}, {s1.text()}]")
            for _ in nest.loops:
                depth -= 1
                lines.append("  " * depth + "}")
        lines.append("}")
        lines += ["", f"func @main(%IA: {t}, %IB: {t}, %A: {t}, %B: {t}) attributes "
                      "{outputs = 2} {",
                  "'entry:",
                  "  call @init(%IA, %A)", "  call @init(%IB, %B)",
                  "  call @k(%A, %B)", "  return", "}", "",
                  f"kernel @init(%I: {t}, %O: {t}) {{",
                  f"  for %r = 0 to {D} {{", f"    for %q = 0 to {D} {{",
                  "      %x = load %I[%r, %q] : f32", "      store %x, %O[%r, %q]",
                  "    }", "  }", "}", ""]
        return "\n".join(lines)

    # -- brute force: every access instance in execution order ---------------
    def trace(self) -> list[tuple[tuple, str, tuple[int, int], bool, dict]]:
        """(order key, buffer, element, is_write, iteration env) per access instance."""
        out = []
        for n_idx, nest in enumerate(self.nests):
            def rec(level: int, env: dict[str, int], nest: NestM = nest, n_idx: int = n_idx
                    ) -> None:
                if level == len(nest.loops):
                    for s_idx, st_ in enumerate(nest.stmts):
                        for a_idx, (buf, subs) in enumerate(st_.loads):
                            out.append(((n_idx, s_idx, a_idx), buf,
                                        tuple(s.eval(env) for s in subs), False, dict(env)))
                        buf, subs = st_.store
                        out.append(((n_idx, s_idx, 99), buf, tuple(s.eval(env) for s in subs),
                                    True, dict(env)))
                    return
                lp = nest.loops[level]
                for v in lp.values(env):
                    env[lp.name] = v
                    rec(level + 1, env)
                del env[lp.name]
            rec(0, {})
        return out


def conflicts(trace):
    """Pairs (earlier, later) of instances that touch one element, one writing."""
    by_elem: dict = {}
    for pos, (key, buf, elem, w, env) in enumerate(trace):
        by_elem.setdefault((buf, elem), []).append((pos, key, w, env))
    for insts in by_elem.values():
        for x, y in itertools.combinations(insts, 2):
            if x[2] or y[2]:
                yield x, y


def fit(sub: Sub, loops: list[LoopM]) -> Sub:
    """Shift (and if needed shrink) a subscript so it stays in [0, D)."""
    coefs = dict(sub.coefs)
    while True:
        lo = hi = 0
        for lp in loops:
            c = coefs.get(lp.name, 0)
            vmin, vmax = (lp.lb if lp.lb_iv is None else 0), lp.ub - 1
            lo += min(c * vmin, c * vmax)
            hi += max(c * vmin, c * vmax)
        if hi - lo < D:
            break
        name = next(n for n, c in coefs.items() if c)
        coefs[name] = 0
    const = min(max(sub.const, -lo), D - 1 - hi)
    return Sub(coefs, const, sub.div2)


@st.composite
def nests(draw, names: list[str], depth: int | None = None, first: LoopM | None = None,
          triangular: bool = True) -> NestM:
    depth = depth or draw(st.integers(1, len(names)))
    loops: list[LoopM] = []
    for d in range(depth):
        if d == 0 and first is not None:
            loops.append(LoopM(names[0], first.lb, first.ub, first.step))
            continue
        lb = draw(st.integers(0, 1))
        ub = lb + draw(st.integers(1, 4))
        step = draw(st.sampled_from([1, 1, 1, 2]))
        lb_iv = None
        if triangular and d > 0 and draw(st.integers(0, 4)) == 0 \
                and loops[d - 1].ub <= ub and loops[d - 1].step == 1:
            lb_iv = loops[d - 1].name
        loops.append(LoopM(names[d], lb, ub, step, lb_iv))

    def sub() -> Sub:
        coefs = {lp.name: draw(st.sampled_from([-1, 0, 0, 1, 1, 2])) for lp in loops}
        return fit(Sub(coefs, draw(st.integers(0, D - 1)), draw(st.integers(0, 9)) == 0), loops)

    stmts = []
    for _ in range(draw(st.integers(1, 3))):
        loads = [(draw(st.sampled_from("AB")), (sub(), sub()))
                 for _ in range(draw(st.integers(1, 2)))]
        store = (draw(st.sampled_from("AB")), (sub(), sub()))
        stmts.append(StmtM(loads, store, draw(st.sampled_from([0.5, 1.5, -2.0, 3.0]))))
    return NestM(loops, stmts)


def inputs(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((D, D)).astype(np.float32) for _ in range(2)]


def kernel_nest(m: Module, index: int = 0) -> Instruction:
    k = m.lookup("k")
    return [i for i in k.body.blocks[0].instructions if is_loop(i)][index]


# --------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------

@FAST
@given(nests(["i", "j", "k"]), st.integers(1, 5), st.integers(0, 2))
def test_split_never_changes_the_result(nest, factor, which):
    prog = ProgM([nest])
    m = parse(prog.text())
    before = run(m, inputs())
    target = perfect_nest(kernel_nest(m))
    lp = target[min(which, len(target) - 1)]
    try:
        split_loop(lp, factor)
    except TransformError as e:  # the one refusal: a symbolic trip count with a step
        assert lp.attrs.get("step", 1) != 1 and "is not a constant" in e.message
        return
    verify(m)
    assert same_bits(run(m, inputs()), before), print_module(m)


@FAST
@given(nests(["i", "j", "k"], depth=None), st.randoms(use_true_random=False))
def test_accepted_reorders_keep_every_dependence(nest, rnd):
    prog = ProgM([nest])
    if len(nest.loops) < 2:
        return
    m = parse(prog.text())
    names = [lp.name for lp in nest.loops]
    order = names[:]
    rnd.shuffle(order)
    legal = all(_order_kept(x, y, lambda env: tuple(env[n] for n in order))
                for x, y in conflicts(prog.trace()))
    bounds_ok = all(lp.lb_iv is None or order.index(lp.lb_iv) < order.index(lp.name)
                    for lp in nest.loops)
    before = run(m, inputs())
    try:
        reorder_loops(kernel_nest(m), order)
    except TransformError:
        return
    assert legal and bounds_ok, f"accepted an illegal reorder to {order}:\n{prog.text()}"
    verify(m)
    assert same_bits(run(m, inputs()), before)


def _order_kept(x, y, newkey) -> bool:
    """x ran before y originally; does it still (same body order within an iteration)?"""
    kx, ky = newkey(x[3]), newkey(y[3])
    if kx != ky:
        return kx < ky
    return True  # same iteration of the nest: the body order is unchanged


@FAST
@given(nests(["i", "j", "k"]), st.integers(0, 2))
def test_accepted_parallel_loops_have_independent_iterations(nest, which):
    prog = ProgM([nest])
    m = parse(prog.text())
    loops = perfect_nest(kernel_nest(m))
    lp = loops[min(which, len(loops) - 1)]
    name = loop_iv(lp).name
    outer = [x.name for x in nest.loops[:nest.loops.index(
        next(x for x in nest.loops if x.name == name))]]
    carried = any(x[3][name] != y[3][name] and all(x[3][o] == y[3][o] for o in outer)
                  for x, y in conflicts(prog.trace()))
    before = run(m, inputs())
    try:
        mark_parallel(lp)
    except TransformError:
        return
    assert not carried, f"accepted parallel %{name} with a carried dependence:\n{prog.text()}"
    verify(m)
    assert same_bits(run(m, inputs()), before)  # now run backwards: still the same


@FAST
@given(st.data())
def test_accepted_fusions_keep_every_dependence(data):
    first = data.draw(nests(["i", "j"], triangular=False))
    second = data.draw(nests(["p", "q"], first=first.loops[0], triangular=False))
    prog = ProgM([first, second])
    m = parse(prog.text())

    def fused_key(t):
        key, env = t[1], t[3]
        outer = env.get("i", env.get("p"))
        return (outer, key[0])  # iteration of the fused loop, then first body before second
    legal = all(fused_key(x) <= fused_key(y) for x, y in conflicts(prog.trace()))
    before = run(m, inputs())
    try:
        fuse_loops(kernel_nest(m, 0), kernel_nest(m, 1))
    except TransformError:
        return
    assert legal, f"accepted an illegal fusion:\n{prog.text()}"
    verify(m)
    assert same_bits(run(m, inputs()), before)


@settings(max_examples=150, deadline=None, database=None)
@given(nests(["i", "j", "k"], triangular=False))
def test_analysis_is_exact_on_uniform_subscripts(nest):
    """With subscripts `iv + c` (or constants), independence is decided exactly:
    a loop the brute force finds free of carried dependences is accepted."""
    for s in nest.stmts:
        for _, subs in s.loads + [s.store]:
            for sub in subs:
                sub.div2 = False
                for n, c in sub.coefs.items():
                    sub.coefs[n] = 1 if c else 0
                nz = [n for n, c in sub.coefs.items() if c]
                for n in nz[1:]:
                    sub.coefs[n] = 0
    nest.stmts = [StmtM(st_.loads, (st_.store[0], tuple(fit(s, nest.loops)
                                                        for s in st_.store[1])), st_.scale)
                  for st_ in nest.stmts]
    for st_ in nest.stmts:
        st_.loads = [(b, tuple(fit(s, nest.loops) for s in subs)) for b, subs in st_.loads]
    prog = ProgM([nest])
    m = parse(prog.text())
    for d, lp in enumerate(perfect_nest(kernel_nest(m))):
        name = loop_iv(lp).name
        outer = [x.name for x in nest.loops[:d]]
        carried = any(x[3][name] != y[3][name] and all(x[3][o] == y[3][o] for o in outer)
                      for x, y in conflicts(prog.trace()))
        assert (carried_dependence(lp) is not None) == carried, prog.text()


# --------------------------------------------------------------------------
# Targeted cases: each refusal is required
# --------------------------------------------------------------------------

MATMUL = """module "mm"
stage loop

kernel @mm(%A: buf<3 x 5 x f32>, %B: buf<5 x 4 x f32>, %C: buf<3 x 4 x f32>) {
  for %x = 0 to 3 {
    for %y = 0 to 4 {
      for %k = 0 to 5 {
        %a = load %A[%x, %k] : f32
        %b = load %B[%k, %y] : f32
        %c = load %C[%x, %y] : f32
        %m = mul %a, %b : f32
        %s = add %c, %m : f32
        store %s, %C[%x, %y]
      }
    }
  }
}

func @main(%A: buf<3 x 5 x f32>, %B: buf<5 x 4 x f32>, %C0: buf<3 x 4 x f32>, %C: buf<3 x 4 x f32>) attributes {outputs = 1} {
'entry:
  call @copy(%C0, %C)
  call @mm(%A, %B, %C)
  return
}

kernel @copy(%I: buf<3 x 4 x f32>, %O: buf<3 x 4 x f32>) {
  for %r = 0 to 3 {
    for %q = 0 to 4 {
      %v = load %I[%r, %q] : f32
      store %v, %O[%r, %q]
    }
  }
}
"""


def matmul_inputs():
    rng = np.random.default_rng(7)
    return [rng.standard_normal(s).astype(np.float32) for s in ((3, 5), (5, 4), (3, 4))]


def test_matmul_reorders_and_parallel_loops():
    m = parse(MATMUL)
    ref = run(m, matmul_inputs())
    a, b, c0 = matmul_inputs()
    np.testing.assert_allclose(ref[0], c0 + a @ b, rtol=1e-5)
    for order in (["x", "k", "y"], ["k", "y", "x"], ["y", "x", "k"], ["k", "x", "y"]):
        m2 = parse(MATMUL)
        reorder_loops(loop(m2, "x"), order)
        verify(m2)
        assert [loop_iv(lp).name for lp in perfect_nest(loop(m2, order[0]))] == order
        # The k order of each C[x, y] sum is kept, so the bits are the same.
        assert same_bits(run(m2, matmul_inputs()), ref)
    m3 = parse(MATMUL)
    mark_parallel(loop(m3, "x"))
    mark_parallel(loop(m3, "y"), workers=4)
    assert loop(m3, "y").opname == "parallel" and loop(m3, "y").attrs["workers"] == 4
    assert same_bits(run(m3, matmul_inputs()), ref)


def test_reduction_loop_is_not_parallel():
    m = parse(MATMUL)
    with pytest.raises(TransformError, match="cannot mark loop %k parallel"):
        mark_parallel(loop(m, "k"))
    dep = carried_dependence(loop(m, "k"))
    assert dep is not None and dep.first.buffer.name == "C"
    # Forced: the interpreter runs parallel iterations backwards, and the
    # floating-point sums change.
    ref = run(parse(MATMUL), matmul_inputs())
    mark_parallel(loop(m, "k"), check=False)
    assert not same_bits(run(m, matmul_inputs()), ref)


SKEW = """module "skew"
stage loop

kernel @skew(%A: buf<6 x 7 x f32>) {
  for %i = 1 to 6 {
    for %j = 0 to 6 {
      %v = load %A[%i - 1, %j + 1] : f32
      %h = const 0.5 : f32
      %w = mul %v, %h : f32
      store %w, %A[%i, %j]
    }
  }
}

func @main(%I: buf<6 x 7 x f32>, %A: buf<6 x 7 x f32>) attributes {outputs = 1} {
'entry:
  call @copy(%I, %A)
  call @skew(%A)
  return
}

kernel @copy(%I: buf<6 x 7 x f32>, %O: buf<6 x 7 x f32>) {
  for %r = 0 to 6 {
    for %q = 0 to 7 {
      %v = load %I[%r, %q] : f32
      store %v, %O[%r, %q]
    }
  }
}
"""


def test_skewed_dependence_forbids_interchange():
    """A[i][j] = A[i-1][j+1]: distance (1, -1); interchanging gives (-1, 1)."""
    m = parse(SKEW)
    deps = nest_dependences(perfect_nest(loop(m, "i")))
    assert any(d.distance == (-1, 1) or d.distance == (1, -1) for d in deps)
    with pytest.raises(TransformError, match="would reverse the dependence"):
        reorder_loops(loop(m, "i"), ["j", "i"])
    x = np.arange(42, dtype=np.float32).reshape(6, 7)
    ref = run(parse(SKEW), [x])
    reorder_loops(loop(m, "i"), ["j", "i"], check=False)
    assert not same_bits(run(m, [x]), ref)
    # %j carries nothing (one row at a time): parallel (run backwards) gives the
    # same bits; %i carries the dependence: forced parallel, the result changes.
    m2 = parse(SKEW)
    mark_parallel(loop(m2, "j"))
    assert same_bits(run(m2, [x]), ref)
    with pytest.raises(TransformError, match="distance 1"):
        mark_parallel(loop(m2, "i"))
    mark_parallel(loop(m2, "i"), check=False)
    assert not same_bits(run(m2, [x]), ref)


FUSE = """module "fuse"
stage loop

kernel @f(%A: buf<9 x f32>, %B: buf<9 x f32>) {
  for %i = 0 to 8 {
    %v = load %B[%i] : f32
    %h = const 2.0 : f32
    %w = mul %v, %h : f32
    store %w, %A[%i]
  }
  for %j = 0 to 8 {
    %u = load %A[%j + OFFSET] : f32
    store %u, %B[%j]
  }
}

func @main(%IA: buf<9 x f32>, %IB: buf<9 x f32>, %A: buf<9 x f32>, %B: buf<9 x f32>) attributes {outputs = 2} {
'entry:
  call @copy(%IA, %A)
  call @copy(%IB, %B)
  call @f(%A, %B)
  return
}

kernel @copy(%I: buf<9 x f32>, %O: buf<9 x f32>) {
  for %r = 0 to 9 {
    %v = load %I[%r] : f32
    store %v, %O[%r]
  }
}
"""


def fuse_inputs():
    return [np.arange(9, dtype=np.float32), np.arange(9, dtype=np.float32) * -1]


def test_fusion_reading_a_later_write_is_refused():
    text = FUSE.replace("%j + OFFSET", "%j + 1")
    m = parse(text)
    with pytest.raises(TransformError, match="later iteration of the first"):
        fuse_loops(loop(m, "i"), loop(m, "j"))
    ref = run(parse(text), fuse_inputs())
    fuse_loops(loop(m, "i"), loop(m, "j"), check=False)
    assert not same_bits(run(m, fuse_inputs()), ref)


def test_fusion_reading_the_same_or_an_earlier_write_is_accepted():
    for off in ("0", "- 1"):
        text = FUSE.replace("%j + OFFSET", f"%j {off}" if off != "0" else "%j")
        text = text.replace("%A[%j - 1]", "%A[%j - 1]")
        if off == "- 1":  # stay in bounds: start the loops at 1
            text = text.replace("for %i = 0 to 8", "for %i = 1 to 8").replace(
                "for %j = 0 to 8", "for %j = 1 to 8")
        m = parse(text)
        ref = run(parse(text), fuse_inputs())
        fused = fuse_loops(loop(m, "i"), loop(m, "j"))
        verify(m)
        assert len(fused.regions[0].blocks[0].instructions) == 6
        assert same_bits(run(m, fuse_inputs()), ref)


def test_fusion_refuses_different_bounds_and_gaps():
    text = FUSE.replace("%j + OFFSET", "%j").replace("for %j = 0 to 8", "for %j = 0 to 7")
    m = parse(text)
    with pytest.raises(TransformError, match="bounds differ"):
        fuse_loops(loop(m, "i"), loop(m, "j"))
    with pytest.raises(TransformError, match="right after"):
        fuse_loops(loop(m, "j"), loop(m, "i"))


# --------------------------------------------------------------------------
# split: shapes of the result
# --------------------------------------------------------------------------

def _one_loop(ub: str, step: int = 1, lb: str = "0") -> Module:
    s = f" step {step}" if step != 1 else ""
    return parse(f"""module "m"
stage loop
kernel @k(%X: buf<1100 x f32>) {{
  for %y = {lb} to {ub}{s} {{
    %z = const 0.0 : f32
    store %z, %X[%y]
  }}
}}
""")


def test_split_swtvm_example_is_canonical():
    m = _one_loop("1024")
    outer, inner = split_loop(loop(m, "y"), 128)
    text = print_module(m)
    assert "for %yo = 0 to 8 {" in text and "for %yi = 0 to 128 {" in text
    assert "store %z, %X[128*%yo + %yi]" in text
    assert outer.regions[0].blocks[0].instructions == [inner]


@pytest.mark.parametrize("lb,ub,step,factor", [
    (0, 1000, 1, 64), (0, 7, 1, 3), (2, 100, 3, 8), (5, 6, 1, 4), (0, 12, 2, 3), (3, 3, 1, 2),
    (0, 10, 1, 10), (0, 10, 1, 1)])
def test_split_iterates_exactly_the_original_values(lb, ub, step, factor):
    m = _one_loop(str(ub), step, str(lb))
    outer, inner = split_loop(loop(m, "y"), factor)
    verify(m)
    seen = []
    env: dict = {}
    yo, yi = loop_iv(outer), loop_iv(inner)
    sub = inner.regions[0].blocks[0].instructions[-1].args[1].indices[0]
    for a in range(Expr.of(outer.args[0]).const, Expr.of(outer.args[1]).evaluate(env)):
        env[yo] = a
        for b in range(Expr.of(inner.args[0]).evaluate(env), Expr.of(inner.args[1]).evaluate(env)):
            env[yi] = b
            seen.append(sub.evaluate(env))
    assert seen == list(range(lb, ub, step))


def test_split_refusals():
    m = _one_loop("16")
    for bad in (0, -2, 1.5, True):
        with pytest.raises(TransformError, match="split factor must be an integer >= 1"):
            split_loop(loop(m, "y"), bad)
    # A value use of %y with a lower bound that index arithmetic cannot compute.
    m2 = parse("""module "m"
stage loop
kernel @k(%X: buf<20 x f32>) {
  for %t = 0 to 4 {
    for %y = %t floordiv 2 to 10 {
      %d = dyn_index %y {bound = 20} : index
      %z = const 0.0 : f32
      store %z, %X[%d]
    }
  }
}
""")
    with pytest.raises(TransformError, match="used as a value"):
        split_loop(loop(m2, "y"), 4)
    assert "for %y = %t floordiv 2 to 10" in print_module(m2)  # untouched
    # A symbolic trip count is split when the step is 1, refused otherwise.
    m3 = parse("""module "m"
stage loop
kernel @k(%X: buf<8 x 8 x f32>) {
  for %i = 0 to 8 {
    for %j = %i to 8 {
      %z = const 0.0 : f32
      store %z, %X[%i, 7 - %j]
    }
    for %q = %i to 8 step 2 {
      %z = const 0.0 : f32
      store %z, %X[%i, 7 - %q]
    }
  }
}
""")
    split_loop(loop(m3, "j"), 3)
    verify(m3)
    assert "for %ji = 0 to min(3, -%i - 3*%jo + 8) {" in print_module(m3)
    with pytest.raises(TransformError, match=r"trip count \(8 - %i\) ceildiv 2 is not a "
                                             "constant"):
        split_loop(loop(m3, "q"), 3)


def test_split_names_are_unique_and_explicit_names_win():
    m = _one_loop("64")
    outer, inner = split_loop(loop(m, "y"), 8, outer_name="tile", inner_name="y")
    assert (loop_iv(outer).name, loop_iv(inner).name) == ("tile", "y")
    o2, i2 = split_loop(inner, 2)
    assert (loop_iv(o2).name, loop_iv(i2).name) == ("yo", "yi")
    o3, i3 = split_loop(i2, 1)
    assert (loop_iv(o3).name, loop_iv(i3).name) == ("yio", "yii")
    o4, _ = split_loop(o3, 1)
    assert loop_iv(o4).name == "yioo"
    verify(m)


# --------------------------------------------------------------------------
# reorder: structure checks
# --------------------------------------------------------------------------

def test_reorder_refuses_imperfect_nests_bad_orders_and_bound_dependences():
    m = parse("""module "m"
stage loop
kernel @k(%X: buf<8 x 8 x f32>) {
  for %i = 0 to 8 {
    for %j = %i to 8 {
      %z = const 0.0 : f32
      store %z, %X[%i, %j]
    }
  }
  for %a = 0 to 8 {
    %z = const 1.0 : f32
    for %b = 0 to 8 {
      store %z, %X[%a, %b]
    }
  }
}
""")
    with pytest.raises(TransformError, match="bounds of %j use %i"):
        reorder_loops(loop(m, "i"), ["j", "i"])
    with pytest.raises(TransformError, match="not a perfect nest"):
        reorder_loops(loop(m, "a"), ["b", "a"])
    for order in (["i"] * 2, ["i", "q"], ["i", "j", "i"]):
        with pytest.raises(TransformError):
            reorder_loops(loop(m, "i"), order)
    # The identity order is accepted and changes nothing.
    assert reorder_loops(loop(m, "i"), ["%i", loop_iv(loop(m, "j"))]) == \
        [loop(m, "i"), loop(m, "j")]


def test_reorder_keeps_parallel_loops_free_of_carried_dependences():
    """A parallel loop must not carry a dependence after the permutation: with
    distance (0, 1), moving %j outside the parallel %i is fine; with distance
    (1, 1), moving the parallel %j outside %i makes it carry (1, 1)."""
    m = parse("""module "m"
stage loop
kernel @k(%X: buf<8 x 9 x f32>) {
  parallel %i = 0 to 8 {
    for %j = 0 to 8 {
      %v = load %X[%i, %j + 1] : f32
      store %v, %X[%i, %j]
    }
  }
}
""")
    reorder_loops(loop(m, "i"), ["j", "i"])  # j carries; i stays independent inside it
    m2 = parse("""module "m"
stage loop
kernel @k(%X: buf<9 x 9 x f32>) {
  for %i = 0 to 8 {
    parallel %j = 0 to 8 {
      %v = load %X[%i + 1, %j + 1] : f32
      store %v, %X[%i, %j]
    }
  }
}
""")
    with pytest.raises(TransformError, match="parallel loop %j would carry"):
        reorder_loops(loop(m2, "i"), ["j", "i"])


# --------------------------------------------------------------------------
# parallel: conservative cases
# --------------------------------------------------------------------------

def _par(body: str, extra: str = "", pre: str = "") -> Module:
    return parse(f"""module "m"
stage loop
global @g : buf<8 x f32> = dense<1.0>
kernel @k(%X: buf<8 x f32>, %Y: buf<8 x f32>{extra}) {{
{pre}  for %i = 0 to 8 {{
{body}
  }}
}}
""")


def test_parallel_aliasing_rules():
    # Distinct buffers never overlap; constant globals are never written.
    mark_parallel(loop(_par("    %v = load %X[0] : f32\n    store %v, %Y[%i]"), "i"))
    mark_parallel(loop(_par("    %v = load @g[7 - %i] : f32\n    store %v, %X[%i]"), "i"))
    # The same buffer, elements apart by parity: exact (GCD test).
    mark_parallel(loop(_par(
        "    if 2*%i + 1 < 8 {\n      %v = load %X[2*%i + 1] : f32\n      store %v, %X[2*%i]\n    }"),
        "i"))
    # Data-dependent subscripts (dyn_index) on the same buffer: refused.
    m = _par("    %v = load %Y[%i] : f32\n    %c = cast %v {to = i32} : i32\n"
             "    %d = dyn_index %c {bound = 8} : index\n    store %v, %X[%d]")
    with pytest.raises(TransformError, match="different iterations"):
        mark_parallel(loop(m, "i"))
    # ... but a dyn_index defined outside the loop is one element for the whole loop.
    m = _par("    %v = load %X[%d] : f32\n    store %v, %X[%i]\n    store %v, %Y[%d]",
             pre="  %d = dyn_index %n {bound = 8} : index\n", extra=", %n: i32")
    with pytest.raises(TransformError):  # X[d] is read by all, written by iteration d
        mark_parallel(loop(m, "i"))
    m = _par("    %v = load %X[%d] : f32\n    store %v, %Y[%i]",
             pre="  %d = dyn_index %n {bound = 8} : index\n", extra=", %n: i32")
    mark_parallel(loop(m, "i"))


def test_parallel_guards_and_calls():
    # Guarded halves never meet: X[0..3] written, X[4..7] read (the else branch
    # gets the negated guard).
    mark_parallel(loop(_par(
        "    if %i < 4 {\n      %z = const 0.0 : f32\n      store %z, %X[%i]\n"
        "    } else {\n      %v = load %X[%i] : f32\n      store %v, %Y[%i]\n    }"), "i"))
    # ... but here they do: X[i - 4] for i >= 4 is what iteration i - 4 wrote.
    with pytest.raises(TransformError):
        mark_parallel(loop(_par(
            "    if %i < 4 {\n      %z = const 0.0 : f32\n      store %z, %X[%i]\n"
            "    } else {\n      %v = load %X[%i - 4] : f32\n      store %v, %Y[%i]\n    }"),
            "i"))
    # An op with unknown effects (a call) is refused.
    m = parse("""module "m"
stage loop
kernel @k(%X: buf<8 x f32>) {
  for %i = 0 to 8 {
    call @h(%X)
  }
}
kernel @h(%X: buf<8 x f32>) {
}
""")
    with pytest.raises(TransformError, match="does not model"):
        mark_parallel(loop(m, "i"))


def test_parallel_ldm_buffer_allocated_per_iteration():
    text = """module "m"
stage buffered
kernel @k(%X: buf<8 x 4 x f32>) {
  ALLOC_OUT
  for %i = 0 to 8 {
    ALLOC_IN
    copy_in %X[%i, 0 : 4] -> %L
    for %j = 0 to 4 {
      %v = load %L[%j] : f32
      %w = add %v, %v : f32
      store %w, %L[%j]
    }
    copy_out %L -> %X[%i, 0 : 4]
  }
}
"""
    alloc = "%L = ldm_alloc : ldm<4 x f32>"
    m = parse(text.replace("ALLOC_OUT", "").replace("ALLOC_IN", alloc))
    mark_parallel(loop(m, "i"))  # a fresh LDM buffer in each iteration
    mark_parallel(loop(m, "j"))  # element j only in iteration j
    m = parse(text.replace("ALLOC_OUT", alloc).replace("ALLOC_IN", ""))
    with pytest.raises(TransformError, match="cannot mark loop %i parallel"):
        mark_parallel(loop(m, "i"))  # one LDM buffer shared by all iterations


# --------------------------------------------------------------------------
# loop selection (the passes' options)
# --------------------------------------------------------------------------

def test_select_loop_and_nest():
    m = parse("""module "m"
stage loop
kernel @a(%X: buf<4 x 4 x f32>) {
  for %i = 0 to 4 {
    for %j = 0 to 4 {
      %z = const 0.0 : f32
      store %z, %X[%i, %j]
    }
  }
}
kernel @b(%X: buf<4 x 4 x f32>) {
  for %i = 0 to 4 {
    for %j = 0 to 4 {
      %z = const 0.0 : f32
      store %z, %X[%j, %i]
    }
  }
  for %k = 0 to 4 {
    %z = const 1.0 : f32
    store %z, %X[%k, 0]
  }
  for %k = 0 to 2 {
    %z = const 1.0 : f32
    store %z, %X[0, %k]
  }
}
""")
    with pytest.raises(TransformError, match="ambiguous: it names 2 loops in 2 functions"):
        select_loop(m, "i")
    assert select_loop(m, "i", "a").function.name == "a"
    assert select_loop(m, "%i", "@b").function.name == "b"
    with pytest.raises(TransformError, match="ambiguous: it names 2 loops in @b"):
        select_loop(m, "k")
    with pytest.raises(TransformError, match="no loop %q"):
        select_loop(m, "q")
    with pytest.raises(TransformError, match="no function or kernel @c"):
        select_loop(m, "i", "c")
    with pytest.raises(TransformError, match="2 loop nests match"):
        select_nest(m, ["j", "i"])
    assert select_nest(m, ["j", "i"], "b") is select_loop(m, "i", "b")


# --------------------------------------------------------------------------
# the integer solver
# --------------------------------------------------------------------------

def test_solver_gcd_and_euclid_steps():
    # 2x - 2y == 1: no integer solution (GCD test).
    assert _eliminate_equalities(2, [Lin({0: 2, 1: -2}, -1)], []) is None
    # 6x + 10y == 4: (x, y) = (4 - 5t, 3t - 2), found by Euclid steps; none with
    # 0 <= x, y <= 3, one with -5 <= x, y <= 5.
    eq = Lin({0: 6, 1: 10}, -4)

    def box(lo, hi):
        return [Lin({0: 1}, -lo), Lin({0: -1}, hi), Lin({1: 1}, -lo), Lin({1: -1}, hi)]
    red = _eliminate_equalities(2, [eq], box(0, 3))
    assert red is not None and not _fourier_motzkin(red.ineqs)
    red = _eliminate_equalities(2, [eq], box(-5, 5))
    assert red is not None and _fourier_motzkin(red.ineqs)


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3), st.integers(-6, 6)),
                min_size=1, max_size=3),
       st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3), st.integers(-6, 6)),
                max_size=3))
def test_solver_never_misses_a_solution(eqs, ineqs):
    """Soundness of the decision procedure: whenever it says "no integer
    solution", brute force over a box finds none."""
    box = [Lin({0: 1}, 4), Lin({0: -1}, 4), Lin({1: 1}, 4), Lin({1: -1}, 4)]
    E = [Lin({0: a, 1: b}, c) for a, b, c in eqs]
    I = [Lin({0: a, 1: b}, c) for a, b, c in ineqs] + box
    red = _eliminate_equalities(2, E, I)
    says = red is not None and _fourier_motzkin(red.ineqs)
    brute = any(all(a * x + b * y + c == 0 for a, b, c in eqs)
                and all(a * x + b * y + c >= 0 for a, b, c in ineqs)
                for x in range(-4, 5) for y in range(-4, 5))
    assert says or not brute


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3), st.integers(-3, 3),
                          st.integers(-6, 6)), min_size=1, max_size=6))
def test_solver_kept_answers_are_the_eliminations(ineqs):
    """_fourier_motzkin keeps its answers by the system's value (issue 25):
    asked again, with each form's terms in another order, it answers as the
    elimination run afresh does."""
    from swir.analysis.dependence import _eliminate_inequalities
    forward = [Lin({0: a, 1: b, 2: c}, k) for a, b, c, k in ineqs]
    backward = [Lin({2: c, 1: b, 0: a}, k) for a, b, c, k in ineqs]
    fresh = _eliminate_inequalities(forward, 400)
    assert _fourier_motzkin(forward) == fresh
    assert _fourier_motzkin(backward) == fresh


def test_memory_accesses_lists_reads_and_writes():
    m = parse(MATMUL)
    accs = memory_accesses(loop(m, "x"))
    assert [(a.inst.opname, a.buffer.name, a.is_write) for a in accs] == [
        ("load", "A", False), ("load", "B", False), ("load", "C", False), ("store", "C", True)]
    assert [loop_iv(lp).name for lp in accs[0].loops] == ["x", "y", "k"]
