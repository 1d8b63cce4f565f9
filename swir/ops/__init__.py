"""The op registry and each stage's op set (see docs/ir.md).

Every op definition is a named value exported here (``LOAD``, ``COPY_IN``,
``DMA_GET``, ``FOR``, ``CONV2D``, ...): passes ask ``inst.isa(LOAD, STORE)`` and
read the definition's fields instead of comparing op names.
"""

# The op set: each module registers its ops in swir.ops.registry when imported.
from swir.ops import (collective, common, elementwise, gradients, graph, loop,  # noqa: F401
                      training)
from swir.ops.collective import (ALLGATHER, ALLREDUCE, MPI_ALLGATHER,  # noqa: F401
                                 MPI_ALLREDUCE, MPI_REDUCE_SCATTER, REDUCE_SCATTER)
from swir.ops.common import BR, CALL, COND_BR, CONST, RETURN  # noqa: F401
from swir.ops.elementwise import (ABS, ADD, AND, CAST, CEIL, DIV, EQ, ERF, ERFC,  # noqa: F401
                                  EXP, FLOOR, GE, GT, LE, LOG, LT, MAX, MIN, MUL, NE, NEG,
                                  NOT, OR, POW, RECIPROCAL, RELU, RSQRT, SELECT, SIGMOID,
                                  SQRT, SUB, TANH)
from swir.ops.gradients import AVG_POOL2D_GRAD, MAX_POOL2D_GRAD  # noqa: F401
from swir.ops.graph import (ARGMAX, AVG_POOL2D, BATCH_NORM, CLIP, CONCAT,  # noqa: F401
                            CONV2D, CONV_TRANSPOSE2D, EXPAND, FLATTEN, FUSED, GATHER, GELU,
                            GLOBAL_AVG_POOL2D, LAYER_NORM, LEAKY_RELU, LOG_SOFTMAX, MATMUL,
                            MAX_POOL2D, PAD, REDUCE_MAX, REDUCE_MEAN, REDUCE_MIN,
                            REDUCE_PROD, REDUCE_SUM, RESHAPE, RESIZE_NEAREST, SLICE, SOFTMAX,
                            SPLIT, SQUEEZE, TRANSPOSE, UNSQUEEZE, YIELD)
from swir.ops.training import (ADAM_UPDATE, BATCH_NORM_TRAIN, MSE_LOSS,  # noqa: F401
                               SGD_UPDATE, SOFTMAX_CROSS_ENTROPY)
from swir.ops.loop import (CHUNK, COPY_IN, COPY_OUT, CPE_ID, DMA_BCAST, DMA_GET,  # noqa: F401
                           DMA_PUT, DMA_WAIT, DYN_INDEX, FOR, IF, JOIN, LDM_ALLOC, LOAD,
                           PARALLEL, REG_RECV, REG_SEND, SPAWN, STORE)

# Groups the passes test for together.
DMA_TRANSFERS = (DMA_GET, DMA_PUT, DMA_BCAST)
REG_MESSAGES = (REG_SEND, REG_RECV)
COPIES = (COPY_IN, COPY_OUT)
LOOPS = (FOR, PARALLEL)
