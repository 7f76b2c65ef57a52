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
    """Restart the sequence that seeds random ops built without `seed=`."""
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
    """New uniform samples in [low, high) on every call (reproducible by `seed`).

    `axes` may be a tensor op instead (Nervana Graph v0.4 `uniform(x, low, high)`):
    the samples take its axes and dtype, and a stored tensor (a variable,
    persistent tensor or placeholder) is filled with them, the result being
    its new value.
    """
    if isinstance(axes, Op):
        draw = UniformOp(axes.axes, low, high, seed=seed, dtype=dtype or axes.dtype)
        return refill(axes, draw, name)
    return UniformOp(axes, low, high, seed=seed, dtype=dtype, name=name)


def normal(axes: Union[AxesLike, Op], loc: float = 0.0, scale: float = 1.0,
           seed: Optional[int] = None, dtype=None, name: Optional[str] = None) -> Op:
    """New normal samples of mean `loc`, std `scale` on every call.

    Like `uniform`, it also takes a tensor op, whose axes and dtype the samples
    take and which, when stored, it fills.
    """
    if isinstance(axes, Op):
        draw = NormalOp(axes.axes, loc, scale, seed=seed, dtype=dtype or axes.dtype)
        return refill(axes, draw, name)
    return NormalOp(axes, loc, scale, seed=seed, dtype=dtype, name=name)
