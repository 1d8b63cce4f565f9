"""The training program (swir-cg --train): main.c runs the entry function, a
training step, over batches of data instead of once (docs/codegen.md,
"Training programs").

A training step is a function with ``attributes {carried = [@g0, @g1, ...]}``:
its last len(carried) inputs are the carried state (parameter k starts as
global carried[k]), its result 0 is the loss (one f32 or f64) and its result
1 + k the new value of carried state k. The program keeps the state in
memory from one step to the next; the rest of its inputs are data, one batch
each per step.

The project gets ``carried.bin``: a copy of the module's weights file (the
file the file-initialised carried globals come from, so that ``--save``
writes a file of the same format: this copy with the trained values at their
offsets), then the non-splat dense initial values; splat ones (optimiser
state, typically zeros) are filled in at start.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from collections.abc import Callable
from pathlib import Path

import numpy as np

from swir.analysis.calling import carried_names, output_count
from swir.codegen import c_ast as C
from swir.codegen import scalar
from swir.diagnostics import Diagnostic
from swir.ir.constants import dense_array, global_array
from swir.ir.core import Dense, FileInit, FuncParam, Function, Global, Module
from swir.ir.types import ShapedType, Type
from swir.target import SW26010

CARRIED_FILE = "carried.bin"
ALIGN = SW26010.mem_align

# main() of a training program: the steps, the batches, --save and the loss log.
MAIN = resources.files("swir.codegen").joinpath("program_train.c").read_text(encoding="utf-8")


@dataclass
class Carried:
    """One carried state: its global, where its first value is in carried.bin
    (None: a splat, filled in), and whether --save writes it back."""

    glob: Global
    offset: int | None
    saved: bool


@dataclass
class TrainingStep:
    """The entry function read as a training step, and carried.bin's bytes."""

    data: list[FuncParam]
    state: list[FuncParam]
    carried: list[Carried]
    blob: bytes
    saved_bytes: int          # the module's weights file: the first bytes of the blob
    loss_type: str            # the C type of the loss


def training_step(module: Module, f: Function, base_dir: Path) -> TrainingStep:
    """``f`` as a training step (a one-line Diagnostic where it is not one)."""
    names = carried_names(f)
    if not names:
        raise Diagnostic(f"swir-cg --train: @{f.name} has no 'carried' attribute: it is not "
                         "a training step (attributes {carried = [@w, ...]})", f.loc)
    n_out = output_count(f)
    inputs, outputs = f.params[:len(f.params) - n_out], f.params[len(f.params) - n_out:]
    k = len(names)
    if len(inputs) < k or len(outputs) != 1 + k or f.result_types:
        raise Diagnostic(f"swir-cg --train: @{f.name} carries {k} values, so it takes them "
                         f"as its last {k} parameters and returns the loss and their {k} new "
                         f"values; it has {len(inputs)} parameters and {len(outputs)} results",
                         f.loc)
    state = inputs[len(inputs) - k:]
    globals_ = [_carried_global(module, f, n, p, out)
                for n, p, out in zip(names, state, outputs[1:])]
    loss = outputs[0].type
    if not (isinstance(loss, ShapedType) and loss.num_elements == 1
            and loss.element.name in ("f32", "f64")):
        raise Diagnostic(f"swir-cg --train: result 0 of @{f.name}, the loss, is {loss}; a "
                         "training step's loss is one f32 or f64", f.loc)
    carried, blob, saved = _carried_bin(globals_, base_dir, f)
    return TrainingStep(list(inputs[:len(inputs) - k]), list(state), carried, blob, saved,
                        scalar.c_type(loss.element))


def _carried_global(module: Module, f: Function, name: str, p: FuncParam,
                    out: FuncParam) -> Global:
    g = module.lookup(name)
    if not isinstance(g, Global) or g.kind != "global":
        raise Diagnostic(f"swir-cg --train: @{f.name} carries @{name}, which is not a global "
                         "of the module", f.loc)
    for what, t in (("parameter %" + (p.name or "?"), p.type), ("its result", out.type)):
        if not (isinstance(t, ShapedType) and isinstance(g.type, ShapedType)
                and t.shape == g.type.shape and t.element == g.type.element):
            raise Diagnostic(f"swir-cg --train: @{name} is {g.type}, but @{f.name}'s "
                             f"{what} that carries it is {t}", f.loc)
    if not isinstance(g.init, (FileInit, Dense)):
        raise Diagnostic(f"swir-cg --train: carried @{name} must start from a file or a "
                         "dense<...> value", g.loc)
    return g


def _carried_bin(globals_: list[Global], base_dir: Path, f: Function
                 ) -> tuple[list[Carried], bytes, int]:
    """carried.bin: the one weights file of the file-initialised globals,
    then the non-splat dense values (64-byte aligned)."""
    files = {g.init.path for g in globals_ if isinstance(g.init, FileInit)}
    if len(files) > 1:
        raise Diagnostic(f"swir-cg --train: @{f.name}'s carried globals come from "
                         f"{len(files)} files ({', '.join(sorted(files))}); --save writes one "
                         "weights file", f.loc)
    blob = bytearray()
    if files:
        path = base_dir / files.pop()
        try:
            blob += path.read_bytes()
        except OSError as e:
            raise Diagnostic(f"swir-cg --train: cannot read weights file '{path}': "
                             f"{e.strerror or e}", f.loc) from None
    saved = len(blob)
    carried = []
    for g in globals_:
        if isinstance(g.init, FileInit):
            global_array(g, base_dir)       # checks the file holds it
            carried.append(Carried(g, g.init.offset, True))
        elif isinstance(g.init, Dense) and g.init.is_splat:
            carried.append(Carried(g, None, False))
        else:
            blob += b"\0" * (-len(blob) % ALIGN)
            carried.append(Carried(g, len(blob), False))
            blob += _little_endian(dense_array(g.init, g.type))  # type: ignore[arg-type]
    return carried, bytes(blob), saved


def _little_endian(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes()


def carried_code(step: TrainingStep, port: Callable[[Type, str], C.InitList]) -> str:
    """main.c's tables of the carried state and load_carried(), which takes
    each state's first value from carried.bin (size-checked when opened) or
    fills a splat in."""
    n = len(step.carried)
    ports = [port(c.glob.type, "@" + c.glob.name) for c in step.carried]
    offsets = ", ".join(str(-1 if c.offset is None else c.offset) for c in step.carried)
    saved = ", ".join(str(int(c.saved)) for c in step.carried)
    lines = ["/* ---- Carried state: its first values (carried.bin) and --save --------- */", "",
             f"#define N_CARRIED {n}",
             f"#define SWIR_CARRIED_BYTES {len(step.blob)}",
             "/* The module's weights file: carried.bin's first bytes, what --save writes. */",
             f"#define SWIR_SAVED_BYTES {step.saved_bytes}",
             f"typedef {step.loss_type} swir_loss;",
             "static const struct port carried_ports[] = {",
             *(f"    {p.text()}," for p in ports),
             "};",
             "/* Where each starts in carried.bin (-1: a splat, filled in); 1: --save writes "
             "it back. */",
             f"static const long carried_at[N_CARRIED] = {{{offsets}}};",
             f"static const int carried_saved[N_CARRIED] = {{{saved}}};", ""]
    body: list[C.Stmt] = []
    for k, c in enumerate(step.carried):
        if c.offset is not None:
            continue
        t = c.glob.type
        assert isinstance(t, ShapedType) and isinstance(c.glob.init, Dense)
        value = dense_array(c.glob.init, t).reshape(-1)[0] if t.num_elements else 0
        ptr = C.Pointer(C.Named(scalar.c_type(t.element)))
        i = C.Id("swir_i")
        body.append(C.Block([
            C.Decl(ptr, "swir_fill", C.Cast(ptr, C.index("state", k))),
            C.For(C.Decl(C.LONG, "swir_i", C.Lit("0")),
                  C.Binary("<", i, C.as_expr(t.num_elements)), C.Postfix(i),
                  C.ExprStmt(C.Assign(C.index("swir_fill", i),
                                      scalar.literal(value, t.element))))]))
    if not body:
        body.append(C.ExprStmt(C.Cast(C.VOID, C.Id("state"))))
    lines += C.Function("fill_carried", [C.Param(C.Pointer(C.Pointer(C.VOID)), "state")],
                        C.Block(body), storage="static",
                        comment="The splat first values (optimiser state).").lines()
    return "\n".join(lines) + "\n"
