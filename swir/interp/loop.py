"""The loop-stage interpreter: runs functions and kernels of a loop-stage module
(loop nests over main-memory buffers) on numpy memory.

Each swir function is compiled once, on its first call, into one Python
function: structured loops become Python ``for ... in range(...)`` loops, ``if``
guards Python ``if`` statements, SSA values Python locals, index expressions
Python integer arithmetic, and loads and stores item accesses of flat numpy
arrays with precomputed strides and a bounds check. A ``func``'s blocks become
a ``while`` loop dispatching on the current block. Nothing is interpreted per
executed instruction.

Extending it (the buffered and dma stages): every op is compiled by an *emitter*
(``@emitter(LOAD)`` registers one in :data:`EMITTERS`), which writes the op's
Python code through the :class:`~swir.interp.pycode.Emit` context; an op whose
behaviour is easiest as ordinary Python binds a callable with :meth:`Emit.bind`
and emits a call to it. An interpreter compiles with the table in its
``emitters`` attribute, so a later stage's interpreter (a subclass, such as
:class:`swir.interp.buffered.BufferedInterpreter`) overlays its own emitters on
:data:`EMITTERS` — adding ops and replacing loop-stage ones — without changing
what this interpreter does; its ``stages`` attribute names the module stages it
accepts. Emitters may also run code when the region they stand in ends
(:meth:`Emit.at_exit`), and loops are emitted by :func:`emit_loop` with the
order of their iterations as a parameter. :data:`swir.analysis.calling.WRITES`
names the operand slots through which an op writes memory (a kernel's results at
the top level are the buffers it writes). :meth:`LoopInterpreter.entry` gives
what a top-level call runs (the dma stage runs a cpe kernel on every CPE) and
:meth:`LoopInterpreter.stats` the run's counters (``swir-run --stats``).

Run-time representation of values: a buffer is a flat (1-D) numpy array; an
``index`` is a Python int; every other scalar is a numpy scalar of its type
(``np.float32``, ``np.bool_``, ...). Element-wise ops give exactly the graph
interpreter's results: they run the graph kernels on 0-d arrays, except the ops
whose direct numpy scalar arithmetic was checked, when this module was first
used, to give the same bits as the kernels (see :func:`fast_template`).

The execution rules (calling convention, the arena, poison, the order of
``parallel`` iterations, ``dyn_index``, errors) are in docs/ir.md, "Executing IR".
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from swir.analysis.calling import io_signature, written_by_function
from swir.diagnostics import Diagnostic
from swir import kernels as _kernels
from swir.interp.arguments import check_arguments
from swir.interp.graph import MAX_STEPS
from swir.interp.ranks import MPICounters, World, collective
from swir.interp.pycode import (CodeSpace, Emit, free_values, function_values, index_constant,
                                 raiser, value_text)
from swir.ir.core import (
    Access,
    Apply,
    Block,
    Constraint,
    Function,
    Global,
    Instruction,
    Module,
    Successor,
    Value,
)
from swir.ir.constants import constant_array, global_array
from swir.ir.dtypes import DTYPES, dtype_of
from swir.ir.types import INDEX, ScalarType, ShapedType, TensorType, Type, scalar
from swir.limits import deep_recursion
from swir.ops import (ABS, ADD, AND, BR, CALL, COND_BR, CONST, DIV, DYN_INDEX, EQ, FOR, GE, GT,
                      IF, LE, LOAD, LT, MAX, MIN, MUL, NE, NEG, NOT, OR, PARALLEL, RECIPROCAL,
                      RELU, RETURN, SELECT, STORE, SUB)
from swir.ops.collective import HOST_FORM_OF
from swir.ops.registry import SCALAR_FORM, OpDef, op_def
from swir.ops.util import attr_or_default

# Module stages this interpreter runs (LoopInterpreter.stages; the buffered and
# dma stages have interpreters of their own, subclasses of LoopInterpreter).
STAGES = {"loop"}

# swir calls nested deeper than this are reported as unbounded recursion.
MAX_CALL_DEPTH = 400
# Fresh memory (the arena, buffers without an offset, output buffers) holds
# these two bytes repeated: a NaN in f16, f32 and f64 (0x7FFA, 0x7FFA7FFA, ...),
# and in integer types i16 32762, i32 2147123194, i64 9221823900860186618
# (i8 alternates -6 and 127; i1 reads as true).
POISON_BYTES = (0xFA, 0x7F)


# ---------------------------------------------------------------------------
# Op registry
# ---------------------------------------------------------------------------

OpEmitter = Callable[["Emit", Instruction], None]
EMITTERS: dict[OpDef, OpEmitter] = {}


def emitter(*ops: OpDef) -> Callable[[OpEmitter], OpEmitter]:
    """Register the code emitter of one or more ops."""
    def register(fn: OpEmitter) -> OpEmitter:
        for op in ops:
            if op in EMITTERS:
                raise ValueError(f"emitter for '{op.name}' registered twice")
            EMITTERS[op] = fn
        return fn
    return register


# ---------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------

def poison(arr: np.ndarray) -> None:
    """Fill an array (its bytes) with the poison pattern."""
    b = arr.reshape(-1).view(np.uint8)
    b[0::2] = POISON_BYTES[0]
    b[1::2] = POISON_BYTES[1]


def fresh_array(t: ShapedType) -> np.ndarray:
    """A new flat array for a buffer of type t, poisoned."""
    arr = np.empty(t.num_elements, dtype=dtype_of(t))
    poison(arr)
    return arr


class Memory:
    """Main memory of a module: its constant globals (read-only, loaded once, on
    first use) and its buffers. Buffers with ``{offset = N}`` are views into one
    byte arena, ``max(offset + bytes)`` long, so buffers whose byte ranges
    overlap share memory; a buffer without an offset has its own array."""

    def __init__(self, module: Module, base_dir: str | Path = ".") -> None:
        self.base_dir = Path(base_dir)
        self.rank = 0           # a per-rank global reads this rank's slice
        self._globals: dict[str, np.ndarray] = {}
        self._buffers: dict[str, np.ndarray] = {}
        bufs = [g for g in module.globals if g.kind == "buffer"]
        placed = [g for g in bufs if _offset(g) is not None]
        size = max((_offset(g) + g.type.bytes for g in placed), default=0)
        self.arena = np.empty(size, dtype=np.uint8)
        self._own: list[np.ndarray] = []
        for g in bufs:
            t = g.type
            assert isinstance(t, ShapedType)
            off = _offset(g)
            if off is None:
                arr = np.empty(t.num_elements, dtype=dtype_of(t))
                self._own.append(arr)
            else:
                arr = self.arena[off:off + t.bytes].view(dtype_of(t))
            self._buffers[g.name] = arr
        self.reset()

    def reset(self) -> None:
        """Poison every buffer (a new run starts with nothing written)."""
        poison(self.arena)
        for arr in self._own:
            poison(arr)

    def array(self, g: Global) -> np.ndarray:
        """The flat array of a global or buffer (constant globals are read-only)."""
        if g.kind == "buffer":
            return self._buffers[g.name]
        arr = self._globals.get(g.name)
        if arr is None:
            arr = global_array(g, self.base_dir, self.rank).reshape(-1)
            arr.flags.writeable = False
            self._globals[g.name] = arr
        return arr

    def buffer(self, name: str) -> np.ndarray:
        """A buffer's memory, shaped as its type (a view: writes are visible)."""
        return self._buffers[name]


def _offset(g: Global) -> int | None:
    off = g.attrs.get("offset")
    if off is None:
        return None
    if not isinstance(off, int) or isinstance(off, bool) or off < 0:
        raise Diagnostic(f"@{g.name}: arena offset must be a non-negative integer, got {off!r}",
                         g.loc)
    return off


def to_runtime(t: Type, a: np.ndarray) -> Any:
    """An argument array as the interpreter holds it: a buffer is copied into a
    fresh flat array; a scalar becomes a numpy scalar (an index a Python int)."""
    dt = dtype_of(t)
    if isinstance(t, ShapedType):
        return np.array(a, dtype=dt, order="C", copy=True).reshape(-1)
    v = np.asarray(a, dtype=dt)[()]
    return int(v) if t == INDEX else v


def from_runtime(t: Type, v: Any) -> np.ndarray:
    """A result as an array of its type (scalars as 0-d arrays)."""
    if isinstance(t, ShapedType):
        return np.asarray(v).reshape(t.shape)
    return np.asarray(v, dtype=dtype_of(t))


# ---------------------------------------------------------------------------
# Element-wise scalar ops: direct numpy scalar arithmetic where it is
# bit-identical to the graph kernels, the kernels on 0-d arrays elsewhere.
# ---------------------------------------------------------------------------

_NUMERIC = ("f16", "f32", "f64", "i8", "i16", "i32", "i64")
# Candidate templates per op; {0} {1} {2} are operand names (plain variables, so
# repeating them is safe), {z} {o} the type's 0 and 1.
# With two NaN operands, numpy's array loops return the first one; its compiled
# scalar arithmetic may return the second, hence the swapped and NaN-guarded
# forms (a + a is a's NaN, quieted; one NaN operand propagates either way).
# The comparisons, with their Python operators.
_COMPARISONS = {EQ: "==", NE: "!=", LT: "<", LE: "<=", GT: ">", GE: ">="}
_CANDIDATES: dict[OpDef, list[str]] = {
    ADD: ["{0} + {1}", "{1} + {0}", "({0} + {1} if {0} == {0} else {0} + {0})"],
    SUB: ["{0} - {1}", "({0} - {1} if {0} == {0} else {0} + {0})"],
    MUL: ["{0} * {1}", "{1} * {0}", "({0} * {1} if {0} == {0} else {0} + {0})"],
    NEG: ["-{0}"], ABS: ["abs({0})"],
    MAX: ["({0} if {0} > {1} or {0} != {0} else {1})",
          "({0} if {0} >= {1} or {0} != {0} else {1})"],
    MIN: ["({0} if {0} < {1} or {0} != {0} else {1})",
          "({0} if {0} <= {1} or {0} != {0} else {1})"],
    RELU: ["({0} if {0} > {z} or {0} != {0} else {z})",
           "({0} if {0} >= {z} or {0} != {0} else {z})"],
    **{op: [f"({{0}} {sym} {{1}})"] for op, sym in _COMPARISONS.items()},
    SELECT: ["({1} if {0} else {2})"],
}
_FLOAT_ONLY = {DIV: ["{0} / {1}", "({0} / {1} if {0} == {0} else {0} + {0})"],
               RECIPROCAL: ["{o} / {0}"]}
_INDEX: dict[OpDef, list[str]] = {   # index values are Python ints: wrap like int64
    ADD: ["_w64({0} + {1})"], SUB: ["_w64({0} - {1})"], MUL: ["_w64({0} * {1})"],
    NEG: ["_w64(-{0})"], ABS: ["_w64(abs({0}))"], MAX: ["max({0}, {1})"],
    MIN: ["min({0}, {1})"], RELU: ["max({0}, 0)"], SELECT: ["({1} if {0} else {2})"],
    **{op: [f"(_T if {{0}} {sym} {{1}} else _F)"] for op, sym in _COMPARISONS.items()},
}
_BOOL: dict[OpDef, list[str]] = {
    AND: ["({0} & {1})"], OR: ["({0} | {1})"], NOT: ["(_F if {0} else _T)"],
    SELECT: ["({1} if {0} else {2})"],
    **{op: _CANDIDATES[op] for op in _COMPARISONS},
}


def _w64(x: int) -> int:
    """Wrap a Python int to int64 (index arithmetic wraps like C's int64_t)."""
    if -0x8000000000000000 <= x <= 0x7FFFFFFFFFFFFFFF:
        return x
    return ((x + 0x8000000000000000) & 0xFFFFFFFFFFFFFFFF) - 0x8000000000000000


_TEMPLATE_NS: dict[str, Any] = {"_w64": _w64, "_T": np.True_, "_F": np.False_}


def _candidates(op: OpDef, tname: str) -> list[str]:
    if tname == "index":
        return _INDEX.get(op, [])
    if tname == "i1":
        return _BOOL.get(op, [])
    if tname in _NUMERIC:
        if tname.startswith("f") and op in _FLOAT_ONLY:
            return _FLOAT_ONLY[op]
        return _CANDIDATES.get(op, [])
    return []


def _samples(tname: str) -> list[Any]:
    """Awkward values of a type, in the interpreter's representation."""
    if tname == "index":
        return [0, 1, -1, 7, -13, 2**62, 2**63 - 1, -2**63]
    dt = np.dtype(DTYPES[tname])
    if tname == "i1":
        return [np.False_, np.True_]
    if dt.kind == "i":
        info = np.iinfo(dt)
        return [dt.type(v) for v in (0, 1, -1, 3, -7, info.max, info.min, info.min + 1)]
    nan = np.array(np.nan, dt)
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize]
    neg_nan = (nan.view(bits) | bits(1 << (8 * dt.itemsize - 1))).view(dt)
    payload = (nan.view(bits) | bits(1)).view(dt)  # a NaN with another payload
    info = np.finfo(dt)
    return [dt.type(v) for v in (0.0, -0.0, 1.0, -1.5, 0.1, 3.0, np.inf, -np.inf)] + \
        [nan[()], neg_nan[()], payload[()], info.max, info.tiny, -info.smallest_subnormal]


def _bits(x: Any, dt: np.dtype) -> bytes | None:
    a = np.asarray(x)
    return a.tobytes() if a.dtype == dt and a.shape == () else None


def _template_agrees(op: OpDef, tname: str, template: str) -> bool:
    """Does the template give the kernel's bits (on 0-d arrays and on vectors)
    and type for every combination of awkward values?"""
    t = scalar(tname)
    vals = _samples(tname)
    if op is SELECT:
        in_types = [scalar("i1"), t, t]
        combos = [(c, a, b) for c in (np.True_, np.False_) for a in vals[:4] for b in vals[:4]]
    elif op.num_args == (1, 1):
        in_types, combos = [t], [(a,) for a in vals]
    else:
        in_types, combos = [t, t], list(itertools.product(vals, vals))
    rt = scalar("i1") if op in _COMPARISONS else t
    rdt = dtype_of(rt)
    dt = dtype_of(t)
    ns = dict(_TEMPLATE_NS, _z=dt.type(0) if tname != "index" else 0,
              _o=dt.type(1) if tname != "index" else 1)
    names = [f"x{i}" for i in range(len(in_types))]
    with np.errstate(all="ignore"):
        try:
            fn = eval(f"lambda {', '.join(names)}: " + template.format(*names, z="_z", o="_o"),
                      ns)
            fast = [fn(*c) for c in combos]
        except Exception:  # noqa: BLE001  a template that fails to run is not used
            return False
        cols = [np.array([c[i] for c in combos], dtype=dtype_of(it))
                for i, it in enumerate(in_types)]
        (vec,) = _kernels.evaluate(op.name, {}, [TensorType((len(combos),), rt)], cols)
        for k, (c, r) in enumerate(zip(combos, fast)):
            (ref,) = _kernels.evaluate(op.name, {}, [rt], [np.asarray(x, dtype=dtype_of(it))
                                                    for x, it in zip(c, in_types)])
            want = ref.tobytes()
            if _bits(r, rdt) != want or vec[k].tobytes() != want:
                return False
            if tname == "index" and op not in _COMPARISONS and type(r) is not int:
                return False
    return True


_FAST: dict[tuple[OpDef, str], str | None] = {}


def fast_template(opname: str, tname: str) -> str | None:
    """The Python expression template computing op ``opname`` on scalars of
    type ``tname`` directly, if one gives the kernels' exact bits here; else
    None (the op then calls its kernel). Checked once per process."""
    op = op_def(opname)
    key = (op, tname)
    if key not in _FAST:
        _FAST[key] = next((c for c in _candidates(op, tname)
                           if _template_agrees(op, tname, c)), None)
    return _FAST[key]


def scalar_kernel(op: str, attrs: dict, result_types: list[Type]) -> Callable[..., Any]:
    """A callable running the graph kernel of ``op`` on scalars: operands as 0-d
    arrays, the result converted to its type exactly as ``kernels.evaluate``
    does, and returned in the interpreter's representation."""
    fn = _kernels.kernel_for(op)
    if fn is None:
        raise KeyError(op)
    attrs = op_def(op).with_defaults(attrs)
    asarray = np.asarray
    dts = [dtype_of(t) for t in result_types]
    is_index = [t == INDEX for t in result_types]

    def convert(out: Any, dt: np.dtype, idx: bool) -> Any:
        r = asarray(out).astype(dt, copy=False)[()]
        return int(r) if idx else r

    if len(result_types) == 1:
        dt, idx = dts[0], is_index[0]

        def run1(*xs: Any) -> Any:
            return convert(fn(attrs, result_types, *[asarray(x) for x in xs])[0], dt, idx)
        return run1

    def run(*xs: Any) -> tuple:
        outs = fn(attrs, result_types, *[asarray(x) for x in xs])
        return tuple(convert(o, dt, idx) for o, dt, idx in zip(outs, dts, is_index))
    return run


# ---------------------------------------------------------------------------
# The interpreter
# ---------------------------------------------------------------------------

class LoopInterpreter(CodeSpace):
    """Runs functions of a loop-stage module. One instance holds the module's
    memory and the compiled functions (defined in its namespace: it is the
    CodeSpace its generated code runs in); each top-level :meth:`call` starts
    with freshly poisoned buffers and a new step count.

    Subclasses for later stages set ``stages`` (the module stages they run),
    ``emitters`` (the op emitters they compile with, usually their own overlaid
    on :data:`EMITTERS`) and ``description``."""

    stages: set[str] | frozenset[str] = STAGES
    emitters: Mapping[OpDef, OpEmitter] = EMITTERS
    description = "loop-stage interpreter"

    def __init__(self, module: Module, base_dir: str | Path = ".",
                 max_steps: int = MAX_STEPS) -> None:
        if module.stage not in self.stages:
            raise Diagnostic(f"the {self.description} cannot run a {module.stage}-stage "
                             "module", module.loc)
        self.module = module
        self.stage = module.stage
        self.max_steps = max_steps
        self.memory = Memory(module, base_dir)
        # [steps executed, current call depth]
        self.state = [0, 0]
        super().__init__({"_st": self.state, "_MAX": max_steps, **_TEMPLATE_NS})
        self.sources: dict[str, str] = {}  # generated Python, by function name
        self._compiled: dict[int, Callable[..., tuple]] = {}
        self._named: set[int] = set()
        self._global_names: dict[str, str] = {}
        self._written_cache: dict[int, set[int]] | None = None
        # Which rank this interpreter is (swir.interp.ranks): set before the first run.
        self.world: World | None = None
        self.mpi = MPICounters()

    @property
    def rank(self) -> int:
        return self.memory.rank

    @rank.setter
    def rank(self, r: int) -> None:
        self.memory.rank = r

    # -- running ----------------------------------------------------------------------
    def run(self, name: str, args: list[np.ndarray]) -> list[np.ndarray]:
        f = self.module.lookup(name)
        if not isinstance(f, Function):
            raise Diagnostic(f"no function @{name} in module \"{self.module.name}\"",
                             self.module.loc)
        return self.call(f, args)

    def call(self, f: Function, args: list[np.ndarray],
             arg_names: list[str] | None = None) -> list[np.ndarray]:
        """Run f from outside (see :func:`io_signature`): bind copies of the
        arguments, allocate poisoned output buffers, run, return the results."""
        inputs, _ = io_signature(f)
        check_arguments(f, args, arg_names or [f"argument #{i}" for i in range(len(args))],
                        inputs)
        if f.body is None:
            raise Diagnostic(f"@{f.name} is only declared; it has no body to run", f.loc)
        self.memory.reset()
        self.state[0] = self.state[1] = 0
        values = [to_runtime(p.type, a) for p, a in zip(inputs, args)]
        outputs = [fresh_array(p.type) for p in f.params[len(inputs):]]
        fn = self.entry(f)
        with np.errstate(all="ignore"), deep_recursion():
            returned = fn(*values, *outputs)
        if f.kind == "kernel":
            return [from_runtime(f.params[i].type, values[i]) for i in self.written(f)]
        results = [from_runtime(p.type, o) for p, o in zip(f.params[len(inputs):], outputs)]
        return results + [from_runtime(t, v) for t, v in zip(f.result_types, returned)]

    @property
    def steps(self) -> int:
        """Instructions executed by the last call."""
        return self.state[0]

    def stats(self) -> dict[str, Any]:
        """Counters of the last top-level run, as JSON-ready data (``swir-run
        --stats``); later stages' interpreters add theirs."""
        return {"steps": self.steps}

    def entry(self, f: Function) -> Callable[..., tuple]:
        """The callable a top-level :meth:`call` of f runs (f compiled; a later
        stage may wrap it, e.g. to run a CPE kernel on every CPE)."""
        return self.function(f)

    # -- compiling ------------------------------------------------------------------
    def global_name(self, g: Global) -> str:
        """The namespace name bound to a global's or buffer's flat array."""
        n = self._global_names.get(g.name)
        if n is None:
            n = self._global_names[g.name] = self.bind(self.memory.array(g), "G")
        return n

    def written(self, f: Function) -> list[int]:
        """:func:`written_params` of f (computed once for the whole module)."""
        if self._written_cache is None:
            self._written_cache = written_by_function(self.module, [f])
        return sorted(self._written_cache.get(id(f), set()))

    def _declare(self, f: Function) -> None:
        """Name every value of f (a CFG may use a value printed later)."""
        if id(f) in self._named:
            return
        self._named.add(id(f))
        for v in function_values(f):
            self.name_of(v)
        for inst in f.walk():
            k = index_constant(inst)
            if k is not None:
                self.int_consts[id(inst.results[0])] = k

    def function(self, f: Function) -> Callable[..., tuple]:
        """f compiled: a Python function of its parameters' values returning the
        tuple of its ``return`` values (empty for a kernel)."""
        fn = self._compiled.get(id(f))
        if fn is None:
            fn = self._compiled[id(f)] = self._compile(f)
        return fn

    def _compile(self, f: Function) -> Callable[..., tuple]:
        if f.body is None:
            raise Diagnostic(f"@{f.name} is only declared; it has no body to run", f.loc)
        self._declare(f)
        e = Emit(self, f)
        blocks = f.body.blocks
        with deep_recursion():
            if f.kind == "kernel" or len(blocks) == 1:
                self._straight(e, f, blocks[0])
            else:
                self._cfg(e, f, blocks)
        fname = self.fresh("f_" + re.sub(r"\W", "_", f.name)[:32])
        return self.define(fname, e.assemble(fname, [e.name(p) for p in f.params]), f)

    def define(self, fname: str, source: str, f: Function) -> Callable[..., Any]:
        """CodeSpace.define, keeping the source (``sources``)."""
        self.sources[fname] = source
        return super().define(fname, source, f)

    def _straight(self, e: Emit, f: Function, block: Block) -> None:
        first = block.instructions[0] if block.instructions else None
        e.count(len(block.instructions), first)
        for inst in block.instructions:
            e.instruction(inst)
        if block.terminator is None or not block.terminator.isa(RETURN):
            if f.kind != "kernel":
                raise Diagnostic(f"block '{block.label} of @{f.name} ends without a "
                                 "terminator", f.loc)
            e.exit_lines(len(e.exits))
            e.line("return ()")

    def _cfg(self, e: Emit, f: Function, blocks: list[Block]) -> None:
        e.blocks = {id(b): i for i, b in enumerate(blocks)}
        e.line("_b = 0")
        e.line("while True:")
        e.indent += 1
        e.depth += 1
        for i, b in enumerate(blocks):
            if b.terminator is None:
                raise Diagnostic(f"block '{b.label} of @{f.name} ends without a terminator",
                                 b.loc or f.loc)
            e.line(f"if _b == {i}:")
            with e.indented():
                e.count(len(b.instructions), b.instructions[0])
                for inst in b.instructions:
                    e.instruction(inst)
        e.line("raise AssertionError('no block ' + str(_b))")
        e.depth -= 1
        e.indent -= 1

    def emitter_for(self, inst: Instruction) -> OpEmitter | None:
        """This stage's emitter of ``inst`` (see the module function emitter_for)."""
        return emitter_for(self.emitters, inst)

    def compile_unit(self, parent: Emit, inst: Instruction) -> None:
        """Compile a structured instruction nested too deeply into a Python
        function of its free values, and emit a call to it."""
        free = free_values(inst)
        u = Emit(self, parent.function)
        params = [u.name(v) for v in free]
        fn = self.emitter_for(inst)
        if fn is None:
            raise Diagnostic(f"'{inst.opname}' cannot be executed at the {self.stage} stage",
                             inst.loc)
        fn(u, inst)
        fname = self.fresh("u")
        self.define(fname, u.assemble(fname, params), parent.function)
        parent.line(f"{fname}({', '.join(parent.name(v) for v in free)})")

    def caller(self, callee: Function, inst: Instruction) -> Callable[..., tuple]:
        """The Python callable a ``call`` of callee runs: compiles it on first
        use, limits the call depth, and notes the call site on errors."""
        interp, state = self, self.state
        compiled: list[Callable[..., tuple]] = []

        def call(*args: Any) -> tuple:
            if not compiled:
                compiled.append(interp.function(callee))
            if state[1] >= MAX_CALL_DEPTH:
                raise Diagnostic(f"calls nested more than {MAX_CALL_DEPTH} deep (unbounded "
                                 "recursion?)", inst.loc)
            state[1] += 1
            try:
                return compiled[0](*args)
            except Diagnostic as d:
                if len(d.notes) < 8:
                    d.notes.append((f"in @{callee.name}, called from here", inst.loc))
                raise
            finally:
                state[1] -= 1
        return call


# ---------------------------------------------------------------------------
# Op emitters: the loop stage
# ---------------------------------------------------------------------------

def loop_range(e: Emit, inst: Instruction) -> tuple[str, Block]:
    step = attr_or_default(inst, "step")
    if not isinstance(step, int) or isinstance(step, bool) or step <= 0:
        raise Diagnostic(f"loop step must be a positive integer, got {step!r}", inst.loc)
    if len(inst.regions) != 1 or len(inst.regions[0].blocks) != 1 \
            or len(inst.regions[0].blocks[0].args) != 1:
        raise Diagnostic("a loop has one body block taking its induction variable", inst.loc)
    lb, ub = e.expr(inst.args[0]), e.expr(inst.args[1])
    rng = f"range({lb}, {ub}" + (f", {step})" if step != 1 else ")")
    return rng, inst.regions[0].blocks[0]


def emit_loop(e: Emit, inst: Instruction, order: Callable[[str], str] | None = None) -> None:
    """Emit a ``for`` or ``parallel`` loop. ``order`` maps the Python name of the
    iterations' ``range`` to the Python expression iterated over (default: the
    range itself, in order); the bounds are evaluated once, at entry."""
    rng, body = loop_range(e, inst)
    var = body.args[0]
    r = e.fresh("r")
    e.line(f"{r} = {rng}")
    e.line(f"_st[0] += len({r}) * {len(body.instructions)}")
    e.count(0, inst)
    e.line(f"for {e.define(var)} in {order(r) if order is not None else r}:")
    lo, hi = e.interval(inst.args[0]), e.interval(inst.args[1])
    if lo is not None and hi is not None:
        e.ranges[id(var)] = (lo[0], max(lo[0], hi[1] - 1))
    par = inst.isa(PARALLEL)
    e.parallel_depth += par
    try:
        e.region(body, count=False)
    finally:
        e.parallel_depth -= par
        e.ranges.pop(id(var), None)


@emitter(FOR, PARALLEL)
def _emit_loop(e: Emit, inst: Instruction) -> None:
    """for: iterations in order. parallel: in REVERSE order, so that a loop wrongly
    marked parallel (a loop-carried dependence) computes something else."""
    emit_loop(e, inst, (lambda r: f"{r}[::-1]") if inst.isa(PARALLEL) else None)


_RELATIONS = {">=", "<=", "==", "!=", ">", "<"}


@emitter(IF)
def _emit_if(e: Emit, inst: Instruction) -> None:
    conds = []
    for c in inst.args:
        if not isinstance(c, Constraint) or c.rel not in _RELATIONS:
            raise Diagnostic("'if' takes affine conditions like %i + 1 >= 0", inst.loc)
        conds.append(f"{e.expr(c.lhs)} {c.rel} {e.expr(c.rhs)}")
    e.line(f"if {' and '.join(conds)}:")
    e.region(inst.regions[0].blocks[0])
    if len(inst.regions) > 1 and inst.regions[1].blocks:
        e.line("else:")
        e.region(inst.regions[1].blocks[0])


@emitter(LOAD)
def _emit_load(e: Emit, inst: Instruction) -> None:
    acc = inst.args[0]
    assert isinstance(acc, Access)
    off = e.offset(inst, acc)
    read = f"{e.name(acc.base)}[{off}]"
    if inst.results[0].type == INDEX:
        read = f"int({read})"
    e.line(f"{e.define(inst.results[0])} = {read}")


@emitter(STORE)
def _emit_store(e: Emit, inst: Instruction) -> None:
    acc = inst.args[1]
    assert isinstance(acc, Access)
    if isinstance(acc.base, Global) and acc.base.kind == "global":
        fail = raiser(f"'store' writes to @{acc.base.name}, a constant global", inst.loc)
        e.line(f"{e.bind(fail, 'ro')}()")
        return
    off = e.offset(inst, acc)
    e.line(f"{e.name(acc.base)}[{off}] = {e.name(inst.args[0])}")


@emitter(DYN_INDEX)
def _emit_dyn_index(e: Emit, inst: Instruction) -> None:
    n = inst.attrs.get("bound")
    v = inst.args[0]
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        raise Diagnostic(f"'dyn_index' needs a positive integer bound, got {n!r}", inst.loc)
    fail = e.bind(_dyn_reporter(inst, n), "dyn")
    d = e.define(inst.results[0])
    e.line(f"{d} = int({e.name(v)})")
    e.line(f"if {d} < 0: {d} += {n}")
    e.line(f"if not 0 <= {d} < {n}: {fail}({e.name(v)})")


def _dyn_reporter(inst: Instruction, n: int) -> Callable[[Any], None]:
    def report(v: Any) -> None:
        raise Diagnostic(f"'dyn_index' of {value_text(inst.args[0])} = {int(v)} is outside "
                         f"[-{n}, {n}) (bound = {n})", inst.loc)
    return report


@emitter(CONST)
def _emit_const(e: Emit, inst: Instruction) -> None:
    t = inst.results[0].type
    if not isinstance(t, ScalarType):
        raise Diagnostic(f"a loop-stage constant is a scalar, not {t}", inst.loc)
    v = constant_array(inst.args[0], t)[()]
    e.line(f"{e.define(inst.results[0])} = {e.bind(int(v) if t == INDEX else v, 'c')}")


def _emit_elementwise(e: Emit, inst: Instruction) -> None:
    op = inst.opname
    operands = list(inst.args)
    if not all(isinstance(v, Value) and isinstance(v.type, ScalarType) for v in operands) \
            or len(inst.results) != 1:
        raise Diagnostic(f"'{op}' on buffers or tensors cannot run at the loop stage; loop "
                         "bodies compute on scalars", inst.loc)
    value_type = operands[-1].type
    names = [e.name(v) for v in operands]
    res = e.define(inst.results[0])
    # Ops with attributes (cast) always run their kernel.
    template = None if inst.attrs else fast_template(op, value_type.name)
    if template is not None:
        z = e.bind(dtype_of(value_type).type(0) if value_type != INDEX else 0, "z") \
            if "{z}" in template else ""
        o = e.bind(dtype_of(value_type).type(1) if value_type != INDEX else 1, "o") \
            if "{o}" in template else ""
        e.line(f"{res} = {template.format(*names, z=z, o=o)}")
        return
    try:
        fn = scalar_kernel(op, dict(inst.attrs), [r.type for r in inst.results])
    except KeyError:
        raise Diagnostic(f"no kernel for '{op}'", inst.loc) from None
    e.line(f"{res} = {e.bind(fn, 'op_' + op)}({', '.join(names)})")


def emitter_for(emitters: Mapping[OpDef, OpEmitter], inst: Instruction) -> OpEmitter | None:
    """The op's emitter in ``emitters``; an element-wise op (SCALAR_FORM) has the
    shared one unless the table has its own."""
    fn = emitters.get(inst.opdef)
    if fn is None and inst.opdef is not None and SCALAR_FORM in inst.opdef.traits:
        return _emit_elementwise
    return fn


@emitter(CALL)
def _emit_call(e: Emit, inst: Instruction) -> None:
    app = inst.args[0]
    assert isinstance(app, Apply)
    callee = e.interp.module.lookup(app.callee)
    args = ", ".join(e.name(a) for a in app.args)
    if not isinstance(callee, Function):
        fn = raiser(f"call to undefined function @{app.callee}", inst.loc)
    elif callee.body is None:
        fn = raiser(f"@{callee.name} is only declared; it has no body to run", inst.loc)
    else:
        fn = e.interp.caller(callee, inst)
        for i in e.interp.written(callee):
            a = app.args[i] if i < len(app.args) else None
            if isinstance(a, Global) and a.kind == "global":
                fn = raiser(f"call passes @{a.name}, a constant global, to parameter "
                             f"%{callee.params[i].name} of @{callee.name}, which writes it",
                             inst.loc)
                break
    call = f"{e.bind(fn, 'call')}({args})"
    if inst.results:
        e.line(f"{', '.join(e.define(r) for r in inst.results)}, = {call}")
    else:
        e.line(call)


# The graph-stage collective each host form (mpi_*) carries out.
_GRAPH_FORM = {host: op for op, host in HOST_FORM_OF.items()}


@emitter(*_GRAPH_FORM)
def _emit_collective(e: Emit, inst: Instruction) -> None:
    it = e.interp
    shape = inst.args[0].type.shape
    op = _GRAPH_FORM[inst.opdef]

    def run(source: np.ndarray, target: np.ndarray) -> None:
        target[:] = collective(op, inst.attrs, it.world, it.rank, source.reshape(shape),
                               it.mpi).reshape(-1)

    e.line(f"{e.bind(run, 'mpi')}({e.name(inst.args[0])}, {e.name(inst.args[1])})")


@emitter(RETURN)
def _emit_return(e: Emit, inst: Instruction) -> None:
    vals = [e.name(v) for v in inst.args]
    if any(e.exits):
        # Leaving every open region: values first, then their exit statements.
        tmp = [e.fresh("ret") for _ in vals]
        for t, v in zip(tmp, vals):
            e.line(f"{t} = {v}")
        e.exit_lines(len(e.exits))
        vals = tmp
    e.line(f"return ({''.join(v + ', ' for v in vals)})")


def _jump(e: Emit, succ: Successor) -> None:
    blocks = e.blocks
    if id(succ.block) not in blocks:
        raise Diagnostic(f"branch to block '{succ.block.label} outside the function body",
                         None)
    if succ.args:
        targets = "".join(e.name(a) + ", " for a in succ.block.args)
        values = "".join(e.name(a) + ", " for a in succ.args)
        e.line(f"{targets}= {values}")   # every value is read before any is bound
    e.line(f"_b = {blocks[id(succ.block)]}")
    e.line("continue")


@emitter(BR)
def _emit_br(e: Emit, inst: Instruction) -> None:
    _jump(e, inst.args[0])


@emitter(COND_BR)
def _emit_cond_br(e: Emit, inst: Instruction) -> None:
    c, yes, no = inst.args
    e.line(f"if {e.name(c)}:")
    e.indent += 1
    _jump(e, yes)
    e.indent -= 1
    _jump(e, no)
