"""Nodes without inputs: Parameter, Constant, DimValue and the random draws."""
from __future__ import annotations

import math
from typing import Optional, Tuple

import numpy as np

from ...dims import DimLike
from ...dtypes import kind_of
from ...errors import DTypeError, ShapeError
from ..node import Node
from ..tensor_types import ElementType, Shape, as_dim, i64
from ._checks import element_type_attr, scalar_attr, shape_attr

#: Docstring entries the leaves share (axgraph/core/op_docs.py): they have no inputs.
_LEAF_DOC = """
Parameters
----------
element_type : ElementType, str or numpy.dtype
    The element type: `core.f32`, its name "f32" or `numpy.float32`.
shape : Shape or sequence of int, Dim or str
    The dims, outermost first: ints >= 0, `Dim` expressions, or their text
    ("2*N + 1").

Raises
------
GraphError
    `name` is not a non-empty string.
"""


class Parameter(Node):
    """A tensor the caller supplies: one argument of a Function call.

    Its shape may hold size variables (`(N, 3)`): each call binds them from the
    shape of the array passed for it, so one compiled function serves every N.
    Arrays passed must have exactly its element type; nothing is converted.

    Returns
    -------
    {op}
        A node of `element_type` and `shape`.

    Raises
    ------
    DTypeError
        `element_type` names no core element type.
    ShapeError
        A dim of `shape` is negative, or not an int, a Dim or a dim expression.

    Examples
    --------
    >>> from axgraph import core
    >>> x = core.Parameter(core.f32, ("N", 3), name="x")
    >>> x
    <Parameter x: f32[N, 3]>
    """

    _doc_shared = _LEAF_DOC
    _attributes = ("element_type", "shape")
    _hidden = frozenset(_attributes)

    def __init__(self, element_type, shape, name: Optional[str] = None):
        super().__init__((), {"element_type": element_type, "shape": shape}, name)

    def _normalize(self, attributes: dict) -> dict:
        return {"element_type": element_type_attr(self, attributes["element_type"]),
                "shape": shape_attr(self, attributes["shape"])}

    def _infer(self) -> Tuple[ElementType, Shape]:
        return self.attributes["element_type"], self.attributes["shape"]


def _exact_values(op: Node, et: ElementType, value: np.ndarray) -> np.ndarray:
    """`value` as `et`, refusing values that would change (floats into floats may round)."""
    if kind_of(value.dtype) not in "biuf":
        raise op._fail(DTypeError, f"value of dtype {value.dtype} is not numeric")
    if et.is_boolean:
        if value.dtype.kind != "b":
            raise op._fail(DTypeError, "a boolean constant needs boolean values")
        return value.astype(et.dtype)
    if et.is_float:
        return value.astype(et.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        converted = value.astype(et.dtype)
        exact = value.dtype.kind == "b" or bool(np.all(converted == value))
    if kind_of(value.dtype) == "f" and not np.all(np.isfinite(value)):
        exact = False
    if not exact:
        raise op._fail(DTypeError, f"values are not all representable in {et}")
    return converted


class Constant(Node):
    """A tensor fixed when the graph is built; a scalar value fills the whole shape.

    Values must fit the element type exactly (1.5 is refused for i32, 300 for
    u8); floats round to the nearest value of a float type. A scalar may fill a
    symbolic shape; an array must have the constant's own (static) shape.

    Parameters
    ----------
    value : scalar or array_like
        Numbers (booleans for the boolean type; booleans are 0 and 1 in a
        numeric one): a scalar, which fills `shape`, or an array of shape `shape`.
        Kept, converted and read-only, as `node.value`.

    Returns
    -------
    Constant
        A node of `element_type` and `shape`.

    Raises
    ------
    DTypeError
        `element_type` names no core element type; `value` is not numeric or
        boolean; a boolean constant is given numbers; or a value does not fit an
        integer type exactly (out of its range, with a fraction, or not finite).
    ShapeError
        A dim of `shape` is invalid, or an array `value` does not have shape `shape`.
    """

    _doc_shared = _LEAF_DOC
    _attributes = ("element_type", "shape", "value")
    _hidden = frozenset({"element_type", "shape"})

    def __init__(self, element_type, shape, value, name: Optional[str] = None):
        super().__init__((), {"element_type": element_type, "shape": shape, "value": value}, name)

    def _normalize(self, attributes: dict) -> dict:
        et = element_type_attr(self, attributes["element_type"])
        shape = shape_attr(self, attributes["shape"])
        value = np.asarray(attributes["value"])
        if value.ndim and tuple(value.shape) != tuple(shape):
            raise self._fail(ShapeError, f"value has shape {list(value.shape)}, but the constant "
                             f"has shape {shape} (a scalar fills any shape)")
        value = _exact_values(self, et, value)
        value.setflags(write=False)
        return {"element_type": et, "shape": shape, "value": value}

    def _infer(self) -> Tuple[ElementType, Shape]:
        return self.attributes["element_type"], self.attributes["shape"]


class DimValue(Node):
    """A scalar holding the value of a dim expression, known when the function runs.

    It lets a graph compute with a size variable (the mean over a batch of N
    divides by N): each call evaluates `dim` under the sizes its arguments bind.

    Parameters
    ----------
    dim : int, Dim or str
        The dim expression (`N`, `2*N + 1`, or its text); its size variables must
        be bound by the shapes of the Function's parameters.
    element_type : ElementType, str or numpy.dtype, optional
        The scalar's element type, a numeric one (default `core.i64`).

    Returns
    -------
    DimValue
        A node of `element_type` and shape [] (a scalar).

    Raises
    ------
    ShapeError
        `dim` is a negative int, or neither an int nor a dim expression.
    DTypeError
        `element_type` names no core element type, or is boolean.
    """

    _doc_shared = _LEAF_DOC
    _attributes = ("dim", "element_type")
    _hidden = frozenset({"element_type"})

    def __init__(self, dim: DimLike, element_type=i64, name: Optional[str] = None):
        super().__init__((), {"dim": dim, "element_type": element_type}, name)

    def _normalize(self, attributes: dict) -> dict:
        try:
            dim = as_dim(attributes["dim"], "dim")
        except (TypeError, ValueError) as error:
            raise self._fail(ShapeError, str(error)) from None
        et = element_type_attr(self, attributes["element_type"])
        return {"dim": dim, "element_type": et}

    def _infer(self) -> Tuple[ElementType, Shape]:
        et = self.attributes["element_type"]
        if not et.is_numeric:
            raise self._fail(DTypeError, f"element type {et} cannot hold a size")
        return et, Shape(())


class _Random(Node):
    """A fresh draw of a distribution on every call; `seed` makes the sequence repeat.

    Parameters
    ----------
    element_type : ElementType, str or numpy.dtype
        The element type of the draws, a floating-point one.
    seed : int, optional
        A non-negative int: every function compiled from the graph then draws the
        same sequence (its first call the same values, its second call the same
        next ones, ...). None (default): an unrepeatable stream.

    Returns
    -------
    {op}
        A node of `element_type` and `shape`.

    Raises
    ------
    DTypeError
        `element_type` is not a floating-point type, or a parameter of the
        distribution is not a number.
    """

    _doc_shared = _LEAF_DOC
    _parameter_names: Tuple[str, str] = ("a", "b")
    seed: Optional[int]

    def __init__(self, element_type, shape, a: float, b: float, seed: Optional[int] = None,
                 name: Optional[str] = None):
        first, second = self._parameter_names
        super().__init__((), {"element_type": element_type, "shape": shape, first: a, second: b,
                              "seed": seed}, name)

    def _normalize(self, attributes: dict) -> dict:
        et = element_type_attr(self, attributes["element_type"])
        if not et.is_float:
            raise self._fail(DTypeError, f"draws need a floating-point element type, not {et}")
        shape = shape_attr(self, attributes["shape"])
        first, second = self._parameter_names
        a = scalar_attr(self, et, attributes[first], first)
        b = scalar_attr(self, et, attributes[second], second)
        seed = attributes["seed"]
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise self._fail(ShapeError, f"seed must be a non-negative int or None, not {seed!r}")
        if not (math.isfinite(a) and math.isfinite(b)):
            raise self._fail(ShapeError, f"{first} and {second} must be finite, not {a}, {b}")
        self._check_parameters(a, b)
        return {"element_type": et, "shape": shape, first: a, second: b, "seed": seed}

    def _check_parameters(self, a: float, b: float) -> None:
        pass

    def _infer(self) -> Tuple[ElementType, Shape]:
        return self.attributes["element_type"], self.attributes["shape"]


class RandomUniform(_Random):
    """Draws uniformly distributed in [low, high), new ones on every call.

    Parameters
    ----------
    low, high : float
        The bounds of the interval (defaults 0 and 1), finite, with low <= high.

    Raises
    ------
    ShapeError
        A dim of `shape` is invalid, low or high is not finite, low is above
        high, or `seed` is not a non-negative int or None.
    """

    _attributes = ("element_type", "shape", "low", "high", "seed")
    _hidden = frozenset({"element_type", "shape"})
    _parameter_names = ("low", "high")

    def __init__(self, element_type, shape, low: float = 0.0, high: float = 1.0,
                 seed: Optional[int] = None, name: Optional[str] = None):
        super().__init__(element_type, shape, low, high, seed, name)

    def _check_parameters(self, a: float, b: float) -> None:
        if a > b:
            raise self._fail(ShapeError, f"low {a} is above high {b}")


class RandomNormal(_Random):
    """Draws normally distributed with mean `mean` and standard deviation `stddev`, new ones on every call.

    Parameters
    ----------
    mean : float
        The mean of the distribution (default 0), finite.
    stddev : float
        Its standard deviation (default 1), finite and >= 0.

    Raises
    ------
    ShapeError
        A dim of `shape` is invalid, mean or stddev is not finite, stddev is
        negative, or `seed` is not a non-negative int or None.
    """

    _attributes = ("element_type", "shape", "mean", "stddev", "seed")
    _hidden = frozenset({"element_type", "shape"})
    _parameter_names = ("mean", "stddev")

    def __init__(self, element_type, shape, mean: float = 0.0, stddev: float = 1.0,
                 seed: Optional[int] = None, name: Optional[str] = None):
        super().__init__(element_type, shape, mean, stddev, seed, name)

    def _check_parameters(self, a: float, b: float) -> None:
        if b < 0:
            raise self._fail(ShapeError, f"stddev {b} is negative")
