"""Passes dispatch on op definitions, not op names (issue 42, item 1)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import swir.ops as ops
from swir.codegen import emulate
from swir.codegen.project import Options, generate, write_project
from swir.interp.loop import io_signature
from swir.interp.run import run_function
from swir.ir.core import Instruction
from swir.ops import registry
from swir.ops.registry import (INLINABLE, SCALAR_FORM, Attr, Category, OpDef, Operands,
                               register, unregister)
from swir.ops.util import attr
from swir.parser import parse_module
from swir.passes import pass_class
from swir.passes.manager import PassManager
from swir.passes.pipelines import compile_pipeline, level_options
from swir.verifier import verify


def test_every_op_is_a_named_value_of_swir_ops():
    bound = {v.name: k for k, v in vars(ops).items()
             if isinstance(v, registry.OpDef) and k.isupper()}
    assert sorted(op.name for op in registry.all_ops()) == sorted(bound)
    for name, const in bound.items():
        assert const == name.upper()


def test_isa_tests_the_definition():
    load = Instruction("load")
    assert load.isa(ops.LOAD)
    assert load.isa(ops.STORE, ops.LOAD)
    assert not load.isa(ops.STORE)
    assert not load.isa()
    assert Instruction("for").isa(*ops.LOOPS)


# -- no op-name tests outside swir/ops -------------------------------------------------
#
# A pass asks the op (``inst.isa(LOAD)``, ``inst.opdef.writes``), never its name:
# adding an op, or renaming one, then needs no edit outside its definition. The
# scan below fails on a test of an op's name in the packages it guards:
#   - a comparison (==, !=, in, not in) of ``.opname`` or of an op-name string;
#   - a table read by op name (``TABLE[inst.opname]``, ``TABLE.get(inst.opname)``);
#   - a dict literal keyed by op-name strings.
# Building an instruction by name (``b.create("add", ...)``) is not a test and
# is not flagged. Guarded: every package that dispatches on ops, the code
# generator and the interpreters included, and swir/ir, which sits below the op
# set and asks an instruction's definition through ``inst.opdef`` (the const
# test of swir.ir.constants reads ``constant_like``). Not guarded: the parser
# and the printer, which sit below the op set too and spell ops by name.

SWIR = Path(__file__).resolve().parents[2] / "swir"
GUARDED = ["passes", "analysis", "verifier", "lowering", "transforms", "frontend",
           "costmodel", "codegen", "interp", "kernels", "ir"]

# (file, string): a comparison with an op-name string that is not about an op.
NOT_OP_NAMES = {
    # affine atoms' kinds (Compound.kind: floordiv, ceildiv, mod, min, max)
    ("analysis/dependence.py", "min"), ("analysis/loop_sums.py", "min"),
    ("analysis/loop_sums.py", "max"), ("analysis/vector_plan.py", "min"),
    ("analysis/write_blocks.py", "min"), ("analysis/write_blocks.py", "max"),
    ("passes/dma/copies.py", "min"), ("passes/dma/copies.py", "max"),
    ("verifier/bounds.py", "min"), ("verifier/bounds.py", "max"),
    ("ir/affine.py", "min"), ("ir/affine.py", "max"), ("interp/pycode.py", "min"),
    ("codegen/body.py", "min"), ("codegen/body.py", "max"),
    # the kinds of C function of a CPE kernel (spawn entry, run, cpe) and the
    # side a function is called from (host, spawn, cpe)
    ("codegen/cpe.py", "spawn"), ("codegen/layout.py", "spawn"),
    # vector_plan's access kinds (contiguous, invariant, gather)
    ("analysis/vector_plan.py", "gather"),
    # the ONNX Split node's attribute "split" (the sizes)
    ("frontend/onnx_ops.py", "split"),
    # gelu's attribute approximate = "none" | "tanh"
    ("lowering/elementwise.py", "tanh"), ("kernels/nn.py", "tanh"),
    # the module attribute "split" (data or model), set by -distribute
    ("verifier/__init__.py", "split"),
}


def _op_names() -> frozenset[str]:
    return frozenset(op.name for op in registry.all_ops())


def _strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in node.elts for s in _strings(e)]
    return []


def _is_opname(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "opname") or (
        isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr"
        and any(_strings(a) == ["opname"] for a in node.args[1:2]))


def name_tests(source: str, where: str) -> list[str]:
    """The op-name tests in ``source`` (file ``where``, relative to swir/)."""
    names, found = _op_names(), []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_opname(s) for s in sides):
                found.append(f"{where}:{line}: compares .opname")
                continue
            texts = [t for s in sides for t in _strings(s)
                     if t in names and (where, t) not in NOT_OP_NAMES]
            if texts:
                found.append(f"{where}:{line}: compares with op name {texts[0]!r}")
        elif isinstance(node, ast.Subscript) and _is_opname(node.slice):
            found.append(f"{where}:{line}: a table read by .opname")
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "get" \
                and node.args and _is_opname(node.args[0]):
            found.append(f"{where}:{line}: a table read by .opname")
        elif isinstance(node, ast.Dict):
            keys = [t for k in node.keys if k is not None for t in _strings(k)]
            if keys and all(k in names for k in keys):
                found.append(f"{where}:{line}: a table keyed by op names")
    return found


def _guarded_files() -> list[Path]:
    out = []
    for g in GUARDED:
        p = SWIR / g
        out += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    return out


@pytest.mark.parametrize("path", _guarded_files(), ids=lambda p: str(p.relative_to(SWIR)))
def test_no_op_name_tests(path: Path):
    where = str(path.relative_to(SWIR))
    assert name_tests(path.read_text(), where) == []


def test_the_scan_finds_name_tests():
    src = ('a = inst.opname == "load"\n'
           'b = x in ("load", "store")\n'
           'c = T[inst.opname]\n'
           'd = T.get(i.opname, ())\n'
           'e = {"add": 1, "mul": 2}\n'
           'f = getattr(o, "opname", None) == "fused"\n'
           'g = inst.isa(LOAD)\n'
           'h = b.create("add", x, y)\n')
    assert [s.split(": ", 1)[0] for s in name_tests(src, "x.py")] == \
        ["x.py:1", "x.py:2", "x.py:3", "x.py:4", "x.py:5", "x.py:6"]


# -- a toy op with attributes, end to end ----------------------------------------------
#
# toy_shrink_lowered (ONNX Shrink: x + bias below -lambd, x - bias above lambd,
# else 0) has attributes, so neither a numpy reference nor a C expression can
# say what it computes: its definition, its interpreter kernel and its scalar
# expansion (in loop-stage ops, read from the attributes) are all this test
# adds. It is interpreted at the graph stage, lowered by swir-cg's pipeline,
# compiled to C, built with `make emu` and run.

TOY_SHRINK = OpDef(
    "toy_shrink_lowered", "ONNX Shrink: x + bias below -lambd, x - bias above lambd, else 0.",
    stages=frozenset({"graph"}), operands=Operands(("x",), "the input"),
    category=Category.ELEMENTWISE, traits=frozenset({SCALAR_FORM, INLINABLE}),
    attrs=(Attr("lambd", "float", default=0.5), Attr("bias", "float", default=0.0)),
    infer=lambda inst: [inst.args[0].type])

TOY_SHRINK_MODULE = """
module "toy"
stage graph

func @main(%x: <3 x 37 x f32>, %y: <37 x f32>) -> <3 x 37 x f32> {
  %s = toy_shrink_lowered %x {lambd = 0.75, bias = 0.25} : <3 x 37 x f32>
  %a = add %s, %y : <3 x 37 x f32>
  %t = toy_shrink_lowered %a {lambd = 0.5} : <3 x 37 x f32>
  return %t
}
"""


def _shrink(x: np.ndarray, lambd: float, bias: float) -> np.ndarray:
    return np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0)).astype(x.dtype)


def _shrink_kernel(attrs, result_types, x):
    return [_shrink(x, attrs["lambd"], attrs["bias"])]


def _shrink_expansion(k, inst, vals, elem):
    x, lambd, bias = vals[0], attr(inst, "lambd"), attr(inst, "bias")
    below = k.op("lt", x, k.const(-lambd, elem))
    above = k.op("gt", x, k.const(lambd, elem))
    inside = k.op("select", above, k.op("sub", x, k.const(bias, elem)), k.const(0.0, elem))
    return k.op("select", below, k.op("add", x, k.const(bias, elem)), inside)


@pytest.fixture
def toy_shrink():
    import swir.lowering  # noqa: F401  (loaded first: it checks its hooks complete)
    from swir.kernels import kernel
    from swir.lowering.elementwise import EXPANSION
    register(TOY_SHRINK)
    kernel(TOY_SHRINK)(_shrink_kernel)
    EXPANSION.register(TOY_SHRINK)(_shrink_expansion)
    yield TOY_SHRINK
    unregister(TOY_SHRINK)
    TOY_SHRINK.hooks.clear()


def test_a_toy_op_with_attributes_runs_end_to_end(toy_shrink, tmp_path):
    m = parse_module(TOY_SHRINK_MODULE, "<toy>")
    verify(m)
    rng = np.random.default_rng(7)
    args = [rng.normal(0, 1, (3, 37)).astype(np.float32),
            rng.normal(0, 1, (37,)).astype(np.float32)]
    (want,) = run_function(m, m.lookup("main"), args)
    np.testing.assert_array_equal(want, _shrink(_shrink(args[0], 0.75, 0.25) + args[1], 0.5, 0.0))
    passes = [pass_class(n)(**level_options(n)) for n in compile_pipeline("graph")]
    PassManager(passes, verify_each=True).run(m)
    assert m.stage == "dma"
    assert not any(i.opname == TOY_SHRINK.name for f in m.functions if f.body is not None
                   for i in f.walk())       # expanded into loop-stage ops
    write_project(generate(m, Options(source="<toy>")), str(tmp_path / "p"), force=False)
    program = emulate.build(tmp_path / "p", "toy")
    ins, outs = io_signature(m.lookup("main"))
    run = emulate.run(program, args, [p.type for p in ins], outs)
    np.testing.assert_array_equal(run.outputs[0], want)
