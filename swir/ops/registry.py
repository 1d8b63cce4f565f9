"""The op registry: every op kind declares its operands, attributes,
result-type rule (shape inference), the stages where it is legal, and traits
the passes rely on (pure, terminator, commutative).

Ops are registered by the modules of this package (``swir.ops.common``,
``swir.ops.graph``, ``swir.ops.loop``), which the package imports: importing
anything from ``swir.ops`` loads the whole op set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

# OpError lives in the IR core (the builder catches it); op rules import it from here.
from swir.ir.core import OpError, install_op_definitions  # noqa: F401
from swir.ir.types import Type


ALL_STAGES = frozenset({"graph", "loop", "buffered", "dma"})
LOOP_AND_LATER = frozenset({"loop", "buffered", "dma"})
BUFFERED_AND_LATER = frozenset({"buffered", "dma"})
DMA_ONLY = frozenset({"dma"})


@dataclass(frozen=True)
class Attr:
    """An attribute an op accepts.

    ``kind`` is one of ``int``, ``float``, ``bool``, ``str``, ``type``, ``ints``
    (list of ints), ``floats``, ``symbol``, ``dense``, ``any``.
    """

    name: str
    kind: str
    required: bool = False
    doc: str = ""


@dataclass(frozen=True)
class OpDef:
    name: str
    summary: str
    stages: frozenset[str] = ALL_STAGES
    num_args: tuple[int, int | None] = (0, None)  # min, max (None: unbounded)
    attrs: tuple[Attr, ...] = ()
    # Result-type rule: returns the result types, or raises OpError. None means
    # the op has no results.
    infer: Callable[[Any], list[Type]] | None = None
    # Extra checks beyond arity, attributes and the result-type rule.
    verify: Callable[[Any], None] | None = None
    num_regions: int = 0
    syntax: str = "generic"  # "generic" or "loop" (``for %i = lb to ub step s``)
    terminator: bool = False
    pure: bool = True  # no side effects: may be removed if unused
    reads_memory: bool = False  # result depends on memory: never merged by CSE
    commutative: bool = False
    arrow: bool = False  # operands after "->" are destinations
    category: str = "other"  # for docs and fusion: elementwise, reduction, ...
    # Where the op may appear: None (anywhere), "kernel" (in a kernel), "cpe" (in a
    # cpe kernel at the dma stage, in any kernel before), "host" (not in a cpe kernel).
    context: str | None = None
    extra: dict = field(default_factory=dict)

    @property
    def attr_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attrs)

    def attr(self, name: str) -> Attr | None:
        for a in self.attrs:
            if a.name == name:
                return a
        return None


_REGISTRY: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    if op.name in _REGISTRY:
        raise ValueError(f"op '{op.name}' registered twice")
    _REGISTRY[op.name] = op
    return op


def lookup(name: str) -> OpDef | None:
    return _REGISTRY.get(name)


def all_ops() -> list[OpDef]:
    return sorted(_REGISTRY.values(), key=lambda o: o.name)


install_op_definitions(lookup)
