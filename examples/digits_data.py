"""scikit-learn's 8x8 digits (shipped inside the package), split by a fixed seed."""
from __future__ import annotations

import time
from typing import Callable, Dict, Optional, Tuple

import numpy as np

Split = Tuple[Tuple[np.ndarray, np.ndarray], Tuple[np.ndarray, np.ndarray]]


def load_digits_split(seed: int = 0, test_fraction: float = 0.25) -> Split:
    """((train images, labels), (test images, labels)); pixels scaled to [0, 1].

    Images are (examples, 8, 8) float32, labels int32.
    """
    from sklearn.datasets import load_digits

    data = load_digits()
    images = (data.images / 16.0).astype(np.float32)
    labels = data.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(labels))
    n_test = int(len(labels) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return (images[train], labels[train]), (images[test], labels[test])


def accuracy(predict: Callable[[np.ndarray], np.ndarray], images: np.ndarray,
             labels: np.ndarray) -> float:
    """Fraction of `images` whose predicted class equals the label."""
    return float(np.mean(predict(images) == labels))


def train_and_test(step, inputs, prediction, test_images, train_set, test_x: np.ndarray,
                   test_y: np.ndarray, epochs: int, backend: str, verbose: bool,
                   run=None, checkpoint: Optional[str] = None,
                   resume: Optional[str] = None) -> Dict:
    """Run `epochs` of the training step, then test; the loss per epoch, accuracy, seconds and
    the whole history (per step too, for a curve: ``plot_history(result["history"], path)``).

    `run` (a neon ``Checkpoint`` of the model, optimizer and `train_set`) is saved to
    `checkpoint` after every epoch, and restored from `resume` before training, which then
    continues the saved run up to `epochs` in all."""
    import axgraph as ng
    from axgraph.frontends.neon import CheckpointCallback, ProgressBar, fit

    started = time.perf_counter()
    with ng.make_transformer(backend) as transformer:
        progress = run.restore(resume, transformer) if resume else None
        if verbose and progress is not None:
            print(f"resumed from {resume} after epoch {progress['epoch']}", flush=True)
        train_step = transformer.computation(step, inputs["image"], inputs["label"])
        predict = transformer.computation(prediction, test_images)
        callbacks = [ProgressBar()] if verbose else []
        if checkpoint:
            callbacks.append(CheckpointCallback(run, checkpoint, transformer))
        history = fit(train_step, train_set, epochs,
                      feed=lambda b: (b["image"], b["label"]), callbacks=callbacks,
                      evaluate=lambda: {"test_accuracy": accuracy(predict, test_x, test_y)},
                      resume=progress)
        # evaluate() scored the test set after the last epoch already
        scored = history["test_accuracy"]
        test_accuracy = scored[-1] if scored else accuracy(predict, test_x, test_y)
    return {"losses": history["loss"], "test_accuracy": test_accuracy,
            "seconds": time.perf_counter() - started, "history": history}
