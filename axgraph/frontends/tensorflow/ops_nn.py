"""Neural-network ops: softmax, cross-entropies, bias, and their gradients.

TF normalizes over the last dimension; each rule names that dimension's axis,
so the axgraph op knows which axis it reduces.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

import axgraph as ng

from ...op_graph.op import Op
from ..positional import in_order
from .tf_positional import broadcast
from .rules import Node, rule


def _last_axis(node: Node, x: Op):
    if not x.axes:
        raise node.error("needs at least one dimension")
    return x.axes[-1]


@rule("Softmax")
def import_softmax(node: Node) -> Op:
    x = node.op(0)
    return ng.softmax(x, normalization_axes=[_last_axis(node, x)])


@rule("LogSoftmax")
def import_log_softmax(node: Node) -> Op:
    x = node.op(0)
    return ng.log_softmax(x, normalization_axes=[_last_axis(node, x)])


def _check_bias(node: Node, x: Op, bias_length) -> None:
    if node.attr("data_format", "NHWC") not in ("NHWC", "N..C"):
        raise node.unsupported(f"data_format={node.attr('data_format')!r} is not supported "
                               f"(only NHWC)")
    if x.axes[-1].length != bias_length:
        raise node.error(f"a bias of length {bias_length} for a last dimension of "
                         f"{x.axes[-1].length}")


@rule("BiasAdd", "BiasAddV1")
def import_bias_add(node: Node) -> Op:
    x, bias = node.op(0), node.input(1)
    _check_bias(node, x, bias.shape[0] if isinstance(bias, np.ndarray) else bias.axes[0].length)
    return broadcast(node, ng.add, x, bias, dtype=x.dtype)


@rule("BiasAddGrad")
def import_bias_add_grad(node: Node) -> Op:
    dy = node.op(0)
    _check_bias(node, dy, dy.axes[-1].length)
    return ng.sum(dy, reduction_axes=list(dy.axes)[:-1]) if len(dy.axes) > 1 else dy


def _logits_and_labels(node: Node) -> Tuple[Op, Op]:
    logits, labels = node.op(0), node.input(1)
    if isinstance(labels, np.ndarray):
        labels = ng.constant(labels, logits.axes, dtype=labels.dtype)
    elif labels.axes != logits.axes:
        labels = ng.cast_axes(labels, logits.axes)
    return logits, labels


def _batch_and_class(node: Node, logits: Op):
    if len(logits.axes) != 2:
        raise node.error(f"logits of shape {[a.length for a in logits.axes]}: "
                         f"TF takes [batch, classes]")
    return logits.axes[0], logits.axes[1]


@rule("SoftmaxCrossEntropyWithLogits")
def import_softmax_cross_entropy(node: Node) -> Tuple[Op, Op]:
    """(loss per example, gradient of the loss with respect to the logits)."""
    logits, labels = _logits_and_labels(node)
    _, classes = _batch_and_class(node, logits)
    log_p = ng.log_softmax(logits, normalization_axes=[classes])
    loss = -ng.sum(labels * log_p, reduction_axes=[classes])
    backprop = ng.exp(log_p) - labels
    return loss, in_order(backprop, list(logits.axes))


@rule("SparseSoftmaxCrossEntropyWithLogits")
def import_sparse_softmax_cross_entropy(node: Node) -> Tuple[Op, Op]:
    logits = node.op(0)
    batch, classes = _batch_and_class(node, logits)
    labels = node.op(1)
    if len(labels.axes) != 1 or labels.axes[0].length != batch.length:
        raise node.error(f"labels of shape {[a.length for a in labels.axes]} for logits of "
                         f"shape {[batch.length, classes.length]}")
    labels = ng.cast_axes(labels, [batch]) if labels.axes[0] != batch else labels
    target = ng.one_hot(labels, axis=classes, dtype=logits.dtype)
    log_p = ng.log_softmax(logits, normalization_axes=[classes])
    loss = -ng.sum(target * log_p, reduction_axes=[classes])
    backprop = ng.exp(log_p) - target
    return loss, in_order(backprop, list(logits.axes))


@rule("OneHot")
def import_one_hot(node: Node) -> Op:
    """One-hot codes along a new last dimension (on and off values of 1 and 0 only)."""
    indices = node.op(0)
    depth = int(np.asarray(node.constant(1, "depth")))
    on, off = (float(np.asarray(node.constant(i, what))) for i, what in ((2, "on_value"),
                                                                          (3, "off_value")))
    if int(node.attr("axis", -1)) not in (-1, len(indices.axes)):
        raise node.unsupported("one-hot codes along a dimension other than the last")
    classes = node.new_axis(depth)
    dtype = np.dtype(node.attr("T").as_numpy_dtype)
    codes = ng.one_hot(indices, axis=classes, dtype=dtype)
    if (on, off) != (1.0, 0.0):
        codes = codes * (on - off) + off
    return in_order(codes, [*indices.axes, classes])
