"""Where the user created an op (Nervana Graph's DebugInfo).

Frames inside the axgraph package are skipped, so the location is the user's
own file and line even when an op is built by a library helper or a layer. A front
end that compiles another language (Axon) names its own source position instead,
with `source_position`: the ops it builds there record it, so errors about them
quote the program's line and column rather than the Python line that compiled it.
"""
from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager
from types import FrameType
from typing import Iterator, Optional, Tuple

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


class SourcePosition(tuple):
    """A `(file, line)` location in a front end's source, with a column and an excerpt.

    It is a `(file, line)` pair wherever one is expected; `column` and `excerpt`
    (the line with carets under the construct) let errors quote the position.
    """

    column: int
    excerpt: str

    def __new__(cls, file: str, line: int, column: int = 0, excerpt: str = ""
                ) -> "SourcePosition":
        position = super().__new__(cls, (file, line))
        position.column = column
        position.excerpt = excerpt
        return position

    def __reduce__(self) -> tuple:  # pickled and copied with its column and excerpt
        return (SourcePosition, (self[0], self[1], self.column, self.excerpt))


class _Current(threading.local):
    """The position set by `source_position`, per thread (one thread's front end must not
    relabel the ops another thread builds at the same time)."""

    position: Optional[SourcePosition] = None


_current = _Current()


@contextmanager
def source_position(position: SourcePosition) -> Iterator[None]:
    """Within the block, `user_location` is `position`: what is built there records it.

    Parameters
    ----------
    position : SourcePosition
        Where, in the front end's source, the block's objects come from.
    """
    previous, _current.position = _current.position, position
    try:
        yield
    finally:
        _current.position = previous


def user_location(skip: int = 1, constructing: object = None) -> Tuple[str, int]:
    """(file, line) of the innermost frame outside the axgraph package.

    Frames of the `__init__` methods building `constructing` are skipped too: a
    user's own subclass constructor is not where the user made the object. Inside
    `source_position`, it is that position instead.
    """
    if _current.position is not None:
        return _current.position
    frame: Optional[FrameType] = sys._getframe(skip)
    while frame is not None and (
            frame.f_code.co_filename.startswith(_PACKAGE_DIR)
            or (constructing is not None and frame.f_code.co_name == "__init__"
                and frame.f_locals.get("self") is constructing)):
        frame = frame.f_back
    if frame is None:
        return ("<unknown>", 0)
    return (frame.f_code.co_filename, frame.f_lineno)


class DebugInfo:
    """Mixin recording the creating file and line; see `file_info`."""

    __slots__ = ()
    _location: Tuple[str, int]

    @property
    def file(self) -> str:
        """The file whose code created this object."""
        return self._location[0]

    @property
    def lineno(self) -> int:
        """The line in `file` that created this object."""
        return self._location[1]

    @property
    def file_info(self) -> str:
        """`File "x.py", line N`: the form editors and tracebacks make clickable."""
        return f'File "{self.file}", line {self.lineno}'
