"""swir-cg's output directory: written completely or not at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from swir.codegen import project
from swir.codegen.project import WriteError, write_project


def test_a_failed_write_leaves_the_old_directory_and_no_debris(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.c").write_text("old")
    calls = []
    real = Path.write_bytes

    def flaky(self, data):
        calls.append(self.name)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", flaky)
    files = {"a.c": b"1", "b.c": b"2", "emu/c.h": b"3", "d.c": b"4"}
    with pytest.raises(WriteError, match="No space left on device"):
        write_project(files, str(out), force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]      # no temporaries left
    assert sorted(p.name for p in out.iterdir()) == ["old.c"]


def test_replacing_needs_force_and_a_directory(tmp_path):
    out = tmp_path / "out"
    write_project({"a.c": b"1"}, str(out), force=False)
    with pytest.raises(WriteError, match="use --force"):
        write_project({"b.c": b"2"}, str(out), force=False)
    write_project({"b.c": b"2"}, str(out), force=True)
    assert sorted(p.name for p in out.iterdir()) == ["b.c"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(WriteError, match="not a directory"):
        write_project({"a.c": b"1"}, str(tmp_path / "file"), force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "out"]


def test_runtime_sources_ship_with_the_package():
    files = project.RUNTIME_FILES
    from importlib import resources
    root = resources.files("swir.codegen") / "runtime"
    assert all((root / f).is_file() for f in files)
