"""The SW26010 cost model (docs/cost-model.md): trial compiles of candidate
rewrites (trial), DMA traffic counted from a dma-stage module's structure
(traffic), the network's collectives (network) and the modeled time (cost).
It sits above -insert-dma and the interpreters, whose code it runs, and below
the passes that decide by it (-ldm-plan, -fuse, -layout, -fold-batchnorm)."""
