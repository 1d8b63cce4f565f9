"""The op registry: every op kind declares its operands, attributes (with their
defaults and checks), result-type rule (shape inference), the stages where it
is legal, and traits the passes rely on (pure, terminator, commutative,
SCALAR_FORM, ...). Later stages attach their per-op functions to the
definitions as hooks (:class:`Hook`); docs/architecture.md ("Ops") shows how.

Ops are registered by the modules of this package (``swir.ops.common``,
``swir.ops.graph``, ``swir.ops.loop``), which the package imports: importing
anything from ``swir.ops`` loads the whole op set.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Protocol

# OpError lives in the IR core (the builder catches it); op rules import it from here.
from swir.ir.core import OpError, install_op_definitions  # noqa: F401
from swir.ir.types import Type


class MissingHook(Exception):
    """An op lacks a piece that a stage needs: raised when that stage loads its hooks."""


ALL_STAGES = frozenset({"graph", "loop", "buffered", "dma"})
LOOP_AND_LATER = frozenset({"loop", "buffered", "dma"})
BUFFERED_AND_LATER = frozenset({"buffered", "dma"})
DMA_ONLY = frozenset({"dma"})


class Category(str, Enum):
    """What kind of op it is, for -fuse and the docs. The graph stage's kinds are
    TVM's fusion patterns (002_33a2ce4792eea380.txt, Sec. 3), in fusion order:
    ELEMENTWISE < BROADCAST < INJECTIVE < REDUCTION < COMPLEX (complex-out-
    fusable: element-wise consumers fuse into it). The others group the ops
    -fuse never touches."""

    ELEMENTWISE = "elementwise"
    BROADCAST = "broadcast"
    INJECTIVE = "injective"
    REDUCTION = "reduction"
    COMPLEX = "complex"
    FUSED = "fused"        # a fused group
    CONSTANT = "constant"
    LOOP = "loop"          # structured control flow (for, parallel, if)
    MEMORY = "memory"      # buffers, loads, stores, copies
    DMA = "dma"            # DMA transfers and their waits
    CPE = "cpe"            # spawns, CPE ids and work shares
    COLLECTIVE = "collective"  # what MPI ranks exchange (swir.ops.collective)
    OTHER = "other"        # calls, returns, branches

    # Printed as its value ("reduction"), as enum.StrEnum (Python 3.11) would.
    __str__ = str.__str__
    __format__ = str.__format__


@dataclass(frozen=True)
class Attr:
    """An attribute an op accepts.

    ``kind`` is one of ``int``, ``float``, ``bool``, ``str``, ``type``, ``ints``
    (list of ints), ``floats``, ``symbol``, ``dense``, ``any``.

    ``default`` is the value an absent attribute has: this is the one place it
    is written (lists as tuples; None: no default). ``derived(attrs, ranks)``
    computes the default instead where it depends on the instruction (the op's
    other attributes and its operands' ranks: ``transpose``'s reversed axes).
    ``check(value, name)`` raises OpError for a value of the right kind that the
    op refuses; ``choices`` lists a ``str``'s values.
    """

    name: str
    kind: str
    required: bool = False
    doc: str = ""
    default: Any = None
    check: Callable[[Any, str], None] | None = None
    choices: tuple[str, ...] | None = None
    derived: Callable[[Mapping[str, Any], tuple[int, ...]], Any] | None = None

    def default_for(self, attrs: Mapping[str, Any], ranks: tuple[int, ...] | None) -> Any:
        """The value of this attribute when an instruction leaves it out
        (``ranks``: its operands' ranks, None when unknown)."""
        if self.derived is None:
            return self.default
        if ranks is None:
            raise TypeError(f"attribute '{self.name}': its default depends on the operands' "
                            "ranks; pass them")
        return self.derived(attrs, ranks)


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


# An element-wise op's C expression, as data: swir.codegen.scalar builds the C
# syntax tree from it (swir.ops imports no code generator).
@dataclass(frozen=True)
class CArg:
    """Operand ``index`` (converted to double first when the CExpr is ``in_double``)."""
    index: int


@dataclass(frozen=True)
class CConst:
    """A constant as C writes it (``"1.0"``); ``None``: the value 1 of the operand type."""
    text: str | None


@dataclass(frozen=True)
class CCall:
    """A call of C function ``fn`` (libm's on the CPE: scalar.CPE_LIBM, or swir's own)."""
    fn: str
    args: tuple[CForm, ...]


@dataclass(frozen=True)
class COp:
    """A C operator: prefix with one argument, infix with two."""
    sym: str
    args: tuple[CForm, ...]


@dataclass(frozen=True)
class CSelect:
    """``cond ? a : b``."""
    cond: CForm
    a: CForm
    b: CForm


CForm = CArg | CConst | CCall | COp | CSelect
X0, X1, X2 = CArg(0), CArg(1), CArg(2)
ONE = CConst(None)


@dataclass(frozen=True)
class CExpr:
    """An element-wise op's C expression: ``form``, built by
    swir.codegen.scalar. ``in_double``: the operands are converted to double
    and the result rounded back to the type (as the reference computes in f64);
    ``float_only``: the op has no C form on integers and i1."""

    form: CForm
    in_double: bool = False
    float_only: bool = True


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


class VerifyContext(Protocol):
    """What the verifier has computed about the module, handed to the checks of
    an op that need more than the op itself (as MLIR hands an op's verifier the
    symbol table): the verifier computes, the op decides. The analyses behind it
    (swir.analysis.calling) sit above swir.ops, so the op never calls them."""

    stage: str
    ldm_bytes: int      # LDM bytes per CPE the module was planned for

    def cpe_writes_global(self, g: Any) -> bool:
        """Whether a cpe kernel of the module writes the buffer global g."""

    def param_writer(self, f: Any, index: int) -> str | None:
        """The name of a function of f's kernel run that writes f's parameter
        ``index`` (f itself, or a cpe function passing it what it writes), or None."""


# eq=False: a definition is equal only to itself and hashes by identity, so
# tables may be keyed by it (``{ADD: ...}``) cheaply.
@dataclass(frozen=True, eq=False)
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
    # Checks of the values the op's subscripts take over every iteration of
    # the loops around it (after the verifier has bounded each subscript):
    # ``verify_ranges(inst, bounds)`` and, per main-memory or LDM access,
    # ``verify_access(inst, access, type, bounds)``, where ``bounds`` is the
    # verifier's swir.verifier.bounds.IndexBounds (``bounds(e)``, ``hi(e)``).
    # Each returns the error, or None.
    verify_ranges: Callable[[Any, Any], str | None] | None = None
    verify_access: Callable[[Any, Any, Any, Any], str | None] | None = None
    # Checks that need the module around the op (a VerifyContext):
    # ``verify_in_context(inst, context)`` after the checks above, and
    # ``verify_function(function, context)`` once per function with a body at
    # a stage the op is legal at, for what the op's instances in one function
    # make together. Each returns the error, or None.
    verify_in_context: Callable[[Any, VerifyContext], str | None] | None = None
    verify_function: Callable[[Any, VerifyContext], str | None] | None = None
    num_regions: int = 0
    syntax: str = "generic"  # "generic" or "loop" (``for %i = lb to ub step s``)
    terminator: bool = False
    pure: bool = True  # no side effects: may be removed if unused
    reads_memory: bool = False  # result depends on memory: never merged by CSE
    commutative: bool = False
    arrow: bool = False  # operands after "->" are destinations
    category: Category = Category.OTHER
    traits: frozenset[Trait] = frozenset()
    # The operand positions that may carry a fused kernel's running value through
    # this SCALAR_FORM op (None: any); batch_norm's others are per-channel vectors.
    running_operands: tuple[int, ...] | None = None
    # Where the op may appear: None (anywhere), "kernel" (in a kernel), "cpe" (in a
    # cpe kernel at the dma stage, in any kernel before), "host" (not in a cpe kernel).
    context: str | None = None
    # Regions the op may have, at least (default: exactly num_regions; 'if' may
    # leave out its else region).
    min_regions: int | None = None
    # A terminator that ends the region of this op only ('yield' ends 'fused').
    ends: OpDef | None = None
    # Element-wise ops' facts as data: the reference on numpy arrays (operands
    # already broadcast-compatible, the result rounded to the result type by the
    # interpreter), the C expression, and the ONNX op it corresponds to
    # (swir-import converts it 1:1 when the op has no attributes; the others
    # have converters of their own).
    numpy: Callable[..., Any] | None = None
    c_expr: CExpr | None = None
    onnx: str | None = None
    # The constant c with x OP c == x for every x (``right_identity``) and with
    # c OP x == x (``left_identity``), which -simplify drops. Floats need the
    # zero's sign: x + (-0.0) and x - (+0.0) keep -0.0, while x + (+0.0) would
    # not. As an integer, -0.0 is 0.
    right_identity: float | None = None
    left_identity: float | None = None
    # The op's result is its operand 0, a literal known at compile time (MLIR's
    # ConstantLike): swir.ir.constants reads its value.
    constant_like: bool = False
    # The operand slots the op writes memory through (its Access's base or the
    # buffer value), for the analyses of what a function writes.
    writes: tuple[int, ...] = ()
    # -layout: the axes of the weight (operand 1) as the op reads them, and the
    # other layouts tried for it (None: the op's weight is not re-laid out).
    weight_layout: tuple[str, tuple[str, ...]] | None = None
    # -fold-batchnorm: the output channel each element of the weight (operand 1)
    # contributes to, as indices broadcastable to the weight, given the weight's
    # shape and the op's groups (None: no batch_norm folds into the op).
    weight_channels: Callable[[tuple[int, ...], int], Any] | None = None
    # -distribute: each channel (axis 1) of the result is computed from the same
    # channel of operand 0 alone, so the op stays split by channels.
    channel_wise: bool = False
    # -differentiate: the op's results carry gradients, by its adjoint rule (the
    # ADJOINT hook, swir.autodiff.rules). False: they carry none (integer or i1
    # results, indices, comparisons), and -differentiate says so where a
    # gradient would have to pass through the op.
    differentiable: bool = True
    # The op is also written with other graph ops (its DECOMPOSITION hook,
    # swir.lowering.composite): -decompose and -lower-loops put those in its
    # place, so it needs no lowering rule of its own.
    composite: bool = False
    # The stages' per-op functions, by Hook name (attached by Hook.register).
    hooks: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        # A category spelled wrong is an error when the op set loads.
        object.__setattr__(self, "category", Category(self.category))
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

    def attr_value(self, attrs: dict[str, Any], name: str,
                   ranks: tuple[int, ...] | None = None) -> Any:
        """Attribute ``name`` of an instruction's ``attrs``, or its declared
        default when absent (derived from ``ranks``, the operands' ranks, where
        the definition says so); not checked: the verifier has done that."""
        spec = self.attr(name)
        if spec is None:
            raise KeyError(f"op '{self.name}' declares no attribute '{name}'")
        value = attrs.get(name)
        return spec.default_for(attrs, ranks) if value is None else value

    def with_defaults(self, attrs: dict[str, Any],
                      ranks: tuple[int, ...] | None = None) -> dict[str, Any]:
        """``attrs`` with every absent attribute that has a default filled in."""
        given = {k: v for k, v in attrs.items() if v is not None}
        filled = {}
        for a in self.attrs:
            value = given.get(a.name)
            if value is None:
                value = a.default_for(given, ranks)
            if value is not None:
                filled[a.name] = value
        filled.update((k, v) for k, v in given.items() if k not in filled)
        return filled


_REGISTRY: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    if op.name in _REGISTRY:
        raise ValueError(f"op '{op.name}' registered twice")
    twin = next((o for o in _REGISTRY.values() if op.onnx and o.onnx == op.onnx), None)
    if twin is not None:   # an ONNX operator imports into one op
        raise ValueError(f"op '{op.name}' names ONNX '{op.onnx}', which op '{twin.name}' "
                         "names already")
    _REGISTRY[op.name] = op
    return op


def unregister(op: OpDef) -> None:
    """Remove an op registered for a while (a test's own op)."""
    if _REGISTRY.get(op.name) is op:
        del _REGISTRY[op.name]


def computes(op: OpDef) -> bool:
    """A graph op that computes tensors (not a constant, a call, control flow, a
    fused group's terminator or a collective, which each stage's driver
    handles itself)."""
    return "graph" in op.stages and op.category not in (Category.OTHER, Category.CONSTANT,
                                                        Category.COLLECTIVE)


@dataclass(frozen=True)
class Hook:
    """A kind of per-op function that a later stage (interpreter, lowering, C
    generator) attaches to op definitions from its own module, keyed by the
    definition object: ``@REFERENCE.register(MATMUL)``. swir.ops imports none
    of those modules. ``needed`` says which ops must have one; the stage calls
    :meth:`check_complete` when it has loaded its hooks."""

    name: str
    needed: Callable[[OpDef], bool]

    def register(self, *ops: OpDef) -> Callable[[Any], Any]:
        def attach(fn: Any) -> Any:
            for op in ops:
                if self.name in op.hooks:
                    raise ValueError(f"two {self.name} hooks for op '{op.name}'")
                op.hooks[self.name] = fn
            return fn
        return attach

    def of(self, op: OpDef) -> Any | None:
        return op.hooks.get(self.name)

    def check_complete(self) -> None:
        missing = [op.name for op in all_ops() if self.needed(op) and self.name not in op.hooks]
        if missing:
            raise MissingHook(f"no {self.name} for op(s): {', '.join(missing)}")

    def by_name(self) -> Mapping[str, Any]:
        """The hooks as a read-only table by op name."""
        return _HookTable(self)


class _HookTable(Mapping):
    def __init__(self, hook: Hook) -> None:
        self.hook = hook

    def __getitem__(self, name: str) -> Any:
        op = lookup(name)
        fn = self.hook.of(op) if op is not None else None
        if fn is None:
            raise KeyError(name)
        return fn

    def __iter__(self) -> Iterator[str]:
        return (op.name for op in all_ops() if self.hook.of(op) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


# The interpreter's numpy kernel of each graph op (swir.kernels); a
# fused group runs its region instead.
REFERENCE = Hook("interpreter kernel",
                 lambda op: computes(op) and op.num_regions == 0 and op.numpy is None)
# The -lower-loops rule of each graph op (swir.lowering); SCALAR_FORM ops share
# the element-wise rule, which composes their scalar forms.
LOWERING = Hook("lowering rule", lambda op: computes(op) and SCALAR_FORM not in op.traits
                and not op.composite)
# A composite op's graph code (swir.lowering.composite).
DECOMPOSITION = Hook("decomposition", lambda op: op.composite)


# The reverse-mode rule of each differentiable graph op (swir.autodiff.rules):
# given the adjoints of its results, the adjoints of its operands.
ADJOINT = Hook("adjoint rule", lambda op: computes(op) and op.differentiable
               and op.num_regions == 0)


def lookup(name: str) -> OpDef | None:
    return _REGISTRY.get(name)


def op_def(name: str) -> OpDef:
    """The definition of a registered op (for tables that name ops)."""
    op = lookup(name)
    if op is None:
        raise KeyError(f"no op '{name}'")
    return op


def all_ops() -> list[OpDef]:
    return sorted(_REGISTRY.values(), key=lambda o: o.name)


install_op_definitions(lookup)
