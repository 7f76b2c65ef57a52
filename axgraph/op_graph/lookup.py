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

    def __init__(self, lut: Op, idx: Op, vocab_axis: Axis, pad_idx: Optional[int], name=None):
        self.vocab_axis, self.pad_idx = vocab_axis, pad_idx
        axes = (lut.axes - Axes(vocab_axis)) + idx.axes
        super().__init__(lut, idx, axes=axes, dtype=lut.dtype, name=name)


class LookupTableBackpropOp(Op):
    """Adds each index's adjoint row into a table of zeros (a scatter-add)."""

    def __init__(self, delta: Op, idx: Op, lookup: LookupTableOp, name=None):
        self.lookup = lookup
        lut = lookup.args[0]
        super().__init__(delta, idx, axes=lut.axes, dtype=delta.dtype, name=name)


def lookuptable(lut, idx, vocab_axis: Optional[Axis] = None, pad_idx: Optional[int] = None,
                name: Optional[str] = None) -> Op:
    """Rows of `lut` picked by the integers `idx` (an embedding).

    The table's `vocab_axis` (default: its first axis) is indexed; the result
    has the table's other axes, then idx's axes. Rows at `pad_idx` read as
    zeros and get no gradient, so padding never trains.
    """
    lut, idx = as_op(lut), as_op(idx)
    vocab_axis = lut.axes[0] if vocab_axis is None else vocab_axis
    if vocab_axis not in lut.axes:
        raise IncompatibleAxesError(f"lookuptable: {vocab_axis.name} is not an axis of {lut.name} "
                                    f"{lut.axes}", user_location())
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"lookuptable: indices {idx.name} must be integers, not {idx.dtype}",
                         user_location())
    overlap = (lut.axes - Axes(vocab_axis)) & idx.axes
    if overlap:
        raise IncompatibleAxesError(f"lookuptable: axes {overlap} are in both the table and the "
                                    f"indices", user_location())
    return LookupTableOp(lut, idx, vocab_axis, pad_idx, name=name)
