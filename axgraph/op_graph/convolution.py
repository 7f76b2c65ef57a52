"""Convolution and its transposes, with axes found by role.

Inputs have a channel axis (role Channel), one to three spatial axes (roles
Depth, Height, Width) and a batch axis; filters have an input-channel axis
(Channel), spatial axes (Depth/Height/Width) and an output-channel axis
(Channelout). The user's axes may come in any order: each op records which
axis plays which part and the kernels shuffle dimensions accordingly.

Output spatial lengths follow the usual rule
``out = (in + 2 * pad - dilation * (filter - 1) - 1) // stride + 1``.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import ClassVar, Dict, Optional, Sequence, Tuple

from ..axes import Axes, AxesLike, Axis, AxisRole, make_axis
from ..dims import DimLike
from ..errors import AxisLengthError, IncompatibleAxesError, UnmatchedAxesError
from ..shapes.prover import provably_below, provably_different
from .op import Op
from .shape_ops import _fail
from .tensors import as_op

SPATIAL_ROLES = ("depth", "height", "width")
OUTPUT_NAMES = {"depth": "M", "height": "P", "width": "Q"}
PARAM_KEYS = {"pad": "padding", "str": "strides", "dil": "dilation"}


def role_names(axis: Axis) -> set:
    """Lower-case names of an axis's roles (roles are matched by name)."""
    return {role.name.lower() for role in axis.roles}


@dataclass(frozen=True)
class FeatureLayout:
    """Which axis of a feature map is the batch, the channel and each spatial dim."""

    batch: Axis
    channel: Axis
    spatial: Tuple[Axis, ...]  # in depth, height, width order

    @property
    def canonical(self) -> Tuple[Axis, ...]:
        """Axes in the (N, C, spatial...) order the kernels compute in."""
        return (self.batch, self.channel) + self.spatial

    @property
    def spatial_roles(self) -> Tuple[str, ...]:
        return tuple(_spatial_role(a) for a in self.spatial)


@dataclass(frozen=True)
class FilterLayout:
    """Which axis of a filter is the output channel, the input channel, each spatial dim."""

    out_channel: Axis
    in_channel: Axis
    spatial: Tuple[Axis, ...]

    @property
    def canonical(self) -> Tuple[Axis, ...]:
        """Axes in the (K, C, spatial...) order the kernels compute in."""
        return (self.out_channel, self.in_channel) + self.spatial


@dataclass(frozen=True)
class ConvGeometry:
    """Per spatial dim: padding, stride and dilation."""

    padding: Tuple[int, ...]
    strides: Tuple[int, ...]
    dilation: Tuple[int, ...]

    def output_length(self, dim: int, length: DimLike, filter_length: DimLike) -> DimLike:
        """The output length along spatial dim `dim` (symbolic for symbolic lengths)."""
        span = self.dilation[dim] * (filter_length - 1) + 1
        return (length + 2 * self.padding[dim] - span) // self.strides[dim] + 1

    def input_length(self, dim: int, length: DimLike, filter_length: DimLike) -> DimLike:
        """The smallest input length whose convolution has `length` outputs."""
        span = self.dilation[dim] * (filter_length - 1) + 1
        return (length - 1) * self.strides[dim] - 2 * self.padding[dim] + span


def _spatial_role(axis: Axis) -> str:
    for role in SPATIAL_ROLES:
        if role in role_names(axis):
            return role
    raise AssertionError(f"{axis.name} has no spatial role")


def _by_role(axes: Axes, role: str) -> Optional[Axis]:
    found = [a for a in axes if role in role_names(a)]
    return found[0] if len(found) == 1 else None


def _spatial_axes(axes: Axes) -> Tuple[Axis, ...]:
    by_role = {}
    for axis in axes:
        names = role_names(axis) & set(SPATIAL_ROLES)
        for role in names:
            by_role[role] = axis
    return tuple(by_role[role] for role in SPATIAL_ROLES if role in by_role)


def feature_layout(x: Op, what: str) -> FeatureLayout:
    """Classify x's axes by role; anything unplaceable is an error."""
    batch = x.axes.batch_axis()
    channel = _by_role(x.axes, "channel") or _by_role(x.axes, "channelout")
    spatial = _spatial_axes(x.axes)
    if batch is None or channel is None or not spatial:
        raise _fail(UnmatchedAxesError,
                    f"{what}: cannot tell the batch, channel and spatial axes of {x.name} {x.axes}; "
                    f"give them the roles of axgraph.frontends.neon.ar (Channel, Depth, Height, "
                    f"Width) and a batch axis named N")
    extra = x.axes - Axes((batch, channel) + spatial)
    if extra:
        raise _fail(UnmatchedAxesError, f"{what}: axes {extra} of {x.name} have no role here")
    return FeatureLayout(batch, channel, spatial)


def _related(axes: Axes, axis: Optional[Axis]) -> Optional[Axis]:
    """The axis of `axes` that is `axis` or one of its duals."""
    if axis is None:
        return None
    found = [a for a in axes if a.base is axis.base]
    return found[0] if len(found) == 1 else None


def filter_layout(w: Op, what: str, match_in: Optional[Axis] = None,
                  match_out: Optional[Axis] = None) -> FilterLayout:
    """Classify a filter's axes by role.

    A filter axis that is the feature map's own channel axis (or its dual)
    takes that part first (`match_in` for convolution, `match_out` for
    deconvolution); the roles Channel and Channelout decide the rest.
    """
    in_channel = _related(w.axes, match_in)
    out_channel = _related(w.axes, match_out)
    if in_channel is None:
        in_channel = _by_role(w.axes - Axes(out_channel or ()), "channel")
    if out_channel is None:
        out_channel = _by_role(w.axes - Axes(in_channel or ()), "channelout")
    spatial = _spatial_axes(w.axes)
    if out_channel is None or in_channel is None or not spatial:
        raise _fail(UnmatchedAxesError,
                    f"{what}: filter {w.name} {w.axes} needs axes with the roles Channel, "
                    f"Channelout and Depth/Height/Width")
    extra = w.axes - Axes((out_channel, in_channel) + spatial)
    if extra:
        raise _fail(UnmatchedAxesError, f"{what}: filter axes {extra} of {w.name} have no role")
    return FilterLayout(out_channel, in_channel, spatial)


def conv_geometry(params: Optional[Dict], spatial_roles: Sequence[str], padding=None, strides=None,
                  dilation=None) -> ConvGeometry:
    """Geometry from ngraph-style params (pad_h, str_w, dil_d, ...) or keywords."""
    params = dict(params or {})
    values = {"padding": padding, "strides": strides, "dilation": dilation}
    defaults = {"padding": 0, "strides": 1, "dilation": 1}
    result = {}
    for prefix, field in PARAM_KEYS.items():
        given = values[field]
        per_dim = []
        for i, role in enumerate(spatial_roles):
            key = f"{prefix}_{role[0]}"
            if given is not None:
                value = given if isinstance(given, int) else given[i]
            else:
                value = params.pop(key, defaults[field])
            per_dim.append(int(value))
        result[field] = tuple(per_dim)
    for key in list(params):
        if key.split("_")[0] in PARAM_KEYS:
            params.pop(key)  # a parameter for a spatial dim this tensor lacks
    if any(s < 1 for s in result["strides"]) or any(d < 1 for d in result["dilation"]) or any(
            p < 0 for p in result["padding"]):
        raise _fail(IncompatibleAxesError, f"convolution geometry {result} is invalid: strides and "
                                           f"dilation must be >= 1, padding >= 0")
    return ConvGeometry(**result)


def spatial_axis(axes, filter, padding: int, stride: int, role: AxisRole) -> Axis:
    """The output axis of a convolution or pooling along the input axis with `role`.

    Nervana Graph v0.4's helper for building a layer's output axes ahead of
    the op, to pass as its `axes`. The new axis has length
    ``(in + 2 * padding - filter) // stride + 1``, the input axis's roles,
    and the name the convolution gives its own outputs (M, P, Q for depth,
    height, width; the input axis's name for other roles).

    Parameters
    ----------
    axes : Axes, iterable of Axis, or Op
        The input's axes (or an op, for its axes); the one with `role` is
        the input axis.
    filter : int, Axes, iterable of Axis, or Op
        The window's length along that axis: an int, or the filter's axes (or
        an op) whose axis with `role` gives it.
    padding : int
        Zeros added on each side (>= 0).
    stride : int
        The step between windows (>= 1).
    role : AxisRole
        The role of the spatial axis (Height, Width, Depth, ...).

    Returns
    -------
    Axis
        A new output axis.

    Raises
    ------
    UnmatchedAxesError
        If `role` is not an AxisRole, or `axes` (or the filter's axes) do not
        hold exactly one axis with it.
    IncompatibleAxesError
        If `padding`, `stride` or the window is not an int in range, or the
        window does not fit the input.
    AxisLengthError
        If the input axis has no length.
    """
    if not isinstance(role, AxisRole):
        raise _fail(UnmatchedAxesError, f"spatial_axis: role must be an AxisRole, not {role!r:.60}")
    source = _axis_with_role(axes, role, "input")
    window = filter if _is_count(filter) else _axis_with_role(filter, role, "filter").length
    checks = ((padding, "padding", 0), (stride, "stride", 1), (window, "filter", 1))
    for value, what, least in checks:
        if not _is_count(value) or value < least:
            raise _fail(IncompatibleAxesError,
                        f"spatial_axis {role.name}: {what} must be an int >= {least}, not "
                        f"{value!r:.60}")
    if source.length is None:
        raise _fail(AxisLengthError, f"spatial_axis {role.name}: input axis {source.name} needs a "
                                     f"length")
    length = ConvGeometry((int(padding),), (int(stride),), (1,)).output_length(
        0, source.length, int(window))
    if provably_below(length, 1):
        raise _fail(IncompatibleAxesError,
                    f"spatial_axis {role.name}: a window of {window} with padding {padding} does "
                    f"not fit input axis {source.name} of length {source.length}")
    name = OUTPUT_NAMES.get(role.name.lower(), source.name)
    return make_axis(length=length, name=name, roles=source.roles)


def _is_count(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _axis_with_role(axes, role: AxisRole, what: str) -> Axis:
    """The one axis of `axes` (an op's, or Axes) that has `role` (matched by name)."""
    axes = axes.axes if isinstance(axes, Op) else Axes(axes)
    found = _by_role(axes, role.name.lower())
    if found is None:
        raise _fail(UnmatchedAxesError,
                    f"spatial_axis: the {what} axes {axes} need exactly one axis with role "
                    f"{role.name}")
    return found


def _check_spatial_match(what: str, x_layout: FeatureLayout, w_layout: FilterLayout) -> None:
    w_roles = tuple(_spatial_role(a) for a in w_layout.spatial)
    if x_layout.spatial_roles != w_roles:
        raise _fail(IncompatibleAxesError,
                    f"{what}: input spatial roles {x_layout.spatial_roles} differ from the "
                    f"filter's {w_roles}")


def _check_channels(what: str, feature: Axis, filter_axis: Axis) -> None:
    if provably_different(feature.length, filter_axis.length):
        raise _fail(IncompatibleAxesError,
                    f"{what}: input channels {feature.name} ({feature.length}) and filter axis "
                    f"{filter_axis.name} ({filter_axis.length}) differ")


def _output_axes(what: str, layout: FeatureLayout, channel: Axis, lengths: Sequence[DimLike],
                 axes: AxesLike) -> Tuple[FeatureLayout, Axes]:
    """The result's layout and axes: given ones checked by role, else new ones."""
    out: Optional[FeatureLayout]
    if axes is None:
        spatial = tuple(make_axis(length=n, name=OUTPUT_NAMES[_spatial_role(a)], roles=a.roles)
                        for a, n in zip(layout.spatial, lengths))
        out = FeatureLayout(layout.batch, channel, spatial)
        return out, Axes((channel,) + spatial + (layout.batch,))
    axes = Axes(axes)
    spatial = _spatial_axes(axes)
    rest = axes - Axes(spatial) - axes.batch_axes()
    # The channel axis: `channel` itself, or a fresh axis of its length (as ngraph makes them).
    batch = axes.batch_axis()
    out = (FeatureLayout(batch, rest[0] if len(rest) == 1 else channel, spatial)
           if batch is not None else None)
    if out is None or len(spatial) != len(lengths) or not Axes(out.canonical).is_equal_set(axes):
        raise _fail(IncompatibleAxesError,
                    f"{what}: output axes {axes} must be {channel.name} (or a new channel axis), "
                    f"{len(lengths)} spatial axes with roles and the batch axis")
    for axis, length in zip((out.channel,) + spatial, (channel.length,) + tuple(lengths)):
        if axis.length is None:
            axis.length = length
        elif provably_different(axis.length, length):
            raise _fail(IncompatibleAxesError,
                        f"{what}: output axis {axis.name} has length {axis.length}; the geometry "
                        f"gives {length}")
    return out, axes


def _lengths(what: str, axes: Sequence[Axis]) -> Tuple[int, ...]:
    for axis in axes:
        if axis.length is None:
            raise _fail(IncompatibleAxesError, f"{what}: axis {axis.name} needs a length")
    return tuple(a.length for a in axes)


class ConvFamilyOp(Op):
    """Base of the three ops of one convolution geometry.

    Every member knows the input feature map's layout (`x_layout`), the
    filter's (`w_layout`) and the output feature map's (`y_layout`); they
    differ in which two of x, w, y they take and which one they give
    (`gives`). The result's axes are those of the layout given, in the order
    `axes` asks for.
    """

    attributes = ("x_layout", "w_layout", "y_layout", "geometry")
    x_layout: FeatureLayout
    w_layout: FilterLayout
    y_layout: FeatureLayout
    geometry: ConvGeometry
    dtype_of_arg = 0
    #: The layout of the result: which of x, w and y this member computes.
    gives: ClassVar[str] = "y_layout"

    def __init__(self, first: Op, second: Op, x_layout: FeatureLayout, w_layout: FilterLayout,
                 y_layout: FeatureLayout, axes: Axes, geometry: ConvGeometry, name=None):
        super().__init__(as_op(first), as_op(second), x_layout=x_layout, w_layout=w_layout,
                         y_layout=y_layout, geometry=geometry, axes=axes, name=name)

    def infer_axes(self) -> Axes:
        layout_axes = Axes(getattr(self, self.gives).canonical)
        if self._asked_axes is None:
            return layout_axes
        axes = Axes(self._asked_axes)
        if not axes.is_equal_set(layout_axes):
            raise _fail(IncompatibleAxesError,
                        f"{type(self).__name__}: result axes {axes} must be the axes "
                        f"{layout_axes} of its {self.gives}")
        return axes


class ConvolutionOp(ConvFamilyOp):
    """(x, w) -> y: y[n, k, p] = sum over c, r of x[n, c, p * stride + r * dilation - pad] w[k, c, r]."""


class ConvBackpropDataOp(ConvFamilyOp):
    """(dy, w) -> dx: the transpose of convolution in x; deconvolution's forward op."""

    gives = "x_layout"


class ConvBackpropFilterOp(ConvFamilyOp):
    """(dy, x) -> dw: the transpose of convolution in w."""

    gives = "w_layout"


def _prepare(what: str, params, inputs, filters, padding, strides, dilation):
    """Layouts, checks, geometry and spatial lengths shared by (de)convolution.

    A convolution's input channels pair with the filter's Channel axis, a
    deconvolution's with its Channelout axis (it runs the convolution backwards).
    """
    x, w = as_op(inputs), as_op(filters)
    x_layout = feature_layout(x, what)
    backwards = what == "deconvolution"
    w_layout = filter_layout(w, what, **{"match_out" if backwards else "match_in": x_layout.channel})
    _check_spatial_match(what, x_layout, w_layout)
    _check_channels(what, x_layout.channel,
                    w_layout.out_channel if backwards else w_layout.in_channel)
    geometry = conv_geometry(params, x_layout.spatial_roles, padding, strides, dilation)
    return (x, w, x_layout, w_layout, geometry, _lengths(what, x_layout.spatial),
            _lengths(what, w_layout.spatial))


def convolution(params: Optional[Dict], inputs, filters, axes: AxesLike = None, padding=None,
                strides=None, dilation=None, name: Optional[str] = None) -> Op:
    """Convolve `inputs` (C, D/H/W..., N) with `filters` (C, T/R/S..., K).

    The axes may come in any order: each is found by its role (Channel,
    Depth, Height, Width on the input; Channel, spatial roles and Channelout
    on the filter) and the batch axis by being one, so no layout is implied
    by position. Output lengths follow
    ``(in + 2 * pad - dilation * (filter - 1) - 1) // stride + 1``; the
    result has axes (K, M/P/Q..., N).

    Parameters
    ----------
    params : dict, optional
        Nervana Graph's geometry keys (pad_h, str_w, dil_d, ...), for spatial
        dims not given by the keywords below; None: none.
    inputs : Op
        The feature maps: a channel axis, one to three spatial axes and a batch axis.
    filters : Op
        The filters: the input channel axis (or an axis with role Channel),
        spatial axes with roles and an output channel axis (role Channelout).
    axes : Axes, Axis or iterable of Axis, optional
        The result's axes, in the order wanted: the output channel axis (or
        a new axis of its length), one spatial axis with a role per input
        spatial axis, and the batch axis; lengths not yet set are set from
        the geometry. None: new spatial axes named M, P, Q.
    padding : int or sequence of int, optional
        Zeros added on both sides of each spatial axis (default 0).
    strides : int or sequence of int, optional
        The step between windows along each spatial axis (default 1).
    dilation : int or sequence of int, optional
        The spacing between filter taps along each spatial axis (default 1).
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        The output feature maps.

    Raises
    ------
    UnmatchedAxesError
        If the batch, channel and spatial axes of the input, or the roles of
        the filter's axes, cannot be told apart, or an axis has no part.
    IncompatibleAxesError
        If the input's and the filter's spatial roles or channel lengths
        differ, the geometry is invalid (strides or dilation < 1, padding < 0)
        or does not fit, an axis has no length, or `axes` do not fit the output.
    AxgraphTypeError
        If `inputs` or `filters` is not an op.

    Examples
    --------
    >>> import axgraph as ng
    >>> from axgraph.frontends.neon import ar
    >>> def ax(n, name, *roles):
    ...     return ng.make_axis(length=n, name=name, roles=roles)
    >>> C, H, W = ax(1, "C", ar.Channel), ax(5, "H", ar.Height), ax(5, "W", ar.Width)
    >>> R, S, K = ax(3, "R", ar.Height), ax(3, "S", ar.Width), ax(4, "K", ar.Channelout)
    >>> N = ax(2, "N")
    >>> images = ng.placeholder([C, H, W, N])
    >>> kernels = ng.variable([C, R, S, K], initial_value=1.0)
    >>> ng.convolution(None, images, kernels, padding=1, strides=2).axes
    Axes(K: 4, P: 3, Q: 3, N: 2)
    """
    x, w, x_layout, w_layout, geometry, in_lengths, filter_lengths = _prepare(
        "convolution", params, inputs, filters, padding, strides, dilation)
    out_lengths = tuple(geometry.output_length(i, n, f)
                        for i, (n, f) in enumerate(zip(in_lengths, filter_lengths)))
    if any(provably_below(n, 1) for n in out_lengths):
        raise _fail(IncompatibleAxesError,
                    f"convolution: the filter {filter_lengths} does not fit the input {in_lengths} "
                    f"with {geometry}")
    y_layout, out_axes = _output_axes("convolution", x_layout, w_layout.out_channel, out_lengths, axes)
    return ConvolutionOp(x, w, x_layout, w_layout, y_layout, out_axes, geometry, name=name)


def deconvolution(params: Optional[Dict], inputs, filters, axes: AxesLike = None, padding=None,
                  strides=None, dilation=None, name: Optional[str] = None) -> Op:
    """Transposed convolution: maps (K, spatial..., N) back to (C, spatial..., N).

    The transpose (in the input) of the convolution with the same filter and
    geometry, which upsamples where that convolution strides. The filter has
    the same axes as for the convolution it transposes; the input's channel
    axis matches the filter's Channelout axis. Output lengths are the
    smallest input lengths whose convolution gives `inputs`' lengths.

    Parameters
    ----------
    params : dict, optional
        Nervana Graph's geometry keys (pad_h, str_w, dil_d, ...), for spatial
        dims not given by the keywords below; None: none.
    inputs : Op
        The feature maps: a channel axis matching the filter's Channelout
        axis, spatial axes with roles and a batch axis.
    filters : Op
        The filters of the convolution transposed (Channel, spatial roles, Channelout).
    axes : Axes, Axis or iterable of Axis, optional
        The result's axes, in the order wanted: the output channel axis (or
        a new axis of its length), one spatial axis with a role per input
        spatial axis, and the batch axis; lengths not yet set are set from
        the geometry. None: new spatial axes named M, P, Q.
    padding : int or sequence of int, optional
        Zeros added on both sides of each spatial axis (default 0).
    strides : int or sequence of int, optional
        The step between windows along each spatial axis (default 1).
    dilation : int or sequence of int, optional
        The spacing between filter taps along each spatial axis (default 1).
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        The output feature maps, with the filter's Channel axis.

    Raises
    ------
    UnmatchedAxesError
        If the batch, channel and spatial axes of the input, or the roles of
        the filter's axes, cannot be told apart, or an axis has no part.
    IncompatibleAxesError
        If the input's and the filter's spatial roles or channel lengths
        differ, the geometry is invalid (strides or dilation < 1, padding < 0)
        or does not fit, an axis has no length, or `axes` do not fit the output.
    AxgraphTypeError
        If `inputs` or `filters` is not an op.
    """
    x, w, x_layout, w_layout, geometry, in_lengths, filter_lengths = _prepare(
        "deconvolution", params, inputs, filters, padding, strides, dilation)
    out_lengths = tuple(geometry.input_length(i, n, f)
                        for i, (n, f) in enumerate(zip(in_lengths, filter_lengths)))
    y_layout, out_axes = _output_axes("deconvolution", x_layout, w_layout.in_channel, out_lengths,
                                      axes)
    # The deconvolution's input plays the convolution's output: y and x swap parts.
    return ConvBackpropDataOp(x, w, y_layout, w_layout, x_layout, out_axes, geometry, name=name)
