"""Running a module function on numpy inputs (its arguments checked by swir.interp.arguments).
The entry point ``swir-run`` and the tests use; it picks the interpreter for
the module's stage (graph, loop, buffered, dma) and can report its counters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from swir.diagnostics import Diagnostic
from swir.interp import buffered, dma, loop
from swir.interp.arguments import check_arguments
from swir.interp.graph import GraphInterpreter
from swir.ir.carried import replicated_ports
from swir.interp.ranks import World, count_io, run_ranks
from swir.ir.constants import module_ranks
from swir.ir.core import FuncParam, Function, Module
from swir.ir.types import ShapedType, Type


def signature(module: Module, f: Function) -> tuple[list[FuncParam], list[Type]]:
    """The parameters a run of f binds to arguments, and the types of its results.

    Graph stage: every parameter; the declared results. Loop stage and later
    (see :func:`swir.analysis.calling.io_signature`): a ``func`` takes all but the
    last N parameters of ``attributes {outputs = N}`` and returns those N
    buffers, then its ``return`` values; a ``kernel`` takes every parameter and
    returns the buffer parameters it writes, in parameter order."""
    if module.stage == "graph":
        return list(f.params), list(f.result_types)
    return loop.io_signature(f)


# The interpreters of the stages after the graph stage.
INTERPRETERS: tuple[type[loop.LoopInterpreter], ...] = (
    loop.LoopInterpreter, buffered.BufferedInterpreter, dma.DMAInterpreter)


def interpreter_for(module: Module, base_dir: str | Path = ".") -> Any:
    """A fresh interpreter for the module's stage."""
    if module.stage == "graph":
        return GraphInterpreter(module, base_dir)
    for interp in INTERPRETERS:
        if module.stage in interp.stages:
            return interp(module, base_dir)
    stages = sorted(set().union(*(i.stages for i in INTERPRETERS)))
    raise Diagnostic(f"swir-run cannot execute the {module.stage} stage "
                     f"(interpreters exist for: graph, {', '.join(stages)})", module.loc)


def run_function(module: Module, f: Function, args: list[np.ndarray],
                 base_dir: str | Path = ".", arg_names: list[str] | None = None,
                 stats: dict[str, Any] | None = None) -> list[np.ndarray]:
    """Run f on the arguments; with ``stats``, fill that dict with the run's
    counters as JSON-ready data: ``stage``, ``function``, ``steps`` (instructions
    executed), and from the buffered stage on ``functions`` (per function run),
    at the dma stage also ``total`` (see docs/ir.md, "Executing IR")."""
    names = arg_names or [f"argument #{i}" for i in range(len(args))]
    params, _ = signature(module, f)
    ranks = module_ranks(module)
    split = module.attrs.get("split")
    if split == "data":
        whole = replicated_ports(f)[0]
        check_batches(*([x for i, x in enumerate(v) if i not in whole]
                        for v in (args, names, params)), ranks)
    interps = [interpreter_for(module, base_dir) for _ in range(ranks)]

    def run_rank(rank: int, world: World, share: list[np.ndarray]) -> list[np.ndarray]:
        interp = interps[rank]
        interp.rank, interp.world = rank, world
        check_arguments(f, share, names, params)
        if module.stage == "graph":
            return interp.call(f, share)
        return interp.call(f, share, names)

    if "ranks" in module.attrs:
        results, _ = run_ranks(ranks, split, args, run_rank, replicated_ports(f))
        count_io([i.mpi for i in interps], split, args, results)
    else:
        results = run_rank(0, None, args)
    if stats is not None:
        per_rank = [_counters(module, i) for i in interps]
        stats.clear()
        stats.update({"stage": module.stage, "function": f.name, **per_rank[0]})
        if "ranks" in module.attrs:
            stats["ranks"] = per_rank
    return results


def _counters(module: Module, interp: Any) -> dict[str, Any]:
    counters = {"steps": interp.steps} if module.stage == "graph" else interp.stats()
    if "ranks" in module.attrs:
        counters["mpi"] = interp.mpi.as_json()
    return counters


def check_batches(args: list[np.ndarray], names: list[str], params: list[FuncParam],
                  ranks: int) -> None:
    """A data-split program takes the whole batch: ``ranks`` times each parameter's."""
    for a, name, p in zip(args, names, params):
        t = p.type
        if isinstance(t, ShapedType) and t.rank and (np.ndim(a) == 0 or
                                                     np.shape(a)[0] != t.shape[0] * ranks):
            raise Diagnostic(f"{name} for %{p.name} has shape {tuple(np.shape(a))}; the "
                             f"{ranks} ranks take a batch of {t.shape[0] * ranks} "
                             f"({t.shape[0]} each)")
