"""Passes producing and working on the buffered stage: LDM planning."""
