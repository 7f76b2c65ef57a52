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

from typing import Callable, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..axes import Axes, Axis
from ..dims import DimLike
from ..op_graph.op import Op
from ..op_graph.pooling import pooling
from ..op_graph.shape_ops import axes_with_order, cast_axes, pad, tensor_slice
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


def pooled_lengths(lengths: Sequence[int], window: Sequence[int], strides: Sequence[int],
                   begin: Sequence[int], end: Sequence[int], ceil_mode: bool = False) -> List[int]:
    """The output lengths of a pooling with explicit paddings.

    With `ceil_mode`, a last partial window is kept (ONNX's ``ceil_mode=1``, as
    onnxruntime and PyTorch run it) unless it would start in the end padding.

    Parameters
    ----------
    lengths : sequence of int
        The input's spatial lengths.
    window, strides : sequence of int
        The window's length and the step, per spatial dimension.
    begin, end : sequence of int
        The padding before and after, per spatial dimension.
    ceil_mode : bool
        Keep a last partial window.

    Returns
    -------
    list of int
        The number of windows along each spatial dimension.
    """
    result = []
    for n, k, s, b, e in zip(lengths, window, strides, begin, end):
        span = n + b + e - k
        count = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (count - 1) * s >= n + b:
            count -= 1
        result.append(count)
    return result


def pooled(x: Op, layout: Callable[[Op], Sequence[Axis]], spatial: Sequence[int],
           window: Sequence[int], strides: Sequence[int], begin: Sequence[int],
           end: Sequence[int], kind: str, count_padding: bool = False,
           ceil_mode: bool = False) -> Tuple[Op, List[Axis]]:
    """Max or average pooling of `x` with any paddings, as TensorFlow and ONNX define it.

    `ng.pooling` pads evenly and averages over the real elements only. Where a
    format asks for more (TF's SAME padding puts an odd row at the end; ONNX has
    uneven `pads`, ``count_include_pad=1`` and ``ceil_mode=1``), `x` is padded
    here (`ng.pad`) and pooled without padding: for max, a constant -inf border
    is added first, so padding never wins; for an average, the window means of
    the zero-padded map are rescaled to divide by the count of the elements that
    count (the real ones; with `count_padding`, the padded ones too, but never
    the windows' overhang that `ceil_mode` adds). Gradients follow by autodiff.

    Parameters
    ----------
    x : Op
        The feature maps, in the source's dimension order.
    layout : callable
        ``layout(op) -> axes``: axes for `op` (of x's rank) with the batch, channel
        and spatial roles `ng.pooling` finds them by; called once.
    spatial : sequence of int
        The positions of the spatial dimensions in x, in depth, height, width order.
    window, strides : sequence of int
        The window's length and the step, per spatial dimension.
    begin, end : sequence of int
        The padding before and after, per spatial dimension.
    kind : str
        "max" or "avg".
    count_padding : bool
        An average divides by the window's size inside the padded map (ONNX's
        ``count_include_pad=1``), not by the count of real elements.
    ceil_mode : bool
        Keep a last partial window (ONNX's ``ceil_mode=1``).

    Returns
    -------
    tuple of (Op, list of Axis)
        The pooled maps (on the axes `ng.pooling` makes) and the axes `layout` gave.

    Raises
    ------
    ValueError
        A spatial length is symbolic where explicit padding is needed, or a window
        covers no real element.
    """
    window, strides = [int(k) for k in window], [int(s) for s in strides]
    begin, end = [int(b) for b in begin], [int(e) for e in end]
    sizes = [x.axes[p].length for p in spatial]
    simple = (not ceil_mode and begin == end and all(b < k for b, k in zip(begin, window))
              and (kind == "max" or not count_padding or not any(begin)))
    if simple:
        axes = list(layout(x))
        return pooling(None, relabelled(x, axes), window=window, strides=strides,
                       padding=begin, pool_type=kind), axes
    if not all(isinstance(n, (int, np.integer)) for n in sizes):
        raise ValueError(f"pooling with uneven padding over the symbolic spatial lengths "
                         f"{sizes} is not supported")
    sizes = [int(n) for n in sizes]
    out = pooled_lengths(sizes, window, strides, begin, end, ceil_mode)
    # the padding after: what the last window needs (less than `end` where no window
    # reaches the last rows; more where ceil_mode keeps a partial window)
    after = [(o - 1) * s + k - n - b for o, s, k, n, b in zip(out, strides, window, sizes, begin)]
    pairs: List[Tuple[int, int]] = [(0, 0)] * len(x.axes)
    for p, b, a in zip(spatial, begin, after):
        pairs[p] = (b, max(a, 0))
    padded = pad(x, pairs) if any(pair != (0, 0) for pair in pairs) else x
    axes = list(layout(padded))
    padded = relabelled(padded, axes)
    spans = [n + b + max(a, 0) for n, b, a in zip(sizes, begin, after)]
    real = _box(spans, begin, [b + n for b, n in zip(begin, sizes)])
    counts = _window_sums(real, window, strides, out)
    if not counts.all():
        raise ValueError(f"a window of {window} with padding {begin} before and {end} after "
                         f"covers no element of the input {sizes}")
    spatial_axes = [axes[p] for p in spatial]
    if kind == "max":
        lowest = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        border = np.where(real > 0, 0, lowest).astype(x.dtype)
        padded = padded + constant(border, Axes(spatial_axes), dtype=x.dtype)
    y = pooling(None, padded, window=window, strides=strides, padding=0, pool_type=kind)
    if kind == "avg":
        if count_padding:  # the padded map's extent, not the overhang of a last window
            limits = [b + n + e for b, n, e in zip(begin, sizes, end)]
            counts = _window_sums(_box(spans, [0] * len(spans), limits), window, strides, out)
        scale = float(np.prod(window)) / counts
        out_axes = [a for a in y.axes if a not in axes]  # new, in depth-height-width order
        y = in_order(y * constant(scale.astype(x.dtype), Axes(out_axes), dtype=x.dtype),
                     list(y.axes))
    return y, axes


def _box(spans: Sequence[int], starts: Sequence[int], stops: Sequence[int]) -> np.ndarray:
    """An array of `spans` holding 1 in the box [starts, stops) and 0 elsewhere."""
    box = np.zeros(spans)
    box[tuple(slice(a, b) for a, b in zip(starts, stops))] = 1
    return box


def _window_sums(values: np.ndarray, window: Sequence[int], strides: Sequence[int],
                 out: Sequence[int]) -> np.ndarray:
    """The sum of `values` over each window of a pooling without padding."""
    sums = np.zeros(out)
    for offset in np.ndindex(*window):
        sums += values[tuple(slice(o, o + s * (n - 1) + 1, s)
                             for o, s, n in zip(offset, strides, out))]
    return sums
