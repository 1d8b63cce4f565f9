"""The C code generator: a dma-stage module becomes the Sunway athread C
project (swir.codegen.project), with swir's athread emulation runtime in
swir/codegen/runtime/ for building and running it on an ordinary machine."""
