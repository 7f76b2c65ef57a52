"""TF's positional operations on named axes: broadcasting, matrix products, reshapes.

TF pairs dimensions by position; these relabel operands onto common axes
(`ng.cast_axes`, which moves no data) with the helpers shared with the ONNX
importer, and put each result's axes in TF's order.
"""
from __future__ import annotations

from typing import Callable, List, Sequence

import numpy as np

import axgraph as ng

from ...axes import Axis, FlattenedAxis
from ...op_graph.op import Op
from ..positional import aligned, broadcast_axes, in_order, is_one, relabelled
from .rules import Node, Value


def broadcast(node: Node, function: Callable[..., Op], *operands: Value, dtype=None) -> Op:
    """function(*operands) with NumPy broadcasting by position; its axes in TF's order.

    Arrays among the operands become constants of `dtype` (their own if None).
    """
    out_axes = broadcast_axes(node.builder, operands, node.hint)
    result = function(*(aligned(x, out_axes, dtype) for x in operands))
    return in_order(result, out_axes)


def matmul(node: Node, a: Op, b: Op) -> Op:
    """``a @ b`` with NumPy's rules: batch dimensions broadcast, the last of `a`
    contracted with the second-to-last of `b`."""
    if len(a.axes) < 2 or len(b.axes) < 2:
        raise node.error("MatMul needs operands of rank 2 or more")
    hint = node.hint
    a_batch, b_batch = list(a.axes)[:-2], list(b.axes)[:-2]
    batch = broadcast_axes(node.builder, [a_batch, b_batch], hint) if a_batch or b_batch \
        else []
    if a.axes[-1].length != b.axes[-2].length:
        raise node.error(f"cannot multiply matrices of shapes {_shape(a)} and {_shape(b)}")
    k = node.new_axis(a.axes[-1].length, f"{hint}_k")
    used: List[Axis] = list(batch) + [k]
    n = a.axes[-2] if a.axes[-2] not in used else node.new_axis(a.axes[-2].length)
    used.append(n)
    m = b.axes[-1] if b.axes[-1] not in used else node.new_axis(b.axes[-1].length)
    product = ng.dot(_on_axes(a, batch, [n, k]), _on_axes(b, batch, [k, m]), reduction_axes=[k])
    return in_order(product, list(batch) + [n, m])


def _shape(x: Op) -> list:
    return [a.length for a in x.axes]


def _on_axes(x: Op, batch: List[Axis], matrix: List[Axis]) -> Op:
    """x relabelled onto the broadcast batch axes and its matrix axes; a leading
    dimension of length 1 facing a longer one is dropped."""
    lead = len(x.axes) - 2
    offset = len(batch) - lead
    drop = [i < lead and is_one(a.length) and not is_one(batch[offset + i].length)
            for i, a in enumerate(x.axes)]
    if any(drop):
        x = ng.tensor_slice(x, tuple(0 if d else slice(None) for d in drop))
    kept = [batch[offset + i] for i in range(lead) if not drop[i]] + list(matrix)
    return relabelled(x, kept)


def reshape(node: Node, x: Op, out_lengths: Sequence[int]) -> Op:
    """x with TF's row-major reshape to `out_lengths`.

    Leading and trailing dimensions that keep their lengths keep their axes; the
    dimensions between are flattened into one axis and split into new ones.
    """
    in_axes = list(x.axes)
    in_lengths = [a.length for a in in_axes]
    out_lengths = [int(n) for n in out_lengths]
    if int(np.prod(in_lengths, dtype=np.int64)) != int(np.prod(out_lengths, dtype=np.int64)):
        raise node.error(f"cannot reshape {in_lengths} to {out_lengths}")
    start = 0
    while start < min(len(in_lengths), len(out_lengths)) and \
            in_lengths[start] == out_lengths[start]:
        start += 1
    stop_in, stop_out = len(in_lengths), len(out_lengths)
    while stop_in > start and stop_out > start and \
            in_lengths[stop_in - 1] == out_lengths[stop_out - 1]:
        stop_in, stop_out = stop_in - 1, stop_out - 1
    prefix, middle, suffix = in_axes[:start], in_axes[start:stop_in], in_axes[stop_in:]
    new_middle = [node.new_axis(n) for n in out_lengths[start:stop_out]]
    if middle and all(a.length == 1 for a in middle):  # only ones removed (or replaced)
        x = ng.tensor_slice(x, tuple(0 if a in middle else slice(None) for a in in_axes))
        middle = []
    if not middle:  # only ones inserted
        for offset, axis in enumerate(new_middle):
            x = ng.expand_dims(x, axis, start + offset)
        return in_order(x, prefix + new_middle + suffix)
    if len(middle) > 1:
        x = ng.flatten(x, prefix + [FlattenedAxis.of(middle)] + suffix)
    ones = [a for a in new_middle if a.length == 1]
    sized = [a for a in new_middle if a.length != 1]
    if len(sized) == 1:
        x = relabelled(x, prefix + sized + suffix)
    else:
        x = ng.unflatten(relabelled(x, prefix + [FlattenedAxis.of(sized)] + suffix))
    for axis in ones:
        x = ng.expand_dims(x, axis, 0)
    return in_order(x, prefix + new_middle + suffix)

