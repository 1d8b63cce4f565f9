"""Inputs at the extremes of size and nesting: each is handled, or rejected with a
located diagnostic, in bounded time (no RecursionError, no runaway analysis)."""

from __future__ import annotations

import pytest

from swir.diagnostics import Diagnostic, Location, SourceManager
from swir.parser import parse_module
from swir.printer import print_module
from swir.verifier import VerificationError, verify


def _kernel(body: str, buf: str = "buf<200000 x f32>") -> str:
    return (f'module "m"\nstage loop\nkernel @k(%A: {buf}) {{\n  %z = const 0.0 : f32\n'
            f'{body}}}\n')


def test_long_flat_index_expression():
    # 100,000 terms, left-associated: must not recurse once per term.
    text = _kernel("  store %z, %A[" + "+".join(["1"] * 100_000) + "]\n")
    m = parse_module(text, "long.swir")
    verify(m)
    assert "store %z, %A[100000]" in print_module(m)


def test_deeply_nested_loops_parse_verify_and_print():
    depth = 300
    opens = "".join(f"{'  ' * (i + 1)}for %i{i} = 0 to 2 {{\n" for i in range(depth))
    closes = "".join(f"{'  ' * (depth - i)}}}\n" for i in range(depth))
    inner = "  " * (depth + 1) + "store %z, %A[" + " + ".join(f"%i{i}" for i in range(depth)) + "]\n"
    m = parse_module(_kernel(opens + inner + closes), "deep.swir")
    verify(m)
    text = print_module(m)
    assert print_module(parse_module(text)) == text


def test_nesting_beyond_the_recursion_limit_is_a_located_diagnostic():
    depth = 30_000
    text = _kernel("  store %z, %A[" + "(" * depth + "0" + ")" * depth + "]\n")
    try:
        verify(parse_module(text, "parens.swir"))
    except Diagnostic as d:
        assert d.loc is not None and d.loc.file == "parens.swir"
        assert "nested too deeply" in d.message


def test_bounds_analysis_has_a_budget():
    # Each loop's bound is a min over the previous variable: distributing the
    # mins is exponential in depth, so the verifier must give up, failing closed.
    n = 24
    lines = ["  for %i0 = 0 to 4 {"]
    for k in range(1, n):
        lines.append(f"  for %i{k} = 0 to min(%i{k - 1} + 1, 4) {{")
    lines.append("    store %z, %A[" + " + ".join(f"%i{k}" for k in range(n)) + "]")
    lines += ["  }"] * n
    text = _kernel("\n".join(lines) + "\n", "buf<100 x f32>")
    with pytest.raises(VerificationError, match="too complex to bound statically"):
        verify(parse_module(text, "budget.swir"))


def test_long_source_lines_are_quoted_as_a_window():
    sources = SourceManager()
    line = "x" * 5000 + "!" + "y" * 5000
    sources.add("f.swir", line + "\n")
    text = Diagnostic("bad", Location("f.swir", 1, 5001)).render(sources)
    head, quoted, caret = text.split("\n")
    assert head == "f.swir:1:5001: error: bad"
    assert len(quoted) < 200 and quoted.startswith("...") and quoted.endswith("...")
    assert quoted[len(caret) - 1] == "!"
