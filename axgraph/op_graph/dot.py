"""Tensor contraction by axes (seed 000 'dual offsets').

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
from .op import Op
from .tensors import as_op


class DotOp(Op):
    """Contraction of x and y over `pairs` ((x axis, y axis) tuples).

    `pairs` defaults to seed 000's rule. The result's dims are x's unpaired
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
            if None not in (axis_x.length, axis_y.length) and axis_x.length != axis_y.length:
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
        if [a.length for a in axes] != [a.length for a in natural]:
            raise IncompatibleAxesError(f"dot result axes {axes} do not fit the lengths of "
                                        f"{natural}", user_location())
        return axes

    def infer_dtype(self):
        x, y = self.args
        return np.result_type(x.dtype, y.dtype) if self._asked_dtype is None else self._asked_dtype


def dot(x, y, name: Optional[str] = None, dtype=None) -> Op:
    """Contract x and y over their shared axes and dual pairs (seed 000)."""
    return DotOp(x, y, name=name, dtype=dtype)
