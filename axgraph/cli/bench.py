"""``axgraph bench [NAME ...]``: run the benchmark scripts of a checkout and print their
tables; ``--list`` names them.

A benchmark is a module of ``benchmarks/`` with a ``main`` function (``common.py``,
the harness, has none). Each runs as ``python -m benchmarks.NAME`` in a process of its
own, as its README says to run it, its output passed through as it comes.
"""
from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Dict, List

from .failures import CommandError
from .source_tree import ROOT, directory

#: What ``axgraph bench`` runs without names: the ratio tables of the headline targets
#: (training steps and fused elementwise kernels against the alternatives).
DEFAULT = ("mlp", "elementwise", "conv")


@dataclass(frozen=True)
class Benchmark:
    """One benchmark script.

    Parameters
    ----------
    name : str
        Its module name in ``benchmarks/``.
    summary : str
        The first line of its docstring.
    quick : bool
        Whether it takes ``--quick`` (a short run).
    """

    name: str
    summary: str
    quick: bool


def benchmarks() -> Dict[str, Benchmark]:
    """Every benchmark of the checkout by name, read from the source without importing it.

    Returns
    -------
    dict of str to Benchmark
        In the order of their names.

    Raises
    ------
    CommandError
        No ``benchmarks/`` directory (axgraph is not run from a checkout).
    """
    found: Dict[str, Benchmark] = {}
    for path in sorted(directory("benchmarks").glob("*.py")):
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, str(path))
        if not any(isinstance(node, ast.FunctionDef) and node.name == "main"
                   for node in tree.body):
            continue
        summary = (ast.get_docstring(tree) or "").strip().splitlines()
        quick = '"--quick"' in source or "common.parser(" in source
        found[path.stem] = Benchmark(path.stem, summary[0] if summary else "", quick)
    return found


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Declare ``bench``'s options on the command line's `subparsers`.

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
        "bench", help="run the benchmarks and print their tables",
        description=f"Run benchmark scripts of the source checkout (benchmarks/), one process "
                    f"each, and print their tables. Without NAME: {', '.join(DEFAULT)}. "
                    f"--list names them all.")
    parser.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to run")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    parser.add_argument("--quick", action="store_true",
                        help="short runs (passed to the benchmarks that take --quick)")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """List or run the benchmarks; 0 when every one succeeded, else 1.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed ``axgraph bench`` options.

    Returns
    -------
    int
        The exit status.

    Raises
    ------
    CommandError
        No checkout with benchmarks/, or an unknown name.
    """
    known = benchmarks()
    if args.list:
        width = max(len(name) for name in known)
        for bench in known.values():
            quick = "" if bench.quick else "  (no --quick)"
            print(f"{bench.name.ljust(width)}  {bench.summary}{quick}")
        return 0
    names: List[str] = args.names or list(DEFAULT)
    unknown = [name for name in names if name not in known]
    if unknown:
        raise CommandError(f"no benchmark {', '.join(map(repr, unknown))}; the benchmarks: "
                           f"{', '.join(known)}")
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + [p for p in environment.get("PYTHONPATH", "").split(os.pathsep) if p])
    failed = []
    for name in names:
        command = [sys.executable, "-m", f"benchmarks.{name}"]
        if args.quick and known[name].quick:
            command.append("--quick")
        print(f"== axgraph bench {name}: {' '.join(command[1:])}", flush=True)
        done = subprocess.run(command, env=environment, check=False)
        if done.returncode != 0:
            print(f"== {name} failed (exit status {done.returncode})", flush=True)
            failed.append(name)
    if failed:
        print(f"axgraph bench: {len(failed)} of {len(names)} failed: {', '.join(failed)}",
              file=sys.stderr)
        return 1
    return 0


__all__ = ["Benchmark", "add_parser", "benchmarks", "run"]
