"""swir-import: a model → a graph-stage swir module and its weights.

    swir-import MODEL -o OUT.swir [--shape NAME=D0,D1,...] [--weights FILE]
                [--name NAME] [--no-check] [--stats]

MODEL is an ONNX file, or a TensorFlow SavedModel folder, Keras (.keras,
.h5) or TFLite (.tflite) file, converted to ONNX by tf2onnx first (the
``tensorflow`` extra; docs/frontend.md, "TensorFlow and Keras").

OUT.swir refers to its weights in a sidecar file (default: OUT.weights beside
it, ``file "OUT.weights" offset N``); small constants are inline. Weights the
model keeps as external data (MODEL.onnx.data) are read from beside the model.
--shape binds an input's shape (NAME is the input) or one symbolic dimension
(NAME is the dim_param, one size); every input needs a static shape.
Both files are written only when the whole import succeeded. A model swir
cannot translate exactly is an error naming the node (name and op type) and
the reason: `MODEL.onnx: error: node 'conv1' (Conv): ...`, exit status 1.
docs/frontend.md lists the supported operators.
"""

from __future__ import annotations

import argparse
import shlex
import os
import sys
from pathlib import Path

from swir import __version__, files
from swir.api.importer import sidecar, translate
from swir.frontend.onnx_import import DENSE_MAX

from .driver import ArgumentParser, UsageError, run_tool, same_file, write_files

PROG = "swir-import"


def _args(argv: list[str]) -> argparse.Namespace:
    p = ArgumentParser(prog=PROG, description="Translate a model (ONNX; TensorFlow, Keras or "
                "TFLite through tf2onnx) into a graph-stage swir module (weights in a "
                "sidecar file).")
    p.add_argument("model", help="the model: an ONNX file, a TensorFlow SavedModel folder, "
                   "or a Keras (.keras, .h5) or TFLite (.tflite) file")
    p.add_argument("-o", "--output", required=True, metavar="OUT.swir",
                   help="the module to write ('-' for stdout, if the model has no "
                        "weights file to write)")
    p.add_argument("--shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="bind an input's shape, or one symbolic dimension (repeat)")
    p.add_argument("--weights", metavar="FILE",
                   help="the sidecar weights file (default: OUT with suffix .weights)")
    p.add_argument("--inline-max", type=_count, default=DENSE_MAX, metavar="N",
                   help=f"constants of at most N elements (and splats, unless N is 0) are "
                        f"dense<...> literals in the module (default: {DENSE_MAX}); 0 puts "
                        "every constant in the weights file, so that a training program "
                        "saves every parameter (docs/training.md)")
    p.add_argument("--name", help="the module's name (default: the ONNX graph's name)")
    p.add_argument("--no-check", action="store_true",
                   help="skip the ONNX checker (swir-import's own checks still apply)")
    p.add_argument("--stats", action="store_true",
                   help="print what was imported to stderr (nodes, folded, ops, weights)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no closing line saying what was written where")
    p.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    return p.parse_args(argv)


def parse_shapes(specs: list[str]) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in specs:
        name, eq, dims = spec.rpartition("=")
        try:
            values = tuple(int(d) for d in dims.split(","))
        except ValueError:
            values = ()
        if not eq or not name or not values:
            raise UsageError(f"--shape '{spec}': expected NAME=D0,D1,... (integers)")
        if name in shapes:
            raise UsageError(f"--shape {name} is given twice")
        shapes[name] = values
    return shapes


def check_outputs(a: argparse.Namespace, weights: Path | None, to_stdout: bool) -> None:
    """Neither output may be the model or the other output (the same file by
    any name: links, hard links), nor name a folder (``--weights dir/``)."""
    outputs = ([] if to_stdout else [("the module", a.output)]) + \
        ([] if weights is None else [("the weights file", a.weights or str(weights))])
    for what, path in outputs:
        if path.endswith(os.sep) and not os.path.isdir(path):   # (a folder: "it is a directory")
            raise UsageError(f"{what} '{path}' names a directory; give a file name")
    for i, (what, path) in enumerate(outputs):
        for other, other_path in [("the model", a.model)] + outputs[:i]:
            if same_file(path, other_path):
                raise UsageError(f"{what} '{path}' would overwrite {other}")


def _weights_path(a: argparse.Namespace) -> Path:
    return sidecar(a.output, a.weights)


def _count(value: str) -> int:
    """A non-negative integer option value."""
    if not (value.isascii() and value.isdigit()):
        raise argparse.ArgumentTypeError(f"expected a count (0, 1, 2, ...), got {value!r}")
    return int(value)


def main(argv: list[str]) -> int:
    a = _args(argv)
    shapes = parse_shapes(a.shape)
    to_stdout = a.output == "-"
    # stdout, a device or a FIFO: no folder beside it for the weights file
    no_sidecar = to_stdout or (files.is_stream(a.output) and not a.weights)
    weights = _weights_path(a) if not no_sidecar else Path("-.weights")
    module_dir = Path(".") if to_stdout else Path(a.output).parent
    reference = os.path.relpath(weights, module_dir) if not no_sidecar else weights.name
    check_outputs(a, None if no_sidecar else weights, to_stdout)
    imported, text = translate(a.model, reference, shapes, a.name, not a.no_check, a.inline_max)
    if no_sidecar and imported.weights:
        raise UsageError(f"the model has {len(imported.weights)} bytes of weights for a "
                         "sidecar file: give -o OUT.swir"
                         + ("" if to_stdout else f" (not a device or FIFO like '{a.output}'), "
                            "or --weights FILE"))
    if to_stdout:
        sys.stdout.write(text)
    else:
        jobs = [(str(weights), bytes(imported.weights))] if imported.weights else []
        write_files(jobs + [(a.output, text.encode("utf-8"))])
    if not a.quiet and not to_stdout:
        print(f"{PROG}: wrote {a.output} ({imported.stats['ops']} ops"
              + (f"; {len(imported.weights)} bytes of weights in {weights}" if imported.weights
                 else "") + f"); next: swir-cg {shlex.quote(a.output)} -o DIR", file=sys.stderr)
    if a.stats:
        s = imported.stats
        print(f"{PROG}: {s['nodes']} nodes: {s['folded']} folded at import, {s['ops']} swir "
              f"ops; {s['globals']} constants ({s['inline']} inline), "
              f"{len(imported.weights)} bytes of weights", file=sys.stderr)
    return 0


def entry() -> None:
    sys.exit(run_tool(PROG, main))


if __name__ == "__main__":
    entry()
