"""``axgraph export FILE --onnx OUT.onnx``: write the graph a file holds as an ONNX model.

The ONNX exporter (`axgraph.frontends.onnx.export`, the ``onnx`` extra) is imported
only here; without it the command says so and exits with status 1.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .failures import CommandError, report_failure
from .graph_files import KINDS, load, optional_function


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Declare ``export``'s options on the command line's `subparsers`.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        What ``add_subparsers`` returned for the ``axgraph`` parser.

    Returns
    -------
    argparse.ArgumentParser
        The subcommand's parser; its ``run`` default is this module's `run`.
    """
    parser = subparsers.add_parser(
        "export", help="write a graph as an ONNX model",
        description=f"Write the graph a file holds ({', '.join(KINDS)}) as an ONNX model, its "
                    f"placeholders as the model's inputs (needs pip install axgraph[onnx]).")
    parser.add_argument("file", type=Path, metavar="FILE", help="the file holding the graph")
    parser.add_argument("--onnx", type=Path, required=True, metavar="OUT",
                        help="the ONNX file to write")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Export `args.file` to `args.onnx`; 0 when written, 1 on an error.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed ``axgraph export`` options.

    Returns
    -------
    int
        The exit status.

    Raises
    ------
    CommandError
        The ONNX exporter is not installed, or the file cannot be read.
    """
    export = optional_function("axgraph.frontends.onnx", "export", "ONNX")
    try:
        graph = load(args.file)
    except CommandError:
        raise
    except Exception as error:  # the user's program failing
        return report_failure(args.file, error, sys.stderr)
    export(graph.results, args.onnx, inputs=graph.inputs)
    print(f"written to {args.onnx}", file=sys.stderr)
    return 0


__all__ = ["add_parser", "run"]
