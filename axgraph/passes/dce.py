"""Dead code elimination: drop computations whose values nobody reads.

A `Function` lists only the nodes its results reach, so a node orphaned by a
rewrite disappears the moment the new Function is built: there is never an
unreachable node to sweep. What is left to remove is work that *is* reached
but whose value is thrown away:

* `Select` on a condition that is a uniform Constant keeps only the branch it
  takes (the other branch, and everything only it needs, becomes dead);
* `Concat` drops inputs that are empty along the joined dim, and a Concat of
  one input is that input;
* a `Slice` of a `Concat` that lies inside one input slices that input, so the
  other inputs need not be computed for it.

Parameters are never removed, used or not: they are the function's signature.
"""
from __future__ import annotations

from typing import List, Optional

from ..core.node import Node
from ..core.ops import Concat, Select, Slice
from ..dims import known
from .manager import RulePass
from .pattern import Any, Const, Match, Op, RewriteRule, uniform_value


def _select_taken_branch(match: Match) -> Optional[Node]:
    """Select(true, a, b) -> a; Select(false, a, b) -> b."""
    flag = uniform_value(match["condition"])
    return match["then"] if bool(flag) else match["otherwise"]


def _drop_empty_concat_inputs(match: Match) -> Optional[Node]:
    node = match.root
    axis = node.attributes["axis"]
    kept = [i for i in node.inputs if known(i.shape[axis], 1) != 0] or [node.inputs[0]]
    if len(kept) == len(node.inputs):
        return None
    return kept[0] if len(kept) == 1 else Concat(kept, axis)


def _slice_inside_one_concat_input(match: Match) -> Optional[Node]:
    """Slice(Concat(a, b, ...)) -> Slice(a) when the sliced range lies within a.

    Offsets may be symbolic: the range is inside when `lower - offset` and
    `offset + length - upper` simplify to non-negative ints (N - N is 0).
    """
    node, concat = match.root, match["concat"]
    axis = concat.attributes["axis"]
    lower, upper = list(node.attributes["lower"]), list(node.attributes["upper"])
    offset = 0
    for part in concat.inputs:
        length = part.shape[axis]
        # a symbolic difference (N - M) is not known to be >= 0
        if (known(length, 1) != 0 and known(lower[axis] - offset, -1) >= 0
                and known(offset + length - upper[axis], -1) >= 0):
            new_lower: List = list(lower)
            new_upper: List = list(upper)
            new_lower[axis] = lower[axis] - offset
            new_upper[axis] = upper[axis] - offset
            return Slice(part, new_lower, new_upper, node.attributes["strides"])
        offset = offset + length
    return None


RULES = (
    RewriteRule(Op(Select, Const("condition"), Any("then"), Any("otherwise")),
                _select_taken_branch, "select-constant-condition"),
    RewriteRule(Op(Concat), _drop_empty_concat_inputs, "concat-empty-inputs"),
    RewriteRule(Op(Slice, Op(Concat, label="concat")), _slice_inside_one_concat_input,
                "slice-of-concat"),
)


class DeadCodeElimination(RulePass):
    """Remove values that are computed but never read (see the module docstring)."""

    name = "dead-code-elimination"
    rules = RULES


__all__ = ["DeadCodeElimination"]
