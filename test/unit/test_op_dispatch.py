"""Passes dispatch on op definitions, not op names (issue 42, item 1)."""

from __future__ import annotations

import swir.ops as ops
from swir.ir.core import Instruction
from swir.ops import registry


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
