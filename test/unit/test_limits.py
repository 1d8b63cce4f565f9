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


# Every kind of region the IR has, nested 200 deep: the loop stage's `for`,
# `parallel` and `if` (with and without `else`) -- the only ops whose regions
# may nest -- each alone and interleaved; and the graph stage's `fused`, whose
# region may not hold another region: 200 of those nested parse and print, and
# the verifier rejects them with a located diagnostic (no RecursionError).
# A function body is a region too, but one cannot nest in another.
DEPTH = 200


def _round_trip(text: str, name: str) -> str:
    m = parse_module(text, name)
    verify(m)
    out = print_module(m)
    assert print_module(parse_module(out)) == out
    return out


def _nest(heads: list[str], inner: str, elses: list[str | None]) -> str:
    """``heads[i] {`` nested in order around ``inner``; ``elses[i]``, when
    given, is the body of level i's else branch."""
    lines = [f"{'  ' * (i + 1)}{h} {{" for i, h in enumerate(heads)]
    lines.append("  " * (len(heads) + 1) + inner)
    for i in reversed(range(len(heads))):
        pad = "  " * (i + 1)
        if elses[i] is None:
            lines.append(f"{pad}}}")
        else:
            lines += [f"{pad}}} else {{", f"{pad}  {elses[i]}", f"{pad}}}"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("kind", ["for", "parallel", "if", "if-else", "mixed"])
def test_every_region_kind_nested_200_deep(kind):
    heads, elses, ivs = [], [], []
    for i in range(DEPTH):
        k = kind if kind != "mixed" else ("for", "parallel", "if-else", "if")[i % 4]
        if k in ("for", "parallel"):
            heads.append(f"{k} %i{i} = 0 to 2")
            ivs.append(f"%i{i}")
            elses.append(None)
        else:
            heads.append(f"if %c >= {i % 3}")
            elses.append(f"store %z, %A[{i}]" if k == "if-else" else None)
    inner = "store %z, %A[" + (" + ".join(ivs) or "0") + "]"
    body = "  %c = const 1 : index\n" + _nest(heads, inner, elses)
    out = _round_trip(_kernel(body), f"deep-{kind}.swir")
    assert out.count(" else {") == DEPTH - elses.count(None)
    assert sum(out.count(f"{w} %") for w in ("for", "parallel", "if")) == DEPTH


def test_fused_groups_nested_200_deep_are_a_located_diagnostic():
    t = "<4 x f32>"
    lines = ['module "m"', "stage graph", "", f"func @main(%x: {t}) -> {t} {{", "'entry:"]
    for i in range(DEPTH):
        pad = "  " * (i + 1)
        arg = "%x" if i == 0 else f"%a{i - 1}"
        lines += [f"{pad}%y{i} = fused {arg} : {t} {{", f"{pad}'g{i}(%a{i}: {t}):"]
    for i in reversed(range(DEPTH)):
        pad = "  " * (i + 2)
        src = f"%a{i}" if i == DEPTH - 1 else f"%y{i + 1}"
        lines += [f"{pad}%r{i} = relu {src} : {t}", f"{pad}yield %r{i}", "  " * (i + 1) + "}"]
    lines += ["  return %y0", "}", ""]
    m = parse_module("\n".join(lines), "fused.swir")
    out = print_module(m)
    assert print_module(parse_module(out)) == out and out.count("= fused") == DEPTH
    with pytest.raises(VerificationError) as e:
        verify(m)
    d = e.value.diagnostics[0]
    assert d.loc.file == "fused.swir" and "cannot be inside a fused group" in d.message


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
