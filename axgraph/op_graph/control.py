"""Ops run for their effect or their order: assign, SetItem, sequential, value_of.

An assign writes a stored tensor and records itself in that tensor's
``user_deps``: ops built afterwards that read the tensor run after it, and a
computation whose result is the tensor runs it (seed 001, as Nervana Graph
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
    """tensor[item] = value; has no value of its own (a computation returns None)."""

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
    """``SetItem(tensor, value)`` or ``SetItem(tensor, item, value)`` (seed 001)."""

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
    """Write `rvalue` into the stored tensor `lvalue` (broadcasting over its axes)."""
    return AssignOp(lvalue, rvalue, name=name)


def set_item(tensor, item, value, name: Optional[str] = None) -> AssignOp:
    """Write `value` into the region `item` (one int or slice per axis) of `tensor`."""
    return SetItem(tensor, item, value, name=name)


def sequential(ops: Sequence[Op], name: Optional[str] = None) -> Op:
    """Run `ops` in order (each after everything before it); value of the last."""
    return SequentialOp(ops, name=name)


def doall(ops: Sequence[Op], name: Optional[str] = None) -> Op:
    """Run `ops` in order for their effect (e.g. all of an optimizer's updates)."""
    return DoAllOp(ops, name=name)


def value_of(tensor, name: Optional[str] = None) -> Op:
    """The value `tensor` has when this op runs, kept even if it is assigned later."""
    return ValueOfOp(tensor, name=name)
