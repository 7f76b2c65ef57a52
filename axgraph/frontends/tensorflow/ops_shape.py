"""Ops that move or select values: Reshape, Transpose, ConcatV2, StridedSlice, Tile, ...

The shape arguments (a target shape, a permutation, slice bounds) must be known
when the graph is imported; `static_values` computes them, TF's static shapes
give the result's, and the rule only arranges the axes.
"""
from __future__ import annotations

from typing import List, Sequence, Union

import numpy as np

import axgraph as ng

from ...op_graph.op import Op
from ..positional import aligned, concatenated, in_order, lengths, relabelled
from .tf_positional import reshape
from .rules import Node, Value, position, rule


@rule("Identity", "Snapshot", "PreventGradient", "CheckNumerics", "IdentityN")
def import_identity(node: Node) -> Union[Op, tuple]:
    if node.op_type == "IdentityN":
        return tuple(node.op(i) for i in range(len(node.inputs)))
    return node.op(0)


@rule("StopGradient")
def import_stop_gradient(node: Node) -> Op:
    return ng.stop_gradient(node.op(0))


@rule("Reshape")
def import_reshape(node: Node) -> Op:
    x = node.op(0)
    node.constant(1, "shape")
    return reshape(node, x, node.out_shape(0))


@rule("Squeeze")
def import_squeeze(node: Node) -> Op:
    x = node.op(0)
    rank = len(x.axes)
    given = node.attr("squeeze_dims") or []
    where = sorted({position(node, int(d), rank) for d in given}) if given else \
        [i for i, n in enumerate(lengths(x)) if n == 1]
    for i in where:
        if x.axes[i].length != 1:
            raise node.error(f"cannot squeeze dimension {i} of length {x.axes[i].length}")
    if not where:
        return x
    return ng.tensor_slice(x, tuple(0 if i in where else slice(None) for i in range(rank)))


@rule("ExpandDims")
def import_expand_dims(node: Node) -> Op:
    x = node.op(0)
    dim = int(np.asarray(node.constant(1, "dim")).reshape(-1)[0])
    where = position(node, dim, len(x.axes) + 1)
    return ng.expand_dims(x, node.new_axis(1), where)


@rule("Transpose")
def import_transpose(node: Node) -> Op:
    x = node.op(0)
    perm = [int(p) for p in np.asarray(node.constant(1, "perm")).reshape(-1)]
    if sorted(perm) != list(range(len(x.axes))):
        raise node.error(f"perm {perm} is no permutation of {len(x.axes)} dimensions")
    return in_order(x, [x.axes[p] for p in perm])


def _joined(node: Node, values: Sequence[Value], axis: int) -> Op:
    """The values (ops or arrays of equal rank) joined along dimension `axis`."""
    reference = next(v for v in values if isinstance(v, Op))
    ops = [node.builder.as_op(value, f"{node.hint}_in{i}") for i, value in enumerate(values)]
    try:
        return concatenated(ops, axis, node.builder.unique_name(f"{node.hint}_joined"),
                            reference)
    except ValueError as error:
        raise node.error(str(error)) from None


@rule("ConcatV2")
def import_concat(node: Node) -> Op:
    values = node.inputs[:-1]
    rank = len(node.out_shape(0))
    axis = position(node, int(np.asarray(node.constant(len(values), "axis"))), rank)
    if len(values) == 1:
        return node.op(0)
    return _joined(node, values, axis)


@rule("Pack")
def import_pack(node: Node) -> Op:
    rank = len(node.out_shape(0))
    axis = position(node, int(node.attr("axis", 0)), rank)
    stacked = []
    for i in range(len(node.inputs)):
        x = node.op(i)
        stacked.append(ng.expand_dims(x, node.new_axis(1), axis))
    return stacked[0] if len(stacked) == 1 else _joined(node, stacked, axis)


def _on_new_axes(node: Node, value: Op, shape: List[int]) -> Op:
    """`value` (a scalar op) broadcast to new axes of `shape`."""
    axes = [node.new_axis(n, f"{node.hint}_d{i}") for i, n in enumerate(shape)]
    return ng.broadcast(value, axes) if axes else value


@rule("Fill")
def import_fill(node: Node) -> Op:
    node.constant(0, "dims")
    return _on_new_axes(node, node.op(1), node.out_shape(0))


@rule("ZerosLike", "OnesLike")
def import_zeros_like(node: Node) -> Op:
    x = node.op(0)
    fill = 0 if node.op_type == "ZerosLike" else 1
    return ng.broadcast(ng.constant(np.asarray(fill, x.dtype), dtype=x.dtype), x.axes)


@rule("BroadcastTo")
def import_broadcast_to(node: Node) -> Op:
    x = node.op(0)
    shape = node.out_shape(0)
    offset = len(shape) - len(x.axes)
    out_axes = [x.axes[i - offset] if i >= offset and x.axes[i - offset].length == n
                else node.new_axis(n) for i, n in enumerate(shape)]
    return in_order(ng.broadcast(aligned(x, out_axes), out_axes), out_axes)


@rule("Tile")
def import_tile(node: Node) -> Op:
    x = node.op(0)
    multiples = [int(m) for m in np.asarray(node.constant(1, "multiples")).reshape(-1)]
    if len(multiples) != len(x.axes):
        raise node.error(f"{len(multiples)} multiples for {len(x.axes)} dimensions")
    for where in reversed(range(len(x.axes))):
        count = multiples[where]
        if count == 1:
            continue
        # a new axis of `count` copies before the dimension, then the two as one: row-major,
        # the dimension's values repeated `count` times
        spread = ng.expand_dims(x, node.new_axis(count), where)
        shape = [int(a.length) for a in spread.axes]
        x = reshape(node, spread, shape[:where] + [count * shape[where + 1]] + shape[where + 2:])
    return x


def _strided_index(node: Node, shape: List[int]) -> List[Union[int, slice]]:
    """StridedSlice's begin, end, strides and masks as a tensor_slice index of `shape`."""
    begin, end, strides = (np.asarray(node.constant(i, what)).reshape(-1).tolist()
                           for i, what in ((1, "begin"), (2, "end"), (3, "strides")))
    for mask in ("ellipsis_mask", "new_axis_mask"):
        if node.attr(mask, 0):
            raise node.unsupported(f"{mask}={node.attr(mask)} is not supported")
    begin_mask, end_mask = node.attr("begin_mask", 0), node.attr("end_mask", 0)
    shrink = node.attr("shrink_axis_mask", 0)
    index: List[Union[int, slice]] = []
    for i, length in enumerate(shape):
        if i >= len(begin):
            index.append(slice(None))
        elif shrink >> i & 1:
            index.append(position(node, int(begin[i]), int(length)))
        else:
            start = None if begin_mask >> i & 1 else int(begin[i])
            stop = None if end_mask >> i & 1 else int(end[i])
            index.append(slice(start, stop, int(strides[i])))
    return index


@rule("StridedSlice")
def import_strided_slice(node: Node) -> Op:
    """Slices with constant bounds; shrink_axis_mask drops dimensions (``x[1]``)."""
    x = node.op(0)
    return ng.tensor_slice(x, tuple(_strided_index(node, [int(a.length) for a in x.axes])))


@rule("StridedSliceGrad")
def import_strided_slice_grad(node: Node) -> Op:
    """The gradient of a StridedSlice: dy in the sliced region, zeros elsewhere."""
    shape = [int(n) for n in np.asarray(node.constant(0, "shape")).reshape(-1)]
    dy = node.op(4)
    pads = []
    for where, item in enumerate(_strided_index(node, shape)):
        if isinstance(item, int):
            dy = ng.expand_dims(dy, node.new_axis(1), where)
            pads.append((item, shape[where] - item - 1))
            continue
        start, stop, step = item.indices(shape[where])
        if step != 1:
            raise node.unsupported("the gradient of a slice with a step other than 1 is "
                                   "not supported")
        stop = max(stop, start)
        pads.append((start, shape[where] - stop))
    padded = ng.pad(dy, pads) if any(p != (0, 0) for p in pads) else dy
    return relabelled(padded, [node.new_axis(n) for n in shape])


@rule("Slice")
def import_slice(node: Node) -> Op:
    x = node.op(0)
    begin = np.asarray(node.constant(1, "begin")).reshape(-1).tolist()
    size = np.asarray(node.constant(2, "size")).reshape(-1).tolist()
    index = tuple(slice(int(b), None if int(s) == -1 else int(b) + int(s))
                  for b, s in zip(begin, size))
    return ng.tensor_slice(x, index)



@rule("Pad", "PadV2")
def import_pad(node: Node) -> Op:
    """Constant padding: zeros (Pad) or a given value (PadV2)."""
    x = node.op(0)
    pads = np.asarray(node.constant(1, "paddings")).reshape(-1, 2).tolist()
    if len(pads) != len(x.axes) or any(p < 0 for pair in pads for p in pair):
        raise node.error(f"paddings {pads} for {len(x.axes)} dimensions")
    fill = float(np.asarray(node.constant(2, "constant_values"))) \
        if node.op_type == "PadV2" else 0.0
    shifted = x - fill if fill else x  # ng.pad adds zeros: pad x - value, add value back
    padded = ng.pad(shifted, [tuple(int(p) for p in pair) for pair in pads])
    padded = relabelled(padded, [node.new_axis(a.length) for a in padded.axes])
    return padded + fill if fill else padded


def _pieces(node: Node, x: Op, axis: int, sizes: List[int]) -> tuple:
    """x cut along dimension `axis` into consecutive pieces of `sizes`."""
    pieces, begin = [], 0
    for size in sizes:
        index = tuple(slice(begin, begin + size) if i == axis else slice(None)
                      for i in range(len(x.axes)))
        pieces.append(ng.tensor_slice(x, index))
        begin += size
    return tuple(pieces)


@rule("Split")
def import_split(node: Node) -> tuple:
    x = node.op(1)
    axis = position(node, int(np.asarray(node.constant(0, "split_dim"))), len(x.axes))
    count = int(node.attr("num_split"))
    return _pieces(node, x, axis, [int(x.axes[axis].length) // count] * count)


@rule("SplitV")
def import_split_v(node: Node) -> tuple:
    x = node.op(0)
    axis = position(node, int(np.asarray(node.constant(2, "split_dim"))), len(x.axes))
    sizes = [node.out_shape(i)[axis] for i in range(len(node.tf_op.outputs))]
    return _pieces(node, x, axis, sizes)


@rule("Unpack")
def import_unpack(node: Node) -> tuple:
    x = node.op(0)
    axis = position(node, int(node.attr("axis", 0)), len(x.axes))
    return tuple(ng.tensor_slice(x, tuple(k if i == axis else slice(None)
                                          for i in range(len(x.axes))))
                 for k in range(int(x.axes[axis].length)))
