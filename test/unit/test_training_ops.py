"""The training ops (swir/ops/training.py): their interpreter kernels against
PyTorch (losses, torch.optim's SGD and Adam over several steps, batch norm's
running statistics), their decompositions against their kernels, and their
shape rules' errors."""

from __future__ import annotations

import numpy as np
import pytest

from swir.interp.run import run_function
from swir.ir.builder import Builder
from swir.ir.core import Module
from swir.ir.types import F32, F64, I64, TensorType
from swir.ops.registry import OpError
from swir.passes import pass_class
from swir.passes.manager import PassManager
from swir.verifier import verify

from helpers import rng_for

torch = pytest.importorskip("torch", reason="PyTorch is in the test extra")


def _module(op: str, types: list[TensorType], attrs: dict) -> Module:
    m = Module("op", stage="graph")
    f, b = Builder.function(m, "main", types)
    inst = b.create_inst(op, *f.params, attrs=attrs)
    b.create("return", *inst.results)
    f.result_types = [r.type for r in inst.results]
    verify(m)
    return m


def _run(m: Module, args: list[np.ndarray], decomposed: bool) -> list[np.ndarray]:
    if decomposed:
        PassManager([pass_class("decompose")()], verify_each=True).run(m)
        assert not any(i.opdef.composite for i in m.walk())
    return run_function(m, m.lookup("main"), args)


def _t(dtype):
    return F32 if dtype == np.float32 else F64


@pytest.mark.parametrize("decomposed", [False, True], ids=["kernel", "decomposed"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_cross_entropy_and_mse(dtype, decomposed):
    rng = rng_for("losses", dtype.__name__)
    x = rng.standard_normal((6, 5)).astype(dtype) * 3
    labels = rng.integers(0, 5, size=6).astype(np.int64)
    m = _module("softmax_cross_entropy", [TensorType((6, 5), _t(dtype)),
                                          TensorType((6,), I64)], {})
    got = _run(m, [x, labels], decomposed)[0]
    want = torch.nn.functional.cross_entropy(torch.tensor(x, dtype=torch.float64),
                                             torch.tensor(labels)).item()
    assert got.shape == () and got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-12)
    t = rng.standard_normal((6, 5)).astype(dtype)
    m = _module("mse_loss", [TensorType((6, 5), _t(dtype))] * 2, {})
    got = _run(m, [x, t], decomposed)[0]
    want = torch.nn.functional.mse_loss(torch.tensor(x, dtype=torch.float64),
                                        torch.tensor(t, dtype=torch.float64)).item()
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-12)


def test_cross_entropy_label_out_of_range_is_an_error():
    from swir.diagnostics import Diagnostic
    m = _module("softmax_cross_entropy", [TensorType((2, 3), F64), TensorType((2,), I64)], {})
    with pytest.raises(Diagnostic, match=r"label 3 of row 1 is not a class in \[0, 3\)"):
        run_function(m, m.lookup("main"), [np.zeros((2, 3)), np.array([0, 3])])


def _optimiser_steps(opt: str, attrs: dict, decomposed: bool, steps: int = 4):
    """(swir's parameter, torch's) after ``steps`` updates with the same gradients."""
    rng = rng_for(opt, tuple(sorted(attrs.items())))
    p0 = rng.standard_normal((3, 4))
    grads = [rng.standard_normal((3, 4)) for _ in range(steps)]
    t = TensorType((3, 4), F64)
    if opt == "sgd":
        momentum = attrs.get("momentum", 0.0) > 0
        m = _module("sgd_update", [t] * (3 if momentum else 2), attrs)
        torch_opt = lambda ps: torch.optim.SGD(ps, **attrs)  # noqa: E731
    else:
        m = _module("adam_update", [t] * 4 + [TensorType((), F64)], attrs)
        torch_opt = lambda ps: torch.optim.Adam(  # noqa: E731
            ps, lr=attrs["lr"], betas=(attrs.get("beta1", 0.9), attrs.get("beta2", 0.999)),
            eps=attrs.get("epsilon", 1e-8), weight_decay=attrs.get("weight_decay", 0.0))
    if decomposed:
        PassManager([pass_class("decompose")()], verify_each=True).run(m)
    p, state = p0.copy(), [np.zeros((3, 4))] * (len(m.lookup("main").params) - 2)
    for k, g in enumerate(grads, 1):
        extra = [np.array(float(k))] if opt == "adam" else []
        out = run_function(m, m.lookup("main"), [p, g] + state[:2] + extra)
        p, state = out[0], out[1:]
    tp = torch.tensor(p0, requires_grad=True)
    o = torch_opt([tp])
    for g in grads:
        tp.grad = torch.tensor(g)
        o.step()
    return p, tp.detach().numpy()


@pytest.mark.parametrize("decomposed", [False, True], ids=["kernel", "decomposed"])
@pytest.mark.parametrize("opt,attrs", [
    ("sgd", {"lr": 0.1}),
    ("sgd", {"lr": 0.05, "momentum": 0.9}),
    ("sgd", {"lr": 0.05, "momentum": 0.8, "weight_decay": 0.01}),
    ("adam", {"lr": 0.01}),
    ("adam", {"lr": 0.02, "beta1": 0.8, "beta2": 0.99, "epsilon": 1e-6, "weight_decay": 0.1}),
])
def test_optimisers_match_torch_optim(opt, attrs, decomposed):
    got, want = _optimiser_steps(opt, attrs, decomposed)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("decomposed", [False, True], ids=["kernel", "decomposed"])
def test_batch_norm_train_matches_torch(decomposed):
    rng = rng_for("bn-train")
    x = rng.standard_normal((4, 3, 5, 2))
    scale, bias = rng.standard_normal(3), rng.standard_normal(3)
    rm, rv = rng.standard_normal(3), np.abs(rng.standard_normal(3)) + 0.5
    t = TensorType((3,), F64)
    m = _module("batch_norm_train", [TensorType(x.shape, F64), t, t, t, t], {"momentum": 0.2})
    y, new_m, new_v = _run(m, [x, scale, bias, rm, rv], decomposed)
    trm, trv = torch.tensor(rm), torch.tensor(rv)
    ty = torch.nn.functional.batch_norm(torch.tensor(x), trm, trv, torch.tensor(scale),
                                        torch.tensor(bias), training=True, momentum=0.2)
    np.testing.assert_allclose(y, ty.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(new_m, trm.numpy(), rtol=1e-12)
    np.testing.assert_allclose(new_v, trv.numpy(), rtol=1e-12)


@pytest.mark.parametrize("op,types,attrs,message", [
    ("softmax_cross_entropy", [(2, 3, 4), (2,)], {}, "logits must be N x C"),
    ("softmax_cross_entropy", [(2, 3), (3,)], {}, "labels must be 2 integers"),
    ("mse_loss", [(2, 3), (3, 2)], {}, "target must have the prediction's type"),
    ("sgd_update", [(2, 3), (2, 3)], {"lr": 0.1, "momentum": 0.9},
     "momentum needs the velocity operand"),
    ("sgd_update", [(2, 3), (3,)], {"lr": 0.1}, "gradient must have the type"),
    ("adam_update", [(2,), (2,), (2,), (2,), (1,)], {"lr": 0.1}, "step must be a <f64>"),
    ("batch_norm_train", [(1, 2), (2,), (2,), (2,), (2,)], {},
     "needs more than one value per channel"),
])
def test_shape_rules(op, types, attrs, message):
    ts = [TensorType(s, I64 if op == "softmax_cross_entropy" and i == 1 and len(s) == 1
                     else F64) for i, s in enumerate(types)]
    m = Module("bad", stage="graph")
    f, b = Builder.function(m, "main", ts)
    with pytest.raises(OpError, match=message):
        b.create_inst(op, *f.params, attrs=attrs)
