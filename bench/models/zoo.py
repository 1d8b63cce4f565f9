"""The benchmark model zoo: swTVM's eight evaluation models as ONNX graphs.

Each model is written node by node with onnx.helper (nothing is downloaded):
the published topology and shapes, with seeded random weights scaled so that
activations stay O(1) from input to output (see GraphBuilder.batch_norm and
RESIDUAL_GAMMA). A ``width`` divisor shrinks every channel count while keeping
every layer, so tests can run the whole topology in milliseconds.

    python bench/models/zoo.py --list
    python bench/models/zoo.py resnet18 -o /tmp/resnet18.onnx
    python bench/models/zoo.py bert --seq 16 --opset 13 -o /tmp/bert.onnx --external-data

From Python (the file is loaded by path; bench/ is not a package):

    spec = importlib.util.spec_from_file_location("zoo", "bench/models/zoo.py")
    zoo = importlib.util.module_from_spec(spec); spec.loader.exec_module(zoo)
    model = zoo.build("resnet18", resolution=64, width=8)
    feeds = zoo.random_inputs(model)

See bench/models/README.md for the models, their sizes and parameter counts.
"""

from __future__ import annotations

import argparse
import inspect
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper
from onnx.external_data_helper import load_external_data_for_model

IR_VERSION = 9            # onnxruntime 1.32 reads it; IR 9 goes with opsets up to 20
OPSETS = range(13, 21)    # 13: Split/Squeeze/Unsqueeze take their sizes/axes as inputs
DEFAULT_OPSET = 17
FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64

# The last BatchNorm of every residual branch gets its gamma scaled by this: a
# softened zero_init_residual. With gamma ~1 the residual stream's variance
# doubles at every block (2^16 over ResNet-50); with 0.3 it grows by ~1.09.
RESIDUAL_GAMMA = 0.3
# Darknet adds after the branch's LeakyReLU, so branch outputs (positive on
# average) add up coherently: 0.3 still grew the stream's RMS 1.14x per block,
# 20x over Darknet-53's 23 blocks; 0.1 keeps it to ~3x.
DARKNET_RESIDUAL_GAMMA = 0.1


def scaled(channels: int, width: int, multiple: int = 1) -> int:
    """channels divided by the width divisor, rounded to a multiple of
    `multiple` (ShuffleNet splits channels in halves), at least one multiple."""
    if width < 1:
        raise ValueError(f"width must be a positive divisor, not {width}")
    return max(multiple, round(channels / width / multiple) * multiple)


class GraphBuilder:
    """Builds one ModelProto in place: initializers go straight into the
    model's graph (helper.make_graph/make_model would copy every tensor
    once more, 553 MB for VGG-16), and the static shape of every tensor is
    tracked so that layers can size their weights and the graph outputs get
    declared shapes."""

    def __init__(self, name: str, *, opset: int, seed: int, weights: str) -> None:
        if opset not in OPSETS:
            raise ValueError(f"opset {opset} is not supported (use {OPSETS.start}..{OPSETS.stop - 1})")
        if weights not in ("random", "zeros"):
            raise ValueError(f"weights must be 'random' or 'zeros', not {weights!r}")
        self.model = onnx.ModelProto(ir_version=IR_VERSION, producer_name="swir-zoo")
        self.model.opset_import.append(helper.make_opsetid("", opset))
        self.graph = self.model.graph
        self.graph.name = name
        self.opset = opset
        # weights="zeros" builds the same graph without drawing random numbers,
        # for when only shapes matter (parameter counts, planning)
        self.rng = np.random.default_rng(seed) if weights == "random" else None
        self.shapes: dict[str, tuple[int, ...]] = {}
        self._consts: set[str] = set()

    # --- graph inputs, outputs and initializers ---------------------------

    def input(self, name: str, shape, elem: int = FLOAT) -> str:
        if any(d < 1 for d in shape):
            raise ValueError(f"input {name}: sizes must be positive, not {shape}")
        self.graph.input.append(helper.make_tensor_value_info(name, elem, shape))
        self.shapes[name] = tuple(shape)
        return name

    def output(self, name: str, elem: int = FLOAT) -> None:
        self.graph.output.append(helper.make_tensor_value_info(name, elem, self.shapes[name]))

    def initializer(self, name: str, array: np.ndarray) -> str:
        # numpy_helper.from_array's fields, written into the graph's own
        # tensor: appending a finished TensorProto copies its bytes once more
        # (for VGG-16's 411 MB fc6 weight that copy took longer than the rest)
        tensor = self.graph.initializer.add()
        tensor.name = name
        tensor.data_type = helper.np_dtype_to_tensor_dtype(array.dtype)
        tensor.dims.extend(array.shape)
        tensor.raw_data = np.ascontiguousarray(array, array.dtype.newbyteorder("<")).tobytes()
        self.shapes[name] = array.shape
        return name

    def normal(self, name: str, shape, std: float) -> str:
        """A float32 weight ~ N(0, std^2), drawn directly in float32 and scaled in place."""
        if self.rng is None:
            return self.initializer(name, np.zeros(shape, np.float32))
        array = self.rng.standard_normal(shape, dtype=np.float32)
        array *= std
        return self.initializer(name, array)

    def uniform(self, name: str, shape, low: float, high: float) -> str:
        if self.rng is None:
            return self.initializer(name, np.zeros(shape, np.float32))
        return self.initializer(name, self.rng.uniform(low, high, shape).astype(np.float32))

    def const(self, name: str, value, dtype=np.float32) -> str:
        """A constant (not a parameter), shared by name: Clip bounds, axes,
        split sizes, scales. Scalars stay rank 0 as torch.onnx.export writes them."""
        if name not in self._consts:
            self._consts.add(name)
            self.initializer(name, np.asarray(value, dtype))
        return name

    def ints(self, name: str, value) -> str:
        return self.const(name, value, np.int64)

    def node(self, op: str, inputs, name: str, shape, outputs=None, **attrs):
        """Appends a node named `name`; its output tensor is also called
        `name` unless `outputs` names them (then the list is returned)."""
        if any(d < 1 for d in shape):
            raise ValueError(f"{name}: a {'x'.join(map(str, shape))} output; the input is too "
                             "small or a size is not positive")
        outs = list(outputs) if outputs else [name]
        self.graph.node.append(helper.make_node(op, list(inputs), outs, name=name, **attrs))
        for out in outs:
            self.shapes[out] = tuple(shape)
        return outs if outputs else name

    def rename(self, tensor: str, new: str) -> str:
        """Gives a node's output tensor a new name (for graph outputs: "logits"
        rather than "fc"), without an Identity node."""
        for node in self.graph.node:
            for field in (node.input, node.output):
                for i, name in enumerate(field):
                    if name == tensor:
                        field[i] = new
        self.shapes[new] = self.shapes[tensor]
        return new

    def finish(self, outputs, elem: int = FLOAT) -> onnx.ModelProto:
        for name in outputs:
            self.output(name, elem)
        return self.model

    # --- convolutional layers ----------------------------------------------

    def conv(self, x: str, name: str, out_c: int, k: int, *, stride: int = 1, pad=None,
             groups: int = 1, bias: bool = False, gain: float = 2.0) -> str:
        """Conv with He-normal weights. gain 2 when the input is a ReLU's
        output (half its energy was cut), 1 when it is not."""
        n, c, h, w = self.shapes[x]
        pad = k // 2 if pad is None else pad
        fan_in = c // groups * k * k
        inputs = [x, self.normal(f"{name}.weight", (out_c, c // groups, k, k), math.sqrt(gain / fan_in))]
        if bias:
            inputs.append(self.normal(f"{name}.bias", (out_c,), 0.05))
        oh, ow = ((d + 2 * pad - k) // stride + 1 for d in (h, w))
        return self.node("Conv", inputs, name, (n, out_c, oh, ow), kernel_shape=[k, k],
                         strides=[stride, stride], pads=[pad] * 4, group=groups)

    def conv_transpose(self, x: str, name: str, out_c: int, k: int, *, stride: int, pad: int,
                       gain: float = 2.0) -> str:
        n, c, h, w = self.shapes[x]
        # each output pixel sums (k/stride)^2 taps per input channel (fewer
        # when the input is smaller than that, as the 1x1 latent is)
        taps = min(k // stride, h) * min(k // stride, w)
        weight = self.normal(f"{name}.weight", (c, out_c, k, k), math.sqrt(gain / (c * taps)))
        oh, ow = ((d - 1) * stride - 2 * pad + k for d in (h, w))
        return self.node("ConvTranspose", [x, weight], name, (n, out_c, oh, ow),
                         kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)

    def batch_norm(self, x: str, name: str, gamma_scale: float = 1.0) -> str:
        """Inference BatchNorm with random statistics. gamma ~ U(0.75, 1.25) *
        sqrt(running_var) (so within ~U(0.5, 1.5)), which makes the effective
        scale gamma / sqrt(var) ~1 and keeps He-initialised chains at unit
        variance; beta and the running mean are small."""
        c = self.shapes[x][1]
        if self.rng is None:
            gamma = beta = mean = var = np.zeros(c, np.float32)
        else:
            var = self.rng.uniform(0.5, 1.5, c)
            gamma = gamma_scale * self.rng.uniform(0.75, 1.25, c) * np.sqrt(var)
            beta, mean = self.rng.normal(0.0, 0.1, (2, c))
        params = [self.initializer(f"{name}.{p}", a.astype(np.float32)) for p, a in
                  (("weight", gamma), ("bias", beta), ("running_mean", mean), ("running_var", var))]
        return self.node("BatchNormalization", [x, *params], name, self.shapes[x], epsilon=1e-5)

    def act(self, x: str, name: str, kind) -> str:
        shape = self.shapes[x]
        if kind is None:
            return x
        if kind == "relu":
            return self.node("Relu", [x], name, shape)
        if kind == "relu6":   # Clip's bounds are inputs since opset 11
            return self.node("Clip", [x, self.const("const.zero", 0.0), self.const("const.six", 6.0)],
                             name, shape)
        if kind == "leaky":
            return self.node("LeakyRelu", [x], name, shape, alpha=0.1)
        if kind == "tanh":
            return self.node("Tanh", [x], name, shape)
        raise ValueError(f"unknown activation {kind!r}")

    def conv_bn(self, x: str, name: str, out_c: int, k: int, *, stride: int = 1, pad=None,
                groups: int = 1, act="relu", gain: float = 2.0, bn_name=None,
                gamma_scale: float = 1.0, act_name=None) -> str:
        """Conv (no bias) + BatchNorm + activation; the BN is `name`.bn unless named."""
        y = self.conv(x, name, out_c, k, stride=stride, pad=pad, groups=groups, gain=gain)
        y = self.batch_norm(y, bn_name or f"{name}.bn", gamma_scale)
        return self.act(y, act_name or f"{name}.{act}", act)

    def max_pool(self, x: str, name: str, k: int, stride: int, pad: int = 0) -> str:
        n, c, h, w = self.shapes[x]
        oh, ow = ((d + 2 * pad - k) // stride + 1 for d in (h, w))
        return self.node("MaxPool", [x], name, (n, c, oh, ow), kernel_shape=[k, k],
                         strides=[stride, stride], pads=[pad] * 4)

    def global_avg_pool(self, x: str, name: str) -> str:
        n, c, _, _ = self.shapes[x]
        return self.node("GlobalAveragePool", [x], name, (n, c, 1, 1))

    def flatten(self, x: str, name: str) -> str:
        shape = self.shapes[x]
        return self.node("Flatten", [x], name, (shape[0], math.prod(shape[1:])), axis=1)

    def gemm(self, x: str, name: str, out_f: int, *, gain: float = 2.0, std=None) -> str:
        """A torch Linear as torch.onnx.export writes it: Gemm with weight
        [out, in] and transB=1. He-normal unless std is given."""
        n, in_f = self.shapes[x]
        weight = self.normal(f"{name}.weight", (out_f, in_f), std or math.sqrt(gain / in_f))
        bias = self.normal(f"{name}.bias", (out_f,), std or 0.05)
        return self.node("Gemm", [x, weight, bias], name, (n, out_f), transB=1)

    # --- elementwise and shape ops -------------------------------------------

    def binary(self, op: str, a: str, b: str, name: str) -> str:
        shape = np.broadcast_shapes(self.shapes[a], self.shapes[b])
        return self.node(op, [a, b], name, shape)

    def matmul(self, a: str, b: str, name: str) -> str:
        sa, sb = self.shapes[a], self.shapes[b]
        batch = np.broadcast_shapes(sa[:-2], sb[:-2])
        return self.node("MatMul", [a, b], name, (*batch, sa[-2], sb[-1]))

    def reduce_mean(self, x: str, name: str, axes, keepdims: int) -> str:
        rank = len(self.shapes[x])
        axes = [a % rank for a in axes]
        shape = [1 if i in axes else d for i, d in enumerate(self.shapes[x])
                 if keepdims or i not in axes]
        if self.opset >= 18:   # axes became an input in opset 18
            ax = self.ints("const.axes_" + "_".join(map(str, axes)), axes)
            return self.node("ReduceMean", [x, ax], name, shape, keepdims=keepdims)
        return self.node("ReduceMean", [x], name, shape, axes=axes, keepdims=keepdims)

    def reshape(self, x: str, name: str, shape) -> str:
        return self.node("Reshape", [x, self.ints(f"{name}.shape", shape)], name, shape)

    def transpose(self, x: str, name: str, perm) -> str:
        shape = [self.shapes[x][p] for p in perm]
        return self.node("Transpose", [x], name, shape, perm=list(perm))

    def concat(self, xs, name: str, axis: int = 1) -> str:
        shape = list(self.shapes[xs[0]])
        shape[axis] = sum(self.shapes[x][axis] for x in xs)
        return self.node("Concat", xs, name, shape, axis=axis)


# --- ResNet (He et al. 2016; torchvision topology, v1.5 bottleneck) -----------

def _shortcut_add(g: GraphBuilder, x: str, y: str, name: str, stride: int) -> str:
    """Adds the block input to the residual branch y (through a 1x1 conv + BN
    when the shape changes), then ReLU."""
    if stride != 1 or g.shapes[x][1] != g.shapes[y][1]:
        x = g.conv_bn(x, f"{name}.downsample.0", g.shapes[y][1], 1, stride=stride, pad=0,
                      bn_name=f"{name}.downsample.1", act=None)
    return g.act(g.binary("Add", y, x, f"{name}.add"), f"{name}.relu", "relu")


def _basic_block(g: GraphBuilder, x: str, name: str, planes: int, stride: int) -> str:
    y = g.conv_bn(x, f"{name}.conv1", planes, 3, stride=stride, bn_name=f"{name}.bn1")
    y = g.conv_bn(y, f"{name}.conv2", planes, 3, bn_name=f"{name}.bn2", act=None,
                  gamma_scale=RESIDUAL_GAMMA)
    return _shortcut_add(g, x, y, name, stride)


def _bottleneck(g: GraphBuilder, x: str, name: str, planes: int, stride: int) -> str:
    # v1.5: the stride sits on the 3x3 conv, not on the first 1x1
    y = g.conv_bn(x, f"{name}.conv1", planes, 1, pad=0, bn_name=f"{name}.bn1")
    y = g.conv_bn(y, f"{name}.conv2", planes, 3, stride=stride, bn_name=f"{name}.bn2")
    y = g.conv_bn(y, f"{name}.conv3", planes * 4, 1, pad=0, bn_name=f"{name}.bn3", act=None,
                  gamma_scale=RESIDUAL_GAMMA)
    return _shortcut_add(g, x, y, name, stride)


def _resnet(name: str, block, layers, *, batch, resolution, width, classes, opset, seed,
            weights) -> onnx.ModelProto:
    g = GraphBuilder(name, opset=opset, seed=seed, weights=weights)
    x = g.input("input", (batch, 3, resolution, resolution))
    # gain 1: the image is not a ReLU's output
    x = g.conv_bn(x, "conv1", scaled(64, width), 7, stride=2, pad=3, bn_name="bn1", gain=1.0,
                  act_name="relu")
    x = g.max_pool(x, "maxpool", 3, 2, 1)
    for i, blocks in enumerate(layers):
        for b in range(blocks):
            x = block(g, x, f"layer{i + 1}.{b}", scaled(64 << i, width), 2 if i and not b else 1)
    x = g.flatten(g.global_avg_pool(x, "avgpool"), "flatten")
    return g.finish([g.rename(g.gemm(x, "fc", classes), "logits")])


def resnet18(*, batch=1, resolution=224, width=1, classes=1000, opset=DEFAULT_OPSET, seed=0,
             weights="random") -> onnx.ModelProto:
    """ResNet-18: BasicBlocks [2, 2, 2, 2]."""
    return _resnet("resnet18", _basic_block, [2, 2, 2, 2], batch=batch, resolution=resolution,
                   width=width, classes=classes, opset=opset, seed=seed, weights=weights)


def resnet50(*, batch=1, resolution=224, width=1, classes=1000, opset=DEFAULT_OPSET, seed=0,
             weights="random") -> onnx.ModelProto:
    """ResNet-50 v1.5: Bottlenecks [3, 4, 6, 3]."""
    return _resnet("resnet50", _bottleneck, [3, 4, 6, 3], batch=batch, resolution=resolution,
                   width=width, classes=classes, opset=opset, seed=seed, weights=weights)


# --- VGG-16 (Simonyan & Zisserman 2015, configuration D) ----------------------

_VGG16 = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]


def vgg16(*, batch=1, resolution=224, width=1, classes=1000, opset=DEFAULT_OPSET, seed=0,
          weights="random") -> onnx.ModelProto:
    """VGG-16: 13 3x3 convs with bias, 5 max pools, 3 fully connected layers."""
    g = GraphBuilder("vgg16", opset=opset, seed=seed, weights=weights)
    x = g.input("input", (batch, 3, resolution, resolution))
    index = 0   # torchvision's module index inside `features`
    for item in _VGG16:
        if item == "M":
            x = g.max_pool(x, f"features.{index}", 2, 2)
            index += 1
        else:
            x = g.conv(x, f"features.{index}", scaled(item, width), 3, bias=True,
                       gain=1.0 if index == 0 else 2.0)
            x = g.act(x, f"features.{index + 1}", "relu")
            index += 2
    # no AdaptiveAvgPool2d((7, 7)): it is the identity at 224, and without it
    # the first Linear takes 512 * (resolution / 32)^2 features
    x = g.flatten(x, "flatten")
    ratio = g.const("const.dropout_ratio", 0.5)
    for i in (0, 3):
        x = g.act(g.gemm(x, f"classifier.{i}", scaled(4096, width)), f"classifier.{i + 1}", "relu")
        # Dropout is the identity at inference (no training_mode input)
        x = g.node("Dropout", [x, ratio], f"classifier.{i + 2}", g.shapes[x])
    return g.finish([g.rename(g.gemm(x, "classifier.6", classes), "logits")])


# --- YOLOv3 (Redmon & Farhadi 2018; darknet's yolov3.cfg) ---------------------

def _darknet53(g: GraphBuilder, x: str, width: int) -> list[str]:
    """Darknet-53 without its classifier; returns the stride 8, 16 and 32 features."""
    x = g.conv_bn(x, "darknet.conv0", scaled(32, width), 3, act="leaky", gain=1.0)
    routes = []
    for s, blocks in enumerate([1, 2, 8, 8, 4], 1):
        c = scaled(32 << s, width)
        x = g.conv_bn(x, f"darknet.stage{s}.down", c, 3, stride=2, act="leaky")
        for b in range(blocks):
            name = f"darknet.stage{s}.{b}"
            y = g.conv_bn(x, f"{name}.conv1", scaled(16 << s, width), 1, act="leaky")
            y = g.conv_bn(y, f"{name}.conv2", c, 3, act="leaky", gamma_scale=DARKNET_RESIDUAL_GAMMA)
            x = g.binary("Add", x, y, f"{name}.add")   # darknet's shortcut: no activation after
        routes.append(x)
    return routes[2:]


def _yolo_head(g: GraphBuilder, x: str, name: str, c: int, out_c: int, output: str):
    """The five-conv set, then the detection branch (3x3 conv, 1x1 conv with
    bias, linear). Returns (five-conv output, detection output)."""
    for j, k in enumerate([1, 3, 1, 3, 1]):
        x = g.conv_bn(x, f"{name}.conv{j}", c if k == 1 else 2 * c, k, act="leaky")
    y = g.conv_bn(x, f"{name}.conv5", 2 * c, 3, act="leaky")
    y = g.conv(y, f"{name}.detect", out_c, 1, bias=True, gain=1.0)
    return x, g.rename(y, output)


def _upsample_concat(g: GraphBuilder, x: str, route: str, name: str, c: int) -> str:
    """1x1 conv, nearest x2 upsample (Resize: roi unused, scales an input),
    concat with the backbone route (upsampled first, as darknet's route -1, 61)."""
    x = g.conv_bn(x, f"{name}.conv", c, 1, act="leaky")
    n, ch, h, w = g.shapes[x]
    scales = g.const("const.upsample_scales", [1.0, 1.0, 2.0, 2.0])
    x = g.node("Resize", [x, "", scales], f"{name}.upsample", (n, ch, 2 * h, 2 * w), mode="nearest",
               coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    return g.concat([x, route], f"{name}.concat")


def yolov3(*, batch=1, resolution=416, width=1, classes=80, opset=DEFAULT_OPSET, seed=0,
           weights="random") -> onnx.ModelProto:
    """YOLOv3: Darknet-53 and three detection heads (strides 32, 16, 8)."""
    if resolution % 32:
        raise ValueError(f"yolov3: resolution must be a multiple of 32, not {resolution}")
    g = GraphBuilder("yolov3", opset=opset, seed=seed, weights=weights)
    x = g.input("input", (batch, 3, resolution, resolution))
    s8, s16, s32 = _darknet53(g, x, width)
    out_c = 3 * (classes + 5)   # 3 anchors x (box 4 + objectness 1 + classes)
    x, out32 = _yolo_head(g, s32, "head32", scaled(512, width), out_c, "output_stride32")
    x = _upsample_concat(g, x, s16, "route16", scaled(256, width))
    x, out16 = _yolo_head(g, x, "head16", scaled(256, width), out_c, "output_stride16")
    x = _upsample_concat(g, x, s8, "route8", scaled(128, width))
    _, out8 = _yolo_head(g, x, "head8", scaled(128, width), out_c, "output_stride8")
    return g.finish([out32, out16, out8])


# --- DCGAN generator (Radford et al. 2016; the PyTorch DCGAN example) --------

def dcgan(*, batch=1, resolution=64, width=1, opset=DEFAULT_OPSET, seed=0,
          weights="random") -> onnx.ModelProto:
    """DCGAN generator: z [N, 100, 1, 1] -> image [N, 3, R, R] (R = resolution)."""
    if resolution < 8 or resolution & (resolution - 1):
        raise ValueError(f"dcgan: resolution must be a power of two >= 8, not {resolution}")
    # ConvT + BN + ReLU layers: the 1x1 -> 4x4 projection, then one per
    # doubling up to R/2 (4 at 64); the last ConvT doubles to R
    layers = resolution.bit_length() - 3
    g = GraphBuilder("dcgan", opset=opset, seed=seed, weights=weights)
    x = g.input("z", (batch, 100, 1, 1))
    # module indices as in the example's nn.Sequential `main`: ConvT, BN, ReLU
    for i in range(layers):
        out_c = scaled(64 << (layers - 1 - i), width)   # ..., 512, 256, 128, 64
        stride, pad = (1, 0) if i == 0 else (2, 1)
        x = g.conv_transpose(x, f"main.{3 * i}", out_c, 4, stride=stride, pad=pad,
                             gain=1.0 if i == 0 else 2.0)
        x = g.act(g.batch_norm(x, f"main.{3 * i + 1}"), f"main.{3 * i + 2}", "relu")
    x = g.conv_transpose(x, f"main.{3 * layers}", 3, 4, stride=2, pad=1)
    return g.finish([g.rename(g.act(x, f"main.{3 * layers + 1}", "tanh"), "image")])


# --- MobileNetV2 (Sandler et al. 2018; torchvision topology) -------------------

# expansion t, output channels c, repeats n, first stride s
_MOBILENET_V2 = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                 (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def _inverted_residual(g: GraphBuilder, x: str, name: str, t: int, out_c: int,
                       stride: int) -> str:
    in_c = g.shapes[x][1]
    residual = stride == 1 and in_c == out_c
    y = x
    if t != 1:   # the block input is a linear bottleneck (not a ReLU's output): gain 1
        y = g.conv_bn(y, f"{name}.expand", in_c * t, 1, pad=0, act="relu6", gain=1.0)
    y = g.conv_bn(y, f"{name}.dw", g.shapes[y][1], 3, stride=stride, groups=g.shapes[y][1],
                  act="relu6")
    y = g.conv_bn(y, f"{name}.project", out_c, 1, pad=0, act=None,
                  gamma_scale=RESIDUAL_GAMMA if residual else 1.0)
    return g.binary("Add", x, y, f"{name}.add") if residual else y


def mobilenet(*, batch=1, resolution=224, width=1, classes=1000, opset=DEFAULT_OPSET, seed=0,
              weights="random") -> onnx.ModelProto:
    """MobileNetV2 (width 1.0): inverted residuals, ReLU6 as Clip(0, 6)."""
    g = GraphBuilder("mobilenet_v2", opset=opset, seed=seed, weights=weights)
    x = g.input("input", (batch, 3, resolution, resolution))
    x = g.conv_bn(x, "features.0", scaled(32, width), 3, stride=2, act="relu6", gain=1.0)
    index = 1
    for t, c, n, s in _MOBILENET_V2:
        for i in range(n):
            x = _inverted_residual(g, x, f"features.{index}", t, scaled(c, width), s if i == 0 else 1)
            index += 1
    # gain 1: the last block's output is linear
    x = g.conv_bn(x, f"features.{index}", scaled(1280, width), 1, pad=0, act="relu6", gain=1.0)
    # AveragePool over the whole final map (torchvision's adaptive_avg_pool2d at 224: 7x7)
    n, c, h, w = g.shapes[x]
    x = g.node("AveragePool", [x], "avgpool", (n, c, 1, 1), kernel_shape=[h, w])
    x = g.flatten(x, "flatten")
    return g.finish([g.rename(g.gemm(x, "classifier.1", classes), "logits")])


# --- ShuffleNetV2 x1.0 (Ma et al. 2018; torchvision topology) -----------------

def _channel_shuffle(g: GraphBuilder, x: str, name: str) -> str:
    """Two groups: [N, C, H, W] -> [N, 2, C/2, H, W] -> swap axes 1, 2 -> back."""
    n, c, h, w = g.shapes[x]
    x = g.reshape(x, f"{name}.reshape0", [n, 2, c // 2, h, w])
    x = g.transpose(x, f"{name}.transpose", [0, 2, 1, 3, 4])
    return g.reshape(x, f"{name}.reshape1", [n, c, h, w])


def _shuffle_branch(g: GraphBuilder, x: str, name: str, c: int, stride: int) -> str:
    """1x1 conv + BN + ReLU, depthwise 3x3 + BN, 1x1 conv + BN + ReLU."""
    x = g.conv_bn(x, f"{name}.0", c, 1, pad=0)
    x = g.conv_bn(x, f"{name}.3", c, 3, stride=stride, groups=c, act=None)
    return g.conv_bn(x, f"{name}.5", c, 1, pad=0, gain=1.0)


def _shuffle_unit(g: GraphBuilder, x: str, name: str, out_c: int, stride: int) -> str:
    n, in_c, h, w = g.shapes[x]
    half = out_c // 2
    if stride == 1:   # torch's x.chunk(2, dim=1): Split with explicit sizes (an input since 13)
        sizes = g.ints(f"const.split_{half}_{half}", [half, half])
        x1, x2 = g.node("Split", [x, sizes], f"{name}.split", (n, half, h, w),
                        outputs=[f"{name}.split.0", f"{name}.split.1"], axis=1)
        y = g.concat([x1, _shuffle_branch(g, x2, f"{name}.branch2", half, 1)], f"{name}.concat")
    else:
        b1 = g.conv_bn(x, f"{name}.branch1.0", in_c, 3, stride=stride, groups=in_c, act=None)
        b1 = g.conv_bn(b1, f"{name}.branch1.2", half, 1, pad=0, gain=1.0)
        b2 = _shuffle_branch(g, x, f"{name}.branch2", half, stride)
        y = g.concat([b1, b2], f"{name}.concat")
    return _channel_shuffle(g, y, f"{name}.shuffle")


def shufflenet(*, batch=1, resolution=224, width=1, classes=1000, opset=DEFAULT_OPSET, seed=0,
               weights="random") -> onnx.ModelProto:
    """ShuffleNetV2 x1.0: stages [4, 8, 4], channels [24, 116, 232, 464, 1024]."""
    g = GraphBuilder("shufflenet_v2_x1_0", opset=opset, seed=seed, weights=weights)
    x = g.input("input", (batch, 3, resolution, resolution))
    x = g.conv_bn(x, "conv1", scaled(24, width), 3, stride=2, gain=1.0)
    x = g.max_pool(x, "maxpool", 3, 2, 1)
    for stage, repeats, c in [(2, 4, 116), (3, 8, 232), (4, 4, 464)]:
        for i in range(repeats):
            x = _shuffle_unit(g, x, f"stage{stage}.{i}", scaled(c, width, 2), 2 if i == 0 else 1)
    x = g.conv_bn(x, "conv5", scaled(1024, width), 1, pad=0)
    x = g.reduce_mean(x, "mean", [2, 3], keepdims=0)   # torchvision's x.mean([2, 3])
    return g.finish([g.rename(g.gemm(x, "fc", classes), "logits")])


# --- BERT-base (Devlin et al. 2019; HuggingFace BertModel as torch exports it) --

class _BertBuilder(GraphBuilder):
    """Transformer pieces; weights N(0, 0.02^2) as BERT initialises them."""

    def __init__(self, *, opset, seed, weights, layernorm, gelu) -> None:
        super().__init__("bert", opset=opset, seed=seed, weights=weights)
        self.layernorm, self.gelu_kind = layernorm, gelu

    def linear(self, x: str, name: str, out_f: int) -> str:
        """MatMul by the transposed weight [in, out] (torch exports it so) + Add bias."""
        in_f = self.shapes[x][-1]
        y = self.matmul(x, self.normal(f"{name}.weight", (in_f, out_f), 0.02), name)
        return self.binary("Add", y, self.normal(f"{name}.bias", (out_f,), 0.02), f"{name}.add")

    def layer_norm(self, x: str, name: str, eps: float = 1e-12) -> str:
        h = self.shapes[x][-1]
        gamma = self.uniform(f"{name}.weight", (h,), 0.9, 1.1)
        beta = self.normal(f"{name}.bias", (h,), 0.02)
        if self.layernorm == "op":
            return self.node("LayerNormalization", [x, gamma, beta], name, self.shapes[x],
                             axis=-1, epsilon=eps)
        # torch.onnx.export's decomposition below opset 17
        mean = self.reduce_mean(x, f"{name}.mean", [-1], keepdims=1)
        d = self.binary("Sub", x, mean, f"{name}.sub")
        sq = self.binary("Pow", d, self.const("const.two", 2.0), f"{name}.pow")
        var = self.reduce_mean(sq, f"{name}.var", [-1], keepdims=1)
        std = self.binary("Add", var, self.const(f"const.eps_{eps:g}", eps), f"{name}.add_eps")
        std = self.node("Sqrt", [std], f"{name}.sqrt", self.shapes[std])
        y = self.binary("Div", d, std, f"{name}.div")
        return self.binary("Add", self.binary("Mul", y, gamma, f"{name}.mul"), beta, f"{name}.add")

    def gelu(self, x: str, name: str) -> str:
        if self.gelu_kind == "op":
            return self.node("Gelu", [x], name, self.shapes[x])
        # HF's x * 0.5 * (1.0 + erf(x / sqrt(2.0))), node for node
        half = self.binary("Mul", x, self.const("const.half", 0.5), f"{name}.mul_half")
        e = self.binary("Div", x, self.const("const.sqrt2", math.sqrt(2.0)), f"{name}.div")
        e = self.node("Erf", [e], f"{name}.erf", self.shapes[e])
        e = self.binary("Add", e, self.const("const.one", 1.0), f"{name}.add_one")
        return self.binary("Mul", half, e, name)

    def reshape_from_shape(self, x: str, name: str, keep: int, tail) -> str:
        """x.view(x.size()[:keep] + tail) as torch.onnx.export writes it: the
        target is computed from Shape(x) (Gather each kept dim, Unsqueeze,
        Concat with the constant tail), not a constant."""
        shape = self.node("Shape", [x], f"{name}.shape", (len(self.shapes[x]),))
        dims = []
        for i in range(keep):
            d = self.node("Gather", [shape, self.ints(f"const.index{i}", i)], f"{name}.dim{i}", (),
                          axis=0)
            dims.append(self.node("Unsqueeze", [d, self.ints("const.axes_0", [0])],
                                  f"{name}.dim{i}.unsqueeze", (1,)))
        dims.append(self.ints("const.shape_" + "_".join(map(str, tail)), list(tail)))
        target = self.node("Concat", dims, f"{name}.target", (keep + len(tail),), axis=0)
        return self.node("Reshape", [x, target], name, self.shapes[x][:keep] + tuple(tail))

    def attention(self, x: str, name: str, heads: int) -> str:
        """Multi-head self-attention without a mask; returns the projected context."""
        hidden = self.shapes[x][-1]
        d = hidden // heads
        qkv = []
        for part, perm in (("query", [0, 2, 1, 3]), ("key", [0, 2, 3, 1]), ("value", [0, 2, 1, 3])):
            y = self.linear(x, f"{name}.self.{part}", hidden)
            y = self.reshape_from_shape(y, f"{name}.self.{part}.heads", 2, (heads, d))
            qkv.append(self.transpose(y, f"{name}.self.{part}.transpose", perm))   # key: K^T
        q, kt, v = qkv
        s = self.matmul(q, kt, f"{name}.self.scores")
        s = self.binary("Div", s, self.const(f"const.sqrt_head_dim_{d}", math.sqrt(d)),
                        f"{name}.self.scale")
        p = self.node("Softmax", [s], f"{name}.self.softmax", self.shapes[s], axis=-1)
        ctx = self.matmul(p, v, f"{name}.self.context")
        ctx = self.transpose(ctx, f"{name}.self.context.transpose", [0, 2, 1, 3])
        ctx = self.reshape_from_shape(ctx, f"{name}.self.context.merge", 2, (hidden,))
        return self.linear(ctx, f"{name}.output.dense", hidden)

    def encoder_layer(self, x: str, name: str, heads: int, intermediate: int) -> str:
        a = self.attention(x, f"{name}.attention", heads)
        x = self.layer_norm(self.binary("Add", a, x, f"{name}.attention.output.residual"),
                            f"{name}.attention.output.LayerNorm")
        y = self.gelu(self.linear(x, f"{name}.intermediate.dense", intermediate),
                      f"{name}.intermediate.gelu")
        y = self.linear(y, f"{name}.output.dense", self.shapes[x][-1])
        return self.layer_norm(self.binary("Add", y, x, f"{name}.output.residual"),
                               f"{name}.output.LayerNorm")


def bert(*, batch=1, seq=16, layers=12, hidden=768, heads=12, intermediate=3072, vocab=30522,
         max_positions=512, type_vocab=2, opset=DEFAULT_OPSET, layernorm=None, gelu="erf",
         seed=0, weights="random") -> onnx.ModelProto:
    """BERT-base encoder with pooler: input_ids [N, S] -> [N, S, H], [N, H]."""
    layernorm = layernorm or ("op" if opset >= 17 else "decomposed")
    if layernorm not in ("op", "decomposed") or (layernorm == "op" and opset < 17):
        raise ValueError(f"bert: layernorm must be 'decomposed' or 'op' (opset >= 17), "
                         f"not {layernorm!r} at opset {opset}")
    if gelu not in ("erf", "op") or (gelu == "op" and opset < 20):
        raise ValueError(f"bert: gelu must be 'erf' or 'op' (opset >= 20), not {gelu!r} at opset {opset}")
    if hidden % heads or not 1 <= seq <= max_positions:
        raise ValueError(f"bert: need hidden % heads == 0 and 1 <= seq <= {max_positions}")
    g = _BertBuilder(opset=opset, seed=seed, weights=weights, layernorm=layernorm, gelu=gelu)
    ids = g.input("input_ids", (batch, seq), INT64)
    e = "embeddings"
    x = g.node("Gather", [g.normal(f"{e}.word_embeddings.weight", (vocab, hidden), 0.02), ids],
               f"{e}.word_embeddings", (batch, seq, hidden))
    pos = g.ints(f"{e}.position_ids", np.arange(seq)[None, :])          # [1, S]: 0..S-1
    p = g.node("Gather", [g.normal(f"{e}.position_embeddings.weight", (max_positions, hidden), 0.02),
                          pos], f"{e}.position_embeddings", (1, seq, hidden))
    tt = g.ints(f"{e}.token_type_ids", np.zeros((1, seq)))               # all segment A
    t = g.node("Gather", [g.normal(f"{e}.token_type_embeddings.weight", (type_vocab, hidden), 0.02),
                          tt], f"{e}.token_type_embeddings", (1, seq, hidden))
    x = g.binary("Add", g.binary("Add", x, t, f"{e}.add_token_type"), p, f"{e}.add_position")
    x = g.layer_norm(x, f"{e}.LayerNorm")
    for i in range(layers):
        x = g.encoder_layer(x, f"encoder.layer.{i}", heads, intermediate)
    x = g.rename(x, "last_hidden_state")
    # pooler: hidden_states[:, 0] as Slice [:, 0:1] + Squeeze(1), Linear, Tanh
    first = g.node("Slice", [x, g.ints("const.starts_0", [0]), g.ints("const.ends_1", [1]),
                             g.ints("const.axes_1", [1])], "pooler.first_token", (batch, 1, hidden))
    first = g.node("Squeeze", [first, g.ints("const.axes_1", [1])], "pooler.squeeze", (batch, hidden))
    pooled = g.gemm(first, "pooler.dense", hidden, std=0.02)
    g.rename(g.act(pooled, "pooler.activation", "tanh"), "pooler_output")
    return g.finish(["last_hidden_state", "pooler_output"])


# --- registry and utilities ------------------------------------------------------

MODELS: dict[str, Callable[..., onnx.ModelProto]] = {
    "resnet18": resnet18, "resnet50": resnet50, "vgg16": vgg16, "yolov3": yolov3,
    "dcgan": dcgan, "mobilenet": mobilenet, "shufflenet": shufflenet, "bert": bert,
}

# The paper's evaluation sizes (batch 1; the builders' defaults spelled out).
PAPER_SIZES: dict[str, dict] = {
    "resnet18": {"batch": 1, "resolution": 224}, "resnet50": {"batch": 1, "resolution": 224},
    "vgg16": {"batch": 1, "resolution": 224}, "yolov3": {"batch": 1, "resolution": 416},
    "dcgan": {"batch": 1, "resolution": 64}, "mobilenet": {"batch": 1, "resolution": 224},
    "shufflenet": {"batch": 1, "resolution": 224},
    "bert": {"batch": 1, "seq": 16, "layers": 12, "hidden": 768, "heads": 12},
}


# Each model at a reduced size that keeps every layer (the topology, the op
# mix, the strides, the groups and the heads of the paper-size model): the
# builder's keyword arguments, and whether to write it with external data.
# test/unit/test_zoo_e2e.py runs these end to end; bench/sunway_rules.py
# counts them.
REDUCED: dict[str, tuple[dict, bool]] = {
    "resnet18": ({"resolution": 32, "width": 4}, False),
    "resnet50": ({"resolution": 32, "width": 8}, False),
    "vgg16": ({"resolution": 32, "width": 8}, False),
    "yolov3": ({"resolution": 64, "width": 8}, False),
    "dcgan": ({"resolution": 32, "width": 4}, False),
    "mobilenet": ({"resolution": 32, "width": 4}, False),
    "shufflenet": ({"resolution": 32, "width": 4}, False),
    "bert": ({"seq": 8, "layers": 2, "hidden": 64, "heads": 4, "intermediate": 128,
              "vocab": 100}, True),
}


def build(name: str, **kwargs) -> onnx.ModelProto:
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r} (one of {', '.join(MODELS)})")
    return MODELS[name](**kwargs)


def save(model: onnx.ModelProto, path, external_data: bool = False) -> None:
    """Writes model to path; with external_data the tensors of 1 KiB and
    more go to PATH.data beside it (needed above protobuf's 2 GB)."""
    path = Path(path)
    if not external_data:
        onnx.save_model(model, str(path))
        return
    data = path.with_name(path.name + ".data")
    data.unlink(missing_ok=True)   # onnx appends to an existing data file
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=data.name, size_threshold=1024)
    # onnx moved the bytes out of `model` into the file: read them back so
    # the caller's model is still whole (and serializes as before)
    load_external_data_for_model(model, str(path.parent))
    for tensor in model.graph.initializer:
        if tensor.data_location == TensorProto.DEFAULT:
            tensor.ClearField("data_location")


def _initializer_dims(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    return {t.name: tuple(t.dims) for t in model.graph.initializer}


def random_inputs(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Feeds for the graph inputs: floats ~ N(0, 1); integer inputs are
    indices, uniform below the first dimension of the table they Gather from."""
    rng = np.random.default_rng(seed)
    dims = _initializer_dims(model)
    feeds = {}
    for value in model.graph.input:
        if value.name in dims:
            continue
        ttype = value.type.tensor_type
        shape = [d.dim_value for d in ttype.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(ttype.elem_type)
        if np.issubdtype(dtype, np.floating):
            feeds[value.name] = rng.standard_normal(shape).astype(dtype)
            continue
        tables = [dims[n.input[0]][0] for n in model.graph.node
                  if n.op_type == "Gather" and n.input[1] == value.name and n.input[0] in dims]
        if not tables:
            raise ValueError(f"no Gather table bounds the integer input {value.name!r}")
        feeds[value.name] = rng.integers(0, min(tables), shape).astype(dtype)
    return feeds


def param_count(model: onnx.ModelProto, buffers: bool = False) -> int:
    """Trainable parameters, counted as torchvision's published figures are:
    the elements of float initializers of rank >= 1, except BatchNorm's
    running mean and variance (buffers, not parameters; buffers=True counts
    them too) and Resize's roi/scales. Rank-0 constants (Clip bounds, eps,
    sqrt(d)) and integer tensors (shapes, axes, position ids) are not
    parameters. Reads dims only, so works on models with external data."""
    skip = set()
    for node in model.graph.node:
        if node.op_type == "BatchNormalization" and not buffers:
            skip.update(node.input[3:5])
        elif node.op_type == "Resize":
            skip.update(node.input[1:])
    floats = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE}
    return sum(math.prod(t.dims) for t in model.graph.initializer
               if t.data_type in floats and len(t.dims) >= 1 and t.name not in skip)


# --- command line ----------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    def error(self, message: str):   # one line, exit status 1
        self.exit(1, f"{self.prog}: error: {message}\n")


# What each size flag sets; _flag_help adds each model's default.
FLAG_HELP: dict[str, str] = {
    "batch": "inputs per run: the first dimension of every input and output",
    "resolution": ("input height and width in pixels (dcgan: the generated image's, a power of 2 "
                   "from 8; yolov3: a multiple of 32)"),
    "width": "divide every channel count by this, keeping every layer (the tests take 4 or 8)",
    "seq": "tokens per input sequence",
    "layers": "encoder layers",
    "hidden": "hidden size, a multiple of --heads",
    "heads": "attention heads",
    "classes": "classes the network tells apart (yolov3: per detection box)",
    "opset": f"the model's ONNX opset, {OPSETS.start} to {OPSETS.stop - 1}",
    "seed": "seed of the random weights",
}


def _flag_help(flag: str) -> str:
    """FLAG_HELP[flag] and each model's default: "(default 224; yolov3 416,
    dcgan 64; not bert)"."""
    defaults = {name: inspect.signature(fn).parameters[flag].default
                for name, fn in MODELS.items() if flag in inspect.signature(fn).parameters}
    values = list(defaults.values())
    common = max(values, key=values.count)
    notes = [f"default {common}"]
    others = [f"{name} {value}" for name, value in defaults.items() if value != common]
    if others:
        notes.append(", ".join(others))
    if len(defaults) == 1:
        notes = [f"{name} only, default {value}" for name, value in defaults.items()]
    elif len(defaults) < len(MODELS):
        notes.append("not " + ", ".join(n for n in MODELS if n not in defaults))
    return f"{FLAG_HELP[flag]} ({'; '.join(notes)})"


def _parser() -> _Parser:
    p = _Parser(prog="zoo.py", description="Write one of the benchmark models as ONNX.",
                epilog="A flag left out takes the model's default: the paper's size. A model "
                       "given a flag it does not take is an error.")
    p.add_argument("name", nargs="?", help="model name (see --list)")
    p.add_argument("-o", "--output", metavar="OUTPUT.onnx", help="the .onnx file to write")
    p.add_argument("--list", action="store_true", help="list the models and exit")
    for flag in ("batch", "resolution", "width", "seq", "layers", "hidden", "heads", "classes",
                 "opset", "seed"):
        p.add_argument(f"--{flag}", type=int, metavar="N", help=_flag_help(flag))
    p.add_argument("--weights", choices=["random", "zeros"],
                   help="random (the default): seeded normal weights scaled to keep activations "
                        "O(1), for checking results; zeros: the same graph without drawing random "
                        "numbers, faster, where only shapes matter")
    p.add_argument("--external-data", action="store_true",
                   help="write tensors of 1 KiB and more to OUTPUT.onnx.data beside the model, "
                        "as torch.onnx.export does (needed above protobuf's 2 GB)")
    return p


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.list:
        for name, fn in MODELS.items():
            print(f"{name:<11} {fn.__doc__.splitlines()[0]}")
        return 0
    if args.name is None or args.output is None:
        parser.error("give a model NAME and -o OUTPUT (or --list)")
    if args.name not in MODELS:
        parser.error(f"unknown model {args.name!r} (one of {', '.join(MODELS)})")
    accepted = inspect.signature(MODELS[args.name]).parameters
    kwargs = {}
    for key in ("batch", "resolution", "width", "seq", "layers", "hidden", "heads", "classes",
                "opset", "seed", "weights"):
        value = getattr(args, key)
        if value is None:
            continue
        if key not in accepted:
            parser.error(f"{args.name} takes no --{key}")
        if key not in ("seed", "weights") and value < 1:
            parser.error(f"--{key} must be positive")
        kwargs[key] = value
    try:
        model = build(args.name, **kwargs)
        save(model, args.output, external_data=args.external_data)
    except (ValueError, OSError) as e:
        parser.error(str(e).splitlines()[0])
    print(f"wrote {args.output}: {args.name}, {param_count(model):,} parameters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
