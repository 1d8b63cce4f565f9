"""The swir grammar, packaged as ``swir.grammar`` so an installed swir finds swir.lark."""
