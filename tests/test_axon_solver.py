"""Axon's conditions decided on their own: the `Unifier` (types here, shapes and sizes in
the shared shape solver), conditions in, bindings and residual checks out.

Each case states the conditions and the expected solution by hand; contradictions must
name the union of the blame sets involved; non-linear equations stay residual (never
guessed); and the verdict never depends on the order the conditions arrive in.
"""
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from axgraph.dims import Dim
from axgraph.frontends.axon.conditions import (AtLeast, Broadcast, Conflict, DimEq, Divides,
                                               SameSize, ShapeEq, TypeEq)
from axgraph.frontends.axon.shared import SharedChecks, substituted
from axgraph.frontends.axon.source import Span
from axgraph.frontends.axon.types import Fresh, FunctionType, TensorType, TupleType
from axgraph.frontends.axon.unify import Unifier

B, M, N, H, W = (Dim(name) for name in "BMNHW")
#: Positions for the blame sets of the cases (position i on line i + 1).
CAUSES = [(Span(i + 1, 1, i + 1, 5), f"position {i}") for i in range(10)]


def unifier(fresh=None):
    return Unifier(fresh or Fresh(), CAUSES)


def solved(*constraints):
    solver = unifier()
    solver.add(*constraints)
    solver.solve()
    return solver


def value(solver, dim):
    return solver.resolve_dim(dim)


# -- dims ---------------------------------------------------------------------------------------

def test_a_linear_equation_in_one_variable_is_solved_exactly():
    solver = solved(DimEq(2 * N + 1, 7))
    assert value(solver, N) == 3


def test_a_fraction_is_a_contradiction_naming_the_variable():
    with pytest.raises(Conflict, match=r"N would have to be 7/2, not a whole number"):
        solved(DimEq(2 * N, 7, frozenset({4})))


def test_a_size_is_never_zero_or_negative():
    with pytest.raises(Conflict, match="size N would be -2; sizes are at least 1"):
        solved(DimEq(N + 5, 3))
    with pytest.raises(Conflict, match="size N would be 0; sizes are at least 1"):
        solved(DimEq(N + 3, 3))


def test_positive_factors_cancel_so_a_product_equation_becomes_linear():
    # reshape [B, 784] to [B, 28, k]: B*784 == B*28*k, and B >= 1, so k == 28
    k = Dim("_1")
    solver = solved(DimEq(B * 784, B * 28 * k))
    assert value(solver, k) == 28 and value(solver, B) == B


def test_several_variables_are_eliminated_one_by_one():
    # a + b == 10, a - b == 2: Gaussian elimination by substitution
    a, b = Dim("a"), Dim("b")
    solver = solved(DimEq(a + b, 10), DimEq(a - b, 2))
    assert (value(solver, a), value(solver, b)) == (6, 4)


def test_an_inexact_division_becomes_a_floor_and_a_divisibility_check():
    # 2*d == 3*m: d is (3*m)//2, provided 2 divides 3*m
    d, m = Dim("_1"), Dim("m")
    solver = solved(DimEq(2 * d, 3 * m))
    assert value(solver, d) == (3 * m) // 2 == m + m // 2
    (residual,) = solver.residuals()
    assert isinstance(residual, Divides) and residual.divisor == 2 and residual.value == 3 * m


def test_a_non_linear_equation_stays_a_residual_and_is_not_guessed():
    a, b = Dim("a"), Dim("b")
    solver = solved(DimEq(a * b, 12))
    assert value(solver, a) == a and value(solver, b) == b
    (residual,) = solver.residuals()
    assert isinstance(residual, DimEq) and residual.left * 1 == a * b


def test_a_non_linear_equation_is_decided_once_a_variable_is_known():
    a, b = Dim("a"), Dim("b")
    solver = solved(DimEq(a * b, 12), DimEq(a, 3))
    assert value(solver, b) == 4 and solver.residuals() == []


def test_inexact_user_sizes_keep_their_name_and_the_inference_variable_is_solved_for():
    # rows * 4 == M: M is the user's, so M := 4*rows (exact) rather than rows := M // 4
    rows = Dim("rows")
    solver = solved(DimEq(rows * 4, M))
    assert value(solver, M) == 4 * rows


def test_the_newest_inference_variable_is_eliminated():
    first, second = Dim("_3"), Dim("_9")
    solver = solved(DimEq(second, first))
    assert value(solver, second) == first and value(solver, first) == first


# -- inequalities and divisibility ----------------------------------------------------------------

def test_an_inequality_is_proved_refuted_or_left_for_run_time():
    assert solved(AtLeast(N + 2, 2)).residuals() == []             # N >= 1 always
    with pytest.raises(Conflict, match="window too big: 3 < 5"):
        solved(AtLeast(3, 5, frozenset(), "window too big"))
    (residual,) = solved(AtLeast(N, 5)).residuals()
    assert residual.value == N and residual.least == 5


def test_checks_on_one_size_merge_into_its_strongest_bound():
    # a stack of windows: H - 2 >= 1, (H - 2)//2 - 2 >= 1 and H//4 >= 1 leave one check, H >= 8
    solver = solved(AtLeast(H - 2, 1), AtLeast((H - 2) // 2 - 2, 1), AtLeast(H // 4, 1))
    (residual,) = solver.residuals()
    assert (residual.value, residual.least) == (H, 8)
    for h in range(1, 40):  # the bound is exactly where all three start to hold
        holds = h - 2 >= 1 and (h - 2) // 2 - 2 >= 1 and h // 4 >= 1
        assert holds == (h >= 8)


def test_a_bound_becomes_a_check_on_what_its_variable_is_later_bound_to():
    solver = solved(AtLeast(H, 5))
    solver.add(DimEq(H, 4, frozenset({7})))
    with pytest.raises(Conflict, match="size H is too small: 4 < 5") as info:
        solver.solve()
    assert 7 in info.value.blame


def test_divisibility_is_proved_from_coefficients_or_refuted_on_numbers():
    assert solved(Divides(2, 4 * N + 6)).residuals() == []
    with pytest.raises(Conflict, match="2 does not divide 7"):
        solved(Divides(2, 7))
    assert len(solved(Divides(2, 3 * N)).residuals()) == 1


# -- shapes ---------------------------------------------------------------------------------------

def test_append_splits_a_shape_once_the_other_side_is_known():
    fresh = Fresh()
    s, k = fresh.shape(), fresh.dim("k")
    solver = unifier(fresh)
    solver.add(ShapeEq((s, k), (B, 28, 28)))
    solver.solve()
    assert solver.resolve_shape((s,)) == (B, 28) and value(solver, k) == 28


def test_matching_from_both_ends_leaves_the_shape_variable_the_middle():
    fresh = Fresh()
    s = fresh.shape()
    solver = unifier(fresh)
    solver.add(ShapeEq((B, s, 3), (B, 4, 5, 3)))
    solver.solve()
    assert solver.resolve_shape((s,)) == (4, 5)


def test_two_shape_variables_against_dims_wait_for_a_rank():
    fresh = Fresh()
    a, b = fresh.shape(), fresh.shape()
    solver = unifier(fresh)
    solver.add(ShapeEq((a, b), (B, 4, 5)))
    solver.solve()
    assert len(solver.residuals()) == 1
    solver.add(ShapeEq((a,), (B,)))
    solver.solve()
    assert solver.resolve_shape((b,)) == (4, 5) and solver.residuals() == []


def test_ranks_that_differ_and_shapes_that_contain_themselves_are_contradictions():
    fresh = Fresh()
    with pytest.raises(Conflict, match=r"ranks differ: \[B, 4\] vs \[B\]"):
        solved(ShapeEq((B, 4), (B,)))
    s = fresh.shape()
    solver = unifier(fresh)
    solver.add(ShapeEq((s,), (N, s)))
    with pytest.raises(Conflict, match=r"ranks differ: \[\*s\] vs \[N, \*s\]"):
        solver.solve()  # a shape would contain itself: no rank fits


def test_same_size_cancels_shared_shape_variables():
    fresh = Fresh()
    s, d = fresh.shape(), fresh.dim()
    solver = unifier(fresh)
    solver.add(SameSize((s, 2, 3), (s, d)))
    solver.solve()
    assert value(solver, d) == 6


def test_broadcasting_only_the_literal_one_broadcasts():
    fresh = Fresh()
    out = fresh.shape()
    solver = unifier(fresh)
    solver.add(Broadcast((B, 1, N), (M, 1), (out,)))
    solver.solve()
    # aligned at the end: N with 1 gives N, 1 with M gives M, B is left over
    assert solver.resolve_shape((out,)) == (B, M, N)
    fresh = Fresh()
    out = fresh.shape()
    solver = unifier(fresh)
    solver.add(Broadcast((B, N), (M,), (out,)))  # two variables: unified, never broadcast
    solver.solve()
    assert solver.resolve_shape((out,)) == (B, N) and value(solver, M) == N  # N came first


def test_broadcasting_waits_for_where_dims_stand():
    fresh = Fresh()
    a, out = fresh.shape(), fresh.shape()
    solver = unifier(fresh)
    solver.add(Broadcast((a,), (N,), (out,)))
    solver.solve()
    assert len(solver.residuals()) == 1
    solver.add(ShapeEq((a,), (B, 1)))
    solver.solve()
    assert solver.resolve_shape((out,)) == (B, N)


# -- types and blame ------------------------------------------------------------------------------

def test_types_unify_structurally_with_an_occurs_check():
    fresh = Fresh()
    a = fresh.type()
    solver = unifier(fresh)
    solver.add(TypeEq(FunctionType(a, TensorType("f32", (N,))),
                      FunctionType(TupleType((TensorType("f32", (3,)),) * 2), TensorType("f32", (3,)))))
    solver.solve()
    assert solver.resolve(a) == TupleType((TensorType("f32", (3,)),) * 2) and value(solver, N) == 3
    with pytest.raises(Conflict, match="a type would contain itself"):
        solved(TypeEq(a, FunctionType(a, a)))
    with pytest.raises(Conflict, match="element types differ: f32 vs f64"):
        solved(TypeEq(TensorType("f32", ()), TensorType("f64", ())))


def test_a_contradiction_names_every_constraint_that_led_to_it():
    # N = 128 (1), M = N (2), M = 64 (3): all three are to blame; the unrelated (4) is not
    with pytest.raises(Conflict) as info:
        solved(DimEq(N, 128, frozenset({1})), DimEq(M, N, frozenset({2})),
               DimEq(B, 5, frozenset({4})), DimEq(M, 64, frozenset({3})))
    assert info.value.blame == {1, 2, 3}


# -- order independence -----------------------------------------------------------------------

def _system(draw_values, equations, rng):
    """Constraints over variables a..e of the given values: linear equations between them
    (some scaled), one product; `equations` picks which."""
    names = "abcde"
    dims = {n: Dim(n) for n in names}
    constraints = []
    for kind, i, j, c in equations:
        x, y = names[i], names[j]
        if kind == "sum":
            constraints.append(DimEq(dims[x] + dims[y], draw_values[i] + draw_values[j] + c,
                                     frozenset({len(constraints)})))
        elif kind == "scaled":
            constraints.append(DimEq(2 * dims[x], dims[y] * 1 + (2 * draw_values[i] - draw_values[j]) + c,
                                     frozenset({len(constraints)})))
        else:
            constraints.append(DimEq(dims[x] * dims[y], draw_values[i] * draw_values[j] + c,
                                     frozenset({len(constraints)})))
    return constraints


def _verdict(constraints):
    solver = unifier()
    solver.add(*constraints)
    try:
        solver.solve()
    except Conflict:
        return "conflict", None
    decided = {}
    for name in "abcde":
        bound = solver.resolve_dim(Dim(name))
        if isinstance(bound, int):
            decided[name] = bound
    return decided, solver.residuals()


def _holds(residual, values):
    """Whether a residual check passes when every variable has its value in `values`."""
    checks = SharedChecks(CAUSES, "<axon>", Fresh())
    checks.add(substituted(residual, values))
    return not checks.conflicts()


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.integers(1, 9), min_size=5, max_size=5),
       equations=st.lists(st.tuples(st.sampled_from(["sum", "scaled", "product"]),
                                    st.integers(0, 4), st.integers(0, 4), st.sampled_from([0, 0, 1])),
                          min_size=1, max_size=6),
       seed=st.integers(0, 1000))
def test_shuffling_the_constraints_never_changes_the_verdict(values, equations, seed):
    constraints = _system(values, equations, random.Random(seed))
    first, _ = _verdict(constraints)
    consistent = all(c == 0 for *_, c in equations)
    truth = dict(zip("abcde", values))
    rng = random.Random(seed)
    for _ in range(4):
        shuffled = list(constraints)
        rng.shuffle(shuffled)
        again, residuals = _verdict(shuffled)
        assert (again == "conflict") == (first == "conflict")
        if again != "conflict":
            assert again == first  # every decided size has the same value
        if consistent:  # true by construction: never refuted, and no check rejects the truth
            assert again != "conflict"
            assert {k: truth[k] for k in again} == again
            assert all(_holds(r, truth) for r in residuals)
