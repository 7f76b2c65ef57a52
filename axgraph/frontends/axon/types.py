"""Type terms of the inference: tensors with symbolic shapes, functions, tuples, variables.

    type   ::= dtype[shape] | type -> type | type * ... * type | 'a
    shape  ::= a sequence of dims and shape variables (`[*b, k]` is b ++ [k])
    dim    ::= an axgraph `Dim` expression or an int

A shape is a plain tuple whose items are dims (int or `Dim`) or `ShapeVar`s spliced in
place, so `S1 ++ S2` needs no node of its own: appending is tuple concatenation, and the
rank is known exactly when no `ShapeVar` is left. Size variables are `Dim` names; the
inference's own ones start with `_` (Axon names cannot), and remember a hint (the name
the user wrote) for printing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Iterator, Set, Tuple, Union

import numpy as np

from ...dims import Dim, free_symbols

#: Element types by their Axon name.
DTYPES: Dict[str, type] = {"f32": np.float32, "f64": np.float64, "i32": np.int32}


@dataclass(frozen=True)
class TypeVar:
    """`'a`: a variable standing for any type."""

    id: int
    hint: str = field(default="a", compare=False)


@dataclass(frozen=True)
class DTypeVar:
    """A variable standing for an element type (`'t` in `'t[n]`)."""

    id: int
    hint: str = field(default="t", compare=False)


@dataclass(frozen=True)
class ShapeVar:
    """`*b`: a variable standing for any number of dims."""

    id: int
    hint: str = field(default="s", compare=False)


DType = Union[str, DTypeVar]
Elem = Union[int, Dim, ShapeVar]
Shape = Tuple[Elem, ...]


@dataclass(frozen=True)
class TensorType:
    """`dtype[shape]`."""

    dtype: DType
    shape: Shape

    @property
    def rank(self):
        """The number of dims, or None while a shape variable is left."""
        return None if any(isinstance(e, ShapeVar) for e in self.shape) else len(self.shape)


@dataclass(frozen=True)
class FunctionType:
    """`arg -> result`."""

    arg: "Type"
    result: "Type"


@dataclass(frozen=True)
class TupleType:
    """`t1 * t2 * ...` (two items or more)."""

    items: Tuple["Type", ...]


Type = Union[TypeVar, TensorType, FunctionType, TupleType]
Var = Union[TypeVar, DTypeVar, ShapeVar, str]  # a str is a size variable's name


def is_internal(name: str) -> bool:
    """Whether a size variable was made by the inference (not named by the user)."""
    return name.startswith("_")


class Fresh:
    """A supply of new variables, remembering each size variable's hint for printing."""

    def __init__(self) -> None:
        self.counter = 0
        self.hints: Dict[str, str] = {}
        #: Size variables marked `#`: they may be 1, and then broadcast.
        self.marked: Set[str] = set()

    def _next(self) -> int:
        self.counter += 1
        return self.counter

    def type(self, hint: str = "a") -> TypeVar:
        """A new type variable."""
        return TypeVar(self._next(), hint)

    def dtype(self, hint: str = "t") -> DTypeVar:
        """A new element-type variable."""
        return DTypeVar(self._next(), hint)

    def shape(self, hint: str = "s") -> ShapeVar:
        """A new shape variable."""
        return ShapeVar(self._next(), hint)

    def dim(self, hint: str = "d") -> Dim:
        """A new size variable (named `_<n>`)."""
        name = f"_{self._next()}"
        self.hints[name] = hint
        return Dim(name)

    def tensor(self, hint: str = "s") -> TensorType:
        """A tensor of any element type and any shape."""
        return TensorType(self.dtype(), (self.shape(hint),))


def map_dims(t: Type, f) -> Type:
    """`t` with `f` applied to every dim (ints included)."""
    if isinstance(t, TensorType):
        return TensorType(t.dtype, tuple(e if isinstance(e, ShapeVar) else f(e) for e in t.shape))
    if isinstance(t, FunctionType):
        return FunctionType(map_dims(t.arg, f), map_dims(t.result, f))
    if isinstance(t, TupleType):
        return TupleType(tuple(map_dims(item, f) for item in t.items))
    return t


def type_vars(t: Type) -> Iterator[Var]:
    """Every variable of `t` (type, element-type, shape and size variables), with repeats."""
    if isinstance(t, TypeVar):
        yield t
    elif isinstance(t, TensorType):
        if isinstance(t.dtype, DTypeVar):
            yield t.dtype
        yield from shape_vars(t.shape)
    elif isinstance(t, FunctionType):
        yield from type_vars(t.arg)
        yield from type_vars(t.result)
    elif isinstance(t, TupleType):
        for item in t.items:
            yield from type_vars(item)


def shape_vars(shape: Shape) -> Iterator[Var]:
    """The shape variables and size-variable names of a shape."""
    for elem in shape:
        if isinstance(elem, ShapeVar):
            yield elem
        else:
            yield from sorted(free_symbols(elem))


def free_vars(t: Type) -> FrozenSet[Var]:
    """The set of variables of `t`."""
    return frozenset(type_vars(t))

