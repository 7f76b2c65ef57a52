"""Axis lengths as dims, so that the axes graph binds sizes the way core Functions do.

An axis with a length has that length as its dim (an int, or a `Dim`
expression such as `2*T`); an axis without one gets a size variable of its
own, one per base axis, named after it. Lowering writes these dims into the
core IR, and feeding unifies them with the fed arrays' shapes
(`dims.bind_shapes`, the routine behind `Function.bind`).
"""
from __future__ import annotations

import math
from typing import Any, Dict, FrozenSet, Iterable, Mapping, Tuple

from .axes import Axis, FlattenedAxis
from .dims import Dim, DimLike, free_symbols, subs


class AxisDims:
    """The dim of each axis; fresh size variables for the axes without a length.

    `reserved`: names a fresh variable must not take, because symbolic lengths use
    them (`length_symbols`): an axis N without a length is not the `Dim("N")` of another.
    """

    def __init__(self, reserved: Iterable[str] = ()) -> None:
        self._symbols: Dict[Axis, DimLike] = {}
        self._names: set = set(reserved)
        #: Each size variable made here: the axis it stands for, and what first needed it.
        self.origins: Dict[str, Tuple[Axis, Any]] = {}
        #: Values of declared size variables that the graph pins (`substitute`).
        self._pinned: Dict[str, DimLike] = {}

    def dim(self, axis: Axis, origin: Any = None) -> DimLike:
        """The length of `axis` (an int or a Dim), or the size variable standing for it;
        `origin` is recorded with a variable made for this call (for error messages)."""
        if isinstance(axis, FlattenedAxis):
            return math.prod((self.dim(a, origin) for a in axis.axes), start=1)
        base = axis.base
        if base.length is not None:
            return subs(base.length, self._pinned) if self._pinned else base.length
        symbol = self._symbols.get(base)
        if symbol is None:
            name = base.name if base.name.isidentifier() else "size"
            if name in self._names:
                name = f"{name}_{base._serial}"
            self._names.add(name)
            symbol = self._symbols[base] = Dim(name)
            self.origins[name] = (base, origin)
        return symbol

    def dims(self, axes: Iterable[Axis], origin: Any = None) -> Tuple[DimLike, ...]:
        """`dim` of each axis, in order."""
        return tuple(self.dim(a, origin) for a in axes)

    def define(self, axis: Axis, dim: DimLike) -> None:
        """Give an axis without a length the dim an op computes for it (a concat's joined
        axis), rather than a size variable of its own that no data could bind."""
        base = axis.base
        if base.length is None and base not in self._symbols:
            self._symbols[base] = dim


    def substitute(self, pinned: Mapping[str, DimLike]) -> None:
        """Replace declared size variables that the graph pins to a value (a symbolic
        length the shape solver found must be 3) in every length given from now on."""
        self._pinned.update(pinned)


def length_symbols(axes: Iterable[Axis]) -> FrozenSet[str]:
    """The size variables that the (symbolic) lengths of `axes` use."""
    return frozenset().union(*(free_symbols(a.length) for a in axes if a.length is not None))
