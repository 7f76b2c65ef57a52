"""Rules for ATen's elementwise ops: arithmetic, comparisons, activations, selection.

Torch promotes element types and broadcasts implicitly; each rule reads the promoted
type and the result shape from the traced node and says both explicitly in core ops.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import torch

from ... import core
from ...passes.bridge import Gelu
from .building import broadcast_to, convert, elementwise, fill, tensor
from .registry import rule

aten = torch.ops.aten


def _operand_value(builder: Any, raw: Any) -> Any:
    """A traced operand for torch.result_type: a fake tensor, or the number itself."""
    return builder.meta(raw) if isinstance(raw, torch.fx.Node) else raw


def _compute_type(builder: Any, node: Any, names: tuple, args: Any) -> core.ElementType:
    """The element type torch computes a comparison in (its inputs' promoted type)."""
    first, second = (_operand_value(builder, args.raw(n)) for n in names)
    dtype = (torch.result_type(first, second) if isinstance(first, torch.Tensor)
             else torch.result_type(second, first))
    from .types import element_type
    et = element_type(dtype)
    assert et is not None
    return et


def _unary(op: Any, *overloads: Any) -> None:
    def build(builder: Any, node: Any, args: Any) -> core.Node:
        et, shape = builder.out_type(node)
        return op(convert(args.self, et))
    rule(*overloads)(build)


for _op, _overloads in [
        (core.Negative, (aten.neg.default,)), (core.Exp, (aten.exp.default,)),
        (core.Log, (aten.log.default,)), (core.Log1p, (aten.log1p.default,)),
        (core.Sqrt, (aten.sqrt.default,)), (core.Rsqrt, (aten.rsqrt.default,)),
        (core.Abs, (aten.abs.default,)), (core.Sign, (aten.sign.default,)),
        (core.Sin, (aten.sin.default,)), (core.Cos, (aten.cos.default,)),
        (core.Tan, (aten.tan.default,)), (core.Tanh, (aten.tanh.default,)),
        (core.Sigmoid, (aten.sigmoid.default,)), (core.Erf, (aten.erf.default,)),
        (core.Floor, (aten.floor.default,)),
        (core.Not, (aten.logical_not.default, aten.bitwise_not.default))]:
    _unary(_op, *_overloads)


def _binary(op: Any, *overloads: Any, scaled: bool = False) -> None:
    def build(builder: Any, node: Any, args: Any) -> core.Node:
        et, shape = builder.out_type(node)
        other = args.other
        if scaled and args.alpha != 1:
            other = elementwise(core.Multiply, et, shape, other, args.alpha)
        return elementwise(op, et, shape, args.self, other)
    rule(*overloads)(build)


_binary(core.Add, aten.add.Tensor, aten.add.Scalar, scaled=True)
_binary(core.Subtract, aten.sub.Tensor, aten.sub.Scalar, scaled=True)
_binary(core.Multiply, aten.mul.Tensor, aten.mul.Scalar)
_binary(core.Maximum, aten.maximum.default)
_binary(core.Minimum, aten.minimum.default)
_binary(core.And, aten.logical_and.default)
_binary(core.Or, aten.logical_or.default)


def _bitwise_on_booleans(node: Any) -> Optional[str]:
    if node.meta["val"].dtype != torch.bool:
        return "bitwise ops are compiled on booleans only"
    return None


rule(aten.bitwise_and.Tensor, check=_bitwise_on_booleans)(
    lambda builder, node, args: elementwise(core.And, core.boolean,
                                            builder.out_type(node)[1], args.self, args.other))
rule(aten.bitwise_or.Tensor, check=_bitwise_on_booleans)(
    lambda builder, node, args: elementwise(core.Or, core.boolean,
                                            builder.out_type(node)[1], args.self, args.other))


def _true_division(node: Any) -> Optional[str]:
    mode = node.kwargs.get("rounding_mode")
    return None if mode is None else f"rounding_mode={mode!r} is not compiled"


@rule(aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode, check=_true_division)
def _divide(builder: Any, node: Any, args: Any) -> core.Node:
    et, shape = builder.out_type(node)
    return elementwise(core.Divide, et, shape, args.self, args.other)


@rule(aten.reciprocal.default)
def _reciprocal(builder: Any, node: Any, args: Any) -> core.Node:
    et, shape = builder.out_type(node)
    return elementwise(core.Divide, et, shape, 1, args.self)


@rule(aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor)
def _power(builder: Any, node: Any, args: Any) -> core.Node:
    et, shape = builder.out_type(node)
    if args.exponent == 2:  # exact, as torch computes it
        x = broadcast_to(tensor(args.self, et, shape), shape)
        return core.Multiply(x, x)
    return elementwise(core.Power, et, shape, args.self, args.exponent)


def _comparison(op: Any, *overloads: Any) -> None:
    def build(builder: Any, node: Any, args: Any) -> core.Node:
        compute = _compute_type(builder, node, ("self", "other"), args)
        shape = builder.out_type(node)[1]
        return elementwise(op, compute, shape, args.self, args.other)
    rule(*overloads)(build)


for _op, _name in [(core.Equal, "eq"), (core.NotEqual, "ne"), (core.Less, "lt"),
                   (core.LessEq, "le"), (core.Greater, "gt"), (core.GreaterEq, "ge")]:
    _packet = getattr(aten, _name)
    _comparison(_op, _packet.Tensor, _packet.Scalar)


@rule(aten.where.self)
def _where(builder: Any, node: Any, args: Any) -> core.Node:
    et, shape = builder.out_type(node)
    condition = broadcast_to(convert(args.condition, core.boolean), shape)
    return core.Select(condition, broadcast_to(tensor(args.self, et, shape), shape),
                       broadcast_to(tensor(args.other, et, shape), shape))


@rule(aten.clamp.default, aten.clamp_min.default, aten.clamp_max.default)
def _clamp(builder: Any, node: Any, args: Any) -> core.Node:
    et, shape = builder.out_type(node)
    x = broadcast_to(convert(args.self, et), shape)
    low = getattr(args, "min", None)
    high = getattr(args, "max", None)
    if low is not None:
        x = elementwise(core.Maximum, et, shape, x, low)
    if high is not None:
        x = elementwise(core.Minimum, et, shape, x, high)
    return x


@rule(aten.relu.default)
def _relu(builder: Any, node: Any, args: Any) -> core.Node:
    et, shape = builder.out_type(node)
    return core.Maximum(args.self, fill(et, shape, 0))


@rule(aten.threshold_backward.default)
def _threshold_backward(builder: Any, node: Any, args: Any) -> core.Node:
    """The gradient of relu (threshold 0): zero where the input was at or below it."""
    et, shape = builder.out_type(node)
    x = args.self
    below = core.LessEq(x, fill(x.element_type, x.shape, args.threshold))
    return core.Select(broadcast_to(below, shape), fill(et, shape, 0),
                       broadcast_to(convert(args.grad_output, et), shape))


@rule(aten.gelu.default)
def _gelu(builder: Any, node: Any, args: Any) -> core.Node:
    """GELU: the tanh approximation is the bridge op Gelu; the exact form uses erf."""
    x = args.self
    if args.approximate == "tanh":
        return Gelu(x)
    et, shape = x.element_type, x.shape
    half = core.Multiply(fill(et, shape, 0.5), x)
    scaled = core.Multiply(x, fill(et, shape, 1.0 / math.sqrt(2.0)))
    return core.Multiply(half, core.Add(fill(et, shape, 1.0), core.Erf(scaled)))


@rule(aten.expm1.default)
def _expm1(builder: Any, node: Any, args: Any) -> core.Node:
    """exp(x) - 1, exact near 0 too: there as 2t / (1 - t) with t = tanh(x / 2)."""
    x = args.self
    et, shape = x.element_type, x.shape
    t = core.Tanh(core.Multiply(x, fill(et, shape, 0.5)))
    near_zero = core.Divide(core.Add(t, t), core.Subtract(fill(et, shape, 1.0), t))
    small = core.Less(core.Abs(x), fill(et, shape, 0.5))
    return core.Select(small, near_zero, core.Subtract(core.Exp(x), fill(et, shape, 1.0)))


@rule(aten.scalar_tensor.default)
def _scalar_tensor(builder: Any, node: Any, args: Any) -> core.Node:
    et, shape = builder.out_type(node)
    return fill(et, shape, args.s)


@rule(aten.full.default, aten.full_like.default)
def _full(builder: Any, node: Any, args: Any) -> core.Node:
    et, shape = builder.out_type(node)
    return fill(et, shape, args.fill_value)


def _static_range(node: Any) -> Optional[str]:
    return None if isinstance(node.meta["val"].shape[0], int) else "a range of symbolic length"


@rule(aten.arange.start_step, aten.arange.start, aten.arange.default, check=_static_range)
def _arange(builder: Any, node: Any, args: Any) -> core.Node:
    et, shape = builder.out_type(node)
    start = getattr(args, "start", 0)
    step = getattr(args, "step", 1)
    return core.Constant(et, shape, start + step * np.arange(shape[0], dtype=et.dtype))


@rule(aten.zeros_like.default)
def _zeros_like(builder: Any, node: Any, args: Any) -> core.Node:
    et, shape = builder.out_type(node)
    return fill(et, shape, 0)


@rule(aten.ones_like.default)
def _ones_like(builder: Any, node: Any, args: Any) -> core.Node:
    et, shape = builder.out_type(node)
    return fill(et, shape, 1)


def _plain_copy(node: Any) -> Optional[str]:
    if node.kwargs.get("memory_format") not in (None, torch.contiguous_format,
                                                 torch.preserve_format):
        return "only contiguous copies are compiled"
    return None


@rule(aten._to_copy.default, aten.clone.default, aten.alias.default, aten.detach.default,
      aten.lift_fresh_copy.default, check=_plain_copy)
def _copy(builder: Any, node: Any, args: Any) -> core.Node:
    """Copies and aliases: values are immutable in the core, so only the type may change."""
    et, _ = builder.out_type(node)
    return convert(args.self, et)


@rule(aten.copy.default)
def _functional_copy(builder: Any, node: Any, args: Any) -> core.Node:
    et, shape = builder.out_type(node)
    return broadcast_to(convert(args.src, et), shape)


__all__: list = []
