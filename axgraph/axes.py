"""Named axes (seed 000): Axis, Axes, roles, dual offsets and name scopes.

Axes are compared by identity. Two axes with equal names and lengths are still
different axes, exactly as two variables with equal values are different
variables: that is what lets axis labels act as types.
"""
from __future__ import annotations

import itertools
import math
from typing import Dict, Iterable, Iterator, Optional, Sequence, Tuple, Union

import numpy as np

from .debug_info import user_location
from .errors import AxisLengthError, DuplicateAxisError, IncompatibleAxesError

_axis_serials = itertools.count()


class AxisRole:
    """Semantic tag for axes (Height, Channel, Time, ...) that ops search for."""

    def __init__(self, name: Optional[str] = None, docstring: Optional[str] = None):
        self._auto_named = name is None
        self.name = name if name is not None else f"role_{next(_axis_serials)}"
        self.docstring = docstring

    def __repr__(self) -> str:
        return f"AxisRole({self.name})"


def _check_length(length, what: str):
    if length is None:
        return None
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)):
        if hasattr(length, "free_symbols"):  # a symbolic Dim expression
            return length
        raise AxisLengthError(f"length of axis {what} must be a non-negative int, not {length!r}")
    length = int(length)
    if length < 0:
        raise AxisLengthError(f"length of axis {what} must be non-negative, not {length}")
    return length


class Axis:
    """One dimension of a tensor, paired with others by identity.

    `length` may be None until it is set (`H.length = 3`) or bound from data
    fed to a computation. `A - 1` and `A + 1` are dual axes of A: they share
    its length and pair with A (and each other) in `ng.dot`.
    """

    def __init__(
        self,
        length=None,
        name: Optional[str] = None,
        roles: Iterable[AxisRole] = (),
        batch: Optional[bool] = None,
        recurrent: Optional[bool] = None,
        docstring: Optional[str] = None,
    ):
        self._serial = next(_axis_serials)
        self._auto_named = name is None
        self.name = name if name is not None else f"Axis_{self._serial}"
        self._length = _check_length(length, self.name)
        self.roles = frozenset(roles)
        for role in self.roles:
            if not isinstance(role, AxisRole):
                raise TypeError(f"roles of axis {self.name} must be AxisRole objects, not {role!r}")
        self._batch = batch
        self._recurrent = recurrent
        self.docstring = docstring
        self._duals: Dict[int, "DualAxis"] = {}

    # -- length ---------------------------------------------------------------
    @property
    def length(self):
        """The number of positions along this axis, or None if not yet known."""
        return self._length

    @length.setter
    def length(self, value) -> None:
        self._length = _check_length(value, self.name)

    # -- flags ----------------------------------------------------------------
    @property
    def is_batch(self) -> bool:
        """True for the minibatch axis (by default, an axis named 'N')."""
        return self._batch if self._batch is not None else self.name == "N"

    @property
    def is_recurrent(self) -> bool:
        """True for the time axis that recurrent layers unroll (default 'REC')."""
        return self._recurrent if self._recurrent is not None else self.name == "REC"

    @property
    def batch(self) -> bool:
        """Alias of is_batch."""
        return self.is_batch

    @property
    def recurrent(self) -> bool:
        """Alias of is_recurrent."""
        return self.is_recurrent

    def has_role(self, role: AxisRole) -> bool:
        """Whether this axis carries `role`."""
        return role in self.roles

    # -- duals ----------------------------------------------------------------
    @property
    def base(self) -> "Axis":
        """The axis this one is a dual of (itself for a plain axis)."""
        return self

    @property
    def dual_level(self) -> int:
        """Offset from the base axis: 0 for a plain axis, -1 for `A - 1`."""
        return 0

    def get_dual(self, offset: int) -> "Axis":
        """The axis at `offset` from the base; the same object every time."""
        base = self.base
        level = self.dual_level + offset
        if level == 0:
            return base
        dual = base._duals.get(level)
        if dual is None:
            dual = DualAxis(base, level)
            base._duals[level] = dual
        return dual

    def __add__(self, offset: int) -> "Axis":
        if isinstance(offset, bool) or not isinstance(offset, int):
            return NotImplemented
        return self.get_dual(offset)

    def __sub__(self, offset: int) -> "Axis":
        if isinstance(offset, bool) or not isinstance(offset, int):
            return NotImplemented
        return self.get_dual(-offset)

    # -- misc -----------------------------------------------------------------
    def named(self, name: str) -> "Axis":
        """Give an auto-named axis its name (used by name scopes)."""
        self.name = name
        self._auto_named = False
        return self

    def __repr__(self) -> str:
        return f"Axis({self.name}: {self.length})"

    def __lt__(self, other: "Axis") -> bool:
        # Sorting helper only: creation order, never used for pairing.
        return self._serial < other._serial


class DualAxis(Axis):
    """`A + k`: the same dimension as A at a dual offset, paired in dot."""

    def __init__(self, base: Axis, level: int):
        self._base = base
        self._level = level
        super().__init__(
            length=None,
            name=f"{base.name}{level:+d}",
            roles=base.roles,
            docstring=base.docstring,
        )

    @property
    def base(self) -> Axis:
        return self._base

    @property
    def dual_level(self) -> int:
        return self._level

    @property
    def length(self):
        return self._base.length

    @length.setter
    def length(self, value) -> None:
        self._base.length = value

    @property
    def is_batch(self) -> bool:
        return self._base.is_batch

    @property
    def is_recurrent(self) -> bool:
        return self._base.is_recurrent

    @property
    def name(self) -> str:
        """The base's name and the offset (`C-1`): it follows a renamed base."""
        return f"{self._base.name}{self._level:+d}"

    @name.setter
    def name(self, value: str) -> None:
        """Ignored: a dual axis's name is derived (Axis.__init__ assigns one)."""


_flattened: Dict[Tuple[Axis, ...], "FlattenedAxis"] = {}


class FlattenedAxis(Axis):
    """One axis standing for several (flatten/unflatten); length is the product."""

    def __init__(self, axes: "Axes"):
        self._axes = axes
        super().__init__(name="(" + "*".join(a.name for a in axes) + ")")

    @classmethod
    def of(cls, axes: Iterable[Axis]) -> "FlattenedAxis":
        """The flattened axis of these axes, in order; the same object every time."""
        axes = Axes(axes)
        key = tuple(axes)
        found = _flattened.get(key)
        if found is None:
            found = _flattened[key] = cls(axes)
        return found

    @property
    def axes(self) -> "Axes":
        """The axes this one stands for, in order."""
        return self._axes

    @property
    def length(self):
        return self._axes.size

    @length.setter
    def length(self, value) -> None:
        raise AxisLengthError(f"the length of flattened axis {self.name} follows its parts")

    @property
    def is_batch(self) -> bool:
        return any(a.is_batch for a in self._axes)

    @property
    def is_recurrent(self) -> bool:
        return any(a.is_recurrent for a in self._axes)


AxesLike = Union["Axes", Axis, Iterable[Axis], None]


class Axes:
    """An ordered, duplicate-free tuple of axes.

    The order is the order values come back in, never a promise about memory
    layout. Set operations keep the order of the left operand.
    """

    __slots__ = ("_axes", "_ids")

    def __init__(self, axes: AxesLike = ()):
        if axes is None:
            axes = ()
        elif isinstance(axes, Axes):
            self._axes, self._ids = axes._axes, axes._ids
            return
        elif isinstance(axes, Axis):
            axes = (axes,)
        axes = tuple(axes)
        for axis in axes:
            if not isinstance(axis, Axis):
                raise TypeError(f"Axes holds Axis objects; got {axis!r}")
        ids = frozenset(id(a) for a in axes)
        if len(ids) != len(axes):
            seen, repeated = set(), []
            for axis in axes:
                if id(axis) in seen:
                    repeated.append(axis)
                seen.add(id(axis))
            raise DuplicateAxisError(
                f"an axis may occur at most once in a tensor's axes; "
                f"{', '.join(map(repr, repeated))} repeated in {list(axes)}",
                user_location(),
            )
        self._axes = axes
        self._ids = ids

    # -- sequence protocol ----------------------------------------------------
    def __iter__(self) -> Iterator[Axis]:
        return iter(self._axes)

    def __len__(self) -> int:
        return len(self._axes)

    def __getitem__(self, item):
        if isinstance(item, slice):
            return Axes(self._axes[item])
        return self._axes[item]

    def __contains__(self, axis) -> bool:
        return id(axis) in self._ids

    def __bool__(self) -> bool:
        return bool(self._axes)

    def __eq__(self, other) -> bool:
        if isinstance(other, Axes):
            return self._axes == other._axes
        if isinstance(other, (tuple, list)):
            return self._axes == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._axes)

    def __repr__(self) -> str:
        return "Axes(" + ", ".join(f"{a.name}: {a.length}" for a in self._axes) + ")"

    # -- properties -----------------------------------------------------------
    @property
    def lengths(self) -> Tuple:
        """Each axis's length in order (None where not yet known)."""
        return tuple(a.length for a in self._axes)

    @property
    def names(self) -> Tuple[str, ...]:
        """Each axis's name in order."""
        return tuple(a.name for a in self._axes)

    @property
    def full_lengths(self) -> Tuple:
        """Like `lengths`, but a FlattenedAxis gives the nested lengths of the axes it
        stands for (Nervana Graph v0.4): `((2, 3), 4)` for a (2*3)-axis then a 4-axis."""
        return tuple(a.axes.full_lengths if isinstance(a, FlattenedAxis) else a.length
                     for a in self._axes)

    @property
    def size(self):
        """Number of elements of a tensor with these axes (None if unknown)."""
        lengths = self.lengths
        if any(length is None for length in lengths):
            return None
        return math.prod(lengths)

    # -- set algebra (order of the left operand kept) -------------------------
    def __add__(self, other: AxesLike) -> "Axes":
        """Concatenation; an axis in both raises DuplicateAxisError."""
        return Axes(self._axes + tuple(Axes(other)))

    def __radd__(self, other: AxesLike) -> "Axes":
        return Axes(tuple(Axes(other)) + self._axes)

    def __sub__(self, other: AxesLike) -> "Axes":
        """The axes of self that are not in other."""
        other = Axes(other)
        return Axes(a for a in self._axes if a not in other)

    def __and__(self, other: AxesLike) -> "Axes":
        """The axes of self that are also in other."""
        other = Axes(other)
        return Axes(a for a in self._axes if a in other)

    def __or__(self, other: AxesLike) -> "Axes":
        """The axes of self, then those of other not already present."""
        other = Axes(other)
        return Axes(self._axes + tuple(a for a in other if a not in self))

    def is_equal_set(self, other: AxesLike) -> bool:
        """Same axes, in any order."""
        other = Axes(other)
        return self._ids == other._ids

    def issubset(self, other: AxesLike) -> bool:
        """Every axis of self is in other."""
        return self._ids <= Axes(other)._ids

    def issuperset(self, other: AxesLike) -> bool:
        """Every axis of other is in self."""
        return self._ids >= Axes(other)._ids

    def index(self, axis: Axis) -> int:
        """Position of `axis` (by identity)."""
        for position, candidate in enumerate(self._axes):
            if candidate is axis:
                return position
        raise IncompatibleAxesError(f"{axis!r} is not one of {self!r}")

    def find_by_name(self, name: str) -> "Axes":
        """The axes called `name` (names are labels, not identities)."""
        return Axes(a for a in self._axes if a.name == name)

    def find_by_role(self, role: AxisRole) -> "Axes":
        """The axes carrying `role`."""
        return Axes(a for a in self._axes if role in a.roles)

    def batch_axes(self) -> "Axes":
        """The batch axes (the minibatch 'N' by default)."""
        return Axes(a for a in self._axes if a.is_batch)

    def batch_axis(self) -> Optional[Axis]:
        """The single batch axis, or None."""
        found = self.batch_axes()
        return found[0] if found else None

    def sample_axes(self) -> "Axes":
        """The axes of one example: all but the batch axes."""
        return Axes(a for a in self._axes if not a.is_batch)

    def recurrent_axis(self) -> Optional[Axis]:
        """The recurrent (time) axis, or None."""
        for axis in self._axes:
            if axis.is_recurrent:
                return axis
        return None

    def flatten(self) -> FlattenedAxis:
        """One axis standing for all of these, in order."""
        return FlattenedAxis.of(self)

    def with_lengths_checked(self) -> "Axes":
        """Self, after checking that every length is known."""
        for axis in self._axes:
            if axis.length is None:
                raise AxisLengthError(f"axis {axis.name} has no length; set {axis.name}.length")
        return self


def make_axis(
    length=None,
    name: Optional[str] = None,
    roles: Iterable[AxisRole] = (),
    batch: Optional[bool] = None,
    recurrent: Optional[bool] = None,
    docstring: Optional[str] = None,
) -> Axis:
    """A new axis; `batch` defaults to True for 'N', `recurrent` for 'REC'."""
    return Axis(length=length, name=name, roles=roles, batch=batch, recurrent=recurrent,
                docstring=docstring)


def axis(length=None, name=None, roles=(), batch=None, recurrent=None, docstring=None) -> Axis:
    """Alias of make_axis, spelled as in seed 000's role example."""
    return make_axis(length=length, name=name, roles=roles, batch=batch, recurrent=recurrent,
                     docstring=docstring)


def make_axes(axes: AxesLike = ()) -> Axes:
    """An Axes from a list of axes (order kept; a repeated axis raises)."""
    return Axes(axes)


def make_axis_role(name: Optional[str] = None, docstring: Optional[str] = None) -> AxisRole:
    """A new role; unnamed roles take their name from the scope they are put in."""
    return AxisRole(name=name, docstring=docstring)


class NameScope:
    """A namespace whose attributes name what is stored in them.

    `ax.N = ng.make_axis()` names the axis 'N' (and so makes it the batch
    axis by neon's convention), as the standard neon axes of seed 000 expect.
    """

    def __init__(self, name: Optional[str] = None):
        object.__setattr__(self, "name", name)

    def __setattr__(self, key: str, value) -> None:
        if getattr(value, "_auto_named", False):
            value.name = key
            value._auto_named = False
        object.__setattr__(self, key, value)

    def __repr__(self) -> str:
        members = ", ".join(k for k in vars(self) if k != "name")
        return f"NameScope({self.name}: {members})"


def make_name_scope(name: Optional[str] = None) -> NameScope:
    """A new NameScope (seed 000 `ng.make_name_scope(name="ax")`)."""
    return NameScope(name)


def dual_pairs(left: Sequence[Axis], right: Sequence[Axis]):
    """Pairs (l, r) contracted by dot: r is l + 1 (a dual pair), or r is l.

    Dual pairs are made first; an axis both operands share is contracted only
    if no dual pair took its right-hand copy. So ``(H, H - 1) . (H, N)``
    pairs H - 1 with H and keeps the left H: a matrix times a vector.
    """
    right_set = Axes(right)
    duals = {}
    for axis_l in left:
        partner = axis_l.get_dual(1)
        if partner in right_set:
            duals[id(axis_l)] = partner
    claimed = {id(partner) for partner in duals.values()}
    pairs = []
    for axis_l in left:
        if id(axis_l) in duals:
            pairs.append((axis_l, duals[id(axis_l)]))
        elif axis_l in right_set and id(axis_l) not in claimed:
            pairs.append((axis_l, axis_l))
    return pairs
