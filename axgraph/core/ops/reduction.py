"""Ops that combine elements: Dot, Sum/Prod/Max/Min, ArgMax/ArgMin, Softmax, LogSoftmax and
their backprops.

Sum, Prod, Max and Min declare how they combine elements (their traits,
axgraph/core/traits.py `ReductionTraits`): the NumPy ufunc they reduce with,
the C expression that accumulates them, and what passes may do with them.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np

from ...errors import DTypeError, ShapeError
from ..node import Node
from ..tensor_types import ElementType, Shape, i64
from .over_axes import OverAxes
from ._checks import arity, element_type_attr, positions, require_kind, same_element_type


class Dot(Node):
    """The general contraction: dim contract_a[k] of a pairs with dim contract_b[k] of b.

    Paired dims must be equal, and are summed over. Batch dims pair too but are
    kept: dim batch_a[k] of a and batch_b[k] of b index one product each (as
    `jax.lax.dot_general`), so a stack of matrix products is one node. The result
    has the batch dims, then a's other dims in order, then b's (without batch
    dims, as `numpy.tensordot`). Without explicit pairs a's last dim contracts
    with b's first, a matrix product; with a scalar operand nothing contracts (a
    scaled copy of the other).

    Parameters
    ----------
    a, b : Node
        The operands: one numeric (not boolean) element type, any shapes.
    contract_a, contract_b : sequence of int, optional
        Equally many distinct positions of a's and of b's dims, paired in order.
        Give both or neither (default: a's last dim with b's first).
    batch_a, batch_b : sequence of int, optional
        Equally many distinct positions of a's and of b's dims, none of them
        contracted, paired in order: the batch dims (default: none).

    Returns
    -------
    Dot
        A node of a's element type; its shape is the batch dims, then a's free
        dims, then b's.

    Raises
    ------
    DTypeError
        a and b differ in element type, or theirs is boolean.
    ShapeError
        Only one of contract_a and contract_b is given; a pair of position lists
        is not distinct positions of the operand's dims or differs in length; a
        batch dim is also contracted; or paired dims differ.

    Examples
    --------
    >>> from axgraph import core
    >>> a = core.Parameter(core.f32, (2, 3, 4))
    >>> b = core.Parameter(core.f32, (4, 3, 5))
    >>> core.Dot(a, b, contract_a=(1, 2), contract_b=(1, 0)).shape
    Shape([2, 5])
    >>> core.Dot(a, b, contract_a=(2,), contract_b=(0,), batch_a=(1,), batch_b=(1,)).shape
    Shape([3, 2, 5])
    """

    _attributes = ("contract_a", "contract_b", "batch_a", "batch_b")
    _shown_when_set = frozenset({"batch_a", "batch_b"})

    def __init__(self, a: Node, b: Node, contract_a: Optional[Sequence[int]] = None,
                 contract_b: Optional[Sequence[int]] = None, batch_a: Sequence[int] = (),
                 batch_b: Sequence[int] = (), name: Optional[str] = None):
        super().__init__((a, b), {"contract_a": contract_a, "contract_b": contract_b,
                                  "batch_a": batch_a, "batch_b": batch_b}, name)

    def _normalize(self, attributes: dict) -> dict:
        a, b = arity(self, 2)
        contract_a, contract_b = attributes["contract_a"], attributes["contract_b"]
        if contract_a is None and contract_b is None:
            contract_a, contract_b = ((a.rank - 1,), (0,)) if a.rank and b.rank else ((), ())
        elif contract_a is None or contract_b is None:
            raise self._fail(ShapeError, "give both contract_a and contract_b, or neither")
        normalized = {}
        for kind, for_a, for_b in (("contract", contract_a, contract_b),
                                   ("batch", attributes["batch_a"], attributes["batch_b"])):
            for_a = positions(self, for_a, a.rank, f"{kind}_a", ordered=True)
            for_b = positions(self, for_b, b.rank, f"{kind}_b", ordered=True)
            if len(for_a) != len(for_b):
                raise self._fail(ShapeError, f"{kind}_a {for_a} and {kind}_b {for_b} must "
                                 f"pair up dims one to one")
            normalized[f"{kind}_a"], normalized[f"{kind}_b"] = for_a, for_b
        for side in "ab":
            both = set(normalized[f"contract_{side}"]) & set(normalized[f"batch_{side}"])
            if both:
                raise self._fail(ShapeError, f"dims {sorted(both)} of {side} are both "
                                 f"contracted and batch dims")
        return normalized

    def _infer(self) -> Tuple[ElementType, Shape]:
        a, b = self.inputs
        et = same_element_type(self, (a, b))
        require_kind(self, a, "numeric")
        attributes = self.attributes
        for key, kind in (("contract", "contracted"), ("batch", "batch")):
            for i, j in zip(attributes[f"{key}_a"], attributes[f"{key}_b"]):
                if a.shape[i] != b.shape[j]:
                    raise self._fail(ShapeError, f"{kind} dims differ: dim {i} of {a.name} "
                                     f"{a.shape} is {a.shape[i]}, dim {j} of {b.name} "
                                     f"{b.shape} is {b.shape[j]}")
        paired_a = attributes["contract_a"] + attributes["batch_a"]
        paired_b = attributes["contract_b"] + attributes["batch_b"]
        shape = [a.shape[i] for i in attributes["batch_a"]]
        shape += [d for i, d in enumerate(a.shape) if i not in paired_a]
        shape += [d for j, d in enumerate(b.shape) if j not in paired_b]
        return et, Shape(shape)


class Reduction(OverAxes):
    """x combined over the dims at `axes`, which disappear from the result.

    The family of Sum, Prod, Max and Min. The result keeps x's element type:
    integers are summed in their own type, not promoted. Each combines the
    elements with a commutative and associative operation, so the order they
    are combined in changes at most the rounding.

    Parameters
    ----------
    x : Node
        The values: a numeric (not boolean) element type, any shape.

    Returns
    -------
    {op}
        A node of x's element type; its shape is x's without the dims at `axes`
        (with no axes, x's values unchanged).

    Raises
    ------
    DTypeError
        x is boolean.
    """

    order_free = True

    def _infer(self) -> Tuple[ElementType, Shape]:
        (x,) = self.inputs
        require_kind(self, x, "numeric")
        axes = self.attributes["axes"]
        return x.element_type, Shape(d for i, d in enumerate(x.shape) if i not in axes)


class Sum(Reduction):
    """The sum of x over `axes`.

    Over an empty dim the sum is 0.
    """
    reduce_ufunc = np.add
    c_accumulate = "{acc} + {x}"
    c_start = "0"
    wide_accumulator = True


class Prod(Reduction):
    """The product of x over `axes`.

    Over an empty dim the product is 1.
    """
    reduce_ufunc = np.multiply
    c_accumulate = "{acc} * {x}"
    c_start = "1"
    wide_accumulator = True


# A NaN, once met, stays: it is kept once in the accumulator, and taken when met.
_KEEP_LARGER = "(({x} <= {acc} || {acc} != {acc}) ? {acc} : {x})"
_KEEP_SMALLER = "(({x} >= {acc} || {acc} != {acc}) ? {acc} : {x})"


class Max(Reduction):
    """The maximum of x over `axes`.

    A NaN among the values gives NaN. An empty dim has no maximum.

    Raises
    ------
    ExecutionError
        When the compiled function runs: a dim at `axes` is empty (0).
    """
    reduce_ufunc = np.maximum
    c_accumulate = _KEEP_LARGER
    c_start = "-INFINITY"
    idempotent = True


class Min(Reduction):
    """The minimum of x over `axes`.

    A NaN among the values gives NaN. An empty dim has no minimum.

    Raises
    ------
    ExecutionError
        When the compiled function runs: a dim at `axes` is empty (0).
    """
    reduce_ufunc = np.minimum
    c_accumulate = _KEEP_SMALLER
    c_start = "INFINITY"
    idempotent = True


class IndexReduction(Node):
    """The position of the extreme element of x over `axes` (ArgMax, ArgMin).

    With several axes the index counts row-major over those dims, in the order
    given, as if they were flattened into one. Ties go to the first.

    Parameters
    ----------
    x : Node
        The values: a numeric (not boolean) element type, any shape.
    axes : int or sequence of int
        At least one position of x's dims, each once, in the order they are
        flattened in.
    index_element_type : ElementType, str or numpy.dtype, optional
        The integer type of the result (default `core.i64`).

    Returns
    -------
    {op}
        A node of `index_element_type`; its shape is x's without the dims at `axes`.

    Raises
    ------
    DTypeError
        x is boolean, or `index_element_type` is not an integer type.
    ShapeError
        `axes` is empty or not distinct positions of x's dims.
    ExecutionError
        When the compiled function runs: a dim at `axes` is empty (0).
    """

    _attributes = ("axes", "index_element_type")
    _hidden = frozenset({"index_element_type"})

    def __init__(self, x: Node, axes, index_element_type=i64, name: Optional[str] = None):
        super().__init__((x,), {"axes": axes, "index_element_type": index_element_type}, name)

    def _normalize(self, attributes: dict) -> dict:
        (x,) = arity(self, 1)
        axes = positions(self, attributes["axes"], x.rank, ordered=True)
        if not axes:
            raise self._fail(ShapeError, "needs at least one axis")
        return {"axes": axes,
                "index_element_type": element_type_attr(self, attributes["index_element_type"])}

    def _infer(self) -> Tuple[ElementType, Shape]:
        (x,) = self.inputs
        require_kind(self, x, "numeric")
        et = self.attributes["index_element_type"]
        if not et.is_integral:
            raise self._fail(DTypeError, f"index element type must be an integer type, not {et}")
        axes = self.attributes["axes"]
        return et, Shape(d for i, d in enumerate(x.shape) if i not in axes)


class ArgMax(IndexReduction):
    """The index of the maximum of x over `axes`.

    The first of equal maxima wins.
    """


class ArgMin(IndexReduction):
    """The index of the minimum of x over `axes`.

    The first of equal minima wins.
    """


class Softmax(OverAxes):
    """exp(x) normalized to sum 1 over `axes`.

    Computed stably: the maximum over `axes` is subtracted before exp, so large
    values never overflow.

    Parameters
    ----------
    x : Node
        The values: a floating-point element type, any shape.
    axes : int or sequence of int
        At least one position of x's dims, each once: the values normalized
        together.

    Raises
    ------
    DTypeError
        x is not of a floating-point type.
    ShapeError
        `axes` is empty or not distinct positions of x's dims.
    """

    def _normalize(self, attributes: dict) -> dict:
        normalized = super()._normalize(attributes)
        if not normalized["axes"]:
            raise self._fail(ShapeError, "needs at least one axis")
        return normalized

    def _infer(self) -> Tuple[ElementType, Shape]:
        (x,) = self.inputs
        require_kind(self, x, "float")
        return x.element_type, x.shape


class LogSoftmax(Softmax):
    """log(softmax(x)) over `axes`, in the log domain: x - max - log(sum(exp(x - max))).

    No probability is rounded before its log is taken, so a log-probability far
    below log of the smallest float stays finite and exact.

    Parameters
    ----------
    x : Node
        The values: a floating-point element type, any shape.
    axes : int or sequence of int
        At least one position of x's dims, each once: the values normalized
        together.

    Raises
    ------
    DTypeError
        x is not of a floating-point type.
    ShapeError
        `axes` is empty or not distinct positions of x's dims.
    """


class SoftmaxBackprop(Node):
    """The gradient of x given dy, the gradient of y = Softmax(x, axes): y * (dy - sum(dy * y)).

    The sum runs over `axes`. One node, so that a backend can run the whole
    adjoint in one pass over each row.

    Parameters
    ----------
    dy : Node
        The gradient of y: a floating-point element type.
    y : Node
        The softmax's value: dy's element type and shape.
    axes : int or sequence of int
        At least one position of y's dims, each once: the softmax's axes.

    Returns
    -------
    {op}
        A node of y's element type and shape.

    Raises
    ------
    DTypeError
        dy and y differ in element type, or it is not a floating-point type.
    ShapeError
        dy and y differ in shape, or `axes` is empty or not distinct positions of y's dims.
    """

    _attributes = ("axes",)

    def __init__(self, dy: Node, y: Node, axes, name: Optional[str] = None):
        super().__init__((dy, y), {"axes": axes}, name)

    def _normalize(self, attributes: dict) -> dict:
        dy, y = arity(self, 2)
        axes = positions(self, attributes["axes"], y.rank)
        if not axes:
            raise self._fail(ShapeError, "needs at least one axis")
        return {"axes": axes}

    def _infer(self) -> Tuple[ElementType, Shape]:
        dy, y = self.inputs
        et = same_element_type(self, (dy, y))
        require_kind(self, y, "float")
        if dy.shape != y.shape:
            raise self._fail(ShapeError, f"dy {dy.type_str()} and y {y.type_str()} differ in "
                                         f"shape")
        return et, y.shape


class LogSoftmaxBackprop(SoftmaxBackprop):
    """The gradient of x given dy, the gradient of y = LogSoftmax(x, axes):
    dy - exp(y) * sum(dy).

    Parameters
    ----------
    dy : Node
        The gradient of y: a floating-point element type.
    y : Node
        The log-softmax's value: dy's element type and shape.
    axes : int or sequence of int
        At least one position of y's dims, each once: the log-softmax's axes.

    Returns
    -------
    {op}
        A node of y's element type and shape.

    Raises
    ------
    DTypeError
        dy and y differ in element type, or it is not a floating-point type.
    ShapeError
        dy and y differ in shape, or `axes` is empty or not distinct positions of y's dims.
    """
