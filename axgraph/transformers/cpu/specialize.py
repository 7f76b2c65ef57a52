"""A core Function at one binding of its size variables: what the cpu backend compiles.

The cpu backend builds a program per binding anyway (shapes, arena, fused
kernels), so it may as well build it from the Function those sizes make:
every dim substituted, every `DimValue` (the N a mean divides by) a Constant.
Folding and simplification then finish what sizes blocked (1/N computed
once, not per call), so a graph whose batch length is only known when fed
runs the same program as the graph built with that length fixed.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Tuple

import numpy as np

from ... import core, dims
from ...core.function import attribute_symbols
from ...core.node import Node
from ...errors import AxgraphError


def specialize(function: core.Function, bindings: Mapping[str, int]
               ) -> Tuple[core.Function, Dict[Node, Node]]:
    """`function` with its size variables replaced by `bindings`, cleaned up.

    Returns the specialized Function and each node of `function` to the node
    standing for it before the cleanup passes (random draws keep their place
    in their streams through it). Where substituting the sizes makes a node
    invalid (a symbolic slice that does not fit them) `function` is returned
    unchanged, so that running it reports the error at the node, as on every
    backend.
    """
    if not function.free_symbols:
        return function, {node: node for node in function.nodes}
    rebuilt: Dict[Node, Node] = {}
    try:
        for node in function.nodes:
            inputs = tuple(rebuilt[i] for i in node.inputs)
            if isinstance(node, core.DimValue):
                value = np.asarray(dims.evaluate(node.dim, bindings), node.element_type.dtype)
                with core.at_location(node.location):
                    rebuilt[node] = core.Constant(node.element_type, (), value)
            elif attribute_symbols(node):
                attributes = {key: _substituted(value, bindings)
                              for key, value in node.attributes.items()}
                fresh = object.__new__(type(node))  # as Node.with_inputs rebuilds: re-checked
                fresh._init(inputs, attributes, node._user_name, node.location)
                rebuilt[node] = fresh
            else:
                rebuilt[node] = node.with_inputs(inputs)
    except AxgraphError:
        return function, {node: node for node in function.nodes}
    specialized = core.Function([rebuilt[r] for r in function.results],
                                [rebuilt[p] for p in function.parameters], function.name)
    return _cleanup().run(specialized), rebuilt


def _substituted(value: Any, bindings: Mapping[str, int]) -> Any:
    """An attribute value with its dims evaluated (tuples, Shapes and named tuples too)."""
    if isinstance(value, dims.Dim):
        return dims.subs(value, bindings)
    if isinstance(value, core.Shape):
        return core.Shape([_substituted(v, bindings) for v in value])
    if isinstance(value, tuple):
        items = [_substituted(v, bindings) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    return value


def _cleanup():
    """The passes whose work the sizes decide: folding (1/N), exact identities that need
    known dims (a reshape to the same shape), and the dead code they leave."""
    from ...passes import (AlgebraicSimplification, ConstantFolding, DeadCodeElimination,
                           PassManager)

    return PassManager([ConstantFolding(), AlgebraicSimplification(), DeadCodeElimination()],
                       max_rounds=4)
