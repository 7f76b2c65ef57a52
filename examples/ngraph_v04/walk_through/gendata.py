"""Synthetic data for the logistic-regression walk-throughs (v0.4's gendata, rewritten).

`MixtureGenerator(pvals, shape)` draws examples from a mixture of Gaussians,
one per class, with class probabilities `pvals` and feature shape `shape`;
``gen_data(batch_size, n_batches)`` returns lists of batches with the
examples along the last axis (features..., batch), as the walk-throughs'
placeholders (C, N) and (W, H, N) expect, and labels (batch,).
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np


class MixtureGenerator:
    def __init__(self, pvals: Sequence[float], shape: Tuple[int, ...], seed: int = 0):
        self.pvals = np.asarray(pvals, dtype=np.float64)
        self.shape = tuple(shape)
        self.rng = np.random.default_rng(seed)
        #: One mean per class, two standard deviations apart in every feature.
        self.means = self.rng.uniform(-1.0, 1.0, (len(self.pvals),) + self.shape)

    def gen_data(self, batch_size: int, n_batches: int
                 ) -> Tuple[List[np.ndarray], List[np.ndarray]]:
        xs, ys = [], []
        for _ in range(n_batches):
            labels = self.rng.choice(len(self.pvals), size=batch_size, p=self.pvals)
            examples = self.means[labels] + 0.5 * self.rng.standard_normal(
                (batch_size,) + self.shape)
            xs.append(np.moveaxis(examples, 0, -1).astype(np.float32))
            ys.append(labels.astype(np.float32))
        return xs, ys
