"""What an Axon program's values become in an axes graph, and the axes they live on.

Each inferred dim becomes an axis, and dims the solver made equal share one: the axis
of the i-th occurrence of a dim in a shape is `AxisTable.axes_for(shape)[i]`, one
object per (dim, occurrence). A tensor value keeps its op and the axes of its Axon
shape, in order; the op may hold more axes (the element axes of an enclosing `map`),
which ride along through every op, since axgraph ops pair axes by identity, never by
position.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Sequence, Tuple

from ... import axes as axes_module
from ...axes import Axis
from ...dims import DimLike
from ...op_graph import shape_ops
from ...op_graph.op import Op


class AxisTable:
    """One axis per (dim, occurrence): the axes of every value of a lowered program.

    Parameters
    ----------
    display : callable
        Gives a dim's printed form, used as its axis's name.
    """

    def __init__(self, display: Callable[[DimLike], str]):
        self.display = display
        self.axes: Dict[Tuple[DimLike, int], Axis] = {}
        self.count = 0

    def axes_for(self, dims: Sequence[DimLike]) -> Tuple[Axis, ...]:
        """The axes of a tensor whose shape is `dims`."""
        seen: Dict[DimLike, int] = {}
        found: List[Axis] = []
        for dim in dims:
            occurrence = seen.get(dim, 0)
            seen[dim] = occurrence + 1
            key = (dim, occurrence)
            if key not in self.axes:
                name = self.display(dim) + ("" if occurrence == 0 else f"#{occurrence + 1}")
                self.axes[key] = axes_module.make_axis(length=dim, name=name, batch=False)
            found.append(self.axes[key])
        return tuple(found)

    def fresh(self, length: DimLike, name: str, **kwargs) -> Axis:
        """A new axis of its own (an element axis, or one with a role for an op)."""
        self.count += 1
        return axes_module.make_axis(length=length, name=f"{name}.{self.count}", **kwargs)


@dataclass(frozen=True)
class TensorValue:
    """A tensor: its op, its Axon shape's dims and the axes standing for them, in order."""

    op: Op
    dims: Tuple[DimLike, ...]
    axes: Tuple[Axis, ...]
    dtype: str

    @property
    def extra_axes(self) -> Tuple[Axis, ...]:
        """The op's axes that are not the shape's: element axes of enclosing maps."""
        own = set(self.axes)
        return tuple(a for a in self.op.axes if a not in own)


@dataclass(frozen=True)
class TupleValue:
    """A tuple of values."""

    items: Tuple["Value", ...]


@dataclass(frozen=True)
class FunctionValue:
    """A function: a Python callable from a value to a value, and a name for messages."""

    call: Callable[["Value"], "Value"]
    name: str


Value = object  # TensorValue | TupleValue | FunctionValue


def relabel(op: Op, mapping: Mapping[Axis, Axis]) -> Op:
    """`op` with some axes renamed (the rest kept), or `op` itself when none changes."""
    new = [mapping.get(axis, axis) for axis in op.axes]
    if all(a is b for a, b in zip(new, op.axes)):
        return op
    return shape_ops.cast_axes(op, new)


def arranged(op: Op, order: Sequence[Axis]) -> Op:
    """`op` with `order`'s axes first, in that order, then the others as they are."""
    wanted = list(order) + [a for a in op.axes if a not in set(order)]
    if list(op.axes) == wanted:
        return op
    return shape_ops.axes_with_order(op, wanted)
