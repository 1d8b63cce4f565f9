"""Passes of the loop stage: lowering from the graph stage, memory planning, loop transformations."""
