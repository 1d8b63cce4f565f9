"""Writing output files as a Unix tool should: all or nothing, and never
destroying what the path names.

- A regular file, or a path that does not exist yet, is written to a
  temporary file beside it and renamed into place only when every output of
  the job is ready (an existing file keeps its permission bits, a new one gets
  ``0666 & ~umask``, as ``cc -o`` and ``cp`` give).
- A symlink is followed: the file it points to is replaced, the link stays.
- A character or block device or a FIFO (``/dev/null``, a named pipe) is
  written straight into: renaming a file over a device would delete it (as
  root, ``-o /dev/null`` would replace the system's ``/dev/null``). A path
  naming one of the process's descriptors (``/dev/stdout``, ``/dev/fd/N``,
  ``/proc/self/fd/N``, or a symlink to one) is written into that descriptor.
- A directory or a socket is refused with :class:`OutputError`.

Every message names the path as the user gave it.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Union

# What a job writes.
Content = Union[bytes, bytearray, memoryview]


class OutputError(Exception):
    """An output cannot be written: ``cannot write 'PATH': REASON`` (or
    ``text``, for a message about more than one output)."""

    def __init__(self, path: str, reason: str, text: str | None = None) -> None:
        super().__init__(text or f"cannot write '{path}': {reason}")
        self.path, self.reason = path, reason


def umask() -> int:
    """The process's umask (reading it means setting it and back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode() -> int:
    return 0o666 & ~umask()


def new_dir_mode() -> int:
    return 0o777 & ~umask()


@dataclass(frozen=True)
class Destination:
    """Where an output path's bytes go."""

    path: str        # as the user gave it (for messages)
    target: str      # the path, with symlinks followed
    stream: bool     # a device or FIFO: written straight into
    mode: int        # the permission bits a replaced or new file gets

    def fail(self, reason: str) -> OutputError:
        return OutputError(self.path, reason)


def destination(path: str) -> Destination:
    """What writing ``path`` means (see the module docstring); raises
    OutputError for a directory, a socket or a missing parent directory."""
    own = descriptor_path(path)
    if own is not None:
        return Destination(path, own, True, 0)
    target = os.path.realpath(path) if os.path.islink(path) else path
    try:
        st = os.stat(target)
    except FileNotFoundError:
        parent = os.path.dirname(target) or "."
        if not os.path.isdir(parent):
            if target != path:      # a dangling link: say where it leads
                raise OutputError(path, f"it is a symbolic link to '{os.readlink(path)}', "
                                  f"and there is no directory '{parent}'") from None
            raise OutputError(path, "no directory "
                              f"'{os.path.dirname(path) or '.'}'") from None
        return Destination(path, target, False, new_file_mode())
    except OSError as e:
        raise OutputError(path, e.strerror or str(e)) from None
    if stat.S_ISDIR(st.st_mode):
        raise OutputError(path, "it is a directory")
    if stat.S_ISSOCK(st.st_mode):
        raise OutputError(path, "it is a socket")
    if stat.S_ISREG(st.st_mode):
        return Destination(path, target, False, stat.S_IMODE(st.st_mode))
    return Destination(path, target, True, 0)     # a device or a FIFO


def descriptor_path(path: str) -> str | None:
    """The ``/dev/fd/N``-like path ``path`` leads to (itself, or through
    symlinks: /dev/stdout -> /proc/self/fd/1), if it names one of the
    process's open descriptors (open_descriptor); else None. Such an output is
    written into the descriptor itself, whatever file it is: replacing a file a
    shell redirected stdout to would leave the shell's descriptor on the old
    file, and reopening it would write from its start."""
    p = os.path.abspath(path)
    for _ in range(40):             # the kernel's own limit on symlink hops
        if open_descriptor(p) is not None:
            return p
        if not os.path.islink(p):
            return None
        p = os.path.abspath(os.path.join(os.path.dirname(p), os.readlink(p)))
    return None


def is_stream(path: str) -> bool:
    """Whether ``path`` names a device or a FIFO (after symlinks): an output
    with no folder beside it for a sidecar file."""
    try:
        return destination(path).stream
    except OutputError:
        return False      # reported when the output is written


def check_writable(path: str) -> None:
    """Fail early (before a long job) when ``path`` cannot be an output."""
    d = destination(path)
    if not d.stream:
        parent = os.path.dirname(d.target) or "."
        if not os.access(parent, os.W_OK | os.X_OK):
            raise d.fail(f"directory '{parent}' is not writable")


def write_all(jobs: list[tuple[str, Content]]) -> None:
    """Write every output, or (on any failure) change nothing that can be
    kept unchanged: regular files are put in place together at the end,
    after devices and FIFOs were written. Raises OutputError."""
    dests = [destination(path) for path, _ in jobs]
    _check_distinct(dests)
    temps: list[tuple[str, Destination]] = []
    try:
        for d, (_, content) in zip(dests, jobs):
            if not d.stream:
                temps.append((_temporary(d, content), d))
        for d, (_, content) in zip(dests, jobs):
            if d.stream:
                _write_stream(d, content)
        _commit(temps)
    except BaseException:
        for tmp, _ in temps:
            _remove(tmp)
        raise


def _check_distinct(dests: list[Destination]) -> None:
    for i, d in enumerate(dests):
        for e in dests[:i]:
            if not d.stream and same_file(d.target, e.target):
                raise OutputError(d.path, "another output names it",
                                  f"'{e.path}' and '{d.path}' are the same file; "
                                  "give each output its own")


def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file: the same path after links (also
    where it does not exist yet, or is a loop of links), or one file by two
    names (hard links: the same device and inode)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def _temporary(d: Destination, content: Content) -> str:
    """A new file beside d's target holding ``content``, with d's mode."""
    parent = os.path.dirname(d.target) or "."
    name = os.path.basename(d.target)
    try:
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{name[:200]}.", suffix=".tmp")
    except OSError as e:
        raise d.fail(e.strerror or str(e)) from None
    try:
        os.fchmod(fd, d.mode)
        with os.fdopen(fd, "wb") as fh:
            _put(fh, content)
    except OSError as e:
        _remove(tmp)
        raise d.fail(e.strerror or str(e)) from None
    except BaseException:
        _remove(tmp)
        raise
    return tmp


def _write_stream(d: Destination, content: Content) -> None:
    own = open_descriptor(d.target)
    try:
        if own is not None:     # the process's own: share its offset (``> file``)
            sys.stdout.flush()
            fd = os.dup(own)
        else:
            fd = os.open(d.target, os.O_WRONLY | getattr(os, "O_NOCTTY", 0))
        with os.fdopen(fd, "wb") as fh:
            _put(fh, content)
    except BrokenPipeError:
        if own == 1:            # stdout's reader went away: the tool's own exit
            raise
        raise d.fail("Broken pipe") from None
    except OSError as e:
        raise d.fail(e.strerror or str(e)) from None


def open_descriptor(path: str) -> int | None:
    """The descriptor N a path names (/dev/stdout, /dev/stderr, /dev/fd/N,
    /proc/self/fd/N, /proc/PID/fd/N of this process), else None."""
    fixed = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
    if path in fixed:
        return fixed[path]
    for prefix in ("/dev/fd/", "/proc/self/fd/", f"/proc/{os.getpid()}/fd/"):
        if path.startswith(prefix) and path[len(prefix):].isdigit():
            return int(path[len(prefix):])
    return None


def _put(fh: BinaryIO, content: Content) -> None:
    fh.write(content)


def _commit(temps: list[tuple[str, Destination]]) -> None:
    """Rename every temporary file over its target; if one rename fails, put
    back the targets already replaced."""
    placed: list[tuple[str, str | None]] = []     # (target, backup of what it replaced)
    current = temps[0][1] if temps else None
    try:
        for tmp, d in temps:
            current = d
            backup = _keep_old(d) if os.path.lexists(d.target) else None
            placed.append((d.target, backup))
            os.replace(tmp, d.target)
    except OSError as e:
        for target, backup in reversed(placed):
            try:
                if backup is not None:
                    os.replace(backup, target)
                else:
                    os.unlink(target)
            except OSError:
                pass
        assert current is not None
        raise current.fail(e.strerror or str(e)) from None
    for _, backup in placed:
        if backup is not None:
            _remove(backup)


def _keep_old(d: Destination) -> str:
    """A second name for the file d replaces, to put it back if a later
    rename fails (a hard link: the target never goes missing; a rename where
    the file system has no hard links)."""
    backup = _backup_name(d)
    try:
        os.link(d.target, backup)
    except OSError:
        os.replace(d.target, backup)
    return backup


def _backup_name(d: Destination) -> str:
    parent = os.path.dirname(d.target) or "."
    fd, name = tempfile.mkstemp(dir=parent, prefix=f".{os.path.basename(d.target)[:200]}.",
                                suffix=".old")
    os.close(fd)
    os.unlink(name)
    return name


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


# -- replacing a whole directory --------------------------------------------------------

def replace_directory(target: Path, fill: Callable[[Path], None], mode: int) -> None:
    """Make ``target`` a directory ``fill`` filled, all or nothing: filled
    beside it under a temporary name (``.NAME.PID.XXXXXXXX.tmp``), then
    swapped in by one atomic exchange where the system has one (Linux's
    renameat2 RENAME_EXCHANGE: ``target`` is never missing, whatever kills
    the process when), else by two renames (the old one kept as
    ``.NAME.PID.XXXXXXXX.old`` between them). What a killed run left beside
    ``target`` is repaired first: an old directory put back if ``target`` is
    missing, leftovers of dead processes removed. Raises OSError."""
    repair_leftovers(target)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=_leftover_prefix(target),
                                suffix=".tmp"))
    try:
        os.chmod(tmp, mode)
        fill(tmp)
        if target.exists() and exchange(tmp, target):
            shutil.rmtree(tmp, ignore_errors=True)      # now the old directory
            return
        old = None
        if target.exists():
            old = Path(tempfile.mkdtemp(dir=target.parent, prefix=_leftover_prefix(target),
                                        suffix=".old"))
            os.rmdir(old)
            os.replace(target, old)
        try:
            os.replace(tmp, target)
        except OSError:
            if old is not None and not target.exists():
                os.replace(old, target)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (renameat2 with RENAME_EXCHANGE); False
    where the system or the file system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _leftover_prefix(target: Path) -> str:
    return f".{target.name[:200]}.{os.getpid()}."


def repair_leftovers(target: Path) -> None:
    """Put back, or remove, what a run killed between the renames of
    :func:`replace_directory` left beside ``target``: only the leftovers of
    processes no longer running (another run may be writing)."""
    pattern = re.compile(rf"^\.{re.escape(target.name[:200])}\.(\d+)\.[A-Za-z0-9_]{{8}}"
                         r"\.(tmp|old)$")
    try:
        names = os.listdir(target.parent)
    except OSError:
        return
    found = [(m.group(2), target.parent / n) for n in sorted(names)
             if (m := pattern.match(n)) and not _running(int(m.group(1)))]
    for kind, path in found:
        if kind == "old" and not os.path.lexists(target):
            try:
                os.replace(path, target)
                continue
            except OSError:
                pass
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True
