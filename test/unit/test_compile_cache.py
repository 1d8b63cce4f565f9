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
