"""Rows picked by indices and their gradients: GatherV2, ResourceGather, UnsortedSegmentSum.

A gather (``tf.gather``, ``tf.nn.embedding_lookup``) is `ng.lookuptable` along the
gathered dimension. Its gradient, in the graphs `tf.gradients` writes, is TF's
IndexedSlices: the gradient rows (reshaped to one row per index) and the indices,
turned into a dense tensor by UnsortedSegmentSum (``tf.convert_to_tensor``, or a sum
with a dense gradient) or applied by an optimizer's scatter update (ScatterSub,
ResourceScatterAdd: see ops_variable). A segment sum is the scatter-add that is the
gradient of a lookup: the vector-Jacobian product of a lookup in a table of zeros.
"""
from __future__ import annotations

from typing import List

import numpy as np

import axgraph as ng

from ...axes import Axis
from ...op_graph.op import Op
from ..positional import in_order, relabelled
from .rules import Node, Value, position, rule


def _indices(node: Node, index: int) -> Op:
    """Input `index` (integers) as an op on fresh axes: none of them is another value's."""
    indices = node.op(index)
    if indices.dtype.kind not in "iu":
        raise node.error(f"indices of type {indices.dtype}: TF's indices are integers")
    return relabelled(indices, [node.new_axis(a.length) for a in indices.axes])


def gathered(node: Node, params: Op, indices: Op, axis: int, batch_dims: int) -> Op:
    """TF's ``tf.gather(params, indices, axis, batch_dims)``; its axes in TF's order."""
    params_axes: List[Axis] = list(params.axes)
    if not 0 <= batch_dims <= min(axis, len(indices.axes)):
        raise node.error(f"batch_dims={batch_dims} for axis={axis} and indices of rank "
                         f"{len(indices.axes)}")
    vocab = params_axes[axis]
    if batch_dims == 0:
        rows = ng.lookuptable(params, indices, vocab_axis=vocab)
        out = params_axes[:axis] + list(indices.axes) + params_axes[axis + 1:]
        return in_order(rows, out)
    # batched: each batch entry picks from its own slice of params (a one-hot product)
    batch = params_axes[:batch_dims]
    if [a.length for a in indices.axes[:batch_dims]] != [a.length for a in batch]:
        raise node.error(f"the first {batch_dims} dimensions of the indices "
                         f"{[a.length for a in indices.axes]} are not those of params "
                         f"{[a.length for a in params_axes]}")
    picked = list(indices.axes[batch_dims:])
    indices = relabelled(indices, batch + picked)
    chosen = ng.one_hot(indices, vocab, dtype=params.dtype)
    rows = ng.sum(chosen * params, reduction_axes=[vocab])
    out = params_axes[:axis] + picked + params_axes[axis + 1:]
    return in_order(rows, out)


@rule("GatherV2")
def import_gather_v2(node: Node) -> Op:
    params = node.op(0)
    axis = position(node, int(np.asarray(node.constant(2, "axis"))), len(params.axes))
    batch_dims = int(node.attr("batch_dims", 0))
    indices = _indices(node, 1)
    if batch_dims < 0:
        batch_dims += len(indices.axes)
    return gathered(node, params, indices, axis, batch_dims)


@rule("Gather", "ResourceGather")
def import_gather(node: Node) -> Op:
    """v1's Gather (along the first dimension) and the gather of a resource variable."""
    indices = _indices(node, 1)
    batch_dims = int(node.attr("batch_dims", 0))
    if batch_dims < 0:
        batch_dims += len(indices.axes)
    return gathered(node, node.op(0), indices, batch_dims, batch_dims)


def segment_sum(node: Node, data: Op, segment_ids: Value, count: int,
                drop_negative: bool = True) -> Op:
    """``tf.math.unsorted_segment_sum(data, segment_ids, count)``: row ``i`` of the result
    sums the rows of `data` whose id is ``i``.

    The ids' dimensions are the first of `data`'s; the result has `count` rows on a new
    axis, then the rest of data's dimensions (on data's axes). Rows of negative id are
    dropped, as in TF's segment sums (with `drop_negative`), or an error (as in a scatter
    update); an id of `count` or more is an error.
    """
    ids = node.builder.as_op(segment_ids, f"{node.hint}_ids")
    if ids.dtype.kind not in "iu":
        raise node.error(f"segment ids of type {ids.dtype}: TF's ids are integers")
    rank = len(ids.axes)
    data_axes = list(data.axes)
    if [a.length for a in ids.axes] != [a.length for a in data_axes[:rank]]:
        raise node.error(f"segment ids of shape {[a.length for a in ids.axes]} for data of "
                         f"shape {[a.length for a in data_axes]} (they must begin its shape)")
    ids = relabelled(ids, data_axes[:rank])
    rest = data_axes[rank:]
    dropping = drop_negative and ids.dtype.kind == "i" and not (
        isinstance(segment_ids, np.ndarray) and (segment_ids.size == 0 or segment_ids.min() >= 0))
    if dropping:  # row 0 takes the negative ids: it reads as zeros and gets no gradient
        ids = ng.where(ng.less(ids, 0), 0, ids + 1)
    rows = node.new_axis(count + dropping, f"{node.hint}_segments")
    zeros = ng.constant(np.zeros([count + dropping] + [int(a.length) for a in rest],
                                 dtype=data.dtype), [rows] + rest, dtype=data.dtype)
    lookup = ng.lookuptable(zeros, ids, vocab_axis=rows, pad_idx=0 if dropping else None)
    sums = ng.deriv(lookup, zeros, error=data)  # the scatter-add into the rows
    if dropping:
        sums = ng.tensor_slice(sums, (slice(1, None),) + (slice(None),) * len(rest))
    return relabelled(sums, [node.new_axis(count, f"{node.hint}_segments")] + rest)


@rule("UnsortedSegmentSum")
def import_unsorted_segment_sum(node: Node) -> Op:
    count = int(np.asarray(node.constant(2, "num_segments")))
    return segment_sum(node, node.op(0), node.input(1), count)
