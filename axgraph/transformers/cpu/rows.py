"""Softmax, log-softmax and their backprops in NumPy, for the cpu backend's unfused nodes.

A node over the trailing dims of a dense input runs instead as a fused row
kernel (fusion.py); these serve every other layout and the machines without a
C compiler. Each writes its result into `out` with one temporary of the
reduced shape.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


def log_softmax(x: np.ndarray, axes: Sequence[int], out: np.ndarray) -> np.ndarray:
    """x - max - log(sum(exp(x - max))) over `axes`, computed in out."""
    axes = tuple(axes)
    if x.size == 0:
        return out
    np.subtract(x, np.max(x, axis=axes, keepdims=True), out=out)
    total = np.sum(np.exp(out), axis=axes, keepdims=True)
    out -= np.log(total, out=total)
    return out


def softmax_backprop(dy: np.ndarray, y: np.ndarray, axes: Sequence[int],
                     out: np.ndarray) -> np.ndarray:
    """y * (dy - sum(dy * y)) over `axes`, computed in out."""
    axes = tuple(axes)
    total = np.sum(np.multiply(dy, y), axis=axes, keepdims=True)
    np.subtract(dy, total, out=out)
    out *= y
    return out


def log_softmax_backprop(dy: np.ndarray, y: np.ndarray, axes: Sequence[int],
                         out: np.ndarray) -> np.ndarray:
    """dy - exp(y) * sum(dy) over `axes`, computed in out."""
    total = np.sum(dy, axis=tuple(axes), keepdims=True)
    return np.subtract(dy, np.exp(y) * total, out=out)
