"""Activation functions of the neon frontend: callable objects op -> op.

They are objects rather than bare functions so that a layer can hold one with
its settings (a leaky slope, an ELU alpha) and print it. Each is written with
ops that have derivatives, so `ng.deriv` differentiates through them; the
logistic and softmax use `ng.sigmoid` / `ng.softmax`, whose results carry a
schema so that a following binary / multi-class cross entropy is computed in
the stable log domain.
"""
from __future__ import annotations

import abc

from typing import Callable, Dict, Optional, Union


from ...axes import AxesLike
from ...debug_info import user_location
from ...errors import AxgraphError
from ...op_graph import elementwise as ew
from ...op_graph import nn
from ...op_graph.op import Op
from ...op_graph.tensors import as_op


class ActivationError(AxgraphError, ValueError):
    """An activation asked for by a name or setting that does not exist."""


class Activation(abc.ABC):
    """Base of activations: `activation(x)` returns a new op with x's axes.

    A subclass keeps its settings as attributes (they are what ``repr`` shows)
    and implements ``__call__``. Any callable op -> op works where a layer
    takes an activation; subclassing this one only adds the readable repr.
    """

    @abc.abstractmethod
    def __call__(self, x: Op) -> Op:
        """The activation of `x`, elementwise.

        Parameters
        ----------
        x : Op or array_like
            The pre-activation; a NumPy array or number becomes a constant.

        Returns
        -------
        Op
            A new op with the axes of `x`.
        """

    def __repr__(self) -> str:
        settings = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({settings})"


class Identity(Activation):
    """f(x) = x: the 'no activation' of a linear output layer.

    What a layer uses when given ``activation=None``; takes no settings.
    Calling it returns `x` itself (as an op), so it adds nothing to the graph.

    Examples
    --------
    >>> import axgraph as ng
    >>> x = ng.constant(3.0)
    >>> Identity()(x) is x
    True
    """

    def __call__(self, x: Op) -> Op:
        return as_op(x)


class Rectlin(Activation):
    """max(x, 0), or the leaky max(x, 0) + slope * min(x, 0) when slope != 0.

    The rectified linear unit (neon's Rectlin). With ``slope == 0`` it is one
    ``ng.relu`` op; a leaky unit lets a small gradient through for x < 0, so
    a unit that goes negative can recover.

    Parameters
    ----------
    slope : float, default 0.0
        The slope for x < 0 (0 for the plain ReLU, e.g. 0.01 for a leaky one).

    Examples
    --------
    >>> import numpy as np, axgraph as ng
    >>> X = ng.make_axis(3, name="X")
    >>> x = ng.constant(np.array([-2.0, 0.5, 3.0]), [X], dtype=np.float64)
    >>> with ng.NumPyTransformer() as t:
    ...     print(t.computation(Rectlin()(x))(), t.computation(Rectlin(slope=0.1)(x))())
    [0.  0.5 3. ] [-0.2  0.5  3. ]
    """

    def __init__(self, slope: float = 0.0):
        self.slope = float(slope)

    def __call__(self, x: Op) -> Op:
        x = as_op(x)
        if self.slope == 0.0:
            return ew.relu(x)
        return ew.maximum(x, 0.0) + self.slope * ew.minimum(x, 0.0)


class Explin(Activation):
    """ELU: x for x > 0, alpha * (exp(x) - 1) otherwise (Clevert et al. 2015).

    neon's Explin. Negative inputs saturate smoothly at -alpha instead of
    being cut to 0, which keeps mean activations nearer zero. exp is taken of
    min(x, 0) so that large positive x cannot overflow.

    Parameters
    ----------
    alpha : float, default 1.0
        The value -alpha that the output approaches as x -> -inf.
    """

    def __init__(self, alpha: float = 1.0):
        self.alpha = float(alpha)

    def __call__(self, x: Op) -> Op:
        x = as_op(x)
        return ew.maximum(x, 0.0) + self.alpha * (ew.exp(ew.minimum(x, 0.0)) - 1.0)


class Tanh(Activation):
    """Hyperbolic tangent: (exp(x) - exp(-x)) / (exp(x) + exp(-x)), in (-1, 1).

    neon's Tanh, and the default activation of the recurrent layers. Takes no
    settings; calling it on an op gives ``ng.tanh`` of it.
    """

    def __call__(self, x: Op) -> Op:
        return ew.tanh(x)


class Logistic(Activation):
    """1 / (1 + exp(-x)) via ng.sigmoid, so cross_entropy_binary stays stable.

    neon's Logistic, and the default gate activation of LSTM and GRU. The op
    it returns remembers its logits, so ``ng.cross_entropy_binary`` on it is
    computed from the logits (no log of a rounded probability). Takes no
    settings.

    Examples
    --------
    >>> import numpy as np, axgraph as ng
    >>> X = ng.make_axis(3, name="X")
    >>> x = ng.constant(np.array([-1.0, 0.0, 1.0]), [X], dtype=np.float64)
    >>> with ng.NumPyTransformer() as t:
    ...     print(np.round(t.computation(Logistic()(x))(), 4))
    [0.2689 0.5    0.7311]
    """

    def __call__(self, x: Op) -> Op:
        return nn.sigmoid(x)


class Softmax(Activation):
    """ng.softmax over `normalization_axes` (default: the one axis not batch or time).

    neon's Softmax: exp(x) / sum(exp(x)), the sum taken over the normalization
    axes, so each example (and time step) gets a distribution. The op it
    returns remembers its input, so ``ng.cross_entropy_multi`` on it works in
    the log domain.

    Parameters
    ----------
    normalization_axes : Axes, sequence of Axis or None, default None
        The axes each distribution spans. None means the input's one feature
        axis: the axis that is neither batch nor recurrent.

    Raises
    ------
    axgraph.UnmatchedAxesError
        When called on an op that lacks some of `normalization_axes`.
    axgraph.AmbiguousAxesError
        When `normalization_axes` is None and the input has several feature
        axes (or none): name the axes.

    Examples
    --------
    >>> import numpy as np, axgraph as ng
    >>> Y = ng.make_axis(3, name="Y")
    >>> N = ng.make_axis(2, name="N")
    >>> logits = ng.constant(np.log([[1.0, 2.0], [1.0, 2.0], [2.0, 4.0]]), [Y, N],
    ...                      dtype=np.float64)
    >>> with ng.NumPyTransformer() as t:
    ...     print(t.computation(Softmax()(logits))())   # each column sums to 1
    [[0.25 0.25]
     [0.25 0.25]
     [0.5  0.5 ]]
    """

    def __init__(self, normalization_axes: AxesLike = None):
        self.normalization_axes = normalization_axes

    def __call__(self, x: Op) -> Op:
        return nn.softmax(x, normalization_axes=self.normalization_axes)


class Normalizer(Activation):
    """x / divisor: scales inputs by a fixed factor (v0.4's Normalizer, default 128).

    Not a nonlinearity: a scaling step, placed in a ``Sequential`` (it is a
    callable op -> op) or used as a ``Preprocess`` functor, that brings 8-bit
    pixel values 0..255 into [0, 2) with the default divisor.

    Parameters
    ----------
    divisor : float, default 128.0
        What every element is divided by.
    """

    def __init__(self, divisor: float = 128.0):
        self.divisor = float(divisor)

    def __call__(self, x: Op) -> Op:
        return as_op(x) / self.divisor


#: Names accepted wherever a layer takes an activation.
ACTIVATIONS: Dict[str, Callable[[], Activation]] = {
    "identity": Identity, "linear": Identity, "relu": Rectlin, "rectlin": Rectlin,
    "tanh": Tanh, "logistic": Logistic, "sigmoid": Logistic, "softmax": Softmax,
    "elu": Explin, "explin": Explin,
}

ActivationLike = Union[None, str, Callable[[Op], Op]]


def get_activation(spec: ActivationLike, default: Optional[Callable[[Op], Op]] = None
                   ) -> Callable[[Op], Op]:
    """An activation from None (-> `default` or Identity), a name, or any callable.

    This is how layers read their ``activation=`` argument.

    Parameters
    ----------
    spec : None, str or callable
        None; a name from ``ACTIVATIONS`` (any case: "relu", "tanh", "softmax",
        ...), which builds that activation with its default settings; or any
        callable op -> op, returned as it is.
    default : callable or None, default None
        What None stands for; Identity() when this is None too.

    Returns
    -------
    callable
        The activation, op -> op.

    Raises
    ------
    ActivationError
        For an unknown name or a `spec` that is neither a name nor callable.
    """
    if spec is None:
        return default if default is not None else Identity()
    if isinstance(spec, str):
        factory = ACTIVATIONS.get(spec.lower())
        if factory is None:
            raise ActivationError(f"unknown activation {spec!r}; known: {sorted(ACTIVATIONS)}",
                                  user_location())
        return factory()
    if callable(spec):
        return spec
    raise ActivationError(f"an activation must be a name or a callable op -> op, not {spec!r}",
                          user_location())
