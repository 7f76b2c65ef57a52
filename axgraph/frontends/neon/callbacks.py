"""The training loop `fit` and the callbacks it calls (neon's callbacks).

    history = fit(train_step, train_data, epochs=20,
                  feed=lambda batch: (batch["image"], batch["label"]),
                  callbacks=[ProgressBar(), EarlyStopping(patience=3, monitor="val_loss")],
                  evaluate=lambda: {"val_loss": validation_loss()})
    history.history["loss"]      # one mean training loss per epoch

Every hook receives the loop's `FitState`: what epoch and minibatch it is,
the last loss, the epoch's metrics (`logs`), and `stop_training`, which a
callback sets to end training (EarlyStopping does).
"""
from __future__ import annotations

import dataclasses
import math
import sys
import time
from typing import (Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Sized, TextIO,
                    cast)

import numpy as np


@dataclasses.dataclass
class FitState:
    """What the loop knows; callbacks read it and may set `stop_training`."""

    epochs: int
    nbatches: Optional[int] = None
    epoch: int = 0
    minibatch: int = 0
    iteration: int = 0
    loss: Optional[float] = None
    logs: Dict[str, float] = dataclasses.field(default_factory=dict)
    stop_training: bool = False
    stop_reason: Optional[str] = None

    def request_stop(self, reason: str) -> None:
        """End training after the current minibatch or epoch."""
        self.stop_training = True
        self.stop_reason = reason


class Callback:
    """Base of callbacks: every hook does nothing, so subclasses override what they need.

    Two loops call callbacks: `fit` calls the ``on_*`` hooks with its FitState;
    Nervana Graph v0.4's `loop_train` calls the callback itself,
    ``callback(callback_data, phase, data, idx)`` (module train_loop).
    """

    def __call__(self, callback_data, phase, data=None, idx=None) -> None:
        """v0.4's hook: `phase` is a train_loop.CallbackPhase; write history to `callback_data`."""

    def on_train_begin(self, state: FitState) -> None:
        """Before the first epoch."""

    def on_train_end(self, state: FitState) -> None:
        """After the last epoch (also when training stops early or fails)."""

    def on_epoch_begin(self, state: FitState) -> None:
        """Before the first minibatch of `state.epoch`."""

    def on_epoch_end(self, state: FitState) -> None:
        """After `state.epoch`; `state.logs` holds its loss and evaluation metrics."""

    def on_minibatch_end(self, state: FitState) -> None:
        """After each training step; `state.loss` is its loss."""


class MetricsHistory(Callback):
    """Records every epoch's logs: ``history["loss"][epoch]``, ``history["val_acc"]``, ..."""

    def __init__(self) -> None:
        self.history: Dict[str, List[float]] = {}
        self.epochs: List[int] = []

    def on_train_begin(self, state: FitState) -> None:
        self.history, self.epochs = {}, []

    def on_epoch_end(self, state: FitState) -> None:
        self.epochs.append(state.epoch)
        for name, value in state.logs.items():
            # A metric that appears late gets NaN for the epochs before it.
            values = self.history.setdefault(name, [math.nan] * (len(self.epochs) - 1))
            values.append(value)
        for values in self.history.values():
            if len(values) < len(self.epochs):
                values.append(math.nan)

    def __getitem__(self, name: str) -> List[float]:
        return self.history[name]


#: EarlyStopping modes: is `value` better than `best` by more than `delta`?
_IMPROVES = {
    "min": lambda value, best, delta: value < best - delta,
    "max": lambda value, best, delta: value > best + delta,
}
_START = {"min": math.inf, "max": -math.inf}


class EarlyStopping(Callback):
    """Stop when `monitor` has not improved by more than `min_delta` for `patience` epochs.

    As in Keras, patience=0 stops at the first epoch that does not improve.

    `mode` is "min" (a loss), "max" (an accuracy) or "auto": "max" when the
    name contains "acc", else "min". The best value and the epoch it came in
    are kept in `best` and `best_epoch`; `stopped_epoch` is the last epoch run.
    """

    best: float
    best_epoch: Optional[int]

    def __init__(self, patience: int = 0, monitor: str = "loss", min_delta: float = 0.0,
                 mode: str = "auto"):
        if mode == "auto":
            mode = "max" if "acc" in monitor else "min"
        if mode not in _IMPROVES:
            raise ValueError(f"EarlyStopping mode must be 'min', 'max' or 'auto', not {mode!r}")
        if patience < 0 or min_delta < 0:
            raise ValueError("EarlyStopping patience and min_delta must be >= 0")
        self.patience, self.monitor, self.min_delta, self.mode = int(patience), monitor, \
            float(min_delta), mode
        self.stopped_epoch: Optional[int] = None

    def on_train_begin(self, state: FitState) -> None:
        self.best, self.best_epoch, self.wait, self.stopped_epoch = _START[self.mode], None, 0, None

    def on_epoch_end(self, state: FitState) -> None:
        if self.monitor not in state.logs:
            raise KeyError(f"EarlyStopping monitors {self.monitor!r}, but the epoch logs only "
                           f"have {sorted(state.logs)}; return it from evaluate()")
        value = state.logs[self.monitor]
        if _IMPROVES[self.mode](value, self.best, self.min_delta):
            self.best, self.best_epoch, self.wait = value, state.epoch, 0
            return
        self.wait += 1
        if self.wait >= self.patience:
            self.stopped_epoch = state.epoch
            if self.best_epoch is None:  # never a usable value (NaN from the first epoch)
                state.request_stop(f"{self.monitor} has had no comparable value (it is "
                                   f"{value}) for {self.wait} epochs")
                return
            state.request_stop(f"{self.monitor} has not improved on {self.best:.6g} "
                               f"(epoch {self.best_epoch + 1}) for {self.wait} epochs")


def _format_logs(logs: Mapping[str, float]) -> str:
    return "  ".join(f"{name} {value:.4f}" for name, value in logs.items())


class ProgressBar(Callback):
    """Shows training progress: a tqdm bar per epoch, or one plain line per epoch.

    tqdm is imported when training begins, and used if it is installed and the
    stream is a terminal (``use_tqdm=None``); in CI logs, where the stream is a
    file or pipe, plain lines read better than redrawn bars. ``use_tqdm=True``
    asks for tqdm whatever the stream, ``False`` never uses it. The stream is
    sys.stderr unless given.
    """

    def __init__(self, stream: Optional[TextIO] = None, use_tqdm: Optional[bool] = None):
        self.stream = stream
        self.use_tqdm = use_tqdm
        self._tqdm = None
        self._bar = None

    def _out(self) -> TextIO:
        return self.stream if self.stream is not None else sys.stderr

    def on_train_begin(self, state: FitState) -> None:
        self._tqdm = None
        if self.use_tqdm is False:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            if self.use_tqdm:
                raise
            return
        stream = self._out()
        if self.use_tqdm or (hasattr(stream, "isatty") and stream.isatty()):
            self._tqdm = tqdm

    def on_epoch_begin(self, state: FitState) -> None:
        self._started = time.perf_counter()
        if self._tqdm is not None:
            self._bar = self._tqdm(total=state.nbatches, file=self._out(), leave=True,
                                   desc=f"epoch {state.epoch + 1}/{state.epochs}")

    def on_minibatch_end(self, state: FitState) -> None:
        if self._bar is not None:
            self._bar.update(1)
            if state.loss is not None:
                self._bar.set_postfix(loss=f"{state.loss:.4f}", refresh=False)

    def on_epoch_end(self, state: FitState) -> None:
        seconds = time.perf_counter() - self._started
        if self._bar is not None:
            self._bar.set_postfix_str(_format_logs(state.logs), refresh=False)
            self._bar.close()
            self._bar = None
            return
        stream = self._out()
        stream.write(f"epoch {state.epoch + 1}/{state.epochs}  {_format_logs(state.logs)}  "
                     f"({seconds:.1f} s)\n")
        stream.flush()

    def on_train_end(self, state: FitState) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if state.stop_reason:
            stream = self._out()
            stream.write(f"stopped early after epoch {state.epoch + 1}: {state.stop_reason}\n")
            stream.flush()


def _loss_value(output: Any) -> Optional[float]:
    """The loss in a train step's output: the value, or the first of a tuple (mean if a vector)."""
    if isinstance(output, (tuple, list)):
        output = output[0] if output else None
    if output is None:
        return None
    return float(np.mean(output))


def fit(train_step: Callable[..., Any], data: Iterable[Mapping[str, np.ndarray]], epochs: int,
        feed: Callable[[Mapping[str, np.ndarray]], Sequence[Any]],
        callbacks: Sequence[Callback] = (),
        evaluate: Optional[Callable[[], Mapping[str, float]]] = None) -> MetricsHistory:
    """Train for `epochs` passes over `data` and return the MetricsHistory.

    Each batch of `data` (an iterable of dicts, such as an ArrayIterator, that
    is iterated once per epoch) is passed to `feed`, whose tuple of values is
    passed to `train_step` (a computation); its output is the loss (or a tuple
    starting with it). An epoch's logs are the mean loss ("loss") and whatever
    `evaluate()` returns. A MetricsHistory among `callbacks` is the one
    returned; otherwise one is added. A callback ends training with
    ``state.request_stop(reason)``.
    """
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 0:
        raise ValueError(f"epochs must be a non-negative int, got {epochs!r}")
    callbacks = list(callbacks)
    history = next((c for c in callbacks if isinstance(c, MetricsHistory)), None)
    if history is None:
        history = MetricsHistory()
        callbacks.append(history)
    state = FitState(epochs=epochs, nbatches=len(cast(Sized, data)) if hasattr(data, "__len__")
                     else None)

    def call(hook: str) -> None:
        for callback in callbacks:
            getattr(callback, hook)(state)

    call("on_train_begin")
    try:
        for epoch in range(epochs):
            state.epoch, state.logs = epoch, {}
            call("on_epoch_begin")
            losses = []
            for minibatch, batch in enumerate(data):
                state.minibatch = minibatch
                state.loss = _loss_value(train_step(*feed(batch)))
                state.iteration += 1
                if state.loss is not None:
                    losses.append(state.loss)
                call("on_minibatch_end")
                if state.stop_training:
                    break
            if losses:
                state.logs["loss"] = float(np.mean(losses))
            if evaluate is not None:
                state.logs.update({name: float(value) for name, value in evaluate().items()})
            call("on_epoch_end")
            if state.stop_training:
                break
    finally:
        call("on_train_end")
    return history


__all__ = ["Callback", "EarlyStopping", "FitState", "MetricsHistory", "ProgressBar", "fit"]
