"""Reverse-mode differentiation of axes graphs (seed 001 `deriv`).

`deriv` computes nothing: it adds adjoint ops to the graph and returns the
op holding d(cost)/d(wrt). Each op class has one entry in ADJOINTS: given the
op and the adjoint of its value, it returns one adjoint per arg (None where
no gradient flows). Adjoints are then summed over broadcast axes and put in
the arg's axis order, so table entries can be written as the math reads.

Ops whose value is piecewise constant (comparisons, sign, argmax/argmin,
one_hot, random draws, sizes) pass no gradient: their derivative is zero
wherever it exists. An op with no entry raises NotDifferentiableError.
"""
from __future__ import annotations

import math
from typing import Callable, Dict, List, Optional, Sequence

from .debug_info import user_location
from .dtypes import kind_of
from .errors import AxgraphTypeError, IncompatibleAxesError, NotDifferentiableError
from .op_graph import control, convolution as conv, debug, dot as dot_ops, elementwise as ew
from .op_graph import lookup, nn
from .op_graph import pooling, random, reductions as red
from .op_graph import shape_ops as so
from .op_graph.op import Op, upstream_ops
from .op_graph.tensors import as_op
from .op_graph.tensors import constant
from .op_table import OpTable

Adjoint = Callable[[Op, Op], Sequence[Optional[Op]]]
#: The adjoint rule of each op: `rule(op, delta) -> one adjoint per arg (None: none)`.
ADJOINTS: OpTable[Adjoint] = OpTable("adjoint")
adjoint = ADJOINTS.register


def _like(op: Op, *args: Op, op_class: Optional[type] = None, **changed) -> Op:
    """An op of `op`'s kind (or of `op_class`, a member of its family) and attributes over
    `args` (Op.sibling): a new value, so with an automatic name, no metadata, the type its
    args give and only the ordering its args bring."""
    return op.sibling(op_class or type(op), *args, name=None, dtype=None, metadata=None,
                      **changed)


def _no_gradient(op: Op, delta: Op):
    return [None] * len(op.args)


ZERO_DERIVATIVE_OPS = (ew.Sign, ew.Floor, ew.StopGradient, ew.Equal, ew.NotEqual, ew.Less, ew.LessEqual, ew.Greater,
                       ew.GreaterEqual, red.ArgMax, red.ArgMin, red.TensorSize, nn.OneHotOp,
                       random.UniformOp, random.NormalOp)
adjoint(*ZERO_DERIVATIVE_OPS)(_no_gradient)


# -- elementwise ------------------------------------------------------------------

def _as_float(mask: Op, like: Op) -> Op:
    """A boolean mask as 0/1 values of `like`'s type."""
    return ew.Multiply(mask, constant(1, dtype=like.dtype))


@adjoint(ew.Negative)
def _negative(op, d):
    return [-d]


@adjoint(ew.Absolute)
def _absolute(op, d):
    return [d * ew.sign(op.args[0])]


@adjoint(ew.Square)
def _square(op, d):
    return [d * 2.0 * op.args[0]]


@adjoint(ew.Sqrt)
def _sqrt(op, d):
    return [d * 0.5 / op]


@adjoint(ew.Exp)
def _exp(op, d):
    return [d * op]


@adjoint(ew.Log)
def _log(op, d):
    return [d / op.args[0]]


@adjoint(ew.Log1p)
def _log1p(op, d):
    return [d / (1.0 + op.args[0])]


@adjoint(ew.Safelog)
def _safelog(op, d):
    # Flat below the floor: no gradient there, and no 0 * inf at x = 0.
    x = op.args[0]
    floor = math.exp(-50.0)
    return [d * _as_float(ew.greater(x, floor), d) / ew.maximum(x, floor)]


@adjoint(ew.Reciprocal)
def _reciprocal(op, d):
    return [-d * op * op]


@adjoint(ew.Tanh)
def _tanh(op, d):
    return [d * (1.0 - op * op)]


@adjoint(ew.Sigmoid)
def _sigmoid(op, d):
    return [d * op * (1.0 - op)]


@adjoint(ew.Sin)
def _sin(op, d):
    return [d * ew.cos(op.args[0])]


@adjoint(ew.Cos)
def _cos(op, d):
    return [-d * ew.sin(op.args[0])]


@adjoint(ew.Tan)
def _tan(op, d):
    return [d * (1.0 + op * op)]


@adjoint(ew.Erf)
def _erf(op, d):
    x = op.args[0]
    return [d * (2.0 / math.sqrt(math.pi)) * ew.exp(-(x * x))]


@adjoint(ew.Rsqrt)
def _rsqrt(op, d):
    # d x**-0.5 = -0.5 x**-1.5 = -0.5 rsqrt(x) / x
    return [d * -0.5 * op / op.args[0]]


@adjoint(ew.Where)
def _where(op, d):
    # the gradient goes where the value came from; the condition gets none
    condition = op.args[0]
    return [None, ew.where(condition, d, 0.0), ew.where(condition, 0.0, d)]


@adjoint(ew.Relu)
def _relu(op, d):
    return [d * _as_float(ew.greater(op.args[0], 0.0), d)]


@adjoint(ew.Add)
def _add(op, d):
    return [d, d]


@adjoint(ew.Subtract)
def _subtract(op, d):
    return [d, -d]


@adjoint(ew.Multiply)
def _multiply(op, d):
    x, y = op.args
    return [d * y, d * x]


@adjoint(ew.Divide)
def _divide(op, d):
    x, y = op.args
    return [d / y, -d * op / y]


@adjoint(ew.Power)
def _power(op, d):
    x, y = op.args
    return [d * y * ew.power(x, y - 1.0), d * op * ew.log(x)]


@adjoint(ew.Maximum, ew.Minimum)
def _extremum(op, d):
    x, y = op.args
    picks_x = ew.greater_equal(x, y) if isinstance(op, ew.Maximum) else ew.less_equal(x, y)
    mask = _as_float(picks_x, d)
    return [d * mask, d * (1.0 - mask)]


# -- reductions and contraction ---------------------------------------------------

@adjoint(red.Sum)
def _sum(op, d):
    return [so.broadcast(d, op.args[0].axes)]


@adjoint(red.Prod)
def _prod(op, d):
    # d prod / d x_i is the product of the other elements, also where some are 0:
    # with no zero it is prod / x_i; with one zero only that element gets the
    # product of the nonzero ones; with two or more, every derivative is 0.
    x = op.args[0]
    is_zero = _as_float(ew.equal(x, 0.0), d)
    nonzero_x = x + is_zero
    nonzero_product = red.prod(nonzero_x, reduction_axes=op.reduction_axes)
    zeros = red.sum(is_zero, reduction_axes=op.reduction_axes)
    no_zero = _as_float(ew.equal(zeros, 0.0), d)
    one_zero = _as_float(ew.equal(zeros, 1.0), d)
    return [d * nonzero_product * (no_zero / nonzero_x + one_zero * is_zero)]


@adjoint(red.Max, red.Min)
def _max(op, d):
    # The subgradient that splits d evenly among the positions attaining the extremum.
    x = op.args[0]
    hits = _as_float(ew.equal(x, op), d)
    return [d * hits / red.sum(hits, reduction_axes=op.reduction_axes)]


@adjoint(dot_ops.DotOp)
def _dot(op, d):
    # d has axes batch + x_free + y_free. dx contracts d with y over y_free, per batch
    # axis, and labels y's paired axes as their x partners; dy likewise the other way round.
    x, y = op.args
    x_free, y_free = op.x_free, op.y_free
    to_x = {id(b): a for a, b in op.pairs}
    to_y = {id(a): b for a, b in op.pairs}
    dx = _like(op, d, y, pairs=[(b, b) for b in y_free],
               axes=list(op.batch_axes) + list(x_free)
               + [to_x[id(b)] for b in y.axes if b in op.y_reduce])
    dy = _like(op, x, d, pairs=[(a, a) for a in x_free],
               axes=list(op.batch_axes) + [to_y[id(a)] for a in x.axes if a in op.x_reduce]
               + list(y_free))
    return [dx, dy]


# -- shape ops -----------------------------------------------------------------------

@adjoint(so.BroadcastOp)
def _broadcast(op, d):
    return [red.sum(d, out_axes=op.args[0].axes)]


@adjoint(so.AxesCastOp)
def _cast_axes(op, d):
    return [so.cast_axes(d, op.args[0].axes)]


@adjoint(so.ReorderAxes)
def _reorder(op, d):
    return [so.axes_with_order(d, op.args[0].axes)]


@adjoint(so.Flatten)
def _flatten(op, d):
    return [so.Unflatten(d, op.args[0].axes)]


@adjoint(so.Unflatten)
def _unflatten(op, d):
    return [so.Flatten(d, op.args[0].axes)]


@adjoint(so.TensorSliceOp)
def _tensor_slice(op, d):
    return [_like(op, d, op_class=so.SliceAdjointOp, axes=op.args[0].axes)]


@adjoint(so.SliceAdjointOp)
def _slice_adjoint(op, d):
    return [_like(op, d, op_class=so.TensorSliceOp, axes=op.args[0].axes)]


@adjoint(so.ConcatOp)
def _concat(op, d):
    position = op.axes.index(next(a for a in op.axes if a not in op.args[0].axes))
    unknown = [a.name for a in op.concat_axes if a.length is None]
    if unknown:
        # The adjoint slices the joined gradient at the parts' lengths, which must be known
        # when the graph is built (slices take int bounds).
        raise op.error(NotDifferentiableError,
                       f"deriv through a concat along {', '.join(unknown)}, whose length comes "
                       f"only from fed data, needs the lengths when the graph is built: set "
                       f"the axis length (axis.length = n)")
    grads, start = [], 0
    for x, concat_axis in zip(op.args, op.concat_axes):
        stop = start + concat_axis.length
        slices = tuple(slice(start, stop) if i == position else slice(None)
                       for i in range(len(op.axes)))
        grads.append(so.TensorSliceOp(d, slices, axes=x.axes))
        start = stop
    return grads


@adjoint(so.StackOp)
def _stack(op, d):
    return [so.slice_along_axis(d, op.axis, i) for i in range(len(op.args))]


@adjoint(so.PadOp)
def _pad(op, d):
    x = op.args[0]
    slices = tuple(slice(before, before + axis.length)
                   for axis, (before, _) in zip(x.axes, op.paddings))
    return [so.TensorSliceOp(d, slices, axes=x.axes)]


# -- neural-network ops ----------------------------------------------------------------
# Convolution, its data transpose and its filter gradient are each linear in
# both args, so the adjoint of each is made of the other two.

@adjoint(conv.ConvolutionOp)
def _convolution(op, d):
    x, w = op.args
    return [_like(op, d, w, op_class=conv.ConvBackpropDataOp, axes=x.axes),
            _like(op, d, x, op_class=conv.ConvBackpropFilterOp, axes=w.axes)]


@adjoint(conv.ConvBackpropDataOp)
def _convolution_backprop_data(op, d):
    dy, w = op.args
    return [_like(op, d, w, op_class=conv.ConvolutionOp, axes=dy.axes),
            _like(op, dy, d, op_class=conv.ConvBackpropFilterOp, axes=w.axes)]


@adjoint(conv.ConvBackpropFilterOp)
def _convolution_backprop_filter(op, d):
    dy, x = op.args
    return [_like(op, x, d, op_class=conv.ConvolutionOp, axes=dy.axes),
            _like(op, dy, d, op_class=conv.ConvBackpropDataOp, axes=x.axes)]


@adjoint(pooling.PoolingOp)
def _pooling(op, d):
    return [pooling.PoolingBackpropOp(d, op.args[0], op)]


@adjoint(nn.SoftmaxOp, nn.LogSoftmaxOp)
def _softmax(op, d):
    return [nn.SoftmaxBackpropOp(_fit_to(d, op), op, op.normalization_axes,
                                 log=isinstance(op, nn.LogSoftmaxOp))]


@adjoint(lookup.LookupTableOp)
def _lookuptable(op, d):
    return [lookup.LookupTableBackpropOp(d, op.args[1], op), None]


@adjoint(lookup.LookupTableBackpropOp)
def _lookuptable_backprop(op, d):
    return [_like(op.lookup, d, op.args[1]), None]


# -- control ------------------------------------------------------------------------

@adjoint(control.SequentialOp)
def _sequential(op, d):
    return [None] * (len(op.args) - 1) + [d]


@adjoint(control.ValueOfOp, debug.PrintOp)
def _value_of(op, d):
    return [d]


# -- driver -------------------------------------------------------------------------

def _find_rule(op: Op) -> Adjoint:
    rule = ADJOINTS.lookup(type(op))
    if rule is not None:
        return rule
    raise op.error(NotDifferentiableError,
                   f"{type(op).__name__} has no derivative (ops with a derivative: "
                   f"see axgraph.autodiff.ADJOINTS)")


def _fit_to(delta: Op, target: Op) -> Op:
    """delta summed over axes `target` lacks, then in target's axis order."""
    extra = delta.axes - target.axes
    if extra:
        delta = red.sum(delta, reduction_axes=extra)
    missing = target.axes - delta.axes
    if missing:
        delta = so.broadcast(delta, target.axes)
    return so.axes_with_order(delta, target.axes)


def _is_float(op: Op) -> bool:
    return kind_of(op.dtype) == "f"


def deriv(cost, wrt, error=None) -> Op:
    """The derivative of `cost` with respect to `wrt`, as a new op of the graph.

    Nothing is computed here: reverse-mode differentiation adds the adjoint
    ops to the graph, and the returned op holds d(cost)/d(wrt) with wrt's
    axes in wrt's order, so it can be used like any value (an update
    ``ng.assign(w, w - lr * ng.deriv(cost, w))``). Gradients flowing along
    an axis that wrt lacks (a broadcast) are summed over it. Ops with a
    piecewise constant value (comparisons, sign, argmax, one_hot, random
    draws) and `stop_gradient` pass no gradient.

    Parameters
    ----------
    cost : Op or number
        The value differentiated: a scalar, or a tensor when `error` is given.
    wrt : Op
        The value (typically a variable) the derivative is taken with respect to.
    error : Op or number, optional
        The adjoint of `cost`, with cost's axes: the result is then the
        vector-Jacobian product, the derivative of sum(error * cost). Needed
        when `cost` has axes; None means 1 for a scalar cost.

    Returns
    -------
    Op
        d(cost)/d(wrt), with the axes of `wrt` (zeros if cost does not depend on wrt).

    Raises
    ------
    AxgraphTypeError
        If `cost` has no value (an assign) or `wrt` is not a tensor op.
    IncompatibleAxesError
        If `cost` has axes and no `error` is given, or `error`'s axes are not cost's.
    NotDifferentiableError
        If the path from `wrt` to `cost` goes through an op without a derivative.

    Examples
    --------
    >>> import numpy as np
    >>> import axgraph as ng
    >>> C = ng.make_axis(length=3, name="C")
    >>> w = ng.variable([C], initial_value=np.array([1.0, 2.0, 3.0]))
    >>> grad = ng.deriv(ng.sum(w * w, reduction_axes=[C]), w)
    >>> with ng.make_transformer() as t:
    ...     print(t.computation(grad)())
    [2. 4. 6.]
    """
    return deriv_many(cost, [wrt], error=error)[0]


def deriv_many(cost, wrts: Sequence[Op], error=None) -> List[Op]:
    """d(cost)/d(w) for each w in `wrts`, sharing one backward pass."""
    cost = as_op(cost)
    if not cost.is_tensor_op:
        raise AxgraphTypeError(f"deriv: the cost {cost.name} ({type(cost).__name__}) has no "
                               f"value to differentiate", user_location())
    _check_wrts(wrts)
    if error is None:
        if cost.axes:
            raise IncompatibleAxesError(
                f"deriv: cost {cost.name} has axes {cost.axes}; reduce it to a scalar (ng.sum, "
                f"ng.mean) or pass error= with those axes", user_location())
        error = constant(1, dtype=cost.dtype)
    else:
        error = as_op(error)
        if not error.axes.is_equal_set(cost.axes):
            raise IncompatibleAxesError(
                f"deriv: error {error.axes} must have the axes of cost {cost.name} {cost.axes}",
                user_location())
    adjoints: Dict[Op, Op] = {cost: so.axes_with_order(error, cost.axes)}
    for op in reversed(_ops_between(cost, wrts)):
        delta = adjoints.get(op)
        if delta is None or op.is_assignable:
            continue
        for arg, contribution in zip(op.args, _find_rule(op)(op, delta)):
            if contribution is None or not _is_float(arg):
                continue
            arg.generate_add_delta(adjoints, _fit_to(as_op(contribution), arg))
    results = []
    for wrt in wrts:
        found = adjoints.get(wrt)
        if found is None:
            found = so.broadcast(constant(0, dtype=wrt.dtype), wrt.axes)
        results.append(found)
    return results


def _check_wrts(wrts) -> None:
    """Each wrt is a tensor op: a derivative is taken with respect to a value of the graph."""
    if not isinstance(wrts, (list, tuple)):
        raise AxgraphTypeError(f"deriv_many takes a list or tuple of ops to differentiate "
                               f"with respect to, not {type(wrts).__name__} {wrts!r:.60}",
                               user_location())
    for wrt in wrts:
        if not isinstance(wrt, Op) or not wrt.is_tensor_op:
            raise AxgraphTypeError(
                f"deriv: wrt must be a tensor of the graph (a variable, or any op with a "
                f"value), not {type(wrt).__name__} {wrt!r:.60}", user_location())


def _ops_between(cost: Op, wrts: Sequence[Op]) -> List[Op]:
    """Ops on some path from any of `wrts` to `cost` (through args)."""
    upstream = upstream_ops([cost])
    reaches: Dict[Op, bool] = {}
    targets = set(wrts)
    ordered = sorted(upstream, key=lambda o: o._serial)  # args come before their users
    for op in ordered:
        reaches[op] = op in targets or any(reaches.get(arg, False) for arg in op.args)
    return [op for op in ordered if reaches[op]]
