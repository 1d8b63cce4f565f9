"""The op registry: every op kind declares its operands, attributes,
result-type rule (shape inference), the stages where it is legal, and traits
the passes rely on (pure, terminator, commutative).

Ops are registered by the modules of this package (``swir.ops.common``,
``swir.ops.graph``, ``swir.ops.loop``); :func:`lookup` imports them on first use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:   # swir.ir imports this module: a run-time import would be circular
    from swir.ir.types import Type


class OpError(Exception):
    """Raised by an op's rules; the verifier adds the op's location and name."""


ALL_STAGES = frozenset({"graph", "loop", "buffered", "dma"})
LOOP_AND_LATER = frozenset({"loop", "buffered", "dma"})
BUFFERED_AND_LATER = frozenset({"buffered", "dma"})
DMA_ONLY = frozenset({"dma"})


# Attribute kinds (``Attr.kind``); the verifier checks a value against its kind.
INT, FLOAT, BOOL, STR, TYPE = "int", "float", "bool", "str", "type"
INTS, FLOATS = "ints", "floats"  # lists of ints / of numbers


@dataclass(frozen=True)
class Attr:
    """An attribute an op accepts.

    ``kind`` is one of ``int``, ``float``, ``bool``, ``str``, ``type``, ``ints``
    (list of ints), ``floats``, ``symbol``, ``dense``, ``any``.

    ``default`` is the value an absent attribute has: this is the one place it
    is written (lists as tuples; None: no default, or one computed from the
    operands by the op's rules). ``check(value, name)`` raises OpError for a value
    of the right kind that the op refuses; ``choices`` lists a ``str``'s values.
    """

    name: str
    kind: str
    required: bool = False
    doc: str = ""
    default: Any = None
    check: Callable[[Any, str], None] | None = None
    choices: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Trait:
    """A property of an op that passes test for (``trait in op.traits``)."""

    name: str
    doc: str


SCALAR_FORM = Trait(
    "scalar-form", "each result element is computed from the operand elements at the same "
    "position (after broadcasting): the op has a scalar form, lowers to one loop nest and "
    "may continue a fused kernel's running value (an epilogue)")
INLINABLE = Trait(
    "inlinable", "may be a fused kernel's prologue: computed where the kernel reads it")
FLOP = Trait(
    "flop", "an arithmetic operation the cost model counts as one flop per element "
    "(element-wise ops that convert, choose, compare or do logic are not)")


@dataclass(frozen=True)
class Operands:
    """An op's named operands: a name ending in ``?`` is optional (it and the
    ones after it may be left out), in ``+`` takes one or more operands.
    ``doc`` describes them in arity errors ("input, weight and an optional bias")."""

    names: tuple[str, ...]
    doc: str

    @property
    def count(self) -> tuple[int, int | None]:
        """(min, max) operands; max None: unbounded."""
        required = sum(1 for n in self.names if not n.endswith("?"))
        if any(n.endswith("+") for n in self.names):
            return required, None
        return required, len(self.names)


@dataclass(frozen=True)
class OpDef:
    name: str
    summary: str
    stages: frozenset[str] = ALL_STAGES
    num_args: tuple[int, int | None] = (0, None)  # min, max (None: unbounded)
    operands: Operands | None = None  # when given, num_args is derived from it
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
    traits: frozenset[Trait] = frozenset()
    # The operand positions that may carry a fused kernel's running value through
    # this SCALAR_FORM op (None: any); batch_norm's others are per-channel vectors.
    running_operands: tuple[int, ...] | None = None
    # Where the op may appear: None (anywhere), "kernel" (in a kernel), "cpe" (in a
    # cpe kernel at the dma stage, in any kernel before), "host" (not in a cpe kernel).
    context: str | None = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.operands is not None:
            object.__setattr__(self, "num_args", self.operands.count)

    @property
    def attr_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attrs)

    def attr(self, name: str) -> Attr | None:
        for a in self.attrs:
            if a.name == name:
                return a
        return None

    def may_run_through(self, position: int) -> bool:
        """May operand ``position`` carry a fused kernel's running value?"""
        return self.running_operands is None or position in self.running_operands

    def attr_value(self, attrs: dict[str, Any], name: str) -> Any:
        """Attribute ``name`` of an instruction's ``attrs``, or its declared
        default when absent (not checked: the verifier has done that)."""
        spec = self.attr(name)
        if spec is None:
            raise KeyError(f"op '{self.name}' declares no attribute '{name}'")
        value = attrs.get(name)
        return spec.default if value is None else value

    def with_defaults(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """``attrs`` with every absent attribute that has a default filled in."""
        filled = {a.name: a.default for a in self.attrs if a.default is not None}
        filled.update((k, v) for k, v in attrs.items() if v is not None)
        return filled


_REGISTRY: dict[str, OpDef] = {}
_LOADED = False


def register(op: OpDef) -> OpDef:
    if op.name in _REGISTRY:
        raise ValueError(f"op '{op.name}' registered twice")
    _REGISTRY[op.name] = op
    return op


def _load() -> None:
    global _LOADED
    if not _LOADED:
        _LOADED = True
        from swir.ops import common, elementwise, graph, loop  # noqa: F401  (registration)


def lookup(name: str) -> OpDef | None:
    _load()
    return _REGISTRY.get(name)


def all_ops() -> list[OpDef]:
    _load()
    return sorted(_REGISTRY.values(), key=lambda o: o.name)
