"""Neural-network building blocks composed of core axes ops.

softmax and sigmoid attach a *schema* to their result (seed 001): a record
of how it was computed, so that a cross entropy built on it can use the
stable log-domain form instead of taking the log of a rounded probability.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from ..axes import Axes, AxesLike, Axis
from ..debug_info import user_location
from ..errors import AxgraphTypeError, IncompatibleAxesError
from . import elementwise as ew
from . import reductions as red
from .op import Op
from .random import uniform
from .tensors import as_op


@dataclass(eq=False)
class Softmax:
    """Schema on a softmax result: its logits and normalization axes."""

    x: Op
    normalization_axes: Axes
    shifted: Op  # x - max(x), the log-numerator
    log_denominator: Op  # log(sum(exp(shifted)))

    def log_softmax(self) -> Op:
        """log(softmax(x)) without rounding the probability first."""
        return self.shifted - self.log_denominator


@dataclass(eq=False)
class SigmoidSchema:
    """Schema on a sigmoid result: its logits."""

    x: Op


def softmax(x, normalization_axes: AxesLike = None, name: Optional[str] = None) -> Op:
    """exp(x) / sum(exp(x)) over `normalization_axes` (default: all but batch/time)."""
    x = as_op(x)
    if normalization_axes is None:
        normalization_axes = Axes(a for a in x.axes if not a.is_batch and not a.is_recurrent)
    normalization_axes = Axes(normalization_axes)
    # Softmax does not change when a constant is subtracted, so the shift that keeps
    # exp from overflowing needs no gradient of its own (it would be exactly zero).
    shifted = x - ew.stop_gradient(red.max(x, reduction_axes=normalization_axes))
    exps = ew.exp(shifted)
    denominator = red.sum(exps, reduction_axes=normalization_axes)
    result = ew.divide(exps, denominator, name=name)
    result.schemas.append(Softmax(x, normalization_axes, shifted, ew.log(denominator)))
    return result


def sigmoid(x, name: Optional[str] = None, dtype=None) -> Op:
    """1 / (1 + exp(-x)), remembering x for a stable cross_entropy_binary."""
    x = as_op(x)
    result = ew.Sigmoid(x, name=name, dtype=dtype)
    result.schemas.append(SigmoidSchema(x))
    return result


def _find_schema(op: Op, kind):
    for schema in op.schemas:
        if isinstance(schema, kind):
            return schema
    return None


def _checked_flag(what: str, keyword: str, value) -> bool:
    if not isinstance(value, bool):
        raise AxgraphTypeError(f"{what}: {keyword} must be True or False, not {value!r}",
                               user_location())
    return bool(value)


def cross_entropy_multi(y, t, usebits: bool = False, out_axes: AxesLike = None,
                        enable_softmax_opt: bool = True, enable_diff_opt: bool = True,
                        name: Optional[str] = None) -> Op:
    """-sum(t * log(y)) over the non-batch axes (one value per example).

    Parameters
    ----------
    y : Op
        The prediction, each example a distribution (typically a softmax).
    t : Op
        The target, with y's axes.
    usebits : bool
        Report the result in bits instead of nats.
    out_axes : Axes, optional
        The axes to keep (default: the batch and recurrent axes).
    enable_softmax_opt : bool
        When y is a softmax, take log(y) in the log domain (stable) instead of the log
        of a rounded probability.
    enable_diff_opt : bool
        Nervana Graph v0.4's switch for the short derivative of a softmax's cross
        entropy, ``(y - t) * delta`` for the logits. The log-domain form's derivative
        is that one already, so both settings give the same values and gradients.
    name : str, optional
        The result's name.

    Returns
    -------
    Op
        The cross entropy, with `out_axes`.

    Raises
    ------
    IncompatibleAxesError
        y and t have different axes.
    """
    y, t = as_op(y), as_op(t)
    _check_same_axes("cross_entropy_multi", y, t)
    _checked_flag("cross_entropy_multi", "enable_diff_opt", enable_diff_opt)
    schema = _find_schema(y, Softmax) if enable_softmax_opt else None
    log_y = schema.log_softmax() if schema is not None else ew.safelog(y)
    result = -red.sum(t * log_y, out_axes=out_axes)
    if usebits:
        result = result * (1.0 / math.log(2.0))
    if name is not None:
        result.name = name
    return result


def cross_entropy_binary_inner(y, t, enable_sig_opt: bool = True,
                               enable_diff_opt: bool = True) -> Op:
    """Elementwise -(t log y + (1 - t) log(1 - y)), stable when y is a sigmoid.

    Parameters
    ----------
    y : Op
        The prediction, each element a probability (typically a sigmoid).
    t : Op
        The target.
    enable_sig_opt : bool
        When y is a sigmoid, use the stable softplus form of its logits.
    enable_diff_opt : bool
        Nervana Graph v0.4's switch for the short derivative ``(y - t) * delta`` of a
        sigmoid's cross entropy; the softplus form's derivative is that one already, so
        both settings give the same values and gradients.

    Returns
    -------
    Op
        The elementwise cross entropy.
    """
    y, t = as_op(y), as_op(t)
    _checked_flag("cross_entropy_binary_inner", "enable_diff_opt", enable_diff_opt)
    schema = _find_schema(y, SigmoidSchema) if enable_sig_opt else None
    if schema is not None:
        x = schema.x
        # softplus form: max(x, 0) - x t + log(1 + exp(-|x|)), with max(x, 0) written
        # (x + |x|) / 2 so that its derivative at x = 0 is 1/2 and the whole gradient is
        # sigmoid(x) - t there too (max's derivative at a tie would give 1 - t)
        abs_x = ew.absolute(x)
        return 0.5 * (x + abs_x) - x * t + ew.log(1.0 + ew.exp(-abs_x))
    return -(t * ew.safelog(y) + (1.0 - t) * ew.safelog(1.0 - y))


def cross_entropy_binary(y, t, usebits: bool = False, out_axes: AxesLike = None,
                         enable_sig_opt: bool = True, enable_diff_opt: bool = True,
                         name: Optional[str] = None) -> Op:
    """Binary cross entropy summed over the non-batch axes (one value per example).

    Parameters
    ----------
    y, t : Op
        Prediction and target, with the same axes.
    usebits : bool
        Report the result in bits instead of nats.
    out_axes : Axes, optional
        The axes to keep (default: the batch and recurrent axes).
    enable_sig_opt, enable_diff_opt : bool
        As for `cross_entropy_binary_inner`.
    name : str, optional
        The result's name.

    Returns
    -------
    Op
        The cross entropy, with `out_axes`.

    Raises
    ------
    IncompatibleAxesError
        y and t have different axes.
    """
    y, t = as_op(y), as_op(t)
    _check_same_axes("cross_entropy_binary", y, t)
    result = red.sum(cross_entropy_binary_inner(y, t, enable_sig_opt, enable_diff_opt),
                     out_axes=out_axes)
    if usebits:
        result = result * (1.0 / math.log(2.0))
    if name is not None:
        result.name = name
    return result


def _check_same_axes(what: str, y: Op, t: Op) -> None:
    if not y.axes.is_equal_set(t.axes):
        raise IncompatibleAxesError(
            f"{what}: prediction {y.name} {y.axes} and target {t.name} {t.axes} must have the "
            f"same axes", user_location())


class OneHotOp(Op):
    """1 where the `axis` position equals x's value, else 0; axes (axis,) + x.axes."""

    attributes = ("axis",)
    axis: Axis

    def __init__(self, x, axis: Axis, dtype=None, name: Optional[str] = None):
        super().__init__(as_op(x), axis=axis, dtype=dtype, name=name)

    def infer_axes(self) -> Axes:
        x = self.args[0]
        if self.axis in x.axes:
            raise IncompatibleAxesError(f"one_hot: {self.axis.name} is already an axis of "
                                        f"{x.name}", user_location())
        return Axes(self.axis) + x.axes


def one_hot(x, axis: Axis, dtype=None, name: Optional[str] = None) -> Op:
    """One-hot encode integer labels x along `axis` (its length = number of classes)."""
    return OneHotOp(x, axis, dtype=dtype, name=name)


def squared_L2(x, out_axes: AxesLike = None, reduction_axes: AxesLike = None,
               name: Optional[str] = None) -> Op:
    """Sum of squares of x: over all axes unless `out_axes`/`reduction_axes` say otherwise."""
    x = as_op(x)
    if out_axes is None and reduction_axes is None:
        reduction_axes = x.axes
    return red.sum(x * x, reduction_axes=reduction_axes, out_axes=out_axes, name=name)


def dropout(x, keep: float = 0.5, seed: Optional[int] = None, name: Optional[str] = None) -> Op:
    """Inverted dropout: keep each value with probability `keep`, scaled by 1/keep.

    The mask is drawn afresh on every call (reproducibly by `seed`) and is
    shared along x's batch axis only where x has none; expected values are
    unchanged, so inference simply skips the op.
    """
    x = as_op(x)
    if not 0.0 < keep <= 1.0:
        raise IncompatibleAxesError(f"dropout: keep must lie in (0, 1], not {keep}", user_location())
    if keep == 1.0:
        return x
    mask = ew.less(uniform(x.axes, seed=seed, dtype=x.dtype), keep)
    return ew.multiply(x, ew.Multiply(mask, 1.0 / keep, dtype=x.dtype), name=name)


def moments(x, reduction_axes: AxesLike = None, name: Optional[str] = None):
    """(mean, variance) over `reduction_axes`: by default the batch and recurrent axes.

    These are batch normalization's statistics: one value per feature.
    """
    x = as_op(x)
    if reduction_axes is None:
        reduction_axes = Axes(a for a in x.axes if a.is_batch or a.is_recurrent)
    mean = red.mean(x, reduction_axes=reduction_axes)
    variance = red.mean(ew.square(x - mean), reduction_axes=reduction_axes)
    if name is not None:
        mean.name, variance.name = f"{name}_mean", f"{name}_variance"
    return mean, variance
