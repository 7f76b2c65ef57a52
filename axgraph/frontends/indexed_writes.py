"""Writes at indices as one-hot products, for the importers (torch's ``index_put`` and
``scatter``, TF's ``ScatterUpdate``).

An axes graph has no write into a tensor. `hits` says, for each source position (on the
`sources` axes) and each position of x (on x's written axis, and any others it shares
with x), whether the source names that position: 1 or 0, a one-hot of the indices. An
accumulating write adds the values summed over the sources; a plain write puts, at each
position named, the value of the *last* source naming it (as PyTorch's and TensorFlow's
CPU kernels leave a repeated index), and leaves the other positions as they were.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..axes import Axis
from ..op_graph.op import Op
from .positional import in_order


def written_at(x: Op, hits: Op, values: Op, sources: Sequence[Axis], accumulate: bool) -> Op:
    """x with `values` written (or added) where `hits` says.

    Parameters
    ----------
    x : Op
        The tensor written into.
    hits : Op
        1 where a source position names a position of x, else 0: axes `sources`, x's
        written axis, and x's other axes the write varies along.
    values : Op
        Each source position's value, in x's element type: axes among `sources` and x's.
    sources : sequence of Axis
        The axes of the source positions (the indices' axes).
    accumulate : bool
        Add the values (repeated positions adding up) rather than write them.

    Returns
    -------
    Op
        The written tensor, on x's axes in x's order.

    Raises
    ------
    ValueError
        A plain write by sources of symbolic size (the last source is found by counting).
    """
    import axgraph as ng

    axes = list(x.axes)
    if accumulate:
        if x.dtype.kind == "f" and values.axes:  # a product over the sources
            added = ng.dot(hits, values, reduction_axes=list(sources))
        else:
            added = ng.sum(hits * values, reduction_axes=list(sources))
        return in_order(ng.add(x, added), axes)
    lengths = [a.length for a in sources]
    if not all(isinstance(n, int) for n in lengths):
        raise ValueError("a write (not accumulating) by indices of symbolic size")
    order = ng.constant(np.arange(1, int(np.prod(lengths)) + 1, dtype=np.int64).reshape(lengths),
                        list(sources))
    numbered = ng.multiply(ng.not_equal(hits, 0), order, dtype=np.int64)
    last = ng.max(numbered, reduction_axes=list(sources))  # 0: no source names the position
    chosen = ng.where(ng.equal(order, last), values, 0, dtype=x.dtype)
    picked = ng.sum(chosen, reduction_axes=list(sources))
    return in_order(ng.where(ng.greater(last, 0), picked, x, dtype=x.dtype), axes)


def added_at(x: Op, axis: Axis, index: Op, values: Op) -> Op:
    """x plus `values` added at the positions `index` names along `axis` (repeated ones
    adding up): the vector-Jacobian product of a lookup, so no one-hot is made.

    Parameters
    ----------
    x : Op
        The tensor added to.
    axis : Axis
        The axis of x the indices index.
    index : Op
        The indices (integers, on axes of their own).
    values : Op
        The values added, in x's element type: on x's other axes and index's (or a
        broadcast of them).

    Returns
    -------
    Op
        The sum, on x's axes in x's order.
    """
    import axgraph as ng

    rows = ng.lookuptable(x, index, vocab_axis=axis)
    error = in_order(ng.broadcast(values, list(rows.axes)), list(rows.axes))
    return in_order(ng.add(x, ng.deriv(rows, x, error=error)), list(x.axes))


__all__ = ["added_at", "written_at"]
