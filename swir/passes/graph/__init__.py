"""Passes on the graph stage (some, like -dce and -cse, work at every stage)."""
