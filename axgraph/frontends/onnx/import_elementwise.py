"""Elementwise ONNX operators, with NumPy's positional broadcasting.

ONNX pairs dimensions by position from the right; axgraph pairs axes by
identity. `broadcast` relabels every operand onto the axes of the broadcast
result (`_onnx_axes.broadcast_axes`), dropping the length-1 dimensions that
broadcast, then calls the axgraph function, which pairs the axes by identity.
"""
from __future__ import annotations

from typing import Callable, Dict

import numpy as np

import axgraph as ng

from ...op_graph.op import Op
from ._onnx_axes import aligned, broadcast_axes, in_order
from .import_rules import Node, rule

UNARY: Dict[str, Callable[[Op], Op]] = {
    "Relu": ng.relu, "Sigmoid": ng.sigmoid, "Tanh": ng.tanh, "Erf": ng.erf, "Exp": ng.exp,
    "Log": ng.log, "Sqrt": ng.sqrt, "Neg": ng.negative, "Abs": ng.absolute,
    "Reciprocal": ng.reciprocal, "Floor": ng.floor, "Sin": ng.sin, "Cos": ng.cos,
    "Tan": ng.tan, "Sign": ng.sign, "Softplus": ng.softplus,
}

BINARY: Dict[str, Callable[[Op, Op], Op]] = {
    "Add": ng.add, "Sub": ng.subtract, "Mul": ng.multiply, "Div": ng.divide, "Pow": ng.power,
    "Equal": ng.equal, "Less": ng.less, "Greater": ng.greater, "LessOrEqual": ng.less_equal,
    "GreaterOrEqual": ng.greater_equal, "And": ng.multiply,
}

#: Operators of any number of operands, folded pairwise.
VARIADIC: Dict[str, Callable[[Op, Op], Op]] = {
    "Max": ng.maximum, "Min": ng.minimum, "Sum": ng.add,
}


def broadcast(node: Node, function: Callable[..., Op], *operands, dtype=None) -> Op:
    """function(*operands) with NumPy broadcasting by position; its axes in ONNX order.

    Arrays among the operands become constants of `dtype` (their own if None).
    """
    out_axes = broadcast_axes(node.builder, operands, node.proto.output[0])
    result = function(*(aligned(x, out_axes, dtype) for x in operands))
    return in_order(result, out_axes)


def _common_dtype(operands) -> np.dtype:
    """The element type ONNX gives every operand (that of the first op among them)."""
    for x in operands:
        if isinstance(x, Op):
            return x.dtype
    return operands[0].dtype


def _unary(function: Callable[[Op], Op]):
    def import_unary(node: Node) -> Op:
        return function(node.op(0))

    return import_unary


def _binary(function: Callable[[Op, Op], Op]):
    def import_binary(node: Node) -> Op:
        operands = [node.input(0), node.input(1)]
        dtype = _common_dtype(operands)
        if node.op_type == "Pow":
            dtype = operands[0].dtype  # ONNX: the exponent may be of another type
            if isinstance(operands[1], Op) and operands[1].dtype != dtype:
                operands[1] = ng.multiply(operands[1], 1, dtype=dtype)
        if node.op_type == "Div" and np.dtype(dtype).kind in "iu":
            raise node.unsupported("Div of integer tensors computed at run time is not "
                                   "supported (only of floats)")
        return broadcast(node, function, *operands, dtype=dtype)

    return import_binary


def _variadic(function: Callable[[Op, Op], Op]):
    def import_variadic(node: Node) -> Op:
        operands = [node.input(i) for i in range(len(node.inputs))]
        dtype = _common_dtype(operands)
        return broadcast(node, lambda *xs: _fold(function, xs), *operands, dtype=dtype)

    return import_variadic


def _fold(function: Callable[[Op, Op], Op], xs) -> Op:
    result = xs[0]
    for x in xs[1:]:
        result = function(result, x)
    return ng.multiply(result, 1) if len(xs) == 1 else result


for _op_type, _unary_function in UNARY.items():
    rule(_op_type)(_unary(_unary_function))
for _op_type, _binary_function in BINARY.items():
    rule(_op_type)(_binary(_binary_function))
for _op_type, _binary_function in VARIADIC.items():
    rule(_op_type)(_variadic(_binary_function))


@rule("Not")
def import_not(node: Node) -> Op:
    return ng.equal(node.op(0), False)


@rule("Where")
def import_where(node: Node) -> Op:
    condition, x, y = node.input(0), node.input(1), node.input(2)
    dtype = _common_dtype([x, y])
    out_axes = broadcast_axes(node.builder, [condition, x, y], node.proto.output[0])
    result = ng.where(aligned(condition, out_axes), aligned(x, out_axes, dtype),
                      aligned(y, out_axes, dtype))
    return in_order(result, out_axes)


@rule("Gelu")
def import_gelu(node: Node) -> Op:
    node.refuse_attribute("approximate", ("none", "tanh"))
    return ng.gelu(node.op(0), approximate=node.attr("approximate", "none"))


@rule("LeakyRelu")
def import_leaky_relu(node: Node) -> Op:
    x = node.op(0)
    return ng.where(ng.greater(x, 0), x, x * float(node.attr("alpha", 0.01)))


@rule("Clip")
def import_clip(node: Node) -> Op:
    x = node.op(0)
    low = node.input(1) if node.has_input(1) else node.attr("min")
    high = node.input(2) if node.has_input(2) else node.attr("max")
    for bound, function in ((low, ng.maximum), (high, ng.minimum)):
        if bound is not None:
            if isinstance(bound, Op):
                raise node.unsupported("Clip bounds computed at run time are not supported")
            x = function(x, ng.constant(np.asarray(bound, x.dtype).reshape(()), dtype=x.dtype))
    return x


@rule("Cast")
def import_cast(node: Node) -> Op:
    import onnx

    dtype = onnx.helper.tensor_dtype_to_np_dtype(int(node.attr("to")))
    return cast(node.op(0), dtype)


def cast(x: Op, dtype) -> Op:
    """x converted to `dtype` as ONNX Cast converts (floats to ints truncate)."""
    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return x
    if dtype == np.bool_:
        return ng.not_equal(x, 0)
    if dtype.kind in "iu" and x.dtype.kind == "f":
        x = ng.sign(x) * ng.floor(ng.absolute(x))  # toward zero
    return ng.multiply(x, 1, dtype=dtype)


@rule("Identity")
def import_identity(node: Node) -> Op:
    return node.op(0)
