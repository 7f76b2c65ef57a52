"""Ops run for their effect or their order: assign, SetItem, sequential, value_of.

An assign writes a stored tensor and records itself in that tensor's
``user_deps``: ops built afterwards that read the tensor run after it, and a
computation whose result is the tensor runs it (as Nervana Graph
v0.4 defines it). Inside ``with ng.Op.saved_user_deps():`` the record stays
in that block, so the assign runs only when a computation names it.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

from ..axes import Axes
from ..debug_info import user_location
from ..errors import GraphError, IncompatibleAxesError
from ..ordered_set import OrderedSet
from .op import Op
from .shape_ops import _normalized_slices
from .tensors import as_op

_MISSING = object()


class AssignOp(Op):
    """``tensor[item] = value``: writes a stored tensor; has no value of its own.

    An assign is ordered by what reads the tensor: it records itself in the
    tensor's ``user_deps``, so ops built afterwards that read the tensor run
    after it, and a computation of the tensor runs it. A computation whose
    result is the assign itself returns None. Use `assign` or `set_item`.

    Parameters
    ----------
    tensor : Op
        The stored tensor written (a variable, persistent tensor or placeholder).
    value : Op or number
        The value written, broadcast over the tensor's axes it lacks.
    item : int, slice or tuple of them, optional
        The region written, one int or slice per axis in the tensor's order
        (None: all of it).
    name : str, optional
        A name for printing (automatic if None).

    Raises
    ------
    GraphError
        If `tensor` is not a stored tensor, or is a constant.
    IncompatibleAxesError
        If `value` has axes the tensor lacks, or `item` does not fit its axes.
    axgraph.errors.AxgraphIndexError
        If an index in `item` is not an int (or a slice of ints), or a step is 0.
    AxgraphTypeError
        If `tensor` or `value` is not an op or a number.
    """

    is_tensor_op = False
    lvalue_args = 1
    attributes = ("item",)
    item: Optional[Tuple]

    def __init__(self, tensor, value, item=None, name: Optional[str] = None):
        super().__init__(as_op(tensor), as_op(value), item=item, name=name)

    def infer_axes(self) -> Axes:
        tensor, value = self.args
        if not tensor.is_assignable:
            raise GraphError(f"assign: {tensor.name} is not a stored tensor; only constants, "
                             f"placeholders, variables and persistent tensors can be assigned",
                             user_location())
        if getattr(tensor, "constant", False):
            raise GraphError(f"assign: {tensor.name} is a constant", user_location())
        if self.item is not None:
            self.item = _normalized_slices(tensor, self.item)
        else:
            extra = value.axes - tensor.axes
            if extra:
                raise IncompatibleAxesError(
                    f"assign to {tensor.name} {tensor.axes}: value {value.name} has axes {extra} "
                    f"that the tensor lacks", user_location())
        return Axes()

    def _finish(self) -> None:
        self.tensor.user_deps = OrderedSet([self])

    @property
    def tensor(self) -> Op:
        """The stored tensor written."""
        return self.args[0]

    @property
    def value(self) -> Op:  # type: ignore[override]  # an assign has no value of its own
        """The op whose value is written."""
        return self.args[1]


class SetItem(AssignOp):
    """``tensor[item] = value`` (``w[...] = v`` builds one): an assign to a region.

    Called as ``SetItem(tensor, value)`` it writes the whole tensor, as
    ``SetItem(tensor, item, value)`` the region `item`; it is ordered like
    every assign (see `AssignOp`).

    Parameters
    ----------
    tensor : Op
        The stored tensor written.
    item : int, slice, tuple of them, or Op
        The region, one int or slice per axis in the tensor's order; or, when
        `value` is left out, the value written to the whole tensor.
    value : Op or number, optional
        The value written, broadcast over the region's axes it lacks.
    name : str, optional
        A name for printing (automatic if None).

    Raises
    ------
    GraphError
        If `tensor` is not a stored tensor, or is a constant.
    IncompatibleAxesError
        If `item` does not fit the tensor's axes, or a whole-tensor value has
        axes the tensor lacks.
    axgraph.errors.AxgraphIndexError
        If an index in `item` is not an int (or a slice of ints), or a step is 0.
    """

    def __init__(self, tensor, item, value=_MISSING, name: Optional[str] = None):
        if value is _MISSING:
            item, value = None, item
        super().__init__(tensor, value, item=item, name=name)


class SequentialOp(Op):
    """Runs `ops` one after another; its value is the last op's value."""

    dtype_of_arg = -1

    def __init__(self, ops: Sequence[Op], name: Optional[str] = None):
        super().__init__(*(as_op(op) for op in ops), name=name)

    def infer_axes(self) -> Axes:
        if not self.args:
            raise GraphError("sequential needs at least one op", user_location())
        last = self.args[-1]
        if not last.is_tensor_op:
            raise GraphError(f"sequential: the last op {last.name} has no value to return",
                             user_location())
        return last.axes


class DoAllOp(Op):
    """Runs `ops` one after another, like sequential, and has no value."""

    is_tensor_op = False

    def __init__(self, ops: Sequence[Op], name: Optional[str] = None):
        super().__init__(*(as_op(op) for op in ops), name=name)


class ValueOfOp(Op):
    """A copy of a tensor's value at this point of the schedule."""

    dtype_of_arg = 0

    def __init__(self, tensor, name: Optional[str] = None):
        super().__init__(as_op(tensor), name=name)

    def infer_axes(self) -> Axes:
        return self.args[0].axes


def assign(lvalue, rvalue, name: Optional[str] = None) -> AssignOp:
    """Write `rvalue` into the stored tensor `lvalue`, broadcast over its axes.

    The assign runs before any op built afterwards that reads `lvalue`, and
    a computation whose result is `lvalue` runs it; nothing else orders it.
    Inside ``with ng.Op.saved_user_deps():`` it runs only when a computation
    names it (an optimizer's updates).

    Parameters
    ----------
    lvalue : Op
        The stored tensor written: a variable, persistent tensor or placeholder.
    rvalue : Op or number
        The value; its axes must be among `lvalue`'s.
    name : str, optional
        A name for printing (automatic if None).

    Returns
    -------
    AssignOp
        The assign; it has no value (a computation of it returns None).

    Raises
    ------
    GraphError
        If `lvalue` is not a stored tensor, or is a constant.
    IncompatibleAxesError
        If `rvalue` has axes that `lvalue` lacks.
    AxgraphTypeError
        If an operand is not an op or a number.

    Examples
    --------
    >>> import axgraph as ng
    >>> C = ng.make_axis(length=2, name="C")
    >>> w = ng.variable([C], initial_value=1.0)
    >>> update = ng.assign(w, w * 3)
    >>> with ng.make_transformer() as t:
    ...     read_w = t.computation(w)   # runs w's pending update, then reads w
    ...     print(read_w(), read_w())
    [3. 3.] [9. 9.]
    """
    return AssignOp(lvalue, rvalue, name=name)


def set_item(tensor, item, value, name: Optional[str] = None) -> AssignOp:
    """Write `value` into the region `item` of the stored tensor `tensor`.

    ``w[item] = value`` does the same; the assign is ordered like `assign`'s.

    Parameters
    ----------
    tensor : Op
        The stored tensor written.
    item : int, slice or tuple of them
        The region: one int or slice per axis, in the tensor's axis order
        (``...`` stands for the axes not listed).
    value : Op or number
        The value written, broadcast over the region's axes.
    name : str, optional
        A name for printing (automatic if None).

    Returns
    -------
    AssignOp
        The assign (a SetItem); it has no value.

    Raises
    ------
    GraphError
        If `tensor` is not a stored tensor, or is a constant.
    IncompatibleAxesError
        If `item` has more entries than the tensor has axes, or an index is
        out of range.
    axgraph.errors.AxgraphIndexError
        If an index is not an int (or a slice of ints), or a step is 0.
    """
    return SetItem(tensor, item, value, name=name)


def sequential(ops: Sequence[Op], name: Optional[str] = None) -> Op:
    """Run `ops` in order, each after everything before it; the value is the last op's.

    Graph ops run in any order their args allow; this fixes one, for effects
    that must happen in sequence (an update, then a read of what it wrote).
    What a step needs runs after the steps before it when its place can be
    seen: effects (assigns, prints) and reads of tensors the computation
    writes. Ops whose value is the same wherever they run (placeholders,
    constants, what is computed from them alone) stay free, so sequentials
    that share them never order them against each other.

    Parameters
    ----------
    ops : sequence of Op
        The ops to run, in order; the last must have a value.
    name : str, optional
        A name for printing (automatic if None).

    Returns
    -------
    Op
        An op whose value is the last op's, with its axes and element type.

    Raises
    ------
    GraphError
        If `ops` is empty or the last op has no value (an assign).

    Examples
    --------
    >>> import axgraph as ng
    >>> C = ng.make_axis(length=2, name="C")
    >>> w = ng.variable([C], initial_value=0.0)
    >>> step = ng.sequential([ng.assign(w, w + 1), w])
    >>> with ng.make_transformer() as t:
    ...     f = t.computation(step)
    ...     print(f(), f())
    [1. 1.] [2. 2.]
    """
    return SequentialOp(ops, name=name)


def doall(ops: Sequence[Op], name: Optional[str] = None) -> Op:
    """Run `ops` in order for their effect (all of an optimizer's updates, say).

    Parameters
    ----------
    ops : sequence of Op
        The ops to run, in order.
    name : str, optional
        A name for printing (automatic if None).

    Returns
    -------
    Op
        An op without a value: a computation of it runs `ops` and returns None.
    """
    return DoAllOp(ops, name=name)


def value_of(tensor, name: Optional[str] = None) -> Op:
    """The value `tensor` has when this op runs, kept even if it is assigned later.

    Reading a stored tensor gives its value at the time of the read; this
    copies it, so that, inside a `sequential`, the old value survives an
    assign that follows.

    Parameters
    ----------
    tensor : Op or number
        The value copied, usually a stored tensor.
    name : str, optional
        A name for printing (automatic if None).

    Returns
    -------
    Op
        A copy with `tensor`'s axes and element type.

    Raises
    ------
    AxgraphTypeError
        If `tensor` is not an op or a number.
    """
    return ValueOfOp(tensor, name=name)
