"""Every op legal at the graph stage has an interpreter kernel and is compared
with onnxruntime in an oracle test (test_oracle_nn.py / test_oracle_tensor.py)."""

from __future__ import annotations

import re
from pathlib import Path

from swir.kernels import KERNELS
from swir.ops.registry import all_ops, lookup

HERE = Path(__file__).resolve().parent
# Executed by the interpreter itself, not by a kernel. A fused group runs its
# region's ops (each covered here); its lowering is tested in test_fuse.py.
STRUCTURAL = {"const", "call", "return", "br", "cond_br", "fused", "yield"}


def _graph_ops() -> list[str]:
    """The tensor ops. Not the collectives (allgather, ...): they exchange
    values between ranks, which the interpreters run together
    (swir.interp.ranks; test_distribute.py), and lower to MPI calls on the
    host, not to kernels (test/Transforms/Distribute/)."""
    return [o.name for o in all_ops() if "graph" in o.stages and o.name not in STRUCTURAL
            and o.category != "collective"]


def test_every_graph_op_has_a_kernel():
    missing = [o for o in _graph_ops() if o not in KERNELS]
    assert not missing, f"no interpreter kernel for: {missing}"


def _gradient_tests() -> str:
    """The oracle tests of the gradient ops, which have no ONNX operator: they
    are checked against PyTorch autograd (test_*_grad.py)."""
    return "".join(p.read_text() for p in sorted(HERE.glob("test_*_grad.py")))


def _training_tests() -> str:
    """The training ops' (composite: a loss, an optimiser step) oracle tests,
    against PyTorch and torch.optim, and their lowering through their
    decomposition to the buffered stage (test_ldm_plan.CASES)."""
    return (HERE / "test_training_ops.py").read_text() + (HERE / "test_ldm_plan.py").read_text()


def _composite(name: str) -> bool:
    return lookup(name).composite


def test_every_graph_op_is_checked_against_onnxruntime():
    src = (HERE / "test_oracle_nn.py").read_text() + (HERE / "test_oracle_tensor.py").read_text()
    gradients = src + _gradient_tests()
    missing = [o for o in _graph_ops()
               if not re.search(rf"[\"']{o}[\"']", _training_tests() if _composite(o)
                                else gradients if o.endswith("_grad") else src)]
    assert not missing, f"no onnxruntime (or, for a gradient, PyTorch) oracle test names: {missing}"
    assert len(_graph_ops()) >= 60


def test_every_graph_op_has_a_lowering_rule_and_a_lowering_test():
    """-lower-loops handles every graph op, and each is run through the loop
    stage against the graph stage in test_lower_{loops,nn,tensor}.py (ops
    tested by a sweep over a registry table, like the element-wise ones, are
    named through that table)."""
    from swir.lowering import rule_for
    missing = [o for o in _graph_ops() if rule_for(o) is None and not _composite(o)]
    assert not missing, f"no lowering rule for: {missing}"
    src = "".join((HERE / f"test_lower_{s}.py").read_text() for s in ("loops", "nn", "tensor")) \
        + _gradient_tests() + _training_tests()
    from swir.ops.elementwise import BINARY, COMPARE, UNARY
    swept = set(UNARY) | set(BINARY) | set(COMPARE)  # parametrized over the tables
    untested = [o for o in _graph_ops()
                if o not in swept and not re.search(rf"[\"']{o}[\"']", src)]
    assert not untested, f"no lowering test names: {untested}"
