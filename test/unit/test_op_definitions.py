"""Op definitions (swir/ops): each fact about an op is written once, in its
definition, and the rest of the compiler reads it from there."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from swir.codegen import emulate
from swir.codegen.project import Options, generate, write_project
from swir.frontend.onnx_import import import_onnx
from swir.interp.loop import io_signature
from swir.interp.run import run_function
from swir.ops.elementwise import elementwise_op
from swir.ops.graph import BATCH_NORM, CONCAT, CONV2D, GELU, LAYER_NORM, SLICE, TRANSPOSE
from swir.ops.registry import (FLOP, INLINABLE, LOWERING, REFERENCE, SCALAR_FORM, X0, Attr,
                               Category, CCall, CConst, CExpr, COp, OpDef, Operands, all_ops,
                               lookup, register, unregister)
from swir.ops.util import attr, attr_or_default
from swir.parser import parse_module
from swir.passes import pass_class
from swir.passes.manager import PassManager
from swir.passes.pipelines import compile_pipeline, level_options
from swir.printer import print_module
from swir.verifier import verify
from helpers import onnx_model

SWIR = Path(__file__).resolve().parents[2] / "swir"


def _sources(*skip: str):
    for p in sorted(SWIR.rglob("*.py")):
        rel = p.relative_to(SWIR).as_posix()
        if not rel.startswith(skip):
            yield rel, p.read_text()


def _literal(value) -> str:
    """How a default is written in Python source: (1, 1) as [1, 1] or (1, 1)."""
    if isinstance(value, tuple):
        inner = ", ".join(map(repr, value))
        return rf"[\[(]{re.escape(inner)}[\])]"
    return re.escape(repr(value))


def test_epsilon_default_is_written_only_in_the_definitions():
    found = [rel for rel, text in _sources("ops/") if re.search(r"\b1e-0?5\b", text)]
    assert found == []


def test_attribute_defaults_are_not_repeated_outside_the_definitions():
    """No ``attrs.get("epsilon", 1e-5)``, ``int_attr(inst, "axis", -1)`` or
    ``attrs.get("step", 1)``: code outside swir/ops reads the defaults of every
    stage's ops from the definition. The ONNX converters
    are exempt: they read ONNX's own attribute defaults from an ONNX node."""
    patterns = {rf'"{a.name}"\s*,\s*{_literal(a.default)}\s*[),]'
                for op in all_ops() for a in op.attrs if a.default is not None}
    found = [(rel, p) for rel, text in _sources("ops/", "frontend/")
             for p in patterns if re.search(p, text)]
    assert found == []


def test_defaults_fill_absent_attributes_only():
    assert BATCH_NORM.with_defaults({}) == {"epsilon": 1e-5}
    assert BATCH_NORM.with_defaults({"epsilon": 0.5}) == {"epsilon": 0.5}
    assert CONV2D.attr_value({"groups": 2}, "stride") == (1, 1)
    assert CONV2D.attr_value({"groups": 2}, "groups") == 2
    with pytest.raises(KeyError, match="declares no attribute 'alpha'"):
        CONV2D.attr_value({}, "alpha")


def test_defaults_computed_from_the_operands_are_in_the_definitions_too():
    """transpose's perm (reversed axes) and slice's axes and steps (one per
    start) depend on the instruction: the definition derives them, and no rule
    writes them again."""
    assert TRANSPOSE.with_defaults({}, (3,)) == {"perm": (2, 1, 0)}
    assert TRANSPOSE.with_defaults({"perm": (0, 2, 1)}, (3,)) == {"perm": (0, 2, 1)}
    sliced = SLICE.with_defaults({"starts": [0, 1], "ends": [2, 3]}, (4,))
    assert (sliced["axes"], sliced["steps"]) == ((0, 1), (1, 1))
    assert SLICE.attr_value({"starts": [5], "ends": [9]}, "steps", (2,)) == (1,)
    with pytest.raises(TypeError, match="'perm': its default depends on the operands' ranks"):
        TRANSPOSE.attr_value({}, "perm")      # no ranks: no silent None
    m = parse_module(TRANSPOSED, "<t>")
    (t,) = [i for i in m.walk() if i.opname == "transpose"]
    assert attr(t, "perm") == [2, 1, 0] and attr_or_default(t, "perm") == (2, 1, 0)
    derived = [r"reversed\(range\(", r'"steps",\s*None', r'\[1\]\s*\*\s*len\(starts\)']
    found = [(rel, p) for rel, text in _sources("ops/") for p in derived if re.search(p, text)
             and "passes/buffered/" not in rel]  # the LDM model's reversed loops are no default
    assert found == []


TRANSPOSED = """
module "t"
stage graph

func @main(%x: <2 x 3 x 4 x f32>) -> <4 x 3 x 2 x f32> {
  %t = transpose %x : <4 x 3 x 2 x f32>
  return %t
}
"""


def test_arity_is_derived_from_the_named_operands():
    assert CONV2D.num_args == (2, 3)
    assert LAYER_NORM.operands.names == ("x", "scale", "bias?")
    assert CONCAT.num_args == (1, None)
    assert Operands(("a", "b?", "c?"), "").count == (1, 3)
    assert lookup("batch_norm").num_args == (5, 5)


def test_traits_say_what_fusion_and_the_cost_model_rely_on():
    scalar = {o.name for o in all_ops() if SCALAR_FORM in o.traits}
    assert {"add", "relu", "select", "cast", "gelu", "clip", "batch_norm"} <= scalar
    assert not scalar & {"transpose", "matmul", "reduce_sum", "softmax"}
    inlinable = {o.name for o in all_ops() if INLINABLE in o.traits}
    assert inlinable == scalar | {"transpose"}
    assert FLOP in lookup("add").traits and FLOP not in lookup("eq").traits
    assert not BATCH_NORM.may_run_through(1) and BATCH_NORM.may_run_through(0)
    assert lookup("add").may_run_through(1)


# -- hooks: attached to the definitions, complete when a stage loads -------------------

def test_stage_hooks_are_attached_to_the_definitions():
    from swir.kernels import KERNELS   # importing the interpreter loads its kernels
    from swir.lowering import rule_for        # and the lowering package its rules
    assert REFERENCE.of(CONV2D) is KERNELS["conv2d"]
    rule = rule_for("conv2d")
    assert LOWERING.of(CONV2D) is rule
    assert rule_for("relu") is rule_for("gelu")  # SCALAR_FORM ops share one rule
    REFERENCE.check_complete()
    LOWERING.check_complete()
    from swir.lowering.elementwise import EXPANSION
    assert EXPANSION.of(GELU) is not None and EXPANSION.of(lookup("add")) is None
    EXPANSION.check_complete()


@pytest.mark.parametrize("hook, stage", [
    ("REFERENCE", "from swir.kernels import evaluate; evaluate('add', {}, [], [])"),
    ("LOWERING", "from swir.lowering import rule_for; rule_for('add')")])
def test_an_op_without_a_hook_is_an_error_when_the_stage_loads(hook, stage):
    """An op registered without an interpreter kernel or a lowering rule: the
    stage that needs it refuses to load, naming the op."""
    script = (
        "from swir.ops.elementwise import broadcast_shapes\n"
        "from swir.ops.registry import OpDef, Operands, register\n"
        "register(OpDef('lonely', 'an op nobody implements', stages=frozenset({'graph'}),\n"
        "               operands=Operands(('x',), 'the input'), category='injective',\n"
        "               infer=lambda inst: [inst.args[0].type]))\n" + stage)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode != 0
    assert "MissingHook" in run.stderr, run.stderr
    assert "for op(s): lonely" in run.stderr, run.stderr


# -- a new element-wise op is one definition -------------------------------------------
#
# toy_softsign is defined here and nowhere else: its shape rule, numpy reference,
# C expression and ONNX name are its definition's. It is parsed, interpreted at
# the graph stage, lowered by swir-cg's pipeline, compiled to C, built with
# `make emu` and run; the program's output equals the interpreter's.

def _softsign(x: np.ndarray) -> np.ndarray:
    wide = x.astype(np.float64)  # in f64 and rounded once, as the C form computes
    return (wide / (1.0 + np.abs(wide))).astype(x.dtype)


TOY = elementwise_op("toy_softsign", "Element-wise x / (1 + |x|).", 1, "float",
                     numpy=_softsign,
                     c_expr=CExpr(COp("/", (X0, COp("+", (CConst("1.0"), CCall("fabs", (X0,)))))),
                                  in_double=True),
                     onnx="Softsign")

TOY_MODULE = """
module "toy"
stage graph

func @main(%x: <3 x 37 x f32>, %y: <37 x f32>) -> <3 x 37 x f32> {
  %s = toy_softsign %x : <3 x 37 x f32>
  %a = add %s, %y : <3 x 37 x f32>
  %t = toy_softsign %a : <3 x 37 x f32>
  return %t
}
"""


@pytest.fixture
def toy_op():
    register(TOY)
    yield TOY
    unregister(TOY)


def test_a_toy_elementwise_op_runs_end_to_end(toy_op, tmp_path):
    m = parse_module(TOY_MODULE, "<toy>")
    verify(m)
    rng = np.random.default_rng(7)
    args = [rng.normal(0, 3, (3, 37)).astype(np.float32),
            rng.normal(0, 1, (37,)).astype(np.float32)]
    (want,) = run_function(m, m.lookup("main"), args)
    np.testing.assert_array_equal(want, _softsign(_softsign(args[0]) + args[1]))
    # swir-cg's pipeline for a graph module: -O3's graph passes (which fuse the
    # three ops into one kernel), then the lowering.
    passes = [pass_class(n)(**level_options(n)) for n in compile_pipeline("graph")]
    PassManager(passes, verify_each=True).run(m)
    assert m.stage == "dma"
    # both uses, in the CPE kernel's loop body only (twice over where the plan
    # double-buffers the tile loop: two tiles per iteration)
    uses = [f.target for f in m.functions if f.body is not None
            for i in f.walk() if i.opname == "toy_softsign"]
    assert len(uses) in (2, 4) and set(uses) == {"cpe"}
    write_project(generate(m, Options(source="<toy>")), str(tmp_path / "p"), force=False)
    program = emulate.build(tmp_path / "p", "toy")
    ins, outs = io_signature(m.lookup("main"))
    run = emulate.run(program, args, [p.type for p in ins], outs)
    np.testing.assert_array_equal(run.outputs[0], want)
    assert "fabs((double)" in (tmp_path / "p" / "layers_slave.c").read_text()


def _one_node_model(path: Path, op: str, shape: list[int], **attrs) -> Path:
    """An ONNX model of one f32 node ``op``, x -> y, saved at ``path``."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    graph = helper.make_graph(
        [helper.make_node(op, ["x"], ["y"], **attrs)], "toy",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    model = onnx_model(graph, 17, 9)
    onnx.save(model, path)
    return path


def test_a_toy_elementwise_op_imports_from_onnx(toy_op, tmp_path):
    imported = import_onnx(_one_node_model(tmp_path / "toy.onnx", "Softsign", [2, 3]),
                           "toy.weights")
    verify(imported.module)
    assert "toy_softsign %x" in print_module(imported.module)


def test_a_toy_op_is_gone_when_unregistered():
    assert lookup("toy_softsign") is None


# -- categories are a closed set ---------------------------------------------------------

def test_a_category_spelled_wrong_is_an_error_when_the_op_is_defined():
    with pytest.raises(ValueError, match="'injectve' is not a valid Category"):
        OpDef("typo", "an op with a misspelt category", category="injectve")
    assert OpDef("ok", "a string naming a category", category="reduction").category \
        is Category.REDUCTION


# -- ONNX conversion: a hook on the op that names the ONNX operator ------------------------

def test_each_onnx_operator_has_exactly_one_converter():
    from swir.frontend.onnx_ops import ONNX_IMPORT, ONNX_ONLY
    named = {op.onnx: op for op in all_ops() if op.onnx}
    assert not set(named) & set(ONNX_ONLY)
    for onnx_op, op in named.items():
        hook = ONNX_IMPORT.of(op)
        derived = SCALAR_FORM in op.traits and not op.attrs
        assert (hook is None) == derived, (onnx_op, op.name)
    assert ONNX_IMPORT.of(CONV2D)[1] >= {"strides", "pads", "group"}
    ONNX_IMPORT.check_complete()


def test_a_converter_for_an_op_s_onnx_operator_must_be_attached_to_the_op():
    from swir.frontend.onnx_ops import ONNX_IMPORT, converter
    with pytest.raises(ValueError, match="ONNX 'Conv' is op 'conv2d's"):
        converter("Conv")(lambda n: [])
    with pytest.raises(ValueError, match="two converters for ONNX 'Gemm'"):
        converter("Gemm")(lambda n: [])
    # Nothing is registered when one target is refused.
    with pytest.raises(ValueError, match="ONNX 'Conv' is op 'conv2d's"):
        converter(TOY_SHRINK, "Conv")(lambda n: [])
    assert ONNX_IMPORT.of(TOY_SHRINK) is None


def test_two_ops_cannot_name_one_onnx_operator():
    twin = OpDef("relu_twin", "a second op for ONNX Relu", onnx="Relu")
    with pytest.raises(ValueError, match="op 'relu_twin' names ONNX 'Relu', which op 'relu' "
                                         "names already"):
        register(twin)
    assert lookup("relu_twin") is None


def test_an_op_naming_an_onnx_operator_without_a_converter_fails_the_frontend_load():
    """An op with attributes that names an ONNX operator but has no converter:
    importing the frontend fails, naming the op (its converter cannot be derived)."""
    script = (
        "from swir.ops.registry import Attr, OpDef, Operands, register\n"
        "register(OpDef('lonely_shrink', 'an op without a converter',\n"
        "               stages=frozenset({'graph'}), operands=Operands(('x',), 'the input'),\n"
        "               attrs=(Attr('lambd', 'float', default=0.5),), onnx='Shrink',\n"
        "               category='injective', infer=lambda inst: [inst.args[0].type]))\n"
        "import swir.frontend.onnx_ops\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode != 0
    assert "MissingHook: no ONNX converter for op(s): lonely_shrink" in run.stderr, run.stderr


# toy_shrink has an attribute, so its ONNX conversion is a hook written for it:
# the definition, its reference kernel and its converter are all this test adds.
TOY_SHRINK = OpDef("toy_shrink", "ONNX Shrink: x + bias below -lambd, x - bias above lambd, "
                                 "else 0.", stages=frozenset({"graph"}),
                   operands=Operands(("x",), "the input"), category="injective",
                   attrs=(Attr("lambd", "float", default=0.5), Attr("bias", "float", default=0.0)),
                   infer=lambda inst: [inst.args[0].type], onnx="Shrink")


def _shrink(attrs, result_types, x):
    lambd, bias = attrs["lambd"], attrs["bias"]
    return [np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0)).astype(x.dtype)]


def _convert_shrink(n):
    return [n.emit(n.definition.name, n.value(0), lambd=float(n.attr("lambd", 0.5)),
                   bias=float(n.attr("bias", 0.0)))]


@pytest.fixture
def toy_shrink():
    from swir.frontend.onnx_ops import converter
    from swir.kernels import kernel
    register(TOY_SHRINK)
    kernel(TOY_SHRINK)(_shrink)
    converter(TOY_SHRINK, attrs="bias lambd")(_convert_shrink)
    yield TOY_SHRINK
    unregister(TOY_SHRINK)
    TOY_SHRINK.hooks.clear()


def test_a_toy_op_with_attributes_imports_through_its_own_converter(toy_shrink, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    model = _one_node_model(tmp_path / "toy.onnx", "Shrink", [4, 9], lambd=0.75, bias=0.25)
    imported = import_onnx(model, "toy.weights")
    verify(imported.module)
    assert "toy_shrink %x {lambd = 0.75, bias = 0.25}" in print_module(imported.module)
    x = np.random.default_rng(3).normal(0, 1, (4, 9)).astype(np.float32)
    (got,) = run_function(imported.module, imported.module.lookup("main"), [x])
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(got, session.run(None, {"x": x})[0])


# -- docs/ir.md's op reference agrees with the definitions -----------------------------

def _sections(doc: str) -> dict[str, str]:
    """Each graph op's reference section (a ``####`` heading may name several)."""
    out: dict[str, str] = {}
    parts = re.split(r"^#### ", doc, flags=re.M)[1:]
    for part in parts:
        heading, _, body = part.partition("\n")
        body = body.split("\n### ")[0]
        for name in re.findall(r"`(\w+)`", heading):
            out[name] = body
    return out


def _with_references(sections: dict[str, str], name: str) -> str:
    """An op's section and the sections it defers to ("as `max_pool2d`")."""
    text = sections[name]
    for other in re.findall(r"as `(\w+)`", text):
        text += sections.get(other, "")
    return text


def test_the_op_reference_in_ir_md_matches_the_definitions():
    from swir.printer import format_attr
    doc = (SWIR.parent / "docs" / "ir.md").read_text()
    sections = _sections(doc)
    for op in all_ops():
        if op.stages != frozenset({"graph"}) or op.name not in sections:
            continue
        text = _with_references(sections, op.name)
        assert f"Category: `{op.category}`" in text, op.name
        for a in op.attrs:
            assert f"`{a.name}`" in text, (op.name, a.name)
            if a.default is not None:
                assert f"`{format_attr(a.default)}`" in text, (op.name, a.name, a.default)
