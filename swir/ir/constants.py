"""The compile-time values of IR constants: ``const`` operands, ``dense<...>``
literals, globals' contents (a literal, computed contents, or a sidecar weights
file). The interpreters, constant folding and the C generator read them here."""

from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np

from swir.diagnostics import Diagnostic
from swir.ir.affine import Expr
from swir.ir.core import (ArrayInit, Dense, DenseSlot, FileInit, Global, Instruction, Literal,
                          Module, Value)
from swir.ir.dtypes import dtype_of
from swir.ir.types import ShapedType, Type


def dense_array(d: Dense, t: ShapedType | Type) -> np.ndarray:
    dtype = dtype_of(t)
    shape = t.shape if isinstance(t, ShapedType) else ()
    with np.errstate(over="ignore"):  # a literal beyond the type's range becomes inf
        if d.is_splat:
            return np.full(shape, d.value, dtype=dtype)
        return np.array(d.flat(), dtype=dtype).reshape(shape)


def constant_array(slot: Any, t: Type) -> np.ndarray:
    """The value of a ``const`` operand as an array of type t."""
    if isinstance(slot, DenseSlot):
        return dense_array(slot.dense, t)
    if isinstance(slot, Literal):
        return np.array(slot.value, dtype=dtype_of(t))
    if isinstance(slot, Expr) and slot.is_constant:
        return np.array(slot.const, dtype=dtype_of(t))
    raise Diagnostic(f"'const' operand {slot!r} is not a constant")


def module_ranks(module: Module) -> int:
    """How many ranks run the module (``{ranks = N}``, written by -distribute; else 1)."""
    return module.attr("ranks")


def global_ranks(g: Global) -> int | None:
    """The ranks a per-rank global holds a slice for (``{ranks = N}``, written by
    -distribute: rank r reads slice r), or None for a global every rank shares."""
    v = g.attrs.get("ranks")
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def contents_shape(g: Global) -> tuple[int, ...]:
    """The shape of what a global's initializer holds: its type's, or one slice per rank."""
    assert isinstance(g.type, ShapedType)
    n = global_ranks(g)
    return g.type.shape if n is None else (n,) + g.type.shape


def contents_type(g: Global) -> ShapedType:
    """The type of what a global's initializer holds (see :func:`contents_shape`)."""
    assert isinstance(g.type, ShapedType)
    return dataclasses.replace(g.type, shape=contents_shape(g))


# Folders weight files may be read from besides a module's own folder and
# those below it: what the tools' --weights-from options name (the process's
# policy, set once by the tool; docs/reliability.md, "Weights").
_WEIGHT_FOLDERS: list[Path] = []


def allow_weights_from(folders: list[str]) -> None:
    """Let weight files be read from these folders (and below) too."""
    _WEIGHT_FOLDERS[:] = [Path(f).resolve() for f in folders]


def weight_path(g: Global, base_dir: Path) -> Path:
    """The file a global's contents are read from: ``file "..."`` relative to
    the module's folder, which it (after symbolic links) must not leave --
    ``"/etc/passwd"`` or ``"../../x"`` in a module from elsewhere must not
    put a file of the user's into a program -- unless a folder the tool was
    given (--weights-from) holds it. A Diagnostic otherwise."""
    init = g.init
    assert isinstance(init, FileInit)
    path = Path(base_dir) / init.path
    home = Path(base_dir).resolve()
    try:
        real = path.resolve()
    except (OSError, RuntimeError):          # a loop of links
        raise Diagnostic(f"@{g.name}: cannot read weight file '{path}': a loop of "
                         "symbolic links", g.loc) from None
    if not any(real == r or r in real.parents for r in [home] + _WEIGHT_FOLDERS):
        raise Diagnostic(f"@{g.name}: weight file '{init.path}' is outside the module's "
                         f"folder '{home}'; give --weights-from DIR to read weights from "
                         "another folder", g.loc)
    return path


def load_file_global(g: Global, base_dir: Path) -> np.ndarray:
    """Read a global's elements from its sidecar file (:func:`weight_path`),
    checking that they exist (a per-rank global: every rank's slice,
    stacked). Only a regular file is read: a FIFO or a device is refused
    before it could block or never end."""
    init = g.init
    assert isinstance(init, FileInit) and isinstance(g.type, ShapedType)
    path = weight_path(g, base_dir)
    dtype = dtype_of(g.type).newbyteorder("<")
    shape = contents_shape(g)
    need = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise Diagnostic(f"@{g.name}: cannot read weight file '{path}': "
                         f"{e.strerror or e}", g.loc) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise Diagnostic(f"@{g.name}: cannot read weight file '{path}': it is "
                         f"{file_kind(st.st_mode)}, not a regular file", g.loc)
    with os.fdopen(fd, "rb") as fh:
        size = st.st_size
        if init.offset > size:
            raise Diagnostic(f"@{g.name}: offset {init.offset} is past the end of '{path}' "
                             f"({size} bytes)", g.loc)
        if init.offset + need > size:
            raise Diagnostic(f"@{g.name}: '{path}' is too short: {g.type} needs {need} "
                             f"bytes at offset {init.offset}, the file has "
                             f"{size - init.offset}", g.loc)
        fh.seek(init.offset)
        data = fh.read(need)
    if len(data) != need:
        raise Diagnostic(f"@{g.name}: '{path}' became shorter while it was read", g.loc)
    return np.frombuffer(data, dtype=dtype).astype(dtype.newbyteorder("="))\
        .reshape(shape)


def load_weights_outside(module: Module, folder: str) -> None:
    """Give every global whose weight file is not in ``folder`` (or below)
    its contents in memory (ArrayInit), to be written beside a module
    printed into ``folder``: a module written elsewhere than its input stays
    readable on its own, since weights are read only from a module's own
    folder (weight_path)."""
    home = Path(folder).resolve()
    base = Path(module.base_dir or ".")
    for g in module.globals:
        if isinstance(g.init, FileInit):
            real = weight_path(g, base).resolve()
            if home not in real.parents:
                g.init = ArrayInit(load_file_global(g, base))


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, for messages."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def constant_value(v: Value) -> np.ndarray | None:
    """The array a value always holds, if it is known at compile time: the result
    of a ``const``, or a ``global`` (a literal, computed contents, or a sidecar
    file found from the module's ``base_dir``). A per-rank global has no one value."""
    if isinstance(v, Global):
        if global_ranks(v) is not None:
            return None
        if isinstance(v.init, ArrayInit):
            return v.init.array
        if isinstance(v.init, FileInit) and v.module is not None:
            return load_file_global(v, Path(v.module.base_dir or "."))
        return dense_array(v.init, v.type) if isinstance(v.init, Dense) else None
    owner = getattr(v, "owner", None)
    if _constant_like(owner):
        return constant_array(owner.args[0], v.type)
    return None


def is_constant(v: Value) -> bool:
    """Whether :func:`constant_value` knows ``v`` (without reading anything)."""
    if isinstance(v, Global):
        return v.kind == "global" and v.init is not None and global_ranks(v) is None
    return _constant_like(getattr(v, "owner", None))


def _constant_like(owner: Any) -> bool:
    """Whether ``owner`` is an instruction whose value is its literal operand
    (``const``): asked of its definition, which the IR core sees through the
    installed op set (swir.ops sits above this package)."""
    if not isinstance(owner, Instruction):
        return False
    d = owner.opdef
    return d is not None and d.constant_like


def global_array(g: Global, base_dir: Path, rank: int | None = None) -> np.ndarray:
    """The contents of a constant ``global`` as rank ``rank`` sees them (a
    per-rank global: that rank's slice; None: every rank's, stacked)."""
    whole = _global_contents(g, base_dir)
    return whole if rank is None or global_ranks(g) is None else whole[rank]


def _global_contents(g: Global, base_dir: Path) -> np.ndarray:
    assert isinstance(g.type, ShapedType)
    if isinstance(g.init, Dense):
        return dense_array(g.init, contents_type(g))
    if isinstance(g.init, FileInit):
        return load_file_global(g, base_dir)
    if isinstance(g.init, ArrayInit):
        return g.init.array
    raise Diagnostic(f"@{g.name} has no contents to load", g.loc)
