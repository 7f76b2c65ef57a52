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
from ..types import ElementType, Shape
from ._checks import (arity, int_tuple, positions, require_kind, require_nonnegative,
                      same_element_type, shape_attr)

_GEOMETRY = ("strides", "dilation", "padding_below", "padding_above")


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
    """data (N, C, S...) convolved with filters (K, C, R...) -> (N, K, P...).

    Cross-correlation, as in every DL framework: no filter flip.
    """

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
    """The adjoint of Convolution for its data: delta (N, K, P...) -> data_shape."""

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
    """The adjoint of Convolution for its filters: delta (N, K, P...) -> filters_shape."""

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
    """x (N, C, S...) -> columns (N, P..., C, R...): every window's inputs, side by side.

    With it a convolution is one matrix product: columns viewed as (N*P, C*R)
    times filters viewed as (K, C*R) transposed. The filter gradient reads the
    same columns, so a graph that computes both can share them.
    """

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
    """columns (N, P..., C, R...) -> x (N, C, S...): Im2Col's adjoint, overlaps summed.

    Each column entry is added at the input position its window offset read;
    entries that fell on padding are dropped. With it the data gradient of a
    convolution is one matrix product, delta (N*P, K) x filters (K, C*R), into
    the columns, then this scatter-add.
    """

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
    """x (N, C, S...) -> (N, C, P...): one value per window position."""

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
    """Maximum of each window; padding never wins."""


class AvgPool(_Pool):
    """Mean of each window over the real (unpadded) inputs it covers."""

    accepts = "float"


class MaxPoolBackprop(Node):
    """Adjoint of MaxPool: each delta goes to the first maximum of its window in x."""

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
    """Adjoint of AvgPool: each delta shared equally by the real inputs of its window."""

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
    """Slices of `params` along `axis` picked by integer `indices` (a lookup table).

    Result: params.shape[:axis] + indices.shape + params.shape[axis+1:].
    Indices out of [0, params.shape[axis]) are an error at run time.
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
    """`inputs` plus `updates` added at `indices` along `axis` (repeats accumulate).

    The adjoint of Gather: updates have Gather's result shape.
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
    """1 where the position along `one_hot_axis` equals x's value, else 0 (x's type).

    `shape` is the result shape; without `one_hot_axis` it must equal x's.
    x may be integral or floating; values that are not whole numbers in
    [0, shape[one_hot_axis]) are an error at run time.
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
