"""The communication of a program for several ranks: each collective's
modeled time (docs/cost-model.md, "Network").

A rank is one core group; ranks ck .. ck + c - 1 share a chip (a node), c
the target's core groups per chip (``Target.core_groups``: 4 on the
SW26010, 6 on the SW26010-Pro). The
collectives are those the MPI program makes (swir/codegen/program_ranks.c):
each ``mpi_*`` collective of the host functions, and the program's inputs
and outputs: with a data split each rank reads its block of the inputs from
the file (no communication; a stream input would be scattered from rank 0,
:meth:`Network.scatter`) and the outputs are gathered to rank 0; with a
model split rank 0 broadcasts the inputs. Each is modeled as MPICH chooses
its algorithms
(Thakur, Rabenseifner and Gropp, "Optimization of Collective Communication
Operations in MPICH", IJHPCA 19(1), 2005), in the Hockney model of a
message, latency + bytes / bandwidth:

- allgather (recursive doubling or Bruck): ``ceil(log2 p) * a + (p - 1) * m / b``;
- reduce-scatter (recursive halving or pairwise exchange): the same, with
  m = n / p of the whole n, plus the MPE adding what it receives: 3 (p - 1)
  m bytes read and written at its copy bandwidth;
- allreduce (Rabenseifner's: a reduce-scatter, then an allgather);
- scatter and gather (binomial tree): ``ceil(log2 p) * a + (p - 1) * m / b``;
- broadcast (binomial tree for short messages, scatter then allgather for
  long ones): ``min(ceil(log2 p) * (a + n / b), 2 * ceil(log2 p) * a + 2 * (p - 1) / p * n / b)``;

with m the bytes of one rank's block, n the whole message, and (a, b) the
links the bytes cross: the network on chip while every rank is on one chip;
past it, the interconnect, where each node's injection bandwidth is shared
by its core groups, and the bisection bandwidth bounds what crosses the
machine's middle. An allgather whose slices are not contiguous in the whole
tensor (a matmul split by columns) is interleaved by the MPE afterwards:
twice its bytes at the MPE's copy bandwidth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from swir.ir.constants import module_ranks
from swir.ir.core import Function, Instruction, Module
from swir.ir.types import ShapedType
from swir.ops import (ALLREDUCE, CALL, MPI_ALLGATHER, MPI_ALLREDUCE, MPI_REDUCE_SCATTER,
                      REDUCE_SCATTER, SPAWN)
from swir.target import Target


@dataclass(frozen=True)
class CollectiveCost:
    what: str               # "allgather %x", "scatter input %x"
    kind: str               # allgather, scatter, gather, bcast
    block_bytes: int        # one rank's block (bcast: the whole message)
    seconds: float          # modeled, on every rank (each waits for the collective)

    def as_dict(self) -> dict[str, Any]:
        return {"what": self.what, "kind": self.kind, "block_bytes": self.block_bytes,
                "seconds": self.seconds}


@dataclass(frozen=True)
class Network:
    """The links between ranks, from a target's figures."""

    ranks: int
    per_node: int           # core groups per chip
    noc: tuple[float, float]   # latency s, bandwidth bytes/s
    net: tuple[float, float]
    bisection: float
    mpe_copy: float

    @classmethod
    def for_target(cls, t: Target, ranks: int) -> Network:
        return cls(ranks, t.core_groups, (t.noc_latency, t.noc_bandwidth),
                   (t.net_latency, t.net_bandwidth), t.bisection_bandwidth,
                   t.mpe_copy_bandwidth)

    @property
    def steps(self) -> int:
        return math.ceil(math.log2(self.ranks)) if self.ranks > 1 else 0

    @property
    def nodes(self) -> int:
        return -(-self.ranks // self.per_node)

    def latency(self) -> float:
        return (self.noc if self.nodes == 1 else self.net)[0]

    def exchange_seconds(self, block: float) -> float:
        """Every rank gets every other rank's ``block`` bytes (an allgather's
        data): on one chip over the NoC; else each node's core groups take in
        the blocks of the ranks on other nodes through its injection link, and
        half the machine's blocks cross its bisection."""
        p = self.ranks
        if p == 1:
            return 0.0
        if self.nodes == 1:
            return (p - 1) * block / self.noc[1]
        on_node = min(self.per_node, p)
        inbound = on_node * (p - on_node) * block / self.net[1]
        local = (on_node - 1) * block / self.noc[1]
        bisection = (p / 2) * (p / 2) * block / self.bisection
        return max(inbound, bisection) + local

    def root_seconds(self, block: float) -> float:
        """Rank 0 sends (or receives) one ``block`` to (from) every other rank:
        through its chip's NoC to its neighbours and its node's injection link
        to the rest."""
        p = self.ranks
        on_node = min(self.per_node, p)
        return (on_node - 1) * block / self.noc[1] + (p - on_node) * block / self.net[1]

    def allgather(self, block: float) -> float:
        return self.steps * self.latency() + self.exchange_seconds(block)

    def reduce_scatter(self, n: float) -> float:
        if self.ranks == 1:
            return 0.0
        m = n / self.ranks
        return self.allgather(m) + 3 * (self.ranks - 1) * m / self.mpe_copy

    def allreduce(self, n: float) -> float:
        return self.reduce_scatter(n) + self.allgather(n / self.ranks)

    def scatter(self, block: float) -> float:
        return self.steps * self.latency() + self.root_seconds(block)

    def bcast(self, n: float) -> float:
        if self.ranks == 1:
            return 0.0
        tree = self.steps * (self.latency() + self.root_seconds(n) / (self.ranks - 1))
        long = 2 * self.steps * self.latency() + self.root_seconds(n / self.ranks) \
            + self.exchange_seconds(n / self.ranks)
        return min(tree, long)


def collective_costs(module: Module, f: Function, target: Target) -> list[CollectiveCost]:
    """The collectives one run of ``f`` makes, in order, with their modeled time;
    none unless the module is for several ranks (-distribute)."""
    return [s for s in host_steps(module, f, target) if isinstance(s, CollectiveCost)]


def host_steps(module: Module, f: Function, target: Target) -> list[str | CollectiveCost]:
    """One run of ``f`` as the host issues it: each kernel's name at its first
    spawn (or call) and, in a module for several ranks, each collective with
    its modeled time where the host makes it (the inputs' first, the gather of
    the outputs last)."""
    ranked = "ranks" in module.attrs
    net = Network.for_target(target, module_ranks(module))
    split = module.attrs.get("split")
    n_out = f.attrs.get("outputs", 0) if module.stage != "graph" else 0
    inputs = f.params[:len(f.params) - n_out]
    outputs = f.params[len(inputs):]
    steps: list[str | CollectiveCost] = []
    for p in inputs if ranked and split != "data" else ():  # a data split's ranks read blocks
        if isinstance(p.type, ShapedType):
            b = p.type.bytes
            steps.append(CollectiveCost(f"bcast input %{p.name}", "bcast", b, net.bcast(b)))
    seen: set[str] = set()
    for inst in _host_instructions(module, f):
        if inst.isa(SPAWN, CALL):
            for app in inst.args:
                name = getattr(app, "callee", None)
                callee = module.lookup(name) if name else None
                if isinstance(callee, Function) and callee.kind == "kernel" and name not in seen:
                    seen.add(name)
                    steps.append(name)
        elif inst.isa(MPI_ALLGATHER):
            steps.append(_allgather(inst, net))
        elif inst.isa(MPI_REDUCE_SCATTER, MPI_ALLREDUCE):
            n = inst.args[0].type.bytes
            scatter = inst.isa(MPI_REDUCE_SCATTER)
            kind = (REDUCE_SCATTER if scatter else ALLREDUCE).name
            seconds = net.reduce_scatter(n) if scatter else net.allreduce(n)
            steps.append(CollectiveCost(f"{kind} @{getattr(inst.args[1], 'name', '?')}", kind,
                                        n // net.ranks, seconds))
    for p in outputs if ranked and split == "data" else ():
        b = p.type.bytes
        steps.append(CollectiveCost(f"gather output %{p.name}", "gather", b, net.scatter(b)))
    return steps


def _allgather(inst: Instruction, net: Network) -> CollectiveCost:
    part = inst.args[0].type
    whole = inst.args[1]
    block = part.bytes
    seconds = net.allgather(block)
    if math.prod(part.shape[:inst.attrs["axis"]]) > 1:    # interleaved by the MPE
        seconds += 2 * block * net.ranks / net.mpe_copy
    return CollectiveCost(f"allgather @{getattr(whole, 'name', '?')}", "allgather", block,
                          seconds)


def _host_instructions(module: Module, f: Function, seen: set[int] | None = None):
    """f's instructions in order, entering the host functions it calls (a call in
    a loop counts once: the model programs call each function once)."""
    seen = seen if seen is not None else set()
    if id(f) in seen or f.body is None:
        return
    seen.add(id(f))
    for inst in f.walk():
        yield inst
        if inst.isa(CALL):
            callee = module.lookup(inst.args[0].callee)
            if isinstance(callee, Function) and callee.target != "cpe" and callee.kind == "func":
                yield from _host_instructions(module, callee, seen)
