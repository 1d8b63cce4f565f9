"""Frontends: models in other formats → graph-stage swir (swir-import)."""
