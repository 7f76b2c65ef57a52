"""Import rules for arithmetic: products, elementwise ops with torch's broadcasting,
activations, softmax, reductions, copies and constants, and the sizes traced beside them."""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np
import torch

from ..positional import in_order, truncating_cast
from .building import positions
from .errors import TorchBridgeError, node_location, node_source
from .exported_rules import ImportRule, bridge_check, import_rule, numpy_dtype
from .registry import Arguments, Check, op_name

if TYPE_CHECKING:
    from .exported import Importer

aten = torch.ops.aten


def _product(importer: Importer, a: Any, b: Any) -> Any:
    """a (..., M, K) times b (..., K, N): b relabelled so its K is a's, its N distinct,
    its batch dims a's."""
    a_axes, b_axes = list(a.axes), list(b.axes)
    contracted = a_axes[-1]
    free = importer.fresh_unless_taken(b_axes[-1], a_axes)
    relabelled = a_axes[:-2] + [contracted, free]
    if b_axes != relabelled:
        b = importer.ng.cast_axes(b, relabelled)
    result = importer.ng.dot(a, b, reduction_axes=[contracted])
    return in_order(result, a_axes[:-1] + [free])


@import_rule(aten.mm.default, aten.bmm.default)
def _mm(importer: Importer, node: Any, args: Arguments) -> Any:
    return _product(importer, args.self, args.mat2)


@import_rule(aten.addmm.default)
def _addmm(importer: Importer, node: Any, args: Arguments) -> Any:
    ng = importer.ng
    product = _product(importer, args.mat1, args.mat2)
    if args.alpha != 1:
        product = ng.multiply(product, args.alpha)
    bias = args.self if args.beta == 1 else ng.multiply(args.self, args.beta)
    return importer.elementwise(node, ng.add, product, bias)  # the weight names the result


def _elementwise_rule(function_name: str, *overloads: Any, scaled: bool = False,
                      check: Optional[Check] = None) -> None:
    def build(importer: Importer, node: Any, args: Arguments) -> Any:
        function = getattr(importer.ng, function_name)
        other = args.other
        if scaled and args.alpha != 1:
            other = importer.ng.multiply(other, args.alpha)
        return importer.elementwise(node, function, args.self, other)
    import_rule(*overloads, check=check)(build)


_elementwise_rule("add", aten.add.Tensor, aten.add.Scalar, scaled=True)
_elementwise_rule("subtract", aten.sub.Tensor, aten.sub.Scalar, scaled=True)
_elementwise_rule("multiply", aten.mul.Tensor, aten.mul.Scalar)
_elementwise_rule("divide", aten.div.Tensor, aten.div.Scalar)
_elementwise_rule("maximum", aten.maximum.default)
_elementwise_rule("minimum", aten.minimum.default)


def _unary_rule(function_name: str, *overloads: Any) -> None:
    import_rule(*overloads)(
        lambda importer, node, args: getattr(importer.ng, function_name)(args.self))


for _name, _overload in [("relu", aten.relu.default), ("tanh", aten.tanh.default),
                         ("sigmoid", aten.sigmoid.default), ("exp", aten.exp.default),
                         ("log", aten.log.default), ("negative", aten.neg.default),
                         ("sqrt", aten.sqrt.default), ("rsqrt", aten.rsqrt.default),
                         ("absolute", aten.abs.default), ("erf", aten.erf.default),
                         ("reciprocal", aten.reciprocal.default)]:
    _unary_rule(_name, _overload)


@import_rule(operator.getitem)
def _getitem(importer: Importer, node: Any, args: Arguments) -> Any:
    """One result of an op with several (None: a result not imported)."""
    picked = args.arg0[args.arg1]
    if picked is None:
        source = node.args[0]
        raise TorchBridgeError(f"{op_name(source.target)} ({node_source(source) or source.name}): "
                               f"result {args.arg1} is not imported", node_location(node))
    return picked


def _counted(importer: Importer, node: Any, x: Any, axes: Any) -> Any:
    """A size: the traced int, or where it is symbolic a float64 scalar counting `axes`
    of x when the program runs (reshapes read their sizes from the traced shapes; these
    serve arithmetic, as batch norm's n / (n - 1))."""
    traced = node.meta["val"]
    if not isinstance(traced, torch.SymInt):
        return int(traced)
    return importer.ng.tensor_size(x, reduction_axes=list(axes), dtype=np.float64)


@import_rule(aten.sym_size.int)
def _sym_size(importer: Importer, node: Any, args: Arguments) -> Any:
    x = args.self
    return _counted(importer, node, x, [x.axes[args.dim % len(x.axes)]])


@import_rule(aten.sym_numel.default, check=bridge_check(aten.sym_numel.default))
def _sym_numel(importer: Importer, node: Any, args: Arguments) -> Any:
    return _counted(importer, node, args.self, args.self.axes)


@import_rule(aten.gelu.default)
def _gelu(importer: Importer, node: Any, args: Arguments) -> Any:
    return importer.ng.gelu(args.self, approximate=args.approximate)


@import_rule(aten.pow.Tensor_Scalar)
def _power(importer: Importer, node: Any, args: Arguments) -> Any:
    if args.exponent == 2:
        return importer.ng.square(args.self)
    return importer.ng.power(args.self, args.exponent)


@import_rule(aten.clone.default, aten.alias.default, aten.detach.default)
def _same(importer: Importer, node: Any, args: Arguments) -> Any:
    return args.self


def _softmax_rule(function_name: str, overload: Any) -> None:
    def build(importer: Importer, node: Any, args: Arguments) -> Any:
        x = args.self
        axes = list(x.axes)
        result = getattr(importer.ng, function_name)(
            x, normalization_axes=[axes[args.dim % len(axes)]])
        return in_order(result, axes)
    import_rule(overload)(build)


_softmax_rule("softmax", aten._softmax.default)
_softmax_rule("log_softmax", aten._log_softmax.default)


def _reduced(importer: Importer, args: Arguments, function: Callable[..., Any]) -> Any:
    x = args.self
    axes = list(x.axes)
    picked = positions(getattr(args, "dim", None), len(axes))
    result = function(x, reduction_axes=[axes[i] for i in picked])
    kept = [a for i, a in enumerate(axes) if i not in picked]
    result = in_order(result, kept)
    if getattr(args, "keepdim", False):
        for i in picked:
            result = importer.ng.expand_dims(result, importer.axis(f"{axes[i].name}_kept", 1), i)
    return result


@import_rule(aten.sum.dim_IntList)
def _sum(importer: Importer, node: Any, args: Arguments) -> Any:
    return _reduced(importer, args, importer.ng.sum)


@import_rule(aten.mean.dim)
def _mean(importer: Importer, node: Any, args: Arguments) -> Any:
    return _reduced(importer, args, importer.ng.mean)


@import_rule(aten.amax.default)
def _amax(importer: Importer, node: Any, args: Arguments) -> Any:
    return _reduced(importer, args, importer.ng.max)


@import_rule(aten.var_mean.correction)
def _var_mean(importer: Importer, node: Any, args: Arguments) -> Any:
    """(variance, mean) with torch's `correction` (1: Bessel's)."""
    ng = importer.ng
    x = args.self
    axes = list(x.axes)
    picked = positions(getattr(args, "dim", None), len(axes))
    reduced = [axes[i] for i in picked]
    kept = [a for i, a in enumerate(axes) if i not in picked]
    mean = in_order(ng.mean(x, reduction_axes=reduced), kept)
    centred = ng.subtract(x, mean)  # mean's axes are among x's: broadcast by name
    correction = 1 if args.correction is None else args.correction
    count = ng.tensor_size(x, reduction_axes=reduced)
    variance = in_order(
        ng.divide(ng.sum(ng.square(centred), reduction_axes=reduced), count - correction), kept)
    if args.keepdim:
        for i in picked:
            one = importer.axis(f"{axes[i].name}_kept", 1)
            mean, variance = ng.expand_dims(mean, one, i), ng.expand_dims(variance, one, i)
    return variance, mean


# -- copies, constants, sizes --------------------------------------------------------------------


@import_rule(aten._to_copy.default, aten.lift_fresh_copy.default,
            check=bridge_check(aten._to_copy.default))
def _to_copy(importer: Importer, node: Any, args: Arguments) -> Any:
    """A copy in the traced element type (torch converts floats to integers toward zero)."""
    return truncating_cast(args.self, numpy_dtype(node.meta["val"]))


@import_rule(aten._assert_tensor_metadata.default)
def _asserted(importer: Importer, node: Any, args: Arguments) -> Any:
    """torch.export's record of a conversion's input type: checked when traced, no value."""
    return None


#: size arithmetic: the Python operator, and the op it is where a size is symbolic
_SIZE_ARITHMETIC = {operator.add: "add", operator.sub: "subtract", operator.mul: "multiply",
                    operator.truediv: "divide", operator.floordiv: "divide"}


def _size_arithmetic(op: Any) -> ImportRule:
    def build(importer: Importer, node: Any, args: Arguments) -> Any:
        a, b = args.arg0, args.arg1
        if not isinstance(node.meta["val"], (torch.SymInt, torch.SymFloat)):
            return node.meta["val"]  # known when traced
        result = getattr(importer.ng, _SIZE_ARITHMETIC[op])(a, b, dtype=np.float64)
        return importer.ng.floor(result) if op is operator.floordiv else result
    return build


for _op in _SIZE_ARITHMETIC:
    import_rule(_op, check=bridge_check(_op))(_size_arithmetic(_op))


def _filled(importer: Importer, node: Any, value: Any) -> Any:
    traced = node.meta["val"]
    axes = [importer.axis(f"{node.name}_{i}", int(n)) for i, n in enumerate(traced.shape)]
    return importer.ng.constant(np.full(tuple(traced.shape), value, dtype=numpy_dtype(traced)),
                                axes)


def _static_shape(node: Any) -> Optional[str]:
    traced = node.meta["val"]
    return None if all(isinstance(n, int) for n in traced.shape) else "symbolic sizes"


@import_rule(aten.full.default, check=_static_shape)
def _full(importer: Importer, node: Any, args: Arguments) -> Any:
    return _filled(importer, node, args.fill_value)


@import_rule(aten.scalar_tensor.default)
def _scalar_tensor(importer: Importer, node: Any, args: Arguments) -> Any:
    return _filled(importer, node, args.s)


def _like(value: Any) -> ImportRule:
    """A tensor of one value on the axes of the input (a symbolic batch included)."""
    def build(importer: Importer, node: Any, args: Arguments) -> Any:
        filled = args.fill_value if value is None else value
        one = importer.ng.constant(filled, dtype=numpy_dtype(node.meta["val"]))
        return importer.ng.broadcast(one, args.self.axes)
    return build


import_rule(aten.full_like.default)(_like(None))
import_rule(aten.zeros_like.default)(_like(0))
import_rule(aten.ones_like.default)(_like(1))


@import_rule(aten.arange.start_step, aten.arange.start, aten.arange.default,
            check=bridge_check(aten.arange.default))
def _arange(importer: Importer, node: Any, args: Arguments) -> Any:
    traced = node.meta["val"]
    start, step = getattr(args, "start", 0), getattr(args, "step", 1)
    values = start + step * np.arange(int(traced.shape[0]), dtype=numpy_dtype(traced))
    return importer.ng.constant(values, [importer.axis(f"{node.name}_0", len(values))])


# -- more elementwise ops ----------------------------------------------------------------------


for _name, _overload in [("log1p", aten.log1p.default), ("sin", aten.sin.default),
                         ("cos", aten.cos.default), ("tan", aten.tan.default),
                         ("sign", aten.sign.default), ("floor", aten.floor.default)]:
    _unary_rule(_name, _overload)


@import_rule(aten.logical_not.default, aten.bitwise_not.default,
            check=bridge_check(aten.bitwise_not.default))
def _not(importer: Importer, node: Any, args: Arguments) -> Any:
    return importer.ng.equal(args.self, False)


@import_rule(aten.expm1.default)
def _expm1(importer: Importer, node: Any, args: Arguments) -> Any:
    return importer.ng.exp(args.self) - 1


for _name, _packet in [("equal", aten.eq), ("not_equal", aten.ne), ("less", aten.lt),
                       ("less_equal", aten.le), ("greater", aten.gt),
                       ("greater_equal", aten.ge)]:
    _elementwise_rule(_name, _packet.Tensor, _packet.Scalar)
_elementwise_rule("power", aten.pow.Tensor_Tensor)
_elementwise_rule("divide", aten.div.Tensor_mode, check=bridge_check(aten.div.Tensor_mode))


def _both(function_name: str) -> Callable[..., Any]:
    """A logical op on booleans as arithmetic: and is a product, or a maximum."""
    def build(importer: Importer, node: Any, args: Arguments) -> Any:
        return importer.elementwise(node, getattr(importer.ng, function_name),
                                    args.self, args.other)
    return build


import_rule(aten.logical_and.default)(_both("multiply"))
import_rule(aten.logical_or.default)(_both("maximum"))
import_rule(aten.bitwise_and.Tensor, check=bridge_check(aten.bitwise_and.Tensor))(_both("multiply"))
import_rule(aten.bitwise_or.Tensor, check=bridge_check(aten.bitwise_or.Tensor))(_both("maximum"))


@import_rule(aten.where.self)
def _chosen(importer: Importer, node: Any, args: Arguments) -> Any:
    dtype = numpy_dtype(node.meta["val"])
    return importer.elementwise(
        node, lambda c, x, y: importer.ng.where(c, x, y, dtype=dtype),
        args.condition, args.self, args.other)


@import_rule(aten.clamp.default, aten.clamp_min.default, aten.clamp_max.default)
def _clamp(importer: Importer, node: Any, args: Arguments) -> Any:
    x = args.self
    low, high = getattr(args, "min", None), getattr(args, "max", None)
    if low is not None:
        x = importer.elementwise(node, importer.ng.maximum, x, low)
    if high is not None:
        x = importer.elementwise(node, importer.ng.minimum, x, high)
    return x


# -- more reductions ---------------------------------------------------------------------------


import_rule(aten.sum.default)(_sum)
import_rule(aten.mean.default)(_mean)


@import_rule(aten.amin.default)
def _amin(importer: Importer, node: Any, args: Arguments) -> Any:
    return _reduced(importer, args, importer.ng.min)


@import_rule(aten.prod.default, aten.prod.dim_int)
def _prod(importer: Importer, node: Any, args: Arguments) -> Any:
    return _reduced(importer, args, importer.ng.prod)


@import_rule(aten.var.correction)
def _var(importer: Importer, node: Any, args: Arguments) -> Any:
    return _var_mean(importer, node, args)[0]


@import_rule(aten.std.correction)
def _std(importer: Importer, node: Any, args: Arguments) -> Any:
    return importer.ng.sqrt(_var_mean(importer, node, args)[0])


@import_rule(aten.linalg_vector_norm.default, check=bridge_check(aten.linalg_vector_norm.default))
def _vector_norm(importer: Importer, node: Any, args: Arguments) -> Any:
    ng = importer.ng
    return ng.sqrt(_reduced(importer, args, lambda x, reduction_axes: ng.sum(
        ng.square(x), reduction_axes=reduction_axes)))


def _index_rule(function_name: str, overload: Any) -> None:
    """argmax / argmin over one dim (torch's int64 indices)."""
    def build(importer: Importer, node: Any, args: Arguments) -> Any:
        if args.dim is None:
            raise TorchBridgeError(f"{op_name(node.target)} over every dim is not imported",
                                   node_location(node))
        function = getattr(importer.ng, function_name)
        return _reduced(importer, args, lambda t, reduction_axes: function(
            t, reduction_axes=reduction_axes, dtype=np.int64))
    import_rule(overload)(build)


_index_rule("argmax", aten.argmax.default)
_index_rule("argmin", aten.argmin.default)


def _extremum_rule(values_name: str, index_name: str, overload: Any) -> None:
    """max.dim / min.dim: (values, indices) over one dim."""
    def build(importer: Importer, node: Any, args: Arguments) -> Any:
        values, index = getattr(importer.ng, values_name), getattr(importer.ng, index_name)
        return (_reduced(importer, args, values),
                _reduced(importer, args, lambda t, reduction_axes: index(
                    t, reduction_axes=reduction_axes, dtype=np.int64)))
    import_rule(overload)(build)


_extremum_rule("max", "argmax", aten.max.dim)
_extremum_rule("min", "argmin", aten.min.dim)


@import_rule(aten.any.dim, aten.any.dims, aten.any.default)
def _any(importer: Importer, node: Any, args: Arguments) -> Any:
    ng = importer.ng
    counted = _reduced(importer, args, lambda x, reduction_axes: ng.sum(
        ng.multiply(ng.not_equal(x, 0), 1, dtype=np.int64), reduction_axes=reduction_axes))
    return ng.greater(counted, 0)


__all__: list = []
