"""Optimizers of the neon frontend: one op that performs a whole training step.

    optimizer = GradientDescentMomentum(0.1, momentum_coef=0.9)
    step = ng.sequential([optimizer(loss), loss])
    train = transformer.computation(step, x, y)   # one call = one training step

The op returned by ``optimizer(cost, variables=None)`` has no value. When run
it does, in order:

1. computes the cost and the gradient of every variable (one backward pass,
   ``deriv_many``) before any variable changes, so every gradient sees the
   same parameters (and ``sequential([update, loss])`` returns the loss of the
   parameters the step started from);
2. forms each variable's *effective gradient*, in neon's order::

       g = s * clip(grad, -c, c) + wdecay * theta

   where c is ``gradient_clip_value`` (no clipping when None) and
   ``s = gradient_clip_norm / max(||grad||, gradient_clip_norm)``, ``||grad||``
   being the L2 norm of all the (unclipped) gradients together (s = 1 when
   ``gradient_clip_norm`` is None);
3. updates each variable and its state with its class's rule (below) at the
   learning rate ``alpha = schedule.get_learning_rate(learning_rate, t)``;
4. increments the iteration count t, a persistent int32 scalar that starts
   at 0 (``optimizer.iteration``): t counts training steps, not epochs.

All of it is built inside ``ng.Op.saved_user_deps()``, so the updates run only
in computations that name the update op, never as a side effect of others.

The cost. A cost with axes is summed over all of them and divided by the
length of its batch axis (1 without one), as Nervana Graph v0.4 did: a cost
per example gives the batch mean, and a cost per example and time step (axes
REC, N) gives the batch mean of the sum over time, so its steps are T times
those of the mean over every element. A scalar cost is used as it is.

Signatures follow Nervana Graph v0.4, whose programs pass these arguments by
position: ``GradientDescentMomentum(learning_rate, momentum_coef,
stochastic_round, wdecay, ...)`` and ``RMSProp(decay_rate, learning_rate,
epsilon, ...)``; Adam and Adagrad (not in v0.4) take ngraph's later order.
Weight decay comes last where v0.4 had none.
"""
from __future__ import annotations

import abc
import functools
import math

import numbers
from typing import Callable, Dict, List, Optional, Sequence, Tuple, cast

import numpy as np

from ... import autodiff
from ...axes import make_axis
from ...debug_info import user_location
from ...dtypes import DEFAULT_DTYPE, is_bfloat16, kind_of, result_type
from ...errors import (AxgraphError, AxgraphTypeError, AxgraphValueError, DTypeError,
                      GraphError)
from ...op_graph import control, elementwise as ew, nn, reductions as red
from ...op_graph.op import Op
from ...op_graph.tensors import as_op
from ...op_graph.tensors import AssignableTensorOp, constant, persistent_tensor, placeholder

# -- learning-rate schedules ------------------------------------------------------


def _const(value: float, dtype) -> Op:
    """The learning rate as a scalar op of `dtype` (it is exposed as learning_rate_op)."""
    return constant(float(value), dtype=dtype)


def _as_float(op: Op, dtype) -> Op:
    """`op`'s value converted to `dtype` (an add of 0 whose result type is `dtype`)."""
    return ew.add(op, 0, dtype=dtype)


def _floor_divide(iteration: Op, k: int) -> Op:
    """floor(t / k) for the iteration count t."""
    return ew.floor(ew.divide(iteration, k))


def _count_reached(iteration: Op, steps: Sequence[int], dtype) -> Op:
    """How many of `steps` the count t has reached (t >= step), as a float."""
    reached = [ew.multiply(ew.greater_equal(iteration, int(step)), 1, dtype=dtype) for step in steps]
    total = reached[0]
    for term in reached[1:]:
        total = total + term
    return total


def _check_steps(step_config, what: str) -> List[int]:
    steps = [int(s) for s in step_config]
    if any(s < 0 for s in steps) or any(b <= a for a, b in zip(steps, steps[1:])):
        raise AxgraphValueError(f"{what}: step_config must be increasing non-negative iterations, "
                         f"got {list(step_config)}", user_location())
    return steps


class Schedule:
    """The learning rate as a function of the iteration count t (neon's Schedule).

    * ``Schedule()``: constant, ``alpha(t) = learning_rate``;
    * ``Schedule(step_config=[2, 6], change=0.5)``: multiplied by ``change`` at
      each listed iteration: ``alpha(t) = learning_rate * change ** #{s : t >= s}``
      (1.0 for t < 2, 0.5 for 2 <= t < 6, 0.25 from t = 6 with learning_rate 1);
    * ``Schedule(step_config=k, change=c)`` with an int k: multiplied by c every
      k iterations, ``alpha(t) = learning_rate * c ** floor(t / k)``.

    t counts training steps (the optimizer's ``iteration``), not epochs. A
    schedule is given to an optimizer as ``schedule=``; the optimizer builds
    the rate op with ``get_learning_rate``.

    Parameters
    ----------
    step_config : None, int or list of int, default None
        None for a constant rate; a list of increasing non-negative
        iterations at which the rate is multiplied by `change`; or a positive
        int k: multiply every k iterations.
    change : float, default 1.0
        The factor applied at each step.

    Raises
    ------
    AxgraphTypeError
        When `change` is a list (StepSchedule takes lists of rates) or
        `step_config` is of another kind.
    AxgraphValueError
        When `step_config` is a non-positive int, or a list that is not
        increasing or has a negative entry.

    Examples
    --------
    >>> import numpy as np, axgraph as ng
    >>> t = ng.placeholder((), dtype=np.int32)
    >>> rate = Schedule(step_config=[2, 6], change=0.5).get_learning_rate(1.0, t)
    >>> with ng.NumPyTransformer() as transformer:
    ...     at = transformer.computation(rate, t)
    ...     print([float(at(i)) for i in (0, 1, 2, 5, 6, 7)])
    [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]
    """

    change: float | List[float]  # StepSchedule's is its list of rates

    def __init__(self, step_config=None, change: float = 1.0):
        if isinstance(change, (list, tuple)):
            raise AxgraphTypeError("Schedule takes one change factor; to set the rate to given values at "
                            "given iterations use StepSchedule(step_config, change)", user_location())
        if isinstance(step_config, bool) or not (
                step_config is None or isinstance(step_config, (numbers.Integral, list, tuple))):
            raise AxgraphTypeError(f"Schedule step_config must be None, an int or a list of iterations, "
                            f"not {step_config!r}", user_location())
        if isinstance(step_config, numbers.Integral) and step_config < 1:
            raise AxgraphValueError(f"Schedule step_config must be a positive int, got {step_config}", user_location())
        if isinstance(step_config, (list, tuple)):
            step_config = _check_steps(step_config, "Schedule")
        self.step_config = step_config
        self.change = float(change)

    def get_learning_rate(self, learning_rate: float, iteration: Op, dtype=np.float32) -> Op:
        """An op: the learning rate at iteration count `iteration` (int32 scalar op).

        Parameters
        ----------
        learning_rate : float
            The base rate (the optimizer's `learning_rate`).
        iteration : Op
            A scalar integer op: the number of steps taken so far.
        dtype : numpy dtype, default numpy.float32
            The element type of the rate (the optimizer passes its variables').

        Returns
        -------
        Op
            A scalar op: the rate at `iteration`.
        """
        rate = _const(learning_rate, dtype)
        if self.step_config is None or self.change == 1.0:
            return rate
        if isinstance(self.step_config, list):
            if not self.step_config:
                return rate
            steps = _count_reached(iteration, self.step_config, dtype)
        else:
            steps = _as_float(_floor_divide(iteration, self.step_config), dtype)
        return rate * ew.power(self.change, steps)

    def learning_rate_at(self, learning_rate: float, step: int, dtype=np.float32) -> float:
        """The rate at iteration count `step`, as a number (for logs and histories).

        It is the value of the op ``get_learning_rate`` builds, computed by a
        small NumPy computation the schedule keeps (one per rate and dtype,
        for 1024 steps at a time), so a subclass that only overrides
        ``get_learning_rate`` is evaluated by its own formula.

        Parameters
        ----------
        learning_rate : float
            The base rate (the optimizer's `learning_rate`).
        step : int
            The number of steps taken so far (>= 0).
        dtype : numpy dtype, default numpy.float32
            The element type the rate is computed in (the optimizer's).

        Returns
        -------
        float
            The rate the optimizer uses in the step after `step` steps.

        Raises
        ------
        AxgraphValueError
            When `step` is not a non-negative int.

        Examples
        --------
        >>> halved = StepSchedule([2], [0.5])
        >>> [halved.learning_rate_at(1.0, t) for t in range(4)]
        [1.0, 1.0, 0.5, 0.5]
        """
        if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0:
            raise AxgraphValueError(f"learning_rate_at: step must be a non-negative int, got "
                                    f"{step!r}", user_location())
        key = (float(learning_rate), np.dtype(dtype).str)
        evaluators = self.__dict__.setdefault("_evaluators", {})
        if key not in evaluators:
            evaluators[key] = _RateTable(self, *key)
        return evaluators[key](int(step))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(step_config={self.step_config!r}, change={self.change})"


class _RateTable:
    """A schedule's rates as numbers: its op evaluated by a NumPy transformer of its own,
    for `BLOCK` consecutive steps per call (one call costs what a few hundred lookups do)."""

    BLOCK = 1024
    KEPT_BLOCKS = 4

    def __init__(self, schedule: "Schedule", learning_rate: float, dtype: str):
        from ...transformers.nptransform import NumPyTransformer

        steps_axis = make_axis(self.BLOCK, name="steps")
        self._steps = placeholder([steps_axis], dtype=np.int32, name="steps")
        rate = schedule.get_learning_rate(learning_rate, self._steps, np.dtype(dtype))
        self._compute = NumPyTransformer().computation(rate, self._steps)
        self._blocks: Dict[int, np.ndarray] = {}

    def __call__(self, step: int) -> float:
        block, offset = divmod(step, self.BLOCK)
        if block not in self._blocks:
            if len(self._blocks) >= self.KEPT_BLOCKS:
                del self._blocks[next(iter(self._blocks))]
            first = block * self.BLOCK
            steps = np.arange(first, first + self.BLOCK, dtype=np.int64)
            steps = np.minimum(steps, np.iinfo(np.int32).max).astype(np.int32)
            rates = np.asarray(self._compute(steps))  # a schedule may ignore t: broadcast
            self._blocks[block] = np.broadcast_to(rates, (self.BLOCK,))
        return float(self._blocks[block][offset])


class PowerSchedule(Schedule):
    """Multiply the rate by `change` every `step_config` iterations (neon's PowerSchedule).

    ``alpha(t) = learning_rate * change ** floor(t / step_config)``: the same
    as ``Schedule(step_config, change)`` with an int.

    Parameters
    ----------
    step_config : int
        The period k, in iterations (positive).
    change : float
        The factor applied every k iterations.

    Raises
    ------
    AxgraphTypeError
        When `step_config` is not an int.
    AxgraphValueError
        When `step_config` is not positive.

    Examples
    --------
    >>> import numpy as np, axgraph as ng
    >>> t = ng.placeholder((), dtype=np.int32)
    >>> rate = PowerSchedule(step_config=2, change=0.5).get_learning_rate(1.0, t)
    >>> with ng.NumPyTransformer() as transformer:
    ...     at = transformer.computation(rate, t)
    ...     print([float(at(i)) for i in (0, 1, 2, 3, 4)])
    [1.0, 1.0, 0.5, 0.5, 0.25]
    """

    def __init__(self, step_config: int, change: float):
        if isinstance(step_config, bool) or not isinstance(step_config, numbers.Integral):
            raise AxgraphTypeError(f"PowerSchedule step_config must be an int, not {step_config!r}", user_location())
        super().__init__(step_config, change)


class StepSchedule(Schedule):
    """Set the rate to ``change[i]`` from iteration ``step_config[i]`` on (neon's StepSchedule).

    ``StepSchedule([2, 6], [0.6, 0.4])`` gives learning_rate for t < 2, 0.6 for
    2 <= t < 6 and 0.4 from t = 6: the values replace the rate, they do not scale it.

    Parameters
    ----------
    step_config : list of int
        Increasing non-negative iterations at which the rate changes.
    change : list of float
        The rate from each of those iterations on (one per iteration).

    Raises
    ------
    AxgraphTypeError
        When `step_config` or `change` is not a list (or tuple).
    AxgraphValueError
        When their lengths differ, or `step_config` is not increasing or
        has a negative entry.

    Examples
    --------
    >>> import numpy as np, axgraph as ng
    >>> t = ng.placeholder((), dtype=np.int32)
    >>> rate = StepSchedule([2, 6], [0.6, 0.4]).get_learning_rate(1.0, t, dtype=np.float64)
    >>> with ng.NumPyTransformer() as transformer:
    ...     at = transformer.computation(rate, t)
    ...     print([float(at(i)) for i in (0, 1, 2, 5, 6, 7)])
    [1.0, 1.0, 0.6, 0.6, 0.4, 0.4]
    """

    change: List[float]

    def __init__(self, step_config: Sequence[int], change: Sequence[float]):
        if not isinstance(step_config, (list, tuple)) or not isinstance(change, (list, tuple)):
            raise AxgraphTypeError("StepSchedule takes a list of iterations and a list of rates", user_location())
        if len(step_config) != len(change):
            raise AxgraphValueError(f"StepSchedule: {len(step_config)} iterations but {len(change)} rates", user_location())
        self.step_config = _check_steps(step_config, "StepSchedule")
        self.change = [float(c) for c in change]

    def get_learning_rate(self, learning_rate: float, iteration: Op, dtype=np.float32) -> Op:
        # A sum of jumps: alpha(t) = lr + sum_i (change[i] - change[i-1]) * [t >= s_i].
        rate: Op = _const(learning_rate, dtype)
        previous = float(learning_rate)
        for step, value in zip(self.step_config, self.change):
            reached = ew.multiply(ew.greater_equal(iteration, step), 1, dtype=dtype)
            rate = rate + (value - previous) * reached
            previous = value
        return rate


class ExpSchedule(Schedule):
    """``alpha(t) = learning_rate / (1 + decay * t)`` (neon's ExpSchedule: inverse-time decay).

    Despite the name this is not exponential decay; it is the formula neon's
    ExpSchedule documents and implements, kept for compatibility.

    Parameters
    ----------
    decay : float
        The decay rate (>= 0); 0 keeps the rate constant.

    Raises
    ------
    AxgraphValueError
        When `decay` is negative.

    Examples
    --------
    >>> import numpy as np, axgraph as ng
    >>> t = ng.placeholder((), dtype=np.int32)
    >>> rate = ExpSchedule(decay=0.5).get_learning_rate(1.0, t, dtype=np.float64)
    >>> with ng.NumPyTransformer() as transformer:
    ...     at = transformer.computation(rate, t)
    ...     print([float(at(i)) for i in (0, 2, 6)])
    [1.0, 0.5, 0.25]
    """

    def __init__(self, decay: float):
        if decay < 0:
            raise AxgraphValueError(f"ExpSchedule decay must be >= 0, got {decay}", user_location())
        self.decay = float(decay)

    def get_learning_rate(self, learning_rate: float, iteration: Op, dtype=np.float32) -> Op:
        t = _as_float(iteration, dtype)
        return _const(learning_rate, dtype) / (1.0 + self.decay * t)

    def __repr__(self) -> str:
        return f"ExpSchedule(decay={self.decay})"


def _check_count(value, what: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
        raise AxgraphValueError(f"{what} must be an int >= {least}, got {value!r}",
                                user_location())
    return int(value)


class WarmupCosineSchedule(Schedule):
    """A linear warmup to the rate, then a cosine decay to `min_rate` (the transformer schedule).

    With w = `warmup_steps` and T = `total_steps`::

        alpha(t) = learning_rate * (t + 1) / w                        for t < w
        alpha(t) = min_rate + (learning_rate - min_rate)
                   * (1 + cos(pi * min(t - w, T - w) / (T - w))) / 2   for t >= w

    so the first step already moves (rate / w), step w - 1 uses the full rate,
    step w starts the cosine at the full rate and the rate reaches `min_rate` at
    step T and stays there. It equals PyTorch's ``SequentialLR`` of
    ``LinearLR(start_factor=1/w, total_iters=w-1)`` and
    ``CosineAnnealingLR(T_max=T-w, eta_min=min_rate)`` with milestone w, up to step T.

    Parameters
    ----------
    warmup_steps : int
        Steps of linear warmup (>= 0; 0 starts the cosine at once).
    total_steps : int
        The step at which the rate reaches `min_rate` (> `warmup_steps`).
    min_rate : float, default 0.0
        The final rate (>= 0), in the same units as the optimizer's `learning_rate`.

    Raises
    ------
    AxgraphValueError
        When a step count is not an int, `total_steps` is not above
        `warmup_steps`, or `min_rate` is negative.

    Examples
    --------
    >>> schedule = WarmupCosineSchedule(warmup_steps=2, total_steps=4)
    >>> [round(schedule.learning_rate_at(1.0, t), 4) for t in range(6)]
    [0.5, 1.0, 1.0, 0.5, 0.0, 0.0]
    """

    def __init__(self, warmup_steps: int, total_steps: int, min_rate: float = 0.0):
        self.warmup_steps = _check_count(warmup_steps, "WarmupCosineSchedule warmup_steps", 0)
        self.total_steps = _check_count(total_steps, "WarmupCosineSchedule total_steps",
                                        self.warmup_steps + 1)
        if isinstance(min_rate, bool) or not isinstance(min_rate, numbers.Real) \
                or not float(min_rate) >= 0:
            raise AxgraphValueError(f"WarmupCosineSchedule min_rate must be a number >= 0, got "
                                    f"{min_rate!r}", user_location())
        self.min_rate: float = float(min_rate)

    def get_learning_rate(self, learning_rate: float, iteration: Op, dtype=np.float32) -> Op:
        warmup, decay_steps = self.warmup_steps, self.total_steps - self.warmup_steps
        t = _as_float(iteration, dtype)
        progress = ew.minimum(ew.maximum(t - warmup, 0.0), float(decay_steps)) / decay_steps
        span = float(learning_rate) - self.min_rate
        rate = self.min_rate + (0.5 * span) * (1.0 + ew.cos(math.pi * progress))
        if warmup:
            rate = ew.where(ew.less(t, warmup), (float(learning_rate) / warmup) * (t + 1.0), rate)
        return ew.add(rate, 0, dtype=dtype)

    def __repr__(self) -> str:
        return (f"WarmupCosineSchedule(warmup_steps={self.warmup_steps}, "
                f"total_steps={self.total_steps}, min_rate={self.min_rate})")


# -- the optimizer driver -----------------------------------------------------------


class OptimizerError(AxgraphError, ValueError):
    """An optimizer setting that cannot work (a negative rate, stochastic rounding, ...)."""


def _check_nonnegative(name: str, value) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not value >= 0:  # type: ignore[operator]  # typeshed's Real declares no >=
        raise OptimizerError(f"{name} must be a non-negative number, got {value!r}",
                             user_location())
    return float(value)


def _reduced_cost(cost: Op) -> Op:
    """The scalar to differentiate: sum over all axes / batch length (v0.4's rule)."""
    if not cost.axes:
        return cost
    total = red.sum(cost, out_axes=())
    return total / red.batch_size(cost, dtype=total.dtype)


class Optimizer(abc.ABC):
    """Base of the optimizers: gradients, clipping, weight decay, schedule, counter.

    Subclasses give the per-variable rule in `_updates`. After a call,
    `iteration` is the step counter and `learning_rate_op` the rate op of the
    last update op built (a computation of it shows the current rate).

    Parameters
    ----------
    learning_rate : float
        The base learning rate (>= 0), before the schedule.
    wdecay : float, default 0.0
        L2 weight decay: ``wdecay * theta`` is added to every effective gradient.
    gradient_clip_norm : float or None, default None
        Scale all gradients together so their joint L2 norm is at most this
        (None: no scaling).
    gradient_clip_value : float or None, default None
        Clip each gradient element to [-value, value] (None: no clipping).
    schedule : Schedule or None, default None
        The learning rate as a function of the iteration count; None keeps
        it constant.
    name : str or None, default None
        Prefix of the optimizer's state tensors and step op; None is the class name.
    master_weights : bool, default False
        Mixed precision: keep a float32 master copy of every bfloat16 or
        float16 variable; the update is applied to the copy and the variable
        is set to it rounded (see ``Optimizer``). Keyword only.

    Attributes
    ----------
    iteration : AssignableTensorOp or None
        The step counter of the last step op built (an int32 scalar).
    learning_rate_op : Op or None
        The rate op of the last step op built.
    slots : dict of variable to dict of str to AssignableTensorOp
        Each trained variable's optimizer state, by name ("m", "v",
        "velocity", ..., and "master" for a master copy): what a checkpoint
        of the training run saves beside `iteration`.

    Raises
    ------
    OptimizerError
        When a rate, coefficient, epsilon or clipping bound is negative or
        not a number.

    Notes
    -----
    Mixed precision (``master_weights=True``): the forward and backward pass
    use the variables as they are (bfloat16, say), so they run at that
    precision; each such variable's gradient is converted to float32 and the
    rule updates a float32 master copy (made from the variable's initial
    value), so that updates far smaller than the variable's rounding step
    still accumulate; the variable is then set to the master rounded to its
    type. Clipping, weight decay and the optimizer's state are all float32.
    Variables that already are float32 or float64 are updated as usual.
    """

    def __init__(self, learning_rate: float, wdecay: float = 0.0,
                 gradient_clip_norm: Optional[float] = None,
                 gradient_clip_value: Optional[float] = None,
                 schedule: Optional[Schedule] = None, name: Optional[str] = None, *,
                 master_weights: bool = False):
        self.name = name if name is not None else type(self).__name__
        self.learning_rate: float = _check_nonnegative("learning_rate", learning_rate) or 0.0
        self.wdecay = _check_nonnegative("wdecay", wdecay)
        self.gradient_clip_norm = _check_nonnegative("gradient_clip_norm", gradient_clip_norm)
        self.gradient_clip_value = _check_nonnegative("gradient_clip_value", gradient_clip_value)
        self.schedule = Schedule() if schedule is None else schedule
        self.master_weights = bool(master_weights)
        self.iteration: Optional[AssignableTensorOp] = None
        self.learning_rate_op: Optional[Op] = None
        self.slots: Dict[AssignableTensorOp, Dict[str, AssignableTensorOp]] = {}
        self._dtype = np.dtype(DEFAULT_DTYPE)
        self._built: Dict[Op, Dict[str, AssignableTensorOp]] = {}
        self._trained: Dict[Op, Op] = {}   # what each updated tensor trains (a master: its variable)

    def __call__(self, cost, variables: Optional[Sequence[Op]] = None) -> Op:
        """One op, without a value, that performs a training step on `variables`.

        Running it computes every gradient first, then updates the variables
        and the optimizer's state and increments `iteration` (the module
        docstring gives the order and the rules). Pair it with the loss,
        ``ng.sequential([optimizer(cost), cost])``, so that one call of a
        computation is one step and returns the loss.

        Parameters
        ----------
        cost : Op
            The cost: a scalar, or a tensor that is summed over all its axes
            and divided by its batch axis's length (v0.4's rule).
        variables : sequence of Op or None, default None
            The variables to train; None means every trainable variable the
            cost depends on.

        Returns
        -------
        Op
            The step op (no value), built inside ``ng.Op.saved_user_deps()``
            so it runs only in computations that name it.

        Raises
        ------
        axgraph.GraphError
            When there is no variable to train, an element of `variables` is
            not a variable, or one is listed twice.
        axgraph.DTypeError
            When a variable is not of a floating-point type.
        axgraph.AxgraphTypeError
            When the cost has no value to differentiate (an assign, a step op).
        axgraph.NotDifferentiableError
            When the cost depends on a variable through an op without a derivative.
        """
        cost = as_op(cost)
        with Op.saved_user_deps():
            cost = _reduced_cost(cost)
            variables = _checked_variables(cost, variables)
            dtype = _update_dtype(functools.reduce(result_type, [v.dtype for v in variables]))
            gradients = autodiff.deriv_many(cost, variables)
            iteration = persistent_tensor((), dtype=np.int32, initial_value=0,
                                          name=f"{self.name}_iteration")
            rate = self.schedule.get_learning_rate(self.learning_rate, iteration, dtype)
            step_number = _as_float(iteration + 1, dtype)
            self._built = {}
            masters = {v: self._master(v) for v in variables if self._keeps_master(v)}
            targets = [masters.get(v, v) for v in variables]
            self._trained = dict(zip(targets, variables))
            gradients = [_as_float(g, t.dtype) if t is not v else g
                         for g, t, v in zip(gradients, targets, variables)]
            effective = self._effective_gradients(targets, gradients)
            shared = self._shared(step_number)
            updates: List[Op] = []
            for target, gradient in zip(targets, effective):
                updates.extend(self._updates(target, gradient, rate, shared))
            rounded = [control.assign(v, _as_float(m, v.dtype)) for v, m in masters.items()]
            increment = control.assign(iteration, iteration + 1)
            step = control.doall([cost, *effective, *updates, *rounded, increment],
                                 name=f"{self.name}_step")
        self.iteration, self.learning_rate_op, self._dtype = iteration, rate, np.dtype(dtype)
        self.slots = {v: {**({"master": masters[v]} if v in masters else {}),
                          **self._built.get(t, {})} for v, t in zip(variables, targets)}
        return step

    def _keeps_master(self, variable: AssignableTensorOp) -> bool:
        return self.master_weights and np.dtype(variable.dtype).itemsize < 4

    def _master(self, variable: AssignableTensorOp) -> AssignableTensorOp:
        """The float32 master copy of `variable`, initialized from its initial value."""
        return persistent_tensor(variable.axes, dtype=np.float32,
                                 initial_value=_as_float(variable, np.float32),
                                 name=f"{variable.name}_master")

    def learning_rate_at(self, step: int) -> float:
        """The learning rate of the step taken after `step` steps, as a number.

        The schedule's value at `step` (``Schedule.learning_rate_at``), in the
        type the last step op built computes its rate in (float32 before any).

        Parameters
        ----------
        step : int
            Steps taken so far (>= 0).

        Returns
        -------
        float
            The rate.

        Raises
        ------
        AxgraphValueError
            When `step` is not a non-negative int.

        Examples
        --------
        >>> optimizer = Adam(0.1, schedule=WarmupCosineSchedule(warmup_steps=4, total_steps=8))
        >>> [round(optimizer.learning_rate_at(t), 4) for t in (0, 3, 8)]
        [0.025, 0.1, 0.0]
        """
        return self.schedule.learning_rate_at(self.learning_rate, step, self._dtype)

    def _effective_gradients(self, variables: Sequence[Op], gradients: List[Op]) -> List[Op]:
        scale = None
        if self.gradient_clip_norm is not None:
            squares = [nn.squared_L2(g) for g in gradients]
            total = squares[0]
            for term in squares[1:]:
                total = total + term
            norm = ew.sqrt(total)
            clip_norm = self.gradient_clip_norm
            scale = clip_norm / ew.maximum(norm, clip_norm)
        result = []
        for variable, gradient in zip(variables, gradients):
            if self.gradient_clip_value is not None:
                c = self.gradient_clip_value
                gradient = ew.minimum(ew.maximum(gradient, -c), c)
            if scale is not None:
                gradient = scale * gradient
            if self.wdecay:
                gradient = gradient + self.wdecay * variable
            result.append(gradient)
        return result

    def _shared(self, step_number: Op) -> Dict[str, Op]:
        """Scalars every variable's rule uses, built once (t, the 1-based step number, has
        the variables' float dtype)."""
        return {}

    def _state(self, variable: Op, what: str) -> AssignableTensorOp:
        """A zero-initialized persistent tensor shaped like `variable`, recorded in `slots`."""
        tensor = persistent_tensor(variable.axes, dtype=_update_dtype(variable.dtype),
                                   initial_value=0.0, name=f"{variable.name}_{what}")
        self._built.setdefault(variable, {})[what] = tensor
        return tensor

    @abc.abstractmethod
    def _updates(self, variable: Op, grad: Op, rate: Op, shared: Dict[str, Op]) -> List[Op]:
        """The assigns that update `variable` (and its optimizer state) from its gradient."""


def _update_dtype(dtype: np.dtype) -> np.dtype:
    """The type an optimizer keeps its state and scalars in for variables of `dtype`:
    float32 for bfloat16, whose 8-bit significand rounds beta_2 = 0.999 to 1 and drops
    small updates (the update is rounded once, as it is written into the variable);
    every other float type computes in itself."""
    return np.dtype(DEFAULT_DTYPE) if is_bfloat16(dtype) else dtype


def _checked_variables(cost: Op, variables: Optional[Sequence[Op]]) -> List[AssignableTensorOp]:
    variables = list(cost.variables() if variables is None else variables)
    if not variables:
        raise GraphError(f"optimizer: cost {cost.name} depends on no trainable variable",
                         user_location())
    seen = set()
    for variable in variables:
        if not (isinstance(variable, AssignableTensorOp) and variable.persistent
                and not variable.constant and not variable.input):
            raise GraphError(f"optimizer: {getattr(variable, 'name', variable)!r} is not a variable "
                             f"(a persistent, non-constant stored tensor)", user_location())
        if kind_of(variable.dtype) != "f":
            raise DTypeError(f"optimizer: variable {variable.name} {variable.axes} has dtype "
                             f"{variable.dtype}; only floating-point variables can be trained",
                             user_location())
        if variable in seen:
            raise GraphError(f"optimizer: variable {variable.name} is listed twice", user_location())
        seen.add(variable)
    return cast(List[AssignableTensorOp], variables)  # each checked above


# -- the update rules ------------------------------------------------------------------


class GradientDescentMomentum(Optimizer):
    """Stochastic gradient descent with momentum (neon's GradientDescentMomentum).

    With effective gradient g (module docstring), rate alpha, momentum mu::

        v' = mu * v - alpha * g
        theta' = theta + v'                      (nesterov=False)
        theta' = theta + mu * v' - alpha * g     (nesterov=True)

    The velocity v starts at 0. `stochastic_round` (v0.4's third argument) must
    stay False: rounding to reduced precision is not implemented.
    Call the optimizer on a cost to get the op of one training step (see
    ``Optimizer.__call__`` and the module docstring).

    Parameters
    ----------
    learning_rate : float
        The base learning rate alpha (>= 0), before the schedule.
    momentum_coef : float, default 0.0
        The momentum mu (>= 0); 0 is plain SGD (no velocity is kept).
    stochastic_round : bool, default False
        v0.4's reduced-precision rounding; must be False.
    wdecay : float, default 0.0
        L2 weight decay: ``wdecay * theta`` is added to every effective gradient.
    gradient_clip_norm : float or None, default None
        Scale all gradients together so their joint L2 norm is at most this
        (None: no scaling).
    gradient_clip_value : float or None, default None
        Clip each gradient element to [-value, value] (None: no clipping).
    name : str or None, default None
        Prefix of the optimizer's state tensors and step op; None is the class name.
    schedule : Schedule or None, default None
        The learning rate as a function of the iteration count; None keeps
        it constant.
    nesterov : bool, default False
        Use Nesterov's momentum (the step looks ahead along the velocity).
    master_weights : bool, default False
        Mixed precision: keep a float32 master copy of every bfloat16 or
        float16 variable; the update is applied to the copy and the variable
        is set to it rounded (see ``Optimizer``). Keyword only.

    Raises
    ------
    OptimizerError
        When a rate, coefficient, epsilon or clipping bound is negative or
        not a number, or `stochastic_round` is set.

    Examples
    --------
    >>> import numpy as np, axgraph as ng
    >>> X = ng.make_axis(2, name="X")
    >>> w = ng.variable([X], initial_value=np.array([1.0, -2.0]), dtype=np.float64)
    >>> cost = ng.sum(w * w, out_axes=())                # gradient 2 w
    >>> step = ng.sequential([GradientDescentMomentum(0.1)(cost), cost])
    >>> with ng.NumPyTransformer() as t:
    ...     train, weights = t.computation(step), t.computation(w)
    ...     print(train(), weights())      # the loss before the step, w - 0.1 * 2 w
    5.0 [ 0.8 -1.6]
    """

    def __init__(self, learning_rate: float, momentum_coef: float = 0.0,
                 stochastic_round: bool = False, wdecay: float = 0.0,
                 gradient_clip_norm: Optional[float] = None,
                 gradient_clip_value: Optional[float] = None, name: Optional[str] = None,
                 schedule: Optional[Schedule] = None, nesterov: bool = False, *,
                 master_weights: bool = False):
        if stochastic_round:
            raise OptimizerError(f"GradientDescentMomentum: stochastic_round={stochastic_round!r} "
                                 f"is not supported (axgraph rounds to nearest)", user_location())
        super().__init__(learning_rate, wdecay, gradient_clip_norm, gradient_clip_value, schedule,
                         name, master_weights=master_weights)
        self.momentum_coef = _check_nonnegative("momentum_coef", momentum_coef)
        self.nesterov = bool(nesterov)

    def _updates(self, variable, grad, rate, shared):
        if self.momentum_coef == 0.0:  # plain SGD: a velocity would stay -step, so skip it
            return [control.assign(variable, variable - rate * grad)]
        mu = self.momentum_coef
        velocity = self._state(variable, "velocity")
        step = rate * grad
        set_velocity = control.assign(velocity, mu * velocity - step)
        delta = mu * velocity - step if self.nesterov else velocity
        return [set_velocity, control.assign(variable, variable + delta)]


class RMSProp(Optimizer):
    """Root mean square propagation (neon's RMSProp).

    A running average mu of the squared gradient (decay rate lambda) scales the step::

        mu' = lambda * mu + (1 - lambda) * g**2
        theta' = theta - alpha * g / (sqrt(mu' + epsilon) + epsilon)

    mu starts at 0, as in neon. The arguments come in v0.4's order:
    ``RMSProp(0.95, 2e-3)`` is decay_rate 0.95, learning rate 0.002.
    Call the optimizer on a cost to get the op of one training step (see
    ``Optimizer.__call__`` and the module docstring).

    Parameters
    ----------
    decay_rate : float, default 0.95
        lambda, the weight of the old average, in [0, 1].
    learning_rate : float, default 2e-3
        The base learning rate alpha (>= 0), before the schedule.
    epsilon : float, default 1e-6
        Keeps the division finite (>= 0).
    gradient_clip_norm : float or None, default None
        Scale all gradients together so their joint L2 norm is at most this
        (None: no scaling).
    gradient_clip_value : float or None, default None
        Clip each gradient element to [-value, value] (None: no clipping).
    name : str or None, default None
        Prefix of the optimizer's state tensors and step op; None is the class name.
    schedule : Schedule or None, default None
        The learning rate as a function of the iteration count; None keeps
        it constant.
    wdecay : float, default 0.0
        L2 weight decay: ``wdecay * theta`` is added to every effective gradient. Keyword only.
    master_weights : bool, default False
        Mixed precision: keep a float32 master copy of every bfloat16 or
        float16 variable; the update is applied to the copy and the variable
        is set to it rounded (see ``Optimizer``). Keyword only.

    Raises
    ------
    OptimizerError
        When a rate, coefficient, epsilon or clipping bound is negative or
        not a number, or `decay_rate` is outside [0, 1].
    """

    def __init__(self, decay_rate: float = 0.95, learning_rate: float = 2e-3,
                 epsilon: float = 1e-6, gradient_clip_norm: Optional[float] = None,
                 gradient_clip_value: Optional[float] = None, name: Optional[str] = None,
                 schedule: Optional[Schedule] = None, *, wdecay: float = 0.0,
                 master_weights: bool = False):
        super().__init__(learning_rate, wdecay, gradient_clip_norm, gradient_clip_value, schedule,
                         name, master_weights=master_weights)
        if not 0.0 <= decay_rate <= 1.0:
            raise OptimizerError(f"RMSProp decay_rate must lie in [0, 1], got {decay_rate}",
                                 user_location())
        self.decay_rate = float(decay_rate)
        self.epsilon = _check_nonnegative("epsilon", epsilon)

    def _updates(self, variable, grad, rate, shared):
        decay, keep, eps = self.decay_rate, 1.0 - self.decay_rate, self.epsilon
        mean_square = self._state(variable, "mean_square")
        set_mean = control.assign(mean_square, decay * mean_square + keep * ew.square(grad))
        new_value = variable - rate * grad / (ew.sqrt(mean_square + eps) + eps)
        return [set_mean, control.assign(variable, new_value)]


class Adam(Optimizer):
    """Adam, with bias correction (neon's Adam, as its documentation writes it).

    With t the 1-based number of the step being taken::

        m' = beta_1 * m + (1 - beta_1) * g
        v' = beta_2 * v + (1 - beta_2) * g**2
        m_hat = m' / (1 - beta_1**t),   v_hat = v' / (1 - beta_2**t)
        theta' = theta - alpha * m_hat / (sqrt(v_hat) + epsilon)

    m and v start at 0. (neon's code folds the corrections into the rate,
    alpha * sqrt(1 - beta_2**t) / (1 - beta_1**t) * m' / (sqrt(v') + epsilon),
    which differs only in how epsilon is scaled.) Not in v0.4; the arguments
    come in ngraph's later order.
    Call the optimizer on a cost to get the op of one training step (see
    ``Optimizer.__call__`` and the module docstring).

    Parameters
    ----------
    learning_rate : float, default 1e-3
        The base learning rate alpha (>= 0), before the schedule.
    beta_1 : float, default 0.9
        Decay of the first-moment average m, in [0, 1).
    beta_2 : float, default 0.999
        Decay of the second-moment average v, in [0, 1).
    epsilon : float, default 1e-8
        Keeps the division finite (>= 0).
    gradient_clip_norm : float or None, default None
        Scale all gradients together so their joint L2 norm is at most this
        (None: no scaling).
    gradient_clip_value : float or None, default None
        Clip each gradient element to [-value, value] (None: no clipping).
    name : str or None, default None
        Prefix of the optimizer's state tensors and step op; None is the class name.
    schedule : Schedule or None, default None
        The learning rate as a function of the iteration count; None keeps
        it constant.
    wdecay : float, default 0.0
        L2 weight decay: ``wdecay * theta`` is added to every effective gradient. Keyword only.
    master_weights : bool, default False
        Mixed precision: keep a float32 master copy of every bfloat16 or
        float16 variable; the update is applied to the copy and the variable
        is set to it rounded (see ``Optimizer``). Keyword only.

    Raises
    ------
    OptimizerError
        When a rate, coefficient, epsilon or clipping bound is negative or
        not a number, or a beta is outside [0, 1).
    """

    def __init__(self, learning_rate: float = 1e-3, beta_1: float = 0.9, beta_2: float = 0.999,
                 epsilon: float = 1e-8, gradient_clip_norm: Optional[float] = None,
                 gradient_clip_value: Optional[float] = None, name: Optional[str] = None,
                 schedule: Optional[Schedule] = None, *, wdecay: float = 0.0,
                 master_weights: bool = False):
        super().__init__(learning_rate, wdecay, gradient_clip_norm, gradient_clip_value, schedule,
                         name, master_weights=master_weights)
        for which, beta in (("beta_1", beta_1), ("beta_2", beta_2)):
            if not 0.0 <= beta < 1.0:
                raise OptimizerError(f"Adam {which} must lie in [0, 1), got {beta}",
                                     user_location())
        self.beta_1, self.beta_2 = float(beta_1), float(beta_2)
        self.epsilon = _check_nonnegative("epsilon", epsilon)

    def _shared(self, step_number):
        return {"correction_1": 1.0 - ew.power(self.beta_1, step_number),
                "correction_2": 1.0 - ew.power(self.beta_2, step_number)}

    def _moments(self, variable, grad, shared) -> Tuple[List[Op], Op]:
        """The assigns of m and v, and the step direction m_hat / (sqrt(v_hat) + epsilon)."""
        b1, keep_1, b2, keep_2, eps = (self.beta_1, 1.0 - self.beta_1, self.beta_2,
                                       1.0 - self.beta_2, self.epsilon)
        m, v = self._state(variable, "m"), self._state(variable, "v")
        set_m = control.assign(m, b1 * m + keep_1 * grad)
        set_v = control.assign(v, b2 * v + keep_2 * ew.square(grad))
        m_hat = m / shared["correction_1"]
        v_hat = v / shared["correction_2"]
        return [set_m, set_v], m_hat / (ew.sqrt(v_hat) + eps)

    def _updates(self, variable, grad, rate, shared):
        assigns, direction = self._moments(variable, grad, shared)
        return [*assigns, control.assign(variable, variable - rate * direction)]


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter; PyTorch's ``AdamW``).

    The decay shrinks the variable directly instead of joining the gradient,
    so it is not rescaled by Adam's per-element step sizes. With t the 1-based
    step number, g the effective gradient (clipped; module docstring) and
    lambda the `weight_decay`::

        m' = beta_1 * m + (1 - beta_1) * g
        v' = beta_2 * v + (1 - beta_2) * g**2
        m_hat = m' / (1 - beta_1**t),   v_hat = v' / (1 - beta_2**t)
        theta' = theta - alpha * (m_hat / (sqrt(v_hat) + epsilon) + lambda * theta)

    which is ``torch.optim.AdamW``'s step (``theta *= 1 - alpha * lambda``, then
    the Adam step) with the same defaults. The decay applies to every variable
    trained for which `decay_filter` (if given) is true: ``decay_filter=lambda
    v: len(v.axes) > 1`` spares biases and normalization gains, as PyTorch's
    parameter groups with ``weight_decay=0`` do. Call the optimizer on a cost
    to get the op of one training step (see ``Optimizer.__call__`` and the
    module docstring).

    Parameters
    ----------
    learning_rate : float, default 1e-3
        The base learning rate alpha (>= 0), before the schedule.
    beta_1 : float, default 0.9
        Decay of the first-moment average m, in [0, 1).
    beta_2 : float, default 0.999
        Decay of the second-moment average v, in [0, 1).
    epsilon : float, default 1e-8
        Keeps the division finite (>= 0).
    weight_decay : float, default 0.01
        lambda, the decoupled decay per unit of learning rate (>= 0).
    gradient_clip_norm : float or None, default None
        Scale all gradients together so their joint L2 norm is at most this
        (None: no scaling), as ``torch.nn.utils.clip_grad_norm_``.
    gradient_clip_value : float or None, default None
        Clip each gradient element to [-value, value] (None: no clipping).
    name : str or None, default None
        Prefix of the optimizer's state tensors and step op; None is the class name.
    schedule : Schedule or None, default None
        The learning rate as a function of the iteration count; None keeps
        it constant. The decay follows the scheduled rate, as in PyTorch.
    master_weights : bool, default False
        Mixed precision: keep a float32 master copy of every bfloat16 or
        float16 variable; the update is applied to the copy and the variable
        is set to it rounded (see ``Optimizer``). Keyword only.
    decay_filter : callable or None, default None
        Called with each trained variable; the decay applies where it returns
        true (None: to every variable). Keyword only.

    Raises
    ------
    OptimizerError
        When a rate, coefficient, epsilon, decay or clipping bound is negative
        or not a number, or a beta is outside [0, 1).

    Examples
    --------
    One step from w = 1 with gradient 2: Adam moves by the rate, the decay by
    rate * lambda * w.

    >>> import numpy as np, axgraph as ng
    >>> w = ng.variable((), initial_value=1.0, dtype=np.float64)
    >>> cost = w * w
    >>> step = AdamW(0.1, weight_decay=0.5)(cost)
    >>> with ng.NumPyTransformer() as t:
    ...     t.computation(step)()
    ...     print(round(float(t.computation(w)()), 6))      # 1 - 0.1 * (1 + 0.5 * 1)
    0.85
    """

    def __init__(self, learning_rate: float = 1e-3, beta_1: float = 0.9, beta_2: float = 0.999,
                 epsilon: float = 1e-8, weight_decay: float = 0.01,
                 gradient_clip_norm: Optional[float] = None,
                 gradient_clip_value: Optional[float] = None, name: Optional[str] = None,
                 schedule: Optional[Schedule] = None, *, master_weights: bool = False,
                 decay_filter: Optional[Callable[[Op], bool]] = None):
        super().__init__(learning_rate, beta_1, beta_2, epsilon, gradient_clip_norm,
                         gradient_clip_value, name, schedule, master_weights=master_weights)
        self.weight_decay: float = _check_nonnegative("weight_decay", weight_decay) or 0.0
        if decay_filter is not None and not callable(decay_filter):
            raise OptimizerError(f"AdamW decay_filter must be a function of a variable, not "
                                 f"{decay_filter!r}", user_location())
        self.decay_filter = decay_filter

    def _updates(self, variable, grad, rate, shared):
        assigns, direction = self._moments(variable, grad, shared)
        trained = self._trained.get(variable, variable)    # the variable, not its master copy
        if self.weight_decay and (self.decay_filter is None or self.decay_filter(trained)):
            direction = direction + self.weight_decay * variable
        return [*assigns, control.assign(variable, variable - rate * direction)]


class Adagrad(Optimizer):
    """Adagrad (neon's Adagrad): steps shrink with the sum of squared gradients::

        G' = G + g**2
        theta' = theta - alpha * g / sqrt(G' + epsilon)

    G starts at 0. Not in v0.4; the arguments come in ngraph's later order.
    Call the optimizer on a cost to get the op of one training step (see
    ``Optimizer.__call__`` and the module docstring).

    Parameters
    ----------
    learning_rate : float, default 0.01
        The base learning rate alpha (>= 0), before the schedule.
    epsilon : float, default 1e-8
        Keeps the division finite (>= 0).
    gradient_clip_norm : float or None, default None
        Scale all gradients together so their joint L2 norm is at most this
        (None: no scaling).
    gradient_clip_value : float or None, default None
        Clip each gradient element to [-value, value] (None: no clipping).
    name : str or None, default None
        Prefix of the optimizer's state tensors and step op; None is the class name.
    schedule : Schedule or None, default None
        The learning rate as a function of the iteration count; None keeps
        it constant.
    wdecay : float, default 0.0
        L2 weight decay: ``wdecay * theta`` is added to every effective gradient. Keyword only.
    master_weights : bool, default False
        Mixed precision: keep a float32 master copy of every bfloat16 or
        float16 variable; the update is applied to the copy and the variable
        is set to it rounded (see ``Optimizer``). Keyword only.

    Raises
    ------
    OptimizerError
        When a rate, coefficient, epsilon or clipping bound is negative or
        not a number.
    """

    def __init__(self, learning_rate: float = 0.01, epsilon: float = 1e-8,
                 gradient_clip_norm: Optional[float] = None,
                 gradient_clip_value: Optional[float] = None, name: Optional[str] = None,
                 schedule: Optional[Schedule] = None, *, wdecay: float = 0.0,
                 master_weights: bool = False):
        super().__init__(learning_rate, wdecay, gradient_clip_norm, gradient_clip_value, schedule,
                         name, master_weights=master_weights)
        self.epsilon = _check_nonnegative("epsilon", epsilon)

    def _updates(self, variable, grad, rate, shared):
        total = self._state(variable, "sum_square")
        set_total = control.assign(total, total + ew.square(grad))
        new_value = variable - rate * grad / ew.sqrt(total + self.epsilon)
        return [set_total, control.assign(variable, new_value)]


__all__ = ["Adagrad", "Adam", "AdamW", "ExpSchedule", "GradientDescentMomentum", "Optimizer",
           "OptimizerError", "PowerSchedule", "RMSProp", "Schedule", "StepSchedule",
           "WarmupCosineSchedule"]
