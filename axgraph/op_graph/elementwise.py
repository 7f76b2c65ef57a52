"""Elementwise ops, with order-free broadcasting by axes (seed 000).

The result of a binary op has the left operand's axes, then the right
operand's axes that the left lacks: ``(C, H) + (W, H, N) -> (C, H, W, N)``.
Python numbers take the element type of the tensor they meet, so ``x + 1``
stays float32 and ``labels + 1`` stays int32.
"""
from __future__ import annotations

import math

from typing import Optional

import numpy as np

from ..axes import elementwise_axes
from ..dtypes import BOOL_DTYPE, float_dtype_for
from .op import Op, as_op


class ElementWiseOp(Op):
    """Base of ops whose value at each index uses only the args at that index."""


class UnaryElementWiseOp(ElementWiseOp):
    """f(x) at every index of x; result axes are x's."""

    #: True when the result is floating even for integer input (exp, log, ...).
    float_result = False

    def __init__(self, x, name: Optional[str] = None, dtype=None):
        x = as_op(x)
        if dtype is None:
            dtype = binary_result_dtype(x, x)
            dtype = float_dtype_for(dtype) if self.float_result else dtype
        super().__init__(x, axes=x.axes, dtype=dtype, name=name)


class BinaryElementWiseOp(ElementWiseOp):
    """f(x, y) over the union of both operands' axes."""

    #: True for comparisons: the result is boolean.
    bool_result = False
    float_result = False

    def __init__(self, x, y, name: Optional[str] = None, dtype=None):
        x, y = as_op(x), as_op(y)
        axes = elementwise_axes(type(self).__name__, x, y)
        if dtype is None:
            dtype = BOOL_DTYPE if self.bool_result else binary_result_dtype(x, y)
            if self.float_result:
                dtype = float_dtype_for(dtype)
        super().__init__(x, y, axes=axes, dtype=dtype, name=name)


_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2}
_DEFAULT_OF_KIND = {"b": np.dtype(np.bool_), "u": np.dtype(np.int32), "i": np.dtype(np.int32),
                    "f": np.dtype(np.float32)}


def binary_result_dtype(x: Op, y: Op) -> np.dtype:
    """Promote like NumPy, except that Python numbers adopt the tensor's type.

    A number keeps the tensor's type unless it is of a higher kind
    (a float meeting an int tensor gives float32).
    """
    x_weak, y_weak = getattr(x, "weak_dtype", False), getattr(y, "weak_dtype", False)
    if not (x_weak or y_weak):
        return np.result_type(x.dtype, y.dtype)
    if x_weak and y_weak:  # two Python numbers: the default type of the higher kind
        return _DEFAULT_OF_KIND[max(x.dtype.kind, y.dtype.kind, key=_KIND_RANK.__getitem__)]
    tensor, number = (y, x) if x_weak else (x, y)
    if _KIND_RANK[number.dtype.kind] <= _KIND_RANK[tensor.dtype.kind]:
        return tensor.dtype
    return _DEFAULT_OF_KIND[number.dtype.kind]


def _unary(class_name: str, doc: str, float_result: bool = False):
    return type(class_name, (UnaryElementWiseOp,), {"__doc__": doc, "float_result": float_result})


def _binary(class_name: str, doc: str, bool_result: bool = False, float_result: bool = False):
    return type(
        class_name,
        (BinaryElementWiseOp,),
        {"__doc__": doc, "bool_result": bool_result, "float_result": float_result},
    )


Negative = _unary("Negative", "-x")
Absolute = _unary("Absolute", "|x|")
Sign = _unary("Sign", "-1, 0 or 1 by the sign of x")
Square = _unary("Square", "x * x")
Sqrt = _unary("Sqrt", "square root of x", float_result=True)
Exp = _unary("Exp", "e ** x", float_result=True)
Log = _unary("Log", "natural logarithm of x", float_result=True)
Safelog = _unary("Safelog", "log(max(x, exp(-50))): finite where x underflows to 0", float_result=True)
Reciprocal = _unary("Reciprocal", "1 / x", float_result=True)
Tanh = _unary("Tanh", "hyperbolic tangent of x", float_result=True)
Sigmoid = _unary("Sigmoid", "1 / (1 + exp(-x))", float_result=True)
Sin = _unary("Sin", "sine of x", float_result=True)
Cos = _unary("Cos", "cosine of x", float_result=True)
Relu = _unary("Relu", "max(x, 0)")
Floor = _unary("Floor", "the largest whole number <= x")
StopGradient = _unary("StopGradient", "x, through which deriv passes no gradient")

Add = _binary("Add", "x + y")
Subtract = _binary("Subtract", "x - y")
Multiply = _binary("Multiply", "x * y")
Divide = _binary("Divide", "x / y (true division: integer inputs give floats)", float_result=True)
Power = _binary("Power", "x ** y")
Maximum = _binary("Maximum", "the larger of x and y (NaN propagates)")
Minimum = _binary("Minimum", "the smaller of x and y (NaN propagates)")
Equal = _binary("Equal", "x == y", bool_result=True)
NotEqual = _binary("NotEqual", "x != y", bool_result=True)
Less = _binary("Less", "x < y", bool_result=True)
LessEqual = _binary("LessEqual", "x <= y", bool_result=True)
Greater = _binary("Greater", "x > y", bool_result=True)
GreaterEqual = _binary("GreaterEqual", "x >= y", bool_result=True)

def negative(x, name=None, dtype=None) -> Op:
    """-x."""
    return Negative(x, name=name, dtype=dtype)


def absolute(x, name=None, dtype=None) -> Op:
    """|x|."""
    return Absolute(x, name=name, dtype=dtype)


def sign(x, name=None, dtype=None) -> Op:
    """-1, 0 or 1 by the sign of x."""
    return Sign(x, name=name, dtype=dtype)


def square(x, name=None, dtype=None) -> Op:
    """x * x."""
    return Square(x, name=name, dtype=dtype)


def sqrt(x, name=None, dtype=None) -> Op:
    """Square root of x."""
    return Sqrt(x, name=name, dtype=dtype)


def exp(x, name=None, dtype=None) -> Op:
    """e ** x."""
    return Exp(x, name=name, dtype=dtype)


def log(x, name=None, dtype=None) -> Op:
    """Natural logarithm of x."""
    return Log(x, name=name, dtype=dtype)


#: Where `safelog` clamps its input: exp(-50), as Nervana Graph's default limit.
SAFELOG_LIMIT = math.exp(-50)


def safelog(x, limit: float = SAFELOG_LIMIT, name=None, dtype=None) -> Op:
    """log(max(x, limit)): cross entropies stay finite at probability 0."""
    if limit == SAFELOG_LIMIT:
        return Safelog(x, name=name, dtype=dtype)
    return log(maximum(x, float(limit)), name=name, dtype=dtype)


def reciprocal(x, name=None, dtype=None) -> Op:
    """1 / x."""
    return Reciprocal(x, name=name, dtype=dtype)


def tanh(x, name=None, dtype=None) -> Op:
    """Hyperbolic tangent of x."""
    return Tanh(x, name=name, dtype=dtype)


def sigmoid(x, name=None, dtype=None) -> Op:
    """Logistic function 1 / (1 + exp(-x)), computed without overflow."""
    return Sigmoid(x, name=name, dtype=dtype)


def sin(x, name=None, dtype=None) -> Op:
    """Sine of x."""
    return Sin(x, name=name, dtype=dtype)


def cos(x, name=None, dtype=None) -> Op:
    """Cosine of x."""
    return Cos(x, name=name, dtype=dtype)


def relu(x, name=None, dtype=None) -> Op:
    """max(x, 0)."""
    return Relu(x, name=name, dtype=dtype)


def floor(x, name=None, dtype=None) -> Op:
    """The largest whole number <= x (its derivative is zero wherever it exists)."""
    return Floor(x, name=name, dtype=dtype)


def stop_gradient(x, name=None) -> Op:
    """x itself, treated by deriv as a constant (no gradient flows through it)."""
    return StopGradient(x, name=name)


def add(x, y, name=None, dtype=None) -> Op:
    """x + y, broadcast over the union of their axes."""
    return Add(x, y, name=name, dtype=dtype)


def subtract(x, y, name=None, dtype=None) -> Op:
    """x - y, broadcast over the union of their axes."""
    return Subtract(x, y, name=name, dtype=dtype)


def multiply(x, y, name=None, dtype=None) -> Op:
    """x * y, broadcast over the union of their axes."""
    return Multiply(x, y, name=name, dtype=dtype)


def divide(x, y, name=None, dtype=None) -> Op:
    """x / y, broadcast over the union of their axes."""
    return Divide(x, y, name=name, dtype=dtype)


def power(x, y, name=None, dtype=None) -> Op:
    """x ** y, broadcast over the union of their axes."""
    return Power(x, y, name=name, dtype=dtype)


def maximum(x, y, name=None, dtype=None) -> Op:
    """Elementwise larger of x and y."""
    return Maximum(x, y, name=name, dtype=dtype)


def minimum(x, y, name=None, dtype=None) -> Op:
    """Elementwise smaller of x and y."""
    return Minimum(x, y, name=name, dtype=dtype)


def equal(x, y, name=None) -> Op:
    """x == y elementwise (ops keep `==` for identity, so use this)."""
    return Equal(x, y, name=name)


def not_equal(x, y, name=None) -> Op:
    """x != y elementwise."""
    return NotEqual(x, y, name=name)


def less(x, y, name=None) -> Op:
    """x < y elementwise."""
    return Less(x, y, name=name)


def less_equal(x, y, name=None) -> Op:
    """x <= y elementwise."""
    return LessEqual(x, y, name=name)


def greater(x, y, name=None) -> Op:
    """x > y elementwise."""
    return Greater(x, y, name=name)


def greater_equal(x, y, name=None) -> Op:
    """x >= y elementwise."""
    return GreaterEqual(x, y, name=name)
