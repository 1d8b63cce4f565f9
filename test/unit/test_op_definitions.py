"""Op definitions (swir/ops): each fact about an op is written once, in its
definition, and the rest of the compiler reads it from there."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from swir.ops.graph import BATCH_NORM, CONV2D, CONCAT, LAYER_NORM
from swir.ops.registry import (FLOP, INLINABLE, LOWERING, REFERENCE, SCALAR_FORM, Operands,
                               all_ops, lookup)

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
    """No ``attrs.get("epsilon", 1e-5)`` or ``int_attr(inst, "axis", -1)``: code
    outside swir/ops reads defaults from the definition. The ONNX converters
    are exempt: they read ONNX's own attribute defaults from an ONNX node."""
    patterns = {rf'"{a.name}"\s*,\s*{_literal(a.default)}\s*[),]'
                for op in all_ops() if "graph" in op.stages
                for a in op.attrs if a.default is not None}
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
    from swir.interp.kernels import KERNELS, _load
    from swir.lowering import rule_for
    _load()
    assert REFERENCE.of(CONV2D) is KERNELS["conv2d"]
    rule = rule_for("conv2d")  # loads the rules
    assert LOWERING.of(CONV2D) is rule
    assert rule_for("relu") is rule_for("gelu")  # SCALAR_FORM ops share one rule
    REFERENCE.check_complete()
    LOWERING.check_complete()


@pytest.mark.parametrize("hook, stage", [
    ("REFERENCE", "from swir.interp.kernels import evaluate; evaluate('add', {}, [], [])"),
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
