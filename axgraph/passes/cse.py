"""Common subexpression elimination: compute each distinct expression once.

Two nodes are the same expression when they are the same op over the same
(already merged) input nodes with equal attributes; the later one is replaced
by the earlier. Commutative ops compare their inputs as a set, so `a + b` and
`b + a` merge too.

Random draws are never merged: each is its own stream, and two draws of one
distribution are two different values even with equal attributes. Host calls
(prints) are never merged either: each is an effect of its own.
"""
from __future__ import annotations

import struct
from typing import Dict, Hashable, Tuple

import numpy as np

from ..core.function import Function
from ..core.host import HostCall
from ..core.function import map_nodes
from ..core.node import Node
from ..core.ops import Parameter, RandomNormal, RandomUniform
from .manager import Pass
from .pattern import Any, Match, RewriteRule

NEVER_MERGED: Tuple[type, ...] = (Parameter, RandomUniform, RandomNormal, HostCall)


def freeze(value) -> Hashable:
    """A hashable stand-in for an attribute value that is equal exactly when values are.

    Arrays compare by dtype, shape and bytes; floats by their bits (so 0.0 and
    -0.0 differ and NaN equals itself); bools are kept apart from ints.
    """
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, np.ascontiguousarray(value).tobytes())
    if isinstance(value, (float, np.floating)):
        return ("float", struct.pack("<d", float(value)))
    if isinstance(value, (bool, np.bool_)):
        return ("bool", bool(value))
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(freeze(v) for v in value))
    try:
        hash(value)
    except TypeError:
        return ("object", id(value))  # unhashable: never equal to another node's
    return (type(value).__name__, value)


def structural_key(node: Node, ids: Dict[Node, int]) -> Hashable:
    """The node's op, input identities (by `ids`) and frozen attributes."""
    inputs = tuple(ids[i] for i in node.inputs)
    if node.commutative:  # the op's trait
        inputs = tuple(sorted(inputs))
    attributes = tuple((k, freeze(v)) for k, v in sorted(node.attributes.items()))
    return (type(node), inputs, attributes)


class CommonSubexpressionElimination(Pass):
    """Merge nodes that compute the same expression (see the module docstring)."""

    name = "common-subexpression-elimination"

    def run(self, function: Function) -> Function:
        seen: Dict[Hashable, Node] = {}
        ids: Dict[Node, int] = {}  # the merged nodes, numbered as they are first read

        def earlier_equal(match: Match) -> Node:
            """The first node seen with this node's key (the node itself if it is first)."""
            node = match.root
            for i in node.inputs:
                ids.setdefault(i, len(ids))
            return seen.setdefault(structural_key(node, ids), node)

        merge = RewriteRule(Any(predicate=lambda node: not isinstance(node, NEVER_MERGED)),
                            earlier_equal, "merge-equal-expressions")
        return map_nodes(function, lambda node, original: merge.apply(node))


__all__ = ["CommonSubexpressionElimination", "freeze", "structural_key", "NEVER_MERGED"]
