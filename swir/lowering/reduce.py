"""Lowering rules (reduce): see swir/lowering/__init__.py."""
