"""Convolution and pooling of NHWC images: Conv2D, MaxPool, AvgPool.

TF images are (batch, height, width, channels) and filters (height, width, in
channels, out channels). axgraph's convolution and pooling find each axis by its
role, so the operands are relabelled onto axes with the roles Height, Width,
Channel (and Channelout for the filter's output channels) and a batch axis, and
the result is put back in NHWC order on the input's batch axis.
"""
from __future__ import annotations

from typing import List, Tuple

import numpy as np

import axgraph as ng

from ...axes import Axis, make_axis, make_axis_role
from ...op_graph.op import Op
from ..positional import in_order, pooled, relabelled
from .rules import Node, rule

# Roles are matched by name: these are the roles of neon's `ar` without importing neon.
CHANNEL, CHANNEL_OUT = make_axis_role("Channel"), make_axis_role("Channelout")
HEIGHT, WIDTH = make_axis_role("Height"), make_axis_role("Width")


def _check_layout(node: Node, x: Op) -> None:
    if node.attr("data_format", "NHWC") != "NHWC":
        raise node.unsupported(f"data_format={node.attr('data_format')!r} is not supported "
                               f"(only NHWC)")
    if len(x.axes) != 4:
        raise node.error(f"input of rank {len(x.axes)}: TF's 2-D ops take NHWC images")


def _image_axes(node: Node, x: Op) -> List[Axis]:
    """New axes for an NHWC tensor: batch, height and width with roles, channel."""
    hint = node.hint
    n, h, w, c = (a.length for a in x.axes)
    return [make_axis(n, name=node.builder.unique_name(f"{hint}_N"), batch=True),
            make_axis(h, name=node.builder.unique_name(f"{hint}_H"), roles=[HEIGHT]),
            make_axis(w, name=node.builder.unique_name(f"{hint}_W"), roles=[WIDTH]),
            make_axis(c, name=node.builder.unique_name(f"{hint}_C"), roles=[CHANNEL])]


def _pairs(node: Node, name: str) -> List[int]:
    """The spatial entries of a 4-long NHWC attribute (strides, ksize, dilations)."""
    values = list(node.attr(name) or [1, 1, 1, 1])
    if len(values) != 4 or values[0] != 1 or values[3] != 1:
        raise node.unsupported(f"{name}={values} is not supported (batch and channel "
                               f"entries must be 1)")
    return [int(values[1]), int(values[2])]


def _padding(node: Node, sizes: List[int], kernel: List[int], strides: List[int],
             dilations: List[int]) -> Tuple[List[int], List[int]]:
    """(begin, end) paddings per spatial dimension, TF's rule for SAME and VALID."""
    padding = node.attr("padding")
    if padding == "VALID":
        return [0, 0], [0, 0]
    if padding != "SAME":
        raise node.unsupported(f"padding={padding!r} is not supported (SAME or VALID)")
    begin, end = [], []
    for n, k, s, d in zip(sizes, kernel, strides, dilations):
        out = -(-n // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - n, 0)
        begin.append(total // 2)
        end.append(total - total // 2)  # TF puts the odd one at the end
    return begin, end


def _nhwc(y: Op, image_batch: Axis, batch: Axis) -> Op:
    """A convolution's or pooling's result in NHWC order, on the input's batch axis."""
    def with_role(role):
        return next(a for a in y.axes if a is not image_batch and
                    role.name.lower() in {r.name.lower() for r in a.roles})

    height, width = with_role(HEIGHT), with_role(WIDTH)
    channel = next(a for a in y.axes if a not in (image_batch, height, width))
    return relabelled(in_order(y, [image_batch, height, width, channel]),
                      [batch, height, width, channel])


def _conv(node: Node, x: Op, w: Op) -> Op:
    """TF's conv2d of NHWC `x` with HWIO filter `w` (the node's strides and padding)."""
    _check_layout(node, x)
    if len(w.axes) != 4 or w.axes[2].length != x.axes[3].length:
        raise node.error(f"filter of shape {[a.length for a in w.axes]} for an input of "
                         f"{x.axes[3].length} channels (TF filters are HWIO)")
    strides, dilations = _pairs(node, "strides"), _pairs(node, "dilations")
    kernel = [int(w.axes[0].length), int(w.axes[1].length)]
    sizes = [int(x.axes[1].length), int(x.axes[2].length)]
    batch = x.axes[0]
    begin, end = _padding(node, sizes, kernel, strides, dilations)
    if begin != end:  # uneven: zeros added here, none by the op
        x = ng.pad(x, [(0, 0), (begin[0], end[0]), (begin[1], end[1]), (0, 0)])
        x = relabelled(x, [node.new_axis(a.length) for a in x.axes])
        begin = [0, 0]
    x_axes = _image_axes(node, x)
    name = node.builder.unique_name
    hint = node.hint
    filter_axes = [make_axis(kernel[0], name=name(f"{hint}_R"), roles=[HEIGHT]),
                   make_axis(kernel[1], name=name(f"{hint}_S"), roles=[WIDTH]),
                   x_axes[3],
                   make_axis(w.axes[3].length, name=name(f"{hint}_K"), roles=[CHANNEL_OUT])]
    y = ng.convolution(None, relabelled(x, x_axes), relabelled(w, filter_axes),
                       padding=begin, strides=strides, dilation=dilations)
    return _nhwc(y, x_axes[0], batch)


def _pool(node: Node, x: Op, kind: str) -> Op:
    """TF's max or average pooling of NHWC `x` (the node's ksize, strides and padding);
    SAME padding's odd row at the end never wins a max nor counts in an average."""
    _check_layout(node, x)
    kernel, strides = _pairs(node, "ksize"), _pairs(node, "strides")
    sizes = [int(x.axes[1].length), int(x.axes[2].length)]
    begin, end = _padding(node, sizes, kernel, strides, [1, 1])
    try:
        y, x_axes = pooled(x, lambda op: _image_axes(node, op), [1, 2], kernel, strides,
                           begin, end, kind)
    except ValueError as error:
        raise node.error(str(error)) from None
    return _nhwc(y, x_axes[0], x.axes[0])


def _zeros(node: Node, index: int, what: str) -> Op:
    """A tensor of zeros of the shape given by input `index`: the point a gradient of a
    linear op is taken at (its value does not matter)."""
    shape = [int(n) for n in np.asarray(node.constant(index, what)).reshape(-1)]
    axes = [node.new_axis(n, f"{node.hint}_d{i}") for i, n in enumerate(shape)]
    return ng.constant(np.zeros(shape, np.float32), axes)


def _vjp(node: Node, y: Op, wrt: Op, dy: Op) -> Op:
    """The gradient reaching `wrt` when `dy` (TF's layout of y) flows back from y."""
    if [a.length for a in dy.axes] != [a.length for a in y.axes]:
        raise node.error(f"a gradient of shape {[a.length for a in dy.axes]} for a result "
                         f"of shape {[a.length for a in y.axes]}")
    return ng.deriv(y, wrt, error=relabelled(dy, list(y.axes)))


@rule("Conv2D")
def import_conv2d(node: Node) -> Op:
    return _conv(node, node.op(0), node.op(1))


@rule("Conv2DBackpropInput")
def import_conv2d_backprop_input(node: Node) -> Op:
    x = _zeros(node, 0, "input_sizes")
    return _vjp(node, _conv(node, x, node.op(1)), x, node.op(2))


@rule("Conv2DBackpropFilter")
def import_conv2d_backprop_filter(node: Node) -> Op:
    w = _zeros(node, 1, "filter_sizes")
    return _vjp(node, _conv(node, node.op(0), w), w, node.op(2))


@rule("MaxPool")
def import_max_pool(node: Node) -> Op:
    return _pool(node, node.op(0), "max")


@rule("AvgPool")
def import_avg_pool(node: Node) -> Op:
    return _pool(node, node.op(0), "avg")


@rule("MaxPoolGrad")
def import_max_pool_grad(node: Node) -> Op:
    x = node.op(0)
    return _vjp(node, _pool(node, x, "max"), x, node.op(2))


@rule("AvgPoolGrad")
def import_avg_pool_grad(node: Node) -> Op:
    x = _zeros(node, 0, "orig_input_shape")
    return _vjp(node, _pool(node, x, "avg"), x, node.op(1))
