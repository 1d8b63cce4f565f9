"""Write a ResNet-18-shaped graph-stage module (He et al. 2016, ImageNet
variant: 224x224 input, BasicBlocks [2, 2, 2, 2]) for planning figures.

Weights are splat constants: the figures this is for (kernels, arena size,
buffer sizes) depend on shapes only. The ONNX zoo of a later issue brings
real models with random weights.

    python bench/resnet18_graph.py --batch 1 --size 224 -o /tmp/resnet18.swir
    swir-opt -lower-loops --stats /tmp/resnet18.swir -o /tmp/resnet18.loop.swir
"""

from __future__ import annotations

import argparse
import sys


class Net:
    def __init__(self, batch: int, size: int) -> None:
        self.globals: list[str] = []
        self.body: list[str] = []
        self.n = 0
        self.shape = (batch, 3, size, size)

    def value(self) -> str:
        self.n += 1
        return f"%v{self.n}"

    def weight(self, name: str, shape: tuple[int, ...]) -> str:
        dims = " x ".join(map(str, shape))
        self.globals.append(f"global @{name} : <{dims} x f32> = dense<0.01>")
        return f"@{name}"

    @staticmethod
    def ty(shape: tuple[int, ...]) -> str:
        return "<" + " x ".join(map(str, shape)) + " x f32>"

    def emit(self, rhs: str, shape: tuple[int, ...]) -> str:
        v = self.value()
        self.body.append(f"  {v} = {rhs} : {self.ty(shape)}")
        return v

    def conv_bn(self, x: str, shape, name: str, out_c: int, k: int, stride: int, relu: bool
                ) -> tuple[str, tuple[int, ...]]:
        n, c, h, w = shape
        pad = k // 2
        oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
        out = (n, out_c, oh, ow)
        wt = self.weight(f"{name}_w", (out_c, c, k, k))
        y = self.emit(f"conv2d {x}, {wt} {{stride = [{stride}, {stride}], "
                      f"pad = [{pad}, {pad}, {pad}, {pad}]}}", out)
        bn = [self.weight(f"{name}_bn_{p}", (out_c,)) for p in ("scale", "bias", "mean", "var")]
        y = self.emit(f"batch_norm {y}, {', '.join(bn)}", out)
        if relu:
            y = self.emit(f"relu {y}", out)
        return y, out

    def basic_block(self, x: str, shape, name: str, out_c: int, stride: int):
        y, s = self.conv_bn(x, shape, f"{name}_conv1", out_c, 3, stride, True)
        y, s = self.conv_bn(y, s, f"{name}_conv2", out_c, 3, 1, False)
        if stride != 1 or shape[1] != out_c:
            x, _ = self.conv_bn(x, shape, f"{name}_down", out_c, 1, stride, False)
        y = self.emit(f"add {y}, {x}", s)
        return self.emit(f"relu {y}", s), s

    def build(self) -> str:
        x, s = self.conv_bn("%x", self.shape, "conv1", 64, 7, 2, True)
        n, c, h, w = s
        s = (n, c, (h + 2 - 3) // 2 + 1, (w + 2 - 3) // 2 + 1)
        x = self.emit(f"max_pool2d {x} {{kernel = [3, 3], stride = [2, 2], "
                      f"pad = [1, 1, 1, 1]}}", s)
        for li, (out_c, stride) in enumerate([(64, 1), (128, 2), (256, 2), (512, 2)], 1):
            for bi in range(2):
                x, s = self.basic_block(x, s, f"layer{li}_{bi}", out_c, stride if bi == 0 else 1)
        x = self.emit(f"global_avg_pool2d {x}", (s[0], s[1], 1, 1))
        x = self.emit(f"flatten {x} {{axis = 1}}", (s[0], s[1]))
        fc = self.weight("fc_w", (512, 1000))
        x = self.emit(f"matmul {x}, {fc}", (s[0], 1000))
        b = self.weight("fc_b", (1000,))
        x = self.emit(f"add {x}, {b}", (s[0], 1000))
        head = [f'module "resnet18"', "stage graph", ""] + self.globals + [""]
        sig = f"func @main(%x: {self.ty(self.shape)}) -> {self.ty((s[0], 1000))} {{"
        return "\n".join(head + [sig, "'entry:"] + self.body + [f"  return {x}", "}", ""])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("-o", "--output", default="-")
    a = ap.parse_args()
    text = Net(a.batch, a.size).build()
    if a.output == "-":
        sys.stdout.write(text)
    else:
        with open(a.output, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
