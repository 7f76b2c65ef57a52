"""The data-movement kernels of array backends, written once over an array module.

Broadcast, reshape, transpose, slice, reverse and concatenation mean the same
thing in NumPy and in `jax.numpy`, so the core interpreter and the jax backend
register these same kernels, each over its own module (`np` or `jnp`). The
NumPy reference transformer keeps its own code, as it does for every op.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Sequence

from ..errors import ExecutionError
from . import ops


def movement_kernels(xp: Any) -> Dict[type, Callable]:
    """The kernel of each data-movement core op over the array module `xp`.

    Parameters
    ----------
    xp : module
        `numpy` or `jax.numpy` (anything with their `broadcast_to`, `transpose`,
        `flip` and `concatenate`, over arrays with `reshape` and basic slicing).

    Returns
    -------
    dict of type to callable
        Core op class -> ``kernel(node, ctx, *inputs)``, where ``ctx.shape(shape)``
        and ``ctx.dim(dim)`` give concrete lengths.
    """
    def broadcast(node, ctx, x):
        target = ctx.shape(node.shape)
        expanded = x.reshape([1 if i in node.axes else d for i, d in enumerate(target)])
        return xp.broadcast_to(expanded, target)

    def reshape(node, ctx, x):
        return x.reshape(ctx.shape(node.shape))

    def transpose(node, ctx, x):
        return xp.transpose(x, node.permutation)

    def slice_(node, ctx, x):
        index = []
        for i, (low, high, step) in enumerate(zip(node.lower, node.upper, node.strides)):
            low, high = ctx.dim(low), ctx.dim(high)
            if not 0 <= low <= high <= x.shape[i]:
                raise ExecutionError(f"slice bounds [{low}:{high}] of dim {i} do not fit "
                                     f"length {x.shape[i]}")
            index.append(slice(low, high, step))
        return x[tuple(index)]

    def reverse(node, ctx, x):
        return xp.flip(x, node.axes) if node.axes else x

    def concat(node, ctx, *xs):
        return xp.concatenate(xs, axis=node.axis)

    return {ops.Broadcast: broadcast, ops.Reshape: reshape, ops.Transpose: transpose,
            ops.Slice: slice_, ops.Reverse: reverse, ops.Concat: concat}


def window_positions(offset: Sequence[int], strides: Sequence[int], dilation: Sequence[int],
                     out_lengths: Sequence[int]) -> tuple:
    """For one window offset: the index of the padded-input positions (N, C, P...) seen by
    every output position, as basic slices (a view in either module)."""
    return (slice(None), slice(None)) + tuple(
        slice(o * d, o * d + s * (n - 1) + 1, s)
        for o, d, s, n in zip(offset, dilation, strides, out_lengths))


def pad_spatial(xp: Any, x, below: Sequence[int], above: Sequence[int], value):
    """x (N, C, spatial...) padded with `value` before and after its spatial dims, by the
    array module `xp` (x itself where nothing is padded)."""
    if not any(below) and not any(above):
        return x
    return xp.pad(x, [(0, 0), (0, 0)] + list(zip(below, above)), constant_values=value)
