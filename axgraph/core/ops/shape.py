"""Data movement: Broadcast, Reshape, Transpose, Slice, Reverse, Concat, Pad.

All positions are explicit dim indices in [0, rank); nothing is inferred from
matching sizes. Dims may be symbolic; whatever cannot be decided at
construction (is `N - 2` non-negative?) is checked when N is bound.

The first five move elements without computing (their `movement` trait), so
backends may give them as views; Transpose and Reshape change the layout
(`layout_change`), which layout sinking moves below elementwise ops
(axgraph/core/traits.py, `MovementTraits`).
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

from ...debug_info import user_location
from ...errors import GraphError, ShapeError
from ...shapes.prover import provably_different
from ..node import Node
from ..tensor_types import ElementType, Shape
from .over_axes import OverAxes
from ._checks import (arity, dim_tuple, int_tuple, positions, require_nonnegative, same_element_type,
                      scalar_attr, shape_attr)


class Broadcast(Node):
    """x repeated along new dims: `axes` are the positions of the result that x lacks.

    The other dims of `shape`, in order, must equal x's dims (nGraph's rule): no
    dim of x is stretched, and nothing is broadcast implicitly anywhere else.

    Parameters
    ----------
    x : Node
        The values to repeat: any element type and shape.
    shape : Shape or sequence of int, Dim or str
        The result's shape.
    axes : int or sequence of int
        The positions in `shape` of the new dims, each in [0, len(shape)), each
        once (their order does not matter).

    Returns
    -------
    Broadcast
        A node of x's element type and shape `shape`.

    Raises
    ------
    ShapeError
        A dim of `shape` is invalid; `axes` are not distinct positions of
        `shape`; or the dims of `shape` outside `axes` are not x's dims.

    Examples
    --------
    >>> from axgraph import core
    >>> x = core.Parameter(core.f32, (3,))
    >>> core.Broadcast(x, (2, 3), axes=(0,)).shape  # x repeated as two rows
    Shape([2, 3])
    """

    _attributes = ("shape", "axes")
    _hidden = frozenset({"shape"})
    movement = True

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
    """x's elements in row-major order, laid out in `shape`.

    The elements keep their row-major order; only the dims change (use
    Transpose to reorder them).

    Parameters
    ----------
    x : Node
        The values: any element type and shape.
    shape : Shape or sequence of int, Dim or str
        The result's shape, of x's element count: the products of the dims must be
        equal as expressions (`(N, 6)` fits `(2*N, 3)`).

    Returns
    -------
    Reshape
        A node of x's element type and shape `shape`.

    Raises
    ------
    ShapeError
        A dim of `shape` is invalid, or its element count provably differs from x's (counts equal
        only under a condition, N*T and 4*(N*T//4), are checked when the sizes are fed).
    """

    _attributes = ("shape",)
    _hidden = frozenset(_attributes)
    movement = True
    layout_change = True

    def __init__(self, x: Node, shape, name: Optional[str] = None):
        super().__init__((x,), {"shape": shape}, name)

    def _normalize(self, attributes: dict) -> dict:
        return {"shape": shape_attr(self, attributes["shape"])}

    def _infer(self) -> Tuple[ElementType, Shape]:
        (x,) = arity(self, 1)
        shape = self.attributes["shape"]
        # Counts equal only under a check (N*T and 4*(N*T//4)) are checked when fed.
        if provably_different(shape.size, x.shape.size):
            raise self._fail(ShapeError, f"cannot reshape {x.name} {x.shape} ({x.shape.size} "
                             f"elements) to {shape} ({shape.size} elements)")
        return x.element_type, shape


class Transpose(Node):
    """x with its dims reordered: dim i of the result is dim permutation[i] of x.

    Parameters
    ----------
    x : Node
        The values: any element type and shape, of rank r.
    permutation : sequence of int
        Each of 0 .. r - 1 once: the position in x of each result dim.

    Returns
    -------
    Transpose
        A node of x's element type; its shape is x's dims in the order
        `permutation` gives.

    Raises
    ------
    ShapeError
        `permutation` does not name each dim of x exactly once.
    """

    _attributes = ("permutation",)
    movement = True
    layout_change = True

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
    """x[lower:upper:strides], dim by dim: a strided box of x.

    Bounds may be symbolic (`N - 1`). Whether they fit is decided when x is
    built where it can be, else when the sizes are bound, at each call.

    Parameters
    ----------
    x : Node
        The values: any element type and shape, of rank r.
    lower, upper : sequence of int, Dim or str
        r bounds each: dim i keeps positions lower[i] <= p < upper[i] of x's dim
        i, with 0 <= lower[i] <= upper[i] <= x.shape[i].
    strides : sequence of int, optional
        r steps, each >= 1 (default: all 1): dim i keeps every strides[i]-th
        position from lower[i].

    Returns
    -------
    Slice
        A node of x's element type; its dim i is
        ceil((upper[i] - lower[i]) / strides[i]).

    Raises
    ------
    ShapeError
        `lower`, `upper` or `strides` does not have r entries; a stride is below 1;
        or an upper bound is known to lie below its lower bound or past the end of
        its dim.
    ExecutionError
        When the compiled function runs: symbolic bounds do not fit under the
        sizes the arguments bind.

    Examples
    --------
    >>> from axgraph import core
    >>> x = core.Parameter(core.f32, ("N", 10))
    >>> core.Slice(x, lower=(1, 0), upper=("N", 10), strides=(1, 3)).shape
    Shape([N - 1, 4])
    """

    _attributes = ("lower", "upper", "strides")
    movement = True

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
    """x with the order of its elements along `axes` reversed.

    With no axes the result is x's values unchanged; reversing twice along
    the same axes gives x back.
    """

    movement = True

    def _infer(self) -> Tuple[ElementType, Shape]:
        (x,) = self.inputs
        return x.element_type, x.shape


class Concat(Node):
    """The inputs joined end to end along dim `axis`.

    Every other dim must agree, as expressions, and all inputs must have one
    element type: nothing is broadcast or converted.

    Parameters
    ----------
    inputs : sequence of Node
        At least one node: one element type and rank, equal dims but at `axis`.
    axis : int
        The position of the joined dim, in [0, rank).

    Returns
    -------
    Concat
        A node of the inputs' element type and shape, but for dim `axis`: the sum
        of theirs.

    Raises
    ------
    GraphError
        `inputs` is not a sequence of core nodes, or is empty; or `name` is not a
        non-empty string.
    DTypeError
        The inputs differ in element type.
    ShapeError
        `axis` is not a position of the first input's dims, or an input differs
        from the first in rank or in a dim other than `axis`.
    """

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
    """x surrounded by `value`: `below` and `above` per dim, `interior` between elements.

    Interior padding puts that many values between neighbours, which is what the
    adjoint of a strided Slice needs.

    Parameters
    ----------
    x : Node
        The values: any element type and shape, of rank r.
    below : sequence of int
        r ints >= 0: how many values to put before x's elements along each dim.
    above : sequence of int or Dim
        r dims >= 0: how many values to put after them (a Dim expression where the
        result's length is symbolic, as in the adjoint of a slice of a symbolic length;
        the kernels need only `below` and `interior`).
    interior : sequence of int, optional
        r ints >= 0: how many values to put between neighbours along each dim
        (default: none).
    value : scalar, optional
        The fill (default 0): a number x's element type holds exactly (a float
        rounds), or a bool for boolean x.

    Returns
    -------
    Pad
        A node of x's element type; its dim i is
        below[i] + d + above[i] + interior[i] * (d - 1) for x's dim d (for
        d = 0: below[i] + above[i]; a symbolic d is taken to be at least 1).

    Raises
    ------
    ShapeError
        `below`, `above` or `interior` does not have r entries, or has one below 0.
    DTypeError
        `value` is not a number (a bool for boolean x), or does not fit x's
        element type exactly.
    """

    _attributes = ("below", "above", "interior", "value")

    def __init__(self, x: Node, below, above, interior=None, value=0,
                 name: Optional[str] = None):
        super().__init__((x,), {"below": below, "above": above, "interior": interior,
                                "value": value}, name)

    def _normalize(self, attributes: dict) -> dict:
        (x,) = arity(self, 1)
        return {"below": int_tuple(self, attributes["below"], x.rank, "below"),
                "above": dim_tuple(self, attributes["above"], x.rank, "above"),
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
