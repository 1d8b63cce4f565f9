"""Ops legal at every stage: constants, calls and control flow between blocks."""

from __future__ import annotations

from swir.ir.affine import Expr
from swir.ir.core import DenseSlot, Function, Instruction, Literal, Successor, Value
from swir.ir.types import ScalarType, TensorType, Type
from swir.ops.registry import Category, OpDef, OpError, register
from swir.ops.util import callee, check_dense, int_fits


def _infer_call(inst: Instruction) -> list[Type]:
    return list(callee(inst).result_types)


def _infer_const(inst: Instruction) -> list[Type]:
    if len(inst.results) != 1:
        raise OpError("'const' needs its result type written, e.g. const 0.0 : f32")
    t = inst.results[0].type
    s = inst.args[0]
    if isinstance(s, DenseSlot):
        if not isinstance(t, TensorType):
            raise OpError(f"a dense constant must have a tensor type, got {t}")
        check_dense(s.dense, t)
        return [t]
    if not isinstance(t, ScalarType):
        raise OpError(f"a scalar constant must have a scalar type, got {t}")
    if isinstance(s, Literal):
        if isinstance(s.value, bool):
            if t.name != "i1":
                raise OpError(f"a boolean constant has type i1, not {t}")
        elif not t.is_float:
            raise OpError(f"float constant {s.value!r} cannot have type {t}")
    elif isinstance(s, Expr) and s.is_constant:
        if not int_fits(s.const, t):
            raise OpError(f"constant {s.const} does not fit {t}")
    else:
        raise OpError("'const' takes a number or a dense<...> literal")
    return [t]


def _verify_return(inst: Instruction) -> None:
    fn = inst.function
    if fn is None:
        return
    got = [v.type for v in inst.operands]
    if not all(isinstance(s, Value) for s in inst.args):
        raise OpError("'return' takes values")
    if got != list(fn.result_types):
        want = ", ".join(map(str, fn.result_types)) or "nothing"
        have = ", ".join(map(str, got)) or "nothing"
        raise OpError(f"returns {have} but @{fn.name} is declared to return {want}")
    parent = inst.parent
    if parent is not None and not isinstance(parent.parent.parent, Function):
        raise OpError("'return' must be in the function body, not in a nested region")


def _verify_branch(inst: Instruction) -> None:
    succs = [s for s in inst.args if isinstance(s, Successor)]
    if inst.opname == "br":
        if len(inst.args) != 1 or len(succs) != 1:
            raise OpError("'br' takes one block: br 'bb(%args)")
    else:
        if len(inst.args) != 3 or len(succs) != 2 or not isinstance(inst.args[0], Value):
            raise OpError("'cond_br' takes a condition and two blocks: cond_br %c, 'a, 'b")
        c = inst.args[0]
        if c.type != ScalarType("i1"):
            raise OpError(f"condition must be i1, got {c.type}")
    for s in succs:
        want = [a.type for a in s.block.args]
        got = [a.type for a in s.args]
        if want != got:
            raise OpError(f"branch to '{s.block.label} passes ({', '.join(map(str, got))}) "
                          f"but the block takes ({', '.join(map(str, want))})")
        if s.block.parent is not inst.parent.parent:
            raise OpError(f"branch target '{s.block.label} is not in the same region")
        if s.block is s.block.parent.blocks[0]:
            raise OpError(f"cannot branch to the entry block '{s.block.label}")


CONST = register(OpDef(
    "const", "A constant: a scalar number, or a tensor dense<...>.",
    num_args=(1, 1), infer=_infer_const, category=Category.CONSTANT, constant_like=True))
CALL = register(OpDef(
    "call", "Call a function: %r = call @f(%x) : T.", num_args=(1, 1),
    infer=_infer_call, pure=False))
RETURN = register(OpDef(
    "return", "Return values from a function.", verify=_verify_return,
    terminator=True, pure=False))
BR = register(OpDef(
    "br", "Branch to a block, passing its block arguments.",
    verify=_verify_branch, terminator=True, pure=False))
COND_BR = register(OpDef(
    "cond_br", "Branch on an i1 to one of two blocks.", num_args=(3, 3),
    verify=_verify_branch, terminator=True, pure=False))

