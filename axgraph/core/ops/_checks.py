"""Checks shared by the core ops: each raises an error naming the op and the user's line."""
from __future__ import annotations

import math
from typing import Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from ...dims import Dim, DimLike
from ...errors import DTypeError, GraphError, ShapeError
from ..node import Node
from ..tensor_types import ElementType, Shape, as_dim, element_type

KINDS: Dict[str, Tuple[Callable[[ElementType], bool], str]] = {
    "any": (lambda t: True, "any"),
    "numeric": (lambda t: t.is_numeric, "a numeric (not boolean)"),
    "float": (lambda t: t.is_float, "a floating-point"),
    "integral": (lambda t: t.is_integral, "an integer"),
    "bool": (lambda t: t.is_boolean, "the boolean"),
}


def label(node: Node) -> str:
    """How messages name a node: its user name if any, else its auto name."""
    return node.name


def arity(op: Node, count: int) -> Tuple[Node, ...]:
    if len(op.inputs) != count:
        raise op._fail(GraphError, f"takes {count} input(s), got {len(op.inputs)}")
    return op.inputs


def require_kind(op: Node, node: Node, kind: str, what: str = "input") -> None:
    accepts, words = KINDS[kind]
    if not accepts(node.element_type):
        raise op._fail(DTypeError, f"{what} {label(node)} has element type {node.element_type}; "
                       f"{words} element type is required")


def same_element_type(op: Node, nodes: Sequence[Node]) -> ElementType:
    first = nodes[0]
    for other in nodes[1:]:
        if other.element_type != first.element_type:
            raise op._fail(DTypeError, f"element types differ: {label(first)} is "
                           f"{first.element_type}, {label(other)} is {other.element_type} "
                           f"(no implicit conversion; use Convert)")
    return first.element_type


def same_shape(op: Node, nodes: Sequence[Node]) -> Shape:
    first = nodes[0]
    for other in nodes[1:]:
        if other.shape != first.shape:
            raise op._fail(ShapeError, f"shapes differ: {label(first)} is {first.shape}, "
                           f"{label(other)} is {other.shape} (no implicit broadcast; use Broadcast)")
    return first.shape


def _int(op: Node, value, what: str) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise op._fail(ShapeError, f"{what} must be an int, not {value!r}")
    return int(value.__index__())


def _sequence(op: Node, values, what: str) -> Tuple:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise op._fail(ShapeError, f"{what} must be a sequence, not {values!r}")
    return tuple(values)


def positions(op: Node, axes, rank: int, what: str = "axes", ordered: bool = False) -> Tuple[int, ...]:
    """Distinct dim positions in [0, rank); sorted unless their order matters."""
    if isinstance(axes, int) and not isinstance(axes, bool):
        axes = (axes,)
    result = tuple(_int(op, a, what) for a in _sequence(op, axes, what))
    for a in result:
        if not 0 <= a < rank:
            raise op._fail(ShapeError, f"{what} {result}: position {a} is outside [0, {rank})")
    if len(set(result)) != len(result):
        raise op._fail(ShapeError, f"{what} {result} names a position twice")
    return result if ordered else tuple(sorted(result))


def int_tuple(op: Node, values, length: int, what: str, minimum: int = 0,
              default: Optional[int] = None) -> Tuple[int, ...]:
    """`length` ints, each >= minimum (`default` repeated when values is None)."""
    if values is None and default is not None:
        return (default,) * length
    result = tuple(_int(op, v, what) for v in _sequence(op, values, what))
    if len(result) != length:
        raise op._fail(ShapeError, f"{what} {result} must have {length} entries")
    for v in result:
        if v < minimum:
            raise op._fail(ShapeError, f"{what} {result}: entries must be >= {minimum}")
    return result


def dim_tuple(op: Node, values, length: int, what: str) -> Tuple[DimLike, ...]:
    """`length` dims (ints >= 0 or Dim expressions)."""
    result = []
    for v in _sequence(op, values, what):
        try:
            result.append(as_dim(v, what))
        except (TypeError, ValueError) as error:
            raise op._fail(ShapeError, str(error)) from None
    if len(result) != length:
        raise op._fail(ShapeError, f"{what} {tuple(result)} must have {length} entries")
    return tuple(result)


def shape_attr(op: Node, value, what: str = "shape") -> Shape:
    try:
        return Shape(value)
    except (TypeError, ValueError) as error:
        raise op._fail(ShapeError, f"{what}: {error}") from None


def element_type_attr(op: Node, value) -> ElementType:
    try:
        return element_type(value)
    except DTypeError as error:
        raise op._fail(DTypeError, error.message) from None


def scalar_attr(op: Node, et: ElementType, value, what: str):
    """A Python scalar that `et` represents exactly (floats may round), for fills and bounds."""
    if et.is_boolean:
        if not isinstance(value, (bool, np.bool_)):
            raise op._fail(DTypeError, f"{what} {value!r} is not a boolean")
        return bool(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise op._fail(DTypeError, f"{what} must be a number, not {value!r}")
    if et.is_float:
        return float(value)
    if isinstance(value, (float, np.floating)) and not (math.isfinite(value) and value == int(value)):
        raise op._fail(DTypeError, f"{what} {value!r} is not representable in {et}")
    info = np.iinfo(et.dtype)
    if not info.min <= int(value) <= info.max:
        raise op._fail(DTypeError, f"{what} {value!r} is out of range for {et}")
    return int(value)


def known_nonnegative(value: DimLike) -> Optional[bool]:
    """Whether a dim expression is >= 0: True/False for ints, None (unknown) for Dims."""
    return None if isinstance(value, Dim) else value >= 0


def require_nonnegative(op: Node, value: DimLike, message: str) -> None:
    """Fail if `value` is known to be negative; symbolic values are checked at call time."""
    if known_nonnegative(value) is False:
        raise op._fail(ShapeError, message)
