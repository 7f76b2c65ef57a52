"""What the shape solver is told: constraints on dims and shapes, each with its origin.

A constraint says two dims are equal (`Equal`), one is at least another
(`AtLeast`), one divides another (`Divides`), a dim is 1 or another
(`OneOrEqual`), two shapes are the same (`SameShape`) or hold as many elements
(`SameSize`), or one shape is the broadcast of two others (`Broadcast`). A
shape is a sequence whose items are dims or shape variables
(`ShapeVar`): `[ShapeVar("b"), m, k]` is the Axon type `[*b, m, k]`, and
appending shapes is concatenating the sequences (`S ++ [n]`). Every
constraint carries an `Origin`, the user's file and line and what made it,
so the solver can name every line a contradiction comes from.

`Variable` tells the solver how it may treat a size variable: a *rigid* one
is an input the user declared (`ng.dim("B")`); the solver may find it must
take one value (it is then *pinned*, and checked when data is fed) but never
treats that as a free choice. A *flexible* one stands for a length left
open (an axis made without one), which the solver *infers*. A *derived* one
the solver makes itself (the quotient of a division by a symbolic size). A
*universal* one is a size a type holds for, whatever it is: never bound.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence, Tuple, Union

from ..debug_info import user_location
from ..dims import Dim, DimLike, _as_dim_like
from ..errors import AxgraphTypeError, AxgraphValueError


@dataclass(frozen=True, order=True)
class Origin:
    """Where a constraint comes from: a file and line, what made it there, and why.

    Parameters
    ----------
    file : str
        The user's source file (or a pseudo-file such as ``<axon>``).
    line : int
        The line in `file`.
    what : str, optional
        What made the constraint there: an op ("dot DotOp_3"), a placeholder fed.
    reason : str, optional
        Why it holds ("contracts D").
    column : int, optional
        A column in the line, for front ends that know it (0: none).
    excerpt : str, optional
        The line with carets under the construct, for front ends that have it.
    """

    file: str
    line: int
    what: str = ""
    reason: str = ""
    column: int = 0
    excerpt: str = ""

    @classmethod
    def of(cls, location: Tuple[str, int], what: str = "", reason: str = "") -> "Origin":
        """The origin at an op's `location`, with its column and excerpt where it has them
        (a `debug_info.SourcePosition` from a front end).

        Parameters
        ----------
        location : (str, int)
            A file and line, such as `Op.location`.
        what, reason : str, optional
            As for the constructor.

        Returns
        -------
        Origin
        """
        return cls(location[0], location[1], what, reason, getattr(location, "column", 0),
                   getattr(location, "excerpt", ""))

    @classmethod
    def here(cls, what: str = "", reason: str = "") -> "Origin":
        """The origin at the innermost user frame (outside the axgraph package).

        Parameters
        ----------
        what, reason : str, optional
            As for the constructor.

        Returns
        -------
        Origin
            The user's file and line calling into axgraph now.
        """
        file, line = user_location(2)
        return cls(file, line, what, reason)

    @property
    def place(self) -> str:
        """`file:line` (or `file:line:column`), the file relative to the working directory
        when it lies below it."""
        file = self.file
        if os.path.isabs(file):
            try:
                relative = os.path.relpath(file)
            except ValueError:  # another drive
                relative = file
            if not relative.startswith(".."):
                file = relative
        return f"{file}:{self.line}" + (f":{self.column}" if self.column else "")

    def __str__(self) -> str:
        head = f"{self.what} at {self.place}" if self.what else self.place
        return f"{head} ({self.reason})" if self.reason else head


def places(origins: Iterable[Origin]) -> str:
    """The origins as a readable list, sorted: "dot at m.py:3, cast_axes at m.py:5"."""
    return ", ".join(str(o) for o in sorted(set(origins)))


@dataclass(frozen=True, order=True)
class ShapeVar:
    """A shape variable: a sequence of dims of unknown length (the Axon type `*b`).

    Parameters
    ----------
    name : str
        Its name, an identifier.
    """

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise AxgraphValueError(f"a shape variable needs an identifier name, not "
                                    f"{self.name!r}", user_location())

    def __str__(self) -> str:
        return f"*{self.name}"


ShapeItem = Union[DimLike, ShapeVar]
Shape = Tuple[ShapeItem, ...]


def as_shape(items: Sequence, what: str = "shape") -> Shape:
    """A shape from a sequence of dims and shape variables (ints, Dims, ShapeVars).

    Parameters
    ----------
    items : sequence
        The items; a ShapeVar stands for any number of dims.
    what : str, optional
        What the shape is, for the error message.

    Returns
    -------
    tuple
        The items, each an int, a Dim or a ShapeVar.

    Raises
    ------
    AxgraphTypeError
        An item is none of these.
    """
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise AxgraphTypeError(f"a {what} is a sequence of dims and shape variables, not "
                               f"{items!r}", user_location())
    return tuple(item if isinstance(item, ShapeVar) else _as_dim_like(item, f"item of a {what}")
                 for item in items)


def format_shape(shape: Shape) -> str:
    """How shapes print: `[*b, m, 2*n]`.

    Parameters
    ----------
    shape : sequence of (int, Dim or ShapeVar)
        The shape.

    Returns
    -------
    str
        Its items in brackets, a shape variable with a star.
    """
    return "[" + ", ".join(str(item) for item in shape) + "]"


@dataclass(frozen=True)
class Equal:
    """`left == right`, two dims.

    Parameters
    ----------
    left, right : int or Dim
        The two sides.
    origin : Origin
        Where the constraint comes from.
    """

    left: DimLike
    right: DimLike
    origin: Origin

    def __post_init__(self) -> None:
        object.__setattr__(self, "left", _as_dim_like(self.left, "side of Equal"))
        object.__setattr__(self, "right", _as_dim_like(self.right, "side of Equal"))

    def __str__(self) -> str:
        return f"{self.left} == {self.right}"


@dataclass(frozen=True)
class AtLeast:
    """`value >= bound`, two dims.

    Parameters
    ----------
    value, bound : int or Dim
        The two sides.
    origin : Origin
        Where the constraint comes from.
    """

    value: DimLike
    bound: DimLike
    origin: Origin

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", _as_dim_like(self.value, "side of AtLeast"))
        object.__setattr__(self, "bound", _as_dim_like(self.bound, "side of AtLeast"))

    def __str__(self) -> str:
        return f"{self.value} >= {self.bound}"


@dataclass(frozen=True)
class Divides:
    """`divisor` divides `dividend` exactly (a reshape into whole rows, a symbolic split).

    Parameters
    ----------
    divisor, dividend : int or Dim
        The two dims.
    origin : Origin
        Where the constraint comes from.
    """

    divisor: DimLike
    dividend: DimLike
    origin: Origin

    def __post_init__(self) -> None:
        object.__setattr__(self, "divisor", _as_dim_like(self.divisor, "divisor"))
        object.__setattr__(self, "dividend", _as_dim_like(self.dividend, "dividend"))

    def __str__(self) -> str:
        def wrapped(value: DimLike) -> str:
            text = str(value)
            return f"({text})" if " " in text else text
        return f"{wrapped(self.dividend)} % {wrapped(self.divisor)} == 0"


@dataclass(frozen=True)
class SameShape:
    """`left == right`, two shapes: equal ranks and equal dims position by position.

    Parameters
    ----------
    left, right : sequence of (int, Dim or ShapeVar)
        The shapes; a ShapeVar stands for any number of dims (`[*b, m]` is
        `(ShapeVar("b"), m)`).
    origin : Origin
        Where the constraint comes from.
    """

    left: Shape
    right: Shape
    origin: Origin

    def __post_init__(self) -> None:
        object.__setattr__(self, "left", as_shape(self.left))
        object.__setattr__(self, "right", as_shape(self.right))

    def __str__(self) -> str:
        return f"{format_shape(self.left)} == {format_shape(self.right)}"


@dataclass(frozen=True)
class Broadcast:
    """`out` is the broadcast of shapes `left` and `right`, aligned at their last dims.

    Only the literal 1 broadcasts: any other two dims facing each other are equal (a size
    variable is never taken to "perhaps be 1"). The solver decides a broadcast last, once
    nothing else makes progress, and only when where each dim stands is known (a shape
    variable facing a dim waits for its rank).

    Parameters
    ----------
    left, right, out : sequence of (int, Dim or ShapeVar)
        The operands' shapes and the result's.
    origin : Origin
        Where the constraint comes from.
    """

    left: Shape
    right: Shape
    out: Shape
    origin: Origin

    def __post_init__(self) -> None:
        object.__setattr__(self, "left", as_shape(self.left))
        object.__setattr__(self, "right", as_shape(self.right))
        object.__setattr__(self, "out", as_shape(self.out))

    def __str__(self) -> str:
        return (f"{format_shape(self.out)} == broadcast({format_shape(self.left)}, "
                f"{format_shape(self.right)})")


@dataclass(frozen=True)
class SameSize:
    """Shapes `left` and `right` hold as many elements (a reshape): the products of their
    dims are equal. Decided once both sides hold the same shape variables (they cancel).

    Parameters
    ----------
    left, right : sequence of (int, Dim or ShapeVar)
        The two shapes.
    origin : Origin
        Where the constraint comes from.
    """

    left: Shape
    right: Shape
    origin: Origin

    def __post_init__(self) -> None:
        object.__setattr__(self, "left", as_shape(self.left))
        object.__setattr__(self, "right", as_shape(self.right))

    def __str__(self) -> str:
        return f"size {format_shape(self.left)} == size {format_shape(self.right)}"


@dataclass(frozen=True)
class OneOrEqual:
    """`dim` is 1 or equal to `other`: a size that may be 1 (it broadcasts) facing `other`.

    Parameters
    ----------
    dim, other : int or Dim
        The two dims.
    origin : Origin
        Where the constraint comes from.
    """

    dim: DimLike
    other: DimLike
    origin: Origin

    def __post_init__(self) -> None:
        object.__setattr__(self, "dim", _as_dim_like(self.dim, "dim of OneOrEqual"))
        object.__setattr__(self, "other", _as_dim_like(self.other, "other dim of OneOrEqual"))

    def __str__(self) -> str:
        return f"{self.dim} == 1 or {self.dim} == {self.other}"


Constraint = Union[Equal, AtLeast, Divides, SameShape, Broadcast, SameSize, OneOrEqual]

#: The kinds of size variable (see the module's docstring).
KINDS = ("rigid", "flexible", "derived", "universal")


@dataclass(frozen=True)
class Variable:
    """How the solver may treat one size variable, and where it was declared.

    Parameters
    ----------
    name : str
        The variable's name (as in its Dims).
    kind : str, optional
        "rigid" (an input the user declared; default), "flexible" (a length left
        open, to infer), "derived" (made by the solver) or "universal" (a size a
        type holds for whatever it is, Axon's `forall n`: never bound, so an
        equation that would make it one value or another size is a conflict).
    origin : Origin, optional
        Where it was declared (an `ng.dim` call, the axis made without a length).
    min : int, optional
        Its lowest value (default 1; 0 for a length left open).
    max : int or float, optional
        Its highest value (default math.inf: none).
    about : str, optional
        What it stands for, for reports ("the length of axis N").
    age : int, optional
        Among variables an equation could be solved for, the newest (highest age) is
        chosen: a length an op computes is defined by its operands', not the other way.
    broadcasts : bool, optional
        Whether the size may be 1 and then broadcasts (Axon's `#n`): in a `Broadcast`,
        facing a dim m that is no such size, the result is m, with the check
        `OneOrEqual(n, m)` (default False: only the literal 1 broadcasts). A variable
        it is bound to becomes one too.

    Raises
    ------
    AxgraphValueError
        An unknown kind, or an empty domain.
    """

    name: str
    kind: str = "rigid"
    origin: Optional[Origin] = None
    min: int = 1
    max: float = math.inf
    about: str = field(default="", compare=False)
    age: int = field(default=0, compare=False)
    broadcasts: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise AxgraphValueError(f"variable {self.name}: kind must be one of {KINDS}, not "
                                    f"{self.kind!r}", user_location())
        if self.min > self.max or self.min < 0:
            raise AxgraphValueError(f"variable {self.name}: empty domain {self.min}..{self.max}",
                                    user_location())

    @property
    def dim(self) -> Dim:
        """The variable as a Dim."""
        return Dim(self.name)
