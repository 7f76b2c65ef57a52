"""Tensor contraction by axes (axes paired by identity and dual offsets).

``dot(x, y)`` contracts every axis the two share and every dual pair: an
axis ``A + k`` of x with ``A + k + 1`` of y. The result has x's unmatched
axes, then y's.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from ..axes import Axes, Axis, dual_pairs
from ..debug_info import user_location
from ..errors import IncompatibleAxesError
from ..shapes.prover import provably_different
from .op import Op
from .tensors import as_op


class DotOp(Op):
    """Contraction of x and y over `pairs` ((x axis, y axis) tuples).

    `pairs` defaults to the dual-offset rule. The result's dims are x's unpaired
    axes, then y's; `axes` may relabel them by position (autodiff uses this
    where the natural labels would repeat an axis).
    """

    attributes = ("pairs",)
    pairs: List[Tuple[Axis, Axis]]

    def __init__(self, x, y, name: Optional[str] = None, dtype=None, pairs=None, axes=None):
        super().__init__(as_op(x), as_op(y), pairs=pairs, axes=axes, dtype=dtype, name=name)

    def infer_axes(self) -> Axes:
        x, y = self.args
        self.pairs = dual_pairs(x.axes, y.axes) if self.pairs is None else list(self.pairs)
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
        natural = [a for a in x.axes if a not in self.x_reduce] + \
                  [b for b in y.axes if b not in self.y_reduce]
        if self._asked_axes is None:
            return Axes(natural)
        axes = Axes(self._asked_axes)
        if len(axes) != len(natural) or any(
                provably_different(a.length, b.length) for a, b in zip(axes, natural)):
            raise IncompatibleAxesError(f"dot result axes {axes} do not fit the lengths of "
                                        f"{natural}", user_location())
        return axes

    def infer_dtype(self):
        x, y = self.args
        return np.result_type(x.dtype, y.dtype) if self._asked_dtype is None else self._asked_dtype


def dot(x, y, name: Optional[str] = None, dtype=None) -> Op:
    """The tensor contraction of x and y over their shared axes and dual pairs.

    Axes pair by identity, not position: every axis the two share is summed
    over, and so is every dual pair, an axis ``A + k`` of x with ``A + k + 1``
    of y. A weight with axes (H, C - 1) times an input with axes (C, N) is
    a matrix product giving (H, N); a (C, C - 1) weight maps C to C itself.
    The result has x's unpaired axes, then y's.

    Parameters
    ----------
    x, y : Op or number
        The operands.
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The result's element type; None: NumPy's common type of x and y.

    Returns
    -------
    Op
        The contraction, with x's unpaired axes then y's (a scalar if all pair).

    Raises
    ------
    IncompatibleAxesError
        If two paired axes have different lengths.
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
    """
    return DotOp(x, y, name=name, dtype=dtype)
