"""Convolution as matrix products over im2col columns.

Convolution(x, w) becomes Dot(Im2Col(x), w) and the filter gradient
ConvolutionBackpropFilters(x, delta) becomes Dot(delta, Im2Col(x)). Both use
the same columns of the same input, so after CSE a training step builds them
once, and each product is one BLAS call into a planned buffer. The data
gradient ConvolutionBackpropData(w, delta) becomes Col2Im(Dot(delta, w)): the
columns' adjoint as one product, then one scatter-add. Backends with a BLAS
but no convolution kernel of their own (the cpu backend) run it.

The products that make or read columns with their channel dim as a free (not
contracted) dim see the columns transposed to (N, P..., R..., C), channels
last, and the filters likewise as (K, R..., C): the cpu backend lays columns
out channels innermost (an NHWC image's channels are copied in runs), so
these transposes are free views of them, and only the small filters move.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence, Type, Union

from .. import core
from ..core.node import Node
from .manager import RulePass
from .pattern import Op, Predicate, RewriteRule


_ConvolutionNode = Union[core.Convolution, core.ConvolutionBackpropFilters,
                         core.ConvolutionBackpropData]


def _columns(x: Node, window, node: _ConvolutionNode) -> Node:
    return core.Im2Col(x, window, strides=node.strides, dilation=node.dilation,
                       padding_below=node.padding_below, padding_above=node.padding_above)


def _convolution(node: core.Convolution) -> Node:
    x, w = node.inputs
    nd = w.rank - 2
    columns = _columns(x, tuple(w.shape[2:]), node)  # (N, P..., C, R...)
    product = core.Dot(columns, w, tuple(range(1 + nd, 2 + 2 * nd)), tuple(range(1, 2 + nd)))
    return core.Transpose(product, (0, 1 + nd) + tuple(range(1, 1 + nd)))  # (N, K, P...)


def _channels_last(nd: int, lead: int) -> tuple:
    """The permutation moving dim `lead` (channels) after the `nd` window dims following it,
    the dims before it staying in front."""
    return tuple(range(lead)) + tuple(range(lead + 1, lead + 1 + nd)) + (lead,)


def _inverse(permutation: tuple) -> tuple:
    return tuple(sorted(range(len(permutation)), key=permutation.__getitem__))


def _filter_gradient(node: core.ConvolutionBackpropFilters) -> Node:
    x, delta = node.inputs
    nd = delta.rank - 2
    columns = _columns(x, tuple(node.filters_shape[2:]), node)
    columns = core.Transpose(columns, _channels_last(nd, 1 + nd))  # (N, P..., R..., C)
    product = core.Dot(delta, columns, (0,) + tuple(range(2, 2 + nd)),
                       tuple(range(0, 1 + nd)))  # (K, R..., C)
    return core.Transpose(product, _inverse(_channels_last(nd, 1)))  # (K, C, R...)


def _data_gradient(node: core.ConvolutionBackpropData) -> Node:
    w, delta = node.inputs
    nd = delta.rank - 2
    filters = core.Transpose(w, _channels_last(nd, 1))  # (K, R..., C)
    product = core.Dot(delta, filters, (1,), (0,))  # (N, P..., R..., C)
    columns = core.Transpose(product, _inverse(_channels_last(nd, 1 + nd)))  # (N, P..., C, R...)
    return core.Col2Im(columns, node.shape, tuple(w.shape[2:]), strides=node.strides,
                       dilation=node.dilation, padding_below=node.padding_below,
                       padding_above=node.padding_above)


def _static_window(window_of: Callable[[Node], Sequence]) -> Predicate:
    """The rewrite needs the window's lengths: a symbolic window is left to the kernel."""
    return lambda node: core.Shape(window_of(node)).is_static


def _rule(op: Type[Node], window_of: Callable[[Node], Sequence],
          build: Callable[[Any], Node], name: str) -> RewriteRule:
    """`build(node)` at each `op` node whose window is static."""
    return RewriteRule(Op(op, predicate=_static_window(window_of)),
                       lambda match: build(match.root), name)


RULES = (
    _rule(core.Convolution, lambda n: n.inputs[1].shape[2:], _convolution,
          "convolution-as-dot"),
    _rule(core.ConvolutionBackpropFilters, lambda n: n.attributes["filters_shape"][2:],
          _filter_gradient, "filter-gradient-as-dot"),
    _rule(core.ConvolutionBackpropData, lambda n: n.inputs[0].shape[2:], _data_gradient,
          "data-gradient-as-dot-and-col2im"),
)


class ConvolutionAsMatmul(RulePass):
    """Rewrite convolutions and their gradients with static windows as BLAS products."""

    name = "convolution-as-matmul"
    one_sweep = True  # the Transpose, Dot and Col2Im they build are not convolutions
    rules = RULES


__all__ = ["ConvolutionAsMatmul", "RULES"]
