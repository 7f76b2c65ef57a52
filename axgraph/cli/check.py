"""``axgraph check FILE``: the shapes and axes of a graph worked out without data.

Prints each node with its axes and their symbolic sizes, the sizes, and the checks
left for when data is fed; an error (a shape conflict, an axes mismatch, a syntax
error) is printed with the line of the file it comes from, and the exit status is 1.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..op_graph.printing import format_graph
from .failures import CommandError, report_failure
from .graph_files import KINDS, kind_of


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Declare ``check``'s options on the command line's `subparsers`.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        What ``add_subparsers`` returned for the ``axgraph`` parser.

    Returns
    -------
    argparse.ArgumentParser
        The subcommand's parser; its ``run`` default is this module's `run`.
    """
    kinds = ", ".join(f"{suffix} ({kind.description})" for suffix, kind in KINDS.items())
    parser = subparsers.add_parser(
        "check", help="check a graph's shapes and axes without data",
        description=f"Infer every node's axes and symbolic sizes without data; print them, "
                    f"the sizes, and the checks left for when data is fed. Files: {kinds}. "
                    f"Exit status 1 when the file has an error.")
    parser.add_argument("file", type=Path, metavar="FILE", help="the file to check")
    parser.set_defaults(run=run)
    return parser


def check_text(path: Path) -> str:
    """What ``axgraph check`` prints for a file without errors.

    Parameters
    ----------
    path : Path
        The file.

    Returns
    -------
    str
        The report.

    Raises
    ------
    CommandError, AxgraphError
        The file cannot be read, or its shapes or axes are wrong.
    """
    kind = kind_of(path)
    if kind.check is not None:
        return kind.check(path)
    graph = kind.load(path)
    return format_graph(graph.results, shapes=True)


def run(args: argparse.Namespace) -> int:
    """Check `args.file`; 0 if it has no error, else the error printed and 1.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed ``axgraph check`` options.

    Returns
    -------
    int
        The exit status.

    Raises
    ------
    CommandError
        An unknown kind of file, a missing file or optional reader.
    """
    try:
        text = check_text(args.file)
    except CommandError:
        raise
    except Exception as error:  # the user's program failing is what check reports
        return report_failure(args.file, error, sys.stdout)
    print(text)
    print(f"{args.file}: ok, no shape or axes errors")
    return 0


__all__ = ["add_parser", "check_text", "run"]
