"""The LALR tables of the textual IR's grammar, shipped with the package.

Building Lark's LALR tables takes about a quarter of a second, paid by every
tool at start-up. They used to be kept in Lark's cache file in the user's
cache folder: a pickle, which runs whatever code a file planted there holds,
and which Lark rewrote through whatever the path named (a symlink, a FIFO).
Now nothing executable is read from a place anyone can write:

- ``pip install`` builds the tables once (``setup.py``'s ``build_py`` calls
  :func:`write`) into the installed package, as JSON: data, no code.
- At start-up :func:`load` reads them only if they were built from this very
  grammar by this very Lark version; otherwise (a source tree, a Lark upgraded
  after the install) it builds the tables in memory. It writes nothing.

This module imports no other swir module (``setup.py`` loads it, and the lexer,
by file path, before swir is installed).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import lark

# The file name of the shipped tables, beside the grammar (package swir.grammar).
FILE_NAME = "swir.tables.json"
# Larger than the tables could ever be (about 190 KB): a file over it is not
# read (it is not the tables this module wrote).
MAX_BYTES = 8 << 20

# What Lark's serialisation holds that is not data: the lexer class and the
# transformer object, given back to Lark when the tables are loaded.
_LEXER_SLOTS = (("parser", "lexer_conf", "lexer_type"), ("options", "lexer"))
_TRANSFORMER_SLOT = ("options", "transformer")


def fingerprint(grammar: str) -> dict[str, str]:
    """What the tables depend on: the grammar's text and Lark's version."""
    return {"grammar": hashlib.sha256(grammar.encode()).hexdigest(),
            "lark": lark.__version__}


def build(grammar: str, lexer: type, transformer: Any = None) -> lark.Lark:
    """Lark's LALR parser of ``grammar`` with swir's lexer, built in memory."""
    return lark.Lark(grammar, parser="lalr", lexer=lexer, transformer=transformer,
                     maybe_placeholders=True)


def dumps(grammar: str, lexer: type) -> str:
    """The tables of ``grammar`` as JSON text, with their fingerprint."""
    data, memo = build(grammar, lexer).memo_serialize([lark.lexer.TerminalDef,
                                                       lark.grammar.Rule])
    for path in _LEXER_SLOTS + (_TRANSFORMER_SLOT,):
        _set(data, path, None)
    return json.dumps({"fingerprint": fingerprint(grammar),
                       "tables": _encode([data, memo])}, separators=(",", ":"))


def write(path: str | Path, grammar: str, lexer: type) -> None:
    """Write the tables file (at build time, into the package being built)."""
    Path(path).write_text(dumps(grammar, lexer))


def load(grammar: str, lexer: type, transformer: Any, folder: Path | None) -> lark.Lark:
    """The parser of ``grammar``: from the tables in ``folder`` when they
    match the grammar and Lark's version, else built in memory."""
    tables = _read(folder / FILE_NAME, grammar) if folder is not None else None
    if tables is None:
        return build(grammar, lexer, transformer)
    data, memo = tables
    for path in _LEXER_SLOTS:
        _set(data, path, lexer)
    return lark.Lark._load_from_dict(data, memo, transformer=transformer)


def _read(path: Path, grammar: str) -> tuple[dict, dict] | None:
    try:
        if not path.is_file() or path.stat().st_size > MAX_BYTES:
            return None
        entry = json.loads(path.read_bytes(), object_hook=_decode)
        if entry["fingerprint"] != fingerprint(grammar):
            return None
        data, memo = entry["tables"]
        return data, memo
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None


# JSON has neither tuples nor integer keys, and Lark's tables have both (parse
# states and memo ids are integers; actions are pairs): each is tagged.

def _encode(x: Any) -> Any:
    if isinstance(x, dict):
        if x and all(isinstance(k, int) for k in x):
            return {"#int-keys": [[k, _encode(v)] for k, v in x.items()]}
        return {k: _encode(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return {"#tuple": [_encode(v) for v in x]}
    if isinstance(x, list):
        return [_encode(v) for v in x]
    return x


def _decode(d: dict) -> Any:
    if len(d) == 1:
        if "#int-keys" in d:
            return {int(k): v for k, v in d["#int-keys"]}
        if "#tuple" in d:
            return tuple(d["#tuple"])
    return d


def _set(data: dict, path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value
