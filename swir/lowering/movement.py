"""Lowering rules (movement): see swir/lowering/__init__.py."""
