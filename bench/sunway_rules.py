#!/usr/bin/env python3
"""The Sunway rules of docs/codegen.md ("On a real Sunway machine"), counted
on the zoo at reduced size (bench/models/zoo.py REDUCED): each model goes
ONNX -> swir-import -> swir-cg -O3 -> make emu -> one run with --stats, and
the table gives, per model:

  LDM buffers   members of the kernels' LDM structs, and how many start at an
                offset that is not a multiple of 32 bytes (compiled and
                measured with offsetof by the host C compiler)
  blocks        contiguous main-memory blocks the DMAs moved, and the share
                of them whose length is a multiple of 32 bytes (blocks_32)
  misaligned    transfers whose main-memory start, or LDM start, is not
                32-byte aligned (mem_misaligned, ldm_misaligned)
  spawns        athread_spawn calls per inference, and the barriers
                (athread_syn) between the kernels of one spawn
  one-CPE       parallel loops -insert-dma left to one CPE so that no two
                CPEs write one 32-byte block

With --before REV, the same for the projects swir at git revision REV
generates, built against this checkout's emulation runtime (for its
counters) with its join-time check of shared 32-byte blocks taken out: code
from before the rule breaks it, and the figures are what it moved.

    python bench/sunway_rules.py                    # all eight
    python bench/sunway_rules.py --before 3bb505d resnet18 bert
    python bench/sunway_rules.py --before 3bb505d --before 008cedb
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path

import numpy as np

from swir.codegen.project import TARGET_HEADER
from swir.target import SW26010

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT / "bench" / "models"))
import zoo  # noqa: E402

from swir.codegen.project import RUNTIME_FILES as RUNTIME  # noqa: E402  (the emulation's files)


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed:\n{r.stdout}{r.stderr}")
    return r


def ldm_members(project: Path) -> tuple[int, int]:
    """(arrays, misaligned): every array of every kernel's LDM struct and how
    many start at an offset that is not a multiple of 32 bytes."""
    slave = (project / "layers_slave.c").read_text()
    first = re.search(r"^struct \w+_ldm \{", slave, re.M)
    union = slave.find("static __thread_local union")
    if first is None or union < 0:
        return 0, 0
    start = first.start()
    structs = slave[start:union]
    kernels = re.findall(r"struct (\w+)_ldm \{", structs)
    arrays = sum(len(_array_paths(structs, k)) for k in kernels)
    return arrays, _misaligned(project, structs, kernels)


def _misaligned(project: Path, structs: str, names: list[str]) -> int:
    """Compile the LDM structs and print each array's offset inside its
    kernel's struct: how many are not 32-byte aligned (nested unions
    included: every array's address is taken through the struct)."""
    lines = ["#include <stdio.h>", "#include <stddef.h>", '#include "layers_mix.h"',
             "#define __thread_local", structs, "int main(void) {", "    long bad = 0;"]
    for k in names:
        lines.append(f"    {{ static struct {k}_ldm s; const char *b = (const char *)&s;")
        for path in _array_paths(structs, k):
            lines.append(f"      bad += ((const char *)&s.{path} - b) % 32 != 0;")
        lines.append("    }")
    lines += ['    printf("%ld\\n", bad);', "    return 0;", "}"]
    src = project / "ldm_offsets.c"
    src.write_text("\n".join(lines) + "\n")
    exe = project / "ldm_offsets"
    run(["cc", "-std=gnu99", "-I", str(project), "-I", str(project / "emu"), "-DSWIR_EMU",
         str(src), "-o", str(exe), "-lm"])
    return int(run([str(exe)]).stdout)


def _array_paths(structs: str, kernel: str) -> list[str]:
    """Member paths (`Y_ldm`, `nested.r1.P_ldm`) of kernel's LDM struct."""
    body = structs[structs.index(f"struct {kernel}_ldm {{"):]
    stack: list[str] = []
    pending: list[list[str]] = [[]]
    for raw in body.splitlines()[1:]:
        line = raw.strip()
        if line in ("union {", "struct {"):
            stack.append(line)
            pending.append([])
            continue
        if line.startswith("}"):
            if not stack:
                break
            stack.pop()
            inner = pending.pop()
            name = re.match(r"\}\s*(\w+);", line)
            prefix = name.group(1) + "." if name else ""
            pending[-1] += [prefix + p for p in inner]
            continue
        m = re.match(r"[\w ]+?\s(\w+)(\[\d+\])+", line)
        if m:
            pending[-1].append(m.group(1))
    return pending[0]


def measure(name: str, work: Path, swir_cg: list[str], runtime: Path | None) -> dict:
    kwargs, external = zoo.REDUCED[name]
    d = work / name
    d.mkdir(parents=True)
    model = zoo.build(name, **kwargs)
    onnx_path = d / f"{name}.onnx"
    zoo.save(model, onnx_path, external_data=external)
    swir_path = d / f"{name}.swir"
    run([str(BIN / "swir-import"), str(onnx_path), "-o", str(swir_path)])
    project = d / "project"
    cg = run(swir_cg + ["-O3", str(swir_path), "-o", str(project), "--stats", "-q"])
    one_cpe: int | None = sum(int(n) for n in re.findall(
        r"parallel loops left to one CPE[^:]*: (\d+)", cg.stderr + cg.stdout))
    if runtime is not None:              # older swir has no such statistic
        one_cpe = None
    if runtime is not None:              # an older project: this runtime's counters
        for f in RUNTIME:
            shutil.copy(runtime / f, project / "emu" / f)
        (project / "emu" / TARGET_HEADER).write_text(SW26010.c_defines())
        c = project / "emu" / "swir_emu.c"
        text = c.read_text()
        patched = text.replace("    check_written();\n", "    (void)check_written;\n")
        if patched == text:
            raise SystemExit("the runtime's join no longer calls check_written(); update the bench")
        c.write_text(patched)
    run(["make", "-s", "-C", str(project), "emu"])
    program = next(project.glob("*_emu"))
    inputs = zoo.random_inputs(model, seed=1)
    args = []
    for i, a in enumerate(inputs.values()):
        path = d / f"in{i}.npy"
        np.save(path, a)
        args += ["--input", str(path)]
    stats = d / "stats.json"
    run([str(program), *args, "--stats", str(stats)], cwd=d)
    total = json.loads(stats.read_text())["total"]
    members, bad = ldm_members(project)
    return {"model": name, "ldm": members, "ldm_bad": bad, "blocks": total["blocks"],
            "blocks_32": total["blocks_32"], "mem_mis": total["mem_misaligned"],
            "ldm_mis": total["ldm_misaligned"], "transfers": total["gets"] + total["puts"],
            "spawns": total["spawns"], "barriers": total.get("barriers", 0),
            "one_cpe": one_cpe}


def table(rows: list[dict], title: str) -> str:
    out = [f"**{title}**", "",
           "| model | LDM buffers (not 32-aligned) | DMA blocks | multiple of 32 B | "
           "transfers | main memory not 32-aligned | LDM not 32-aligned | spawns (barriers) | "
           "loops on one CPE |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        share = 100.0 * r["blocks_32"] / r["blocks"] if r["blocks"] else 0.0
        out.append(f"| {r['model']} | {r['ldm']} ({r['ldm_bad']}) | {r['blocks']:,} | "
                   f"{share:.1f}% | {r['transfers']:,} | {r['mem_mis']:,} | {r['ldm_mis']:,} | "
                   f"{r['spawns']} ({r['barriers']}) | "
                   f"{'—' if r['one_cpe'] is None else r['one_cpe']} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="*", default=list(zoo.REDUCED))
    p.add_argument("--before", metavar="REV", action="append", default=[],
                   help="also measure swir at git revision REV (repeatable)")
    p.add_argument("--work", type=Path, help="keep the files here (default: a temporary folder)")
    a = p.parse_args(argv)
    work = a.work or Path(tempfile.mkdtemp(prefix="swir-rules-"))
    runtime = Path(str(resources.files("swir.codegen") / "runtime"))
    rows = [measure(m, work / "now", [str(BIN / "swir-cg")], None) for m in a.models]
    print(table(rows, "This checkout"))
    for rev in a.before:
        old = work / f"src-{rev}"
        run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old), rev])
        try:
            cg = [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv.pop(1)); "
                  "from swir.tools.swir_cg import entry; entry()", str(old)]
            before = [measure(m, work / rev, cg, runtime) for m in a.models]
        finally:
            run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)])
        print()
        print(table(before, f"At {rev}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
