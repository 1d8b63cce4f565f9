"""The multi-rank program calls only MPI functions of MPI 1.x and 2.0.

Public TaihuLight builds point at an `mpi2` install of unknown version
(docs/codegen.md, "On Sunway"), so MPI 2.2's MPI_Reduce_scatter_block and
MPI 3's const send buffers are out. The list below is what swir uses, each
with the standard that introduced it; a call outside it fails this test."""

from __future__ import annotations

import re
from importlib import resources

# Function -> the MPI standard that introduced it.
ALLOWED = {
    "MPI_Abort": "1.0", "MPI_Allgather": "1.0", "MPI_Allreduce": "1.0",
    "MPI_Barrier": "1.0", "MPI_Bcast": "1.0", "MPI_Comm_rank": "1.0",
    "MPI_Comm_size": "1.0", "MPI_Error_string": "1.0", "MPI_Finalize": "1.0",
    "MPI_Gather": "1.0", "MPI_Gatherv": "1.0", "MPI_Initialized": "1.0",
    "MPI_Reduce_scatter": "1.0", "MPI_Scatter": "1.0",
    "MPI_Finalized": "2.0", "MPI_Init_thread": "2.0", "MPI_Comm_set_errhandler": "2.0",
}


def program_text() -> str:
    return resources.files("swir.codegen").joinpath("program_ranks.c").read_text()


def mpi_calls(text: str) -> set[str]:
    code = re.sub(r"/\*.*?\*/", "", text, flags=re.S)   # comments name functions too
    code = re.sub(r'"[^"\n]*"', '""', code)             # so do the error messages
    return set(re.findall(r"\b(MPI_[A-Z][a-z_]+)\s*\(", code))


def test_only_mpi_1_and_2_0_functions_are_called():
    calls = mpi_calls(program_text())
    assert "MPI_Reduce_scatter" in calls
    assert calls <= set(ALLOWED), sorted(calls - set(ALLOWED))


def test_the_scan_sees_a_newer_call():
    assert mpi_calls("x = MPI_Reduce_scatter_block(a, b, n, t, op, c);") == {
        "MPI_Reduce_scatter_block"}
    assert mpi_calls('/* MPI_Ibarrier(r) */ f("MPI_Iallreduce(");') == set()


def test_send_buffers_are_cast_for_mpi_1_prototypes():
    """MPI-1 and 2 declare send buffers `void *`: a const pointer passed
    without the cast is a diagnostic there."""
    text = program_text()
    for call in ("MPI_Gather(SWIR_MPI_SEND(mine)", "MPI_Allgather(SWIR_MPI_SEND(part)",
                 "MPI_Reduce_scatter(SWIR_MPI_SEND(partial)",
                 "MPI_Allreduce(SWIR_MPI_SEND(partial)"):
        assert call in text
