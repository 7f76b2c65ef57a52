"""Elementwise ops: inputs of one element type and one shape, nothing implicit.

Each class states which element types it accepts and what type it returns,
and declares its traits (axgraph/core/traits.py): its family, whether it is
commutative, its reference NumPy function, its C expression in fused kernels
and whether a kernel may write it over an input. Backends derive their
elementwise kernels from these; no backend names these ops to say it again.
"""
from __future__ import annotations

from typing import ClassVar, Optional, Tuple

import numpy as np

from ..node import Node
from ..types import ElementType, Shape, boolean
from . import reference
from ._checks import arity, element_type_attr, require_kind, same_element_type, same_shape


# -- C expressions that need more than a format string (traits.Traits.c) ----------------------

def _sigmoid_quotient_c(c) -> Tuple[str, str]:
    # the reference's stable form, e = exp(-|x|); x >= 0 ? 1/(1+e) : e/(1+e), as one
    # division of a numerator chosen by sign: the same roundings, and no branch
    (x,) = c.args
    e = c.let(f"{c.math('exp_nonpositive')}(-{c.math('fabs')}({x}))")
    return f"({x} >= 0 ? {c.one} : {e})", f"({c.one} + {e})"


def _sigmoid_c(c) -> str:
    return "({} / {})".format(*_sigmoid_quotient_c(c))


def _tanh_quotient_c(c) -> Tuple[str, str]:
    # the kernels' own rational (float), before its one division; libm's tanh over 1 (double)
    (x,) = c.args
    return f"{c.math('tanh_numerator')}({x})", f"{c.math('tanh_denominator')}({x})"


def _multiply_c(c) -> str:
    # two quotients (tanh(c) * sigmoid(o) in LSTM and GRU cells) divide once: on AVX2 the
    # second division was 10 % of tanh(a*b+c)*sigmoid(d)-e, memory traffic included
    first = c.quotient(0)
    second = c.quotient(1) if first else None  # (no quotient form is written for nothing)
    if first and second:
        (n0, d0), (n1, d1) = first, second
        return f"(({n0} * {n1}) / ({d0} * {d1}))"
    a, b = c.args
    return f"({a} * {b})"


def _convert_c(c) -> str:
    (x,) = c.args
    return f"({x} != 0)" if c.boolean else f"({c.ctype})({x})"


class UnaryElementwise(Node):
    """f(x) at every coordinate; same element type and shape as x."""

    accepts: ClassVar[str] = "numeric"
    family = "unary"
    in_place = True

    def __init__(self, x: Node, name: Optional[str] = None):
        super().__init__((x,), {}, name)

    def _infer(self) -> Tuple[ElementType, Shape]:
        (x,) = arity(self, 1)
        require_kind(self, x, self.accepts)
        return x.element_type, x.shape


class Negative(UnaryElementwise):
    """-x."""
    numpy = np.negative
    c = "(-{0})"


class Abs(UnaryElementwise):
    """|x|."""
    numpy = np.abs
    c = "{fabs}({0})"


class Sign(UnaryElementwise):
    """-1, 0 or 1 by the sign of x."""
    numpy = np.sign
    c = "({0} > 0 ? {one} : ({0} < 0 ? (-{one}) : ({0} == {0} ? {zero} : {0})))"


class Sqrt(UnaryElementwise):
    """Square root."""
    accepts = "float"
    numpy = np.sqrt
    c = "{sqrt}({0})"


class Exp(UnaryElementwise):
    """e ** x."""
    accepts = "float"
    numpy = np.exp
    c = "{exp}({0})"


class Log(UnaryElementwise):
    """Natural logarithm."""
    accepts = "float"
    numpy = np.log
    c = "{log}({0})"


class Tanh(UnaryElementwise):
    """Hyperbolic tangent."""
    accepts = "float"
    numpy = np.tanh
    c = "{tanh}({0})"
    c_quotient = _tanh_quotient_c


class Sigmoid(UnaryElementwise):
    """1 / (1 + exp(-x)), computed without overflow."""
    accepts = "float"
    numpy = reference.sigmoid
    c = _sigmoid_c
    c_quotient = _sigmoid_quotient_c


class Sin(UnaryElementwise):
    """Sine."""
    accepts = "float"
    numpy = np.sin
    c = "{sin}({0})"


class Cos(UnaryElementwise):
    """Cosine."""
    accepts = "float"
    numpy = np.cos
    c = "{cos}({0})"


class Floor(UnaryElementwise):
    """The largest whole number <= x."""
    accepts = "float"
    numpy = np.floor
    c = "{floor}({0})"


class Erf(UnaryElementwise):
    """The error function, 2 / sqrt(pi) * integral of exp(-t**2) from 0 to x."""
    accepts = "float"
    numpy = reference.erf
    c = "{erf}({0})"


class Tan(UnaryElementwise):
    """Tangent."""
    accepts = "float"
    numpy = np.tan
    c = "{tan}({0})"


class Rsqrt(UnaryElementwise):
    """1 / sqrt(x)."""
    accepts = "float"
    numpy = reference.rsqrt
    c = "({one} / {sqrt}({0}))"


class Not(UnaryElementwise):
    """Logical not."""
    accepts = "bool"
    family = "logical"
    numpy = np.logical_not
    c = "(!{0})"


class BinaryElementwise(Node):
    """f(a, b) at every coordinate: same element type and same shape required."""

    accepts: ClassVar[str] = "numeric"
    returns_boolean: ClassVar[bool] = False
    family = "binary"
    in_place = True

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
    commutative = True
    numpy = np.add
    c = "({0} + {1})"


class Subtract(BinaryElementwise):
    """a - b."""
    numpy = np.subtract
    c = "({0} - {1})"


class Multiply(BinaryElementwise):
    """a * b."""
    commutative = True
    numpy = np.multiply
    c = _multiply_c


class Divide(BinaryElementwise):
    """a / b; integers divide truncating toward zero (as C, nGraph and ONNX do)."""
    numpy = reference.divide
    c = "({0} / {1})"


class Power(BinaryElementwise):
    """a ** b."""
    numpy = np.power
    c = "{pow}({0}, {1})"


class Maximum(BinaryElementwise):
    """The larger of a and b."""
    commutative = True
    numpy = np.maximum
    c = "(({0} > {1} || {0} != {0}) ? {0} : {1})"


class Minimum(BinaryElementwise):
    """The smaller of a and b."""
    commutative = True
    numpy = np.minimum
    c = "(({0} < {1} || {0} != {0}) ? {0} : {1})"


class Comparison(BinaryElementwise):
    """A boolean result of comparing a and b."""

    accepts = "any"
    returns_boolean = True
    family = "compare"


class Equal(Comparison):
    """a == b."""
    commutative = True
    numpy = np.equal
    c = "({0} == {1})"


class NotEqual(Comparison):
    """a != b."""
    commutative = True
    numpy = np.not_equal
    c = "({0} != {1})"


class Less(Comparison):
    """a < b."""
    numpy = np.less
    c = "({0} < {1})"


class LessEq(Comparison):
    """a <= b."""
    numpy = np.less_equal
    c = "({0} <= {1})"


class Greater(Comparison):
    """a > b."""
    numpy = np.greater
    c = "({0} > {1})"


class GreaterEq(Comparison):
    """a >= b."""
    numpy = np.greater_equal
    c = "({0} >= {1})"


class And(BinaryElementwise):
    """Logical and of booleans."""
    accepts = "bool"
    family = "logical"
    commutative = True
    numpy = np.logical_and
    c = "({0} & {1})"


class Or(BinaryElementwise):
    """Logical or of booleans."""
    accepts = "bool"
    family = "logical"
    commutative = True
    numpy = np.logical_or
    c = "({0} | {1})"


class Select(Node):
    """where(condition, then, otherwise): condition boolean, all three of one shape."""

    family = "select"
    numpy = reference.select
    c = "({0} ? {1} : {2})"

    def __init__(self, condition: Node, then: Node, otherwise: Node, name: Optional[str] = None):
        super().__init__((condition, then, otherwise), {}, name)

    def _infer(self) -> Tuple[ElementType, Shape]:
        condition, then, otherwise = arity(self, 3)
        require_kind(self, condition, "bool", "condition")
        et = same_element_type(self, (then, otherwise))
        return et, same_shape(self, (condition, then, otherwise))


class Convert(Node):
    """x converted to another element type (floats to ints truncate toward zero)."""

    family = "convert"
    c = _convert_c

    _attributes = ("element_type",)
    _hidden = frozenset(_attributes)

    def __init__(self, x: Node, element_type, name: Optional[str] = None):
        super().__init__((x,), {"element_type": element_type}, name)

    def _normalize(self, attributes: dict) -> dict:
        return {"element_type": element_type_attr(self, attributes["element_type"])}

    def _infer(self) -> Tuple[ElementType, Shape]:
        (x,) = arity(self, 1)
        return self.attributes["element_type"], x.shape
