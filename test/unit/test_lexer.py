"""swir's lexer must agree with the grammar: Lark's own contextual lexer over
grammar/swir.lark and swir.lexer.SwirLexer give identical parse trees (token
types included), or both reject, on every test input and on mutants of them.

One deliberate difference: Lark's lexer matches a keyword at the start of a
longer word (``stageoop`` lexes as ``stage`` + ``oop``); swir reads whole words,
so such input is rejected."""

from __future__ import annotations

import random
from pathlib import Path

import lark
import pytest

from swir.lexer import SwirLexer
from swir.parser import grammar_text

ROOT = Path(__file__).resolve().parents[2]


def _parsers() -> tuple[lark.Lark, lark.Lark]:
    g = grammar_text()
    reference = lark.Lark(g, parser="lalr", lexer="contextual", maybe_placeholders=True)
    ours = lark.Lark(g, parser="lalr", lexer=SwirLexer, maybe_placeholders=True)
    return reference, ours


REFERENCE, OURS = _parsers()


def _outcome(parser: lark.Lark, text: str) -> object:
    try:
        return parser.parse(text)
    except lark.exceptions.UnexpectedInput:
        return "rejected"
    except Exception as e:  # swir's lexer reports stray characters itself
        return "rejected" if type(e).__name__ == "LexError" else e


def _inputs() -> list[tuple[str, str]]:
    out = []
    for path in sorted((ROOT / "test").rglob("*.swir")) + [ROOT / "examples" / "mlp.swir"]:
        text = path.read_text(errors="replace")  # test/Inputs holds non-UTF-8 files
        for i, chunk in enumerate(text.split("\n// -----\n")):
            out.append((f"{path.relative_to(ROOT)}#{i}", chunk + "\n"))
    return out


INPUTS = _inputs()


@pytest.mark.parametrize("name, text", INPUTS, ids=[n for n, _ in INPUTS])
def test_lexers_agree_on_test_inputs(name: str, text: str) -> None:
    assert _outcome(OURS, text) == _outcome(REFERENCE, text)


_KEYWORDS = {t.name for t in REFERENCE.terminals
             if (t.pattern.type == "str" and t.pattern.value.isalpha()) or t.name == "FUNC_KIND"}


def _reference_splits_a_word(text: str) -> bool:
    """Does Lark's lexer end a keyword token in the middle of a word?"""
    try:
        for tok in REFERENCE.parse_interactive(text).iter_parse():
            end = tok.end_pos
            if tok.type in _KEYWORDS and end < len(text) and \
                    (text[end].isalnum() or text[end] in "_.$"):
                return True
    except lark.exceptions.UnexpectedInput:
        pass
    return False


def _mutate(text: str, rng: random.Random) -> str:
    pieces = ["<", ">", "<=", "=", "==", "-", "->", "{", "}", "[", "]", ":", ",", "(", ")",
              "min", "max", "to", "step", "dense", "f32", "index", "buf<4 x f32>", "<2 x i1>",
              "%x", "@g", "'b", "1.5", "-3", "inf", "true", "\n", " ", "//c\n", "x", "0x1f",
              "kernel", "func", "cpe", "else", "floordiv"]
    pos = rng.randrange(len(text) + 1)
    kind = rng.randrange(3)
    if kind == 0:
        return text[:pos] + rng.choice(pieces) + text[pos:]
    if kind == 1:
        return text[:pos] + text[pos + rng.randrange(1, 8):]
    return text[:pos] + rng.choice(pieces) + text[pos + rng.randrange(1, 6):]


def test_lexers_agree_on_mutants() -> None:
    rng = random.Random(20261122)
    texts = [t for _, t in INPUTS]
    agreed = accepted = 0
    for _ in range(600):
        text = _mutate(rng.choice(texts), rng)
        ref = _outcome(REFERENCE, text)
        if _reference_splits_a_word(text):
            ref = "rejected"
        assert _outcome(OURS, text) == ref, text
        agreed += 1
        accepted += ref != "rejected"
    # Both accepting and rejecting mutants must occur, or the test proves little.
    assert 0 < accepted < agreed
