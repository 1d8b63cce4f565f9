"""Collective ops: what ranks (MPI processes, one per core group) exchange.

A module compiled for several ranks (``stage ... {ranks = N}``, written by
-distribute) is one program that every rank runs (SPMD). Where the ranks have
each computed a slice of a tensor along ``axis``, ``allgather`` rebuilds the
whole tensor on every rank: the result is the ranks' slices concatenated along
``axis`` in rank order (MPI_Allgather). The graph stage has the value form;
-lower-loops turns it into ``mpi_allgather %slice, %whole`` on buffers, a host
instruction the C generator emits as one MPI call.
"""

from __future__ import annotations

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


def _verify_mpi_allgather(inst: Instruction) -> None:
    if len(inst.args) != 2:
        raise OpError("'mpi_allgather' takes a slice buffer and the whole buffer")
    part, whole = (value_arg(inst, i).type for i in (0, 1))
    if not isinstance(part, BufType) or not isinstance(whole, BufType):
        raise OpError(f"'mpi_allgather' takes main-memory buffers, got {part} and {whole}")
    axis = _check_axis(inst, part.rank)
    want = gathered_shape(part.shape, axis, attr(inst, "ranks"))
    if whole.shape != want or whole.element != part.element:
        raise OpError(f"{attr(inst, 'ranks')} slices {part} along axis {axis} make "
                      f"buf<{' x '.join(map(str, want))} x {part.element}>, not {whole}")
    check_writable(inst, 1)


ALLGATHER = register(OpDef(
    "allgather", "Every rank's slice, concatenated along `axis` in rank order, on every rank "
                 "(MPI_Allgather).",
    stages=frozenset({"graph"}), attrs=(_AXIS, _RANKS), infer=_infer_allgather,
    category=Category.OTHER))
MPI_ALLGATHER = register(OpDef(
    "mpi_allgather", "Host: MPI_Allgather of this rank's slice buffer into the whole buffer "
                     "(slices concatenated along `axis` in rank order).",
    stages=LOOP_AND_LATER, num_args=(2, 2), attrs=(_AXIS, _RANKS),
    verify=_verify_mpi_allgather, pure=False, context="host", category=Category.OTHER))
