"""Stored tensors: constants, placeholders, persistent tensors, variables.

The four kinds differ only in four flags, as in Nervana Graph:

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
from ..dtypes import cast, kind_of
from ..errors import (AxgraphTypeError, AxisLengthError, DTypeError, FeedError, GraphError,
                      IncompatibleAxesError)
from .op import Op, upstream_ops

InitialValue = Union[None, int, float, bool, np.ndarray, Callable[[Axes], object], Op]


class AssignableTensorOp(Op):
    """A stored tensor: a value kept by the transformer that assigns may overwrite.

    Constants, placeholders, variables, persistent and temporary tensors are
    all this one class; four flags tell them apart (see the table in this
    module's docstring), so every pass and backend handles stored values one
    way. Make them with `constant`, `placeholder`, `variable`,
    `persistent_tensor` or `temporary` rather than directly.

    Parameters
    ----------
    axes : Axes, Axis or iterable of Axis, optional
        The tensor's axes (None: a scalar).
    dtype : dtype-like, optional
        The element type (None: float32).
    initial_value : number, array, callable or Op, optional
        The value the tensor starts with: a number (filling it), an array in
        the axes' order (whose shape sets lengths not yet known), a callable
        ``f(axes)`` or ``f()`` returning one, or an op computable at
        initialization. None: no initial value.
    constant : bool, optional
        True for a value that nothing may write.
    persistent : bool, optional
        True (the default) for a value kept across calls; False for one made
        afresh on every call.
    trainable : bool, optional
        True for a parameter that `Op.variables()` lists.
    input : bool, optional
        True for a placeholder, whose value a call may pass in.
    name : str, optional
        A name for printing and saving (automatic if None).
    metadata : dict, optional
        Free-form facts for tools and frontends.
    weak_dtype : bool, optional
        True for a Python number's constant, which takes the element type of
        the tensor it meets (``x * 2`` keeps x's type).

    Raises
    ------
    AxgraphTypeError, DuplicateAxisError
        If `axes` are not distinct Axis objects.
    DTypeError
        If `dtype` is not a supported element type, or `initial_value` is not
        numeric or holds non-integer floats for an integer tensor.
    AxisLengthError
        If an array `initial_value` does not have the axes' lengths.
    GraphError, FeedError, IncompatibleAxesError
        If an op `initial_value` cannot be computed at initialization (it
        writes a tensor, reads a placeholder, a temporary or a tensor without
        initial value) or has axes the tensor lacks.
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
    if kind_of(array.dtype) not in "biuf":
        raise tensor.error(DTypeError, f"initial_value of dtype {array.dtype} is not numeric")
    if kind_of(tensor.dtype) in "biu" and kind_of(array.dtype) == "f":
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
    """A tensor whose value is `const` and that nothing may write.

    An array given without axes gets axes made up from its shape, which
    pair by length: in an elementwise op each takes the other operand's one
    axis of the same length, so ``x + ng.constant(np.ones(3))`` works for an
    `x` with a single axis of length 3.

    Parameters
    ----------
    const : number or array-like
        The value, in the order of `axes`.
    axes : Axes, Axis or iterable of Axis, optional
        The tensor's axes; None: none for a number, made-up ones for an array.
    dtype : dtype-like, optional
        The element type (None: float32).
    name : str, optional
        A name for printing and saving (automatic if None).
    metadata : dict, optional
        Free-form facts for tools and frontends.

    Returns
    -------
    AssignableTensorOp
        The constant tensor.

    Raises
    ------
    AxgraphTypeError, DuplicateAxisError
        If `axes` are not distinct Axis objects.
    DTypeError
        If `dtype` is not a supported element type, or `const` is not numeric
        or holds non-integer floats for an integer tensor.
    AxisLengthError
        If `const`'s shape does not fit the lengths of `axes`.
    GraphError
        If `const` is an op: a constant holds a number or an array.

    Examples
    --------
    >>> import numpy as np
    >>> import axgraph as ng
    >>> C = ng.make_axis(length=3, name="C")
    >>> c = ng.constant(np.array([1.0, 2.0, 3.0]), axes=[C])
    >>> c.axes, ng.constant_value(c).tolist()
    (Axes(C: 3), [1.0, 2.0, 3.0])
    """
    return AssignableTensorOp(
        _axes_for_value(const, axes), dtype=dtype, initial_value=const, constant=True,
        persistent=True, name=name, metadata=metadata,
    )


def scalar_constant(value) -> AssignableTensorOp:
    """A constant for a Python number; it takes the dtype of what it meets.

    It is stored at full precision (float64 / int64) so that `x * 0.1` is as
    exact in a float64 graph as NumPy's; ops give it the other operand's type.
    """
    kind = kind_of(np.asarray(value).dtype)
    dtype = {"b": np.bool_, "i": np.int64, "u": np.int64}.get(kind, np.float64)
    return AssignableTensorOp((), dtype=dtype, initial_value=value, constant=True,
                              weak_dtype=True)


def as_op(value) -> Op:
    """The op for an operand: ops pass through, Python numbers become constants.

    Every `ng.*` function passes its operands through this, so ``x * 2``
    works. A number's constant takes the element type of the tensor it
    meets. Arrays are refused: their dimensions have no axes to pair by.

    Parameters
    ----------
    value : Op, number or 0-d array
        The operand.

    Returns
    -------
    Op
        `value` itself if it is an op, else a scalar constant.

    Raises
    ------
    AxgraphTypeError
        If `value` is an array (of one dimension or more), a list or tuple,
        or anything else that is not an op or a number.
    """
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
    """The op for each of several operands (see `as_op`).

    Parameters
    ----------
    values : iterable of Op or number
        The operands.

    Returns
    -------
    tuple of Op
        One op per value, in order.

    Raises
    ------
    AxgraphTypeError
        If a value is neither an op nor a number.
    """
    return tuple(as_op(value) for value in values)


def constant_storage(axes: AxesLike, dtype=None, initial_value: InitialValue = None,
                     name: Optional[str] = None) -> AssignableTensorOp:
    """A constant with the given axes, holding `initial_value` (Nervana Graph v0.4).

    Unlike `ng.constant`, the axes are required and the value may be a callable
    `f(axes) -> array`, called when the constant is first needed, so a large
    table can be made only when a computation uses it.

    Parameters
    ----------
    axes : Axes, Axis or iterable of Axis
        The constant's axes.
    dtype : dtype-like, optional
        The element type (None: float32).
    initial_value : number, array or callable
        The value, or a callable ``f(axes)`` (or ``f()``) returning it.
    name : str, optional
        A name for printing and saving (automatic if None).

    Returns
    -------
    AssignableTensorOp
        The constant tensor.

    Raises
    ------
    GraphError
        If `initial_value` is None (nothing could write a constant later) or an op.
    AxgraphTypeError, DuplicateAxisError
        If `axes` are not distinct Axis objects.
    DTypeError
        If `dtype` is not a supported element type or the value is not numeric.
    AxisLengthError
        If an array value does not have the axes' lengths.
    """
    if initial_value is None:
        raise GraphError(f"constant_storage {Axes(axes)} needs an initial_value: nothing can "
                         f"write a constant later", user_location())
    return AssignableTensorOp(axes, dtype=dtype, initial_value=initial_value, constant=True,
                              persistent=True, name=name)


def is_constant(value) -> bool:
    """Whether `value` is a constant tensor op (made by ng.constant, ng.constant_storage).

    Parameters
    ----------
    value : object
        Anything; only a constant stored tensor gives True.

    Returns
    -------
    bool
        True for a constant tensor op, else False.
    """
    return isinstance(value, AssignableTensorOp) and value.constant


def is_constant_scalar(value) -> bool:
    """Whether `value` is a constant tensor op without axes (a constant number).

    Parameters
    ----------
    value : object
        Anything; only a constant stored tensor without axes gives True.

    Returns
    -------
    bool
        True for a scalar constant tensor op, else False.
    """
    return is_constant(value) and not value.axes


def constant_value(value) -> np.ndarray:
    """The value of a constant tensor op, known without running a computation.

    Parameters
    ----------
    value : AssignableTensorOp
        A constant tensor op (see `is_constant`).

    Returns
    -------
    numpy.ndarray
        A copy of its value, in its axis order (a callable value is called now).

    Raises
    ------
    GraphError
        If `value` is not a constant tensor op.
    """
    if not is_constant(value):
        what = value.name if isinstance(value, Op) else f"{value!r:.60}"
        raise GraphError(f"constant_value: {what} is not a constant tensor op", user_location())
    if callable(value.initial_value):
        return value.initial_array(value.axes.lengths)
    return np.array(value.const)


def placeholder(axes: AxesLike, dtype=None, initial_value: InitialValue = None,
                name: Optional[str] = None, metadata: Optional[dict] = None) -> AssignableTensorOp:
    """An input tensor: its value is passed to each call of a computation.

    Fed values live for one call only. A placeholder with an `initial_value`
    need not be fed: a call that passes no value reads that one. An axis
    without a length takes it, for one call, from the value fed in that call.

    Parameters
    ----------
    axes : Axes, Axis or iterable of Axis
        The placeholder's axes; a fed array has them in this order.
    dtype : dtype-like, optional
        The element type (None: float32); fed values are converted to it
        when NumPy's ``same_kind`` casting allows.
    initial_value : number, array or callable, optional
        A default value for calls that feed none.
    name : str, optional
        A name for printing and error messages (automatic if None).
    metadata : dict, optional
        Free-form facts for tools and frontends.

    Returns
    -------
    AssignableTensorOp
        The placeholder.

    Raises
    ------
    AxgraphTypeError, DuplicateAxisError
        If `axes` are not distinct Axis objects.
    DTypeError
        If `dtype` is not a supported element type, or `initial_value` is not
        numeric or holds non-integer floats for an integer tensor.
    AxisLengthError
        If an array `initial_value` does not have the axes' lengths.
    GraphError, FeedError, IncompatibleAxesError
        If an op `initial_value` cannot be computed at initialization (it
        writes a tensor, reads a placeholder, a temporary or a tensor without
        initial value) or has axes the tensor lacks.

    Examples
    --------
    >>> import numpy as np
    >>> import axgraph as ng
    >>> N = ng.make_axis(length=3, name="N")
    >>> x = ng.placeholder([N])
    >>> with ng.make_transformer() as t:
    ...     double = t.computation(2 * x, x)
    ...     print(double(np.array([1.0, 2.0, 3.0])))
    [2. 4. 6.]
    """
    return AssignableTensorOp(
        axes, dtype=dtype, initial_value=initial_value, persistent=True, input=True,
        name=name, metadata=metadata,
    )


def persistent_tensor(axes: AxesLike, dtype=None, initial_value: InitialValue = None,
                      name: Optional[str] = None, metadata: Optional[dict] = None) -> AssignableTensorOp:
    """A stored tensor kept across calls that is not trained (an optimizer's velocity).

    Its value lives in the transformer from initialization until the
    transformer closes; assigns update it, and `Op.variables()` leaves it out.

    Parameters
    ----------
    axes : Axes, Axis or iterable of Axis
        The tensor's axes.
    dtype : dtype-like, optional
        The element type (None: float32).
    initial_value : number, array, callable or Op, optional
        The starting value (see `AssignableTensorOp`); without one it must be
        assigned before it is read.
    name : str, optional
        A name for printing and saving (automatic if None).
    metadata : dict, optional
        Free-form facts for tools and frontends.

    Returns
    -------
    AssignableTensorOp
        The persistent tensor.

    Raises
    ------
    AxgraphTypeError, DuplicateAxisError
        If `axes` are not distinct Axis objects.
    DTypeError
        If `dtype` is not a supported element type, or `initial_value` is not
        numeric or holds non-integer floats for an integer tensor.
    AxisLengthError
        If an array `initial_value` does not have the axes' lengths.
    GraphError, FeedError, IncompatibleAxesError
        If an op `initial_value` cannot be computed at initialization (it
        writes a tensor, reads a placeholder, a temporary or a tensor without
        initial value) or has axes the tensor lacks.
    """
    return AssignableTensorOp(
        axes, dtype=dtype, initial_value=initial_value, persistent=True, name=name,
        metadata=metadata,
    )


def variable(axes: AxesLike, dtype=None, initial_value: InitialValue = None,
             name: Optional[str] = None, metadata: Optional[dict] = None) -> AssignableTensorOp:
    """A trainable parameter: a persistent tensor that `op.variables()` lists.

    Optimizers find what to update through `variables()`, and
    `ng.deriv(cost, w)` gives the gradient to update it with.

    Parameters
    ----------
    axes : Axes, Axis or iterable of Axis
        The variable's axes.
    dtype : dtype-like, optional
        The element type (None: float32).
    initial_value : number, array, callable or Op, optional
        The starting value: a number, an array in the axes' order, a callable
        ``f(axes)`` returning one, or an op computable at initialization
        (``ng.uniform(axes)``). Without one it must be assigned before it is read.
    name : str, optional
        A name for printing and for saving and restoring values (automatic if None).
    metadata : dict, optional
        Free-form facts for tools and frontends.

    Returns
    -------
    AssignableTensorOp
        The variable.

    Raises
    ------
    AxgraphTypeError, DuplicateAxisError
        If `axes` are not distinct Axis objects.
    DTypeError
        If `dtype` is not a supported element type, or `initial_value` is not
        numeric or holds non-integer floats for an integer tensor.
    AxisLengthError
        If an array `initial_value` does not have the axes' lengths.
    GraphError, FeedError, IncompatibleAxesError
        If an op `initial_value` cannot be computed at initialization (it
        writes a tensor, reads a placeholder, a temporary or a tensor without
        initial value) or has axes the tensor lacks.

    Examples
    --------
    >>> import axgraph as ng
    >>> H = ng.make_axis(length=2, name="H")
    >>> w = ng.variable([H], initial_value=0.5)
    >>> loss = ng.sum(w * w, reduction_axes=[H])
    >>> loss.variables() == [w]
    True
    """
    return AssignableTensorOp(
        axes, dtype=dtype, initial_value=initial_value, persistent=True, trainable=True,
        name=name, metadata=metadata,
    )


def temporary(axes: AxesLike, dtype=None, initial_value: InitialValue = None,
              name: Optional[str] = None, metadata: Optional[dict] = None) -> AssignableTensorOp:
    """Scratch storage valid within one call; re-initialized on every call.

    Nothing of it survives a call, so no call sees another's values.

    Parameters
    ----------
    axes : Axes, Axis or iterable of Axis
        The tensor's axes.
    dtype : dtype-like, optional
        The element type (None: float32).
    initial_value : number, array, callable or Op, optional
        The value it starts each call with; without one it must be assigned
        before it is read.
    name : str, optional
        A name for printing (automatic if None).
    metadata : dict, optional
        Free-form facts for tools and frontends.

    Returns
    -------
    AssignableTensorOp
        The temporary tensor.

    Raises
    ------
    AxgraphTypeError, DuplicateAxisError
        If `axes` are not distinct Axis objects.
    DTypeError
        If `dtype` is not a supported element type, or `initial_value` is not
        numeric or holds non-integer floats for an integer tensor.
    AxisLengthError
        If an array `initial_value` does not have the axes' lengths.
    GraphError, FeedError, IncompatibleAxesError
        If an op `initial_value` cannot be computed at initialization (it
        writes a tensor, reads a placeholder, a temporary or a tensor without
        initial value) or has axes the tensor lacks.
    """
    return AssignableTensorOp(
        axes, dtype=dtype, initial_value=initial_value, persistent=False, name=name,
        metadata=metadata,
    )
