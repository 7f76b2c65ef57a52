"""Axon's size conditions checked by the shared shape solver (`axon.shared.SharedChecks`):
each Axon condition becomes the shared constraint it stands for, a conflict is worded as
Axon words it (with Axon's display names) and names the Axon positions behind it; and
the `Unifier` over it, which unifies types itself and leaves shapes to that solver."""
import pytest

from axgraph.dims import Dim
from axgraph.frontends.axon.shared import SharedChecks, substituted
from axgraph.frontends.axon.conditions import (AtLeast, Broadcast, Conflict, DimEq, Divides,
                                           OneOrEqual, SameSize, ShapeEq, TypeEq)
from axgraph.frontends.axon.source import Span
from axgraph.frontends.axon.types import Fresh, FunctionType, ShapeVar, TensorType
from axgraph.frontends.axon.unify import Unifier

N, M, H = Dim("N"), Dim("M"), Dim("H")
CAUSES = [(Span(1, 5, 1, 9), "annotated"), (Span(2, 3, 2, 7), "argument 1 of `f`"),
          (Span(3, 1, 3, 4), "`reshape`")]


def conflicts(*conditions, hints=None):
    fresh = Fresh()
    fresh.hints.update(hints or {})
    checks = SharedChecks(CAUSES, "model.ax", fresh)
    for condition in conditions:
        checks.add(condition)
    return checks, checks.conflicts()


@pytest.mark.parametrize("conditions, message, positions", [
    ([DimEq(N, 3, frozenset({0})), DimEq(N, 4, frozenset({1}))], "dims differ: 3 vs 4", {0, 1}),
    ([AtLeast(H - 2, 1, frozenset({2}), "H is too small"), DimEq(H, 2, frozenset({0}))],
     "H is too small: 0 < 1", {0, 2}),   # the check that bounded H, in its own words
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


# -- the unifier: types here, shapes and sizes in the shared solver ---------------------------------

def unifier():
    return Unifier(Fresh(), CAUSES, "model.ax")


def test_a_function_type_unifies_with_concrete_types_and_reads_back_its_sizes():
    u = unifier()
    fresh = u.fresh
    b, k, n = fresh.shape("b"), fresh.dim("k"), fresh.dim("n")
    dtype = fresh.dtype()
    a, r = fresh.type(), fresh.type()
    f = FunctionType(TensorType(dtype, (b, k)), FunctionType(TensorType(dtype, (k, n)),
                                                            TensorType(dtype, (b, n))))
    u.add(TypeEq(f, FunctionType(a, FunctionType(TensorType("f32", (4, 5)), r)), frozenset({1})),
          TypeEq(a, TensorType("f32", (2, 3, 4)), frozenset({0})))
    u.solve()
    assert u.resolve(r) == TensorType("f32", (2, 3, 5))
    assert u.resolve_shape((b,)) == (2, 3) and u.resolve_dim(k) == 4 and u.resolve_dtype(dtype) == "f32"


@pytest.mark.parametrize("left, right, message", [
    (TensorType("f32", ()), TensorType("f64", ()), "element types differ: f32 vs f64"),
    (TensorType("f32", ()), FunctionType(TensorType("f32", ()), TensorType("f32", ())),
     "a tensor is used as a function: f32[] vs f32[] -> f32[]"),
])
def test_types_of_another_structure_are_a_type_conflict_at_once(left, right, message):
    with pytest.raises(Conflict) as info:
        unifier().add(TypeEq(left, right, frozenset({0, 1})))
    assert (info.value.kind, info.value.message, info.value.blame) == ("type", message, {0, 1})


def test_a_type_that_would_contain_itself_is_refused():
    u = unifier()
    a = u.fresh.type()
    with pytest.raises(Conflict, match="a type would contain itself"):
        u.add(TypeEq(a, FunctionType(a, a), frozenset({2})))


def test_sizes_that_do_not_fit_are_a_shape_conflict_when_solved_naming_every_position():
    u = unifier()
    k = u.fresh.dim("k")
    u.add(TypeEq(TensorType("f32", (k, k)), TensorType("f32", (3, 4)), frozenset({0, 2})))
    with pytest.raises(Conflict) as info:
        u.solve()
    assert (info.value.kind, info.value.message, info.value.blame) == (
        "shape", "dims differ: 3 vs 4", {0, 2})
