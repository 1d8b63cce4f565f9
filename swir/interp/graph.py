"""The graph-stage interpreter: runs a function of a graph-stage module on
numpy arrays, op by op, with the kernels of :mod:`swir.kernels`.

Control flow between blocks (``br``, ``cond_br``, block arguments), calls and
``return`` are executed here; every other op is one kernel call. Globals are
materialised once: ``dense<...>`` literals directly, ``file "PATH" offset N``
from a sidecar file (little-endian elements) resolved against the module's
directory, with size checks that name the global.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from swir.diagnostics import Diagnostic
from swir.kernels import DataError, evaluate
from swir.interp.ranks import MPICounters, World, collective
from swir.ops import BR, CALL, COND_BR, CONST, FUSED, RETURN, YIELD
from swir.ops.collective import HOST_FORM_OF
from swir.ir.constants import constant_array, global_array
from swir.ir.core import (
    Apply,
    Block,
    Function,
    Global,
    Instruction,
    Module,
    Successor,
    Value,
)

# Instructions executed before a run is declared non-terminating (CFG loops).
MAX_STEPS = 10_000_000


class GraphInterpreter:
    def __init__(self, module: Module, base_dir: str | Path = ".",
                 max_steps: int = MAX_STEPS) -> None:
        if module.stage != "graph":
            raise Diagnostic(f"the graph-stage interpreter cannot run a {module.stage}-stage "
                             "module", module.loc)
        self.module = module
        self.base_dir = Path(base_dir)
        self.max_steps = max_steps
        self.steps = 0
        self._globals: dict[str, np.ndarray] = {}
        # Which rank this interpreter is, among how many (swir.interp.ranks).
        self.rank = 0
        self.world: World | None = None
        self.mpi = MPICounters()

    # -- globals ----------------------------------------------------------------------
    def global_value(self, g: Global) -> np.ndarray:
        arr = self._globals.get(g.name)
        if arr is None:
            arr = self._globals[g.name] = self._load_global(g)
            arr.flags.writeable = False  # kernels must not mutate shared constants
        return arr

    def _load_global(self, g: Global) -> np.ndarray:
        return global_array(g, self.base_dir, self.rank)

    # -- functions ---------------------------------------------------------------------
    def run(self, name: str, args: list[np.ndarray]) -> list[np.ndarray]:
        f = self.module.lookup(name)
        if not isinstance(f, Function):
            raise Diagnostic(f"no function @{name} in module \"{self.module.name}\"",
                             self.module.loc)
        return self.call(f, args)

    def call(self, f: Function, args: list[np.ndarray]) -> list[np.ndarray]:
        if f.body is None:
            raise Diagnostic(f"@{f.name} is only declared; it has no body to run", f.loc)
        env: dict[int, np.ndarray] = {id(p): a for p, a in zip(f.params, args)}
        block: Block = f.body.blocks[0]
        while True:
            for inst in block.instructions:
                self.steps += 1
                if self.steps > self.max_steps:
                    raise Diagnostic(f"execution did not finish within {self.max_steps} "
                                     "instructions (an endless loop?)", inst.loc)
                if inst.isa(RETURN):
                    return [self.value(v, env) for v in inst.operands]
                if inst.isa(BR, COND_BR):
                    block = self.branch(inst, env)
                    break
                self.execute(inst, env)
            else:
                raise Diagnostic(f"block '{block.label} of @{f.name} ended without a "
                                 "terminator", f.loc)

    def branch(self, inst: Instruction, env: dict[int, np.ndarray]) -> Block:
        succs = [s for s in inst.args if isinstance(s, Successor)]
        target = succs[0]
        if inst.isa(COND_BR) and not bool(self.value(inst.args[0], env)):
            target = succs[1]
        # Read every argument before binding any (a block may pass its own arguments).
        values = [self.value(v, env) for v in target.args]
        for param, v in zip(target.block.args, values):
            env[id(param)] = v
        return target.block

    def execute(self, inst: Instruction, env: dict[int, np.ndarray]) -> None:
        types = [r.type for r in inst.results]
        if inst.isa(CONST):
            outs = [constant_array(inst.args[0], types[0])]
        elif inst.isa(CALL):
            app = inst.args[0]
            assert isinstance(app, Apply)
            callee = self.module.lookup(app.callee)
            assert isinstance(callee, Function)
            outs = self.call(callee, [self.value(v, env) for v in app.args])
        elif inst.isa(FUSED):
            outs = self.fused(inst, env)
        elif inst.isa(*HOST_FORM_OF):
            outs = [collective(inst.opdef, inst.attrs, self.world, self.rank,
                               self.value(inst.args[0], env), self.mpi)]
        else:
            operands = [self.value(s, env) for s in inst.args]
            try:
                outs = evaluate(inst.opname, inst.attrs, types, operands)
            except DataError as e:
                raise Diagnostic(f"'{inst.opname}': {e}", inst.loc) from None
        for r, v in zip(inst.results, outs):
            env[id(r)] = v

    def fused(self, inst: Instruction, env: dict[int, np.ndarray]) -> list[np.ndarray]:
        """A fused group computes exactly what its ops would, one after another."""
        body = inst.regions[0].blocks[0]
        for arg, v in zip(body.args, inst.operands):
            env[id(arg)] = self.value(v, env)
        for op in body.instructions:
            if op.isa(YIELD):
                return [self.value(v, env) for v in op.operands]
            self.steps += 1
            self.execute(op, env)
        raise Diagnostic("fused region ended without 'yield'", inst.loc)

    def value(self, v: Any, env: dict[int, np.ndarray]) -> np.ndarray:
        if isinstance(v, Global):
            return self.global_value(v)
        if isinstance(v, Value):
            return env[id(v)]
        raise Diagnostic(f"operand {v!r} cannot be evaluated at the graph stage")
