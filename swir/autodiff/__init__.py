"""Reverse-mode automatic differentiation of graph-stage functions (DLVM's
gradient declarations; TVM Relax's gradient pass).

- swir.autodiff.emitter: what an adjoint rule writes IR with (the backward
  code's builder, forward values saved or recomputed, unbroadcasting);
- swir.autodiff.rules: one adjoint rule per differentiable graph op, attached
  to its definition (the ADJOINT hook) and checked complete at load;
- swir.autodiff.reverse: the reverse sweep that -differentiate and
  -train-step run (activity, adjoints summed, the results).
"""
