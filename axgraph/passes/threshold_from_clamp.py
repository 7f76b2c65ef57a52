"""Threshold tests read the clamped value: `x > c` becomes `max(x, c) > c` where that max exists.

Why: a ReLU's gradient masks the incoming gradient with `z > 0`, which keeps the
pre-activation z alive from the forward pass to the backward pass beside the
activation `max(z, 0)`: two tensors the size of a layer's output where one does.
`max(x, c) > c` equals `x > c` for every x (for a NaN both are false), so the
mask may read the activation instead. z then dies at the ReLU (the planner
reuses its memory, and the transposes around it can sink), and in the backward
pass the mask reads values the max-pool adjoint has just read (it reads the
activation too) instead of a tensor last touched in the forward pass.

The max must already be computed before the comparison (it is, in a training
step: the forward pass comes first), its bound a uniform Constant equal to the
threshold (not NaN), so nothing new is computed and no order changes.

The cpu backend runs it on each program, after the lowering passes: before
them, LayoutSinking would sink the activation's transposes through the mask
(its pre-activation input then has one reader) and leave the mask and the
product it is fused with in different axis orders, unfused.
"""
from __future__ import annotations

from typing import Dict, Optional

from ..core.function import Function, map_nodes
from ..core.node import Node
from ..core.ops import Greater, Maximum
from .manager import Pass
from .pattern import uniform_value
from .rewrite_log import record_rewrite

RULE = "threshold-reads-clamp"


def _bound(maximum: Node, x: Node) -> Optional[Node]:
    """The other operand of `maximum` when one of its operands is `x`, else None."""
    a, b = maximum.inputs
    return b if a is x else a if b is x else None


def _same_bound(threshold, bound) -> bool:
    """Two uniform values equal as numbers (0.0 and -0.0 alike), neither NaN."""
    return (threshold is not None and bound is not None and threshold.dtype == bound.dtype
            and bool(threshold == bound))


class ThresholdFromClamp(Pass):
    """Rewrite Greater(x, c) as Greater(Maximum(x, c), c) where that Maximum runs earlier."""

    name = "threshold-from-clamp"

    def run(self, function: Function) -> Function:
        users = function.users()
        order = {node: step for step, node in enumerate(function.nodes)}
        rebuilt: Dict[Node, Node] = {}

        def clamp_of(greater: Node) -> Optional[Node]:
            x, threshold = greater.inputs
            value = uniform_value(threshold)
            for user in users.get(x, ()):
                bound = _bound(user, x) if isinstance(user, Maximum) else None
                if (bound is not None and order[user] < order[greater]
                        and user.shape == x.shape and user.element_type == x.element_type
                        and _same_bound(value, uniform_value(bound))):
                    return user
            return None

        def rewrite(node: Node, original: Node) -> Optional[Node]:
            replacement = None
            clamp = clamp_of(original) if isinstance(original, Greater) else None
            if clamp is not None:
                replacement = node.with_inputs([rebuilt[clamp], node.inputs[1]])
                record_rewrite(RULE, original, replacement)
            rebuilt[original] = node if replacement is None else replacement
            return replacement

        return map_nodes(function, rewrite)


__all__ = ["ThresholdFromClamp"]
