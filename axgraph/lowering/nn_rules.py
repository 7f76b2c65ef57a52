"""Lowering of the neural-network ops: convolution, pooling, lookup, one-hot.

The axes ops record which axis plays which part (layouts); the core ops
want (N, C, spatial...) feature maps and (K, C, spatial...) filters, so each
rule transposes into that layout, applies the core op and transposes back.
"""
from __future__ import annotations

import numpy as np

from .. import core
from ..dims import known
from ..errors import AxisLengthError
from ..op_graph import convolution as conv, lookup, nn, pooling
from .context import LoweringContext, positions
from .rules import rule


def _geometry(op) -> dict:
    g = op.geometry
    return dict(strides=g.strides, padding_below=g.padding, padding_above=g.padding)


def _to(ctx: LoweringContext, node, op_axes, layout):
    return ctx.transpose(node, list(op_axes), layout.canonical)


def _from(ctx: LoweringContext, node, layout, op):
    return ctx.transpose(node, list(layout.canonical), op.axes)


@rule(conv.ConvolutionOp)
def _convolution(ctx, op, x, w):
    x_op, w_op = op.args
    y = core.Convolution(_to(ctx, ctx.convert(x, op.dtype), x_op.axes, op.x_layout),
                         _to(ctx, ctx.convert(w, op.dtype), w_op.axes, op.w_layout),
                         dilation=op.geometry.dilation, **_geometry(op))
    return _from(ctx, y, op.y_layout, op)


@rule(conv.ConvBackpropDataOp)
def _convolution_backprop_data(ctx, op, dy, w):
    dy_op, w_op = op.args
    dx = core.ConvolutionBackpropData(ctx.dims(op.x_layout.canonical),
                                      _to(ctx, ctx.convert(w, op.dtype), w_op.axes, op.w_layout),
                                      _to(ctx, ctx.convert(dy, op.dtype), dy_op.axes, op.y_layout),
                                      dilation=op.geometry.dilation, **_geometry(op))
    return _from(ctx, dx, op.x_layout, op)


@rule(conv.ConvBackpropFilterOp)
def _convolution_backprop_filter(ctx, op, dy, x):
    dy_op, x_op = op.args
    dw = core.ConvolutionBackpropFilters(_to(ctx, ctx.convert(x, op.dtype), x_op.axes, op.x_layout),
                                         ctx.dims(op.w_layout.canonical),
                                         _to(ctx, ctx.convert(dy, op.dtype), dy_op.axes,
                                             op.y_layout),
                                         dilation=op.geometry.dilation, **_geometry(op))
    return _from(ctx, dw, op.w_layout, op)


POOLS = {"max": core.MaxPool, "avg": core.AvgPool}


@rule(pooling.PoolingOp)
def _pooling(ctx, op, x):
    y = POOLS[op.kind](_to(ctx, x, op.args[0].axes, op.x_layout), op.window, **_geometry(op))
    return _from(ctx, y, op.y_layout, op)


@rule(pooling.PoolingBackpropOp)
def _pooling_backprop(ctx, op, delta, x):
    pool = op.pool
    delta_op, x_op = op.args
    delta = _to(ctx, ctx.convert(delta, op.dtype), delta_op.axes, pool.y_layout)
    if pool.kind == "max":
        dx = core.MaxPoolBackprop(_to(ctx, x, x_op.axes, pool.x_layout), delta, pool.window,
                                  **_geometry(pool))
    else:
        dx = core.AvgPoolBackprop(ctx.dims(pool.x_layout.canonical), delta, pool.window,
                                  **_geometry(pool))
    return _from(ctx, dx, pool.x_layout, op)


def _table_order(table_op, vocab_axis):
    return [vocab_axis] + [a for a in table_op.axes if a is not vocab_axis]


def _pad_mask(ctx, op, idx, pad_idx, shape, position):
    """Boolean, True where idx equals pad_idx, broadcast to `shape` (idx dims at `position`)."""
    pad = ctx.constant(pad_idx, idx.element_type.dtype, idx.shape)
    hits = core.Equal(idx, pad)
    new = [i for i in range(len(shape)) if not position <= i < position + idx.rank]
    return core.Broadcast(hits, shape, new) if new else hits


@rule(lookup.LookupTableOp)
def _lookup(ctx, op, table, idx):
    table_op, idx_op = op.args
    order = _table_order(table_op, op.vocab_axis)
    rows = ctx.transpose(table, list(table_op.axes), order)
    picked = core.Gather(rows, idx, 0)  # idx dims, then embedding dims
    if op.pad_idx is not None:
        zeros = ctx.constant(0, op.dtype, picked.shape)
        picked = core.Select(_pad_mask(ctx, op, idx, op.pad_idx, picked.shape, 0), zeros, picked)
    return ctx.transpose(picked, list(idx_op.axes) + order[1:], op.axes)


@rule(lookup.LookupTableBackpropOp)
def _lookup_backprop(ctx, op, delta, idx):
    table = op.lookup
    table_op, idx_op = table.args
    order = _table_order(table_op, table.vocab_axis)
    updates = ctx.transpose(ctx.convert(delta, op.dtype), list(op.args[0].axes),
                            list(idx_op.axes) + order[1:])
    zeros = ctx.constant(0, op.dtype, ctx.dims(order))
    rows = core.ScatterAdd(zeros, idx, updates, 0)
    if table.pad_idx is not None:
        vocabulary = known(rows.shape[0], None)
        if vocabulary is None:
            raise op.error(AxisLengthError, f"a lookup table with pad_idx needs the length of "
                                            f"{table.vocab_axis.name} when it is built")
        keep = np.ones(vocabulary, dtype=bool)
        keep[table.pad_idx] = False
        mask = core.Broadcast(ctx.constant(keep, np.bool_), rows.shape,
                              list(range(1, rows.rank)))
        rows = core.Select(mask, rows, ctx.constant(0, op.dtype, rows.shape))
    return ctx.transpose(rows, order, op.axes)


@rule(nn.OneHotOp)
def _one_hot(ctx, op, x):
    hot = core.OneHot(x, ctx.dims(op.axes), 0)
    return ctx.convert(hot, op.dtype)


@rule(nn.SoftmaxOp)
def _softmax(ctx, op, x):
    core_op = core.LogSoftmax if isinstance(op, nn.LogSoftmaxOp) else core.Softmax
    return core_op(ctx.convert(x, op.dtype), positions(op.args[0].axes, op.normalization_axes))


@rule(nn.SoftmaxBackpropOp)
def _softmax_backprop(ctx, op, delta, y):
    delta_op, y_op = op.args
    delta = ctx.align(ctx.convert(delta, op.dtype), delta_op.axes, y_op.axes)
    core_op = core.LogSoftmaxBackprop if op.log else core.SoftmaxBackprop
    return core_op(delta, y, positions(y_op.axes, op.normalization_axes))
