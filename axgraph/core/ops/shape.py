"""Data movement: Broadcast, Reshape, Transpose, Slice, Reverse, Concat, Pad.

All positions are explicit dim indices in [0, rank); nothing is inferred from
matching sizes. Dims may be symbolic; whatever cannot be decided at
construction (is `N - 2` non-negative?) is checked when N is bound.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

from ...debug_info import user_location
from ...errors import GraphError, ShapeError
from ..node import Node
from ..types import ElementType, Shape
from .over_axes import OverAxes
from ._checks import (arity, dim_tuple, int_tuple, positions, require_nonnegative, same_element_type,
                      scalar_attr, shape_attr)


class Broadcast(Node):
    """x copied along new dims: `axes` are the result positions x does not have.

    The other result dims, in order, must equal x's dims (nGraph's rule), so
    Broadcast(x[3], (2, 3), axes=(0,)) repeats x as rows.
    """

    _attributes = ("shape", "axes")
    _hidden = frozenset({"shape"})

    def __init__(self, x: Node, shape, axes, name: Optional[str] = None):
        super().__init__((x,), {"shape": shape, "axes": axes}, name)

    def _normalize(self, attributes: dict) -> dict:
        shape = shape_attr(self, attributes["shape"])
        return {"shape": shape, "axes": positions(self, attributes["axes"], len(shape))}

    def _infer(self) -> Tuple[ElementType, Shape]:
        (x,) = arity(self, 1)
        shape, axes = self.attributes["shape"], self.attributes["axes"]
        kept = Shape(d for i, d in enumerate(shape) if i not in axes)
        if kept != x.shape:
            raise self._fail(ShapeError, f"broadcasting {x.name} {x.shape} to {shape} along "
                             f"new axes {axes}: the remaining dims {kept} must equal {x.shape}")
        return x.element_type, shape


class Reshape(Node):
    """x's elements in row-major order, laid out in `shape` (same element count)."""

    _attributes = ("shape",)
    _hidden = frozenset(_attributes)

    def __init__(self, x: Node, shape, name: Optional[str] = None):
        super().__init__((x,), {"shape": shape}, name)

    def _normalize(self, attributes: dict) -> dict:
        return {"shape": shape_attr(self, attributes["shape"])}

    def _infer(self) -> Tuple[ElementType, Shape]:
        (x,) = arity(self, 1)
        shape = self.attributes["shape"]
        if shape.size != x.shape.size:
            raise self._fail(ShapeError, f"cannot reshape {x.name} {x.shape} ({x.shape.size} "
                             f"elements) to {shape} ({shape.size} elements)")
        return x.element_type, shape


class Transpose(Node):
    """Result dim i is x's dim permutation[i]."""

    _attributes = ("permutation",)

    def __init__(self, x: Node, permutation: Sequence[int], name: Optional[str] = None):
        super().__init__((x,), {"permutation": permutation}, name)

    def _normalize(self, attributes: dict) -> dict:
        (x,) = arity(self, 1)
        permutation = positions(self, attributes["permutation"], x.rank, "permutation",
                                ordered=True)
        if len(permutation) != x.rank:
            raise self._fail(ShapeError, f"permutation {permutation} of {x.name} {x.shape} must "
                             f"name all {x.rank} dims")
        return {"permutation": permutation}

    def _infer(self) -> Tuple[ElementType, Shape]:
        (x,) = self.inputs
        return x.element_type, Shape(x.shape[p] for p in self.attributes["permutation"])


class Slice(Node):
    """x[lower:upper:strides] per dim; bounds may be symbolic, strides positive ints."""

    _attributes = ("lower", "upper", "strides")

    def __init__(self, x: Node, lower, upper, strides=None, name: Optional[str] = None):
        super().__init__((x,), {"lower": lower, "upper": upper, "strides": strides}, name)

    def _normalize(self, attributes: dict) -> dict:
        (x,) = arity(self, 1)
        return {"lower": dim_tuple(self, attributes["lower"], x.rank, "lower"),
                "upper": dim_tuple(self, attributes["upper"], x.rank, "upper"),
                "strides": int_tuple(self, attributes["strides"], x.rank, "strides", 1, default=1)}

    def _infer(self) -> Tuple[ElementType, Shape]:
        (x,) = self.inputs
        result = []
        for i, (low, high, step, dim) in enumerate(zip(self.attributes["lower"],
                                                       self.attributes["upper"],
                                                       self.attributes["strides"], x.shape)):
            require_nonnegative(self, high - low, f"dim {i}: upper {high} is below lower {low}")
            require_nonnegative(self, dim - high, f"dim {i}: upper {high} is past the end of "
                                f"{x.name} {x.shape}")
            result.append((high - low + step - 1) // step)
        return x.element_type, Shape(result)


class Reverse(OverAxes):
    """x with the order of elements along `axes` reversed."""

    def _infer(self) -> Tuple[ElementType, Shape]:
        (x,) = self.inputs
        return x.element_type, x.shape


class Concat(Node):
    """Inputs joined along dim `axis`; every other dim must agree."""

    _attributes = ("axis",)

    def __init__(self, inputs: Sequence[Node], axis: int, name: Optional[str] = None):
        if isinstance(inputs, Node) or not hasattr(inputs, "__iter__"):
            raise GraphError(f"Concat: inputs must be a sequence of nodes, not {inputs!r:.60}",
                             user_location())
        super().__init__(tuple(inputs), {"axis": axis}, name)

    def _normalize(self, attributes: dict) -> dict:
        if not self.inputs:
            raise self._fail(GraphError, "needs at least one input")
        (axis,) = positions(self, attributes["axis"], self.inputs[0].rank, "axis")
        return {"axis": axis}

    def _infer(self) -> Tuple[ElementType, Shape]:
        first, axis = self.inputs[0], self.attributes["axis"]
        et = same_element_type(self, self.inputs)
        total = 0
        for other in self.inputs:
            if other.rank != first.rank or any(
                    a != b for i, (a, b) in enumerate(zip(first.shape, other.shape)) if i != axis):
                raise self._fail(ShapeError, f"{other.name} {other.shape} does not fit "
                                 f"{first.name} {first.shape}: dims other than {axis} must agree")
            total = total + other.shape[axis]
        shape = list(first.shape)
        shape[axis] = total
        return et, Shape(shape)


class Pad(Node):
    """x surrounded by `value`: `below`/`above` per dim, `interior` between elements.

    Interior padding inserts that many values between neighbours, which is
    what the adjoint of a strided Slice needs.
    """

    _attributes = ("below", "above", "interior", "value")

    def __init__(self, x: Node, below, above, interior=None, value=0,
                 name: Optional[str] = None):
        super().__init__((x,), {"below": below, "above": above, "interior": interior,
                                "value": value}, name)

    def _normalize(self, attributes: dict) -> dict:
        (x,) = arity(self, 1)
        return {"below": int_tuple(self, attributes["below"], x.rank, "below"),
                "above": int_tuple(self, attributes["above"], x.rank, "above"),
                "interior": int_tuple(self, attributes["interior"], x.rank, "interior", default=0),
                "value": scalar_attr(self, x.element_type, attributes["value"], "value")}

    def _infer(self) -> Tuple[ElementType, Shape]:
        (x,) = self.inputs
        result = []
        for d, b, a, i in zip(x.shape, self.attributes["below"], self.attributes["above"],
                              self.attributes["interior"]):
            gaps = max(d - 1, 0) if isinstance(d, int) else d - 1  # symbolic: assumes d >= 1
            result.append(b + d + a + i * gaps)
        return x.element_type, Shape(result)
