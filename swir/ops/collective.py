"""Collective ops: what ranks (MPI processes, one per core group) exchange.

A module compiled for several ranks (``stage ... {ranks = N}``, written by
-distribute) is one program that every rank runs (SPMD). The collectives:

- ``allgather``: each rank holds a slice of a tensor along ``axis``; the
  result, on every rank, is the slices concatenated along ``axis`` in rank
  order (MPI_Allgather);
- ``reduce_scatter``: each rank holds a partial sum of a whole tensor; the
  result is this rank's slice along ``axis`` of the sum over the ranks
  (MPI_Reduce_scatter with equal counts);
- ``allreduce``: the sum over the ranks of their partial sums, on every rank
  (MPI_Allreduce).

The graph stage has the value forms; -lower-loops turns each into the host
instruction ``mpi_NAME %from, %to`` on buffers, which the C generator emits as
one MPI call. The sums are of f32 or f64 elements.
"""

from __future__ import annotations

import math

from swir.ir.core import Instruction
from swir.ir.types import BufType, TensorType, Type
from swir.ops.registry import LOOP_AND_LATER, Attr, Category, OpDef, OpError, register
from swir.ops.util import attr, check_writable, tensor_arg, value_arg


def _positive(v: int, name: str) -> None:
    if v <= 0:
        raise OpError(f"{name} must be positive, got {v}")


_RANKS = Attr("ranks", "int", required=True, doc="the ranks that each hold a slice, > 0",
              check=_positive)
_AXIS = Attr("axis", "int", required=True, doc="the axis the slices are cut along")


def gathered_shape(part: tuple[int, ...], axis: int, ranks: int) -> tuple[int, ...]:
    """The shape of ``ranks`` slices of shape ``part`` put together along ``axis``."""
    return part[:axis] + (part[axis] * ranks,) + part[axis + 1:]


def _check_axis(inst: Instruction, rank: int) -> int:
    axis = attr(inst, "axis")
    if not 0 <= axis < rank:
        raise OpError(f"axis {axis} is not an axis of a rank-{rank} slice")
    return axis


def _infer_allgather(inst: Instruction) -> list[Type]:
    if len(inst.args) != 1:
        raise OpError(f"'allgather' takes one operand, got {len(inst.args)}")
    t = tensor_arg(inst, 0)
    axis = _check_axis(inst, t.rank)
    return [TensorType(gathered_shape(t.shape, axis, attr(inst, "ranks")), t.element)]


def _check_summable(t) -> None:
    if t.element.name not in ("f32", "f64"):
        raise OpError(f"sums f32 or f64 elements, not {t.element}")


def _infer_reduce_scatter(inst: Instruction) -> list[Type]:
    if len(inst.args) != 1:
        raise OpError(f"'reduce_scatter' takes one operand, got {len(inst.args)}")
    t = tensor_arg(inst, 0)
    _check_summable(t)
    axis = _check_axis(inst, t.rank)
    ranks = attr(inst, "ranks")
    _check_scatterable(t, axis, ranks)
    return [TensorType(t.shape[:axis] + (t.shape[axis] // ranks,) + t.shape[axis + 1:],
                       t.element)]


def _check_scatterable(t, axis: int, ranks: int) -> None:
    """The ranks' slices along ``axis`` must be equal and contiguous runs of the
    whole (MPI_Reduce_scatter with equal counts hands out consecutive blocks): every axis
    before ``axis`` of size 1."""
    if t.shape[axis] % ranks:
        raise OpError(f"axis {axis} of {t} does not split into {ranks} equal slices")
    if math.prod(t.shape[:axis]) != 1:
        raise OpError(f"the slices along axis {axis} of {t} are not contiguous (the axes "
                      "before it must be 1); use allreduce")


def _infer_allreduce(inst: Instruction) -> list[Type]:
    if len(inst.args) != 1:
        raise OpError(f"'allreduce' takes one operand, got {len(inst.args)}")
    t = tensor_arg(inst, 0)
    _check_summable(t)
    return [t]


def _buffers(inst: Instruction) -> tuple[BufType, BufType]:
    if len(inst.args) != 2:
        raise OpError(f"'{inst.opname}' takes the buffer it sends and the buffer it fills")
    a, b = (value_arg(inst, i).type for i in (0, 1))
    if not isinstance(a, BufType) or not isinstance(b, BufType):
        raise OpError(f"'{inst.opname}' takes main-memory buffers, got {a} and {b}")
    check_writable(inst, 1)
    return a, b


def _expect(inst: Instruction, got: BufType, shape: tuple[int, ...], element) -> None:
    if got.shape != shape or got.element != element:
        raise OpError(f"'{inst.opname}' fills buf<{' x '.join(map(str, shape))} x {element}>, "
                      f"not {got}")


def _verify_mpi_allgather(inst: Instruction) -> None:
    part, whole = _buffers(inst)
    axis = _check_axis(inst, part.rank)
    _expect(inst, whole, gathered_shape(part.shape, axis, attr(inst, "ranks")), part.element)


def _verify_mpi_reduce_scatter(inst: Instruction) -> None:
    partial, part = _buffers(inst)
    _check_summable(partial)
    axis = _check_axis(inst, partial.rank)
    ranks = attr(inst, "ranks")
    _check_scatterable(partial, axis, ranks)
    _expect(inst, part, partial.shape[:axis] + (partial.shape[axis] // ranks,)
            + partial.shape[axis + 1:], partial.element)


def _verify_mpi_allreduce(inst: Instruction) -> None:
    partial, whole = _buffers(inst)
    _check_summable(partial)
    _expect(inst, whole, partial.shape, partial.element)


# Communication, never folded, merged or removed: every rank makes each one.
ALLGATHER = register(OpDef(
    "allgather", "Every rank's slice, concatenated along `axis` in rank order, on every rank "
                 "(MPI_Allgather).",
    stages=frozenset({"graph"}), attrs=(_AXIS, _RANKS), infer=_infer_allgather, pure=False,
    category=Category.COLLECTIVE))
REDUCE_SCATTER = register(OpDef(
    "reduce_scatter", "This rank's slice along `axis` of the sum of every rank's partial sum "
                      "(MPI_Reduce_scatter with equal counts).",
    stages=frozenset({"graph"}), attrs=(_AXIS, _RANKS), infer=_infer_reduce_scatter,
    pure=False, category=Category.COLLECTIVE))
ALLREDUCE = register(OpDef(
    "allreduce", "The sum of every rank's partial sum, on every rank (MPI_Allreduce).",
    stages=frozenset({"graph"}), attrs=(_RANKS,), infer=_infer_allreduce, pure=False,
    category=Category.COLLECTIVE))
MPI_REDUCE_SCATTER = register(OpDef(
    "mpi_reduce_scatter", "Host: MPI_Reduce_scatter (equal counts) of this rank's partial-sum buffer: "
                          "its slice along `axis` of the sum.",
    stages=LOOP_AND_LATER, num_args=(2, 2), attrs=(_AXIS, _RANKS),
    verify=_verify_mpi_reduce_scatter, pure=False, context="host", category=Category.COLLECTIVE))
MPI_ALLREDUCE = register(OpDef(
    "mpi_allreduce", "Host: MPI_Allreduce of this rank's partial-sum buffer into the sum.",
    stages=LOOP_AND_LATER, num_args=(2, 2), attrs=(_RANKS,),
    verify=_verify_mpi_allreduce, pure=False, context="host", category=Category.COLLECTIVE))
MPI_ALLGATHER = register(OpDef(
    "mpi_allgather", "Host: MPI_Allgather of this rank's slice buffer into the whole buffer "
                     "(slices concatenated along `axis` in rank order).",
    stages=LOOP_AND_LATER, num_args=(2, 2), attrs=(_AXIS, _RANKS),
    verify=_verify_mpi_allgather, pure=False, context="host", category=Category.COLLECTIVE))

# Each graph-stage collective and the host instruction -lower-loops makes of it.
HOST_FORM_OF = {ALLGATHER: MPI_ALLGATHER, REDUCE_SCATTER: MPI_REDUCE_SCATTER,
                ALLREDUCE: MPI_ALLREDUCE}
