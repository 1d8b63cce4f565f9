"""Writing a picture to a file: all or nothing, never onto something that is
not a picture file.

A picture goes only to a regular file or a path that does not exist yet (a
symlink is followed, as swir's tools follow it: the file it names is
replaced, the link stays). A directory, a FIFO, a device or a socket is
refused with a one-line :class:`PictureError` naming the path: a picture
poured into a pipe or a terminal helps nobody, and renaming over a device
would delete it. The bytes go to a temporary file beside the target, renamed
into place when complete (swir.files.write_all), so a failure leaves no
half-written picture.

Graphviz's ``dot`` renders DOT to SVG or PNG when it is on PATH; without it
the DOT is written next to the requested picture (``graph.svg`` ->
``graph.dot``) and the caller prints a hint.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess

from swir import files

# How long `dot` may take on one picture (a ResNet-50 graph renders in ~2 s).
RENDER_TIMEOUT = 120.0
RENDERED = (".svg", ".png")
INSTALL_HINT = "install Graphviz (apt install graphviz) to render"


class PictureError(Exception):
    """A picture cannot be written or rendered: one line naming the path."""


def check_destination(path: str) -> None:
    """Refuse a path that is not a regular file or a new file in an existing
    directory (raises PictureError)."""
    try:
        st = os.stat(path)      # follows a symlink: its target is what gets replaced
    except FileNotFoundError:
        parent = os.path.dirname(os.path.realpath(path)) or "."
        if not os.path.isdir(parent):
            raise PictureError(f"cannot write '{path}': no directory "
                               f"'{os.path.dirname(path) or '.'}'") from None
        return
    except OSError as e:
        raise PictureError(f"cannot write '{path}': {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise PictureError(f"cannot write '{path}': it is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise PictureError(f"cannot write '{path}': it is not a regular file")


def write_bytes(path: str, content: bytes) -> None:
    """Write ``content`` to ``path`` atomically (check_destination first)."""
    check_destination(path)
    try:
        files.write_all([(path, content)])
    except files.OutputError as e:
        raise PictureError(str(e)) from None


def render(dot_text: str, fmt: str, dot: str) -> bytes:
    """``dot_text`` rendered by the ``dot`` program at path ``dot`` to
    ``fmt`` (svg or png)."""
    try:
        done = subprocess.run([dot, f"-T{fmt}"], input=dot_text.encode(),
                              capture_output=True, timeout=RENDER_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        raise PictureError(f"Graphviz's dot took more than {RENDER_TIMEOUT:.0f} s "
                           "to render the picture") from None
    except OSError as e:
        raise PictureError(f"cannot run Graphviz's dot ({dot}): {e.strerror or e}") from None
    if done.returncode != 0 or not done.stdout:
        why = done.stderr.decode(errors="replace").strip().splitlines()
        raise PictureError("Graphviz's dot failed" + (f": {why[0]}" if why else
                                                      f" (exit status {done.returncode})"))
    return done.stdout


def write_dot_picture(path: str, dot_text: str) -> str | None:
    """Write a DOT picture to ``path``: DOT itself for any name but .svg /
    .png, which are rendered by Graphviz. Without Graphviz the DOT goes to
    ``path`` with .dot instead; the returned line says so (else None)."""
    stem, ext = os.path.splitext(path)
    ext = ext.lower()
    if ext not in RENDERED:
        write_bytes(path, dot_text.encode())
        return None
    check_destination(path)     # refuse a bad path before the (long) render
    dot = shutil.which("dot")
    if dot is None:
        fallback = stem + ".dot"
        write_bytes(fallback, dot_text.encode())
        return f"{INSTALL_HINT}; DOT written to {fallback}"
    write_bytes(path, render(dot_text, ext[1:], dot))
    return None


def extension_check(allowed: tuple[str, ...]):
    """An option check: the path is empty (stderr) or ends in one of ``allowed``."""
    def check(path: str) -> str | None:
        if not path or os.path.splitext(path)[1].lower() in allowed:
            return None
        return "must end in " + ", ".join(allowed[:-1]) + " or " + allowed[-1]
    return check
