"""Rules for ATen's contractions and reductions: matrix products, sums and means, maxima,
variances, softmax and their gradients."""
from __future__ import annotations

from typing import Any, Optional

import torch

from ... import core
from .building import broadcast_to, convert, count, fill, keep_dims, positions
from .registry import rule

aten = torch.ops.aten


@rule(aten.mm.default)
def _mm(builder: Any, node: Any, args: Any) -> core.Node:
    return core.Dot(args.self, args.mat2)


@rule(aten.bmm.default)
def _bmm(builder: Any, node: Any, args: Any) -> core.Node:
    return core.Dot(args.self, args.mat2, (2,), (1,), (0,), (0,))


@rule(aten.addmm.default)
def _addmm(builder: Any, node: Any, args: Any) -> core.Node:
    """beta * bias + alpha * (mat1 @ mat2), bias broadcast to the product's shape."""
    et, shape = builder.out_type(node)
    product = core.Dot(args.mat1, args.mat2)
    if args.alpha != 1:
        product = core.Multiply(product, fill(et, shape, args.alpha))
    bias = broadcast_to(convert(args.self, et), shape)
    if args.beta != 1:
        bias = core.Multiply(bias, fill(et, shape, args.beta))
    return core.Add(bias, product)


def _reduction(op: Any, *overloads: Any, mean: bool = False) -> None:
    def build(builder: Any, node: Any, args: Any) -> core.Node:
        et, shape = builder.out_type(node)
        x = convert(args.self, et)
        axes = positions(getattr(args, "dim", None), x.rank)
        result = op(x, axes) if axes else x
        if mean and axes:
            result = core.Divide(result, broadcast_to(count(x.shape, axes, et), result.shape))
        if getattr(args, "keepdim", False):
            result = keep_dims(result, x.shape, axes)
        return result
    rule(*overloads)(build)


_reduction(core.Sum, aten.sum.dim_IntList, aten.sum.default)
_reduction(core.Sum, aten.mean.dim, aten.mean.default, mean=True)
_reduction(core.Max, aten.amax.default)
_reduction(core.Min, aten.amin.default)


@rule(aten.any.dim, aten.any.dims, aten.any.default)
def _any(builder: Any, node: Any, args: Any) -> core.Node:
    x = convert(args.self, core.boolean)
    axes = positions(getattr(args, "dim", None), x.rank)
    if not axes:
        return x
    counted = core.Sum(core.Convert(x, core.i64), axes)
    result = core.Greater(counted, fill(core.i64, counted.shape, 0))
    return keep_dims(result, x.shape, axes) if getattr(args, "keepdim", False) else result


def _variance(builder: Any, args: Any, et: core.ElementType) -> tuple:
    """(variance, mean) over the dims, with torch's `correction` (1: Bessel's)."""
    x = convert(args.self, et)
    axes = positions(args.dim, x.rank)
    correction = 1 if args.correction is None else args.correction
    total = core.Sum(x, axes)
    mean = core.Divide(total, broadcast_to(count(x.shape, axes, et), total.shape))
    kept = keep_dims(mean, x.shape, axes)
    centered = core.Subtract(x, broadcast_to(kept, x.shape))
    squares = core.Sum(core.Multiply(centered, centered), axes)
    divisor = core.Subtract(count(x.shape, axes, et), fill(et, (), correction))
    variance = core.Divide(squares, broadcast_to(divisor, squares.shape))
    if args.keepdim:
        return keep_dims(variance, x.shape, axes), kept
    return variance, mean


@rule(aten.var_mean.correction)
def _var_mean(builder: Any, node: Any, args: Any) -> tuple:
    return _variance(builder, args, builder.out_type(node, 0)[0])


@rule(aten.var.correction)
def _var(builder: Any, node: Any, args: Any) -> core.Node:
    return _variance(builder, args, builder.out_type(node)[0])[0]


@rule(aten.std.correction)
def _std(builder: Any, node: Any, args: Any) -> core.Node:
    return core.Sqrt(_variance(builder, args, builder.out_type(node)[0])[0])


_reduction(core.Prod, aten.prod.default, aten.prod.dim_int)


def _index_reduction(op: Any, *overloads: Any) -> None:
    """argmax / argmin over one dim (or over everything, row-major)."""
    def build(builder: Any, node: Any, args: Any) -> core.Node:
        x = args.self
        if args.dim is None:
            flat = core.Reshape(x, core.Shape((_elements(x),)))
            result = op(flat, (0,))
            return core.Reshape(result, builder.out_type(node)[1]) if args.keepdim else result
        axis = args.dim % x.rank
        result = op(x, (axis,))
        return keep_dims(result, x.shape, (axis,)) if args.keepdim else result
    rule(*overloads)(build)


def _elements(x: core.Node) -> Any:
    total: Any = 1
    for d in x.shape:
        total = total * d
    return total


_index_reduction(core.ArgMax, aten.argmax.default)
_index_reduction(core.ArgMin, aten.argmin.default)


def _extremum_with_index(values_op: Any, index_op: Any, overload: Any) -> None:
    """max.dim / min.dim: (values, indices) over one dim."""
    def build(builder: Any, node: Any, args: Any) -> tuple:
        x = args.self
        axis = args.dim % x.rank
        values, indices = values_op(x, (axis,)), index_op(x, (axis,))
        if args.keepdim:
            return keep_dims(values, x.shape, (axis,)), keep_dims(indices, x.shape, (axis,))
        return values, indices
    rule(overload)(build)


_extremum_with_index(core.Max, core.ArgMax, aten.max.dim)
_extremum_with_index(core.Min, core.ArgMin, aten.min.dim)


def _euclidean(node: Any) -> Optional[str]:
    order = node.args[1] if len(node.args) > 1 else node.kwargs.get("ord", 2)
    return None if order == 2 else f"norms of order {order}"


@rule(aten.linalg_vector_norm.default, check=_euclidean)
def _vector_norm(builder: Any, node: Any, args: Any) -> core.Node:
    et, shape = builder.out_type(node)
    x = convert(args.self, et)
    axes = positions(args.dim, x.rank)
    result = core.Sqrt(core.Sum(core.Multiply(x, x), axes))
    return keep_dims(result, x.shape, axes) if args.keepdim else result


def _same_type_softmax(node: Any) -> Optional[str]:
    return "half_to_float softmax" if node.args[2] is True else None


@rule(aten._softmax.default, check=_same_type_softmax)
def _softmax(builder: Any, node: Any, args: Any) -> core.Node:
    return core.Softmax(args.self, (args.dim % args.self.rank,))


@rule(aten._log_softmax.default, check=_same_type_softmax)
def _log_softmax(builder: Any, node: Any, args: Any) -> core.Node:
    return core.LogSoftmax(args.self, (args.dim % args.self.rank,))


@rule(aten._softmax_backward_data.default)
def _softmax_backward(builder: Any, node: Any, args: Any) -> core.Node:
    """y * (dy - sum(dy * y)): the core's SoftmaxBackprop."""
    return core.SoftmaxBackprop(args.grad_output, args.output,
                                (args.dim % args.output.rank,))


@rule(aten._log_softmax_backward_data.default)
def _log_softmax_backward(builder: Any, node: Any, args: Any) -> core.Node:
    """dy - exp(y) * sum(dy): the core's LogSoftmaxBackprop."""
    return core.LogSoftmaxBackprop(args.grad_output, args.output,
                                   (args.dim % args.output.rank,))


__all__: list = []
