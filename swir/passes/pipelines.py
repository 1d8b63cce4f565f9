"""Named pipelines: the graph optimisation levels and the lowering that
follows them. ``swir-opt -O3`` expands to the O3 passes; ``swir-cg`` runs
the level's graph passes (default -O3), then the lowering for what is left.

- ``-O0``: no graph optimisation; every graph op becomes a kernel of its own.
- ``-O1``: basic operator fusion (swTVM's OPT=1): -dce, then -fuse.
- Both start with -decompose, which writes the training ops (losses,
  optimiser steps) with the ops they are made of, so that they fuse.
- ``-O3``: everything (swTVM's OPT=4): algebraic simplification, constant and
  batch-norm folding, weight layouts, CSE and DCE, then fusion; simplify and
  fold run twice because each exposes work for the other (a folded batch norm
  leaves constant arithmetic; a simplified reshape chain may become foldable).
  Its lowering plans LDM tiles by cost-model search (-ldm-plan
  ``strategy=search``), which is never slower than the paper's greedy plan
  by the model and 2.9x faster on ResNet-18 (docs/performance.md).
"""

from __future__ import annotations

OPT_LEVELS: dict[str, list[str]] = {
    "O0": [],
    "O1": ["decompose", "dce", "fuse"],
    "O3": ["decompose", "simplify", "fold-constants", "fold-batchnorm", "simplify", "fold-constants",
           "layout", "cse", "dce", "fuse", "cse", "dce"],
}
DEFAULT_LEVEL = "O3"

# What each stage still needs after the graph passes, in order.
LOWERING: dict[str, list[str]] = {
    "graph": ["lower-loops", "ldm-plan", "insert-dma"],
    "loop": ["ldm-plan", "insert-dma"],
    "buffered": ["insert-dma"],
    "dma": [],
}


# Options a level gives its lowering passes (an option the user gives wins).
LEVEL_OPTIONS: dict[str, dict[str, dict[str, str]]] = {
    "O3": {"ldm-plan": {"strategy": "search"}},
}


# Passes a level runs on the dma stage, after the lowering.
DMA_PASSES: dict[str, list[str]] = {
    "O3": ["mesh-broadcast"],
}


def compile_pipeline(stage: str, level: str = DEFAULT_LEVEL, ranks: bool = False) -> list[str]:
    """The passes that take a module at ``stage`` to the dma stage; with
    ``ranks``, -distribute shares it over MPI ranks, right before -fuse
    (fusion then keeps the element-wise work of a split layer split)."""
    graph = list(OPT_LEVELS[level]) if stage == "graph" else []
    if ranks and stage == "graph":
        graph.insert(graph.index("fuse") if "fuse" in graph else len(graph), "distribute")
    lowering = LOWERING.get(stage, [])
    return graph + lowering + (DMA_PASSES.get(level, []) if lowering else [])


def level_options(name: str, level: str = DEFAULT_LEVEL) -> dict[str, str]:
    """The options ``level`` gives pass ``name``."""
    return dict(LEVEL_OPTIONS.get(level, {}).get(name, {}))


def pipeline_flags(stage: str, level: str = DEFAULT_LEVEL, ranks: bool = False) -> list[str]:
    """swir-cg's pipeline as swir-opt flags: ``-ldm-plan{strategy=search}``
    (``ranks``: swir-cg --ranks's, whose -distribute takes --ranks=N)."""
    out = []
    for name in compile_pipeline(stage, level, ranks):
        opts = ",".join(f"{k}={v}" for k, v in level_options(name, level).items())
        out.append(f"-{name}" + ("{" + opts + "}" if opts else ""))
    return out
