"""Elementwise ops: inputs of one element type and one shape, nothing implicit.

Each class only states which element types it accepts and what type it
returns; the kernels live in the backends' tables.
"""
from __future__ import annotations

from typing import ClassVar, Optional, Tuple

from ..node import Node
from ..types import ElementType, Shape, boolean
from ._checks import arity, element_type_attr, require_kind, same_element_type, same_shape


class UnaryElementwise(Node):
    """f(x) at every coordinate; same element type and shape as x."""

    accepts: ClassVar[str] = "numeric"

    def __init__(self, x: Node, name: Optional[str] = None):
        super().__init__((x,), {}, name)

    def _infer(self) -> Tuple[ElementType, Shape]:
        (x,) = arity(self, 1)
        require_kind(self, x, self.accepts)
        return x.element_type, x.shape


class Negative(UnaryElementwise):
    """-x."""


class Abs(UnaryElementwise):
    """|x|."""


class Sign(UnaryElementwise):
    """-1, 0 or 1 by the sign of x."""


class Sqrt(UnaryElementwise):
    """Square root."""
    accepts = "float"


class Exp(UnaryElementwise):
    """e ** x."""
    accepts = "float"


class Log(UnaryElementwise):
    """Natural logarithm."""
    accepts = "float"


class Tanh(UnaryElementwise):
    """Hyperbolic tangent."""
    accepts = "float"


class Sigmoid(UnaryElementwise):
    """1 / (1 + exp(-x)), computed without overflow."""
    accepts = "float"


class Sin(UnaryElementwise):
    """Sine."""
    accepts = "float"


class Cos(UnaryElementwise):
    """Cosine."""
    accepts = "float"


class Floor(UnaryElementwise):
    """The largest whole number <= x."""
    accepts = "float"


class Not(UnaryElementwise):
    """Logical not."""
    accepts = "bool"


class BinaryElementwise(Node):
    """f(a, b) at every coordinate: same element type and same shape required."""

    accepts: ClassVar[str] = "numeric"
    returns_boolean: ClassVar[bool] = False

    def __init__(self, a: Node, b: Node, name: Optional[str] = None):
        super().__init__((a, b), {}, name)

    def _infer(self) -> Tuple[ElementType, Shape]:
        a, b = arity(self, 2)
        et = same_element_type(self, (a, b))
        shape = same_shape(self, (a, b))
        require_kind(self, a, self.accepts)
        return (boolean if self.returns_boolean else et), shape


class Add(BinaryElementwise):
    """a + b."""


class Subtract(BinaryElementwise):
    """a - b."""


class Multiply(BinaryElementwise):
    """a * b."""


class Divide(BinaryElementwise):
    """a / b; integers divide truncating toward zero (as C, nGraph and ONNX do)."""


class Power(BinaryElementwise):
    """a ** b."""


class Maximum(BinaryElementwise):
    """The larger of a and b."""


class Minimum(BinaryElementwise):
    """The smaller of a and b."""


class Comparison(BinaryElementwise):
    """A boolean result of comparing a and b."""

    accepts = "any"
    returns_boolean = True


class Equal(Comparison):
    """a == b."""


class NotEqual(Comparison):
    """a != b."""


class Less(Comparison):
    """a < b."""


class LessEq(Comparison):
    """a <= b."""


class Greater(Comparison):
    """a > b."""


class GreaterEq(Comparison):
    """a >= b."""


class And(BinaryElementwise):
    """Logical and of booleans."""
    accepts = "bool"


class Or(BinaryElementwise):
    """Logical or of booleans."""
    accepts = "bool"


class Select(Node):
    """where(condition, then, otherwise): condition boolean, all three of one shape."""

    def __init__(self, condition: Node, then: Node, otherwise: Node, name: Optional[str] = None):
        super().__init__((condition, then, otherwise), {}, name)

    def _infer(self) -> Tuple[ElementType, Shape]:
        condition, then, otherwise = arity(self, 3)
        require_kind(self, condition, "bool", "condition")
        et = same_element_type(self, (then, otherwise))
        return et, same_shape(self, (condition, then, otherwise))


class Convert(Node):
    """x converted to another element type (floats to ints truncate toward zero)."""

    _attributes = ("element_type",)
    _hidden = frozenset(_attributes)

    def __init__(self, x: Node, element_type, name: Optional[str] = None):
        super().__init__((x,), {"element_type": element_type}, name)

    def _normalize(self, attributes: dict) -> dict:
        return {"element_type": element_type_attr(self, attributes["element_type"])}

    def _infer(self) -> Tuple[ElementType, Shape]:
        (x,) = arity(self, 1)
        return self.attributes["element_type"], x.shape
