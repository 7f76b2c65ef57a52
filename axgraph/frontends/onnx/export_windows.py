"""ONNX rules of the windowed core ops: convolution, pooling and their adjoints.

The core lays feature maps out (N, C, spatial...) and filters (K, C, R...), as
ONNX does, so the forward ops map one to one. The adjoints are written with
forward ONNX ops: a convolution's data gradient is a ConvTranspose, its filter
gradient a convolution of the data with the output gradient, a max pool's
gradient a scatter-add at MaxPool's indices and an average pool's a
ConvTranspose of the gradient over each window's count. The adjoints need known
spatial sizes (ONNX attributes are numbers); the batch may stay symbolic.
"""
from __future__ import annotations

from typing import Any, List

import numpy as np

from ... import core
from .export_graph import GraphBuilder, OnnxExportError
from .export_rules import RULES, Rule


def _geometry(node: core.Node, dilation: bool = True) -> dict:
    """ONNX's strides, pads (all below, then all above) and dilations of a window op."""
    attributes = node.attributes
    geometry = {"strides": list(attributes["strides"]),
                "pads": list(attributes["padding_below"]) + list(attributes["padding_above"])}
    if dilation:
        geometry["dilations"] = list(attributes["dilation"])
    return geometry


def _known(node: core.Node, dims, what: str) -> List[int]:
    if not all(isinstance(d, int) for d in dims):
        raise node._fail(OnnxExportError, f"{what} {list(dims)} must be known sizes: ONNX "
                                          f"takes them as attributes")
    return list(dims)


def _output_padding(node: core.Node, spatial: List[int], positions: List[int],
                    window: List[int]) -> List[int]:
    """What a ConvTranspose of `positions` must add at the end to give back `spatial`: the
    inputs the forward op's last window did not reach."""
    attributes = node.attributes
    dilation = attributes.get("dilation", (1,) * len(window))
    made = [s * (p - 1) + d * (r - 1) + 1 - below - above
            for s, p, d, r, below, above in zip(attributes["strides"], positions, dilation, window,
                                                 attributes["padding_below"],
                                                 attributes["padding_above"])]
    return [n - m for n, m in zip(spatial, made)]


@RULES.register(core.Convolution)
def _convolution(g: GraphBuilder, node: core.Convolution, inputs: List[str], out: str) -> None:
    g.add("Conv", inputs, out, **_geometry(node))


@RULES.register(core.ConvolutionBackpropData)
def _convolution_backprop_data(g: GraphBuilder, node: core.ConvolutionBackpropData,
                               inputs: List[str], out: str) -> None:
    # ConvTranspose of delta with the same (K, C, R...) filters, grown to the data's size
    filters, delta = node.inputs
    spatial = _known(node, node.attributes["data_shape"][2:], "the data's spatial dims")
    window = _known(node, filters.shape[2:], "the filters' window")
    positions = _known(node, delta.shape[2:], "the output's spatial dims")
    g.add("ConvTranspose", [inputs[1], inputs[0]], out,
          output_padding=_output_padding(node, spatial, positions, window), **_geometry(node))


@RULES.register(core.ConvolutionBackpropFilters)
def _convolution_backprop_filters(g: GraphBuilder, node: core.ConvolutionBackpropFilters,
                                  inputs: List[str], out: str) -> None:
    # dW[k, c, r] = sum over n, p of delta[n, k, p] * x[n, c, p*stride + r*dilation - below]:
    # a convolution of x as (C, N, S...) with delta as (K, N, P...) for filters, strides
    # and dilation swapped, whose (C, K, R'...) result is cut to R and transposed back
    data, delta = node.inputs
    attributes = node.attributes
    swap = [1, 0] + list(range(2, data.rank))
    window = _known(node, attributes["filters_shape"][2:], "the filters' window")
    spatial = _known(node, data.shape[2:], "the data's spatial dims")
    positions = _known(node, delta.shape[2:], "the output's spatial dims")
    above = [max(0, (r - 1) * d + s * (p - 1) + 1 - below - n)  # room for R outputs
             for n, r, p, s, d, below in zip(spatial, window, positions, attributes["strides"],
                                              attributes["dilation"], attributes["padding_below"])]
    columns = g.add("Conv", [g.add("Transpose", [inputs[0]], perm=swap),
                             g.add("Transpose", [inputs[1]], perm=swap)],
                    strides=list(attributes["dilation"]), dilations=list(attributes["strides"]),
                    pads=list(attributes["padding_below"]) + above)
    cut = g.add("Slice", [columns, g.ints([0] * len(window)), g.ints(window),
                          g.ints(range(2, data.rank))])
    g.add("Transpose", [cut], out, perm=swap)


def _pool(op_type: str, **extra) -> Rule:
    def rule(g: GraphBuilder, node: Any, inputs: List[str], out: str) -> None:
        g.add(op_type, inputs, out, kernel_shape=list(node.attributes["window"]),
              **_geometry(node, dilation=False), **extra)
    return rule


RULES.register(core.MaxPool)(_pool("MaxPool"))
# the mean over the real inputs of each window, as the core's AvgPool
RULES.register(core.AvgPool)(_pool("AveragePool", count_include_pad=0))


@RULES.register(core.MaxPoolBackprop)
def _max_pool_backprop(g: GraphBuilder, node: core.MaxPoolBackprop, inputs: List[str],
                       out: str) -> None:
    # MaxPool's indices (into x flattened whole) say where each delta goes; they add up
    x, delta = inputs
    _, indices = g.add_many("MaxPool", [x], [None, None],
                            kernel_shape=list(node.attributes["window"]),
                            **_geometry(node, dilation=False))
    flat = g.ints([-1])
    shape = g.add("Shape", [x])
    zeros = g.add("Reshape", [g.zeros(shape, node.element_type.dtype), flat])
    spread = g.add("ScatterElements", [zeros, g.add("Reshape", [indices, flat]),
                                       g.add("Reshape", [delta, flat])], reduction="add")
    g.add("Reshape", [spread, shape], out)


def window_counts(node: core.Node, spatial: List[int], positions: List[int]) -> np.ndarray:
    """How many real (unpadded) inputs each window of a pool covers, (P...) as an array."""
    attributes = node.attributes
    counts = np.ones((), dtype=np.int64)
    for n, p, r, s, below in zip(spatial, positions, attributes["window"], attributes["strides"],
                                 attributes["padding_below"]):
        starts = np.arange(p) * s - below
        along = np.minimum(starts + r, n) - np.maximum(starts, 0)
        counts = np.multiply.outer(counts, along)
    return counts


@RULES.register(core.AvgPoolBackprop)
def _avg_pool_backprop(g: GraphBuilder, node: core.AvgPoolBackprop, inputs: List[str],
                       out: str) -> None:
    # each delta divided by its window's count of real inputs, then spread over the window:
    # a ConvTranspose of ones, one group per channel
    (delta,) = node.inputs
    channels = _known(node, node.attributes["x_shape"][1:2], "the channel dim")[0]
    spatial = _known(node, node.attributes["x_shape"][2:], "the input's spatial dims")
    positions = _known(node, delta.shape[2:], "the output's spatial dims")
    window = list(node.attributes["window"])
    dtype = node.element_type.dtype
    counts = g.constant(window_counts(node, spatial, positions).astype(dtype), hint="counts")
    ones = g.constant(np.ones([channels, 1] + window, dtype=dtype), hint="ones")
    g.add("ConvTranspose", [g.add("Div", [inputs[0], counts]), ones], out, group=channels,
          kernel_shape=window,
          output_padding=_output_padding(node, spatial, positions, window),
          **_geometry(node, dilation=False))
