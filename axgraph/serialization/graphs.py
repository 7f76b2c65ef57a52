"""Graph files: a whole axes graph, its axes and its stored values in one ``.axg`` file.

    save_graph(computation, "model.axg")         # or save_graph([loss, update], path, ...)
    graph = load_graph("model.axg")
    t.computation(graph.results, *graph.inputs)   # or graph.computation(t)

The file is the container of variables files (`axgraph.variables_file`: an
uncompressed .npz of a JSON manifest and ``.npy`` arrays, written atomically,
read as untrusted input) with a manifest of its own, format ``axgraph-graph``:

- ``roles`` and ``axes``: every axis role and axis the graph uses, once each,
  so identities survive (two axes named C stay two; one axis stays one). A
  plain axis keeps its name, length (an int, None, or a symbolic dim), roles,
  batch and recurrent flags, docstring and the line that made it; a dual,
  sliced, padded or flattened axis is made again from the axes it derives from.
- ``ops``: one entry per op, each after the ops it computes from: its class
  name, args, declared attributes (`Op.attributes`, as `graph_values` writes
  them), result axes and dtype, the axes and dtype it was asked for, its name
  if the user gave one, metadata, the user's file and line, and its ordering
  edges (``other_deps``, and a tensor's pending assigns, ``user_deps``).
- ``results``, ``result_kind`` and ``inputs``: what a computation of it returns
  and takes; ``arrays``: the members holding arrays (initial values, constants).

Nothing here knows an op class: an op is rebuilt by the same `Op._build` that
`with_args` uses, from its class (found by name in the table of the `Op`
subclasses this process has, never imported or evaluated), args and attributes,
so its type is inferred and checked again and must come out as the file says.
A stored tensor's value in the transformer a graph is saved from becomes its
initial value, so the loaded graph starts where the saved one stood.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Set, Tuple, Union

import numpy as np

from ..axes import Axes, Axis, AxisRole, DualAxis, FlattenedAxis, PaddedAxis, SlicedAxis
from ..debug_info import SourcePosition, source_position
from ..dims import Dim
from ..dtypes import as_dtype, is_bfloat16
from ..errors import SerializationError
from ..op_graph.op import Op
from ..op_graph.tensors import AssignableTensorOp
from ..ordered_set import OrderedSet
from ..variables_file import (BFLOAT16, BFLOAT16_BITS, DTYPES, MAX_NAME_LENGTH, MAX_NDIM,
                              ArchiveKind, _cut, _fields, _Invalid, _refused_as, _short,
                              check_unique_entries, open_variables_file, shown_path,
                              write_variables_file)
from .graph_values import (MAX_TEXT, Unsaveable, ValueDecoder, ValueEncoder, dataclass_table,
                           decode_dim, dtype_from_name, dtype_name, encode_dim, subclass_table)
from .variables import _stored_tensors

PathLike = Union[str, "os.PathLike[str]"]

GRAPH_FORMAT = "axgraph-graph"
GRAPH_VERSION = 1
#: The suffix graph files take (any name is read and written; this one is the convention).
GRAPH_SUFFIX = ".axg"
#: Result kinds, as `Transformer.computation` returns them: one array, a tuple, a dict.
RESULT_KINDS = ("single", "sequence", "dict")
MAX_OPS = 1 << 20
MAX_ARRAYS = 1 << 16
#: A manifest's size: about 300 bytes an op, so some 50,000 ops; parsing one of this size
#: takes at most a few hundred MiB, which bounds what a crafted manifest can make us allocate.
MAX_MANIFEST_BYTES = 1 << 24
MAX_MANIFEST_CONTAINERS = 1 << 21
_MAX_LINE = (1 << 31) - 1
_MAX_DUAL_LEVEL = 1 << 16

_MANIFEST_FIELDS = {"format": str, "version": int, "roles": list, "axes": list, "ops": list,
                    "results": list, "result_kind": str, "inputs": list, "arrays": list}
_OPTIONAL_FIELDS = {"metadata": dict}
_ARRAY_FIELDS = {"name": str, "key": str, "dtype": str, "shape": list}
_ROLE_FIELDS = {"name": str, "auto_named": bool, "docstring": (str, type(None))}
_AXIS_FIELDS: Dict[str, Dict[str, Any]] = {
    "axis": {"kind": str, "name": str, "auto_named": bool, "length": object, "roles": list,
             "batch": (bool, type(None)), "recurrent": (bool, type(None)),
             "docstring": (str, type(None)), "match_on_length": bool, "location": list},
    "dual": {"kind": str, "base": int, "level": int},
    "sliced": {"kind": str, "parent": int, "slice": list},
    "padded": {"kind": str, "parent": int, "pad": list},
    "flattened": {"kind": str, "axes": list},
}
_OP_FIELDS = {"class": str, "name": (str, type(None)), "args": list, "attributes": dict,
              "axes": list, "dtype": str, "asked_axes": object, "asked_dtype": (str, type(None)),
              "metadata": object, "location": list, "other_deps": list, "user_deps": list}


def _check_graph_manifest(manifest: dict) -> None:
    """The schema of the top level and of the array entries; the graph itself is checked
    while it is rebuilt (every reference, type and bound, op by op)."""
    _fields(manifest, _MANIFEST_FIELDS, "the manifest", _OPTIONAL_FIELDS)
    for field_name, most in (("ops", MAX_OPS), ("axes", MAX_OPS), ("roles", MAX_OPS),
                             ("arrays", MAX_ARRAYS)):
        if len(manifest[field_name]) > most:
            raise _Invalid(f"it lists {len(manifest[field_name])} {field_name}; at most {most} "
                           f"are allowed")
    _check_arrays(manifest["arrays"])


def _check_arrays(entries: list) -> None:
    """Each array entry: its key and name ``a<index>``, a dtype a file may hold, a shape."""
    for index, entry in enumerate(entries):
        what = f"array {index}"
        _fields(entry, _ARRAY_FIELDS, what)
        if entry["key"] != f"a{index}" or entry["name"] != entry["key"]:
            raise _Invalid(f"{what} has key {_short(entry['key'])} and name "
                           f"{_short(entry['name'])}; both must be 'a{index}'")
        if entry["dtype"] not in DTYPES and entry["dtype"] != BFLOAT16:
            raise _Invalid(f"{what}: dtype {_short(entry['dtype'])} is not one a graph file "
                           f"may hold")
        shape = entry["shape"]
        if len(shape) > MAX_NDIM or not all(
                isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 1 << 63
                for n in shape):
            raise _Invalid(f"{what}: shape {_short(shape)} is not a list of at most {MAX_NDIM} "
                           f"lengths")
    check_unique_entries(entries, "arrays")


GRAPH = ArchiveKind("graph file", GRAPH_FORMAT, GRAPH_VERSION, _check_graph_manifest, "arrays",
                    max_members=MAX_ARRAYS, max_manifest_bytes=MAX_MANIFEST_BYTES,
                    max_manifest_containers=MAX_MANIFEST_CONTAINERS, reading="cannot load a graph from",
                    writing="cannot save a graph to", item="array")


# -- the classes a file may name -------------------------------------------------------------


def op_classes() -> Dict[str, Optional[type]]:
    """{class name: class} of every `Op` subclass defined in this process (None for a name
    two classes share). This table is the only way a file's class name becomes a class."""
    return subclass_table(Op)


def value_classes(classes: Iterable[Optional[type]]) -> Dict[str, type]:
    """The dataclasses that op attributes may hold: those the op classes' modules define."""
    modules = {kind.__module__ for kind in classes if kind is not None}
    return dataclass_table([sys.modules[name] for name in sorted(modules) if name in sys.modules])


# -- saving ------------------------------------------------------------------------------------


def _location(location: Tuple[str, int]) -> list:
    if isinstance(location, SourcePosition):
        return [location[0], location[1], location.column, location.excerpt]
    return [location[0], location[1]]


def _static(axes: Axes) -> bool:
    return all(isinstance(n, int) for n in axes.lengths)


class _Writer:
    """Gathers one graph's roles, axes, ops and arrays into a manifest."""

    def __init__(self, values: Mapping[Op, np.ndarray]):
        #: The op being written, for the message of a value that cannot be.
        self.current: Optional[Op] = None
        self.classes = op_classes()
        self.values = values
        self.roles: Dict[AxisRole, int] = {}
        self.axes: Dict[Axis, int] = {}
        self.op_index: Dict[Op, int] = {}
        self.manifest: Dict[str, Any] = {"roles": [], "axes": [], "ops": [], "arrays": []}
        self.arrays: Dict[str, np.ndarray] = {}
        self.encoder = ValueEncoder(self.axis, self.role, self.op, self.array,
                                    value_classes(self.classes.values()))

    # references -------------------------------------------------------------------------
    def role(self, role: AxisRole) -> int:
        if role not in self.roles:
            self.roles[role] = len(self.roles)
            self.manifest["roles"].append({"name": role.name, "auto_named": role._auto_named,
                                           "docstring": role.docstring})
        return self.roles[role]

    def axis(self, axis: Axis) -> int:
        found = self.axes.get(axis)
        if found is not None:
            return found
        entry: Dict[str, Any]
        if isinstance(axis, DualAxis):
            entry = {"kind": "dual", "base": self.axis(axis.base), "level": axis.dual_level}
        elif isinstance(axis, SlicedAxis):
            s = axis.slice
            entry = {"kind": "sliced", "parent": self.axis(axis.parent),
                     "slice": [s.start, s.stop, s.step]}
        elif isinstance(axis, PaddedAxis):
            entry = {"kind": "padded", "parent": self.axis(axis.parent), "pad": list(axis.pad)}
        elif isinstance(axis, FlattenedAxis):
            entry = {"kind": "flattened", "axes": [self.axis(a) for a in axis.axes]}
        elif type(axis) is Axis:
            length = axis.length
            entry = {"kind": "axis", "name": axis.name, "auto_named": axis._auto_named,
                     "length": {"dim": encode_dim(length)} if isinstance(length, Dim) else length,
                     "roles": [self.role(r) for r in sorted(axis.roles, key=lambda r: r.name)],
                     "batch": axis._batch, "recurrent": axis._recurrent,
                     "docstring": axis.docstring, "match_on_length": axis.match_on_length,
                     "location": _location(axis.location)}
        else:
            raise Unsaveable(f"the axis {axis.name}, a {type(axis).__name__}, which a graph "
                             f"file cannot hold")
        self.axes[axis] = len(self.manifest["axes"])
        self.manifest["axes"].append(entry)
        return self.axes[axis]

    def op(self, op: Op) -> int:
        found = self.op_index.get(op)
        if found is None:
            raise Unsaveable(f"{op.name}, an op saved after the op that refers to it")
        return found

    def array(self, value: np.ndarray) -> str:
        key = f"a{len(self.arrays)}"
        value = np.asarray(value, order="C")
        dtype = value.dtype
        if dtype.str not in DTYPES and not is_bfloat16(dtype):
            raise Unsaveable(f"an array of {dtype}, which a graph file cannot hold")
        self.manifest["arrays"].append({"name": key, "key": key, "dtype": BFLOAT16 if is_bfloat16(
            dtype) else dtype.str, "shape": list(value.shape)})
        self.arrays[key] = value.view(np.uint16).astype(BFLOAT16_BITS) if is_bfloat16(
            dtype) else value
        return key

    # ops ----------------------------------------------------------------------------------
    def attributes(self, op: Op) -> Dict[str, Any]:
        """The declared attributes as saved: a stored tensor's initial value is its value in
        the transformer saved from, or a callable's array (data, not code)."""
        attributes = op.attribute_values
        if isinstance(op, AssignableTensorOp):
            if op in self.values:
                attributes["initial_value"] = self.values[op]
            elif callable(attributes["initial_value"]) and not isinstance(
                    attributes["initial_value"], Op):
                if not _static(op.axes):
                    raise Unsaveable(f"an initial value made by a Python function for axes "
                                     f"{op.axes} whose lengths are not all known")
                attributes["initial_value"] = op.initial_array(op.axes.lengths)
        return attributes

    def add(self, op: Op) -> None:
        kind = type(op)
        if self.classes.get(kind.__name__) is not kind:
            raise Unsaveable(f"its class {kind.__module__}.{kind.__qualname__} shares its name "
                             f"with another op class, so a file cannot tell them apart")
        attributes: Dict[str, Any] = {}
        for key, value in self.attributes(op).items():
            try:
                attributes[key] = self.encoder.encode(value)
            except Unsaveable as problem:
                raise Unsaveable(f"its attribute {key} is {problem}") from None
        entry: Dict[str, Any] = {"class": kind.__name__,
                                 "name": op.name if op.has_user_name else None,
                                 "args": [self.op(arg) for arg in op.args],
                                 "attributes": attributes}
        entry["axes"] = [self.axis(a) for a in op.axes]
        entry["dtype"] = dtype_name(op.dtype)
        entry["asked_axes"] = self.encoder.encode(op._asked_axes)
        entry["asked_dtype"] = (None if op._asked_dtype is None
                                else dtype_name(as_dtype(op._asked_dtype)))
        try:
            entry["metadata"] = self.encoder.encode(op.metadata)
        except Unsaveable as problem:
            raise Unsaveable(f"its metadata holds {problem}") from None
        entry["location"] = _location(op.location)
        self.op_index[op] = len(self.manifest["ops"])
        self.manifest["ops"].append(entry)


def _referenced_ops(value, found: List[Op], depth: int = 0) -> None:
    """The ops inside an attribute value (an initial value's op, a backprop's forward op)."""
    if isinstance(value, Op):
        found.append(value)
    elif isinstance(value, (tuple, list)) and depth < 48:
        for item in value:
            _referenced_ops(item, found, depth + 1)
    elif isinstance(value, dict) and depth < 48:
        for item in value.items():
            _referenced_ops(item, found, depth + 1)
    elif hasattr(value, "__dataclass_fields__") and not isinstance(value, type):
        for name in value.__dataclass_fields__:
            _referenced_ops(getattr(value, name), found, depth + 1)


def _main_user_deps(op: Op) -> OrderedSet:
    """The assigns pending on a tensor in the main stream (not those of saved_user_deps)."""
    return op.__dict__.get("_user_deps") or OrderedSet()


def _graph_ops(roots: Sequence[Op], writer: _Writer) -> List[Op]:
    """Every op the roots need, each after what it refers to (creation order)."""
    seen: Set[Op] = set()
    stack = list(roots)
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        writer.current = op
        stack.extend(op.args)
        stack.extend(op.other_deps)
        stack.extend(_main_user_deps(op))
        attributes = op.attribute_values
        if op in writer.values:           # its value replaces its initial value (an op, say)
            del attributes["initial_value"]
        referenced: List[Op] = []
        _referenced_ops(list(attributes.values()) + [op.metadata], referenced)
        stack.extend(referenced)
    return sorted(seen, key=lambda op: op._serial)


def _results_of(graph) -> Tuple[str, Tuple[Op, ...], Tuple[Op, ...], Any]:
    """(result kind, results, inputs, transformer) of a computation or of result ops."""
    if hasattr(graph, "results") and hasattr(graph, "parameters") and hasattr(graph, "transformer"):
        return graph.result_kind, tuple(graph.results), tuple(graph.parameters), graph.transformer
    if isinstance(graph, Op):
        return "single", (graph,), (), None
    if isinstance(graph, (set, frozenset)):
        return "dict", tuple(sorted(graph, key=lambda op: getattr(op, "_serial", 0))), (), None
    if isinstance(graph, (list, tuple)):
        return "sequence", tuple(graph), (), None
    raise SerializationError(f"save_graph saves a computation, an op or a list, tuple or set "
                             f"of ops, not {type(graph).__name__} {_short(graph)}")


def save_graph(graph, path: PathLike, *, inputs: Sequence[Op] = (), transformer=None,
               metadata: Optional[dict] = None) -> Path:
    """Save a whole axes graph, with the values of its stored tensors, to `path` (atomically).

    Parameters
    ----------
    graph : Computation, Op, or list, tuple or set of Op
        What to save: a transformer's computation (its results, its placeholders
        as inputs, and its transformer's values), or result ops.
    path : str or os.PathLike
        The file to write (by convention ending in ``.axg``); replaced atomically.
    inputs : sequence of Op, optional
        The placeholders a computation of the loaded graph takes, in order (for a
        computation, its own; given here, they replace those).
    transformer : Transformer, optional
        Where the stored tensors' current values are read (a computation's own by
        default): each variable and persistent tensor it holds is saved with that
        value as its initial value. Without one, initial values are saved as given
        (a Python function's is called now, for an array).
    metadata : dict, optional
        Facts to keep with the graph (JSON-like values, or anything an attribute may
        hold); `LoadedGraph.metadata` gives them back.

    Returns
    -------
    Path
        `path`.

    Raises
    ------
    SerializationError
        A value cannot be saved (a Python function among an op's attributes, say),
        an op's class cannot be told by name, or the file cannot be written; the
        message names the path, the op and the attribute.
    """
    shown = shown_path(path)
    kind, results, own_inputs, own_transformer = _results_of(graph)
    inputs = tuple(inputs) or own_inputs
    transformer = transformer if transformer is not None else own_transformer
    for op in results + inputs:
        if not isinstance(op, Op):
            raise SerializationError(f"cannot save a graph to {shown}: {_short(op)} is not an op")
    for op in inputs:
        if not (isinstance(op, AssignableTensorOp) and op.input):
            raise SerializationError(f"cannot save a graph to {shown}: input {op.name} is not a "
                                     f"placeholder")
    values: Dict[Op, np.ndarray] = {}
    if transformer is not None:
        try:
            state, _ = _stored_tensors(transformer)
        except SerializationError as error:
            raise SerializationError(f"cannot save a graph to {shown}: {error.message}") from None
        values = {op: np.array(value, copy=True) for op, value in state.items()
                  if op.persistent and not op.input and not op.constant and _static(op.axes)}
    writer = _Writer(values)
    try:
        for op in _graph_ops(results + inputs, writer):
            writer.current = op
            writer.add(op)
        writer.current = None
        for entry, op in zip(writer.manifest["ops"], writer.op_index):
            entry["other_deps"] = [writer.op(dep) for dep in op.other_deps]
            entry["user_deps"] = [writer.op(dep) for dep in _main_user_deps(op)]
        manifest = dict(writer.manifest, format=GRAPH_FORMAT, version=GRAPH_VERSION,
                        results=[writer.op(op) for op in results], result_kind=kind,
                        inputs=[writer.op(op) for op in inputs])
        if metadata is not None:
            manifest["metadata"] = writer.encoder.encode(dict(metadata))
    except Unsaveable as problem:
        current = writer.current
        where = (f"op {current.name} ({type(current).__name__}, made at {current.location[0]}:"
                 f"{current.location[1]})" if current is not None else "its metadata")
        raise SerializationError(f"cannot save a graph to {shown}: {where}: {problem}") from None
    return write_variables_file(path, manifest, writer.arrays, GRAPH)


# -- loading -----------------------------------------------------------------------------------


@dataclass
class LoadedGraph:
    """A graph read from a file: new ops, axes and roles, ready for any transformer.

    Attributes
    ----------
    results : tuple of Op
        The ops a computation of the graph returns, in the saved order.
    inputs : tuple of Op
        The placeholders it takes, in order.
    result_kind : str
        How the saved computation returned its results: "single" (one array),
        "sequence" (a tuple) or "dict" (op -> array).
    ops : tuple of Op
        Every op of the file, each after those it refers to.
    metadata : dict
        What `save_graph` was given as `metadata` (empty if nothing).
    path : Path
        The file read.
    """

    results: Tuple[Op, ...]
    inputs: Tuple[Op, ...]
    result_kind: str
    ops: Tuple[Op, ...]
    metadata: dict = field(default_factory=dict)
    path: Path = Path()

    def computation(self, transformer):
        """`transformer.computation` of the results (returned as saved) from the inputs."""
        returned: Any = self.results
        if self.result_kind == "single":
            returned = self.results[0]
        elif self.result_kind == "dict":
            returned = set(self.results)
        else:
            returned = list(self.results)
        return transformer.computation(returned, *self.inputs)

    def op(self, name: str) -> Op:
        """The op named `name` (a name the user gave when it was saved).

        Raises
        ------
        KeyError
            No op, or several, have that name.
        """
        found = [op for op in self.ops if op.name == name]
        if len(found) != 1:
            raise KeyError(f"{len(found)} ops of {self.path} are named {name!r}")
        return found[0]

    @property
    def variables(self) -> List[Op]:
        """The trainable variables among the ops, in the file's order."""
        return [op for op in self.ops if getattr(op, "trainable", False)]


def _index(value, count: int, what: str, kind: str = "op") -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < count:
        raise _Invalid(f"{what} refers to {kind} {_short(value)}; only {count} come before it")
    return value


def _refs(values, table: Sequence, count: int, what: str, kind: str = "op") -> list:
    """The objects of `table` (its first `count`) that the index list `values` names."""
    if not isinstance(values, list) or len(values) > max(count, MAX_NDIM):
        raise _Invalid(f"{what}: {_short(values)} is not a list of {kind} indices")
    return [table[_index(i, count, what, kind)] for i in values]


def _text(value, what: str, most: int = MAX_TEXT) -> str:
    if not isinstance(value, str) or len(value) > most:
        raise _Invalid(f"{what} is {_short(value)}, not a string of at most {most} characters")
    return value


def _decoded_location(value, what: str) -> Tuple[str, int]:
    if not isinstance(value, list) or len(value) not in (2, 4):
        raise _Invalid(f"{what}: location {_short(value)} is not [file, line] or [file, line, "
                       f"column, excerpt]")
    file = _text(value[0], f"{what}: its file")
    line = value[1]
    if not isinstance(line, int) or isinstance(line, bool) or not 0 <= line <= _MAX_LINE:
        raise _Invalid(f"{what}: line {_short(line)} is not a line number")
    if len(value) == 2:
        return (file, line)
    column = value[2]
    if not isinstance(column, int) or isinstance(column, bool) or not 0 <= column <= _MAX_LINE:
        raise _Invalid(f"{what}: column {_short(column)} is not a column number")
    return SourcePosition(file, line, column, _text(value[3], f"{what}: its excerpt"))


def _checked(entry, schema: Mapping[str, Any], what: str) -> dict:
    if not isinstance(entry, dict):
        raise _Invalid(f"{what} is {_short(entry)}, not an object")
    if set(entry) != set(schema):
        raise _Invalid(f"{what} has the fields {sorted(entry)[:12]}; expected {sorted(schema)}")
    for key, kind in schema.items():
        value = entry[key]
        if kind is not object and (not isinstance(value, kind) or (
                kind is int and isinstance(value, bool))):
            raise _Invalid(f"{what}: {key} is {type(value).__name__} {_short(value)}")
    return entry


class _Reader:
    """Rebuilds roles, axes and ops from a checked manifest, one entry at a time."""

    def __init__(self, saved):
        self.saved = saved
        self.classes = op_classes()
        self.roles: List[AxisRole] = []
        self.axes: List[Axis] = []
        self.ops: List[Op] = []
        self._arrays: Dict[str, np.ndarray] = {}
        self.values = ValueDecoder(self.axes, self.roles, self.ops, self.array,
                                   value_classes(self.classes.values()))

    def array(self, key: str, what: str) -> np.ndarray:
        if key not in self._arrays:
            entry = self.saved.entries.get(key)
            if entry is None:
                raise _Invalid(f"{what} refers to array {_short(key)}, which the file lacks")
            self._arrays[key] = self.saved.read(entry)
        return self._arrays[key]

    def role(self, entry, index: int) -> AxisRole:
        what = f"role {index}"
        _checked(entry, _ROLE_FIELDS, what)
        role = AxisRole(_text(entry["name"], what, MAX_NAME_LENGTH), entry["docstring"])
        if entry["auto_named"]:
            role._auto_named = True
        return role

    def axis(self, entry, index: int) -> Axis:
        what = f"axis {index}"
        kind = entry.get("kind") if isinstance(entry, dict) else None
        schema = _AXIS_FIELDS.get(kind) if isinstance(kind, str) else None
        if schema is None:
            raise _Invalid(f"{what} is {_short(entry)}, not an axis of a kind "
                           f"{', '.join(_AXIS_FIELDS)}")
        _checked(entry, schema, what)
        before = len(self.axes)
        if kind == "dual":
            base = self.axes[_index(entry["base"], before, what, "axis")]
            level = entry["level"]
            if base.dual_level != 0 or level == 0 or abs(level) > _MAX_DUAL_LEVEL:
                raise _Invalid(f"{what}: a dual at level {_short(level)} of {base.name}")
            return base.get_dual(level)
        if kind == "sliced":
            parent = self.axes[_index(entry["parent"], before, what, "axis")]
            bounds = entry["slice"]
            if len(bounds) != 3 or not all(b is None or (isinstance(b, int) and not isinstance(
                    b, bool) and abs(b) < 1 << 63) for b in bounds):
                raise _Invalid(f"{what}: slice {_short(bounds)} is not 3 ints or nulls")
            return SlicedAxis.of(parent, slice(*bounds))
        if kind == "padded":
            parent = self.axes[_index(entry["parent"], before, what, "axis")]
            pad = entry["pad"]
            if len(pad) != 2 or not all(isinstance(p, int) and not isinstance(p, bool)
                                        and 0 <= p < 1 << 63 for p in pad):
                raise _Invalid(f"{what}: padding {_short(pad)} is not 2 ints >= 0")
            return PaddedAxis.of(parent, tuple(pad))
        if kind == "flattened":
            parts = _refs(entry["axes"], self.axes, before, what, "axis")
            if not parts or len(parts) > MAX_NDIM:
                raise _Invalid(f"{what}: a flattened axis of {len(entry['axes'])} axes")
            return FlattenedAxis(parts)
        length = entry["length"]
        if isinstance(length, dict) and set(length) == {"dim"}:
            length = decode_dim(length["dim"], f"{what}: its length")
        elif length is not None and (not isinstance(length, int) or isinstance(length, bool)
                                     or not 0 <= length < 1 << 63):
            raise _Invalid(f"{what}: length {_short(length)} is not an int >= 0, null or a dim")
        roles = _refs(entry["roles"], self.roles, len(self.roles), what, "role")
        axis = Axis(length, None if entry["auto_named"] else _text(
            entry["name"], f"{what}: its name", MAX_NAME_LENGTH), roles, entry["batch"],
            entry["recurrent"], entry["docstring"], entry["match_on_length"])
        axis._location = _decoded_location(entry["location"], what)
        return axis

    def op(self, entry, index: int) -> Op:
        what = f"op {index}"
        _checked(entry, _OP_FIELDS, what)
        kind = self.classes.get(entry["class"])
        if kind is None:
            known = "two op classes have that name" if entry["class"] in self.classes else (
                "no op class has that name in this process")
            raise _Invalid(f"{what}: class {_short(entry['class'])} is not an op class ({known})")
        name = entry["name"]
        what = f"op {index} ({kind.__name__}{'' if name is None else ' ' + _short(name)})"
        if name is not None:
            _text(name, f"{what}: its name", MAX_NAME_LENGTH)
            if not name:
                raise _Invalid(f"{what}: an empty name")
        args = _refs(entry["args"], self.ops, index, what)
        declared = tuple(kind.attributes)
        if sorted(entry["attributes"]) != sorted(declared):
            raise _Invalid(f"{what}: attributes {_short(sorted(entry['attributes']))}; the class "
                           f"declares {list(declared)}")
        attributes = {key: self.values.decode(entry["attributes"][key], f"{what}: attribute {key}")
                      for key in declared}
        asked_axes = self.values.decode(entry["asked_axes"], f"{what}: its asked axes")
        asked_dtype = (None if entry["asked_dtype"] is None
                       else dtype_from_name(entry["asked_dtype"], what))
        metadata = self.values.decode(entry["metadata"], f"{what}: its metadata")
        if not isinstance(metadata, dict):
            raise _Invalid(f"{what}: its metadata is {_short(metadata)}, not a dict")
        location = _decoded_location(entry["location"], what)
        axes = _refs(entry["axes"], self.axes, len(self.axes), what, "axis")
        dtype = dtype_from_name(entry["dtype"], what)
        op = kind.__new__(kind)
        position = location if isinstance(location, SourcePosition) else SourcePosition(*location)
        try:     # errors of its own checks name the line that made it, as when it was made
            with Op.all_ops() as made, source_position(position):
                op._build(tuple(args), attributes, asked_axes, asked_dtype, name, metadata,
                          location)
        except Exception as error:  # a crafted file may make the op's own checks fail any way
            raise _Invalid(f"{what} cannot be built: {type(error).__name__}: "
                           f"{_cut(str(error), 300)}") from error
        for other in made:     # what building it made (a tensor's initializer) is from its line
            if other is not op:
                other._location = location
        if list(op.axes) != axes or op.dtype != dtype:
            raise _Invalid(f"{what} computes {op.axes} {op.dtype}, but the file says "
                           f"{Axes(axes) if len(set(map(id, axes))) == len(axes) else axes} "
                           f"{dtype}")
        return op

    def edges(self, entries: list) -> None:
        """other_deps and user_deps, then a check that args and other_deps form no cycle."""
        count = len(self.ops)
        for index, (entry, op) in enumerate(zip(entries, self.ops)):
            what = f"op {index} ({op.name})"
            op.other_deps = OrderedSet(_refs(entry["other_deps"], self.ops, count, what))
            deps = _refs(entry["user_deps"], self.ops, count, what)
            if deps:
                op._user_deps = OrderedSet(deps)
        position = {op: i for i, op in enumerate(self.ops)}
        state = [0] * count          # 0: not reached, 1: on the path, 2: done

        def successors(node: int) -> Iterator[int]:
            op = self.ops[node]
            return iter([position[d] for d in op.other_deps] + [position[a] for a in op.args])

        for start in range(count):
            if state[start]:
                continue
            state[start] = 1
            stack = [(start, successors(start))]
            while stack:
                node, following = stack[-1]
                after = next(following, None)
                if after is None:
                    state[node] = 2
                    stack.pop()
                elif state[after] == 1:
                    raise _Invalid(f"op {node} ({self.ops[node].name}) and op {after} "
                                   f"({self.ops[after].name}) must each run before the other "
                                   f"(a cycle through other_deps)")
                elif state[after] == 0:
                    state[after] = 1
                    stack.append((after, successors(after)))


def load_graph(path: PathLike) -> LoadedGraph:
    """Load a graph that `save_graph` wrote: new ops, axes and roles, values included.

    Parameters
    ----------
    path : str or os.PathLike
        The graph file.

    Returns
    -------
    LoadedGraph
        Its results, inputs, ops and metadata; `LoadedGraph.computation(t)` makes the
        computation the graph was saved as.

    Raises
    ------
    SerializationError
        The file is missing, truncated, corrupt, crafted or not a graph file, is of
        a newer format version, names an op class this process lacks, or describes a
        graph its ops refuse; the message names the path and the problem. Reading
        never runs code from the file nor allocates more than the file's size allows.
    """
    with open_variables_file(path, GRAPH) as saved:
        with _refused_as(f"{GRAPH.reading} {saved.path}"), Op.saved_user_deps():
            manifest = saved.manifest
            reader = _Reader(saved)
            for index, entry in enumerate(manifest["roles"]):
                reader.roles.append(reader.role(entry, index))
            for index, entry in enumerate(manifest["axes"]):
                try:
                    reader.axes.append(reader.axis(entry, index))
                except _Invalid:
                    raise
                except Exception as error:  # the axis's own checks refuse a crafted entry
                    raise _Invalid(f"axis {index} cannot be made: {type(error).__name__}: "
                                   f"{_cut(str(error), 300)}") from error
            for index, entry in enumerate(manifest["ops"]):
                reader.ops.append(reader.op(entry, index))
            reader.edges(manifest["ops"])
            count = len(reader.ops)
            results = tuple(_refs(manifest["results"], reader.ops, count, "the results"))
            inputs = tuple(_refs(manifest["inputs"], reader.ops, count, "the inputs"))
            for op in inputs:
                if not (isinstance(op, AssignableTensorOp) and op.input):
                    raise _Invalid(f"input {op.name} is not a placeholder")
            if manifest["result_kind"] not in RESULT_KINDS or (
                    manifest["result_kind"] == "single" and len(results) != 1):
                raise _Invalid(f"result kind {_short(manifest['result_kind'])} for "
                               f"{len(results)} results")
            metadata = reader.values.decode(manifest.get("metadata", {"dict": []}),
                                            "the metadata")
            return LoadedGraph(results, inputs, manifest["result_kind"], tuple(reader.ops),
                               metadata if isinstance(metadata, dict) else {}, Path(saved.path))
