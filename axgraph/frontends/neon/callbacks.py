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

from ...debug_info import user_location
from ...errors import AxgraphValueError


@dataclasses.dataclass
class FitState:
    """What the loop knows; callbacks read it and may set `stop_training`.

    `fit` makes one and passes it to every hook; a callback reads it and
    ends training with ``state.request_stop(reason)``. Epochs, minibatches
    and iterations count from 0; `iteration` counts minibatches over all epochs.

    Parameters
    ----------
    epochs : int
        The number of epochs asked for.
    nbatches : int or None, default None
        Minibatches per epoch, when the data has a length.
    epoch : int, default 0
        The current epoch.
    minibatch : int, default 0
        The current minibatch within the epoch.
    iteration : int, default 0
        Training steps taken so far.
    loss : float or None, default None
        The last training step's loss (None when the step returned none).
    logs : dict of str to float, default {}
        The current epoch's metrics: "loss" (the mean) and what ``evaluate``
        returned, filled in before ``on_epoch_end``.
    stop_training : bool, default False
        Set to end training after the current minibatch.
    stop_reason : str or None, default None
        Why training was stopped, for the record.
    """

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
        """End training after the current minibatch or epoch.

        Parameters
        ----------
        reason : str
            Why, in words; ProgressBar prints it when training ends.
        """
        self.stop_training = True
        self.stop_reason = reason


class Callback:
    """Base of callbacks: every hook does nothing, so subclasses override what they need.

    Two loops call callbacks: `fit` calls the ``on_*`` hooks with its FitState;
    Nervana Graph v0.4's `loop_train` calls the callback itself,
    ``callback(callback_data, phase, data, idx)`` (module train_loop).
    A callback takes no arguments here; subclasses take their own settings.
    """

    def __call__(self, callback_data, phase, data=None, idx=None) -> None:
        """v0.4's hook: `phase` is a train_loop.CallbackPhase; write history to `callback_data`.

        Parameters
        ----------
        callback_data : h5py.File or MemoryGroup
            The store of the run's history (see ``CallbackContainer``).
        phase : CallbackPhase
            Which point of the loop this is.
        data : dict of str to numpy.ndarray or None, default None
            The minibatch, in the minibatch phases.
        idx : int or None, default None
            The minibatch's index (the iteration), in the minibatch phases.
        """

    def on_train_begin(self, state: FitState) -> None:
        """Before the first epoch.

        Parameters
        ----------
        state : FitState
            The loop's state.
        """

    def on_train_end(self, state: FitState) -> None:
        """After the last epoch (also when training stops early or fails).

        Parameters
        ----------
        state : FitState
            The loop's state.
        """

    def on_epoch_begin(self, state: FitState) -> None:
        """Before the first minibatch of `state.epoch`.

        Parameters
        ----------
        state : FitState
            The loop's state.
        """

    def on_epoch_end(self, state: FitState) -> None:
        """After `state.epoch`; `state.logs` holds its loss and evaluation metrics.

        Parameters
        ----------
        state : FitState
            The loop's state.
        """

    def on_minibatch_end(self, state: FitState) -> None:
        """After each training step; `state.loss` is its loss.

        Parameters
        ----------
        state : FitState
            The loop's state.
        """


class MetricsHistory(Callback):
    """Records every epoch's logs: ``history["loss"][epoch]``, ``history["val_acc"]``, ...

    What `fit` returns. A metric that first appears after some epochs is NaN
    for those epochs, so every list has one value per epoch run. It starts
    afresh when training begins. Takes no arguments.

    Attributes
    ----------
    history : dict of str to list of float
        Each metric's value per epoch.
    epochs : list of int
        The epochs recorded (0-based).
    """

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
    A NaN never counts as an improvement.

    Parameters
    ----------
    patience : int, default 0
        Epochs without improvement to accept before stopping (>= 0).
    monitor : str, default "loss"
        The metric watched: a key of the epoch's logs ("loss", or one that
        ``evaluate`` returns).
    min_delta : float, default 0.0
        The least change that counts as an improvement (>= 0).
    mode : str, default "auto"
        "min", "max" or "auto".

    Raises
    ------
    AxgraphValueError
        When `mode` is not one of those, or `patience` or `min_delta` is negative.
    AxgraphValueError
        At the end of an epoch whose logs lack `monitor`.

    Examples
    --------
    >>> val_losses = iter([0.5, 0.4, 0.45, 0.41, 0.3])
    >>> stop = EarlyStopping(patience=2, monitor="val_loss")
    >>> history = fit(lambda: 1.0, [{}], epochs=10, feed=lambda batch: (), callbacks=[stop],
    ...               evaluate=lambda: {"val_loss": next(val_losses)})
    >>> history["val_loss"], stop.best, stop.best_epoch, stop.stopped_epoch
    ([0.5, 0.4, 0.45, 0.41], 0.4, 1, 3)
    """

    best: float
    best_epoch: Optional[int]

    def __init__(self, patience: int = 0, monitor: str = "loss", min_delta: float = 0.0,
                 mode: str = "auto"):
        if mode == "auto":
            mode = "max" if "acc" in monitor else "min"
        if mode not in _IMPROVES:
            raise AxgraphValueError(f"EarlyStopping mode must be 'min', 'max' or 'auto', not {mode!r}", user_location())
        if patience < 0 or min_delta < 0:
            raise AxgraphValueError("EarlyStopping patience and min_delta must be >= 0", user_location())
        self.patience, self.monitor, self.min_delta, self.mode = int(patience), monitor, \
            float(min_delta), mode
        self.stopped_epoch: Optional[int] = None

    def on_train_begin(self, state: FitState) -> None:
        self.best, self.best_epoch, self.wait, self.stopped_epoch = _START[self.mode], None, 0, None

    def on_epoch_end(self, state: FitState) -> None:
        if self.monitor not in state.logs:
            raise AxgraphValueError(f"EarlyStopping monitors {self.monitor!r}, but the epoch logs only "
                           f"have {sorted(state.logs)}; return it from evaluate()", user_location())
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
    sys.stderr unless given. When training stops early, the reason is written last.

    Parameters
    ----------
    stream : text stream or None, default None
        Where to write; None is sys.stderr (looked up when writing).
    use_tqdm : bool or None, default None
        True: always a tqdm bar; False: always plain lines; None: tqdm when
        it is installed and the stream is a terminal.

    Raises
    ------
    ImportError
        When training begins with ``use_tqdm=True`` and tqdm is not installed.

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> history = fit(lambda: 0.5, [{}, {}], epochs=2, feed=lambda batch: (),
    ...               callbacks=[ProgressBar(stream=out, use_tqdm=False)])
    >>> print(out.getvalue(), end="")
    epoch 1/2  loss 0.5000  (... s)
    epoch 2/2  loss 0.5000  (... s)
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

    axgraph's own loop, in the style of Keras's ``fit``; Nervana Graph v0.4's
    programs use ``loop_train`` and its callbacks instead.

    Parameters
    ----------
    train_step : callable
        One training step: a computation (or any callable) whose output is
        the loss (averaged if it is an array), a tuple starting with it, or None.
    data : iterable of dict
        The batches of one epoch; iterated anew every epoch.
    epochs : int
        Passes over `data` (>= 0).
    feed : callable
        Turns a batch into the tuple of arguments of `train_step`.
    callbacks : sequence of Callback, default ()
        Called at every hook, in order.
    evaluate : callable or None, default None
        Called after each epoch with no arguments; returns a dict of metrics
        (e.g. {"val_loss": ...}) that joins the epoch's logs.

    Returns
    -------
    MetricsHistory
        Each metric per epoch: ``history["loss"]``, ...

    Raises
    ------
    AxgraphValueError
        When `epochs` is not a non-negative int.

    Examples
    --------
    >>> losses = iter([3.0, 2.0, 1.0, 1.5, 1.2, 1.0])
    >>> history = fit(lambda: next(losses), [{}, {}], epochs=3, feed=lambda batch: ())
    >>> history["loss"]                   # the mean of each epoch's two steps
    [2.5, 1.25, 1.1]
    """
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 0:
        raise AxgraphValueError(f"epochs must be a non-negative int, got {epochs!r}", user_location())
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
