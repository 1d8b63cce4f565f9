"""ONNX's LSTM, GRU and RNN, unrolled by swir-import (swir/frontend/onnx_recurrent.py),
against onnxruntime: every output (Y, Y_h, Y_c) in every direction and layout,
with and without initial states (constants and graph inputs), peepholes,
both GRU reset forms and the non-default activations swir takes; and the
located errors for what it refuses. The models are built with onnx.helper and
imported from memory (an onnx.ModelProto), every constant inline, so the
graph interpreter needs no weights file.

Tolerance: f32 rtol 1e-5, atol 1e-6. swir's unrolled form sums each gate's
input and recurrent projections in another order than onnxruntime's kernel
(one matmul over all steps, then the recurrent term), a few ulps per step."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from swir.frontend.onnx_import import import_onnx  # noqa: E402
from swir.frontend.onnx_types import ImportFailure  # noqa: E402
from swir.interp.run import interpreter_for  # noqa: E402
from swir.verifier import verify  # noqa: E402

from helpers import onnx_model, ort_session, rng_for  # noqa: E402

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
T, B, I, H = 5, 2, 3, 4
RTOL, ATOL = 1e-5, 1e-6
EVERYTHING_INLINE = 1 << 30


def recurrent_model(op: str, *, direction: str = "forward", layout: int = 0,
                    initial: str = "none", peepholes: bool = False, bias: bool = True,
                    outputs: tuple[str, ...] = ("Y", "Y_h"), name: str = "",
                    **attrs) -> tuple[object, dict[str, np.ndarray]]:
    """A one-node model of ``op``; ``initial`` is 'none', 'const' or 'input'
    (the initial states as initializers or as graph inputs). Returns the model
    and its feeds. The data depend on the case but not on ``layout``: layout 1
    holds the same numbers transposed (batch first)."""
    rng = rng_for(op, direction, initial, peepholes, bias, name)
    d, g = (2 if direction == "bidirectional" else 1), GATES[op]
    batch_first = (lambda a: np.swapaxes(a, 0, 1)) if layout == 1 else (lambda a: a)
    inits = {"W": rng.standard_normal((d, g * H, I)), "R": rng.standard_normal((d, g * H, H))}
    if bias:
        inits["B"] = rng.standard_normal((d, 2 * g * H))
    feeds = {"X": batch_first(rng.standard_normal((T, B, I)).astype(np.float32))}
    states = ["initial_h"] + (["initial_c"] if op == "LSTM" else [])
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, feeds["X"].shape)]
    for s in states if initial != "none" else []:
        value = batch_first(rng.standard_normal((d, B, H)).astype(np.float32))
        if initial == "const":
            inits[s] = value
        else:
            feeds[s] = value
            inputs.append(helper.make_tensor_value_info(s, TensorProto.FLOAT, value.shape))
    if peepholes:
        inits["P"] = rng.standard_normal((d, 3 * H))
    node_inputs = ["X", "W", "R", "B" if bias else "", "",
                   *[s if initial != "none" else "" for s in states]]
    if peepholes:
        node_inputs.append("P")
    while node_inputs[-1] == "":
        node_inputs.pop()
    names = ["Y", "Y_h", "Y_c"][:len(states) + 1]
    node = helper.make_node(op, node_inputs, [n if n in outputs else "" for n in names],
                            name=name or op.lower(), hidden_size=H, direction=direction,
                            layout=layout, **attrs)
    shapes = {"Y": [T, d, B, H] if layout == 0 else [B, T, d, H]}
    shapes["Y_h"] = shapes["Y_c"] = [d, B, H] if layout == 0 else [B, d, H]
    out_info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shapes[n]) for n in outputs]
    init = [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()]
    graph = helper.make_graph([node], "recurrent", inputs, out_info, init)
    return onnx_model(graph, opset=17), feeds


def onnxruntime_outputs(case: dict) -> list[np.ndarray]:
    """onnxruntime's outputs. Its CPU kernels refuse layout 1, so that case
    runs as layout 0 (the same numbers, time first) and its outputs are
    transposed back: layout 1 is defined as exactly that transposition."""
    if case.get("layout", 0) == 0:
        model, feeds = recurrent_model(**case)
        return ort_session(model.SerializeToString()).run(None, feeds)
    model, feeds = recurrent_model(**{**case, "layout": 0})
    got = ort_session(model.SerializeToString()).run(None, feeds)
    names = [o.name for o in model.graph.output]
    return [np.transpose(a, (2, 0, 1, 3)) if n == "Y" else np.swapaxes(a, 0, 1)
            for n, a in zip(names, got)]


def swir_outputs(model, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    imported = import_onnx(model, "unused.weights", inline_max=EVERYTHING_INLINE)
    assert not imported.weights
    verify(imported.module)
    main = imported.module.lookup("main")
    args = [feeds[p.name] for p in main.params]
    return interpreter_for(imported.module, Path(".")).run("main", args)


def check_against_onnxruntime(case: dict) -> None:
    want = onnxruntime_outputs(case)
    got = swir_outputs(*recurrent_model(**case))
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want)):
        assert a.shape == b.shape, f"output {k}: {a.shape} != {b.shape}"
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL, err_msg=f"output {k}")


CASES = {
    "lstm": dict(op="LSTM", outputs=("Y", "Y_h", "Y_c")),
    "lstm-reverse-inputs-peepholes": dict(op="LSTM", direction="reverse", initial="input",
                                          peepholes=True, outputs=("Y", "Y_h", "Y_c")),
    "lstm-bidirectional-layout1": dict(op="LSTM", direction="bidirectional", layout=1,
                                       initial="const", outputs=("Y", "Y_h", "Y_c")),
    "lstm-no-bias-last-only": dict(op="LSTM", bias=False, outputs=("Y_h",)),
    "lstm-activations": dict(op="LSTM", activations=["Sigmoid", "Relu", "Tanh"]),
    "gru": dict(op="GRU"),
    "gru-linear-before-reset": dict(op="GRU", linear_before_reset=1, initial="const"),
    "gru-bidirectional-inputs": dict(op="GRU", direction="bidirectional", initial="input",
                                     linear_before_reset=1),
    "gru-reverse-layout1": dict(op="GRU", direction="reverse", layout=1, initial="input"),
    "rnn": dict(op="RNN", initial="const"),
    "rnn-relu-bidirectional": dict(op="RNN", direction="bidirectional",
                                   activations=["Relu", "Tanh"], outputs=("Y",)),
}


@pytest.mark.parametrize("case", CASES)
def test_matches_onnxruntime(case):
    check_against_onnxruntime({**CASES[case], "name": case})


def with_sequence_lengths(model, lengths: list[int]):
    model.graph.initializer.append(numpy_helper.from_array(np.array(lengths, np.int32), "lens"))
    model.graph.node[0].input[4:] = ["lens"]
    return model


def test_equal_sequence_lengths_are_accepted():
    model, feeds = recurrent_model("LSTM", name="lens")
    want = ort_session(model.SerializeToString()).run(None, feeds)
    got = swir_outputs(with_sequence_lengths(model, [T] * B), feeds)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


def test_unrolled_size():
    """One input projection per direction (a matmul over all steps) and one
    recurrent matmul per step and direction: the unrolled module grows
    linearly with the sequence."""
    model, _ = recurrent_model("GRU", direction="bidirectional", name="size")
    imported = import_onnx(model, "unused.weights", inline_max=EVERYTHING_INLINE)
    ops = [i.opname for i in imported.module.lookup("main").walk()]
    # GRU: z and r together, then the candidate's own matmul, per step.
    assert ops.count("matmul") == 2 * (1 + 2 * T)


def _refused(model, message: str) -> None:
    with pytest.raises(ImportFailure) as e:
        import_onnx(model, "unused.weights", inline_max=EVERYTHING_INLINE)
    assert message in str(e.value), str(e.value)
    assert "\n" not in str(e.value)


def test_refusals():
    model, _ = recurrent_model("LSTM", clip=1.0, name="clipped")
    _refused(model, "node 'clipped' (LSTM): attribute 'clip' is not supported")
    model, _ = recurrent_model("LSTM", input_forget=1, name="coupled")
    _refused(model, "input_forget = 1 is not supported")
    model, _ = recurrent_model("GRU", activations=["HardSigmoid", "Tanh"], name="hard")
    _refused(model, "activation 'HardSigmoid' is not supported (Sigmoid, Tanh, Relu)")
    model, _ = recurrent_model("RNN", activations=["Tanh", "Tanh"], name="count")
    _refused(model, "2 activations, expected 1")


def _with_initializer(model, name: str, value: np.ndarray):
    inits = model.graph.initializer
    inits.remove(next(t for t in inits if t.name == name))
    inits.append(numpy_helper.from_array(value.astype(np.float32), name))
    return model


def test_inputs_of_the_wrong_shape_are_refused():
    model, _ = recurrent_model("LSTM", direction="bidirectional", name="one_w")
    _refused(_with_initializer(model, "W", np.zeros((1, 4 * H, I))),
             f"input 1 (the input weight W) has shape [1, {4 * H}, {I}], "
             f"expected [2, {4 * H}, {I}]")
    model, _ = recurrent_model("GRU", name="short_b")
    _refused(_with_initializer(model, "B", np.zeros((1, 3 * H))),
             f"input 3 (the bias B) has shape [1, {3 * H}], expected [1, {6 * H}]")
    model, _ = recurrent_model("RNN", initial="const", layout=1, name="state")
    _refused(_with_initializer(model, "initial_h", np.zeros((1, B, H))),
             f"input 5 (the initial_h) has shape [1, {B}, {H}], expected [{B}, 1, {H}]")


def test_padded_sequences_are_refused():
    model, _ = recurrent_model("LSTM", name="padded")
    _refused(with_sequence_lengths(model, [T, T - 2]), f"sequence lengths [{T}, {T - 2}] differ from the sequence's {T} steps")


def test_weights_must_be_constants():
    model, _ = recurrent_model("RNN", name="live")
    r = next(t for t in model.graph.initializer if t.name == "R")
    model.graph.initializer.remove(r)
    model.graph.input.append(helper.make_tensor_value_info("R", TensorProto.FLOAT,
                                                           list(r.dims)))
    _refused(model, "input 2 ('R', the recurrence weight R) must be a constant")
