"""Nervana Graph v0.4's training harness: loop_train, loop_eval and their callbacks.

    cbs = make_default_callbacks(output_file=None, frequency=200,
                                 train_computation=train_computation, total_iterations=2000,
                                 eval_set=valid_set, loss_computation=loss_computation)
    loop_train(train_set, train_computation, cbs)

`loop_train` walks the training set once (an ArrayIterator built with
``total_iterations``) and calls every callback at each phase
(`CallbackPhase`); the training step itself is run by `TrainCostCallback`,
which stores each batch's ``batch_cost`` output. The callbacks keep their
history in `callback_data` (module callback_data: HDF5 when h5py is
installed), under the names v0.4 used:

==================  ===========================================================
``config``          attrs ``total_iterations``
``cost/train``      the ``batch_cost`` of every iteration (TrainCostCallback)
``cost/<name>``     the mean of each loss output on the eval set, per interval
                    (LossCallback)
``time/loss``       seconds each of those evaluations took (LossCallback)
``time/train``      ``start_time``, ``end_time`` (RunTimerCallback)
==================  ===========================================================
"""
from __future__ import annotations

import enum
import sys
import time
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional

import numpy as np

from ...axes import Axes
from .callback_data import open_callback_data
from .callbacks import Callback


class CallbackPhase(enum.Enum):
    """When a callback is called (v0.4's names).

    ``train_pre_`` and ``train_post`` come once, before and after the loop;
    ``minibatch_pre_`` and ``minibatch_post`` around every batch (with the
    batch and its index). ``interval_pre_`` and ``interval_post`` are v0.4's
    names for the ends of an interval; ``loop_train`` does not send them.
    """

    train_pre_ = 0
    train_post = 1
    interval_pre_ = 2
    interval_post = 3
    minibatch_pre_ = 4
    minibatch_post = 5


def _write(line: str) -> None:
    """A log line that does not break a tqdm bar (plain stderr without tqdm)."""
    try:
        from tqdm import tqdm
    except ImportError:
        sys.stderr.write(line + "\n")
        return
    tqdm.write(line, file=sys.stderr)


class CallbackContainer:
    """The callbacks of one training run and the store their history goes to.

    Calling the container with a phase calls every callback with the store
    (``callback_data``), in order; after ``train_post`` the store is flushed.
    The store is opened at once (module callback_data: an HDF5 file when
    h5py is installed, else NumPy arrays in memory) and holds a group
    "config" with attribute ``total_iterations``. Close it with ``close()``
    or by using the container in a ``with`` statement.

    Parameters
    ----------
    output_file : str or None
        HDF5 file to write the history to (replaced if it exists); None
        keeps it in memory.
    total_iterations : int
        The iterations of the run; callbacks size their datasets by it.
    callback_list : list of Callback or None, default None
        The callbacks, in the order they are called.

    Raises
    ------
    CallbackDataError
        When `output_file` is given and h5py is not installed.
    """

    def __init__(self, output_file: Optional[str], total_iterations: int,
                 callback_list: Optional[List[Callback]] = None):
        self._callbacks = list(callback_list or [])
        self.callback_data = open_callback_data(output_file)
        config = self.callback_data.create_group("config")
        config.attrs["total_iterations"] = int(total_iterations)

    def __iter__(self):
        return iter(self._callbacks)

    def append(self, callback: Callback) -> None:
        """Add `callback` at the end (it is called last).

        Parameters
        ----------
        callback : Callback
            The callback.
        """
        self._callbacks.append(callback)

    def insert(self, index: int, callback: Callback) -> None:
        """Add `callback` at position `index`, as ``list.insert``.

        Parameters
        ----------
        index : int
            Its position in the calling order.
        callback : Callback
            The callback.
        """
        self._callbacks.insert(index, callback)

    def __call__(self, phase: CallbackPhase, data: Any = None, idx: Optional[int] = None) -> None:
        """Call every callback for `phase` (what ``loop_train`` does).

        Parameters
        ----------
        phase : CallbackPhase
            Which point of the loop this is.
        data : dict of str to numpy.ndarray or None, default None
            The minibatch, in the minibatch phases.
        idx : int or None, default None
            The iteration, in the minibatch phases.
        """
        for callback in self._callbacks:
            callback(self.callback_data, phase, data, idx)
        if phase is CallbackPhase.train_post:
            self.callback_data.flush()

    def close(self) -> None:
        """Close the history file (it stays readable in memory until then)."""
        self.callback_data.close()

    def __enter__(self) -> "CallbackContainer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class TrainCostCallback(Callback):
    """Runs the training computation on each batch and records its ``batch_cost``.

    As in v0.4, this callback *is* the training step of ``loop_train``: at
    every ``minibatch_post`` it calls the computation on the batch and
    stores the output "batch_cost" in dataset "cost/train" (made at
    ``train_pre_``, one entry per iteration).

    Parameters
    ----------
    computation : callable
        Called with each batch (a dict of arrays); returns a dict with a
        scalar "batch_cost": typically a BoundComputation whose outputs are
        the cost and the optimizer's update op.
    """

    def __init__(self, computation: Callable[[Mapping[str, np.ndarray]], Mapping[str, Any]]):
        self.computation = computation

    def __call__(self, callback_data, phase, data=None, idx=None) -> None:
        """Make "cost/train" (train_pre_); run a step and record its cost (minibatch_post).

        Parameters
        ----------
        callback_data : h5py.File or MemoryGroup
            The run's history store.
        phase : CallbackPhase
            Which point of the loop this is.
        data : dict of str to numpy.ndarray or None, default None
            The minibatch, in the minibatch phases.
        idx : int or None, default None
            The iteration, in the minibatch phases.
        """
        if phase is CallbackPhase.train_pre_:
            iterations = callback_data["config"].attrs["total_iterations"]
            callback_data.create_dataset("cost/train", (iterations,), dtype="float32")
            callback_data["cost/train"].attrs["time_markers"] = "minibatch"
        elif phase is CallbackPhase.minibatch_post:
            callback_data["cost/train"][idx] = float(self.computation(data)["batch_cost"])


class RunTimerCallback(Callback):
    """Records when training started and ended (seconds since the epoch).

    Writes ``time/train/start_time`` at ``train_pre_`` and
    ``time/train/end_time`` at ``train_post`` (unit attribute "seconds").
    Takes no arguments.
    """

    def __call__(self, callback_data, phase, data=None, idx=None) -> None:
        if phase is CallbackPhase.train_pre_:
            self.timing = callback_data.create_group("time/train")
            for name in ("start_time", "end_time"):
                self.timing.create_dataset(name, (1,), dtype="float64")
            self.timing["start_time"][0] = time.time()
            self.timing["start_time"].attrs["units"] = "seconds"
        elif phase is CallbackPhase.train_post:
            self.timing["end_time"][0] = time.time()
            self.timing["end_time"].attrs["units"] = "seconds"


class ProgressCallback(Callback):
    """A tqdm bar over all iterations (when tqdm is installed).

    Drawn on sys.stderr and advanced at every ``minibatch_post``; without
    tqdm it does nothing. Takes no arguments.
    """

    def __call__(self, callback_data, phase, data=None, idx=None) -> None:
        if phase is CallbackPhase.train_pre_:
            try:
                from tqdm import tqdm
            except ImportError:
                self.bar = None
                return
            self.bar = tqdm(desc="Overall", unit="minibatches", ncols=80, file=sys.stderr,
                            total=callback_data["config"].attrs["total_iterations"])
        elif phase is CallbackPhase.minibatch_post and self.bar is not None:
            self.bar.update(1)
        elif phase is CallbackPhase.train_post and self.bar is not None:
            self.bar.close()


class TrainLoggerCallback(Callback):
    """Every `frequency` iterations, logs the mean training cost of those iterations.

    Reads "cost/train" (so it needs a TrainCostCallback before it) and
    writes a line to sys.stderr, through tqdm when installed so that a
    progress bar is not broken.

    Parameters
    ----------
    frequency : int
        The interval, in iterations.
    """

    def __init__(self, frequency: int):
        self.frequency = int(frequency)

    def __call__(self, callback_data, phase, data=None, idx=None) -> None:
        if phase is CallbackPhase.minibatch_post and (idx + 1) % self.frequency == 0:
            costs = callback_data["cost/train"][idx + 1 - self.frequency:idx + 1]
            _write(f"Interval {idx // self.frequency + 1} Iteration {idx + 1} complete.  "
                   f"Avg Train cost: {np.mean(costs)}")


class LossCallback(Callback):
    """Every `frequency` iterations, the mean of each output of `interval_loss_comp` on `dataset`.

    Evaluates with ``loop_eval`` and stores each output's mean in
    ``cost/<name>`` (one entry per interval) and the seconds it took in
    "time/loss"; logs them to sys.stderr, and once more after training.

    Parameters
    ----------
    frequency : int
        The interval, in iterations.
    dataset : ArrayIterator
        The evaluation set (reset before every evaluation).
    interval_loss_comp : BoundComputation
        The evaluation computation; its output names name the datasets.
    """

    def __init__(self, frequency: int, dataset, interval_loss_comp):
        self.frequency = int(frequency)
        self.dataset = dataset
        self.interval_loss_comp = interval_loss_comp

    def __call__(self, callback_data, phase, data=None, idx=None) -> None:
        if phase is CallbackPhase.train_pre_:
            intervals = callback_data["config"].attrs["total_iterations"] // self.frequency
            for name in self.interval_loss_comp.output_keys:
                callback_data.create_dataset(f"cost/{name}", (intervals,), dtype="float32")
            callback_data.create_dataset("time/loss", (intervals,), dtype="float32")
        elif phase is CallbackPhase.train_post:
            _write(f"Training complete.  Avg losses: {loop_eval(self.dataset, self.interval_loss_comp)}")
        elif phase is CallbackPhase.minibatch_post and (idx + 1) % self.frequency == 0:
            started = time.perf_counter()
            interval = idx // self.frequency
            losses = loop_eval(self.dataset, self.interval_loss_comp)
            for name, loss in losses.items():
                callback_data[f"cost/{name}"][interval] = loss
            callback_data["time/loss"][interval] = time.perf_counter() - started
            _write(f"Interval {interval + 1} Iteration {idx + 1} complete.  Avg losses: {losses}")


def make_default_callbacks(output_file: Optional[str], frequency: int, train_computation,
                           total_iterations: int, eval_set=None, loss_computation=None,
                           use_progress_bar: bool = True, transformer=None) -> CallbackContainer:
    """v0.4's standard set: train cost, its log, eval losses (with an eval set), progress bar.

    `transformer` is accepted for later ngraph versions' signature and not needed.

    Parameters
    ----------
    output_file : str or None
        HDF5 file for the history (needs h5py); None keeps it in memory.
    frequency : int
        Iterations between the logs of training cost and evaluations.
    train_computation : callable
        The training step: called with each batch, returns a dict with a
        scalar "batch_cost" (a BoundComputation).
    total_iterations : int
        The iterations of the run (the training ArrayIterator's).
    eval_set : ArrayIterator or None, default None
        The evaluation set; None adds no LossCallback.
    loss_computation : BoundComputation or None, default None
        What is averaged over `eval_set` every `frequency` iterations.
    use_progress_bar : bool, default True
        Add a ProgressCallback.
    transformer : Transformer or None, default None
        Ignored.

    Returns
    -------
    CallbackContainer
        TrainCostCallback, TrainLoggerCallback, then LossCallback and
        ProgressCallback when asked for; pass it to ``loop_train``.

    Raises
    ------
    CallbackDataError
        When `output_file` is given and h5py is not installed.

    Examples
    --------
    A v0.4 training run: learn w in y = w x from 8 examples, 20 steps.

    >>> import numpy as np, axgraph as ng
    >>> xs = np.linspace(-1, 1, 8)
    >>> train_set = ArrayIterator({"x": xs, "y": 3 * xs}, batch_size=4, total_iterations=20)
    >>> inputs = train_set.make_placeholders()
    >>> w = ng.variable((), initial_value=0.0)
    >>> loss = ng.square(w * inputs["x"] - inputs["y"])
    >>> outputs = dict(batch_cost=ng.mean(loss, out_axes=()),
    ...                updates=GradientDescentMomentum(0.5)(loss))
    >>> with ng.NumPyTransformer() as transformer:
    ...     train = make_bound_computation(transformer, outputs, inputs)
    ...     with make_default_callbacks(output_file=None, frequency=10, train_computation=train,
    ...                                 total_iterations=20, use_progress_bar=False) as cbs:
    ...         loop_train(train_set, train, cbs)
    ...         costs = cbs.callback_data["cost/train"]
    ...         print(len(costs), bool(costs[-1] < 1e-3 * costs[0]))
    ...     print(round(float(transformer.computation(w)()), 3))
    20 True
    3.0
    """
    callbacks: List[Callback] = [TrainCostCallback(train_computation),
                                 TrainLoggerCallback(frequency)]
    if eval_set is not None:
        callbacks.append(LossCallback(frequency, eval_set, loss_computation))
    if use_progress_bar:
        callbacks.append(ProgressCallback())
    return CallbackContainer(output_file, total_iterations, callbacks)


def loop_train(dataset: Iterable[Mapping[str, np.ndarray]], computation,
               callbacks: CallbackContainer) -> None:
    """One pass over `dataset`, calling `callbacks` at every phase.

    As in v0.4, the callbacks run `computation` (TrainCostCallback does); the
    argument is there for the callbacks' sake and to document the call.
    The phases: ``train_pre_``; for every batch ``minibatch_pre_`` and
    ``minibatch_post`` (with the batch and its index); ``train_post``. The
    dataset is not reset first, so an ArrayIterator built with
    ``total_iterations`` gives the whole run in one pass.

    Parameters
    ----------
    dataset : iterable of dict
        The batches (an ArrayIterator).
    computation : callable
        The training computation; not called here.
    callbacks : CallbackContainer
        Called at every phase (see ``make_default_callbacks``).

    Examples
    --------
    See ``make_default_callbacks``.
    """
    callbacks(CallbackPhase.train_pre_)
    for index, batch in enumerate(dataset):
        callbacks(CallbackPhase.minibatch_pre_, batch, index)
        callbacks(CallbackPhase.minibatch_post, batch, index)
    callbacks(CallbackPhase.train_post)


def _per_example(value, axes: Optional[Axes]) -> np.ndarray:
    """One value per example (averaged over its other axes), or one per batch without a batch axis."""
    value = np.asarray(value, dtype=np.float64)
    batch = axes.batch_axis() if axes is not None and len(axes) == value.ndim else None
    if batch is None:
        return np.atleast_1d(value.mean())
    assert axes is not None  # batch was found among them
    by_example = np.moveaxis(value, list(axes).index(batch), 0)
    return by_example.reshape(len(by_example), -1).mean(axis=1)


def loop_eval(dataset, computation) -> Dict[str, float]:
    """The mean of each output of `computation` over one pass of `dataset`.

    The dataset is reset first; outputs with a batch axis are averaged per
    example over its first ``dataset.ndata`` examples, so the examples a
    wrapped-around last batch repeats do not count twice. An output without
    a batch axis counts once per batch; outputs without a value are skipped.

    Parameters
    ----------
    dataset : ArrayIterator
        The evaluation set; it is reset, then iterated once.
    computation : callable
        Called with each batch; returns a dict name -> array (a
        BoundComputation, whose ``output_axes`` tell where the batch axis is).

    Returns
    -------
    dict of str to float
        The mean of each output, by name.

    Examples
    --------
    >>> import numpy as np, axgraph as ng
    >>> data = ArrayIterator({"x": np.arange(5.0)}, batch_size=2)   # batches 0 1, 2 3, 4 0
    >>> inputs = data.make_placeholders()
    >>> with ng.NumPyTransformer() as t:
    ...     double = make_bound_computation(t, dict(y=2 * inputs["x"]), inputs)
    ...     print(loop_eval(data, double))     # mean of 0, 2, 4, 6, 8: no example twice
    {'y': 4.0}
    """
    dataset.reset()
    axes = getattr(computation, "output_axes", {})
    collected: Dict[str, List[np.ndarray]] = {}
    for batch in dataset:
        for name, value in computation(batch).items():
            if value is not None:
                collected.setdefault(name, []).append(_per_example(value, axes.get(name)))
    return {name: float(np.mean(np.concatenate(values)[:dataset.ndata]))
            for name, values in collected.items()}


__all__ = ["CallbackContainer", "CallbackPhase", "LossCallback", "ProgressCallback",
           "RunTimerCallback", "TrainCostCallback", "TrainLoggerCallback", "loop_eval",
           "loop_train", "make_default_callbacks"]
