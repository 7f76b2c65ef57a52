"""Core IR files: a `core.Function` (nodes, shapes, constants) in one ``.axg`` file.

    save_function(f, "square.axg")
    f = load_function("square.axg")
    core.compile(f, backend="interpreter")(x)

The same container and hardening as graph files (`axgraph.serialization.graphs`),
with a manifest of format ``axgraph-core``: one entry per node, inputs first,
each its class name, inputs, declared attributes (`Node._attributes`, written by
`graph_values`: a Constant's value is an array member), element type, shape, user
name and source line; then the function's results, parameters and name. A node
is rebuilt by `Node._init`, the one constructor `with_inputs` uses too, from its
class (found by name among the `Node` subclasses of this process), so it is
checked again and must come out with the element type and shape the file says.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

import numpy as np

from ..core.function import Function
from ..core.node import Node
from ..core.tensor_types import ElementType, Shape
from ..debug_info import SourcePosition, source_position
from ..errors import SerializationError
from ..variables_file import (BFLOAT16, BFLOAT16_BITS, DTYPES, MAX_NAME_LENGTH, ArchiveKind,
                              _cut, _fields, _Invalid, _refused_as, _short,
                              open_variables_file, shown_path, write_variables_file)
from .graph_values import Unsaveable, ValueDecoder, ValueEncoder, dataclass_table, subclass_table
from .graphs import (MAX_ARRAYS, MAX_MANIFEST_BYTES, MAX_MANIFEST_CONTAINERS, MAX_OPS, _check_arrays, _checked, _decoded_location,
                     _location, _refs, _text)

PathLike = Union[str, "os.PathLike[str]"]

CORE_FORMAT = "axgraph-core"
CORE_VERSION = 1

_MANIFEST_FIELDS = {"format": str, "version": int, "name": str, "nodes": list, "results": list,
                    "parameters": list, "arrays": list}
_NODE_FIELDS = {"class": str, "name": (str, type(None)), "inputs": list, "attributes": dict,
                "element_type": object, "shape": object, "location": list}


def _check_core_manifest(manifest: dict) -> None:
    _fields(manifest, _MANIFEST_FIELDS, "the manifest")
    if len(manifest["nodes"]) > MAX_OPS:
        raise _Invalid(f"it lists {len(manifest['nodes'])} nodes; at most {MAX_OPS} are allowed")
    _check_arrays(manifest["arrays"])


CORE = ArchiveKind("core function file", CORE_FORMAT, CORE_VERSION, _check_core_manifest,
                   "arrays", max_members=MAX_ARRAYS, max_manifest_bytes=MAX_MANIFEST_BYTES,
                   max_manifest_containers=MAX_MANIFEST_CONTAINERS, reading="cannot load a core function from",
                   writing="cannot save a core function to", item="array")


def node_classes() -> Dict[str, Optional[type]]:
    """{class name: class} of every core `Node` subclass of this process (None for a name
    two classes share): the only way a file's class name becomes a node class."""
    return subclass_table(Node)


def _no_reference(kind: str):
    def refuse(value):
        raise Unsaveable(f"a {kind}, which a core function file cannot hold")
    return refuse


def save_function(function: Function, path: PathLike) -> Path:
    """Save a core IR `Function` to `path` (atomically).

    Parameters
    ----------
    function : core.Function
        The function: its parameters, results and every node between.
    path : str or os.PathLike
        The file to write (by convention ending in ``.axg``); replaced atomically.

    Returns
    -------
    Path
        `path`.

    Raises
    ------
    SerializationError
        `function` is not a Function, a node's attribute cannot be saved (the body
        of a Fused node, say), or the file cannot be written; the message names the
        path and the node.
    """
    shown = shown_path(path)
    if not isinstance(function, Function):
        raise SerializationError(f"cannot save a core function to {shown}: "
                                 f"{type(function).__name__} {_short(function)} is not a "
                                 f"core.Function")
    classes = node_classes()
    index: Dict[Node, int] = {}
    nodes: List[dict] = []
    arrays: Dict[str, np.ndarray] = {}
    entries: List[dict] = []

    def array(value: np.ndarray) -> str:
        key = f"a{len(arrays)}"
        value = np.asarray(value, order="C")
        bf16 = value.dtype.name == "bfloat16"
        if value.dtype.str not in DTYPES and not bf16:
            raise Unsaveable(f"an array of {value.dtype}")
        entries.append({"name": key, "key": key, "dtype": BFLOAT16 if bf16 else value.dtype.str,
                        "shape": list(value.shape)})
        arrays[key] = value.view(np.uint16).astype(BFLOAT16_BITS) if bf16 else value
        return key

    def node_index(node: Node) -> int:
        return index[node]

    encoder = ValueEncoder(_no_reference("axis"), _no_reference("role"),
                           _no_reference("axes-graph op"), array, dataclass_table([]))
    for node in function.nodes:
        kind = type(node)
        try:
            if classes.get(kind.__name__) is not kind:
                raise Unsaveable(f"its class {kind.__qualname__} shares its name with another "
                                 f"node class")
            attributes: Dict[str, Any] = {}
            for key in node._attributes:
                try:
                    attributes[key] = encoder.encode(node.attributes[key])
                except Unsaveable as problem:
                    raise Unsaveable(f"its attribute {key} is {problem}") from None
        except Unsaveable as problem:
            raise SerializationError(f"cannot save a core function to {shown}: node {node.name} "
                                     f"({kind.__name__}, made at {node.location[0]}:"
                                     f"{node.location[1]}): {problem}") from None
        index[node] = len(nodes)
        nodes.append({"class": kind.__name__, "name": node._user_name,
                      "inputs": [node_index(i) for i in node.inputs], "attributes": attributes,
                      "element_type": encoder.encode(node.element_type),
                      "shape": encoder.encode(node.shape), "location": _location(node.location)})
    manifest: Dict[str, Any] = {
        "format": CORE_FORMAT, "version": CORE_VERSION, "name": function.name, "nodes": nodes,
        "results": [node_index(n) for n in function.results],
        "parameters": [node_index(n) for n in function.parameters], "arrays": entries}
    return write_variables_file(path, manifest, arrays, CORE)


def _node(entry, index: int, nodes: List[Node], classes, values: ValueDecoder) -> Node:
    what = f"node {index}"
    _checked(entry, _NODE_FIELDS, what)
    kind = classes.get(entry["class"])
    if kind is None:
        known = "two node classes have that name" if entry["class"] in classes else (
            "no node class has that name in this process")
        raise _Invalid(f"{what}: class {_short(entry['class'])} is not a core node class "
                       f"({known})")
    name = entry["name"]
    if name is not None:
        _text(name, f"{what}: its name", MAX_NAME_LENGTH)
    what = f"node {index} ({kind.__name__}{'' if name is None else ' ' + _short(name)})"
    inputs = _refs(entry["inputs"], nodes, index, what, "node")
    declared = tuple(kind._attributes)
    if sorted(entry["attributes"]) != sorted(declared):
        raise _Invalid(f"{what}: attributes {_short(sorted(entry['attributes']))}; the class "
                       f"declares {list(declared)}")
    attributes = {key: values.decode(entry["attributes"][key], f"{what}: attribute {key}")
                  for key in declared}
    element_type = values.decode(entry["element_type"], f"{what}: its element type")
    shape = values.decode(entry["shape"], f"{what}: its shape")
    if not isinstance(element_type, ElementType) or not isinstance(shape, Shape):
        raise _Invalid(f"{what}: its type is {_short(element_type)} {_short(shape)}")
    location = _decoded_location(entry["location"], what)
    position = location if isinstance(location, SourcePosition) else SourcePosition(*location)
    node = object.__new__(kind)
    try:
        with source_position(position):
            node._init(tuple(inputs), attributes, name, location)
    except Exception as error:  # a crafted file may make the node's own checks fail any way
        raise _Invalid(f"{what} cannot be built: {type(error).__name__}: "
                       f"{_cut(str(error), 300)}") from error
    if node.element_type != element_type or node.shape != shape:
        raise _Invalid(f"{what} computes {node.type_str()}, but the file says "
                       f"{element_type}{shape}")
    return node


def load_function(path: PathLike) -> Function:
    """Load a core IR `Function` that `save_function` wrote.

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    core.Function
        The function, of new nodes, ready for `core.compile`.

    Raises
    ------
    SerializationError
        The file is missing, truncated, corrupt, crafted or of another kind, is of a
        newer format version, names a node class this process lacks, or describes
        nodes their own checks refuse; the message names the path and the problem.
        Nothing in the file runs as code.
    """
    with open_variables_file(path, CORE) as saved:
        with _refused_as(f"{CORE.reading} {saved.path}"):
            manifest = saved.manifest
            nodes: List[Node] = []
            cache: Dict[str, np.ndarray] = {}

            def array(key: str, what: str) -> np.ndarray:
                entry = saved.entries.get(key)
                if entry is None:
                    raise _Invalid(f"{what} refers to array {_short(key)}, which the file lacks")
                if key not in cache:
                    cache[key] = saved.read(entry)
                return cache[key]

            values = ValueDecoder([], [], [], array, {})
            classes = node_classes()
            for index, entry in enumerate(manifest["nodes"]):
                nodes.append(_node(entry, index, nodes, classes, values))
            count = len(nodes)
            results = _refs(manifest["results"], nodes, count, "the results", "node")
            parameters = _refs(manifest["parameters"], nodes, count, "the parameters", "node")
            name = _text(manifest["name"], "the function's name", MAX_NAME_LENGTH)
            try:
                return Function(results, parameters, name=name)
            except Exception as error:  # its own checks: parameters, unbound sizes
                raise _Invalid(f"the function cannot be made: {type(error).__name__}: "
                               f"{_cut(str(error), 300)}") from error
