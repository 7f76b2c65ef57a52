"""Activation functions of modern networks, composed of elementwise core ops.

Each is a short expression of existing ops, so the cpu backend fuses it into
one C kernel and jax into one XLA computation, and autodiff derives its
gradient; the forms are chosen so that no element overflows.
"""
from __future__ import annotations

import math
from typing import Optional

from ..debug_info import user_location
from ..errors import AxgraphValueError
from . import elementwise as ew
from .op import Op
from .tensors import as_op

#: The `approximate` settings of `gelu`.
GELU_FORMS = ("none", "tanh")


def _named(result: Op, name: Optional[str]) -> Op:
    if name is not None:
        result.name = name
    return result


def softplus(x, name: Optional[str] = None) -> Op:
    """log(1 + exp(x)) at every element of x, without overflow.

    Computed as max(x, 0) + log1p(exp(-|x|)): exp never sees a positive argument, so
    a large x gives x (not inf) and a very negative one exp(x) (not 0 from a rounded
    1 + exp(x)). Both parts choose by x > 0 with `where`, so that at 0 the gradient is
    sigmoid(0) = 1/2 as everywhere else it is sigmoid(x), and no branch not taken
    computes an infinity.

    Parameters
    ----------
    x : Op or number
        The operand, of a float type.
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        Positive values, with x's axes and element type.

    Raises
    ------
    AxgraphTypeError
        If `x` is not an op or a number (an array needs ng.constant and axes).
    """
    x = as_op(x)
    positive = ew.greater(x, 0.0)
    minus_magnitude = ew.where(positive, -x, x)  # -|x|, its slope at 0 that of x < 0
    return _named(ew.where(positive, x, 0.0) + ew.log1p(ew.exp(minus_magnitude)), name)


def silu(x, name: Optional[str] = None) -> Op:
    """x * sigmoid(x) at every element of x: the sigmoid linear unit (swish).

    Parameters
    ----------
    x : Op or number
        The operand, of a float type.
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        The values, with x's axes and element type.

    Raises
    ------
    AxgraphTypeError
        If `x` is not an op or a number (an array needs ng.constant and axes).
    """
    x = as_op(x)
    return _named(x * ew.sigmoid(x), name)


def gelu(x, approximate: str = "none", name: Optional[str] = None) -> Op:
    """The Gaussian error linear unit x * Phi(x), Phi the normal distribution's CDF.

    ``approximate="none"`` computes x / 2 * (1 + erf(x / sqrt(2))) exactly;
    ``"tanh"`` the approximation x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x**3)))
    of BERT and GPT-2, which some checkpoints were trained with. Both take 1 + erf (or
    tanh) of a negative x, so far in the negative tail, where the value is much smaller
    than x, its error is a few ulps of x rather than of the value.

    Parameters
    ----------
    x : Op or number
        The operand, of a float type.
    approximate : {"none", "tanh"}, optional
        Which form to compute (default the exact one).
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        The values, with x's axes and element type.

    Raises
    ------
    AxgraphValueError
        If `approximate` is neither "none" nor "tanh".
    AxgraphTypeError
        If `x` is not an op or a number (an array needs ng.constant and axes).
    """
    if approximate not in GELU_FORMS:
        raise AxgraphValueError(f"gelu: approximate must be one of {GELU_FORMS}, not "
                                f"{approximate!r}", user_location())
    x = as_op(x)
    if approximate == "none":
        phi = 0.5 + 0.5 * ew.erf(x * math.sqrt(0.5))
    else:
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * (x * x * x))
        phi = 0.5 + 0.5 * ew.tanh(inner)
    return _named(x * phi, name)
