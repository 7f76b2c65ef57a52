"""The steps of ``tf.train.MomentumOptimizer``: ApplyMomentum for a dense gradient, and
SparseApplyMomentum for the IndexedSlices gradient of an embedding (their resource
variants too).

TF's step, for each row named (every row, for the dense one)::

    accum = accum * momentum + grad
    var  -= lr * accum                         (use_nesterov: lr * (grad + momentum * accum))

The sparse step is written densely: the gradient's rows are summed into rows of the
variable (`segment_sum`), and the rows no index names keep their values. The optimizer
first sums the rows of repeated indices itself (TF's ``Unique`` and a segment sum, whose
number of rows is known only when the graph runs); the importer takes that sum out of
the graph (`deduplication`), as summing by row here gives the same step. The raw op
called directly applies a repeated index's rows one after another, which a sum does not
give: there the step checks, when it runs, that no index repeats.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

import axgraph as ng

from ...op_graph.op import Op
from .checks import AssertOp
from .ops_gather import segment_sum
from .ops_variable import _stored, _value_on
from .rules import Node, rule


def _momentum_step(node: Node, grad: Op, touched: Optional[Op], momentum_at: int) -> Op:
    """The writes of accum and var (inputs 0 and 1), for the gradient `grad` on var's axes;
    `touched` (on var's first axis) says which rows change (None: all); the learning rate
    is input 2, the momentum input `momentum_at`."""
    var = _stored(node)
    accum = node.input(1)
    if not isinstance(accum, Op) or accum is var:
        raise node.error("the accumulator (input 1) is not a variable of its own")
    rate, momentum = node.op(2), node.op(momentum_at)
    if rate.axes or momentum.axes:
        raise node.error("the learning rate and the momentum must be scalars")
    grad_on_accum = _value_on(node, accum, grad)
    new_accum = accum * momentum + grad_on_accum
    if touched is not None:
        new_accum = ng.where(ng.cast_axes(touched, [accum.axes[0]]), new_accum, accum)
    step_direction = _value_on(node, var, new_accum)
    if node.attr("use_nesterov", False):
        step_direction = grad + momentum * step_direction
    new_var = var - rate * step_direction
    if touched is not None:
        new_var = ng.where(touched, new_var, var)
    with Op.saved_user_deps():
        # var's new value needs all that accum's does: written first, it computes every
        # value before either write (a sequence adds no order to ops other steps share)
        writes = [ng.assign(var, new_var), ng.assign(accum, new_accum)]
        if not node.tf_op.outputs:
            return ng.doall(writes)
        return ng.sequential([*writes, var])  # the ref variant outputs the variable


@rule("ApplyMomentum", "ResourceApplyMomentum")
def import_apply_momentum(node: Node) -> Op:
    var = _stored(node)
    return _momentum_step(node, _value_on(node, var, node.input(3)), None, 4)


@rule("SparseApplyMomentum", "ResourceSparseApplyMomentum")
def import_sparse_apply_momentum(node: Node) -> Op:
    """The step on the rows named by `indices` (input 4), `grad` (input 3) holding one row
    per index; repeated indices are summed."""
    var = _stored(node)
    if not var.axes:
        raise node.error("a sparse update of a scalar variable")
    count = int(var.axes[0].length)
    summed = segment_sum(node, node.op(3), node.input(4), count, drop_negative=False)
    indices = node.op(4)
    ones = ng.constant(np.ones([int(a.length) for a in indices.axes], np.float32),
                       [node.new_axis(a.length, f"{node.hint}_named") for a in indices.axes])
    named = ng.cast_axes(segment_sum(node, ones, node.input(4), count, drop_negative=False),
                         [var.axes[0]])
    touched = ng.greater(named, 0)
    if not node.deduplicated:
        touched = ng.where(_no_repeats(node, named), touched, False)
    return _momentum_step(node, _value_on(node, var, summed), touched, 5)


def _no_repeats(node: Node, named: Op) -> Op:
    """A check, run with the step, that each row is named at most once (`named`: how
    often each is): TF applies a repeated index's rows one step after another, which the
    step summing rows by index does not reproduce. Its value is True for every row."""
    text = ("an index repeats; TF applies its rows one momentum step after another, which "
            "axgraph does not: pass distinct indices (TF's optimizers sum repeated rows "
            "first). The most repeated index:")
    return AssertOp(ng.less_equal(named, 1), [ng.argmax(named)], f"TF {node.label}",
                    [text, None], -1, name=f"{node.hint}_distinct")
