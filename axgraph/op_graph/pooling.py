"""Max and average pooling over the spatial axes of a feature map.

The channel and batch axes are kept (by identity); each spatial axis of the
input gets a new, shorter output axis with the same roles. Average pooling
divides by the number of input positions a window covers, so padding never
dilutes an average.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

from ..axes import Axes, AxesLike
from ..debug_info import user_location
from ..errors import IncompatibleAxesError
from ..shapes.prover import provably_below
from .convolution import (ConvGeometry, FeatureLayout, _lengths, _output_axes, conv_geometry,
                          feature_layout)
from .op import Op
from .tensors import as_op

POOL_KINDS = ("max", "avg")
WINDOW_KEYS = {"depth": "T", "height": "R", "width": "S"}


class PoolingOp(Op):
    """Each output position is the max (or mean) of an input window.

    The result's axes are those of `y_layout`, in the order `axes` asks for.
    """

    attributes = ("x_layout", "y_layout", "window", "geometry", "kind")
    x_layout: FeatureLayout
    y_layout: FeatureLayout
    window: Tuple[int, ...]
    geometry: ConvGeometry
    kind: str
    dtype_of_arg = 0

    def __init__(self, x: Op, x_layout: FeatureLayout, y_layout: FeatureLayout, axes,
                 window: Tuple[int, ...], geometry: ConvGeometry, kind: str, name=None):
        super().__init__(as_op(x), x_layout=x_layout, y_layout=y_layout, window=window,
                         geometry=geometry, kind=kind, axes=axes, name=name)

    def infer_axes(self) -> Axes:
        layout_axes = Axes(self.y_layout.canonical)
        axes = layout_axes if self._asked_axes is None else Axes(self._asked_axes)
        if not axes.is_equal_set(layout_axes):
            raise IncompatibleAxesError(f"pooling: result axes {axes} must be the axes "
                                        f"{layout_axes} of its output layout", user_location())
        return axes


class PoolingBackpropOp(Op):
    """Routes a pooling result's adjoint back to the input positions it came from."""

    attributes = ("pool",)
    pool: PoolingOp
    dtype_of_arg = 0

    def __init__(self, delta: Op, x: Op, pool: PoolingOp, name=None):
        super().__init__(as_op(delta), as_op(x), pool=pool, name=name)

    def infer_axes(self) -> Axes:
        return self.args[1].axes


def pooling(params: Optional[Dict], inputs, axes: AxesLike = None, window=None, strides=None,
            padding=None, pool_type: Optional[str] = None, name: Optional[str] = None) -> Op:
    """Pool `inputs` (C, D/H/W..., N) over windows of its spatial axes.

    Each output position is the max (or the mean) of a window; the channel
    and batch axes are kept, each spatial axis gets a new, shorter one with
    the same roles (named M, P, Q). An average divides by the number of
    input positions the window covers, so padding never dilutes it.

    Parameters
    ----------
    params : dict, optional
        Nervana Graph's keys (op, T, R, S, pad_h, str_w, ...), for what the
        keywords below leave out; None: none.
    inputs : Op
        The feature maps: a channel axis, spatial axes with roles and a batch axis.
    axes : Axes, Axis or iterable of Axis, optional
        The result's axes, in the order wanted (None: new spatial axes).
    window : int or sequence of int, optional
        The window's length along each spatial axis (default 1).
    strides : int or sequence of int, optional
        The step between windows; each dim defaults to its window length, so
        windows tile the input.
    padding : int or sequence of int, optional
        Positions added on both sides of each spatial axis, smaller than the
        window (default 0).
    pool_type : str, optional
        "max" or "avg" (default: params' "op", else "max").
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        The pooled feature maps.

    Raises
    ------
    IncompatibleAxesError
        If `pool_type` is unknown, the window, strides or padding do not fit
        the input, an axis has no length, `axes` do not fit the output, or
        params ask for pooling across channels (J, str_c, pad_c).
    UnmatchedAxesError
        If the batch, channel and spatial axes of the input cannot be told apart.
    """
    x = as_op(inputs)
    params = dict(params or {})
    refuse_crossmap(params)
    layout = feature_layout(x, "pooling")
    roles = layout.spatial_roles
    kind = pool_type or params.pop("op", "max")
    if kind not in POOL_KINDS:
        raise IncompatibleAxesError(f"pooling: op must be one of {POOL_KINDS}, not {kind!r}",
                                    user_location())
    if window is None:
        window = tuple(int(params.pop(WINDOW_KEYS[role], 1)) for role in roles)
    elif isinstance(window, int):
        window = (window,) * len(roles)
    window = tuple(int(w) for w in window)
    if strides is None:  # each dim's stride defaults to its window: windows tile the input
        strides = tuple(int(params.pop(f"str_{role[0]}", size)) for role, size in zip(roles, window))
    geometry = conv_geometry(params, roles, padding, strides, None)
    in_lengths = _lengths("pooling", layout.spatial)
    out_lengths = tuple(geometry.output_length(i, n, w)
                        for i, (n, w) in enumerate(zip(in_lengths, window)))
    if any(provably_below(n, 1) for n in out_lengths) or any(
            p >= w for p, w in zip(geometry.padding, window)):
        raise IncompatibleAxesError(
            f"pooling: window {window} with padding {geometry.padding} does not fit the input "
            f"{in_lengths} (padding must be smaller than the window)", user_location())
    y_layout, out_axes = _output_axes("pooling", layout, layout.channel, out_lengths, axes)
    return PoolingOp(x, layout, y_layout, out_axes, window, geometry, kind, name=name)


#: ngraph's crossmap keys and the values that mean "no pooling across channels".
CROSSMAP_NEUTRAL = {"J": 1, "str_c": 1, "pad_c": 0}


def refuse_crossmap(params: Dict) -> None:
    """Pooling across channels (J > 1, str_c, pad_c) is not implemented: refuse it, never ignore it."""
    asked = {k: params.pop(k) for k in CROSSMAP_NEUTRAL if k in params}
    if any(int(v) != CROSSMAP_NEUTRAL[k] for k, v in asked.items()):
        raise IncompatibleAxesError(
            f"pooling: crossmap pooling (over channels) is not supported; got params "
            f"{asked}, which must be {CROSSMAP_NEUTRAL}", user_location())
