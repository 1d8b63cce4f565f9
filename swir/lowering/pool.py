"""Lowering rules (pool): see swir/lowering/__init__.py."""
