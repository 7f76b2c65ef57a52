"""scikit-learn's 8x8 digits (shipped inside the package), split by a fixed seed."""
from __future__ import annotations

from typing import Callable, Tuple

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
