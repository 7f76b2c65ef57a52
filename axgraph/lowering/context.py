"""State of one lowering: axes become positions, ops become core nodes.

Every lowered value is a core node whose dims follow its axes op's `axes` in
order. Axis lengths become their dims (`AxisDims`): ints, symbolic lengths as
they are, and a size variable per base axis without a length, bound from the
arrays at call time.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from .. import core
from ..axes import Axes, Axis
from ..axis_dims import AxisDims
from ..dtypes import cast
from ..op_graph.op import Op
from ..op_graph.tensors import AssignableTensorOp


class LoweringContext:
    """Maps axes to dims and axes ops to core nodes while a schedule is walked."""

    def __init__(self, reserved: Iterable[str] = ()) -> None:
        self.values: Dict[Op, core.Node] = {}
        self.state: Dict[AssignableTensorOp, core.Node] = {}
        self.state_parameters: Dict[AssignableTensorOp, core.Parameter] = {}
        #: The dims of axes; `reserved`: the size variables of symbolic lengths.
        self.sizes = AxisDims(reserved)
        #: The op being lowered (recorded as the origin of each size variable it needs).
        self.current_op: Optional[Op] = None
        #: Host calls (prints) in program order, each reading the one before.
        self.effects: List[core.Node] = []

    # -- dims --------------------------------------------------------------------------
    @property
    def symbol_origins(self) -> Dict[str, Tuple[Axis, Optional[Op]]]:
        """Each size variable: the axis it stands for and the op that first needed it."""
        return self.sizes.origins

    def dim(self, axis: Axis):
        """The length of `axis` as an int, or the size variable standing for it."""
        return self.sizes.dim(axis, self.current_op)

    def define_dim(self, axis: Axis, dim) -> None:
        """Give an axis without a length the dim its op computes (a concat's joined axis),
        rather than a size variable of its own that nothing could bind."""
        self.sizes.define(axis, dim)

    def dims(self, axes: Iterable[Axis]) -> Tuple:
        """`dim` of each axis, in order."""
        return self.sizes.dims(axes, self.current_op)

    # -- values ------------------------------------------------------------------------
    def value(self, op: Op) -> core.Node:
        """The core node holding op's value at this point of the schedule."""
        if op.is_assignable:
            assert isinstance(op, AssignableTensorOp)
            return self.read(op)
        return self.values[op]

    def read(self, tensor: AssignableTensorOp) -> core.Node:
        """A stored tensor's current version: a Constant, a state Parameter or an assign.

        A constant becomes a Constant when its value is known now: a scalar fills
        any lengths, an array needs all of them. Otherwise (an axis whose length
        only fed data binds) it is a state Parameter like a variable, whose value
        the transformer makes from the initial value at the first call, as the
        NumPy reference does.
        """
        if tensor in self.state:
            return self.state[tensor]
        dims = self.dims(tensor.axes)
        value = tensor.initial_value
        if tensor.constant and _is_scalar(value):
            node: core.Node = self.constant(value, tensor.dtype, dims)  # any lengths
        elif tensor.constant and all(isinstance(n, int) for n in dims):
            node = self.constant(tensor.initial_array(dims), tensor.dtype)
        else:
            node = core.Parameter(core.element_type(tensor.dtype), dims, name=tensor.name)
            self.state_parameters[tensor] = node
        self.state[tensor] = node
        return node

    def constant(self, value, dtype, dims: Sequence = ()) -> core.Node:
        """A Constant of `dtype`: an array, or a scalar filling `dims`."""
        array = np.asarray(value, dtype=dtype)
        shape = array.shape if array.ndim else tuple(dims)
        return core.Constant(core.element_type(dtype), shape, array)

    # -- conversions -------------------------------------------------------------------
    def convert(self, node: core.Node, dtype) -> core.Node:
        """node as element type `dtype` (no node when it already is)."""
        target = core.element_type(dtype)
        if node.element_type == target:
            return node
        if isinstance(node, core.Constant):  # convert the value now, not at every call
            return core.Constant(target, node.shape, cast(np.asarray(node.value), target.dtype))
        return core.Convert(node, target)

    def transpose(self, node: core.Node, from_axes: Sequence[Axis],
                  to_axes: Sequence[Axis]) -> core.Node:
        """node (dims in `from_axes` order) with dims in `to_axes` order (the same set)."""
        from_axes = list(from_axes)
        permutation = [from_axes.index(a) for a in to_axes]
        if permutation == list(range(len(permutation))):
            return node
        return core.Transpose(node, permutation)

    def align(self, node: core.Node, from_axes: Axes, to_axes: Axes,
              dims: Optional[Sequence] = None) -> core.Node:
        """node (dims in `from_axes` order) broadcast and ordered to `to_axes` (a superset).

        `dims` gives the result's dims when they are not the axes' lengths
        (a region of a tensor).
        """
        present = [a for a in to_axes if a in from_axes]
        node = self.transpose(node, list(from_axes), present)
        new = [i for i, a in enumerate(to_axes) if a not in from_axes]
        if new:
            node = core.Broadcast(node, self.dims(to_axes) if dims is None else tuple(dims), new)
        return node

    def reshape(self, node: core.Node, dims: Sequence) -> core.Node:
        """node reshaped to `dims` (no node when the shape is already that)."""
        if tuple(node.shape) == tuple(dims):
            return node
        return core.Reshape(node, dims)


def _is_scalar(value) -> bool:
    """Whether an initial value is one number (which fills a tensor of any lengths)."""
    return not callable(value) and not isinstance(value, Op) and np.ndim(value) == 0


def positions(axes: Sequence[Axis], chosen: Iterable[Axis]) -> List[int]:
    """Positions of `chosen` within `axes`, in the order of `chosen`."""
    axes = list(axes)
    return [axes.index(a) for a in chosen]
