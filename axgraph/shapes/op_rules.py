"""What each kind of axes op says about lengths: the constraints of an op, with its origin.

Axes pair by identity, so most ops relate no lengths at all: an elementwise
op's result holds its operands' own axes. Lengths meet only where an op
puts different axes in correspondence, and there each op's rule reads the
facts the op declares (its attributes: `pairs`, `concat_axes`, `paddings`,
`slices`, layouts and geometry) to say how:

* ``dot`` makes each pair of contracted axes (and each relabelled result axis)
  equally long;
* ``cast_axes`` makes each new axis as long as the one it replaces;
* ``concat`` makes the joined axis as long as the parts together, ``stack`` its
  new axis as long as the number of tensors stacked;
* a slice keeps what it takes (and an index must lie inside its axis), a pad
  adds its padding;
* convolution and pooling give each output spatial axis the length
  ``(in + 2*pad - dilation*(filter - 1) - 1)//stride + 1``, at least 1, and
  the channel axes meet the filter's;
* an array's initial value fixes the lengths of the axes it is set against.

Derived axes carry their relation in their length (`(A*B)` is as long as A
times B, `A[1:3]` as the slice takes, `A+pad(1,1)` as A plus 2), so the
lengths `length_of` gives them already say it. Every class of op has exactly
one rule here, found through its class hierarchy; a class whose `infer_axes`
is newer than its rule has none (tests/test_shape_rules.py checks each).
"""
from __future__ import annotations

import math
from typing import Callable, Dict, Iterator, List, Optional, Type

import numpy as np

from ..axes import Axis
from ..dims import DimLike, slice_length
from ..op_graph import control, convolution, debug, dot, lookup, nn, pooling, reductions
from ..op_graph import elementwise, shape_ops, tensors
from ..op_graph.op import Op
from .constraints import AtLeast, Constraint, Equal, Origin

#: The length of an axis: an int, a Dim, or a variable standing for a length left open.
LengthOf = Callable[[Axis], DimLike]
#: A rule: the constraints an op puts on lengths.
Rule = Callable[[Op, LengthOf], Iterator[Constraint]]

_RULES: Dict[Type[Op], Rule] = {}
#: What each rule says, for documentation and reports.
RULE_SUMMARIES: Dict[Type[Op], str] = {}


def rule(*op_classes: Type[Op], says: str) -> Callable[[Rule], Rule]:
    """Register the function below as the length rule of `op_classes` (and their subclasses
    that do not override `infer_axes`)."""
    def register(function: Rule) -> Rule:
        for op_class in op_classes:
            _RULES[op_class] = function
            RULE_SUMMARIES[op_class] = says
        return function
    return register


def rule_class(op_class: Type[Op]) -> Optional[Type[Op]]:
    """The class whose rule applies to `op_class`: the nearest registered one in its MRO."""
    for klass in op_class.__mro__:
        if klass in _RULES:
            return klass
    return None


def constraints_of(op: Op, length_of: LengthOf) -> List[Constraint]:
    """The length constraints `op` makes, each with the op's line as its origin.

    Parameters
    ----------
    op : Op
        An op of the axes graph.
    length_of : callable
        The length of an axis (an int, a Dim, or a variable for one left open).

    Returns
    -------
    list of constraints
        What the op says about lengths.
    """
    found = rule_class(type(op))
    if found is None:  # every Op subclass inherits Op's rule
        return []
    return list(_RULES[found](op, length_of))


def _origin(op: Op, what: str, reason: str) -> Origin:
    return Origin.of(op.location, what, reason)


# -- ops that relate no lengths ------------------------------------------------------------

def _none(op: Op, length_of: LengthOf) -> Iterator[Constraint]:
    return iter(())


rule(Op, says="the axes asked for: no relation between lengths")(_none)
rule(elementwise.UnaryElementWiseOp, elementwise.BinaryElementWiseOp, elementwise.Where,
     says="the operands' own axes, paired by identity")(_none)
rule(reductions.ReductionOp, reductions.TensorSize,
     says="a subset of the operand's axes (or none)")(_none)
rule(shape_ops.BroadcastOp, shape_ops.ReorderAxes, shape_ops.Flatten, shape_ops.Unflatten,
     says="the operand's axes, their parts or new ones: lengths follow the axes")(_none)
rule(control.AssignOp, control.SequentialOp, control.ValueOfOp, debug.PrintOp,
     says="an operand's axes")(_none)
rule(nn.SoftmaxOp, nn.SoftmaxBackpropOp, says="the operands' axes, paired by identity")(_none)
rule(lookup.LookupTableOp, lookup.LookupTableBackpropOp, nn.OneHotOp,
     pooling.PoolingBackpropOp,
     says="operands' axes and new ones, paired by identity")(_none)


# -- stored tensors -------------------------------------------------------------------------

@rule(tensors.AssignableTensorOp, says="an array's initial value fixes the lengths it fills")
def _initial_value(op: Op, length_of: LengthOf) -> Iterator[Constraint]:
    value = getattr(op, "initial_value", None)
    if value is None or callable(value) or isinstance(value, Op):
        return
    shape = np.shape(value)
    axes = op.axes
    what = "constant" if getattr(op, "constant", False) else "initial value"
    for axis, n in zip(axes[len(axes) - len(shape):] if len(shape) <= len(axes) else axes,
                       shape[len(shape) - len(axes):] if len(shape) > len(axes) else shape):
        if n != 1:  # a dimension of 1 repeats over any length
            yield Equal(length_of(axis), int(n),
                        _origin(op, what, f"an array of shape {tuple(shape)} on {axis.name}"))


# -- ops that put axes in correspondence ---------------------------------------------------------

@rule(dot.DotOp, says="contracted pairs, and relabelled result axes, are equally long")
def _dot(op: Op, length_of: LengthOf) -> Iterator[Constraint]:
    assert isinstance(op, dot.DotOp)
    x, y = op.args
    for a, b in op.pairs:
        yield Equal(length_of(a), length_of(b),
                    _origin(op, "dot", f"contracts {a.name} of {x.name} with {b.name} of {y.name}"))
    natural = list(op.batch_axes) + list(op.x_free) + list(op.y_free)
    for asked, axis in zip(op.axes, natural):
        if asked is not axis:
            yield Equal(length_of(asked), length_of(axis),
                        _origin(op, "dot", f"labels its {axis.name} dimension {asked.name}"))


@rule(shape_ops.AxesCastOp, says="each new axis is as long as the one it replaces")
def _cast(op: Op, length_of: LengthOf) -> Iterator[Constraint]:
    (x,) = op.args
    for old, new in zip(x.axes, op.axes):
        if old is not new:
            yield Equal(length_of(new), length_of(old),
                        _origin(op, "cast_axes", f"casts {old.name} of {x.name} to {new.name}"))


@rule(shape_ops.TensorSliceOp, says="kept axes are as long as their slices; indices in range")
def _slice(op: Op, length_of: LengthOf) -> Iterator[Constraint]:
    assert isinstance(op, shape_ops.TensorSliceOp)
    (x,) = op.args
    kept = []
    for axis, item in zip(x.axes, op.slices):
        if isinstance(item, slice):
            kept.append((axis, item))
        else:
            yield _index_in_range(op, axis, item, length_of)
    for (axis, item), new in zip(kept, op.axes):
        origin = _origin(op, "slice", f"takes {_show(item)} of {axis.name}")
        if _takes_a_known_run(item, length_of(new)):
            # The same condition, said plainly: the slice's length is then exactly
            # stop - start when, and only when, the axis reaches stop.
            yield AtLeast(length_of(axis), item.stop, origin)
        else:
            yield Equal(length_of(new), slice_length(length_of(axis), item), origin)


def _takes_a_known_run(item: slice, length: DimLike) -> bool:
    """Whether `item` is `start:stop` (0 <= start < stop, step 1) and its result is the
    int `stop - start`: then it fits exactly when its axis is at least `stop` long."""
    start, stop, step = item.start or 0, item.stop, item.step
    return (step in (None, 1) and isinstance(start, int) and isinstance(stop, int)
            and 0 <= start < stop and isinstance(length, int) and length == stop - start)


@rule(shape_ops.SliceAdjointOp, says="the region written holds the delta; indices in range")
def _slice_adjoint(op: Op, length_of: LengthOf) -> Iterator[Constraint]:
    assert isinstance(op, shape_ops.SliceAdjointOp)
    (delta,) = op.args
    counts: DimLike = 1
    for axis, item in zip(op.axes, op.slices):
        if isinstance(item, slice):
            counts = counts * slice_length(length_of(axis), item)
        else:
            yield _index_in_range(op, axis, item, length_of)
    size: DimLike = math.prod((length_of(a) for a in delta.axes), start=1)
    yield Equal(size, counts, _origin(op, "slice adjoint",
                                      f"writes {delta.name} into a region of {op.axes}"))


def _index_in_range(op: Op, axis: Axis, index: int, length_of: LengthOf) -> Constraint:
    origin = _origin(op, "slice", f"index {index} of {axis.name}")
    return AtLeast(length_of(axis), index + 1 if index >= 0 else -index, origin)


def _show(item: slice) -> str:
    text = f"{'' if item.start is None else item.start}:{'' if item.stop is None else item.stop}"
    return text if item.step in (None, 1) else f"{text}:{item.step}"


@rule(shape_ops.ConcatOp, says="the joined axis is as long as the parts together")
def _concat(op: Op, length_of: LengthOf) -> Iterator[Constraint]:
    assert isinstance(op, shape_ops.ConcatOp)
    total: DimLike = 0
    for part in op.concat_axes:
        total = total + length_of(part)
    names = " + ".join(a.name for a in op.concat_axes)
    yield Equal(length_of(op.axis), total, _origin(op, "concat", f"joins {names}"))


@rule(shape_ops.StackOp, says="the new axis is as long as the number of tensors")
def _stack(op: Op, length_of: LengthOf) -> Iterator[Constraint]:
    assert isinstance(op, shape_ops.StackOp)
    yield Equal(length_of(op.axis), len(op.args),
                _origin(op, "stack", f"stacks {len(op.args)} tensors along {op.axis.name}"))


@rule(shape_ops.PadOp, says="each result axis is its operand axis plus the padding")
def _pad(op: Op, length_of: LengthOf) -> Iterator[Constraint]:
    assert isinstance(op, shape_ops.PadOp)
    (x,) = op.args
    for axis, new, (before, after) in zip(x.axes, op.axes, op.paddings):
        if new is not axis:
            yield Equal(length_of(new), length_of(axis) + before + after,
                        _origin(op, "pad", f"pads {axis.name} by ({before}, {after})"))


@rule(convolution.ConvFamilyOp,
      says="output = (in + 2*pad - dilation*(filter - 1) - 1)//stride + 1 >= 1; channels meet")
def _convolution(op: Op, length_of: LengthOf) -> Iterator[Constraint]:
    assert isinstance(op, convolution.ConvFamilyOp)
    x, w, y, geometry = op.x_layout, op.w_layout, op.y_layout, op.geometry
    yield Equal(length_of(x.channel), length_of(w.in_channel),
                _origin(op, "convolution", f"input channels {x.channel.name} meet the filter's "
                                           f"{w.in_channel.name}"))
    yield Equal(length_of(y.channel), length_of(w.out_channel),
                _origin(op, "convolution", f"output channels {y.channel.name} are the filter's "
                                           f"{w.out_channel.name}"))
    for i, (source, window, target) in enumerate(zip(x.spatial, w.spatial, y.spatial)):
        yield from _windowed(op, "convolution", geometry, i, source, length_of(window), target,
                             length_of)


@rule(pooling.PoolingOp,
      says="output = (in + 2*pad - window)//stride + 1 >= 1; the channel axis is kept")
def _pooling(op: Op, length_of: LengthOf) -> Iterator[Constraint]:
    assert isinstance(op, pooling.PoolingOp)
    x, y, geometry = op.x_layout, op.y_layout, op.geometry
    if y.channel is not x.channel:
        yield Equal(length_of(y.channel), length_of(x.channel),
                    _origin(op, "pooling", f"keeps the channels of {x.channel.name}"))
    for i, (source, window, target) in enumerate(zip(x.spatial, op.window, y.spatial)):
        yield from _windowed(op, "pooling", geometry, i, source, window, target, length_of)


def _windowed(op: Op, what: str, geometry: convolution.ConvGeometry, i: int, source: Axis,
              window: DimLike, target: Axis, length_of: LengthOf) -> Iterator[Constraint]:
    expected = geometry.output_length(i, length_of(source), window)
    detail = (f"{source.name} -> {target.name}: window {window}, stride {geometry.strides[i]}, "
              f"padding {geometry.padding[i]}, dilation {geometry.dilation[i]}")
    yield Equal(length_of(target), expected, _origin(op, what, detail))
    yield AtLeast(length_of(target), 1, _origin(op, what, f"{detail}: the window must fit"))
