"""ONNX's recurrent layers (LSTM, GRU, RNN) → swir graph ops, unrolled over time.

swir's graph stage has no loop op, and a model's sequence length is known when
it is imported (shapes are static), so each layer becomes its time steps
written out. The input projection of every step is one matmul over the whole
sequence (``X·Wᵀ + bias``, T·B rows), split into steps; each step adds the
recurrent projection ``H·Rᵀ`` and applies the gates, exactly as the ONNX
operator's definition writes them (so the result is onnxruntime's up to
summation order). Both directions of a bidirectional layer are unrolled, the
reverse one from the last step down.

The weights (W, R, B, P) must be constants: they are transposed and sliced per
direction here, once, rather than at run time. What is refused, with a
located error: sequence lengths that differ from the sequence's (padding is
not modelled), ``clip``, ``input_forget``, and activations other than
Sigmoid, Tanh and Relu. Exporters meet these rules: PyTorch's ``nn.LSTM`` /
``nn.GRU`` / ``nn.RNN`` and tf2onnx's Keras LSTM export plain layers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from swir.frontend.onnx_ops import Node, converter
from swir.ir.core import Value
from swir.ir.dtypes import dtype_of
from swir.ir.types import TensorType

# Gates per layer, in ONNX's weight order, and each layer's default activations.
GATES = {"LSTM": "iofc", "GRU": "zrh", "RNN": "i"}
DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"],
                       "RNN": ["Tanh"]}
ACTIVATIONS = {"Sigmoid": "sigmoid", "Tanh": "tanh", "Relu": "relu"}
COMMON_ATTRS = "activation_alpha activation_beta activations clip direction hidden_size layout"


@dataclass
class Layer:
    """What one recurrent node computes, checked: sizes and per-direction weights."""
    n: Node
    steps: int                    # T
    batch: int                    # B
    hidden: int                   # H
    directions: list[str]         # "forward" / "reverse", one per direction
    activations: list[list[str]]  # swir op names, per direction
    dtype: np.dtype

    def weight(self, i: int, what: str) -> np.ndarray:
        w = self.n.const(i, what)
        if w.dtype != self.dtype:
            self.n.fail(f"the {what} is {w.dtype}, the input {self.dtype}")
        return w

    def weights(self, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Direction d's W [G·H, I], R [G·H, H] and B [2·G·H] (zeros without B)."""
        w, r = self.weight(1, "input weight W")[d], self.weight(2, "recurrence weight R")[d]
        b = self.weight(3, "bias B")[d] if self.n.has(3) else \
            np.zeros(2 * w.shape[0], self.dtype)
        return w, r, b

    def const(self, a: np.ndarray, what: str) -> Value:
        return self.n.imp.constant(np.ascontiguousarray(a, dtype=self.dtype),
                                   f"{self.n.outputs[0] or self.n.proto.name}.{what}")

    def state_type(self) -> TensorType:
        return TensorType((self.batch, self.hidden), self.n.type(0).element)


def _layer(n: Node) -> Layer:
    x = n.type(0)
    if x.rank != 3 or not x.element.is_float:
        n.fail(f"input 0 must be a 3-D float tensor, it is {x}")
    layout = int(n.attr("layout", 0))
    if layout not in (0, 1):
        n.fail(f"layout {layout} is not 0 or 1")
    steps, batch = (x.shape[0], x.shape[1]) if layout == 0 else (x.shape[1], x.shape[0])
    gates = len(GATES[n.op])
    r = n.const(2, "recurrence weight R")
    hidden = int(n.attr("hidden_size", r.shape[-1]))
    direction = n.attr("direction", "forward")
    directions = {"forward": ["forward"], "reverse": ["reverse"],
                  "bidirectional": ["forward", "reverse"]}.get(direction)
    if directions is None:
        n.fail(f"direction '{direction}' is not forward, reverse or bidirectional")
    _check_shapes(n, len(directions), gates, hidden, x.shape[2], batch)
    _refuse_unsupported(n, steps)
    return Layer(n, steps, batch, hidden, directions,
                 _activations(n, len(directions)), np.dtype(dtype_of(x)))


def _check_shapes(n: Node, d: int, gates: int, hidden: int, features: int, batch: int) -> None:
    """Every input's shape, as the operator's definition gives it."""
    state = [d, batch, hidden] if int(n.attr("layout", 0)) == 0 else [batch, d, hidden]
    expected = {1: ("input weight W", [d, gates * hidden, features]),
                2: ("recurrence weight R", [d, gates * hidden, hidden]),
                3: ("bias B", [d, 2 * gates * hidden]),
                4: ("sequence lengths", [batch]),
                5: ("initial_h", state), 6: ("initial_c", state), 7: ("peepholes P", [d, 3 * hidden])}
    for i, (what, shape) in expected.items():
        if n.has(i) and list(n.type(i).shape) != shape:
            n.fail(f"input {i} (the {what}) has shape {list(n.type(i).shape)}, expected {shape}")


def _refuse_unsupported(n: Node, steps: int) -> None:
    if n.attr("clip") is not None:
        n.fail("attribute 'clip' is not supported")
    if int(n.attr("input_forget", 0)):
        n.fail("input_forget = 1 is not supported")
    if n.attr("activation_alpha") or n.attr("activation_beta"):
        n.fail("activation_alpha / activation_beta are not supported")
    if n.has(4):
        lens = n.const(4, "sequence lengths")
        if lens.size and not (lens == steps).all():
            n.fail(f"sequence lengths {lens.reshape(-1).tolist()} differ from the sequence's "
                   f"{steps} steps (padded sequences are not supported)")


def _activations(n: Node, directions: int) -> list[list[str]]:
    default = DEFAULT_ACTIVATIONS[n.op]
    names = [a.decode("utf-8", "replace") if isinstance(a, bytes) else a
             for a in n.attr("activations", default * directions)]
    if len(names) != len(default) * directions:
        n.fail(f"{len(names)} activations, expected {len(default) * directions}")
    for a in names:
        if a not in ACTIVATIONS:
            n.fail(f"activation '{a}' is not supported (Sigmoid, Tanh, Relu)")
    k = len(default)
    return [[ACTIVATIONS[a] for a in names[d * k:(d + 1) * k]] for d in range(directions)]


# -- the shared unrolling -----------------------------------------------------------------

def _time_major(layer: Layer) -> Value:
    x = layer.n.value(0)
    if int(layer.n.attr("layout", 0)) == 1:
        x = layer.n.emit("transpose", x, perm=[1, 0, 2])
    return x


def _input_projection(layer: Layer, x: Value, w: np.ndarray, bias: np.ndarray) -> list[Value]:
    """X·Wᵀ + bias for every step at once, split into T values of shape [B, G·H]."""
    n, t, b = layer.n, layer.steps, layer.batch
    rows = n.emit("reshape", x, shape=[t * b, x.type.shape[2]])
    xw = n.emit("add", n.emit("matmul", rows, layer.const(w.T, "Wt")), layer.const(bias, "b"))
    if t == 1:
        return [xw]
    parts = n.emit_all("split", [n.emit("reshape", xw, shape=[t, b, w.shape[0]])],
                       {"axis": 0, "sizes": [1] * t})
    return [n.emit("reshape", p, shape=[b, w.shape[0]]) for p in parts]


def _initial(layer: Layer, i: int, d: int, what: str) -> Value:
    """Direction d's initial state from input i ([D, B, H], or [B, D, H] in
    layout 1), zeros without it."""
    n = layer.n
    axis = int(n.attr("layout", 0))
    if not n.has(i):
        return layer.const(np.zeros((layer.batch, layer.hidden)), f"{what}0")
    if n.is_const(i):
        return layer.const(np.take(n.const(i, what), d, axis=axis), f"{what}0_{d}")
    s = n.emit("slice", n.value(i), starts=[d], ends=[d + 1], axes=[axis])
    return n.emit("reshape", s, shape=[layer.batch, layer.hidden])


def _gates(n: Node, v: Value, count: int) -> list[Value]:
    if count == 1:
        return [v]
    h = v.type.shape[1] // count
    return n.emit_all("split", [v], {"axis": 1, "sizes": [h] * count})


def _unrolled(layer: Layer, step) -> tuple[list[list[Value]], list[Value], list[Value]]:
    """Run ``step(layer, direction, x_proj, state) -> state`` over the steps
    of each direction (after ``step.prepare``). Returns per direction the hidden state after each step
    (in time order), the last hidden state and the last cell state (or None)."""
    x = _time_major(layer)
    per_step, last_h, last_c = [], [], []
    for d, direction in enumerate(layer.directions):
        projections, state = step.prepare(layer, x, d)
        order = range(layer.steps) if direction == "forward" else range(layer.steps - 1, -1, -1)
        hs: list[Value | None] = [None] * layer.steps
        for t in order:
            state = step(layer, d, projections[t], state)
            hs[t] = state[0]
        per_step.append(hs)
        last_h.append(state[0])
        last_c.append(state[1] if len(state) > 1 else None)
    return per_step, last_h, last_c


def _outputs(layer: Layer, per_step, last_h, last_c) -> list:
    """Y [T, D, B, H], Y_h [D, B, H] (and Y_c), in the node's layout; None for an
    output the model does not use."""
    n = layer.n
    layout1 = int(n.attr("layout", 0)) == 1
    live = [i < len(n.outputs) and n.outputs[i] in n.live_outputs for i in range(3)]
    out: list = [None, None, None]
    if live[0]:
        dirs = [n.emit("unsqueeze", _stack(n, hs), axes=[1]) for hs in per_step]  # [T, 1, B, H]
        y = dirs[0] if len(dirs) == 1 else n.emit("concat", *dirs, axis=1)
        out[0] = n.emit("transpose", y, perm=[2, 0, 1, 3]) if layout1 else y
    for i, last in ((1, last_h), (2, last_c)):
        if live[i]:
            s = _stack(n, last)                                          # [D, B, H]
            out[i] = n.emit("transpose", s, perm=[1, 0, 2]) if layout1 else s
    return out[:len(n.outputs)]


def _stack(n: Node, values: list[Value]) -> Value:
    """The values stacked along a new first axis."""
    values = [n.emit("unsqueeze", v, axes=[0]) for v in values]
    return values[0] if len(values) == 1 else n.emit("concat", *values, axis=0)


def _convert(n: Node, step) -> list:
    layer = _layer(n)
    return _outputs(layer, *_unrolled(layer, step))


# -- the three cells ------------------------------------------------------------------------

class LSTMStep:
    """it = f(Xt·Wiᵀ + Ht-1·Riᵀ + Pi⊙Ct-1 + Wbi + Rbi), ft likewise with Pf,
    ct = g(Xt·Wcᵀ + Ht-1·Rcᵀ + Wbc + Rbc), Ct = ft⊙Ct-1 + it⊙ct,
    ot = f(Xt·Woᵀ + Ht-1·Roᵀ + Po⊙Ct + Wbo + Rbo), Ht = ot⊙h(Ct)."""

    def prepare(self, layer: Layer, x: Value, d: int):
        h4 = 4 * layer.hidden
        w, r, b = layer.weights(d)
        self.rt = layer.const(r.T, f"Rt{d}")
        self.peep = None
        if layer.n.has(7):
            p = layer.weight(7, "peephole weights P")[d]
            self.peep = [layer.const(p[k * layer.hidden:(k + 1) * layer.hidden], f"P{k}_{d}")
                         for k in range(3)]
        state = (_initial(layer, 5, d, "initial_h"), _initial(layer, 6, d, "initial_c"))
        return _input_projection(layer, x, w, b[:h4] + b[h4:]), state

    def __call__(self, layer: Layer, d: int, xw: Value, state):
        n, (h, c) = layer.n, state
        f, g, act_h = layer.activations[d]
        pre = n.emit("add", xw, n.emit("matmul", h, self.rt))
        i, o, fg, cc = _gates(n, pre, 4)
        if self.peep is not None:
            i = n.emit("add", i, n.emit("mul", self.peep[0], c))
            fg = n.emit("add", fg, n.emit("mul", self.peep[2], c))
        c = n.emit("add", n.emit("mul", n.emit(f, fg), c),
                   n.emit("mul", n.emit(f, i), n.emit(g, cc)))
        if self.peep is not None:
            o = n.emit("add", o, n.emit("mul", self.peep[1], c))
        return n.emit("mul", n.emit(f, o), n.emit(act_h, c)), c


class GRUStep:
    """zt = f(Xt·Wzᵀ + Ht-1·Rzᵀ + Wbz + Rbz), rt likewise, then
    ht = g(Xt·Whᵀ + (rt⊙Ht-1)·Rhᵀ + Rbh + Wbh) (linear_before_reset = 0) or
    ht = g(Xt·Whᵀ + rt⊙(Ht-1·Rhᵀ + Rbh) + Wbh) (otherwise), and
    Ht = (1 - zt)⊙ht + zt⊙Ht-1."""

    def prepare(self, layer: Layer, x: Value, d: int):
        hs = layer.hidden
        w, r, b = layer.weights(d)
        wb, rb = b[:3 * hs], b[3 * hs:]
        self.before_reset = bool(int(layer.n.attr("linear_before_reset", 0)))
        self.rt_zr = layer.const(r[:2 * hs].T, f"Rzrt{d}")
        self.rt_h = layer.const(r[2 * hs:].T, f"Rht{d}")
        self.rb_h = layer.const(rb[2 * hs:], f"Rbh{d}")
        self.one = layer.const(np.ones(()), "one")
        bias = np.concatenate([wb[:2 * hs] + rb[:2 * hs], wb[2 * hs:]])
        return _input_projection(layer, x, w, bias), (_initial(layer, 5, d, "initial_h"),)

    def __call__(self, layer: Layer, d: int, xw: Value, state):
        n, (h,) = layer.n, state
        f, g = layer.activations[d]
        x_zr, x_h = n.emit_all("split", [xw], {"axis": 1, "sizes": [2 * layer.hidden,
                                                                     layer.hidden]})
        z, r = _gates(n, n.emit("add", x_zr, n.emit("matmul", h, self.rt_zr)), 2)
        z, r = n.emit(f, z), n.emit(f, r)
        if self.before_reset:
            hr = n.emit("add", n.emit("matmul", h, self.rt_h), self.rb_h)
            cand = n.emit("add", x_h, n.emit("mul", r, hr))
        else:
            hr = n.emit("matmul", n.emit("mul", r, h), self.rt_h)
            cand = n.emit("add", x_h, n.emit("add", hr, self.rb_h))
        cand = n.emit(g, cand)
        keep = n.emit("sub", self.one, z)
        return (n.emit("add", n.emit("mul", keep, cand), n.emit("mul", z, h)),)


class RNNStep:
    """Ht = f(Xt·Wiᵀ + Ht-1·Riᵀ + Wbi + Rbi)."""

    def prepare(self, layer: Layer, x: Value, d: int):
        hs = layer.hidden
        w, r, b = layer.weights(d)
        self.rt = layer.const(r.T, f"Rt{d}")
        return _input_projection(layer, x, w, b[:hs] + b[hs:]), (_initial(layer, 5, d,
                                                                          "initial_h"),)

    def __call__(self, layer: Layer, d: int, xw: Value, state):
        n, (h,) = layer.n, state
        (f,) = layer.activations[d]
        return (n.emit(f, n.emit("add", xw, n.emit("matmul", h, self.rt))),)


@converter("LSTM", attrs=COMMON_ATTRS + " input_forget")
def lstm(n: Node) -> list:
    return _convert(n, LSTMStep())


@converter("GRU", attrs=COMMON_ATTRS + " linear_before_reset")
def gru(n: Node) -> list:
    return _convert(n, GRUStep())


@converter("RNN", attrs=COMMON_ATTRS)
def rnn(n: Node) -> list:
    return _convert(n, RNNStep())
