"""Axon's tokens, each with its span.

Names start with a letter and go on with letters, digits, `_` and `'`; `'a` is a type
variable; numbers are ints (`784`, `~1`) or floats (`0.5`, `1e-3`); comments are `(* ... *)`
and nest, as in Standard ML.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List

from .errors import AxonSyntaxError
from .source import Source, Span

KEYWORDS = frozenset({"val", "fun", "fn", "let", "in", "end", "forall"})

#: Symbols, longest first so `=>` is not read as `=` then `>`.
SYMBOLS = ("=>", "->", "(", ")", "[", "]", ",", ":", "=", "+", "-", "*", "/", "@", "~", ";", "_", ".", "#")


@dataclass(frozen=True)
class Token:
    """One token: its kind ("name", "tyvar", "int", "float", "keyword", "symbol", "eof"),
    its text and where it is."""

    kind: str
    text: str
    span: Span

    def is_(self, text: str) -> bool:
        """Whether this is the keyword or symbol `text`."""
        return self.kind in ("keyword", "symbol") and self.text == text


def tokenize(source: Source) -> List[Token]:
    """The tokens of `source`, ending with an "eof" token.

    Raises AxonSyntaxError at a character no token starts with, or an unclosed comment.
    """
    text = source.text
    tokens: List[Token] = []
    index, line, line_start = 0, 1, 0

    def span(start: int, end: int) -> Span:
        return Span(line, start - line_start + 1, line, end - line_start + 1)

    while index < len(text):
        char = text[index]
        if char == "\n":
            index, line, line_start = index + 1, line + 1, index + 1
        elif char.isspace():
            index += 1
        elif text.startswith("(*", index):
            index, line, line_start = _skip_comment(source, index, line, line_start)
        elif char.isalpha():
            end = index + 1
            while end < len(text) and (text[end].isalnum() or text[end] in "_'"):
                end += 1
            word = text[index:end]
            tokens.append(Token("keyword" if word in KEYWORDS else "name", word, span(index, end)))
            index = end
        elif char == "'" and index + 1 < len(text) and text[index + 1].isalpha():
            end = index + 2
            while end < len(text) and (text[end].isalnum() or text[end] == "_"):
                end += 1
            tokens.append(Token("tyvar", text[index:end], span(index, end)))
            index = end
        elif char.isdigit() or (char == "~" and text[index + 1:index + 2].isdigit()):
            end, kind = _number_end(text, index + 1 if char == "~" else index)
            tokens.append(Token(kind, text[index:end].replace("~", "-"), span(index, end)))
            index = end
        else:
            symbol = next((s for s in SYMBOLS if text.startswith(s, index)), None)
            if symbol is None:
                raise AxonSyntaxError(f"unexpected character {char!r}",
                                      [(span(index, index + 1), "here")], source)
            tokens.append(Token("symbol", symbol, span(index, index + len(symbol))))
            index += len(symbol)
    last = tokens[-1].span if tokens else Span(1, 1, 1, 1)
    tokens.append(Token("eof", "", Span(last.end_line, last.end_column, last.end_line,
                                        last.end_column + 1)))
    return tokens


def _number_end(text: str, index: int):
    end = index
    while end < len(text) and text[end].isdigit():
        end += 1
    kind = "int"
    if end + 1 < len(text) and text[end] == "." and text[end + 1].isdigit():
        kind, end = "float", end + 1
        while end < len(text) and text[end].isdigit():
            end += 1
    if end < len(text) and text[end] in "eE":
        exponent = end + 1
        if exponent < len(text) and text[exponent] in "+-":
            exponent += 1
        if exponent < len(text) and text[exponent].isdigit():
            kind, end = "float", exponent
            while end < len(text) and text[end].isdigit():
                end += 1
    return end, kind


def _skip_comment(source: Source, index: int, line: int, line_start: int):
    """The position after the comment opening at `index` (comments nest)."""
    text = source.text
    opened = Span(line, index - line_start + 1, line, index - line_start + 3)
    depth = 0
    while index < len(text):
        if text.startswith("(*", index):
            depth, index = depth + 1, index + 2
        elif text.startswith("*)", index):
            depth, index = depth - 1, index + 2
            if depth == 0:
                return index, line, line_start
        else:
            if text[index] == "\n":
                line, line_start = line + 1, index + 1
            index += 1
    raise AxonSyntaxError("this comment is never closed (a `*)` is missing)",
                          [(opened, "opened here")], source)
