"""fit and its callbacks: histories, early stopping, progress output with and without tqdm."""
import io
import sys

import numpy as np
import pytest

import axgraph as ng
from axgraph.frontends.neon.callbacks import (Callback, EarlyStopping, MetricsHistory,
                                              ProgressBar, fit)
from axgraph.frontends.neon.data import ArrayIterator
from axgraph.frontends.neon.optimizer import GradientDescentMomentum


def scripted_step(losses):
    """A stand-in train step returning the given losses one after another."""
    values = iter(losses)
    return lambda *inputs: np.float32(next(values))


BATCHES = [{"x": np.zeros(1)}] * 2
FEED = lambda batch: (batch["x"],)  # noqa: E731


def test_history_records_mean_loss_and_metrics_per_epoch():
    evaluations = iter([{"val_acc": 0.5}, {"val_acc": 0.75}])
    history = fit(scripted_step([4, 2, 1, 1]), BATCHES, epochs=2, feed=FEED,
                  evaluate=lambda: next(evaluations))
    assert isinstance(history, MetricsHistory)
    assert history.epochs == [0, 1]
    assert history["loss"] == [3.0, 1.0]
    assert history["val_acc"] == [0.5, 0.75]


def test_hooks_run_in_order_and_a_given_history_is_returned():
    calls = []

    class Recorder(Callback):
        def __getattribute__(self, name):
            if name.startswith("on_"):
                return lambda state: calls.append((name, state.epoch))
            return object.__getattribute__(self, name)

    history = MetricsHistory()
    assert fit(scripted_step([1, 1]), BATCHES, 1, FEED, callbacks=[Recorder(), history]) is history
    assert calls == [("on_train_begin", 0), ("on_epoch_begin", 0), ("on_minibatch_end", 0),
                     ("on_minibatch_end", 0), ("on_epoch_end", 0), ("on_train_end", 0)]


def test_early_stopping_ends_training_after_patience_epochs():
    losses = [5, 5, 3, 3, 3.5, 3.5, 3.25, 3.25] + [2.5] * 20   # best at epoch 1, then none
    stopper = EarlyStopping(patience=2, monitor="loss")
    history = fit(scripted_step(losses), BATCHES, epochs=10, feed=FEED, callbacks=[stopper])
    assert history["loss"] == [5.0, 3.0, 3.5, 3.25]
    assert (stopper.best, stopper.best_epoch, stopper.stopped_epoch) == (3.0, 1, 3)


def test_early_stopping_min_delta_and_max_mode():
    accuracies = iter([{"val_acc": a} for a in (0.5, 0.6, 0.605, 0.608, 0.9)])
    stopper = EarlyStopping(patience=2, monitor="val_acc", min_delta=0.01)
    history = fit(scripted_step([1] * 10), BATCHES, epochs=5, feed=FEED, callbacks=[stopper],
                  evaluate=lambda: next(accuracies))
    assert stopper.mode == "max"
    assert history["val_acc"] == [0.5, 0.6, 0.605, 0.608]


def test_early_stopping_stops_on_a_loss_that_is_nan_from_the_start():
    stopper = EarlyStopping(patience=1, monitor="loss")
    history = fit(scripted_step([float("nan")] * 20), BATCHES, epochs=5, feed=FEED,
                  callbacks=[stopper])
    assert len(history["loss"]) == 1 and stopper.best_epoch is None and stopper.stopped_epoch == 0


def test_early_stopping_names_a_missing_metric():
    with pytest.raises(ng.AxgraphValueError, match="(?s)val_loss.*test_neon_callbacks.py"):
        fit(scripted_step([1, 1]), BATCHES, 1, FEED, callbacks=[EarlyStopping(monitor="val_loss")])


def test_progress_bar_without_tqdm_prints_a_line_per_epoch(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)           # import tqdm now fails
    stream = io.StringIO()
    fit(scripted_step([2, 2, 1, 1]), BATCHES, 2, FEED,
        callbacks=[ProgressBar(stream=stream), EarlyStopping(patience=0)])
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("epoch 1/2  loss 2.0000")
    assert lines[1].startswith("epoch 2/2  loss 1.0000")
    assert len(lines) == 2
    with pytest.raises(ImportError):
        fit(scripted_step([1, 1]), BATCHES, 1, FEED, callbacks=[ProgressBar(use_tqdm=True)])


def test_progress_bar_with_tqdm_on_a_non_terminal_stream():
    pytest.importorskip("tqdm")
    stream = io.StringIO()
    fit(scripted_step([2, 2]), BATCHES, 1, FEED, callbacks=[ProgressBar(stream=stream, use_tqdm=True)])
    assert "epoch 1/1" in stream.getvalue() and "2/2" in stream.getvalue()
    plain = io.StringIO()                                    # not a terminal: plain lines
    fit(scripted_step([2, 2]), BATCHES, 1, FEED, callbacks=[ProgressBar(stream=plain)])
    assert plain.getvalue().startswith("epoch 1/1  loss 2.0000")


def test_fit_trains_a_linear_model(transformer):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 3))
    y = X @ np.array([1.0, -2.0, 0.5])
    train = ArrayIterator({"x": X, "y": y}, batch_size=16, shuffle=True)
    F = ng.make_axis(name="F")
    inputs = train.make_placeholders(axes={"x": [F]})
    w = ng.variable([F], initial_value=0.0, name="w")
    loss = ng.mean(ng.square(ng.sum(inputs["x"] * w, out_axes=[inputs["y"].axes[0]]) - inputs["y"]),
                   out_axes=())
    optimizer = GradientDescentMomentum(0.1, momentum_coef=0.5)
    step = transformer.computation(ng.sequential([optimizer(loss), loss]), inputs["x"], inputs["y"])
    history = fit(step, train, epochs=8, feed=lambda b: (b["x"], b["y"]))
    assert history["loss"][-1] < 1e-2 * history["loss"][0]
    np.testing.assert_allclose(transformer.computation(w)(), [1.0, -2.0, 0.5], atol=0.05)
