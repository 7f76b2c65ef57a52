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
                    Tuple, cast)

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
    learning_rate : float or None, default None
        The rate the last step used, when `fit` was given ``learning_rate``.
    step_seconds : float or None, default None
        How long the last step took (wall clock).
    running_loss : float or None, default None
        The mean loss of the current epoch's steps so far.
    history : MetricsHistory or None, default None
        The history `fit` returns (``CheckpointCallback`` saves it).
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
    learning_rate: Optional[float] = None
    step_seconds: Optional[float] = None
    running_loss: Optional[float] = None
    history: Optional["MetricsHistory"] = None

    def resume_point(self) -> Dict[str, Any]:
        """Where a run stopped at the end of this epoch, for ``fit(..., resume=...)``.

        Returns
        -------
        dict
            "epoch" (the next epoch), "iteration" (the steps taken) and
            "history" (``MetricsHistory.as_dict()``), plain JSON values.
        """
        history = self.history.as_dict() if self.history is not None else None
        return {"epoch": self.epoch + 1, "iteration": self.iteration, "history": history}

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
    """Records every epoch's logs (``history["loss"][epoch]``, ...) and every step.

    What `fit` returns. A metric that first appears after some epochs is NaN
    for those epochs, so every list has one value per epoch run. Per step,
    `steps` holds the loss, the learning rate (NaN unless `fit` was given
    ``learning_rate``) and the seconds the step took. It starts afresh when
    training begins (a resumed `fit` then puts the saved record back).
    Takes no arguments.

    Attributes
    ----------
    history : dict of str to list of float
        Each metric's value per epoch.
    epochs : list of int
        The epochs recorded (0-based).
    steps : dict of str to list of float
        "loss", "learning_rate" and "seconds" of every step, in order.
    """

    STEP_FIELDS = ("loss", "learning_rate", "seconds")

    def __init__(self) -> None:
        self.history: Dict[str, List[float]] = {}
        self.epochs: List[int] = []
        self.steps: Dict[str, List[float]] = {name: [] for name in self.STEP_FIELDS}

    def on_train_begin(self, state: FitState) -> None:
        self.history, self.epochs = {}, []
        self.steps = {name: [] for name in self.STEP_FIELDS}

    def on_minibatch_end(self, state: FitState) -> None:
        for name, value in zip(self.STEP_FIELDS,
                               (state.loss, state.learning_rate, state.step_seconds)):
            self.steps[name].append(math.nan if value is None else float(value))

    def as_dict(self) -> Dict[str, Any]:
        """The record as plain values (what a checkpoint saves; see ``restore``).

        Returns
        -------
        dict
            "history", "epochs" and "steps", copies of the attributes.
        """
        return {"history": {k: list(v) for k, v in self.history.items()},
                "epochs": list(self.epochs), "steps": {k: list(v) for k, v in self.steps.items()}}

    def restore(self, record: Mapping[str, Any]) -> None:
        """Put back a record made by ``as_dict`` (a resumed run continues it).

        Parameters
        ----------
        record : dict
            What ``as_dict`` returned, perhaps read back from a checkpoint.

        Raises
        ------
        AxgraphValueError
            When `record` does not have the form ``as_dict`` gives.
        """
        def numbers(values) -> List[float]:
            if not isinstance(values, list) or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                raise AxgraphValueError("MetricsHistory.restore: a record holds lists of numbers",
                                        user_location())
            return [float(v) for v in values]

        if not isinstance(record, Mapping) or set(record) != {"history", "epochs", "steps"} \
                or not isinstance(record["history"], Mapping) \
                or not isinstance(record["steps"], Mapping) \
                or set(record["steps"]) != set(self.STEP_FIELDS):
            raise AxgraphValueError("MetricsHistory.restore: expected what as_dict() returns "
                                    "(history, epochs and steps)", user_location())
        self.history = {str(k): numbers(v) for k, v in record["history"].items()}
        self.epochs = [int(e) for e in numbers(record["epochs"])]
        self.steps = {k: numbers(record["steps"][k]) for k in self.STEP_FIELDS}

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
    """Shows training progress with the running loss: a tqdm bar per epoch, or plain text.

    tqdm is imported when training begins, and used if it is installed and the
    stream is a terminal (``use_tqdm=None``); in CI logs, where the stream is a
    file or pipe, plain lines read better than redrawn bars. ``use_tqdm=True``
    asks for tqdm whatever the stream, ``False`` never uses it. The bar shows
    the epoch's running mean loss (and the learning rate when `fit` knows it).
    Without tqdm, a terminal gets one line redrawn after every step and a
    file one line per epoch, plus one every `every` steps when given. The
    stream is sys.stderr unless given. When training stops early, the reason
    is written last.

    Parameters
    ----------
    stream : text stream or None, default None
        Where to write; None is sys.stderr (looked up when writing).
    use_tqdm : bool or None, default None
        True: always a tqdm bar; False: always plain text; None: tqdm when
        it is installed and the stream is a terminal.
    every : int or None, default None
        In plain text on a file, also write a line with the running loss
        every `every` steps (None: only one per epoch).

    Raises
    ------
    ImportError
        When training begins with ``use_tqdm=True`` and tqdm is not installed.
    AxgraphValueError
        When `every` is not a positive int.

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> losses = iter([0.9, 0.7, 0.5, 0.3])
    >>> history = fit(lambda: next(losses), [{}, {}], epochs=2, feed=lambda batch: (),
    ...               callbacks=[ProgressBar(stream=out, use_tqdm=False, every=1)])
    >>> print(out.getvalue(), end="")
    epoch 1/2  step 1/2  running loss 0.9000
    epoch 1/2  step 2/2  running loss 0.8000
    epoch 1/2  loss 0.8000  (... s)
    epoch 2/2  step 1/2  running loss 0.5000
    epoch 2/2  step 2/2  running loss 0.4000
    epoch 2/2  loss 0.4000  (... s)
    """

    def __init__(self, stream: Optional[TextIO] = None, use_tqdm: Optional[bool] = None,
                 every: Optional[int] = None):
        if every is not None and (isinstance(every, bool) or not isinstance(every, int)
                                  or every < 1):
            raise AxgraphValueError(f"ProgressBar every must be a positive int or None, got "
                                    f"{every!r}", user_location())
        self.stream = stream
        self.use_tqdm = use_tqdm
        self.every = every
        self._tqdm = None
        self._bar = None
        self._redraw = False

    def _out(self) -> TextIO:
        return self.stream if self.stream is not None else sys.stderr

    def on_train_begin(self, state: FitState) -> None:
        self._tqdm = None
        stream = self._out()
        terminal = hasattr(stream, "isatty") and stream.isatty()
        self._redraw = terminal
        if self.use_tqdm is False:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            if self.use_tqdm:
                raise
            return
        if self.use_tqdm or terminal:
            self._tqdm = tqdm

    def on_epoch_begin(self, state: FitState) -> None:
        self._started = time.perf_counter()
        if self._tqdm is not None:
            self._bar = self._tqdm(total=state.nbatches, file=self._out(), leave=True,
                                   desc=f"epoch {state.epoch + 1}/{state.epochs}")

    def _step_text(self, state: FitState) -> str:
        of = f"/{state.nbatches}" if state.nbatches is not None else ""
        text = f"epoch {state.epoch + 1}/{state.epochs}  step {state.minibatch + 1}{of}"
        if state.running_loss is not None:
            text += f"  running loss {state.running_loss:.4f}"
        if state.learning_rate is not None:
            text += f"  lr {state.learning_rate:.3g}"
        return text

    def on_minibatch_end(self, state: FitState) -> None:
        if self._bar is not None:
            self._bar.update(1)
            postfix = {}
            if state.running_loss is not None:
                postfix["loss"] = f"{state.running_loss:.4f}"
            if state.learning_rate is not None:
                postfix["lr"] = f"{state.learning_rate:.3g}"
            if postfix:
                self._bar.set_postfix(postfix, refresh=False)
            return
        stream = self._out()
        if self._redraw:
            stream.write("\r" + self._step_text(state) + "\x1b[K")
            stream.flush()
        elif self.every is not None and (state.minibatch + 1) % self.every == 0:
            stream.write(self._step_text(state) + "\n")
            stream.flush()

    def on_epoch_end(self, state: FitState) -> None:
        seconds = time.perf_counter() - self._started
        if self._bar is not None:
            self._bar.set_postfix_str(_format_logs(state.logs), refresh=False)
            self._bar.close()
            self._bar = None
            return
        stream = self._out()
        start = "\r" if self._redraw else ""
        end = "\x1b[K\n" if self._redraw else "\n"
        stream.write(f"{start}epoch {state.epoch + 1}/{state.epochs}  {_format_logs(state.logs)}  "
                     f"({seconds:.1f} s){end}")
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
        evaluate: Optional[Callable[[], Mapping[str, float]]] = None, *,
        learning_rate: Optional[Callable[[int], float]] = None,
        resume: Optional[Mapping[str, Any]] = None) -> MetricsHistory:
    """Train for `epochs` passes over `data` and return the MetricsHistory.

    Each batch of `data` (an iterable of dicts, such as an ArrayIterator, that
    is iterated once per epoch) is passed to `feed`, whose tuple of values is
    passed to `train_step` (a computation); its output is the loss (or a tuple
    starting with it). An epoch's logs are the mean loss ("loss") and whatever
    `evaluate()` returns; every step's loss, learning rate and duration go to
    the history's ``steps``. A MetricsHistory among `callbacks` is the one
    returned (otherwise one is made); it is called before the others. A callback ends training with
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
        Passes over `data` (>= 0), counting those of the run resumed from.
    feed : callable
        Turns a batch into the tuple of arguments of `train_step`.
    callbacks : sequence of Callback, default ()
        Called at every hook, in order.
    evaluate : callable or None, default None
        Called after each epoch with no arguments; returns a dict of metrics
        (e.g. {"val_loss": ...}) that joins the epoch's logs.
    learning_rate : callable or None, default None
        The rate of the step taken after n steps, ``learning_rate(n)``
        (``optimizer.learning_rate_at``); recorded per step and shown by
        ProgressBar. None records NaN. Keyword only.
    resume : dict or None, default None
        Continue a run from where ``FitState.resume_point()`` was taken (what
        CheckpointCallback saves and ``Checkpoint.restore`` returns): its
        epoch and step count, and its history put back into the one returned.
        Keyword only.

    Returns
    -------
    MetricsHistory
        Each metric per epoch: ``history["loss"]``, ...; each step in ``history.steps``.

    Raises
    ------
    AxgraphValueError
        When `epochs` is not a non-negative int, or `resume` is not a resume point.

    Examples
    --------
    >>> losses = iter([3.0, 2.0, 1.0, 1.5, 1.2, 1.0])
    >>> history = fit(lambda: next(losses), [{}, {}], epochs=3, feed=lambda batch: (),
    ...               learning_rate=lambda step: 0.1 / (1 + step))
    >>> history["loss"]                   # the mean of each epoch's two steps
    [2.5, 1.25, 1.1]
    >>> history.steps["loss"][:3], [round(r, 3) for r in history.steps["learning_rate"][:3]]
    ([3.0, 2.0, 1.0], [0.1, 0.05, 0.033])
    """
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 0:
        raise AxgraphValueError(f"epochs must be a non-negative int, got {epochs!r}", user_location())
    callbacks = list(callbacks)
    history = next((c for c in callbacks if isinstance(c, MetricsHistory)), MetricsHistory())
    # The history is called first, so the others (a checkpoint) see each epoch recorded.
    callbacks = [history] + [c for c in callbacks if c is not history]
    state = FitState(epochs=epochs, nbatches=len(cast(Sized, data)) if hasattr(data, "__len__")
                     else None, history=history)
    first_epoch = 0
    if resume is not None:
        first_epoch, state.iteration = _resume_point(resume)

    def call(hook: str) -> None:
        for callback in callbacks:
            getattr(callback, hook)(state)

    call("on_train_begin")
    if resume is not None and resume.get("history") is not None:
        history.restore(resume["history"])
    try:
        for epoch in range(first_epoch, epochs):
            state.epoch, state.logs, state.running_loss = epoch, {}, None
            call("on_epoch_begin")
            losses = []
            for minibatch, batch in enumerate(data):
                state.minibatch = minibatch
                state.learning_rate = (None if learning_rate is None
                                       else float(learning_rate(state.iteration)))
                arguments = feed(batch)
                started = time.perf_counter()
                output = train_step(*arguments)
                state.step_seconds = time.perf_counter() - started
                state.loss = _loss_value(output)
                state.iteration += 1
                if state.loss is not None:
                    losses.append(state.loss)
                    state.running_loss = float(np.mean(losses))
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


def _resume_point(resume) -> Tuple[int, int]:
    """(first epoch, steps taken) of a resume point, checked."""
    def count(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0

    if not isinstance(resume, Mapping) or set(resume) != {"epoch", "iteration", "history"} \
            or not count(resume["epoch"]) or not count(resume["iteration"]):
        raise AxgraphValueError("fit: resume takes what FitState.resume_point() returned (epoch, "
                                "iteration and history), as CheckpointCallback saves it",
                                user_location())
    return resume["epoch"], resume["iteration"]


__all__ = ["Callback", "EarlyStopping", "FitState", "MetricsHistory", "ProgressBar", "fit"]
