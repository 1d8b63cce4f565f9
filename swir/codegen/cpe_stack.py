"""The CPE stack each spawned kernel of a generated project needs, and whether
the LDM reserve covers it (docs/codegen.md, "LDM left for the stack").

On a CPE the stack lives in LDM, beside the kernel's buffers; the plan keeps
`LDM_RESERVE` bytes of the LDM back for it and for the CPE statics outside the
buffers (the Para copy, the reply words). What the stack needs is known to the
compiler: GCC's ``-fcallgraph-info=su`` writes each function's frame and its
calls. This compiles layers_slave.c as the emulation does (-O2, the host's
x86-64: sw5cc's SW64 frames are not public, hence the margin below), adds the
frames along each entry's deepest chain of calls within the file, and reads
the statics' sizes from the object's thread-local symbols. Calls out of the
file (the athread runtime, libm) are listed, not counted: their stack on a
CPE is not public either."""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

# The margin the reserve must leave over what is measured (an assumption,
# not a figure: see docs/codegen.md): the x86-64 frames doubled, for a
# different register file and vector width, plus a fixed allowance for the
# athread runtime's and libm_slave's own frames and LDM data.
STACK_FACTOR = 2
RUNTIME_ALLOWANCE = 1024

_NODE = re.compile(r'node: \{ title: "([^"]+)" label: "[^"]*\\n(\d+) bytes \(([a-z,]+)\)')
_EDGE = re.compile(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"')
# -mno-red-zone: else a leaf on x86-64 uses up to 128 bytes below its stack
# pointer that its reported frame leaves out.
_FLAGS = ["-std=c99", "-O2", "-mno-red-zone", "-DSWIR_EMU", "-Iemu"]


class StackError(Exception):
    """The project could not be compiled or its call graph read."""


@dataclass(frozen=True)
class EntryStack:
    """One CPE function no other calls: its deepest chain's frames."""
    name: str
    bytes: int
    chain: tuple[str, ...]
    outside: frozenset[str]      # callees outside layers_slave.c, not counted


@dataclass(frozen=True)
class StackReport:
    entries: tuple[EntryStack, ...]
    statics: dict[str, int]      # LDM statics besides the buffers' union `ldm`
    reserve: int                 # LDM_RESERVE of the project

    @property
    def worst(self) -> EntryStack:
        return max(self.entries, key=lambda e: e.bytes)

    @property
    def static_bytes(self) -> int:
        return sum(self.statics.values())

    @property
    def required(self) -> int:
        """What the reserve must hold: statics, the stack with its margin."""
        return self.static_bytes + STACK_FACTOR * self.worst.bytes + RUNTIME_ALLOWANCE

    @property
    def covered(self) -> bool:
        return self.required <= self.reserve


def measure(project: Path, cc: str = "cc") -> StackReport:
    """Compile project/layers_slave.c with the call graph and report."""
    project = Path(project)
    reserve = _make_variable(project / "Makefile", "LDM_RESERVE")
    ldm = _make_variable(project / "Makefile", "LDM_BYTES")
    with tempfile.TemporaryDirectory(prefix="swir-stack-") as tmp:
        obj = Path(tmp) / "layers_slave.o"
        r = _run([cc, *_FLAGS, f"-DSWIR_LDM_BYTES={ldm}", f"-DSWIR_LDM_RESERVE={reserve}",
                  "-fcallgraph-info=su", "-c", "layers_slave.c", "-o", str(obj)], cwd=project)
        if r.returncode != 0:
            raise StackError(f"compiling {project / 'layers_slave.c'} failed:\n{r.stderr}")
        graph = (Path(tmp) / "layers_slave.ci").read_text()
        statics = _thread_locals(obj)
    statics.pop("ldm", None)
    entries = entry_stacks(graph)
    if not entries:
        raise StackError(f"{project / 'layers_slave.c'} defines no CPE function")
    return StackReport(entries=entries, statics=statics, reserve=reserve)


def entry_stacks(graph: str) -> tuple[EntryStack, ...]:
    """Each root function of a GCC call graph (VCG text) with its deepest
    chain. A function calling itself, directly or not, is an error: its stack
    has no bound (generated code has no recursion)."""
    frames = {}
    for name, n, kind in _NODE.findall(graph):
        if kind == "dynamic":     # alloca or a VLA: GCC gives no bound
            raise StackError(f"{_bare(name)}'s stack has no bound (alloca or a variable-length array)")
        frames[name] = int(n)     # static, or dynamic but bounded: the bound
    calls: dict[str, list[str]] = {}
    for a, b in _EDGE.findall(graph):
        calls.setdefault(a, []).append(b)
    called = {b for a, bs in calls.items() for b in bs if a in frames}
    memo: dict[str, tuple[int, tuple[str, ...], frozenset[str]]] = {}

    def deepest(f: str, path: tuple[str, ...]):
        if f in path:
            raise StackError(f"recursion through {f}: the stack has no bound")
        if f not in memo:
            inner = [deepest(g, path + (f,)) for g in calls.get(f, []) if g in frames]
            best = max(inner, key=lambda t: t[0], default=(0, (), frozenset()))
            outside = frozenset(g for g in calls.get(f, []) if g not in frames)
            outside = outside.union(*(o for _, _, o in inner))
            memo[f] = (frames[f] + best[0], (f,) + best[1], outside)
        return memo[f]

    for f in frames:          # every function, so a cycle no entry reaches is found too
        deepest(f, ())
    return tuple(EntryStack(_bare(f), memo[f][0], tuple(map(_bare, memo[f][1])), memo[f][2])
                 for f in sorted(frames) if f not in called)


def _bare(name: str) -> str:
    """A function's name without the ``file.c:`` GCC puts before a static's."""
    return name.rpartition(":")[2]


def _run(cmd: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    except FileNotFoundError:
        raise StackError(f"{cmd[0]} is not installed (the measurement needs GCC and "
                         "GNU binutils' readelf)") from None


def _thread_locals(obj: Path) -> dict[str, int]:
    """Name -> size of the object's thread-local (LDM) variables."""
    r = _run(["readelf", "-sW", str(obj)])
    if r.returncode != 0:
        raise StackError(f"readelf -sW {obj} failed:\n{r.stderr}")
    out: dict[str, int] = {}
    for line in r.stdout.splitlines():
        cols = line.split()
        if len(cols) >= 8 and cols[3] == "TLS":
            out[cols[7]] = out.get(cols[7], 0) + int(cols[2], 0)
    return out


def _make_variable(makefile: Path, name: str) -> int:
    m = re.search(rf"^{name} = (\d+)$", makefile.read_text(), re.M)
    if m is None:
        raise StackError(f"{makefile} sets no {name}")
    return int(m.group(1))
