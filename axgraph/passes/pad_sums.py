"""Sums of zero-padded pieces become one Concat.

The adjoint of slicing a tensor pads the slice's gradient back to the full
shape with zeros. A recurrent network slices its input sequence once per
time step, so the sequence's gradient arrives as T full-size Pads added
together: T^2 elements written and read for T slices' worth of values (the
char LSTM example spent half its step there). When the pieces are padded
along one dim into disjoint ranges, their sum is exactly their Concat, with
zeros in the gaps; whatever else the sum adds is added to that once.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

from .. import core
from ..core.function import Function
from ..core.function import map_nodes
from ..core.node import Node
from ..dims import definitely_equal, known
from .manager import Pass
from .pattern import Match, Op, RewriteRule

Piece = Tuple[int, int, int, Node]  # (dim, start, stop, values)


def _piece(node: Node) -> Optional[Piece]:
    """A Pad with zeros along exactly one static dim and no interior padding."""
    if not isinstance(node, core.Pad) or node.attributes["value"] != 0 \
            or not all(definitely_equal(gap, 0) for gap in node.attributes["interior"]):
        return None
    below, above = node.attributes["below"], node.attributes["above"]
    dims = [i for i, (b, a) in enumerate(zip(below, above))
            if not (definitely_equal(b, 0) and definitely_equal(a, 0))]
    if len(dims) != 1:
        return None
    (dim,) = dims
    (x,) = node.inputs
    start, length = known(below[dim], None), known(x.shape[dim], None)
    if start is None or length is None or known(above[dim], None) is None:
        return None
    return dim, start, start + length, x


def _terms(root: Node) -> Optional[List[Node]]:
    """The terms of the tree of same-typed Adds under `root`, left to right; None if
    a term is reached twice (the tree is a DAG: leave it alone)."""
    terms: List[Node] = []
    seen = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if node in seen:
            return None
        seen.add(node)
        if isinstance(node, core.Add) and node.shape == root.shape \
                and node.element_type == root.element_type:
            stack.extend(reversed(node.inputs))
        else:
            terms.append(node)
    return terms


def _as_concat(root: Node, terms: List[Node]) -> Optional[Node]:
    """Sum of `terms` with its disjoint zero-padded pieces joined into one Concat."""
    pieces: Dict[int, List[Tuple[Piece, Node]]] = {}
    for term in terms:
        piece = _piece(term)
        if piece is not None:
            pieces.setdefault(piece[0], []).append((piece, term))
    if not pieces:
        return None
    dim, chosen = max(pieces.items(), key=lambda item: len(item[1]))
    if len(chosen) < 2:
        return None
    chosen.sort(key=lambda entry: entry[0][1])
    if any(later[1] < earlier[2] for (earlier, _), (later, _) in zip(chosen, chosen[1:])):
        return None  # overlapping pieces really are added
    parts: List[Node] = []
    position = 0
    total = root.shape[dim]

    def zeros(length: int) -> Node:
        shape = tuple(length if i == dim else n for i, n in enumerate(root.shape))
        return core.Constant(root.element_type, shape, 0)

    for (_, start, stop, values), _ in chosen:
        if start > position:
            parts.append(zeros(start - position))
        parts.append(values)
        position = stop
    if total > position:
        parts.append(zeros(total - position))
    result = core.Concat(parts, dim)
    joined = {term for _, term in chosen}
    for term in terms:
        if term not in joined:
            result = core.Add(term, result)
    return result


def _sum_as_concat(match: Match) -> Optional[Node]:
    terms = _terms(match.root)
    return _as_concat(match.root, terms) if terms else None


PAD_SUM = RewriteRule(Op(core.Add), _sum_as_concat, "pad-sum-to-concat")


def _terms_of_larger_sums(function: Function) -> Set[Node]:
    """Adds read only by same-shaped Adds (and not results): the rule waits for the root."""
    users = function.users()
    results = set(function.results)
    return {node for node in function.nodes
            if isinstance(node, core.Add) and node not in results and users[node]
            and all(isinstance(user, core.Add) and user.shape == node.shape
                    for user in users[node])}


class PadSumToConcat(Pass):
    """Rewrite sums of zero-padded disjoint pieces (slice adjoints) as one Concat."""

    name = "pad-sum-to-concat"

    def run(self, function: Function) -> Function:
        inner = _terms_of_larger_sums(function)
        return map_nodes(function, lambda node, original:
                         None if original in inner else PAD_SUM.apply(node))
