"""Elementwise ops: inputs of one element type and one shape, nothing implicit.

Each class states which element types it accepts and what type it returns,
and declares its traits (axgraph/core/traits.py): its family, whether it is
commutative, its reference NumPy function, its C expression in fused kernels
and whether a kernel may write it over an input. Backends derive their
elementwise kernels from these; no backend names these ops to say it again.
An op the axes graph offers declares its `ng` trait too (`traits.NgFunction`):
the function users call (`ng.exp`), NumPy's typing of it and what tests may
assume of its values; its axes op, lowering and function are made from that.
`OPS` lists the ops of this module in the order they are defined.
"""
from __future__ import annotations

from typing import ClassVar, Optional, Tuple, Type

import numpy as np

from ...dtypes import BOOLEANS_AS_INT8, COMPARISON, FLOAT, NO_BOOLEANS, SAME
from ..node import Node
from ..traits import NgFunction
from ..tensor_types import ElementType, Shape, boolean
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
    """f(x) at every element of x: the family of one-operand elementwise ops.

    Each op of the family says in its own class which element types it accepts
    (`accepts`) and states its traits: the reference NumPy function and the C
    expression every backend derives its kernels from. The result has x's element
    type and shape, so a kernel may write it over x.

    Parameters
    ----------
    x : Node
        The operand: {accepts} element type, any shape (dims may be symbolic).

    Returns
    -------
    {op}
        A node of x's element type and shape.

    Raises
    ------
    DTypeError
        x does not have {accepts} element type.
    """

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
    """-x at every element.

    Integers wrap around as NumPy's do: the negative of
    an unsigned 1 is the type's maximum, and the most negative signed value is
    its own negative.
    """
    numpy = np.negative
    c = "(-{0})"
    ng = NgFunction("negative", NO_BOOLEANS, """-x at every element of x.

        Booleans are refused, as NumPy refuses them; with an integer `dtype` their 0s
        and 1s are negated. ``-x`` builds the same op.""", rounding="exact")


class Abs(UnaryElementwise):
    """|x| at every element.

    |-0.0| is 0.0, and the most negative signed integer is
    its own absolute value (it wraps around, as in NumPy).
    """
    numpy = np.abs
    c = "{fabs}({0})"
    ng = NgFunction("absolute", SAME, """|x| at every element of x.

        Booleans come back unchanged. ``abs(x)`` builds the same op.""",
                    op_name="Absolute", identity_for="b", smoothness="kinked", rounding="exact")


class Sign(UnaryElementwise):
    """-1, 0 or 1 by the sign of x, at every element, in x's element type.

    A float NaN stays NaN; zeros of either sign give 0.
    """
    numpy = np.sign
    c = "({0} > 0 ? {one} : ({0} < 0 ? (-{one}) : ({0} == {0} ? {zero} : {0})))"
    ng = NgFunction("sign", NO_BOOLEANS, """-1, 0 or 1 by the sign of each element of x.

        Its derivative is zero wherever it exists, so deriv passes no gradient through
        it. Booleans are refused, as NumPy refuses them.""",
                    smoothness="step", rounding="exact")


class Sqrt(UnaryElementwise):
    """The square root of x at every element.

    A negative x gives NaN (IEEE 754), not an error.
    """
    accepts = "float"
    numpy = np.sqrt
    c = "{sqrt}({0})"
    ng = NgFunction("sqrt", FLOAT, """The square root of each element of x.

        A negative element gives NaN; bools and integers give float32.""",
                    domain="positive", rounding="correct")


class Exp(UnaryElementwise):
    """e ** x at every element.

    A result too large for the element type is inf, not an error.
    """
    accepts = "float"
    numpy = np.exp
    c = "{exp}({0})"
    ng = NgFunction("exp", FLOAT, """e ** x at every element of x.

        Overflow gives inf, never an error or a warning; bools and integers give
        float32.""")


class Log(UnaryElementwise):
    """The natural logarithm of x at every element.

    log(0) is -inf and a negative x gives NaN, not an error.
    """
    accepts = "float"
    numpy = np.log
    c = "{log}({0})"
    ng = NgFunction("log", FLOAT, """The natural logarithm of each element of x.

        log(0) is -inf and a negative element gives NaN; `safelog` stays finite where
        x may round to 0.""", domain="positive")


class Log1p(UnaryElementwise):
    """log(1 + x) at every element.

    Accurate for x near 0, where rounding 1 + x first would lose x. log1p(-1) is -inf
    and an x below -1 gives NaN, not an error.
    """
    accepts = "float"
    numpy = np.log1p
    c = "{log1p}({0})"
    ng = NgFunction("log1p", FLOAT, """The natural logarithm of 1 + x at every element of x.

        Accurate where x is near 0 (``log(1 + x)`` would round 1 + x first, losing x):
        -1 gives -inf and below it NaN; bools and integers give float32.""",
                    domain="positive")


class Tanh(UnaryElementwise):
    """The hyperbolic tangent of x at every element.

    Fused C kernels compute it as one quotient, which a following
    `Multiply` by another quotient (a sigmoid) shares a division with.
    """
    accepts = "float"
    numpy = np.tanh
    c = "{tanh}({0})"
    c_quotient = _tanh_quotient_c
    ng = NgFunction("tanh", FLOAT, """The hyperbolic tangent of each element of x.

        Values lie in [-1, 1]; bools and integers give float32.""")


class Sigmoid(UnaryElementwise):
    """1 / (1 + exp(-x)) at every element: the logistic function.

    Computed in the stable form e = exp(-|x|), then 1 / (1 + e) where
    x >= 0 and e / (1 + e) where x < 0, so that no large |x| overflows.
    """
    accepts = "float"
    numpy = reference.sigmoid
    numpy_denominator = reference.sigmoid_denominator
    c = _sigmoid_c
    c_quotient = _sigmoid_quotient_c
    ng = NgFunction("sigmoid", FLOAT, """
        The logistic function 1 / (1 + exp(-x)) of each element of x.

        Computed without overflow. `ng.sigmoid` builds the same op and records x
        with it, so that a `cross_entropy_binary` of the result takes the stable
        log-domain form.""")


class Sin(UnaryElementwise):
    """The sine of x at every element, x in radians."""
    accepts = "float"
    numpy = np.sin
    c = "{sin}({0})"
    ng = NgFunction("sin", FLOAT, """The sine of each element of x (in radians).

        Bools and integers give float32.""")


class Cos(UnaryElementwise):
    """The cosine of x at every element, x in radians."""
    accepts = "float"
    numpy = np.cos
    c = "{cos}({0})"
    ng = NgFunction("cos", FLOAT, """The cosine of each element of x (in radians).

        Bools and integers give float32.""")


class Floor(UnaryElementwise):
    """The largest whole number <= x at every element, in x's float type.

    Integers are whole already, so only floats are accepted; `Convert` turns the
    result into an integer type.
    """
    accepts = "float"
    numpy = np.floor
    c = "{floor}({0})"
    ng = NgFunction("floor", SAME, """The largest whole number <= each element of x.

        Integers and booleans come back unchanged; its derivative is zero wherever it
        exists.""", identity_for="biu", smoothness="step", rounding="exact")


class Erf(UnaryElementwise):
    """The error function at every element: 2 / sqrt(pi) * integral of exp(-t**2) from 0 to x.

    The reference computes `math.erf` in float64 and rounds once to x's type.
    """
    accepts = "float"
    numpy = reference.erf
    c = "{erf}({0})"
    ng = NgFunction("erf", FLOAT, """The error function of each element of x.

        erf(x) = 2 / sqrt(pi) * (the integral of exp(-t**2) from 0 to x), so the
        normal distribution's cumulative function is (1 + erf(x / sqrt(2))) / 2.""")


class Tan(UnaryElementwise):
    """The tangent of x at every element, x in radians.

    Near odd multiples of pi / 2 the result is large, never an error.
    """
    accepts = "float"
    numpy = np.tan
    c = "{tan}({0})"
    ng = NgFunction("tan", FLOAT, """The tangent of each element of x (in radians).

        Bools and integers give float32.""", domain="unit")


class Rsqrt(UnaryElementwise):
    """1 / sqrt(x) at every element.

    Rounded as its two steps (a square root, then a division) on every backend. rsqrt(+0) is inf, rsqrt(-0) is -inf and a negative x gives NaN.
    """
    accepts = "float"
    numpy = reference.rsqrt
    c = "({one} / {sqrt}({0}))"
    ng = NgFunction("rsqrt", FLOAT, """1 / sqrt(x) at every element of x.

        One op where normalizations divide by a standard deviation: 0 gives inf and a
        negative element NaN.""", domain="positive", rounding="correct")


class Not(UnaryElementwise):
    """The logical not of x at every element.

    Integers are compared with zero explicitly (`Equal`, `NotEqual`).
    """
    accepts = "bool"
    family = "logical"
    numpy = np.logical_not
    c = "(!{0})"


class BinaryElementwise(Node):
    """f(a, b) at every element: the family of two-operand elementwise ops.

    The operands must have one element type and one shape: nothing is broadcast
    or converted implicitly (`Broadcast` and `Convert` say so in the graph). Each
    op of the family says which element types it accepts (`accepts`), whether it
    is commutative (common-subexpression elimination then merges `b + a` with
    `a + b`), and its reference NumPy function and C expression.

    Parameters
    ----------
    a, b : Node
        The operands, of one shape (dims may be symbolic) and one element type,
        which must be {accepts} one.

    Returns
    -------
    {op}
        A node of a's element type and shape.

    Raises
    ------
    DTypeError
        a and b differ in element type, or theirs is not {accepts} one.
    ShapeError
        a and b differ in shape.
    """

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


class And(BinaryElementwise):
    """The logical and of a and b at every element (commutative)."""
    accepts = "bool"
    family = "logical"
    commutative = True
    numpy = np.logical_and
    c = "({0} & {1})"


class Or(BinaryElementwise):
    """The logical or of a and b at every element (commutative)."""
    accepts = "bool"
    family = "logical"
    commutative = True
    numpy = np.logical_or
    c = "({0} | {1})"


class Add(BinaryElementwise):
    """a + b at every element (commutative)."""
    commutative = True
    numpy = np.add
    c = "({0} + {1})"
    ng = NgFunction("add", SAME, """x + y, broadcast over the union of their axes.

        Axes pair by identity, in any order: the result has x's axes, then y's new
        ones. Booleans give their logical or. ``x + y`` builds the same op.

        Examples
        --------
        >>> import axgraph as ng
        >>> C, N = ng.make_axis(length=2, name="C"), ng.make_axis(length=3, name="N")
        >>> ng.add(ng.placeholder([C]), ng.placeholder([N, C])).axes
        Axes(C: 2, N: 3)""", logical=Or, rounding="exact")


class Subtract(BinaryElementwise):
    """a - b at every element."""
    numpy = np.subtract
    c = "({0} - {1})"
    ng = NgFunction("subtract", NO_BOOLEANS, """x - y, broadcast over the union of their axes.

        Axes pair by identity, in any order. Booleans are refused, as NumPy refuses
        them. ``x - y`` builds the same op.""", rounding="exact")


class Multiply(BinaryElementwise):
    """a * b at every element.

    Commutative. In fused C kernels a product of two bounded
    quotients (tanh(c) * sigmoid(o) in LSTM cells) divides once.
    """
    commutative = True
    numpy = np.multiply
    c = _multiply_c
    ng = NgFunction("multiply", SAME, """x * y, broadcast over the union of their axes.

        Axes pair by identity, in any order: a shared axis is multiplied elementwise,
        an axis of one operand only makes an outer product. Booleans give their
        logical and. ``x * y`` builds the same op.""", logical=And, rounding="exact")


class Divide(BinaryElementwise):
    """a / b at every element; integers divide truncating toward zero.

    Floats divide as IEEE 754 does (x / 0 is inf or NaN, not an error); integers
    truncate as C, nGraph and ONNX do, so -7 / 2 is -3 (NumPy's floor division
    gives -4).

    Raises
    ------
    ExecutionError
        When the compiled function runs: an integer b has a zero element.
    """
    numpy = reference.divide
    c = "({0} / {1})"
    ng = NgFunction("divide", FLOAT, """x / y, broadcast over the union of their axes.

        True division: bools and integers give float32. Division by zero gives inf or
        NaN, never an error. ``x / y`` builds the same op.""", rounding="correct")


class Power(BinaryElementwise):
    """a ** b at every element.

    A float a < 0 to a fractional b gives NaN, not an error.

    Raises
    ------
    ExecutionError
        When the compiled function runs: an integer a is raised to a negative
        integer b.
    """
    numpy = np.power
    c = "{pow}({0}, {1})"
    ng = NgFunction("power", BOOLEANS_AS_INT8, """x ** y, broadcast over the union of their axes.

        Booleans are computed as int8, as NumPy does. ``x ** y`` builds the same op.""",
                    domain="positive")


class Maximum(BinaryElementwise):
    """The larger of a and b at every element.

    Commutative. A NaN in either operand gives NaN, as `numpy.maximum` does.
    """
    commutative = True
    numpy = np.maximum
    c = "(({0} > {1} || {0} != {0}) ? {0} : {1})"
    ng = NgFunction("maximum", SAME, """
        The larger of x and y at every element, broadcast over the union of their axes.

        NaN propagates; booleans give their logical or.""",
                    logical=Or, smoothness="kinked", rounding="exact")


class Minimum(BinaryElementwise):
    """The smaller of a and b at every element.

    Commutative. A NaN in either operand gives NaN, as `numpy.minimum` does.
    """
    commutative = True
    numpy = np.minimum
    c = "(({0} < {1} || {0} != {0}) ? {0} : {1})"
    ng = NgFunction("minimum", SAME, """
        The smaller of x and y at every element, broadcast over the union of their axes.

        NaN propagates; booleans give their logical and.""",
                    logical=And, smoothness="kinked", rounding="exact")


class Comparison(BinaryElementwise):
    """A comparison of a and b at every element, giving booleans.

    Any element type may be compared, booleans included, but both operands must
    have the same one (and the same shape). A NaN compares unequal to everything,
    itself included.

    Parameters
    ----------
    a, b : Node
        The operands: one element type (any) and one shape (dims may be symbolic).

    Returns
    -------
    {op}
        A boolean node of a's shape.

    Raises
    ------
    DTypeError
        a and b differ in element type.
    """

    accepts = "any"
    returns_boolean = True
    family = "compare"


class Equal(Comparison):
    """a == b at every element.

    Commutative; NaN is equal to nothing.
    """
    commutative = True
    numpy = np.equal
    c = "({0} == {1})"
    ng = NgFunction("equal", COMPARISON, """x == y at every element: a boolean tensor.

        Ops keep ``==`` for identity (they are dictionary keys), so values are compared
        with this function.""",
                    smoothness="step", rounding="exact")


class NotEqual(Comparison):
    """a != b at every element.

    Commutative; NaN is unequal to everything, itself included.
    """
    commutative = True
    numpy = np.not_equal
    c = "({0} != {1})"
    ng = NgFunction("not_equal", COMPARISON, """x != y at every element: a boolean tensor.

        Ops keep ``!=`` for identity, so values are compared with this function.""",
                    smoothness="step", rounding="exact")


class Less(Comparison):
    """a < b at every element.

    False wherever either operand is NaN.
    """
    numpy = np.less
    c = "({0} < {1})"
    ng = NgFunction("less", COMPARISON, """x < y at every element: a boolean tensor.

        ``x < y`` builds the same op; no gradient flows through a comparison.""",
                    smoothness="step", rounding="exact")


class LessEq(Comparison):
    """a <= b at every element.

    False wherever either operand is NaN.
    """
    numpy = np.less_equal
    c = "({0} <= {1})"
    ng = NgFunction("less_equal", COMPARISON, """x <= y at every element: a boolean tensor.

        ``x <= y`` builds the same op; no gradient flows through a comparison.""",
                    smoothness="step", rounding="exact", op_name="LessEqual")


class Greater(Comparison):
    """a > b at every element.

    False wherever either operand is NaN.
    """
    numpy = np.greater
    c = "({0} > {1})"
    ng = NgFunction("greater", COMPARISON, """x > y at every element: a boolean tensor.

        ``x > y`` builds the same op; no gradient flows through a comparison.""",
                    smoothness="step", rounding="exact")


class GreaterEq(Comparison):
    """a >= b at every element.

    False wherever either operand is NaN.
    """
    numpy = np.greater_equal
    c = "({0} >= {1})"
    ng = NgFunction("greater_equal", COMPARISON, """x >= y at every element: a boolean tensor.

        ``x >= y`` builds the same op; no gradient flows through a comparison.""",
                    smoothness="step", rounding="exact", op_name="GreaterEqual")


class Select(Node):
    """condition ? then : otherwise at every element (`numpy.where`).

    The one elementwise op of three operands: nothing is broadcast, so all three
    have one shape.

    Parameters
    ----------
    condition : Node
        Booleans choosing, element by element, `then` (True) or `otherwise`.
    then, otherwise : Node
        The values chosen from: one element type (any) and one shape.

    Returns
    -------
    Select
        A node of then's element type and shape.

    Raises
    ------
    DTypeError
        condition is not boolean, or then and otherwise differ in element type.
    ShapeError
        condition, then and otherwise do not all have one shape.
    """

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
    """x converted to `element_type` at every element.

    The one conversion of the core: no other op converts implicitly. Floats become
    integers by truncation toward zero, and any non-zero value becomes True.

    Parameters
    ----------
    x : Node
        The values to convert: any element type and shape.
    element_type : ElementType, str or numpy.dtype
        The result's element type: `core.i32`, its name "i32" or `numpy.int32`.

    Returns
    -------
    Convert
        A node of `element_type` and x's shape.

    Raises
    ------
    DTypeError
        `element_type` names no core element type (or is bf16 without ml_dtypes).
    """

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


#: The bases of the families above: no op of their own.
FAMILIES = (UnaryElementwise, BinaryElementwise, Comparison)
#: Every op of this module, in the order defined (`core.CORE_OPS` lists them so).
OPS: Tuple[Type[Node], ...] = tuple(
    value for value in list(globals().values())
    if isinstance(value, type) and issubclass(value, Node)
    and value.__module__ == __name__ and value not in FAMILIES)
