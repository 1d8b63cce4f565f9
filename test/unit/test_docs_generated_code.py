"""docs/codegen.md's statements about generated code stay true: its example
layers_slave.c is what the command it names writes today, and the C it quotes
from layers_mix.h is in the files swir-cg writes (the MPI Makefile's comment:
test/CodeGen/mpi-program.swir)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
ROOT = Path(__file__).parents[2]
DOC = (ROOT / "docs" / "codegen.md").read_text()


def section(title: str) -> str:
    start = DOC.index(title)
    nxt = re.search(r"^#{2,3} ", DOC[start + len(title):], re.M)
    return DOC[start:start + len(title) + (nxt.start() if nxt else len(DOC))]


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Path:
    """The project the doc's command writes (its `-o out` redirected)."""
    m = re.search(r"`(swir-cg test/CodeGen/paper-matmul\.swir -o out[^`]*)`",
                  section("## The generated files (for the paper matmul)"))
    assert m, "the doc no longer names the command of its example"
    args = shlex.split(m.group(1))
    out = tmp_path_factory.mktemp("doc") / "out"
    args[args.index("-o") + 1] = str(out)
    subprocess.run([str(BIN / args[0]), *args[1:], "-q"], cwd=ROOT, check=True)
    return out


def test_the_example_kernel_is_what_swir_cg_writes(example):
    m = re.search(r"### layers_slave\.c\n\n```c\n(.*?)```\n", DOC, re.S)
    assert m, "no C block under ### layers_slave.c"
    assert m.group(1) in (example / "layers_slave.c").read_text()


def test_the_quoted_sunway_wait_is_the_generated_one(example):
    quoted = re.search(r"^ {6}(do \{ while .*memb.*)$", section("### layers_slave.c"), re.M)
    assert quoted, "the Waits bullet no longer quotes SWIR_WAIT"
    assert quoted.group(1) in (example / "layers_mix.h").read_text()


def test_the_quoted_fp_mode_is_the_generated_one(example):
    body = re.search(r"\*\*Rule\.\*\* Every spawned CPE kernel's first statement.*?\n\n(.*?)\n\n",
                     section("### Floating-point mode on the CPEs"), re.S)
    assert body
    mix = (example / "layers_mix.h").read_text()
    for line in body.group(1).splitlines():
        assert line.strip().rstrip("\\").strip() in mix, line
    assert "    SWIR_CPE_FP_INIT();\n" in (example / "layers_slave.c").read_text()

