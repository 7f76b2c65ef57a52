"""Lowering: an axes-graph computation becomes one core Function.

Stored tensors are state: each non-constant tensor a computation reads is a
Parameter of the function, and each one it assigns is an extra result (its
new value). An assign makes a new version of its tensor; ops after it in
the schedule read that version, so the schedule's order (creation order,
other_deps) becomes plain data flow. Constants become Constant nodes, except one
whose array value needs a length only fed data binds: a Parameter, made at the call.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from .. import core
from ..axes import Axis
from ..dims import free_symbols, subs
from ..errors import FeedError
from ..op_graph.op import Op
from ..op_graph.tensors import AssignableTensorOp
from ..shapes.inference import infer_shapes
from . import debug_rules, nn_rules  # noqa: F401  (register the print and nn rules)
from ..axis_dims import length_symbols
from .context import LoweringContext
from .rules import RULES, lower_op


@dataclass
class LoweredComputation:
    """A core Function plus how its parameters and results map to the axes graph."""

    function: core.Function
    #: The stored tensor fed to each parameter of `function`, in order.
    state_inputs: List[AssignableTensorOp]
    #: Per computation result, its position among function.results (None: no value).
    result_positions: List[Optional[int]]
    #: The tensors whose new values follow the computation's results.
    state_outputs: List[AssignableTensorOp]
    #: The core node each lowered axes op became (before any pass): its dims follow the
    #: op's axes in order, so an exporter can name a value by its axes.
    values: Dict[Op, core.Node] = field(default_factory=dict)

    @functools.cached_property
    def replaced_state(self) -> Dict[int, int]:
        """{function result: function parameter} for each stored tensor (not a
        placeholder) whose new value replaces its old one without being handed to the
        caller: a backend may write the new value over the old array (a donation)."""
        count = len(self.function.results) - len(self.state_outputs)
        inputs = {t: j for j, t in enumerate(self.state_inputs)}
        shown = set(self.result_positions)
        return {count + i: inputs[t] for i, t in enumerate(self.state_outputs)
                if t in inputs and not t.input and count + i not in shown}


def _define_inferred_lengths(ctx: LoweringContext, ops: Sequence[Op],
                             inputs: Sequence[AssignableTensorOp]) -> None:
    """Give each axis without a length the length the shape solver infers for it (a
    concat's joined axis is `2*B`, an axis cast to one of length 3 is 3), rather than a
    size variable of its own that nothing could bind; and put in the values of declared
    sizes the graph pins. Done before any op is lowered, so that a placeholder on such an
    axis, which may come first, has that length when fed."""
    if all(isinstance(a.length, int) for op in list(ops) + list(inputs) for a in op.axes):
        return  # every length is known: nothing to infer
    report = infer_shapes(list(ops) + list(inputs))
    solution, report_axes = report.solution, report.open_axes
    first_use: Dict[Axis, Op] = {}
    for op in list(inputs) + list(ops):
        for axis in op.axes:
            first_use.setdefault(axis.base, op)

    def in_context(value):
        replacements = {}
        for name in sorted(free_symbols(value) & report_axes.keys()):
            axis = report_axes[name]
            ctx.current_op = first_use.get(axis.base)
            replacements[name] = ctx.dim(axis)
        return subs(value, replacements)

    ctx.sizes.substitute({name: in_context(value) for name, value in solution.pinned.items()})
    for name, value in sorted(solution.inferred.items()):
        if name in report_axes:
            ctx.define_dim(report_axes[name], in_context(value))
    ctx.current_op = None


def lower(ops: Sequence[Op], results: Sequence[Op],
          inputs: Sequence[AssignableTensorOp] = ()) -> LoweredComputation:
    """Lower the scheduled `ops` of a computation returning `results`.

    `inputs`: the placeholders fed to the computation. One that the function does
    not read still becomes a parameter where it alone gives an axis its length (a
    gradient that depends only on a placeholder's axes, say).
    """
    ctx = LoweringContext(length_symbols(a for op in list(ops) + list(inputs) for a in op.axes))
    _define_inferred_lengths(ctx, ops, inputs)
    for op in ops:
        if op.is_assignable:
            continue  # read (as a Constant, a Parameter or its latest version) where used
        ctx.current_op = op
        args = [None if i < op.lvalue_args or not arg.is_tensor_op else ctx.value(arg)
                for i, arg in enumerate(op.args)]
        with core.at_location(op.location):
            node = lower_op(ctx, op, args)
        if op.is_tensor_op:
            ctx.values[op] = node
    result_nodes: List[core.Node] = []
    positions: List[Optional[int]] = []
    for result in results:
        if not result.is_tensor_op:
            positions.append(None)
            continue
        positions.append(len(result_nodes))
        result_nodes.append(ctx.value(result))
    written = [tensor for tensor, node in ctx.state.items()
               if tensor.persistent and not tensor.constant
               and node is not ctx.state_parameters.get(tensor)]
    _bind_from_inputs(ctx, inputs)
    state_inputs = list(ctx.state_parameters)
    _check_bindable(ctx, [ctx.state_parameters[t] for t in state_inputs])
    # The last host call (each reads the one before) is a result too, so that every
    # print runs even when no result needs its value; it sits before the new state.
    effects = ctx.effects[-1:]
    outputs = result_nodes + effects + [ctx.state[t] for t in written]
    if not outputs:
        # nothing to compute or write (an init op of no variables): a Function still needs
        # a result, so it gets a constant that no caller reads (no result position)
        outputs = [core.Constant(core.boolean, (), False)]
    function = core.Function(outputs, [ctx.state_parameters[t] for t in state_inputs])
    return LoweredComputation(function, state_inputs, positions, written, dict(ctx.values))


def _unbound_axes(ctx: LoweringContext) -> set:
    """ids of the axes whose size variables no parameter's shape binds."""
    bindable = frozenset().union(*(p.shape.free_symbols for p in ctx.state_parameters.values()))
    return {id(axis) for name, (axis, _) in ctx.symbol_origins.items() if name not in bindable}


def _bind_from_inputs(ctx: LoweringContext, inputs: Sequence[AssignableTensorOp]) -> None:
    """Make parameters of the fed placeholders that alone bind a size variable."""
    for tensor in inputs:
        unbound = _unbound_axes(ctx)
        if tensor not in ctx.state_parameters and any(id(a.base) in unbound
                                                      for a in tensor.axes):
            ctx.read(tensor)


def _check_bindable(ctx: LoweringContext, parameters) -> None:
    """Every size variable must appear in some parameter's shape, to be bound from data."""
    bindable = frozenset().union(*(p.shape.free_symbols for p in parameters))
    for name, (axis, op) in ctx.symbol_origins.items():
        if name not in bindable:
            needed = f" (needed by {op.name})" if op is not None else ""
            raise FeedError(f"axis {axis.name} has no length{needed}: set {axis.name}.length or "
                            f"feed a placeholder that has this axis",
                            op.location if op is not None else None)


__all__ = ["LoweredComputation", "LoweringContext", "RULES", "lower"]
