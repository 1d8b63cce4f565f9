"""Pictures of what the compiler did: Graphviz DOT of graph-stage functions
(swir.views.graph, the -view-graph pass) and a picture of a lowered kernel's
plan (swir.views.plan, the -view-plan pass), and writing them safely
(swir.views.output). See docs/pictures.md."""
