"""Weight initializers of the neon frontend: callables `init(axes) -> ndarray`.

Use one as a variable's initial value::

    w = ng.variable([Hidden, F - 1], initial_value=GlorotUniform())

The transformer calls the initializer when it first initializes the variable
(the first computation that uses it), with the variable's axes; the array
comes back in the axes' order.

An initializer may also be called with a shape tuple (``GaussianInit()((3, 4))``),
as Nervana Graph v0.4 code does.

Randomness. An initializer built with ``seed=`` owns a generator started from
that seed, so a freshly built initializer with the same seed produces the
same sequence of draws. Without a seed it draws from one module-level stream,
which ``set_seed(seed)`` restarts: call it before building and running a model
to make a whole run reproducible. Every draw advances its stream, so two
layers sharing one initializer object get different values. The v0.4
spellings (``GaussianInit``, ``UniformInit``, ``ConstantInit``) draw from
NumPy's global stream instead, so v0.4 programs' ``np.random.seed(...)``
makes them reproducible as it did there.

Fan-in and fan-out (``fans(axes)``). A weight's axes are (out axes..., in
axes...) in the convention of ``ng.dot``, where the axes that contract with
the input are dual axes (``F - 1``, ``axis.dual_level == -1``). So:

* the in axes are the axes with ``dual_level == -1``; if there are none, the
  last axis is the in axis;
* the out axes are all the others;
* fan_in and fan_out are the products of their lengths (1 for none).

A bias with axes (H,) thus has fan_in = len(H), fan_out = 1; a scalar has 1, 1.
"""
from __future__ import annotations

import abc

import math
import numbers
from typing import Optional, Sequence, Tuple, Union, cast

import numpy as np

from ...axes import Axes, AxesLike, make_axis
from ...debug_info import user_location
from ...errors import AxgraphValueError, AxisLengthError

_default_rng = np.random.default_rng(0)


def set_seed(seed: int) -> None:
    """Restart the stream that initializers built without ``seed=`` draw from.

    Exported as ``set_init_seed``. Call it before building and running a
    model to make a run reproducible; initializers built with ``seed=`` and
    the v0.4 spellings (GaussianInit, UniformInit), which draw from NumPy's
    global stream, are not affected.

    Parameters
    ----------
    seed : int
        Seed of the new stream (as ``numpy.random.default_rng`` takes it).
    """
    global _default_rng
    _default_rng = np.random.default_rng(seed)


def _lengths(axes: AxesLike, who: str) -> Tuple[int, ...]:
    axes = Axes(axes)
    unset = [axis.name for axis in axes if axis.length is None]
    if unset:
        raise AxisLengthError(
            f"{who} needs the lengths of axes {axes}, but {', '.join(unset)} has none; "
            f"set the length before the variable is initialized")
    return tuple(int(n) for n in axes.lengths)


def fans(axes: AxesLike) -> Tuple[int, int]:
    """(fan_in, fan_out) of a weight with `axes` (rule in the module docstring).

    The in axes are the dual axes (``F - 1``) that contract with the layer's
    input, or the last axis when there are none; the out axes are the rest.
    GlorotUniform and Kaiming scale their draws by these counts.

    Parameters
    ----------
    axes : Axes or sequence of Axis
        The weight's axes, each with a length.

    Returns
    -------
    tuple of (int, int)
        (fan_in, fan_out): the products of the in and out axes' lengths (1 for none).

    Raises
    ------
    axgraph.AxisLengthError
        When an axis has no length.

    Examples
    --------
    >>> import axgraph as ng
    >>> Hidden, F = ng.make_axis(4, name="Hidden"), ng.make_axis(6, name="F")
    >>> fans([Hidden, F - 1])       # a weight (out, in - 1)
    (6, 4)
    >>> fans([Hidden])              # a bias: its axis is the in axis
    (4, 1)
    """
    axes = Axes(axes)
    _lengths(axes, "fans")
    inputs = [axis for axis in axes if axis.dual_level == -1]
    if not inputs and len(axes):
        inputs = [axes[-1]]
    outputs = [axis for axis in axes if axis not in inputs]
    return _product(inputs), _product(outputs)


def _product(axes) -> int:
    return int(math.prod(int(axis.length) for axis in axes)) if axes else 1


def _as_axes(axes_or_shape: Union[AxesLike, Sequence[int]]) -> Axes:
    """Axes as given, or new unnamed axes for a shape tuple of ints."""
    if isinstance(axes_or_shape, (tuple, list)) and all(
            isinstance(n, numbers.Integral) for n in axes_or_shape):
        return Axes(make_axis(length=int(n)) for n in axes_or_shape)
    return Axes(cast(AxesLike, axes_or_shape))


class Initializer(abc.ABC):
    """Base: a seedable callable of axes (or of a shape). Subclasses implement `_draw`.

    An initializer is a variable's ``initial_value``: the transformer calls it
    with the variable's axes when it first initializes the variable, and
    takes the array it returns in those axes' order. Every call draws anew
    (the stream advances), so one initializer shared by two layers gives
    them different values.

    Parameters
    ----------
    seed : int or None, default None
        Seed of this initializer's own random stream. None draws from the
        stream shared by unseeded initializers (restarted by ``set_init_seed``).
    """

    #: Unseeded draws come from NumPy's global stream (the v0.4 spellings) rather than ours.
    draws_from_numpy_global_stream = False

    def __init__(self, seed: Optional[int] = None):
        self.seed = seed
        self._rng = None if seed is None else np.random.default_rng(seed)

    @property
    def rng(self):
        """This initializer's own stream if seeded, else the shared default stream."""
        if self._rng is not None:
            return self._rng
        return np.random if self.draws_from_numpy_global_stream else _default_rng

    def __call__(self, axes: Union[AxesLike, Sequence[int]]) -> np.ndarray:
        """Values for a variable with `axes` (or of a shape, as v0.4 code calls it).

        Parameters
        ----------
        axes : Axes, sequence of Axis, or tuple of int
            The variable's axes, or a shape; a shape gets new unnamed axes
            (so fans treats its last dimension as the in axis).

        Returns
        -------
        numpy.ndarray
            A float64 array of the axes' lengths, in their order.

        Raises
        ------
        axgraph.AxisLengthError
            When an axis has no length yet.
        """
        axes = _as_axes(axes)
        shape = _lengths(axes, repr(self))
        return np.asarray(self._draw(axes, shape), dtype=np.float64)

    @abc.abstractmethod
    def _draw(self, axes: Axes, shape: Tuple[int, ...]) -> np.ndarray:
        """Values of `shape` for a variable with `axes`."""

    def _params(self) -> str:
        return ""

    def __repr__(self) -> str:
        seed = "" if self.seed is None else f"seed={self.seed}"
        params = ", ".join(p for p in (self._params(), seed) if p)
        return f"{type(self).__name__}({params})"


class Constant(Initializer):
    """Every element equal to `val` (neon's default for biases: 0).

    Parameters
    ----------
    val : float, default 0.0
        The value of every element.
    seed : int or None, default None
        Accepted for a uniform signature; a constant draws nothing.

    Examples
    --------
    >>> Constant(0.5)((2, 3))
    array([[0.5, 0.5, 0.5],
           [0.5, 0.5, 0.5]])
    """

    def __init__(self, val: float = 0.0, seed: Optional[int] = None):
        super().__init__(seed)
        self.val = float(val)

    def _draw(self, axes, shape):
        return np.full(shape, self.val)

    def _params(self):
        return f"val={self.val}"


class Uniform(Initializer):
    """Samples of U[low, high), independent for every element.

    Parameters
    ----------
    low : float, default 0.0
        Lower bound (included).
    high : float, default 1.0
        Upper bound (excluded); at least `low`.
    seed : int or None, default None
        Seed of this initializer's own random stream. None draws from the
        stream shared by unseeded initializers (restarted by ``set_init_seed``).

    Raises
    ------
    AxgraphValueError
        When ``high < low``.

    Examples
    --------
    >>> a, b = Uniform(-1, 1, seed=0)((3,)), Uniform(-1, 1, seed=0)((3,))
    >>> bool((a == b).all() and (abs(a) < 1).all())     # one seed, one sequence
    True
    """

    def __init__(self, low: float = 0.0, high: float = 1.0, seed: Optional[int] = None):
        super().__init__(seed)
        if not high >= low:
            raise AxgraphValueError(f"Uniform needs low <= high, got low={low}, high={high}", user_location())
        self.low, self.high = float(low), float(high)

    def _draw(self, axes, shape):
        return self.rng.uniform(self.low, self.high, shape)

    def _params(self):
        return f"low={self.low}, high={self.high}"


class Gaussian(Initializer):
    """Samples of N(loc, scale**2), independent for every element.

    Parameters
    ----------
    loc : float, default 0.0
        The mean.
    scale : float, default 1.0
        The standard deviation (>= 0).
    seed : int or None, default None
        Seed of this initializer's own random stream. None draws from the
        stream shared by unseeded initializers (restarted by ``set_init_seed``).

    Raises
    ------
    AxgraphValueError
        When ``scale < 0``.
    """

    def __init__(self, loc: float = 0.0, scale: float = 1.0, seed: Optional[int] = None):
        super().__init__(seed)
        if scale < 0:
            raise AxgraphValueError(f"Gaussian needs scale >= 0, got {scale}", user_location())
        self.loc, self.scale = float(loc), float(scale)

    def _draw(self, axes, shape):
        return self.rng.normal(self.loc, self.scale, shape)

    def _params(self):
        return f"loc={self.loc}, scale={self.scale}"


class GlorotUniform(Initializer):
    """U[-k, k] with k = sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio 2010, as neon).

    The limit keeps the variance of activations and of gradients about the
    same from layer to layer; fan_in and fan_out come from the variable's
    axes (``fans``), so the draw depends on which axes are dual.

    Parameters
    ----------
    seed : int or None, default None
        Seed of this initializer's own random stream. None draws from the
        stream shared by unseeded initializers (restarted by ``set_init_seed``).

    Examples
    --------
    >>> import axgraph as ng
    >>> Hidden, F = ng.make_axis(4, name="Hidden"), ng.make_axis(6, name="F")
    >>> w = GlorotUniform(seed=1)([Hidden, F - 1])
    >>> w.shape, bool(abs(w).max() <= (6 / (6 + 4)) ** 0.5)
    ((4, 6), True)
    """

    def _draw(self, axes, shape):
        fan_in, fan_out = fans(axes)
        limit = math.sqrt(6.0 / max(fan_in + fan_out, 1))
        return self.rng.uniform(-limit, limit, shape)


class Kaiming(Initializer):
    """N(0, 2 / fan_in): He et al. 2015 for ReLU layers (neon's Kaiming).

    A ReLU zeroes half its inputs on average; the factor 2 makes up for it so
    activations keep their scale through deep rectifier networks. fan_in comes
    from the variable's axes (``fans``).

    Parameters
    ----------
    seed : int or None, default None
        Seed of this initializer's own random stream. None draws from the
        stream shared by unseeded initializers (restarted by ``set_init_seed``).
    """

    def _draw(self, axes, shape):
        fan_in, _ = fans(axes)
        return self.rng.normal(0.0, math.sqrt(2.0 / max(fan_in, 1)), shape)


# -- the spellings of Nervana Graph v0.4 -------------------------------------------------------

class GaussianInit(Gaussian):
    """v0.4's GaussianInit(mean, var): N(mean, var**2).

    v0.4 handed `var` to ``np.random.normal`` as its scale, so despite its
    name `var` is the standard deviation; that is kept so v0.4 programs
    initialize as they did.

    Parameters
    ----------
    mean : float, default 0.0
        The mean.
    var : float, default 0.01
        The standard deviation (>= 0), whatever its name says.
    seed : int or None, default None
        Seed of this initializer's own random stream. None draws from NumPy's
        global stream, as v0.4 did (``np.random.seed`` makes it reproducible).

    Raises
    ------
    AxgraphValueError
        When ``var < 0``.
    """

    draws_from_numpy_global_stream = True

    def __init__(self, mean: float = 0.0, var: float = 0.01, seed: Optional[int] = None):
        super().__init__(loc=mean, scale=var, seed=seed)


class UniformInit(Uniform):
    """v0.4's UniformInit(low, high): U[low, high), by default U[-0.01, 0.01).

    Parameters
    ----------
    low : float, default -0.01
        Lower bound (included).
    high : float, default 0.01
        Upper bound (excluded); at least `low`.
    seed : int or None, default None
        Seed of this initializer's own random stream. None draws from NumPy's
        global stream, as v0.4 did (``np.random.seed`` makes it reproducible).

    Raises
    ------
    AxgraphValueError
        When ``high < low``.
    """

    draws_from_numpy_global_stream = True

    def __init__(self, low: float = -0.01, high: float = 0.01, seed: Optional[int] = None):
        super().__init__(low=low, high=high, seed=seed)


class ConstantInit(Constant):
    """v0.4's ConstantInit(val): every element equal to `val`.

    The same initializer as Constant, under v0.4's name.

    Parameters
    ----------
    val : float, default 0.0
        The value of every element.
    seed : int or None, default None
        Accepted for a uniform signature; a constant draws nothing.
    """


__all__ = ["Constant", "ConstantInit", "Gaussian", "GaussianInit", "GlorotUniform", "Initializer",
           "Kaiming", "Uniform", "UniformInit", "fans", "set_seed"]
