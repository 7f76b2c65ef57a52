"""Attribute values of a graph file as JSON: one tagged form per kind of value, no code.

An op's declared attributes and metadata hold plain values (None, bools, ints,
floats, strings), containers of them (tuples, lists, dicts), slices, dtypes,
symbolic dims, arrays, and references: to axes, roles and ops (by their index
in the file's tables) and to the small frozen dataclasses op modules declare
(a convolution's layouts and geometry); core IR nodes add element types and
shapes. `ValueEncoder` turns one into JSON:
None, bools, ints, strings and finite floats as themselves, everything else as
an object with one key naming its kind (``{"tuple": [...]}``, ``{"axis": 3}``,
``{"array": "a0"}``). `ValueDecoder` reads that back, checking every field and
bound; the kinds it knows are the keys of one table, and a dataclass is made
only from the table the caller derives from the op classes' modules. A value
of any other kind (a Python function, say) cannot be saved: the encoder names
it.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set

import numpy as np

from ..axes import Axes, Axis, AxisRole
from ..core.tensor_types import ElementType, Shape, element_types
from ..dims import Dim, dim, dim_max, dim_min
from ..dtypes import bfloat16, is_bfloat16
from ..op_graph.op import Op
from ..variables_file import BFLOAT16, DTYPES, _Invalid, _short

#: How deeply values may nest in a file (a tuple of tuples of ...).
MAX_DEPTH = 48
#: The most terms a symbolic dim may have while it is rebuilt from a file.
MAX_DIM_TERMS = 1 << 12
MAX_TEXT = 1 << 16
_MAX_INT = (1 << 63) - 1

#: Element types by the name a graph file writes (`np.dtype.name`); bfloat16 by its own.
DTYPE_NAMES = sorted({d.name for d in DTYPES.values()} | {BFLOAT16})


def dtype_name(dtype: np.dtype) -> str:
    """The name a graph file gives `dtype` (native byte order)."""
    return BFLOAT16 if is_bfloat16(dtype) else np.dtype(dtype).newbyteorder("=").name


def dtype_from_name(name, what: str) -> np.dtype:
    """The dtype a file's `name` stands for: only the names of `DTYPE_NAMES`."""
    if name == BFLOAT16:
        return bfloat16()
    if not isinstance(name, str) or name not in DTYPE_NAMES:
        raise _Invalid(f"{what}: dtype {_short(name)} is not one of {', '.join(DTYPE_NAMES)}")
    return np.dtype(name)


class Unsaveable(Exception):
    """A value the encoder cannot write (its message says what it is)."""


def subclass_table(base: type) -> Dict[str, Optional[type]]:
    """{class name: class} of every subclass of `base` defined in this process (None for a
    name two classes share): the only way a file's class name becomes a class, so a file
    names no class that is not already one of ours or the user's."""
    table: Dict[str, Optional[type]] = {}
    stack: List[type] = list(base.__subclasses__())
    seen: Set[type] = set()
    while stack:
        kind = stack.pop()
        if kind in seen:
            continue
        seen.add(kind)
        stack.extend(kind.__subclasses__())
        table[kind.__name__] = None if kind.__name__ in table else kind
    return table


def dataclass_table(modules: Sequence[object]) -> Dict[str, type]:
    """{name: class} of the dataclasses the given modules define themselves."""
    table: Dict[str, type] = {}
    for module in modules:
        for name, value in vars(module).items():
            if (isinstance(value, type) and dataclasses.is_dataclass(value)
                    and value.__module__ == getattr(module, "__name__", None)):
                table[name] = value
    return table


# -- symbolic dims -------------------------------------------------------------------------


def _encode_terms(terms) -> list:
    return [[[_encode_atom(atom) for atom in monomial], coeff] for monomial, coeff in terms]


def _encode_atom(atom: tuple) -> list:
    kind = atom[0]
    if kind == "v":
        if len(atom) == 2:
            return ["v", atom[1]]
        return ["v", atom[1], atom[2], None if atom[3] == math.inf else atom[3]]
    if kind == "f":
        return ["f", _encode_terms(atom[1]), atom[2]]
    return [kind, [_encode_terms(terms) for terms in atom[1]]]


def encode_dim(value: Dim) -> list:
    """The canonical terms of a symbolic dim as JSON lists."""
    return _encode_terms(value._terms)


def _int(value, what: str, low: int = -_MAX_INT, high: int = _MAX_INT) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise _Invalid(f"{what} is {_short(value)}, not an int from {low} to {high}")
    return value


def _list(value, what: str, most: Optional[int] = None) -> list:
    if not isinstance(value, list):
        raise _Invalid(f"{what} is {type(value).__name__} {_short(value)}, not a list")
    if most is not None and len(value) > most:
        raise _Invalid(f"{what} has {len(value)} items; at most {most} are allowed")
    return value


def _bounded(value, what: str):
    if isinstance(value, Dim) and len(value._terms) > MAX_DIM_TERMS:
        raise _Invalid(f"{what} grows beyond {MAX_DIM_TERMS} terms")
    return value


def _times(a, b, what: str):
    """a * b for dims, refused before the product could grow beyond the bound."""
    size = (len(a._terms) if isinstance(a, Dim) else 1) * (len(b._terms) if isinstance(b, Dim) else 1)
    if size > MAX_DIM_TERMS:
        raise _Invalid(f"{what} grows beyond {MAX_DIM_TERMS} terms")
    return a * b


def decode_dim(value, what: str, depth: int = 0):
    """The dim whose canonical terms a file lists, rebuilt by dims arithmetic (so a
    non-canonical file still gives a canonical dim), never past the bounds."""
    if depth > MAX_DEPTH:
        raise _Invalid(f"{what} nests deeper than {MAX_DEPTH}")
    total: Any = 0
    for term in _list(value, what, MAX_DIM_TERMS):
        monomial, coeff = _list(term, f"{what}: a term", 2) + [None] * (2 - len(term))
        product: Any = _int(coeff, f"{what}: a coefficient")
        for atom in _list(monomial, f"{what}: a monomial", 64):
            product = _times(product, _decode_atom(atom, what, depth + 1), what)
        total = _bounded(total + product, what)
    return total


def _name(value, what: str) -> str:
    if not isinstance(value, str) or not value.isidentifier() or len(value) > 256:
        raise _Invalid(f"{what}: size variable name {_short(value)} is not an identifier")
    return value


def _decode_atom(atom, what: str, depth: int):
    atom = _list(atom, f"{what}: an atom", 4)
    kind = atom[0] if atom else None
    if kind == "v" and len(atom) == 2:
        return Dim(_name(atom[1], what))
    if kind == "v" and len(atom) == 4:
        low = _int(atom[2], f"{what}: a lower bound", 0)
        high = None if atom[3] is None else _int(atom[3], f"{what}: an upper bound", low)
        return dim(_name(atom[1], what), low, high)
    if kind == "f" and len(atom) == 3:
        inner = decode_dim(atom[1], what, depth)
        return _bounded(inner // _int(atom[2], f"{what}: a divisor", 2), what)
    if kind in ("max", "min") and len(atom) == 2:
        parts = [decode_dim(part, what, depth) for part in _list(atom[1], what, 64)]
        if len(parts) < 2:
            raise _Invalid(f"{what}: {kind} of {len(parts)} dims")
        return _bounded((dim_max if kind == "max" else dim_min)(*parts), what)
    raise _Invalid(f"{what}: {_short(atom)} is not a size variable, floor, max or min")


# -- values --------------------------------------------------------------------------------


class ValueEncoder:
    """Turns attribute values into JSON, registering what they refer to with its owner.

    `axis`, `role` and `op` give the file index of an object (registering it);
    `array` stores an array and gives its member key; `dataclasses` is the table
    of dataclasses a file may hold.
    """

    def __init__(self, axis: Callable[[Axis], int], role: Callable[[AxisRole], int],
                 op: Callable[[Op], int], array: Callable[[np.ndarray], str],
                 dataclass_types: Mapping[str, type]):
        self.axis, self.role, self.op, self.array = axis, role, op, array
        self.dataclass_types = dataclass_types

    def encode(self, value, depth: int = 0):
        """`value` as JSON (see the module's docstring); Unsaveable if it has no form."""
        if depth > MAX_DEPTH:
            raise Unsaveable(f"a value nested deeper than {MAX_DEPTH}")
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, int):
            if not -_MAX_INT <= value <= _MAX_INT:
                raise Unsaveable(f"the int {value}, beyond 64 bits")
            return int(value)
        if isinstance(value, float):
            return value if math.isfinite(value) else {"float": repr(value)}
        if isinstance(value, Op):
            return {"op": self.op(value)}
        if isinstance(value, Axes):
            return {"axes": [self.axis(a) for a in value]}
        if isinstance(value, Axis):
            return {"axis": self.axis(value)}
        if isinstance(value, AxisRole):
            return {"role": self.role(value)}
        if isinstance(value, Dim):
            return {"dim": encode_dim(value)}
        if isinstance(value, np.ndarray):
            return {"array": self.array(value)}
        if isinstance(value, np.generic):
            return {"scalar": self.array(np.asarray(value))}
        if isinstance(value, np.dtype):
            return {"dtype": dtype_name(value)}
        if isinstance(value, ElementType):
            return {"element_type": value.name}
        if isinstance(value, Shape):
            return {"shape": [self.encode(d, depth + 1) for d in value]}
        if isinstance(value, slice):
            return {"slice": [self.encode(b, depth + 1) for b in (value.start, value.stop,
                                                                  value.step)]}
        if isinstance(value, (tuple, list)):
            return {type(value).__name__: [self.encode(item, depth + 1) for item in value]}
        if isinstance(value, dict):
            return {"dict": [[self.encode(k, depth + 1), self.encode(v, depth + 1)]
                             for k, v in value.items()]}
        kind = type(value)
        if dataclasses.is_dataclass(value) and self.dataclass_types.get(kind.__name__) is kind:
            return {"dataclass": [kind.__name__, {
                field.name: self.encode(getattr(value, field.name), depth + 1)
                for field in dataclasses.fields(value) if field.init}]}
        if callable(value):
            raise Unsaveable(f"the Python function {getattr(value, '__qualname__', kind.__name__)}, "
                             f"which a graph file cannot hold (it holds data, never code)")
        raise Unsaveable(f"a {kind.__module__}.{kind.__qualname__}, which a graph file cannot "
                         f"hold")


class ValueDecoder:
    """Reads the JSON `ValueEncoder` writes, through lookups given by its owner.

    `axes`, `roles` and `ops` are the objects decoded so far (a reference must be
    to one of them); `array` reads a member by key; `dataclass_types` is the
    table of dataclasses that may be made.
    """

    def __init__(self, axes: List[Axis], roles: List[AxisRole], ops: List[Op],
                 array: Callable[[str, str], np.ndarray], dataclass_types: Mapping[str, type]):
        self.axes, self.roles, self.ops, self.array = axes, roles, ops, array
        self.dataclass_types = dataclass_types
        self._kinds: Dict[str, Callable[[Any, str, int], Any]] = {
            "float": self._float, "op": self._op, "axes": self._axes, "axis": self._axis,
            "role": self._role, "dim": lambda v, what, depth: decode_dim(v, what, depth),
            "array": self._array, "scalar": self._scalar, "dtype": self._dtype,
            "slice": self._slice, "tuple": self._tuple, "list": self._items,
            "element_type": self._element_type, "shape": self._shape,
            "dict": self._dict, "dataclass": self._dataclass}

    def decode(self, value, what: str, depth: int = 0):
        """The value `value` (JSON) stands for; _Invalid naming `what` if it is not one."""
        if depth > MAX_DEPTH:
            raise _Invalid(f"{what} nests deeper than {MAX_DEPTH}")
        if value is None or isinstance(value, (bool, float)):
            return value
        if isinstance(value, int):
            return _int(value, what)
        if isinstance(value, str):
            if len(value) > MAX_TEXT:
                raise _Invalid(f"{what} is a string of {len(value)} characters; at most "
                               f"{MAX_TEXT} are allowed")
            return value
        if isinstance(value, dict) and len(value) == 1:
            (kind, body), = value.items()
            decode = self._kinds.get(kind)
            if decode is not None:
                return decode(body, what, depth + 1)
        raise _Invalid(f"{what} is {_short(value)}, not a value a graph file holds (kinds: "
                       f"{', '.join(sorted(self._kinds))})")

    @staticmethod
    def _index(value, table: list, kind: str, what: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < len(table):
            raise _Invalid(f"{what} refers to {kind} {_short(value)}; the file has "
                           f"{len(table)} {kind}s before it")
        return value

    def _float(self, value, what: str, depth: int) -> float:
        if value not in ("nan", "inf", "-inf"):
            raise _Invalid(f"{what}: {_short(value)} is not nan, inf or -inf")
        return float(value)

    def _op(self, value, what: str, depth: int) -> Op:
        return self.ops[self._index(value, self.ops, "op", what)]

    def _axis(self, value, what: str, depth: int) -> Axis:
        return self.axes[self._index(value, self.axes, "axis", what)]

    def _axes(self, value, what: str, depth: int) -> Axes:
        found = [self._axis(v, what, depth) for v in _list(value, what, len(self.axes))]
        if len({id(a) for a in found}) != len(found):
            raise _Invalid(f"{what} repeats an axis")
        return Axes(found)

    def _role(self, value, what: str, depth: int) -> AxisRole:
        return self.roles[self._index(value, self.roles, "role", what)]

    def _array(self, value, what: str, depth: int) -> np.ndarray:
        if not isinstance(value, str):
            raise _Invalid(f"{what}: array key {_short(value)} is not a string")
        return self.array(value, what)

    def _scalar(self, value, what: str, depth: int):
        array = self._array(value, what, depth)
        if array.ndim != 0:
            raise _Invalid(f"{what}: a scalar's array has shape {array.shape}")
        return array[()]

    def _dtype(self, value, what: str, depth: int) -> np.dtype:
        return dtype_from_name(value, what)

    def _element_type(self, value, what: str, depth: int) -> ElementType:
        found = {t.name: t for t in element_types()}.get(value) if isinstance(value, str) else None
        if found is None:
            raise _Invalid(f"{what}: {_short(value)} is not an element type of the core IR")
        return found

    def _shape(self, value, what: str, depth: int) -> Shape:
        dims = [self.decode(d, what, depth) for d in _list(value, what, 64)]
        if not all(isinstance(d, Dim) or (isinstance(d, int) and not isinstance(d, bool)
                                          and d >= 0) for d in dims):
            raise _Invalid(f"{what}: shape {_short(value)} is not a list of dims")
        return Shape(*dims)

    def _slice(self, value, what: str, depth: int) -> slice:
        bounds = _list(value, what, 3)
        if len(bounds) != 3:
            raise _Invalid(f"{what}: a slice has 3 bounds, not {len(bounds)}")
        return slice(*(self.decode(b, what, depth) for b in bounds))

    def _items(self, value, what: str, depth: int) -> list:
        return [self.decode(item, what, depth) for item in _list(value, what)]

    def _tuple(self, value, what: str, depth: int) -> tuple:
        return tuple(self._items(value, what, depth))

    def _dict(self, value, what: str, depth: int) -> dict:
        result = {}
        for pair in _list(value, what):
            if not isinstance(pair, list) or len(pair) != 2:
                raise _Invalid(f"{what}: a dict item is {_short(pair)}, not a [key, value] pair")
            key = self.decode(pair[0], what, depth)
            try:
                hash(key)
            except TypeError:
                raise _Invalid(f"{what}: a dict key is a {type(key).__name__}") from None
            result[key] = self.decode(pair[1], what, depth)
        return result

    def _dataclass(self, value, what: str, depth: int):
        body = _list(value, what, 2)
        name, fields = body + [None] * (2 - len(body))
        kind = self.dataclass_types.get(name) if isinstance(name, str) else None
        if kind is None:
            raise _Invalid(f"{what}: {_short(name)} is not one of the value classes an op may "
                           f"hold ({', '.join(sorted(self.dataclass_types)) or 'none'})")
        declared = [field.name for field in dataclasses.fields(kind) if field.init]
        if not isinstance(fields, dict) or sorted(fields) != sorted(declared):
            raise _Invalid(f"{what}: a {name} has the fields {declared}, not "
                           f"{_short(fields)}")
        return kind(**{key: self.decode(fields[key], f"{what}.{key}", depth)
                       for key in declared})
