"""A bounded fuzz campaign in CI: swir-opt (parser and verifier), swir-import
and swir-run's inputs, on inputs hypothesis derives from seeds with
bench/fuzz.py's mutators. Every input must succeed with valid output or end
with a diagnostic and exit status 1: no traceback, no other exit status, no
output file, no case over the time bound (fuzz.check). bench/fuzz.py runs
the long campaign (docs/reliability.md).

The named classes of bad input -- deep nesting, huge literals, long and
unicode identifiers, NUL bytes; wrong initializer shapes, cycles, dangling
inputs -- are also each tried once explicitly, so none is left to chance."""

from __future__ import annotations

import io
import random
from pathlib import Path

import numpy as np
import pytest
import siblings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

fuzz = siblings.load(Path(__file__).parents[2] / "bench" / "fuzz.py")

# derandomize: CI runs the same cases every time; database=None: nothing
# is written into the source tree.
def campaign(cases: int) -> settings:
    return settings(max_examples=cases, deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))

_WORK: list = []


def work():
    """One scratch folder for every case (hypothesis reruns the test body, so
    not a pytest fixture)."""
    if not _WORK:
        _WORK.append(fuzz.Workdir())
    return _WORK[0]


IR_SEEDS = fuzz.ir_seeds()
OUTCOMES = {"parser": {"ok": 0, "rejected": 0}, "importer": {"ok": 0, "rejected": 0},
            "run-inputs": {"ok": 0, "rejected": 0}}


@campaign(2000)
@given(rng=st.randoms(use_true_random=False), generate=st.integers(0, 9))
def test_parser_and_verifier(rng: random.Random, generate: int):
    data = fuzz.random_module(rng) if generate == 0 else \
        fuzz.mutate_times(rng, rng.choice(IR_SEEDS), IR_SEEDS)
    OUTCOMES["parser"][fuzz.parser_case(work(), data)] += 1


@pytest.fixture(scope="module")
def onnx_seeds():
    pytest.importorskip("onnx")
    return fuzz.onnx_seeds()


def test_importer(onnx_seeds):
    @campaign(800)
    @given(rng=st.randoms(use_true_random=False))
    def importer(rng):
        data = fuzz.mutate_times(rng, rng.choice(onnx_seeds), onnx_seeds, fuzz.mutate_onnx)
        OUTCOMES["importer"][fuzz.importer_case(work(), data)] += 1
    importer()


@campaign(500)
@given(rng=st.randoms(use_true_random=False))
def test_run_inputs(rng: random.Random):
    seeds = fuzz.npy_seeds()[:1]
    data = fuzz.mutate_times(rng, seeds[0], seeds, fuzz.mutate_npy)
    OUTCOMES["run-inputs"][fuzz.run_input_case(work(), data)] += 1


def test_the_campaign_reached_both_outcomes():
    """A campaign that only ever rejects (or only accepts) tests little:
    each target saw both valid and invalid inputs. Runs after the campaigns
    (pytest keeps file order)."""
    for name, seen in OUTCOMES.items():
        if sum(seen.values()) == 0:
            pytest.skip(f"the {name} campaign did not run")
        assert seen["ok"] >= 10 and seen["rejected"] >= 10, (name, seen)


# --------------------------------------------------------------------------------------
# Each named kind of bad input, once
# --------------------------------------------------------------------------------------

MODULE = """\
module "m"
stage graph
func @main(%x: <2 x 3 x f32>) -> <2 x 3 x f32> {
'entry:
  %y = relu %x : <2 x 3 x f32>
  return %y
}
"""


@pytest.mark.parametrize("text", [
    pytest.param(MODULE.replace("relu %x", "relu " + "(" * 5000 + "%x" + ")" * 5000),
                 id="deep-parentheses"),
    pytest.param(MODULE.replace("<2 x 3 x f32>", "<" * 3000 + "2 x f32" + ">" * 3000, 1),
                 id="deep-type"),
    pytest.param(MODULE.replace("2 x 3", "9" * 5000 + " x 3"), id="huge-dimension"),
    pytest.param(MODULE.replace("%y", "%" + "y" * 100_000), id="long-identifier"),
    pytest.param(MODULE.replace("%y", "%\u03bb\u00e9\U0001f600"), id="unicode-identifier"),
    pytest.param(MODULE.replace('"m"', '"\u202e\u200b\ufeff"'), id="unicode-string"),
    pytest.param(MODULE.replace("relu", "re\x00lu"), id="nul-byte"),
    pytest.param("\x00" * 100, id="only-nul"),
    pytest.param(MODULE[:MODULE.index("relu")], id="truncated"),
    pytest.param(MODULE * 2, id="two-modules"),
    pytest.param(MODULE.replace("'entry:", "'entry:\n" + "  %d = relu %x : <2 x 3 x f32>\n"
                                * 20_000), id="twenty-thousand-ops"),
])
def test_named_kinds_of_bad_ir(text):
    assert fuzz.parser_case(work(), text.encode("utf-8", "surrogatepass")) in ("ok", "rejected")


def _onnx_case(change) -> str:
    import onnx
    m = onnx.load_from_string(fuzz.onnx_seeds()[0])   # MatMul, Add, Relu
    change(m.graph)
    return fuzz.importer_case(work(), m.SerializeToString())


def _wrong_initializer_shape(g):
    g.initializer[0].dims[:] = [5, 3]


def _initializer_too_short(g):
    g.initializer[0].raw_data = g.initializer[0].raw_data[:-4]


def _cycle(g):
    g.node[0].input[0] = "y"          # the MatMul reads the Relu's output


def _dangling(g):
    g.node[1].input[1] = "nowhere"


def _duplicate_definition(g):
    g.node[1].output[0] = "h"


def _escaping_external_data(g):
    import onnx
    t = g.initializer[0]
    t.ClearField("raw_data")
    t.data_location = onnx.TensorProto.EXTERNAL
    e = t.external_data.add()
    e.key, e.value = "location", "../../../../etc/passwd"


@pytest.mark.parametrize("change", [_wrong_initializer_shape, _initializer_too_short, _cycle,
                                    _dangling, _duplicate_definition, _escaping_external_data])
def test_named_kinds_of_bad_onnx_are_rejected(onnx_seeds, change):
    assert _onnx_case(change) == "rejected"


def _npy(arr) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


@pytest.mark.parametrize("data", [
    pytest.param(_npy(np.zeros((2, 3), np.float64)), id="wrong-dtype"),
    pytest.param(_npy(np.zeros((3, 2), np.float32)), id="wrong-shape"),
    pytest.param(_npy(np.array([{"a": 1}] * 6, dtype=object).reshape(2, 3)), id="pickled"),
    pytest.param(_npy(np.zeros((2, 3), np.float32))[:-5], id="truncated"),
    pytest.param(_npy(np.zeros((2, 3), np.float32)).replace(b"(2, 3)", b"(9999999999, 3)"),
                 id="huge-shape-claim"),
    pytest.param(b"\x93NUMPY\x01\x00\xff\xff" + b" " * 10, id="header-length-past-end"),
    pytest.param(b"", id="empty"),
])
def test_named_kinds_of_bad_inputs_are_rejected(data):
    assert fuzz.run_input_case(work(), data) == "rejected"


def test_a_hang_is_a_failure(monkeypatch):
    """The time bound is real: a case that does not finish fails the property."""
    import time

    from swir.tools import swir_opt
    monkeypatch.setattr(swir_opt, "main", lambda argv: time.sleep(5) or 0)
    with pytest.raises(fuzz.Failure, match="ran longer than"):
        fuzz.run_in_process("swir-opt", [], bound=0.2)


def test_a_traceback_or_internal_error_is_a_failure(monkeypatch, tmp_path):
    from swir.tools import swir_opt

    def broken(argv):
        raise KeyError("bug")
    monkeypatch.setattr(swir_opt, "main", broken)
    with pytest.raises(fuzz.Failure, match="exited with status 2"):
        fuzz.check("swir-opt", [], [tmp_path / "out.swir"])
