"""-fuse and the lowering of fused groups, checked numerically.

Each case is a small graph function. It runs in the graph interpreter as
written (the reference), after -fuse (the interpreter runs a fused group op
by op: the grouping must not change the graph's meaning), and lowered after
-fuse through -lower-loops, -ldm-plan and -insert-dma in the dma-stage
interpreter (one kernel per group, with the epilogue and the inlined
prologue). The case says how many kernels the fused module has at the loop
stage (-insert-dma later splits a kernel into one CPE kernel per nest); the static
DMA count of the fused module is never above the unfused one's (-fuse
measures each group and keeps only those that do not move more).

Tolerance for the lowered run: rtol 1e-5 / atol 1e-6 in f32. The graph
kernels of conv, matmul and batch_norm accumulate or compute in f64 and
round once; the kernels sum in f32 in loop order, as the C does.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from swir.costmodel.traffic import dma_traffic
from swir.kernels import dtype_of
from swir.interp.run import run_function
from swir.ir.core import Module
from swir.parser import parse_module
from swir.passes import pass_class
from swir.passes.manager import PassManager
from swir.printer import print_module
from swir.verifier import verify

LOWER = ["lower-loops", "ldm-plan", "insert-dma"]

HEADER = 'module "m"\nstage graph\n'
CASES = {
    # name: (function text, kernels after -fuse)
    "conv_bias_bn_relu": ("""
func @main(%x: <1 x 4 x 6 x 6 x f32>, %w: <8 x 4 x 3 x 3 x f32>, %b: <8 x f32>, %s: <8 x f32>, %m: <8 x f32>, %v: <8 x f32>) -> <1 x 8 x 6 x 6 x f32> {
'entry:
  %c = conv2d %x, %w, %b {pad = [1, 1, 1, 1]} : <1 x 8 x 6 x 6 x f32>
  %n = batch_norm %c, %s, %b, %m, %v : <1 x 8 x 6 x 6 x f32>
  %y = relu %n : <1 x 8 x 6 x 6 x f32>
  return %y
}""", 1),
    "residual": ("""
func @main(%x: <1 x 8 x 4 x 4 x f32>, %w: <8 x 8 x 1 x 1 x f32>) -> <1 x 8 x 4 x 4 x f32> {
'entry:
  %c = conv2d %x, %w : <1 x 8 x 4 x 4 x f32>
  %a = add %c, %x : <1 x 8 x 4 x 4 x f32>
  %y = relu %a : <1 x 8 x 4 x 4 x f32>
  return %y
}""", 1),
    "matmul_bias_gelu": ("""
func @main(%x: <4 x 16 x f32>, %w: <16 x 24 x f32>, %b: <24 x f32>) -> <4 x 24 x f32> {
'entry:
  %m = matmul %x, %w : <4 x 24 x f32>
  %a = add %m, %b : <4 x 24 x f32>
  %g = gelu %a : <4 x 24 x f32>
  return %g
}""", 1),
    # An unpadded pool: before a padded one, -fuse now declines the relu
    # (its traffic check: the unfused pool reads its input in place, the
    # padding filled in LDM, while the fused one writes a padded copy).
    "relu_max_pool": ("""
func @main(%x: <1 x 3 x 6 x 6 x f32>) -> <1 x 3 x 3 x 3 x f32> {
'entry:
  %r = relu %x : <1 x 3 x 6 x 6 x f32>
  %p = max_pool2d %r {kernel = [2, 2], stride = [2, 2]} : <1 x 3 x 3 x 3 x f32>
  return %p
}""", 1),
    "scaled_masked_softmax": ("""
func @main(%s: <2 x 4 x 8 x f32>, %k: <1 x 1 x 8 x f32>) -> <2 x 4 x 8 x f32> {
'entry:
  %c = const dense<0.125> : <f32>
  %a = mul %s, %c : <2 x 4 x 8 x f32>
  %b = add %a, %k : <2 x 4 x 8 x f32>
  %p = softmax %b {axis = -1} : <2 x 4 x 8 x f32>
  return %p
}""", 1),
    "residual_layer_norm": ("""
func @main(%x: <4 x 16 x f32>, %r: <4 x 16 x f32>, %g: <16 x f32>, %b: <16 x f32>) -> <4 x 16 x f32> {
'entry:
  %a = add %x, %r : <4 x 16 x f32>
  %n = layer_norm %a, %g, %b {axis = -1} : <4 x 16 x f32>
  return %n
}""", 1),
    "transpose_sum": ("""
func @main(%x: <3 x 5 x 4 x f32>) -> <4 x 3 x f32> {
'entry:
  %t = transpose %x {perm = [2, 0, 1]} : <4 x 3 x 5 x f32>
  %e = exp %t : <4 x 3 x 5 x f32>
  %s = reduce_sum %e {axes = [2], keepdims = false} : <4 x 3 x f32>
  return %s
}""", 1),
    "channel_shuffle": ("""
func @main(%x: <1 x 8 x 3 x 3 x f32>) -> <1 x 8 x 3 x 3 x f32> {
'entry:
  %a = reshape %x {shape = [1, 2, 4, 3, 3]} : <1 x 2 x 4 x 3 x 3 x f32>
  %t = transpose %a {perm = [0, 2, 1, 3, 4]} : <1 x 4 x 2 x 3 x 3 x f32>
  %b = reshape %t {shape = [1, 8, 3, 3]} : <1 x 8 x 3 x 3 x f32>
  %r = relu %b : <1 x 8 x 3 x 3 x f32>
  return %r
}""", 2),
    "two_users": ("""
func @main(%x: <1 x 2 x 4 x 4 x f32>, %w: <2 x 2 x 1 x 1 x f32>) -> (<1 x 2 x 4 x 4 x f32>, <1 x 2 x 4 x 4 x f32>) {
'entry:
  %c = conv2d %x, %w : <1 x 2 x 4 x 4 x f32>
  %r = relu %c : <1 x 2 x 4 x 4 x f32>
  %e = exp %r : <1 x 2 x 4 x 4 x f32>
  return %c, %e
}""", 2),
}


def module(name: str) -> Module:
    m = parse_module(HEADER + CASES[name][0], f"<{name}>")
    verify(m)
    return m


def inputs(m: Module, name: str) -> list[np.ndarray]:
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    f = m.lookup("main")
    return [rng.standard_normal(p.type.shape).astype(dtype_of(p.type)) for p in f.params]


def run(m: Module, args: list[np.ndarray]) -> list[np.ndarray]:
    return run_function(m, m.lookup("main"), args)


def passes(m: Module, names: list[str]) -> Module:
    PassManager([pass_class(n)() for n in names]).run(m)
    verify(m)
    return m


def kernels(m: Module) -> int:
    return sum(1 for f in m.functions if f.kind == "kernel")


@pytest.mark.parametrize("name", list(CASES))
def test_fused_graph_means_the_same(name):
    m = module(name)
    args = inputs(m, name)
    want = run(m, args)
    fused = passes(module(name), ["fuse"])
    assert any(i.opname == "fused" for i in fused.walk())
    # The printed form parses back to the same text.
    assert print_module(parse_module(print_module(fused), "<p>")) == print_module(fused)
    for w, g in zip(want, run(fused, args)):
        np.testing.assert_array_equal(w, g)


@pytest.mark.parametrize("name", list(CASES))
def test_fused_kernels_match_the_graph(name):
    m = module(name)
    args = inputs(m, name)
    want = run(m, args)
    assert kernels(passes(module(name), ["fuse", "lower-loops"])) == CASES[name][1]
    lowered = passes(module(name), ["fuse", *LOWER])
    for w, g in zip(want, run(lowered, args)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", list(CASES))
def test_fusion_moves_no_more_data(name):
    plain = dma_traffic(passes(module(name), LOWER)).total
    fused = dma_traffic(passes(module(name), ["fuse", *LOWER])).total
    assert fused.bytes_in + fused.bytes_out <= plain.bytes_in + plain.bytes_out
    assert kernels(passes(module(name), ["fuse", "lower-loops"])) < \
        kernels(passes(module(name), ["lower-loops"]))


def test_without_the_traffic_check_tvm_rules_alone_decide():
    """A group the check keeps unfused is still formed with check-traffic off."""
    from swir.passes.graph.fuse import Fuse
    m = module("conv_bias_bn_relu")
    Fuse(check_traffic=False).run(m, None)
    verify(m)
    assert [i.opname for i in m.lookup("main").body.blocks[0].instructions] == \
        ["fused", "return"]


def test_identical_groups_share_one_kernel():
    text = HEADER + """
func @main(%x: <4 x 8 x f32>, %y: <4 x 8 x f32>) -> (<4 x 8 x f32>, <4 x 8 x f32>) {
'entry:
  %a = exp %x : <4 x 8 x f32>
  %b = neg %a : <4 x 8 x f32>
  %c = exp %y : <4 x 8 x f32>
  %d = neg %c : <4 x 8 x f32>
  return %b, %d
}"""
    m = parse_module(text, "<t>")
    passes(m, ["fuse", "lower-loops"])
    assert kernels(m) == 1
    calls = [i for i in m.walk() if i.opname == "call"]
    assert len(calls) == 2 and calls[0].args[0].callee == calls[1].args[0].callee


def test_dce_and_cse_across_fused_regions():
    text = HEADER + """
func @main(%x: <4 x f32>, %y: <4 x f32>) -> (<4 x f32>, <4 x f32>) {
'entry:
  %a = fused %x, %y : <4 x f32> {
  'g(%p: <4 x f32>, %q: <4 x f32>):
    %unused = exp %q : <4 x f32>
    %r = relu %p : <4 x f32>
    %r2 = relu %p : <4 x f32>
    %s = add %r, %r2 : <4 x f32>
    yield %s
  }
  %b = fused %x : <4 x f32> {
  'g(%p: <4 x f32>):
    %r = relu %p : <4 x f32>
    %r2 = relu %p : <4 x f32>
    %s = add %r, %r2 : <4 x f32>
    yield %s
  }
  %dead = fused %y : <4 x f32> {
  'g(%p: <4 x f32>):
    %n = neg %p : <4 x f32>
    yield %n
  }
  return %a, %b
}"""
    m = parse_module(text, "<t>")
    args = [np.arange(4, dtype=np.float32) - 2, np.ones(4, np.float32)]
    want = run(m, args)
    passes(m, ["dce", "cse", "dce"])
    out = print_module(m)
    assert "%dead" not in out and "exp" not in out      # dead group, dead op inside
    assert out.count("relu") == 1                       # CSE inside, then the two groups merged
    assert out.count("= fused %x :") == 1               # the unused input %y was dropped
    for w, g in zip(want, run(m, args)):
        np.testing.assert_array_equal(w, g)
