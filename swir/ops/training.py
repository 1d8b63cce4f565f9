"""Training ops: losses, optimiser updates and batch normalisation in training
mode. Each is *composite*: its meaning is also written with other graph ops
(its decomposition, swir.lowering.composite), which -decompose puts in its
place before fusion, so its C is that of ops every stage already compiles.
Until then it is one op, so -differentiate uses its own adjoint rule (the
cross-entropy's is softmax minus one-hot, not the chain through a one-hot
product) and the interpreter its own numpy kernel, which the tests hold the
decomposition to.
"""

from __future__ import annotations

from swir.ir.core import Instruction
from swir.ir.types import TensorType, Type
from swir.ops.registry import Attr, Category, OpDef, OpError, Operands, register
from swir.ops.util import attr, tensor_arg

GRAPH = frozenset({"graph"})


def _float_tensor(t: TensorType, what: str) -> None:
    if not t.element.is_float:
        raise OpError(f"{what} must be a float tensor, got {t}")


def _same(a: TensorType, b: TensorType, what: str) -> None:
    if a != b:
        raise OpError(f"{what} must have the type of the parameter ({a}), got {b}")


def _infer_cross_entropy(inst: Instruction) -> list[Type]:
    logits, labels = tensor_arg(inst, 0), tensor_arg(inst, 1)
    _float_tensor(logits, "logits")
    if logits.rank != 2:
        raise OpError(f"logits must be N x C, got {logits}")
    if labels.element.is_float or labels.shape != logits.shape[:1]:
        raise OpError(f"labels must be {logits.shape[0]} integers (one class per row), "
                      f"got {labels}")
    return [TensorType((), logits.element)]


def _infer_mse(inst: Instruction) -> list[Type]:
    pred, target = tensor_arg(inst, 0), tensor_arg(inst, 1)
    _float_tensor(pred, "prediction")
    if pred != target:
        raise OpError(f"target must have the prediction's type ({pred}), got {target}")
    return [TensorType((), pred.element)]


def _infer_sgd(inst: Instruction) -> list[Type]:
    p = tensor_arg(inst, 0)
    _float_tensor(p, "parameter")
    for i, what in ((1, "gradient"), (2, "velocity"))[:len(inst.args) - 1]:
        _same(p, tensor_arg(inst, i), what)
    if len(inst.args) == 2 and attr(inst, "momentum") != 0:
        raise OpError("momentum needs the velocity operand")
    return [p] * (len(inst.args) - 1)


def _infer_adam(inst: Instruction) -> list[Type]:
    p = tensor_arg(inst, 0)
    _float_tensor(p, "parameter")
    for i, what in ((1, "gradient"), (2, "first moment"), (3, "second moment")):
        _same(p, tensor_arg(inst, i), what)
    step = tensor_arg(inst, 4)
    if step != TensorType((), p.element):
        raise OpError(f"step must be a {TensorType((), p.element)} count, got {step}")
    return [p, p, p]


def _infer_batch_norm_train(inst: Instruction) -> list[Type]:
    x = tensor_arg(inst, 0)
    _float_tensor(x, "input")
    if x.rank < 2:
        raise OpError(f"input must be N x C x ..., got {x}")
    vec = TensorType((x.shape[1],), x.element)
    for i, what in enumerate(("scale", "bias", "running mean", "running variance"), 1):
        if tensor_arg(inst, i) != vec:
            raise OpError(f"{what} must be {vec}, got {tensor_arg(inst, i)}")
    if x.num_elements // x.shape[1] < 2:
        raise OpError("training batch_norm needs more than one value per channel")
    return [x, vec, vec]


def _fraction(v: float, name: str) -> None:
    if not 0 <= v <= 1:
        raise OpError(f"{name} must be in [0, 1], got {v}")


def _non_negative(v: float, name: str) -> None:
    if v < 0:
        raise OpError(f"{name} must be >= 0, got {v}")


def _op(name: str, summary: str, operands: Operands, infer, category: Category,
        attrs: tuple[Attr, ...] = (), **kw) -> OpDef:
    return register(OpDef(name, summary, stages=GRAPH, operands=operands, attrs=attrs,
                          infer=infer, category=category, composite=True, **kw))


_LR = Attr("lr", "float", required=True, doc="the learning rate, >= 0", check=_non_negative)
_WEIGHT_DECAY = Attr("weight_decay", "float", doc="L2 penalty added to the gradient, >= 0",
                     default=0.0, check=_non_negative)

SOFTMAX_CROSS_ENTROPY = _op(
    "softmax_cross_entropy", "Mean over the rows of -log_softmax(logits)[row, label] "
    "(PyTorch's cross_entropy); labels outside [0, C) are an error.",
    Operands(("logits", "labels"), "logits (N x C) and labels (N integers)"),
    _infer_cross_entropy, Category.REDUCTION)
MSE_LOSS = _op("mse_loss", "Mean of (prediction - target)^2 over every element.",
               Operands(("prediction", "target"), "prediction and target"), _infer_mse,
               Category.REDUCTION)
SGD_UPDATE = _op(
    "sgd_update", "PyTorch's SGD step: g = grad + weight_decay * p; v' = momentum * v + g; "
    "p' = p - lr * v' (without momentum: p - lr * g). Results: p' (and v').",
    Operands(("param", "grad", "velocity?"), "parameter, gradient and, with momentum, "
                                             "velocity"),
    _infer_sgd, Category.ELEMENTWISE,
    (_LR, Attr("momentum", "float", doc="in [0, 1]", default=0.0, check=_fraction),
     _WEIGHT_DECAY), differentiable=False)
ADAM_UPDATE = _op(
    "adam_update", "PyTorch's Adam step t (the step operand, counting from 1): "
    "m' = b1 m + (1 - b1) g; v' = b2 v + (1 - b2) g^2; "
    "p' = p - lr (m' / (1 - b1^t)) / (sqrt(v' / (1 - b2^t)) + epsilon). Results: p', m', v'.",
    Operands(("param", "grad", "m", "v", "step"), "parameter, gradient, both moments, step"),
    _infer_adam, Category.ELEMENTWISE,
    (_LR, Attr("beta1", "float", default=0.9, check=_fraction),
     Attr("beta2", "float", default=0.999, check=_fraction),
     Attr("epsilon", "float", default=1e-8, check=_non_negative), _WEIGHT_DECAY),
    differentiable=False)
BATCH_NORM_TRAIN = _op(
    "batch_norm_train", "Batch normalisation in training mode over channel axis 1: "
    "normalised by the batch's mean and (biased) variance; results y, the updated running "
    "mean and running variance ((1 - momentum) r + momentum * batch statistic, the "
    "variance unbiased, as PyTorch).",
    Operands(("x", "scale", "bias", "running_mean", "running_var"),
             "x, scale, bias, running mean, running variance"),
    _infer_batch_norm_train, Category.REDUCTION,
    (Attr("epsilon", "float", doc="> 0", default=1e-5, check=_non_negative),
     Attr("momentum", "float", doc="in [0, 1]", default=0.1, check=_fraction)))
