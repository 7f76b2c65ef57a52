"""Ops that move values between axes without arithmetic.

broadcast, cast_axes, axes_with_order, flatten/unflatten, slicing, concat,
stack and pad. Each checks its axes when built and says which ones are wrong.
"""
from __future__ import annotations

import builtins
import numbers
import operator
from typing import Optional, Sequence, Tuple, Union

from ..axes import Axes, AxesLike, Axis, FlattenedAxis, PaddedAxis, SlicedAxis, make_axis
from ..debug_info import user_location
from ..dims import known
from ..errors import (AxesError, AxgraphIndexError, AxgraphTypeError, AxisLengthError,
                      IncompatibleAxesError, UnmatchedAxesError)
from ..shapes.prover import provably_different
from .op import Op
from .tensors import as_op


def _fail(error_class, message: str):
    return error_class(message, user_location())


def parts_of(axes) -> list:
    """The axes with each FlattenedAxis replaced by the axes it stands for, in order."""
    return [part for axis in axes
            for part in (axis.axes if isinstance(axis, FlattenedAxis) else (axis,))]


class ShapeOp(Op):
    """Base of ops that move x's values to other axes: the result has x's dtype."""

    dtype_of_arg = 0


class BroadcastOp(ShapeOp):
    """x repeated along the new axes of `axes` (a superset of x's axes)."""

    def __init__(self, x, axes: AxesLike, name: Optional[str] = None):
        super().__init__(as_op(x), axes=axes, name=name)

    def infer_axes(self) -> Axes:
        x, axes = self.args[0], Axes(self._asked_axes)
        missing = x.axes - axes
        if missing:
            raise _fail(UnmatchedAxesError,
                        f"broadcast of {x.name} {x.axes} to {axes}: the new axes must include "
                        f"{missing}")
        return axes


class AxesCastOp(ShapeOp):
    """The same values under other axes of the same lengths, matched by position."""

    def __init__(self, x, axes: AxesLike, name: Optional[str] = None):
        super().__init__(as_op(x), axes=axes, name=name)

    def infer_axes(self) -> Axes:
        x, axes = self.args[0], Axes(self._asked_axes)
        if len(axes) != len(x.axes):
            raise _fail(IncompatibleAxesError,
                        f"cast_axes of {x.name} {x.axes} to {axes}: {len(x.axes)} axes cannot "
                        f"become {len(axes)}")
        for old, new in zip(x.axes, axes):
            if provably_different(old.length, new.length):
                raise _fail(IncompatibleAxesError,
                            f"cast_axes of {x.name}: axis {old.name} ({old.length}) cannot become "
                            f"{new.name} ({new.length})")
        return axes


class ReorderAxes(ShapeOp):
    """x with the same axes in another order (a transpose)."""

    def __init__(self, x, axes: AxesLike, name: Optional[str] = None):
        super().__init__(as_op(x), axes=axes, name=name)

    def infer_axes(self) -> Axes:
        x, axes = self.args[0], Axes(self._asked_axes)
        if not axes.is_equal_set(x.axes):
            raise _fail(IncompatibleAxesError,
                        f"axes_with_order of {x.name}: {axes} must be a reordering of {x.axes}")
        return axes


class Flatten(ShapeOp):
    """Groups of consecutive axes become single FlattenedAxis axes."""

    def __init__(self, x, axes: Axes, name: Optional[str] = None):
        x, axes = as_op(x), Axes(axes)
        components = Axes(parts_of(axes)) if _covers_once(axes, x.axes) else None
        if components is not None and components != x.axes:
            x = ReorderAxes(x, components)  # x's axes in the order the flattened ones take them
        super().__init__(x, axes=axes, name=name)

    def infer_axes(self) -> Axes:
        x, axes = self.args[0], Axes(self._asked_axes)
        if not _covers_once(axes, x.axes):
            raise _fail(IncompatibleAxesError,
                        f"flatten of {x.name} {x.axes} to {axes}: the flattened axes must cover "
                        f"each axis of {x.name} once")
        if Axes(parts_of(axes)) != x.axes:
            raise _fail(IncompatibleAxesError,
                        f"flatten of {x.name} {x.axes} to {axes}: the flattened axes must take "
                        f"x's axes in order")
        return axes


def _covers_once(flattened: Axes, axes: Axes) -> bool:
    """Whether the parts of `flattened` are `axes`, each once, in any order."""
    parts = parts_of(flattened)
    return len(parts) == len(axes) and Axes(parts).is_equal_set(axes)


class Unflatten(ShapeOp):
    """Each FlattenedAxis of x split back into the axes it stands for."""

    def __init__(self, x, axes: Axes, name: Optional[str] = None):
        super().__init__(as_op(x), axes=axes, name=name)

    def infer_axes(self) -> Axes:
        x, axes = self.args[0], Axes(self._asked_axes)
        expanded = Axes(parts_of(x.axes))
        if expanded != axes:
            raise _fail(IncompatibleAxesError,
                        f"unflatten of {x.name} {x.axes}: expected {expanded}, got {axes}")
        return axes


Index = Union[int, slice]


class TensorSliceOp(ShapeOp):
    """A region of x: an int drops its axis, a slice keeps a (new) axis."""

    attributes = ("slices",)
    slices: Tuple[Index, ...]

    def __init__(self, x, slices: Tuple[Index, ...], axes: AxesLike = None,
                 name: Optional[str] = None):
        super().__init__(as_op(x), slices=slices, axes=axes, name=name)

    def infer_axes(self) -> Axes:
        x = self.args[0]
        self.slices = _normalized_slices(x, self.slices)
        return _sliced_axes(x, self.slices, self._asked_axes)


class SliceAdjointOp(ShapeOp):
    """Zeros with the axes of a sliced tensor, `delta` written at `slices`.

    The inverse placement of TensorSliceOp, used by its derivative.
    """

    attributes = ("slices",)
    slices: Tuple[Index, ...]

    def __init__(self, delta, axes: Axes, slices: Tuple[Index, ...], name: Optional[str] = None):
        super().__init__(as_op(delta), slices=slices, axes=axes, name=name)

    def infer_axes(self) -> Axes:
        delta, axes = self.args[0], Axes(self._asked_axes)
        if len(self.slices) != len(axes):
            raise _fail(IncompatibleAxesError,
                        f"slice adjoint of {delta.name}: {len(self.slices)} indices for the "
                        f"{len(axes)} axes {axes}")
        return axes


def _normalized_slices(x: Op, slices) -> Tuple[Index, ...]:
    if isinstance(slices, list):  # Nervana Graph passed one entry per axis as a list
        slices = tuple(slices)
    if not isinstance(slices, tuple):
        slices = (slices,)
    if any(item is Ellipsis for item in slices):
        at = slices.index(Ellipsis)
        rest = slices[at + 1:]
        if any(item is Ellipsis for item in rest):
            raise _fail(IncompatibleAxesError, f"slicing {x.name}: at most one ... is allowed")
        fill = (slice(None),) * builtins.max(len(x.axes) - len(slices) + 1, 0)
        slices = slices[:at] + fill + rest
    if len(slices) > len(x.axes):
        raise _fail(IncompatibleAxesError,
                    f"slicing {x.name} {x.axes}: {len(slices)} indices for {len(x.axes)} axes")
    slices = slices + (slice(None),) * (len(x.axes) - len(slices))
    normalized: list[Index] = []
    for axis, item in zip(x.axes, slices):
        if isinstance(item, slice):
            bounds = [_integer_index(x, axis, part) for part in (item.start, item.stop, item.step)]
            if bounds[2] == 0:
                raise _fail(AxgraphIndexError,
                            f"slicing {x.name}: the step for axis {axis.name} must not be zero")
            normalized.append(slice(*bounds))
            continue
        index = _integer_index(x, axis, item)
        if index is None:
            raise _fail(AxgraphIndexError,
                        f"slicing {x.name}: index None for axis {axis.name} is neither an int "
                        f"nor a slice")
        length = known(axis.length, None)  # a symbolic length is checked when it is bound
        if length is not None and not -length <= index < length:
            raise _fail(IncompatibleAxesError,
                        f"slicing {x.name}: index {index} is out of range for axis {axis.name} "
                        f"of length {axis.length}")
        normalized.append(index)
    return tuple(normalized)


def _integer_index(x: Op, axis, item) -> Optional[int]:
    """`item` as an int (None stays None); floats and other non-integers are refused, as
    NumPy refuses them, rather than floored."""
    if item is None:
        return None
    try:
        return operator.index(item)
    except TypeError:
        raise _fail(AxgraphIndexError,
                    f"slicing {x.name}: index {item!r} for axis {axis.name} is not an integer "
                    f"(only ints, slices of ints and ... index axes)") from None


def _sliced_axes(x: Op, slices: Tuple[Index, ...], axes: AxesLike) -> Axes:
    kept = [(axis, item) for axis, item in zip(x.axes, slices) if isinstance(item, slice)]
    if axes is not None:
        axes = Axes(axes)
        if len(axes) != len(kept):
            raise _fail(IncompatibleAxesError,
                        f"slicing {x.name}: {len(kept)} axes remain but {len(axes)} were given")
        for (axis, item), new in zip(kept, axes):
            length = _slice_length(axis, item)
            if provably_different(length, new.length):
                raise _fail(IncompatibleAxesError,
                            f"slicing {x.name}: axis {axis.name} sliced by {item} has length "
                            f"{length}, but {new.name} has length {new.length}")
        return axes
    result = []
    for axis, item in kept:
        if item == slice(None):
            result.append(axis)
            continue
        length = _slice_length(axis, item)
        if length is None:
            raise _fail(AxisLengthError,
                        f"slicing {x.name}: axis {axis.name} needs a known length before it is "
                        f"sliced (it has {axis.length})")
        result.append(SlicedAxis.of(axis, item))
    return Axes(result)


def _slice_length(axis: Axis, item: slice) -> Optional[int]:
    length = known(axis.length, None)
    return None if length is None else len(range(*item.indices(length)))


class ConcatOp(ShapeOp):
    """Tensors joined along one axis each; all other axes shared.

    `concat_axes` holds the axis each arg is joined along, `axis` the result's.
    """

    attributes = ("concat_axes", "axis")
    concat_axes: Tuple[Axis, ...]
    axis: Axis

    def __init__(self, xs: Sequence[Op], concat_axes: Sequence[Axis], axis: Axis,
                 name: Optional[str] = None):
        super().__init__(*(as_op(x) for x in xs), concat_axes=tuple(concat_axes), axis=axis,
                         name=name)

    def infer_axes(self) -> Axes:
        self.concat_axes = tuple(self.concat_axes)
        if len(self.concat_axes) != len(self.args) or not self.args:
            raise _fail(IncompatibleAxesError,
                        f"concat of {len(self.args)} tensors along {len(self.concat_axes)} axes")
        for x, along in zip(self.args, self.concat_axes):
            if along not in x.axes:
                raise _fail(UnmatchedAxesError,
                            f"concat: {x.name} {x.axes} has no axis {along.name} to join along")
        first = self.args[0]
        return Axes(self.axis if a is self.concat_axes[0] else a for a in first.axes)


class StackOp(ShapeOp):
    """Tensors of the same axes stacked along a new axis."""

    attributes = ("axis", "pos")
    axis: Axis
    pos: int

    def __init__(self, xs: Sequence[Op], axis: Axis, pos: int, name: Optional[str] = None):
        super().__init__(*(as_op(x) for x in xs), axis=axis, pos=pos, name=name)

    def infer_axes(self) -> Axes:
        if not self.args:
            raise _fail(IncompatibleAxesError, "stack needs at least one tensor")
        axes = list(self.args[0].axes)
        axes.insert(self.pos, self.axis)
        return Axes(axes)


class PadOp(ShapeOp):
    """x surrounded by zeros: `paddings` gives (before, after) per axis.

    The result's axes are `axes` if given (lengths checked), else each padded
    axis of x becomes a PaddedAxis.
    """

    attributes = ("paddings",)
    paddings: Tuple[Tuple[int, int], ...]

    def __init__(self, x, paddings: Tuple[Tuple[int, int], ...], axes: Optional[Axes],
                 name: Optional[str] = None):
        super().__init__(as_op(x), paddings=tuple(paddings), axes=axes, name=name)

    def infer_axes(self) -> Axes:
        x, pairs = self.args[0], self.paddings
        if len(pairs) != len(x.axes):
            raise _fail(IncompatibleAxesError,
                        f"pad of {x.name} {x.axes}: {len(pairs)} paddings for {len(x.axes)} axes")
        if self._asked_axes is None:
            new_axes = []
            for axis, (before, after) in zip(x.axes, pairs):
                if before == after == 0:
                    new_axes.append(axis)
                elif axis.length is None:
                    raise _fail(AxisLengthError,
                                f"pad of {x.name}: axis {axis.name} needs a length")
                else:
                    new_axes.append(PaddedAxis.of(axis, (before, after)))
            return Axes(new_axes)
        axes = Axes(self._asked_axes)
        for axis, new, (before, after) in zip(x.axes, axes, pairs):
            if axis.length is not None and provably_different(axis.length + before + after,
                                                               new.length):
                raise _fail(IncompatibleAxesError,
                            f"pad of {x.name}: {axis.name} padded by ({before}, {after}) cannot "
                            f"have the length {new.length} of {new.name}")
        return axes


def broadcast(x, axes: AxesLike, name: Optional[str] = None) -> Op:
    """x repeated along new axes: the result has exactly `axes`, in that order.

    Elementwise ops broadcast by themselves; this is for giving a value axes
    on purpose (to combine two different axes of one name, or to fill a
    stored tensor's shape).

    Parameters
    ----------
    x : Op or number
        The tensor.
    axes : Axes, Axis or iterable of Axis
        The result's axes: all of x's, in any order, and the new ones.
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        x's values repeated along the new axes (x itself if `axes` are x's, in order).

    Raises
    ------
    UnmatchedAxesError
        If `axes` lack some of x's axes.
    AxgraphTypeError, DuplicateAxisError
        If `axes` are not distinct Axis objects.

    Examples
    --------
    >>> import axgraph as ng
    >>> C, N = ng.make_axis(length=2, name="C"), ng.make_axis(length=3, name="N")
    >>> ng.broadcast(ng.placeholder([C]), [N, C]).axes
    Axes(N: 3, C: 2)
    """
    x, axes = as_op(x), Axes(axes)
    if axes == x.axes:
        return x
    return BroadcastOp(x, axes, name=name)


def expand_dims(x, axis: Axis, dim: int, name: Optional[str] = None) -> Op:
    """x with `axis` inserted at position `dim` of its axes, its values repeated along it.

    Nervana Graph v0.4's spelling of a broadcast to one more axis. `dim`
    counts like a list index: 0 puts the axis first, len(x.axes) last, and a
    negative dim counts from the end (-1 puts it before the last axis).

    Parameters
    ----------
    x : Op or number
        The tensor.
    axis : Axis
        The new axis.
    dim : int
        Where it goes among x's axes, from -len(x.axes) to len(x.axes).
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        The broadcast value; x itself when x already has `axis`.

    Raises
    ------
    AxesError
        If `axis` is not an Axis.
    IncompatibleAxesError
        If `dim` is not an int in that range.
    """
    x = as_op(x)
    if not isinstance(axis, Axis):
        raise _fail(AxesError, f"expand_dims: axis must be an Axis, not {axis!r:.60}")
    if axis in x.axes:
        return x
    rank = len(x.axes)
    if isinstance(dim, bool) or not isinstance(dim, numbers.Integral) or not -rank <= dim <= rank:
        raise _fail(IncompatibleAxesError,
                    f"expand_dims of {x.name} {x.axes}: position {dim!r} is not an int from "
                    f"{-rank} to {rank}")
    axes = list(x.axes)
    return broadcast(x, Axes(axes[:dim] + [axis] + axes[dim:]), name=name)


def cast_axes(x, axes: AxesLike, name: Optional[str] = None) -> Op:
    """x's values under other axes: each of x's axes, in order, relabeled.

    Axes pair by identity, so data made on one set of axes meets another
    set only through an explicit relabeling such as this; nothing moves.

    Parameters
    ----------
    x : Op or number
        The tensor.
    axes : Axes, Axis or iterable of Axis
        One new axis per axis of x, in x's axis order, each of the same length.
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        x's values with `axes`.

    Raises
    ------
    IncompatibleAxesError
        If the number of axes differs from x's, or a new axis's length differs
        from the one it replaces.
    AxgraphTypeError, DuplicateAxisError
        If `axes` are not distinct Axis objects.

    Examples
    --------
    >>> import axgraph as ng
    >>> C, K = ng.make_axis(length=3, name="C"), ng.make_axis(length=3, name="K")
    >>> ng.cast_axes(ng.placeholder([C]), [K]).axes
    Axes(K: 3)
    """
    return AxesCastOp(x, axes, name=name)


def rename(x, mapping, name: Optional[str] = None) -> Op:
    """x with some of its axes replaced by others, chosen by identity: ``{T: K}``.

    Unlike `cast_axes`, which relabels every axis by position (so two axes of the
    same length swapped by mistake pass silently), `rename` names each axis it
    replaces; the others are kept, in x's order. Nothing moves.

    Parameters
    ----------
    x : Op or number
        The tensor.
    mapping : dict of Axis to Axis
        Each key an axis of x, its value the axis (of the same length) to put in
        its place.
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        x's values, with each key of `mapping` replaced by its value.

    Raises
    ------
    AxgraphTypeError
        If `mapping` is not a dict of Axis to Axis.
    UnmatchedAxesError
        If a key is not an axis of x.
    IncompatibleAxesError
        If a new axis's length differs from the one it replaces.
    DuplicateAxisError
        If the result would hold one axis twice.

    Examples
    --------
    >>> import axgraph as ng
    >>> T, D = ng.make_axis(length=4, name="T"), ng.make_axis(length=8, name="D")
    >>> K = ng.make_axis(length=4, name="K")
    >>> ng.rename(ng.placeholder([D, T]), {T: K}).axes
    Axes(D: 8, K: 4)
    """
    x = as_op(x)
    if not isinstance(mapping, dict) or not all(
            isinstance(k, Axis) and isinstance(v, Axis) for k, v in mapping.items()):
        raise AxgraphTypeError(f"rename({x.name}, mapping): mapping must be a dict of Axis to "
                               f"Axis, not {mapping!r}", user_location())
    missing = [k for k in mapping if k not in x.axes]
    if missing:
        raise UnmatchedAxesError(f"rename({x.name}): {Axes(missing)} are not axes of {x.name} "
                                 f"{x.axes}", user_location())
    for old, new in mapping.items():
        if provably_different(old.length, new.length):
            raise IncompatibleAxesError(f"rename({x.name}): axis {old.name} ({old.length}) "
                                        f"cannot become {new.name} ({new.length})",
                                        user_location())
    return cast_axes(x, [mapping.get(a, a) for a in x.axes], name=name)


def axes_with_order(x, axes: AxesLike, name: Optional[str] = None) -> Op:
    """x with its axes in the order `axes` gives (a transpose).

    The order of axes is the order values come back in, never a memory
    layout, so this matters only where an order is visible: a computation's
    result, or a value handed to code that reads arrays by position.

    Parameters
    ----------
    x : Op or number
        The tensor.
    axes : Axes, Axis or iterable of Axis
        x's axes, in the order wanted.
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        x with its axes reordered (x itself if already in that order).

    Raises
    ------
    IncompatibleAxesError
        If `axes` are not a reordering of x's axes.
    AxgraphTypeError, DuplicateAxisError
        If `axes` are not distinct Axis objects.
    """
    x, axes = as_op(x), Axes(axes)
    if axes == x.axes:
        return x
    return ReorderAxes(x, axes, name=name)


def dimshuffle(x, axes: AxesLike, name: Optional[str] = None) -> Op:
    """x with its axes in the order `axes` gives: `axes_with_order` by Nervana Graph's name.

    Parameters
    ----------
    x : Op or number
        The tensor.
    axes : Axes, Axis or iterable of Axis
        x's axes, in the order wanted.
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        x with its axes reordered (x itself if already in that order).

    Raises
    ------
    IncompatibleAxesError
        If `axes` are not a reordering of x's axes.
    AxgraphTypeError, DuplicateAxisError
        If `axes` are not distinct Axis objects.
    """
    return axes_with_order(x, axes, name=name)


def flatten(x, axes: AxesLike = None, name: Optional[str] = None) -> Op:
    """Flatten x's axes into one FlattenedAxis, or into the flattened `axes` given.

    Matrix-shaped code (a dense layer over an image's C, H, W) needs several
    axes as one; the FlattenedAxis remembers its parts, so `unflatten`
    restores them.

    Parameters
    ----------
    x : Op or number
        The tensor.
    axes : Axes, Axis or iterable of Axis, optional
        The result's axes: FlattenedAxis objects (and plain axes) whose parts
        are x's axes, each once. None: one axis for all of x's axes.
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        x's values on the flattened axes (x itself for at most one axis and
        no `axes`).

    Raises
    ------
    IncompatibleAxesError
        If the parts of `axes` do not cover each of x's axes exactly once.
    AxgraphTypeError, DuplicateAxisError
        If `axes` are not distinct Axis objects.

    Examples
    --------
    >>> import axgraph as ng
    >>> C, H = ng.make_axis(length=2, name="C"), ng.make_axis(length=3, name="H")
    >>> ng.flatten(ng.placeholder([C, H])).axes
    Axes((C*H): 6)
    """
    x = as_op(x)
    if axes is None:
        if len(x.axes) <= 1:
            return x
        axes = Axes(FlattenedAxis.of(x.axes))
    return Flatten(x, Axes(axes), name=name)


def flatten_at(x, idx: int, name: Optional[str] = None) -> Op:
    """Flatten x's axes before position `idx` into one axis and the rest into another.

    The usual way to turn a feature map (C, H, W, N) into the matrix
    ((C*H*W), N) that a dense layer multiplies.

    Parameters
    ----------
    x : Op or number
        The tensor.
    idx : int
        The position splitting x's axes (a group of one axis stays that axis).
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        x's values on at most two axes.

    Examples
    --------
    >>> import axgraph as ng
    >>> C, H, N = (ng.make_axis(length=n, name=s) for n, s in ((2, "C"), (3, "H"), (4, "N")))
    >>> ng.flatten_at(ng.placeholder([C, H, N]), 2).axes
    Axes((C*H): 6, N: 4)
    """
    x = as_op(x)
    groups = [Axes(x.axes[:idx]), Axes(x.axes[idx:])]
    axes = [g[0] if len(g) == 1 else FlattenedAxis.of(g) for g in groups if len(g)]
    return Flatten(x, Axes(axes), name=name)


def unflatten(x, axes: AxesLike = None, name: Optional[str] = None) -> Op:
    """Split every FlattenedAxis of x back into the axes it stands for.

    Parameters
    ----------
    x : Op or number
        The tensor.
    axes : Axes, Axis or iterable of Axis, optional
        The order wanted for the result's axes (None: the parts in place).
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        x's values on the unflattened axes (x itself if it has no flattened axis).

    Raises
    ------
    IncompatibleAxesError
        If `axes` are not a reordering of the unflattened axes.
    """
    x = as_op(x)
    expanded = Axes(parts_of(x.axes))
    if expanded == x.axes:
        return x
    result = Unflatten(x, expanded, name=name)
    return result if axes is None else axes_with_order(result, axes)


def tensor_slice(x, slices, axes: AxesLike = None, name: Optional[str] = None) -> Op:
    """A region of x: one int or slice per axis, in x's axis order (``x[...]`` does this).

    An int drops its axis; a slice keeps a shorter axis derived from the old
    one (`H[1:3]`), the same object for the same positions, so two tensors
    sliced alike still pair. Missing trailing entries (and ``...``) take
    whole axes. Steps may be negative, as in NumPy.

    Parameters
    ----------
    x : Op or number
        The tensor.
    slices : int, slice or tuple of them
        The indices, in x's axis order (a list is taken as a tuple).
    axes : Axes, Axis or iterable of Axis, optional
        Axes to give the kept dimensions instead of derived ones, one per
        slice, each of its slice's length.
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        The region, on the axes kept.

    Raises
    ------
    IncompatibleAxesError
        If there are more indices than axes, or more than one ``...``, an index
        is out of range, or `axes` do not fit the kept dimensions.
    axgraph.errors.AxgraphIndexError
        If an index is not an int (or a slice of ints), or a step is 0.
    AxisLengthError
        If an axis sliced without `axes` has no length yet.

    Examples
    --------
    >>> import axgraph as ng
    >>> C, H = ng.make_axis(length=2, name="C"), ng.make_axis(length=5, name="H")
    >>> x = ng.placeholder([C, H])
    >>> x[0].axes, x[:, 1:3].axes
    (Axes(H: 5), Axes(C: 2, H[1:3]: 2))
    """
    return TensorSliceOp(x, slices, axes=axes, name=name)


def slice_along_axis(x, axis: Axis, idx: Index, name: Optional[str] = None) -> Op:
    """Slice x along one axis, named rather than found by position.

    Parameters
    ----------
    x : Op or number
        The tensor.
    axis : Axis
        The axis sliced; x's other axes are kept whole.
    idx : int or slice
        An int removes the axis; a slice keeps a shorter one derived from it.
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        The slice of x.

    Raises
    ------
    UnmatchedAxesError
        If `axis` is not an axis of x.
    IncompatibleAxesError
        If an int `idx` is out of range.
    axgraph.errors.AxgraphIndexError
        If `idx` is not an int or a slice of ints, or its step is 0.
    AxisLengthError
        If `axis` has no length yet and `idx` is a slice.
    """
    x = as_op(x)
    if axis not in x.axes:
        raise _fail(UnmatchedAxesError, f"slice_along_axis: {axis!r} is not an axis of {x.name} "
                                        f"{x.axes}")
    slices = tuple(idx if a is axis else slice(None) for a in x.axes)
    return TensorSliceOp(x, slices, name=name)


def concat_along_axis(xs: Sequence, axis: Axis, name: Optional[str] = None) -> Op:
    """Join tensors end to end along `axis`.

    Each tensor holds `axis` itself or an axis of the same name, or a slice of
    one (lengths may differ); every other axis is shared. The result gets a
    new axis of that name whose length is the sum (unknown until fed if a
    part's length is).

    Parameters
    ----------
    xs : sequence of Op
        The tensors, in order (at least one).
    axis : Axis
        The axis joined along, or one named like those of the tensors.
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        The joined tensor, with the new axis where the first tensor has its part.

    Raises
    ------
    IncompatibleAxesError
        If `xs` is empty, or the tensors differ in axes other than the joined one.
    UnmatchedAxesError
        If a tensor has no axis to join along, or several named like `axis`.

    Examples
    --------
    >>> import axgraph as ng
    >>> H, N = ng.make_axis(length=3, name="H"), ng.make_axis(length=4, name="N")
    >>> x = ng.placeholder([H, N])
    >>> ng.concat_along_axis([x, x], H).axes
    Axes(H: 6, N: 4)
    """
    xs = [as_op(x) for x in xs]
    if not xs:
        raise _fail(IncompatibleAxesError, "concat_along_axis needs at least one tensor")
    concat_axes = []
    for x in xs:
        if axis in x.axes:
            concat_axes.append(axis)
            continue
        found = x.axes.find_like(axis)
        if len(found) > 1:
            raise _fail(UnmatchedAxesError,
                        f"concat_along_axis: {x.name} {x.axes} has several axes named like "
                        f"{axis.name} ({found}); join along one of them by passing it")
        if not found:
            raise _fail(UnmatchedAxesError,
                        f"concat_along_axis: {x.name} {x.axes} has no axis {axis.name} to join along")
        concat_axes.append(found[0])
    rest = xs[0].axes - Axes(concat_axes[0])
    for x, concat_axis in zip(xs, concat_axes):
        if not (x.axes - Axes(concat_axis)).is_equal_set(rest):
            raise _fail(IncompatibleAxesError,
                        f"concat_along_axis: {x.name} {x.axes} must share every axis but "
                        f"{axis.name} with {xs[0].name} {xs[0].axes}")
    lengths = [a.length for a in concat_axes]
    total = None if None in lengths else builtins.sum(lengths)
    new_axis = make_axis(length=total, name=axis.name, roles=axis.roles)
    xs = [axes_with_order(x, [c if a is concat_axes[0] else a for a in xs[0].axes])
          for x, c in zip(xs, concat_axes)]
    return ConcatOp(xs, concat_axes, new_axis, name=name)


def stack(xs: Sequence, axis: Axis, pos: int = 0, name: Optional[str] = None) -> Op:
    """Stack tensors with the same axes along a new `axis` placed at `pos`.

    Parameters
    ----------
    xs : sequence of Op
        The tensors (at least one), all with the same axes in any order.
    axis : Axis
        The new axis; its length is set to len(xs) if it has none.
    pos : int, optional
        Its position among the first tensor's axes (0: first).
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        The stacked tensor: position i along `axis` holds xs[i].

    Raises
    ------
    IncompatibleAxesError
        If `xs` is empty, `axis`'s length is not len(xs), the tensors' axes
        differ, `axis` is already one of them, or `pos` is out of range.
    """
    xs = [as_op(x) for x in xs]
    if not xs:
        raise _fail(IncompatibleAxesError, "stack needs at least one tensor")
    if axis.length is None:
        axis.length = len(xs)
    if provably_different(axis.length, len(xs)):
        raise _fail(IncompatibleAxesError,
                    f"stack of {len(xs)} tensors along {axis.name} of length {axis.length}")
    for x in xs:
        if not x.axes.is_equal_set(xs[0].axes):
            raise _fail(IncompatibleAxesError,
                        f"stack: {x.name} {x.axes} and {xs[0].name} {xs[0].axes} differ in axes")
    if axis in xs[0].axes:
        raise _fail(IncompatibleAxesError, f"stack: {axis.name} is already an axis of the tensors")
    if not 0 <= pos <= len(xs[0].axes):
        raise _fail(IncompatibleAxesError, f"stack: position {pos} is outside 0..{len(xs[0].axes)}")
    xs = [axes_with_order(x, xs[0].axes) for x in xs]
    return StackOp(xs, axis, pos, name=name)


def pad(x, paddings, axes: AxesLike = None, name: Optional[str] = None) -> Op:
    """x surrounded by zeros along its axes.

    Each padded axis becomes a PaddedAxis named after it (`H+pad(1,1)`), so
    the result still reads as the same dimensions; a convolution's own
    `padding` is usually the better tool for its input.

    Parameters
    ----------
    x : Op or number
        The tensor.
    paddings : sequence
        One entry per axis of x, in x's order: an int (zeros on both sides) or
        a (before, after) pair of ints.
    axes : Axes, Axis or iterable of Axis, optional
        Axes to give the result instead of padded ones, of the padded lengths.
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        The padded tensor.

    Raises
    ------
    IncompatibleAxesError
        If there is not one padding per axis, a padding is negative or not an
        int or pair of ints, or `axes` do not have the padded lengths.
    AxisLengthError
        If a padded axis has no length yet (and no `axes` are given).
    """
    x = as_op(x)
    paddings = list(paddings)
    if len(paddings) != len(x.axes):
        raise _fail(IncompatibleAxesError,
                    f"pad of {x.name} {x.axes}: {len(paddings)} paddings for {len(x.axes)} axes")
    pairs = []
    for axis, item in zip(x.axes, paddings):
        try:
            before, after = (item, item) if isinstance(item, numbers.Integral) else tuple(item)
            before, after = operator.index(before), operator.index(after)
        except TypeError:
            raise _fail(IncompatibleAxesError,
                        f"pad of {x.name}: padding {item!r} for {axis.name} must be an int or "
                        f"a (before, after) pair of ints") from None
        if before < 0 or after < 0:
            raise _fail(IncompatibleAxesError, f"pad of {x.name}: negative padding for {axis.name}")
        pairs.append((int(before), int(after)))
    return PadOp(x, tuple(pairs), None if axes is None else Axes(axes), name=name)
