"""Tensor contraction by axes (axes paired by identity and dual offsets).

``dot(x, y)`` contracts every axis the two share and every dual pair: an
axis ``A + k`` of x with ``A + k + 1`` of y. The result has x's unmatched
axes, then y's. ``dot(x, y, reduction_axes=[D])`` contracts only the axes
named and keeps every other shared axis once, as a batch axis: the result
has the batch axes, then x's free axes, then y's.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from ..axes import Axes, AxesLike, Axis, dual_pairs, make_axes
from ..debug_info import user_location
from ..errors import AxesError, AxgraphTypeError, IncompatibleAxesError
from ..shapes.prover import provably_different
from .op import Op
from .tensors import as_op


class DotOp(Op):
    """Contraction of x and y over `pairs` ((x axis, y axis) tuples), per `batch` axis.

    `pairs` defaults to the dual-offset rule. `batch` lists axes of both x and
    y that are kept, not summed: each entry of the result is one contraction
    (default: none). The result's dims are the batch axes, then x's axes in
    neither, then y's; `axes` may relabel them by position (autodiff uses this
    where the natural labels would repeat an axis).
    """

    attributes = ("pairs", "batch")
    pairs: List[Tuple[Axis, Axis]]
    batch: Optional[Axes]  # None when there are none (so printing leaves it out)

    def __init__(self, x, y, name: Optional[str] = None, dtype=None, pairs=None, batch=None,
                 axes=None):
        super().__init__(as_op(x), as_op(y), pairs=pairs, batch=batch, axes=axes, dtype=dtype,
                         name=name)

    def infer_axes(self) -> Axes:
        x, y = self.args
        self.pairs = dual_pairs(x.axes, y.axes) if self.pairs is None else list(self.pairs)
        self.batch = Axes(self.batch) if self.batch else None
        for axis_x, axis_y in self.pairs:
            if axis_x not in x.axes or axis_y not in y.axes:
                raise IncompatibleAxesError(
                    f"dot pairs {axis_x.name} with {axis_y.name}, which are not axes of "
                    f"{x.name} {x.axes} and {y.name} {y.axes}", user_location())
            if provably_different(axis_x.length, axis_y.length):
                raise IncompatibleAxesError(
                    f"dot pairs {axis_x.name} ({axis_x.length}) of {x.name} with {axis_y.name} "
                    f"({axis_y.length}) of {y.name}: lengths differ", user_location())
        self.x_reduce = Axes(a for a, _ in self.pairs)
        self.y_reduce = Axes(b for _, b in self.pairs)
        for axis in self.batch_axes:
            if axis not in x.axes or axis not in y.axes or axis in self.x_reduce \
                    or axis in self.y_reduce:
                raise IncompatibleAxesError(
                    f"dot keeps {axis.name} as a batch axis, which must be an axis of both "
                    f"{x.name} {x.axes} and {y.name} {y.axes} and not contracted",
                    user_location())
        natural = list(self.batch_axes) + list(self.x_free) + list(self.y_free)
        if self._asked_axes is None:
            return Axes(natural)
        axes = Axes(self._asked_axes)
        if len(axes) != len(natural) or any(
                provably_different(a.length, b.length) for a, b in zip(axes, natural)):
            raise IncompatibleAxesError(f"dot result axes {axes} do not fit the lengths of "
                                        f"{natural}", user_location())
        return axes

    @property
    def batch_axes(self) -> Axes:
        """The axes kept per product (empty for a plain contraction)."""
        return self.batch or Axes()

    @property
    def x_free(self) -> Axes:
        """x's axes neither contracted nor batch, in x's order."""
        return Axes(a for a in self.args[0].axes if a not in self.x_reduce
                    and a not in self.batch_axes)

    @property
    def y_free(self) -> Axes:
        """y's axes neither contracted nor batch, in y's order."""
        return Axes(b for b in self.args[1].axes if b not in self.y_reduce
                    and b not in self.batch_axes)

    def infer_dtype(self):
        x, y = self.args
        return np.result_type(x.dtype, y.dtype) if self._asked_dtype is None else self._asked_dtype


def contraction_plan(x: Op, y: Op, reduction_axes: AxesLike
                     ) -> Tuple[List[Tuple[Axis, Axis]], Axes]:
    """(pairs, batch) of ``dot(x, y, reduction_axes=...)``.

    Each axis R named pairs with R itself in y, or else with its dual R + 1 in y; every
    other axis x and y share is a batch axis, in x's order.
    """
    try:
        named = make_axes(reduction_axes)
    except (AxgraphTypeError, AxesError) as error:
        raise type(error)(f"dot reduction_axes: {error.message}", user_location()) from None
    pairs = []
    for axis in named:
        partner = axis if axis in y.axes else axis.get_dual(1)
        if axis not in x.axes or partner not in y.axes:
            missing = ", ".join(f"{t.name} {t.axes}" for t, a in ((x, axis), (y, partner))
                                if a not in t.axes)
            raise IncompatibleAxesError(
                f"dot: reduction axis {axis.name} is not an axis of {missing}", user_location())
        pairs.append((axis, partner))
    contracted = Axes(a for a, _ in pairs)
    batch = Axes(a for a in x.axes if a in y.axes and a not in contracted
                 and not any(a is b for _, b in pairs))
    return pairs, batch


def dot(x, y, reduction_axes: Optional[AxesLike] = None, name: Optional[str] = None,
        dtype=None) -> Op:
    """The tensor contraction of x and y: over their shared axes, or the ones named.

    Axes pair by identity, not position. Without `reduction_axes`, every axis
    the two share is summed over, and so is every dual pair, an axis ``A + k``
    of x with ``A + k + 1`` of y. A weight with axes (H, C - 1) times an input
    with axes (C, N) is a matrix product giving (H, N); a (C, C - 1) weight
    maps C to C itself. The result has x's unpaired axes, then y's.

    With `reduction_axes`, exactly the axes named are summed over (each pairs
    with itself in y, or, if y lacks it, with its dual ``A + 1``), and every other
    axis the two share is a *batch* axis, kept once: ``dot(q, k, reduction_axes=[D])``
    over q (D, H, T) and k (D, H, K) gives one (T, K) product per head, axes
    (H, T, K). The result has the batch axes (in x's order), then x's other
    axes, then y's. An empty list sums nothing: an outer product over distinct
    axes.

    Parameters
    ----------
    x, y : Op or number
        The operands.
    reduction_axes : Axis or sequence of Axis, optional
        The axes to contract, each an axis of x, and of y itself or through its
        dual. None: every shared axis and dual pair.
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The result's element type; None: NumPy's common type of x and y.

    Returns
    -------
    Op
        The contraction: batch axes, then x's free axes, then y's (a scalar if all pair).

    Raises
    ------
    IncompatibleAxesError
        If two paired axes have different lengths, or an axis of `reduction_axes`
        is not an axis of x and (itself or its dual) of y.
    AxgraphTypeError
        If an operand is not an op or a number.
    DTypeError
        If `dtype` is not a supported element type.

    Examples
    --------
    >>> import numpy as np
    >>> import axgraph as ng
    >>> C, H, N = (ng.make_axis(length=n, name=s) for n, s in ((3, "C"), (2, "H"), (4, "N")))
    >>> w = ng.variable([H, C - 1], initial_value=np.ones((2, 3)))
    >>> ng.dot(w, ng.placeholder([C, N])).axes
    Axes(H: 2, N: 4)
    >>> D, T, K = ng.make_axis(8, name="D"), ng.make_axis(5, name="T"), ng.make_axis(5, name="K")
    >>> q, k = ng.placeholder([D, H, T]), ng.placeholder([D, H, K])
    >>> ng.dot(q, k, reduction_axes=[D]).axes
    Axes(H: 2, T: 5, K: 5)
    """
    if reduction_axes is None:
        return DotOp(x, y, name=name, dtype=dtype)
    x, y = as_op(x), as_op(y)
    pairs, batch = contraction_plan(x, y, reduction_axes)
    return DotOp(x, y, name=name, dtype=dtype, pairs=pairs, batch=batch)
