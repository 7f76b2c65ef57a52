"""Training feedback: fit's per-step history, the progress bar's running loss, resuming fit from
a checkpoint, and the loss/accuracy curve PNG."""
from __future__ import annotations

import io
import sys

import numpy as np
import pytest

import axgraph as ng
from axgraph.errors import AxgraphValueError
from axgraph.frontends.neon import (Adam, ArrayIterator, Checkpoint, CheckpointCallback,
                                    GradientDescentMomentum, MetricsHistory, PlotError,
                                    ProgressBar, WarmupCosineSchedule, fit, plot_history)


def linear_run(schedule=None, seed=0):
    """SGD on cost = mean(c) * w, whose gradient is mean(c): each step moves w by -rate * mean(c)."""
    rng = np.random.default_rng(seed)
    data = ArrayIterator({"c": rng.uniform(1, 2, size=12).astype(np.float32)}, batch_size=3)
    c = data.make_placeholders()["c"]
    w = ng.variable((), initial_value=0.0, name="w")
    cost = ng.mean(c, out_axes=()) * w
    optimizer = GradientDescentMomentum(0.5, schedule=schedule)
    step = ng.sequential([optimizer(cost), ng.mean(c, out_axes=())])
    return data, c, w, optimizer, step


def test_fit_records_every_step_with_the_rate_it_used():
    data, c, w, optimizer, step = linear_run(WarmupCosineSchedule(3, 8, min_rate=0.05))
    with ng.NumPyTransformer() as transformer:
        train, weight = transformer.computation([step, w], c), transformer.computation(w)
        history = fit(lambda batch_c: train(batch_c)[0], data, 2, feed=lambda b: (b["c"],),
                      learning_rate=optimizer.learning_rate_at)
        final = float(weight())
    steps = history.steps
    assert len(steps["loss"]) == len(steps["learning_rate"]) == len(steps["seconds"]) == 8
    assert all(0 < s < 5 for s in steps["seconds"])
    # w moved by -rate * mean(c) each step: the recorded rates explain the final w
    np.testing.assert_allclose(final, -sum(r * m for r, m in zip(steps["learning_rate"],
                                                                  steps["loss"])), rtol=1e-5)
    expected = [0.5 * (t + 1) / 3 for t in range(3)] + [
        0.05 + 0.45 * (1 + np.cos(np.pi * (t - 3) / 5)) / 2 for t in range(3, 8)]
    np.testing.assert_allclose(steps["learning_rate"], expected, rtol=1e-6)
    assert history["loss"] == pytest.approx([np.mean(steps["loss"][:4]), np.mean(steps["loss"][4:])])


def test_without_a_rate_the_history_holds_nan():
    history = fit(lambda: 1.0, [{}], 2, feed=lambda b: ())
    assert np.isnan(history.steps["learning_rate"]).all() and history.steps["loss"] == [1.0, 1.0]


def test_plain_progress_shows_the_running_loss():
    losses = [4.0, 2.0, 3.0, 1.0, 1.0, 0.5]
    out = io.StringIO()
    fit(iter(losses).__next__, [{}, {}, {}], 2, feed=lambda b: (),
        callbacks=[ProgressBar(stream=out, use_tqdm=False, every=2)],
        learning_rate=lambda step: 0.01)
    lines = out.getvalue().splitlines()
    assert lines[0] == "epoch 1/2  step 2/3  running loss 3.0000  lr 0.01"
    assert lines[1].startswith("epoch 1/2  loss 3.0000  (")
    assert lines[2] == "epoch 2/2  step 2/3  running loss 1.0000  lr 0.01"
    assert lines[3].startswith(f"epoch 2/2  loss {np.mean(losses[3:]):.4f}  (")
    assert len(lines) == 4


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_terminal_without_tqdm_redraws_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    out = Terminal()
    fit(iter([2.0, 1.0]).__next__, [{}, {}], 1, feed=lambda b: (), callbacks=[ProgressBar(stream=out)])
    text = out.getvalue()
    assert text.count("\n") == 1                      # one line per epoch, redrawn per step
    assert "\repoch 1/1  step 2/2  running loss 1.5000" in text
    assert "\repoch 1/1  loss 1.5000" in text


def test_tqdm_bar_shows_the_running_loss():
    pytest.importorskip("tqdm")
    out = io.StringIO()
    fit(iter([3.0, 1.0]).__next__, [{}, {}], 1, feed=lambda b: (),
        callbacks=[ProgressBar(stream=out, use_tqdm=True)])
    assert "loss 2.0000" in out.getvalue() and "2/2" in out.getvalue()


def test_progress_bar_checks_every():
    with pytest.raises(AxgraphValueError, match="every must be a positive int"):
        ProgressBar(every=0)


def test_fit_resumed_from_a_checkpoint_matches_an_unbroken_run(tmp_path):
    def train(epochs, path, resume):
        rng = np.random.default_rng(0)
        xs = rng.standard_normal(10).astype(np.float32)
        data = ArrayIterator({"x": xs, "y": (2 * xs - 1).astype(np.float32)}, batch_size=4,
                             shuffle=True, seed=1)
        inputs = data.make_placeholders()
        w = ng.variable((), initial_value=0.0, name="w")
        b = ng.variable((), initial_value=0.0, name="b")
        loss = ng.mean(ng.square(w * inputs["x"] + b - inputs["y"]), out_axes=())
        optimizer = Adam(0.1, schedule=WarmupCosineSchedule(2, 12))
        step = ng.sequential([optimizer(loss), loss])
        run = Checkpoint({"w": w, "b": b}, optimizer, data)
        with ng.NumPyTransformer() as transformer:
            progress = run.restore(path, transformer) if resume else None
            return fit(transformer.computation(step, inputs["x"], inputs["y"]), data, epochs,
                       feed=lambda batch: (batch["x"], batch["y"]),
                       callbacks=[CheckpointCallback(run, path, transformer, every=2)],
                       learning_rate=optimizer.learning_rate_at, resume=progress)

    unbroken = train(4, tmp_path / "a.npz", resume=False)
    first = train(2, tmp_path / "b.npz", resume=False)
    resumed = train(4, tmp_path / "b.npz", resume=True)
    assert first.steps["loss"] == unbroken.steps["loss"][:6]
    assert resumed.history == unbroken.history and resumed.epochs == [0, 1, 2, 3]
    assert resumed.steps["loss"] == unbroken.steps["loss"]
    assert resumed.steps["learning_rate"] == unbroken.steps["learning_rate"]
    with pytest.raises(AxgraphValueError, match="resume takes what FitState.resume_point"):
        fit(lambda: 1.0, [{}], 1, feed=lambda b: (), resume={"epoch": -1})
    with pytest.raises(AxgraphValueError, match="every must be a positive int"):
        CheckpointCallback(None, tmp_path / "c.npz", None, every=0)


def test_metrics_history_restore_checks_the_record():
    with pytest.raises(AxgraphValueError, match="as_dict"):
        MetricsHistory().restore({"history": {}})
    with pytest.raises(AxgraphValueError, match="lists of numbers"):
        MetricsHistory().restore({"history": {"loss": ["a"]}, "epochs": [],
                                  "steps": {"loss": [], "learning_rate": [], "seconds": []}})


def test_plot_history_writes_the_curves(tmp_path):
    image = pytest.importorskip("matplotlib.image")
    history = fit(iter([3.0, 2.0, 1.5, 1.0]).__next__, [{}, {}], 2, feed=lambda b: (),
                  evaluate=iter([{"val_acc": 0.5}, {"val_acc": 0.75}]).__next__)
    path = plot_history(history, tmp_path / "curves.png", title="run")
    pixels = image.imread(path)
    assert pixels.shape[:2] == (400, 1100)            # two panels: loss and accuracy
    one = plot_history(history, tmp_path / "loss.png", metrics=["loss"])
    assert image.imread(one).shape[:2] == (400, 550)
    with pytest.raises(AxgraphValueError, match="no metric 'acc'.*'loss', 'val_acc'"):
        plot_history(history, tmp_path / "x.png", metrics=["acc"])
    with pytest.raises(AxgraphValueError, match="no values to draw"):
        plot_history(MetricsHistory(), tmp_path / "x.png")


def test_plot_history_without_matplotlib_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    with pytest.raises(PlotError, match="pip install axgraph\\[viz\\]"):
        plot_history({"loss": [1.0]}, tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_digits_example_is_quiet_and_plots_its_curves(tmp_path, capsys):
    pytest.importorskip("sklearn")
    pytest.importorskip("matplotlib")
    from examples import digits_mlp
    assert digits_mlp.main(["--epochs", "2", "--backend", "numpy", "--quiet",
                            "--plot", str(tmp_path / "digits.png")]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "final test accuracy" in out and "curves written to" in out
    assert (tmp_path / "digits.png").read_bytes()[:4] == b"\x89PNG"
