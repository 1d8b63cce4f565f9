"""The decompositions of the composite graph ops (swir/ops/training.py): each
op written with ops every stage compiles (the DECOMPOSITION hook).
:func:`decompose` puts them in the op's place; -decompose runs it before
fusion (so an optimiser step becomes one fused element-wise kernel) and
-lower-loops on whatever is left.
"""

from __future__ import annotations

from swir.ir.builder import Builder
from swir.ir.core import Dense, DenseSlot, Instruction, Value
from swir.ir.graph_builder import GraphBuilder
from swir.ir.types import TensorType
from swir.ops.registry import DECOMPOSITION
from swir.ops.training import (ADAM_UPDATE, BATCH_NORM_TRAIN, MSE_LOSS, SGD_UPDATE,
                               SOFTMAX_CROSS_ENTROPY)
from swir.ops.util import attr


def decompose(inst: Instruction) -> None:
    """Replace a composite op by its decomposition."""
    g = GraphBuilder(Builder(inst.parent, before=inst))
    outs = DECOMPOSITION.of(inst.opdef)(g, inst)
    for old, new in zip(inst.results, outs):
        old.replace_all_uses_with(new)
    inst.erase()


def one_hot(g: GraphBuilder, labels: Value, classes: int, like: Value) -> Value:
    """labels (N integers) as N x classes rows of 0 / 1 of ``like``'s element type."""
    element = labels.type.element
    iota = g.b.create("const", DenseSlot(Dense(tuple(range(classes)))),
                      types=[TensorType((classes,), element)])
    column = g.reshape(labels, labels.type.shape + (1,))
    return g.op("cast", g.op("eq", column, iota), to=like.type.element)


@DECOMPOSITION.register(SOFTMAX_CROSS_ENTROPY)
def _cross_entropy(g: GraphBuilder, inst: Instruction) -> list[Value]:
    logits, labels = inst.args
    n, c = logits.type.shape
    log_p = g.op("log_softmax", logits, axis=1)
    picked = g.op("mul", log_p, one_hot(g, labels, c, logits))
    total = g.op("reduce_sum", picked, axes=(0, 1), keepdims=False)
    return [g.scale(total, -1.0 / n)]


@DECOMPOSITION.register(MSE_LOSS)
def _mse(g: GraphBuilder, inst: Instruction) -> list[Value]:
    d = g.op("sub", *inst.args)
    return [g.op("reduce_mean", g.op("mul", d, d), keepdims=False)]


def _decayed(g: GraphBuilder, inst: Instruction, p: Value, grad: Value) -> Value:
    wd = attr(inst, "weight_decay")
    return grad if wd == 0 else g.op("add", grad, g.scale(p, wd))


@DECOMPOSITION.register(SGD_UPDATE)
def _sgd(g: GraphBuilder, inst: Instruction) -> list[Value]:
    p, grad = inst.args[:2]
    step = _decayed(g, inst, p, grad)
    if len(inst.args) == 2:
        return [g.op("sub", p, g.scale(step, attr(inst, "lr")))]
    v = g.op("add", g.scale(inst.args[2], attr(inst, "momentum")), step)
    return [g.op("sub", p, g.scale(v, attr(inst, "lr"))), v]


@DECOMPOSITION.register(ADAM_UPDATE)
def _adam(g: GraphBuilder, inst: Instruction) -> list[Value]:
    p, grad, m, v, t = inst.args
    b1, b2 = attr(inst, "beta1"), attr(inst, "beta2")
    grad = _decayed(g, inst, p, grad)
    m2 = g.op("add", g.scale(m, b1), g.scale(grad, 1 - b1))
    v2 = g.op("add", g.scale(v, b2), g.scale(g.op("mul", grad, grad), 1 - b2))
    one = g.scalar(1.0, p)

    def correction(beta: float) -> Value:   # 1 - beta^t
        return g.op("sub", one, g.op("pow", g.scalar(beta, p), t))
    m_hat = g.op("div", m2, correction(b1))
    v_hat = g.op("div", v2, correction(b2))
    denom = g.op("add", g.op("sqrt", v_hat), g.scalar(attr(inst, "epsilon"), p))
    return [g.op("sub", p, g.op("div", g.scale(m_hat, attr(inst, "lr")), denom)), m2, v2]


def batch_statistics(g: GraphBuilder, x: Value, eps: float) -> tuple[Value, Value, Value]:
    """The batch mean and (biased) variance per channel (kept N x C x 1 ...), and
    1 / sqrt(variance + eps)."""
    axes = tuple(a for a in range(x.type.rank) if a != 1)
    mean = g.op("reduce_mean", x, axes=axes, keepdims=True)
    centred = g.op("sub", x, mean)
    var = g.op("reduce_mean", g.op("mul", centred, centred), axes=axes, keepdims=True)
    return mean, var, g.op("rsqrt", g.op("add", var, g.scalar(eps, var)))


@DECOMPOSITION.register(BATCH_NORM_TRAIN)
def _batch_norm_train(g: GraphBuilder, inst: Instruction) -> list[Value]:
    x, scale, bias, r_mean, r_var = inst.args
    c = x.type.shape[1]
    ch = (1, c) + (1,) * (x.type.rank - 2)
    mean, var, r = batch_statistics(g, x, attr(inst, "epsilon"))
    x_hat = g.op("mul", g.op("sub", x, mean), r)
    y = g.op("add", g.op("mul", x_hat, g.reshape(scale, ch)), g.reshape(bias, ch))
    mom = attr(inst, "momentum")
    count = x.type.num_elements // c
    new_mean = g.op("add", g.scale(r_mean, 1 - mom), g.scale(g.reshape(mean, (c,)), mom))
    unbiased = g.scale(g.reshape(var, (c,)), mom * count / (count - 1))
    return [y, new_mean, g.op("add", g.scale(r_var, 1 - mom), unbiased)]


def decompose_all(module) -> int:
    """Decompose every composite op of the module's graph code; how many."""
    found = [i for i in module.walk() if i.opdef is not None and i.opdef.composite]
    for inst in found:
        decompose(inst)
    return len(found)
