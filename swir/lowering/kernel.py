"""Building one kernel: buffer parameters, loop nests, loads and stores.

The lowering of every graph op is written against :class:`KernelBuilder`, in
TVM's "compute" spirit: say which loops iterate the output, what each element
is, and how a reduction accumulates (through memory: initialise, then ``+=``
in the reduction loops, as TVM's plain IR does). The builder owns the one
thing a fused group changes, the *epilogue*: element-wise work applied to
each output element's final value before it is stored, so a conv with a bias
and a relu after it is still one kernel with one store per element.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from swir.ir.affine import Expr
from swir.ir.builder import Builder
from swir.ir.core import Access, Dense, Global, Literal, Module, Value
from swir.ir.types import BufType, ScalarType, ShapedType, TensorType, Type
from swir.ops import CONST, FOR

if TYPE_CHECKING:
    import numpy as np

Index = Expr | Value | int
# f(kernel, output subscript, value) -> value: element-wise work fused after an op.
Epilogue = Callable[["KernelBuilder", list[Expr], Value], Value]


def buffer_type(t: Type) -> Type:
    """The loop-stage type of a graph-stage value: tensors become main-memory
    buffers (a 0-d tensor is a one-element buffer), scalars stay scalars."""
    if isinstance(t, TensorType):
        return BufType(t.shape or (1,), t.element)
    return t


def subscript(t: ShapedType | Type, idx: Sequence[Index]) -> tuple[Expr, ...]:
    """Subscript of a buffer made by :func:`buffer_type` (0-d tensors use [0])."""
    exprs = tuple(Expr.of(i) for i in idx)
    return exprs if exprs else (Expr.of(0),)


class KernelBuilder:
    """Creates ``kernel @name(params)`` and appends to its body."""

    def __init__(self, module: Module, name: str, params: list[tuple[str, Type]],
                 epilogue: Epilogue | None = None) -> None:
        self.module = module
        self.function, self.b = Builder.function(
            module, name, [t for _, t in params], kind="kernel",
            param_names=[n for n, _ in params])
        self.params = list(self.function.params)
        self.epilogue = epilogue
        # Inputs a fused group computes where they are read instead of loading
        # them (its prologue): placeholder value -> f(kernel, subscript) -> value.
        self.inline: dict[Value, Callable[[KernelBuilder, list[Expr]], Value]] = {}
        # Extra parameters the caller supplies: a Type means "a fresh scratch
        # buffer of this type", a Global means "pass this constant table".
        self.extras: list[Type | Global] = []
        self._consts: dict[tuple, Value] = {}
        self._top = self.b.block

    # -- values ------------------------------------------------------------------
    def const(self, value: float | bool, type: ScalarType, name: str | None = None
              ) -> Value:
        """A constant, created once at the top of the kernel (``name`` names it
        when it is first made; default ``zero`` or ``c``)."""
        key = (repr(value), type)
        c = self._consts.get(key)
        if c is None:
            first = self._top.instructions[0] if self._top.instructions else None
            b = Builder(self._top, before=first)
            name = name or ("zero" if value == 0 and not isinstance(value, bool) else "c")
            if isinstance(value, float) or not type.is_int and not isinstance(value, bool):
                c = b.create_inst("const", Literal(float(value)), types=[type],
                                  names=[name]).results[0]
            else:
                c = b.const(value, type, name)
            # Keep constants in creation order at the top.
            if first is not None and len(self._consts):
                last = list(self._consts.values())[-1].owner
                c.owner.detach()
                last.insert_after(c.owner)
            self._consts[key] = c
        return c

    def op(self, name: str, *args: Value, **attrs) -> Value:
        """A scalar element-wise op (type inferred)."""
        return self.b.create(name, *args, attrs=attrs or None)

    def load(self, buf: Value, idx: Sequence[Index]) -> Value:
        compute = self.inline.get(buf)
        if compute is not None:
            return compute(self, list(subscript(buf.type, idx)))
        return self.b.create("load", Access(buf, subscript(buf.type, idx)))

    def store(self, value: Value, buf: Value, idx: Sequence[Index]) -> None:
        self.b.create("store", value, Access(buf, subscript(buf.type, idx)))

    def finish(self, value: Value, buf: Value, idx: Sequence[Index]) -> None:
        """Store an output element's final value, after the fused epilogue."""
        if self.epilogue is not None:
            value = self.epilogue(self, [Expr.of(i) for i in idx], value)
        self.store(value, buf, idx)

    def reduce(self, out: Value, idx: Sequence[Index], init: Value,
               extents: Sequence[int], names: Sequence[str],
               term: Callable[[list[Value]], Value], combine: str = "add",
               finalize: Callable[[Value], Value] | None = None,
               output: bool = True) -> None:
        """TVM's reduction through memory: ``out[idx] = init``, then in the
        reduction loops ``out[idx] = combine(out[idx], term(ivs))``; finally the
        element's value goes through ``finalize`` (a mean's division) and, for
        an ``output`` element (not a scratch value), the epilogue — stored once
        more only when there is something to apply."""
        self.store(init, out, idx)
        with self.loops(extents, names) as rivs:
            acc = self.load(out, idx)
            self.store(self.op(combine, acc, term(rivs)), out, idx)
        epilogue = self.epilogue is not None and output
        if finalize is not None or epilogue:
            v = self.load(out, idx)
            v = finalize(v) if finalize is not None else v
            if output:
                self.finish(v, out, idx)
            else:
                self.store(v, out, idx)

    def scratch(self, shape: tuple[int, ...], element: ScalarType, name: str) -> Value:
        """A temporary buffer the kernel needs (a row maximum, a running sum):
        an extra parameter the caller passes a planned buffer for."""
        t = BufType(shape or (1,), element)
        self.extras.append(t)
        return self.function.add_param(t, name)

    def table(self, values: np.ndarray, element: ScalarType, name: str) -> Value:
        """A constant table computed at compile time (e.g. an average pool's
        per-position divisor): a ``dense`` global passed as an extra parameter."""
        t = BufType(values.shape or (1,), element)
        g = Builder.global_(self.module, self.module.unique_name(f"{self.function.name}_{name}"),
                            t, init=Dense(_nested(values)))
        self.extras.append(g)
        return self.function.add_param(t, name)

    def close(self) -> None:
        """End the kernel. Code beside its loop nests (the running maximum of
        a softmax over the whole tensor, a full reduction's initial store, a
        0-d gather index) goes with them into one loop of one trip: -ldm-plan
        spreads a kernel's top-level loops over the CPEs, and code outside
        every loop would run on none of them."""
        top = self._top.instructions
        work = [i for i in top if not i.isa(CONST)]
        if not any(i.isa(FOR) for i in work) or all(i.isa(FOR) for i in work):
            return
        with Builder(self._top).loop(0, 1, name="once"):
            pass
        once = self._top.instructions[-1].regions[0].blocks[0]
        for inst in work:
            inst.detach()
            once.append(inst)

    # -- loops -------------------------------------------------------------------
    @contextmanager
    def loops(self, extents: Sequence[int], names: Sequence[str]) -> Iterator[list[Value]]:
        """Perfectly nested ``for %name = 0 to extent`` loops, outermost first;
        yields their induction variables."""
        ivs: list[Value] = []
        with _nest(self.b, list(extents), list(names), ivs):
            yield ivs

    @contextmanager
    def at(self, builder: Builder) -> Iterator[None]:
        saved = (self.b.block, self.b.before)
        self.b.block, self.b.before = builder.block, builder.before
        try:
            yield
        finally:
            self.b.block, self.b.before = saved


@contextmanager
def _nest(b: Builder, extents: list[int], names: list[str], ivs: list[Value]) -> Iterator[None]:
    if not extents:
        yield
        return
    with b.loop(0, extents[0], name=names[0]) as iv:
        ivs.append(iv)
        with _nest(b, extents[1:], names[1:], ivs):
            yield


def _nested(a: np.ndarray):
    """numpy array → the nested tuples a Dense literal holds."""
    if a.ndim == 0:
        return (a.item(),)
    if a.ndim == 1:
        return tuple(x.item() for x in a)
    return tuple(_nested(x) for x in a)


def loop_names(rank: int, prefix: str = "i") -> list[str]:
    """Output iterator names: n, c, h, w for 4-d (the convention readers know),
    otherwise i0, i1, ..."""
    if rank == 4 and prefix == "i":
        return ["n", "c", "h", "w"]
    return [f"{prefix}{d}" for d in range(rank)]


def broadcast_index(in_shape: tuple[int, ...], out_idx: Sequence[Expr],
                    out_shape: tuple[int, ...]) -> list[Expr]:
    """numpy broadcasting as subscripts: align right; a size-1 input dimension
    against a larger output one reads element 0."""
    lead = len(out_shape) - len(in_shape)
    return [Expr.of(0) if d == 1 and out_shape[lead + k] != 1 else out_idx[lead + k]
            for k, d in enumerate(in_shape)]
