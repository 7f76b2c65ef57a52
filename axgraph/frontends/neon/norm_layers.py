"""Per-example normalization layers: LayerNorm and RMSNorm over named feature axes.

Unlike BatchNorm, these take their statistics over the features of each
example and position (each token's vector), never over the batch, so
training and inference compute the same thing and a batch of one is fine.
The axes normalized over are named: a (D, T, N) input normalizes over D
whatever order it keeps them in. Left out, they are the input's feature
axes, when there is exactly one; with more (a sequence axis T not marked
recurrent looks like a feature axis) the layer asks for them rather than guess.
"""
from __future__ import annotations

from typing import Optional

from ...axes import Axes, AxesLike
from ...op_graph import normalization
from ...op_graph.op import Op
from ...op_graph.tensors import InitialValue
from .layer import Layer, LayerAxesError, LayerError, _float_dtype, feature_axes

__all__ = ["LayerNorm", "RMSNorm"]


class _FeatureNorm(Layer):
    """What LayerNorm and RMSNorm share: the axes normalized over, eps, a learned gain."""

    def __init__(self, axes: AxesLike, eps: float, init_gain: InitialValue,
                 name: Optional[str]):
        super().__init__(name)
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps >= 0:
            raise self._fail(LayerError, f"eps must be a number >= 0, not {eps!r}")
        self.eps = float(eps)
        self.axes: Optional[Axes] = Axes(axes) if axes is not None else None
        if self.axes is not None and not self.axes:
            raise self._fail(LayerError, "axes must name at least one axis to normalize over")
        self.init_gain = init_gain

    def _normalized_axes(self, x: Op) -> Axes:
        if self.axes is not None:
            return self.axes
        found = feature_axes(x.axes)
        if len(found) != 1:
            raise self._fail(LayerAxesError,
                             f"cannot tell which axes of {x.name} {x.axes} to normalize over: "
                             f"{found or 'none'} are neither batch nor recurrent; give "
                             f"axes= (e.g. the embedding axis)")
        return found

    def _build(self, x: Op) -> None:
        self.axes = self._normalized_axes(x)
        self._check_input(x)
        self.gain = self._variable("gain", self.axes, self.init_gain, _float_dtype(x))

    def _check_input(self, x: Op) -> None:
        assert self.axes is not None  # set by the constructor or the first call
        missing = Axes(a for a in self.axes if a not in x.axes)
        if missing:
            raise self._fail(LayerAxesError, f"normalizes over {self.axes}, but {x.name} "
                                             f"{x.axes} lacks {missing}")


class LayerNorm(_FeatureNorm):
    """gain * (x - mean) / sqrt(variance + eps) + bias over `axes` (Ba et al. 2016).

    The mean and population variance are taken over the normalized axes for
    each position of the input's other axes (each token of each example);
    the gain and bias are variables over the normalized axes. The output
    has the input's axes. It is ``ng.layer_norm`` with learned parameters.

    Parameters
    ----------
    axes : Axes, Axis, sequence of Axis or None, default None
        The axes normalized over (the features, e.g. the embedding axis D).
        None: the input's one feature axis (neither batch nor recurrent); an
        input with more than one raises, asking for `axes`.
    eps : float, default 1e-5
        Added to the variance, so constant features do not divide by zero.
    init_gain : number, array, callable or Op, default 1.0
        Initial value of the gain.
    init_bias : number, array, callable, Op or None, default 0.0
        Initial value of the bias; None for no bias.
    name : str or None, default None
        The layer's name, which prefixes its variables (``<name>_gain``,
        ``<name>_bias``); None gives ``LayerNorm_<n>``.

    Raises
    ------
    LayerError
        When `eps` is negative or not a number, or `axes` is empty.
    LayerAxesError
        When an input lacks one of `axes`, or `axes` is None and the first
        input has other than one feature axis.

    Examples
    --------
    >>> import numpy as np, axgraph as ng
    >>> D, T = ng.make_axis(4, name="D"), ng.make_axis(2, name="T")
    >>> h = ng.placeholder([T, D], dtype=np.float64)
    >>> norm = LayerNorm(D, eps=0.0, init_gain=2.0, init_bias=1.0, name="ln")
    >>> y = norm(h)
    >>> norm.gain.axes, norm.bias.axes
    (Axes(D: 4), Axes(D: 4))
    >>> with ng.make_transformer("numpy") as t:
    ...     out = t.computation(y, h)(np.array([[1.0, 1.0, 3.0, 3.0], [0.0, 0.0, 0.0, 8.0]]))
    >>> print(np.round(out, 4))
    [[-1.     -1.      3.      3.    ]
     [-0.1547 -0.1547 -0.1547  4.4641]]
    """

    def __init__(self, axes: AxesLike = None, eps: float = 1e-5, init_gain: InitialValue = 1.0,
                 init_bias: InitialValue = 0.0, name: Optional[str] = None):
        super().__init__(axes, eps, init_gain, name)
        self.init_bias = init_bias
        self.bias: Optional[Op] = None

    def _build(self, x: Op) -> None:
        super()._build(x)
        if self.init_bias is not None:
            self.bias = self._variable("bias", self.axes, self.init_bias, _float_dtype(x))

    def _forward(self, x: Op) -> Op:
        return normalization.layer_norm(x, self.axes, gain=self.gain, bias=self.bias,
                                        eps=self.eps)


class RMSNorm(_FeatureNorm):
    """gain * x / sqrt(mean(x**2) + eps) over `axes` (Zhang & Sennrich 2019).

    Root-mean-square normalization, as in T5 and LLaMA: no centering and no
    bias, a learned gain over the normalized axes. The output has the input's
    axes. It is ``ng.rms_norm`` with a learned gain.

    Parameters
    ----------
    axes : Axes, Axis, sequence of Axis or None, default None
        The axes normalized over (the features, e.g. the embedding axis D).
        None: the input's one feature axis (neither batch nor recurrent); an
        input with more than one raises, asking for `axes`.
    eps : float, default 1e-6
        Added to the mean square, so an all-zero vector does not divide by zero.
    init_gain : number, array, callable or Op, default 1.0
        Initial value of the gain.
    name : str or None, default None
        The layer's name, which prefixes its variable ``<name>_gain``; None
        gives ``RMSNorm_<n>``.

    Raises
    ------
    LayerError
        When `eps` is negative or not a number, or `axes` is empty.
    LayerAxesError
        When an input lacks one of `axes`, or `axes` is None and the first
        input has other than one feature axis.

    Examples
    --------
    >>> import numpy as np, axgraph as ng
    >>> D, N = ng.make_axis(2, name="D"), ng.make_axis(1, name="N")
    >>> h = ng.placeholder([D, N], dtype=np.float64)
    >>> norm = RMSNorm(eps=0.0, name="rms")        # D: the one feature axis
    >>> with ng.make_transformer("numpy") as t:
    ...     print(t.computation(norm(h), h)(np.array([[3.0], [4.0]])))
    [[0.84852814]
     [1.13137085]]
    """

    def __init__(self, axes: AxesLike = None, eps: float = 1e-6, init_gain: InitialValue = 1.0,
                 name: Optional[str] = None):
        super().__init__(axes, eps, init_gain, name)

    def _forward(self, x: Op) -> Op:
        return normalization.rms_norm(x, self.axes, gain=self.gain, eps=self.eps)
