"""NumPy kernels of the neural-network ops: convolution, pooling, lookup.

Each kernel moves its operands into a canonical layout ((N, C, spatial...)
for feature maps, (K, C, spatial...) for filters), computes there, and moves
the result into its op's axis order. Loops run over filter or window offsets
only (a handful), never over data.
"""
from __future__ import annotations

from typing import Sequence, Tuple

import numpy as np

from ..errors import ExecutionError
from ..op_graph import convolution as conv, lookup, pooling
from .reference_kernels import kernel


def to_layout(value: np.ndarray, axes, order: Sequence) -> np.ndarray:
    """`value` (dims in `axes` order) with dims in `order`."""
    return np.transpose(value, [axes.index(a) for a in order])


def from_layout(value: np.ndarray, order: Sequence, axes) -> np.ndarray:
    """`value` (dims in `order`) with dims in `axes` order."""
    position = {id(a): i for i, a in enumerate(order)}
    return np.transpose(value, [position[id(a)] for a in axes])


def _pad(x: np.ndarray, padding: Tuple[int, ...], value=0.0) -> np.ndarray:
    if not any(padding):
        return x
    return np.pad(x, ((0, 0), (0, 0)) + tuple((p, p) for p in padding), constant_values=value)


def _window(offset: Tuple[int, ...], geometry, out_lengths: Tuple[int, ...]):
    """Index selecting, for one filter offset, the input position of every output."""
    return (slice(None), slice(None)) + tuple(
        slice(o * d, o * d + s * (n - 1) + 1, s)
        for o, d, s, n in zip(offset, geometry.dilation, geometry.strides, out_lengths))


def _unpadded(padding: Tuple[int, ...], spatial: Tuple[int, ...]) -> tuple:
    """The index of the unpadded region of an (N, C, padded spatial...) array."""
    return (slice(None), slice(None)) + tuple(slice(p, p + n) for p, n in zip(padding, spatial))


def _conv_forward(x: np.ndarray, w: np.ndarray, geometry) -> np.ndarray:
    """(N, C, S...) * (K, C, R...) -> (N, K, P...) by im2col and one tensordot."""
    spatial_in, filter_shape = x.shape[2:], w.shape[2:]
    out_lengths = tuple(geometry.output_length(i, n, f)
                        for i, (n, f) in enumerate(zip(spatial_in, filter_shape)))
    padded = _pad(x, geometry.padding)
    columns = np.empty(x.shape[:2] + filter_shape + out_lengths, dtype=x.dtype)
    for offset in np.ndindex(*filter_shape):
        columns[(slice(None), slice(None)) + offset] = padded[_window(offset, geometry, out_lengths)]
    nd = len(filter_shape)
    result = np.tensordot(columns, w, axes=([1] + list(range(2, 2 + nd)), [1] + list(range(2, 2 + nd))))
    return np.moveaxis(result, -1, 1)  # (N, P..., K) -> (N, K, P...)


def _conv_backprop_data(delta: np.ndarray, w: np.ndarray, geometry,
                        spatial_in: Tuple[int, ...]) -> np.ndarray:
    """(N, K, P...) and (K, C, R...) -> (N, C, S...): the transpose of _conv_forward."""
    filter_shape, out_lengths = w.shape[2:], delta.shape[2:]
    columns = np.tensordot(delta, w, axes=([1], [0]))  # (N, P..., C, R...)
    nd = len(filter_shape)
    columns = np.moveaxis(columns, 1 + nd, 1)  # (N, C, P..., R...)
    padded_shape = delta.shape[:1] + w.shape[1:2] + tuple(
        n + 2 * p for n, p in zip(spatial_in, geometry.padding))
    padded = np.zeros(padded_shape, dtype=delta.dtype)
    for offset in np.ndindex(*filter_shape):
        padded[_window(offset, geometry, out_lengths)] += columns[(Ellipsis,) + offset]
    return padded[_unpadded(geometry.padding, spatial_in)]


def _conv_backprop_filter(delta: np.ndarray, x: np.ndarray, geometry,
                          filter_shape: Tuple[int, ...]) -> np.ndarray:
    """(N, K, P...) and (N, C, S...) -> (K, C, R...): d(conv)/d(filter) applied to delta."""
    out_lengths = delta.shape[2:]
    padded = _pad(x, geometry.padding)
    result = np.empty(delta.shape[1:2] + x.shape[1:2] + filter_shape, dtype=delta.dtype)
    summed = [0] + list(range(2, delta.ndim))
    for offset in np.ndindex(*filter_shape):
        patch = padded[_window(offset, geometry, out_lengths)]
        result[(slice(None), slice(None)) + offset] = np.tensordot(delta, patch, axes=(summed, summed))
    return result


@kernel(conv.ConvolutionOp)
def _convolution(op, ctx, x, w):
    x_op, w_op = op.args
    result = _conv_forward(to_layout(x, x_op.axes, op.x_layout.canonical),
                           to_layout(w, w_op.axes, op.w_layout.canonical), op.geometry)
    return from_layout(result, op.y_layout.canonical, op.axes)


@kernel(conv.ConvBackpropDataOp)
def _convolution_backprop_data(op, ctx, dy, w):
    dy_op, w_op = op.args
    result = _conv_backprop_data(to_layout(dy, dy_op.axes, op.y_layout.canonical),
                                 to_layout(w, w_op.axes, op.w_layout.canonical), op.geometry,
                                 ctx.lengths(op.x_layout.spatial, op))
    return from_layout(result, op.x_layout.canonical, op.axes)


@kernel(conv.ConvBackpropFilterOp)
def _convolution_backprop_filter(op, ctx, dy, x):
    dy_op, x_op = op.args
    result = _conv_backprop_filter(to_layout(dy, dy_op.axes, op.y_layout.canonical),
                                   to_layout(x, x_op.axes, op.x_layout.canonical), op.geometry,
                                   ctx.lengths(op.w_layout.spatial, op))
    return from_layout(result, op.w_layout.canonical, op.axes)


def _pool_windows(x: np.ndarray, pool) -> Tuple[np.ndarray, Tuple[int, ...]]:
    out_lengths = tuple(pool.geometry.output_length(i, n, w)
                        for i, (n, w) in enumerate(zip(x.shape[2:], pool.window)))
    fill = -np.inf if pool.kind == "max" else 0.0
    return _pad(x, pool.geometry.padding, fill), out_lengths


def _window_counts(x_shape, pool, out_lengths) -> np.ndarray:
    """How many real (unpadded) inputs each average window covers."""
    ones = _pad(np.ones((1, 1) + tuple(x_shape[2:])), pool.geometry.padding)
    counts = np.zeros((1, 1) + out_lengths)
    for offset in np.ndindex(*pool.window):
        counts += ones[_window(offset, pool.geometry, out_lengths)]
    return counts


def _pool_forward(x: np.ndarray, pool) -> np.ndarray:
    padded, out_lengths = _pool_windows(x, pool)
    offsets = list(np.ndindex(*pool.window))
    result = padded[_window(offsets[0], pool.geometry, out_lengths)].copy()
    for offset in offsets[1:]:
        patch = padded[_window(offset, pool.geometry, out_lengths)]
        if pool.kind == "max":
            np.maximum(result, patch, out=result)
        else:
            result += patch
    if pool.kind == "avg":
        result /= _window_counts(x.shape, pool, out_lengths).astype(result.dtype)
    return result


def _pool_backprop(delta: np.ndarray, x: np.ndarray, pool) -> np.ndarray:
    padded, out_lengths = _pool_windows(x, pool)
    offsets = list(np.ndindex(*pool.window))
    gradient = np.zeros(padded.shape, dtype=delta.dtype)
    if pool.kind == "max":
        best = padded[_window(offsets[0], pool.geometry, out_lengths)].copy()
        winner = np.zeros(best.shape, dtype=np.int64)
        for number, offset in enumerate(offsets[1:], start=1):
            patch = padded[_window(offset, pool.geometry, out_lengths)]
            better = patch > best  # the first maximum in window order wins ties
            winner[better] = number
            best[better] = patch[better]
        for number, offset in enumerate(offsets):
            gradient[_window(offset, pool.geometry, out_lengths)] += delta * (winner == number)
    else:
        share = delta / _window_counts(x.shape, pool, out_lengths).astype(delta.dtype)
        for offset in offsets:
            gradient[_window(offset, pool.geometry, out_lengths)] += share
    return gradient[_unpadded(pool.geometry.padding, x.shape[2:])]


@kernel(pooling.PoolingOp)
def _pooling(op, ctx, x):
    canonical = to_layout(x, op.args[0].axes, op.x_layout.canonical)
    return from_layout(_pool_forward(canonical, op), op.y_layout.canonical, op.axes)


@kernel(pooling.PoolingBackpropOp)
def _pooling_backprop(op, ctx, delta, x):
    pool = op.pool
    delta_op, x_op = op.args
    result = _pool_backprop(to_layout(delta, delta_op.axes, pool.y_layout.canonical),
                            to_layout(x, x_op.axes, pool.x_layout.canonical), pool)
    return from_layout(result, pool.x_layout.canonical, op.axes)


def _checked_indices(op, idx: np.ndarray, vocab: int) -> np.ndarray:
    if idx.size and (idx.min() < 0 or idx.max() >= vocab):
        raise ExecutionError(f"{op.name}: indices must lie in [0, {vocab}); got "
                             f"{idx.min()}..{idx.max()}", op.location)
    return idx


@kernel(lookup.LookupTableOp)
def _lookup(op, ctx, lut, idx):
    lut_op, _ = op.args
    rows = to_layout(lut, lut_op.axes, (op.vocab_axis,) + tuple(lut_op.axes - [op.vocab_axis]))
    idx = _checked_indices(op, idx, rows.shape[0])
    picked = rows[idx]  # (idx dims..., embedding dims...)
    if op.pad_idx is not None:
        picked = np.where((idx == op.pad_idx).reshape(idx.shape + (1,) * (rows.ndim - 1)), 0, picked)
    return np.moveaxis(picked, list(range(idx.ndim)), list(range(rows.ndim - 1, picked.ndim)))


@kernel(lookup.LookupTableBackpropOp)
def _lookup_backprop(op, ctx, delta, idx):
    table = op.lookup
    lut_op = table.args[0]
    embedding = tuple(lut_op.axes - [table.vocab_axis])
    rows = np.zeros(ctx.lengths((table.vocab_axis,) + embedding, op), dtype=op.dtype)
    idx = _checked_indices(op, idx, rows.shape[0])
    per_index = np.moveaxis(delta, list(range(len(embedding))),
                            list(range(delta.ndim - len(embedding), delta.ndim)))
    np.add.at(rows, idx.reshape(-1), per_index.reshape((-1,) + rows.shape[1:]))
    if table.pad_idx is not None:
        rows[table.pad_idx] = 0
    return from_layout(rows, (table.vocab_axis,) + embedding, op.axes)
