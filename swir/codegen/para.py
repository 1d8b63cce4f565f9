"""What the MPE and the CPEs share, and how the MPE starts a kernel:
layers_mix.h (each spawned kernel's parameter struct, Para, and small
helpers), layers.h and layers.c (the MPE wrappers that fill a Para struct
and spawn the kernel on it)."""

from __future__ import annotations

from swir.codegen import c_ast as C
from swir.codegen import scalar, templates
from swir.codegen.layout import Layout, param_type
from swir.codegen.names import c_string, comment_text, display_text
from swir.ir.core import FuncParam, Function, Global
from swir.ir.types import ScalarType, ShapedType


class ParaCode:
    def __init__(self, layout: Layout) -> None:
        self.layout = layout

    # layers_mix.h ----------------------------------------------------------------------
    def mix_h(self) -> str:
        lay = self.layout
        parts = [lay.header("layers_mix.h: what the MPE and the CPEs share: each CPE "
                            "kernel's parameter\n * struct (Para) and small helpers."),
                 templates.mix_prelude(lay.opt.target)]
        if self._uses_f16():
            parts.append(templates.F16)
        if lay.fault_sites:
            parts.append(templates.FAULT_SLOTS.replace("{cpes}", str(lay.opt.target.cpes)))
        parts.append(scalar.helpers())
        for f in lay.spawned:
            fields = [self._para_field(p) for p in f.params] \
                or [C.Decl(C.CHAR, "unused", comment="C structs cannot be empty")]
            parts.append(_typedef(f"@{comment_text(f.name)}'s arguments ({lay.where(f)}).",
                                  lay.para[id(f)], fields))
        for i, g in enumerate(lay.groups):
            fields = [C.Decl(C.Named(lay.para[id(f)]), m)
                      for f, m in zip(g, lay.group_members(i))]
            parts.append(_typedef(f"The arguments of a spawn of {lay.group_text(g)}.",
                                  lay.group_para[i], fields))
        parts.append("#endif\n")
        return "\n".join(parts)

    def _para_field(self, p: FuncParam) -> C.Decl:
        """The member of a spawned kernel's Para struct for parameter ``p``."""
        n = self.layout.param_field(p)
        if isinstance(p.type, ShapedType):
            return C.Decl(C.Pointer(C.Named(scalar.c_type(p.type.element))), n,
                          comment=comment_text(str(p.type)))
        return C.Decl(C.Named(scalar.c_type(p.type)), n)  # type: ignore[arg-type]

    def _uses_f16(self) -> bool:
        def f16(t: object) -> bool:
            e = t.element if isinstance(t, ShapedType) else t
            return isinstance(e, ScalarType) and e.name == "f16"
        for item in self.layout.m.items:
            if isinstance(item, Global) and f16(item.type):
                return True
            if isinstance(item, Function):
                if any(f16(p.type) for p in item.params):
                    return True
                for inst in item.body.walk() if item.body is not None else ():
                    if any(f16(r.type) for r in inst.results):
                        return True
        return False

    # layers.h / layers.c -----------------------------------------------------------------
    def _wrapper_params(self, f: Function) -> list[C.Param]:
        return [C.Param(param_type(p.type), self.layout.param_field(p)) for p in f.params]

    def _group_wrapper_params(self, i: int) -> list[C.Param]:
        lay = self.layout
        params = [p for f in lay.groups[i] for p in f.params]
        names = [n for ns in lay.group_params(i) for n in ns]
        same = lay.group_keys[i][1]
        return [C.Param(param_type(p.type), n)
                for k, (p, n) in enumerate(zip(params, names)) if same[k] == k]

    def _spawn_wrapper(self, f: Function) -> C.Function:
        """The MPE wrapper of a spawn of kernel ``f`` alone."""
        lay = self.layout
        fill = [(C.member("para", n), C.Id(n)) for n in map(lay.param_field, f.params)]
        return self._wrapper(f"@{comment_text(f.name)} ({lay.where(f)})", lay.spawn[id(f)],
                             self._wrapper_params(f), lay.para[id(f)], fill, [f],
                             lay.c_names[(id(f), "spawn")])

    def _group_wrappers(self) -> list[C.Function]:
        """The MPE wrapper of each spawn of several kernels."""
        lay = self.layout
        out = []
        for i, g in enumerate(lay.groups):
            fill = [(C.member("para", f"{m}.{lay.param_field(p)}"), C.Id(n))
                    for f, m, names in zip(g, lay.group_members(i), lay.group_params(i))
                    for p, n in zip(f.params, names)]
            out.append(self._wrapper(f"spawn {lay.group_text(g)}", lay.group_spawn[i],
                                     self._group_wrapper_params(i), lay.group_para[i], fill,
                                     list(g), lay.group_names[i]))
        return out

    def layers_h(self) -> str:
        lay = self.layout
        cpes = lay.opt.target.cpes
        lines = [lay.header("layers.h: the MPE side of each CPE kernel: fill its "
                            f"parameters and spawn it\n * on the {cpes} CPEs (the caller joins)."),
                 "#ifndef SWIR_LAYERS_H", "#define SWIR_LAYERS_H", "",
                 '#include "layers_mix.h"', ""]
        # Every spawned kernel's wrapper is declared, also one spawned only
        # with others (layers.c defines those spawned alone).
        lines += [self._spawn_wrapper(f).prototype() for f in lay.spawned]
        lines += [w.prototype() for w in self._group_wrappers()]
        if lay.fault_sites:
            lines += ["", "/* After a join: report the first run-time error a CPE recorded. */",
                      "void swir_check_faults(void);"]
        lines += ["", "#endif", ""]
        return "\n".join(lines)

    def layers_c(self) -> str:
        lay = self.layout
        lines = [lay.header("layers.c: MPE wrappers: each fills its kernel's Para struct "
                            f"and spawns the\n * kernel on the {lay.opt.target.cpes} CPEs."),
                 "#include <athread.h>", "", '#include "layers.h"', ""]
        alone = [f for f in lay.spawned if id(f) in lay.alone]
        for f in alone:
            lines.append(f"extern void SLAVE_FUN({lay.c_names[(id(f), 'spawn')]})(void *);")
        for k in lay.group_names:
            lines.append(f"extern void SLAVE_FUN({k})(void *);")
        if lay.fault_sites:
            lines += ["", templates.mpe_faults(lay.fault_sites, c_string)]
        for w in [*map(self._spawn_wrapper, alone), *self._group_wrappers()]:
            lines += ["", *w.lines()]
        lines.append("")
        return "\n".join(lines)

    def _wrapper(self, what: str, name: str, params: list[C.Param], para: str,
                 fill: list[tuple[C.Expr, C.Expr]], kernels: list[Function],
                 entry: str) -> C.Function:
        """An MPE wrapper: fill the Para struct, spawn the CPE entry on it."""
        names = display_text(" + ".join(f.name for f in kernels), 150)
        struct = C.Id("para")
        body: list[C.Stmt] = [
            C.Comment("static: each CPE copies it into LDM by DMA at kernel entry"),
            C.Decl(C.Named(para), "para", storage="static"),
            *(C.ExprStmt(C.Assign(field, value)) for field, value in fill)]
        if self.layout.fault_sites:
            body.append(C.ExprStmt(C.Assign(C.Id("swir_spawned"), C.Lit(c_string(names)))))
        calls = [C.call("SWIR_MEMORY", C.Unary("&", struct), C.SizeOf(struct),
                        C.Lit(c_string("Para of " + names))),
                 C.call("SWIR_KERNEL", C.Lit(c_string(kernels[0].name))),
                 C.call("athread_spawn", entry, C.Unary("&", struct))]
        return C.Function(name, params, C.Block(body + [C.ExprStmt(c) for c in calls]),
                          comment=what)


def _typedef(comment: str, name: str, fields: list[C.Decl]) -> str:
    """``/* comment */ typedef struct { fields } name;`` and a blank line."""
    return C.render([C.Comment(comment),
                     C.Decl(C.Record("struct", tuple(fields)), name, storage="typedef")]) + "\n"
