"""The names of the DMA (and register-communication) counters that the C
emulation (``--stats``), the dma-stage interpreter and the cost model's
traffic counter all report, and which must agree exactly. A module of its own, importing nothing, so each of
them can read it from below."""

DMA_COUNTERS = ("spawns", "barriers", "gets", "puts", "bytes_in", "bytes_out", "waits",
                "size_histogram", "small_transfers", "blocks", "block_histogram", "blocks_32",
                "bcasts", "bcast_bytes", "reg_sends", "reg_recvs", "reg_bytes")
