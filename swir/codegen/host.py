"""main.c, the MPE program: the host functions (one C label per basic block),
the constants (weights.bin and the code that places them), the buffers in
main memory and the main() that reads the inputs, runs the entry function
and writes the outputs (the fixed text is swir/codegen/templates.py's)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from swir.analysis.calling import output_count
from swir.codegen import c_ast as C
from swir.codegen import scalar, templates
from swir.codegen.body import BodyEmitter
from swir.codegen.layout import Layout, param_type, unused
from swir.codegen.names import Scope, c_string, comment_text
from swir.codegen.train import TrainingStep
from swir.diagnostics import Diagnostic
from swir.ir.constants import dense_array, global_array, global_ranks
from swir.ir.core import ArrayInit, Dense, FileInit, Function, Successor
from swir.ir.types import ScalarType, ShapedType
from swir.target import SW26010

ALIGN = SW26010.mem_align     # main-memory alignment of every buffer and constant (bytes)


class HostCode:
    def __init__(self, layout: Layout) -> None:
        self.layout = layout

    def function(self, f: Function) -> C.Function:
        """Host function ``f`` in C: its values declared up front, a label
        for each block that is jumped to."""
        lay = self.layout
        name = lay.c_names[(id(f), "host")]
        scope = Scope(lay.scope)
        e = BodyEmitter(lay, f, "host", scope)
        scope.reserve(*(f"result{i}" for i in range(len(f.result_types))))
        params = []
        for p in f.params:
            n = scope.declare(p.name or f"arg{p.index}", p, "a")
            t = p.type
            params.append(C.Param(param_type(t), n))
            if not p.has_uses:
                e.emit(unused(n))
        for i, t in enumerate(f.result_types):
            if not isinstance(t, ScalarType):
                raise Diagnostic(f"swir-cg: @{f.name} returns {t}; at the dma stage results "
                                 "are output buffers or scalars", f.loc)
            params.append(C.Param(C.Pointer(C.Named(scalar.c_type(t))), f"result{i}"))
        if f.kind == "func":
            self._locals(e, f)
        blocks = f.body.blocks  # type: ignore[union-attr]
        labels = Scope()
        for b in blocks:
            e.labels[id(b)] = labels.declare("bb_" + (b.label or "block"))
        targets = {id(s.block) for b in blocks for i in b.instructions for s in i.args
                   if isinstance(s, Successor)}
        for b in blocks:
            if id(b) in targets:
                e.emit(C.Line(f"{e.labels[id(b)]}:;"))
            e.region(b)
        return C.Function(name, params, e.body, storage="static",
                          comment=f"@{comment_text(f.name)} ({lay.where(f)})")

    @staticmethod
    def _locals(e: BodyEmitter, f: Function) -> None:
        """A func's values are declared up front: its blocks jump to each other."""
        decls: list[C.Stmt] = []
        for b in f.body.blocks:  # type: ignore[union-attr]
            values = list(b.args) if b is not f.body.entry else []  # type: ignore[union-attr]
            for inst in b.instructions:
                values += inst.results
            for v in values:
                t = v.type
                if not isinstance(t, ScalarType):
                    raise Diagnostic(f"swir-cg: %{v.name} has type {t}; host code holds only "
                                     "scalars at the dma stage", f.loc)
                n = e.define(v)
                decls.append(C.Decl(C.Named(scalar.c_type(t)), n, C.Lit("0")))
                if not v.has_uses:
                    decls.append(C.ExprStmt(unused(n)))
        for d in decls:
            e.emit(d)

    def constants(self) -> tuple[bytes, str]:
        """weights.bin and the C that places the constants: file-backed and
        listed constants are read from the file, each at a 64-byte boundary;
        splat constants are filled in at start (they take no file space)."""
        lay = self.layout
        blob = bytearray()
        read, fill, decls = [], [], []
        base_dir = Path(lay.opt.source).parent
        for g in lay.used_globals_of("global"):
            t = g.type
            assert isinstance(t, ShapedType)
            n = lay.globals[id(g)]
            decls.append(lay.global_decl(
                g, "" if id(g) in lay.slave_globals else "static",
                f"@{comment_text(g.name)} : {comment_text(str(t))}"))
            if isinstance(g.init, Dense) and g.init.is_splat:
                value = dense_array(g.init, t).reshape(-1)[0] if t.num_elements else 0
                fill.append((n, t, value))
                continue
            if not isinstance(g.init, (Dense, FileInit, ArrayInit)):
                raise Diagnostic(f"swir-cg: @{g.name} has no contents", g.loc)
            data = global_array(g, base_dir)     # a per-rank global: every rank's slice
            arr = np.ascontiguousarray(data, dtype=data.dtype.newbyteorder("<"))
            blob += b"\0" * (-len(blob) % ALIGN)
            read.append((n, t, len(blob), t.bytes if global_ranks(g) else 0))
            blob += arr.tobytes()
        code = templates.constants_code(decls, read, fill, len(blob), c_string,
                                        ranked=lay.ranks is not None)
        return bytes(blob), code

    def _buffers(self) -> str:
        """The arena (buffers with a planned offset) and buffers of their own."""
        lay = self.layout
        placed, own, decls = [], [], []
        size = 0
        for g in lay.used_globals_of("buffer"):
            t = g.type
            assert isinstance(t, ShapedType)
            n = lay.globals[id(g)]
            off = g.attrs.get("offset")
            static = "" if id(g) in lay.slave_globals else "static"
            where = f"arena offset {off}" if isinstance(off, int) else "own memory"
            decls.append(lay.global_decl(
                g, static, f"@{comment_text(g.name)} : {comment_text(str(t))}, {where}"))
            if isinstance(off, int) and not isinstance(off, bool) and off >= 0:
                placed.append((n, g, off))
                size = max(size, off + t.bytes)
            else:
                own.append((n, g))
        return templates.buffers_code(decls, placed, own, size, c_string)

    def main_c(self, host_functions: list[C.Function], constants: str,
               training: TrainingStep | None = None) -> str:
        lay = self.layout
        f = lay.entry
        n_out = output_count(f)
        inputs = f.params[:len(f.params) - n_out]
        outputs = f.params[len(inputs):]
        entry_name = lay.c_names[(id(f), "host")]
        return templates.main_c(
            header=lay.header(f"main.c: the MPE program: allocates main memory, loads the "
                              f"constants, reads the inputs,\n * runs @{comment_text(f.name)}"
                              " (which spawns the CPE kernels in order) and writes the "
                              "outputs."),
            constants=constants, buffers=self._buffers(), functions=host_functions,
            entry=entry_name, entry_name=f.name, inputs=inputs, outputs=outputs, results=list(f.result_types),
            c_string=c_string, ranks=lay.ranks, training=training)

