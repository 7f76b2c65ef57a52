"""Channels-first images (NC, then spatial dims) convolved and pooled on named axes.

ONNX models and PyTorch's exported programs hold images as (batch, channels,
spatial...) and filters as (out channels, in channels, window...), by position.
axgraph's convolution and pooling find each axis by its role, so the input is
relabelled onto axes with the roles Channel, Depth/Height/Width and a batch
axis, the filter onto Channelout, Channel and spatial roles, and the result is
put back in (batch, channels, spatial...) order on the input's own batch axis.

`unique_name(hint)` is the importer's: a name no other axis of the model has.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Sequence

from ..axes import Axis, make_axis, make_axis_role
from ..op_graph.convolution import convolution, deconvolution
from ..op_graph.op import Op
from ..op_graph.shape_ops import concat_along_axis, tensor_slice
from .positional import in_order, relabelled
from .positional import pooled as positional_pooled

UniqueName = Callable[[str], str]

# Roles are matched by name, so these are the roles of neon's `ar` without importing neon.
CHANNEL, CHANNEL_OUT = make_axis_role("Channel"), make_axis_role("Channelout")
SPATIAL_ROLES = (make_axis_role("Depth"), make_axis_role("Height"), make_axis_role("Width"))


def spatial_roles(count: int) -> tuple:
    """The roles of `count` spatial dims (the last ones of depth, height, width)."""
    return SPATIAL_ROLES[len(SPATIAL_ROLES) - count:]


def image_axes(x: Op, unique_name: UniqueName, hint: str) -> List[Axis]:
    """New axes for an NC(D)HW tensor: a batch axis, a channel axis, spatial axes with roles."""
    n, c, *spatial = x.axes
    return ([make_axis(n.length, name=unique_name(f"{hint}_N"), batch=True),
             make_axis(c.length, name=unique_name(f"{hint}_C"), roles=[CHANNEL])]
            + [make_axis(a.length, name=unique_name(f"{hint}_S"), roles=[role])
               for a, role in zip(spatial, spatial_roles(len(spatial)))])


def channels_first(y: Op, batch: Axis, image_batch: Axis) -> Op:
    """A convolution's or pooling's result in NC(D)HW order, on the input's batch axis."""
    channel = next(a for a in y.axes if a is not image_batch and
                   {r.name.lower() for r in a.roles} & {"channel", "channelout"})
    spatial = [a for a in y.axes if a is not image_batch and a is not channel]
    ordered = in_order(y, [image_batch, channel] + spatial)
    return relabelled(ordered, [batch, channel] + spatial)


def window_op(x: Op, w: Op, unique_name: UniqueName, hint: str, transposed: bool,
              padding: Sequence[int], strides: Sequence[int], dilation: Sequence[int]) -> Op:
    """One convolution (or its transpose) of NC(D)HW `x` with filter `w`, in NC(D)HW order.

    A convolution's filter is (out channels, in channels, window...); a transposed
    one's is (in channels, out channels, window...), the filter of the convolution
    it transposes.
    """
    spatial = len(x.axes) - 2
    x_axes = image_axes(x, unique_name, hint)
    other = make_axis(w.axes[1].length if transposed else w.axes[0].length,
                      name=unique_name(f"{hint}_K"), roles=[CHANNEL if transposed else CHANNEL_OUT])
    window = [make_axis(a.length, name=unique_name(f"{hint}_R"), roles=[role])
              for a, role in zip(list(w.axes)[2:], spatial_roles(spatial))]
    if transposed:  # x's channels are the out channels of the convolution transposed
        x_axes[1] = make_axis(x.axes[1].length, name=unique_name(f"{hint}_C"),
                              roles=[CHANNEL_OUT])
        y = deconvolution(None, relabelled(x, x_axes), relabelled(w, [x_axes[1], other] + window),
                          padding=padding, strides=strides, dilation=dilation)
    else:
        y = convolution(None, relabelled(x, x_axes), relabelled(w, [other, x_axes[1]] + window),
                        padding=padding, strides=strides, dilation=dilation)
    return channels_first(y, x.axes[0], x_axes[0])


def grouped_window_op(x: Op, w: Op, groups: int, unique_name: UniqueName, hint: str,
                      transposed: bool, padding: Sequence[int], strides: Sequence[int],
                      dilation: Sequence[int]) -> Op:
    """`window_op` of each of `groups` groups of channels, joined along the channels.

    Raises
    ------
    ValueError
        `groups` does not divide the input's channels or the filter's first dim (the
        importer reports it naming its node).
    """
    if groups == 1:
        return window_op(x, w, unique_name, hint, transposed, padding, strides, dilation)
    channels = x.axes[1].length
    if not isinstance(channels, int) or channels % groups or w.axes[0].length % groups:
        raise ValueError(f"group={groups} does not divide the {channels} input channels and "
                         f"the filter's {w.axes[0].length}")
    size, filters = channels // groups, w.axes[0].length // groups
    parts = []
    for g in range(groups):
        x_g = tensor_slice(x, (slice(None), slice(g * size, (g + 1) * size)))
        w_g = tensor_slice(w, (slice(g * filters, (g + 1) * filters),))
        parts.append(window_op(x_g, w_g, unique_name, hint, transposed, padding, strides,
                               dilation))
    joined = unique_name(f"{hint}_channels")
    first = parts[0]
    aligned_parts = [relabelled(part, [first.axes[0], make_axis(part.axes[1].length, name=joined)]
                                + list(first.axes)[2:]) for part in parts]
    return concat_along_axis(aligned_parts, aligned_parts[0].axes[1])


def pooled(x: Op, kind: str, window: Sequence[int], strides: Sequence[int],
           padding: Sequence[int], unique_name: UniqueName, hint: str,
           end: Optional[Sequence[int]] = None, count_padding: bool = False,
           ceil_mode: bool = False) -> Op:
    """Max (`kind` "max") or average ("avg") pooling of NC(D)HW `x`, in NC(D)HW order.

    `padding` is the padding before each spatial dim and `end` the padding after
    (default: the same); an average counts the padding only with `count_padding`;
    `ceil_mode` keeps a last partial window (`positional.pooled` says how each is
    done).

    Raises
    ------
    ValueError
        The padding needs explicit zeros over a symbolic spatial length, or a window
        covers no real element (the importer reports it naming its node).
    """
    y, x_axes = positional_pooled(
        x, lambda op: image_axes(op, unique_name, hint), range(2, len(x.axes)), window,
        strides, padding, padding if end is None else end, kind,
        count_padding=count_padding, ceil_mode=ceil_mode)
    return channels_first(y, x.axes[0], x_axes[0])


__all__ = ["CHANNEL", "CHANNEL_OUT", "SPATIAL_ROLES", "spatial_roles", "image_axes",
           "channels_first", "window_op", "grouped_window_op", "pooled"]
