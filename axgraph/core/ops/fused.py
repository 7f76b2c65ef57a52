"""Fused: several core nodes that a backend runs as one kernel.

A fusion pass (axgraph/transformers/cpu/fusion.py) replaces each group of
nodes it fuses with one `Fused` node, so fusion is visible in the IR
(`print(function)` shows the body indented under the node) instead of living
in a backend's side tables. The node's inputs are the group's external inputs;
its `function` (the body) has one Parameter per input, standing for it, and
one result, the group's output. Any backend can run it by running the body
(the interpreter does), so fused functions are checked against the reference.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence, Tuple

from ...errors import DTypeError, GraphError, ShapeError
from ..node import Node
from ..tensor_types import ElementType, Shape

if TYPE_CHECKING:  # function.py imports the ops package: Function is imported when used
    from ..function import Function


class Fused(Node):
    """The body `function` applied to `inputs`: a group of core nodes run as one kernel.

    A fusion pass builds these, so fusion is visible in the IR (`print` shows the
    body indented under the node). Any backend can run one by running its body,
    which is how fused functions are checked against the reference interpreter.

    Parameters
    ----------
    inputs : sequence of Node
        The group's external inputs, one per parameter of the body, each of its
        parameter's element type and shape.
    function : Function
        The body: one Parameter per input, standing for it, and one result, the
        group's output. It may use size variables the enclosing function binds
        (`Function(..., bound_outside=...)`).

    Returns
    -------
    Fused
        A node of the body's result's element type and shape.

    Raises
    ------
    GraphError
        `function` is not a core Function or does not have one result; the number
        of inputs is not the number of the body's parameters; an input is not a
        core node; or `name` is not a non-empty string.
    DTypeError
        An input's element type is not its parameter's.
    ShapeError
        An input's shape is not its parameter's.
    """

    _attributes = ("function",)
    _hidden = frozenset(_attributes)  # printed as the indented body instead

    function: "Function"

    def __init__(self, inputs: Sequence[Node], function: "Function", name: Optional[str] = None):
        super().__init__(inputs, {"function": function}, name)

    def _normalize(self, attributes: dict) -> dict:
        from ..function import Function

        function = attributes["function"]
        if not isinstance(function, Function):
            raise self._fail(GraphError, f"the body must be a core Function, not "
                                         f"{type(function).__name__}")
        if len(function.results) != 1:
            raise self._fail(GraphError, f"the body must have one result, not "
                                         f"{len(function.results)}")
        return attributes

    def _infer(self) -> Tuple[ElementType, Shape]:
        parameters = self.function.parameters
        if len(self.inputs) != len(parameters):
            raise self._fail(GraphError, f"takes {len(parameters)} input(s) (the body's "
                                         f"parameters), got {len(self.inputs)}")
        for k, (x, parameter) in enumerate(zip(self.inputs, parameters)):
            if x.element_type != parameter.element_type:
                raise self._fail(DTypeError, f"input {k} ({x.name}) is {x.type_str()}, the body's "
                                             f"parameter is {parameter.type_str()}")
            if x.shape != parameter.shape:
                raise self._fail(ShapeError, f"input {k} ({x.name}) is {x.type_str()}, the body's "
                                             f"parameter is {parameter.type_str()}")
        output = self.output
        return output.element_type, output.shape

    @property
    def output(self) -> Node:
        """The body's result: the node whose value this node is."""
        return self.function.results[0]

    @property
    def body(self) -> Tuple[Node, ...]:
        """The body's computing nodes, inputs before users (its parameters left out)."""
        return self.function.nodes[len(self.function.parameters):]
