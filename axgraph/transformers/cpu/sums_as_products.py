"""Sums over the innermost or the outermost dims as products with a vector of ones.

NumPy reduces a row-major array over its innermost dims one short row at a time (a
layer norm's mean over 64 features of 256 tokens: 7 us) and over its outermost dims
one row added into the next at a time (a bias gradient); BLAS's matrix-vector
product makes the same sums at memory speed (1 to 2 us), accumulating no less
accurately (each sum in the same precision, over the same elements). A Sum left
unfused at this binding's sizes whose input is laid out row-major is rewritten,
after fusion, into a Dot of its input seen as a matrix with ones: (M, K) x (K,) for
the innermost dims, (R,) x (R, C) for the outermost. Innermost sums only of rows up to
`MAX_ROW` long: NumPy adds a long row pairwise, BLAS in a few running sums, whose
error grows faster (measured on float32 normals: as NumPy's at 64 and 256, 2.7x at
1024, 3x from 4096 on); over the outermost dims NumPy too adds row after row. A program
small enough to run as one C function (`native_step`) keeps its Sums: its own loops
make them.
"""
from __future__ import annotations

import math
from typing import Mapping, Optional

import numpy as np

from ... import core
from ...core.function import map_nodes
from ...core.node import Node
from . import native_step
from .schedule import Schedule, dense_layout_order, schedule_function

#: Below this many elements summed, NumPy's reduction costs no more than the product.
MIN_ELEMENTS = 1 << 12
#: The longest innermost row summed by a product (above it NumPy's pairwise sum is the
#: more accurate).
MAX_ROW = 256


def _ones(node: core.Sum, length: int) -> core.Constant:
    return core.Constant(node.element_type, (length,), np.ones(length, node.element_type.dtype))


def _as_product(node: Node, original: Node, schedule: Schedule,
                results: frozenset) -> Optional[Node]:
    """The Dot (and Reshape) standing for the Sum `original`, or None to keep it."""
    if type(original) is not core.Sum or original.element_type.name not in ("f32", "f64"):
        return None
    source = original.inputs[0]
    shape, out_shape = schedule.shapes[source], schedule.shapes[original]
    rank, axes = len(shape), tuple(sorted(original.attributes["axes"]))
    if source.element_type != original.element_type or not axes or len(axes) == rank or \
            math.prod(shape) < MIN_ELEMENTS or \
            dense_layout_order(schedule.layout.get(source)) != tuple(range(rank)):
        return None
    (x,) = node.inputs
    if axes == tuple(range(rank - len(axes), rank)):  # the innermost dims
        rows, length = math.prod(out_shape), math.prod(shape[rank - len(axes):])
        if length > MAX_ROW:
            return None
        product: Node = core.Dot(core.Reshape(x, (rows, length)), _ones(original, length),
                                 (1,), (0,))
    elif axes == tuple(range(len(axes))):  # the outermost dims
        length, columns = math.prod(shape[:len(axes)]), math.prod(out_shape)
        product = core.Dot(_ones(original, length), core.Reshape(x, (length, columns)),
                           (0,), (0,))
    else:
        return None
    if tuple(product.shape) == tuple(out_shape):
        return product
    if original in results:  # a view of the product would be copied out
        return None
    return core.Reshape(product, tuple(out_shape))


def sums_as_products(function: core.Function, bindings: Mapping[str, int]) -> core.Function:
    """`function` with its unfused Sums over row-major innermost or outermost dims as
    products with ones (module docstring); `function` itself when none is."""
    if not any(type(node) is core.Sum for node in function.nodes):
        return function
    schedule = schedule_function(function, bindings)
    if all(math.prod(shape) <= native_step.MAX_ELEMENTS for shape in schedule.shapes.values()):
        return function  # may run as one C function: its own loops sum
    results = frozenset(function.results)
    return map_nodes(function, lambda node, original:
                     _as_product(node, original, schedule, results))


__all__ = ["sums_as_products", "MIN_ELEMENTS", "MAX_ROW"]
