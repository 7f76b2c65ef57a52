"""Helpers for testing axes graphs, as users of Nervana Graph write them.

    with ExecutorFactory() as ex:
        f = ex.executor(y, x)
        ng_value = f(x_value)
        jacobian = ex.derivative(y, x)(x_value)
        numeric = ex.numeric_derivative(y, x, 1e-6)(x_value)

The backend is `AXGRAPH_TRANSFORMER` from the environment ("numpy" unless
set), so one test suite can run against each backend.
"""
from __future__ import annotations

import os
from typing import Callable, List, Optional, Sequence

import numpy as np

from .autodiff import deriv
from .axes import Axes, AxesLike
from .axis_dims import AxisDims
from .debug_info import user_location
from .dims import bind_shapes
from .dtypes import is_bfloat16
from .errors import AxisLengthError, DTypeError
from .op_graph.op import Op
from .op_graph.tensors import placeholder
from .transformers import Transformer, make_transformer
from .transformers.base import LengthBindings

#: Default tolerances by element type, used where a transformer states none.
TOLERANCES = {np.dtype(np.float16): (1e-2, 1e-3), np.dtype(np.float32): (1e-5, 1e-6),
              np.dtype(np.float64): (1e-10, 1e-12)}
#: bfloat16's (kept apart: its dtype exists only with ml_dtypes): an 8-bit significand
#: rounds each result by up to 2**-9 of its size, and a few roundings add up.
BFLOAT16_TOLERANCE = (2e-2, 1e-2)

_active: List["ExecutorFactory"] = []


def default_backend() -> str:
    """The backend tests run on: $AXGRAPH_TRANSFORMER, else "numpy".

    So that one test suite runs against each backend, chosen from the environment.

    Returns
    -------
    str
        A transformer name, as `make_transformer` takes it.
    """
    return os.environ.get("AXGRAPH_TRANSFORMER", "numpy")


class ExecutorFactory:
    """Owns one transformer; builds executors and Jacobians on it.

    Use it in a ``with`` block: the transformer is closed at the end, and while
    the block runs, `numeric_derivative` and `check_derivative` use it.

    Parameters
    ----------
    backend : str, optional
        The transformer's name (default: `default_backend()`).
    **options
        The transformer's own keyword arguments.

    Raises
    ------
    AxgraphValueError
        No transformer is named `backend`.
    AxgraphTypeError
        The transformer does not take one of `options`.

    Examples
    --------
    >>> import axgraph as ng
    >>> from axgraph.testing import ExecutorFactory
    >>> N = ng.make_axis(length=3, name="N")
    >>> x = ng.placeholder([N])
    >>> with ExecutorFactory() as ex:
    ...     square = ex.executor(x * x, x)
    ...     square([1.0, 2.0, 3.0]).tolist()
    [1.0, 4.0, 9.0]
    """

    def __init__(self, backend: Optional[str] = None, **options):
        self.backend = backend or default_backend()
        self.transformer: Transformer = make_transformer(self.backend, **options)

    def __enter__(self) -> "ExecutorFactory":
        _active.append(self)
        return self

    def __exit__(self, *exc) -> None:
        if _active and _active[-1] is self:
            _active.pop()
        self.transformer.close()

    def executor(self, results, *parameters):
        """A computation of `results` taking `parameters` positionally.

        Parameters
        ----------
        results : Op or sequence of Op
            What the computation returns (a tuple when several).
        *parameters : Op
            The placeholders fed, in call order.

        Returns
        -------
        Computation
            A callable on this factory's transformer.

        Raises
        ------
        TransformerClosedError
            The factory's transformer is closed.
        """
        return self.transformer.computation(results, *parameters)

    def derivative(self, f: Op, px: Op, *parameters: Op) -> Callable[..., np.ndarray]:
        """A function of (x value, *parameter values) giving the Jacobian df/dx.

        The Jacobian is built with `deriv`, one backward pass per element of f.

        Parameters
        ----------
        f : Op
            The function differentiated.
        px : Op
            The placeholder differentiated by.
        *parameters : Op
            Other placeholders f reads, fed after x.

        Returns
        -------
        callable
            `jacobian(x, *values)`, returning an array of shape f's axis lengths +
            x's shape.

        Raises
        ------
        NotDifferentiableError
            f depends on px through an op that has no derivative.
        """
        if not f.axes:
            computation = self.executor(deriv(f, px), px, *parameters)
            return lambda x, *values: np.asarray(computation(x, *values))
        seed = placeholder(f.axes, dtype=f.dtype)
        computation = self.executor(deriv(f, px, error=seed), seed, px, *parameters)

        def jacobian(x, *values) -> np.ndarray:
            f_shape = _lengths(f.axes, (px,) + parameters, (x,) + values)
            result = np.empty(f_shape + np.shape(x), dtype=np.result_type(f.dtype, px.dtype))
            one_hot = np.zeros(f_shape, dtype=f.dtype)
            for index in np.ndindex(*f_shape):
                one_hot[index] = 1
                result[index] = computation(one_hot, x, *values)
                one_hot[index] = 0
            return result

        return jacobian

    def numeric_derivative(self, f: Op, px: Op, dx: float, *parameters: Op) -> Callable[..., np.ndarray]:
        """A function of (x value, *parameter values) giving df/dx by central differences.

        Parameters
        ----------
        f : Op
            The function differentiated.
        px : Op
            The placeholder differentiated by.
        dx : float
            The step: each element of x is moved by +dx and -dx.
        *parameters : Op
            Other placeholders f reads, fed after x.

        Returns
        -------
        callable
            `jacobian(x, *values)`, returning an array of shape f's shape + x's
            shape (see `numeric_jacobian`).
        """
        computation = self.executor(f, px, *parameters)
        return lambda x, *values: numeric_jacobian(lambda v: computation(v, *values), x, dx)

    def get_tensor_view_value(self, op: Op) -> np.ndarray:
        """The current value of a stored tensor (a variable, say), as a copy.

        Parameters
        ----------
        op : Op
            The stored tensor.

        Returns
        -------
        numpy.ndarray
            Its value now.
        """
        return np.array(self.executor(op)(), copy=True)


def _lengths(axes: Axes, fed_ops, fed_values):
    """Lengths of `axes`, taking unset ones from the shapes of fed values."""
    sizes = AxisDims()
    values = bind_shapes([sizes.dims(op.axes) for op in fed_ops],
                         [np.shape(value) for value in fed_values],
                         lambda i: f"{fed_ops[i].name} {fed_ops[i].axes}")
    bindings = LengthBindings(sizes, values)
    lengths = tuple(bindings.get(axis) for axis in axes)
    for axis, length in zip(axes, lengths):
        if length is None:
            raise AxisLengthError(f"the length of {axis.name} is unknown; set it before "
                                  f"differentiating", user_location())
    return lengths


def numeric_jacobian(function: Callable[[np.ndarray], np.ndarray], x, dx: float) -> np.ndarray:
    """The central-difference Jacobian of `function` at x.

    Each element of x is moved by +dx and by -dx in turn, and the change in
    `function`'s value divided by 2 * dx. An x that is not of a float type is
    differentiated in float64.

    Parameters
    ----------
    function : callable
        Takes an array of x's shape and returns an array (or a value NumPy
        converts to one).
    x : array_like
        The point to differentiate at.
    dx : float
        The step.

    Returns
    -------
    numpy.ndarray
        The Jacobian, of shape function(x).shape + x.shape: entry [i, j] is
        d function(x)[i] / d x[j].

    Examples
    --------
    >>> import numpy as np
    >>> from axgraph.testing import numeric_jacobian
    >>> numeric_jacobian(lambda v: v ** 2, np.array([1.0, 3.0]), 1e-3).round(6).tolist()
    [[2.0, 0.0], [0.0, 6.0]]
    """
    x = np.array(x, dtype=np.float64 if np.asarray(x).dtype.kind != "f" else np.asarray(x).dtype)
    f0 = np.asarray(function(x))
    result = np.empty(f0.shape + x.shape, dtype=np.result_type(f0.dtype, x.dtype))
    for index in np.ndindex(*x.shape):
        saved = x[index]
        x[index] = saved + dx
        plus = np.asarray(function(x), dtype=result.dtype)
        x[index] = saved - dx
        minus = np.asarray(function(x), dtype=result.dtype)
        x[index] = saved
        result[(Ellipsis,) + index] = (plus - minus) / (2 * dx)
    return result


class Executor:
    """A computation on a transformer of its own.

    Call it directly, or use it in a ``with`` block that closes the transformer
    at the end (both as Nervana Graph's `executor(results, *parameters)` was
    used).

    Parameters
    ----------
    results : Op or sequence of Op
        What the computation returns (a tuple when several).
    *parameters : Op
        The placeholders fed, in call order.
    backend : str, optional
        The transformer's name (default: `default_backend()`).

    Raises
    ------
    AxgraphValueError
        No transformer is named `backend`.
    """

    def __init__(self, results, *parameters: Op, backend: Optional[str] = None):
        self.transformer: Transformer = make_transformer(backend or default_backend())
        self.computation = self.transformer.computation(results, *parameters)

    def __call__(self, *values, **options):
        return self.computation(*values, **options)

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc) -> None:
        self.transformer.close()


def executor(results, *parameters: Op, backend: Optional[str] = None) -> Executor:
    """A callable computing `results` from `parameters` on a fresh transformer.

    Parameters
    ----------
    results : Op or sequence of Op
        What the computation returns (a tuple when several).
    *parameters : Op
        The placeholders fed, in call order.
    backend : str, optional
        The transformer's name (default: `default_backend()`).

    Returns
    -------
    Executor
        The computation; its transformer is closed at the end of a ``with``
        block around it.

    Raises
    ------
    AxgraphValueError
        No transformer is named `backend`.
    """
    return Executor(results, *parameters, backend=backend)


def numeric_derivative(f: Op, px: Op, dx: float, *parameters: Op) -> Callable[..., np.ndarray]:
    """A central-difference Jacobian function, on the active (or a new) executor factory.

    Parameters
    ----------
    f : Op
        The function differentiated.
    px : Op
        The placeholder differentiated by.
    dx : float
        The step: each element of x is moved by +dx and -dx.
    *parameters : Op
        Other placeholders f reads, fed after x.

    Returns
    -------
    callable
        `jacobian(x, *values)`, as `ExecutorFactory.numeric_derivative` makes it.
    """
    return _factory().numeric_derivative(f, px, dx, *parameters)


def check_derivative(f: Op, px: Op, delta: float, x_value, parameters: Sequence[Op] = (),
                     parameter_values: Sequence = (), rtol: Optional[float] = None,
                     atol: Optional[float] = None) -> None:
    """Assert that deriv's Jacobian of f at x_value matches finite differences.

    Central differences need float64: in float32 a step small enough to be accurate is
    lost to rounding, so `f` and `px` must be float64 (a DTypeError says so otherwise).

    Parameters
    ----------
    f : Op
        The function differentiated.
    px : Op
        The placeholder differentiated by.
    delta : float
        The step of the central differences.
    x_value : array_like
        The point to differentiate at: px's value.
    parameters : sequence of Op, optional
        Other placeholders f reads.
    parameter_values : sequence of array_like, optional
        Their values, in the same order.
    rtol, atol : float, optional
        The tolerances of the comparison (default 1e-4 and 1e-6).

    Raises
    ------
    DTypeError
        If `f` or `px` is not float64; build the graph with ``dtype=np.float64`` on its
        placeholders and variables.
    AssertionError
        The Jacobians differ beyond the tolerances; the message names f and px.
    NotDifferentiableError
        f depends on px through an op that has no derivative.
    """
    _require_float64(f, px)
    factory = _factory()
    symbolic = factory.derivative(f, px, *parameters)(x_value, *parameter_values)
    numeric = factory.numeric_derivative(f, px, delta, *parameters)(x_value, *parameter_values)
    rtol = 1e-4 if rtol is None else rtol
    atol = 1e-6 if atol is None else atol
    np.testing.assert_allclose(symbolic, numeric, rtol=rtol, atol=atol,
                               err_msg=f"deriv of {f.name} with respect to {px.name}")


def _require_float64(f: Op, px: Op) -> None:
    """A DTypeError, at the user's line, unless f and px are float64."""
    loose = [f"{role} {op.name} is {np.dtype(op.dtype).name}" for role, op in (("f", f), ("px", px))
             if np.dtype(op.dtype) != np.float64]
    if loose:
        raise DTypeError(f"check_derivative of {f.name} with respect to {px.name} needs a "
                         f"float64 graph, but {' and '.join(loose)}: finite differences in lower "
                         f"precision are mostly rounding. Build the graph in float64: "
                         f"dtype=np.float64 on its placeholders and variables",
                         user_location())


def _factory() -> ExecutorFactory:
    if _active:
        return _active[-1]
    return ExecutorFactory()


def assert_allclose(actual, desired, rtol: Optional[float] = None, atol: Optional[float] = None,
                    err_msg: str = "") -> None:
    """np.testing.assert_allclose with tolerances suited to the values' types.

    The tolerance is the looser of the two arguments' types (a float32 result
    against a float64 reference is held to float32's), so swapping the
    arguments never changes the tolerance. The active transformer may state
    its own (`default_rtol`/`default_atol`), for backends that reassociate
    floating-point sums.

    Parameters
    ----------
    actual, desired : array_like
        The values compared.
    rtol, atol : float, optional
        The relative and absolute tolerances (default: by the types, as above).
    err_msg : str, optional
        Added to the message of a failure.

    Raises
    ------
    AssertionError
        Some element differs by more than atol + rtol * |desired|, or the shapes
        differ.
    """
    default_rtol, default_atol = np.max([_tolerance(actual), _tolerance(desired)], axis=0)
    if _active:
        transformer = _active[-1].transformer
        default_rtol = getattr(transformer, "default_rtol", default_rtol)
        default_atol = getattr(transformer, "default_atol", default_atol)
    actual, desired = _comparable(actual), _comparable(desired)
    np.testing.assert_allclose(actual, desired,
                               rtol=default_rtol if rtol is None else rtol,
                               atol=default_atol if atol is None else atol, err_msg=err_msg)


def _tolerance(value) -> tuple:
    """(rtol, atol) for values of `value`'s type (ints and bools as floats they fit)."""
    dtype = np.asarray(value).dtype
    if is_bfloat16(dtype):
        return BFLOAT16_TOLERANCE
    return TOLERANCES.get(np.result_type(dtype, np.float16), (1e-5, 1e-6))


def _comparable(value) -> np.ndarray:
    """`value` as an array NumPy's testing functions compare: bfloat16 as float32."""
    array = np.asarray(value)
    return array.astype(np.float32) if is_bfloat16(array.dtype) else array


class RandomTensorGenerator:
    """Reproducible random arrays shaped by axes.

    The same seed gives the same arrays, in the same order, on every run, so a
    test's inputs never change under it.

    Parameters
    ----------
    seed : int, optional
        The seed of the stream (default 0); `reset` restarts it.
    dtype : numpy.dtype or type, optional
        The element type of the samples unless a call says otherwise (default
        float32).

    Examples
    --------
    >>> import axgraph as ng
    >>> from axgraph.testing import RandomTensorGenerator
    >>> C = ng.make_axis(length=4, name="C")
    >>> values = RandomTensorGenerator(seed=1).uniform(-1, 1, [C])
    >>> values.shape, values.dtype.name, bool(((values >= -1) & (values < 1)).all())
    ((4,), 'float32', True)
    """

    def __init__(self, seed: int = 0, dtype=np.float32):
        self.seed = seed
        self.dtype = np.dtype(dtype)
        self.reset(seed)

    def reset(self, seed: Optional[int] = None) -> None:
        """Restart the stream of values.

        Parameters
        ----------
        seed : int, optional
            The new seed (default: the generator's own, so the same values repeat).
        """
        self.rng = np.random.default_rng(self.seed if seed is None else seed)

    def _shape(self, axes: AxesLike):
        return Axes(axes).with_lengths_checked().lengths

    def uniform(self, low: float, high: float, axes: AxesLike, dtype=None) -> np.ndarray:
        """Uniform samples in [low, high), also after rounding to `dtype`.

        Parameters
        ----------
        low, high : float
            The interval.
        axes : Axes or sequence of Axis
            The axes whose lengths give the shape, each with a length.
        dtype : numpy.dtype, optional
            The element type (default: the generator's).

        Returns
        -------
        numpy.ndarray
            The samples, of those lengths; none equals `high` after rounding.

        Raises
        ------
        AxisLengthError
            An axis has no length.
        """
        dtype = np.dtype(dtype or self.dtype)
        values = self.rng.uniform(low, high, self._shape(axes)).astype(dtype)
        below_high = np.nextafter(dtype.type(high), dtype.type(low))
        return np.where(values >= dtype.type(high), below_high, values).astype(dtype)

    def normal(self, loc: float, scale: float, axes: AxesLike, dtype=None) -> np.ndarray:
        """Normal samples of mean `loc` and standard deviation `scale`.

        Parameters
        ----------
        loc : float
            The mean.
        scale : float
            The standard deviation.
        axes : Axes or sequence of Axis
            The axes whose lengths give the shape, each with a length.
        dtype : numpy.dtype, optional
            The element type (default: the generator's).

        Returns
        -------
        numpy.ndarray
            The samples, of those lengths.

        Raises
        ------
        AxisLengthError
            An axis has no length.
        """
        return self.rng.normal(loc, scale, self._shape(axes)).astype(dtype or self.dtype)

    def discrete_uniform(self, low: float, high: float, quantum: float, axes: AxesLike,
                         dtype=None) -> np.ndarray:
        """Uniform samples from the grid low, low + quantum, ... up to high (inclusive).

        Parameters
        ----------
        low, high : float
            The grid's ends.
        quantum : float
            The grid's step.
        axes : Axes or sequence of Axis
            The axes whose lengths give the shape, each with a length.
        dtype : numpy.dtype, optional
            The element type (default: the generator's).

        Returns
        -------
        numpy.ndarray
            The samples, of those lengths.

        Raises
        ------
        AxisLengthError
            An axis has no length.
        """
        steps = int(np.floor((high - low) / quantum + 1e-9))
        picks = self.rng.integers(0, steps, self._shape(axes), endpoint=True)
        return (low + quantum * picks).astype(dtype or self.dtype)

    def random_integers(self, low: int, high: int, axes: AxesLike, dtype=np.int32) -> np.ndarray:
        """Uniform integers in [low, high] (high inclusive).

        Parameters
        ----------
        low, high : int
            The range, both ends included.
        axes : Axes or sequence of Axis
            The axes whose lengths give the shape, each with a length.
        dtype : numpy.dtype, optional
            The element type (default int32).

        Returns
        -------
        numpy.ndarray
            The samples, of those lengths.

        Raises
        ------
        AxisLengthError
            An axis has no length.
        """
        return self.rng.integers(low, high, self._shape(axes), endpoint=True).astype(dtype)
