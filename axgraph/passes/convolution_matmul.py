"""Convolution as matrix products over im2col columns.

Convolution(x, w) becomes Dot(Im2Col(x), w) and the filter gradient
ConvolutionBackpropFilters(x, delta) becomes Dot(delta, Im2Col(x)). Both use
the same columns of the same input, so after CSE a training step builds them
once, and each product is one BLAS call into a planned buffer. The data
gradient ConvolutionBackpropData(w, delta) becomes Col2Im(Dot(delta, w)): the
columns' adjoint as one product, then one scatter-add. Backends with a BLAS
but no convolution kernel of their own (the cpu backend) run it.
"""
from __future__ import annotations

from typing import Dict, Union

from .. import core
from ..core.function import Function
from ..core.node import Node, at_location
from .manager import Pass


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


def _filter_gradient(node: core.ConvolutionBackpropFilters) -> Node:
    x, delta = node.inputs
    nd = delta.rank - 2
    columns = _columns(x, tuple(node.filters_shape[2:]), node)
    return core.Dot(delta, columns, (0,) + tuple(range(2, 2 + nd)), tuple(range(0, 1 + nd)))


def _data_gradient(node: core.ConvolutionBackpropData) -> Node:
    w, delta = node.inputs
    columns = core.Dot(delta, w, (1,), (0,))  # (N, P..., C, R...)
    return core.Col2Im(columns, node.shape, tuple(w.shape[2:]), strides=node.strides,
                       dilation=node.dilation, padding_below=node.padding_below,
                       padding_above=node.padding_above)


REWRITES = {core.Convolution: (_convolution, lambda n: n.inputs[1].shape[2:]),
            core.ConvolutionBackpropFilters: (_filter_gradient, lambda n: n.filters_shape[2:]),
            core.ConvolutionBackpropData: (_data_gradient, lambda n: n.inputs[0].shape[2:])}


class ConvolutionAsMatmul(Pass):
    """Rewrite convolutions and their gradients with static windows as BLAS products."""

    name = "convolution-as-matmul"

    def run(self, function: Function) -> Function:
        rebuilt: Dict[Node, Node] = {}
        changed = False
        for node in function.nodes:
            current = node.with_inputs([rebuilt[i] for i in node.inputs])
            entry = REWRITES.get(type(current))
            if entry is not None and core.Shape(entry[1](current)).is_static:
                with at_location(current.location):
                    current = entry[0](current)
                changed = True
            rebuilt[node] = current
        if not changed:
            return function
        return Function([rebuilt[r] for r in function.results],
                        [rebuilt[p] for p in function.parameters], name=function.name)
