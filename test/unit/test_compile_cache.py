"""Compile time without changing the output (issue 25): swir-cg's C is the
same byte for byte whatever the number of planning processes (-j), with or
without the compile cache, cold or warm, and when the cache's files are
damaged or forged (a damaged entry is a miss, a forged plan that is not a
plan of its nest is refused and searched again)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from swir import cache

MLP = Path(__file__).parents[2] / "examples" / "mlp.swir"


def swir_cg(tmp_path: Path, out: str, *args: str) -> tuple[dict[str, bytes], str]:
    """The project swir-cg writes for the MLP at -O3 (its files by name) and
    its --stats; the compile cache only where ``args`` give one."""
    env = {k: v for k, v in os.environ.items() if k != cache.ENV}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    r = subprocess.run([str(Path(sys.executable).parent / "swir-cg"), str(MLP), "-o",
                        str(tmp_path / out), "-q", "--stats", *args],
                       capture_output=True, text=True, env=env, check=False, timeout=300)
    assert r.returncode == 0, r.stderr
    root = tmp_path / out
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}, r.stderr


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, bytes]:
    """The C of one process and no cache."""
    return swir_cg(tmp_path_factory.mktemp("ref"), "ref", "-j", "1")[0]


def test_any_number_of_processes_writes_the_same_c(tmp_path, reference):
    two, stats = swir_cg(tmp_path, "j2", "-j2")
    assert two == reference
    assert "nests where search beat greedy" in stats     # the search ran, in the workers


def test_cold_and_warm_cache_write_the_same_c(tmp_path, reference):
    store = tmp_path / "cache"
    cold, stats = swir_cg(tmp_path, "cold", "--cache-dir", str(store))
    assert cold == reference and "read from the compile cache" not in stats
    entries = sorted(store.rglob("*.json"))
    kinds = {p.parent.parent.name for p in entries}
    assert kinds == {"ldm-search", "trial"}
    warm, stats = swir_cg(tmp_path, "warm", "--cache-dir", str(store))
    assert warm == reference
    # every nest's search came from the cache (the MLP's 6 nests)
    assert "nest searches read from the compile cache: 6" in stats
    assert sorted(store.rglob("*.json")) == entries


def _forge(path: Path, value) -> None:
    """Rewrite an entry with ``value`` and a valid checksum, as swir would."""
    entry = json.loads(path.read_text())
    _, kind, key = json.loads(entry["key"])
    cache.Cache(path.parents[2]).put(kind, key, value)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "edited", "forged", "deleted"])
def test_a_damaged_cache_changes_nothing(tmp_path, reference, damage):
    store = tmp_path / "cache"
    swir_cg(tmp_path, "fill", "--cache-dir", str(store))
    for k, p in enumerate(sorted(store.rglob("*.json"))):
        kind = p.parent.parent.name
        if damage == "garbage":
            p.write_bytes(os.urandom(64) + b"\xff")
        elif damage == "truncated":
            p.write_text(p.read_text()[: len(p.read_text()) // 2])
        elif damage == "edited":      # a changed answer under the old checksum
            p.write_text(p.read_text().replace('"chose": true', '"chose": false')
                         .replace("[1, ", "[2, "))
        elif damage == "forged":      # a well-formed entry whose answer is no plan
            _forge(p, {"tiles": [10 ** 6] * 7, "order": [0, 0], "direct": [],
                       "chose": True} if kind == "ldm-search" else {"cost": [-1, 0, 0]})
        elif k % 2:
            p.unlink()
    damaged, stats = swir_cg(tmp_path, "again", "--cache-dir", str(store))
    assert damaged == reference
    assert "read from the compile cache" not in stats or damage == "deleted"
    # the damaged entries were written again, whole
    again, stats = swir_cg(tmp_path, "warm", "--cache-dir", str(store))
    assert again == reference and "nest searches read from the compile cache: 6" in stats


def test_cache_entries_refuse_another_key_and_damage(tmp_path):
    c = cache.Cache(tmp_path)
    c.put("kind", ["a", 1], {"x": 1})
    assert c.get("kind", ["a", 1]) == {"x": 1}
    assert c.get("kind", ["a", 2]) is None and c.get("other", ["a", 1]) is None
    assert c.get("kind", ["a", 1], valid=lambda v: v["x"] == 2) is None
    (path,) = tmp_path.rglob("*.json")
    path.write_text(path.read_text().replace('"x": 1', '"x": 3'))
    assert c.get("kind", ["a", 1]) is None


def test_bad_cache_directory_and_jobs_are_errors(tmp_path):
    swir = str(Path(sys.executable).parent / "swir-cg")
    blocker = tmp_path / "file"
    blocker.write_text("")
    for args, message in [(["--cache-dir", str(blocker / "sub")],
                           f"swir-cg: error: cannot keep the cache in '{blocker / 'sub'}': "),
                          (["-j", "-1"], "error: "), (["-j", "two"], "error: ")]:
        r = subprocess.run([swir, str(MLP), "-o", str(tmp_path / "out"), *args],
                           capture_output=True, text=True, check=False, timeout=60)
        assert r.returncode == 1 and message in r.stderr and "Traceback" not in r.stderr, \
            r.stderr
        assert not (tmp_path / "out").exists()


# -- issue 41: an entry no one but the user can write, read as data ------------------------

def _entries(store: Path, kind: str) -> list[Path]:
    return sorted((store / kind).rglob("*.json"))


def _rewrite(path: Path, value, how: str) -> None:
    """The entry at ``path`` with another answer, 'signed' as an attacker can:
    the checksum swir used to trust (a SHA-256 of the entry's own text), an
    HMAC under a secret that is not the user's, or (an entry of the user's
    own, e.g. from a bug) the user's real secret."""
    import hashlib
    import hmac
    entry = json.loads(path.read_text())
    body = entry["key"] + json.dumps(value, sort_keys=True, separators=(",", ":"))
    if how == "checksum":
        seal = {"sum": hashlib.sha256(body.encode()).hexdigest()}
    else:
        secret = os.urandom(32) if how == "foreign" else \
            bytes.fromhex((path.parents[2] / cache.KEY_FILE).read_text())
        seal = {"mac": hmac.new(secret, body.encode(), hashlib.sha256).hexdigest()}
    path.write_text(json.dumps({"key": entry["key"], "value": value, **seal}))


@pytest.mark.parametrize("how", ["checksum", "foreign"])
def test_forged_entries_change_nothing(tmp_path, reference, how):
    """The issue's reproduction: every plan search's entry rewritten to
    tiles of 1 and the order [1] (a wrong program, 0.0996 off) or [] (NaN),
    every trial's to another cost, with the checksum recomputed. Neither a
    recomputed checksum nor another secret makes an entry swir reads."""
    store = tmp_path / "cache"
    swir_cg(tmp_path, "fill", "--cache-dir", str(store))
    _forge_plans(store, how)
    for p in _entries(store, "trial"):
        _rewrite(p, {"cost": [0, 0, 1]}, how)
    forged, stats = swir_cg(tmp_path, "forged", "--cache-dir", str(store))
    assert "read from the compile cache" not in stats
    assert forged == reference


def _forge_plans(store: Path, how: str) -> None:
    for k, p in enumerate(_entries(store, "ldm-search")):
        value = json.loads(p.read_text())["value"]
        _rewrite(p, {**value, "tiles": [1] * len(value["tiles"]),
                     "order": [1] if k % 2 else []}, how)


def test_plans_signed_by_the_user_are_checked_as_a_search_result(tmp_path, reference):
    """An entry signed with the user's own secret (swir's own bug, an edit by
    the user) is checked as strictly as a search's result: the issue's
    illegal plans are refused; one that happens to be legal for its nest
    (tiles of 1 and the order [1] where only loop 1 has several tiles)
    plans a slower kernel that computes the same result."""
    from swir.codegen import emulate
    from swir.interp.run import run_function
    from swir.parser import parse_module
    import numpy as np
    store = tmp_path / "cache"
    swir_cg(tmp_path, "fill", "--cache-dir", str(store))
    _forge_plans(store, "own secret")
    forged, stats = swir_cg(tmp_path, "forged", "--cache-dir", str(store))
    read = int(stats.split("nest searches read from the compile cache: ")[1].split(",")[0]) \
        if "read from the compile cache" in stats else 0
    assert read < len(_entries(store, "ldm-search"))      # the illegal ones searched again
    if forged == reference:
        return
    x = np.load(MLP.with_name("mlp_input.npy"))
    module = parse_module(MLP.read_text(), str(MLP))
    main = module.lookup("main")
    (want,) = run_function(module, main, [x], base_dir=MLP.parent)
    program = emulate.build(tmp_path / "forged", "mlp")
    run = emulate.run(program, [x], [p.type for p in main.params], main.result_types)
    np.testing.assert_allclose(run.outputs[0], want, rtol=1e-4, atol=1e-5)


def _hostile(path: Path, kind: str, decoy: Path) -> None:
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link to a valid entry elsewhere":
        path.symlink_to(decoy)
    elif kind == "link to a huge sparse file":
        with open(decoy, "wb") as f:
            f.truncate(10 << 30)
        path.symlink_to(decoy)
    elif kind == "huge sparse file":
        with open(path, "wb") as f:
            f.truncate(10 << 30)
    elif kind == "nested 100,000 deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "directory":
        path.mkdir()
    elif kind == "device":      # a decoy device node (as /dev/zero's numbers), made here
        os.mknod(path, 0o600 | __import__("stat").S_IFCHR, os.makedev(1, 5))


HOSTILE = ["fifo", "link to a valid entry elsewhere", "link to a huge sparse file",
           "huge sparse file", "nested 100,000 deep", "directory"] + \
    (["device"] if os.geteuid() == 0 else [])    # mknod needs root


@pytest.mark.parametrize("kind", HOSTILE)
def test_a_hostile_entry_is_a_miss_and_is_replaced(tmp_path, kind):
    """A FIFO hung the compile, a link to /dev/zero took 10.7 GB, 100,000
    nested brackets failed it: each is a miss at once now, and the next put
    replaces it with a regular file without writing through it."""
    import threading
    (tmp_path / "c").mkdir()
    c = cache.Cache(tmp_path / "c")
    c.put("kind", ["k"], {"x": 1})
    (path,) = (tmp_path / "c" / "kind").rglob("*.json")
    decoy = tmp_path / "decoy.json"
    decoy.write_bytes(path.read_bytes())          # a valid entry, but not at its place
    _hostile(path, kind, decoy)
    def head(p: Path) -> tuple[int, bytes]:
        with open(p, "rb") as f:
            return p.stat().st_size, f.read(64)
    before = head(decoy)
    got: list = []
    t = threading.Thread(target=lambda: got.append(c.get("kind", ["k"])), daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), f"reading a {kind} entry hangs"
    assert got == [None]
    c.put("kind", ["k"], {"x": 2})
    if kind not in ("directory", "huge sparse file"):   # those stay where they are: misses
        assert path.is_file() and not path.is_symlink()
        assert c.get("kind", ["k"]) == {"x": 2}
    else:
        assert c.get("kind", ["k"]) is None
    assert head(decoy) == before


def test_links_below_the_cache_directory_are_not_followed(tmp_path):
    """A folder of the cache replaced by a link to another folder: entries are
    neither read from nor written into that folder."""
    root, outside = tmp_path / "c", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    c = cache.Cache(root)
    c.put("kind", ["k"], {"x": 1})
    (path,) = (root / "kind").rglob("*.json")
    import shutil
    shutil.copytree(root / "kind", outside / "kind")
    shutil.rmtree(root / "kind")
    (root / "kind").symlink_to(outside / "kind")
    listing = sorted(p.name for p in outside.rglob("*"))
    assert c.get("kind", ["k"]) is None
    c.put("kind", ["k"], {"x": 2})
    assert sorted(p.name for p in outside.rglob("*")) == listing
    assert (root / "kind").is_dir() and not (root / "kind").is_symlink()
    assert c.get("kind", ["k"]) == {"x": 2}


def test_the_secret_is_private_and_replaced_when_it_is_not(tmp_path):
    root = tmp_path / "c"
    root.mkdir()
    c = cache.Cache(root)
    key = root / cache.KEY_FILE
    assert key.stat().st_mode & 0o777 == 0o600 and key.stat().st_uid == os.geteuid()
    c.put("kind", ["k"], {"x": 1})
    (path,) = (root / "kind").rglob("*.json")
    assert path.stat().st_mode & 0o077 == 0
    # readable by others: it may have leaked, so a new one (old entries are misses)
    key.chmod(0o644)
    assert cache.Cache(root).get("kind", ["k"]) is None
    assert key.stat().st_mode & 0o777 == 0o600
    # a link in its place: never followed, never written through
    decoy = tmp_path / "decoy"
    decoy.write_text("0" * 64)
    decoy.chmod(0o600)
    key.unlink()
    key.symlink_to(decoy)
    c2 = cache.Cache(root)
    assert c2.secret != bytes(32) and not key.is_symlink() and decoy.read_text() == "0" * 64
    if os.geteuid() == 0:       # another user's key, planted in a shared folder
        os.chown(key, 65534, 65534)
        assert cache.Cache(root).secret != c2.secret
        assert key.stat().st_uid == 0


@pytest.mark.parametrize("tool", ["swir-cg", "swir-opt", "swir-report"])
def test_cache_directory_from_the_environment_is_checked(tmp_path, tool):
    """$SWIR_CACHE_DIR naming a file or a FIFO was ignored in silence, while
    --cache-dir gave an error: the same one-line error now, exit 1."""
    blocker, fifo = tmp_path / "file", tmp_path / "fifo"
    blocker.write_text("")
    os.mkfifo(fifo)
    for bad in (blocker, fifo):
        args = [str(MLP)] + (["-o", str(tmp_path / "out")] if tool == "swir-cg" else
                             ["-dce"] if tool == "swir-opt" else [])
        r = subprocess.run([str(Path(sys.executable).parent / tool), *args],
                           capture_output=True, text=True, timeout=120,
                           env={**os.environ, cache.ENV: str(bad)})
        assert r.returncode == 1, r.stderr
        assert r.stderr == (f"{tool}: error: cannot keep the cache in '{bad}' "
                            f"(${cache.ENV}): not a directory\n")
        assert not (tmp_path / "out").exists()


def test_a_bounded_cache_fuzz_campaign():
    """bench/fuzz_cache.py's campaign, bounded for CI (docs/reliability.md has
    the long one): damaged, hostile and forged entries and secrets never
    change the module swir-cg's pipeline makes; answers signed with the
    user's own secret are refused or plan a kernel with the same result."""
    import siblings
    fuzz_cache = siblings.load(Path(__file__).parents[2] / "bench" / "fuzz_cache.py")
    tally = fuzz_cache.run_cases(MLP, range(24), range(6), seed=7)
    assert tally.failures == [] and tally.cases == 30
    assert tally.misses + tally.legal == 30
