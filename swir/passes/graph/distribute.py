"""-distribute: share a model's work over several ranks (MPI processes, one
per core group: an SW26010 chip has four, TaihuLight 40,960 chips; an
SW26010-Pro chip has six).

The module becomes the one program every rank runs (SPMD), and says so:
``stage graph {ranks = N, split = "data" | "model"}``.

**Data parallel** (``split=data``): the batch is cut into N equal blocks, one
per rank; every rank holds every weight. The module's functions are
re-typed for a batch of B / N; the program (swir-cg) scatters each input's
batch to the ranks (each reads its block) and gathers each result to rank
0. Refused when a tensor parameter's leading axis (the batch) is not a
multiple of N, when a parameter or result has no batch axis, and when an op
mixes the batch with other axes (its result's leading axis is not the
batch, or it works along it: a softmax over axis 0).

**Model parallel** (``split=model``, for batch 1): each ``conv2d`` (groups
1) and ``matmul`` whose weight is a constant global (or -layout's transpose
of one) is split by channels, as Megatron-LM splits transformer layers:

- its input whole: each rank computes its slice of the output channels
  (conv: axis 1; matmul: the last axis), from its slice of the weight and
  bias (per-rank globals ``{ranks = N}``: a rank stores only its slice);
- its input split over the channels it sums over: each rank sums over its
  input channels, for every output channel, and the ranks add the partial
  sums (``reduce_scatter`` for a batch-1 conv, which leaves each rank its
  output channels for the next layer; ``allreduce`` otherwise); the bias
  after the sum.

Element-wise ops whose other operands are constants (sliced the same way)
or split the same way stay split, and so does pooling of a value split by
channels; an ``allgather`` rebuilds a whole tensor right after its slice is
computed, for the first op that needs all of it. An op whose channels N does
not divide runs whole on every rank. Refused when no op can be split (more
ranks than any op's output channels).

``split=auto`` takes data parallel when the batch is a multiple of N and
model parallel otherwise (and for a module with calls): data parallel needs
no communication between layers (docs/performance.md compares the two on
ResNet-18 at batch 4). On one rank nothing is split.

Runs before -fuse (so fusion sees the split ops and keeps the element-wise
ones in the conv / matmul kernels) and after -layout (whose transposed
weights it slices along the stored axis that holds the output channels).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from swir.diagnostics import Diagnostic
from swir.ir.builder import Builder
from swir.ir.constants import constant_value, module_ranks
from swir.ir.core import ArrayInit, Function, Global, Instruction, Module, Value
from swir.ir.types import TensorType
from swir.ops import CALL, CONV2D, EXPAND, FUSED, MATMUL, RESHAPE, RETURN, TRANSPOSE
from swir.ops.gradients import AVG_POOL2D_GRAD
from swir.ops.collective import ALLGATHER
from swir.ops.registry import SCALAR_FORM, Category, OpError
from swir.ops.util import attr
from swir.passes.graph.fold_constants import new_global
from swir.passes.manager import AnalysisManager, Pass, PassFailure, at_least, one_of, option

SPLITS = ("auto", "data", "model")


@dataclass
class Distribute(Pass):
    name = "distribute"
    summary = "Share the work over MPI ranks: split the batch or each layer's channels"
    stages = ("graph",)

    ranks: int = option(1, "MPI ranks (core groups) that run the program", check=at_least(1))
    split: str = option("auto", "how the work is shared: data (the batch), model (each conv's "
                                "and matmul's output channels) or auto (data when the batch "
                                "divides)", check=one_of(*SPLITS))

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        if "ranks" in module.attrs:
            raise PassFailure([Diagnostic(f"-distribute: the module is already distributed "
                                          f"over {module_ranks(module)} ranks", module.loc)])
        if any(i.isa(FUSED) for i in module.walk()):
            raise PassFailure([Diagnostic("-distribute runs before -fuse: the module has "
                                          "fused groups", module.loc)])
        batch = common_batch(module)
        split = self.split
        if split == "auto":
            split = "model" if batch_split_refused(module, self.ranks, batch) else "data"
        if self.ranks == 1:
            pass                    # one rank has it all: nothing to split
        elif split == "data":
            split_batch(module, self.ranks, batch)
        else:
            self.bump("ops split", split_channels(module, self.ranks))
        module.attrs["ranks"] = self.ranks
        module.attrs["split"] = split
        return True


def _fail(message: str, loc=None) -> PassFailure:
    return PassFailure([Diagnostic(f"-distribute: {message}", loc)])


def _roots(module: Module) -> list[Function]:
    called = {i.args[0].callee for i in module.walk() if i.isa(CALL)}
    return [f for f in module.functions if f.name not in called and f.body is not None]


def common_batch(module: Module) -> int | None:
    """The leading axis every tensor parameter of the program's functions has, if one."""
    dims = {p.type.shape[0] for f in _roots(module) for p in f.params
            if isinstance(p.type, TensorType) and p.type.rank > 0}
    return dims.pop() if len(dims) == 1 else None


# -- data parallel ---------------------------------------------------------------------

def batch_split_refused(module: Module, ranks: int, batch: int | None) -> str | None:
    """Why the program's batch cannot be split over ``ranks`` (None: it can, as far as its
    signature tells; the ops are checked as they are re-typed)."""
    if any(i.isa(CALL) for i in module.walk()):
        return "split=data needs a module without calls (the batch of a called function is " \
               "not known)"
    for f in _roots(module):
        ports = [(f"parameter %{p.name}", p.type) for p in f.params] + \
            [(f"result {i}", t) for i, t in enumerate(f.result_types)]
        for what, t in ports:
            if not isinstance(t, TensorType) or t.rank == 0:
                return (f"split=data: {what} of @{f.name} ({t}) has no batch axis to split "
                        "(split=model keeps it whole)")
    if batch is None:
        return "split=data needs every tensor parameter to have the same leading axis (the batch)"
    if batch % ranks:
        return (f"a batch of {batch} does not split over {ranks} ranks (it must be a multiple "
                "of the ranks; split=model shares a layer's channels instead)")
    return None


def split_batch(module: Module, ranks: int, batch: int | None) -> None:
    """Re-type the program for a batch of ``batch / ranks``."""
    why = batch_split_refused(module, ranks, batch)
    if why is not None:
        raise _fail(why, module.loc)
    part = batch // ranks
    for f in module.functions:
        _retype_batch(f, batch, part)


def _per_rank(t: TensorType, batch: int, part: int) -> TensorType:
    return TensorType((part,) + t.shape[1:], t.element)


def _retype_batch(f: Function, batch: int, part: int) -> None:
    """Every value that depends on a parameter gets the per-rank batch."""
    varying: set[int] = set()
    for p in f.params:
        if isinstance(p.type, TensorType) and p.type.rank > 0:
            p.type = _per_rank(p.type, batch, part)
            varying.add(id(p))
    for inst in f.walk():
        if inst.isa(RETURN):
            for i, v in enumerate(inst.operands):
                if id(v) not in varying:
                    raise _fail(f"split=data: result {i} of @{f.name} does not depend on the "
                                "batch (every rank would return it whole)", inst.loc)
            continue
        if not any(id(v) in varying for v in inst.operands):
            continue
        old = [r.type for r in inst.results]
        if any(not isinstance(t, TensorType) or t.rank == 0 or t.shape[0] != batch
               for t in old) or _along_batch(inst):
            raise _fail(f"'{inst.opname}' mixes the batch with other axes (its result "
                        f"{old[0]} does not keep the batch of {batch} apart)", inst.loc)
        name = _SHAPE_ATTRS.get(inst.opdef)
        if name is not None:    # a shape written in the op: its batch too
            shape = tuple(inst.attrs[name])
            inst.attrs = {**inst.attrs, name: (part,) + shape[1:]} if shape[0] == batch \
                else inst.attrs
        try:
            new = inst.opdef.infer(inst)
        except OpError as e:
            raise _fail(f"'{inst.opname}' cannot take a batch of {part}: {e}", inst.loc) from None
        for r, t in zip(inst.results, new):
            if t != _per_rank(r.type, batch, part):
                raise _fail(f"'{inst.opname}' mixes the batch with other axes (with a batch "
                            f"of {part} it gives {t})", inst.loc)
            r.type = t
            varying.add(id(r))
    f.result_types = [_per_rank(t, batch, part) for t in f.result_types]


# Ops whose attribute spells out a shape, the batch first (reshape's target;
# expand's, which the gradients write; the pooling gradient's input).
_SHAPE_ATTRS = {RESHAPE: "shape", EXPAND: "shape", AVG_POOL2D_GRAD: "input_shape"}


def _along_batch(inst: Instruction) -> bool:
    """An op that works along the batch axis itself (a softmax over axis 0, a
    transpose that moves it): the result keeps the batch's shape but each
    element depends on other images."""
    rank = inst.operands[0].type.rank if inst.operands and \
        isinstance(inst.operands[0].type, TensorType) else 0
    for name in ("axis", "axes", "perm"):
        if inst.opdef.attr(name) is None:
            continue
        v = attr(inst, name)
        values = v if isinstance(v, (tuple, list)) else (v,)
        if name == "perm":
            return bool(values) and values[0] != 0
        if any(isinstance(a, int) and a % max(rank, 1) == 0 for a in values):
            return True
    return False


# -- model parallel --------------------------------------------------------------------

@dataclass
class Parted:
    """A value computed in slices: this rank's ``part`` along ``axis``."""
    part: Value
    axis: int


def split_channels(module: Module, ranks: int) -> int:
    """Split every conv2d / matmul that ``ranks`` divides; returns how many."""
    widest = 0
    count = 0
    for f in module.functions:
        if f.body is None:
            continue
        parted: dict[int, Parted] = {}
        converted: list[Instruction] = []
        for inst in list(f.walk()):
            channels = _splittable(inst)
            if channels is not None:
                widest = max(widest, channels)
            if channels is not None and _reads_split_inputs(inst, parted):
                whole = _split_inputs(module, inst, ranks, parted)
                if isinstance(whole, Parted):
                    parted[id(inst.results[0])] = whole
                else:
                    inst.results[0].replace_all_uses_with(whole)
                converted.append(inst)
                count += 1
            elif channels is not None and channels % ranks == 0:
                parted[id(inst.results[0])] = _split_outputs(module, inst, ranks)
                converted.append(inst)
                count += 1
            elif _stays_split(inst, parted):
                parted[id(inst.results[0])] = _split_elementwise(module, inst, ranks, parted)
                converted.append(inst)
        _gather_where_needed(f, parted, converted, ranks)
    for g in [g for g in module.globals if not g.has_uses]:
        module.remove(g)        # the whole weights the slices replaced
    if count == 0:
        raise _fail(f"no conv2d or matmul has output channels that {ranks} ranks divide "
                    + (f"(more ranks than channels: the widest has {widest})"
                       if widest and widest < ranks else
                       "(split=data shares the batch instead)"), module.loc)
    return count


def _weight_global(v: Value) -> tuple[Global, tuple[int, ...] | None] | None:
    """The constant global a weight reads, and the transpose's perm (if -layout stored it
    transposed)."""
    if isinstance(v, Global):
        return (v, None) if _plain_constant(v) else None
    owner = getattr(v, "owner", None)
    if isinstance(owner, Instruction) and owner.isa(TRANSPOSE) \
            and isinstance(owner.args[0], Global) and _plain_constant(owner.args[0]):
        return owner.args[0], tuple(owner.attrs["perm"])
    return None


def _plain_constant(g: Global) -> bool:
    return g.kind == "global" and g.init is not None and "ranks" not in g.attrs


def _out_axis(inst: Instruction) -> tuple[int, int]:
    """(axis of the result, axis of the weight) that hold the output channels."""
    if inst.isa(CONV2D):
        return 1, 0
    return inst.results[0].type.rank - 1, 1


def _in_axis(inst: Instruction) -> tuple[int, int]:
    """(axis of the input, axis of the weight) that hold the input channels (the sum)."""
    if inst.isa(CONV2D):
        return 1, 1
    return inst.args[0].type.rank - 1, 0


def _splittable(inst: Instruction) -> int | None:
    """The output channels of a conv2d / matmul this pass can split, else None."""
    if inst.isa(CONV2D):
        if attr(inst, "groups") != 1:
            return None
        if len(inst.args) > 2 and not (isinstance(inst.args[2], Global)
                                       and _plain_constant(inst.args[2])):
            return None
    elif not inst.isa(MATMUL):
        return None
    w = inst.args[1]
    if not isinstance(w, Value) or not isinstance(w.type, TensorType) or \
            (inst.isa(MATMUL) and w.type.rank != 2) or _weight_global(w) is None:
        return None
    axis, _ = _out_axis(inst)
    return inst.results[0].type.shape[axis]


def _ranked_global(module: Module, g: Global, axis: int, ranks: int) -> Global:
    """A per-rank global: slice r of ``g`` along ``axis`` for rank r."""
    whole = np.asarray(constant_value(g))
    slices = np.stack(np.split(whole, ranks, axis=axis))
    t = TensorType(slices.shape[1:], g.type.element)
    new = new_global(module, f"{g.name}.split", t, slices[0])
    new.init = ArrayInit(np.ascontiguousarray(slices))
    new.attrs["ranks"] = ranks
    return new


def _weight_slice(module: Module, build: Builder, inst: Instruction, w_axis: int,
                  ranks: int) -> Value:
    """This rank's slice of the op's weight along ``w_axis`` (a per-rank global,
    read through the op's transpose when -layout stored it transposed)."""
    g, perm = _weight_global(inst.args[1])
    w: Value = _ranked_global(module, g, w_axis if perm is None else perm[w_axis], ranks)
    if perm is not None:
        w = build.create_inst("transpose", w, attrs={"perm": perm},
                              names=[inst.args[1].name]).results[0]
    return w


def _split_outputs(module: Module, inst: Instruction, ranks: int) -> Parted:
    """Each rank computes its slice of the output channels from the whole input."""
    axis, w_axis = _out_axis(inst)
    build = Builder(inst.parent, inst)
    args = [inst.args[0], _weight_slice(module, build, inst, w_axis, ranks)]
    if len(inst.args) > 2:
        args.append(_ranked_global(module, inst.args[2], 0, ranks))
    new = build.create_inst(inst.opname, *args, attrs=dict(inst.attrs),
                            names=[inst.results[0].name])
    new.loc = inst.loc
    return Parted(new.results[0], axis)


def _reads_split_inputs(inst: Instruction, parted: dict[int, Parted]) -> bool:
    """The op's input is split over its input channels (the axis it sums over)."""
    p = parted.get(id(inst.args[0]))
    summable = inst.results[0].type.element.name in ("f32", "f64")    # MPI_SUM's types
    return p is not None and p.axis == _in_axis(inst)[0] and summable and \
        (not inst.isa(CONV2D) or attr(inst, "groups") == 1)


def _split_inputs(module: Module, inst: Instruction, ranks: int,
                  parted: dict[int, Parted]) -> Parted | Value:
    """Each rank sums over its slice of the input channels, which it holds, for
    every output channel; the ranks' partial sums are then added: by a
    reduce-scatter that leaves each rank its slice of the output channels (a
    batch-1 conv: the slices are contiguous, and the next layer can sum over
    them in turn), else by an allreduce. The bias is added after the sum."""
    _, w_axis = _in_axis(inst)
    axis, _ = _out_axis(inst)
    build = Builder(inst.parent, inst)
    w = _weight_slice(module, build, inst, w_axis, ranks)
    name = inst.results[0].name
    partial = build.create_inst(inst.opname, parted[id(inst.args[0])].part, w,
                                attrs=dict(inst.attrs), names=[f"{name}.partial"])
    partial.loc = inst.loc
    whole = inst.results[0].type
    scatter = inst.isa(CONV2D) and math.prod(whole.shape[:axis]) == 1 \
        and whole.shape[axis] % ranks == 0
    if scatter:
        total = build.create_inst("reduce_scatter", partial.results[0],
                                  attrs={"axis": axis, "ranks": ranks}, names=[name])
    else:
        total = build.create_inst("allreduce", partial.results[0], attrs={"ranks": ranks},
                                  names=[name])
    total.loc = inst.loc
    out = total.results[0]
    if len(inst.args) > 2:      # conv2d's bias, one per output channel: C x 1 x 1
        bias = inst.args[2]
        per_channel = _reshaped_global(module, bias, (whole.shape[axis], 1, 1))
        b = _ranked_global(module, per_channel, 0, ranks) if scatter else per_channel
        biased = build.create_inst("add", out, b, names=[f"{name}.biased"])
        biased.loc = inst.loc
        out = biased.results[0]
    return Parted(out, axis) if scatter else out


def _reshaped_global(module: Module, g: Global, shape: tuple[int, ...]) -> Global:
    return new_global(module, f"{g.name}.channels", TensorType(shape, g.type.element),
                      np.asarray(constant_value(g)).reshape(shape))


def _stays_split(inst: Instruction, parted: dict[int, Parted]) -> bool:
    """An element-wise op of a split value whose other operands are split the same way
    or constants it can slice, or a pooling of a value split by channels."""
    d = inst.opdef
    if d is not None and d.channel_wise:
        p = parted.get(id(inst.args[0]))
        return p is not None and p.axis == 1
    if d is None or SCALAR_FORM not in d.traits or len(inst.results) != 1 \
            or d.category not in (Category.ELEMENTWISE, Category.BROADCAST):
        return False
    split = [parted[id(v)] for v in inst.operands if id(v) in parted]
    if not split or len({p.axis for p in split}) != 1:
        return False
    axis = split[0].axis
    whole = inst.results[0].type
    if not isinstance(whole, TensorType):
        return False
    for i, v in enumerate(inst.operands):
        if id(v) in parted:
            if v.type != whole or not _running(d, i):
                return False            # broadcast of a split value: gather it
            continue
        at = _aligned_axis(d, i, v, whole, axis)
        if not (isinstance(v, Global) and _plain_constant(v)) or \
                (at >= 0 and v.type.shape[at] not in (1, whole.shape[axis])):
            return False
    return True


def _running(d, i: int) -> bool:
    return d.running_operands is None or i in d.running_operands


def _aligned_axis(d, i: int, v: Value, whole: TensorType, axis: int) -> int:
    """The axis of operand ``v`` lined up with ``axis`` of the result (-1: none).
    Operands broadcast numpy's way (from the right); the per-channel vectors of an op
    with running operands (batch_norm) line up with axis 1."""
    if not _running(d, i):
        return 0 if axis == 1 else -1
    return axis - (whole.rank - v.type.rank)


def _split_elementwise(module: Module, inst: Instruction, ranks: int,
                       parted: dict[int, Parted]) -> Parted:
    axis = next(parted[id(v)].axis for v in inst.operands if id(v) in parted)
    whole = inst.results[0].type
    args: list[Value] = []
    for i, v in enumerate(inst.operands):
        if id(v) in parted:
            args.append(parted[id(v)].part)
            continue
        at = _aligned_axis(inst.opdef, i, v, whole, axis)
        sliced = at >= 0 and v.type.shape[at] == whole.shape[axis] and whole.shape[axis] > 1
        args.append(_ranked_global(module, v, at, ranks) if sliced else v)
    new = Builder(inst.parent, inst).create_inst(inst.opname, *args, attrs=dict(inst.attrs),
                                                 names=[inst.results[0].name])
    new.loc = inst.loc
    return Parted(new.results[0], axis)


def _gather_where_needed(f: Function, parted: dict[int, Parted],
                         converted: list[Instruction], ranks: int) -> None:
    """Each split value an unconverted op (or a return) reads is gathered once, right
    after its slice is computed; then the whole-tensor ops replaced are erased."""
    done = {id(i) for i in converted}
    for inst in converted:
        whole = inst.results[0]
        p = parted.get(id(whole))
        if p is None:           # computed whole (an allreduce): its users have it already
            continue
        readers = [u for u in whole.users if id(u) not in done]
        if not readers:
            continue
        g = Instruction("allgather", [p.part], attrs={"axis": p.axis, "ranks": ranks})
        p.part.owner.insert_after(g)
        g.set_result_types(ALLGATHER.infer(g), [whole.name])
        g.loc = inst.loc
        for u in readers:
            u.replace_uses_of(whole, g.results[0])
    for inst in reversed(converted):
        inst.erase()
