"""Analyses: computed on demand, cached by the pass manager's AnalysisManager,
invalidated when a pass reports that it changed the IR."""
