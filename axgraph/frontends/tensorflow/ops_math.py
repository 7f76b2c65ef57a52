"""Arithmetic: elementwise ops with NumPy broadcasting, matrix products, reductions.

TF pairs dimensions by position; the helpers shared with the ONNX importer
relabel operands onto common axes (`broadcast`, `matmul`) and put results in TF's
order, so every imported value keeps TF's layout.
"""
from __future__ import annotations

from typing import Callable, Dict, List

import numpy as np

import axgraph as ng

from ...op_graph.op import Op
from ..positional import in_order
from ..positional import truncating_cast
from .tf_positional import broadcast, matmul
from .rules import Node, Value, positions, rule

BINARY: Dict[str, Callable[[Op, Op], Op]] = {
    "Add": ng.add, "AddV2": ng.add, "Sub": ng.subtract, "Mul": ng.multiply,
    "RealDiv": ng.divide, "Div": ng.divide, "Maximum": ng.maximum, "Minimum": ng.minimum,
    "Pow": ng.power, "Greater": ng.greater, "GreaterEqual": ng.greater_equal,
    "Less": ng.less, "LessEqual": ng.less_equal, "Equal": ng.equal, "NotEqual": ng.not_equal,
    "SquaredDifference": lambda a, b: ng.square(a - b),
}

UNARY: Dict[str, Callable[[Op], Op]] = {
    "Neg": ng.negative, "Square": ng.square, "Sqrt": ng.sqrt, "Rsqrt": ng.rsqrt,
    "Exp": ng.exp, "Log": ng.log, "Tanh": ng.tanh, "Sigmoid": ng.sigmoid, "Relu": ng.relu,
    "Relu6": lambda x: ng.minimum(ng.relu(x), 6.0), "Abs": ng.absolute, "Sign": ng.sign,
    "Reciprocal": ng.reciprocal, "Inv": ng.reciprocal, "Floor": ng.floor,
    "Softplus": ng.softplus, "Log1p": ng.log1p, "Erf": ng.erf,
}

#: The gradient ops of unary ops, (y or x, dy) -> dx, as `tf.gradients` writes them.
UNARY_GRADIENTS: Dict[str, Callable[[Op, Op], Op]] = {
    "SigmoidGrad": lambda y, dy: dy * y * (1.0 - y),
    "TanhGrad": lambda y, dy: dy * (1.0 - ng.square(y)),
    "SqrtGrad": lambda y, dy: dy * 0.5 / y,
    "RsqrtGrad": lambda y, dy: dy * -0.5 * y * ng.square(y),
    "ReciprocalGrad": lambda y, dy: -dy * ng.square(y),
    "InvGrad": lambda y, dy: -dy * ng.square(y),
}


def _binary(function: Callable[[Op, Op], Op]):
    def import_binary(node: Node) -> Op:
        a, b = node.input(0), node.input(1)
        dtype = a.dtype if isinstance(a, Op) else b.dtype
        if node.op_type in ("Div", "RealDiv") and np.dtype(dtype).kind in "iu":
            raise node.unsupported("division of integer tensors computed at run time is not "
                                   "supported (only of floats)")
        return broadcast(node, function, a, b, dtype=dtype)

    return import_binary


def _unary(function: Callable[[Op], Op]):
    def import_unary(node: Node) -> Op:
        return function(node.op(0))

    return import_unary


def _unary_gradient(function: Callable[[Op, Op], Op]):
    def import_unary_gradient(node: Node) -> Op:
        y, dy = node.op(0), node.op(1)
        return function(y, ng.cast_axes(dy, y.axes) if dy.axes != y.axes else dy)

    return import_unary_gradient


for _op_type, _function in BINARY.items():
    rule(_op_type)(_binary(_function))
for _op_type, _unary_function in UNARY.items():
    rule(_op_type)(_unary(_unary_function))
for _op_type, _gradient in UNARY_GRADIENTS.items():
    rule(_op_type)(_unary_gradient(_gradient))


@rule("ReluGrad")
def import_relu_grad(node: Node) -> Op:
    """ReluGrad(gradients, features): the gradient where the feature is positive."""
    features = node.op(1)
    dy = node.op(0)
    dy = ng.cast_axes(dy, features.axes) if dy.axes != features.axes else dy
    return dy * ng.greater(features, 0.0)


#: Gradient ops given (dy, the op's features or outputs, node) -> dx.
FEATURE_GRADIENTS: Dict[str, Callable[[Op, Op, Node], Op]] = {
    "Relu6Grad": lambda dy, x, node: dy * ng.greater(x, 0.0) * ng.less(x, 6.0),
    "LeakyReluGrad": lambda dy, x, node: dy * ng.where(
        ng.greater(x, 0.0), 1.0, float(node.attr("alpha", 0.2)), dtype=x.dtype),
    "EluGrad": lambda dy, y, node: dy * ng.where(ng.greater(y, 0.0), 1.0, y + 1.0),
    "SoftplusGrad": lambda dy, x, node: dy * ng.sigmoid(x),
}


def _feature_gradient(function: Callable[[Op, Op, Node], Op]):
    def import_feature_gradient(node: Node) -> Op:
        features, dy = node.op(1), node.op(0)
        return function(ng.cast_axes(dy, features.axes) if dy.axes != features.axes else dy,
                        features, node)

    return import_feature_gradient


for _op_type, _feature_function in FEATURE_GRADIENTS.items():
    rule(_op_type)(_feature_gradient(_feature_function))


@rule("Select", "SelectV2")
def import_select(node: Node) -> Op:
    """x where the condition holds, else y (NumPy's broadcasting of the three)."""
    condition, x, y = node.input(0), node.input(1), node.input(2)
    if node.op_type == "Select" and _rank(condition) == 1 and _rank(x) > 1:
        raise node.unsupported("Select of whole rows by a vector condition is not supported")
    dtype = x.dtype if isinstance(x, Op) else y.dtype
    return broadcast(node, lambda c, a, b: ng.where(c, a, b, dtype=dtype), condition, x, y,
                     dtype=dtype)


def _rank(x: Value) -> int:
    return x.ndim if isinstance(x, np.ndarray) else len(x.axes)


@rule("AddN")
def import_add_n(node: Node) -> Op:
    result = node.op(0)
    for index in range(1, len(node.inputs)):
        result = broadcast(node, ng.add, result, node.input(index), dtype=result.dtype)
    return result


@rule("Cast")
def import_cast(node: Node) -> Op:
    dtype = np.dtype(node.attr("DstT").as_numpy_dtype)
    return truncating_cast(node.op(0), dtype)


@rule("MatMul")
def import_matmul(node: Node) -> Op:
    a, b = node.op(0), node.op(1)
    if node.attr("transpose_a", False):
        a = ng.axes_with_order(a, list(a.axes)[::-1])
    if node.attr("transpose_b", False):
        b = ng.axes_with_order(b, list(b.axes)[::-1])
    return matmul(node, a, b)


@rule("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
def import_batch_matmul(node: Node) -> Op:
    a, b = node.op(0), node.op(1)
    if node.attr("adj_x", False):
        a = _swap_last_two(a)
    if node.attr("adj_y", False):
        b = _swap_last_two(b)
    return matmul(node, a, b)


def _swap_last_two(x: Op) -> Op:
    axes = list(x.axes)
    return ng.axes_with_order(x, axes[:-2] + [axes[-1], axes[-2]])


def _all(x: Op, reduction_axes) -> Op:
    """Whether every element holds (``tf.reduce_all``): the least of them as 0 or 1."""
    return ng.not_equal(ng.min(truncating_cast(x, np.int32), reduction_axes=reduction_axes), 0)


def _any(x: Op, reduction_axes) -> Op:
    """Whether some element holds (``tf.reduce_any``): the greatest of them as 0 or 1."""
    return ng.not_equal(ng.max(truncating_cast(x, np.int32), reduction_axes=reduction_axes), 0)


REDUCTIONS: Dict[str, Callable[..., Op]] = {
    "Sum": ng.sum, "Mean": ng.mean, "Max": ng.max, "Min": ng.min, "Prod": ng.prod,
    "All": _all, "Any": _any,
}


def _reduction(function: Callable[..., Op]):
    def import_reduction(node: Node) -> Value:
        x = node.op(0)
        rank = len(x.axes)
        where = positions(node, 1, rank, "reduction_indices")
        if not where:
            return x
        reduced = [x.axes[i] for i in where]
        kept = [a for a in x.axes if a not in reduced]
        result = function(x, reduction_axes=reduced)
        if function is ng.mean and result.dtype != x.dtype:
            result = truncating_cast(result, x.dtype)
        result = in_order(result, kept)
        if node.attr("keep_dims", False):
            result = keep_dims(node, result, where)
        return result

    return import_reduction


def keep_dims(node: Node, x: Op, where: List[int]) -> Op:
    """x with a new dimension of length 1 at each of the (sorted) positions `where`."""
    for position in where:
        x = ng.expand_dims(x, node.new_axis(1, f"{node.hint}_kept"), position)
    return x


for _op_type, _reduce in REDUCTIONS.items():
    rule(_op_type)(_reduction(_reduce))


def _arg(function: Callable[..., Op]):
    def import_arg(node: Node) -> Op:
        x = node.op(0)
        where = positions(node, 1, len(x.axes), "dimension")
        if len(where) != 1:
            raise node.error(f"needs one dimension, not {len(where)}")
        axis = x.axes[where[0]]
        dtype = np.dtype(node.attr("output_type").as_numpy_dtype)
        result = function(x, reduction_axes=[axis], dtype=dtype)
        return in_order(result, [a for a in x.axes if a != axis])

    return import_arg


rule("ArgMax")(_arg(ng.argmax))
rule("ArgMin")(_arg(ng.argmin))


@rule("LeakyRelu")
def import_leaky_relu(node: Node) -> Op:
    x = node.op(0)
    return ng.maximum(x, x * float(node.attr("alpha", 0.2)))


@rule("Elu")
def import_elu(node: Node) -> Op:
    x = node.op(0)
    return ng.where(ng.greater(x, 0.0), x, ng.exp(ng.minimum(x, 0.0)) - 1.0)
