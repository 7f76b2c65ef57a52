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

An initial value is a number, an array, a callable `f(axes) -> array`, or an
op computable at initialization (Nervana Graph v0.4 assigned the op as the
tensor's initializer): constants, random draws and stored tensors that have
initial values of their own, combined by any ops. Such an op is computed when
the tensor is initialized; the stored tensors it reads are initialized first,
and it sees their values at that moment.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Iterable, List, Optional, Tuple, Union

import numpy as np

from ..axes import Axes, AxesLike, make_axis
from ..debug_info import user_location
from ..dims import known
from ..dtypes import cast
from ..errors import (AxgraphTypeError, AxisLengthError, DTypeError, FeedError, GraphError,
                      IncompatibleAxesError)
from .op import Op, upstream_ops

InitialValue = Union[None, int, float, bool, np.ndarray, Callable[[Axes], object], Op]


class AssignableTensorOp(Op):
    """An l-tensor: a stored value that assigns may overwrite (unless constant).

    `weak_dtype` marks a Python number's constant, which takes the dtype of what
    it meets (scalar_constant).
    """

    is_assignable = True
    attributes = ("initial_value", "constant", "persistent", "trainable", "input", "weak_dtype")
    initial_value: Any  # as given, then checked and cast (see _checked_initial_value)
    constant: bool
    persistent: bool
    trainable: bool
    input: bool
    weak_dtype: bool

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
        weak_dtype: bool = False,
    ):
        super().__init__(axes=axes, dtype=dtype, name=name, metadata=metadata,
                         initial_value=initial_value, constant=constant, persistent=persistent,
                         trainable=trainable, input=input, weak_dtype=weak_dtype)

    def _finish(self) -> None:
        self.initial_value = _checked_initial_value(self, self.initial_value)
        if self.initial_value is not None:
            self.initializers.add(InitializeOp(self))

    @property
    def initial_value_op(self) -> Optional[Op]:
        """The op computing the initial value, when one was given (else None)."""
        return self.initial_value if isinstance(self.initial_value, Op) else None

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
        """The initial value as an array of `lengths` (callables are called now).

        Not for an initial value given as an op: that is computed by the
        transformer and placed with `array_from_initial_op`.
        """
        value = self.initial_value
        if isinstance(value, Op):
            raise self.error(GraphError, f"the initial value {value.name} is an op; a "
                                         f"transformer computes it")
        if callable(value):  # called with the axes, or with nothing (Nervana Graph v0.4)
            value = value() if _takes_no_arguments(value) else value(self.axes)
            if isinstance(value, Op):
                raise self.error(GraphError, "an initial_value callable must return an array, not an op")
        array = _fitted_to_axes(self, np.asarray(value, dtype=self.dtype), tuple(lengths))
        return np.array(np.broadcast_to(array, tuple(lengths)), dtype=self.dtype)

    def array_from_initial_op(self, value: np.ndarray, lengths) -> np.ndarray:
        """The tensor's initial array from its initial-value op's computed `value`
        (in that op's axis order): put in the tensor's axis order, repeated over the
        tensor's axes the op lacks, converted to the tensor's dtype."""
        source = self.initial_value.axes
        value = np.transpose(np.asarray(value), [source.index(a) for a in self.axes if a in source])
        kept = tuple(n if a in source else 1 for a, n in zip(self.axes, lengths))
        return np.array(np.broadcast_to(value.reshape(kept), tuple(lengths)), dtype=self.dtype)


class InitializeOp(Op):
    """Writes a tensor's initial value; lives in the tensor's `initializers`.

    For an initial value given as an op, that op is this op's one arg.
    """

    is_tensor_op = False
    attributes = ("tensor",)
    tensor: AssignableTensorOp

    def __init__(self, tensor: AssignableTensorOp):
        value = tensor.initial_value_op
        super().__init__(*([] if value is None else [value]), tensor=tensor,
                         name=f"init_{tensor.name}")


def _takes_no_arguments(function: Callable) -> bool:
    try:
        return not inspect.signature(function).parameters
    except (TypeError, ValueError):  # a builtin without a signature: give it the axes
        return False


def initialization_order(tensors: Iterable[AssignableTensorOp],
                         initialized) -> List[AssignableTensorOp]:
    """`tensors` and the stored tensors their initial-value ops read, each after what
    it reads, leaving out those in `initialized` (their values already exist)."""
    order: List[AssignableTensorOp] = []
    seen = set()

    def visit(tensor: AssignableTensorOp) -> None:
        if tensor in seen or tensor in initialized:
            return
        seen.add(tensor)
        for read in stored_reads(tensor.initial_value_op):
            visit(read)
        order.append(tensor)

    for tensor in tensors:
        visit(tensor)
    return order


def stored_reads(value: Optional[Op]) -> List[AssignableTensorOp]:
    """The stored tensors computing `value` reads (none for None), in creation order."""
    if value is None:
        return []
    found = [op for op in upstream_ops([value]) if isinstance(op, AssignableTensorOp)]
    return sorted(found, key=lambda op: op._serial)


def _checked_initial_op(tensor: AssignableTensorOp, value: Op) -> Op:
    """An initial value op must be computable before any computation runs."""
    if tensor.constant:
        raise tensor.error(GraphError, f"a constant's value must be a number or an array, not "
                                       f"the op {value.name}; use ng.variable or "
                                       f"ng.persistent_tensor for a value computed by ops")
    if not value.is_tensor_op:
        raise tensor.error(GraphError, f"initial_value {value.name} has no value (it is run for "
                                       f"its effect)")
    extra = value.axes - tensor.axes
    if extra:
        raise tensor.error(IncompatibleAxesError,
                           f"initial_value {value.name} {value.axes} has axes {extra} that the "
                           f"tensor {tensor.axes} lacks")
    pending = list(value.user_deps) if value.is_assignable else []
    for op in upstream_ops([value] + pending, include_control=True):
        problem = _not_initializable(op)
        if problem is not None:
            error_class, reason = problem
            raise tensor.error(error_class, f"initial_value {value.name} cannot be computed at "
                                            f"initialization: {reason}")
    return value


def _not_initializable(op: Op):
    """(error class, reason) when reading `op` keeps an initial value from being
    computed at initialization, else None."""
    where = f"(made at {op.location[0]}:{op.location[1]})"
    if op.lvalue_args:
        return GraphError, (f"it depends on {type(op).__name__} {op.name} {where}, which writes "
                            f"{op.args[0].name}; initial values are computed before any "
                            f"computation runs")
    if not isinstance(op, AssignableTensorOp):
        return None
    if op.input:
        return FeedError, (f"it reads placeholder {op.name} {where}, whose values exist only "
                           f"during a call")
    if not op.persistent:
        return GraphError, (f"it reads temporary {op.name} {where}, whose value exists only "
                            f"during a call")
    if not op.constant and op.initial_value is None:
        return GraphError, (f"it reads {op._name_prefix()} {op.name} {where}, which has no "
                            f"initial value")
    return None


def _checked_initial_value(tensor: AssignableTensorOp, value: InitialValue):
    if value is None:
        return value
    if isinstance(value, Op):
        return _checked_initial_op(tensor, value)
    if callable(value):
        return value
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise tensor.error(DTypeError, f"initial_value of dtype {array.dtype} is not numeric")
    if tensor.dtype.kind in "biu" and array.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            exact = bool(np.all(np.isfinite(array) & (np.floor(array) == array)))
        if not exact:
            raise tensor.error(DTypeError, f"initial_value holds non-integer floats for a "
                                           f"{tensor.dtype} tensor; they would be truncated")
    array = _fitted_to_axes(tensor, array, tensor.axes.lengths)
    # An axis without a length takes it from the value's dimension set against it.
    for axis, length in zip(tensor.axes[len(tensor.axes) - array.ndim:], array.shape):
        if axis.length is None:
            axis.length = length
    return cast(array, tensor.dtype)


def _fitted_to_axes(tensor: AssignableTensorOp, array: np.ndarray, lengths) -> np.ndarray:
    """`array` as an initial value of `tensor`, whose axes have `lengths` (None or a
    symbolic length where not yet known): whatever NumPy would assign into an array of
    that shape (``a[...] = array``) is accepted, as in Nervana Graph v0.4, where
    ``np.array([[104., 119., 127.]])`` initialized a tensor of one axis of length 3.

    Leading dimensions of length 1 beyond the tensor's rank are dropped; the rest are
    set against the last axes and must have the axis's length or 1 (repeated over it).
    Returns the array, so trimmed; raises AxisLengthError naming the tensor, its axes
    and the value's shape otherwise.
    """
    rank = len(lengths)
    extra = array.ndim - rank
    fits = extra <= 0 or all(n == 1 for n in array.shape[:extra])
    trimmed = array.reshape(array.shape[extra:]) if fits and extra > 0 else array
    if fits:
        for n, length in zip(trimmed.shape, lengths[rank - trimmed.ndim:]):
            length = known(length, None)
            fits = fits and (length is None or n in (1, length))
    if not fits:
        raise tensor.error(
            AxisLengthError,
            f"initial value of shape {array.shape} does not fit axes {tensor.axes} (lengths "
            f"{tuple(lengths)}): NumPy could not assign it into an array of that shape")
    return trimmed


def _axes_for_value(value, axes: AxesLike) -> Axes:
    if axes is not None:
        return Axes(axes)
    array = np.asarray(value) if not callable(value) else None
    if array is None or array.ndim == 0:
        return Axes()
    # As in Nervana Graph v0.4: axes made up for an array pair by length in elementwise ops.
    return Axes(make_axis(length=n, match_on_length=True) for n in array.shape)


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
    return AssignableTensorOp((), dtype=dtype, initial_value=value, constant=True,
                              weak_dtype=True)


def as_op(value) -> Op:
    """An Op for `value`: ops pass through, numbers and arrays become constants."""
    if isinstance(value, Op):
        return value
    if isinstance(value, (bool, int, float, np.number)) and not isinstance(value, np.ndarray):
        return scalar_constant(value)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return scalar_constant(value.item())
    if isinstance(value, (np.ndarray, list, tuple)):
        what = (f"a NumPy array of shape {value.shape}" if isinstance(value, np.ndarray)
                else f"a {type(value).__name__} of {len(value)} items")
        raise AxgraphTypeError(
            f"{what} cannot be an operand: its dimensions have no axes to pair by. Wrap it "
            f"as ng.constant(value, axes), one axis per dimension", user_location())
    raise AxgraphTypeError(f"{type(value).__name__} {value!r:.60} cannot be an operand; ops "
                           f"take tensors (ops) and numbers", user_location())


def as_ops(values: Iterable) -> Tuple[Op, ...]:
    """`as_op` of each of `values`, as a tuple."""
    return tuple(as_op(value) for value in values)


def constant_storage(axes: AxesLike, dtype=None, initial_value: InitialValue = None,
                     name: Optional[str] = None) -> AssignableTensorOp:
    """A constant with the given axes, holding `initial_value` (Nervana Graph v0.4).

    Unlike `ng.constant`, the axes are required and the value may be a callable
    `f(axes) -> array`, called when the constant is first needed.
    """
    if initial_value is None:
        raise GraphError(f"constant_storage {Axes(axes)} needs an initial_value: nothing can "
                         f"write a constant later", user_location())
    return AssignableTensorOp(axes, dtype=dtype, initial_value=initial_value, constant=True,
                              persistent=True, name=name)


def is_constant(value) -> bool:
    """True when `value` is a constant tensor op (ng.constant, ng.constant_storage)."""
    return isinstance(value, AssignableTensorOp) and value.constant


def is_constant_scalar(value) -> bool:
    """True when `value` is a constant tensor op without axes."""
    return is_constant(value) and not value.axes


def constant_value(value) -> np.ndarray:
    """The value of a constant tensor op, as an array in its axis order (a copy)."""
    if not is_constant(value):
        what = value.name if isinstance(value, Op) else f"{value!r:.60}"
        raise GraphError(f"constant_value: {what} is not a constant tensor op", user_location())
    if callable(value.initial_value):
        return value.initial_array(value.axes.lengths)
    return np.array(value.const)


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
