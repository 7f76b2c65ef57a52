"""Save and restore variables: one .npz file of arrays plus a JSON manifest, no pickle.

    save_variables("model.npz", loss.variables(), transformer)
    ...
    restore_variables("model.npz", loss.variables(), transformer)

The file is an ordinary .npz: the arrays under keys ``v0, v1, ...`` and, under
``__manifest__``, a JSON document (bytes as a uint8 array) that lists for each
array the variable's name, its axes (names and lengths) and its dtype. The
format, and how it is read without trusting it, is `axgraph.variables_file`:
nothing is pickled, every declared size is checked before memory is
allocated, and a file that is truncated, empty, not ours or crafted is a
`SerializationError` naming the path and what is wrong.

Variables are matched by name: by default a variable's op name, so give the
variables you save a `name=`. Op names are unique among the ops alive in a
process, so a model built twice in one process (a notebook, a test) gets
suffixed names ('w_1'); pass a dict name -> variable to save and restore
under names of your choosing. Restoring checks the
names, the dtypes and the axes: lengths must agree, and axes that have
user-given names on both sides must have the same names. When those names are
the same set in another order, the array is transposed to the variable's
order (axes pair by name, not by position). Every problem is reported at once
in a `SerializationError`, before any array is read.

Saving is atomic: the file is written to a temporary file in the same
directory, flushed to disk, then moved over the destination with
`os.replace`, so a failed save leaves any previous file as it was and no
temporary behind. Saving into a directory that does not exist, or any I/O
failure, is a `SerializationError` naming the path (the OSError is its cause).

Transformers. `get_values` and `set_values` read and write the stored tensors
of a transformer that keeps them in ``transformer.state`` (a dict op ->
ndarray), as the NumPy transformer does. A written tensor is marked in
``transformer.initialized``, so its initializer does not overwrite the
restored value later.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..dtypes import can_feed, is_bfloat16, kind_of, unfit_values
from ..errors import SerializationError
from ..op_graph.op import Op
from ..op_graph.tensors import AssignableTensorOp
from ..variables_file import (BFLOAT16, BFLOAT16_BITS, DTYPES, FORMAT, MANIFEST_KEY, VERSION,
                             open_variables_file, shown_path, write_variables_file)

PathLike = Union[str, "os.PathLike[str]"]
#: Variables to restore (or save): a list of ops, known by their names, or a dict name -> op.
VariablesLike = Union[Sequence[Op], Mapping[str, Op]]

_AUTO_AXIS_NAME = re.compile(r"^Axis_\d+([+-]\d+)?$")


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
    if kind_of(array.dtype) not in "biuf" or not can_feed(array.dtype, op.dtype):
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
        array = _checked_array(op, value)
        with np.errstate(over="ignore"):
            arrays[op] = np.array(array, dtype=op.dtype, copy=True)
        problem = unfit_values(array, arrays[op])
        if problem is not None:
            raise SerializationError(f"{op.name} {op.axes} holds {op.dtype}; the value holds "
                                     f"{problem}, which does not fit")
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
    named: Dict[str, Op] = {}
    if isinstance(variables, Mapping):
        named.update(variables)
        bad = [key for key in named if not isinstance(key, str)]
        if bad:
            raise SerializationError(f"a dict of variables maps names (str) to variables; got "
                                     f"key {bad[0]!r}")
        return named
    for op in variables:
        name = getattr(op, "name", None)
        if not isinstance(name, str):
            raise SerializationError(f"{op!r} is not a variable: pass variables (ops) or a dict "
                                     f"of name -> variable")
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
                   transformer=None, *, metadata: Optional[dict] = None) -> Path:
    """Save variables to the .npz file `path` (atomically); returns the path.

    `values` is one of: a dict variable -> array (e.g. from `get_values`); a
    list of variables, or a dict name -> variable, whose values are read from
    `transformer`; or a transformer, whose trainable variables are all saved.
    Variables are saved under their op names unless a dict gives the names.
    `metadata`, a JSON object (finite numbers only), is kept in the manifest
    (``read_manifest(path)["metadata"]``).
    """
    shown_path(path)
    arrays, entries, names = {}, [], set()
    for index, (name, op, value) in enumerate(_values_to_save(values, transformer)):
        op = _check_stored(op, writing=False)
        if name in names:
            raise SerializationError(f"two variables are named {name!r}; names must be unique")
        names.add(name)
        array = _checked_array(op, value)
        key = f"v{index}"
        arrays[key] = np.asarray(array, dtype=op.dtype, order="C")     # keeps 0-d arrays 0-d
        dtype = op.dtype.str
        if is_bfloat16(op.dtype):  # stored as its bits, which a .npy header can name
            arrays[key], dtype = arrays[key].view(np.uint16).astype(BFLOAT16_BITS), BFLOAT16
        entries.append({"name": name, "key": key, "dtype": dtype,
                        "shape": list(array.shape), "trainable": bool(op.trainable),
                        "axes": [_axis_entry(a, n) for a, n in zip(op.axes, array.shape)]})
    manifest = {"format": FORMAT, "version": VERSION, "variables": entries}
    if metadata is not None:
        manifest["metadata"] = metadata
    return write_variables_file(path, manifest, arrays)


def read_manifest(path: PathLike) -> dict:
    """The checked manifest of a saved file: format, version and one entry per variable."""
    with open_variables_file(path) as saved:
        return saved.manifest


def _user_named(saved_axis: dict, axis) -> bool:
    return not saved_axis["auto_named"] and not _is_auto_named(axis)


def _axis_order(name: str, entry: dict, op: Op) -> Optional[List[int]]:
    """The transposition that puts the saved array in op's axis order (None: none needed).

    Raises a SerializationError naming both shapes when the entry does not fit op.
    """
    saved_axes, axes = entry["axes"], list(op.axes)
    saved_names, names = [a["name"] for a in saved_axes], [a.name for a in axes]
    reorderable = (len(saved_axes) == len(axes)
                   and all(_user_named(s, a) for s, a in zip(saved_axes, axes))
                   and len(set(names)) == len(names) and sorted(saved_names) == sorted(names))
    order = None
    if reorderable and saved_names != names:
        order = [saved_names.index(name) for name in names]
        saved_axes = [saved_axes[i] for i in order]
    described = ", ".join(f"{a['name']}: {a['length']}" for a in entry["axes"])
    lengths = op.axes.lengths
    mismatch = (f"{name}: the file has shape {tuple(entry['shape'])} (axes {described}) but the "
                f"variable has {op.axes}, shape {lengths}")
    if len(saved_axes) != len(axes) or any(n is not None and n != saved["length"]
                                           for n, saved in zip(lengths, saved_axes)):
        raise SerializationError(mismatch)
    for saved, axis in zip(saved_axes, axes):
        if _user_named(saved, axis) and saved["name"] != axis.name:
            raise SerializationError(f"{mismatch}; axis {saved['name']} is not {axis.name}")
    return order


def _some(names: Sequence[str], most: int = 20) -> str:
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def _renamed_hint(missing: Sequence[str], extra: Sequence[str]) -> str:
    """How to restore variables whose names are not in the file: name them, or map names.

    A layer or variable made without name= is numbered in creation order, so a model
    built again (in the same process, or in another order) gets other numbers; where
    each missing name matches one name of the file but for its numbers, the mapping is
    spelled out.
    """
    def numberless(name: str) -> str:
        return re.sub(r"\d+", "#", name)

    by_shape: Dict[str, List[str]] = {}
    for name in extra:
        by_shape.setdefault(numberless(name), []).append(name)
    pairs = [(by_shape[numberless(m)][0], m) for m in missing
             if len(by_shape.get(numberless(m), ())) == 1]
    mapping = ""
    if pairs and len(pairs) == len(missing):
        shown = ", ".join(f"{old!r}: <{new}>" for old, new in pairs[:4])
        more = ", ..." if len(pairs) > 4 else ""
        mapping = f"; here the numbers changed: restore_variables(path, {{{shown}{more}}})"
    return (f"the variables' names differ from the file's. A layer or variable without "
            f"name= is numbered in creation order (Affine_0, then Affine_1), so a model built "
            f"again names them differently: give the layers and variables names "
            f"(Affine(..., name='hidden'), ng.variable(..., name='w')), or pass a dict "
            f"{{name in the file: variable}} to pair them{mapping}. strict=False does not help: "
            f"it only ignores variables the file has beyond these")


def _matched(entries: Mapping[str, dict], named: Mapping[str, Op],
             strict: bool) -> Tuple[Dict[str, Optional[List[int]]], List[str]]:
    """({name: axis order} for the variables that fit their entries, [what does not fit])."""
    problems: List[str] = []
    missing = [name for name in named if name not in entries]
    extra = sorted(set(entries) - set(named))
    if missing:
        problems.append(f"not in the file: {_some(missing)} (it has {_some(list(entries))})")
    if strict and extra:
        ignore = "" if missing else " (pass strict=False to ignore them)"
        problems.append(f"in the file but not among the variables: {_some(extra)}{ignore}")
    if missing:
        problems.append(_renamed_hint(missing, extra))
    orders: Dict[str, Optional[List[int]]] = {}
    for name, op in named.items():
        entry = entries.get(name)
        if entry is None:
            continue
        held = BFLOAT16 if entry["dtype"] == BFLOAT16 else DTYPES[entry["dtype"]].name
        if held != op.dtype.name:  # names ignore byte order
            problems.append(f"{name}: the file holds {held} but the variable is {op.dtype}")
            continue
        try:
            orders[name] = _axis_order(name, entry, op)
        except SerializationError as error:
            problems.append(error.message)
    return orders, problems


def restore_variables(path: PathLike, variables: VariablesLike, transformer=None,
                      strict: bool = True) -> Dict[Op, np.ndarray]:
    """Read the values of `variables` from `path`, checked; write them into `transformer`.

    `variables` is a list of variables (found in the file by op name) or a
    dict name in the file -> variable. Returns the dict variable -> array.
    With `strict`, the file must hold no variable beyond these (those beyond
    are never read either way). Nothing is written unless every check passes.
    """
    return restore_with_manifest(path, variables, transformer, strict)[0]


def restore_with_manifest(path: PathLike, variables: VariablesLike, transformer=None,
                          strict: bool = True) -> Tuple[Dict[Op, np.ndarray], dict]:
    """`restore_variables`, and the file's checked manifest, read from one opening of it."""
    named = _named_variables(variables)
    for op in named.values():
        _check_stored(op, writing=True)
    with open_variables_file(path) as saved:
        orders, problems = _matched(saved.entries, named, strict)
        if problems:
            raise SerializationError(f"cannot restore variables from {saved.path}:\n  "
                                     + "\n  ".join(problems))
        result: Dict[Op, np.ndarray] = {}
        for name, op in named.items():
            array = saved.read(saved.entries[name]).astype(op.dtype, copy=False)
            order = orders[name]
            result[op] = array if order is None else np.transpose(array, order)
        manifest = saved.manifest
    if transformer is not None:
        set_values(transformer, result)
    return result, manifest


__all__ = ["FORMAT", "MANIFEST_KEY", "VERSION", "SerializationError", "get_values",
           "read_manifest", "restore_variables", "restore_with_manifest", "save_variables",
           "set_values"]
