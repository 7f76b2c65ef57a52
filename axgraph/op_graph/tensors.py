"""Stored tensors: constants, placeholders, persistent tensors, variables.

The four kinds differ only in the flags of seed 003's table:

=====================  ========  ==========  =========  =====
function               constant  persistent  trainable  input
=====================  ========  ==========  =========  =====
ng.constant            True      True        False      False
ng.placeholder         False     True        False      True
ng.persistent_tensor   False     True        False      False
ng.variable            False     True        True       False
ng.temporary           False     False       False      False
=====================  ========  ==========  =========  =====
"""
from __future__ import annotations

import inspect
from typing import Callable, Optional, Union

import numpy as np

from ..axes import Axes, AxesLike, make_axis
from ..dtypes import cast
from ..errors import AxisLengthError, DTypeError, GraphError
from .op import Op

InitialValue = Union[None, int, float, bool, np.ndarray, Callable[[Axes], object]]


class AssignableTensorOp(Op):
    """An l-tensor: a stored value that assigns may overwrite (unless constant)."""

    is_assignable = True
    #: True for a Python scalar's constant, which takes the dtype of what it meets
    weak_dtype = False

    def __init__(
        self,
        axes: AxesLike = None,
        dtype=None,
        initial_value: InitialValue = None,
        constant: bool = False,
        persistent: bool = True,
        trainable: bool = False,
        input: bool = False,
        name: Optional[str] = None,
        metadata: Optional[dict] = None,
    ):
        self.constant = constant
        self.persistent = persistent
        self.trainable = trainable
        self.input = input
        super().__init__(axes=axes, dtype=dtype, name=name, metadata=metadata)
        self.initial_value = _checked_initial_value(self, initial_value)
        if initial_value is not None:
            self.initializers.add(InitializeOp(self))

    def _name_prefix(self) -> str:
        if self.constant:
            return "constant"
        if self.input:
            return "placeholder"
        if self.trainable:
            return "variable"
        return "persistent" if self.persistent else "temporary"

    @property
    def is_placeholder(self) -> bool:
        """True for tensors whose value may be passed in when computing."""
        return self.input

    @property
    def const(self) -> Optional[np.ndarray]:
        """The value of a constant tensor (None for the other kinds)."""
        if not self.constant:
            return None
        return np.broadcast_to(self.initial_value, self.axes.lengths)

    def initial_array(self, lengths) -> np.ndarray:
        """The initial value as an array of `lengths` (callables are called now)."""
        value = self.initial_value
        if callable(value):  # called with the axes, or with nothing (Nervana Graph v0.4)
            value = value() if _takes_no_arguments(value) else value(self.axes)
            if isinstance(value, Op):
                raise self.error(GraphError, "an initial_value callable must return an array, not an op")
        array = np.asarray(value, dtype=self.dtype)
        if array.ndim == 0:
            return np.full(lengths, array, dtype=self.dtype)
        if array.shape != tuple(lengths):
            raise self.error(
                AxisLengthError,
                f"initial value has shape {array.shape} but axes {self.axes} have lengths {tuple(lengths)}",
            )
        return array.copy()


class InitializeOp(Op):
    """Writes a tensor's initial value; lives in the tensor's `initializers`."""

    is_tensor_op = False

    def __init__(self, tensor: AssignableTensorOp):
        super().__init__(name=f"init_{tensor.name}")
        self.tensor = tensor


def _takes_no_arguments(function: Callable) -> bool:
    try:
        return not inspect.signature(function).parameters
    except (TypeError, ValueError):  # a builtin without a signature: give it the axes
        return False


def _checked_initial_value(tensor: AssignableTensorOp, value: InitialValue):
    if value is None or callable(value):
        return value
    if isinstance(value, Op):
        raise tensor.error(GraphError, "initial_value must be a number, an array or a callable, not an op")
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise tensor.error(DTypeError, f"initial_value of dtype {array.dtype} is not numeric")
    if array.ndim == 0:
        return cast(array, tensor.dtype)
    axes = tensor.axes
    if array.ndim != len(axes):
        raise tensor.error(
            AxisLengthError,
            f"initial value has {array.ndim} dimensions {array.shape} but axes {axes} have {len(axes)}",
        )
    for axis, length in zip(axes, array.shape):
        if axis.length is None:
            axis.length = length
        elif axis.length != length:
            raise tensor.error(
                AxisLengthError,
                f"initial value has shape {array.shape} but axes {axes} have lengths {axes.lengths}",
            )
    return cast(array, tensor.dtype)


def _axes_for_value(value, axes: AxesLike) -> Axes:
    if axes is not None:
        return Axes(axes)
    array = np.asarray(value) if not callable(value) else None
    if array is None or array.ndim == 0:
        return Axes()
    return Axes(make_axis(length=n) for n in array.shape)


def constant(const, axes: AxesLike = None, dtype=None, name: Optional[str] = None,
             metadata: Optional[dict] = None) -> AssignableTensorOp:
    """An immutable tensor holding `const` (axes made up from its shape if not given)."""
    return AssignableTensorOp(
        _axes_for_value(const, axes), dtype=dtype, initial_value=const, constant=True,
        persistent=True, name=name, metadata=metadata,
    )


def scalar_constant(value) -> AssignableTensorOp:
    """A constant for a Python number; it takes the dtype of what it meets.

    It is stored at full precision (float64 / int64) so that `x * 0.1` is as
    exact in a float64 graph as NumPy's; ops give it the other operand's type.
    """
    kind = np.asarray(value).dtype.kind
    dtype = {"b": np.bool_, "i": np.int64, "u": np.int64}.get(kind, np.float64)
    op = AssignableTensorOp((), dtype=dtype, initial_value=value, constant=True)
    op.weak_dtype = True
    return op


def placeholder(axes: AxesLike, dtype=None, initial_value: InitialValue = None,
                name: Optional[str] = None, metadata: Optional[dict] = None) -> AssignableTensorOp:
    """An input: its value is passed to each call of a computation."""
    return AssignableTensorOp(
        axes, dtype=dtype, initial_value=initial_value, persistent=True, input=True,
        name=name, metadata=metadata,
    )


def persistent_tensor(axes: AxesLike, dtype=None, initial_value: InitialValue = None,
                      name: Optional[str] = None, metadata: Optional[dict] = None) -> AssignableTensorOp:
    """State kept across calls that is not trained (e.g. SGD velocity)."""
    return AssignableTensorOp(
        axes, dtype=dtype, initial_value=initial_value, persistent=True, name=name,
        metadata=metadata,
    )


def variable(axes: AxesLike, dtype=None, initial_value: InitialValue = None,
             name: Optional[str] = None, metadata: Optional[dict] = None) -> AssignableTensorOp:
    """A trainable parameter: persistent, and listed by `op.variables()`."""
    return AssignableTensorOp(
        axes, dtype=dtype, initial_value=initial_value, persistent=True, trainable=True,
        name=name, metadata=metadata,
    )


def temporary(axes: AxesLike, dtype=None, initial_value: InitialValue = None,
              name: Optional[str] = None, metadata: Optional[dict] = None) -> AssignableTensorOp:
    """Scratch storage valid within one call; re-initialized on every call."""
    return AssignableTensorOp(
        axes, dtype=dtype, initial_value=initial_value, persistent=False, name=name,
        metadata=metadata,
    )
