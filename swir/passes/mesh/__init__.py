"""Passes on the dma stage that decide with the cost model (which runs
-insert-dma, in swir.passes.dma, below it): -mesh-broadcast."""
