"""Transpose/reshape sinking: move layout changes down until they cancel or vanish.

A Transpose is a copy. Elementwise ops do not care about layout, so
`exp(transpose(x))` equals `transpose(exp(x))`: moving the Transpose below the
op changes nothing by itself, but moving it far enough lets it meet another
Transpose and cancel or merge, and ops that take explicit positions absorb
it outright:

| rule | before | after |
|---|---|---|
| sink-unary-transpose | U(Transpose(x, p)) | Transpose(U(x), p) |
| sink-elementwise-transposes | B(Transpose(x, p), Transpose(y, p)) (or a uniform Constant) | Transpose(B(x, y), p) |
| sink-unary-reshape | U(Reshape(x, s)) | Reshape(U(x), s) |
| sink-elementwise-reshapes | B(Reshape(x, s), Reshape(y, s)), x and y of one shape | Reshape(B(x, y), s) |
| sink-softmax-transpose | Softmax(Transpose(x, p), axes) (or LogSoftmax) | Transpose(Softmax(x, p[axes]), p) |
| reduce-absorbs-transpose | Sum(Transpose(x, p), axes), kept dims in order | Sum(x, p[axes]) |
| dot-absorbs-transpose | Dot(Transpose(a, p), b), free dims in order | Dot(a, b) with mapped pairs and batch dims |
| + transpose-transpose, transpose-identity, reshape-reshape, reshape-same-shape (from algebraic) |

U is any unary elementwise op or Convert, B any binary elementwise op or
Select. The layout ops sunk are the core ops declaring `layout_change`
(Transpose, Reshape), and the reductions that absorb a Transpose those
declaring `order_free` (every one the core has): traits of the core ops
(axgraph/core/traits.py). A Transpose (Reshape) is only sunk when this op is
its one consumer, so sinking never duplicates a copy. Finally the pass keeps its result only if
it has fewer Transpose and Reshape nodes than before: moving copies without
removing any is churn, and the pass then returns its input unchanged.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Tuple, Type

from ..core.function import Function
from ..core.node import Node
from ..core.ops import (CORE_OPS, BinaryElementwise, Broadcast, Constant, Convert, Dot,
                        LogSoftmax, Reduction, Select, Softmax, Transpose, UnaryElementwise)
from ..core.traits import ops_with
from . import algebraic
from .manager import RulePass
from .pattern import Any, Match, Op, RewriteRule, renamed_copy, rewrite, uniform_value

UNARY = (UnaryElementwise, Convert)
NARY = (BinaryElementwise, Select)
#: The core ops that change the layout (their `layout_change` trait): what this pass sinks.
LAYOUT_OPS = ops_with("layout_change", CORE_OPS)
MERGE_RULES = ("transpose-transpose", "transpose-identity", "reshape-reshape",
               "reshape-same-shape")


def _name(node: Node) -> Optional[str]:
    return node.name if node.has_user_name else None


def _top(moved: Node, below: Node, root: Node) -> Node:
    """The layout op `moved` redone over `below`, standing for (and named as) `root`."""
    return renamed_copy(moved, [below], _name(root))


def _sole_use(match: Match, label: str) -> bool:
    return match.uses(match[label]) == 1


def _sink_unary(layout: Type[Node]) -> Callable[[Match], Optional[Node]]:
    def build(match: Match) -> Optional[Node]:
        if not _sole_use(match, "moved"):
            return None
        moved = match["moved"]
        below = renamed_copy(match.root, [moved.inputs[0]])
        return _top(moved, below, match.root)

    build.__name__ = f"sink_unary_{layout.__name__.lower()}"
    return build


def _layout_key(node: Node):
    """What two layout nodes of one op and result shape must share to be sunk together:
    the same source shape and attributes (the same permutation, say)."""
    return tuple(node.inputs[0].shape), tuple(sorted(node.attributes.items()))


def _unbroadcast(node: Node, permutation, source: Node) -> Optional[Node]:
    """A Broadcast B' with Transpose(B', permutation) == node, built in source's layout.

    Works when node is a Broadcast whose broadcast input keeps its dim order under
    the permutation (a bias vector always does); None otherwise.
    """
    if not isinstance(node, Broadcast):
        return None
    new_axes = set(node.attributes["axes"])
    kept = [i for i in range(node.rank) if i not in new_axes]
    positions = [permutation[i] for i in kept]
    if positions != sorted(positions):
        return None
    return Broadcast(node.inputs[0], source.shape,
                     tuple(sorted(permutation[i] for i in new_axes)))


def _sink_nary(layout: Type[Node]) -> Callable[[Match], Optional[Node]]:
    def build(match: Match) -> Optional[Node]:
        node = match.root
        moved = [i for i in node.inputs if isinstance(i, layout)]
        if not moved:
            return None
        key = _layout_key(moved[0])
        if any(_layout_key(m) != key for m in moved):
            return None
        source = moved[0].inputs[0]
        permutation = moved[0].attributes["permutation"] if layout is Transpose else None
        for i in node.inputs:
            if not (isinstance(i, layout) or uniform_value(i) is not None
                    or (permutation is not None
                        and _unbroadcast(i, permutation, source) is not None)):
                return None
        if not any(match.uses(m) == 1 for m in moved):
            return None  # every copy stays for other users: sinking would add one
        new_inputs: List[Node] = []
        for i in node.inputs:
            if isinstance(i, layout):
                new_inputs.append(i.inputs[0])
            elif uniform_value(i) is not None:
                new_inputs.append(Constant(i.element_type, source.shape, uniform_value(i)))
            else:
                unbroadcast = _unbroadcast(i, permutation, source)
                assert unbroadcast is not None  # checked in the loop above
                new_inputs.append(unbroadcast)
        return _top(moved[0], renamed_copy(node, new_inputs), node)

    build.__name__ = f"sink_elementwise_{layout.__name__.lower()}s"
    return build


def _sink_softmax(match: Match) -> Optional[Node]:
    if not _sole_use(match, "moved"):
        return None
    moved, node = match["moved"], match.root
    p = moved.attributes["permutation"]
    axes = tuple(sorted(p[a] for a in node.attributes["axes"]))
    softmax = LogSoftmax if isinstance(node, LogSoftmax) else Softmax
    return _top(moved, softmax(moved.inputs[0], axes), node)


def _increasing(values: List[int]) -> bool:
    return all(a < b for a, b in zip(values, values[1:]))


def _is_order_free(node: Node) -> bool:
    return node.order_free


def _reduce_absorbs(match: Match) -> Optional[Node]:
    node, moved = match.root, match["moved"]
    assert isinstance(node, Reduction)  # the rule's pattern
    p, axes = moved.attributes["permutation"], node.attributes["axes"]
    kept = [p[i] for i in range(len(p)) if i not in axes]
    if not _increasing(kept):
        return None
    return type(node)(moved.inputs[0], tuple(sorted(p[a] for a in axes)), name=_name(node))


def _dot_absorbs(match: Match) -> Optional[Node]:
    node = match.root
    attributes = node.attributes
    contract = [list(attributes["contract_a"]), list(attributes["contract_b"])]
    batch = [list(attributes["batch_a"]), list(attributes["batch_b"])]
    inputs = list(node.inputs)
    changed = False
    for side in (0, 1):
        t = inputs[side]
        if not isinstance(t, Transpose):
            continue
        p = t.attributes["permutation"]
        free = [p[i] for i in range(len(p)) if i not in contract[side] + batch[side]]
        if not _increasing(free):
            continue
        contract[side] = [p[c] for c in contract[side]]
        batch[side] = [p[c] for c in batch[side]]
        inputs[side] = t.inputs[0]
        changed = True
    if not changed:
        return None
    return Dot(inputs[0], inputs[1], contract[0], contract[1], batch[0], batch[1],
               name=_name(node))


def _merge_rules() -> Tuple[RewriteRule, ...]:
    return tuple(r for r in algebraic.rules() if r.name in MERGE_RULES)


RULES = _merge_rules() + tuple(
    RewriteRule(Op(UNARY, Op(layout, label="moved")), _sink_unary(layout),
                f"sink-unary-{layout.__name__.lower()}") for layout in LAYOUT_OPS) + tuple(
    RewriteRule(Op(NARY), _sink_nary(layout), f"sink-elementwise-{layout.__name__.lower()}s")
    for layout in LAYOUT_OPS) + (
    RewriteRule(Op(Softmax, Op(Transpose, label="moved")), _sink_softmax,
                "sink-softmax-transpose"),
    RewriteRule(Op(Reduction, Op(Transpose, label="moved"), predicate=_is_order_free),
                _reduce_absorbs, "reduce-absorbs-transpose"),
    RewriteRule(Op(Dot, Any(), Any()), _dot_absorbs, "dot-absorbs-transpose"),
)


def layout_copies(function: Function) -> int:
    """How many layout ops (Transpose, Reshape: `LAYOUT_OPS`) the function has."""
    return sum(isinstance(n, LAYOUT_OPS) for n in function.nodes)


class LayoutSinking(RulePass):
    """Sink Transposes and Reshapes where that removes some (module docstring)."""

    name = "layout-sinking"
    rules = RULES

    def run(self, function: Function) -> Function:
        sunk = rewrite(function, self._index)
        if sunk is function or layout_copies(sunk) >= layout_copies(function):
            return function
        return sunk


__all__ = ["LayoutSinking", "layout_copies"]
