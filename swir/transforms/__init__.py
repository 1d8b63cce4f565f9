"""Transformations as library functions (loop split, reorder, fusion, parallel
marking), used by the passes and by later planners; each refuses with a
:class:`~swir.transforms.loops.TransformError` when it would change the result."""

from swir.transforms.loops import (
                                   TransformError,
                                   fuse_loops,
                                   mark_parallel,
                                   perfect_nest,
                                   reorder_loops,
                                   split_loop,
)

__all__ = ["TransformError", "fuse_loops", "mark_parallel", "perfect_nest", "reorder_loops",
           "split_loop"]
