"""Neural-network ONNX operators: Conv, pooling, normalizations, softmax, reductions.

ONNX images are NCHW (batch, channels, then spatial dimensions) and filters
(out channels, in channels, spatial): convolutions and pooling go through the
channels-first helpers the importers share (`axgraph/frontends/images.py`).
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np

import axgraph as ng

from ...axes import Axis
from ...op_graph.op import Op
from ..images import grouped_window_op, pooled
from ..positional import aligned, in_order, relabelled
from .import_rules import Node, positive_axis, rule


def _unique(node: Node):
    """The importer's namer of new axes (the shared image helpers take it)."""
    return node.builder.unique_name


def _pads(node: Node, x: Op, kernel: Sequence[int], strides: Sequence[int],
          dilations: Sequence[int]) -> Tuple[List[int], List[int]]:
    """(begin, end) paddings per spatial dim, from `pads` or `auto_pad`."""
    count = len(kernel)
    auto_pad = node.attr("auto_pad", "NOTSET")
    if auto_pad in ("NOTSET", "VALID"):
        pads = list(node.attr("pads") or [0] * 2 * count) if auto_pad == "NOTSET" \
            else [0] * 2 * count
        return pads[:count], pads[count:]
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise node.unsupported(f"auto_pad={auto_pad!r} is not supported")
    begin, end = [], []
    for axis, k, s, d in zip(list(x.axes)[2:], kernel, strides, dilations):
        if not isinstance(axis.length, int):
            raise node.unsupported("auto_pad SAME over a symbolic spatial size is not supported")
        out = -(-axis.length // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - axis.length, 0)
        small, large = total // 2, total - total // 2
        begin.append(small if auto_pad == "SAME_UPPER" else large)
        end.append(large if auto_pad == "SAME_UPPER" else small)
    return begin, end


def _padded(node: Node, x: Op, begin: Sequence[int], end: Sequence[int]) -> Tuple[Op, List[int]]:
    """x padded with zeros where padding is uneven; the even padding left for the op."""
    if list(begin) == list(end):
        return x, list(begin)
    pairs = [(0, 0), (0, 0)] + [(b, e) for b, e in zip(begin, end)]
    padded = ng.pad(x, pairs)
    axes = [node.builder.new_axis(a.length, node.proto.output[0]) for a in padded.axes]
    return relabelled(padded, axes), [0] * len(begin)


def _grouped(node: Node, x: Op, w: Op, transposed: bool, padding: Sequence[int],
             strides: Sequence[int], dilations: Sequence[int]) -> Op:
    """The node's convolution (or its transpose), its channels split into `group` groups."""
    try:
        return grouped_window_op(x, w, int(node.attr("group", 1)), _unique(node),
                                 node.proto.output[0], transposed, padding, strides, dilations)
    except ValueError as error:
        raise node.error(str(error)) from None


def _geometry(node: Node, x: Op, w: Op):
    spatial = len(x.axes) - 2
    if spatial not in (1, 2, 3):
        raise node.unsupported(f"{node.op_type} over {spatial} spatial dimensions (1 to 3 are "
                               f"supported)")
    kernel = [a.length for a in list(w.axes)[2:]]
    strides = list(node.attr("strides") or [1] * spatial)
    dilations = list(node.attr("dilations") or [1] * spatial)
    return kernel, strides, dilations


def _biased(node: Node, y: Op) -> Op:
    if not node.has_input(2):
        return y
    return y + relabelled(node.op(2), [y.axes[1]])


@rule("Conv")
def import_conv(node: Node) -> Op:
    x, w = node.op(0), node.op(1)
    kernel, strides, dilations = _geometry(node, x, w)
    begin, end = _pads(node, x, kernel, strides, dilations)
    x, padding = _padded(node, x, begin, end)
    return _biased(node, _grouped(node, x, w, False, padding, strides, dilations))


@rule("ConvTranspose")
def import_conv_transpose(node: Node) -> Op:
    x, w = node.op(0), node.op(1)
    kernel, strides, dilations = _geometry(node, x, w)
    if any(node.attr("output_padding") or []) or node.attr("output_shape"):
        raise node.unsupported("output_padding and output_shape are not supported")
    node.refuse_attribute("auto_pad", ("NOTSET", "VALID"))
    count = len(kernel)
    pads = list(node.attr("pads") or [0] * 2 * count)
    begin, end = pads[:count], pads[count:]
    even = [min(b, e) for b, e in zip(begin, end)]
    y = _grouped(node, x, w, True, even, strides, dilations)
    if begin != end:  # the transpose of uneven padding: crop the extra rows
        crop = [slice(None), slice(None)] + [
            slice(b - p, None if e == p else -(e - p)) for b, e, p in zip(begin, end, even)]
        y = ng.tensor_slice(y, tuple(crop))
        y = relabelled(y, list(y.axes)[:2] + [node.builder.new_axis(a.length, node.proto.output[0])
                                              for a in list(y.axes)[2:]])
    return _biased(node, y)


def _pool(node: Node, kind: str) -> Op:
    """ONNX's MaxPool or AveragePool: any `pads`, ``count_include_pad`` and ``ceil_mode``,
    as onnxruntime runs them."""
    x = node.op(0)
    kernel = list(node.attr("kernel_shape"))
    strides = list(node.attr("strides") or [1] * len(kernel))
    if any(d != 1 for d in node.attr("dilations") or []):
        raise node.unsupported("pooling with dilations is not supported")
    begin, end = _pads(node, x, kernel, strides, [1] * len(kernel))
    count_padding = kind == "avg" and bool(node.attr("count_include_pad", 0))
    try:
        return pooled(x, kind, kernel, strides, begin, _unique(node), node.proto.output[0],
                      end=end, count_padding=count_padding,
                      ceil_mode=bool(node.attr("ceil_mode", 0)))
    except ValueError as error:
        raise node.unsupported(str(error)) from None


@rule("MaxPool")
def import_max_pool(node: Node) -> Op:
    if len(node.proto.output) > 1 and node.proto.output[1]:
        raise node.unsupported("MaxPool's Indices output is not supported")
    return _pool(node, "max")


@rule("AveragePool")
def import_average_pool(node: Node) -> Op:
    return _pool(node, "avg")


def _global(node: Node, reduce) -> Op:
    x = node.op(0)
    spatial = list(x.axes)[2:]
    result = reduce(x, reduction_axes=spatial)
    for position in range(2, len(x.axes)):
        result = ng.expand_dims(result, node.builder.new_axis(1, node.proto.output[0]), position)
    return result


@rule("GlobalAveragePool")
def import_global_average_pool(node: Node) -> Op:
    return _global(node, ng.mean)


@rule("GlobalMaxPool")
def import_global_max_pool(node: Node) -> Op:
    return _global(node, ng.max)


@rule("BatchNormalization")
def import_batch_norm(node: Node) -> Op:
    if node.attr("training_mode", 0):
        raise node.unsupported("training_mode=1 is not supported (inference only)")
    x = node.op(0)
    channel = [x.axes[1]]
    scale, bias, mean, var = (relabelled(node.op(i), channel) for i in range(1, 5))
    eps = float(node.attr("epsilon", 1e-5))
    factor = scale * ng.rsqrt(var + eps)
    return in_order(x * factor + (bias - mean * factor), list(x.axes))


@rule("InstanceNormalization")
def import_instance_norm(node: Node) -> Op:
    x = node.op(0)
    channel = [x.axes[1]]
    scale, bias = (relabelled(node.op(i), channel) for i in (1, 2))
    result = ng.layer_norm(x, list(x.axes)[2:], gain=scale, bias=bias,
                           eps=float(node.attr("epsilon", 1e-5)))
    return in_order(result, list(x.axes))


@rule("LayerNormalization")
def import_layer_norm(node: Node) -> tuple:
    x = node.op(0)
    axis = positive_axis(node, node.attr("axis", -1), len(x.axes))
    normalized = list(x.axes)[axis:]
    gain = _trailing(node, 1, normalized)
    bias = _trailing(node, 2, normalized) if node.has_input(2) else None
    if any(name for name in node.proto.output[1:]):
        raise node.unsupported("the Mean and InvStdDev outputs are not supported")
    result = ng.layer_norm(x, normalized, gain=gain, bias=bias,
                           eps=float(node.attr("epsilon", 1e-5)))
    return (in_order(result, list(x.axes)),)


def _trailing(node: Node, index: int, axes: List[Axis]) -> Op:
    """Input `index` (a scale or bias) on the last of `axes` it covers."""
    return aligned(node.input(index), axes, node.op(0).dtype)


def _softmax(node: Node, function) -> Op:
    x = node.op(0)
    default = -1 if node.opset >= 13 else 1
    axis = positive_axis(node, node.attr("axis", default), len(x.axes))
    axes = [x.axes[axis]] if node.opset >= 13 else list(x.axes)[axis:]
    return in_order(function(x, axes), list(x.axes))


@rule("Softmax")
def import_softmax(node: Node) -> Op:
    return _softmax(node, ng.softmax)


@rule("LogSoftmax")
def import_log_softmax(node: Node) -> Op:
    return _softmax(node, ng.log_softmax)


def _sum_square(x: Op, reduction_axes) -> Op:
    return ng.sum(x * x, reduction_axes=reduction_axes)


#: op_type -> (the reduction, the opset from which its axes are an input, not an attribute)
REDUCTIONS = {
    "ReduceMean": (ng.mean, 18), "ReduceSum": (ng.sum, 13), "ReduceMax": (ng.max, 18),
    "ReduceMin": (ng.min, 18), "ReduceProd": (ng.prod, 18),
    "ReduceSumSquare": (_sum_square, 18),
    "ReduceL1": (lambda x, reduction_axes: ng.sum(ng.absolute(x), reduction_axes=reduction_axes),
                 18),
    "ReduceL2": (lambda x, reduction_axes: ng.sqrt(_sum_square(x, reduction_axes)), 18),
    "ReduceLogSumExp": (lambda x, reduction_axes: _log_sum_exp(x, reduction_axes), 18),
}


def _log_sum_exp(x: Op, reduction_axes) -> Op:
    """log(sum(exp(x))), with the maximum taken out first so that exp cannot overflow."""
    top = ng.stop_gradient(ng.max(x, reduction_axes=reduction_axes))
    return top + ng.log(ng.sum(ng.exp(x - top), reduction_axes=reduction_axes))


def _reduction(function, axes_as_input_from: int):
    def import_reduction(node: Node) -> Op:
        x = node.op(0)
        given = node.ints(1, "axes") if node.opset >= axes_as_input_from else \
            (None if node.attr("axes") is None else tuple(node.attr("axes")))
        if not given and node.attr("noop_with_empty_axes", 0):
            return x
        positions = sorted(range(len(x.axes)) if not given else
                           {positive_axis(node, a, len(x.axes)) for a in given})
        result = function(x, reduction_axes=[x.axes[p] for p in positions])
        if node.attr("keepdims", 1):
            for position in positions:
                result = ng.expand_dims(result, node.builder.new_axis(1, node.proto.output[0]),
                                        position)
        return result

    return import_reduction


for _op_type, (_function, _from) in REDUCTIONS.items():
    rule(_op_type)(_reduction(_function, _from))


def _arg(function):
    def import_arg(node: Node) -> Op:
        x = node.op(0)
        node.refuse_attribute("select_last_index", (0,))
        position = positive_axis(node, node.attr("axis", 0), len(x.axes))
        result = function(x, reduction_axes=[x.axes[position]], dtype=np.int64)
        if node.attr("keepdims", 1):
            result = ng.expand_dims(result, node.builder.new_axis(1, node.proto.output[0]),
                                    position)
        return result

    return import_arg


rule("ArgMax")(_arg(ng.argmax))
rule("ArgMin")(_arg(ng.argmin))
