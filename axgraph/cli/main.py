"""The ``axgraph`` program: one argparse subcommand per module, and the exit status."""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from . import bench, check, export, show, train
from ..errors import AxgraphError
from .failures import CommandError, describe_error

#: The subcommands, in the order ``axgraph --help`` lists them; each module has
#: ``add_parser(subparsers)``, which makes its parser and sets ``run`` to its function.
COMMANDS = (train, check, show, export, bench)

#: Exit statuses: all went well; the command found an error or failed; a usage error
#: (argparse's own, for unknown options and missing arguments).
OK, FAILED, USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    """The parser of the whole command line, subcommands included.

    Returns
    -------
    argparse.ArgumentParser
        The parser; a parsed namespace's ``run`` is the subcommand's function.
    """
    parser = argparse.ArgumentParser(
        prog="axgraph", description="axgraph: a compiler for tensor programs whose "
        "dimensions are named axes. Exit status: 0 ok, 1 an error found or a failure, "
        "2 a usage error.")
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"axgraph {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command line.

    Parameters
    ----------
    argv : list of str, optional
        The arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0 ok, 1 an error found or a failure, 2 a usage error.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return USAGE
    try:
        return args.run(args)
    except CommandError as error:
        print(f"axgraph {args.command}: error: {error.message}", file=sys.stderr)
        return FAILED
    except AxgraphError as error:
        print(f"axgraph {args.command}: error: {describe_error(error)}", file=sys.stderr)
        return FAILED
    except KeyboardInterrupt:
        print(f"axgraph {args.command}: interrupted", file=sys.stderr)
        return 130
