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
    """Base of activations: `activation(x)` returns a new op with x's axes."""

    @abc.abstractmethod
    def __call__(self, x: Op) -> Op:
        """The activation of x (a new op with x's axes)."""

    def __repr__(self) -> str:
        settings = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({settings})"


class Identity(Activation):
    """f(x) = x: the 'no activation' of a linear output layer."""

    def __call__(self, x: Op) -> Op:
        return as_op(x)


class Rectlin(Activation):
    """max(x, 0), or the leaky max(x, 0) + slope * min(x, 0) when slope != 0."""

    def __init__(self, slope: float = 0.0):
        self.slope = float(slope)

    def __call__(self, x: Op) -> Op:
        x = as_op(x)
        if self.slope == 0.0:
            return ew.relu(x)
        return ew.maximum(x, 0.0) + self.slope * ew.minimum(x, 0.0)


class Explin(Activation):
    """ELU: x for x > 0, alpha * (exp(x) - 1) otherwise (Clevert et al. 2015).

    exp is taken of min(x, 0) so that large positive x cannot overflow.
    """

    def __init__(self, alpha: float = 1.0):
        self.alpha = float(alpha)

    def __call__(self, x: Op) -> Op:
        x = as_op(x)
        return ew.maximum(x, 0.0) + self.alpha * (ew.exp(ew.minimum(x, 0.0)) - 1.0)


class Tanh(Activation):
    """Hyperbolic tangent."""

    def __call__(self, x: Op) -> Op:
        return ew.tanh(x)


class Logistic(Activation):
    """1 / (1 + exp(-x)) via ng.sigmoid, so cross_entropy_binary stays stable."""

    def __call__(self, x: Op) -> Op:
        return nn.sigmoid(x)


class Softmax(Activation):
    """ng.softmax over `normalization_axes` (default: all but batch and time)."""

    def __init__(self, normalization_axes: AxesLike = None):
        self.normalization_axes = normalization_axes

    def __call__(self, x: Op) -> Op:
        return nn.softmax(x, normalization_axes=self.normalization_axes)


class Normalizer(Activation):
    """x / divisor: scales inputs by a fixed factor (v0.4's Normalizer, default 128)."""

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
    """An activation from None (-> `default` or Identity), a name, or any callable."""
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
