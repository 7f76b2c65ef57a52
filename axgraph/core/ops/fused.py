"""Fused: several core nodes that a backend runs as one kernel.

A fusion pass (axgraph/transformers/cpu/fusion.py) replaces each group of
nodes it fuses with one `Fused` node, so fusion is visible in the IR
(`print(function)` shows the body indented under the node) instead of living
in a backend's side tables. The node's inputs are the group's external inputs;
its `function` (the body) has one Parameter per input, standing for it, and
one result per value the group gives out. A group with several (a layer norm's
output, and the mean and reciprocal deviation a backward pass reads) is one
Fused node per result, all over one body: a backend may compute them in one
kernel. Any backend can run each by running the body (the interpreter does),
so fused functions are checked against the reference.
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
        The body: one Parameter per input, standing for it, and the group's results.
        It may use size variables the enclosing function binds
        (`Function(..., bound_outside=...)`).
    result : int, optional
        Which of the body's results is this node's value (0, the first, by default).

    Returns
    -------
    Fused
        A node of that result's element type and shape.

    Raises
    ------
    GraphError
        `function` is not a core Function, `result` is not the position of one of
        its results; the number
        of inputs is not the number of the body's parameters; an input is not a
        core node; or `name` is not a non-empty string.
    DTypeError
        An input's element type is not its parameter's.
    ShapeError
        An input's shape is not its parameter's.
    """

    _attributes = ("function", "result")
    _hidden = frozenset({"function"})  # printed as the indented body instead
    _shown_when_set = frozenset({"result"})

    function: "Function"

    result: int

    def __init__(self, inputs: Sequence[Node], function: "Function", name: Optional[str] = None,
                 result: int = 0):
        super().__init__(inputs, {"function": function, "result": result}, name)

    def _normalize(self, attributes: dict) -> dict:
        from ..function import Function

        function = attributes["function"]
        if not isinstance(function, Function):
            raise self._fail(GraphError, f"the body must be a core Function, not "
                                         f"{type(function).__name__}")
        result = attributes["result"]
        if isinstance(result, bool) or not isinstance(result, int) \
                or not 0 <= result < len(function.results):
            raise self._fail(GraphError, f"result must be the position of one of the body's "
                                         f"{len(function.results)} result(s), not {result!r}")
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
        """The body's result whose value this node is (its `result`-th)."""
        return self.function.results[self.result]

    @property
    def body(self) -> Tuple[Node, ...]:
        """The body's computing nodes, inputs before users (its parameters left out)."""
        return self.function.nodes[len(self.function.parameters):]
