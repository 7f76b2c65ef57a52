"""A Concat written in the layout its one reader wants.

A Concat writes its result row-major. When its only reader is a Transpose, that
reader is a strided view and whatever reads it copies it again (a transposing copy
of the whole result); joining the pieces transposed instead writes the final
layout in the one pass the Concat makes anyway (it reads its pieces in any
strides). The gradient of a projection split into pieces (a stacked query, key and
value projection, or a recurrent network's gates) is such a Concat: the pieces'
gradients joined, then moved back to the projection's layout.

| rule | before | after |
|---|---|---|
| transpose-into-concat | Transpose(Concat(x, y, ..., d), p) | Concat(Transpose(x, p), ..., p⁻¹(d)) |
| reshape-into-concat | Reshape(Concat(x, y, ..., d), s) where the joined dim stays whole | Concat(Reshape(x, s_x), ..., d') |

Both fire only where the Concat has no other reader (else it would be written
twice). A Reshape moves in only when its shape keeps the joined dim whole, with
the dims before it merged or split among themselves and the ones after it merged
into it or split among themselves, and when every piece is computed or already
reshaped (a reshape of a strided view could cost the copy that moving it in saves).
"""
from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple

from ..core.node import Node
from ..core.ops import Concat, Reshape, Transpose
from ..dims import known
from .manager import RulePass
from .pattern import Match, Op, RewriteRule


def _sole_reader(match: Match) -> bool:
    return match.uses(match["concat"]) == 1


def _transpose_into(match: Match) -> Optional[Node]:
    if not _sole_reader(match):
        return None
    concat, permutation = match["concat"], match.root.attributes["permutation"]
    axis = list(permutation).index(concat.attributes["axis"])
    return Concat([Transpose(x, permutation) for x in concat.inputs], axis)


def _static(shape: Sequence) -> Optional[Tuple[int, ...]]:
    values = tuple(known(d, -1) for d in shape)
    return None if any(v < 0 for v in values) else values


def _reshapes_cheaply(piece: Node) -> bool:
    """Whether reshaping `piece` costs no copy it did not already make: it is computed
    (row-major, so a reshape is a view) or is a Reshape already (the two merge)."""
    return not piece.movement or isinstance(piece, Reshape)


def joined_dim(shape: Sequence[int], axis: int, target: Sequence[int]) -> Optional[Tuple[int, int]]:
    """(d, m): where the dim `axis` of `shape` lands in `target` (a row-major reshape of
    it), as dim d of length shape[axis] * m, the next m elements of the dims after
    `axis` merged into it; None when the reshape mixes the dims before `axis` with it,
    or splits it."""
    before, length = math.prod(shape[:axis]), shape[axis]
    after = math.prod(shape[axis + 1:])
    if length == 0 or before * length * after == 0:
        return None
    for d in range(len(target)):
        if math.prod(target[:d]) == before and target[d] % length == 0:
            m = target[d] // length
            if after % m == 0 and math.prod(target[d + 1:]) == after // m:
                return d, m
    return None


def _reshape_into(match: Match) -> Optional[Node]:
    if not _sole_reader(match):
        return None
    concat, node = match["concat"], match.root
    shape, target = _static(concat.shape), _static(node.shape)
    pieces: List[Node] = list(concat.inputs)
    lengths = [known(x.shape[concat.attributes["axis"]], -1) for x in pieces]
    if shape is None or target is None or min(lengths) < 0 \
            or not all(_reshapes_cheaply(x) for x in pieces):
        return None
    found = joined_dim(shape, concat.attributes["axis"], target)
    if found is None:
        return None
    d, m = found
    return Concat([Reshape(x, tuple(target[:d]) + (n * m,) + tuple(target[d + 1:]))
                   for x, n in zip(pieces, lengths)], d)


RULES = (
    RewriteRule(Op(Transpose, Op(Concat, label="concat")), _transpose_into,
                "transpose-into-concat"),
    RewriteRule(Op(Reshape, Op(Concat, label="concat")), _reshape_into, "reshape-into-concat"),
)


class ConcatAbsorbsLayout(RulePass):
    """Move a Transpose or Reshape read only from a Concat into its pieces (module
    docstring)."""

    name = "concat-absorbs-layout"
    rules = RULES


__all__ = ["ConcatAbsorbsLayout", "joined_dim"]
