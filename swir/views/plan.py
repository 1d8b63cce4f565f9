"""What a lowered kernel's plan is, read from a dma-stage ``cpe kernel``
(what -insert-dma writes from -ldm-plan's plan): the LDM buffers against the
LDM's capacity, the loop nest one CPE runs, how the parallel loop's
iterations are shared over the CPEs (``chunk``), and every transfer (DMA get,
put, broadcast, register-bus send) with how often it runs. -view-plan prints
it as text (:func:`plan_text`) or draws it (swir.views.plan_svg).

The counts are exact for each CPE: the kernel's index code (``cpe_id``,
``chunk``, loop bounds, ``if`` guards) is evaluated for each of the CPEs, as
the dma-stage interpreter would, iterating only the loops that hold a
transfer. A kernel whose counts depend on data, or would take more than
``WALK_LIMIT`` loop iterations to count, shows them as unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from swir.ir.affine import Expr, format_expr
from swir.ir.core import Access, Constraint, Function, Instruction, Module, Value
from swir.ir.types import LDMType, ShapedType, ldm_slot
from swir.ops.util import attr_or_default

TRANSFERS = ("dma_get", "dma_put", "dma_bcast", "reg_send")
KIND = {"dma_get": "DMA get", "dma_put": "DMA put", "dma_bcast": "DMA broadcast",
        "reg_send": "register send"}
DIRECTION = {"dma_get": "main -> LDM", "dma_put": "LDM -> main",
             "dma_bcast": "main -> every LDM", "reg_send": "LDM -> LDM (bus)"}
WALK_LIMIT = 2_000_000      # loop iterations counted over all CPEs at most
VECTOR = 4                  # elements of one register-bus message


@dataclass
class Buffer:
    name: str                  # the LDM buffer (its first copy when double-buffered)
    type: LDMType
    copies: int                # 2 when -insert-dma double-buffered it
    holds: str = ""            # the main-memory tensor its DMAs move, if any

    @property
    def bytes(self) -> int:
        return ldm_slot(self.type.bytes) * self.copies


@dataclass
class Transfer:
    op: str                     # dma_get, dma_put, dma_bcast, reg_send
    tensor: str                 # main-memory tensor (DMA) or LDM buffer (register bus)
    elements: int               # per transfer
    element_bytes: int
    strided: str = ""           # "blocks of B, skipping S" for a strided DMA
    busiest: int | None = 0     # transfers on the CPE that issues most (None: unknown)
    total: int | None = 0       # transfers on all CPEs

    @property
    def bytes(self) -> int:
        return self.elements * self.element_bytes


@dataclass
class Split:
    loop: str                   # the loop variable the CPEs share
    extent: int
    workers: int
    grain: int
    shares: list[tuple[int, int]]   # CPE k takes iterations [lo, hi)
    writes: list[str] = field(default_factory=list)   # what one iteration writes


@dataclass
class KernelPlan:
    module: str
    kernel: str
    ldm_size: int
    cpes: int
    buffers: list[Buffer]
    nest: list[tuple[int, str, bool]]   # (depth, text, is the split loop)
    split: Split | None
    transfers: list[Transfer]
    unknown: str = ""           # why the counts are unknown, if they are

    @property
    def ldm_used(self) -> int:
        return sum(b.bytes for b in self.buffers)


def name_of(v: object) -> str:
    return f"%{getattr(v, 'name', None) or '?'}"


def expr_text(e: object) -> str:
    return format_expr(Expr.of(e), name_of)


def access_text(a: Access) -> str:
    parts = []
    for ix in a.indices:
        lo, hi = (ix.lo, ix.hi) if hasattr(ix, "lo") else (ix, None)
        parts.append(expr_text(lo) + (f" : {expr_text(hi)}" if hi is not None else ""))
    return f"{name_of(a.base)}[{', '.join(parts)}]"


def accesses(inst: Instruction) -> list[Access]:
    return [a for a in inst.args if isinstance(a, Access)]


def kernel_plan(module: Module, kernel: Function, cpes: int) -> KernelPlan:
    """The plan of one dma-stage cpe kernel, run on ``cpes`` CPEs."""
    body = list(kernel.walk())
    split = _split(body, cpes)
    buffers = _buffers(body)
    transfers, unknown = _transfers(kernel, body, cpes)
    return KernelPlan(module.name, kernel.name, int(module.attr("ldm_size")), cpes, buffers,
                      _nest(kernel, split), split, transfers, unknown)


def _buffers(body: list[Instruction]) -> list[Buffer]:
    allocs = [i for i in body if i.opname == "ldm_alloc"]
    names = {i.results[0].name for i in allocs}
    out: dict[str, Buffer] = {}
    for i in allocs:
        r = i.results[0]
        # -insert-dma names a double buffer's second half NAME_next (double_buffer.py)
        if r.name and r.name.endswith("_next") and r.name[:-5] in names:
            continue
        copies = 2 if f"{r.name}_next" in names else 1
        out[r.name or "?"] = Buffer(name_of(r), r.type, copies)
    for i in body:
        if i.opname in ("dma_get", "dma_put", "dma_bcast"):
            main, ldm = _sides(i)
            b = out.get(getattr(ldm, "name", "") or "")
            if b is None and ldm is not None and (ldm.name or "").endswith("_next"):
                b = out.get(ldm.name[:-5])
            if b is not None and main is not None:
                b.holds = name_of(main)
    return list(out.values())


def _sides(inst: Instruction) -> tuple[Value | None, Value | None]:
    """(main-memory tensor, LDM buffer) of a DMA."""
    vals = [a.base if isinstance(a, Access) else a for a in inst.args]
    vals = [v for v in vals if isinstance(v, Value)]
    main = next((v for v in vals if not isinstance(v.type, LDMType)), None)
    ldm = next((v for v in vals if isinstance(v.type, LDMType)), None)
    return main, ldm


def _split(body: list[Instruction], cpes: int) -> Split | None:
    ids = {i.results[0] for i in body if i.opname == "cpe_id"}
    # The work split is the chunk of the CPE id itself (a register relay's
    # chunks share a tile's vectors by other indices).
    chunk = next((i for i in body if i.opname == "chunk"
                  and Expr.of(i.args[0]).as_value() in ids), None)
    if chunk is None:
        return None
    extent, workers = chunk.attrs["extent"], chunk.attrs["workers"]
    grain = attr_or_default(chunk, "grain")
    lo = chunk.results[0]
    loop = next((i for i in body if i.opname == "for"
                 and Expr.of(i.args[0]).as_value() is lo), None)
    name = name_of(loop.regions[0].blocks[0].args[0]) if loop is not None else "?"
    shares = [chunk_share(k, extent, workers, grain) if k < workers else (0, 0)
              for k in range(cpes)]
    writes: dict[str, str] = {}     # tensor -> its first put (double buffering copies it)
    if loop is not None:
        for i in loop.walk():
            a = accesses(i)
            if i.opname == "dma_put" and a:
                writes.setdefault(name_of(a[-1].base),
                                  f"{access_text(a[-1])} ({elements(i.attrs['count'])})")
    return Split(name, extent, workers, grain, shares, list(writes.values()))


def elements(n: int) -> str:
    return f"{n:,} element" + "s" * (n != 1)


def chunk_share(k: int, extent: int, workers: int, grain: int) -> tuple[int, int]:
    """Worker k's [lo, hi) of a ``chunk`` (swir.ops.loop.chunk_code's rule)."""
    units = -(-extent // grain)
    q, m = divmod(units, workers)
    lo = k * q + min(k, m)
    hi = lo + q + (1 if k < m else 0)
    return min(lo * grain, extent), min(hi * grain, extent)


def _nest(kernel: Function, split: Split | None) -> list[tuple[int, str, bool]]:
    """The loops, guards and transfers of the kernel, one line each; runs of
    other instructions collapse into one ``compute`` line."""
    lines: list[tuple[int, str, bool]] = []

    def block(insts: list[Instruction], depth: int) -> None:
        run = 0
        for i in insts:
            line = _nest_line(i, split)
            if line is None:
                run += _ops(i)
                continue
            if run:
                lines.append((depth, f"compute ({run} op{'s' * (run > 1)})", False))
                run = 0
            lines.append((depth, line[0], line[1]))
            for k, region in enumerate(i.regions):
                if k == 1:
                    lines.append((depth, "else", False))
                for b in region.blocks:
                    block(list(b.instructions), depth + 1)
        if run:
            lines.append((depth, f"compute ({run} op{'s' * (run > 1)})", False))

    assert kernel.body is not None
    for b in kernel.body.blocks:
        block(list(b.instructions), 0)
    return lines


_QUIET = ("ldm_alloc", "cpe_id", "chunk", "dma_wait", "const", "return")


def _ops(i: Instruction) -> int:
    """The instructions ``i`` stands for in a ``compute`` line: itself, or
    for a guard or loop the ones inside it (a guarded wait is none)."""
    if i.regions:
        return sum(_ops(x) for r in i.regions for b in r.blocks for x in b.instructions)
    return 0 if i.opname in _QUIET else 1


def _nest_line(i: Instruction, split: Split | None) -> tuple[str, bool] | None:
    if i.opname == "for":
        iv = i.regions[0].blocks[0].args[0]
        step = attr_or_default(i, "step")
        text = f"for {name_of(iv)} = {expr_text(i.args[0])} to {expr_text(i.args[1])}" + \
            (f" step {step}" if step != 1 else "")
        return text, split is not None and name_of(iv) == split.loop
    if i.opname == "if":
        if not any(x.opname in TRANSFERS or x.opname == "for"
                   for r in i.regions for x in r.walk()):
            return None
        conds = [c for c in i.args if isinstance(c, Constraint)]
        return "if " + ", ".join(f"{expr_text(c.lhs)} {c.rel} {expr_text(c.rhs)}"
                                 for c in conds), False
    if i.opname in TRANSFERS or i.opname == "reg_recv":
        a = accesses(i)
        where = " -> ".join(access_text(x) if x.is_region or x.indices else name_of(x.base)
                            for x in a)
        return f"{i.opname} {where} ({elements(i.attrs.get('count', VECTOR))})", False
    if i.regions:
        return i.opname, False
    return None


class _Unknown(Exception):
    pass


def _transfers(kernel: Function, body: list[Instruction], cpes: int
               ) -> tuple[list[Transfer], str]:
    """One row per kind of transfer (the copies double buffering makes of one
    DMA are one row), with its runs counted per CPE."""
    counts, unknown = _count_all(kernel, cpes)
    rows: dict[tuple, Transfer] = {}
    runs: dict[tuple, list[int]] = {}
    for i in body:
        if i.opname not in TRANSFERS:
            continue
        t = _transfer_row(i)
        key = (t.op, t.tensor, t.elements, t.strided)
        rows.setdefault(key, t)
        mine = [c.get(id(i), 0) for c in counts] if counts is not None else [0] * cpes
        runs[key] = [a + b for a, b in zip(runs.get(key, [0] * cpes), mine)]
    for key, row in rows.items():
        if counts is None:
            row.busiest = row.total = None
        elif row.op == "dma_bcast":   # every CPE takes part in one broadcast: one read
            row.busiest = row.total = max(runs[key])
        else:
            row.busiest, row.total = max(runs[key]), sum(runs[key])
    return list(rows.values()), unknown


def _transfer_row(i: Instruction) -> Transfer:
    main, ldm = _sides(i)
    if i.opname == "reg_send":
        a = accesses(i)
        buf = a[0].base if a else ldm
        return Transfer(i.opname, name_of(buf), VECTOR, buf.type.element.bytes,
                        f"along the {i.attrs.get('bus', '?')} bus")
    assert ldm is not None and isinstance(ldm.type, ShapedType)
    strided = ""
    if "bsize" in i.attrs:
        strided = f"blocks of {i.attrs['bsize']}, skipping {i.attrs.get('stride', 0)}"
    return Transfer(i.opname, name_of(main), int(i.attrs["count"]), ldm.type.element.bytes,
                    strided)


def _count_all(kernel: Function, cpes: int) -> tuple[list[dict[int, int]] | None, str]:
    """How often each transfer runs on each CPE (None, with why, if not static)."""
    budget = [WALK_LIMIT]
    out = []
    try:
        for cpe in range(cpes):
            counts: dict[int, int] = {}
            assert kernel.body is not None
            for b in kernel.body.blocks:
                _run(list(b.instructions), {}, cpe, counts, budget)
            out.append(counts)
    except _Unknown as e:
        return None, str(e)
    return out, ""


def _holds_transfer(i: Instruction) -> bool:
    return any(x.opname in TRANSFERS for r in i.regions for x in r.walk())


def _run(insts: list[Instruction], env: dict, cpe: int, counts: dict[int, int],
         budget: list[int]) -> None:
    for i in insts:
        op = i.opname
        if op in TRANSFERS:
            counts[id(i)] = counts.get(id(i), 0) + 1
        elif op == "cpe_id":
            env[i.results[0]] = cpe
        elif op == "chunk":
            k = _eval(i.args[0], env)
            share = chunk_share(k, i.attrs["extent"], i.attrs["workers"],
                                attr_or_default(i, "grain")) if 0 <= k < i.attrs["workers"] \
                else (0, 0)
            env[i.results[0]], env[i.results[1]] = share
        elif op == "const" and i.results and isinstance(i.attrs.get("value"), int):
            env[i.results[0]] = i.attrs["value"]
        elif op == "for" and _holds_transfer(i):
            _loop(i, env, cpe, counts, budget)
        elif op == "if" and _holds_transfer(i):
            conds = [c for c in i.args if isinstance(c, Constraint)]
            try:
                taken = all(c.holds(env) for c in conds)
            except (KeyError, TypeError, ValueError):
                raise _Unknown(f"a guard reads a value known only when the kernel runs: "
                               f"if {', '.join(str(c) for c in conds)}") from None
            branch = 0 if taken else 1
            if branch < len(i.regions):
                for b in i.regions[branch].blocks:
                    _run(list(b.instructions), env, cpe, counts, budget)


def _loop(i: Instruction, env: dict, cpe: int, counts: dict[int, int],
          budget: list[int]) -> None:
    lo, hi = _eval(i.args[0], env), _eval(i.args[1], env)
    step = attr_or_default(i, "step")
    iv = i.regions[0].blocks[0].args[0]
    body = list(i.regions[0].blocks[0].instructions)
    for t in range(lo, hi, step):
        budget[0] -= 1
        if budget[0] < 0:
            raise _Unknown(f"counting the transfers takes more than {WALK_LIMIT:,} "
                           "loop iterations")
        env[iv] = t
        _run(body, env, cpe, counts, budget)


def _eval(e: object, env: dict) -> int:
    try:
        return Expr.of(e).evaluate(env)
    except (KeyError, TypeError, ValueError):
        raise _Unknown(f"an index ({expr_text(e)}) is known only when the kernel "
                       "runs") from None


def plan_text(plan: KernelPlan) -> str:
    """The plan as text: what -view-plan prints (FileCheck pins it)."""
    used, size = plan.ldm_used, plan.ldm_size
    out = [f"plan of cpe kernel @{plan.kernel} (module {plan.module})",
           f"  LDM per CPE: {used:,} of {size:,} bytes ({100 * used / size:.1f}%)"]
    for b in plan.buffers:
        buffered = "double-buffered, 2 x " if b.copies == 2 else ""
        holds = f" holds {b.holds}" if b.holds else ""
        out.append(f"    {b.name}: {b.type} {buffered}{b.bytes // b.copies:,} bytes{holds}")
    out.append("  loop nest (each CPE):")
    for depth, text, split in plan.nest:
        mark = "    <- split over the CPEs" if split else ""
        out.append("    " + "  " * depth + text + mark)
    out += _split_text(plan)
    out.append("  transfers (per transfer; runs on the busiest CPE, on all CPEs):")
    for t in plan.transfers:
        runs = "unknown" if t.total is None else f"x {t.busiest:,} on the busiest CPE, " \
                                                  f"{t.total:,} in all"
        shape = f", {t.strided}" if t.strided else ""
        out.append(f"    {KIND[t.op]} {t.tensor} {DIRECTION[t.op]}: {elements(t.elements)} "
                   f"({t.bytes:,} bytes{shape}) {runs}")
    if plan.unknown:
        out.append(f"  (counts unknown: {plan.unknown})")
    return "\n".join(out) + "\n"


def _split_text(plan: KernelPlan) -> list[str]:
    s = plan.split
    if s is None:
        return ["  CPEs: no parallel loop: every CPE runs the whole nest"]
    busy = [k for k, (lo, hi) in enumerate(s.shares) if hi > lo]
    out = [f"  CPEs: {s.loop} has {s.extent} iterations over {s.workers} workers"
           + (f" in units of {s.grain}" if s.grain > 1 else "")
           + f"; {len(busy)} of {plan.cpes} CPEs busy"]
    groups: list[tuple[int, int, int]] = []     # (first CPE, last CPE, iterations each)
    for k, (lo, hi) in enumerate(s.shares):
        n = hi - lo
        if groups and groups[-1][2] == n and groups[-1][1] == k - 1:
            groups[-1] = (groups[-1][0], k, n)
        else:
            groups.append((k, k, n))
    for first, last, n in groups:
        who = f"CPE {first}" if first == last else f"CPEs {first}-{last}"
        if n == 0:
            out.append(f"    {who}: idle")
        else:
            lo, hi = s.shares[first][0], s.shares[last][1]
            each = " each" if last > first else ""
            out.append(f"    {who}: {n} iteration{'s' * (n > 1)}{each} "
                       f"({s.loop} = {lo} .. {hi - 1})")
    for w in s.writes:
        out.append(f"    one iteration writes {w}")
    return out


def cpe_kernels(module: Module) -> list[Function]:
    return [f for f in module.functions if f.kind == "kernel" and f.target == "cpe"
            and f.body is not None]
