"""Trial lowering: the DMA traffic some graph ops would cost, measured by
lowering them as swir-cg does (-lower-loops, -ldm-plan, -insert-dma) in a
module of their own and counting with :func:`swir.costmodel.traffic.dma_traffic`.

Graph passes that must never make the generated code move more data (-fuse,
-fold-batchnorm, -layout) compare the traffic before and after a rewrite
with this. A kernel's traffic depends only on its own op and shapes (not on
its neighbours or on memory planning), so comparing the ops a rewrite
touches, each measured alone, compares the whole program.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from swir import cache
from swir.costmodel.traffic import TrafficError, dma_traffic
from swir.diagnostics import Diagnostic
from swir.interp.pycode import function_values
from swir.ir.builder import Builder
from swir.ir.clone import clone
from swir.ir.core import Instruction, Module
from swir.ir.fused import group, outside_values
from swir.ops import CHUNK
from swir.ops.registry import OpError
from swir.ops.util import attr_or_default
from swir.parallel import fork_map
from swir.passes.manager import Pass, PassFailure, PassManager
from swir.printer import print_module
from swir.target import Target, default_target, target_named
from swir.verifier import VerificationError


@dataclass(frozen=True, order=True)
class Cost:
    """What a trial's kernels move, compared by bytes, then operations."""

    bytes: int  # DMA bytes in + out, one call
    ops: int    # DMA operations (gets + puts)
    # CPEs given work, summed over the parallel loops (min(extent, CPEs)):
    # not compared, but a rewrite may require it not to drop.
    tasks: int = field(default=0, compare=False)


# What a failed trial raises: the rewrite is refused, compiling goes on.
TRIAL_FAILURES = (PassFailure, VerificationError, TrafficError, Diagnostic, OpError)
PLAN_OPTIONS = ("ldm_size", "ldm_reserve", "ldm_init", "cpes", "double_buffer")
_CACHE: dict[tuple, Cost | None] = {}
CACHE_KIND = "trial"


def plan_options(p: Pass) -> dict:
    """The -ldm-plan options pass ``p`` declares too (same names), for its trials."""
    return {name: getattr(p, name) for name in PLAN_OPTIONS if hasattr(p, name)}


def traffic_of(ops: list[Instruction], plan: dict | None = None,
               fused: bool = False, target: Target | None = None) -> Cost | None:
    """The DMA cost of computing ``ops`` (graph instructions, in order, from
    one block) as kernels, or as ONE fused kernel when ``fused``: values
    from outside, globals included, are parameters; results used after the
    last op (or the last op's results) are returned. None if the lowering
    refuses. Cached by the trial module's text and the plan options; the
    trial module's values are named by position (not as in ``ops``), so ops
    that differ only in their names (the same layer repeated) share one
    measurement."""
    return measure(ops_module(ops, fused), plan or {}, target)


def measure(module: Module, plan: dict, target: Target | None = None) -> Cost | None:
    """Lower a graph module as swir-cg would (``plan``: -ldm-plan options;
    ``target``: the machine, the calling pass's, else the default) and count
    its DMA statically; None if a pass refuses."""
    lowering = _lowering(plan, target)
    key = _key(module, lowering)
    if key not in _CACHE and not _from_store(key):
        _CACHE[key] = _measure(module, lowering)
        _to_store(key)
    return _CACHE[key]


def measure_ahead(trials: dict[Hashable, Module], plan: dict, jobs: int,
                  target: Target | None = None) -> dict[Hashable, Cost | None]:
    """What :func:`measure` answers for each trial module of ``trials`` (by
    the caller's name for it), those not known yet measured in up to
    ``jobs`` forked processes at once
    (swir.parallel): a pass asks for its trials one at a time, in an order
    its decisions set, but the measurements need nothing of each other. The
    answers are also kept where :func:`measure` finds them. A trial a worker
    could not measure is left out (measured, and its error reported, when
    the pass asks)."""
    lowering = _lowering(plan, target)
    keys = {name: _key(m, lowering) for name, m in trials.items()}
    todo: dict[tuple, Module] = {}
    for name, key in keys.items():
        if key not in _CACHE and key not in todo and not _from_store(key):
            todo[key] = trials[name]
    work = list(todo)
    items = [(todo[k], lowering) for k in work]
    done = fork_map(_measure_item, items, jobs) if jobs > 1 and len(work) > 1 else \
        ((i, _measure_item(item)) for i, item in enumerate(items))
    for i, (ok, cost) in done:
        if ok:
            _CACHE[work[i]] = cost
            _to_store(work[i])
    return {name: _CACHE[key] for name, key in keys.items() if key in _CACHE}


def _measure_item(item: tuple[Module, dict]) -> tuple[bool, Cost | None]:
    """(True, the trial's cost), or (False, None) when measuring it fails
    other than by a refusal: a trial measured ahead may be one the pass
    never asks for, and one it asks for is measured again then, where the
    error is reported."""
    try:
        return True, _measure(*item)
    except Exception:
        return False, None


def _lowering(plan: dict, target: Target | None) -> dict:
    """What a trial is lowered with: the -ldm-plan options and the target's
    name (``target``: the calling pass's, else the default). By name, because
    the lowering is also the trial's cache key: a target a pass compiles for
    must be registered in swir.target.TARGETS (every --target is), and two
    registered targets have two names."""
    return {**plan, "target": (target or default_target()).name}


def _key(module: Module, lowering: dict) -> tuple:
    return (print_module(module), tuple(sorted(lowering.items())))


def _from_store(key: tuple) -> bool:
    """Whether the compile cache (swir.cache), if one is in use, holds the
    measurement: then it is kept in this process's too."""
    store = cache.current()
    value = store.get(CACHE_KIND, list(key), _valid) if store else None
    if value is not None:
        _CACHE[key] = None if value["cost"] is None else Cost(*value["cost"])
    return value is not None


def _to_store(key: tuple) -> None:
    store = cache.current()
    if store is not None:
        cost = _CACHE[key]
        store.put(CACHE_KIND, list(key),
                  {"cost": None if cost is None else [cost.bytes, cost.ops, cost.tasks]})


def _valid(value) -> bool:
    """Exactly what _to_store writes: a cost of three counts, or None (the
    trial was refused)."""
    if not isinstance(value, dict) or set(value) != {"cost"}:
        return False
    cost = value["cost"]
    return cost is None or (isinstance(cost, list) and len(cost) == 3 and
                            all(type(x) is int and 0 <= x < 2 ** 63 for x in cost))


def ops_module(ops: list[Instruction], fused: bool = False) -> Module:
    """The trial module :func:`traffic_of` measures for ``ops``."""
    members = {id(i) for i in ops}
    inputs = outside_values(ops)
    outputs = [r for i in ops for r in i.results
               if any(id(u) not in members for u in r.users)] or list(ops[-1].results)
    m = Module("trial")
    f, b = Builder.function(m, "main", [v.type for v in inputs], [r.type for r in outputs])
    mapping: dict = dict(zip(inputs, f.params))
    copies = clone(b, ops, mapping)
    b.create_inst("return", *[mapping[r] for r in outputs])
    if fused:
        group(copies)
    _name_by_position(f)
    return m


def _name_by_position(f) -> None:
    """Rename every value of ``f`` by its position (interp.loop's
    function_values order): parameters ``%a0, %a1, ...``, then the rest
    ``%v0, %v1, ...``. The measurement depends on the ops, types and
    attributes alone, so this makes the trial module's text, the cache key,
    independent of the names the ops had."""
    params = len(f.params)
    for k, v in enumerate(function_values(f)):
        v.name = f"a{k}" if k < params else f"v{k - params}"


def _measure(module: Module, lowering: dict) -> Cost | None:
    from swir.passes import pass_class
    plan = dict(lowering)
    target = target_named(plan.pop("target"))
    try:
        # Not verified after each pass: a trial's IR is thrown away, and a
        # pass that breaks it is caught where the same lowering runs for real.
        passes = [pass_class("lower-loops")(), pass_class("ldm-plan")(**plan),  # type: ignore[misc]
                  pass_class("insert-dma")()]                           # type: ignore[misc]
        PassManager(passes, verify_each=False, target=target).run(module)
        t = dma_traffic(module).total
    except TRIAL_FAILURES:
        return None
    tasks = sum(min(-(-i.attrs["extent"] // attr_or_default(i, "grain")), i.attrs["workers"])
                for i in module.walk() if i.isa(CHUNK))
    return Cost(t.bytes_in + t.bytes_out, t.gets + t.puts, tasks)
