"""Core-op helpers for the ATen rules: torch's implicit broadcasting and promotion made
explicit, as the strict core requires."""
from __future__ import annotations

from typing import Any, Sequence, Tuple

from ... import core
from ...dims import Dim, DimLike, definitely_equal, known


def fill(et: core.ElementType, shape: Any, value: Any) -> core.Node:
    """A constant of `shape` holding `value` everywhere (a symbolic size: its value at
    run time, broadcast)."""
    if isinstance(value, Dim):
        return broadcast_to(core.Convert(core.DimValue(value), et), tuple(shape))
    if isinstance(value, bool) and et is not core.boolean:
        value = int(value)
    return core.Constant(et, core.Shape(tuple(shape)), value)


def convert(x: core.Node, et: core.ElementType) -> core.Node:
    """x in element type `et` (x itself when it already is)."""
    return x if x.element_type is et else core.Convert(x, et)


def tensor(value: Any, et: core.ElementType, shape: Sequence[DimLike] = ()) -> core.Node:
    """A core node of type `et` for a node or a Python number (a number fills `shape`)."""
    if isinstance(value, core.Node):
        return convert(value, et)
    return fill(et, shape, value)


def broadcast_to(x: core.Node, shape: Sequence[DimLike]) -> core.Node:
    """x broadcast to `shape` by torch's rules: trailing dims align, a dim of 1 stretches."""
    shape = tuple(shape)
    offset = len(shape) - x.rank
    kept = [i for i, d in enumerate(x.shape)
            if not (known(d, -1) == 1 and not definitely_equal(shape[offset + i], 1))]
    new = tuple(p for p in range(len(shape)) if p < offset or (p - offset) not in kept)
    if not new:
        return x
    if len(kept) != x.rank:
        x = core.Reshape(x, core.Shape(tuple(x.shape[i] for i in kept)))
    return core.Broadcast(x, core.Shape(shape), new)


def elementwise(op: Any, et: core.ElementType, shape: Sequence[DimLike],
                *values: Any) -> core.Node:
    """`op` over values converted to `et` and broadcast to `shape`."""
    return op(*(broadcast_to(tensor(v, et, shape), shape) for v in values))


def positions(dims: Any, rank: int) -> Tuple[int, ...]:
    """Torch dim arguments (an int, a list, negative or None for all) as sorted positions."""
    if dims is None:
        return tuple(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    if len(dims) == 0:
        return tuple(range(rank))
    return tuple(sorted({d % rank if rank else 0 for d in dims}))


def keep_dims(x: core.Node, shape: Sequence[DimLike], axes: Sequence[int]) -> core.Node:
    """A reduction's result x reshaped to `shape` with the reduced `axes` kept as 1s."""
    return core.Reshape(x, core.Shape(tuple(1 if i in axes else d for i, d in enumerate(shape))))


def count(shape: Sequence[DimLike], axes: Sequence[int], et: core.ElementType) -> core.Node:
    """How many elements the dims `axes` of `shape` hold, as a scalar of type `et`."""
    total: DimLike = 1
    for axis in axes:
        total = total * shape[axis]
    if isinstance(total, int):
        return fill(et, (), total)
    return core.Convert(core.DimValue(total), et)


__all__ = ["fill", "convert", "tensor", "broadcast_to", "elementwise", "positions",
           "keep_dims", "count"]
