"""The grammar's LALR tables ship with the package as data (swir/parse_tables.py):
no tool reads or writes a parse-table cache in the user's folders, so nothing
planted there (a pickle that runs code, a symlink, a FIFO) can act on a tool.
Decoys only, under temporary folders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import lark
import pytest

from swir import parse_tables, parser
from swir.lexer import SwirLexer

ROOT = Path(__file__).resolve().parents[2]
GRAMMAR = parser.grammar_text()
EXAMPLES = sorted((ROOT / "examples").glob("*.swir")) + sorted((ROOT / "test").rglob("*.swir"))[:60]


def _swir_opt(env_home: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_CACHE_HOME": str(env_home / "xdg"), "HOME": str(env_home)}
    tool = Path(sys.executable).parent / "swir-opt"
    return subprocess.run([str(tool), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def _old_tables_path(home: Path) -> Path:
    """Where the parser used to keep Lark's pickled tables."""
    return home / "xdg" / "swir" / f"lark-{lark.__version__}.tables"


def test_a_tool_writes_nothing_in_the_users_cache(tmp_path):
    res = _swir_opt(tmp_path, "-dce", str(ROOT / "examples" / "mlp.swir"))
    assert res.returncode == 0, res.stderr
    assert not (tmp_path / "xdg").exists()
    assert not (tmp_path / ".cache").exists()


def test_a_planted_pickle_is_never_loaded(tmp_path):
    marker = tmp_path / "ran"
    payload = (b"cos\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR.")
    for path in (_old_tables_path(tmp_path), tmp_path / ".cache" / "swir" /
                 f"lark-{lark.__version__}.tables"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(payload)
    res = _swir_opt(tmp_path, "-dce", str(ROOT / "examples" / "mlp.swir"))
    assert res.returncode == 0, res.stderr
    assert not marker.exists(), "a file in the user's cache ran code in swir-opt"


def test_a_symlink_in_the_cache_is_not_written_through(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    link = _old_tables_path(tmp_path)
    link.parent.mkdir(parents=True)
    link.symlink_to(victim)
    res = _swir_opt(tmp_path, "-dce", str(ROOT / "examples" / "mlp.swir"))
    assert res.returncode == 0, res.stderr
    assert victim.read_text() == "keep me\n"


def test_a_fifo_in_the_cache_does_not_hang_a_tool(tmp_path):
    fifo = _old_tables_path(tmp_path)
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    res = _swir_opt(tmp_path, "-dce", str(ROOT / "examples" / "mlp.swir"), timeout=30)
    assert res.returncode == 0, res.stderr


def _parse_all(p: lark.Lark) -> list[str]:
    out = []
    for path in EXAMPLES:
        try:
            out.append(repr(_shape(p.parse(path.read_text()))))
        except Exception as e:          # a lit test's broken module: the same error
            out.append(f"{type(e).__name__}: {getattr(e, 'line', '')}:{getattr(e, 'column', '')}")
    return out


def _shape(tree) -> object:
    """A syntax tree without object identities (SInstr instances), comparable."""
    if isinstance(tree, (list, tuple)):
        return [_shape(t) for t in tree]
    if hasattr(tree, "__slots__") and not isinstance(tree, str):
        return {s: _shape(getattr(tree, s)) for s in tree.__slots__}
    return str(tree) if isinstance(tree, lark.Token) else tree


def test_shipped_tables_parse_as_the_grammar_does(tmp_path):
    """Tables written and loaded again give the parser Lark builds from the grammar."""
    parse_tables.write(tmp_path / parse_tables.FILE_NAME, GRAMMAR, SwirLexer)
    loaded = parse_tables.load(GRAMMAR, SwirLexer, parser._SyntaxBuilder(), tmp_path)
    built = parse_tables.build(GRAMMAR, SwirLexer, parser._SyntaxBuilder())
    assert parse_tables._read(tmp_path / parse_tables.FILE_NAME, GRAMMAR) is not None
    assert _parse_all(loaded) == _parse_all(built)


@pytest.mark.parametrize("damage", ["stale grammar", "other lark", "truncated", "not json",
                                    "directory", "fifo", "huge"])
def test_tables_that_do_not_match_are_not_used(tmp_path, damage):
    path = tmp_path / parse_tables.FILE_NAME
    parse_tables.write(path, GRAMMAR, SwirLexer)
    entry = json.loads(path.read_text())
    if damage == "stale grammar":
        entry["fingerprint"]["grammar"] = "0" * 64
        path.write_text(json.dumps(entry))
    elif damage == "other lark":
        entry["fingerprint"]["lark"] = "0.0.1"
        path.write_text(json.dumps(entry))
    elif damage == "truncated":
        path.write_text(path.read_text()[:5000])
    elif damage == "not json":
        path.write_bytes(b"\x80\x04cos\nsystem\n")
    elif damage == "directory":
        path.unlink()
        path.mkdir()
    elif damage == "fifo":
        path.unlink()
        os.mkfifo(path)
    elif damage == "huge":
        with open(path, "ab") as f:
            f.truncate(parse_tables.MAX_BYTES + 1)
    assert parse_tables._read(path, GRAMMAR) is None
    # ... and the parser is built from the grammar instead.
    p = parse_tables.load(GRAMMAR, SwirLexer, parser._SyntaxBuilder(), tmp_path)
    assert p.parse((ROOT / "examples" / "mlp.swir").read_text())


def test_the_installed_parser_reads_no_user_folder(monkeypatch, tmp_path):
    """The parser's tables come from the package (or memory), never $XDG_CACHE_HOME."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = parser._grammar_folder()
    assert folder is None or tmp_path not in folder.parents
