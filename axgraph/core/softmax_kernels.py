"""The softmax kernels of array backends, written once over an array module.

Softmax, LogSoftmax and their backprops are the same formulas in NumPy and in
`jax.numpy`, so the core interpreter and the jax backend register these same
kernels, each over its own module (`np` or `jnp`), as they do the data-movement
kernels (movement_kernels.py). The NumPy reference transformer keeps its own code.
"""
from __future__ import annotations

from typing import Any, Callable, Dict

from . import ops


def softmax_kernels(xp: Any) -> Dict[type, Callable]:
    """The kernel of each softmax core op over the array module `xp`.

    Parameters
    ----------
    xp : module
        `numpy` or `jax.numpy` (anything with their `max`, `sum`, `exp` and `log`
        taking ``axis=`` and ``keepdims=``).

    Returns
    -------
    dict of type to callable
        Core op class -> ``kernel(node, ctx, *inputs)``.
    """
    def softmax(node, ctx, x):
        if x.size == 0:
            return x.copy()
        axes = tuple(node.axes)
        shifted = xp.exp(x - xp.max(x, axis=axes, keepdims=True))
        return shifted / xp.sum(shifted, axis=axes, keepdims=True)

    def log_softmax(node, ctx, x):
        if x.size == 0:
            return x.copy()
        axes = tuple(node.axes)
        shifted = x - xp.max(x, axis=axes, keepdims=True)
        return shifted - xp.log(xp.sum(xp.exp(shifted), axis=axes, keepdims=True))

    def softmax_backprop(node, ctx, dy, y):
        return y * (dy - xp.sum(dy * y, axis=tuple(node.axes), keepdims=True))

    def log_softmax_backprop(node, ctx, dy, y):
        return dy - xp.exp(y) * xp.sum(dy, axis=tuple(node.axes), keepdims=True)

    return {ops.Softmax: softmax, ops.LogSoftmax: log_softmax,
            ops.SoftmaxBackprop: softmax_backprop, ops.LogSoftmaxBackprop: log_softmax_backprop}
