"""Lookup tables (embeddings): rows of a table picked by integer indices."""
from __future__ import annotations

from typing import Optional

from ..axes import Axes, Axis
from ..debug_info import user_location
from ..errors import DTypeError, IncompatibleAxesError
from .op import Op
from .tensors import as_op


class LookupTableOp(Op):
    """result[e..., i...] = lut[idx[i...], e...]; rows at `pad_idx` read as zeros."""

    attributes = ("vocab_axis", "pad_idx")
    vocab_axis: Axis
    pad_idx: Optional[int]
    dtype_of_arg = 0

    def __init__(self, lut: Op, idx: Op, vocab_axis: Axis, pad_idx: Optional[int], name=None):
        super().__init__(as_op(lut), as_op(idx), vocab_axis=vocab_axis, pad_idx=pad_idx, name=name)

    def infer_axes(self) -> Axes:
        lut, idx = self.args
        if self.vocab_axis not in lut.axes:
            raise IncompatibleAxesError(f"lookuptable: {self.vocab_axis.name} is not an axis of "
                                        f"{lut.name} {lut.axes}", user_location())
        if idx.dtype.kind not in "iu":
            raise DTypeError(f"lookuptable: indices {idx.name} must be integers, not "
                             f"{idx.dtype}", user_location())
        rows = lut.axes - Axes(self.vocab_axis)
        overlap = rows & idx.axes
        if overlap:
            raise IncompatibleAxesError(f"lookuptable: axes {overlap} are in both the table and "
                                        f"the indices", user_location())
        return rows + idx.axes


class LookupTableBackpropOp(Op):
    """Adds each index's adjoint row into a table of zeros (a scatter-add)."""

    attributes = ("lookup",)
    lookup: LookupTableOp
    dtype_of_arg = 0

    def __init__(self, delta: Op, idx: Op, lookup: LookupTableOp, name=None):
        super().__init__(as_op(delta), as_op(idx), lookup=lookup, name=name)

    def infer_axes(self) -> Axes:
        return self.lookup.args[0].axes


def lookuptable(lut, idx, vocab_axis: Optional[Axis] = None, pad_idx: Optional[int] = None,
                name: Optional[str] = None) -> Op:
    """Rows of the table `lut` picked by the integers `idx`: an embedding lookup.

    The table's `vocab_axis` (default: its first axis) is indexed; the result
    has the table's other axes, then idx's axes. Rows at `pad_idx` read as
    zeros and get no gradient, so padding never trains. The gradient with
    respect to the table adds each index's adjoint into its row.

    Parameters
    ----------
    lut : Op
        The table, usually a variable with axes (vocabulary, embedding...).
    idx : Op
        The indices, integers along `vocab_axis`.
    vocab_axis : Axis, optional
        The table's axis that `idx` indexes (None: its first axis).
    pad_idx : int, optional
        An index whose row reads as zeros (None: none).
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        The rows, with the table's other axes then idx's axes.

    Raises
    ------
    IncompatibleAxesError
        If `vocab_axis` is not an axis of the table, or the table's other axes
        and idx's overlap.
    DTypeError
        If `idx` does not hold integers.

    Examples
    --------
    >>> import numpy as np
    >>> import axgraph as ng
    >>> V, E, N = (ng.make_axis(length=n, name=s) for n, s in ((4, "V"), (2, "E"), (3, "N")))
    >>> table = ng.constant(np.arange(8.0).reshape(4, 2), axes=[V, E])
    >>> words = ng.constant(np.array([3, 0, 3]), axes=[N], dtype=np.int32)
    >>> with ng.make_transformer() as t:
    ...     print(t.computation(ng.lookuptable(table, words))())
    [[6. 0. 6.]
     [7. 1. 7.]]
    """
    lut = as_op(lut)
    vocab_axis = lut.axes[0] if vocab_axis is None else vocab_axis
    return LookupTableOp(lut, idx, vocab_axis, pad_idx, name=name)
