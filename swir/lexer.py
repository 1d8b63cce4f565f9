"""The tokenizer of the textual IR, plugged into Lark's LALR parser.

Lark's contextual lexer tries the terminals a parser state accepts one regex
at a time and pays a loop iteration per skipped space; on large modules that
was most of the parse time. This lexer scans with one compiled regex per token
(spaces folded in) and keeps the contextual decisions by asking the LALR table
which terminals the current parser state accepts: a word is a keyword only
where the keyword is expected (so ``min`` and ``max`` may still be attribute
names), a scalar type only where a type is expected, and ``<`` starts a type
only where a type is expected (elsewhere it is a comparison).

Token kinds and spellings are exactly the grammar's (``grammar/swir.lark``),
which stays the definition of the syntax.
"""

from __future__ import annotations

import re
from typing import Iterator

from lark import Token
from lark.lexer import Lexer

_SCALARS = {"f16", "f32", "f64", "i1", "i8", "i16", "i32", "i64", "index"}

# One alternative per token class; group names say the class. Order matters
# only where prefixes overlap (floats before ints, two-char operators first).
_TOKEN = re.compile(r"""
    [ \t\f]*(?:
      (?P<NL>(?:(?://[^\n]*)?\r?\n[ \t\f]*)+)
    | (?P<SIGIL>[%@'](?:[A-Za-z0-9_.$]+|"(?:[^"\\\n]|\\.)*"))
    | (?P<STRING>"(?:[^"\\\n]|\\.)*")
    | (?P<FLOAT>[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)
    | (?P<INT>0x[0-9a-fA-F]+|[0-9]+)
    | (?P<WORD>[A-Za-z_][A-Za-z0-9_.]*)
    | (?P<OP>->|>=|<=|==|!=|[-+*<>=,:(){}\[\]])
    | (?P<COMMENT>//[^\n]*)
    | (?P<END>\Z)
    )""", re.X)
_TYPE = re.compile(r"(?:buf|ldm)?<[^<>\n]*>")
_SIGIL_KIND = {"%": "VALUE", "@": "GLOBAL", "'": "LABEL"}
_RELOPS = {">=", "<=", "==", "!=", ">", "<"}


class LexError(Exception):
    """A character that starts no token; the parser adds the file name."""

    def __init__(self, message: str, line: int, col: int) -> None:
        super().__init__(message)
        self.line, self.col = line, col


class SwirLexer(Lexer):
    __future_interface__ = 1  # Lark passes the parser state to lex()

    def __init__(self, lexer_conf) -> None:
        # Lark names the grammar's anonymous strings ("to", "{", "->", ...);
        # map each spelling to its terminal name.
        self.literal: dict[str, str] = {}
        for t in lexer_conf.terminals:
            if t.pattern.type == "str":
                self.literal[t.pattern.value] = t.name

    def lex(self, lexer_state, parser_state) -> Iterator[Token]:
        text: str = lexer_state.text.text if hasattr(lexer_state.text, "text") \
            else lexer_state.text
        states = parser_state.parse_conf.states
        stack = parser_state.state_stack  # its top is the current LALR state
        new_token = Token._future_new  # Token(...) without the keyword shims
        literal = self.literal
        pos, line, line_start = 0, 1, 0
        match = _TOKEN.match
        while True:
            m = match(text, pos)
            if m is None:
                while text[pos] in " \t\f":
                    pos += 1
                raise LexError(_unexpected(text[pos]), line, pos - line_start + 1)
            kind = m.lastgroup
            start, end = m.start(kind), m.end()
            if kind == "END":
                return
            value = m.group(kind)
            col = start - line_start + 1
            accepts = states[stack[-1]]
            if kind == "NL":
                yield new_token("_NL", value, start, line, col)
                line += value.count("\n")
                line_start = start + value.rfind("\n") + 1
                pos = end
                continue
            if kind == "COMMENT":
                pos = end
                continue
            if kind == "SIGIL":
                name = _SIGIL_KIND[value[0]]
            elif kind == "WORD":
                name, value, end = self._word(text, start, value, accepts)
            elif kind == "OP":
                t = _TYPE.match(text, start) if value[0] == "<" and "TYPE" in accepts else None
                if t is not None:
                    value, end, name = t.group(), t.end(), "TYPE"
                elif value in _RELOPS and "RELOP" in accepts:
                    name = "RELOP"
                else:  # the parser reports it if it is not expected here
                    name = literal.get(value) or "RELOP"
            else:
                name = kind
            yield new_token(name, value, start, line, col)
            pos = end

    def _word(self, text: str, start: int, word: str, accepts: dict
              ) -> tuple[str, str, int]:
        """Classify a word by what the parser state accepts."""
        if "TYPE" in accepts:
            if word in ("buf", "ldm") and text.startswith("<", start + len(word)):
                t = _TYPE.match(text, start)
                if t is not None:
                    return "TYPE", t.group(), t.end()
            if word in _SCALARS:
                return "TYPE", word, start + len(word)
        end = start + len(word)
        name = self.literal.get(word)
        if name is not None and name in accepts:
            return name, word, end
        if word in ("true", "false") and "BOOL" in accepts:
            return "BOOL", word, end
        if word in ("inf", "nan") and "SPECIAL_FLOAT" in accepts:
            return "SPECIAL_FLOAT", word, end
        if word in ("func", "kernel") and "FUNC_KIND" in accepts:
            return "FUNC_KIND", word, end
        return "NAME", word, end


def _unexpected(ch: str) -> str:
    return "unexpected NUL byte" if ch == "\0" else f"unexpected character {ch!r}"
