"""Axon's size conditions checked by the shared shape solver (`axon.shared.SharedChecks`):
each Axon condition becomes the shared constraint it stands for, a conflict is worded as
Axon words it (with Axon's display names) and names the Axon positions behind it."""
import pytest

from axgraph.dims import Dim
from axgraph.frontends.axon.shared import SharedChecks, substituted
from axgraph.frontends.axon.solver import (AtLeast, Broadcast, DimEq, Divides, OneOrEqual,
                                           SameSize, ShapeEq)
from axgraph.frontends.axon.source import Span
from axgraph.frontends.axon.types import ShapeVar

N, M, H = Dim("N"), Dim("M"), Dim("H")
CAUSES = [(Span(1, 5, 1, 9), "annotated"), (Span(2, 3, 2, 7), "argument 1 of `f`"),
          (Span(3, 1, 3, 4), "`reshape`")]


def conflicts(*conditions, hints=None):
    checks = SharedChecks(CAUSES, "model.ax", hints or {})
    for condition in conditions:
        checks.add(condition)
    return checks, checks.conflicts()


@pytest.mark.parametrize("conditions, message, positions", [
    ([DimEq(N, 3, frozenset({0})), DimEq(N, 4, frozenset({1}))], "dims differ: 3 vs 4", {0, 1}),
    ([AtLeast(H - 2, 1, frozenset({2}), "H is too small"), DimEq(H, 2, frozenset({0}))],
     "size H is too small: 2 < 3", {0, 2}),
    ([substituted(AtLeast(H - 2, 1, frozenset({2}), "H is too small"), {"H": 2})],
     "H is too small: 0 < 1", {2}),
    ([DimEq(N + 3, 1, frozenset({1}))], "size N would be -2; sizes are at least 1", {1}),
    ([Divides(2, 3 * M, frozenset({2}), "rows must fill"), DimEq(M, 3, frozenset({1}))],
     "rows must fill: 2 does not divide 9", {1, 2}),
    ([OneOrEqual(2, 3, frozenset({1}))],
     "dims differ: 2 vs 3 (a dim marked `#` broadcasts only where it is 1)", {1}),
    ([ShapeEq((N, 4), (N,), frozenset({0, 2}))], "ranks differ: [N, 4] vs [N]", {0, 2}),
    ([SameSize((3, 5), (2, Dim("_7")), frozenset({2}))],
     "rows would have to be 15/2, not a whole number", {2}),
])
def test_a_refuted_condition_is_worded_as_axon_words_it(conditions, message, positions):
    checks, found = conflicts(*conditions, hints={"_7": "rows"})
    assert len(found) == 1
    assert checks.message(found[0]) == message and checks.blame(found[0]) == positions


def test_conditions_that_hold_give_no_conflict():
    b = ShapeVar(4, "b")
    _, found = conflicts(SameSize((b, 6), (b, 2, M), frozenset({2})), DimEq(M, 3, frozenset({0})),
                         Broadcast((N, 1), (5,), (N, 5), frozenset({1})),
                         OneOrEqual(1, 7, frozenset({1})), AtLeast(H, 3, frozenset({0})))
    assert found == []


def test_values_substituted_decide_a_residual_check():
    check = Divides(2, 3 * M, frozenset({2}), "rows must fill")
    for m in range(1, 7):
        _, found = conflicts(substituted(check, {"M": m}))
        assert (found == []) is ((3 * m) % 2 == 0)
