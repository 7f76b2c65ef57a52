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
from ..core.node import Node
from ..core.ops import Parameter, RandomNormal, RandomUniform
from .manager import Pass

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
        canonical: Dict[Node, Node] = {}
        seen: Dict[Hashable, Node] = {}
        ids: Dict[Node, int] = {}
        changed = False
        for node in function.nodes:
            current = node.with_inputs([canonical[i] for i in node.inputs])
            if not isinstance(current, NEVER_MERGED):
                key = structural_key(current, ids)
                earlier = seen.setdefault(key, current)
                if earlier is not current:
                    current = earlier
            ids.setdefault(current, len(ids))
            canonical[node] = current
            changed = changed or current is not node
        if not changed:
            return function
        return Function([canonical[r] for r in function.results],
                        [canonical[p] for p in function.parameters], function.name)


__all__ = ["CommonSubexpressionElimination", "freeze", "structural_key", "NEVER_MERGED"]
