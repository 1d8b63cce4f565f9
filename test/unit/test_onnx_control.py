"""ONNX Loop and If whose course is known at import (swir/frontend/onnx_control.py):
unrolled / taken by swir-import, run by the graph interpreter, against
onnxruntime; and the located refusals (a data-dependent condition, a loop
too long to unroll, an If on a run-time value). The models are built with
onnx.helper and imported from memory, every constant inline. Tolerance as
test_onnx_recurrent (f32 rtol 1e-5, atol 1e-6)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from swir.frontend import onnx_control  # noqa: E402
from swir.frontend.onnx_control import MAX_ITERATIONS  # noqa: E402
from swir.frontend.onnx_import import import_onnx  # noqa: E402
from swir.frontend.onnx_types import ImportFailure  # noqa: E402
from swir.interp.run import interpreter_for  # noqa: E402
from swir.ir.core import Global  # noqa: E402
from swir.verifier import verify  # noqa: E402

from helpers import onnx_model, ort_session, rng_for  # noqa: E402

RTOL, ATOL = 1e-5, 1e-6
EVERYTHING_INLINE = 1 << 30
F, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
T, B, H = 4, 2, 3


def info(name: str, elem: int, shape) -> object:
    return helper.make_tensor_value_info(name, elem, shape)


def const(name: str, value) -> object:
    return numpy_helper.from_array(np.asarray(value), name)


def rnn_body(cond_rule: str = "constant") -> object:
    """One step of h = tanh(x[i]·W + h·R): x is read from the outer scope by
    Gather on the iteration number; the new h is carried and also scanned.
    ``cond_rule``: 'constant' (true), 'counter' (i + 1 < 3: a while loop whose
    condition folds) or 'data' (sum(h) > 0: data-dependent)."""
    nodes = [helper.make_node("Gather", ["x", "i"], ["xi"], axis=0),
             helper.make_node("MatMul", ["xi", "W"], ["xw"]),
             helper.make_node("MatMul", ["h_in", "R"], ["hr"]),
             helper.make_node("Add", ["xw", "hr"], ["pre"]),
             helper.make_node("Tanh", ["pre"], ["h_out"]),
             helper.make_node("Identity", ["h_out"], ["h_scan"])]
    if cond_rule == "constant":
        nodes.append(helper.make_node("Identity", ["c_in"], ["c_out"]))
    elif cond_rule == "counter":
        nodes += [helper.make_node("Add", ["i", "one"], ["next"]),
                  helper.make_node("Less", ["next", "three"], ["c_out"])]
    else:
        nodes += [helper.make_node("ReduceSum", ["h_out"], ["total"], keepdims=0),
                  helper.make_node("Greater", ["total", "zero"], ["c_out"])]
    inits = [const("one", np.int64(1)), const("three", np.int64(3)),
             const("zero", np.float32(0))]
    return helper.make_graph(nodes, "step", [info("i", I64, []), info("c_in", BOOL, []),
                                             info("h_in", F, [B, H])],
                             [info("c_out", BOOL, []), info("h_out", F, [B, H]),
                              info("h_scan", F, [B, H])], inits)


def loop_model(trips: int | None, cond_rule: str = "constant", scan: bool = True,
               name: str = "loop", guarded: bool = True) -> tuple[object, dict]:
    rng = rng_for("loop", trips, cond_rule, name)
    inits = [const("W", rng.standard_normal((H, H)).astype(np.float32)),
             const("R", rng.standard_normal((H, H)).astype(np.float32) * 0.5),
             const("cond0", np.bool_(True))]
    inputs = ["", "cond0" if guarded else "", "h0"]
    if trips is not None:
        inits.append(const("M", np.int64(trips)))
        inputs[0] = "M"
    # The scan output is always the node's; ``scan`` says whether the graph returns it.
    node = helper.make_node("Loop", inputs, ["h_final", "hs"], name=name,
                            body=rnn_body(cond_rule))
    steps = 3 if cond_rule == "counter" and guarded else trips
    out_info = [info("h_final", F, [B, H])] + ([info("hs", F, [steps, B, H])] if scan else [])
    graph = helper.make_graph([node], "g", [info("x", F, [T, B, H]), info("h0", F, [B, H])],
                              out_info, inits)
    feeds = {"x": rng.standard_normal((T, B, H)).astype(np.float32),
             "h0": rng.standard_normal((B, H)).astype(np.float32)}
    return onnx_model(graph, opset=17), feeds


def imported(model):
    result = import_onnx(model, "unused.weights", inline_max=EVERYTHING_INLINE)
    verify(result.module)
    return result.module


def check(model, feeds) -> None:
    want = ort_session(model.SerializeToString()).run(None, feeds)
    module = imported(model)
    args = [feeds[p.name] for p in module.lookup("main").params]
    got = interpreter_for(module, Path(".")).run("main", args)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("trips, cond_rule", [(T, "constant"), (None, "counter"),
                                              (T, "counter"), (1, "constant")],
                         ids=["trip-count", "while-counter", "both", "one-iteration"])
def test_loop_matches_onnxruntime(trips, cond_rule):
    check(*loop_model(trips, cond_rule, name=f"loop_{cond_rule}"))


def test_a_while_loop_with_the_largest_trip_count():
    """PyTorch writes a while loop as trip count 2^63 - 1 and a condition:
    the condition decides."""
    check(*loop_model(2**63 - 1, "counter", name="while_max"))


def test_a_for_loop_without_a_condition_input():
    check(*loop_model(T, "constant", guarded=False, name="for"))


def test_a_for_loop_whose_body_condition_turns_false_is_refused():
    """Without a condition input, ONNX ignores the body's condition and
    onnxruntime stops when it turns false: swir refuses the ambiguity."""
    with pytest.raises(ImportFailure, match=r"its body's condition turns false at iteration 2 "
                                            r"of 4, but the loop has no condition input"):
        imported(loop_model(T, "counter", guarded=False, name="for_counter")[0])
    with pytest.raises(ImportFailure, match="depends on values computed at run time"):
        imported(loop_model(T, "data", guarded=False, name="for_data")[0])


def test_a_body_of_the_wrong_arity_is_refused():
    model, _ = loop_model(T, name="arity")
    body = model.graph.node[0].attribute[0].g
    del body.output[1:]
    with pytest.raises(ImportFailure, match=r"node 'arity' \(Loop\): its body has 3 inputs and "
                                            r"1 outputs; with 1 carried values it needs 3 "
                                            r"inputs and at least 2 outputs"):
        import_onnx(model, "unused.weights", check=False, inline_max=EVERYTHING_INLINE)


def test_a_loop_that_never_runs_passes_its_initial_values():
    check(*loop_model(0, scan=False, name="never"))


def test_each_iteration_shares_the_bodys_constants():
    """The body's constants are folded anew in every iteration, but stored
    once: W and R are one global each. The iteration number (Gather's index)
    differs from one iteration to the next, so each has its own."""
    module = imported(loop_model(T, name="shared")[0])
    globals_ = [i.name for i in module.items if isinstance(i, Global)]
    assert sorted(globals_) == ["R", "W", "i", "i_1", "i_2", "i_3"], globals_


def test_data_dependent_condition_is_refused():
    with pytest.raises(ImportFailure, match=r"node 'loop_data' \(Loop\): its condition after "
                       r"iteration 0 depends on values computed at run time"):
        imported(loop_model(T, "data", name="loop_data")[0])


def test_too_long_a_loop_is_refused():
    with pytest.raises(ImportFailure, match=f"its trip count {MAX_ITERATIONS + 1} is over "
                                            f"{MAX_ITERATIONS}"):
        imported(loop_model(MAX_ITERATIONS + 1, guarded=False, name="long")[0])


def test_a_condition_that_holds_too_long_is_refused(monkeypatch):
    monkeypatch.setattr(onnx_control, "MAX_ITERATIONS", 3)
    with pytest.raises(ImportFailure, match="its condition still holds after 3 iterations"):
        imported(loop_model(2**63 - 1, "constant", name="endless")[0])


def if_model(cond) -> tuple[object, dict]:
    then = helper.make_graph([helper.make_node("Neg", ["u"], ["n"])], "then", [],
                             [info("n", F, [2, 3])])
    other = helper.make_graph([helper.make_node("Exp", ["u"], ["e"])], "else", [],
                              [info("e", F, [2, 3])])
    node = helper.make_node("If", ["p"], ["y"], name="branch", then_branch=then,
                            else_branch=other)
    inputs = [info("u", F, [2, 3])]
    inits = []
    if cond is None:
        inputs.append(info("p", BOOL, []))
    else:
        inits.append(const("p", np.bool_(cond)))
    graph = helper.make_graph([node], "g", inputs, [info("y", F, [2, 3])], inits)
    return onnx_model(graph, opset=17), {"u": rng_for("if").standard_normal((2, 3)).astype(
        np.float32)}


@pytest.mark.parametrize("cond", [True, False])
def test_if_on_a_constant_is_its_branch(cond):
    model, feeds = if_model(cond)
    check(model, feeds)
    ops = [i.opname for i in imported(model).lookup("main").walk()]
    assert ("neg" if cond else "exp") in ops and ("exp" if cond else "neg") not in ops


def test_if_on_a_run_time_value_is_refused():
    with pytest.raises(ImportFailure, match=r"node 'branch' \(If\): its condition is computed "
                                            r"at run time"):
        imported(if_model(None)[0])
