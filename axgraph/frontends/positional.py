"""Positional dimensions on named axes: what every importer of a positional format shares.

ONNX models, TensorFlow graphs and PyTorch's exported programs number their
dimensions; axgraph names them. An imported value is an op whose axes, in
order, are its dimensions: position i of the source's shape is ``op.axes[i]``.
Import rules keep that order (each ends with `in_order`), so the result of
`t.computation` has the source's layout. Where the source pairs dimensions by
position (NumPy broadcasting, a matrix product, a concatenation), the operands
are relabelled onto common axes with `ng.cast_axes`, which moves no data.

A `builder` passed to `broadcast_axes` is the importer: anything with
``new_axis(length, hint) -> Axis`` making a fresh, uniquely named axis.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

from ..axes import Axes, Axis
from ..dims import DimLike
from ..op_graph.op import Op
from ..op_graph.shape_ops import axes_with_order, cast_axes, tensor_slice
from ..op_graph.tensors import constant


def is_one(length: Optional[DimLike]) -> bool:
    """Whether a length is the literal 1 (a symbolic length never counts as 1)."""
    return isinstance(length, (int, np.integer)) and int(length) == 1


def lengths(op: Op) -> Tuple[DimLike, ...]:
    """The lengths of `op`'s axes, in order: the source's shape."""
    return tuple(axis.length for axis in op.axes)


def in_order(op: Op, axes: Sequence[Axis]) -> Op:
    """`op` with its axes in the order given (itself if already so)."""
    return op if tuple(op.axes) == tuple(axes) else axes_with_order(op, Axes(axes))


def relabelled(op: Op, axes: Sequence[Axis]) -> Op:
    """`op` with its axes, by position, replaced by `axes` (itself if they are its own)."""
    return op if tuple(op.axes) == tuple(axes) else cast_axes(op, Axes(axes))


def broadcast_axes(builder, operands: Sequence, hint: str) -> List[Axis]:
    """The axes of NumPy's broadcast of `operands`, right-aligned.

    An operand is an op, an array, or a list of axes (standing for a tensor on them).
    Each position takes the axis of the first operand with axes that holds it with
    a length other than 1 (an array's dimension has no axis: a new one is made).
    """
    axes_of = [_axes_of(x) for x in operands]
    shapes = [tuple(x.shape) if axes is None else tuple(a.length for a in axes)
              for x, axes in zip(operands, axes_of)]
    rank = max(len(shape) for shape in shapes)
    result: List[Axis] = []
    for position in range(rank):
        chosen: Optional[Axis] = None
        length: Optional[DimLike] = None  # (an axis's own length may be None: not yet known)
        seen = False
        for axes, shape in zip(axes_of, shapes):
            index = position - (rank - len(shape))
            if index < 0:
                continue
            if not seen or (is_one(length) and not is_one(shape[index])):
                seen = True
                length = shape[index]
                chosen = None if axes is None else axes[index]
            elif chosen is None and axes is not None and bool(shape[index] == length):
                chosen = axes[index]
        if chosen is None or chosen in result:
            chosen = builder.new_axis(length, hint)
        result.append(chosen)
    return result


def _axes_of(x) -> Optional[List[Axis]]:
    if isinstance(x, np.ndarray):
        return None
    return list(x.axes) if isinstance(x, Op) else list(x)


def aligned(x, out_axes: Sequence[Axis], dtype=None) -> Op:
    """`x` (an op or an array) on the axes of the broadcast result it takes part in.

    Its dimensions pair with the last ``rank(x)`` of `out_axes`; a dimension of
    length 1 facing a longer one is dropped (axes broadcast by their absence).
    """
    out_axes = list(out_axes)
    if isinstance(x, np.ndarray):
        offset = len(out_axes) - x.ndim
        keep = [not (is_one(n) and not is_one(out_axes[offset + i].length))
                for i, n in enumerate(x.shape)]
        array = x.reshape([n for n, k in zip(x.shape, keep) if k])
        axes = [a for a, k in zip(out_axes[offset:], keep) if k]
        return constant(array, Axes(axes), dtype=dtype if dtype is not None else x.dtype)
    offset = len(out_axes) - len(x.axes)
    slices: List[Union[int, slice]] = []
    kept: List[Axis] = []
    for i, axis in enumerate(x.axes):
        target = out_axes[offset + i]
        if is_one(axis.length) and not is_one(target.length):
            slices.append(0)
        else:
            slices.append(slice(None))
            kept.append(target)
    if any(s == 0 for s in slices if isinstance(s, int)):
        x = tensor_slice(x, tuple(slices))
    return relabelled(x, kept)


def index_slices(rank: int, position: int, item) -> tuple:
    """A tensor_slice index taking `item` at `position` and everything elsewhere."""
    return tuple(item if i == position else slice(None) for i in range(rank))


def truncating_cast(x: Op, dtype) -> Op:
    """`x` converted to `dtype` as ONNX's and TensorFlow's Cast convert: floats to integers
    truncate toward zero, anything to bool is ``x != 0``."""
    from ..op_graph.elementwise import absolute, floor, multiply, not_equal, sign

    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return x
    if dtype == np.bool_:
        return not_equal(x, 0)
    if dtype.kind in "iu" and x.dtype.kind == "f":
        x = sign(x) * floor(absolute(x))  # toward zero
    return multiply(x, 1, dtype=dtype)


def concatenated(ops: Sequence[Op], position: int, name: str,
                 reference: Optional[Op] = None) -> Op:
    """`ops` (of equal rank) joined along dimension `position`: each is relabelled onto
    the axes of `reference` (default: the first op; give the first that was not made from
    an array, so the result keeps the model's axes) except there, where each gets an axis
    of its own named `name`, so that `concat_along_axis` sees the same axes elsewhere and
    the pieces along `position`.

    Raises
    ------
    ValueError
        The ops' ranks differ (the importer reports it naming its node).
    """
    from ..axes import make_axis
    from ..op_graph.shape_ops import concat_along_axis

    shared = list((ops[0] if reference is None else reference).axes)
    pieces = []
    for i, op in enumerate(ops):
        if len(op.axes) != len(shared):
            raise ValueError(f"input {i} has rank {len(op.axes)}, not {len(shared)}")
        axes = list(shared)
        axes[position] = make_axis(length=op.axes[position].length, name=name)
        pieces.append(relabelled(op, axes))
    return concat_along_axis(pieces, pieces[0].axes[position])
