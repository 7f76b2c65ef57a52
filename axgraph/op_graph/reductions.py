"""Reductions over named axes (seed 000 'Axes Reduction').

``reduction_axes`` names the axes to reduce, in any order; ``out_axes`` names
the axes to keep (and their order) instead. An empty ``reduction_axes``
reduces nothing. With neither, every axis but the batch and recurrent ones is
reduced, neon's default: a loss keeps one value per example.
"""
from __future__ import annotations

from typing import Optional, Tuple

from ..axes import Axes, AxesLike, NameClash
from ..debug_info import user_location
from ..dtypes import INDEX_DTYPE, accumulator_dtype, as_dtype
from ..errors import IncompatibleAxesError, UnmatchedAxesError
from .op import Op
from .tensors import as_op, constant


def resolve_reduction_axes(x: Op, reduction_axes: AxesLike, out_axes: AxesLike,
                           what: str) -> Tuple[Axes, Axes]:
    """(reduction_axes, out_axes) from whichever of the two the user gave."""
    if reduction_axes is None and out_axes is None:
        reduction_axes = Axes(a for a in x.axes if not a.is_batch and not a.is_recurrent)
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


class Prod(Accumulation):
    """Product over the reduction axes."""


class Max(ReductionOp):
    """Largest value over the reduction axes."""


class Min(ReductionOp):
    """Smallest value over the reduction axes."""


class IndexReduction(ReductionOp):
    """A reduction giving an index (int32), flattened over the reduction axes in order."""

    def infer_dtype(self):
        return INDEX_DTYPE if self._asked_dtype is None else self._asked_dtype


class ArgMax(IndexReduction):
    """Index of the largest value over the reduction axes."""


class ArgMin(IndexReduction):
    """Index of the smallest value over the reduction axes."""


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


def sum(x, reduction_axes: AxesLike = None, out_axes: AxesLike = None, name=None, dtype=None) -> Op:
    """Sum of x over `reduction_axes` (or keeping `out_axes`)."""
    return Sum(x, reduction_axes, out_axes, name=name, dtype=dtype)


def prod(x, reduction_axes: AxesLike = None, out_axes: AxesLike = None, name=None, dtype=None) -> Op:
    """Product of x over `reduction_axes` (or keeping `out_axes`)."""
    return Prod(x, reduction_axes, out_axes, name=name, dtype=dtype)


def max(x, reduction_axes: AxesLike = None, out_axes: AxesLike = None, name=None, dtype=None) -> Op:
    """Largest value of x over `reduction_axes` (or keeping `out_axes`)."""
    return Max(x, reduction_axes, out_axes, name=name, dtype=dtype)


def min(x, reduction_axes: AxesLike = None, out_axes: AxesLike = None, name=None, dtype=None) -> Op:
    """Smallest value of x over `reduction_axes` (or keeping `out_axes`)."""
    return Min(x, reduction_axes, out_axes, name=name, dtype=dtype)


def argmax(x, reduction_axes: AxesLike = None, out_axes: AxesLike = None, name=None, dtype=None) -> Op:
    """Index (int32) of the largest value over `reduction_axes`."""
    return ArgMax(x, reduction_axes, out_axes, name=name, dtype=dtype)


def argmin(x, reduction_axes: AxesLike = None, out_axes: AxesLike = None, name=None, dtype=None) -> Op:
    """Index (int32) of the smallest value over `reduction_axes`."""
    return ArgMin(x, reduction_axes, out_axes, name=name, dtype=dtype)


def tensor_size(x, reduction_axes: AxesLike = None, out_axes: AxesLike = None, name=None,
                dtype=None) -> Op:
    """Number of elements of x along `reduction_axes` (Nervana Graph v0.4).

    Parameters
    ----------
    x : Op
        The tensor measured.
    reduction_axes, out_axes : Axes, optional
        The axes counted, or those not counted. With neither, the size of one example:
        the product of x's non-batch axes, as v0.4 counted it (its walk-throughs divide a
        batch-summed gradient by it).
    name : str, optional
        The result's name.
    dtype : optional
        The result's element type (default float32).

    Returns
    -------
    Op
        A scalar: a constant when every counted axis has a length now (computing it
        needs nothing fed, as in v0.4), else an op evaluated after x, whose call binds
        the lengths.
    """
    x = as_op(x)
    if reduction_axes is None and out_axes is None:
        size_axes = x.axes.sample_axes()
    else:
        size_axes, _ = resolve_reduction_axes(x, reduction_axes, out_axes, "tensor_size")
    return _size(size_axes, x, name, dtype)


def batch_size(x, name=None, dtype=None) -> Op:
    """Number of examples in x: the product of its batch axes' lengths.

    Parameters
    ----------
    x : Op
        The tensor measured.
    name : str, optional
        The result's name.
    dtype : optional
        The result's element type (default float32).

    Returns
    -------
    Op
        A scalar: a constant when the batch axes have lengths now, else an op
        evaluated after x.
    """
    x = as_op(x)
    return _size(x.axes.batch_axes(), x, name, dtype)


def _size(size_axes: Axes, x: Op, name, dtype) -> Op:
    """A constant for a size known now: an axis length, once set, never changes."""
    size = size_axes.size
    if isinstance(size, int):
        return constant(size, dtype=as_dtype(dtype), name=name)
    return TensorSize(size_axes, name=name, dtype=dtype, of=x)


def mean(x, reduction_axes: AxesLike = None, out_axes: AxesLike = None, name=None) -> Op:
    """Arithmetic mean of x over `reduction_axes` (or keeping `out_axes`).

    The sum divided by the count, so bools and integers give float32 (dtypes.py).
    """
    x = as_op(x)
    reduction_axes, out_axes = resolve_reduction_axes(x, reduction_axes, out_axes, "mean")
    total = Sum(x, reduction_axes, out_axes)
    result = total / TensorSize(reduction_axes, dtype=total.dtype, of=x)
    if name is not None:
        result.name = name
    return result


def variance(x, reduction_axes: AxesLike = None, out_axes: AxesLike = None, name=None) -> Op:
    """Population variance of x over `reduction_axes`: mean((x - mean(x))**2)."""
    x = as_op(x)
    reduction_axes, out_axes = resolve_reduction_axes(x, reduction_axes, out_axes, "variance")
    centered = x - mean(x, reduction_axes, out_axes)
    return mean(centered * centered, reduction_axes, out_axes, name=name)
