"""The compile cache: answers of costly compile-time questions (an LDM plan
search's winner, a trial lowering's traffic) kept between runs in a
directory, so a second compile of the same model, or of a model sharing its
layers, skips the work.

Opt-in: ``swir-cg --cache-dir DIR`` (or ``$SWIR_CACHE_DIR``); the directory
is safe to delete at any time. An entry is one JSON file named by the SHA-256
of its key, which holds everything that decides the answer (the kernel's
canonical text, the options) and swir's build: its version and a digest of
its own source files, so any change of swir or of the input is a miss.

The cache is never a correctness risk. Each file carries its key and a
checksum of its contents: a file that is unreadable, truncated, edited or
written for another key is a miss (and is rewritten); callers validate the
answer too (:class:`Cache.get`'s ``valid``), and a plan that is no longer
legal is recomputed. Writes go to a temporary file first and are renamed
into place, so a concurrent reader sees a whole entry or none.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

ENV = "SWIR_CACHE_DIR"
_directory: Path | None = None
_configured = False


def use_directory(path: str | os.PathLike | None) -> None:
    """Cache in ``path`` from now on (None: no cache); tools call this for
    --cache-dir. Without a call, ``$SWIR_CACHE_DIR`` decides."""
    global _directory, _configured
    _directory, _configured = (Path(path) if path else None), True


def usable(path: str) -> str | None:
    """Why ``path`` cannot hold the cache (None when it can): created if
    missing; it must be a writable directory."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return e.strerror or str(e)
    return None if os.access(path, os.W_OK | os.X_OK) else "not writable"


def current() -> Cache | None:
    """The cache in use, or None."""
    if not _configured:
        use_directory(os.environ.get(ENV) or None)
    return Cache(_directory) if _directory is not None else None


@lru_cache(maxsize=1)
def build_id() -> str:
    """swir's version and a digest of its source files: what makes a cached
    answer stale when swir itself changes (a plan search's constants, a
    pass's rules), not only at releases."""
    try:
        release = metadata.version("swir")
    except metadata.PackageNotFoundError:     # run from a source tree
        release = "source"
    root = Path(__file__).resolve().parent
    h = hashlib.sha256(release.encode())
    for p in sorted(root.rglob("*.py")) + sorted(root.rglob("*.lark")):
        h.update(str(p.relative_to(root)).encode())
        h.update(p.read_bytes())
    return f"{release}+{h.hexdigest()[:16]}"


class Cache:
    """A directory of entries: ``get`` and ``put`` by a key of JSON values."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _file(self, kind: str, key: Any) -> tuple[Path, str]:
        text = json.dumps([build_id(), kind, key], sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256(text.encode()).hexdigest()
        return self.directory / kind / digest[:2] / f"{digest[2:]}.json", text

    def get(self, kind: str, key: Any, valid: Callable[[Any], bool] = lambda _: True) -> Any:
        """The answer stored for ``key`` (a ``kind`` of question), or None
        when there is none, the entry is damaged or ``valid`` refuses it."""
        path, text = self._file(kind, key)
        try:
            entry = json.loads(path.read_text())
            value = entry["value"]
            if entry["key"] != text or entry["sum"] != _checksum(text, value):
                return None
            return value if valid(value) else None
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, kind: str, key: Any, value: Any) -> None:
        """Store ``value`` (JSON) for ``key``; a directory that cannot be
        written only means no cache (the compile goes on)."""
        path, text = self._file(kind, key)
        entry = json.dumps({"key": text, "value": value, "sum": _checksum(text, value)})
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
        except OSError:
            return
        try:
            with os.fdopen(fd, "w") as f:
                f.write(entry)
            os.replace(tmp, path)
        except OSError:
            Path(tmp).unlink(missing_ok=True)


def _checksum(key_text: str, value: Any) -> str:
    body = key_text + json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()
