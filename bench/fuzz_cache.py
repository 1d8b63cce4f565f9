"""Fuzz the compile cache (swir/cache.py; issue 41): mutated cache entries
never change what swir-cg writes.

A model is compiled once without a cache (the reference) and once into a
cache directory (filling it). Then each case mutates one to three entries
-- or the directory's secret -- and compiles again with the cache, in this
process, through swir-cg's -O3 pipeline to the dma stage (the C is written
from that module alone, so the same module is the same C). Mutations:

- **damage**: bit flips, truncation, bytes appended or replaced, an empty
  file, 100,000 nested brackets, another entry's file at this name;
- **hostile files**: a FIFO, a directory, a symlink to another entry or to a
  10 GB sparse file outside the cache, a 10 GB sparse entry;
- **forgeries**: the answer changed (random tiles, orders, flags, costs,
  types) and sealed as an attacker can: kept seal, the SHA-256 checksum swir
  used to trust, an HMAC under a secret that is not the user's;
- **the secret**: replaced, made readable by others, a symlink.

Each of these must be a miss (the module is the reference's, byte for
byte), never a failure (another module, an exception, a hang over the
time bound). ``--insiders N`` adds cases whose changed answer is signed with
the user's own secret (swir's own bug, or the user's edit): those must be a
miss or a legal plan whose module computes the reference's result (the
dma-stage interpreter against the graph stage's).

    python bench/fuzz_cache.py --cases 10000 --insiders 1000 --jobs 2
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import hmac
import io
import json
import os
import random
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "examples" / "mlp.swir"
TIME_BOUND = 60.0           # seconds per case (a case takes about 0.2 s)

sys.path.insert(0, str(Path(__file__).parent))
from fuzz import Failure, Hang, time_bound  # noqa: E402


@dataclass
class Tally:
    cases: int = 0
    misses: int = 0                     # the reference's module, no mutated answer used
    legal: int = 0                      # insiders: another plan, the same result
    failures: list[tuple[int, str]] = field(default_factory=list)
    seconds: float = 0.0
    slowest: float = 0.0
    slowest_case: str = ""
    kinds: dict[str, int] = field(default_factory=dict)

    def add(self, other: Tally) -> None:
        self.cases += other.cases
        self.misses += other.misses
        self.legal += other.legal
        self.failures += other.failures
        if other.slowest > self.slowest:
            self.slowest, self.slowest_case = other.slowest, other.slowest_case
        for k, n in other.kinds.items():
            self.kinds[k] = self.kinds.get(k, 0) + n


# -- compiling in process -----------------------------------------------------------------

def compile_module(model: Path, cache_dir: Path | None, folder: Path) -> str:
    """The dma-stage module of swir-cg's -O3 pipeline (one process), as text,
    written in ``folder`` under one name for every case (its weights sidecar
    is named after it)."""
    from swir import cache
    from swir.costmodel import trial
    from swir.passes.buffered import ldm_plan
    from swir.passes.pipelines import pipeline_flags
    from swir.tools import swir_opt
    from swir.tools.driver import run_tool
    ldm_plan._DECISIONS.clear()         # no answer remembered from the last case
    trial._CACHE.clear()
    os.environ.pop(cache.ENV, None)
    cache.use_directory(None)
    folder.mkdir(exist_ok=True)
    out = folder / "module.swir"
    argv = pipeline_flags("graph", "O3") + ["--jobs=1", str(model), "-o", str(out)]
    if cache_dir is not None:
        os.environ[cache.ENV] = str(cache_dir)
    err = io.StringIO()
    began = time.perf_counter()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()), \
                time_bound(TIME_BOUND):
            status = run_tool("swir-opt", swir_opt.main, argv)
    except Hang:
        raise Failure(f"the compile ran longer than {TIME_BOUND:.0f} s") from None
    finally:
        os.environ.pop(cache.ENV, None)
    if time.perf_counter() - began > TIME_BOUND:    # in one system call the alarm cannot cut
        raise Failure(f"the compile ran longer than {TIME_BOUND:.0f} s")
    if status != 0:
        raise Failure(f"the compile exited with status {status}: {err.getvalue()[:300]}")
    return out.read_text()


# -- mutations ------------------------------------------------------------------------------

def _entries(store: Path) -> list[Path]:
    return sorted(p for p in store.rglob("*.json") if p.is_file())


def _seal(entry_key: str, value, how: str, store: Path) -> dict:
    body = entry_key + json.dumps(value, sort_keys=True, separators=(",", ":"))
    if how == "checksum":
        return {"sum": hashlib.sha256(body.encode()).hexdigest()}
    if how == "own":
        secret = bytes.fromhex((store / "key").read_text())
    else:
        secret = random.Random(body).randbytes(32)
    return {"mac": hmac.new(secret, body.encode(), hashlib.sha256).hexdigest()}


def _changed_value(rng: random.Random, value):
    """Another answer of (mostly) the same shape: what a forger would try."""
    if isinstance(value, dict) and "tiles" in value:
        v = dict(value)
        n = len(v["tiles"])
        pick = rng.randrange(7)
        if pick == 0:
            v["tiles"] = [rng.choice([0, 1, 2, 3, 7, 16, 64, 1000, 10 ** 6, -1]) for _ in range(n)]
        elif pick == 1:
            v["order"] = rng.sample(range(n), rng.randint(0, n))
        elif pick == 2:
            v["order"] = [rng.randrange(-1, n + 1) for _ in range(rng.randint(0, n + 1))]
        elif pick == 3:
            v["direct"] = [rng.choice([None, "single element", "x", 3]) for _ in v["direct"]]
        elif pick == 4:
            v["tiles"] = [rng.randint(1, 2 ** rng.randint(0, 10)) for _ in range(n)]
            v["order"] = rng.sample(range(n), rng.randint(0, n))
        elif pick == 5:
            k = rng.choice(list(v))
            v[k] = rng.choice([None, True, "1", 1.5, [], {}, [[1]]])
        else:
            v.pop(rng.choice(list(v)))
        return v
    if isinstance(value, dict) and "cost" in value:
        return {"cost": rng.choice([None, [0, 0, 0], [1, 2, 3], [-1, 0, 0], [2 ** 70, 1, 1],
                                    [1.5, 2, 3], [1, 2], "x", [True, 1, 1]])}
    return {"x": 1}


def _forge(rng: random.Random, path: Path, store: Path, how: str) -> None:
    entry = json.loads(path.read_text())
    value = _changed_value(rng, entry["value"])
    if how == "kept":
        seal = {"mac": entry["mac"]}
    else:
        seal = _seal(entry["key"], value, how, store)
    path.write_text(json.dumps({"key": entry["key"], "value": value, **seal}))


def _damage(rng: random.Random, path: Path, entries: list[Path], outside: Path) -> str:
    data = bytearray(path.read_bytes())
    kind = rng.choice(["flip", "truncate", "append", "replace", "empty", "nest", "other entry",
                       "fifo", "directory", "link to entry", "link outside", "sparse"])
    if kind == "flip":
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(data))
    elif kind == "truncate":
        path.write_bytes(bytes(data[:rng.randrange(len(data))]))
    elif kind == "append":
        path.write_bytes(bytes(data) + rng.randbytes(rng.randint(1, 64)))
    elif kind == "replace":
        path.write_bytes(rng.randbytes(rng.randint(1, 2000)))
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "nest":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "other entry":
        path.write_bytes(rng.choice(_intact(entries, path)).read_bytes())
    else:
        path.unlink()
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "directory":
            path.mkdir()
        elif kind == "link to entry":
            path.symlink_to(rng.choice(_intact(entries, path)))
        elif kind == "link outside":
            path.symlink_to(outside)
        else:
            with open(path, "wb") as f:
                f.truncate(10 << 30)
    return kind


def _intact(entries: list[Path], path: Path) -> list[Path]:
    """The other entries still small regular files (this case may have made
    one a FIFO, a folder or a 10 GB sparse file already); the entry itself if
    none is."""
    return [e for e in entries if e != path and e.is_file() and not e.is_symlink()
            and e.stat().st_size < 1 << 20] or [path]


def _mutate_secret(rng: random.Random, store: Path, outside: Path) -> str:
    key = store / "key"
    kind = rng.choice(["new secret", "readable by others", "link", "garbage"])
    if kind == "new secret":
        key.unlink()
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, os.urandom(32).hex().encode())
        os.close(fd)
    elif kind == "readable by others":
        key.chmod(0o644)
    elif kind == "link":
        key.unlink()
        key.symlink_to(outside)
    else:
        key.write_bytes(rng.randbytes(64))
    return "secret: " + kind


# -- one worker's share of the cases ---------------------------------------------------------

def _restore(store: Path, pristine: Path) -> None:
    shutil.rmtree(store)
    shutil.copytree(pristine, store, symlinks=True)


def run_cases(model: Path, cases: range, insiders: range, seed: int) -> Tally:
    work = Path(tempfile.mkdtemp(prefix="swir-fuzz-cache-"))
    try:
        return _run_cases(work, model, [(i, False) for i in cases] +
                          [(i, True) for i in insiders], seed)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run_cases(work: Path, model: Path, cases: list[tuple[int, bool]], seed: int) -> Tally:
    reference = compile_module(model, None, work / "reference")
    pristine, store = work / "pristine", work / "store"
    pristine.mkdir(mode=0o700)
    if compile_module(model, pristine, work / "fill") != reference:
        raise SystemExit("a cold cache changed the module: fix that first")
    outside = work / "outside.json"
    outside.write_bytes(_entries(pristine)[0].read_bytes())
    shutil.copytree(pristine, store, symlinks=True)
    tally = Tally()
    for i, insider in cases:
        rng = random.Random(f"{seed}/{'insider' if insider else 'case'}/{i}")
        kinds = _mutate(rng, store, outside, insider)
        began = time.perf_counter()
        for k in kinds:
            tally.kinds[k] = tally.kinds.get(k, 0) + 1
        compiled = began
        try:
            got = compile_module(model, store, work / "case")
            compiled = time.perf_counter()
            if got == reference:
                tally.misses += 1
            elif insider:
                _check_result(model, work / "case" / "module.swir")
                tally.legal += 1
            else:
                raise Failure(f"{', '.join(kinds)}: the module differs from the reference")
        except Failure as f:
            tally.failures.append((i, str(f).split("\n")[0][:300]))
        tally.cases += 1
        took = time.perf_counter() - began
        if took > tally.slowest:
            tally.slowest = took
            tally.slowest_case = f"case {i}{' (insider)' if insider else ''}: " + \
                ", ".join(kinds) + f"; compiled in {compiled - began:.2f} s"
        if tally.cases % 500 == 0:
            print(f"  {tally.cases}/{len(cases)} cases, {len(tally.failures)} failures",
                  file=sys.stderr, flush=True)
        _restore(store, pristine)
        if outside.read_bytes() != _entries(pristine)[0].read_bytes():
            tally.failures.append((i, "a file outside the cache was written"))
            outside.write_bytes(_entries(pristine)[0].read_bytes())
    return tally


def _mutate(rng: random.Random, store: Path, outside: Path, insider: bool) -> list[str]:
    """Mutate the cache for one case; what was done."""
    entries = _entries(store)
    if not insider and rng.random() < 0.05:
        return [_mutate_secret(rng, store, outside)]
    kinds = []
    for path in rng.sample(entries, rng.randint(1, min(3, len(entries)))):
        if insider:
            _forge(rng, path, store, "own")
            kinds.append("insider")
        elif rng.random() < 0.5:
            kinds.append(_damage(rng, path, entries, outside))
        else:
            how = rng.choice(["kept", "checksum", "foreign"])
            _forge(rng, path, store, how)
            kinds.append(f"forged, {how} seal")
    return kinds


def _check_result(model: Path, planned: Path) -> None:
    """An insider's legal plan: the dma-stage module computes the graph's result."""
    import numpy as np

    from swir.interp.run import run_function
    from swir.parser import parse_module
    g = parse_module(model.read_text(), str(model))
    d = parse_module(planned.read_text(), str(planned))
    rng = np.random.default_rng(0)
    f = g.lookup("main")
    x = [rng.standard_normal(p.type.shape).astype(np.float32) for p in f.params]
    want = run_function(g, f, x, base_dir=model.parent)
    got = run_function(d, d.lookup("main"), x, base_dir=planned.parent)
    for w, o in zip(want, got):
        if not np.allclose(o.reshape(w.shape), w, rtol=1e-4, atol=1e-5):
            raise Failure("an insider's legal plan computes another result")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=1000, metavar="N",
                    help="cases of damaged, hostile and forged entries and secrets (default 1000)")
    ap.add_argument("--insiders", type=int, default=0, metavar="N",
                    help="cases of answers changed and signed with the user's own secret")
    ap.add_argument("--model", type=Path, default=MODEL,
                    help=f"the graph-stage module compiled (default {MODEL.relative_to(ROOT)})")
    ap.add_argument("--seed", type=int, default=1, help="the cases' seed (default 1)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="processes sharing the cases (default: one per core)")
    a = ap.parse_args(argv)
    start = time.perf_counter()
    jobs = max(1, a.jobs)

    def share(n: int, k: int) -> range:
        return range(n * k // jobs, n * (k + 1) // jobs)
    total = Tally()
    with ProcessPoolExecutor(jobs) as pool:
        futures = [pool.submit(run_cases, a.model, share(a.cases, k), share(a.insiders, k),
                               a.seed) for k in range(jobs)]
        for fut in futures:
            total.add(fut.result())
    total.seconds = time.perf_counter() - start
    print("| cases | misses (reference module) | insiders' legal plans, same result | failures "
          "| seconds | slowest case (s) |")
    print("|---|---|---|---|---|---|")
    print(f"| {total.cases:,} | {total.misses:,} | {total.legal:,} | {len(total.failures)} | "
          f"{total.seconds:.0f} | {total.slowest:.2f} |")
    print("\nmutations: " + ", ".join(f"{k} {n:,}" for k, n in sorted(total.kinds.items())))
    print(f"slowest: {total.slowest_case}")
    for i, what in total.failures[:20]:
        print(f"case {i}: {what}")
    return 1 if total.failures else 0


if __name__ == "__main__":
    sys.exit(main())
