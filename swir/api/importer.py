"""A model as a graph-stage module and its weights: what swir-import does
between reading its command line and writing its files. The frontend (and
onnx itself) is imported only when a model is."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from swir.diagnostics import Diagnostic
from swir.printer import print_module
from swir.verifier import VerificationError, verify

if TYPE_CHECKING:
    from swir.frontend.onnx_import import Imported


def translate(model: str | Path | Any, weights_reference: str, shapes: dict[str, tuple[int, ...]],
              name: str | None, check: bool, inline_max: int | None,
              shown: str | None = None) -> tuple[Imported, str]:
    """The imported module and its text (``model``: a path of any kind
    swir-import reads, or an onnx.ModelProto), which names its weights file
    ``weights_reference``; constants of at most ``inline_max`` elements are
    literals (None: the frontend's DENSE_MAX). A model swir cannot translate
    is a diagnostic naming the model (as ``shown``, else its path)."""
    from swir.frontend.onnx_import import DENSE_MAX, ImportFailure, import_onnx
    try:
        imported = import_onnx(model, weights_reference, shapes, name, check=check,
                               inline_max=DENSE_MAX if inline_max is None else inline_max)
    except ImportFailure as e:
        raise Diagnostic(str(e), file=shown or str(model)) from None
    try:
        verify(imported.module)
    except VerificationError as e:   # a bug in the importer, not in the model
        raise RuntimeError("the imported module does not verify: "
                           + e.diagnostics[0].message) from None
    return imported, print_module(imported.module)


def sidecar(output: str | Path, weights: str | Path | None = None) -> Path:
    """The weights file of a module written to ``output``: ``weights`` when
    given, else OUTPUT with suffix .weights (``m.swir`` -> ``m.weights``)."""
    if weights:
        return Path(weights)
    out = Path(output)
    return out.with_name(out.stem + ".weights") if out.suffix == ".swir" \
        else out.with_name(out.name + ".weights")
