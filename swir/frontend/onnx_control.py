"""ONNX control flow whose course is known at import time: Loop with a
constant trip count or condition, and If with a constant condition.

swir's graph stage has no loops, and an exporter's loop usually runs a fixed
number of times: tf2onnx writes Keras's rolled GRU and SimpleRNN as a Loop
over the (static) sequence, whose condition folds to a constant at every
step once the iteration number is known. So a Loop is unrolled: its body is
converted once per iteration (the importer's constant folding evaluates the
condition), the carried values threaded through, the scan outputs stacked.
An If whose condition is a constant is the branch it takes. Loops whose
condition depends on data computed in the loop are refused with a located
error (swir's shapes and kernels are fixed at compile time), and so are Ifs
on run-time values (the graph stage's cond_br could express them; the
importer does not write branches yet).
"""

from __future__ import annotations

import numpy as np

from swir.frontend.onnx_ops import Node, converter
from swir.frontend.onnx_types import Tensor

# Beyond this many iterations, unrolling would swamp the module (and the loop
# is unlikely to be a fixed-length sequence).
MAX_ITERATIONS = 4096


@converter("Loop", attrs="body")
def loop(n: Node) -> list:
    body = n.attr("body")
    carried: list[Tensor] = [n.tensor(i) for i in range(2, len(n.inputs))]
    n_scans = len(body.output) - 1 - len(carried)
    if n_scans < 0 or len(body.input) != 2 + len(carried):
        n.fail(f"its body has {len(body.input)} inputs and {len(body.output)} outputs; "
               f"with {len(carried)} carried values it needs {2 + len(carried)} inputs and "
               f"at least {1 + len(carried)} outputs")
    trips = int(n.scalar(0, "trip count")) if n.has(0) else None
    # With a condition input, the body's condition decides, whatever the trip
    # count (PyTorch's while loops come with a trip count of 2^63 - 1).
    # Without one, ONNX says the body's condition is ignored, but onnxruntime
    # stops when it turns false: it must then stay true (see _unguarded).
    guarded = n.has(1)
    cond = bool(n.scalar(1, "loop condition")) if guarded else True
    if trips is None and not guarded:
        n.fail("a loop without a trip count or a condition never ends")
    if not guarded and trips > MAX_ITERATIONS:
        n.fail(f"its trip count {trips} is over {MAX_ITERATIONS}: swir unrolls loops, "
               "and one this long would swamp the module")
    limit = MAX_ITERATIONS if trips is None else min(trips, MAX_ITERATIONS)
    scans: list[list[Tensor]] = [[] for _ in range(n_scans)]
    i = 0
    while cond and i < limit:
        outs = n.imp.run_subgraph(body, [np.array(i, np.int64), np.array(cond), *carried],
                                  f"{n.where}, iteration {i}")
        if guarded:
            cond = _condition(n, outs[0], i)
        else:
            _unguarded(n, outs[0], i, trips)
        carried = outs[1:1 + len(carried)]
        for scan, v in zip(scans, outs[1 + len(carried):]):
            scan.append(v)
        i += 1
    cut_short = cond and (trips is None or i < trips)   # stopped by MAX_ITERATIONS
    if cut_short:
        n.fail(f"its condition still holds after {MAX_ITERATIONS} iterations: swir unrolls "
               "loops and cannot unroll this one")
    return carried + [_stacked(n, s) for s in scans]


def _condition(n: Node, value: Tensor, i: int) -> bool:
    if not isinstance(value, np.ndarray):
        n.fail(f"its condition after iteration {i} depends on values computed at run time: "
               "swir unrolls loops whose course is known at import (a fixed trip count)")
    return bool(value.reshape(-1)[0])


def _unguarded(n: Node, value: Tensor, i: int, trips: int) -> None:
    """A for loop's body condition, which must stay true until the last
    iteration: ONNX ignores it and onnxruntime does not, so any other value is
    a model whose meaning depends on who runs it."""
    if not _condition(n, value, i) and i + 1 < trips:
        n.fail(f"its body's condition turns false at iteration {i} of {trips}, but the loop "
               "has no condition input: ONNX ignores it, onnxruntime stops there")


def _stacked(n: Node, values: list[Tensor]) -> Tensor | None:
    """A scan output: the iterations' values stacked along a new first axis."""
    if not values:
        return None          # no iteration ran: an error only if the model uses it
    if all(isinstance(v, np.ndarray) for v in values):
        return np.stack(values)
    parts = [n.emit("unsqueeze", n.imp.constant(v, f"{n.outputs[0]}.scan")
                    if isinstance(v, np.ndarray) else v, axes=[0]) for v in values]
    return parts[0] if len(parts) == 1 else n.emit("concat", *parts, axis=0)


@converter("If", attrs="else_branch then_branch")
def if_(n: Node) -> list:
    t = n.tensor(0)
    if not isinstance(t, np.ndarray):
        n.fail("its condition is computed at run time: swir-import takes an If only on a "
               "condition known at import (it is then the branch taken)")
    branch = "then_branch" if bool(t.reshape(-1)[0]) else "else_branch"
    return n.imp.run_subgraph(n.attr(branch), [], f"{n.where}, {branch}")
