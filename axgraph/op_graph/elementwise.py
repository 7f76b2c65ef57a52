"""Elementwise ops, with order-free broadcasting by axes.

The result of a binary op has the left operand's axes, then the right
operand's axes that the left lacks: ``(C, H) + (W, H, N) -> (C, H, W, N)``.
Element types follow NumPy (axgraph/dtypes.py, docs/dtypes.md): Python
numbers take the element type of the tensor they meet, so ``x + 1`` stays
float32 and ``labels + 1`` stays int32; ``mask * mask`` is a logical and.

Each op is declared once. An op that is one core op is made here from that
core op's `ng` trait (`core.traits.NgFunction`, in axgraph/core/ops/elementwise.py):
its class, named after the core op (`Exp`, `Absolute` for `core.Abs`), lowered
to it over its args converted and aligned, and its function (`exp`), whose
docstring's Parameters, Returns and Raises follow from its arity and element
rule (`function_docs`). An op that is a composition of core ops (`Square`,
`Safelog`, `Reciprocal`, `Relu`, `StopGradient`, `Where`) is a class below with
an `ng` declaration of its own, and a lowering rule and reference kernel of its
own. `OPS` lists every elementwise op with a function and `__all__` the functions.
"""
from __future__ import annotations

import inspect
import math
from typing import Any, Callable, ClassVar, Dict, List, Optional, Tuple, Type

import numpy as np

from ..axes import Axes, elementwise_axes
from ..core.ops import elementwise as core_ops
from ..core.traits import NgFunction
from ..debug_info import user_location
# (the element rules are re-exported: an axes op declares `ng.rule` as ew.FLOAT, ...)
from ..dtypes import (BOOLEANS_AS_INT8, COMPARISON, FLOAT, NO_BOOLEANS, SAME,  # noqa: F401
                      ElementRule, promote)
from ..errors import AxgraphTypeError, DTypeError, IncompatibleAxesError
from . import function_docs
from .op import Op
from .shape_ops import cast_axes
from .tensors import as_op


class ElementWiseOp(Op):
    """Base of ops whose value at each index uses only the args at that index.

    `operand_dtype` is the type every transformer converts the args to before
    computing; `dtype` is the result's (they differ only for comparisons). A
    class declaring `ng` takes its `rule` from it.
    """

    #: How the result type follows from the operands' (axgraph/dtypes.py).
    rule: ClassVar[ElementRule] = SAME
    #: The function building this op and what tests may assume of its values.
    ng: ClassVar[Optional[NgFunction]] = None
    #: The core op this op is, over its args converted to `operand_dtype` and aligned to
    #: its axes; None: a composition, lowered by a rule of its own.
    core_op: ClassVar[Optional[type]] = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        declared = cls.__dict__.get("ng")
        if declared is not None:
            cls.rule = declared.rule

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


# -- compositions of core ops: each declared here, lowered and computed by rules of its own --

class Square(UnaryElementWiseOp):
    """x * x at every element (a product in the core)."""

    ng = NgFunction("square", BOOLEANS_AS_INT8, """x * x at every element of x.

        Booleans are squared as int8, as NumPy squares them.""", rounding="exact")


class Safelog(UnaryElementWiseOp):
    """log(max(x, exp(-50))): finite where x underflows to 0."""

    ng = NgFunction("safelog", FLOAT, domain="positive")  # its function takes a limit


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
    log, maximum = function_of(core_ops.Log), function_of(core_ops.Maximum)
    return log(maximum(x, float(limit)), name=name, dtype=dtype)


class Reciprocal(UnaryElementWiseOp):
    """1 / x (true division, as Divide)."""

    ng = NgFunction("reciprocal", FLOAT, """1 / x at every element of x.

        True division, as `divide`: integers give float32 (NumPy's reciprocal would
        divide integers).""", domain="positive", rounding="correct")


class Relu(UnaryElementWiseOp):
    """max(x, 0)."""

    ng = NgFunction("relu", SAME, """max(x, 0) at every element of x: the rectified linear unit.

        Its derivative is 1 where x > 0 and 0 elsewhere.""",
                    smoothness="kinked", rounding="exact")


class StopGradient(UnaryElementWiseOp):
    """x, through which deriv passes no gradient."""

    ng = NgFunction("stop_gradient", SAME, smoothness="blocked", rounding="exact")


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


class Where(ElementWiseOp):
    """x where condition holds, else y (NumPy's `where`), over the union of the three args'
    axes: x's, then y's new ones, then the condition's. x and y meet as in a binary op
    (their common type); the condition is true where nonzero."""

    ng = NgFunction("where", SAME, rounding="exact")  # its function takes three operands

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


# -- ops made from a core op's declaration --------------------------------------------------

_AXES_OPS: Dict[type, Type[ElementWiseOp]] = {}
_FUNCTIONS: Dict[type, Callable[..., Op]] = {}


def axes_op(core_op: type) -> Type[ElementWiseOp]:
    """The axes op of an elementwise core op that declares its `ng` trait (made once).

    A subclass of `UnaryElementWiseOp` or `BinaryElementWiseOp` named `ng.op_name` or
    after the core op, with `ng`'s element rule, lowered to `core_op`. The library's are
    this module's `Exp`, `Add`, ...; a user's core op gets its own the same way.

    Parameters
    ----------
    core_op : type
        A subclass of `core.UnaryElementwise` or `core.BinaryElementwise` declaring `ng`.

    Returns
    -------
    type
        The axes op class (the same one on every call).

    Raises
    ------
    AxgraphTypeError
        If `core_op` is not a unary or binary elementwise core op declaring `ng`.
    """
    found = _AXES_OPS.get(core_op)
    if found is not None:
        return found
    ng = getattr(core_op, "ng", None) if isinstance(core_op, type) else None
    families = (core_ops.UnaryElementwise, core_ops.BinaryElementwise)
    if ng is None or not issubclass(core_op, families):
        raise AxgraphTypeError(f"axes_op takes a unary or binary elementwise core op that "
                               f"declares its ng trait, not {core_op!r}", user_location())
    base = UnaryElementWiseOp if issubclass(core_op, core_ops.UnaryElementwise) \
        else BinaryElementWiseOp
    summary = inspect.cleandoc(ng.doc or ng.name).splitlines()[0]
    made: Type[ElementWiseOp] = type(ng.op_name or core_op.__name__, (base,), {
        "__doc__": f"{summary}\n\nThe axes op of `core.{core_op.__name__}`, made from its "
                   f"declaration; `ng.{ng.name}` builds it.",
        "__module__": __name__ if core_op.__module__ == core_ops.__name__ else core_op.__module__,
        "ng": ng, "core_op": core_op})
    _AXES_OPS[core_op] = made
    return made


def function_of(op_class: type) -> Callable[..., Op]:
    """The function building `op_class`, with the docstring its declaration composes (made once).

    Parameters
    ----------
    op_class : type
        An elementwise axes op declaring `ng` with a `doc`, or a core op declaring its
        `ng` trait (then its `axes_op`'s).

    Returns
    -------
    callable
        ``f(x, name=None, dtype=None)`` for a unary op, ``f(x, y, name=None, dtype=None)``
        for a binary one and ``f(x, y, name=None)`` for a comparison, named `ng.name`.

    Raises
    ------
    AxgraphTypeError
        If `op_class` declares no `ng`, or one without a `doc` (its function is
        written by hand), or is not a unary or binary op.
    """
    if not (isinstance(op_class, type) and issubclass(op_class, ElementWiseOp)):
        op_class = axes_op(op_class)
    made = _FUNCTIONS.get(op_class)
    if made is not None:
        return made
    ng = op_class.ng
    unary = issubclass(op_class, UnaryElementWiseOp)
    if ng is None or ng.doc is None or not (unary or issubclass(op_class, BinaryElementWiseOp)):
        raise AxgraphTypeError(f"function_of: {op_class.__name__} declares no ng function "
                               f"with a doc to make", user_location())
    made = _make_function(op_class, unary, ng.rule.result == "bool")
    made.__name__ = made.__qualname__ = ng.name
    made.__module__ = op_class.__module__
    made.__doc__ = function_docs.compose(ng, 1 if unary else 2)
    _FUNCTIONS[op_class] = made
    return made


def _make_function(op_class: type, unary: bool, compares: bool) -> Callable[..., Op]:
    if unary:
        return _unary_function(op_class)
    return _comparison_function(op_class) if compares else _binary_function(op_class)


def _unary_function(op_class: type) -> Callable[..., Op]:
    def function(x, name: Optional[str] = None, dtype=None) -> Op:
        return op_class(x, name=name, dtype=dtype)
    return function


def _binary_function(op_class: type) -> Callable[..., Op]:
    def function(x, y, name: Optional[str] = None, dtype=None) -> Op:
        return op_class(x, y, name=name, dtype=dtype)
    return function


def _comparison_function(op_class: type) -> Callable[..., Op]:
    def function(x, y, name: Optional[str] = None) -> Op:
        return op_class(x, y, name=name)
    return function


_MADE: List[Type[ElementWiseOp]] = [axes_op(op) for op in core_ops.OPS
                                     if op.__dict__.get("ng") is not None]
globals().update((op.__name__, op) for op in _MADE)

#: Every elementwise op with an `ng` function: the compositions above, then those made
#: from core ops, in the core's order.
OPS: Tuple[Type[ElementWiseOp], ...] = tuple(
    value for name, value in list(globals().items())
    if isinstance(value, type) and issubclass(value, ElementWiseOp) and name == value.__name__
    and value.__module__ == __name__ and value.__dict__.get("ng") is not None)
_DECLARED: Dict[Type[ElementWiseOp], NgFunction] = {op: op.ng for op in OPS if op.ng}
globals().update((ng.name, function_of(op)) for op, ng in _DECLARED.items() if ng.doc)

#: The functions, made here or written above (what `ng` re-exports).
__all__ = [ng.name for ng in _DECLARED.values()]


def __getattr__(name: str) -> Any:
    """An AttributeError for a name this module lacks. The ops and functions made above
    are set on the module when it is imported; this hook tells type checkers so."""
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
