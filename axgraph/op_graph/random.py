"""Random tensors drawn afresh on every call, reproducible by seed."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..axes import AxesLike
from .op import Op

_seed_source = np.random.SeedSequence(0)


def set_random_seed(seed: int) -> None:
    """Restart the sequence that seeds random ops built without `seed=`."""
    global _seed_source
    _seed_source = np.random.SeedSequence(seed)


def _next_seed() -> int:
    return int(_seed_source.spawn(1)[0].generate_state(1)[0])


class RandomOp(Op):
    """Base of random ops; `seed` fixes the stream each transformer draws from."""

    def __init__(self, axes: AxesLike, seed: Optional[int], dtype, name: Optional[str]):
        super().__init__(axes=axes, dtype=dtype, name=name)
        self.seed = _next_seed() if seed is None else int(seed)


class UniformOp(RandomOp):
    """Samples of U[low, high)."""

    def __init__(self, axes, low, high, seed=None, dtype=None, name=None):
        super().__init__(axes, seed, dtype, name)
        self.low, self.high = float(low), float(high)


class NormalOp(RandomOp):
    """Samples of N(loc, scale**2)."""

    def __init__(self, axes, loc, scale, seed=None, dtype=None, name=None):
        super().__init__(axes, seed, dtype, name)
        self.loc, self.scale = float(loc), float(scale)


def uniform(axes: AxesLike, low: float = 0.0, high: float = 1.0, seed: Optional[int] = None,
            dtype=None, name: Optional[str] = None) -> Op:
    """New uniform samples in [low, high) on every call (reproducible by `seed`)."""
    return UniformOp(axes, low, high, seed=seed, dtype=dtype, name=name)


def normal(axes: AxesLike, loc: float = 0.0, scale: float = 1.0, seed: Optional[int] = None,
           dtype=None, name: Optional[str] = None) -> Op:
    """New normal samples of mean `loc`, std `scale` on every call."""
    return NormalOp(axes, loc, scale, seed=seed, dtype=dtype, name=name)
