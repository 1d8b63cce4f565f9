"""ONNX operators → swir graph ops: one converter per operator.

A converter receives a :class:`Node` (the node, its inputs as swir values or
import-time constants, its attributes) and returns one entry per node output:
a swir value, a constant array, or None for an output it cannot produce (an
error only if the model uses that output). Every attribute a converter does
not name in its registration is rejected, and each converter rejects the
attribute values and inputs swir cannot express, so a model is translated
exactly or not at all. docs/frontend.md lists what each converter takes.

Where a swir op's definition names its ONNX counterpart (``OpDef.onnx``), the
converter is attached to that definition as its ONNX_IMPORT hook
(``@converter(CONV2D, ...)``); an element-wise op without attributes needs
none (its operands map 1:1). The ONNX operators no op names are registered
by name: those without a swir counterpart (Gemm, Identity, Shape, ...) and
those that map onto a swir op with a translation (variadic Max / Min onto
max / min, Cast / CastLike onto cast, Where onto select, Pow with an exponent
of another type). Each ONNX operator has one converter (a second one, or one
by name for an operator an op names, is an error), and an op that names an
ONNX operator without one is an error when this module loads.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from swir.frontend.onnx_graph import describe
from swir.frontend.onnx_types import (ImportFailure, Tensor, numpy_element, onnx_modules,
                                      swir_element)
from swir.ir.core import Value
from swir.ir.dtypes import dtype_of
from swir.ir.types import TensorType, size_error
from swir.ops.graph import (ARGMAX, AVG_POOL2D, BATCH_NORM, CLIP, CONCAT, CONV2D, CONV_TRANSPOSE2D,
                            EXPAND, FLATTEN, GATHER, GELU, GLOBAL_AVG_POOL2D, LAYER_NORM,
                            LEAKY_RELU, LOG_SOFTMAX, MATMUL, MAX_POOL2D, PAD, REDUCTIONS, RESHAPE,
                            RESIZE_NEAREST, SLICE, SOFTMAX, SPLIT, SQUEEZE, TRANSPOSE, UNSQUEEZE)
from swir.ops.registry import SCALAR_FORM, Hook, OpDef, OpError, all_ops

Converter = Callable[["Node"], list]
# A converter and the ONNX attributes it reads (any other is refused).
Entry = tuple[Converter, frozenset[str]]


def _converts_one_to_one(op: OpDef) -> bool:
    """An element-wise op without attributes converts 1:1 from its ONNX operator."""
    return SCALAR_FORM in op.traits and not op.attrs


# The converter of each op whose definition names an ONNX operator.
ONNX_IMPORT = Hook("ONNX converter",
                   lambda op: op.onnx is not None and not _converts_one_to_one(op))
# The converters of ONNX operators that no swir op names, by ONNX name.
ONNX_ONLY: dict[str, Entry] = {}

# Evaluating these at import time would not give what running the model gives.
NEVER_FOLD = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
              "Multinomial", "Bernoulli", "Dropout"}


class Node:
    """One ONNX node being imported: typed access to its inputs and attributes."""

    def __init__(self, imp, proto, index: int) -> None:
        onnx, _, _ = onnx_modules()
        self.imp = imp
        self.proto = proto
        self.op = proto.op_type
        # The swir op whose definition names this ONNX operator (set by convert).
        self.definition: OpDef | None = None
        self.inputs = list(proto.input)
        self.outputs = list(proto.output)
        self.where = describe(proto, index)
        self.attrs: dict[str, Any] = {}
        for a in proto.attribute:
            v = onnx.helper.get_attribute_value(a)
            self.attrs[a.name] = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
        self.live_outputs = {o for o in self.outputs if o and o in imp.used}

    def fail(self, message: str):
        raise ImportFailure(f"{self.where}: {message}")

    # -- inputs ----------------------------------------------------------------------
    def has(self, i: int) -> bool:
        return i < len(self.inputs) and self.inputs[i] != ""

    def tensor(self, i: int) -> Tensor:
        if not self.has(i):
            self.fail(f"input {i} is required")
        return self.imp.values[self.inputs[i]]

    def is_const(self, i: int) -> bool:
        return self.has(i) and isinstance(self.tensor(i), np.ndarray)

    def value(self, i: int) -> Value:
        """Input i as a swir value (a constant becomes a global)."""
        t = self.tensor(i)
        if isinstance(t, np.ndarray):
            return self.imp.constant(t, self.inputs[i])
        return t

    def const(self, i: int, what: str) -> np.ndarray:
        """Input i, which must be known at import time."""
        t = self.tensor(i)
        if not isinstance(t, np.ndarray):
            self.fail(f"input {i} ('{self.inputs[i]}', the {what}) must be a constant: swir "
                      "needs it at compile time")
        return t

    def ints(self, i: int, what: str) -> list[int]:
        a = self.const(i, what)
        if a.dtype.kind not in "iu":
            self.fail(f"the {what} must be integers, got {a.dtype}")
        return [int(x) for x in a.reshape(-1)]

    def scalar(self, i: int, what: str) -> float | int:
        """A one-element constant: an int for integer tensors (a float would
        round int64 bounds beyond 2**53), else a float."""
        a = self.const(i, what)
        if a.size != 1:
            self.fail(f"the {what} must be a single value, got shape {list(a.shape)}")
        v = a.reshape(-1)[0]
        return int(v) if a.dtype.kind in "iu" else float(v)

    def type(self, i: int) -> TensorType:
        t = self.tensor(i)
        if isinstance(t, np.ndarray):
            return TensorType(tuple(t.shape), numpy_element(t, f"input '{self.inputs[i]}'"))
        assert isinstance(t.type, TensorType)
        return t.type

    # -- attributes ------------------------------------------------------------------
    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def int_list(self, name: str, default: list[int], length: int | None = None) -> list[int]:
        v = [int(x) for x in self.attrs.get(name, default)]
        if length is not None and len(v) != length:
            self.fail(f"attribute '{name}' has {len(v)} values, expected {length}")
        return v

    # -- output ----------------------------------------------------------------------
    def emit(self, opname: str, *args: Value, **attrs: Any) -> Value:
        """Add a swir op (its result is named after the node's output when the
        converter returns it)."""
        return self.emit_all(opname, list(args), attrs)[0]

    def emit_all(self, opname: str, args: list[Value], attrs: dict[str, Any]) -> list[Value]:
        try:
            inst = self.imp.builder.create_inst(opname, *args, attrs=attrs)
        except OpError as e:
            self.fail(f"swir's '{opname}' rejects it: {e}")
        for r in inst.results:
            too_large = size_error(r.type)
            if too_large:
                self.fail(f"its result {too_large}")
        self.imp.stats["ops"] += 1
        return list(inst.results)

    def constant(self, value: float | np.ndarray, like: TensorType, what: str) -> Value:
        """A constant of like's element type, as a global named after the output."""
        return self.imp.constant(np.asarray(value, dtype=dtype_of(like)),
                                 f"{self.outputs[0]}.{what}")

    def foldable(self) -> bool:
        if self.proto.domain not in ("", "ai.onnx") or self.op in NEVER_FOLD:
            return False
        if any(a.type in (5, 10) for a in self.proto.attribute):  # GRAPH, GRAPHS
            return False
        present = [i for i in range(len(self.inputs)) if self.has(i)]
        if not present:
            return self.op == "Constant"
        return all(self.is_const(i) for i in present)


def fold(n: Node) -> list:
    """Evaluate a node whose inputs are all constants with onnx's reference
    implementation."""
    _, _, ReferenceEvaluator = onnx_modules()
    feeds = {n.inputs[i]: n.tensor(i) for i in range(len(n.inputs)) if n.has(i)}
    try:
        results = ReferenceEvaluator(n.proto, opsets={"": n.imp.opset}).run(None, feeds)
    except Exception as e:  # noqa: BLE001  whatever the reference implementation raises
        text = str(e).strip().splitlines()
        n.fail(f"cannot evaluate it at import time: {text[0] if text else type(e).__name__}")
    out = []
    for r in results:
        if r is not None and not isinstance(r, (np.ndarray, np.generic)):
            n.fail(f"it makes a {type(r).__name__}, not a tensor (sequences and optionals "
                   "are not supported)")
        out.append(None if r is None else np.asarray(r))
    return out


def convert(n: Node) -> list:
    if n.proto.domain not in ("", "ai.onnx"):
        n.fail(f"operators of domain '{n.proto.domain}' are not supported")
    n.definition = _definition_of(n.op)
    entry = ONNX_ONLY.get(n.op) if n.definition is None else \
        ONNX_IMPORT.of(n.definition) or _one_to_one(n.definition)
    if entry is None:
        n.fail("this operator is not supported by swir-import (docs/frontend.md lists "
               "the supported ones)")
    fn, allowed = entry
    for name in n.attrs:
        if name not in allowed:
            n.fail(f"attribute '{name}' is not supported")
    check_attributes(n)
    return fn(n)


def check_attributes(n: Node) -> None:
    """Every attribute exists in the operator's schema at the model's opset and
    has the schema's type, and every required one is present (the ONNX
    checker's rules, kept here for --no-check)."""
    onnx, _, _ = onnx_modules()
    try:
        schema = onnx.defs.get_schema(n.op, n.imp.opset, "")
    except Exception:  # noqa: BLE001  SchemaError: no such operator at this opset
        n.fail(f"the operator does not exist in opset {n.imp.opset}")
    kinds = onnx.AttributeProto.AttributeType
    for a in n.proto.attribute:
        spec = schema.attributes.get(a.name)
        if spec is None:
            n.fail(f"attribute '{a.name}' does not exist in opset {n.imp.opset}")
        if a.type != int(spec.type):
            n.fail(f"attribute '{a.name}' must be {kinds.Name(int(spec.type))}, "
                   f"it is {kinds.Name(a.type) if a.type in kinds.values() else a.type}")
    for name, spec in schema.attributes.items():
        if spec.required and name not in n.attrs:
            n.fail(f"attribute '{name}' is required")


def _definition_of(onnx_op: str) -> OpDef | None:
    """The swir op whose definition names this ONNX operator, if any."""
    return next((d for d in all_ops() if d.onnx == onnx_op), None)


def converter(*targets: OpDef | str, attrs: str = "") -> Callable[[Converter], Converter]:
    """Register a converter: as the ONNX_IMPORT hook of each op definition in
    ``targets``, and by name for each ONNX operator (a string) no op names."""
    entry = (lambda fn: (fn, frozenset(attrs.split())))

    def register(fn: Converter) -> Converter:
        for t in targets:    # all checked before any is registered
            if isinstance(t, str):
                _check_onnx_only(t)
        for t in targets:
            if isinstance(t, OpDef):
                ONNX_IMPORT.register(t)(entry(fn))
            else:
                ONNX_ONLY[t] = entry(fn)
        return fn
    return register


def _check_onnx_only(onnx_op: str) -> None:
    owner = _definition_of(onnx_op)
    if owner is not None:
        raise ValueError(f"ONNX '{onnx_op}' is op '{owner.name}'s: register its converter "
                         "on the definition")
    if onnx_op in ONNX_ONLY:
        raise ValueError(f"two converters for ONNX '{onnx_op}'")


# -- element-wise ------------------------------------------------------------------------

def _one_to_one(op: OpDef) -> Entry | None:
    """The converter an element-wise op without attributes needs no code for:
    the ONNX operator's inputs are its operands."""
    if not _converts_one_to_one(op):
        return None
    return (lambda n: [n.emit(op.name, *(n.value(i) for i in range(op.num_args[0])))],
            frozenset())


@converter("Pow")
def pow_(n: Node) -> list:
    x = n.type(0)
    if n.type(1).element == x.element:
        exponent = n.value(1)
    elif n.is_const(1):  # ONNX lets the exponent have another type; swir's pow does not
        exponent = n.constant(n.const(1, "exponent"), x, "exponent")
    else:
        exponent = n.emit("cast", n.value(1), to=x.element)
    return [n.emit("pow", n.value(0), exponent)]


@converter("Max", "Min", "Sum", "Mean")
def variadic(n: Node) -> list:
    present = [i for i in range(len(n.inputs)) if n.has(i)]
    if not present:
        n.fail("it needs at least one input")
    op = {"Max": "max", "Min": "min"}.get(n.op, "add")
    acc = n.value(present[0])
    for i in present[1:]:
        acc = n.emit(op, acc, n.value(i))
    if n.op == "Mean":
        acc = n.emit("div", acc, n.constant(len(present), acc.type, "count"))
    return [acc]


@converter("Where")
def where(n: Node) -> list:
    return [n.emit("select", n.value(0), n.value(1), n.value(2))]


@converter("Identity")
def identity(n: Node) -> list:
    return [n.tensor(0)]


@converter("Dropout", attrs="seed")
def dropout(n: Node) -> list:
    if n.has(2) and (not n.is_const(2) or bool(n.const(2, "training mode").reshape(-1)[0])):
        n.fail("training mode is not supported (swir compiles inference: dropout is the "
               "identity)")
    return [n.tensor(0), None]


@converter(LEAKY_RELU, attrs="alpha")
def leaky_relu(n: Node) -> list:
    return [n.emit("leaky_relu", n.value(0), alpha=float(n.attr("alpha", 0.01)))]


@converter(CLIP)
def clip(n: Node) -> list:
    bounds = {}
    for i, key in ((1, "min"), (2, "max")):
        if n.has(i):
            bounds[key] = n.scalar(i, f"{key} bound")
    return [n.emit("clip", n.value(0), **bounds)]


@converter(GELU, attrs="approximate")
def gelu(n: Node) -> list:
    return [n.emit("gelu", n.value(0), approximate=n.attr("approximate", "none"))]


@converter("HardSigmoid", "HardSwish", attrs="alpha beta")
def hard_sigmoid(n: Node) -> list:
    x = n.type(0)
    alpha, beta = (float(n.attr("alpha", 0.2)), float(n.attr("beta", 0.5))) \
        if n.op == "HardSigmoid" else (1.0 / 6.0, 0.5)
    scaled = n.emit("mul", n.value(0), n.constant(alpha, x, "alpha"))
    gate = n.emit("clip", n.emit("add", scaled, n.constant(beta, x, "beta")), min=0.0, max=1.0)
    return [gate if n.op == "HardSigmoid" else n.emit("mul", n.value(0), gate)]


@converter("Cast", attrs="to saturate")
def cast(n: Node) -> list:
    to = swir_element(int(n.attr("to")), f"{n.where}: the target type")
    if n.type(0).element == to:
        return [n.tensor(0)]
    return [n.emit("cast", n.value(0), to=to)]


@converter("CastLike", attrs="saturate")
def cast_like(n: Node) -> list:
    to = n.type(1).element
    if n.type(0).element == to:
        return [n.tensor(0)]
    return [n.emit("cast", n.value(0), to=to)]


# -- shapes (known at import time) --------------------------------------------------------

@converter("Shape", attrs="start end")
def shape(n: Node) -> list:
    dims = list(n.type(0).shape)
    start, end = int(n.attr("start", 0)), n.attr("end")
    return [np.array(dims[slice(start, None if end is None else int(end))], dtype=np.int64)]


@converter("Size")
def size(n: Node) -> list:
    count = math.prod(n.type(0).shape)
    if count >= 2 ** 63:
        n.fail(f"the input has {count} elements, more than int64 holds")
    return [np.array(count, dtype=np.int64)]


# -- neural-network ops ------------------------------------------------------------------

def _spatial(n: Node, what: str) -> TensorType:
    x = n.type(0)
    if x.rank != 4:
        n.fail(f"only 2-D {what} (an N x C x H x W input) is supported; the input is {x}")
    return x


def _kernel(n: Node, from_weight: tuple[int, ...] | None = None) -> list[int]:
    if from_weight is not None:
        k = n.int_list("kernel_shape", list(from_weight), 2)
        if tuple(k) != tuple(from_weight):
            n.fail(f"kernel_shape {k} does not match the weight's {list(from_weight)}")
        return k
    if "kernel_shape" not in n.attrs:
        n.fail("attribute 'kernel_shape' is required")
    return n.int_list("kernel_shape", [], 2)


def _pads(n: Node, spatial: tuple[int, ...], kernel: list[int], strides: list[int],
          dilations: list[int]) -> list[int]:
    """[top, left, bottom, right] from pads or auto_pad (ONNX's pads order is
    [x1_begin, x2_begin, x1_end, x2_end], the same)."""
    auto = n.attr("auto_pad", "NOTSET")
    if auto == "NOTSET":
        pads = n.int_list("pads", [0, 0, 0, 0], 4)
        if min(pads) < 0:
            n.fail(f"negative pads {pads} are not supported")
        return pads
    if auto == "VALID":
        return [0, 0, 0, 0]
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        n.fail(f"auto_pad '{auto}' is not an ONNX value")
    begin, end = [], []
    for d, k, s, dil in zip(spatial, kernel, strides, dilations):
        total = max((-(-d // s) - 1) * s + (k - 1) * dil + 1 - d, 0)
        small, large = total // 2, total - total // 2
        begin.append(small if auto == "SAME_UPPER" else large)
        end.append(large if auto == "SAME_UPPER" else small)
    return begin + end


def _window(n: Node) -> tuple[list[int], list[int]]:
    strides, dilations = n.int_list("strides", [1, 1], 2), n.int_list("dilations", [1, 1], 2)
    if min(strides) <= 0 or min(dilations) <= 0:
        n.fail(f"strides {strides} and dilations {dilations} must be positive")
    return strides, dilations


def _conv_operands(n: Node, what: str, layout: str):
    """What Conv and ConvTranspose share: the 2-D input, the weight's kernel,
    strides, dilations, and the swir operands (bias optional)."""
    x = _spatial(n, what)
    w = n.type(1)
    if w.rank != 4:
        n.fail(f"the weight must be 4-D ({layout}), it is {w}")
    kernel = _kernel(n, w.shape[2:])
    strides, dilations = _window(n)
    args = [n.value(0), n.value(1)] + ([n.value(2)] if n.has(2) else [])
    return x, kernel, strides, dilations, args


@converter(CONV2D, attrs="auto_pad dilations group kernel_shape pads strides")
def conv(n: Node) -> list:
    x, kernel, strides, dilations, args = _conv_operands(n, "convolution",
                                                         "O x C/group x kH x kW")
    pads = _pads(n, x.shape[2:], kernel, strides, dilations)
    return [n.emit("conv2d", *args, stride=strides, pad=pads, dilation=dilations,
                   groups=int(n.attr("group", 1)))]


@converter(CONV_TRANSPOSE2D, attrs="auto_pad dilations group kernel_shape output_padding "
                                  "output_shape pads strides")
def conv_transpose(n: Node) -> list:
    x, kernel, strides, dilations, args = _conv_operands(n, "transposed convolution",
                                                         "C x O/group x kH x kW")
    out_pad = n.int_list("output_padding", [0, 0], 2)
    pads = _transposed_pads(n, x.shape[2:], kernel, strides, dilations, out_pad)
    return [n.emit("conv_transpose2d", *args, stride=strides, pad=pads, dilation=dilations,
                   output_padding=out_pad, groups=int(n.attr("group", 1)))]


def _transposed_pads(n: Node, spatial, kernel, strides, dilations, out_pad) -> list[int]:
    auto = n.attr("auto_pad", "NOTSET")
    if "output_shape" not in n.attrs and auto in ("NOTSET", "VALID"):
        return n.int_list("pads", [0, 0, 0, 0], 4) if auto == "NOTSET" else [0, 0, 0, 0]
    if auto not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        n.fail(f"auto_pad '{auto}' is not an ONNX value")
    target = n.int_list("output_shape", [d * s for d, s in zip(spatial, strides)])[-2:]
    begin, end = [], []
    for d, k, s, dil, op, t in zip(spatial, kernel, strides, dilations, out_pad, target):
        total = s * (d - 1) + op + (k - 1) * dil + 1 - t
        if total < 0:
            n.fail(f"output_shape {target} needs negative padding")
        small, large = total // 2, total - total // 2
        upper = auto == "SAME_UPPER"
        begin.append(small if upper else large)
        end.append(large if upper else small)
    return begin + end


def _pool_args(n: Node) -> tuple[TensorType, list[int], list[int], list[int], list[int]]:
    x = _spatial(n, "pooling")
    kernel = _kernel(n)
    strides, dilations = _window(n)
    if dilations != [1, 1] and n.attr("auto_pad", "NOTSET").startswith("SAME"):
        # The ONNX spec pads for the dilated window, onnxruntime for the undilated.
        n.fail("auto_pad SAME with dilations is not supported (onnxruntime and the ONNX "
               "specification disagree on its padding)")
    pads = _pads(n, x.shape[2:], kernel, strides, dilations)
    return x, kernel, strides, dilations, pads


def _ceil_mode(n: Node) -> bool:
    # With auto_pad SAME the output size is ceil(in / stride) by construction.
    return bool(n.attr("ceil_mode", 0)) and n.attr("auto_pad", "NOTSET") in ("NOTSET", "VALID")


@converter(MAX_POOL2D, attrs="auto_pad ceil_mode dilations kernel_shape pads storage_order strides")
def max_pool(n: Node) -> list:
    _, kernel, strides, dilations, pads = _pool_args(n)
    y = n.emit("max_pool2d", n.value(0), kernel=kernel, stride=strides, pad=pads,
               dilation=dilations, ceil_mode=_ceil_mode(n))
    return [y, None]   # the Indices output is not supported


@converter(AVG_POOL2D, attrs="auto_pad ceil_mode count_include_pad dilations kernel_shape "
                                "pads strides")
def average_pool(n: Node) -> list:
    _, kernel, strides, dilations, pads = _pool_args(n)
    if dilations != [1, 1]:
        n.fail(f"dilations {dilations} are not supported (swir's avg_pool2d is not dilated)")
    return [n.emit("avg_pool2d", n.value(0), kernel=kernel, stride=strides, pad=pads,
                   ceil_mode=_ceil_mode(n),
                   count_include_pad=bool(n.attr("count_include_pad", 0)))]


@converter(GLOBAL_AVG_POOL2D, "GlobalMaxPool")
def global_pool(n: Node) -> list:
    x = n.type(0)
    if x.rank < 3:
        n.fail(f"the input must be N x C x spatial..., it is {x}")
    if n.op == "GlobalAveragePool" and x.rank == 4:
        return [n.emit("global_avg_pool2d", n.value(0))]
    op = "reduce_mean" if n.op == "GlobalAveragePool" else "reduce_max"
    return [n.emit(op, n.value(0), axes=list(range(2, x.rank)), keepdims=True)]


@converter(BATCH_NORM, attrs="epsilon momentum training_mode")
def batch_norm(n: Node) -> list:
    if int(n.attr("training_mode", 0)):
        n.fail("training mode is not supported (swir compiles inference)")
    args = [n.value(i) for i in range(5)]
    epsilon = float(n.attr("epsilon", BATCH_NORM.attr("epsilon").default))  # ONNX's is swir's
    return [n.emit("batch_norm", *args, epsilon=epsilon), None, None]


@converter(LAYER_NORM, attrs="axis epsilon stash_type")
def layer_norm(n: Node) -> list:
    args = [n.value(0), n.value(1)] + ([n.value(2)] if n.has(2) else [])
    y = n.emit("layer_norm", *args, axis=int(n.attr("axis", -1)),
               epsilon=float(n.attr("epsilon", LAYER_NORM.attr("epsilon").default)))
    return [y, None, None]   # Mean and InvStdDev are not supported


@converter(SOFTMAX, LOG_SOFTMAX, attrs="axis")
def softmax(n: Node) -> list:
    return [n.emit(n.definition.name, n.value(0), axis=int(n.attr("axis", -1)))]


@converter("Gemm", attrs="alpha beta transA transB")
def gemm(n: Node) -> list:
    """alpha * A' B' + beta * C as matmul, mul and add; constant factors are
    applied to constant operands here rather than at run time."""
    a, b = (_transposed(n, i) if int(n.attr(t, 0)) else n.value(i)
            for i, t in ((0, "transA"), (1, "transB")))
    alpha, beta = float(n.attr("alpha", 1.0)), float(n.attr("beta", 1.0))
    y = n.emit("matmul", a, b)
    if alpha != 1.0:
        y = n.emit("mul", y, n.constant(alpha, y.type, "alpha"))
    if not n.has(2) or beta == 0.0:
        return [y]
    if n.is_const(2):
        c = n.imp.constant(n.const(2, "C") if beta == 1.0 else
                           np.asarray(n.const(2, "C") * beta, dtype=dtype_of(y.type)),
                           n.inputs[2])
    elif beta != 1.0:
        c = n.emit("mul", n.value(2), n.constant(beta, y.type, "beta"))
    else:
        c = n.value(2)
    return [n.emit("add", y, c)]


def _transposed(n: Node, i: int) -> Value:
    if n.type(i).rank != 2:
        n.fail(f"input {i} must be 2-D, it is {n.type(i)}")
    if n.is_const(i):   # weights: transposed once, here, not at run time
        return n.imp.constant(np.ascontiguousarray(n.const(i, "matrix").T), n.inputs[i] + ".T")
    return n.emit("transpose", n.value(i), perm=[1, 0])


@converter(MATMUL)
def matmul(n: Node) -> list:
    return [n.emit("matmul", n.value(0), n.value(1))]


# -- reductions ---------------------------------------------------------------------------

@converter(*REDUCTIONS.values(), attrs="axes keepdims noop_with_empty_axes")
def reduce(n: Node) -> list:
    if "axes" in n.attrs:
        axes = n.int_list("axes", [])
    else:
        axes = n.ints(1, "axes") if n.has(1) else []
    if not axes and int(n.attr("noop_with_empty_axes", 0)):
        return [n.tensor(0)]
    return [n.emit(n.definition.name, n.value(0), axes=axes,
                   keepdims=bool(n.attr("keepdims", 1)))]


@converter(ARGMAX, attrs="axis keepdims select_last_index")
def argmax(n: Node) -> list:
    if int(n.attr("select_last_index", 0)):
        n.fail("select_last_index = 1 is not supported (swir's argmax takes the first maximum)")
    return [n.emit("argmax", n.value(0), axis=int(n.attr("axis", 0)),
                   keepdims=bool(n.attr("keepdims", 1)))]


# -- data movement -------------------------------------------------------------------------

@converter(TRANSPOSE, attrs="perm")
def transpose(n: Node) -> list:
    perm = n.attr("perm")
    attrs = {} if perm is None else {"perm": [int(p) for p in perm]}
    return [n.emit("transpose", n.value(0), **attrs)]


@converter(RESHAPE, attrs="allowzero")
def reshape(n: Node) -> list:
    target = n.ints(1, "target shape")
    if int(n.attr("allowzero", 0)) and 0 in target:
        n.fail("allowzero = 1 with a 0 in the shape makes an empty tensor, which swir "
               "does not have")
    return [n.emit("reshape", n.value(0), shape=target)]


@converter(FLATTEN, attrs="axis")
def flatten(n: Node) -> list:
    return [n.emit("flatten", n.value(0), axis=int(n.attr("axis", 1)))]


@converter(CONCAT, attrs="axis")
def concat(n: Node) -> list:
    if "axis" not in n.attrs:
        n.fail("attribute 'axis' is required")
    args = [n.value(i) for i in range(len(n.inputs)) if n.has(i)]
    return [n.emit("concat", *args, axis=int(n.attr("axis")))]


@converter(SPLIT, attrs="axis num_outputs split")
def split(n: Node) -> list:
    x = n.type(0)
    axis = int(n.attr("axis", 0))
    if not -x.rank <= axis < x.rank:
        n.fail(f"axis {axis} is out of range for {x}")
    d, count = x.shape[axis % x.rank], len(n.outputs)
    if n.has(1):
        sizes = n.ints(1, "split sizes")
    elif "split" in n.attrs:
        sizes = n.int_list("split", [])
    elif "num_outputs" in n.attrs:   # opset 18: equal chunks, the last one smaller
        k = int(n.attr("num_outputs"))
        if k <= 0:
            n.fail(f"num_outputs {k} must be positive")
        chunk = -(-d // k)
        sizes = [chunk] * (d // chunk) + ([d % chunk] if d % chunk else [])
    else:
        if d % count:
            n.fail(f"axis {axis} of size {d} does not split into {count} equal parts")
        sizes = [d // count] * count
    if len(sizes) != count:
        n.fail(f"{len(sizes)} split sizes for {count} outputs")
    return n.emit_all("split", [n.value(0)], {"axis": axis, "sizes": sizes})


@converter(SLICE)
def slice_(n: Node) -> list:
    attrs = {"starts": n.ints(1, "starts"), "ends": n.ints(2, "ends")}
    if n.has(3):
        attrs["axes"] = n.ints(3, "axes")
    if n.has(4):
        attrs["steps"] = n.ints(4, "steps")
    return [n.emit("slice", n.value(0), **attrs)]


@converter(GATHER, attrs="axis")
def gather(n: Node) -> list:
    axis = int(n.attr("axis", 0))
    data = n.type(0)
    if n.is_const(1):
        idx = n.const(1, "indices")
        d = data.shape[axis % data.rank] if -data.rank <= axis < data.rank else 0
        if idx.size and (idx.min() < -d or idx.max() >= d):
            n.fail(f"an index is out of range for axis {axis} of size {d}")
    return [n.emit("gather", n.value(0), n.value(1), axis=axis)]


@converter(UNSQUEEZE)
def unsqueeze(n: Node) -> list:
    return [n.emit("unsqueeze", n.value(0), axes=n.ints(1, "axes"))]


@converter(SQUEEZE)
def squeeze(n: Node) -> list:
    axes = n.ints(1, "axes") if n.has(1) else []
    return [n.emit("squeeze", n.value(0), **({"axes": axes} if axes else {}))]


@converter(EXPAND)
def expand(n: Node) -> list:
    return [n.emit("expand", n.value(0), shape=n.ints(1, "shape"))]


@converter(PAD, attrs="mode")
def pad(n: Node) -> list:
    x = n.type(0)
    pads = n.ints(1, "pads")
    if n.has(3):   # opset 18: pads for the listed axes only
        axes = _axes(n, n.ints(3, "axes"), x.rank)
        if len(pads) != 2 * len(axes):
            n.fail(f"{len(pads)} pads for {len(axes)} axes (expected {2 * len(axes)})")
        full = [0] * (2 * x.rank)
        for k, a in enumerate(axes):
            full[a], full[a + x.rank] = pads[k], pads[k + len(axes)]
        pads = full
    if len(pads) != 2 * x.rank:
        n.fail(f"{len(pads)} pads for a rank-{x.rank} input (expected {2 * x.rank})")
    if min(pads) < 0:
        n.fail("negative pads (cropping) are not supported")
    mode = n.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge"):
        n.fail(f"mode '{mode}' is not supported (constant, reflect, edge are)")
    attrs: dict[str, Any] = {"pads": pads, "mode": mode}
    if n.has(2):
        attrs["value"] = n.scalar(2, "constant value")
    return [n.emit("pad", n.value(0), **attrs)]


def _axes(n: Node, axes: list[int], rank: int) -> list[int]:
    """Axes in [-rank, rank), distinct, made non-negative."""
    for a in axes:
        if not -rank <= a < rank:
            n.fail(f"axis {a} is out of range for rank {rank}")
    out = [a % rank for a in axes]
    if len(set(out)) != len(out):
        n.fail(f"axes {axes} repeat an axis")
    return out


# -- Resize (nearest) -------------------------------------------------------------------

MAX_RESIZED = 1 << 31     # outputs per axis a Resize may make

TRANSFORMS = {
    "half_pixel": lambda x, s, d, o: (x + 0.5) / s - 0.5,
    "pytorch_half_pixel": lambda x, s, d, o: (x + 0.5) / s - 0.5 if o > 1 else 0.0 * x,
    "align_corners": lambda x, s, d, o: x * (d - 1) / (o - 1) if o > 1 else 0.0 * x,
    "asymmetric": lambda x, s, d, o: x / s,
    "tf_half_pixel_for_nn": lambda x, s, d, o: (x + 0.5) / s,
}
ROUNDING = {
    "round_prefer_floor": lambda v: np.where(v - np.floor(v) == 0.5, np.floor(v), np.round(v)),
    "round_prefer_ceil": lambda v: np.where(v - np.floor(v) == 0.5, np.ceil(v), np.round(v)),
    "floor": np.floor,
    "ceil": np.ceil,
}


@converter(RESIZE_NEAREST, attrs="antialias axes coordinate_transformation_mode cubic_coeff_a "
                           "exclude_outside extrapolation_value keep_aspect_ratio_policy "
                           "mode nearest_mode")
def resize(n: Node) -> list:
    """swir's resize_nearest maps output index i to min(floor(i / s), d - 1) and
    has floor(d * s) outputs: ONNX's asymmetric / floor mode. Other modes are
    accepted exactly when, for this model's sizes, they pick the same source
    indices (e.g. integer upsampling in most modes); that is checked here."""
    if n.attr("mode", "nearest") != "nearest":
        n.fail(f"mode '{n.attr('mode')}' is not supported (only 'nearest')")
    ctm = n.attr("coordinate_transformation_mode", "half_pixel")
    rounding = n.attr("nearest_mode", "round_prefer_floor")
    if ctm not in TRANSFORMS:
        n.fail(f"coordinate_transformation_mode '{ctm}' is not supported")
    if rounding not in ROUNDING:
        n.fail(f"nearest_mode '{rounding}' is not supported")
    x = n.type(0)
    scales, sizes = _resize_targets(n, x)
    swir_scales = []
    for axis, (d, s, o) in enumerate(zip(x.shape, scales, sizes)):
        want = _onnx_nearest(n, axis, ctm, rounding, d, s, o)
        swir_scales.append(_matching_scale(n, axis, d, s, o, want, ctm, rounding))
    return [n.emit("resize_nearest", n.value(0), scales=swir_scales)]


def _resize_targets(n: Node, x: TensorType) -> tuple[list[float], list[int]]:
    axes = _axes(n, n.int_list("axes", list(range(x.rank))), x.rank)
    scales, sizes = [1.0] * x.rank, list(x.shape)
    if n.has(2) and n.const(2, "scales").size:
        given = [float(v) for v in n.const(2, "scales").reshape(-1)]
        if len(given) != len(axes):
            n.fail(f"{len(given)} scales for {len(axes)} axes")
        for a, s in zip(axes, given):
            if not (s > 0 and math.isfinite(s)):
                n.fail(f"scale {s} for axis {a} is not positive")
            scales[a], sizes[a] = s, math.floor(x.shape[a] * s)
            if int(np.float32(x.shape[a]) * np.float32(s)) != sizes[a]:
                n.fail(f"axis {a}: the output size of {x.shape[a]} x {s} depends on "
                       "rounding (onnxruntime computes it in f32, the ONNX spec does not say)")
    elif n.has(3):
        if n.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
            n.fail("keep_aspect_ratio_policy other than 'stretch' is not supported")
        given = n.ints(3, "sizes")
        if len(given) != len(axes):
            n.fail(f"{len(given)} sizes for {len(axes)} axes")
        for a, o in zip(axes, given):
            if o <= 0:
                n.fail(f"size {o} for axis {a} is not positive")
            scales[a], sizes[a] = o / x.shape[a], o
    else:
        n.fail("it needs scales or sizes")
    return scales, sizes


def _onnx_nearest(n: Node, axis: int, ctm: str, rounding: str, d: int, s: float,
                  o: int) -> np.ndarray:
    """ONNX's source index for each output index, computed in f64 and in f32
    (what onnxruntime does); where the two differ the result depends on
    rounding, and the model is refused rather than guessed."""
    if o > MAX_RESIZED:
        n.fail(f"axis {axis}: {o} outputs is too many")
    maps = []
    for t in (np.float64, np.float32):
        i, scale, dd, oo = np.arange(o, dtype=t), t(s), t(d), t(o)
        src = ROUNDING[rounding](TRANSFORMS[ctm](i, scale, dd, oo))
        maps.append(np.clip(src, 0, d - 1).astype(np.int64))
    if not np.array_equal(*maps):
        n.fail(f"axis {axis} ({d} -> {o}): the source indices of coordinate_transformation_"
               f"mode '{ctm}' depend on rounding (onnxruntime computes them in f32)")
    return maps[0]


def _matching_scale(n: Node, axis: int, d: int, s: float, o: int, want: np.ndarray,
                    ctm: str, rounding: str) -> float:
    for cand in (s, o / d, math.nextafter(o / d, math.inf)):
        if math.floor(d * cand) != o:
            continue
        got = np.minimum(np.floor(np.arange(o) / cand).astype(np.int64), d - 1)
        if np.array_equal(got, want):
            return cand
    n.fail(f"axis {axis} ({d} -> {o}): coordinate_transformation_mode '{ctm}' with "
           f"nearest_mode '{rounding}' picks source indices that swir's resize_nearest "
           "(asymmetric, floor) does not")


# Every op that names an ONNX operator can import it (MissingHook otherwise).
ONNX_IMPORT.check_complete()
