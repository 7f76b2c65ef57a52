"""ONNX operators that move or select values: Reshape, Transpose, Concat, Slice, ...

Shapes are arrays known at import time (a `Shape` of a tensor with symbolic
lengths is an array of sizes, ``ng.dim`` expressions), so the arithmetic models
do on shapes happens here, in NumPy, and only its result reaches the graph.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np

import axgraph as ng

from ...axes import FlattenedAxis
from ...axes import Axis
from ...dims import Dim, DimLike, exact_quotient
from ...op_graph.op import Op
from ..positional import (aligned, concatenated, in_order, index_slices, is_one, lengths,
                          relabelled)
from .import_rules import Node, Value, positive_axis, rule

INT_MAX = 2 ** 62  # ONNX writes "to the end" as INT64_MAX (or near it)


def _product(values: Sequence[DimLike]) -> DimLike:
    result: DimLike = 1
    for value in values:
        result = result * value
    return result


def reshape(node: Node, x: Op, out_lengths: Sequence[DimLike]) -> Op:
    """x with ONNX's row-major reshape to `out_lengths`.

    Leading and trailing dimensions that keep their lengths keep their axes; the
    dimensions between are flattened into one axis and split into new ones.
    """
    builder, hint = node.builder, node.proto.output[0]
    in_axes, in_lengths = list(x.axes), list(lengths(x))
    out_lengths = list(out_lengths)
    start = 0
    while (start < min(len(in_lengths), len(out_lengths))
           and bool(in_lengths[start] == out_lengths[start])):
        start += 1
    stop_in, stop_out = len(in_lengths), len(out_lengths)
    while (stop_in > start and stop_out > start
           and bool(in_lengths[stop_in - 1] == out_lengths[stop_out - 1])):
        stop_in, stop_out = stop_in - 1, stop_out - 1
    prefix, middle, suffix = in_axes[:start], in_axes[start:stop_in], in_axes[stop_in:]
    new_middle = [builder.new_axis(n, hint) for n in out_lengths[start:stop_out]]
    if middle and all(is_one(a.length) for a in middle):
        x = ng.tensor_slice(x, tuple(0 if a in middle else slice(None) for a in in_axes))
        middle = []
    if not middle:
        for offset, axis in enumerate(new_middle):
            if not is_one(axis.length):
                raise node.error(f"cannot reshape {in_lengths} to {out_lengths}")
            x = ng.expand_dims(x, axis, start + offset)
        return in_order(x, prefix + new_middle + suffix)
    if len(middle) > 1:
        x = ng.flatten(x, prefix + [FlattenedAxis.of(middle)] + suffix)
    if len(new_middle) == 0:
        return in_order(ng.tensor_slice(x, index_slices(len(x.axes), start, 0)), prefix + suffix)
    if len(new_middle) == 1:
        return relabelled(x, prefix + new_middle + suffix)
    joined = FlattenedAxis.of(new_middle)
    x = relabelled(x, prefix + [joined] + suffix)
    return in_order(ng.unflatten(x), prefix + new_middle + suffix)


def _target_lengths(node: Node, in_lengths: Sequence[DimLike], shape: np.ndarray,
                    allow_zero: bool) -> List[DimLike]:
    out: List[DimLike] = []
    unknown = None
    for i, value in enumerate(shape.reshape(-1).tolist()):
        if isinstance(value, (int, np.integer)) and value == 0 and not allow_zero:
            out.append(in_lengths[i])
        elif isinstance(value, (int, np.integer)) and value == -1:
            unknown = i
            out.append(1)
        else:
            out.append(value if not isinstance(value, np.integer) else int(value))
    if unknown is not None:
        total, known = _product(in_lengths), _product(out)
        if isinstance(total, int) and isinstance(known, int):
            out[unknown] = total // known
        else:
            quotient = exact_quotient(total, known)
            if quotient is None:
                raise node.unsupported(f"cannot infer the -1 of shape {shape.tolist()} from "
                                       f"{list(in_lengths)}; give the sizes with "
                                       f"import_model(..., sizes={{...}})")
            out[unknown] = quotient
    return out


@rule("Reshape")
def import_reshape(node: Node) -> Value:
    shape = node.constant(1, "shape")
    data = node.input(0)
    if isinstance(data, np.ndarray):  # a shape being reshaped (symbolic sizes)
        return data.reshape([int(n) for n in shape])
    x = node.op(0)
    target = _target_lengths(node, lengths(x), shape, bool(node.attr("allowzero", 0)))
    return reshape(node, x, target)


@rule("Flatten")
def import_flatten(node: Node) -> Op:
    x = node.op(0)
    axis = node.attr("axis", 1)
    axis = axis % len(x.axes) if axis < 0 else axis
    n = lengths(x)
    return reshape(node, x, [_product(n[:axis]), _product(n[axis:])])


@rule("Transpose")
def import_transpose(node: Node) -> Value:
    x = node.input(0)
    rank = x.ndim if isinstance(x, np.ndarray) else len(x.axes)
    perm = node.attr("perm") or list(range(rank))[::-1]
    if isinstance(x, np.ndarray):
        return np.transpose(x, perm)
    return ng.axes_with_order(x, [x.axes[p] for p in perm])


@rule("Concat")
def import_concat(node: Node) -> Value:
    values = [node.input(i) for i in range(len(node.inputs)) if node.has_input(i)]
    arrays = [v for v in values if isinstance(v, np.ndarray)]
    if len(arrays) == len(values):
        return np.concatenate(arrays, axis=node.attr("axis"))
    reference = next(v for v in values if isinstance(v, Op))
    axis = positive_axis(node, node.attr("axis"), len(reference.axes))
    ops = [node.builder.as_op(value, node.proto.input[i]) for i, value in enumerate(values)]
    return concatenated(ops, axis, node.builder.unique_name(f"{node.proto.output[0]}_joined"),
                        reference)


@rule("Split")
def import_split(node: Node) -> tuple:
    x = node.op(0)
    axis = positive_axis(node, node.attr("axis", 0), len(x.axes))
    length = x.axes[axis].length
    sizes: Optional[Sequence[int]] = node.ints(1, "split")
    count = len(node.proto.output)
    if sizes is None:
        if not isinstance(length, int):
            raise node.unsupported("Split of a symbolic dimension needs explicit sizes")
        step = -(-length // count)
        sizes = [min(step, length - i * step) for i in range(count)]
    outputs, begin = [], 0
    for size in sizes:
        outputs.append(ng.tensor_slice(x, index_slices(len(x.axes), axis,
                                                       slice(begin, begin + size))))
        begin += size
    return tuple(outputs)


@rule("Slice")
def import_slice(node: Node) -> Value:
    starts, ends = node.sizes(1, "starts"), node.sizes(2, "ends")  # (inputs from opset 10)
    if starts is None or ends is None:
        raise node.error("starts and ends are required")
    given_axes, given_steps = node.ints(3, "axes"), node.ints(4, "steps")
    data = node.input(0)
    rank = data.ndim if isinstance(data, np.ndarray) else len(data.axes)
    axes = list(range(len(starts))) if given_axes is None else \
        [positive_axis(node, a, rank) for a in given_axes]
    steps = given_steps or (1,) * len(starts)
    index = [slice(None)] * rank
    for axis, start, end, step in zip(axes, starts, ends, steps):
        length = data.shape[axis] if isinstance(data, np.ndarray) else data.axes[axis].length
        index[axis] = _slice(node, start, end, int(step), length)
    if isinstance(data, np.ndarray):
        return data[tuple(index)]
    return ng.tensor_slice(data, tuple(index))


def _slice(node: Node, start: DimLike, end: DimLike, step: int, length: DimLike) -> slice:
    """ONNX's start, end and step along a dimension as a slice tensor_slice takes."""
    if isinstance(end, Dim) and bool(end == length):
        end = INT_MAX  # "to the end", as a size
    if isinstance(start, Dim) or isinstance(end, Dim):
        raise node.unsupported(f"slicing from {start} to {end} (sizes known only when the "
                               f"model runs) is not supported")
    if isinstance(length, (int, np.integer)):
        start, end, step = slice(start, end, step).indices(int(length))
        if (start, end, step) == (0, length, 1):
            return slice(None)  # the whole dimension: it keeps its axis
        return slice(start, None if end < 0 else end, step)
    if (start, step) == (0, 1) and end >= INT_MAX:
        return slice(None)
    if start < 0 or (end < 0 and end > -INT_MAX):
        raise node.unsupported(f"slicing from {start} to {end} counts from the end of a "
                               f"dimension of symbolic length {length}")
    return slice(start, None if end >= INT_MAX else end, step)


@rule("Gather")
def import_gather(node: Node) -> Value:
    data, indices = node.input(0), node.input(1)
    rank = data.ndim if isinstance(data, np.ndarray) else len(data.axes)
    axis = positive_axis(node, node.attr("axis", 0), rank)
    if isinstance(data, np.ndarray) and isinstance(indices, np.ndarray):
        taken = np.take(data, indices.astype(np.int64), axis=axis)
        if isinstance(taken, np.ndarray):
            return taken
        scalar = np.empty((), dtype=data.dtype)  # (NumPy gives an element of an object array)
        scalar[()] = taken
        return scalar
    x = node.op(0)
    gathered = x.axes[axis]
    if isinstance(indices, np.ndarray) and indices.ndim == 0:
        position = int(indices)
        position = position + gathered.length if position < 0 else position
        return ng.tensor_slice(x, index_slices(rank, axis, position))
    if isinstance(indices, np.ndarray) and np.any(indices < 0):
        if not isinstance(gathered.length, int):
            raise node.unsupported("negative indices into a dimension of symbolic length")
        indices = np.where(indices < 0, indices + gathered.length, indices)
    index_op = node.builder.as_op(indices, node.proto.input[1])
    fresh = [node.builder.new_axis(a.length, node.proto.output[0]) for a in index_op.axes]
    index_op = relabelled(index_op, fresh)
    if index_op.dtype.kind == "i" and not isinstance(indices, np.ndarray):
        index_op = ng.where(ng.less(index_op, 0), index_op + gathered.length, index_op)
    one_hot = ng.one_hot(index_op, gathered, dtype=x.dtype)
    result = ng.dot(one_hot, x, reduction_axes=[gathered])
    out = list(x.axes)[:axis] + fresh + list(x.axes)[axis + 1:]
    return in_order(result, out)


@rule("Squeeze")
def import_squeeze(node: Node) -> Value:
    data = node.input(0)
    shape = data.shape if isinstance(data, np.ndarray) else lengths(data)
    axes = node.ints(1, "axes")
    positions = [i for i, n in enumerate(shape) if is_one(n)] if axes is None else \
        [positive_axis(node, a, len(shape)) for a in axes]
    if isinstance(data, np.ndarray):
        return np.squeeze(data, axis=tuple(positions))
    for p in positions:
        if not is_one(shape[p]):
            raise node.error(f"cannot squeeze dimension {p} of length {shape[p]}")
    return ng.tensor_slice(data, tuple(0 if i in positions else slice(None)
                                       for i in range(len(shape))))


@rule("Unsqueeze")
def import_unsqueeze(node: Node) -> Value:
    data = node.input(0)
    rank = data.ndim if isinstance(data, np.ndarray) else len(data.axes)
    axes = node.ints(1, "axes") or ()
    positions = sorted(positive_axis(node, a, rank + len(axes)) for a in axes)
    if isinstance(data, np.ndarray):
        return np.expand_dims(data, tuple(positions))
    x = data
    for position in positions:
        x = ng.expand_dims(x, node.builder.new_axis(1, node.proto.output[0]), position)
    return x


@rule("Expand")
def import_expand(node: Node) -> Op:
    x = node.op(0)
    target = [v if isinstance(v, Dim) else int(v)
              for v in node.constant(1, "shape").reshape(-1).tolist()]
    rank = max(len(x.axes), len(target))
    shape = [1] * (rank - len(target)) + target
    own = [None] * (rank - len(x.axes)) + list(x.axes)
    out_axes: List[Axis] = []
    for axis, length in zip(own, shape):
        if axis is not None and (is_one(length) or bool(axis.length == length)):
            out_axes.append(axis)
        else:
            out_axes.append(node.builder.axis_of_length(length, node.proto.output[0], out_axes))
    return in_order(ng.broadcast(aligned(x, out_axes), out_axes), out_axes)


@rule("Einsum")
def import_einsum(node: Node) -> Op:
    equation = node.attr("equation").replace(" ", "")
    terms, arrow, result = equation.partition("->")
    operands = terms.split(",")
    if not arrow:  # implicit mode: the letters that appear once, in alphabetical order
        result = "".join(sorted(c for c in set(terms) if c.isalpha() and terms.count(c) == 1))
    if "." in equation:
        raise node.unsupported(f"Einsum with an ellipsis ({equation!r}) is not supported")
    axes_of: Dict[str, Axis] = {}
    ops = []
    for index, term in enumerate(operands):
        x = node.op(index)
        if len(term) != len(x.axes) or len(set(term)) != len(term):
            raise node.unsupported(f"Einsum term {term!r} of {equation!r} must name each of the "
                                   f"{len(x.axes)} dimensions of input {index} once")
        for letter, axis in zip(term, x.axes):
            if letter not in axes_of:
                taken = axis in axes_of.values()
                axes_of[letter] = node.builder.new_axis(axis.length, letter) if taken else axis
        ops.append(relabelled(x, [axes_of[letter] for letter in term]))
    out = [axes_of[letter] for letter in result]
    return in_order(ng.einsum(out, *ops), out)


@rule("Tile")
def import_tile(node: Node) -> Op:
    x = node.op(0)
    repeats = node.ints(1, "repeats") or ()
    if len(repeats) != len(x.axes):
        raise node.error(f"{len(repeats)} repeats for {len(x.axes)} dimensions")
    for position in reversed(range(len(x.axes))):
        count = repeats[position]
        if count == 1:
            continue
        # a new axis of `count` copies just before the dimension, then the two as one:
        # row-major, that is the dimension's values repeated `count` times
        copies = node.builder.new_axis(count, node.proto.output[0])
        spread = ng.expand_dims(x, copies, position)
        shape = list(lengths(spread))
        x = reshape(node, spread, shape[:position] + [count * shape[position + 1]]
                    + shape[position + 2:])
    return x


#: (coordinate_transformation_mode, nearest_mode) pairs under which a nearest-neighbour
#: Resize by a whole factor repeats each value: every output position rounds back to the
#: input position it lies in.
REPEATING_RESIZES = {("asymmetric", "floor"),
                     ("half_pixel", "round_prefer_floor"), ("half_pixel", "round_prefer_ceil"),
                     ("pytorch_half_pixel", "round_prefer_floor"),
                     ("pytorch_half_pixel", "round_prefer_ceil")}


@rule("Resize")
def import_resize(node: Node) -> Op:
    x = node.op(0)
    mode = (node.attr("coordinate_transformation_mode", "half_pixel"),
            node.attr("nearest_mode", "round_prefer_floor"))
    if node.attr("mode", "nearest") != "nearest" or mode not in REPEATING_RESIZES:
        raise node.unsupported(f"Resize mode={node.attr('mode', 'nearest')!r} with "
                               f"coordinate_transformation_mode, nearest_mode = {mode} is not "
                               f"supported (only nearest, by whole factors, with one of "
                               f"{sorted(REPEATING_RESIZES)})")
    in_lengths = lengths(x)
    if node.has_input(3):
        sizes = node.sizes(3, "sizes") or ()
        factors = [_whole_factor(node, out, n) for out, n in zip(sizes, in_lengths)]
    else:
        scales = [float(v) for v in node.constant(2, "scales").reshape(-1)]
        if any(s != int(s) or s < 1 for s in scales):
            raise node.unsupported(f"scales {scales} must be whole numbers >= 1")
        factors = [int(s) for s in scales]
    for position in reversed(range(len(x.axes))):
        factor = factors[position]
        if factor == 1:
            continue
        # a new axis of `factor` copies just after the dimension, then the two as one:
        # row-major, that is each value repeated `factor` times
        spread = ng.expand_dims(x, node.builder.new_axis(factor, node.proto.output[0]),
                                position + 1)
        shape = list(lengths(spread))
        x = reshape(node, spread, shape[:position] + [shape[position] * factor]
                    + shape[position + 2:])
    return x


def _whole_factor(node: Node, out: DimLike, length: DimLike) -> int:
    factor = exact_quotient(out, length) if not isinstance(out, int) or not isinstance(
        length, int) else (out // length if out % length == 0 else None)
    if not isinstance(factor, int) or factor < 1:
        raise node.unsupported(f"Resize from {length} to {out} is not by a whole factor")
    return factor


@rule("Trilu")
def import_trilu(node: Node) -> Op:
    x = node.op(0)
    if len(x.axes) < 2:
        raise node.error("Trilu needs at least 2 dimensions")
    k = int(node.constant(1, "k").reshape(())) if node.has_input(1) else 0
    rows, columns = x.axes[-2], x.axes[-1]
    if node.attr("upper", 1):  # keep column >= row + k: not (column <= row + k - 1)
        keep = ng.equal(ng.causal_mask(rows, columns, offset=k - 1), False)
    else:  # keep column <= row + k
        keep = ng.causal_mask(rows, columns, offset=k)
    zero = ng.constant(np.zeros((), x.dtype), dtype=x.dtype)
    return in_order(ng.where(keep, x, zero), list(x.axes))


@rule("Pad")
def import_pad(node: Node) -> Op:
    node.refuse_attribute("mode", ("constant",))
    x = node.op(0)
    rank = len(x.axes)
    pads = node.ints(1, "pads") if node.opset >= 11 else tuple(node.attr("pads"))
    if pads is None:
        raise node.error("pads are required")
    value = node.constant(2, "constant_value") if node.has_input(2) else \
        np.asarray(node.attr("value", 0.0))
    positions = [positive_axis(node, a, rank) for a in (node.ints(3, "axes") or range(rank))]
    before, after = [0] * rank, [0] * rank
    for i, position in enumerate(positions):
        before[position], after[position] = pads[i], pads[len(positions) + i]
    crop = tuple(slice(max(-b, 0), None if a >= 0 else a) for b, a in zip(before, after))
    if any(b < 0 or a < 0 for b, a in zip(before, after)):
        x = ng.tensor_slice(x, crop)
    fill = value.reshape(-1)[0].item() if value.size else 0
    shifted = x - fill if fill else x  # ng.pad adds zeros: pad x - value, add value back
    padded = ng.pad(shifted, [(max(b, 0), max(a, 0)) for b, a in zip(before, after)])
    padded = relabelled(padded, [a if a in x.axes else node.builder.new_axis(
        a.length, node.proto.output[0]) for a in padded.axes])
    return padded + fill if fill else padded


@rule("ConstantOfShape")
def import_constant_of_shape(node: Node) -> Op:
    value = np.asarray(node.attr("value", np.zeros(1, np.float32)))
    axes: List[Axis] = []
    for length in node.constant(0, "shape").reshape(-1).tolist():
        axes.append(node.builder.axis_of_length(length, node.proto.output[0], axes))
    return ng.broadcast(ng.constant(value.reshape(()), dtype=value.dtype), axes)


@rule("Shape")
def import_shape(node: Node) -> np.ndarray:
    data = node.input(0)
    shape = list(data.shape) if isinstance(data, np.ndarray) else list(lengths(data))
    start, end = node.attr("start", 0), node.attr("end")
    shape = shape[start:end]
    if all(isinstance(n, (int, np.integer)) for n in shape):
        return np.array(shape, dtype=np.int64)
    array = np.empty(len(shape), dtype=object)
    array[:] = shape
    return array


@rule("Size")
def import_size(node: Node) -> np.ndarray:
    data = node.input(0)
    size = _product(list(data.shape) if isinstance(data, np.ndarray) else lengths(data))
    return np.array(size, dtype=np.int64 if isinstance(size, int) else object)


@rule("Constant")
def import_constant(node: Node) -> np.ndarray:
    for key, dtype in (("value", None), ("value_float", np.float32), ("value_floats", np.float32),
                       ("value_int", np.int64), ("value_ints", np.int64)):
        if key in node.attributes:
            return np.asarray(node.attributes[key], dtype=dtype)
    raise node.unsupported(f"Constant with attributes {sorted(node.attributes)} is not "
                           f"supported (only value, value_float(s), value_int(s))")


@rule("Dropout")
def import_dropout(node: Node) -> tuple:
    x = node.op(0)
    return (x, None)

