"""What Axon's inference says about types and sizes: conditions, each with its blame set.

Walking a program generates these (`infer.py`, and each builtin's scheme); they say two
types are one (`TypeEq`), two shapes or dims are (`ShapeEq`, `DimEq`), a size is at least
another (`AtLeast`) or a multiple of an int (`Divides`), two shapes hold as many elements
(`SameSize`), one shape is the broadcast of two (`Broadcast`), or a dim marked `#` is 1 or
the dim it faces (`OneOrEqual`). A *blame set* holds the ids of the source positions that
produced a condition, so a contradiction can name every sub-expression behind it. The
`Unifier` (`unify.py`) decides them: types itself, shapes and sizes in the shared shape
solver (`axgraph.shapes.solver`, through `shared.py`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import FrozenSet, Iterable, Set, Union

from ...dims import Dim, DimLike, free_symbols
from .types import Shape, Type, Var, shape_vars, type_vars

Blame = FrozenSet[int]
NO_BLAME: Blame = frozenset()


@dataclass(frozen=True)
class TypeEq:
    """Two types are one."""

    left: Type
    right: Type
    blame: Blame = NO_BLAME


@dataclass(frozen=True)
class ShapeEq:
    """Two shapes are one."""

    left: Shape
    right: Shape
    blame: Blame = NO_BLAME


@dataclass(frozen=True)
class DimEq:
    """Two dims are equal."""

    left: DimLike
    right: DimLike
    blame: Blame = NO_BLAME


@dataclass(frozen=True)
class AtLeast:
    """`value >= least`; `what` says, for an error, what the bound means."""

    value: DimLike
    least: DimLike
    blame: Blame = NO_BLAME
    what: str = ""


@dataclass(frozen=True)
class Divides:
    """`divisor` divides `value` exactly."""

    divisor: int
    value: DimLike
    blame: Blame = NO_BLAME
    what: str = ""


@dataclass(frozen=True)
class SameSize:
    """Two shapes hold as many elements (a reshape)."""

    left: Shape
    right: Shape
    blame: Blame = NO_BLAME


@dataclass(frozen=True)
class Broadcast:
    """`out` is the broadcast of `left` and `right`, aligned at their last dims."""

    left: Shape
    right: Shape
    out: Shape
    blame: Blame = NO_BLAME


@dataclass(frozen=True)
class OneOrEqual:
    """`dim` is 1 or equal to `other`: a dim marked `#` broadcast against `other`."""

    dim: DimLike
    other: DimLike
    blame: Blame = NO_BLAME


Constraint = Union[TypeEq, ShapeEq, DimEq, AtLeast, Divides, SameSize, Broadcast, OneOrEqual]


class Conflict(Exception):
    """Constraints that cannot all hold: `kind` is "type" or "shape", `blame` every
    position that contributed."""

    def __init__(self, kind: str, message: str, blame: Blame):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.blame = blame


def constraint_vars(c: Constraint) -> FrozenSet[Var]:
    """Every variable a constraint mentions."""
    found: Set[Var] = set()
    for term in constraint_terms(c):
        if isinstance(term, tuple):
            found.update(shape_vars(term))
        elif isinstance(term, (int, Dim)):
            found.update(free_symbols(term))
        else:
            found.update(type_vars(term))
    return frozenset(found)


Term = Union[Type, Shape, DimLike]


def constraint_terms(c: Constraint) -> Iterable[Term]:
    """The types, shapes or dims a constraint relates."""
    if isinstance(c, (TypeEq, ShapeEq, DimEq, SameSize)):
        return (c.left, c.right)
    if isinstance(c, AtLeast):
        return (c.value, c.least)
    if isinstance(c, Divides):
        return (c.value,)
    if isinstance(c, Broadcast):
        return (c.left, c.right, c.out)
    if isinstance(c, OneOrEqual):
        return (c.dim, c.other)
    raise TypeError(f"not a constraint: {c!r}")


def rename_constraint(c: Constraint, rename) -> Constraint:
    """A constraint with `rename` (a function on types, shapes and dims) applied to its terms."""
    if isinstance(c, (TypeEq, ShapeEq, DimEq, SameSize)):
        return replace(c, left=rename(c.left), right=rename(c.right))
    if isinstance(c, AtLeast):
        return replace(c, value=rename(c.value), least=rename(c.least))
    if isinstance(c, Divides):
        return replace(c, value=rename(c.value))
    if isinstance(c, Broadcast):
        return replace(c, left=rename(c.left), right=rename(c.right), out=rename(c.out))
    if isinstance(c, OneOrEqual):
        return replace(c, dim=rename(c.dim), other=rename(c.other))
    raise TypeError(f"not a constraint: {c!r}")


def with_blame(c: Constraint, blame: Blame) -> Constraint:
    """A constraint with `blame` added to its own."""
    return replace(c, blame=c.blame | blame)
