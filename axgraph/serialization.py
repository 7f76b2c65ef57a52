"""Save and restore variables: one .npz file of arrays plus a JSON manifest, no pickle.

    save_variables("model.npz", loss.variables(), transformer)
    ...
    restore_variables("model.npz", loss.variables(), transformer)

The file is an ordinary .npz: the arrays under keys ``v0, v1, ...`` and, under
``__manifest__``, a JSON document (UTF-8 bytes as a uint8 array) that lists for
each array the variable's name, its axes (names and lengths) and its dtype.
Nothing is pickled, and files are read with ``np.load(allow_pickle=False)``,
so loading a file runs no code from it.

Variables are matched by name: by default a variable's op name, so give the
variables you save a `name=`. Op names are unique among the ops alive in a
process, so a model built twice in one process (a notebook, a test) gets
suffixed names ('w_1'); pass a dict name -> variable to save and restore
under names of your choosing. Restoring checks the
names, the dtypes and the axes: lengths must agree, and axes that have
user-given names on both sides must have the same names. When those names are
the same set in another order, the array is transposed to the variable's
order (axes pair by name, not by position). Every problem is reported at once
in a `SerializationError` (a `GraphError`).

Saving is atomic: the file is written to a temporary file in the same
directory, flushed to disk, then moved over the destination with
`os.replace`, so a failed save leaves any previous file as it was.

Transformers. `get_values` and `set_values` read and write the stored tensors
of a transformer that keeps them in ``transformer.state`` (a dict op ->
ndarray), as the NumPy transformer does. A written tensor is marked in
``transformer.initialized``, so its initializer does not overwrite the
restored value later.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Dict, List, Mapping, Sequence, Tuple, Union

import numpy as np

from .dtypes import can_feed
from .errors import GraphError
from .op_graph.op import Op
from .op_graph.tensors import AssignableTensorOp

PathLike = Union[str, "os.PathLike[str]"]
#: Variables to restore (or save): a list of ops, known by their names, or a dict name -> op.
VariablesLike = Union[Sequence[Op], Mapping[str, Op]]

FORMAT = "axgraph-variables"
VERSION = 1
MANIFEST_KEY = "__manifest__"
_AUTO_AXIS_NAME = re.compile(r"^Axis_\d+([+-]\d+)?$")


class SerializationError(GraphError):
    """A file that cannot be saved or restored, or that does not fit the variables."""


# -- values in a transformer -----------------------------------------------------------


def _stored_tensors(transformer):
    state, initialized = getattr(transformer, "state", None), getattr(transformer, "initialized", None)
    if not isinstance(state, dict) or not isinstance(initialized, set):
        raise SerializationError(f"{type(transformer).__name__} does not expose its stored tensors "
                                 f"(transformer.state and transformer.initialized)")
    if getattr(transformer, "closed", False):
        raise SerializationError(f"this {type(transformer).__name__} is closed; its values are gone")
    return state, initialized


def _check_stored(op, writing: bool) -> AssignableTensorOp:
    if not (isinstance(op, AssignableTensorOp) and op.persistent):
        raise SerializationError(f"{getattr(op, 'name', op)!r} is not a stored tensor (a variable, "
                                 f"persistent tensor, placeholder or constant)")
    if writing and op.constant:
        raise SerializationError(f"{op.name} {op.axes} is a constant and cannot be written")
    return op


def _checked_array(op: AssignableTensorOp, value) -> np.ndarray:
    """`value` as an array that fits op's axes and converts to its dtype without changing kind."""
    array = np.asarray(value)
    if array.dtype.kind not in "biuf" or not can_feed(array.dtype, op.dtype):
        raise SerializationError(f"{op.name} {op.axes} holds {op.dtype}; a {array.dtype} array "
                                 f"does not fit it")
    expected = op.axes.lengths
    if array.ndim != len(expected) or any(
            n is not None and n != m for n, m in zip(expected, array.shape)):
        raise SerializationError(f"{op.name} has axes {op.axes} (shape {expected}); an array of "
                                 f"shape {array.shape} does not fit it")
    return array


def get_values(transformer, ops: Sequence[Op]) -> Dict[Op, np.ndarray]:
    """Copies of the current values of `ops` (stored tensors) in `transformer`.

    A tensor the transformer has not initialized yet is initialized first
    (by a computation of it that runs no other assign), so a model can be
    saved before it is trained.
    """
    state, _ = _stored_tensors(transformer)
    ops = [_check_stored(op, writing=False) for op in ops]
    missing = [op for op in ops if op not in state]
    if missing:
        with Op.saved_user_deps():
            transformer.computation(missing)()
    return {op: np.array(state[op], copy=True) for op in ops}


def set_values(transformer, values: Mapping[Op, np.ndarray]) -> None:
    """Write `values` (op -> array in the op's axes order) into `transformer`.

    Everything is checked before anything is written; each tensor is then
    marked initialized, so later computations keep the written value.
    """
    state, initialized = _stored_tensors(transformer)
    arrays = {}
    for op, value in values.items():
        op = _check_stored(op, writing=True)
        arrays[op] = np.array(_checked_array(op, value), dtype=op.dtype, copy=True)
    state.update(arrays)
    initialized.update(arrays)


# -- the file ------------------------------------------------------------------------


def _is_auto_named(axis) -> bool:
    """True for names axgraph made up (they differ from one run to the next)."""
    return bool(getattr(axis.base, "_auto_named", False) or _AUTO_AXIS_NAME.match(axis.name))


def _axis_entry(axis, length: int) -> dict:
    return {"name": axis.name, "length": int(length), "dual_level": axis.dual_level,
            "auto_named": _is_auto_named(axis)}


Named = List[Tuple[str, Op, np.ndarray]]


def _named_variables(variables) -> Dict[str, Op]:
    """{name: op} from a dict name -> op, or from a list of ops (keyed by op.name)."""
    if isinstance(variables, Mapping):
        named = dict(variables)
        bad = [key for key in named if not isinstance(key, str)]
        if bad:
            raise SerializationError(f"a dict of variables maps names (str) to variables; got "
                                     f"key {bad[0]!r}")
        return named
    named = {}
    for op in variables:
        name = getattr(op, "name", None)
        if name in named:
            raise SerializationError(f"two variables are named {name!r}; names must be unique")
        named[name] = op
    return named


def _values_to_save(values, transformer) -> Named:
    if isinstance(values, Mapping) and all(isinstance(key, Op) for key in values):
        return [(op.name, op, value) for op, value in values.items()]
    if hasattr(values, "computation") and transformer is None:  # a transformer: all its variables
        state, _ = _stored_tensors(values)
        values, transformer = sorted((op for op in state if getattr(op, "trainable", False)),
                                     key=lambda op: op._serial), values
    named = _named_variables(values)
    if transformer is None:
        raise SerializationError("save_variables: pass transformer= to read the variables' values "
                                 "from (or a dict variable -> array)")
    current = get_values(transformer, list(named.values()))
    return [(name, op, current[op]) for name, op in named.items()]


def save_variables(path: PathLike, values: Union[Mapping[Op, np.ndarray], VariablesLike, object],
                   transformer=None) -> Path:
    """Save variables to the .npz file `path` (atomically); returns the path.

    `values` is one of: a dict variable -> array (e.g. from `get_values`); a
    list of variables, or a dict name -> variable, whose values are read from
    `transformer`; or a transformer, whose trainable variables are all saved.
    Variables are saved under their op names unless a dict gives the names.
    """
    arrays, entries, names = {}, [], set()
    for index, (name, op, value) in enumerate(_values_to_save(values, transformer)):
        op = _check_stored(op, writing=False)
        if name in names:
            raise SerializationError(f"two variables are named {name!r}; names must be unique")
        names.add(name)
        array = _checked_array(op, value)
        key = f"v{index}"
        arrays[key] = np.ascontiguousarray(array, dtype=op.dtype)
        entries.append({"name": name, "key": key, "dtype": op.dtype.str,
                        "shape": list(array.shape), "trainable": bool(op.trainable),
                        "axes": [_axis_entry(a, n) for a, n in zip(op.axes, array.shape)]})
    manifest = {"format": FORMAT, "version": VERSION, "variables": entries}
    arrays[MANIFEST_KEY] = np.frombuffer(json.dumps(manifest, indent=1).encode("utf-8"),
                                         dtype=np.uint8)
    path = Path(path)
    _write_atomically(path, arrays)
    return path


def _write_atomically(path: Path, arrays: Dict[str, np.ndarray]) -> None:
    """Write the .npz to a temporary file beside `path`, then move it over `path`."""
    directory = path.parent
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as file:
            # (NumPy >= 2.1 stubs match **arrays against savez's allow_pickle: bool too)
            np.savez(file, **arrays)  # type: ignore[arg-type, unused-ignore]
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _sync_directory(directory)


def _sync_directory(directory: Path) -> None:
    """Make the rename itself durable where the platform allows it (POSIX)."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _load(path: PathLike):
    """(manifest, {key: array}) of a file written by save_variables."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            contents = {key: archive[key] for key in archive.files}
    except (OSError, ValueError) as error:
        raise SerializationError(f"cannot read variables from {path}: {error}") from error
    raw = contents.pop(MANIFEST_KEY, None)
    try:
        manifest = json.loads(bytes(raw).decode("utf-8")) if raw is not None else None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise SerializationError(f"{path}: its manifest is not valid JSON: {error}") from error
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise SerializationError(f"{path} is not an axgraph variables file (no {FORMAT} manifest)")
    if manifest.get("version") != VERSION:
        raise SerializationError(f"{path} has format version {manifest.get('version')}; this "
                                 f"axgraph reads version {VERSION}")
    return manifest, contents


def read_manifest(path: PathLike) -> dict:
    """The manifest of a saved file: format, version and one entry per variable."""
    return _load(path)[0]


def _user_named(saved_axis: dict, axis) -> bool:
    return not saved_axis["auto_named"] and not _is_auto_named(axis)


def _arranged(name: str, entry: dict, array: np.ndarray, op: Op) -> np.ndarray:
    """`array` in op's axis order, or a SerializationError saying why it does not fit."""
    saved_axes, axes = entry["axes"], list(op.axes)
    saved_names, names = [a["name"] for a in saved_axes], [a.name for a in axes]
    reorderable = (len(saved_axes) == len(axes) == array.ndim
                   and all(_user_named(s, a) for s, a in zip(saved_axes, axes))
                   and len(set(names)) == len(names) and sorted(saved_names) == sorted(names))
    if reorderable and saved_names != names:
        order = [saved_names.index(name) for name in names]
        array, saved_axes = np.transpose(array, order), [saved_axes[i] for i in order]
    described = ", ".join(f"{a['name']}: {a['length']}" for a in entry["axes"])
    lengths = op.axes.lengths
    if array.ndim != len(axes) or any(n is not None and n != m
                                      for n, m in zip(lengths, array.shape)):
        raise SerializationError(f"{name}: the file has axes ({described}) but the variable "
                                 f"has {op.axes}")
    for saved, axis in zip(saved_axes, axes):
        if _user_named(saved, axis) and saved["name"] != axis.name:
            raise SerializationError(f"{name}: the file has axes ({described}) but the "
                                     f"variable has {op.axes}; axis {saved['name']} is not "
                                     f"{axis.name}")
    return array


def restore_variables(path: PathLike, variables: VariablesLike, transformer=None,
                      strict: bool = True) -> Dict[Op, np.ndarray]:
    """Read the values of `variables` from `path`, checked; write them into `transformer`.

    `variables` is a list of variables (found in the file by op name) or a
    dict name in the file -> variable. Returns the dict variable -> array.
    With `strict`, the file must hold no variable beyond these. Nothing is
    written unless every check passes.
    """
    manifest, contents = _load(path)
    saved = {entry["name"]: entry for entry in manifest["variables"]}
    named = _named_variables(variables)
    for op in named.values():
        _check_stored(op, writing=True)
    problems: List[str] = []
    missing = [name for name in named if name not in saved]
    if missing:
        problems.append(f"not in the file: {', '.join(missing)} (it has {', '.join(saved)})")
    if strict:
        extra = sorted(set(saved) - set(named))
        if extra:
            problems.append(f"in the file but not among the variables: {', '.join(extra)} "
                            f"(pass strict=False to ignore them)")
    result: Dict[Op, np.ndarray] = {}
    for name, op in named.items():
        entry = saved.get(name)
        if entry is None:
            continue
        array = contents.get(entry["key"])
        if array is None:
            problems.append(f"{name}: its array {entry['key']} is missing from the file")
            continue
        if np.dtype(entry["dtype"]) != op.dtype or array.dtype != op.dtype:
            problems.append(f"{name}: the file holds {np.dtype(entry['dtype'])} but the "
                            f"variable is {op.dtype}")
            continue
        try:
            result[op] = _arranged(name, entry, array, op)
        except SerializationError as error:
            problems.append(error.message)
    if problems:
        raise SerializationError(f"cannot restore variables from {path}:\n  "
                                 + "\n  ".join(problems))
    if transformer is not None:
        set_values(transformer, result)
    return result


__all__ = ["SerializationError", "get_values", "read_manifest", "restore_variables",
           "save_variables", "set_values"]
