"""Kernels the generated code calls where NumPy has no single `out=` function.

Each writes its result into a caller-given, planned buffer `out`, so a
compiled computation allocates nothing per call for these ops.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

# The reference's own out= kernels, called by the generated code as rt.<name>.
from ...core.interpreter import gather, scatter_add  # noqa: F401
from ...errors import ExecutionError


def sigmoid(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)): IEEE arithmetic gives the limits (exp overflows to inf, 1 / inf
    is 0) with full relative accuracy in the tail, so no branch is needed (the overflow
    is silenced by the errstate every run of a program is under)."""
    np.negative(x, out=out)
    np.exp(out, out=out)
    out += 1.0
    np.divide(1.0, out, out=out)  # np.reciprocal is several times slower on float32
    return out


def convert(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """x cast into out's element type."""
    np.copyto(out, x, casting="unsafe")
    return out


def copy(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """x's elements in row-major order written into out (a Reshape that must copy)."""
    np.copyto(out.reshape(x.shape), x)
    return out


def pad(x: np.ndarray, below: Sequence[int], interior: Sequence[int], value,
        out: np.ndarray) -> np.ndarray:
    """x surrounded by (and interleaved with) `value`, written into out."""
    out.fill(value)
    region = tuple(slice(lo, lo + (n - 1) * (gap + 1) + 1 if n else lo, gap + 1)
                   for lo, gap, n in zip(below, interior, x.shape))
    out[region] = x
    return out


def arg_reduce(x: np.ndarray, axes: Sequence[int], pick_max: bool, out: np.ndarray) -> np.ndarray:
    """Index of the extreme over `axes`, counted row-major over them in the order given."""
    kept = [i for i in range(x.ndim) if i not in axes]
    moved = np.transpose(x, kept + list(axes))
    flat = moved.reshape(moved.shape[:len(kept)] + (-1,))
    index = np.argmax(flat, axis=-1) if pick_max else np.argmin(flat, axis=-1)
    np.copyto(out, index, casting="unsafe")
    return out


def softmax(x: np.ndarray, axes: Sequence[int], out: np.ndarray) -> np.ndarray:
    """exp(x - max) / sum, over `axes`, computed in out."""
    axes = tuple(axes)
    np.subtract(x, np.max(x, axis=axes, keepdims=True), out=out)
    np.exp(out, out=out)
    out /= np.sum(out, axis=axes, keepdims=True)
    return out


def one_hot_positions(count: int, axis: int, rank: int) -> np.ndarray:
    """0..count-1 along `axis` of a rank-`rank` array (what one_hot compares against)."""
    return np.arange(count).reshape([-1 if i == axis else 1 for i in range(rank)])


def one_hot(x: np.ndarray, positions: np.ndarray, expanded: Sequence[int],
            out: np.ndarray) -> np.ndarray:
    """out[..., i, ...] = (x == i) along the axis `positions` runs on (x viewed with the
    `expanded` shape: a 1 there); values outside [0, n) or not whole raise."""
    if x.size:
        if x.dtype.kind == "f" and not np.all(np.isfinite(x) & (x == np.round(x))):
            raise ExecutionError("one-hot values must be whole numbers")
        low, high = x.min(), x.max()
        if low < 0 or high >= positions.size:
            raise ExecutionError(f"one-hot values must lie in [0, {positions.size}); got "
                                 f"{low}..{high}")
    np.equal(x.reshape(expanded), positions, out=out, casting="unsafe")
    return out
