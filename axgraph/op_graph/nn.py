"""Neural-network building blocks composed of core axes ops.

softmax and sigmoid attach a *schema* to their result: a record
of how it was computed, so that a cross entropy built on it can use the
stable log-domain form instead of taking the log of a rounded probability.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..axes import Axes, AxesLike, Axis
from ..debug_info import user_location
from ..dtypes import kind_of
from ..errors import AmbiguousAxesError, AxgraphTypeError, AxisLengthError, IncompatibleAxesError
from . import elementwise as ew
from . import reductions as red
from .normalization import checked_axes
from .op import Op
from .random import uniform
from .tensors import as_op, constant


@dataclass(eq=False)
class Softmax:
    """Schema on a softmax result: its logits and normalization axes."""

    x: Op
    normalization_axes: Axes

    def log_softmax(self) -> Op:
        """log(softmax(x)) without rounding the probability first."""
        return LogSoftmaxOp(self.x, self.normalization_axes)


class SoftmaxOp(Op):
    """exp(x - max) / sum(exp(x - max)) over `normalization_axes`, as one op.

    One op rather than max, subtract, exp, sum and divide, so that a backend
    can compute each row in one pass, and its adjoint is the one-pass
    `SoftmaxBackpropOp` rather than the adjoints of five ops. The result has
    x's axes and a float type (x's if it is one, else float32).
    """

    attributes = ("normalization_axes",)
    normalization_axes: Axes
    #: The function's name in messages.
    what = "softmax"

    def __init__(self, x, normalization_axes: AxesLike, name: Optional[str] = None):
        super().__init__(as_op(x), normalization_axes=normalization_axes, name=name)

    def infer_axes(self) -> Axes:
        self.normalization_axes = checked_axes(self.what, self.args[0],
                                               self.normalization_axes, "normalization_axes")
        return self.args[0].axes

    def infer_dtype(self):
        return self._asked_dtype or _float_of(self.args[0].dtype)


class LogSoftmaxOp(SoftmaxOp):
    """log(softmax(x)) over `normalization_axes` in the log domain, as one op:
    x - max - log(sum(exp(x - max)))."""

    what = "log_softmax"


class SoftmaxBackpropOp(Op):
    """The adjoint of a softmax (log=False: y * (delta - sum(delta * y))) or of a
    log-softmax (log=True: delta - exp(y) * sum(delta)), sums over the softmax's
    `normalization_axes`; args (delta, y), where y is the op's value."""

    attributes = ("normalization_axes", "log")
    normalization_axes: Axes
    log: bool
    dtype_of_arg = 1

    def __init__(self, delta, y, normalization_axes: AxesLike, log: bool,
                 name: Optional[str] = None):
        super().__init__(as_op(delta), as_op(y), normalization_axes=normalization_axes,
                         log=log, name=name)

    def infer_axes(self) -> Axes:
        delta, y = self.args
        if not delta.axes.is_equal_set(y.axes):
            raise IncompatibleAxesError(f"softmax backprop: delta {delta.axes} and y {y.axes} "
                                        f"must have the same axes", user_location())
        return y.axes


def _float_of(dtype) -> np.dtype:
    dtype = np.dtype(dtype)
    return dtype if kind_of(dtype) == "f" else np.dtype(np.float32)


@dataclass(eq=False)
class SigmoidSchema:
    """Schema on a sigmoid result: its logits."""

    x: Op


def _default_distribution_axis(what: str, x: Op, argument: str = "normalization_axes") -> Axes:
    """The one axis a softmax-like op normalizes over when it is not told: x's only axis
    that is neither batch nor recurrent.

    Several such axes (a sequence axis ``T`` not flagged ``recurrent=True`` beside the
    classes) could each be the distribution's; guessing would silently normalize over the
    wrong one or over all of them, so the caller is asked instead.

    Parameters
    ----------
    what : str
        The op, as the user called it (``softmax``).
    x : Op
        Its input.
    argument : str
        The op's parameter that names the axes, for the message.

    Returns
    -------
    Axes
        The single candidate axis.

    Raises
    ------
    AmbiguousAxesError
        If x has no such axis, or more than one.
    """
    candidates = x.axes.feature_axes()
    if len(candidates) == 1:
        return candidates
    if candidates:
        found = f"several axes, {candidates}, that are neither batch nor recurrent"
    else:
        found = "no axis that is neither batch nor recurrent"
    raise AmbiguousAxesError(
        f"{what} of {x.name} {x.axes}: {argument} not given, and x has {found}, so the "
        f"axes to normalize over are ambiguous. Pass {argument}= explicitly, or make a "
        f"sequence axis with ng.make_axis(..., recurrent=True) so that defaults leave it "
        f"alone", user_location())


def softmax(x, normalization_axes: AxesLike = None, name: Optional[str] = None, *,
            softmax_axes: AxesLike = None) -> Op:
    """exp(x) / sum(exp(x)) over `normalization_axes`: probabilities from logits.

    Computed as exp(x - max(x)), so large logits do not overflow. The result
    remembers its logits, so `cross_entropy_multi` on it takes the log in
    the log domain instead of the log of a rounded probability.

    Parameters
    ----------
    x : Op or number
        The logits.
    normalization_axes : Axes, Axis or iterable of Axis, optional
        The axes the probabilities sum to 1 over; None: x's one axis that is
        neither batch nor recurrent (an error if there are several).
    name : str, optional
        A name for the result (automatic if None).
    softmax_axes : Axes, Axis or iterable of Axis, optional
        The same as `normalization_axes`, under the name Nervana Graph v0.4 gave it;
        give one or the other.

    Returns
    -------
    Op
        The probabilities, with x's axes.

    Raises
    ------
    UnmatchedAxesError
        If `normalization_axes` holds an axis that x lacks.
    AmbiguousAxesError
        If `normalization_axes` is not given and x has several axes (or none) that
        are neither batch nor recurrent.
    AxgraphTypeError
        If `x` is not an op or a number, the axes are not Axis objects, or both
        `normalization_axes` and `softmax_axes` are given.

    Examples
    --------
    >>> import numpy as np
    >>> import axgraph as ng
    >>> C, N = ng.make_axis(length=3, name="C"), ng.make_axis(length=2, name="N")
    >>> logits = ng.constant(np.array([[0.0, 5.0], [1.0, 5.0], [2.0, 5.0]]), axes=[C, N])
    >>> with ng.make_transformer() as t:
    ...     probs = t.computation(ng.softmax(logits))()   # over C: N is the batch axis
    >>> probs.sum(axis=0).round(5).tolist()
    [1.0, 1.0]
    """
    if softmax_axes is not None:
        if normalization_axes is not None:
            raise AxgraphTypeError("softmax: give normalization_axes or softmax_axes (the same "
                                   "parameter under its older name), not both", user_location())
        normalization_axes = softmax_axes
    x = as_op(x)
    if normalization_axes is None:
        normalization_axes = _default_distribution_axis("softmax", x)
    result = SoftmaxOp(x, normalization_axes, name=name)
    result.schemas.append(Softmax(x, result.normalization_axes))
    return result


def log_softmax(x, normalization_axes: AxesLike = None, name: Optional[str] = None) -> Op:
    """log(softmax(x)) over `normalization_axes`, computed in the log domain.

    x - max(x) - log(sum(exp(x - max(x)))): the shift by the max keeps exp from
    overflowing, and no probability is rounded before its log is taken, so a
    log-probability far below log(float's smallest value) stays finite and exact.

    Parameters
    ----------
    x : Op or number
        The logits, of a float type.
    normalization_axes : Axes, Axis or iterable of Axis, optional
        The axes whose probabilities sum to 1; None: x's one axis that is neither
        batch nor recurrent, as `softmax`.
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        The log-probabilities, with x's axes.

    Raises
    ------
    UnmatchedAxesError
        If `normalization_axes` is empty or holds an axis that x lacks.
    AmbiguousAxesError
        If `normalization_axes` is not given and x has several axes (or none) that
        are neither batch nor recurrent.
    AxgraphTypeError
        If `x` is not an op or a number.
    """
    x = as_op(x)
    if normalization_axes is None:
        normalization_axes = _default_distribution_axis("log_softmax", x)
    axes = checked_axes("log_softmax", x, normalization_axes, "normalization_axes")
    return LogSoftmaxOp(x, axes, name=name)


def sigmoid(x, name: Optional[str] = None, dtype=None) -> Op:
    """The logistic function 1 / (1 + exp(-x)) of each element of x.

    Computed without overflow; the result remembers x, so a
    `cross_entropy_binary` built on it uses the stable log-domain form.

    Parameters
    ----------
    x : Op or number
        The logits.
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The float type to compute in and return; None: x's type if it is a
        float, else float32.

    Returns
    -------
    Op
        Values in [0, 1], with x's axes.

    Raises
    ------
    AxgraphTypeError
        If `x` is not an op or a number.
    DTypeError
        If `dtype` is not a float type.
    """
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
    """The cross entropy -sum(t * log(y)) of predicted probabilities y and targets t.

    Summed over the non-batch axes by default: one value per example. When y
    is a `softmax`, log(y) is taken in the log domain from its logits, so
    the loss and its gradient stay finite where a probability rounds to 0;
    otherwise log(y) is `safelog(y)`.

    Parameters
    ----------
    y : Op
        The predicted probabilities (usually a softmax).
    t : Op
        The targets, with y's axes (one-hot labels, or probabilities).
    usebits : bool, optional
        If True, the result is in bits instead of nats.
    out_axes : Axes, Axis or iterable of Axis, optional
        The axes kept (None: the batch and recurrent axes).
    enable_softmax_opt : bool, optional
        If False, take log(y) as computed even when y is a softmax.
    enable_diff_opt : bool, optional
        Nervana Graph v0.4's switch for the short derivative ``(y - t) * delta`` of the
        logits; the log-domain form's derivative is that one already, so both settings
        give the same values and gradients.
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        The cross entropies, with the axes kept.

    Raises
    ------
    IncompatibleAxesError
        If y and t do not have the same axes.
    UnmatchedAxesError
        If `out_axes` holds an axis that y lacks.
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
    """The binary cross entropy -(t log y + (1 - t) log(1 - y)) at every element.

    When y is a `sigmoid`, it is computed from the logits x in the softplus
    form max(x, 0) - x t + log(1 + exp(-|x|)), which is finite for any x and
    has the gradient sigmoid(x) - t; otherwise the logs are `safelog`.

    Parameters
    ----------
    y : Op
        The predicted probabilities (usually a sigmoid).
    t : Op or number
        The targets, in [0, 1].
    enable_sig_opt : bool, optional
        If False, use y as computed even when it is a sigmoid.
    enable_diff_opt : bool, optional
        Nervana Graph v0.4's switch for the short derivative ``(y - t) * delta`` of the
        logits; the log-domain form's derivative is that one already, so both settings
        give the same values and gradients.

    Returns
    -------
    Op
        The elementwise cross entropies, over the axes of y and t.

    Raises
    ------
    AxgraphTypeError
        If an operand is not an op or a number.
    IncompatibleAxesError
        If y and t hold different axes with the same name.
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
    """The binary cross entropy of probabilities y and targets t, summed per example.

    `cross_entropy_binary_inner` summed over the non-batch axes by default;
    stable in the log domain when y is a `sigmoid`.

    Parameters
    ----------
    y : Op
        The predicted probabilities (usually a sigmoid).
    t : Op
        The targets in [0, 1], with y's axes.
    usebits : bool, optional
        If True, the result is in bits instead of nats.
    out_axes : Axes, Axis or iterable of Axis, optional
        The axes kept (None: the batch and recurrent axes).
    enable_sig_opt : bool, optional
        If False, use y as computed even when it is a sigmoid.
    enable_diff_opt : bool, optional
        Nervana Graph v0.4's switch for the short derivative ``(y - t) * delta`` of the
        logits; the log-domain form's derivative is that one already, so both settings
        give the same values and gradients.
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        The cross entropies, with the axes kept.

    Raises
    ------
    IncompatibleAxesError
        If y and t do not have the same axes.
    UnmatchedAxesError
        If `out_axes` holds an axis that y lacks.
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
    """One-hot encode the integer labels x along the new `axis`.

    Position k of `axis` is 1 where x equals k, else 0: the target form that
    `cross_entropy_multi` compares with a softmax over `axis`. No gradient
    flows through it.

    Parameters
    ----------
    x : Op
        The labels, integers from 0 to axis.length - 1.
    axis : Axis
        The class axis; its length is the number of classes.
    dtype : dtype-like, optional
        The result's element type (None: float32).
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        The encoding, with axes `axis` then x's axes.

    Raises
    ------
    IncompatibleAxesError
        If `axis` is already an axis of x.
    DTypeError
        If `dtype` is not a supported element type.

    Examples
    --------
    >>> import numpy as np
    >>> import axgraph as ng
    >>> C, N = ng.make_axis(length=3, name="C"), ng.make_axis(length=2, name="N")
    >>> labels = ng.constant(np.array([2, 0]), axes=[N], dtype=np.int32)
    >>> with ng.make_transformer() as t:
    ...     print(t.computation(ng.one_hot(labels, C))())
    [[0. 1.]
     [0. 0.]
     [1. 0.]]
    """
    return OneHotOp(x, axis, dtype=dtype, name=name)


def causal_mask(query_axis: Axis, key_axis: Axis, offset: int = 0,
                name: Optional[str] = None) -> Op:
    """Which keys each query may attend to: True where key <= query + offset.

    A boolean constant over (query_axis, key_axis) for ``ng.where(mask, scores, -inf)``
    before a softmax over the keys. With a cache of earlier keys before the queries,
    `offset` is how many there are (the length of key_axis minus that of query_axis).

    Parameters
    ----------
    query_axis : Axis
        The axis of query positions (T).
    key_axis : Axis
        The axis of key positions (K), a different axis from query_axis.
    offset : int, optional
        The key position of query 0 (default 0: query t sees keys 0 to t).
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        A boolean tensor with axes (query_axis, key_axis).

    Raises
    ------
    AxgraphTypeError
        If an axis is not an Axis, or offset is not an int.
    IncompatibleAxesError
        If query_axis and key_axis are the same axis.
    AxisLengthError
        If an axis's length is not a known int.
    """
    for role, axis in (("query_axis", query_axis), ("key_axis", key_axis)):
        if not isinstance(axis, Axis):
            raise AxgraphTypeError(f"causal_mask: {role} must be an Axis, not {axis!r}",
                                   user_location())
        if not isinstance(axis.length, int):
            raise AxisLengthError(f"causal_mask: {role} {axis} needs a known int length",
                                  user_location())
    if not isinstance(offset, int) or isinstance(offset, bool):
        raise AxgraphTypeError(f"causal_mask: offset must be an int, not {offset!r}",
                               user_location())
    if query_axis == key_axis:
        raise IncompatibleAxesError(f"causal_mask: query_axis and key_axis are both {query_axis}"
                                    f"; the keys need an axis of their own", user_location())
    visible = (np.arange(key_axis.length)[np.newaxis, :]
               <= np.arange(query_axis.length)[:, np.newaxis] + offset)
    return constant(visible, axes=[query_axis, key_axis], dtype=np.bool_, name=name)


def squared_L2(x, out_axes: AxesLike = None, reduction_axes: AxesLike = None,
               name: Optional[str] = None) -> Op:
    """The sum of squares of x, over all of its axes unless told otherwise.

    Parameters
    ----------
    x : Op or number
        The tensor.
    out_axes : Axes, Axis or iterable of Axis, optional
        The axes kept, instead of naming those summed.
    reduction_axes : Axes, Axis or iterable of Axis, optional
        The axes summed over (None with no `out_axes`: all of x's).
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        The sums of squares, with the axes kept (a scalar by default).

    Raises
    ------
    UnmatchedAxesError
        If `reduction_axes` or `out_axes` holds an axis that x lacks.
    IncompatibleAxesError, DuplicateAxisError
        If both are given and they leave out an axis of x, or share one.
    """
    x = as_op(x)
    if out_axes is None and reduction_axes is None:
        reduction_axes = x.axes
    return red.sum(x * x, reduction_axes=reduction_axes, out_axes=out_axes, name=name)


def dropout(x, keep: float = 0.5, seed: Optional[int] = None, name: Optional[str] = None,
            training=True) -> Op:
    """Inverted dropout: keep each value with probability `keep`, scaled by 1/keep.

    The mask is drawn afresh on every call, one draw per element of x
    (reproducibly by `seed`); scaling the kept values keeps expected values
    unchanged, so at inference dropout is the identity. `training` says when
    it applies: ``False`` builds no dropout at all; a scalar placeholder lets
    one graph serve both, chosen per call.

    Parameters
    ----------
    x : Op or number
        The values dropped out.
    keep : float, optional
        The probability of keeping each value, in (0, 1]; 1 returns x itself.
    seed : int, optional
        The seed of the mask's random stream (None: the next one from
        `set_random_seed`'s sequence).
    name : str, optional
        A name for the result (automatic if None).
    training : bool or Op, optional
        True (the default): drop out. False: return x itself. A scalar op (a
        boolean placeholder, or a numeric one holding 0 or 1): drop out where
        it is true (nonzero) when the computation runs, else pass x through.

    Returns
    -------
    Op
        x with dropped values set to 0 and kept ones divided by `keep` (x itself
        when not training).

    Raises
    ------
    IncompatibleAxesError
        If `keep` is not in (0, 1].
    AxgraphTypeError
        If `training` is neither a bool nor an op without axes.

    Examples
    --------
    >>> import numpy as np
    >>> import axgraph as ng
    >>> C = ng.make_axis(length=4, name="C")
    >>> x, training = ng.placeholder([C]), ng.placeholder((), dtype=np.bool_)
    >>> y = ng.dropout(x, keep=0.5, training=training)
    >>> with ng.make_transformer() as t:
    ...     step = t.computation(y, x, training)
    ...     print(step(np.ones(4), False))    # inference: x unchanged
    [1. 1. 1. 1.]
    """
    x = as_op(x)
    if not 0.0 < keep <= 1.0:
        raise IncompatibleAxesError(f"dropout: keep must lie in (0, 1], not {keep}", user_location())
    if isinstance(training, (bool, np.bool_)):
        if not training:
            return x
        switch = None
    elif isinstance(training, Op) and not training.axes:
        switch = training
    else:
        raise AxgraphTypeError(f"dropout: training must be True, False or a scalar op (a "
                               f"placeholder without axes), not {training!r}", user_location())
    if keep == 1.0:
        return x
    mask = ew.less(uniform(x.axes, seed=seed, dtype=x.dtype), keep)
    if switch is None:
        return ew.multiply(x, ew.Multiply(mask, 1.0 / keep, dtype=x.dtype), name=name)
    dropped = ew.multiply(x, ew.Multiply(mask, 1.0 / keep, dtype=x.dtype))
    return ew.where(switch, dropped, x, name=name)


def moments(x, reduction_axes: AxesLike = None, name: Optional[str] = None):
    """The mean and the population variance of x over `reduction_axes`.

    By default over the batch and recurrent axes: batch normalization's
    statistics, one value per feature.

    Parameters
    ----------
    x : Op or number
        The tensor.
    reduction_axes : Axes, Axis or iterable of Axis, optional
        The axes reduced (None: the batch and recurrent axes).
    name : str, optional
        If given, the results are named `name`_mean and `name`_variance.

    Returns
    -------
    tuple of Op
        (mean, variance), each with x's other axes.

    Raises
    ------
    UnmatchedAxesError
        If `reduction_axes` holds an axis that x lacks.
    """
    x = as_op(x)
    if reduction_axes is None:
        reduction_axes = Axes(a for a in x.axes if a.is_batch or a.is_recurrent)
    mean = red.mean(x, reduction_axes=reduction_axes)
    variance = red.mean(ew.square(x - mean), reduction_axes=reduction_axes)
    if name is not None:
        mean.name, variance.name = f"{name}_mean", f"{name}_variance"
    return mean, variance
