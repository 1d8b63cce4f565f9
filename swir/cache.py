"""The compile cache: answers of costly compile-time questions (an LDM plan
search's winner, a trial lowering's traffic) kept between runs in a
directory, so a second compile of the same model, or of a model sharing its
layers, skips the work.

Opt-in: ``swir-cg --cache-dir DIR`` (or ``$SWIR_CACHE_DIR``); the directory
is safe to delete at any time. An entry is one JSON file named by the SHA-256
of its key, which holds everything that decides the answer (the kernel's
canonical text, the options) and swir's build: its version and a digest of
its own source files, so any change of swir or of the input is a miss.

The cache is never a correctness risk, whoever can write the directory
(docs/reliability.md, "Caches", has the threat model):

- **Authentic.** Each entry carries an HMAC-SHA256 of its key and answer
  under a secret of the user's (``DIR/key``, 32 random bytes, mode 0600,
  owned by the user; replaced when it is not). Without the secret no one can
  write an entry swir accepts: an edited, forged or foreign entry is a miss.
- **Checked.** Callers check every answer as strictly as one they computed
  (:meth:`Cache.get`'s ``valid``): a plan that is not a legal plan of its
  nest is searched again.
- **Read as data, never followed.** Entries, the secret and the folders
  below DIR are opened without following symbolic links, and only regular
  files of at most :data:`MAX_ENTRY_BYTES` are read (a FIFO, a device, a link
  to ``/dev/zero`` is a miss, never a hang). Whatever is wrong is a miss, and
  the entry is written again (but a file over that size is left in place:
  deleting a huge file costs what the file system decides).
- **Written in place only.** A new entry is written to a new file
  (``O_EXCL``) in its folder and renamed over the old name: a link there is
  replaced, never written through; nothing outside DIR is touched.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
from collections.abc import Callable
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

ENV = "SWIR_CACHE_DIR"
KEY_FILE = "key"
# An entry is a few hundred bytes; anything past this is not one of ours.
MAX_ENTRY_BYTES = 1 << 20
_KEY_BYTES = 32
_NOFOLLOW = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_directory: Path | None = None
_configured = False


class CacheError(Exception):
    """The cache directory cannot be used (the reason, for one line)."""


def use_directory(path: str | os.PathLike | None) -> None:
    """Cache in ``path`` from now on (None: no cache); tools call this for
    --cache-dir. Without a call, ``$SWIR_CACHE_DIR`` decides."""
    global _directory, _configured
    _directory, _configured = (Path(path) if path else None), True


def usable(path: str) -> str | None:
    """Why ``path`` cannot hold the cache (None when it can): created if
    missing (mode 0700); it must be a writable directory whose secret is the
    user's own or can be made so."""
    if os.path.lexists(path) and not os.path.isdir(path):
        return "a symbolic link to nothing" if not os.path.exists(path) else "not a directory"
    try:
        Path(path).mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as e:
        return e.strerror or str(e)
    if not os.access(path, os.W_OK | os.X_OK):
        return "not writable"
    try:
        _secret(Path(path))
    except CacheError as e:
        return str(e)
    return None


def current() -> Cache | None:
    """The cache in use, or None."""
    if not _configured:
        use_directory(os.environ.get(ENV) or None)
    if _directory is None:
        return None
    try:
        return Cache(_directory)
    except CacheError:
        return None         # the tools said so up front (usable); a pass goes on without


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
    """A directory of entries: ``get`` and ``put`` by a key of JSON values.
    Raises CacheError when the directory's secret cannot be had."""

    def __init__(self, directory: Path, secret: bytes | None = None) -> None:
        self.directory = directory
        self.secret = secret if secret is not None else _secret(directory)

    def _place(self, kind: str, key: Any) -> tuple[list[str], str, str]:
        text = json.dumps([build_id(), kind, key], sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256(text.encode()).hexdigest()
        return [kind, digest[:2]], f"{digest[2:]}.json", text

    def get(self, kind: str, key: Any, valid: Callable[[Any], bool] = lambda _: True) -> Any:
        """The answer stored for ``key`` (a ``kind`` of question), or None
        when there is none, the entry is damaged, not signed by this user's
        secret, or ``valid`` refuses it."""
        folders, name, text = self._place(kind, key)
        raw = _read_regular(self.directory, folders, name, MAX_ENTRY_BYTES)
        if raw is None:
            return None
        try:
            entry = json.loads(raw)
            value = entry["value"]
            if entry["key"] != text or not hmac.compare_digest(
                    str(entry["mac"]), _mac(self.secret, text, value)):
                return None
            return value if valid(value) else None
        except (ValueError, KeyError, TypeError, RecursionError):
            return None
        except Exception:       # a check that does not expect this shape: a miss too
            return None

    def put(self, kind: str, key: Any, value: Any) -> None:
        """Store ``value`` (JSON) for ``key``; a directory that cannot be
        written only means no cache (the compile goes on)."""
        folders, name, text = self._place(kind, key)
        entry = json.dumps({"key": text, "value": value, "mac": _mac(self.secret, text, value)})
        _write_new(self.directory, folders, name, entry.encode())


def _mac(secret: bytes, key_text: str, value: Any) -> str:
    body = key_text + json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hmac.new(secret, body.encode(), hashlib.sha256).hexdigest()


# -- the user's secret ---------------------------------------------------------------

def _secret(directory: Path) -> bytes:
    """The secret entries are signed with: ``DIR/key``, a regular file owned
    by this user and readable by no one else; made (or replaced, when it is
    anything else) with fresh random bytes."""
    for _ in range(3):
        raw = _read_regular(directory, [], KEY_FILE, 2 * _KEY_BYTES, private=True)
        if raw is not None and len(raw) == 2 * _KEY_BYTES:
            try:
                return bytes.fromhex(raw.decode("ascii"))
            except (UnicodeDecodeError, ValueError):
                pass
        _replace_secret(directory)
    raise CacheError(f"cannot keep a private key in '{directory / KEY_FILE}'")


def _replace_secret(directory: Path) -> None:
    """A new secret in DIR/key, put there whole (a hard link to a finished
    file; where another process linked its own first, that one stays)."""
    try:
        fd = _open_folder(directory, [], create=False)
    except OSError as e:
        raise CacheError(e.strerror or str(e)) from None
    try:
        tmp = _new_file(fd, KEY_FILE, secrets.token_hex(_KEY_BYTES).encode())
        try:
            if os.path.lexists(os.path.join(directory, KEY_FILE)):
                os.unlink(KEY_FILE, dir_fd=fd)      # not a private key of ours
            os.link(tmp, KEY_FILE, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp, dir_fd=fd)
    except OSError as e:
        raise CacheError(f"cannot write '{directory / KEY_FILE}': {e.strerror or e}") from None
    finally:
        os.close(fd)


# -- files read and written without following links ----------------------------------

def _open_folder(root: Path, folders: list[str], create: bool) -> int:
    """A descriptor of ``root/folders...``: ``root`` as the user named it,
    each folder below it opened without following a link. With ``create``,
    a missing folder is made (0700) and a link or a file in its place is
    replaced by one."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        for name in folders:
            try:
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=fd)
            except OSError:
                if not create:
                    raise
                _make_folder(fd, name)
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = sub
    except BaseException:
        os.close(fd)
        raise
    return fd


def _make_folder(fd: int, name: str) -> None:
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=fd)          # a link, a file, a FIFO: not ours to follow
    try:
        os.mkdir(name, 0o700, dir_fd=fd)
    except FileExistsError:
        pass                                # another process made it


def _read_regular(root: Path, folders: list[str], name: str, limit: int,
                  private: bool = False) -> bytes | None:
    """The bytes of a regular file of at most ``limit`` bytes (with
    ``private``: owned by this user, readable by no one else), else None."""
    try:
        folder = _open_folder(root, folders, create=False)
    except OSError:
        return None
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW, dir_fd=folder)
    except OSError:
        return None
    finally:
        os.close(folder)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        if private and (st.st_uid != os.geteuid() or st.st_mode & 0o077):
            return None
        data = os.read(fd, limit + 1)
        return data if len(data) <= limit else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _write_new(root: Path, folders: list[str], name: str, data: bytes) -> None:
    """Put ``data`` at ``root/folders.../name``: a new file in that folder,
    renamed over the name (whatever was there, a link included, is replaced,
    never written through). A failure leaves no cache entry, nothing else."""
    try:
        fd = _open_folder(root, folders, create=True)
    except OSError:
        return
    try:
        if _too_big_to_replace(fd, name):
            return
        tmp = _new_file(fd, name, data)
        try:
            os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except OSError:
            os.unlink(tmp, dir_fd=fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _too_big_to_replace(fd: int, name: str) -> bool:
    """A file over MAX_ENTRY_BYTES at the entry's name is left there (a miss
    each time): deleting it costs the file system time it decides, not swir
    (a planted 10 GB sparse file took a compile 70 s to replace)."""
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size > MAX_ENTRY_BYTES


def _new_file(fd: int, name: str, data: bytes) -> str:
    """A new private file holding ``data`` in folder ``fd``; its name."""
    for _ in range(100):
        tmp = f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600,
                          dir_fd=fd)
        except FileExistsError:
            continue
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(out, view):]
        except BaseException:
            os.close(out)
            os.unlink(tmp, dir_fd=fd)
            raise
        os.close(out)
        return tmp
    raise FileExistsError(name)
