"""The errors of the Axon front end: each names every position that contributed.

An error's message starts with what went wrong, then lists each contributing
sub-expression as `line:column: why`, with an excerpt of the source and carets under it.
`positions` holds the same `(line, column)` pairs, sorted, for programs that read them.
"""
from __future__ import annotations

from typing import Iterable, Optional, Sequence, Tuple

from ...debug_info import user_location
from ...errors import AxgraphTypeError, AxgraphValueError, ShapeError
from .source import Source, Span

#: A contributing position: where, and why it matters (shown after `line:column:`).
Cause = Tuple[Span, str]


def located_message(headline: str, causes: Iterable[Cause], source: Optional[Source]) -> str:
    """`headline`, then each cause in source order with its excerpt."""
    lines = [headline]
    seen = set()
    for span, why in sorted(causes, key=lambda cause: (cause[0], cause[1])):
        if (span, why) in seen:
            continue
        seen.add((span, why))
        where = source.where(span) if source is not None else span.start
        lines.append(f"  {where}: {why}" if why else f"  {where}")
        if source is not None:
            lines.append(source.excerpt(span))
    return "\n".join(lines)


class _Located:
    """What the three error classes share: the positions and how the message is made."""

    positions: Tuple[Tuple[int, int], ...]

    def _init_located(self, headline: str, causes: Sequence[Cause], source: Optional[Source]):
        self.headline = headline
        self.positions = tuple(sorted({(span.line, span.column) for span, _ in causes}))
        return located_message(headline, causes, source)


class AxonSyntaxError(AxgraphValueError, _Located):
    """An Axon program that does not parse: a stray token, an unclosed bracket, a bad name.

    Attributes
    ----------
    headline : str
        What is wrong, without the positions.
    positions : tuple of (int, int)
        The (line, column) of each position the message quotes.
    """

    def __init__(self, headline: str, causes: Sequence[Cause], source: Optional[Source] = None):
        super().__init__(self._init_located(headline, causes, source), user_location())


class AxonTypeError(AxgraphTypeError, _Located):
    """A value used as what it is not (a function as a tensor, a pair as a function), an
    unknown name, or a builtin given the wrong kind of argument.

    Attributes
    ----------
    headline : str
        What is wrong, without the positions.
    positions : tuple of (int, int)
        The (line, column) of every sub-expression that contributed.
    """

    def __init__(self, headline: str, causes: Sequence[Cause], source: Optional[Source] = None):
        super().__init__(self._init_located(headline, causes, source), user_location())


class AxonShapeError(ShapeError, _Located):
    """Shapes that cannot fit: dims that differ, ranks that differ, a window larger than
    its input, a size that would have to be a fraction.

    Attributes
    ----------
    headline : str
        What is wrong, without the positions.
    positions : tuple of (int, int)
        The (line, column) of every sub-expression that contributed.
    """

    def __init__(self, headline: str, causes: Sequence[Cause], source: Optional[Source] = None):
        super().__init__(self._init_located(headline, causes, source), user_location())

