"""The graph interpreter as a library: constant folding hook, globals, calls."""

from __future__ import annotations

import numpy as np
import pytest

from swir.diagnostics import Diagnostic
from swir.interp.arguments import default_function
from swir.interp.graph import GraphInterpreter
from swir.interp.run import run_function
from swir.parser import parse_module
from swir.passes.graph.fold_constants import fold

FOLDABLE = '''module "m"
stage graph
global @g : <2 x 2 x f32> = dense<[[1.0, 2.0], [3.0, 4.0]]>
global @w : <2 x 2 x f32> = file "w.bin" offset 0
func @main(%x: <2 x 2 x f32>) -> <2 x 2 x f32> {
'entry:
  %c = const dense<0.5> : <2 x 2 x f32>
  %a = mul @g, %c : <2 x 2 x f32>
  %b = add %a, %x : <2 x 2 x f32>
  %t = transpose @g : <2 x 2 x f32>
  %u = add %t, @w : <2 x 2 x f32>
  return %b
}
'''


def _insts(m):
    return {i.results[0].name: i for i in m.walk() if i.results}


def test_fold_evaluates_instructions_with_constant_operands():
    m = parse_module(FOLDABLE)
    insts = _insts(m)
    (a,) = fold(insts["a"])
    np.testing.assert_array_equal(a, np.array([[0.5, 1.0], [1.5, 2.0]], np.float32))
    (t,) = fold(insts["t"])
    np.testing.assert_array_equal(t, np.array([[1.0, 3.0], [2.0, 4.0]], np.float32))
    assert a.dtype == np.float32


def test_fold_refuses_runtime_values_and_file_weights():
    insts = _insts(parse_module(FOLDABLE))
    assert fold(insts["b"]) is None      # depends on the argument %x
    assert fold(insts["u"]) is None      # @w lives in a file: not folded at compile time
    assert fold(insts["c"]) is None      # already a constant


def test_run_reads_file_weights_relative_to_the_module(tmp_path):
    (tmp_path / "w.bin").write_bytes(np.arange(4, dtype="<f4").tobytes())
    m = parse_module(FOLDABLE.replace("return %b", "return %u"))
    f = default_function(m)
    (out,) = run_function(m, f, [np.zeros((2, 2), np.float32)], tmp_path)
    np.testing.assert_array_equal(out, np.array([[1.0, 4.0], [4.0, 7.0]], np.float32))


def test_interpreter_refuses_other_stages():
    m = parse_module('module "m"\nstage loop\n')
    with pytest.raises(Diagnostic, match="cannot run a loop-stage module"):
        GraphInterpreter(m)
