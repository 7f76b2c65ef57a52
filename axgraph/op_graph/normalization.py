"""Normalizations over named axes: layer_norm and rms_norm, composed of core ops.

The axes normalized over are named, never counted from the end: a layer norm of
token vectors names the embedding axis, whatever order the tensor keeps. Each
is reductions and elementwise ops, which the cpu backend fuses, and autodiff
derives their gradients.
"""
from __future__ import annotations

from typing import Optional

from ..axes import Axes, AxesLike
from ..debug_info import user_location
from ..errors import AxgraphValueError, IncompatibleAxesError, UnmatchedAxesError
from . import elementwise as ew
from . import reductions as red
from .op import Op
from .tensors import as_op


def checked_axes(what: str, x: Op, axes: AxesLike, role: str = "axes") -> Axes:
    """`axes` as Axes, checked to be some of x's (and at least one)."""
    axes = Axes(axes)
    if not axes:
        raise UnmatchedAxesError(f"{what}: {role} must name at least one axis of "
                                 f"{x.name} {x.axes}", user_location())
    missing = Axes(a for a in axes if a not in x.axes)
    if missing:
        raise UnmatchedAxesError(f"{what}: {role} {missing} are not axes of {x.name} {x.axes}",
                                 user_location())
    return axes


def _checked_eps(what: str, eps: float) -> float:
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not eps >= 0:
        raise AxgraphValueError(f"{what}: eps must be a number >= 0, not {eps!r}",
                                user_location())
    return float(eps)


def _affine(what: str, x: Op, normalized: Op, gain, bias) -> Op:
    """normalized * gain + bias, each optional, over axes x has."""
    for role, value in (("gain", gain), ("bias", bias)):
        if value is None:
            continue
        extra = Axes(a for a in as_op(value).axes if a not in x.axes)
        if extra:
            raise IncompatibleAxesError(f"{what}: {role} {as_op(value).axes} has axes {extra} "
                                        f"that x {x.name} {x.axes} lacks", user_location())
    if gain is not None:
        normalized = normalized * gain
    if bias is not None:
        normalized = normalized + bias
    return normalized


def _named(result: Op, name: Optional[str]) -> Op:
    if name is not None:
        result.name = name
    return result


def layer_norm(x, axes: AxesLike, gain=None, bias=None, eps: float = 1e-5,
               name: Optional[str] = None) -> Op:
    """(x - mean) / sqrt(variance + eps) over `axes`, then times gain plus bias.

    The mean and the population variance are taken over `axes` for each position of
    x's other axes; the variance is the mean of the centered squares (no cancellation).

    Parameters
    ----------
    x : Op
        The values, of a float type.
    axes : Axes, Axis or iterable of Axis
        The axes normalized over (the features), some of x's.
    gain, bias : Op or number, optional
        A scale and a shift applied after normalizing, over some of x's axes (usually
        `axes`): learned parameters, often variables.
    eps : float, optional
        Added to the variance, so constant features do not divide by zero.
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        The normalized values, with x's axes.

    Raises
    ------
    UnmatchedAxesError
        If `axes` is empty or holds an axis that x lacks.
    IncompatibleAxesError
        If gain or bias has an axis that x lacks.
    AxgraphValueError
        If `eps` is not a number >= 0.
    """
    x = as_op(x)
    axes = checked_axes("layer_norm", x, axes)
    eps = _checked_eps("layer_norm", eps)
    centered = x - red.mean(x, reduction_axes=axes)
    variance = red.mean(centered * centered, reduction_axes=axes)
    normalized = centered * ew.rsqrt(variance + eps)
    return _named(_affine("layer_norm", x, normalized, gain, bias), name)


def rms_norm(x, axes: AxesLike, gain=None, eps: float = 1e-6,
             name: Optional[str] = None) -> Op:
    """x / sqrt(mean(x**2) + eps) over `axes`, then times gain.

    The root-mean-square normalization of T5 and LLaMA: no centering and no bias.

    Parameters
    ----------
    x : Op
        The values, of a float type.
    axes : Axes, Axis or iterable of Axis
        The axes normalized over (the features), some of x's.
    gain : Op or number, optional
        A scale applied after normalizing, over some of x's axes (usually `axes`).
    eps : float, optional
        Added to the mean square, so an all-zero vector does not divide by zero.
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        The normalized values, with x's axes.

    Raises
    ------
    UnmatchedAxesError
        If `axes` is empty or holds an axis that x lacks.
    IncompatibleAxesError
        If gain has an axis that x lacks.
    AxgraphValueError
        If `eps` is not a number >= 0.
    """
    x = as_op(x)
    axes = checked_axes("rms_norm", x, axes)
    eps = _checked_eps("rms_norm", eps)
    normalized = x * ew.rsqrt(red.mean(x * x, reduction_axes=axes) + eps)
    return _named(_affine("rms_norm", x, normalized, gain, None), name)
