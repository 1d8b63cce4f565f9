"""What the writers of C ask of each other, as protocols: what a function's
body (swir/codegen/body.py) asks of the project it belongs to (:class:`Unit`),
and what a vector nest (swir/codegen/vector.py) asks of the body's writer
(:class:`Emitter`). The body, the vector nests and the project's parts
import this module, and each other one way only: body -> vector, the
project's parts -> body.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from swir.codegen import c_ast as C
from swir.codegen.names import Scope
from swir.ir.affine import Expr
from swir.ir.core import Access, Apply, Block, Function, Global, Instruction, Value
from swir.target import SW26010, Target


@dataclass
class Options:
    entry: str = "main"          # the function main() runs
    source: str = "<input>"      # the swir file the module came from (comments)
    # LDM bytes the plan left for stack and reply words (None: -ldm-plan's default)
    ldm_reserve: int | None = None
    # CPE loop nests as vector micro-kernels (swir/codegen/vector.py); False:
    # every nest scalar, as before (swir-cg --no-simd)
    simd: bool = True
    # The training program (swir-cg --train, swir/codegen/train.py): main()
    # runs the entry function, a training step, over batches
    train: bool = False
    # The machine the code is for: the module's target attribute (what it
    # was planned for; swir.codegen.project.generate sets it)
    target: Target = SW26010


class Unit(Protocol):
    """The project a function's body is written for: the C names of the
    module's functions and globals, the spawn wrappers, LDM buffers, reply
    words and run-time error sites (swir/codegen/layout.py)."""

    opt: Options
    uses_simd: bool                           # a kernel has vector code
    broadcasts: bool                          # a kernel broadcasts
    fault_sites: list[tuple[str, str]]        # CPE run-time error sites so far

    def function(self, name: str, inst: Instruction) -> Function: ...

    def call_name(self, f: Function, side: str, inst: Instruction) -> str: ...

    def spawn_call(self, kernels: list[Function], inst: Instruction
                   ) -> tuple[str, list[int]]: ...

    def global_name(self, g: Global, side: str) -> str: ...

    def check_writes(self, callee: Function, app: Apply, inst: Instruction) -> None: ...

    def fault_site(self, message: str, function: str) -> int: ...

    def note_reply(self, reply: int) -> None: ...

    def ldm_alloc(self, e: Emitter, inst: Instruction) -> None: ...


class Emitter(Protocol):
    """The writer of one function's C body (swir/codegen/body.py's
    BodyEmitter), as a vector nest uses it."""

    project: Unit
    scope: Scope

    def emit(self, stmt: C.Stmt | C.Expr) -> None: ...

    def scoped(self) -> AbstractContextManager[None]: ...

    def block(self) -> AbstractContextManager[C.Block]: ...

    def name(self, v: Value) -> str: ...

    def define(self, v: Value, fallback: str = "t") -> str: ...

    def var(self, v: Value) -> C.Id: ...

    def expr(self, e: Expr | int) -> C.Expr: ...

    def element(self, acc: Access) -> C.Expr: ...

    def region(self, block: Block) -> None: ...

    def instruction(self, inst: Instruction) -> None: ...

