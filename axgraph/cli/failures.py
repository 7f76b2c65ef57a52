"""How a subcommand fails: `CommandError` for what it finds wrong, and errors told with
the line of the user's file they point at."""
from __future__ import annotations

import linecache
import os
import sys
import traceback
from typing import List, Optional, TextIO, Tuple

from ..errors import AxgraphError, AxgraphValueError

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class CommandError(AxgraphValueError):
    """A command line subcommand could not do what it was asked: a file of an unknown kind,
    a missing optional package, a benchmark that does not exist. Exit status 1."""


def report_failure(path: object, error: BaseException, stream: TextIO) -> int:
    """Print that the user's file failed (its program raised, or its graph is wrong) with
    where, as the subcommands that read a file do; the exit status 1.

    Parameters
    ----------
    path : path-like
        The file the user gave.
    error : BaseException
        What reading or checking it raised.
    stream : text stream
        Where the report goes (``check`` reports on standard output, the others on
        standard error).

    Returns
    -------
    int
        1, the exit status of a failure.
    """
    print(f"{path}: error", file=stream)
    print(describe_error(error, str(path)), file=stream)
    return 1


def describe_error(error: BaseException, user_file: Optional[str] = None) -> str:
    """`error` as the command line prints it: its kind and message, then where in the
    user's own code it points (file:line and the line itself).

    Parameters
    ----------
    error : BaseException
        The error.
    user_file : str, optional
        The file the user gave: for an error that is not axgraph's (a bug in the user's
        program), the frames of that file are shown, as a traceback would.

    Returns
    -------
    str
        The lines, joined by newlines.
    """
    if isinstance(error, CommandError):
        return error.message
    if isinstance(error, AxgraphError):
        lines = [f"{type(error).__name__}: {error.message}"]
        if error.location is not None and _is_users(error.location[0]):
            lines += _quoted(error.location)
        return "\n".join(lines)
    lines = [f"{type(error).__name__}: {error}"]
    if user_file is not None:
        target = os.path.abspath(user_file)
        for frame in traceback.extract_tb(error.__traceback__):
            if os.path.abspath(frame.filename) == target and frame.lineno is not None:
                lines += _quoted((frame.filename, frame.lineno))
    return "\n".join(lines)


def _is_users(file: str) -> bool:
    """Whether `file` is the user's code: a file that exists, outside axgraph, and not the
    script that started this process (the ``axgraph`` launcher)."""
    path = os.path.abspath(file)
    return (os.path.isfile(path) and not path.startswith(_PACKAGE_DIR)
            and path != os.path.abspath(sys.argv[0]))


def _quoted(location: Tuple[str, int]) -> List[str]:
    file, line = location
    lines = [f"  at {file}:{line}"]
    text = linecache.getline(file, line).rstrip()
    if text:
        lines.append(f"    {text.strip()}")
    return lines
