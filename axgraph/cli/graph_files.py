"""Files that hold a graph, by suffix: one registry the subcommands read (`KINDS`).

A ``.py`` file is run as the user's own program (``python FILE``, except that
``__name__`` is ``"__axgraph__"``, so a ``if __name__ == "__main__":`` block does not
run). Its results are what its function ``graph()`` returns (an op, a list of ops or
a dict of name -> op) when it defines one, else the ops it leaves at module level that
no other module-level op uses. An ``.axon`` file is an Axon program (its top-level
values are the results); ``.onnx`` and ``.axg`` files are read by the ONNX front end
and the graph files of `axgraph.serialization`, imported only when such a file is
given. The inputs are the placeholders the results read, in the order they were made,
unless the file names them.
"""
from __future__ import annotations

import importlib
import os
import runpy
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional

from ..errors import SerializationError
from ..op_graph.op import Op, upstream_ops
from ..op_graph.printing import format_graph
from .failures import CommandError


@dataclass
class GraphFile:
    """The graph a file holds.

    Parameters
    ----------
    path : Path
        The file.
    results : list of Op
        The ops it computes.
    inputs : list of Op
        The placeholders fed to compute them, in the order a computation takes them.
    """

    path: Path
    results: List[Op]
    inputs: List[Op] = field(default_factory=list)


@dataclass(frozen=True)
class FileKind:
    """How to read one kind of file.

    Parameters
    ----------
    description : str
        What the file is, for help texts and errors.
    load : callable
        Path -> GraphFile.
    check : callable, optional
        Path -> the text `axgraph check` prints, for a kind that reports in its own terms
        (an Axon program's types); default: the graph with its inferred shapes.
    """

    description: str
    load: Callable[[Path], GraphFile]
    check: Optional[Callable[[Path], str]] = None


def _graph_file(path: Path, found: Any, inputs: Any = None) -> GraphFile:
    """A GraphFile from what a reader gave: an op, a sequence or dict of ops, or an object
    with ``outputs`` (or ``results``) and optionally ``inputs``."""
    if inputs is None and not isinstance(found, (Op, Mapping, list, tuple)):
        inputs = getattr(found, "inputs", None)
        found = getattr(found, "outputs", getattr(found, "results", found))
    results = _ops(found, path, "results")
    if not results:
        raise CommandError(f"{path}: no graph found (no results)")
    if inputs is None:
        fed = [op for op in upstream_ops(results, include_control=True)
               if getattr(op, "is_placeholder", False)]
        inputs = sorted(fed, key=lambda op: op._serial)
    return GraphFile(path, results, _ops(inputs, path, "inputs"))


def _ops(found: Any, path: Path, what: str) -> List[Op]:
    items = (list(found.values()) if isinstance(found, Mapping)
             else [found] if isinstance(found, Op) else found)
    if not isinstance(items, (list, tuple)):
        raise CommandError(f"{path}: the {what} must be an op, a list of ops or a dict of "
                           f"name -> op, not {type(found).__name__}")
    for position, item in enumerate(items):
        if not isinstance(item, Op):
            raise CommandError(f"{path}: {what} item {position} is a {type(item).__name__}, "
                               f"not an op")
    return list(items)


# -- Python files -------------------------------------------------------------------------
def _load_python(path: Path) -> GraphFile:
    """Run the file as the user's program and take its graph (see the module docstring)."""
    namespace = _run_user_program(path)
    if callable(namespace.get("graph")):
        return _graph_file(path, namespace["graph"]())
    found: Dict[int, Op] = {}
    for value in namespace.values():
        if isinstance(value, Op):
            found.setdefault(id(value), value)
    used = {id(op) for value in found.values()
            for op in upstream_ops([value], include_control=True) if op is not value}
    if not found:
        raise CommandError(f"{path}: no graph found: define graph() returning the results, "
                           f"or build ops at module level")
    return _graph_file(path, [op for key, op in found.items() if key not in used])


def _run_user_program(path: Path) -> Dict[str, Any]:
    """Run `path` as ``python FILE`` would (its directory first on sys.path, sys.argv its
    name), but under ``__name__ == "__axgraph__"``; its module-level names."""
    directory = os.path.dirname(os.path.abspath(path))
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv, sys.path = [str(path)], [directory] + sys.path
    try:
        return runpy.run_path(str(path), run_name="__axgraph__")
    except SystemExit as stop:
        raise CommandError(f"{path} called sys.exit({stop.code!r}) while building its graph: "
                           f"put what should not run here under "
                           f"if __name__ == '__main__':") from None
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


# -- Axon programs ------------------------------------------------------------------------
def _load_axon(path: Path) -> GraphFile:
    """The graph of an Axon program: its top-level tensor values, every size symbolic."""
    from ..frontends import axon

    graph = axon.compile(path).graph()
    return _graph_file(path, graph.values, list(graph.inputs.values()))


def _check_axon(path: Path) -> str:
    """Each top-level binding's type with its symbolic shapes, then the run-time checks."""
    from ..frontends import axon

    inference = axon.infer(path)
    text = str(inference)
    if not inference.residuals:
        text += "\nchecks when data is fed: (none)"
    return text


# -- kinds written by optional parts --------------------------------------------------------
def optional_function(module: str, name: str, what: str) -> Callable[..., Any]:
    """`module.name`, imported now: the readers and writers of optional parts load only
    when a file needs them.

    Parameters
    ----------
    module : str
        The module's full name.
    name : str
        The function in it.
    what : str
        What it supports, for the error (``"ONNX"``).

    Returns
    -------
    callable
        The function.

    Raises
    ------
    CommandError
        ``<what> support not available: ...``: an optional package is missing, or this
        installation of axgraph lacks the part.
    """
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as error:
        raise CommandError(f"{what} support not available: {error}") from None


def _load_onnx(path: Path) -> GraphFile:
    """An ONNX model through `axgraph.frontends.onnx.import_model`."""
    import_model = optional_function("axgraph.frontends.onnx", "import_model", "ONNX")
    return _graph_file(path, import_model(path))


def _load_axg(path: Path) -> GraphFile:
    """A saved graph through `axgraph.serialization.load_graph`."""
    load_graph = optional_function("axgraph.serialization", "load_graph", "Graph file (.axg)")
    return _graph_file(path, load_graph(path))


def _check_axg(path: Path) -> str:
    """A saved axes graph with its inferred shapes, or a saved core function's listing (both
    kinds use the suffix; the function file is tried where the graph file says it is not
    one)."""
    try:
        return format_graph(_load_axg(path).results, shapes=True)
    except SerializationError as graph_error:
        load_function = optional_function("axgraph.serialization", "load_function",
                                          "Graph file (.axg)")
        try:
            function = load_function(path)
        except SerializationError:
            raise graph_error from None
        return str(function)


#: Every kind of file the subcommands read, by suffix.
KINDS: Dict[str, FileKind] = {
    ".py": FileKind("a Python program that builds a graph", _load_python),
    ".axon": FileKind("an Axon program", _load_axon, _check_axon),
    ".onnx": FileKind("an ONNX model", _load_onnx),
    ".axg": FileKind("a saved axgraph graph (or core function)", _load_axg, _check_axg),
}


def kind_of(path: Path) -> FileKind:
    """The kind of `path`, by its suffix.

    Parameters
    ----------
    path : Path
        The file.

    Returns
    -------
    FileKind
        How to read it.

    Raises
    ------
    CommandError
        The suffix is not in `KINDS`, or there is no such file.
    """
    kind = KINDS.get(path.suffix.lower())
    if kind is None:
        known = ", ".join(f"{suffix} ({kind.description})" for suffix, kind in KINDS.items())
        raise CommandError(f"{path}: unknown kind of file {path.suffix or '(no suffix)'!r}; "
                           f"known: {known}")
    if not path.is_file():
        raise CommandError(f"{path}: no such file")
    return kind


def load(path: Path) -> GraphFile:
    """The graph in `path`, read by the kind its suffix names.

    Parameters
    ----------
    path : Path
        The file.

    Returns
    -------
    GraphFile
        Its results and inputs.

    Raises
    ------
    CommandError
        An unknown kind of file, a missing file or optional package, no graph in it.
    AxgraphError
        What the file's own code or reader raised (a shape error, a syntax error).
    """
    return kind_of(path).load(path)
