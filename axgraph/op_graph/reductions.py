"""Reductions over named axes (any number of reduction axes, in any order).

``reduction_axes`` names the axes to reduce, in any order; ``out_axes`` names
the axes to keep (and their order) instead. An empty ``reduction_axes``
reduces nothing. With neither, every axis but the batch and recurrent ones is
reduced, neon's default: a loss keeps one value per example.

Each reduction names the core op it lowers to (`core_op`), and for a result
of booleans the core op computing it on booleans as 0 and 1
(`logical_core_op`: a sum is whether any is true): the lowering reads both.
"""
from __future__ import annotations

import textwrap
from typing import ClassVar, Optional, Tuple

from ..axes import Axes, AxesLike, NameClash
from ..core.ops import reduction as core_reduction
from ..debug_info import user_location
from ..dtypes import INDEX_DTYPE, accumulator_dtype, as_dtype
from ..errors import IncompatibleAxesError, UnmatchedAxesError
from .op import Op
from .tensors import as_op, constant


def resolve_reduction_axes(x: Op, reduction_axes: AxesLike, out_axes: AxesLike,
                           what: str) -> Tuple[Axes, Axes]:
    """(reduction_axes, out_axes) from whichever of the two the user gave.

    Given neither, every axis that is neither batch nor recurrent is reduced (v0.4's rule,
    read from the axes' flags): all of them for a tensor without such axes (``ng.sum(x)``
    is the total), one value per example and time step otherwise. A sequence axis made
    with ``recurrent=True`` is kept like the batch axis.
    """
    if reduction_axes is None and out_axes is None:
        reduction_axes = x.axes.feature_axes()
        return reduction_axes, x.axes - reduction_axes
    if reduction_axes is not None:
        reduction_axes = Axes(reduction_axes)
        _check_subset(x, reduction_axes, what, "reduction_axes")
    if out_axes is not None:
        out_axes = Axes(out_axes)
        _check_subset(x, out_axes, what, "out_axes")
    if reduction_axes is None:
        assert out_axes is not None  # neither given was handled first
        return x.axes - out_axes, out_axes
    if out_axes is None:
        return reduction_axes, x.axes - reduction_axes
    if not (reduction_axes + out_axes).is_equal_set(x.axes):
        raise IncompatibleAxesError(
            f"{what}: reduction_axes {reduction_axes} and out_axes {out_axes} must split "
            f"the axes {x.axes} of {x.name} between them",
            user_location(),
        )
    return reduction_axes, out_axes


def _check_subset(x: Op, axes: Axes, what: str, argument: str) -> None:
    missing = axes - x.axes
    if not missing:
        return
    message = f"{what}: {argument} {missing} are not axes of {x.name} {x.axes}"
    clashes = NameClash.between(x.axes, missing)
    if clashes:
        own = " + ".join(f"{x.name}.axes.find_by_name({c.ours.name!r})" for c in clashes)
        message += (f": {x.name}'s axis and the one asked for are {NameClash.describe(clashes)}, "
                    f"and axes pair by identity, not by name. Pass {x.name}'s own axis "
                    f"({argument}={own}, or the axis object {x.name} was made with); if the two "
                    f"are the same dimension made twice, make it once and share it, or relabel "
                    f"with ng.cast_axes")
    raise UnmatchedAxesError(message, user_location())


class ReductionOp(Op):
    """Reduces `reduction_axes` of x; the result has `out_axes` (either may be given; both
    are held, resolved, once the op is built)."""

    attributes = ("reduction_axes", "out_axes")
    reduction_axes: Axes
    out_axes: Axes
    dtype_of_arg = 0
    #: The core op it lowers to, over its arg's positions (None: a rule of its own).
    core_op: ClassVar[Optional[type]] = None
    #: The core op it is on booleans, as 0 and 1, where the result is boolean too.
    logical_core_op: ClassVar[Optional[type]] = None

    def __init__(self, x, reduction_axes: AxesLike = None, out_axes: AxesLike = None,
                 name: Optional[str] = None, dtype=None):
        super().__init__(as_op(x), reduction_axes=reduction_axes, out_axes=out_axes, dtype=dtype,
                         name=name)

    def infer_axes(self) -> Axes:
        self.reduction_axes, self.out_axes = resolve_reduction_axes(
            self.args[0], self.reduction_axes, self.out_axes, type(self).__name__)
        return self.out_axes


class Accumulation(ReductionOp):
    """A sum or product: bools and narrow integers accumulate in 64 bits, as np.sum does."""

    def infer_dtype(self):
        asked = self._asked_dtype
        return accumulator_dtype(self.args[0].dtype) if asked is None else asked


class Sum(Accumulation):
    """Sum over the reduction axes (of booleans: how many are true)."""

    core_op = core_reduction.Sum
    logical_core_op = core_reduction.Max  # to a boolean: whether any is true


class Prod(Accumulation):
    """Product over the reduction axes."""

    core_op = core_reduction.Prod
    logical_core_op = core_reduction.Min  # to a boolean: whether all are true


class Max(ReductionOp):
    """Largest value over the reduction axes."""

    core_op = logical_core_op = core_reduction.Max


class Min(ReductionOp):
    """Smallest value over the reduction axes."""

    core_op = logical_core_op = core_reduction.Min


class IndexReduction(ReductionOp):
    """A reduction giving an index (int32), flattened over the reduction axes in order."""

    def infer_dtype(self):
        return INDEX_DTYPE if self._asked_dtype is None else self._asked_dtype


class ArgMax(IndexReduction):
    """Index of the largest value over the reduction axes."""

    core_op = core_reduction.ArgMax


class ArgMin(IndexReduction):
    """Index of the smallest value over the reduction axes."""

    core_op = core_reduction.ArgMin


class TensorSize(Op):
    """The number of elements along `size_axes` (a scalar, known at run time).

    `of`, the tensor measured, runs first: a length only its computation binds
    (a concat along an axis without a length) is known from then on.
    """

    attributes = ("size_axes",)
    size_axes: Axes

    def __init__(self, size_axes: Axes, name: Optional[str] = None, dtype=None,
                 of: Optional[Op] = None):
        super().__init__(size_axes=size_axes, dtype=dtype, name=name)
        if of is not None:
            self.other_deps.add(of)

    def infer_axes(self) -> Axes:
        self.size_axes = Axes(self.size_axes)
        return Axes()


_AXES_PARAMETERS = """    x : Op or number
        The tensor reduced.
    reduction_axes : Axes, Axis or iterable of Axis, optional
        The axes reduced, in any order (an empty list reduces nothing).
    out_axes : Axes, Axis or iterable of Axis, optional
        The axes kept, in the result's order, instead of naming those reduced.
        With neither, every axis but the batch and recurrent ones is reduced.
    name : str, optional
        A name for the result (automatic if None).
"""
_AXES_RAISES = """    Raises
    ------
    UnmatchedAxesError
        If `reduction_axes` or `out_axes` holds an axis that x lacks.
    IncompatibleAxesError, DuplicateAxisError
        If both are given and they leave out an axis of x, or share one.
    AxgraphTypeError
        If `x` is not an op or a number, or the axes are not Axis objects.
"""


#: The `dtype` of the reductions that add or multiply (they widen small integers as NumPy does).
_ACCUMULATING_DTYPE = ("The type to accumulate in and return; None: x's type, with bools and "
                       "integers narrower than 64 bits widened to int64 (uint64), as np.sum does.")


def _reduction_docs(returns: str, dtype: Optional[str] = None):
    """Complete a reduction function's docstring with the parameters, result and errors every
    reduction over named axes shares, written once here (the function keeps its summary, what
    is particular to it, and its examples)."""
    def complete(function):
        summary, _, examples = function.__doc__.partition("\n\n    Examples\n")
        dtype_entry = ("    dtype : dtype-like, optional\n" + textwrap.fill(
            dtype, 88, initial_indent=" " * 8, subsequent_indent=" " * 8) + "\n") if dtype else ""
        returns_entry = textwrap.fill(returns, 88, initial_indent=" " * 8,
                                      subsequent_indent=" " * 8)
        function.__doc__ = (summary.rstrip() + "\n\n    Parameters\n    ----------\n"
                            + _AXES_PARAMETERS + dtype_entry
                            + "\n    Returns\n    -------\n    Op\n" + returns_entry + "\n\n"
                            + _AXES_RAISES
                            + ("\n    Examples\n" + examples if examples else "    "))
        return function
    return complete


@_reduction_docs(returns="The sums, with the axes kept.",
                 dtype=_ACCUMULATING_DTYPE)
def sum(x, reduction_axes: AxesLike = None, out_axes: AxesLike = None, name=None, dtype=None) -> Op:
    """The sum of x over `reduction_axes` (or over all axes but `out_axes`).

    Axes are named, so a reduction says which dimensions it removes rather
    than where they are; the defaults keep one value per example. The sum of
    booleans counts the true ones.

    Examples
    --------
    >>> import numpy as np
    >>> import axgraph as ng
    >>> C, N = ng.make_axis(length=2, name="C"), ng.make_axis(length=3, name="N")
    >>> x = ng.constant(np.arange(6.0).reshape(2, 3), axes=[C, N])
    >>> ng.sum(x).axes                      # N is the batch axis: kept by default
    Axes(N: 3)
    >>> with ng.make_transformer() as t:
    ...     print(t.computation(ng.sum(x, reduction_axes=[N]))())
    [ 3. 12.]
    """
    return Sum(x, reduction_axes, out_axes, name=name, dtype=dtype)


@_reduction_docs(returns="The products, with the axes kept.",
                 dtype=_ACCUMULATING_DTYPE)
def prod(x, reduction_axes: AxesLike = None, out_axes: AxesLike = None, name=None, dtype=None) -> Op:
    """The product of x over `reduction_axes` (or over all axes but `out_axes`).

    The product of booleans is their logical and, as an integer.
    """
    return Prod(x, reduction_axes, out_axes, name=name, dtype=dtype)


@_reduction_docs(returns="The maxima, with the axes kept.",
                 dtype="The result's element type; None: x's.")
def max(x, reduction_axes: AxesLike = None, out_axes: AxesLike = None, name=None, dtype=None) -> Op:
    """The largest value of x over `reduction_axes` (or over all axes but `out_axes`).

    NaN propagates, as in np.max; booleans give their logical or (any).
    """
    return Max(x, reduction_axes, out_axes, name=name, dtype=dtype)


@_reduction_docs(returns="The minima, with the axes kept.",
                 dtype="The result's element type; None: x's.")
def min(x, reduction_axes: AxesLike = None, out_axes: AxesLike = None, name=None, dtype=None) -> Op:
    """The smallest value of x over `reduction_axes` (or over all axes but `out_axes`).

    NaN propagates, as in np.min; booleans give their logical and (all).
    """
    return Min(x, reduction_axes, out_axes, name=name, dtype=dtype)


@_reduction_docs(returns="The indices, with the axes kept.",
                 dtype="The index type; None: int32.")
def argmax(x, reduction_axes: AxesLike = None, out_axes: AxesLike = None, name=None, dtype=None) -> Op:
    """The position of the largest value of x over `reduction_axes` (a classifier's guess).

    Over several reduction axes the position counts through them in order,
    as if flattened (the first of equal values wins). No gradient flows
    through it.
    """
    return ArgMax(x, reduction_axes, out_axes, name=name, dtype=dtype)


@_reduction_docs(returns="The indices, with the axes kept.",
                 dtype="The index type; None: int32.")
def argmin(x, reduction_axes: AxesLike = None, out_axes: AxesLike = None, name=None, dtype=None) -> Op:
    """The position of the smallest value of x over `reduction_axes`.

    Over several reduction axes the position counts through them in order,
    as if flattened (the first of equal values wins). No gradient flows
    through it.
    """
    return ArgMin(x, reduction_axes, out_axes, name=name, dtype=dtype)


def tensor_size(x, reduction_axes: AxesLike = None, out_axes: AxesLike = None, name=None,
                dtype=None) -> Op:
    """The number of elements of x along `reduction_axes`, as a scalar.

    With neither `reduction_axes` nor `out_axes`, the size of one example: the
    product of x's non-batch axes, as Nervana Graph v0.4 counted it (its
    walk-throughs divide a batch-summed gradient by it). A constant when the
    lengths are known; an op when a length comes from fed data.

    Parameters
    ----------
    x : Op or number
        The tensor measured.
    reduction_axes : Axes, Axis or iterable of Axis, optional
        The axes counted, in any order.
    out_axes : Axes, Axis or iterable of Axis, optional
        The axes not counted, instead of naming those counted.
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The result's element type; None: float32.

    Returns
    -------
    Op
        A scalar: a constant when every counted axis has a length now (computing it
        needs nothing fed, as in v0.4), else an op evaluated after x, whose call binds
        the lengths.

    Raises
    ------
    UnmatchedAxesError
        If `reduction_axes` or `out_axes` holds an axis that x lacks.
    IncompatibleAxesError, DuplicateAxisError
        If both are given and they leave out an axis of x, or share one.
    AxgraphTypeError
        If `x` is not an op or a number, or the axes are not Axis objects.
    """
    x = as_op(x)
    if reduction_axes is None and out_axes is None:
        size_axes = x.axes.sample_axes()
    else:
        size_axes, _ = resolve_reduction_axes(x, reduction_axes, out_axes, "tensor_size")
    return _size(size_axes, x, name, dtype)


def batch_size(x, name=None, dtype=None) -> Op:
    """The number of examples in x: the product of its batch axes' lengths.

    A constant when the batch axes have lengths; an op when the batch length
    comes from fed data, so a mean over a minibatch stays right.

    Parameters
    ----------
    x : Op or number
        The tensor measured.
    name : str, optional
        A name for the result (automatic if None).
    dtype : dtype-like, optional
        The result's element type; None: float32.

    Returns
    -------
    Op
        A scalar: the batch size (1 if x has no batch axis): a constant when the
        batch axes have lengths now, else an op evaluated after x.

    Raises
    ------
    AxgraphTypeError
        If `x` is not an op or a number.
    """
    x = as_op(x)
    return _size(x.axes.batch_axes(), x, name, dtype)


def _size(size_axes: Axes, x: Op, name, dtype) -> Op:
    """A constant for a size known now: an axis length, once set, never changes."""
    size = size_axes.size
    if isinstance(size, int):
        return constant(size, dtype=as_dtype(dtype), name=name)
    return TensorSize(size_axes, name=name, dtype=dtype, of=x)


@_reduction_docs(returns="The means, with the axes kept.")
def mean(x, reduction_axes: AxesLike = None, out_axes: AxesLike = None, name=None) -> Op:
    """The arithmetic mean of x over `reduction_axes` (or over all axes but `out_axes`).

    The sum divided by the count, so bools and integers give float32; the
    count is an op, right also for lengths known only from fed data.
    """
    x = as_op(x)
    reduction_axes, out_axes = resolve_reduction_axes(x, reduction_axes, out_axes, "mean")
    total = Sum(x, reduction_axes, out_axes)
    result = total / TensorSize(reduction_axes, dtype=total.dtype, of=x)
    if name is not None:
        result.name = name
    return result


@_reduction_docs(returns="The variances, with the axes kept.")
def variance(x, reduction_axes: AxesLike = None, out_axes: AxesLike = None, name=None) -> Op:
    """The population variance of x over `reduction_axes`: mean((x - mean(x))**2).

    Computed from the centered values rather than as mean(x**2) - mean(x)**2,
    which cancels catastrophically in float32.
    """
    x = as_op(x)
    reduction_axes, out_axes = resolve_reduction_axes(x, reduction_axes, out_axes, "variance")
    centered = x - mean(x, reduction_axes, out_axes)
    return mean(centered * centered, reduction_axes, out_axes, name=name)
