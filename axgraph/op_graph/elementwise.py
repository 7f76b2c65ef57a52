"""Elementwise ops, with order-free broadcasting by axes (seed 000).

The result of a binary op has the left operand's axes, then the right
operand's axes that the left lacks: ``(C, H) + (W, H, N) -> (C, H, W, N)``.
Element types follow NumPy (axgraph/dtypes.py, docs/dtypes.md): Python
numbers take the element type of the tensor they meet, so ``x + 1`` stays
float32 and ``labels + 1`` stays int32; ``mask * mask`` is a logical and.
"""
from __future__ import annotations

import math
from typing import ClassVar, Optional, Tuple

import numpy as np

from ..axes import Axes, elementwise_axes
from ..debug_info import user_location
from ..dtypes import ElementRule, promote
from ..errors import DTypeError, IncompatibleAxesError
from .op import Op
from .shape_ops import cast_axes
from .tensors import as_op

#: The element rules of the ops below: NumPy's meaning of each op for each type.
SAME = ElementRule()
FLOAT = ElementRule(result="float")
COMPARISON = ElementRule(result="bool")
NO_BOOLEANS = ElementRule(booleans=None)
BOOLEANS_AS_INT8 = ElementRule(booleans=np.dtype(np.int8))


class ElementWiseOp(Op):
    """Base of ops whose value at each index uses only the args at that index.

    `operand_dtype` is the type every transformer converts the args to before
    computing; `dtype` is the result's (they differ only for comparisons).
    """

    #: How the result type follows from the operands' (axgraph/dtypes.py).
    rule: ClassVar[ElementRule] = SAME

    def infer_dtype(self) -> np.dtype:
        return self._types(self.args, self._asked_dtype)

    def _types(self, args: Tuple[Op, ...], dtype) -> np.dtype:
        """Sets `operand_dtype` and returns the result type (DTypeError if refused)."""
        common = binary_result_dtype(args[0], args[-1])
        what = f"{type(self).__name__} of {' and '.join(str(a.dtype) for a in args)}"
        try:
            self.operand_dtype, result = self.rule.types(common, dtype, what)
        except DTypeError as error:
            raise DTypeError(error.message, self.location) from None
        return result

    @property
    def bool_result(self) -> bool:
        """Whether this op compares (its result is boolean whatever its operands)."""
        return self.rule.result == "bool"


class UnaryElementWiseOp(ElementWiseOp):
    """f(x) at every index of x; result axes are x's."""

    def __init__(self, x, name: Optional[str] = None, dtype=None):
        super().__init__(as_op(x), dtype=dtype, name=name)

    def infer_axes(self) -> Axes:
        return self.args[0].axes


class BinaryElementWiseOp(ElementWiseOp):
    """f(x, y) over the union of both operands' axes."""

    def __init__(self, x, y, name: Optional[str] = None, dtype=None):
        x, y = as_op(x), as_op(y)
        super().__init__(matched_on_length(x, y), matched_on_length(y, x), dtype=dtype, name=name)

    def infer_axes(self) -> Axes:
        return elementwise_axes(type(self).__name__, *self.args)


def matched_on_length(x: Op, other: Op) -> Op:
    """`x` with each of its `match_on_length` axes that `other` lacks cast to `other`'s one
    axis of the same length (Nervana Graph v0.4's rule for `ng.constant(array)` without
    axes); two candidates are ambiguous and refused."""
    if not any(axis.match_on_length for axis in x.axes):
        return x
    free = [axis for axis in other.axes if axis not in x.axes]
    renamed, taken = [], set()
    for axis in x.axes:
        if not axis.match_on_length or axis in other.axes:
            renamed.append(axis)
            continue
        same = [b for b in free if b.length == axis.length and b not in taken]
        if len(same) > 1:
            raise IncompatibleAxesError(
                f"{x.name} {x.axes}: its axis {axis.name} (made up for an array, so it pairs "
                f"by length) could pair with any of {Axes(same)} of {other.name}; give the "
                f"array its axes: ng.constant(array, axes)", user_location())
        target = same[0] if same else axis
        taken.add(target)
        renamed.append(target)
    if all(a is b for a, b in zip(renamed, x.axes)):
        return x
    return cast_axes(x, renamed)


def binary_result_dtype(x: Op, y: Op) -> np.dtype:
    """The common type of two operands: NumPy's, with Python numbers weak (dtypes.promote)."""
    return promote(x.dtype, y.dtype, getattr(x, "weak_dtype", False),
                   getattr(y, "weak_dtype", False))


def _unary(class_name: str, doc: str, rule: ElementRule = SAME):
    return type(class_name, (UnaryElementWiseOp,), {"__doc__": doc, "rule": rule})


def _binary(class_name: str, doc: str, rule: ElementRule = SAME):
    return type(class_name, (BinaryElementWiseOp,), {"__doc__": doc, "rule": rule})


Negative = _unary("Negative", "-x", NO_BOOLEANS)
Absolute = _unary("Absolute", "|x|")
Sign = _unary("Sign", "-1, 0 or 1 by the sign of x", NO_BOOLEANS)
Square = _unary("Square", "x * x", BOOLEANS_AS_INT8)
Sqrt = _unary("Sqrt", "square root of x", FLOAT)
Exp = _unary("Exp", "e ** x", FLOAT)
Log = _unary("Log", "natural logarithm of x", FLOAT)
Safelog = _unary("Safelog", "log(max(x, exp(-50))): finite where x underflows to 0", FLOAT)
Reciprocal = _unary("Reciprocal", "1 / x (true division, as Divide)", FLOAT)
Tanh = _unary("Tanh", "hyperbolic tangent of x", FLOAT)
Sigmoid = _unary("Sigmoid", "1 / (1 + exp(-x))", FLOAT)
Sin = _unary("Sin", "sine of x", FLOAT)
Cos = _unary("Cos", "cosine of x", FLOAT)
Tan = _unary("Tan", "tangent of x", FLOAT)
Erf = _unary("Erf", "the error function of x", FLOAT)
Rsqrt = _unary("Rsqrt", "1 / sqrt(x)", FLOAT)
Relu = _unary("Relu", "max(x, 0)")
Floor = _unary("Floor", "the largest whole number <= x (integers and booleans are unchanged)")
StopGradient = _unary("StopGradient", "x, through which deriv passes no gradient")

Add = _binary("Add", "x + y (logical or of booleans)")
Subtract = _binary("Subtract", "x - y", NO_BOOLEANS)
Multiply = _binary("Multiply", "x * y (logical and of booleans)")
Divide = _binary("Divide", "x / y (true division: integer inputs give floats)", FLOAT)
Power = _binary("Power", "x ** y", BOOLEANS_AS_INT8)
Maximum = _binary("Maximum", "the larger of x and y (NaN propagates)")
Minimum = _binary("Minimum", "the smaller of x and y (NaN propagates)")
Equal = _binary("Equal", "x == y", COMPARISON)
NotEqual = _binary("NotEqual", "x != y", COMPARISON)
Less = _binary("Less", "x < y", COMPARISON)
LessEqual = _binary("LessEqual", "x <= y", COMPARISON)
Greater = _binary("Greater", "x > y", COMPARISON)
GreaterEqual = _binary("GreaterEqual", "x >= y", COMPARISON)

def negative(x, name=None, dtype=None) -> Op:
    """-x at every element of x.

    Booleans are refused, as NumPy refuses them; with an integer `dtype` their 0s and 1s
    are negated. ``-x`` builds the same op.

    Parameters
    ----------
    x : Op or number
        The operand.
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The type to compute in and return, as NumPy's ``dtype=`` (None: x's type).

    Returns
    -------
    Op
        The result, with x's axes.

    Raises
    ------
    AxgraphTypeError
        If `x` is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If x holds booleans and no `dtype` is given (NumPy refuses them too), if
        `dtype` is bool, or if it is not a supported element type.
    """
    return Negative(x, name=name, dtype=dtype)


def absolute(x, name=None, dtype=None) -> Op:
    """|x| at every element of x.

    Booleans come back unchanged. ``abs(x)`` builds the same op.

    Parameters
    ----------
    x : Op or number
        The operand.
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The type to compute in and return, as NumPy's ``dtype=`` (None: x's type).

    Returns
    -------
    Op
        The result, with x's axes.

    Raises
    ------
    AxgraphTypeError
        If `x` is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If `dtype` is not a supported element type.
    """
    return Absolute(x, name=name, dtype=dtype)


def sign(x, name=None, dtype=None) -> Op:
    """-1, 0 or 1 by the sign of each element of x.

    Its derivative is zero wherever it exists, so deriv passes no gradient through it.
    Booleans are refused, as NumPy refuses them.

    Parameters
    ----------
    x : Op or number
        The operand.
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The type to compute in and return, as NumPy's ``dtype=`` (None: x's type).

    Returns
    -------
    Op
        The result, with x's axes.

    Raises
    ------
    AxgraphTypeError
        If `x` is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If x holds booleans and no `dtype` is given (NumPy refuses them too), if
        `dtype` is bool, or if it is not a supported element type.
    """
    return Sign(x, name=name, dtype=dtype)


def square(x, name=None, dtype=None) -> Op:
    """x * x at every element of x.

    Booleans are squared as int8, as NumPy squares them.

    Parameters
    ----------
    x : Op or number
        The operand.
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The type to compute in and return, as NumPy's ``dtype=`` (None: x's type).

    Returns
    -------
    Op
        The result, with x's axes.

    Raises
    ------
    AxgraphTypeError
        If `x` is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If `dtype` is bool (booleans are computed as int8, as NumPy does) or
        not a supported element type.
    """
    return Square(x, name=name, dtype=dtype)


def sqrt(x, name=None, dtype=None) -> Op:
    """The square root of each element of x.

    A negative element gives NaN; bools and integers give float32.

    Parameters
    ----------
    x : Op or number
        The operand.
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The float type to compute in and return; None: x's type if it is a float,
        else float32.

    Returns
    -------
    Op
        The result, with x's axes.

    Raises
    ------
    AxgraphTypeError
        If `x` is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If `dtype` is not a float type.
    """
    return Sqrt(x, name=name, dtype=dtype)


def exp(x, name=None, dtype=None) -> Op:
    """e ** x at every element of x.

    Overflow gives inf, never an error or a warning; bools and integers give float32.

    Parameters
    ----------
    x : Op or number
        The operand.
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The float type to compute in and return; None: x's type if it is a float,
        else float32.

    Returns
    -------
    Op
        The result, with x's axes.

    Raises
    ------
    AxgraphTypeError
        If `x` is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If `dtype` is not a float type.
    """
    return Exp(x, name=name, dtype=dtype)


def log(x, name=None, dtype=None) -> Op:
    """The natural logarithm of each element of x.

    log(0) is -inf and a negative element gives NaN; `safelog` stays finite where x may
    round to 0.

    Parameters
    ----------
    x : Op or number
        The operand.
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The float type to compute in and return; None: x's type if it is a float,
        else float32.

    Returns
    -------
    Op
        The result, with x's axes.

    Raises
    ------
    AxgraphTypeError
        If `x` is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If `dtype` is not a float type.
    """
    return Log(x, name=name, dtype=dtype)


#: Where `safelog` clamps its input: exp(-50), as Nervana Graph's default limit.
SAFELOG_LIMIT = math.exp(-50)


def safelog(x, limit: float = SAFELOG_LIMIT, name=None, dtype=None) -> Op:
    """log(max(x, limit)): a logarithm that stays finite where x rounds to 0.

    Cross entropies take the log of probabilities that may round to 0; clamping keeps
    the loss and its gradient finite (no gradient flows below the limit).

    Parameters
    ----------
    x : Op or number
        The operand.
    limit : float, optional
        The smallest value the log is taken of (default exp(-50)).
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The float type to compute in and return; None: x's type if it is a float,
        else float32.

    Returns
    -------
    Op
        The result, with x's axes.

    Raises
    ------
    AxgraphTypeError
        If `x` is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If `dtype` is not a float type.
    """
    if limit == SAFELOG_LIMIT:
        return Safelog(x, name=name, dtype=dtype)
    return log(maximum(x, float(limit)), name=name, dtype=dtype)


def reciprocal(x, name=None, dtype=None) -> Op:
    """1 / x at every element of x.

    True division, as `divide`: integers give float32 (NumPy's reciprocal would divide
    integers).

    Parameters
    ----------
    x : Op or number
        The operand.
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The float type to compute in and return; None: x's type if it is a float,
        else float32.

    Returns
    -------
    Op
        The result, with x's axes.

    Raises
    ------
    AxgraphTypeError
        If `x` is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If `dtype` is not a float type.
    """
    return Reciprocal(x, name=name, dtype=dtype)


def tanh(x, name=None, dtype=None) -> Op:
    """The hyperbolic tangent of each element of x.

    Values lie in [-1, 1]; bools and integers give float32.

    Parameters
    ----------
    x : Op or number
        The operand.
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The float type to compute in and return; None: x's type if it is a float,
        else float32.

    Returns
    -------
    Op
        The result, with x's axes.

    Raises
    ------
    AxgraphTypeError
        If `x` is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If `dtype` is not a float type.
    """
    return Tanh(x, name=name, dtype=dtype)


def sigmoid(x, name=None, dtype=None) -> Op:
    """Logistic function 1 / (1 + exp(-x)), computed without overflow."""
    return Sigmoid(x, name=name, dtype=dtype)


def sin(x, name=None, dtype=None) -> Op:
    """The sine of each element of x (in radians).

    Bools and integers give float32.

    Parameters
    ----------
    x : Op or number
        The operand.
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The float type to compute in and return; None: x's type if it is a float,
        else float32.

    Returns
    -------
    Op
        The result, with x's axes.

    Raises
    ------
    AxgraphTypeError
        If `x` is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If `dtype` is not a float type.
    """
    return Sin(x, name=name, dtype=dtype)


def cos(x, name=None, dtype=None) -> Op:
    """The cosine of each element of x (in radians).

    Bools and integers give float32.

    Parameters
    ----------
    x : Op or number
        The operand.
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The float type to compute in and return; None: x's type if it is a float,
        else float32.

    Returns
    -------
    Op
        The result, with x's axes.

    Raises
    ------
    AxgraphTypeError
        If `x` is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If `dtype` is not a float type.
    """
    return Cos(x, name=name, dtype=dtype)


def tan(x, name=None, dtype=None) -> Op:
    """The tangent of each element of x (in radians).

    Bools and integers give float32.

    Parameters
    ----------
    x : Op or number
        The operand.
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The float type to compute in and return; None: x's type if it is a float,
        else float32.

    Returns
    -------
    Op
        The result, with x's axes.

    Raises
    ------
    AxgraphTypeError
        If `x` is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If `dtype` is not a float type.
    """
    return Tan(x, name=name, dtype=dtype)


def erf(x, name=None, dtype=None) -> Op:
    """The error function of each element of x.

    erf(x) = 2 / sqrt(pi) * (the integral of exp(-t**2) from 0 to x), so the normal
    distribution's cumulative function is (1 + erf(x / sqrt(2))) / 2.

    Parameters
    ----------
    x : Op or number
        The operand.
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The float type to compute in and return; None: x's type if it is a float,
        else float32.

    Returns
    -------
    Op
        The result, with x's axes.

    Raises
    ------
    AxgraphTypeError
        If `x` is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If `dtype` is not a float type.
    """
    return Erf(x, name=name, dtype=dtype)


def rsqrt(x, name=None, dtype=None) -> Op:
    """1 / sqrt(x) at every element of x.

    One op where normalizations divide by a standard deviation: 0 gives inf and a
    negative element NaN.

    Parameters
    ----------
    x : Op or number
        The operand.
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The float type to compute in and return; None: x's type if it is a float,
        else float32.

    Returns
    -------
    Op
        The result, with x's axes.

    Raises
    ------
    AxgraphTypeError
        If `x` is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If `dtype` is not a float type.
    """
    return Rsqrt(x, name=name, dtype=dtype)


def relu(x, name=None, dtype=None) -> Op:
    """max(x, 0) at every element of x: the rectified linear unit.

    Its derivative is 1 where x > 0 and 0 elsewhere.

    Parameters
    ----------
    x : Op or number
        The operand.
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The type to compute in and return, as NumPy's ``dtype=`` (None: x's type).

    Returns
    -------
    Op
        The result, with x's axes.

    Raises
    ------
    AxgraphTypeError
        If `x` is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If `dtype` is not a supported element type.
    """
    return Relu(x, name=name, dtype=dtype)


def floor(x, name=None, dtype=None) -> Op:
    """The largest whole number <= each element of x.

    Integers and booleans come back unchanged; its derivative is zero wherever it
    exists.

    Parameters
    ----------
    x : Op or number
        The operand.
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The type to compute in and return, as NumPy's ``dtype=`` (None: x's type).

    Returns
    -------
    Op
        The result, with x's axes.

    Raises
    ------
    AxgraphTypeError
        If `x` is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If `dtype` is not a supported element type.
    """
    return Floor(x, name=name, dtype=dtype)


def stop_gradient(x, name=None) -> Op:
    """x itself, treated by deriv as a constant: no gradient flows through it.

    For a value a loss uses as data rather than as something to train
    through: softmax subtracts ``stop_gradient(max(x))`` to keep exp from
    overflowing without differentiating the max.

    Parameters
    ----------
    x : Op or number
        The operand.
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        x's value, with x's axes and element type.

    Raises
    ------
    AxgraphTypeError
        If `x` is not an op or a number (an array needs ng.constant and axes).
    """
    return StopGradient(x, name=name)


def add(x, y, name=None, dtype=None) -> Op:
    """x + y, broadcast over the union of their axes.

    Axes pair by identity, in any order: the result has x's axes, then y's new ones.
    Booleans give their logical or. ``x + y`` builds the same op.

    Parameters
    ----------
    x, y : Op or number
        The operands; a Python number takes the other's element type (if of no higher kind).
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The type to compute in and return, as NumPy's ``dtype=`` (None: the operands' common type).

    Returns
    -------
    Op
        The result, with x's axes, then y's axes that x lacks.

    Raises
    ------
    AxgraphTypeError
        If an operand is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If `dtype` is not a supported element type.
    IncompatibleAxesError
        If x and y hold different axes with the same name (the result would be
        an outer product), or an axis made up for an array could pair with
        several axes of the other operand.

    Examples
    --------
    >>> import axgraph as ng
    >>> C, N = ng.make_axis(length=2, name="C"), ng.make_axis(length=3, name="N")
    >>> ng.add(ng.placeholder([C]), ng.placeholder([N, C])).axes
    Axes(C: 2, N: 3)
    """
    return Add(x, y, name=name, dtype=dtype)


def subtract(x, y, name=None, dtype=None) -> Op:
    """x - y, broadcast over the union of their axes.

    Axes pair by identity, in any order. Booleans are refused, as NumPy refuses them.
    ``x - y`` builds the same op.

    Parameters
    ----------
    x, y : Op or number
        The operands; a Python number takes the other's element type (if of no higher kind).
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The type to compute in and return, as NumPy's ``dtype=`` (None: the operands' common type).

    Returns
    -------
    Op
        The result, with x's axes, then y's axes that x lacks.

    Raises
    ------
    AxgraphTypeError
        If an operand is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If the operands are booleans and no `dtype` is given (NumPy refuses them too), if
        `dtype` is bool, or if it is not a supported element type.
    IncompatibleAxesError
        If x and y hold different axes with the same name (the result would be
        an outer product), or an axis made up for an array could pair with
        several axes of the other operand.
    """
    return Subtract(x, y, name=name, dtype=dtype)


def multiply(x, y, name=None, dtype=None) -> Op:
    """x * y, broadcast over the union of their axes.

    Axes pair by identity, in any order: a shared axis is multiplied elementwise, an
    axis of one operand only makes an outer product. Booleans give their logical and.
    ``x * y`` builds the same op.

    Parameters
    ----------
    x, y : Op or number
        The operands; a Python number takes the other's element type (if of no higher kind).
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The type to compute in and return, as NumPy's ``dtype=`` (None: the operands' common type).

    Returns
    -------
    Op
        The result, with x's axes, then y's axes that x lacks.

    Raises
    ------
    AxgraphTypeError
        If an operand is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If `dtype` is not a supported element type.
    IncompatibleAxesError
        If x and y hold different axes with the same name (the result would be
        an outer product), or an axis made up for an array could pair with
        several axes of the other operand.
    """
    return Multiply(x, y, name=name, dtype=dtype)


def divide(x, y, name=None, dtype=None) -> Op:
    """x / y, broadcast over the union of their axes.

    True division: bools and integers give float32. Division by zero gives inf or NaN,
    never an error. ``x / y`` builds the same op.

    Parameters
    ----------
    x, y : Op or number
        The operands; a Python number takes the other's element type (if of no higher kind).
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The float type to compute in and return; None: the operands' common type if it is a float,
        else float32.

    Returns
    -------
    Op
        The result, with x's axes, then y's axes that x lacks.

    Raises
    ------
    AxgraphTypeError
        If an operand is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If `dtype` is not a float type.
    IncompatibleAxesError
        If x and y hold different axes with the same name (the result would be
        an outer product), or an axis made up for an array could pair with
        several axes of the other operand.
    """
    return Divide(x, y, name=name, dtype=dtype)


def power(x, y, name=None, dtype=None) -> Op:
    """x ** y, broadcast over the union of their axes.

    Booleans are computed as int8, as NumPy does. ``x ** y`` builds the same op.

    Parameters
    ----------
    x, y : Op or number
        The operands; a Python number takes the other's element type (if of no higher kind).
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The type to compute in and return, as NumPy's ``dtype=`` (None: the operands' common type).

    Returns
    -------
    Op
        The result, with x's axes, then y's axes that x lacks.

    Raises
    ------
    AxgraphTypeError
        If an operand is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If `dtype` is bool (booleans are computed as int8, as NumPy does) or
        not a supported element type.
    IncompatibleAxesError
        If x and y hold different axes with the same name (the result would be
        an outer product), or an axis made up for an array could pair with
        several axes of the other operand.
    """
    return Power(x, y, name=name, dtype=dtype)


def maximum(x, y, name=None, dtype=None) -> Op:
    """The larger of x and y at every element, broadcast over the union of their axes.

    NaN propagates; booleans give their logical or.

    Parameters
    ----------
    x, y : Op or number
        The operands; a Python number takes the other's element type (if of no higher kind).
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The type to compute in and return, as NumPy's ``dtype=`` (None: the operands' common type).

    Returns
    -------
    Op
        The result, with x's axes, then y's axes that x lacks.

    Raises
    ------
    AxgraphTypeError
        If an operand is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If `dtype` is not a supported element type.
    IncompatibleAxesError
        If x and y hold different axes with the same name (the result would be
        an outer product), or an axis made up for an array could pair with
        several axes of the other operand.
    """
    return Maximum(x, y, name=name, dtype=dtype)


def minimum(x, y, name=None, dtype=None) -> Op:
    """The smaller of x and y at every element, broadcast over the union of their axes.

    NaN propagates; booleans give their logical and.

    Parameters
    ----------
    x, y : Op or number
        The operands; a Python number takes the other's element type (if of no higher kind).
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The type to compute in and return, as NumPy's ``dtype=`` (None: the operands' common type).

    Returns
    -------
    Op
        The result, with x's axes, then y's axes that x lacks.

    Raises
    ------
    AxgraphTypeError
        If an operand is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If `dtype` is not a supported element type.
    IncompatibleAxesError
        If x and y hold different axes with the same name (the result would be
        an outer product), or an axis made up for an array could pair with
        several axes of the other operand.
    """
    return Minimum(x, y, name=name, dtype=dtype)


def equal(x, y, name=None) -> Op:
    """x == y at every element: a boolean tensor.

    Ops keep ``==`` for identity (they are dictionary keys), so values are compared with
    this function.

    Parameters
    ----------
    x, y : Op or number
        The operands; a Python number takes the other's element type (if of no higher kind).
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        A boolean tensor with x's axes, then y's axes that x lacks.

    Raises
    ------
    AxgraphTypeError
        If an operand is not an op or a number (an array needs ng.constant and axes).
    IncompatibleAxesError
        If x and y hold different axes with the same name (the result would be
        an outer product), or an axis made up for an array could pair with
        several axes of the other operand.
    """
    return Equal(x, y, name=name)


def not_equal(x, y, name=None) -> Op:
    """x != y at every element: a boolean tensor.

    Ops keep ``!=`` for identity, so values are compared with this function.

    Parameters
    ----------
    x, y : Op or number
        The operands; a Python number takes the other's element type (if of no higher kind).
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        A boolean tensor with x's axes, then y's axes that x lacks.

    Raises
    ------
    AxgraphTypeError
        If an operand is not an op or a number (an array needs ng.constant and axes).
    IncompatibleAxesError
        If x and y hold different axes with the same name (the result would be
        an outer product), or an axis made up for an array could pair with
        several axes of the other operand.
    """
    return NotEqual(x, y, name=name)


def less(x, y, name=None) -> Op:
    """x < y at every element: a boolean tensor.

    ``x < y`` builds the same op; no gradient flows through a comparison.

    Parameters
    ----------
    x, y : Op or number
        The operands; a Python number takes the other's element type (if of no higher kind).
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        A boolean tensor with x's axes, then y's axes that x lacks.

    Raises
    ------
    AxgraphTypeError
        If an operand is not an op or a number (an array needs ng.constant and axes).
    IncompatibleAxesError
        If x and y hold different axes with the same name (the result would be
        an outer product), or an axis made up for an array could pair with
        several axes of the other operand.
    """
    return Less(x, y, name=name)


def less_equal(x, y, name=None) -> Op:
    """x <= y at every element: a boolean tensor.

    ``x <= y`` builds the same op; no gradient flows through a comparison.

    Parameters
    ----------
    x, y : Op or number
        The operands; a Python number takes the other's element type (if of no higher kind).
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        A boolean tensor with x's axes, then y's axes that x lacks.

    Raises
    ------
    AxgraphTypeError
        If an operand is not an op or a number (an array needs ng.constant and axes).
    IncompatibleAxesError
        If x and y hold different axes with the same name (the result would be
        an outer product), or an axis made up for an array could pair with
        several axes of the other operand.
    """
    return LessEqual(x, y, name=name)


def greater(x, y, name=None) -> Op:
    """x > y at every element: a boolean tensor.

    ``x > y`` builds the same op; no gradient flows through a comparison.

    Parameters
    ----------
    x, y : Op or number
        The operands; a Python number takes the other's element type (if of no higher kind).
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        A boolean tensor with x's axes, then y's axes that x lacks.

    Raises
    ------
    AxgraphTypeError
        If an operand is not an op or a number (an array needs ng.constant and axes).
    IncompatibleAxesError
        If x and y hold different axes with the same name (the result would be
        an outer product), or an axis made up for an array could pair with
        several axes of the other operand.
    """
    return Greater(x, y, name=name)


def greater_equal(x, y, name=None) -> Op:
    """x >= y at every element: a boolean tensor.

    ``x >= y`` builds the same op; no gradient flows through a comparison.

    Parameters
    ----------
    x, y : Op or number
        The operands; a Python number takes the other's element type (if of no higher kind).
    name : str, optional
        A name for the result (automatic if None).

    Returns
    -------
    Op
        A boolean tensor with x's axes, then y's axes that x lacks.

    Raises
    ------
    AxgraphTypeError
        If an operand is not an op or a number (an array needs ng.constant and axes).
    IncompatibleAxesError
        If x and y hold different axes with the same name (the result would be
        an outer product), or an axis made up for an array could pair with
        several axes of the other operand.
    """
    return GreaterEqual(x, y, name=name)


class Where(ElementWiseOp):
    """x where condition holds, else y (NumPy's `where`), over the union of the three args'
    axes: x's, then y's new ones, then the condition's. x and y meet as in a binary op
    (their common type); the condition is true where nonzero."""

    def __init__(self, condition, x, y, name: Optional[str] = None, dtype=None):
        condition, x, y = as_op(condition), as_op(x), as_op(y)
        x, y = matched_on_length(x, y), matched_on_length(y, x)
        super().__init__(matched_on_length(condition, x), x, y, dtype=dtype, name=name)

    def infer_axes(self) -> Axes:
        condition, x, y = self.args
        return elementwise_axes("Where", x, y, condition)

    def infer_dtype(self) -> np.dtype:
        return self._types(self.args[1:], self._asked_dtype)


def where(condition, x, y, name=None, dtype=None) -> Op:
    """x where `condition` is true (nonzero), else y, broadcast over the union of the axes.

    NumPy's ``where``, with axes paired by identity: the result has x's axes,
    then y's new ones, then the condition's. x and y meet as in a binary op
    (their common type); the gradient flows to x where the condition holds
    and to y elsewhere, never to the condition.

    Parameters
    ----------
    condition : Op or number
        The choice at each element: true (nonzero) picks x.
    x, y : Op or number
        The values picked where the condition holds and where it does not.
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The type to compute in and return, as NumPy's ``dtype=`` (None: the
        common type of x and y).

    Returns
    -------
    Op
        The picked values, with the axes of x, then y's new ones, then the
        condition's.

    Raises
    ------
    AxgraphTypeError
        If an operand is not an op or a number (an array needs ng.constant and axes).
    DTypeError
        If `dtype` is not a supported element type.
    IncompatibleAxesError
        If two operands hold different axes with the same name, or an axis made
        up for an array could pair with several axes of another operand.

    Examples
    --------
    >>> import numpy as np
    >>> import axgraph as ng
    >>> C = ng.make_axis(length=4, name="C")
    >>> x = ng.constant(np.array([-2.0, -1.0, 1.0, 2.0]), axes=[C])
    >>> with ng.make_transformer() as t:
    ...     print(t.computation(ng.where(x > 0, x, 0.0))())
    [0. 0. 1. 2.]
    """
    return Where(condition, x, y, name=name, dtype=dtype)
