"""Module attributes: one definition each (swir/ir/module_attrs.py), read
through Module.attr with its default, checked by the verifier."""

import pytest

from swir.ir.core import Module
from swir.ir.module_attrs import MODULE_ATTRS, attr_error
from swir.target import DEFAULT_TARGET, TARGETS


def test_defaults_when_unset():
    m = Module("m", "dma")
    assert m.attr("ranks") == 1
    assert m.attr("split") == "data"
    assert m.attr("target") is DEFAULT_TARGET
    assert m.attr("ldm_size") == DEFAULT_TARGET.ldm_bytes


def test_ldm_size_defaults_to_the_modules_target():
    m = Module("m", "dma")
    m.attrs["target"] = "sw26010pro"
    assert m.attr("target") is TARGETS["sw26010pro"]
    assert m.attr("ldm_size") == TARGETS["sw26010pro"].ldm_bytes


@pytest.mark.parametrize("name, value", [("ranks", 0), ("ranks", True), ("ldm_size", -1),
                                         ("target", "vax"), ("split", "pipeline")])
def test_illegal_values_read_as_the_default_and_are_errors(name, value):
    attrs = {name: value, **({"ranks": 2} if name == "split" else {})}
    if name == "ranks":
        attrs["split"] = "data"
    m = Module("m", "dma")
    m.attrs.update(attrs)
    assert m.attr(name) == MODULE_ATTRS[name].default(attrs)
    assert attr_error(attrs, name)


def test_split_and_ranks_come_together():
    assert attr_error({"ranks": 2}, "split")
    assert attr_error({"split": "data"}, "split")
    assert attr_error({"ranks": 2, "split": "model"}, "split") is None
    assert attr_error({}, "split") is None
