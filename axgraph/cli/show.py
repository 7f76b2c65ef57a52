"""``axgraph show FILE``: the picture of a graph (text, DOT, SVG or PNG), or with
``--memory`` its memory plan as a chart.

SVG and PNG are drawn by Graphviz's ``dot`` program when it is installed; without it
the DOT text is written instead (to ``OUT`` with the suffix ``.dot``), with a note.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from ..dims import Dim
from ..op_graph.op import Op
from ..op_graph.printing import format_graph
from ..visualize import graph_to_dot
from .failures import CommandError, report_failure
from .graph_files import KINDS, GraphFile, load

FORMATS = ("text", "dot", "svg", "png")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Declare ``show``'s options on the command line's `subparsers`.

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
        "show", help="draw a graph, or its memory plan",
        description="Draw the graph a file holds: as text (ng.format_graph), DOT, or SVG/PNG "
                    "through Graphviz's dot program (DOT text with a note when dot is not "
                    "installed). --memory charts the cpu transformer's memory plan instead "
                    "(a PNG, needs matplotlib).")
    parser.add_argument("file", type=Path, metavar="FILE", help=f"a {' or '.join(KINDS)} file")
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="what to draw (default text)")
    parser.add_argument("-o", "--output", type=Path, metavar="OUT",
                        help="where to write (default: standard output; a PNG to FILE's name "
                             "with .png, a memory chart with _memory.png)")
    parser.add_argument("--memory", action="store_true",
                        help="chart the memory plan of the graph's computation on the cpu "
                             "transformer (a PNG; it runs once on zeros)")
    parser.add_argument("--size", action="append", default=[], metavar="NAME=N",
                        help="with --memory: the value of a symbolic size (repeatable)")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Draw `args.file` as asked; 0 when written, 1 when the file has an error.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed ``axgraph show`` options.

    Returns
    -------
    int
        The exit status.

    Raises
    ------
    CommandError
        The file cannot be read, dot failed, or a size is missing for --memory.
    """
    sizes = _parse_sizes(args.size)
    try:
        graph = load(args.file)
    except CommandError:
        raise
    except Exception as error:  # the user's program failing
        return report_failure(args.file, error, sys.stderr)
    if args.memory:
        out = args.output or Path(args.file.stem + "_memory.png")
        _draw_memory(graph, sizes, out)
        print(f"memory plan written to {out}", file=sys.stderr)
        return 0
    if args.format == "text":
        return _emit(format_graph(graph.results, shapes=True) + "\n", args.output)
    dot = graph_to_dot(graph.results, shapes=True)
    if args.format == "dot":
        return _emit(dot, args.output)
    program = shutil.which("dot")
    if program is None:
        out = args.output.with_suffix(".dot") if args.output else None
        print(f"note: Graphviz's dot program is not installed (apt install graphviz), so this "
              f"is the DOT text{f' in {out}' if out else ''}; render it with "
              f"dot -T{args.format}", file=sys.stderr)
        return _emit(dot, out)
    drawn = subprocess.run([program, f"-T{args.format}"], input=dot.encode(),
                           capture_output=True, check=False)
    if drawn.returncode != 0:
        raise CommandError(f"dot failed (exit status {drawn.returncode}): "
                           f"{drawn.stderr.decode(errors='replace').strip()}")
    if args.format == "png" and args.output is None:
        args.output = Path(args.file.stem + ".png")
    return _emit(drawn.stdout, args.output)


def _emit(content, out: Optional[Path]) -> int:
    """Write `content` (str or bytes) to `out`, or to standard output; 0."""
    if out is None:
        if isinstance(content, bytes):
            sys.stdout.buffer.write(content)
        else:
            sys.stdout.write(content)
        return 0
    try:
        if isinstance(content, bytes):
            out.write_bytes(content)
        else:
            out.write_text(content, encoding="utf-8")
    except OSError as error:
        raise CommandError(f"cannot write {out}: {error.strerror or error}") from None
    print(f"written to {out}", file=sys.stderr)
    return 0


def _parse_sizes(items: List[str]) -> Dict[str, int]:
    """``["B=32", ...]`` -> ``{"B": 32}``; a CommandError for anything else."""
    sizes: Dict[str, int] = {}
    for item in items:
        name, _, value = item.partition("=")
        if not name or not value.strip().isdigit() or int(value) < 1:
            raise CommandError(f"--size takes NAME=N with N a positive integer, not {item!r}")
        sizes[name.strip()] = int(value)
    return sizes


def _feed_shape(op: Op, sizes: Dict[str, int]) -> tuple:
    """The shape of `op` with every symbolic length evaluated for `sizes`."""
    shape = []
    for axis in op.axes:
        length = axis.length
        if isinstance(length, Dim):
            missing = sorted(set(length.free_symbols) - set(sizes))
            if missing:
                raise CommandError(f"input {op.name}'s axis {axis.name} has the symbolic "
                                   f"length {length}: give --size {missing[0]}=N")
            length = length.evaluate(sizes)
        if length is None:
            raise CommandError(f"input {op.name}'s axis {axis.name} has no length: "
                               f"--memory needs every input's shape")
        shape.append(int(length))
    return tuple(shape)


def _draw_memory(graph: GraphFile, sizes: Dict[str, int], out: Path) -> None:
    """Compile the graph on the cpu transformer, run it once on zeros, chart its plan."""
    from .. import make_transformer
    from ..visualize import draw_memory_plan

    feeds = [np.zeros(_feed_shape(op, sizes), dtype=op.dtype) for op in graph.inputs]
    with make_transformer("cpu") as transformer:
        computation = transformer.computation(graph.results, *graph.inputs)
        computation(*feeds)
        try:
            draw_memory_plan(computation, out, title=f"memory plan of {graph.path.name}")
        except ImportError as error:
            raise CommandError(str(error)) from None


__all__ = ["add_parser", "run"]
