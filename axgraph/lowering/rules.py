"""How each axes op becomes core nodes: one rule per op class (a table).

A rule gets the lowering context, the op and its args' core nodes (dims in
each arg's axes order) and returns the op's core node (dims in op.axes
order), or None for ops run for effect. Implicit broadcasting and axis
reordering of seed 000 become explicit Broadcast and Transpose nodes here.
"""
from __future__ import annotations

import math
from typing import Callable, List, Optional, Sequence, Tuple, Type

import numpy as np

from .. import core
from ..axes import Axes
from ..dims import definitely_equal, known
from ..dtypes import kind_of
from ..errors import AxisLengthError, GraphError, no_kernel_error
from ..op_graph import control, dot, elementwise as ew, random, reductions as red
from ..op_graph import shape_ops as so
from ..op_graph.op import Op
from ..op_table import OpTable
from .context import LoweringContext, positions

Rule = Callable[..., Optional[core.Node]]
#: The lowering of each axes op: `rule(ctx, op, *arg_nodes) -> core node or None`.
RULES: OpTable[Rule] = OpTable("lowering rule")
rule = RULES.register


def find_rule(op: Op) -> Rule:
    """The rule for op's class or its nearest registered base."""
    found = RULES.lookup(type(op))
    if found is None:
        kind = type(op).__name__
        raise no_kernel_error(GraphError, f"{kind} ({op.name})", op.location,
                              "lowering of it to core ops (the interpreter and cpu transformers "
                              "run core ops)",
                              f"register a lowering rule with @axgraph.lowering.rules.rule("
                              f"{kind}), or for an elementwise op "
                              f"axgraph.lowering.rules.register_elementwise({kind}, CoreOp)")
    return found


# -- elementwise -------------------------------------------------------------------------

def _is_one_core_op(op_class: type) -> bool:
    """Whether the axes op declares the one core op it is (elementwise and reductions)."""
    return getattr(op_class, "core_op", None) is not None


def _safelog(x: core.Node, ctx: LoweringContext) -> core.Node:
    floor = ctx.constant(math.exp(-50.0), x.element_type.dtype, x.shape)
    return core.Log(core.Maximum(x, floor))


def _square(x, ctx):
    return core.Multiply(x, x)


def _reciprocal(x, ctx):
    return core.Divide(ctx.constant(1, x.element_type.dtype, x.shape), x)


def _relu(x, ctx):
    if x.element_type.is_boolean:  # max(b, False) is b
        return x
    return core.Maximum(x, ctx.constant(0, x.element_type.dtype, x.shape))


#: The unary axes ops that are compositions of core ops, each `lower(x, ctx)` of its arg
#: converted to the operand type.
UNARY: OpTable[Callable] = OpTable("unary lowering", {
    ew.Square: _square, ew.Safelog: _safelog, ew.Reciprocal: _reciprocal, ew.Relu: _relu,
    ew.StopGradient: lambda x, ctx: x,
})


@rule(*UNARY)
def _composite_unary(ctx, op, x):
    return UNARY.lookup(type(op))(ctx.convert(x, op.operand_dtype), ctx)


# An axes op made from a core op's declaration (`ew.axes_op`) is that core op over its
# args converted to the operand type and aligned to its axes: on booleans, the core op
# it declares as `logical` (add is or), and where the operand's kind is in its
# `identity_for`, the operand itself (abs of booleans, floor of integers).

@rule(ew.UnaryElementWiseOp, when=_is_one_core_op)
def _unary(ctx, op, x):
    x = ctx.convert(x, op.operand_dtype)
    if op.ng is not None and kind_of(op.operand_dtype) in op.ng.identity_for:
        return x
    return op.core_op(x)


@rule(ew.BinaryElementWiseOp, when=_is_one_core_op)
def _binary(ctx, op, x, y):
    x_op, y_op = op.args
    x = ctx.align(ctx.convert(x, op.operand_dtype), x_op.axes, op.axes)
    y = ctx.align(ctx.convert(y, op.operand_dtype), y_op.axes, op.axes)
    logical = op.ng.logical if op.ng is not None and kind_of(op.operand_dtype) == "b" else None
    return (logical or op.core_op)(x, y)


def register_elementwise(axes_class: Type[ew.ElementWiseOp], core_class: type) -> None:
    """Lower a unary or binary axes op written by hand to `core_class`, as the ops made from
    a core op's declaration (`ew.axes_op`) are: over its args converted to the operand type
    and aligned to its axes. The reference transformer needs its own expression too
    (`reference_kernels.ELEMENTWISE`)."""
    axes_class.core_op = core_class


@rule(ew.Where)
def _where(ctx, op, condition, x, y):
    condition_op, x_op, y_op = op.args
    condition = ctx.align(ctx.convert(condition, np.bool_), condition_op.axes, op.axes)
    x = ctx.align(ctx.convert(x, op.operand_dtype), x_op.axes, op.axes)
    y = ctx.align(ctx.convert(y, op.operand_dtype), y_op.axes, op.axes)
    return core.Select(condition, x, y)


# -- reductions and contraction --------------------------------------------------------------

#: What booleans are compared as where the core compares numbers only (max, argmax, ...).
BOOLEAN_AS = np.uint8


@rule(red.ReductionOp, when=_is_one_core_op)
def _reduce(ctx, op, x):
    """The core op the reduction declares (`core_op`); to a boolean, its `logical_core_op`
    (any, all) run on uint8."""
    (arg,) = op.args
    x = ctx.convert(x, op.dtype)
    if op.reduction_axes:
        axes = positions(arg.axes, op.reduction_axes)
        if x.element_type.is_boolean:
            reduced = op.logical_core_op(ctx.convert(x, BOOLEAN_AS), axes)
            x = ctx.convert(reduced, op.dtype)
        else:
            x = op.core_op(x, axes)
    return ctx.transpose(x, list(arg.axes - op.reduction_axes), op.axes)


@rule(red.IndexReduction, when=_is_one_core_op)
def _arg_reduce(ctx, op, x):
    (arg,) = op.args
    if not op.reduction_axes:  # the only position in an empty selection is 0
        return ctx.constant(0, op.dtype, ctx.dims(op.axes))
    if x.element_type.is_boolean:
        x = ctx.convert(x, BOOLEAN_AS)
    index = op.core_op(x, positions(arg.axes, op.reduction_axes),
                       index_element_type=core.element_type(op.dtype))
    return ctx.transpose(index, list(arg.axes - op.reduction_axes), op.axes)


@rule(red.TensorSize)
def _tensor_size(ctx, op):
    size = math.prod(ctx.dims(op.size_axes), start=1)
    if isinstance(size, int):
        return ctx.constant(size, op.dtype)
    return ctx.convert(core.DimValue(size), op.dtype)


@rule(dot.DotOp)
def _dot(ctx, op, x, y):
    x_op, y_op = op.args
    # booleans: NumPy's dot is an or of ands, i.e. a count of both-true pairs != 0
    dtype = np.int64 if kind_of(op.dtype) == "b" else op.dtype
    product = core.Dot(ctx.convert(x, dtype), ctx.convert(y, dtype),
                       positions(x_op.axes, op.x_reduce), positions(y_op.axes, op.y_reduce),
                       positions(x_op.axes, op.batch_axes), positions(y_op.axes, op.batch_axes))
    return ctx.convert(product, op.dtype)


# -- shape ops ----------------------------------------------------------------------------

@rule(so.BroadcastOp)
def _broadcast(ctx, op, x):
    return ctx.align(x, op.args[0].axes, op.axes)


@rule(so.AxesCastOp, so.Flatten, so.Unflatten)
def _reshape(ctx, op, x):
    return ctx.reshape(x, ctx.dims(op.axes))


@rule(so.ReorderAxes)
def _reorder(ctx, op, x):
    return ctx.transpose(x, list(op.args[0].axes), op.axes)


def _slice_plan(ctx: LoweringContext, axes: Axes, slices) -> List[Tuple]:
    """Per axis: (lower, upper, stride, reversed, kept) for a positive-stride core Slice."""
    plan = []
    for axis, item in zip(axes, slices):
        length = ctx.dim(axis)
        if isinstance(item, slice):
            if item == slice(None):
                plan.append((0, length, 1, False, True))
                continue
            if known(length, None) is None:
                plan.append(_symbolic_slice_bounds(axis, item, length))
                continue
            start, stop, step = item.indices(length)
            if step > 0:
                plan.append((start, max(start, stop), step, False, True))
            else:  # reverse the dim, then take a positive-stride slice of it
                lower, upper = length - 1 - start, length - 1 - stop
                plan.append((lower, max(lower, upper), -step, True, True))
        else:
            if known(length, None) is None:
                raise AxisLengthError(f"indexing needs the length of {axis.name}")
            index = item % length
            plan.append((index, index + 1, 1, False, False))
    return plan


def _symbolic_slice_bounds(axis, item: slice, length) -> Tuple:
    """The plan of a forward slice of non-negative bounds along an axis of symbolic length:
    the bounds need no length (the feed-time checks hold it to the slice's own length);
    other slices of such an axis need the length to resolve their bounds."""
    start = 0 if item.start is None else item.start
    step = 1 if item.step is None else item.step
    if start < 0 or step < 0 or (item.stop is not None and item.stop < 0):
        raise AxisLengthError(f"slicing {axis.name} by {item} needs its length (only forward "
                              f"slices of non-negative bounds keep it symbolic)")
    upper = length if item.stop is None else max(start, item.stop)
    return (start, upper, step, False, True)


@rule(so.TensorSliceOp)
def _tensor_slice(ctx, op, x):
    arg = op.args[0]
    plan = _slice_plan(ctx, arg.axes, op.slices)
    reversed_dims = [i for i, p in enumerate(plan) if p[3]]
    if reversed_dims:
        x = core.Reverse(x, reversed_dims)
    if not all(definitely_equal(lower, 0) and definitely_equal(upper, d) and stride == 1
               for (lower, upper, stride, _, _), d in zip(plan, x.shape)):
        x = core.Slice(x, [p[0] for p in plan], [p[1] for p in plan], [p[2] for p in plan])
    return ctx.reshape(x, ctx.dims(op.axes))


def region_counts(ctx: LoweringContext, axes: Axes, slices) -> Tuple:
    """How many elements a slice takes along each axis it keeps."""
    plan = _slice_plan(ctx, axes, slices)
    return tuple((upper - lower + stride - 1) // stride
                 for lower, upper, stride, _, kept in plan if kept)


def place_in_region(ctx: LoweringContext, value: core.Node, axes: Axes, slices,
                    fill) -> core.Node:
    """The inverse of a slice: value at `slices` of a tensor with `axes`, `fill` elsewhere."""
    plan = _slice_plan(ctx, axes, slices)
    counts = [(upper - lower + stride - 1) // stride for lower, upper, stride, _, _ in plan]
    value = ctx.reshape(value, counts)
    below = [p[0] for p in plan]
    interior = [p[2] - 1 for p in plan]
    # An empty region pads the whole dim; a symbolic count (an unknown length sliced
    # whole) is never empty.
    above = [length - lower if known(count, 1) == 0
             else length - (lower + (count - 1) * stride + 1)
             for (lower, _, stride, _, _), count, length in zip(plan, counts, ctx.dims(axes))]
    if not all(definitely_equal(pad, 0) for pad in below + above + interior):
        value = core.Pad(value, below, above, interior, value=fill)
    reversed_dims = [i for i, p in enumerate(plan) if p[3]]
    return core.Reverse(value, reversed_dims) if reversed_dims else value


@rule(so.SliceAdjointOp)
def _slice_adjoint(ctx, op, delta):
    return place_in_region(ctx, ctx.convert(delta, op.dtype), op.axes, op.slices, 0)


@rule(so.ConcatOp)
def _concat(ctx, op, *xs):
    position = op.args[0].axes.index(op.concat_axes[0])  # (its length: _define_joined_axes)
    return core.Concat(list(xs), position) if len(xs) > 1 else xs[0]


@rule(so.StackOp)
def _stack(ctx, op, *xs):
    expanded = []
    for x in xs:
        dims = list(x.shape)
        dims.insert(op.pos, 1)
        expanded.append(core.Reshape(x, dims))
    return core.Concat(expanded, op.pos) if len(expanded) > 1 else expanded[0]


@rule(so.PadOp)
def _pad(ctx, op, x):
    return core.Pad(x, [b for b, _ in op.paddings], [a for _, a in op.paddings])


# -- random, control ----------------------------------------------------------------------

@rule(random.UniformOp)
def _uniform(ctx, op):
    return core.RandomUniform(core.element_type(op.dtype), ctx.dims(op.axes), op.low, op.high,
                              seed=op.seed)


@rule(random.NormalOp)
def _normal(ctx, op):
    return core.RandomNormal(core.element_type(op.dtype), ctx.dims(op.axes), op.loc, op.scale,
                             seed=op.seed)


@rule(control.AssignOp)
def _assign(ctx, op, _target, value):
    tensor, value_op = op.tensor, op.value
    value = ctx.convert(value, tensor.dtype)
    if op.item is None:
        ctx.state[tensor] = ctx.align(value, value_op.axes, tensor.axes)
        return None
    region = Axes(a for a, item in zip(tensor.axes, op.item) if isinstance(item, slice))
    counts = region_counts(ctx, tensor.axes, op.item)
    if value_op.axes.issubset(region):
        value = ctx.align(value, value_op.axes, region, counts)
    else:  # the value's own axes: matched to the region by position
        value = ctx.reshape(value, counts)
    current = ctx.read(tensor)
    placed = place_in_region(ctx, value, tensor.axes, op.item, 0)
    true = ctx.constant(True, np.bool_, counts)
    mask = place_in_region(ctx, true, tensor.axes, op.item, False)
    ctx.state[tensor] = core.Select(mask, placed, current)
    return None


@rule(control.SequentialOp)
def _sequential(ctx, op, *values):
    return ctx.value(op.args[-1])


@rule(control.DoAllOp)
def _do_all(ctx, op, *values):
    return None


@rule(control.ValueOfOp)
def _value_of(ctx, op, x):
    return x


def lower_op(ctx: LoweringContext, op: Op, args: Sequence[Optional[core.Node]]):
    """op's core node from its args' nodes."""
    return find_rule(op)(ctx, op, *args)
