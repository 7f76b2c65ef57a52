"""Where the user created an op (Nervana Graph's DebugInfo).

Frames inside the axgraph package are skipped, so the location is the user's
own file and line even when an op is built by a library helper or a layer.
"""
from __future__ import annotations

import os
import sys
from types import FrameType
from typing import Optional, Tuple

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_location(skip: int = 1, constructing: object = None) -> Tuple[str, int]:
    """(file, line) of the innermost frame outside the axgraph package.

    Frames of the `__init__` methods building `constructing` are skipped too: a
    user's own subclass constructor is not where the user made the object.
    """
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
