"""The builder: how passes and frontends create IR.

    m = Module("mlp", stage="graph")
    w = Builder.global_(m, "w", TensorType((784, 128), F32), init=FileInit("mlp.weights", 0))
    f, b = Builder.function(m, "main", [TensorType((1, 784), F32)], [TensorType((1, 128), F32)])
    y = b.create("matmul", f.params[0], w)   # result type inferred by the op's rule
    b.create("return", y)

Loops and guards open nested regions as context managers::

    with b.loop(0, 64) as i:                # for %i = 0 to 64
        v = b.create("load", Access(A, (Expr.of(i),)))
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from swir.ir.affine import Expr
from swir.ir.core import (Block, Constraint, FileInit, Dense, Function, Global, Instruction,
                          Module, OpError, Region, SlotLike, Value, op_definition)
from swir.ir.types import INDEX, Type


class Builder:
    """Appends instructions at an insertion point (a block, optionally before an instruction)."""

    def __init__(self, block: Block | None = None, before: Instruction | None = None) -> None:
        self.block = block
        self.before = before

    # -- construction of containers ------------------------------------------------------
    @staticmethod
    def function(module: Module, name: str, param_types: list[Type],
                 result_types: list[Type] | None = None, kind: str = "func",
                 target: str | None = None, param_names: list[str | None] | None = None
                 ) -> tuple[Function, "Builder"]:
        """Add a function with an empty entry block; return it and a builder there."""
        f = Function(name, param_types, result_types or [], kind=kind, target=target,
                     param_names=param_names)
        entry = Block("entry" if kind == "func" else None)
        f.set_body(Region([entry]))
        module.add(f)
        return f, Builder(entry)

    @staticmethod
    def global_(module: Module, name: str, type: Type, init: FileInit | Dense | None = None,
                kind: str = "global") -> Global:
        g = Global(name, type, kind, init)
        module.add(g)
        return g

    # -- instructions -------------------------------------------------------------------------
    def insert(self, inst: Instruction) -> Instruction:
        assert self.block is not None, "builder has no insertion point"
        if self.before is not None:
            return self.before.insert_before(inst)
        return self.block.append(inst)

    def create_inst(self, opname: str, *args: SlotLike | int, types: list[Type] | None = None,
                    attrs: dict[str, Any] | None = None, names: list[str | None] | None = None,
                    arrow: int | None = None, regions: list[Region] | None = None
                    ) -> Instruction:
        """Create and insert an instruction; result types are inferred unless given."""
        d = op_definition(opname)
        if d is None:
            raise ValueError(f"unknown op '{opname}'")
        inst = Instruction(opname, list(args), result_types=list(types or []),
                           attrs=_freeze(attrs or {}), regions=regions, arrow=arrow,
                           result_names=names if types is not None else None)
        self.insert(inst)
        if types is None and d.infer is not None:
            try:
                inferred = d.infer(inst)
            except OpError:
                inst.drop_references()
                inst.detach()
                raise
            inst.set_result_types(inferred, names)
        return inst

    def create(self, opname: str, *args: SlotLike | int, **kw: Any) -> Value | None:
        """Like create_inst, returning the single result (or None if there is none)."""
        inst = self.create_inst(opname, *args, **kw)
        if len(inst.results) == 1:
            return inst.results[0]
        return None

    def const(self, value: float | int | bool, type: Type, name: str | None = None) -> Value:
        from swir.ir.core import Literal
        slot: SlotLike = Expr.of(value) if isinstance(value, int) and not isinstance(value, bool) \
            else Literal(value)
        return self.create_inst("const", slot, types=[type], names=[name]).results[0]

    # -- structured regions -------------------------------------------------------------------
    @contextmanager
    def loop(self, lb: Expr | Value | int, ub: Expr | Value | int, step: int = 1,
             kind: str = "for", name: str | None = None, attrs: dict[str, Any] | None = None
             ) -> Iterator[Value]:
        """``for %i = lb to ub step s { ... }``; yields the induction variable."""
        body = Block(None)
        iv = body.add_argument(INDEX, name)
        a = dict(attrs or {})
        if step != 1:
            a["step"] = step
        self.create_inst(kind, Expr.of(lb), Expr.of(ub), attrs=a, regions=[Region([body])])
        outer = (self.block, self.before)
        self.block, self.before = body, None
        try:
            yield iv
        finally:
            self.block, self.before = outer

    @contextmanager
    def guard(self, *constraints: Constraint) -> Iterator[None]:
        """``if c0, c1 { ... }`` (no else branch)."""
        body = Block(None)
        self.create_inst("if", *constraints, regions=[Region([body])])
        outer = (self.block, self.before)
        self.block, self.before = body, None
        try:
            yield
        finally:
            self.block, self.before = outer


def _freeze(attrs: dict[str, Any]) -> dict[str, Any]:
    """Lists become tuples: attributes are immutable and hashable."""
    def f(v: Any) -> Any:
        return tuple(f(x) for x in v) if isinstance(v, list) else v
    return {k: f(v) for k, v in attrs.items()}
