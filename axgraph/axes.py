"""Named axes: Axis, Axes, roles, dual offsets and name scopes.

Axes are compared by identity. Two axes with equal names and lengths are still
different axes, exactly as two variables with equal values are different
variables: that is what lets axis labels act as types. Because a reader tells
axes apart by name, two different axes that share a name are
kept from meeting silently in an elementwise op (`elementwise_axes`), and the
axes axgraph derives from another (slices, paddings, flattenings) print what
they were derived from (`A[::-1]`, `A+pad(1,1)`, `(A*B)`).
"""
from __future__ import annotations

import itertools
import math
import abc
import functools
import os
import sys
import threading
from typing import (TYPE_CHECKING, Any, Callable, Dict, FrozenSet, Iterable, Iterator, List, NamedTuple,
                    Optional, Sequence, Tuple, Union)

import numpy as np

from .debug_info import user_location
from .dims import slice_length
from .names import NameableValue
from .errors import (AxesError, AxgraphTypeError, AxisLengthError, DuplicateAxisError,
                     IncompatibleAxesError)

_axis_serials = itertools.count()


class AxisRole:
    """A semantic tag for axes (Height, Channel, Time, ...) that ops search for.

    Axes pair by identity, so an op that needs "the channel axis" of a tensor
    whose axes the user chose cannot know it by name: convolution and pooling
    find their axes by role instead (matching roles by name, case aside).
    Make roles with `make_axis_role`.

    Parameters
    ----------
    name : str, optional
        The role's name; None gives an automatic one that a name scope replaces
        when the role is stored in it (``ar.height = ng.make_axis_role()``).
    docstring : str, optional
        A description of the role, kept for the reader.
    """

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
        raise AxgraphTypeError(f"the length of {what} must be an int >= 0 (or None), not "
                               f"{type(length).__name__} {length!r}", user_location())
    length = int(length)
    if length < 0:
        raise AxisLengthError(f"the length of {what} must be >= 0, not {length}",
                              user_location())
    return length


def _check_name(name) -> str:
    if not isinstance(name, str) or not name:
        raise AxgraphTypeError(f"an axis name must be a non-empty string, not {name!r}",
                               user_location())
    return name


_LIBRARY_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _creation_site() -> Tuple[str, int]:
    """Where an axis is being made: the user's line, or for an axis axgraph makes while it
    is itself imported (neon's standard axes), the library line that makes it."""
    location = user_location()
    if not location[0].startswith("<frozen"):
        return location
    frame = sys._getframe(2)
    while frame.f_back is not None and frame.f_back.f_code.co_filename.startswith(_LIBRARY_DIR):
        frame = frame.f_back
    return (frame.f_code.co_filename, frame.f_lineno)


class Axis:
    """One dimension of a tensor, paired with others by identity.

    Two axes are the same dimension only when they are the same object: axes
    with equal names and lengths are still different, which lets axes act as
    the types of a tensor's dimensions. `length` may be None until it is set
    (`H.length = 3`) or bound from data fed to a computation. `A - 1` and
    `A + 1` are dual axes of A: they share its length and pair with A (and
    each other) in `ng.dot`. Make axes with `make_axis`.

    Parameters
    ----------
    length : int, optional
        The number of positions along the axis (>= 0); None leaves it to be set
        once later or bound from fed data.
    name : str, optional
        A label for printing and for finding axes by name; None gives an
        automatic ``Axis_<n>``, which a name scope replaces when the axis is
        stored in it.
    roles : iterable of AxisRole, optional
        Semantic tags (Channel, Height, ...) that ops such as convolution search for.
    batch : bool, optional
        Whether this is the minibatch axis; None: exactly when it is named ``N``
        (Nervana Graph v0.4's convention).
    recurrent : bool, optional
        Whether this is a sequence axis (time steps, token positions): recurrent layers
        unroll over it, and defaults (softmax, reductions, Affine) leave it alone as they
        leave the batch axis; None: exactly when it is named ``REC`` (v0.4's convention).
    docstring : str, optional
        A description of the axis, kept for the reader.
    match_on_length : bool, optional
        If True, an elementwise op pairs this axis with the other operand's one
        axis of the same length (the axes `ng.constant(array)` makes up have it).

    Raises
    ------
    AxgraphTypeError
        If `length` is not an int (or None), `name` is not a non-empty string or
        a role is not an AxisRole.
    AxisLengthError
        If `length` is negative.

    Examples
    --------
    >>> import axgraph as ng
    >>> C = ng.make_axis(length=3, name="C")
    >>> C
    Axis(C: 3)
    >>> C is ng.make_axis(length=3, name="C"), C - 1
    (False, Axis(C-1: 3))
    """

    def __init__(
        self,
        length=None,
        name: Optional[str] = None,
        roles: Iterable[AxisRole] = (),
        batch: Optional[bool] = None,
        recurrent: Optional[bool] = None,
        docstring: Optional[str] = None,
        match_on_length: bool = False,
    ):
        self._serial = next(_axis_serials)
        self._location = _creation_site()
        self._auto_named = name is None
        self._name = _check_name(name) if name is not None else f"Axis_{self._serial}"
        self._length = _check_length(length, f"axis {name}" if name is not None else "a new axis")
        self.roles = frozenset(roles)
        for role in self.roles:
            if not isinstance(role, AxisRole):
                raise AxgraphTypeError(f"roles of axis {self._name} must be AxisRole objects "
                                       f"(ng.make_axis_role()), not {role!r}", user_location())
        for flag, value in (("batch", batch), ("recurrent", recurrent),
                            ("match_on_length", match_on_length)):
            if value is not None and not isinstance(value, (bool, np.bool_)):
                raise AxgraphTypeError(
                    f"axis {self._name}: {flag} must be True, False or None, not {value!r} "
                    f"(ng.make_axis takes length, name, batch, recurrent, match_on_length, roles, "
                    f"docstring in that order, as Nervana Graph v0.4 did: pass roles=[...] by "
                    f"keyword)", user_location())
        self._batch = None if batch is None else bool(batch)
        self._recurrent = None if recurrent is None else bool(recurrent)
        self.docstring = docstring
        #: Nervana Graph v0.4's flag: an elementwise op pairs this axis with the other
        #: operand's one axis of the same length (axes of `ng.constant(array)` without axes).
        self.match_on_length = bool(match_on_length)
        self._duals: Dict[int, "DualAxis"] = {}
        self._derived: Dict[tuple, "Axis"] = {}

    # -- name and origin ------------------------------------------------------
    @property
    def name(self) -> str:
        """A label for printing and for finding axes by name; identity is what pairs axes."""
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        self._name = _check_name(value)

    @property
    def root_name(self) -> Optional[str]:
        """The name a reader calls this axis by: its own, or for a slice or padding, that of
        the axis it was derived from (`A` for `A[1:3]`). None for a dual axis.

        Two different axes with one root name meeting in an elementwise op raise
        (see `elementwise_axes`). Automatic names (`Axis_12`) carry a serial number,
        so they never collide; dual axes meet their base on purpose.
        """
        return self.name

    @property
    def location(self) -> Tuple[str, int]:
        """(file, line) of the code that made this axis."""
        return self._location

    # -- length ---------------------------------------------------------------
    @property
    def length(self):
        """The number of positions along this axis, or None if not yet known.

        A length may be set once (`H.length = 3`, or again to the same value); a
        different length would silently change every tensor already built on it.
        """
        return self._length

    @length.setter
    def length(self, value) -> None:
        value = _check_length(value, f"axis {self.name}")
        if self._length is not None and value != self._length:
            raise AxisLengthError(
                f"axis {self.name} already has length {self._length} and cannot become "
                f"{value}: tensors built on it rely on its length; make a new axis "
                f"(ng.make_axis(length={value}, name={self.name!r})) instead",
                user_location())
        self._length = value

    # -- flags ----------------------------------------------------------------
    @property
    def is_batch(self) -> bool:
        """True for the minibatch axis: flagged ``batch=True``, or unflagged and named 'N'."""
        return self._batch if self._batch is not None else self.name == "N"

    @property
    def is_recurrent(self) -> bool:
        """True for a sequence axis (time, positions): flagged ``recurrent=True``, or
        unflagged and named 'REC'. Recurrent layers unroll over it; defaults leave it alone."""
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

    def add_role(self, role: AxisRole) -> "Axis":
        """Give this axis `role` as well (neon finds channel and spatial axes by role)."""
        if not isinstance(role, AxisRole):
            raise AxgraphTypeError(f"roles of axis {self.name} must be AxisRole objects "
                                   f"(ng.make_axis_role()), not {role!r}", user_location())
        self.roles = self.roles | {role}
        return self

    @property
    def short_name(self) -> str:
        """The name without a name scope's prefix (the part after the last '.')."""
        return self.name.rsplit(".", 1)[-1]

    # -- duals ----------------------------------------------------------------
    @property
    def base(self) -> "Axis":
        """The axis this one is a dual of (itself for a plain axis)."""
        return self

    @property
    def dual_level(self) -> int:
        """Offset from the base axis: 0 for a plain axis, -1 for `A - 1`."""
        return 0

    def get_dual(self, offset: int = -1) -> "Axis":
        """The axis at `offset` from the base; the same object every time.

        Parameters
        ----------
        offset : int
            How far from this axis: -1 (the default, as in Nervana Graph v0.4) gives the
            axis a weight contracts with in `ng.dot`, +1 the other way.

        Returns
        -------
        Axis
            This axis itself for 0, else the dual axis at that level.
        """
        base = self.base
        level = self.dual_level + offset
        if level == 0:
            return base
        dual = base._duals.get(level)
        if dual is None:
            dual = DualAxis(base, level)
            base._duals[level] = dual
        return dual

    @property
    def axes(self) -> "Axes":
        """This axis alone, as an Axes (Nervana Graph v0.4's `Axis.axes`).

        Returns
        -------
        Axes
            A new Axes holding just this axis (a FlattenedAxis gives its parts instead).
        """
        return Axes(self)

    @property
    def primary_axis(self) -> "Axis":
        """The plain axis this one is a dual of (Nervana Graph's name for `base`)."""
        return self.base

    @property
    def T(self) -> "Axis":
        """The transposing dual: `A.T` is `A - 1` and `(A - 1).T` is `A` (so `T.T` is the
        axis itself); `ng.dot(w, x)` contracts w's `F.T` with x's `F`."""
        return self.get_dual(-1 - 2 * self.dual_level)

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
    """`A + k`: the same dimension as A at a dual offset, paired in dot.

    A weight that maps a C-vector to a C-vector needs two axes of C's length
    that are not C itself, and `ng.dot` must know which one to contract: the
    dual `C - 1` contracts with `C`. A dual shares its base's length, roles
    and batch/recurrent flags and is named after it (`C-1`). Get one with
    ``A + k``, ``A - k``, `Axis.get_dual` or `Axis.T`, which return the same
    object every time; constructing one directly makes an unshared copy.

    Parameters
    ----------
    base : Axis
        The plain axis this one is a dual of.
    level : int
        The offset from `base` (nonzero; -1 for ``A - 1``).
    """

    def __init__(self, base: Axis, level: int):
        self._base = base
        self._level = level
        super().__init__(length=None, roles=base.roles, docstring=base.docstring)
        self._auto_named = False  # named after its base: name scopes leave it alone

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
        raise _derived_name_error(self, self._base)

    @property
    def root_name(self) -> Optional[str]:
        """None: `A - 1` meeting `A` is deliberate (dot pairs them), never a name clash."""
        return None


def _checked_parent(kind: type, parent) -> Axis:
    if not isinstance(parent, Axis):
        raise AxgraphTypeError(f"{kind.__name__} derives from an Axis, not {parent!r}",
                               user_location())
    return parent


def _derived_name_error(axis: Axis, parent: Axis) -> AxesError:
    return AxesError(f"axis {axis.name} is named after {parent.name}; rename {parent.name} "
                     f"instead", user_location())


class _DerivedAxis(Axis, metaclass=abc.ABCMeta):
    """An axis made from a parent axis (a slice, a padding).

    It prints as the parent's name plus what was done to it, has the parent's
    roles, is a batch (recurrent) axis when the parent is, and takes its length
    from the parent's. `of(parent, ...)` gives the same object for the same
    positions, so two tensors sliced alike still pair elementwise.
    """

    def __init__(self, parent: Axis):
        self._parent = _checked_parent(type(self), parent)
        super().__init__(roles=parent.roles, docstring=parent.docstring)
        self._auto_named = False  # named after its parent: name scopes leave it alone

    @classmethod
    def _cached(cls, parent: Axis, key: tuple, make) -> Axis:
        found = parent._derived.get((cls, key))
        if found is None:
            found = parent._derived[(cls, key)] = make()
        return found

    @property
    def parent(self) -> Axis:
        """The axis this one was derived from."""
        return self._parent

    @abc.abstractmethod
    def _suffix(self) -> str:
        """What the name adds to the parent's (`[1:3]`, `+pad(1,1)`)."""

    @abc.abstractmethod
    def length_from(self, parent_length):
        """The length, given the parent's (an int, or a symbolic Dim for a symbolic one)."""

    @property
    def name(self) -> str:
        return self._parent.name + self._suffix()

    @name.setter
    def name(self, value: str) -> None:
        raise _derived_name_error(self, self._parent)

    @property
    def root_name(self) -> Optional[str]:
        return self._parent.root_name

    @property
    def length(self):
        parent_length = self._parent.length
        return None if parent_length is None else self.length_from(parent_length)

    @length.setter
    def length(self, value) -> None:
        raise AxisLengthError(f"the length of {self.name} follows {self._parent.name}'s; set "
                              f"{self._parent.name}.length", user_location())

    @property
    def is_batch(self) -> bool:
        return self._parent.is_batch

    @property
    def is_recurrent(self) -> bool:
        return self._parent.is_recurrent


_builtin_slice = slice  # SlicedAxis's argument is called `slice`, as in Nervana Graph


class SlicedAxis(_DerivedAxis):
    """The positions `slice` picks from `parent`, in that order (`A[1:3]`, `A[::-1]`).

    Slicing a tensor gives its sliced dimension this axis: it prints as the
    parent's name and the slice, carries the parent's roles and takes its
    length from the parent's. Use `SlicedAxis.of`, which returns the same
    object for the same positions, so two tensors sliced alike still pair
    elementwise.

    Parameters
    ----------
    parent : Axis
        The axis sliced.
    slice : slice
        A slice of ints (or None bounds) over the parent's positions.

    Raises
    ------
    AxgraphTypeError
        If `parent` is not an Axis or `slice` is not a slice of ints.
    AxesError
        If the slice's step is 0.
    """

    def __init__(self, parent: Axis, slice: slice):
        super().__init__(parent)
        self._slice = _checked_slice(slice, parent)

    @classmethod
    def of(cls, parent: Axis, slice: slice) -> Axis:
        """The axis of `parent`'s positions that `slice` picks; `parent` itself if it picks
        them all in order, else the same object for the same positions every time."""
        slice = _checked_slice(slice, _checked_parent(cls, parent))
        if isinstance(parent.length, int):
            slice = _canonical_slice(slice, parent.length)
        key = (slice.start, slice.stop, slice.step or 1)
        if key == (None, None, 1):
            return parent
        return cls._cached(parent, key, lambda: cls(parent, slice))

    @property
    def slice(self) -> slice:
        """The slice of the parent's positions."""
        return self._slice

    def _suffix(self) -> str:
        s = self._slice
        text = f"{'' if s.start is None else s.start}:{'' if s.stop is None else s.stop}"
        return f"[{text}]" if s.step in (None, 1) else f"[{text}:{s.step}]"

    def length_from(self, parent_length):
        return slice_length(parent_length, self._slice)


def _checked_slice(s, parent: Axis) -> slice:
    if not isinstance(s, _builtin_slice) or not all(
            bound is None or (isinstance(bound, (int, np.integer)) and not isinstance(bound, bool))
            for bound in (s.start, s.stop, s.step)):
        raise AxgraphTypeError(f"a slice of axis {parent.name} takes a slice of ints (or None), "
                               f"not {s!r}", user_location())
    if s.step == 0:
        raise AxesError(f"a slice of axis {parent.name} cannot have step 0", user_location())
    return s


def _canonical_slice(s: slice, length: int) -> slice:
    """The shortest slice that picks the same positions of an axis of `length`."""
    picked = range(*s.indices(length))
    if not picked:
        return _builtin_slice(0, 0)
    step = picked.step if len(picked) > 1 else 1  # one position: its step does not matter
    first, last = picked[0], picked[-1]
    if step > 0:
        start = None if first == 0 else first
        stop = None if last + step >= length else last + 1
    else:
        start = None if first == length - 1 else first
        stop = None if last + step < 0 else last - 1
    return _builtin_slice(start, stop, None if step == 1 else step)


class PaddedAxis(_DerivedAxis):
    """`parent` with `pad` = (before, after) positions added (`A+pad(1,1)`).

    `ng.pad` gives each padded dimension this axis, named after the parent and
    sized from the parent's length, so a padded tensor still reads as "the A
    dimension". Use `PaddedAxis.of`, which returns the same object for the
    same padding.

    Parameters
    ----------
    parent : Axis
        The axis padded.
    pad : int or (int, int)
        Positions added before and after; an int pads both sides alike.

    Raises
    ------
    AxgraphTypeError
        If `parent` is not an Axis or `pad` is not an int or a pair of ints.
    AxesError
        If a padding is negative.
    """

    def __init__(self, parent: Axis, pad):
        super().__init__(parent)
        self._pad = _padding(pad, parent)

    @classmethod
    def of(cls, parent: Axis, pad) -> Axis:
        """`parent` padded by `pad`: `parent` itself for no padding, else the same object
        for the same padding every time."""
        pad = _padding(pad, _checked_parent(cls, parent))
        if pad == (0, 0):
            return parent
        return cls._cached(parent, pad, lambda: cls(parent, pad))

    @property
    def pad(self) -> Tuple[int, int]:
        """(before, after): the positions added on each side."""
        return self._pad

    def _suffix(self) -> str:
        return f"+pad({self._pad[0]},{self._pad[1]})"

    def length_from(self, parent_length):
        return parent_length + self._pad[0] + self._pad[1]


def _padding(pad, parent: Axis) -> Tuple[int, int]:
    pair = (pad, pad) if isinstance(pad, (int, np.integer)) else pad
    try:
        before, after = pair
    except (TypeError, ValueError):
        before = after = None
    if not (isinstance(before, (int, np.integer)) and isinstance(after, (int, np.integer))
            and not isinstance(before, bool) and not isinstance(after, bool)):
        raise AxgraphTypeError(f"the padding of axis {parent.name} must be an int or a "
                               f"(before, after) pair of ints, not {pad!r}", user_location())
    if before < 0 or after < 0:
        raise AxesError(f"the padding of axis {parent.name} cannot be negative: {pad!r}",
                        user_location())
    return int(before), int(after)


_flattened: Dict[Tuple[Axis, ...], "FlattenedAxis"] = {}


class FlattenedAxis(Axis):
    """One axis standing for several (flatten/unflatten); its length is the product.

    `ng.flatten` turns, say, the (C, H, W) of an image into one feature axis
    for a matrix product while remembering the parts, so `ng.unflatten` can
    restore them. `FlattenedAxis([A, B])` and `FlattenedAxis.of([A, B])` are
    the same object, so flattening the same axes twice gives axes that pair.
    It is named ``(A*B)`` and is a batch (recurrent) axis when a part is.

    Parameters
    ----------
    axes : iterable of Axis
        The axes it stands for, in order (at least one; none repeated).

    Raises
    ------
    AxgraphTypeError
        If an item of `axes` is not an Axis.
    DuplicateAxisError
        If an axis occurs twice in `axes`.
    """

    def __new__(cls, axes: Iterable[Axis]):
        axes = Axes(axes)
        found = _flattened.get(tuple(axes))
        if found is None:
            found = super().__new__(cls)
            found._init_parts(axes)
            _flattened[tuple(axes)] = found
        return found

    def __init__(self, axes: Iterable[Axis]):
        """(Everything is set once, by __new__, for the first object of these parts.)"""

    def _init_parts(self, axes: "Axes") -> None:
        self._axes = Axes(axes).hold(f"the parts of the flattened axis {_part_names(axes)}")
        super().__init__(name=_part_names(axes))

    @classmethod
    def of(cls, axes: Iterable[Axis]) -> "FlattenedAxis":
        """The flattened axis of these axes, in order; the same object every time."""
        return cls(axes)

    @property
    def axes(self) -> "Axes":
        """The axes this one stands for, in order."""
        return self._axes

    @property
    def root_name(self) -> Optional[str]:
        """`(A*B)` from its parts' root names (None if a part is a dual axis)."""
        parts = [a.root_name for a in self._axes]
        names = [part for part in parts if part is not None]
        return None if len(names) < len(parts) else "(" + "*".join(names) + ")"

    @property
    def length(self):
        return self._axes.size

    @length.setter
    def length(self, value) -> None:
        raise AxisLengthError(f"the length of flattened axis {self.name} follows its parts",
                              user_location())

    @property
    def is_batch(self) -> bool:
        return any(a.is_batch for a in self._axes)

    @property
    def is_recurrent(self) -> bool:
        return any(a.is_recurrent for a in self._axes)


AxesLike = Union["Axes", Axis, Iterable[Axis], None]


def _part_names(axes: Iterable[Axis]) -> str:
    return "(" + "*".join(a.name for a in axes) + ")"


def _listing(items) -> str:
    """[H: 2, 3]: axes by name and length, anything else as Python shows it."""
    return "[" + ", ".join(f"{a.name}: {a.length}" if isinstance(a, Axis) else repr(a)
                           for a in items) + "]"


class Axes(Sequence[Axis]):
    """An ordered, duplicate-free list of axes.

    The order is the order values come back in, never a promise about memory
    layout. Set operations keep the order of the left operand and give a new
    Axes. `append` and `insert` change an Axes in place, as in Nervana Graph
    v0.4, except one that something relies on: the axes of an op (and its
    axes-valued attributes), the parts of a flattened axis, the axes of a
    tensor description, or an Axes that has been hashed (a dict key, a set
    member). Those are held, and changing one raises an AxesError saying to
    copy it first (``axes = ng.make_axes(x.axes)``), so no op's axes change
    under it and no dict loses a key.

    Parameters
    ----------
    axes : Axis, Axes or iterable of Axis, optional
        The axes, in order; a list or tuple among them stands for its FlattenedAxis
        (Nervana Graph v0.4's nesting). None or nothing: no axes.

    Raises
    ------
    AxgraphTypeError
        Something other than an axis is among them.
    DuplicateAxisError
        An axis occurs twice.

    Examples
    --------
    >>> import axgraph as ng
    >>> C, N = ng.make_axis(length=3, name="C"), ng.make_axis(length=4, name="N")
    >>> axes = ng.make_axes([C, N])
    >>> axes, axes.lengths, axes - C
    (Axes(C: 3, N: 4), (3, 4), Axes(N: 4))
    """

    __slots__ = ("_axes", "_ids", "_holder")
    _axes: Tuple[Axis, ...]
    _ids: FrozenSet[int]
    #: What relies on these axes staying as they are (None: nothing; they may change).
    _holder: Optional[str]

    def __init__(self, axes: AxesLike = ()):
        self._holder = None
        if axes is None:
            axes = ()
        elif isinstance(axes, Axes):
            self._axes, self._ids = axes._axes, axes._ids
            return
        elif isinstance(axes, Axis):
            axes = (axes,)
        try:
            axes = tuple(axes)
        except TypeError:
            hint = (f"; an op was given where axes were expected (its axes are "
                    f"{getattr(axes, 'name', '')}.axes)" if hasattr(axes, "is_tensor_op") else "")
            raise AxgraphTypeError(f"axes must be an Axis or a list of Axis objects, not "
                                   f"{type(axes).__name__} {axes!r}{hint}",
                                   user_location()) from None
        if any(isinstance(axis, (list, tuple, Axes)) for axis in axes):
            # Nervana Graph's nesting: make_axes([A, (B, C)]) is A, FlattenedAxis(B, C).
            axes = tuple(FlattenedAxis(axis) if isinstance(axis, (list, tuple, Axes)) else axis
                         for axis in axes)
        for position, axis in enumerate(axes):
            if not isinstance(axis, Axis):
                raise AxgraphTypeError(
                    f"axes must be Axis objects (ng.make_axis), but item {position} of "
                    f"{_listing(axes)} is {type(axis).__name__} {axis!r}", user_location())
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
        # A hashed Axes may be a dict key or a set member: from now on it must not change.
        self.hold("hashed (a dict key or a set member)")
        return hash(self._axes)

    def hold(self, holder: str) -> "Axes":
        """Keep these axes from changing in place from now on.

        Parameters
        ----------
        holder : str
            What relies on them ("the axes of op x"), for the error that `append` or
            `insert` raises. The first holder is the one named.

        Returns
        -------
        Axes
            self, for chaining.
        """
        if self._holder is None:
            self._holder = holder
        return self

    @property
    def is_held(self) -> bool:
        """Whether something relies on these axes, so `append` and `insert` refuse them."""
        return self._holder is not None

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

    def index(self, axis: Any, start: int = 0, stop: Optional[int] = None) -> int:
        """Position of `axis` (by identity), looked for from `start` up to `stop`."""
        end = len(self._axes) if stop is None else stop
        for position, candidate in enumerate(self._axes):
            if start <= position < end and candidate is axis:
                return position
        raise IncompatibleAxesError(f"{axis!r} is not one of {self!r}", user_location())

    def find_by_name(self, name: str) -> "Axes":
        """The axes called `name` (names are labels, not identities)."""
        return Axes(a for a in self._axes if a.name == name)

    def find_like(self, axis: Axis) -> "Axes":
        """The axes a reader would call by `axis`'s name: those with its root name (`A`, an
        `A` made elsewhere, `A[1:3]`), or for a dual axis those named like it."""
        if axis.root_name is None:
            return Axes(a for a in self._axes if a.name == axis.name or _derived_from(a, axis))
        return Axes(a for a in self._axes if a.root_name == axis.root_name)

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

    def feature_axes(self) -> "Axes":
        """The axes that are neither batch nor recurrent: what an op or layer acts on when
        it is not told which axes (softmax, reductions, neon's Affine), in order.

        Returns
        -------
        Axes
            These axes less the batch and the recurrent (sequence) ones.

        Examples
        --------
        >>> import axgraph as ng
        >>> D, N = ng.make_axis(4, name="D"), ng.make_axis(2, name="N")
        >>> T = ng.make_axis(3, name="T", recurrent=True)      # a sequence axis
        >>> ng.make_axes([D, T, N]).feature_axes()
        Axes(D: 4)
        """
        return Axes(a for a in self._axes if not a.is_batch and not a.is_recurrent)

    def recurrent_axis(self) -> Optional[Axis]:
        """The recurrent (time) axis, or None."""
        for axis in self._axes:
            if axis.is_recurrent:
                return axis
        return None

    def flatten(self, force: bool = False) -> Axis:
        """One axis standing for all of these, in order.

        Parameters
        ----------
        force : bool
            Make a FlattenedAxis even of a single axis (Nervana Graph v0.4's flag).

        Returns
        -------
        Axis
            The only axis itself when there is one (unless `force`), else the
            FlattenedAxis of these axes (the same object every time).
        """
        if len(self._axes) == 1 and not force:
            return self._axes[0]
        return FlattenedAxis.of(self)

    def shape_dict(self) -> Dict[str, Any]:
        """{short name: length} of these axes (Nervana Graph v0.4).

        Returns
        -------
        dict
            Each axis's name without a name scope's prefix (`short_name`), to its length
            (None where not yet known), in order.

        Raises
        ------
        AxesError
            Two of the axes have the same short name: one key would hide the other.
        """
        found: Dict[str, Axis] = {}
        for axis in self._axes:
            other = found.setdefault(axis.short_name, axis)
            if other is not axis:
                raise AxesError(f"shape_dict of {self!r}: two different axes are named "
                                f"{axis.short_name} ({_made_at(other)} and {_made_at(axis)}), so "
                                f"one key would hide the other; use names or lengths instead",
                                user_location())
        return {name: axis.length for name, axis in found.items()}

    # -- Nervana Graph's helpers ----------------------------------------------
    def role_axes(self, role: AxisRole) -> "Axes":
        """The axes carrying `role` (Nervana Graph's name for find_by_role)."""
        return self.find_by_role(role)

    def recurrent_axes(self) -> "Axes":
        """The recurrent axes."""
        return Axes(a for a in self._axes if a.is_recurrent)

    def set_shape(self, shape: Sequence[int]) -> None:
        """Set each axis's length from `shape`, in order."""
        shape = tuple(shape)
        if len(shape) != len(self._axes):
            raise AxisLengthError(f"set_shape: {len(shape)} lengths {shape} for the "
                                  f"{len(self._axes)} axes {self!r}", user_location())
        for axis, length in zip(self._axes, shape):
            axis.length = length

    def get_dual(self, offset: int = -1) -> "Axes":
        """Each axis's dual at `offset` (default -1: the axes a weight contracts with)."""
        return Axes(a.get_dual(offset) for a in self._axes)

    @property
    def T(self) -> "Axes":
        """Each axis's transposing dual (see Axis.T)."""
        return Axes(a.T for a in self._axes)

    def intersect(self, other: AxesLike) -> "Axes":
        """The axes of self that are also in other (self & other)."""
        return self & other

    def has_same_axes(self, other: AxesLike) -> bool:
        """Same axes, in any order (is_equal_set)."""
        return self.is_equal_set(other)

    def find(self, sub_axes: AxesLike) -> int:
        """Where `sub_axes` occur in these axes, next to each other and in order (v0.4).

        Parameters
        ----------
        sub_axes : Axis or sequence of Axis
            The axes to look for, as a run.

        Returns
        -------
        int
            The position of the first of them.

        Raises
        ------
        IncompatibleAxesError
            They do not occur here as a run in that order.
        """
        wanted = Axes(sub_axes)._axes
        for start in range(len(self._axes) - len(wanted) + 1):
            if self._axes[start:start + len(wanted)] == wanted:
                return start
        raise IncompatibleAxesError(f"{Axes(wanted)!r} do not occur in {self!r} next to each "
                                    f"other in that order", user_location())

    def find_axis(self, axis: Axis) -> int:
        """The position of `axis` (by identity): Nervana Graph v0.4's name for `index`.

        Parameters
        ----------
        axis : Axis
            The axis to look for.

        Returns
        -------
        int
            Its position.

        Raises
        ------
        IncompatibleAxesError
            `axis` is not one of these axes.
        """
        return self.index(axis)

    def append(self, axis: Axis) -> None:
        """Add `axis` last, in place (Nervana Graph v0.4).

        Parameters
        ----------
        axis : Axis
            The axis to add (a list or tuple of axes adds their FlattenedAxis).

        Raises
        ------
        DuplicateAxisError
            `axis` is already here.
        AxesError
            These axes are held (an op's axes, a hashed Axes...): copy them first.
        """
        self._change("append", self._axes + (axis,))

    def insert(self, index: int, axis: Axis) -> None:
        """Put `axis` at position `index`, in place (Nervana Graph v0.4).

        Parameters
        ----------
        index : int
            Where, as `list.insert` takes it (negative counts from the end).
        axis : Axis
            The axis to add.

        Raises
        ------
        DuplicateAxisError
            `axis` is already here.
        AxesError
            These axes are held (an op's axes, a hashed Axes...): copy them first.
        """
        axes = list(self._axes)
        axes.insert(index, axis)
        self._change("insert", tuple(axes))

    def _change(self, what: str, axes: Tuple[Any, ...]) -> None:
        if self._holder is not None:
            raise AxesError(f"{what}: {self!r} are {self._holder} and cannot change in place; "
                            f"copy them and change the copy: axes = ng.make_axes(...); "
                            f"axes.{what}(...)", user_location())
        changed = Axes(axes)
        self._axes, self._ids = changed._axes, changed._ids

    def with_lengths_checked(self) -> "Axes":
        """Self, after checking that every length is known."""
        for axis in self._axes:
            if axis.length is None:
                raise AxisLengthError(f"axis {axis.name} has no length; set {axis.name}.length",
                                      user_location())
        return self


def _derived_from(axis: Axis, ancestor: Axis) -> bool:
    """Whether `axis` is a slice or padding (of a slice ...) of `ancestor`."""
    while isinstance(axis, _DerivedAxis):
        axis = axis.parent
        if axis is ancestor:
            return True
    return False


def make_axis(
    length=None,
    name: Optional[str] = None,
    batch: Optional[bool] = None,
    recurrent: Optional[bool] = None,
    match_on_length: bool = False,
    roles: Optional[Iterable[AxisRole]] = None,
    docstring: Optional[str] = None,
) -> Axis:
    """Make a new axis, with Nervana Graph v0.4's parameters in v0.4's order.

    Axes are identities, not sizes: every call makes a different axis, even
    with the same name and length, and two tensors' dimensions pair (in
    elementwise ops, dot, reductions) only where they hold the same axis.

    Parameters
    ----------
    length : int, optional
        The number of positions; None until set (``A.length = 3``) or bound from data.
    name : str, optional
        A label for printing and finding axes (identity is what pairs axes).
    batch : bool, optional
        Whether this is the minibatch axis; by default, whether it is named 'N'.
    recurrent : bool, optional
        Whether this is a sequence axis (time steps, token positions): recurrent layers
        unroll over it and defaults (softmax, reductions, neon's Affine) leave it alone,
        as they leave the batch axis; by default, whether it is named 'REC'.
    match_on_length : bool
        Elementwise ops pair it with the other operand's one axis of the same length.
    roles : iterable of AxisRole, optional
        Roles (Height, Channel, ...) that convolutions and layers search for.
    docstring : str, optional
        What the axis stands for.

    Returns
    -------
    Axis
        The new axis, different from every other.

    Raises
    ------
    AxgraphTypeError
        If `length` is not an int (or None), `name` is not a non-empty string,
        `batch`, `recurrent` or `match_on_length` is not a bool, or a role is not
        an AxisRole.
    AxisLengthError
        If `length` is negative.

    Examples
    --------
    >>> import axgraph as ng
    >>> H = ng.make_axis(length=5, name="H")
    >>> H, H.is_batch, ng.make_axis(name="N").is_batch
    (Axis(H: 5), False, True)
    """
    return Axis(length=length, name=name, roles=roles or (), batch=batch, recurrent=recurrent,
                docstring=docstring, match_on_length=match_on_length)


def axis(length=None, name: Optional[str] = None, batch: Optional[bool] = None,
         recurrent: Optional[bool] = None, match_on_length: bool = False,
         roles: Optional[Iterable[AxisRole]] = None, docstring: Optional[str] = None) -> Axis:
    """`make_axis`, spelled as Nervana Graph's axes documentation does.

    Parameters
    ----------
    length, name, batch, recurrent, match_on_length, roles, docstring
        As for `make_axis`.

    Returns
    -------
    Axis
        The new axis.

    Raises
    ------
    AxgraphTypeError
        As for `make_axis`.
    AxisLengthError
        If `length` is negative.
    """
    return make_axis(length, name, batch, recurrent, match_on_length, roles, docstring)


def make_axes(axes: AxesLike = ()) -> Axes:
    """Make the Axes of a tensor from a list of axes, order kept.

    Parameters
    ----------
    axes : Axes, Axis or iterable of Axis, optional
        The axes in order; a list or tuple nested inside stands for a
        FlattenedAxis of its axes (``[C, (H, W)]``).

    Returns
    -------
    Axes
        The axes as one immutable, duplicate-free sequence.

    Raises
    ------
    AxgraphTypeError
        If an item is not an Axis.
    DuplicateAxisError
        If an axis occurs twice: a tensor holds each axis at most once.

    Examples
    --------
    >>> import axgraph as ng
    >>> C, H = ng.make_axis(length=3, name="C"), ng.make_axis(length=2, name="H")
    >>> ng.make_axes([C, H])
    Axes(C: 3, H: 2)
    >>> ng.make_axes([C, C])
    Traceback (most recent call last):
    ...
    axgraph.errors.DuplicateAxisError: an axis may occur at most once in a tensor's axes; ...
    """
    return Axes(axes)


def make_axis_role(name: Optional[str] = None, docstring: Optional[str] = None) -> AxisRole:
    """Make a new axis role, a tag that ops find axes by (Channel, Height, ...).

    Parameters
    ----------
    name : str, optional
        The role's name; an unnamed role takes its name from the name scope
        it is stored in (``ar.Height = ng.make_axis_role()``).
    docstring : str, optional
        A description of the role, kept for the reader.

    Returns
    -------
    AxisRole
        The new role; give it to axes with ``make_axis(roles=[role])``.
    """
    return AxisRole(name=name, docstring=docstring)


class NameScope:
    """A namespace whose attributes name what is stored in them.

    An op stored on a scope is named ``scope.attr``, as in Nervana Graph v0.4
    (``layer.W = ng.variable(...)`` in a scope named "layer" is "layer.W"), and
    so is a scope made inside another ("outer.inner"). An axis or role keeps
    the attribute's name alone: `ax.N = ng.make_axis()` names the axis 'N' (and
    so makes it the batch axis by neon's convention), as the standard neon axes
    expect; only axes and roles without a name of their own are renamed.
    A scope is also a context manager (`with ng.name_scope("layer") as s:`):
    inside, `get_current_name_scope()` is it, and scopes made there become
    its attributes.

    Parameters
    ----------
    name : str, optional
        The scope's name: the prefix of its members' names.
    parent : NameScope, optional
        The scope this one is stored on, as the attribute `name` (default: the scope
        entered with `with`, if any).
    """

    name: Optional[str]

    def __init__(self, name: Optional[str] = None, parent: Optional["NameScope"] = None):
        object.__setattr__(self, "name", name)
        if parent is None:
            parent = get_current_name_scope()
        if parent is not None and name is not None:
            setattr(parent, name, self)

    if TYPE_CHECKING:
        # members are whatever the user stores, so any attribute may be read
        def __getattr__(self, key: str) -> Any: ...

    def __setattr__(self, key: str, value) -> None:
        if isinstance(value, (NameableValue, NameScope)):
            value.name = key if self.name is None else f"{self.name}.{key}"
        elif getattr(value, "_auto_named", False):
            value.name = key
            value._auto_named = False
        object.__setattr__(self, key, value)

    def named(self, name: str) -> "NameScope":
        """Set the scope's name and return it (Nervana Graph's chaining spelling)."""
        object.__setattr__(self, "name", name)
        return self

    def __enter__(self) -> "NameScope":
        _scopes.stack.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _scopes.stack.remove(self)

    def __repr__(self) -> str:
        members = ", ".join(k for k in vars(self) if k != "name")
        return f"NameScope({self.name}: {members})"


class _ScopeStack(threading.local):
    """Per-thread stack of the name scopes entered with `with`."""

    def __init__(self) -> None:
        self.stack: List[NameScope] = []


_scopes = _ScopeStack()


def get_current_name_scope() -> Optional[NameScope]:
    """The innermost name scope entered with ``with`` in this thread.

    Returns
    -------
    NameScope or None
        That scope, or None outside every ``with`` block.
    """
    return _scopes.stack[-1] if _scopes.stack else None


def make_name_scope(name: Optional[str] = None) -> NameScope:
    """Make a new name scope, a namespace that names what is stored in it.

    Parameters
    ----------
    name : str, optional
        The scope's name; inside a ``with`` block of another scope, the new
        scope also becomes that scope's attribute `name`.

    Returns
    -------
    NameScope
        The new scope.

    Examples
    --------
    >>> import axgraph as ng
    >>> ax = ng.make_name_scope(name="ax")
    >>> ax.N = ng.make_axis(length=8)
    >>> ax.N, ax.N.is_batch
    (Axis(N: 8), True)
    """
    return NameScope(name)


def name_scope(name: Optional[str] = None, name_scope: Optional[NameScope] = None) -> NameScope:
    """A name scope to use as a namespace or as a context manager (``with``).

    Parameters
    ----------
    name : str, optional
        The name of the new scope.
    name_scope : NameScope, optional
        An existing scope to return instead of making one, to re-enter it.

    Returns
    -------
    NameScope
        `name_scope` if given, else a new scope called `name`.
    """
    return name_scope if name_scope is not None else NameScope(name)


def with_name_scope(fun: Optional[Callable] = None, name: Optional[str] = None):
    """Decorate a function to run inside a new name scope, which it gets first.

    Each call runs ``fun(scope, *args, **kwargs)`` inside a new scope, so a
    layer function can store its axes and ops under its own names.

    Parameters
    ----------
    fun : callable, optional
        The function to decorate; None (``@with_name_scope(name="x")``) returns
        a decorator.
    name : str, optional
        The scope's name; by default the function's name. A ``name=`` keyword
        given to a call wins over both.

    Returns
    -------
    callable
        The decorated function (or, without `fun`, a decorator).
    """
    if fun is None:
        return functools.partial(with_name_scope, name=name)

    @functools.wraps(fun)
    def wrapper(*args, **kwargs):
        scope_name = kwargs.pop("name", None) or name or fun.__name__
        with NameScope(scope_name) as scope:
            return fun(scope, *args, **kwargs)

    return wrapper


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


def _made_at(axis: Axis) -> str:
    path, line = axis.location
    return f"{axis.name}: {axis.length} made at {path}:{line}"


class NameClash(NamedTuple):
    """Different axes a reader would take for one, each from a side of an operation: they
    share a root name (two axes named H) but not their identity."""

    ours: Axis
    theirs: Axis

    @staticmethod
    def between(ours: Iterable[Axis], theirs: Iterable[Axis]) -> List["NameClash"]:
        """The pairs (an axis of `ours`, a different one of `theirs`) sharing a root name.

        Parameters
        ----------
        ours, theirs : iterable of Axis
            The axes of each side (an operand and the axes asked for, two operands...).

        Returns
        -------
        list of NameClash
            One per axis of `theirs` that is not in `ours` but is named like one of them.
        """
        ours = Axes(ours)
        by_name = {a.root_name: a for a in ours if a.root_name is not None}
        return [NameClash(by_name[b.root_name], b) for b in Axes(theirs)
                if b not in ours and b.root_name in by_name]

    @staticmethod
    def describe(clashes: Sequence["NameClash"]) -> str:
        """"different axes named H (H: 3 made at a.py:4 and H: 3 made at b.py:9)": the
        words every such message uses, naming where each axis was made.

        Parameters
        ----------
        clashes : sequence of NameClash
            The pairs found by `between`.

        Returns
        -------
        str
            The phrase.
        """
        names = ", ".join(str(c.ours.root_name) for c in clashes)
        pairs = "; ".join(f"{_made_at(c.ours)} and {_made_at(c.theirs)}" for c in clashes)
        return f"different axes named {names} ({pairs})"


def elementwise_axes(kind: str, x, y, *more) -> Axes:
    """The axes of an elementwise op on operands `x`, `y`, ... (anything with .name and
    .axes), joined left to right: with three operands, (x and y) then z.

    x's axes, then y's new ones. Two *different* axes that share a
    root name, one from each operand, would come out side by side (`(H, H)`):
    a silent outer product where a reader sees one H. That raises, naming both
    axes and where each was made; an explicit ng.broadcast stays the way to
    combine them on purpose.
    """
    if more:
        joined = _Joined(f"{x.name} and {y.name}", elementwise_axes(kind, x, y))
        return elementwise_axes(kind, joined, *more)
    extra = y.axes - x.axes
    if not extra:
        return x.axes
    clashes = NameClash.between(x.axes - y.axes, extra)
    if clashes:
        raise IncompatibleAxesError(
            f"{kind} of {x.name} {x.axes} and {y.name} {y.axes}: the operands carry "
            f"{NameClash.describe(clashes)}, so the result would hold both, an outer product "
            f"{x.axes + extra}. If they are the same dimension, relabel {y.name} with "
            f"{x.name}'s axis: ng.cast_axes({y.name}, axes); to combine them on purpose, "
            f"ng.broadcast an operand to both axes first", user_location())
    return x.axes + extra


class _Joined(NamedTuple):
    """Operands already joined, named for messages ("x and y")."""

    name: str
    axes: Axes
