#!/usr/bin/env python3
"""Writes the bundled ResNet example: examples/resnet.swir (a graph-stage
module), examples/resnet.weights (the sidecar file its globals read,
little-endian f32) and examples/resnet_input.npy (one 1x3x32x32 image).

The network is a CIFAR-style ResNet-8 (He et al. 2016, Section 4.2, with one
BasicBlock per stage):

    stem     conv3x3(3 -> 16, pad 1) + batch_norm + relu
    stage 1  BasicBlock 16 -> 16, stride 1 (identity shortcut)
    stage 2  BasicBlock 16 -> 32, stride 2 (1x1 conv stride 2 + bn shortcut)
    stage 3  BasicBlock 32 -> 64, stride 2 (1x1 conv stride 2 + bn shortcut)
    head     global_avg_pool2d, flatten to 1x64, matmul 64x10 + bias, softmax

Weights are random but deterministic (fixed seed): convolutions He-normal
(std sqrt(2 / fan_in)), batch norm close to the identity (scale ~1, bias ~0,
mean ~0, var ~1 and positive), the classifier normal with std 1/sqrt(64).
Run it again to regenerate identical files.

    python examples/make_resnet.py                       # the bundled files
    python examples/make_resnet.py --size 8 -o /tmp/r8   # a smaller input (tests)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SEED = 2026
CLASSES = 10
# (name, output channels, stride) of the BasicBlock of each stage
STAGES = [("stage1", 16, 1), ("stage2", 32, 2), ("stage3", 64, 2)]
STEM_CHANNELS = 16


def ty(shape: tuple[int, ...]) -> str:
    return "<" + " x ".join(map(str, shape)) + " x f32>"


class Net:
    """Builds the module text and the weights blob side by side."""

    def __init__(self, size: int, weights_file: str) -> None:
        self.rng = np.random.default_rng(SEED)
        self.size = size
        self.weights_file = weights_file
        self.blob = bytearray()
        self.globals: list[str] = []
        self.body: list[str] = []

    # -- weights ------------------------------------------------------------------
    def weight(self, name: str, data: np.ndarray, comment: str = "") -> str:
        data = np.ascontiguousarray(data, dtype="<f4")
        line = (f"global @{name} : {ty(data.shape)} = "
                f'file "{self.weights_file}" offset {len(self.blob)}')
        self.globals.append(line + (f"   // {comment}" if comment else ""))
        self.blob += data.tobytes()
        return f"@{name}"

    def conv_weight(self, name: str, out_c: int, in_c: int, k: int) -> str:
        std = np.sqrt(2.0 / (in_c * k * k))  # He normal
        return self.weight(name, self.rng.standard_normal((out_c, in_c, k, k)) * std,
                           f"conv {k}x{k}, {in_c} -> {out_c}")

    def bn_weights(self, name: str, c: int) -> list[str]:
        r = self.rng
        return [self.weight(f"{name}_scale", 1.0 + 0.1 * r.standard_normal(c)),
                self.weight(f"{name}_bias", 0.1 * r.standard_normal(c)),
                self.weight(f"{name}_mean", 0.1 * r.standard_normal(c)),
                self.weight(f"{name}_var", r.uniform(0.5, 1.5, c))]

    # -- instructions -------------------------------------------------------------
    def comment(self, text: str) -> None:
        self.body.append(f"  // {text}")

    def emit(self, name: str, rhs: str, shape: tuple[int, ...]) -> str:
        self.body.append(f"  %{name} = {rhs} : {ty(shape)}")
        return f"%{name}"

    def conv_bn(self, x: str, shape: tuple[int, ...], name: str, out_c: int, k: int,
                stride: int, relu: bool) -> tuple[str, tuple[int, ...]]:
        n, c, h, w = shape
        pad = k // 2
        out = (n, out_c, (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1)
        wt = self.conv_weight(f"{name}_w", out_c, c, k)
        y = self.emit(name, f"conv2d {x}, {wt} {{stride = [{stride}, {stride}], "
                            f"pad = [{pad}, {pad}, {pad}, {pad}]}}", out)
        bn = self.bn_weights(f"{name}_bn", out_c)
        y = self.emit(f"{name}_bn", f"batch_norm {y}, {', '.join(bn)}", out)
        if relu:
            y = self.emit(f"{name}_relu", f"relu {y}", out)
        return y, out

    def basic_block(self, x: str, shape: tuple[int, ...], name: str, out_c: int,
                    stride: int) -> tuple[str, tuple[int, ...]]:
        downsample = stride != 1 or shape[1] != out_c
        self.comment(f"{name}: BasicBlock {shape[1]} -> {out_c}, stride {stride}, "
                     + ("1x1 conv shortcut" if downsample else "identity shortcut"))
        y, s = self.conv_bn(x, shape, f"{name}_conv1", out_c, 3, stride, True)
        y, s = self.conv_bn(y, s, f"{name}_conv2", out_c, 3, 1, False)
        if downsample:
            x, _ = self.conv_bn(x, shape, f"{name}_down", out_c, 1, stride, False)
        y = self.emit(f"{name}_add", f"add {y}, {x}", s)
        return self.emit(f"{name}_out", f"relu {y}", s), s

    def build(self) -> str:
        shape = (1, 3, self.size, self.size)
        self.comment(f"stem: conv3x3 3 -> {STEM_CHANNELS}, pad 1, batch_norm, relu")
        x, s = self.conv_bn("%x", shape, "stem", STEM_CHANNELS, 3, 1, True)
        for name, out_c, stride in STAGES:
            x, s = self.basic_block(x, s, name, out_c, stride)
        self.comment(f"head: global average pool, flatten, fully connected {s[1]} -> "
                     f"{CLASSES}, softmax")
        x = self.emit("pool", f"global_avg_pool2d {x}", (s[0], s[1], 1, 1))
        x = self.emit("flat", f"flatten {x} {{axis = 1}}", (s[0], s[1]))
        fc_w = self.weight("fc_w", self.rng.standard_normal((s[1], CLASSES)) / np.sqrt(s[1]),
                           f"fully connected, {s[1]} -> {CLASSES}")
        fc_b = self.weight("fc_b", 0.01 * self.rng.standard_normal(CLASSES))
        x = self.emit("logits", f"matmul {x}, {fc_w}", (s[0], CLASSES))
        x = self.emit("logits_b", f"add {x}, {fc_b}", (s[0], CLASSES))
        x = self.emit("probs", f"softmax {x} {{axis = -1}}", (s[0], CLASSES))
        h = self.size
        header = [
            f"// A CIFAR-style ResNet-8 at the graph stage: a 1x3x{h}x{h} image in,",
            f"// {CLASSES} class probabilities out. Written by make_resnet.py (do not edit;",
            "// run it again to regenerate). Weights: resnet.weights (random, seeded),",
            "// input: resnet_input.npy.",
            "//",
            f"//   stem     conv3x3 3 -> 16 + bn + relu                 1x16x{h}x{h}",
            f"//   stage1   BasicBlock 16 -> 16, identity shortcut      1x16x{h}x{h}",
            f"//   stage2   BasicBlock 16 -> 32, stride 2, 1x1 conv     1x32x{h // 2}x{h // 2}",
            f"//   stage3   BasicBlock 32 -> 64, stride 2, 1x1 conv     1x64x{h // 4}x{h // 4}",
            "//   head     global_avg_pool2d, flatten, matmul + bias, softmax   1x10",
            "//",
            "// BasicBlock: conv3x3 + bn + relu, conv3x3 + bn; shortcut; add; relu.",
            "//",
            "//   swir-opt examples/resnet.swir",
            "//   swir-run examples/resnet.swir --input examples/resnet_input.npy --print",
            "//   swir-cg examples/resnet.swir -o /tmp/resnet && make -C /tmp/resnet emu",
            'module "resnet"',
            "stage graph",
            "",
        ]
        sig = f"func @main(%x: {ty(shape)}) -> {ty((1, CLASSES))} {{"
        return "\n".join(header + self.globals + ["", sig, "'entry:"] + self.body
                         + [f"  return {x}", "}", ""])

    def input(self) -> np.ndarray:
        return self.rng.standard_normal((1, 3, self.size, self.size)).astype(np.float32)


def write(out_dir: Path, size: int = 32, name: str = "resnet") -> tuple[Path, Path, Path]:
    """Write NAME.swir, NAME.weights and NAME_input.npy into out_dir; their paths."""
    if size < 4 or size % 4:
        raise ValueError(f"the input size must be a positive multiple of 4, not {size}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    net = Net(size, f"{name}.weights")
    text = net.build()
    x = net.input()
    paths = (out_dir / f"{name}.swir", out_dir / f"{name}.weights", out_dir / f"{name}_input.npy")
    paths[0].write_text(text)
    paths[1].write_bytes(bytes(net.blob))
    np.save(paths[2], x)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=32, help="input height and width (default 32)")
    ap.add_argument("-o", "--out-dir", default=str(HERE),
                    help="where to write the files (default: examples/)")
    a = ap.parse_args()
    for p in write(Path(a.out_dir), a.size):
        print(f"wrote {p} ({p.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
