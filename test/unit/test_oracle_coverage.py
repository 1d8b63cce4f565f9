"""Every op legal at the graph stage has an interpreter kernel and is compared
with onnxruntime in an oracle test (test_oracle_nn.py / test_oracle_tensor.py)."""

from __future__ import annotations

import re
from pathlib import Path

from swir.interp.kernels import KERNELS, _load
from swir.ops.registry import all_ops

HERE = Path(__file__).resolve().parent
# Executed by the interpreter itself, not by a kernel.
STRUCTURAL = {"const", "call", "return", "br", "cond_br"}


def _graph_ops() -> list[str]:
    return [o.name for o in all_ops() if "graph" in o.stages and o.name not in STRUCTURAL]


def test_every_graph_op_has_a_kernel():
    _load()
    missing = [o for o in _graph_ops() if o not in KERNELS]
    assert not missing, f"no interpreter kernel for: {missing}"


def test_every_graph_op_is_checked_against_onnxruntime():
    src = (HERE / "test_oracle_nn.py").read_text() + (HERE / "test_oracle_tensor.py").read_text()
    missing = [o for o in _graph_ops() if not re.search(rf"[\"']{o}[\"']", src)]
    assert not missing, f"no onnxruntime oracle test names: {missing}"
    assert len(_graph_ops()) >= 60
