#!/usr/bin/env python3
"""The CPE stack every kernel of the zoo needs at the paper's sizes, against
the LDM reserve (issue 43, item 3; swir/codegen/cpe_stack.py).

Per model, compiled with swir-cg's default pipeline (-O3): the spawned
kernels, the deepest kernel's stack (GCC -fcallgraph-info=su on x86-64, -O2,
the chain within layers_slave.c), the LDM statics besides the buffers (Para
copy, reply words), what the reserve must hold (statics + 2 x stack + 1 KB
for the athread runtime and libm_slave, swir's stated margin), the reserve,
and the bytes left. Exit status 1 when a model's reserve does not cover it.

    python bench/cpe_stack.py                   # every zoo model
    python bench/cpe_stack.py resnet18 bert
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from common import print_rows, zoo_models
from zoo import compile_level, prepare


def model_row(zoo, name: str, work: Path) -> tuple[dict[str, str], bool]:
    from swir.codegen import cpe_stack
    _, _, _, swir_path = prepare(zoo, name, work / name)
    project = work / name / "project"
    compile_level(swir_path, "O3", work / name / f"{name}.dma.swir", project)
    r = cpe_stack.measure(project)
    worst = r.worst
    return {"entries": str(len(r.entries)),
            "deepest": f"{worst.name} {worst.bytes} B",
            "statics": f"{r.static_bytes} B", "required": f"{r.required} B",
            "reserve": f"{r.reserve} B", "left": f"{r.reserve - r.required} B"}, r.covered


def main(argv: list[str] | None = None) -> int:
    zoo, models = zoo_models(__doc__, argv)
    with tempfile.TemporaryDirectory(prefix="swir-stack-bench-") as tmp:
        results = {name: model_row(zoo, name, Path(tmp)) for name in models}
    print_rows({name: row for name, (row, _) in results.items()})
    return 0 if all(covered for _, covered in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
