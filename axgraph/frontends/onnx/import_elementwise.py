"""Elementwise ONNX operators, with NumPy's positional broadcasting.

ONNX pairs dimensions by position from the right; axgraph pairs axes by
identity. `broadcast` relabels every operand onto the axes of the broadcast
result (`positional.broadcast_axes`), dropping the length-1 dimensions that
broadcast, then calls the axgraph function, which pairs the axes by identity.
"""
from __future__ import annotations

import operator
from typing import Callable, Dict

import numpy as np

import axgraph as ng

from ...dims import Dim, dim_max, dim_min
from ...shapes.prover import provably_different
from ...op_graph.op import Op
from ..positional import aligned, broadcast_axes, in_order, truncating_cast
from .import_rules import Node, Value, rule

UNARY: Dict[str, Callable[[Op], Op]] = {
    "Relu": ng.relu, "Sigmoid": ng.sigmoid, "Tanh": ng.tanh, "Erf": ng.erf, "Exp": ng.exp,
    "Log": ng.log, "Sqrt": ng.sqrt, "Neg": ng.negative, "Abs": ng.absolute,
    "Reciprocal": ng.reciprocal, "Floor": ng.floor, "Sin": ng.sin, "Cos": ng.cos,
    "Tan": ng.tan, "Sign": ng.sign, "Softplus": ng.softplus,
}

BINARY: Dict[str, Callable[[Op, Op], Op]] = {
    "Add": ng.add, "Sub": ng.subtract, "Mul": ng.multiply, "Div": ng.divide, "Pow": ng.power,
    "Equal": ng.equal, "Less": ng.less, "Greater": ng.greater, "LessOrEqual": ng.less_equal,
    "GreaterOrEqual": ng.greater_equal, "And": ng.multiply, "Or": ng.maximum,
    "Xor": ng.not_equal,
}

#: Operators of any number of operands, folded pairwise.
VARIADIC: Dict[str, Callable[[Op, Op], Op]] = {
    "Max": ng.maximum, "Min": ng.minimum, "Sum": ng.add,
}


#: What shape arithmetic computes on arrays of sizes (ONNX's integer Div truncates; sizes
#: are never negative, so it is a floor division).
SIZE_ARITHMETIC: Dict[str, Callable] = {
    "Add": operator.add, "Sub": operator.sub, "Mul": operator.mul, "Div": operator.floordiv,
    "Mod": operator.mod, "Max": dim_max, "Min": dim_min, "Neg": operator.neg,
    "Equal": lambda a, b: _sizes_equal(a, b),
}


class _Undecided(Exception):
    """Two sizes whose equality depends on the values fed."""


def _sizes_equal(a, b) -> bool:
    """Whether two sizes are equal, for every value of their variables (or _Undecided)."""
    if not isinstance(a, Dim) and not isinstance(b, Dim):
        return bool(a == b)
    if bool(a == b):
        return True
    if provably_different(a, b):
        return False
    raise _Undecided(f"{a} == {b}")


def size_arithmetic(node: Node):
    """The op on arrays of sizes (`Shape` of a tensor with symbolic lengths), computed now;
    None if an operand is computed at run time."""
    operands = [node.inputs[i] for i in range(len(node.inputs)) if node.has_input(i)]
    if not all(isinstance(x, np.ndarray) for x in operands):
        return None
    function = SIZE_ARITHMETIC.get(node.op_type)
    if function is None:
        raise node.unsupported(f"{node.op_type} of symbolic sizes is not supported")
    try:
        result = np.asarray(np.frompyfunc(function, len(operands), 1)(*operands), dtype=object)
    except _Undecided as undecided:
        raise node.unsupported(f"{undecided} depends on the sizes fed; give them with "
                               f"import_model(..., sizes={{...}})") from None
    values = result.reshape(-1).tolist()
    if all(isinstance(v, bool) for v in values):
        return result.astype(np.bool_)
    return result


def broadcast(node: Node, function: Callable[..., Op], *operands, dtype=None) -> Op:
    """function(*operands) with NumPy broadcasting by position; its axes in ONNX order.

    Arrays among the operands become constants of `dtype` (their own if None); sizes
    (symbolic) become ops reading them when the model runs.
    """
    operands = tuple(_sizes_read(node, x, dtype) for x in operands)
    out_axes = broadcast_axes(node.builder, operands, node.proto.output[0])
    result = function(*(aligned(x, out_axes, dtype) for x in operands))
    return in_order(result, out_axes)


def _sizes_read(node: Node, x, dtype):
    """x, or if it holds symbolic sizes, an op reading them at run time (of `dtype`)."""
    if isinstance(x, np.ndarray) and x.dtype == object:
        size = node.builder.as_op(x, node.proto.output[0])
        return size if dtype is None else truncating_cast(size, dtype)
    return x


def _common_dtype(operands) -> np.dtype:
    """The element type ONNX gives every operand (that of the first op among them)."""
    for x in operands:
        if isinstance(x, Op):
            return x.dtype
    return operands[0].dtype


def _unary(function: Callable[[Op], Op]):
    def import_unary(node: Node) -> Value:
        if node.op_type in SIZE_ARITHMETIC and isinstance(node.input(0), np.ndarray):
            return size_arithmetic(node)
        return function(node.op(0))

    return import_unary


def _binary(function: Callable[[Op, Op], Op]):
    def import_binary(node: Node) -> Value:
        sizes = size_arithmetic(node) if node.op_type in SIZE_ARITHMETIC else None
        if sizes is not None:
            return sizes
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
    def import_variadic(node: Node) -> Value:
        sizes = size_arithmetic(node)
        if sizes is not None:
            return sizes
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


@rule("Mod")
def import_mod(node: Node) -> Value:
    sizes = size_arithmetic(node)
    if sizes is not None:
        return sizes
    operands = [node.input(0), node.input(1)]
    dtype = _common_dtype(operands)
    if np.dtype(dtype).kind != "f":
        raise node.unsupported("Mod of integer tensors computed at run time is not supported "
                               "(only of floats, and of sizes)")
    if node.attr("fmod", 0):  # the sign of the dividend (C's fmod)
        return broadcast(node, lambda x, y: x - y * (ng.sign(x / y) * ng.floor(
            ng.absolute(x / y))), *operands, dtype=dtype)
    return broadcast(node, lambda x, y: x - y * ng.floor(x / y), *operands, dtype=dtype)


@rule("Not")
def import_not(node: Node) -> Op:
    return ng.equal(node.op(0), False)


@rule("Where")
def import_where(node: Node) -> Value:
    condition, x, y = node.input(0), node.input(1), node.input(2)
    if isinstance(condition, np.ndarray) and isinstance(x, np.ndarray) and isinstance(
            y, np.ndarray):  # choosing among sizes
        return np.where(condition.astype(np.bool_), x, y)
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


@rule("PRelu")
def import_prelu(node: Node) -> Op:
    x = node.op(0)
    return broadcast(node, lambda x, slope: ng.where(ng.less(x, 0), x * slope, x), x,
                     node.input(1), dtype=x.dtype)


def _elu(x: Op, alpha: float) -> Op:
    return ng.where(ng.greater(x, 0), x, alpha * (ng.exp(x) - 1))


@rule("Elu")
def import_elu(node: Node) -> Op:
    return _elu(node.op(0), float(node.attr("alpha", 1.0)))


@rule("Selu")
def import_selu(node: Node) -> Op:
    alpha = float(node.attr("alpha", 1.67326319217681884765625))
    gamma = float(node.attr("gamma", 1.05070102214813232421875))
    return gamma * _elu(node.op(0), alpha)


def _hard_sigmoid(x: Op, alpha: float, beta: float) -> Op:
    return ng.minimum(ng.maximum(alpha * x + beta, 0.0), 1.0)


@rule("HardSigmoid")
def import_hard_sigmoid(node: Node) -> Op:
    return _hard_sigmoid(node.op(0), float(node.attr("alpha", 0.2)),
                         float(node.attr("beta", 0.5)))


@rule("HardSwish")
def import_hard_swish(node: Node) -> Op:
    x = node.op(0)
    return x * _hard_sigmoid(x, 1 / 6, 0.5)


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
def import_cast(node: Node) -> Value:
    import onnx

    dtype = onnx.helper.tensor_dtype_to_np_dtype(int(node.attr("to")))
    value = node.input(0)
    if isinstance(value, np.ndarray) and np.dtype(dtype).kind in "iu":
        return value  # sizes (symbolic), whole numbers already: they stay shape arithmetic
    return truncating_cast(node.op(0), dtype)


@rule("Identity")
def import_identity(node: Node) -> Op:
    return node.op(0)
