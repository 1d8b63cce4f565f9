"""Passes producing and working on the dma stage."""
