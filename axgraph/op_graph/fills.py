"""Whole-tensor writes of Nervana Graph v0.4: `fill` with a scalar, `init_tensor` from
a host function, and the refill behind `ng.uniform(tensor)` / `ng.normal(tensor)`.

Each is an assign (control.AssignOp) and so ordered like one: it
records itself on the tensor it writes, and ops built later that read the
tensor run after it.
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from ..debug_info import user_location
from ..dtypes import kind_of
from ..errors import DTypeError, GraphError
from .control import AssignOp, SequentialOp
from .op import Op
from .tensors import AssignableTensorOp, as_op


class Fill(AssignOp):
    """Every element of a stored tensor set to one scalar; has no value (like assign)."""

    def __init__(self, tensor, scalar, name: Optional[str] = None):
        tensor = as_op(tensor)
        if getattr(tensor, "constant", False):
            raise GraphError(f"fill: {tensor.name} {tensor.axes} is a constant",
                             user_location())
        super().__init__(tensor, _scalar_value(tensor, scalar), name=name)

    @property
    def scalar(self):
        """The number written, in the tensor's dtype."""
        return np.asarray(self.value.const, dtype=self.tensor.dtype)[()]


def _scalar_value(tensor: Op, scalar):
    """`scalar` if it is a number or a constant op without axes; else a clear error."""
    if isinstance(scalar, Op):
        if getattr(scalar, "constant", False) and not scalar.axes:
            return scalar
        raise GraphError(f"fill {tensor.name}: {scalar.name} {scalar.axes} is not a constant "
                         f"scalar; fill writes one number (use ng.assign for a computed value)",
                         user_location())
    array = np.asarray(scalar)
    if kind_of(array.dtype) not in "biuf":
        raise DTypeError(f"fill {tensor.name}: {scalar!r:.60} is not a number", user_location())
    if array.ndim:
        raise GraphError(f"fill {tensor.name}: a scalar is needed, not an array of shape "
                         f"{array.shape} (use ng.assign with ng.constant for an array)",
                         user_location())
    return array.item()


def fill(tensor, scalar, name: Optional[str] = None) -> Fill:
    """Set every element of the stored tensor `tensor` to the number `scalar`.

    An assign (see `assign`): it runs before ops built afterwards that read
    the tensor, and a computation of the tensor runs it.

    Parameters
    ----------
    tensor : Op
        The stored tensor written: a variable, persistent tensor or placeholder.
    scalar : number or Op
        The value: a number, or a constant without axes.
    name : str, optional
        A name for printing (automatic if None).

    Returns
    -------
    Fill
        The assign; it has no value.

    Raises
    ------
    GraphError
        If `tensor` is a constant or not a stored tensor, or `scalar` is an
        array or an op other than a constant scalar.
    DTypeError
        If `scalar` is not a number.
    """
    return Fill(tensor, scalar, name=name)


class InitTensorOp(SequentialOp):
    """Writes `valfun(tensor)`, an array made on the host, into `tensor`; its value is the
    tensor's new value (Nervana Graph v0.4 InitTensorOp).

    `valfun` is called when the value is first needed (when the computation
    running this op is built or first run), with the tensor; it returns an
    array in the tensor's axis order, or a number to fill it with.
    """

    attributes = ("valfun",)
    valfun: Callable

    def __init__(self, tensor, valfun: Callable, name: Optional[str] = None):
        tensor = as_op(tensor)
        if not callable(valfun):
            raise GraphError(f"init_tensor {tensor.name}: valfun must be a function of the "
                             f"tensor returning its value, not {valfun!r:.60}", user_location())
        host_value = AssignableTensorOp(tensor.axes, dtype=tensor.dtype, constant=True,
                                        initial_value=lambda axes: valfun(tensor),
                                        name=f"{tensor.name}_host_value")
        Op.__init__(self, AssignOp(tensor, host_value), tensor, valfun=valfun, name=name)


def init_tensor(tensor, valfun: Callable, name: Optional[str] = None) -> InitTensorOp:
    """Write `valfun(tensor)`, an array made on the host by Python code, into `tensor`.

    For values no op computes (read from a file, made by another library).
    `valfun` is called with the tensor when the value is first needed (when
    a computation running this op is built or first run) and returns an
    array in the tensor's axis order, or a number to fill it with.

    Parameters
    ----------
    tensor : Op
        The stored tensor written: a variable, persistent tensor or placeholder.
    valfun : callable
        ``valfun(tensor) -> array or number``.
    name : str, optional
        A name for printing (automatic if None).

    Returns
    -------
    InitTensorOp
        An op whose value is the tensor's new value.

    Raises
    ------
    GraphError
        If `valfun` is not callable, or `tensor` is a constant or not a stored tensor.
    """
    return InitTensorOp(tensor, valfun, name=name)


def refill(tensor: Op, draw: Op, name: Optional[str] = None) -> Op:
    """`draw` written into `tensor` when that is a stored, writable tensor, with the
    tensor's new value as value; otherwise `draw` alone (Nervana Graph v0.4's
    `uniform(x)` / `normal(x)` took the axes of any op)."""
    if kind_of(draw.dtype) != "f":
        raise DTypeError(f"random draws are floating-point; {tensor.name} holds "
                         f"{tensor.dtype}", user_location())
    if not tensor.is_assignable or getattr(tensor, "constant", False):
        if name is not None:
            draw.name = name
        return draw
    return SequentialOp([AssignOp(tensor, draw), tensor], name=name)
