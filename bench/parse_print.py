#!/usr/bin/env python3
"""Throughput of the textual IR: parse (text -> IR), verify, print (IR -> text).

Generates two synthetic modules of about ``--instructions`` instructions each
(every instruction counts: terminators, calls, loops and guards included):

* a **graph-stage** module: several functions built from ResNet/transformer-like
  units (conv2d + batch_norm-like mul/add/relu chains, batch_norm, residual adds,
  squeeze-excite with reduce_mean, concat + 1x1 conv, attention with reshape /
  transpose / matmul / softmax), ``cond_br`` diamonds joining in blocks with
  arguments, values reused far from their definition and across blocks (so the
  dominance checks have work), one ``file "model.weights" offset N`` global per
  weight, and a ``@main`` calling every function;
* a **loop-stage** module of comparable size: kernels with loop nests and
  affine loads / stores (padding guards, remainder tiles with ``min`` bounds,
  ``floordiv`` / ``mod`` subscripts, steps), which the verifier bounds-checks
  by interval analysis, and a host ``@main`` calling every kernel.

The generated text is first put in canonical form (``print(parse(text))``),
checked to round-trip byte for byte, and written to a temporary file; every
timing is then taken on that canonical text. Each phase is timed ``--runs``
times (median reported, garbage collected before each run):

* ``parse``: text -> IR (``parse_module``);
* ``verify``: ``verify`` on a parsed module;
* ``print``: IR -> text (``print_module``);
* ``round trip``: read the file, parse, verify and print, end to end.

Usage::

    python bench/parse_print.py [--instructions N] [--runs R] [--json FILE]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from swir.parser import parse_module, read_source
from swir.printer import print_module
from swir.verifier import verify

TARGET_SECONDS = 10.0  # the issue's target for the graph-stage round trip

F32 = 4  # bytes per element of every weight (for file offsets)


# --------------------------------------------------------------------------
# Graph-stage module
# --------------------------------------------------------------------------

def _t(*dims: int, el: str = "f32") -> str:
    return "<" + " x ".join([*map(str, dims), el]) + ">"


class _GraphFunction:
    """One function: a spine of units over a <1 x C x H x W> feature map."""

    C, H, W = 64, 28, 28

    def __init__(self, gen: "_GraphGen", index: int, budget: int) -> None:
        self.gen, self.rng = gen, gen.rng
        self.name = f"block{index}"
        self.budget = budget          # instructions to emit, exactly
        self.count = 0
        self.lines: list[str] = []
        self.unit = 0
        self.cur = "%x"               # the running feature map (dominates what follows)
        self.pool = ["%x"]            # feature maps in dominating blocks, for skips
        self.T = _t(1, self.C, self.H, self.W)

    # -- helpers -------------------------------------------------------------------
    def emit(self, text: str) -> None:
        self.lines.append("  " + text)
        self.count += 1

    def label(self, text: str) -> None:
        self.lines.append(text)

    def weight(self, what: str, *dims: int) -> str:
        return self.gen.weight(f"{self.name}.u{self.unit}.{what}", dims)

    def skip(self) -> str:
        # Mostly far back (long live ranges, uses across blocks), sometimes recent.
        if self.rng.random() < 0.5:
            return self.rng.choice(self.pool)
        return self.rng.choice(self.pool[-8:])

    def push(self, v: str) -> None:
        self.cur = v
        self.pool.append(v)

    # -- units (size: instructions emitted) ----------------------------------------
    def conv_bn_relu(self) -> None:  # 4
        C, T, u = self.C, self.T, f"%u{self.unit}"
        w, b = self.weight("conv.w", C, C, 3, 3), self.weight("conv.b", C)
        s, h = self.weight("bn.scale", 1, C, 1, 1), self.weight("bn.shift", 1, C, 1, 1)
        self.emit(f"{u}.conv = conv2d {self.cur}, {w}, {b} {{stride = [1, 1], "
                  f"pad = [1, 1, 1, 1], dilation = [1, 1], groups = 1}} : {T}")
        self.emit(f"{u}.scaled = mul {u}.conv, {s} : {T}")
        self.emit(f"{u}.shifted = add {u}.scaled, {h} : {T}")
        self.emit(f"{u}.relu = relu {u}.shifted : {T}")
        self.push(f"{u}.relu")

    def batch_norm(self) -> None:  # 2
        C, T, u = self.C, self.T, f"%u{self.unit}"
        ps = [self.weight(p, C) for p in ("bn.gamma", "bn.beta", "bn.mean", "bn.var")]
        self.emit(f"{u}.bn = batch_norm {self.cur}, {', '.join(ps)} {{epsilon = 1e-05}} : {T}")
        self.emit(f"{u}.relu = relu {u}.bn : {T}")
        self.push(f"{u}.relu")

    def residual(self) -> None:  # 2
        T, u = self.T, f"%u{self.unit}"
        self.emit(f"{u}.res = add {self.cur}, {self.skip()} : {T}")
        self.emit(f"{u}.relu = relu {u}.res : {T}")
        self.push(f"{u}.relu")

    def elementwise(self) -> None:  # 3
        T, u = self.T, f"%u{self.unit}"
        self.emit(f"{u}.m = mul {self.cur}, {self.skip()} : {T}")
        self.emit(f"{u}.a = add {u}.m, {self.skip()} : {T}")
        self.emit(f"{u}.r = relu {u}.a : {T}")
        self.push(f"{u}.r")

    def squeeze_excite(self) -> None:  # 4
        C, T, u = self.C, self.T, f"%u{self.unit}"
        w = self.weight("se.w", C, C, 1, 1)
        self.emit(f"{u}.mean = reduce_mean {self.cur} {{axes = [2, 3], keepdims = true}} : "
                  f"{_t(1, C, 1, 1)}")
        self.emit(f"{u}.fc = conv2d {u}.mean, {w} : {_t(1, C, 1, 1)}")
        self.emit(f"{u}.gate = sigmoid {u}.fc : {_t(1, C, 1, 1)}")
        self.emit(f"{u}.se = mul {self.cur}, {u}.gate : {T}")
        self.push(f"{u}.se")

    def concat_project(self) -> None:  # 3
        C, H, W, T, u = self.C, self.H, self.W, self.T, f"%u{self.unit}"
        w = self.weight("proj.w", C, 2 * C, 1, 1)
        self.emit(f"{u}.cat = concat {self.cur}, {self.skip()} {{axis = 1}} : "
                  f"{_t(1, 2 * C, H, W)}")
        self.emit(f"{u}.proj = conv2d {u}.cat, {w} : {T}")
        self.emit(f"{u}.relu = relu {u}.proj : {T}")
        self.push(f"{u}.relu")

    def attention(self) -> None:  # 9
        C, H, W, T, u = self.C, self.H, self.W, self.T, f"%u{self.unit}"
        N = H * W
        wq = self.weight("attn.wq", C, C)
        self.emit(f"{u}.seq = reshape {self.cur} {{shape = [1, {C}, {N}]}} : {_t(1, C, N)}")
        self.emit(f"{u}.tok = transpose {u}.seq {{perm = [0, 2, 1]}} : {_t(1, N, C)}")
        self.emit(f"{u}.q = matmul {u}.tok, {wq} : {_t(1, N, C)}")
        self.emit(f"{u}.scores = matmul {u}.q, {u}.seq : {_t(1, N, N)}")
        self.emit(f"{u}.p = softmax {u}.scores {{axis = -1}} : {_t(1, N, N)}")
        self.emit(f"{u}.ctx = matmul {u}.p, {u}.tok : {_t(1, N, C)}")
        self.emit(f"{u}.ctxt = transpose {u}.ctx {{perm = [0, 2, 1]}} : {_t(1, C, N)}")
        self.emit(f"{u}.img = reshape {u}.ctxt {{shape = [1, {C}, {H}, {W}]}} : {T}")
        self.emit(f"{u}.out = add {u}.img, {self.cur} : {T}")
        self.push(f"{u}.out")

    def diamond(self) -> None:  # 6: cond_br; mul, add, br; relu, br; then a join block
        T, u = self.T, f"u{self.unit}"
        self.emit(f"cond_br %train, '{u}.then, '{u}.else")
        self.label(f"'{u}.then:")
        self.emit(f"%{u}.t = mul {self.cur}, {self.skip()} : {T}")
        self.emit(f"%{u}.t2 = add %{u}.t, {self.cur} : {T}")
        self.emit(f"br '{u}.join(%{u}.t2)")
        self.label(f"'{u}.else:")
        self.emit(f"%{u}.e = relu {self.cur} : {T}")
        self.emit(f"br '{u}.join(%{u}.e)")
        self.label(f"'{u}.join(%{u}.phi: {T}):")
        self.push(f"%{u}.phi")

    def pad(self) -> None:  # 1
        self.emit(f"%u{self.unit}.pad = relu {self.cur} : {self.T}")
        self.push(f"%u{self.unit}.pad")

    UNITS = [  # (unit, size, weight)
        (conv_bn_relu, 4, 30), (batch_norm, 2, 8), (residual, 2, 14), (elementwise, 3, 14),
        (squeeze_excite, 4, 10), (concat_project, 3, 8), (attention, 9, 6), (diamond, 6, 10),
    ]

    def build(self) -> list[str]:
        C = self.C
        self.lines.append(f"func @{self.name}(%x: {self.T}, %train: i1) -> {_t(1, 1000)} {{")
        self.label("'entry:")
        head = 5
        units, sizes, weights = zip(*self.UNITS)
        while self.budget - self.count > head:
            left = self.budget - self.count - head
            i = self.rng.choices(range(len(units)), weights)[0]
            if sizes[i] > left:
                self.pad()
            else:
                units[i](self)
            self.unit += 1
        assert self.budget - self.count == head
        w, b = self.gen.weight(f"{self.name}.fc.w", (C, 1000)), \
            self.gen.weight(f"{self.name}.fc.b", (1000,))
        self.emit(f"%pool = reduce_mean {self.cur} {{axes = [2, 3], keepdims = false}} : "
                  f"{_t(1, C)}")
        self.emit(f"%logits = matmul %pool, {w} : {_t(1, 1000)}")
        self.emit(f"%biased = add %logits, {b} : {_t(1, 1000)}")
        self.emit(f"%prob = softmax %biased {{axis = -1}} : {_t(1, 1000)}")
        self.emit("return %prob")
        self.lines.append("}")
        return self.lines


class _GraphGen:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.globals: list[str] = []
        self.offset = 0

    def weight(self, name: str, dims: tuple[int, ...]) -> str:
        self.globals.append(f'global @{name} : {_t(*dims)} = file "model.weights" '
                            f"offset {self.offset}")
        n = 1
        for d in dims:
            n *= d
        self.offset += n * F32
        return f"@{name}"

    def module(self, instructions: int) -> str:
        nfuncs = max(1, round(instructions / 5000))
        main_size = 2 * nfuncs  # calls, adds combining the outputs, return
        body = instructions - main_size
        per, extra = divmod(body, nfuncs)
        funcs = []
        for i in range(nfuncs):
            funcs.append(_GraphFunction(self, i, per + (1 if i < extra else 0)).build())
        T = _t(1, _GraphFunction.C, _GraphFunction.H, _GraphFunction.W)
        main = [f"func @main(%x: {T}, %train: i1) -> {_t(1, 1000)} {{", "'entry:"]
        for i in range(nfuncs):
            main.append(f"  %out{i} = call @block{i}(%x, %train) : {_t(1, 1000)}")
        acc = "%out0"
        for i in range(1, nfuncs):
            main.append(f"  %sum{i} = add {acc}, %out{i} : {_t(1, 1000)}")
            acc = f"%sum{i}"
        main += [f"  return {acc}", "}"]
        parts = ['module "synthetic_graph"', "stage graph", "", *self.globals]
        for f in funcs + [main]:
            parts += ["", *f]
        return "\n".join(parts) + "\n"


def graph_module(instructions: int, seed: int = 1) -> str:
    return _GraphGen(seed).module(instructions)


# --------------------------------------------------------------------------
# Loop-stage module
# --------------------------------------------------------------------------

class _LoopGen:
    """Kernels of lowered ops, each one loop-nest program; a host @main calls them."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.decls: list[str] = []
        # (type, slot) -> buffer name: memory-planned activations, reused across kernels
        self.buffers: dict[tuple[str, int], str] = {}
        self.offset = 0
        self.kernels: list[list[str]] = []
        self.calls: list[str] = []
        self.count = 0

    def buffer(self, type_: str, slot: int = 0) -> str:
        name = self.buffers.get((type_, slot))
        if name is None:
            name = f"@act{len(self.buffers)}"
            self.buffers[(type_, slot)] = name
            self.decls.append(f"buffer {name} : {type_}")
        return name

    def weight(self, name: str, dims: tuple[int, ...]) -> str:
        t = "buf" + _t(*dims)
        self.decls.append(f'global @{name} : {t} = file "model.weights" offset {self.offset}')
        n = 1
        for d in dims:
            n *= d
        self.offset += n * F32
        return f"@{name}"

    def kernel(self, name: str, params: list[tuple[str, str, str]], body: list[str],
               count: int) -> None:
        """params: (param name, type, argument passed by @main)."""
        assert count == sum(1 for line in body if line.strip() not in ("}", "} else {")), name
        sig = ", ".join(f"%{p}: {t}" for p, t, _ in params)
        self.kernels.append([f"kernel @{name}({sig}) {{", *body, "}"])
        self.calls.append(f"  call @{name}({', '.join(a for _, _, a in params)})")
        self.count += count + 1  # + the call in @main

    # -- kernel templates; each returns its instruction count ----------------------
    def conv(self, k: int) -> None:
        C = self.rng.choice([8, 16, 32])
        H = self.rng.choice([7, 14, 28])
        xt, wt = "buf" + _t(1, C, H, H), "buf" + _t(C, C, 3, 3)
        w = self.weight(f"conv{k}.w", (C, C, 3, 3))
        b = self.weight(f"conv{k}.b", (C,))
        body = f"""  %zero = const 0.0 : f32
  for %oc = 0 to {C} {{
    for %oh = 0 to {H} {{
      for %ow = 0 to {H} {{
        %bias = load %B[%oc] : f32
        store %bias, %O[0, %oc, %oh, %ow]
        for %ic = 0 to {C} {{
          for %kh = 0 to 3 {{
            for %kw = 0 to 3 {{
              if %oh + %kh - 1 >= 0, %oh + %kh - 1 < {H}, %ow + %kw - 1 >= 0, %ow + %kw - 1 < {H} {{
                %a = load %I[0, %ic, %oh + %kh - 1, %ow + %kw - 1] : f32
                %w = load %W[%oc, %ic, %kh, %kw] : f32
                %acc = load %O[0, %oc, %oh, %ow] : f32
                %prod = mul %a, %w : f32
                %sum = add %acc, %prod : f32
                store %sum, %O[0, %oc, %oh, %ow]
              }}
            }}
          }}
        }}
        %v = load %O[0, %oc, %oh, %ow] : f32
        %r = max %v, %zero : f32
        store %r, %O[0, %oc, %oh, %ow]
      }}
    }}
  }}""".split("\n")
        self.kernel(f"conv2d_relu_{k}", [("I", xt, self.buffer(xt)), ("W", wt, w),
                                         ("B", "buf" + _t(C), b),
                                         ("O", xt, self.buffer(xt, 1))], body, 19)

    def matmul(self, k: int) -> None:
        M = self.rng.choice([1, 4, 16])
        K, N = self.rng.choice([(256, 128), (512, 256), (1024, 1000)])
        at, bt, ct = ("buf" + _t(M, K), "buf" + _t(K, N), "buf" + _t(M, N))
        w = self.weight(f"fc{k}.w", (K, N))
        body = f"""  %zero = const 0.0 : f32
  for %x = 0 to {M} {{
    for %y = 0 to {N} {{
      store %zero, %C[%x, %y]
      for %k = 0 to {K} {{
        %a = load %A[%x, %k] : f32
        %b = load %B[%k, %y] : f32
        %c = load %C[%x, %y] : f32
        %m = mul %a, %b : f32
        %s = add %c, %m : f32
        store %s, %C[%x, %y]
      }}
    }}
  }}""".split("\n")
        self.kernel(f"matmul_{k}", [("A", at, self.buffer(at)), ("B", bt, w),
                                    ("C", ct, self.buffer(ct))], body, 11)

    def elementwise(self, k: int) -> None:
        C = self.rng.choice([8, 16, 32])
        HW = self.rng.choice([49, 196, 784])
        t = "buf" + _t(C, HW)
        body = f"""  %zero = const 0.0 : f32
  %scale = const 0.5 : f32
  for %c = 0 to {C} {{
    for %i = 0 to {HW} {{
      %a = load %X[%c, %i] : f32
      %b = load %Y[%c, %i] : f32
      %m = mul %a, %scale : f32
      %s = add %m, %b : f32
      %r = max %s, %zero : f32
      store %r, %Z[%c, %i]
    }}
  }}""".split("\n")
        self.kernel(f"fused_add_relu_{k}", [("X", t, self.buffer(t)),
                                            ("Y", t, self.buffer(t, 1)),
                                            ("Z", t, self.buffer(t, 2))], body, 10)

    def tiles(self, k: int) -> None:
        n = self.rng.choice([1000, 3136, 6272])
        tiles = -(-n // 64)
        xt, yt = "buf" + _t(n), "buf" + _t(n // 2)
        body = f"""  for %io = 0 to {tiles} {{
    for %ii = 0 to min(64, {n} - 64*%io) {{
      %v = load %X[64*%io + %ii] : f32
      %e = exp %v : f32
      store %e, %Y[(64*%io + %ii) floordiv 2]
    }}
  }}
  for %j = 0 to {n} step 7 {{
    %w = load %X[%j mod 10] : f32
    %h = load %Y[%j floordiv 2] : f32
    %s = add %w, %h : f32
    store %s, %Y[%j floordiv 2]
  }}""".split("\n")
        self.kernel(f"tiled_{k}", [("X", xt, self.buffer(xt)), ("Y", yt, self.buffer(yt))],
                    body, 10)

    def transpose(self, k: int) -> None:
        C = self.rng.choice([8, 16, 32])
        H = self.rng.choice([7, 14, 28])
        it, ot = "buf" + _t(1, C, H, H), "buf" + _t(1, H, H, C)
        body = f"""  for %c = 0 to {C} {{
    for %h = 0 to {H} {{
      for %w = 0 to {H} {{
        %v = load %I[0, %c, %h, %w] : f32
        store %v, %O[0, %h, %w, %c]
      }}
    }}
  }}""".split("\n")
        self.kernel(f"transpose_{k}", [("I", it, self.buffer(it)), ("O", ot, self.buffer(ot))],
                    body, 5)

    def softmax(self, k: int) -> None:
        R = self.rng.choice([1, 16, 64])
        N = self.rng.choice([10, 128, 1000])
        t, st = "buf" + _t(R, N), "buf" + _t(R)
        body = f"""  %zero = const 0.0 : f32
  for %r = 0 to {R} {{
    store %zero, %S[%r]
    for %j = 0 to {N} {{
      %x = load %X[%r, %j] : f32
      %e = exp %x : f32
      %s = load %S[%r] : f32
      %t = add %s, %e : f32
      store %t, %S[%r]
    }}
    for %j = 0 to {N} {{
      %x = load %X[%r, %j] : f32
      %e = exp %x : f32
      %s = load %S[%r] : f32
      %y = div %e, %s : f32
      store %y, %Y[%r, %j]
    }}
  }}""".split("\n")
        self.kernel(f"softmax_{k}", [("X", t, self.buffer(t)), ("S", st, self.buffer(st)),
                                     ("Y", t, self.buffer(t, 1))], body, 15)

    TEMPLATES = [(conv, 19, 30), (matmul, 11, 15), (elementwise, 10, 25), (tiles, 10, 10),
                 (transpose, 5, 10), (softmax, 15, 10)]

    def module(self, instructions: int) -> str:
        templates, sizes, weights = zip(*self.TEMPLATES)
        k = 0
        # @main's own 'return' and the tail of 1-instruction kernels fill exactly.
        while instructions - self.count - 1 > 0:
            left = instructions - self.count - 1
            i = self.rng.choices(range(len(templates)), weights)[0]
            if sizes[i] + 1 > left:
                # smallest kernel: one store of a constant, plus its call
                t = "buf" + _t(16)
                if left >= 3:
                    self.kernel(f"fill_{k}", [("O", t, self.buffer(t))],
                                ["  %z = const 0.0 : f32", "  store %z, %O[0]"], 2)
                else:
                    self.kernel(f"nop_{k}", [("O", t, self.buffer(t))], [], 0)
            else:
                templates[i](self, k)
            k += 1
        parts = ['module "synthetic_loop"', "stage loop", "", *self.decls]
        for kern in self.kernels:
            parts += ["", *kern]
        parts += ["", "func @main() {", "'entry:", *self.calls, "  return", "}"]
        self.count += 1
        assert self.count == instructions, (self.count, instructions)
        return "\n".join(parts) + "\n"


def loop_module(instructions: int, seed: int = 2) -> str:
    return _LoopGen(seed).module(instructions)


# --------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------

class _GCClock:
    """Time spent in the cyclic garbage collector (via gc.callbacks)."""

    def __init__(self) -> None:
        self.total = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.total += time.perf_counter() - self._start


def _timed(fn: Callable[[], object], runs: int
           ) -> tuple[float, list[float], float, object]:
    """Median wall time of ``runs`` calls (GC collected before each), the GC time
    of the median run, and the last result."""
    times, gcs, result = [], [], None
    clock = _GCClock()
    for _ in range(runs):
        result = None
        gc.collect()
        clock.total = 0.0
        gc.callbacks.append(clock)
        try:
            t0 = time.perf_counter()
            result = fn()
            times.append(time.perf_counter() - t0)
        finally:
            gc.callbacks.remove(clock)
        gcs.append(clock.total)
    median = statistics.median(times)
    gc_of_median = gcs[min(range(runs), key=lambda i: abs(times[i] - median))]
    return median, times, gc_of_median, result


def count_instructions(m) -> int:
    return sum(1 for _ in m.walk())


def bench_module(label: str, text: str, runs: int, tmpdir: str) -> dict:
    # Canonical form first; then everything is timed on that text.
    canonical = print_module(parse_module(text, f"<{label} generated>"))
    path = os.path.join(tmpdir, f"{label}.swir")
    Path(path).write_text(canonical, encoding="utf-8")
    canonical = read_source(path)
    m = parse_module(canonical, path)
    verify(m)
    again = print_module(m)
    roundtrip_ok = again == canonical
    if not roundtrip_ok:
        a, b = canonical.splitlines(), again.splitlines()
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                print(f"{label}: round trip differs at line {i + 1}:\n  {x}\n  {y}",
                      file=sys.stderr)
                break
    n_inst = count_instructions(m)
    n_funcs = len(m.functions)
    n_globals = len(m.globals)
    size = len(canonical.encode("utf-8"))
    del m, again

    phases: dict[str, dict] = {}

    def record(name: str, median: float, times: list[float], gc_s: float) -> None:
        phases[name] = {
            "median_s": median, "runs_s": times, "gc_s": gc_s,
            "instructions_per_s": n_inst / median if median else float("inf"),
            "mb_per_s": size / 1e6 / median if median else float("inf"),
        }

    med, times, gc_s, m = _timed(lambda: parse_module(canonical, path), runs)
    record("parse", med, times, gc_s)
    med, times, gc_s, _ = _timed(lambda: verify(m), runs)
    record("verify", med, times, gc_s)
    med, times, gc_s, _ = _timed(lambda: print_module(m), runs)
    record("print", med, times, gc_s)
    del m

    def round_trip() -> str:
        t = read_source(path)
        mod = parse_module(t, path)
        verify(mod)
        return print_module(mod)

    med, times, gc_s, out = _timed(round_trip, runs)
    record("round trip", med, times, gc_s)
    roundtrip_ok = roundtrip_ok and out == canonical
    return {
        "module": label, "instructions": n_inst, "functions": n_funcs, "globals": n_globals,
        "lines": canonical.count("\n"), "size_bytes": size, "size_mb": size / 1e6,
        "roundtrip_byte_identical": roundtrip_ok, "phases": phases,
    }


def _table(results: list[dict]) -> str:
    rows = [("module", "phase", "median s", "of which GC s", "instr/s", "MB/s")]
    for r in results:
        for phase, p in r["phases"].items():
            rows.append((r["module"], phase, f"{p['median_s']:.2f}", f"{p['gc_s']:.2f}",
                         f"{p['instructions_per_s']:,.0f}", f"{p['mb_per_s']:.2f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = []
    for j, row in enumerate(rows):
        out.append("| " + " | ".join(c.ljust(w) if i < 2 else c.rjust(w)
                                     for i, (c, w) in enumerate(zip(row, widths))) + " |")
        if j == 0:
            out.append("|" + "|".join("-" * (w + 2) if i < 2 else "-" * (w + 1) + ":"
                                      for i, w in enumerate(widths)) + "|")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instructions", type=int, default=100_000,
                    help="instructions per module (default 100000)")
    ap.add_argument("--runs", type=int, default=3, help="timed runs per phase (default 3)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = ap.parse_args(argv)
    if args.instructions < 100 or args.runs < 1:
        ap.error("need --instructions >= 100 and --runs >= 1")
    # As swir-opt does: nested regions are built recursively.
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))

    import lark
    print(f"python {platform.python_version()}, lark {lark.__version__}, "
          f"{os.cpu_count()} CPUs; {args.instructions:,} instructions per module, "
          f"median of {args.runs} runs", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="swir-bench-") as tmp:
        for label, gen in (("graph", graph_module), ("loop", loop_module)):
            t0 = time.perf_counter()
            text = gen(args.instructions)
            print(f"{label}: generated in {time.perf_counter() - t0:.1f} s; timing ...",
                  flush=True)
            r = bench_module(label, text, args.runs, tmp)
            results.append(r)
            print(f"{label}: {r['instructions']:,} instructions, {r['functions']:,} "
                  f"functions, {r['globals']:,} globals/buffers, {r['lines']:,} lines, "
                  f"{r['size_mb']:.2f} MB; print(parse(text)) == text: "
                  f"{'yes' if r['roundtrip_byte_identical'] else 'NO'}", flush=True)

    print()
    print(_table(results))
    g = results[0]["phases"]["round trip"]["median_s"]
    met = g < TARGET_SECONDS
    print(f"\ngraph round trip (read + parse + verify + print): {g:.2f} s; "
          f"target < {TARGET_SECONDS:.0f} s: {'met' if met else 'NOT met'}")
    if args.json:
        doc = {"instructions_requested": args.instructions, "runs": args.runs,
               "python": platform.python_version(), "lark": lark.__version__,
               "cpus": os.cpu_count(), "target_s": TARGET_SECONDS, "target_met": met,
               "results": results}
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    ok = all(r["roundtrip_byte_identical"] for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
