"""Rules for ATen's network ops: losses, embeddings, convolutions and pooling."""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import numpy as np
import torch

from ... import core
from .building import broadcast_to, convert, fill
from .registry import rule

aten = torch.ops.aten

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


# -- negative log likelihood --------------------------------------------------------------


def _nll_parts(scores: core.Node, target: core.Node, weight: Optional[core.Node],
               ignore_index: int) -> Tuple[core.Node, core.Node, int]:
    """(one-hot of the targets in the scores' type, each target's weight, class dim).

    Targets equal to `ignore_index` get weight 0 (and a one-hot of class 0, which the
    zero weight cancels)."""
    et = scores.element_type
    axis = scores.rank - 1 if scores.rank < 2 else 1
    kept = core.NotEqual(target, fill(target.element_type, target.shape, ignore_index))
    safe = core.Select(kept, target, fill(target.element_type, target.shape, 0))
    one_hot = core.Convert(core.OneHot(safe, scores.shape, axis), et)
    weights = core.Convert(kept, et)
    if weight is not None:
        weights = core.Multiply(weights, core.Gather(convert(weight, et), safe, 0))
    return one_hot, weights, axis


@rule(aten.nll_loss_forward.default)
def _nll_loss(builder: Any, node: Any, args: Any) -> tuple:
    scores = args.self
    one_hot, weights, axis = _nll_parts(scores, args.target, args.weight, args.ignore_index)
    picked = core.Sum(core.Multiply(scores, one_hot), (axis,))
    losses = core.Negative(core.Multiply(picked, weights))
    every = tuple(range(losses.rank))
    total_weight = core.Sum(weights, every) if every else weights
    reduction = _REDUCTIONS[args.reduction]
    if reduction == "none":
        return losses, total_weight
    summed = core.Sum(losses, every) if every else losses
    if reduction == "sum":
        return summed, total_weight
    return core.Divide(summed, total_weight), total_weight


@rule(aten.nll_loss_backward.default)
def _nll_loss_backward(builder: Any, node: Any, args: Any) -> core.Node:
    """-one_hot * weight * (the incoming gradient, over the total weight for a mean)."""
    scores = args.self
    et, shape = scores.element_type, scores.shape
    one_hot, weights, axis = _nll_parts(scores, args.target, args.weight, args.ignore_index)
    grad = convert(args.grad_output, et)
    if _REDUCTIONS[args.reduction] == "mean":
        grad = core.Divide(grad, convert(args.total_weight, et))
    per_target = core.Multiply(weights, broadcast_to(grad, weights.shape) if grad.rank == 0
                               else grad)
    spread = core.Broadcast(per_target, shape, (axis,)) if scores.rank else per_target
    return core.Negative(core.Multiply(one_hot, spread))


# -- embeddings -----------------------------------------------------------------------------


@rule(aten.embedding.default)
def _embedding(builder: Any, node: Any, args: Any) -> core.Node:
    return core.Gather(args.weight, args.indices, 0)


def _unscaled(node: Any) -> Optional[str]:
    scale = node.args[4] if len(node.args) > 4 else node.kwargs.get("scale_grad_by_freq")
    return "scale_grad_by_freq" if scale else None


@rule(aten.embedding_dense_backward.default, check=_unscaled)
def _embedding_backward(builder: Any, node: Any, args: Any) -> core.Node:
    """Each row's gradient added into its table row (rows at padding_idx get none)."""
    et, shape = builder.out_type(node)
    grad = convert(args.grad_output, et)
    indices = args.indices
    if args.padding_idx is not None and args.padding_idx >= 0:
        padded = core.Equal(indices, fill(indices.element_type, indices.shape,
                                          args.padding_idx))
        grad = core.Select(core.Broadcast(padded, grad.shape, (grad.rank - 1,)),
                           fill(et, grad.shape, 0), grad)
    return core.ScatterAdd(fill(et, shape, 0), indices, grad, 0)


# -- convolutions ---------------------------------------------------------------------------


def _plain_convolution(node: Any) -> Optional[str]:
    transposed, groups = node.args[6], node.args[8]
    if transposed:
        return "transposed convolutions"
    return "grouped convolutions" if groups != 1 else None


def _plain_convolution_backward(node: Any) -> Optional[str]:
    transposed, groups = node.args[7], node.args[9]
    if transposed:
        return "transposed convolutions"
    return "grouped convolutions" if groups != 1 else None


def spread(values: Sequence[int], spatial: int) -> List[int]:
    """A per-dim argument torch allows to give once for every spatial dim, once per dim.

    Parameters
    ----------
    values : sequence of int
        One value, or one per spatial dim.
    spatial : int
        How many spatial dims there are.

    Returns
    -------
    list of int
        One value per spatial dim.
    """
    values = list(values)
    return values * spatial if len(values) == 1 else values


def conv_window(args: Any, spatial: int) -> dict:
    """A convolution's window arguments, one entry per spatial dim.

    Parameters
    ----------
    args : Arguments
        The ATen convolution's arguments (``stride``, ``padding``, ``dilation``).
    spatial : int
        How many spatial dims the images have.

    Returns
    -------
    dict
        ``strides``, ``dilation``, ``padding_below`` and ``padding_above`` (torch pads
        both sides alike), each a list of ints.
    """
    padding = spread(args.padding, spatial)
    return dict(strides=spread(args.stride, spatial), dilation=spread(args.dilation, spatial),
                padding_below=padding, padding_above=padding)


@rule(aten.convolution.default, check=_plain_convolution)
def _convolution(builder: Any, node: Any, args: Any) -> core.Node:
    data = args.input
    result = core.Convolution(data, args.weight, **conv_window(args, data.rank - 2))
    if args.bias is None:
        return result
    axes = tuple(i for i in range(result.rank) if i != 1)
    return core.Add(result, core.Broadcast(args.bias, result.shape, axes))


@rule(aten.convolution_backward.default, check=_plain_convolution_backward)
def _convolution_backward(builder: Any, node: Any, args: Any) -> tuple:
    """(input, weight, bias) gradients, each only where output_mask asks for it."""
    data, filters, delta = args.input, args.weight, args.grad_output
    window = conv_window(args, data.rank - 2)
    wants = list(args.output_mask)
    data_grad = (core.ConvolutionBackpropData(data.shape, filters, delta, **window)
                 if wants[0] else None)
    filter_grad = (core.ConvolutionBackpropFilters(data, filters.shape, delta, **window)
                   if wants[1] else None)
    bias_grad = (core.Sum(delta, tuple(i for i in range(delta.rank) if i != 1))
                 if wants[2] else None)
    return data_grad, filter_grad, bias_grad


# -- pooling --------------------------------------------------------------------------------


def pool_window(args: Any, spatial: int) -> Tuple[List[int], List[int], List[int]]:
    """A pooling's (kernel, stride, padding), one entry per spatial dim each.

    Parameters
    ----------
    args : Arguments
        The ATen pooling's arguments; an empty ``stride`` means the kernel's size.
    spatial : int
        How many spatial dims the images have.

    Returns
    -------
    tuple of list of int
        The kernel, the stride and the padding (on both sides).
    """
    kernel = spread(args.kernel_size, spatial)
    stride = spread(args.stride, spatial) if len(args.stride) else kernel
    return kernel, stride, spread(args.padding, spatial)


def _floor_outputs(node: Any, x_shape: Sequence[Any], kernel: Sequence[int],
                   stride: Sequence[int], padding: Sequence[int]) -> bool:
    """Whether the traced output has the floor-mode size (ceil_mode then changes nothing)."""
    traced = node.meta["val"]
    traced = traced[0] if isinstance(traced, (tuple, list)) else traced
    for i, (size, k, s, p) in enumerate(zip(x_shape[2:], kernel, stride, padding)):
        if not isinstance(size, int) or (size + 2 * p - k) // s + 1 != traced.shape[2 + i]:
            return False
    return True


def _pool_check(dilated: bool, backward: bool) -> Any:
    """The check for a pooling op, or its gradient (whose pooled result is its first
    argument, the incoming gradient)."""
    def check(node: Any) -> Optional[str]:
        from .registry import Arguments
        args = Arguments(node, lambda v: v)
        x = node.args[1 if backward else 0].meta["val"]
        pooled = node.args[0] if backward else node
        if not x.dtype.is_floating_point:
            return "pooling of integers"
        spatial = x.dim() - 2
        kernel, stride, padding = pool_window(args, spatial)
        if dilated and any(d != 1 for d in spread(args.dilation, spatial)):
            return "dilated pooling"
        if getattr(args, "divisor_override", None) is not None:
            return "divisor_override"
        shape = [d if isinstance(d, int) else None for d in x.shape]
        if not _floor_outputs(pooled, shape, kernel, stride, padding):
            return "ceil_mode windows past the end, or symbolic spatial sizes"
        return None
    return check


@rule(aten.max_pool2d_with_indices.default, check=_pool_check(True, False))
def _max_pool(builder: Any, node: Any, args: Any) -> tuple:
    """The maxima (a MaxPool) and torch's indices: each maximum's flat position in its
    channel's plane, the first maximum of its window as torch picks it."""
    x = args.self
    kernel, stride, padding = pool_window(args, 2)
    pooled = core.MaxPool(x, kernel, stride, padding, padding)
    return pooled, _max_indices(x, kernel, stride, padding, pooled.shape)


def _max_indices(x: core.Node, kernel: List[int], stride: List[int], padding: List[int],
                 out_shape: Sequence[Any]) -> core.Node:
    et = x.element_type
    padded = core.Pad(x, [0, 0] + padding, [0, 0] + padding, None, -np.inf)
    columns = core.Im2Col(padded, kernel, stride)          # (N, P, Q, C, KH, KW)
    flat = core.ArgMax(columns, (4, 5))                     # kh * KW + kw, (N, P, Q, C)
    shape = flat.shape
    width = core.Constant(core.i64, shape, kernel[1])
    kh = core.Divide(flat, width)
    kw = core.Subtract(flat, core.Multiply(kh, width))
    rows = _positions(shape, 1, stride[0], padding[0])
    cols = _positions(shape, 2, stride[1], padding[1])
    plane_width = core.Constant(core.i64, shape, x.shape[3])
    index = core.Add(core.Multiply(core.Add(rows, kh), plane_width), core.Add(cols, kw))
    del et
    return core.Transpose(index, (0, 3, 1, 2))


def _positions(shape: Sequence[Any], dim: int, stride: int, padding: int) -> core.Node:
    """Each window's first input position along `dim` (before padding), over `shape`."""
    starts = np.arange(shape[dim], dtype=np.int64) * stride - padding
    return core.Broadcast(core.Constant(core.i64, (shape[dim],), starts), shape,
                          tuple(i for i in range(len(shape)) if i != dim))


@rule(aten.max_pool2d_with_indices_backward.default, check=_pool_check(True, True))
def _max_pool_backward(builder: Any, node: Any, args: Any) -> core.Node:
    kernel, stride, padding = pool_window(args, 2)
    return core.MaxPoolBackprop(args.self, args.grad_output, kernel, stride, padding, padding)


def _include_padding(args: Any, padding: Sequence[int]) -> bool:
    return bool(args.count_include_pad) and any(p > 0 for p in padding)


@rule(aten.avg_pool2d.default, check=_pool_check(False, False))
def _avg_pool(builder: Any, node: Any, args: Any) -> core.Node:
    """Torch's default counts padding in each mean: pad with zeros, then pool."""
    x = args.self
    kernel, stride, padding = pool_window(args, 2)
    if _include_padding(args, padding):
        x = core.Pad(x, [0, 0] + padding, [0, 0] + padding, None, 0)
        return core.AvgPool(x, kernel, stride)
    return core.AvgPool(x, kernel, stride, padding, padding)


@rule(aten.avg_pool2d_backward.default, check=_pool_check(False, True))
def _avg_pool_backward(builder: Any, node: Any, args: Any) -> core.Node:
    x = args.self
    kernel, stride, padding = pool_window(args, 2)
    if not _include_padding(args, padding):
        return core.AvgPoolBackprop(x.shape, args.grad_output, kernel, stride, padding, padding)
    padded_shape = list(x.shape)
    for i, p in enumerate(padding):
        padded_shape[2 + i] = padded_shape[2 + i] + 2 * p
    spread = core.AvgPoolBackprop(padded_shape, args.grad_output, kernel, stride)
    lower = [0, 0] + padding
    upper = [x.shape[0], x.shape[1]] + [x.shape[2 + i] + p for i, p in enumerate(padding)]
    return core.Slice(spread, lower, upper)


__all__ = ["spread", "conv_window", "pool_window"]
