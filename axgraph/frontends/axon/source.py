"""Axon source text and positions in it: spans, `line:column` and caret excerpts.

Every token, syntax node and constraint carries a `Span`, so an error can quote each
sub-expression that contributed to it, the way a compiler for a typed functional
language does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True, order=True)
class Span:
    """A stretch of source: from (line, column) up to (end_line, end_column), 1-based.

    The end column is exclusive, so `Span(3, 5, 3, 8)` covers three characters.
    """

    line: int
    column: int
    end_line: int
    end_column: int

    def to(self, other: "Span") -> "Span":
        """The span from this one's start to `other`'s end."""
        return Span(self.line, self.column, other.end_line, other.end_column)

    @property
    def start(self) -> str:
        """`line:column` of the first character."""
        return f"{self.line}:{self.column}"


class Source:
    """An Axon program's text, with a name to show in messages (a file path, or none).

    Parameters
    ----------
    text : str
        The program.
    name : str, optional
        Where it came from (a file path); positions are shown as `name:line:column`.
    """

    def __init__(self, text: str, name: Optional[str] = None):
        self.text = text
        self.name = name
        self.lines = text.splitlines() or [""]

    def where(self, span: Span) -> str:
        """`line:column` of the span's start, after the source's name if it has one."""
        return f"{self.name}:{span.start}" if self.name else span.start

    def excerpt(self, span: Span, indent: str = "    ") -> str:
        """The span's first line, and carets under the span on it.

        A span running over several lines is underlined to the end of its first line.
        """
        if not 1 <= span.line <= len(self.lines):
            return ""
        text = self.lines[span.line - 1].expandtabs(1)
        end = span.end_column if span.end_line == span.line else len(text) + 1
        width = max(1, end - span.column)
        return f"{indent}{text.rstrip()}\n{indent}{' ' * (span.column - 1)}{'^' * width}"
