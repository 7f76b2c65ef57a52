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
    """When a callback is called (v0.4's names)."""

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
    """The callbacks of one training run and the store their history goes to."""

    def __init__(self, output_file: Optional[str], total_iterations: int,
                 callback_list: Optional[List[Callback]] = None):
        self._callbacks = list(callback_list or [])
        self.callback_data = open_callback_data(output_file)
        config = self.callback_data.create_group("config")
        config.attrs["total_iterations"] = int(total_iterations)

    def __iter__(self):
        return iter(self._callbacks)

    def append(self, callback: Callback) -> None:
        self._callbacks.append(callback)

    def insert(self, index: int, callback: Callback) -> None:
        self._callbacks.insert(index, callback)

    def __call__(self, phase: CallbackPhase, data: Any = None, idx: Optional[int] = None) -> None:
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
    """Runs the training computation on each batch and records its ``batch_cost``."""

    def __init__(self, computation: Callable[[Mapping[str, np.ndarray]], Mapping[str, Any]]):
        self.computation = computation

    def __call__(self, callback_data, phase, data=None, idx=None) -> None:
        if phase is CallbackPhase.train_pre_:
            iterations = callback_data["config"].attrs["total_iterations"]
            callback_data.create_dataset("cost/train", (iterations,), dtype="float32")
            callback_data["cost/train"].attrs["time_markers"] = "minibatch"
        elif phase is CallbackPhase.minibatch_post:
            callback_data["cost/train"][idx] = float(self.computation(data)["batch_cost"])


class RunTimerCallback(Callback):
    """Records when training started and ended (seconds since the epoch)."""

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
    """A tqdm bar over all iterations (when tqdm is installed)."""

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
    """Every `frequency` iterations, logs the mean training cost of those iterations."""

    def __init__(self, frequency: int):
        self.frequency = int(frequency)

    def __call__(self, callback_data, phase, data=None, idx=None) -> None:
        if phase is CallbackPhase.minibatch_post and (idx + 1) % self.frequency == 0:
            costs = callback_data["cost/train"][idx + 1 - self.frequency:idx + 1]
            _write(f"Interval {idx // self.frequency + 1} Iteration {idx + 1} complete.  "
                   f"Avg Train cost: {np.mean(costs)}")


class LossCallback(Callback):
    """Every `frequency` iterations, the mean of each output of `interval_loss_comp` on `dataset`."""

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
    wrapped-around last batch repeats do not count twice.
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
