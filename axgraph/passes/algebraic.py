"""Algebraic simplification: identities that make nodes disappear, as pattern rules.

Each rule is exact under IEEE arithmetic (NaN, infinities and signed zeros
come out the same), which is why some tempting ones are absent: `x * 0` is
NaN for x = inf or NaN, and `x - x` is NaN for x = inf, so neither folds to 0.

The one identity that is exact only up to the sign of zero is `x + 0.0`
(-0.0 + 0.0 is +0.0) and `x - (-0.0)`; they fold unless the pass is built
with `keep_signed_zeros=True`. (`x + (-0.0)` and `x - 0.0` are exact and
always fold; integers have no signed zero.)

| rule | before | after |
|---|---|---|
| mul-one | x * 1, 1 * x | x |
| add-zero | x + 0, 0 + x | x |
| sub-zero | x - 0 | x |
| div-one, pow-one | x / 1, x ** 1 | x |
| double-negative, double-not | -(-x), not(not x) | x |
| abs-abs, abs-negative | abs(abs x), abs(-x) | abs x |
| convert-same-type | Convert(x: t, t) | x |
| transpose-identity | Transpose(x, (0, 1, ...)) | x |
| transpose-transpose | Transpose(Transpose(x, p), q) | Transpose(x, p∘q), or x |
| transpose-unit-dims | Transpose(x, p) moving only dims of length 1 | Reshape(x, shape) |
| reshape-same-shape | Reshape(x, x.shape) | x |
| reshape-reshape | Reshape(Reshape(x, s), t) | Reshape(x, t) |
| broadcast-no-axes | Broadcast(x, x.shape, ()) | x |
| broadcast-broadcast | Broadcast(Broadcast(x)) | one Broadcast |
| move-uniform-constant | a movement op (Broadcast, Reshape, Transpose, Slice, Reverse) of a uniform Constant | uniform Constant |
| concat-uniform-constants | Concat of Constants all filled with one value | uniform Constant |
| reduce-no-axes | a reduction over no axes, R(x, ()) | x |
| reduce-broadcast-copies | an idempotent reduction (Max, Min) over dims a Broadcast added, none empty | x, or x broadcast over the other added dims |
| slice-everything | Slice(x, 0, x.shape, 1) | x |
| reverse-none, reverse-reverse | Reverse(x, ()), Reverse(Reverse(x, a), b) | x, Reverse(x, a xor b) |
| pad-none | Pad(x, 0, 0, 0) | x |
| concat-one | Concat([x]) | x |
| select-same | Select(c, x, x) | x |

Which ops the movement and reduction rules apply to is read from the ops' traits
(axgraph/core/traits.py): `movement`, and a reduction's `idempotent`.
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from ..core.node import Node
from ..core.traits import ops_with
from ..dims import definitely_equal
from ..core.ops import (CORE_OPS, Abs, Add, Broadcast, Concat, Constant, Convert, Divide,
                        Multiply, Negative, Not, Pad, Power, Reduction, Reshape, Reverse, Select,
                        Slice, Subtract, Transpose)
from .manager import RulePass
from .pattern import Any, Const, Match, Op, Predicate, RewriteRule, uniform_value

#: The core ops that move elements without computing (their `movement` trait).
MOVEMENT_OPS = ops_with("movement", CORE_OPS)


# -- predicates ------------------------------------------------------------------------------

def _zero(sign_ok) -> Predicate:
    """A uniform zero Constant; for floats, `sign_ok(negative)` decides on the sign."""

    def test(node: Node) -> bool:
        value = uniform_value(node)
        if value is None or not node.element_type.is_numeric or value != 0:
            return False
        return not node.element_type.is_float or sign_ok(bool(np.signbit(value)))

    return test


def _identity_permutation(permutation: Tuple[int, ...]) -> bool:
    return permutation == tuple(range(len(permutation)))


def _moves_only_unit_dims(node: Node) -> bool:
    """A Transpose that keeps every dim of length other than 1 in its order: the
    row-major order of the elements is unchanged, so it is a Reshape."""
    shape = node.inputs[0].shape
    moved = [i for i in node.attributes["permutation"] if not definitely_equal(shape[i], 1)]
    return moved == sorted(moved)


def _same_shape_as_input(node: Node) -> bool:
    return node.shape == node.inputs[0].shape


def _same_type_as_input(node: Node) -> bool:
    return node.element_type == node.inputs[0].element_type


def _takes_everything(node: Node) -> bool:
    x = node.inputs[0]
    a = node.attributes
    return (all(definitely_equal(v, 0) for v in a["lower"]) and all(s == 1 for s in a["strides"])
            and all(definitely_equal(u, d) for u, d in zip(a["upper"], x.shape)))


def _is_idempotent(node: Node) -> bool:
    return node.idempotent


def _pads_nothing(node: Node) -> bool:
    a = node.attributes
    return all(definitely_equal(pad, 0)
               for pad in a["below"] + a["above"] + a["interior"])


# -- replacements ----------------------------------------------------------------------------

def _x(match: Match) -> Node:
    return match["x"]


def _inner(match: Match) -> Node:
    return match["inner"]


def _compose_transposes(match: Match) -> Node:
    inner, outer = match["inner"], match.root.attributes["permutation"]
    p = inner.attributes["permutation"]
    combined = tuple(p[q] for q in outer)
    return match["x"] if _identity_permutation(combined) else Transpose(match["x"], combined)


def _as_reshape(match: Match) -> Node:
    return Reshape(match["x"], match.root.shape)


def _merge_reshapes(match: Match) -> Node:
    x, shape = match["x"], match.root.shape
    return x if x.shape == shape else Reshape(x, shape)


def _merge_broadcasts(match: Match) -> Node:
    inner, outer = match["inner"], match.root
    outer_axes = outer.attributes["axes"]
    kept = [i for i in range(outer.rank) if i not in outer_axes]
    axes = set(outer_axes) | {kept[j] for j in inner.attributes["axes"]}
    return Broadcast(match["x"], outer.shape, tuple(sorted(axes)))


def _uniform_constant(match: Match) -> Node:
    node = match.root
    return Constant(node.element_type, node.shape, uniform_value(match["c"]))


def _one_uniform_value(node: Node) -> bool:
    """Concat whose inputs are Constants all filled with one (bitwise) value."""
    values = [uniform_value(i) for i in node.inputs]
    if any(v is None for v in values):
        return False
    first = values[0].tobytes()  # type: ignore[union-attr]  # no None is left
    return all(v.tobytes() == first for v in values[1:])  # type: ignore[union-attr]  # as above


def _concat_of_uniform(match: Match) -> Node:
    node = match.root
    return Constant(node.element_type, node.shape, uniform_value(node.inputs[0]))


def _reduce_broadcast_copies(match: Match) -> Optional[Node]:
    """R(Broadcast(x, shape, added), axes) for an idempotent R and axes among the added
    dims, each of a length known to be at least 1 (an empty one is an error to keep):
    every reduced value is a copy of one element of x."""
    node, broadcast = match.root, match["inner"]
    axes, added = set(node.attributes["axes"]), set(broadcast.attributes["axes"])
    if not axes <= added or not all(isinstance(broadcast.shape[a], int)
                                    and broadcast.shape[a] > 0 for a in axes):
        return None
    if axes == added:
        return match["x"]
    kept = [i for i in range(broadcast.rank) if i not in axes]
    return Broadcast(match["x"], node.shape, tuple(kept.index(i) for i in sorted(added - axes)))


def _merge_reverses(match: Match) -> Node:
    axes = set(match["inner"].attributes["axes"]) ^ set(match.root.attributes["axes"])
    return Reverse(match["x"], tuple(sorted(axes))) if axes else match["x"]


def _single_input(match: Match) -> Optional[Node]:
    inputs = match.root.inputs
    return inputs[0] if len(inputs) == 1 else None


def _abs_of(match: Match) -> Node:
    return Abs(match["x"])


def rules(keep_signed_zeros: bool = False) -> Tuple[RewriteRule, ...]:
    """The rule table; `keep_signed_zeros` keeps x + 0.0 and x - (-0.0) (see docstring)."""
    x = Any("x")
    add_zero = _zero(lambda negative: negative or not keep_signed_zeros)
    sub_zero = _zero(lambda negative: not negative or not keep_signed_zeros)
    return (
        RewriteRule(Op(Multiply, x, Const(value=1), commutative=True), _x, "mul-one"),
        RewriteRule(Op(Add, x, Any(predicate=add_zero), commutative=True), _x, "add-zero"),
        RewriteRule(Op(Subtract, x, Any(predicate=sub_zero)), _x, "sub-zero"),
        RewriteRule(Op(Divide, x, Const(value=1)), _x, "div-one"),
        RewriteRule(Op(Power, x, Const(value=1)), _x, "pow-one"),
        RewriteRule(Op(Negative, Op(Negative, x)), _x, "double-negative"),
        RewriteRule(Op(Not, Op(Not, x)), _x, "double-not"),
        RewriteRule(Op(Abs, Op(Abs, x, label="inner")), _inner, "abs-abs"),
        RewriteRule(Op(Abs, Op(Negative, x)), _abs_of, "abs-negative"),
        RewriteRule(Op(Convert, x, predicate=_same_type_as_input), _x, "convert-same-type"),
        RewriteRule(Op(Transpose, x, attrs={"permutation": _identity_permutation}), _x,
                    "transpose-identity"),
        RewriteRule(Op(Transpose, Op(Transpose, x, label="inner")), _compose_transposes,
                    "transpose-transpose"),
        RewriteRule(Op(Transpose, x, predicate=_moves_only_unit_dims), _as_reshape,
                    "transpose-unit-dims"),
        RewriteRule(Op(Reshape, x, predicate=_same_shape_as_input), _x, "reshape-same-shape"),
        RewriteRule(Op(Reshape, Op(Reshape, x)), _merge_reshapes, "reshape-reshape"),
        RewriteRule(Op(Broadcast, x, attrs={"axes": ()}), _x, "broadcast-no-axes"),
        RewriteRule(Op(Broadcast, Op(Broadcast, x, label="inner")), _merge_broadcasts,
                    "broadcast-broadcast"),
        RewriteRule(Op(MOVEMENT_OPS, Const("c")), _uniform_constant, "move-uniform-constant"),
        RewriteRule(Op(Concat, predicate=_one_uniform_value), _concat_of_uniform,
                    "concat-uniform-constants"),
        RewriteRule(Op(Reduction, x, attrs={"axes": ()}), _x, "reduce-no-axes"),
        RewriteRule(Op(Reduction, Op(Broadcast, x, label="inner"), predicate=_is_idempotent),
                    _reduce_broadcast_copies, "reduce-broadcast-copies"),
        RewriteRule(Op(Slice, x, predicate=_takes_everything), _x, "slice-everything"),
        RewriteRule(Op(Reverse, x, attrs={"axes": ()}), _x, "reverse-none"),
        RewriteRule(Op(Reverse, Op(Reverse, x, label="inner")), _merge_reverses,
                    "reverse-reverse"),
        RewriteRule(Op(Pad, x, predicate=_pads_nothing), _x, "pad-none"),
        RewriteRule(Op(Concat), _single_input, "concat-one"),
        RewriteRule(Op(Select, Any(), x, x), _x, "select-same"),
    )


class AlgebraicSimplification(RulePass):
    """Apply the identities of the module docstring to a fixed point."""

    name = "algebraic-simplification"

    def __init__(self, keep_signed_zeros: bool = False):
        super().__init__(rules(keep_signed_zeros))
        self.keep_signed_zeros = keep_signed_zeros


__all__ = ["AlgebraicSimplification", "rules"]
