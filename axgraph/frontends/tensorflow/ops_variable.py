"""Graph inputs and state: placeholders, variables, their assignments and init ops.

Both kinds of TF variable are read: reference variables (VariableV2, read through
an Identity) and resource variables (VarHandleOp, read by ReadVariableOp). Each
becomes one `ng.variable`; an assignment becomes `ng.assign`, and an op that only
groups others (the init op of ``tf.global_variables_initializer()``, a NoOp with
control inputs) becomes `ng.doall` of them, so a computation of it runs them.
"""
from __future__ import annotations

import importlib

import numpy as np

import axgraph as ng

from ...axes import Axes
from ...op_graph.op import Op
from ...op_graph.tensors import AssignableTensorOp
from ..indexed_writes import written_at
from ..positional import relabelled
from .ops_gather import segment_sum
from .rules import Node, Value, rule


#: The op types whose rules write a variable: a control dependency on one orders a value
#: after the write.
WRITING_OPS = ("Assign", "AssignVariableOp", "AssignAdd", "AssignAddVariableOp", "AssignSub",
               "AssignSubVariableOp", "ApplyGradientDescent", "ResourceApplyGradientDescent",
               "ScatterAdd", "ScatterSub", "ResourceScatterAdd", "ResourceScatterSub",
               "ScatterUpdate", "ResourceScatterUpdate", "ApplyMomentum", "ResourceApplyMomentum",
               "SparseApplyMomentum", "ResourceSparseApplyMomentum")


def _axes(node: Node, shape) -> Axes:
    return Axes([node.new_axis(int(n), f"{node.hint}_d{i}")
                 for i, n in enumerate(shape)])


def _numpy_dtype(tf_dtype) -> np.dtype:
    return np.dtype(tf_dtype.base_dtype.as_numpy_dtype)


@rule("Placeholder", "PlaceholderV2")
def import_placeholder(node: Node) -> Op:
    shape = node.out_shape(0)
    return ng.placeholder(_axes(node, shape), dtype=_numpy_dtype(node.attr("dtype")),
                          name=node.hint)


@rule("PlaceholderWithDefault")
def import_placeholder_with_default(node: Node) -> Op:
    default = node.input(0)
    shape = node.out_shape(0)
    initial = default if isinstance(default, np.ndarray) else None
    if initial is None:
        raise node.unsupported("the default must be known when the graph is imported")
    return ng.placeholder(_axes(node, shape), dtype=initial.dtype, initial_value=initial,
                          name=node.hint)


@rule("VariableV2", "Variable", "VarHandleOp")
def import_variable(node: Node) -> Op:
    proto = node.attr("shape")  # a TensorShapeProto
    shape = [int(d.size) for d in proto.dim]
    if proto.unknown_rank or any(n < 0 for n in shape):
        raise node.unsupported(f"variable of shape {shape}: every dimension must be known")
    return ng.variable(_axes(node, shape), dtype=_numpy_dtype(node.attr("dtype")),
                       initial_value=node.initial_value, name=node.hint)


def _stored(node: Node) -> Op:
    target = node.input(0)
    if not isinstance(target, AssignableTensorOp) or target.constant or target.input:
        raise node.error("the assigned input is not a variable")
    return target


def _value_on(node: Node, target: Op, value: Value) -> Op:
    """`value` (TF's shape is the variable's) on the variable's axes."""
    op = node.builder.as_op(value, node.hint)
    lengths = [a.length for a in op.axes]
    if lengths != [a.length for a in target.axes]:
        raise node.error(f"a value of shape {lengths} assigned to a variable of shape "
                         f"{[a.length for a in target.axes]}")
    return ng.cast_axes(op, target.axes) if op.axes != target.axes else op


def _assigned(node: Node, new_value) -> Op:
    """The assignment, run only where it is named (TF runs an assign only when it is
    fetched or a control dependency): ops that read the variable do not run it."""
    target = _stored(node)
    with Op.saved_user_deps():
        write = ng.assign(target, _value_on(node, target, new_value(target)))
        if not node.tf_op.outputs:
            return write
        # TF's reference assignments output the new value: read after the write
        return ng.sequential([write, target])


@rule("Assign", "AssignVariableOp")
def import_assign(node: Node) -> Op:
    return _assigned(node, lambda target: node.input(1))


@rule("AssignAdd", "AssignAddVariableOp")
def import_assign_add(node: Node) -> Op:
    return _assigned(node, lambda target: target + _value_on(node, target, node.input(1)))


@rule("AssignSub", "AssignSubVariableOp")
def import_assign_sub(node: Node) -> Op:
    return _assigned(node, lambda target: target - _value_on(node, target, node.input(1)))


@rule("ApplyGradientDescent", "ResourceApplyGradientDescent")
def import_apply_gradient_descent(node: Node) -> Op:
    """One step of ``tf.train.GradientDescentOptimizer``: var -= alpha * delta."""
    alpha = node.op(1)
    return _assigned(node, lambda target: target - alpha * _value_on(node, target,
                                                                     node.input(2)))


@rule("ScatterAdd", "ScatterSub", "ResourceScatterAdd", "ResourceScatterSub")
def import_scatter_add(node: Node) -> Op:
    """``var[indices] += updates`` (or ``-=``), repeated indices adding up: the sparse step
    of ``tf.train.GradientDescentOptimizer`` for an embedding's IndexedSlices gradient."""
    def updated(target: Op) -> Op:
        if not target.axes:
            raise node.error("a scatter update of a scalar variable")
        count = int(target.axes[0].length)
        sums = segment_sum(node, node.op(2), node.input(1), count, drop_negative=False)
        change = _value_on(node, target, sums)
        return target - change if node.op_type.endswith("Sub") else target + change

    return _assigned(node, updated)


@rule("ScatterUpdate", "ResourceScatterUpdate")
def import_scatter_update(node: Node) -> Op:
    """``var[indices] = updates`` (``tf.scatter_update``); where an index repeats, the last
    of its rows is kept (as TF's CPU kernel leaves it)."""
    def updated(target: Op) -> Op:
        if not target.axes:
            raise node.error("a scatter update of a scalar variable")
        indices = node.op(1)
        if indices.dtype.kind not in "iu":
            raise node.error(f"indices of type {indices.dtype}: TF's indices are integers")
        sources = [node.new_axis(a.length, f"{node.hint}_index") for a in indices.axes]
        rows, rest = target.axes[0], list(target.axes[1:])
        updates = node.op(2)
        wanted = [a.length for a in sources] + [a.length for a in rest]
        if [a.length for a in updates.axes] != wanted:
            raise node.error(f"updates of shape {[a.length for a in updates.axes]} for indices "
                             f"of shape {[a.length for a in sources]} into a variable of shape "
                             f"{[a.length for a in target.axes]} (they must be {wanted})")
        hits = ng.one_hot(relabelled(indices, sources), rows, dtype=target.dtype)
        values = ng.multiply(relabelled(updates, sources + rest), 1, dtype=target.dtype)
        return written_at(target, hits, values, sources, accumulate=False)

    return _assigned(node, updated)


@rule("ReadVariableOp")
def import_read_variable(node: Node) -> Op:
    return _stored(node)


@rule("VarIsInitializedOp", "IsVariableInitialized")
def import_is_initialized(node: Node) -> Op:
    # an axgraph variable always holds a value (its initial value, or what was assigned)
    return ng.constant(True, dtype=np.bool_)


@rule("NoOp")
def import_no_op(node: Node) -> Op:
    return ng.doall(node.control_inputs)


@rule("Const")
def import_const(node: Node) -> np.ndarray:
    """A constant under a control dependency (others are read with the static values):
    its value, known now; the dependency orders nothing that needs it."""
    make_ndarray = importlib.import_module("tensorflow.compat.v1").make_ndarray
    return np.asarray(make_ndarray(node.tf_op.get_attr("value")))
