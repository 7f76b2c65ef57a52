"""Windowed and indexed ops: convolution, pooling, Gather, ScatterAdd, OneHot.

Feature maps are laid out (N, C, spatial...) and filters (K, C, spatial...),
as in nGraph; lowering moves axes into this order with Transpose. Each
spatial dim has a stride, a dilation (filters only) and padding below and
above, and yields (n + below + above - span) // stride + 1 outputs where
span = dilation * (window - 1) + 1. The backprop ops are the adjoints that
autodiff of the axes graph lowers to.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

from ...dims import DimLike
from ...errors import ShapeError
from ..node import Node
from ..tensor_types import ElementType, Shape
from ._checks import (arity, int_tuple, positions, require_kind, require_nonnegative,
                      same_element_type, shape_attr)

_GEOMETRY = ("strides", "dilation", "padding_below", "padding_above")

#: Docstring entries of the window geometry (axgraph/core/op_docs.py): each has one
#: entry per spatial dim.
_WINDOW_DOC = """
Parameters
----------
window : sequence of int
    The window's length along each spatial dim, each >= 1.
strides : sequence of int, optional
    The step between neighbouring windows along each spatial dim, each >= 1
    (default: all 1).
dilation : sequence of int, optional
    The step between neighbouring taps of a window along each spatial dim,
    each >= 1 (default: all 1, a dense window).
padding_below, padding_above : sequence of int, optional
    The zeros added before and after each spatial dim, each >= 0 (default:
    none).
"""


def _geometry(op: Node, attributes: dict, spatial: int, with_dilation: bool = True) -> dict:
    """Normalized strides / dilation / padding for `spatial` dims (defaults 1, 1, 0, 0)."""
    result = {"strides": int_tuple(op, attributes["strides"], spatial, "strides", 1, default=1),
              "padding_below": int_tuple(op, attributes["padding_below"], spatial,
                                         "padding_below", 0, default=0),
              "padding_above": int_tuple(op, attributes["padding_above"], spatial,
                                         "padding_above", 0, default=0)}
    if with_dilation:
        result["dilation"] = int_tuple(op, attributes["dilation"], spatial, "dilation", 1, default=1)
    return result


def window_outputs(op: Node, spatial_in: Sequence[DimLike], window: Sequence[DimLike],
                   attributes) -> Tuple[DimLike, ...]:
    """Output length of each spatial dim (see the module docstring)."""
    dilation = attributes.get("dilation", (1,) * len(window))
    result = []
    for i, (n, w, s, d, below, above) in enumerate(zip(
            spatial_in, window, attributes["strides"], dilation, attributes["padding_below"],
            attributes["padding_above"])):
        span = d * (w - 1) + 1
        padded = n + below + above
        require_nonnegative(op, padded - span, f"spatial dim {i}: the window spans {span} but "
                            f"the padded input has only {padded}")
        result.append((padded - span) // s + 1)
    return tuple(result)


def _feature_rank(op: Node, shape: Shape, what: str) -> int:
    if len(shape) < 3:
        raise op._fail(ShapeError, f"{what} {shape} must be (N, C, spatial...) with at least "
                       f"one spatial dim")
    return len(shape) - 2


def _same(op: Node, expected: Shape, actual: Shape, what: str) -> None:
    if Shape(expected) != actual:
        raise op._fail(ShapeError, f"{what} has shape {actual}, expected {Shape(expected)}")


class Convolution(Node):
    """data (N, C, S...) convolved with filters (K, C, R...), giving (N, K, P...).

    Cross-correlation, as in every deep-learning framework: the filters are not
    flipped. Each output channel k sums, over the C channels and the window, data
    times filters[k]; the output has P = (S + below + above - span) // stride + 1
    positions along each spatial dim, where span = dilation * (R - 1) + 1.

    Parameters
    ----------
    data : Node
        The feature maps (N, C, S...): batch, channels, then one or more spatial
        dims; a numeric (not boolean) element type.
    filters : Node
        (K, C, R...): output channels, data's channels, then the window's length
        along each spatial dim; data's element type.

    Returns
    -------
    Convolution
        A node of data's element type and shape (N, K, P...).

    Raises
    ------
    DTypeError
        data and filters differ in element type, or theirs is boolean.
    ShapeError
        data has fewer than 3 dims; filters do not have data's rank or channels;
        `strides`, `dilation` or the padding does not have one entry per
        spatial dim, or has one below its minimum; or a window spans more than
        its padded input.
    """

    _doc_shared = _WINDOW_DOC
    _attributes = _GEOMETRY

    def __init__(self, data: Node, filters: Node, strides=None, dilation=None,
                 padding_below=None, padding_above=None, name: Optional[str] = None):
        super().__init__((data, filters), dict(strides=strides, dilation=dilation,
                                               padding_below=padding_below,
                                               padding_above=padding_above), name)

    def _normalize(self, attributes: dict) -> dict:
        data, _ = arity(self, 2)
        return _geometry(self, attributes, _feature_rank(self, data.shape, "data"))

    def _infer(self) -> Tuple[ElementType, Shape]:
        data, filters = self.inputs
        et = same_element_type(self, (data, filters))
        require_kind(self, data, "numeric")
        return et, conv_output_shape(self, data.shape, filters.shape)


def conv_output_shape(op: Node, data_shape: Shape, filters_shape: Shape) -> Shape:
    """(N, K, P...) of convolving data_shape with filters_shape under op's geometry."""
    if len(filters_shape) != len(data_shape):
        raise op._fail(ShapeError, f"filters {filters_shape} must have the rank of data "
                       f"{data_shape}: (K, C, spatial...)")
    if filters_shape[1] != data_shape[1]:
        raise op._fail(ShapeError, f"channels differ: data {data_shape} has {data_shape[1]}, "
                       f"filters {filters_shape} have {filters_shape[1]}")
    spatial = window_outputs(op, data_shape[2:], filters_shape[2:], op.attributes)
    return Shape((data_shape[0], filters_shape[0]) + spatial)


class ConvolutionBackpropData(Node):
    """The adjoint of Convolution for its data: delta (N, K, P...) back to (N, C, S...).

    Each delta element is spread over the window it was computed from, weighted
    by the filters, and the contributions are summed: the gradient of a
    convolution with respect to its data, given the gradient of its output.

    Parameters
    ----------
    data_shape : Shape or sequence of int, Dim or str
        The shape (N, C, S...) of the convolution's data: the result's shape.
    filters : Node
        The convolution's filters (K, C, R...); a numeric (not boolean) element
        type.
    delta : Node
        The gradient of the convolution's output, (N, K, P...); filters' element
        type.

    Returns
    -------
    ConvolutionBackpropData
        A node of filters' element type and shape `data_shape`.

    Raises
    ------
    DTypeError
        filters and delta differ in element type, or theirs is boolean.
    ShapeError
        `data_shape` is invalid or has fewer than 3 dims; `strides`, `dilation`
        or the padding does not have one entry per spatial dim, or has one below
        its minimum; filters do not fit `data_shape`; or delta does not have the
        convolution's output shape.
    """

    _doc_shared = _WINDOW_DOC
    _attributes = ("data_shape",) + _GEOMETRY
    _hidden = frozenset({"data_shape"})

    def __init__(self, data_shape, filters: Node, delta: Node, strides=None, dilation=None,
                 padding_below=None, padding_above=None, name: Optional[str] = None):
        super().__init__((filters, delta), dict(data_shape=data_shape, strides=strides,
                                                dilation=dilation, padding_below=padding_below,
                                                padding_above=padding_above), name)

    def _normalize(self, attributes: dict) -> dict:
        arity(self, 2)
        data_shape = shape_attr(self, attributes["data_shape"], "data_shape")
        result = _geometry(self, attributes, _feature_rank(self, data_shape, "data_shape"))
        result["data_shape"] = data_shape
        return result

    def _infer(self) -> Tuple[ElementType, Shape]:
        filters, delta = self.inputs
        et = same_element_type(self, (filters, delta))
        require_kind(self, filters, "numeric")
        data_shape = self.attributes["data_shape"]
        _same(self, conv_output_shape(self, data_shape, filters.shape), delta.shape, "delta")
        return et, data_shape


class ConvolutionBackpropFilters(Node):
    """The adjoint of Convolution for its filters: delta (N, K, P...) to (K, C, R...).

    Each filter element gets the sum, over the batch and the output positions, of
    delta times the data it met: the gradient of a convolution with respect to its
    filters, given the gradient of its output.

    Parameters
    ----------
    data : Node
        The convolution's data (N, C, S...); a numeric (not boolean) element type.
    filters_shape : Shape or sequence of int, Dim or str
        The shape (K, C, R...) of the convolution's filters: the result's shape.
    delta : Node
        The gradient of the convolution's output, (N, K, P...); data's element
        type.

    Returns
    -------
    ConvolutionBackpropFilters
        A node of data's element type and shape `filters_shape`.

    Raises
    ------
    DTypeError
        data and delta differ in element type, or theirs is boolean.
    ShapeError
        data has fewer than 3 dims; `strides`, `dilation` or the padding does
        not have one entry per spatial dim, or has one below its minimum;
        `filters_shape` is invalid or does not fit data; or delta does not have
        the convolution's output shape.
    """

    _doc_shared = _WINDOW_DOC
    _attributes = ("filters_shape",) + _GEOMETRY
    _hidden = frozenset({"filters_shape"})

    def __init__(self, data: Node, filters_shape, delta: Node, strides=None, dilation=None,
                 padding_below=None, padding_above=None, name: Optional[str] = None):
        super().__init__((data, delta), dict(filters_shape=filters_shape, strides=strides,
                                             dilation=dilation, padding_below=padding_below,
                                             padding_above=padding_above), name)

    def _normalize(self, attributes: dict) -> dict:
        data, _ = arity(self, 2)
        result = _geometry(self, attributes, _feature_rank(self, data.shape, "data"))
        result["filters_shape"] = shape_attr(self, attributes["filters_shape"], "filters_shape")
        return result

    def _infer(self) -> Tuple[ElementType, Shape]:
        data, delta = self.inputs
        et = same_element_type(self, (data, delta))
        require_kind(self, data, "numeric")
        filters_shape = self.attributes["filters_shape"]
        _same(self, conv_output_shape(self, data.shape, filters_shape), delta.shape, "delta")
        return et, filters_shape


# -- pooling ----------------------------------------------------------------------------

_POOL = ("window", "strides", "padding_below", "padding_above")


class Im2Col(Node):
    """x (N, C, S...) to columns (N, P..., C, R...): every window's inputs, side by side.

    With it a convolution is one matrix product: the columns viewed as
    (N*P, C*R) times the filters viewed as (K, C*R), transposed. The filters'
    gradient reads the same columns, so a graph that computes both can share
    them. Inputs on padding are 0.

    Parameters
    ----------
    x : Node
        The feature maps (N, C, S...), with one or more spatial dims; a numeric
        (not boolean) element type.

    Returns
    -------
    Im2Col
        A node of x's element type and shape (N, P..., C, R...), where R... is
        `window` and P... the number of window positions along each spatial dim.

    Raises
    ------
    DTypeError
        x is boolean.
    ShapeError
        x has fewer than 3 dims; `window`, `strides`, `dilation` or the padding
        does not have one entry per spatial dim, or has one below its minimum;
        or a window spans more than its padded input.
    """

    _doc_shared = _WINDOW_DOC
    _attributes = ("window",) + _GEOMETRY

    def __init__(self, x: Node, window, strides=None, dilation=None, padding_below=None,
                 padding_above=None, name: Optional[str] = None):
        super().__init__((x,), dict(window=window, strides=strides, dilation=dilation,
                                    padding_below=padding_below, padding_above=padding_above),
                         name)

    def _normalize(self, attributes: dict) -> dict:
        (x,) = arity(self, 1)
        spatial = _feature_rank(self, x.shape, "input")
        result = _geometry(self, attributes, spatial)
        result["window"] = int_tuple(self, attributes["window"], spatial, "window", 1)
        return result

    def _infer(self) -> Tuple[ElementType, Shape]:
        (x,) = self.inputs
        require_kind(self, x, "numeric")
        window = self.attributes["window"]
        positions = window_outputs(self, x.shape[2:], window, self.attributes)
        return x.element_type, Shape((x.shape[0],) + positions + (x.shape[1],) + window)


class Col2Im(Node):
    """columns (N, P..., C, R...) back to x (N, C, S...): Im2Col's adjoint, overlaps summed.

    Each column entry is added at the input position its window offset read;
    entries that fell on padding are dropped. With it the data gradient of a
    convolution is one matrix product, delta (N*P, K) times filters (K, C*R),
    into the columns, then this scatter-add.

    Parameters
    ----------
    columns : Node
        (N, P..., C, R...), as Im2Col of an x of shape `x_shape` gives; a numeric
        (not boolean) element type.
    x_shape : Shape or sequence of int, Dim or str
        The shape (N, C, S...) of that x: the result's shape.

    Returns
    -------
    Col2Im
        A node of columns' element type and shape `x_shape`.

    Raises
    ------
    DTypeError
        columns is boolean.
    ShapeError
        `x_shape` is invalid or has fewer than 3 dims; `window`, `strides`,
        `dilation` or the padding does not have one entry per spatial dim, or has
        one below its minimum; or columns does not have the shape Im2Col gives
        for `x_shape`.
    """

    _doc_shared = _WINDOW_DOC
    _attributes = ("x_shape", "window") + _GEOMETRY
    _hidden = frozenset({"x_shape"})

    def __init__(self, columns: Node, x_shape, window, strides=None, dilation=None,
                 padding_below=None, padding_above=None, name: Optional[str] = None):
        super().__init__((columns,), dict(x_shape=x_shape, window=window, strides=strides,
                                          dilation=dilation, padding_below=padding_below,
                                          padding_above=padding_above), name)

    def _normalize(self, attributes: dict) -> dict:
        arity(self, 1)
        x_shape = shape_attr(self, attributes["x_shape"], "x_shape")
        spatial = _feature_rank(self, x_shape, "x_shape")
        result = _geometry(self, attributes, spatial)
        result["window"] = int_tuple(self, attributes["window"], spatial, "window", 1)
        result["x_shape"] = x_shape
        return result

    def _infer(self) -> Tuple[ElementType, Shape]:
        (columns,) = self.inputs
        require_kind(self, columns, "numeric")
        x_shape, window = self.attributes["x_shape"], self.attributes["window"]
        positions = window_outputs(self, x_shape[2:], window, self.attributes)
        _same(self, (x_shape[0],) + positions + (x_shape[1],) + window, columns.shape, "columns")
        return columns.element_type, x_shape


def _pool_attributes(op: Node, attributes: dict, x_shape: Shape) -> dict:
    spatial = _feature_rank(op, x_shape, "input")
    window = int_tuple(op, attributes["window"], spatial, "window", 1)
    result = _geometry(op, attributes, spatial, with_dilation=False)
    for w, below, above in zip(window, result["padding_below"], result["padding_above"]):
        if below >= w or above >= w:
            raise op._fail(ShapeError, f"padding {result['padding_below']}/"
                           f"{result['padding_above']} must be smaller than the window {window}")
    result["window"] = window
    return result


def pool_output_shape(op: Node, x_shape: Shape) -> Shape:
    spatial = window_outputs(op, x_shape[2:], op.attributes["window"], op.attributes)
    return Shape(tuple(x_shape[:2]) + spatial)


class _Pool(Node):
    """x (N, C, S...) to (N, C, P...): one value per window position (MaxPool, AvgPool).

    Each channel is pooled on its own; there is no dilation. The output has
    P = (S + below + above - R) // stride + 1 positions along each spatial dim,
    for a window of length R.

    Parameters
    ----------
    x : Node
        The feature maps (N, C, S...), with one or more spatial dims; {accepts}
        element type.
    padding_below, padding_above : sequence of int, optional
        The positions added before and after each spatial dim, each >= 0 and
        smaller than the window (default: none). They never count as values.

    Returns
    -------
    {op}
        A node of x's element type and shape (N, C, P...).

    Raises
    ------
    DTypeError
        x does not have {accepts} element type.
    ShapeError
        x has fewer than 3 dims; `window`, `strides` or the padding does not have
        one entry per spatial dim, or has one below its minimum; padding is not
        smaller than the window; or a window spans more than its padded input.
    """

    _doc_shared = _WINDOW_DOC
    _attributes = _POOL
    accepts = "numeric"

    def __init__(self, x: Node, window, strides=None, padding_below=None, padding_above=None,
                 name: Optional[str] = None):
        super().__init__((x,), dict(window=window, strides=strides, padding_below=padding_below,
                                    padding_above=padding_above), name)

    def _normalize(self, attributes: dict) -> dict:
        (x,) = arity(self, 1)
        return _pool_attributes(self, attributes, x.shape)

    def _infer(self) -> Tuple[ElementType, Shape]:
        (x,) = self.inputs
        require_kind(self, x, self.accepts)
        return x.element_type, pool_output_shape(self, x.shape)


class MaxPool(_Pool):
    """The maximum of each window of x.

    Padding never wins: a window's maximum is over the real inputs it covers.
    """


class AvgPool(_Pool):
    """The mean of each window of x.

    The mean is over the real (unpadded) inputs each window covers, so windows at
    the borders are not diluted by padding.
    """

    accepts = "float"


class MaxPoolBackprop(Node):
    """The adjoint of MaxPool: each delta goes to the first maximum of its window in x.

    The gradient of a max pool with respect to its input, given the gradient of
    its output; overlapping windows add up.

    Parameters
    ----------
    x : Node
        The pool's input (N, C, S...); a numeric (not boolean) element type.
    delta : Node
        The gradient of the pool's output, (N, C, P...); x's element type.
    padding_below, padding_above : sequence of int, optional
        The pool's padding before and after each spatial dim, each >= 0 and
        smaller than the window (default: none).

    Returns
    -------
    MaxPoolBackprop
        A node of x's element type and shape.

    Raises
    ------
    DTypeError
        x and delta differ in element type, or theirs is boolean.
    ShapeError
        x has fewer than 3 dims; `window`, `strides` or the padding does not have
        one entry per spatial dim, or has one below its minimum; padding is not
        smaller than the window; or delta does not have the pool's output shape.
    """

    _doc_shared = _WINDOW_DOC
    _attributes = _POOL

    def __init__(self, x: Node, delta: Node, window, strides=None, padding_below=None,
                 padding_above=None, name: Optional[str] = None):
        super().__init__((x, delta), dict(window=window, strides=strides,
                                          padding_below=padding_below,
                                          padding_above=padding_above), name)

    def _normalize(self, attributes: dict) -> dict:
        x, _ = arity(self, 2)
        return _pool_attributes(self, attributes, x.shape)

    def _infer(self) -> Tuple[ElementType, Shape]:
        x, delta = self.inputs
        et = same_element_type(self, (x, delta))
        require_kind(self, x, "numeric")
        _same(self, pool_output_shape(self, x.shape), delta.shape, "delta")
        return et, x.shape


class AvgPoolBackprop(Node):
    """The adjoint of AvgPool: each delta shared equally by the real inputs of its window.

    The gradient of an average pool with respect to its input, given the gradient
    of its output; overlapping windows add up, padding takes no share.

    Parameters
    ----------
    x_shape : Shape or sequence of int, Dim or str
        The shape (N, C, S...) of the pool's input: the result's shape.
    delta : Node
        The gradient of the pool's output, (N, C, P...); a floating-point element
        type.
    padding_below, padding_above : sequence of int, optional
        The pool's padding before and after each spatial dim, each >= 0 and
        smaller than the window (default: none).

    Returns
    -------
    AvgPoolBackprop
        A node of delta's element type and shape `x_shape`.

    Raises
    ------
    DTypeError
        delta is not of a floating-point type.
    ShapeError
        `x_shape` is invalid or has fewer than 3 dims; `window`, `strides` or the
        padding does not have one entry per spatial dim, or has one below its
        minimum; padding is not smaller than the window; or delta does not have
        the pool's output shape.
    """

    _doc_shared = _WINDOW_DOC
    _attributes = ("x_shape",) + _POOL
    _hidden = frozenset({"x_shape"})

    def __init__(self, x_shape, delta: Node, window, strides=None, padding_below=None,
                 padding_above=None, name: Optional[str] = None):
        super().__init__((delta,), dict(x_shape=x_shape, window=window, strides=strides,
                                        padding_below=padding_below,
                                        padding_above=padding_above), name)

    def _normalize(self, attributes: dict) -> dict:
        arity(self, 1)
        x_shape = shape_attr(self, attributes["x_shape"], "x_shape")
        result = _pool_attributes(self, attributes, x_shape)
        result["x_shape"] = x_shape
        return result

    def _infer(self) -> Tuple[ElementType, Shape]:
        (delta,) = self.inputs
        require_kind(self, delta, "float")
        x_shape = self.attributes["x_shape"]
        _same(self, pool_output_shape(self, x_shape), delta.shape, "delta")
        return delta.element_type, x_shape


# -- indexing ---------------------------------------------------------------------------

def _indexed_shape(shape: Shape, axis: int, indices: Shape) -> Shape:
    return Shape(tuple(shape[:axis]) + tuple(indices) + tuple(shape[axis + 1:]))


class Gather(Node):
    """Slices of `params` along `axis`, picked by integer `indices`: a table lookup.

    The result is params.shape[:axis] + indices.shape + params.shape[axis+1:]:
    each index selects one slice of params, so an embedding lookup is
    Gather(table, ids).

    Parameters
    ----------
    params : Node
        The table: any element type and shape.
    indices : Node
        Integers in [0, params.shape[axis]), any shape.
    axis : int, optional
        The dim of params that indices pick along (default 0).

    Returns
    -------
    Gather
        A node of params' element type and shape
        params.shape[:axis] + indices.shape + params.shape[axis+1:].

    Raises
    ------
    DTypeError
        indices are not of an integer type.
    ShapeError
        `axis` is not a position of params' dims.
    ExecutionError
        When the compiled function runs: an index lies outside
        [0, params.shape[axis]) (nothing wraps around).

    Examples
    --------
    >>> from axgraph import core
    >>> table = core.Parameter(core.f32, (100, 16))
    >>> ids = core.Parameter(core.i32, (8, 5))
    >>> core.Gather(table, ids).shape
    Shape([8, 5, 16])
    """

    _attributes = ("axis",)

    def __init__(self, params: Node, indices: Node, axis: int = 0, name: Optional[str] = None):
        super().__init__((params, indices), {"axis": axis}, name)

    def _normalize(self, attributes: dict) -> dict:
        params, _ = arity(self, 2)
        (axis,) = positions(self, attributes["axis"], params.rank, "axis")
        return {"axis": axis}

    def _infer(self) -> Tuple[ElementType, Shape]:
        params, indices = self.inputs
        require_kind(self, indices, "integral", "indices")
        return params.element_type, _indexed_shape(params.shape, self.attributes["axis"],
                                                   indices.shape)


class ScatterAdd(Node):
    """`inputs` with `updates` added at `indices` along `axis`; repeated indices accumulate.

    The adjoint of Gather: updates have the shape Gather of `inputs` with these
    indices would give, and each is added to the slice its index picks.

    Parameters
    ----------
    inputs : Node
        The values added to: a numeric (not boolean) element type, any shape.
    indices : Node
        Integers in [0, inputs.shape[axis]), any shape.
    updates : Node
        inputs' element type, of shape
        inputs.shape[:axis] + indices.shape + inputs.shape[axis+1:].
    axis : int, optional
        The dim of inputs that indices pick along (default 0).

    Returns
    -------
    ScatterAdd
        A node of inputs' element type and shape.

    Raises
    ------
    DTypeError
        indices are not of an integer type; inputs and updates differ in element
        type; or theirs is boolean.
    ShapeError
        `axis` is not a position of inputs' dims, or updates do not have the
        shape above.
    ExecutionError
        When the compiled function runs: an index lies outside
        [0, inputs.shape[axis]).
    """

    _attributes = ("axis",)

    def __init__(self, inputs: Node, indices: Node, updates: Node, axis: int = 0,
                 name: Optional[str] = None):
        super().__init__((inputs, indices, updates), {"axis": axis}, name)

    def _normalize(self, attributes: dict) -> dict:
        inputs, _, _ = arity(self, 3)
        (axis,) = positions(self, attributes["axis"], inputs.rank, "axis")
        return {"axis": axis}

    def _infer(self) -> Tuple[ElementType, Shape]:
        inputs, indices, updates = self.inputs
        require_kind(self, indices, "integral", "indices")
        et = same_element_type(self, (inputs, updates))
        require_kind(self, inputs, "numeric")
        _same(self, _indexed_shape(inputs.shape, self.attributes["axis"], indices.shape),
              updates.shape, "updates")
        return et, inputs.shape


class OneHot(Node):
    """1 where the position along `one_hot_axis` equals x's value, else 0, in x's type.

    Turns class labels into the one-hot vectors a loss compares with scores: x's
    shape is `shape` without dim `one_hot_axis`, and along that dim each result
    row holds a single 1, at the position x gives.

    Parameters
    ----------
    x : Node
        The labels: a numeric (not boolean) element type, whole numbers in
        [0, shape[one_hot_axis]).
    shape : Shape or sequence of int, Dim or str
        The result's shape: x's shape with the one-hot dim inserted.
    one_hot_axis : int
        The position of the one-hot dim in `shape`.

    Returns
    -------
    OneHot
        A node of x's element type and shape `shape`.

    Raises
    ------
    DTypeError
        x is boolean.
    ShapeError
        A dim of `shape` is invalid, `one_hot_axis` is not a position of it, or
        x's shape is not `shape` without that dim.
    ExecutionError
        When the compiled function runs: a value of x is not a whole number, or
        lies outside [0, shape[one_hot_axis]).
    """

    _attributes = ("shape", "one_hot_axis")
    _hidden = frozenset({"shape"})

    def __init__(self, x: Node, shape, one_hot_axis: int, name: Optional[str] = None):
        super().__init__((x,), {"shape": shape, "one_hot_axis": one_hot_axis}, name)

    def _normalize(self, attributes: dict) -> dict:
        arity(self, 1)
        shape = shape_attr(self, attributes["shape"])
        (axis,) = positions(self, attributes["one_hot_axis"], len(shape), "one_hot_axis")
        return {"shape": shape, "one_hot_axis": axis}

    def _infer(self) -> Tuple[ElementType, Shape]:
        (x,) = self.inputs
        require_kind(self, x, "numeric")
        shape, axis = self.attributes["shape"], self.attributes["one_hot_axis"]
        _same(self, Shape(d for i, d in enumerate(shape) if i != axis), x.shape, "x")
        return x.element_type, shape
