"""Directional-derivative checks of whole models: every benchmark model of
bench/models/zoo.py at a reduced size, imported, turned to f64, and
differentiated (the vector-Jacobian product of its first output, with a
random seed, with respect to its float inputs and every weight). For a
random direction v, <VJP, v> must equal the central difference
<seed, (f(x + eps v) - f(x - eps v)) / 2 eps> through the graph interpreter."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
import siblings

from swir.frontend.onnx_import import import_onnx
from swir.interp.run import run_function
from swir.ir.constants import global_array
from swir.ir.builder import Builder
from swir.ir.clone import clone
from swir.ir.core import Function, Global, Module, SymbolRef
from swir.ir.types import TensorType
from swir.ops import GATHER
from swir.parser import parse_module
from swir.passes import pass_class
from swir.passes.manager import PassManager
from swir.printer import print_module
from swir.verifier import verify

from helpers import rng_for

zoo = siblings.zoo()

# Reduced sizes (every layer kept, channels divided by width), batch 2.
SMALL = {
    "resnet18": {"resolution": 32, "width": 16},
    "resnet50": {"resolution": 32, "width": 16},
    "vgg16": {"resolution": 32, "width": 16},
    "yolov3": {"resolution": 32, "width": 16},
    "dcgan": {"resolution": 16, "width": 16},
    "mobilenet": {"resolution": 32, "width": 16},
    "shufflenet": {"resolution": 32, "width": 8},
    "bert": {"layers": 2, "hidden": 32, "heads": 4, "intermediate": 64, "vocab": 50, "seq": 6},
}


def f64_module(name: str, folder) -> Module:
    """The small model at the graph stage in f64: weights inline, then every
    f32 read as f64 (the literals are exact in both)."""
    model = zoo.build(name, batch=2, **SMALL[name])
    path = folder / f"{name}.onnx"
    onnx.save(model, str(path))
    imported = import_onnx(path, f"{name}.weights", inline_max=1 << 30)
    assert not imported.weights, "every weight is inline"
    return parse_module(print_module(imported.module).replace("f32", "f64"), name)


def with_gradient(m: Module) -> tuple[Function, Function, list[int], list[Global]]:
    """@f: @main with its float globals as parameters (gather tables excepted:
    their gradient needs a scatter-add); @g: its seedable gradient with
    respect to every float parameter. Returns them, the wrt indices and the
    weights the parameters replaced."""
    main = m.lookup("main")
    tables = {i.args[0] for i in main.walk() if i.isa(GATHER)}
    used = _feeding(main)
    weights = list(dict.fromkeys(
        v for i in main.walk() for v in i.operands
        if isinstance(v, Global) and v not in tables and isinstance(v.type, TensorType)
        and v.type.element.is_float and v in used))
    types = [p.type for p in main.params] + [w.type for w in weights]
    f, b = Builder.function(m, "f", types)
    mapping = dict(zip(list(main.params) + weights, f.params))
    body = main.body.blocks[0].instructions
    clone(b, body[:-1], mapping)
    y = mapping[body[-1].args[0]]
    b.create("return", y)
    f.result_types = [y.type]
    wrt = tuple(i for i, t in enumerate(types) if t.element.is_float)
    g = Function("g", types + [y.type], [types[i] for i in wrt],
                 attrs={"gradient": SymbolRef("f"), "wrt": wrt, "seedable": True})
    m.add(g)
    verify(m)
    PassManager([pass_class("differentiate")()], verify_each=True).run(m)
    return m.lookup("f"), m.lookup("g"), list(wrt), weights


def _feeding(main: Function) -> set:
    """The values the first result depends on (BERT's pooler weights feed only
    its second)."""
    body = main.body.blocks[0].instructions
    needed = {body[-1].args[0]}
    for inst in reversed(body[:-1]):
        if any(r in needed for r in inst.results):
            needed.update(inst.operands)
    return needed


@pytest.mark.parametrize("name", sorted(SMALL))
def test_directional_derivative(name, tmp_path):
    m = f64_module(name, tmp_path)
    main = m.lookup("main")
    feeds = zoo.random_inputs(onnx.load(str(tmp_path / f"{name}.onnx")))
    args = [feeds[p.name].astype(np.float64) if np.issubdtype(feeds[p.name].dtype, np.floating)
            else feeds[p.name] for p in main.params]
    f, g, wrt, weights = with_gradient(m)
    args += [global_array(w, tmp_path) for w in weights]
    rng = rng_for("zoo-grad", name)
    seed = rng.standard_normal(f.result_types[0].shape)
    grads = run_function(m, g, args + [seed])
    v = [rng.standard_normal(args[i].shape) for i in wrt]
    # A unit direction over all the arguments: each element moves by about
    # eps / sqrt(n), so that no relu or max-pool kink lies within the step
    # (with each element moved by eps, ResNet's 7 x 7 stem crosses one).
    norm = math.sqrt(sum(float(np.sum(d * d)) for d in v))
    v = [d / norm for d in v]
    eps = 1e-6

    def at(sign: float) -> np.ndarray:
        moved = list(args)
        for i, d in zip(wrt, v):
            moved[i] = args[i] + sign * eps * d
        return run_function(m, f, moved)[0]
    numeric = float(np.sum(seed * (at(1) - at(-1)))) / (2 * eps)
    analytic = sum(float(np.sum(gr * d)) for gr, d in zip(grads, v))
    # Central differences in f64 are accurate to about eps^2 * f''' plus
    # rounding ~ 1e-16 |f| / eps: relative 1e-6 (absolute 1e-7) leaves room for both.
    assert math.isclose(analytic, numeric, rel_tol=1e-6, abs_tol=1e-7), (analytic, numeric)

