#!/usr/bin/env python3
"""Is the generated C the same as before a change? (Refactorings promise it.)

Writes, with the swir-cg beside this Python, the C project of

  - every zoo model (bench/models/zoo.py at the paper's sizes) at each level
    (-O0 and -O3 by default), and
  - every .swir file under test/ (the lit inputs) at swir-cg's default level;
    an input swir-cg refuses gives its message instead, compared as well,

and records a SHA-256 per written file in DIR/manifest.json (the C, headers
and Makefile are kept in DIR as well, for diffs, and compared with the
checkout's root and temporary folders in paths written alike; weight files
only by hash).

    python bench/same_c.py --out /tmp/before            # on the old commit
    python bench/same_c.py --out /tmp/after --compare /tmp/before

With --compare it prints the cases and files that differ and exits 1 if any
do. No compile cache is used (each plan search runs).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import load_zoo

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parent.parent
KEPT = {".c", ".h", ""}   # sources, headers, Makefile


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def swir_cg(args: list[str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "SWIR_CACHE_DIR"}
    return subprocess.run([str(BIN / "swir-cg"), "-q", *args], capture_output=True,
                          text=True, env=env, check=False)


def record(case: str, src: Path, level: list[str], out: Path, work: Path) -> dict:
    """One case: the project's files' hashes, or swir-cg's message."""
    project = work / "project"
    shutil.rmtree(project, ignore_errors=True)
    r = swir_cg([*level, str(src), "-o", str(project)])
    if r.returncode != 0:
        return {"error": r.stderr.replace(str(src), "IN").replace(str(project), "OUT")}
    files = {}
    keep = out / case
    for p in sorted(project.rglob("*")):
        if p.is_file():
            rel = str(p.relative_to(project))
            files[rel] = sha256(p)
            if p.suffix in KEPT:
                (keep / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(p, keep / rel)
    return {"files": files}


def zoo_cases(names: list[str], levels: list[str], work: Path):
    zoo = load_zoo()
    for name in names:
        d = work / name
        d.mkdir(parents=True, exist_ok=True)
        onnx_path, swir_path = d / f"{name}.onnx", d / f"{name}.swir"
        zoo.save(zoo.build(name, **zoo.PAPER_SIZES[name]), onnx_path, external_data=True)
        subprocess.run([str(BIN / "swir-import"), "-q", str(onnx_path), "-o", str(swir_path)],
                       check=True)
        for level in levels:
            yield f"zoo/{name}{level}", swir_path, [level]
        shutil.rmtree(d)


def lit_cases():
    for path in sorted((ROOT / "test").rglob("*.swir")):
        yield f"lit/{path.relative_to(ROOT / 'test')}", path, []


def normalized(text: str | bytes, root: str):
    """Text with the paths that differ between checkouts and runs (the
    checkout's root, temporary folders) written alike."""
    if isinstance(text, str):
        return normalized(text.encode(), root).decode()
    return re.sub(rb"/tmp/tmp\w+", b"TMP", text.replace(root.encode(), b"ROOT"))


def kept_hash(run: Path, case: str, name: str, root: str) -> str:
    return hashlib.sha256(normalized((run / case / name).read_bytes(), root)).hexdigest()


def compare(now: dict, here: Path, before: dict, there: Path) -> list[str]:
    """The cases of ``now`` (a run of some models compares those) whose files
    or message differ from ``before``'s. Sources, headers and Makefiles are
    compared as kept, with their paths normalised; other files by hash."""
    root_now, root_before = now.pop("root"), before.pop("root", "/work/main")
    diffs = []
    for case in sorted(now):
        a, b = before.get(case), now[case]
        if a is None:
            diffs.append(f"{case}: not in the earlier run")
        elif "files" in a and "files" in b:
            changed = []
            for f in sorted(set(a["files"]) | set(b["files"])):
                if f not in a["files"] or f not in b["files"]:
                    changed.append(f)
                elif Path(f).suffix in KEPT:
                    if kept_hash(here, case, f, root_now) != kept_hash(there, case, f, root_before):
                        changed.append(f)
                elif a["files"][f] != b["files"][f]:
                    changed.append(f)
            if changed:
                diffs.append(f"{case}: {', '.join(changed)}")
        elif normalized(a.get("error", ""), root_before) != normalized(b.get("error", ""), root_now):
            diffs.append(f"{case}: {a.get('error', 'a project')!r} -> "
                         f"{b.get('error', 'a project')!r}")
    return diffs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for the manifest and sources")
    ap.add_argument("--compare", type=Path, help="a folder an earlier run wrote")
    ap.add_argument("--levels", default="-O0,-O3", help="zoo levels (default -O0,-O3)")
    ap.add_argument("--models", default="all", help="zoo models, comma-separated, or all / none")
    ap.add_argument("--no-lit", action="store_true", help="skip the lit inputs")
    a = ap.parse_args()
    zoo_names = list(load_zoo().PAPER_SIZES) if a.models == "all" else \
        [] if a.models == "none" else a.models.split(",")
    shutil.rmtree(a.out, ignore_errors=True)
    a.out.mkdir(parents=True)
    manifest = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cases = itertools.chain(() if a.no_lit else lit_cases(),
                                zoo_cases(zoo_names, a.levels.split(","), work))
        for case, src, level in cases:
            manifest[case] = record(case, src, level, a.out, work)
            print(f"{case}: {'error' if 'error' in manifest[case] else 'ok'}", flush=True)
    manifest["root"] = str(ROOT)
    (a.out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
    if a.compare is None:
        return 0
    before = json.loads((a.compare / "manifest.json").read_text())
    diffs = compare(manifest, a.out, before, a.compare)
    for d in diffs:
        print("differs:", d)
    print(f"{len(manifest)} cases, {len(diffs)} differ")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
