"""Random tensors drawn afresh on every call, reproducible by seed.

`uniform` and `normal` take axes, or (Nervana Graph v0.4) a tensor op: the
draws then take its axes and dtype, and a stored tensor is filled with them.
"""
from __future__ import annotations

from typing import ClassVar, Optional, Tuple, Union

import numpy as np

from ..axes import AxesLike
from .fills import refill
from .op import Op

_seed_source = np.random.SeedSequence(0)


def set_random_seed(seed: int) -> None:
    """Restart the sequence that seeds random ops built without `seed=`.

    Each random op takes its seed when it is built, from this sequence, so
    a program that calls this first and then builds its graph draws the same
    values on every run.

    Parameters
    ----------
    seed : int
        The seed of the sequence (a non-negative int).
    """
    global _seed_source
    _seed_source = np.random.SeedSequence(seed)


def _next_seed() -> int:
    return int(_seed_source.spawn(1)[0].generate_state(1)[0])


class RandomOp(Op):
    """Base of random ops; `seed` fixes the stream each transformer draws from (a rebuilt
    op keeps it, and so draws the same values)."""

    attributes: ClassVar[Tuple[str, ...]] = ("seed",)
    seed: int

    def __init__(self, axes: AxesLike, seed: Optional[int], dtype, name: Optional[str],
                 **attributes):
        super().__init__(axes=axes, dtype=dtype, name=name,
                         seed=_next_seed() if seed is None else int(seed), **attributes)


class UniformOp(RandomOp):
    """Samples of U[low, high)."""

    attributes = ("low", "high", "seed")
    low: float
    high: float

    def __init__(self, axes, low, high, seed=None, dtype=None, name=None):
        super().__init__(axes, seed, dtype, name, low=float(low), high=float(high))


class NormalOp(RandomOp):
    """Samples of N(loc, scale**2)."""

    attributes = ("loc", "scale", "seed")
    loc: float
    scale: float

    def __init__(self, axes, loc, scale, seed=None, dtype=None, name=None):
        super().__init__(axes, seed, dtype, name, loc=float(loc), scale=float(scale))


def uniform(axes: Union[AxesLike, Op], low: float = 0.0, high: float = 1.0,
            seed: Optional[int] = None, dtype=None, name: Optional[str] = None) -> Op:
    """Samples of the uniform distribution on [low, high), drawn afresh on every call.

    The draws are reproducible: the op's seed fixes the stream each
    transformer draws from. `axes` may be a tensor op instead (Nervana Graph
    v0.4 `uniform(x, low, high)`): the samples take its axes and dtype, and a
    stored tensor (a variable, persistent tensor or placeholder) is filled
    with them, the result being its new value. As a variable's
    `initial_value` it draws the starting weights.

    Parameters
    ----------
    axes : Axes, Axis, iterable of Axis, or Op
        The samples' axes, or a tensor op to take the axes of (and to fill,
        when it is a writable stored tensor).
    low : float, optional
        The lower bound (included).
    high : float, optional
        The upper bound (excluded).
    seed : int, optional
        The seed of the op's random stream (None: the next one from
        `set_random_seed`'s sequence).
    dtype : dtype-like, optional
        The samples' float type; None: float32, or the tensor op's type.
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        The samples; for a stored tensor, its new value after the fill.

    Raises
    ------
    DTypeError
        If `dtype` is not a supported element type, or, for a tensor op, the
        draws' type (`dtype` or the op's) is not a float type.
    AxgraphTypeError, DuplicateAxisError
        If `axes` are not distinct Axis objects.

    Examples
    --------
    >>> import axgraph as ng
    >>> H = ng.make_axis(length=1000, name="H")
    >>> w = ng.variable([H], initial_value=ng.uniform([H], low=-0.1, high=0.1, seed=7))
    >>> with ng.make_transformer() as t:
    ...     values = t.computation(w)()
    >>> bool(values.min() >= -0.1 and values.max() < 0.1)
    True
    """
    if isinstance(axes, Op):
        draw = UniformOp(axes.axes, low, high, seed=seed, dtype=dtype or axes.dtype)
        return refill(axes, draw, name)
    return UniformOp(axes, low, high, seed=seed, dtype=dtype, name=name)


def normal(axes: Union[AxesLike, Op], loc: float = 0.0, scale: float = 1.0,
           seed: Optional[int] = None, dtype=None, name: Optional[str] = None) -> Op:
    """Samples of the normal distribution N(loc, scale**2), drawn afresh on every call.

    Reproducible by the op's seed. Like `uniform`, it also takes a tensor op,
    whose axes and dtype the samples take and which, when stored, it fills.

    Parameters
    ----------
    axes : Axes, Axis, iterable of Axis, or Op
        The samples' axes, or a tensor op to take the axes of (and to fill,
        when it is a writable stored tensor).
    loc : float, optional
        The mean.
    scale : float, optional
        The standard deviation.
    seed : int, optional
        The seed of the op's random stream (None: the next one from
        `set_random_seed`'s sequence).
    dtype : dtype-like, optional
        The samples' float type; None: float32, or the tensor op's type.
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        The samples; for a stored tensor, its new value after the fill.

    Raises
    ------
    DTypeError
        If `dtype` is not a supported element type, or, for a tensor op, the
        draws' type (`dtype` or the op's) is not a float type.
    AxgraphTypeError, DuplicateAxisError
        If `axes` are not distinct Axis objects.
    """
    if isinstance(axes, Op):
        draw = NormalOp(axes.axes, loc, scale, seed=seed, dtype=dtype or axes.dtype)
        return refill(axes, draw, name)
    return NormalOp(axes, loc, scale, seed=seed, dtype=dtype, name=name)
