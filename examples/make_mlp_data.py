#!/usr/bin/env python3
"""Writes the bundled example's data: examples/mlp.weights (the sidecar file
examples/mlp.swir reads, little-endian f32) and examples/mlp_input.npy.
Deterministic (fixed seed); run it again to regenerate identical files."""

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
# name, shape, byte offset in mlp.weights (as written in mlp.swir)
LAYOUT = [("w1", (64, 32), 0), ("b1", (32,), 8192), ("w2", (32, 10), 8320), ("b2", (10,), 9600)]


def main() -> None:
    rng = np.random.default_rng(2026)
    blob = bytearray()
    for name, shape, offset in LAYOUT:
        assert len(blob) == offset, (name, len(blob), offset)
        scale = 1.0 / np.sqrt(shape[0]) if len(shape) == 2 else 0.1
        blob += (rng.standard_normal(shape) * scale).astype("<f4").tobytes()
    (HERE / "mlp.weights").write_bytes(bytes(blob))
    np.save(HERE / "mlp_input.npy", rng.standard_normal((1, 64)).astype(np.float32))


if __name__ == "__main__":
    main()
