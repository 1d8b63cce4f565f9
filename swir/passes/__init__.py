"""The pass registry: pass name → where its class lives, imported on demand
(so tool start-up stays fast however many passes exist). A new pass is one
new file plus one line here and its tests under test/Transforms/."""

from __future__ import annotations

import importlib

from swir.passes.manager import Pass

PASSES: dict[str, str] = {
    "cse": "swir.passes.graph.cse:CommonSubexpressionElimination",
    "dce": "swir.passes.graph.dce:DeadCodeElimination",
    "decompose": "swir.passes.graph.decompose:Decompose",
    "differentiate": "swir.passes.graph.differentiate:Differentiate",
    "distribute": "swir.passes.graph.distribute:Distribute",
    "fold-batchnorm": "swir.passes.graph.fold_batchnorm:FoldBatchNorm",
    "fold-constants": "swir.passes.graph.fold_constants:FoldConstants",
    "fuse": "swir.passes.graph.fuse:Fuse",
    "layout": "swir.passes.graph.layout:Layout",
    "simplify": "swir.passes.graph.simplify:Simplify",
    "train-step": "swir.passes.graph.train_step:TrainStep",
    "view-graph": "swir.passes.graph.view_graph:ViewGraph",
    "insert-dma": "swir.passes.dma.insert_dma:InsertDMA",
    "view-plan": "swir.passes.dma.view_plan:ViewPlan",
    "mesh-broadcast": "swir.passes.mesh.mesh_broadcast:MeshBroadcast",
    "fuse-loops": "swir.passes.loop.fuse_loops:FuseLoops",
    "ldm-plan": "swir.passes.buffered.ldm_plan:LDMPlan",
    "lower-loops": "swir.passes.loop.lower_loops:LowerLoops",
    "mem-plan": "swir.passes.loop.mem_plan:MemPlan",
    "parallelize": "swir.passes.loop.parallelize:Parallelize",
    "reorder-loops": "swir.passes.loop.reorder_loops:ReorderLoops",
    "split-loop": "swir.passes.loop.split_loop:SplitLoop",
    # Passes for testing the pass manager itself.
    "test-crash": "swir.passes.testing:TestCrash",
    "test-fail": "swir.passes.testing:TestFail",
    "test-invalid-ir": "swir.passes.testing:TestInvalidIR",
}


def pass_class(name: str) -> type[Pass] | None:
    target = PASSES.get(name)
    if target is None:
        return None
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)


def all_pass_classes() -> list[type[Pass]]:
    return [pass_class(n) for n in sorted(PASSES)]  # type: ignore[misc]
