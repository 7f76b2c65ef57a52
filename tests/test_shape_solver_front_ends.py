"""What the shape solver offers a typed front end (the Axon language) besides equations:
reshapes (`SameSize`), sizes that may be 1 (`OneOrEqual`, `Variable.broadcasts`), sizes
a type holds for whatever they are (kind "universal"), each decided, refuted or left as
a check as the values allow."""
import itertools
from fractions import Fraction

import pytest

import axgraph as ng
from axgraph.dims import symbols
from axgraph.shapes import (AtLeast, Broadcast, Equal, OneOrEqual, Origin, SameShape, SameSize, ShapeVar,
                            Solver, Variable, solve)

N, M, K, A, B = symbols("N M K A B")


def at(line):
    return Origin("model.ax", line, "op")


def checks(solution):
    return sorted(str(r.constraint) for r in solution.residuals)


# -- reshapes ------------------------------------------------------------------------------------

def test_a_reshape_makes_the_products_equal():
    solution = solve([SameSize((N, 4, 7), (14, M), at(1)), Equal(N, 3, at(2))],
                     [Variable("M", "flexible")])
    assert solution.bindings == {"N": 3, "M": 3 * 4 * 7 // 14} and solution.ok


def test_a_reshape_waits_until_its_shape_variables_cancel():
    b, c = ShapeVar("b"), ShapeVar("c")
    solver = Solver([Variable("M", "flexible")]).add(SameSize((b, 6), (c, 2, M), at(1)))
    assert solver.solution.bindings == {} and checks(solver.solution) == [
        "size [*b, 6] == size [*c, 2, M]"]
    solver.add(SameShape((c,), (b,), at(2)))  # the same leading dims: they cancel
    assert solver.solution.bindings == {"M": 3} and solver.residuals == ()


def test_a_reshape_to_a_size_that_does_not_divide_is_a_conflict():
    solution = solve([SameSize((3, 5), (2, M), at(1))], [Variable("M", "flexible")])
    assert [(c.kind, c.operands) for c in solution.conflicts] == [
        ("fraction", ("M", Fraction(15, 2)))]
    assert solution.conflicts[0].origins == {at(1)}


# -- sizes that may be 1 -------------------------------------------------------------------------

@pytest.mark.parametrize("n, m, holds", [(n, m, n == 1 or n == m)
                                          for n, m in itertools.product((1, 2, 3), repeat=2)])
def test_one_or_equal_holds_exactly_when_the_size_is_1_or_the_other(n, m, holds):
    solution = solve([OneOrEqual(N, M, at(1)), Equal(N, n, at(2)), Equal(M, m, at(3))])
    assert solution.ok is holds and solution.residuals == ()
    if not holds:
        assert [(c.kind, c.operands) for c in solution.conflicts] == [("one_or_equal", (n, m))]
        assert solution.conflicts[0].origins == {at(1), at(2), at(3)}


def test_one_or_equal_is_a_check_until_both_sizes_are_known():
    solver = Solver().add(OneOrEqual(N, M, at(1)))
    assert checks(solver.solution) == ["N == 1 or N == M"]
    solver.add(Equal(N, 5, at(2)))  # not 1, but nothing is inferred from the check
    assert solver.solution.bindings == {"N": 5} and checks(solver.solution) == [
        "5 == 1 or 5 == M"]
    assert solver.fork().add(Equal(M, 5, at(3))).residuals == ()
    assert solver.add(Equal(M, 4, at(3))).conflicts[0].kind == "one_or_equal"


def test_a_size_that_may_be_1_takes_the_other_side_of_a_broadcast():
    out = ShapeVar("out")
    may_be_one = [Variable("N", broadcasts=True)]
    solution = solve([Broadcast((N, K), (M, K), (out,), at(1))], may_be_one)
    assert solution.shapes == {"out": (M, K)} and solution.bindings == {}
    assert checks(solution) == ["N == 1 or N == M"]
    for n, ok in ((1, True), (4, True), (3, False)):  # with M = 4
        fed = solve([Broadcast((N, K), (M, K), (out,), at(1)), Equal(N, n, at(2)),
                     Equal(M, 4, at(3))], may_be_one)
        assert fed.ok is ok and fed.residuals == ()
    # without the mark, only the literal 1 broadcasts: the two sizes are one
    assert solve([Broadcast((N, K), (M, K), (out,), at(1))]).bindings in ({"N": M}, {"M": N})


def test_two_sizes_that_may_be_1_facing_each_other_are_one_and_the_mark_follows():
    out, again = ShapeVar("out"), ShapeVar("again")
    solution = solve([Broadcast((N,), (A,), (out,), at(1)), Broadcast((A,), (M,), (again,), at(2))],
                     [Variable("N", broadcasts=True), Variable("A", broadcasts=True)])
    # N and A are one size, which may still be 1: facing M it takes M, with a check
    assert solution.bindings in ({"N": A}, {"A": N}) and solution.shapes["again"] == (M,)
    assert checks(solution) in (["A == 1 or A == M"], ["N == 1 or N == M"])


# -- sizes a type holds for ------------------------------------------------------------------------

def test_a_universal_size_is_never_bound_but_others_are_bound_to_it():
    universal = [Variable("N", "universal"), Variable("M", "flexible")]
    solution = solve([Equal(M, N, at(1)), Equal(K, 2 * N, at(2))], universal)
    assert solution.bindings == {"M": N, "K": 2 * N} and solution.ok


@pytest.mark.parametrize("constraint, universal, found", [
    (Equal(N, 3, at(2)), "N", [("N", 3)]),
    (Equal(N, A, at(2)), "N A", [("N", A), ("A", N)]),   # two universal sizes are never one
    (Equal(2 * N, A + 1, at(2)), "N", None),           # solved for A (rigid): A = 2*N - 1
])
def test_a_universal_size_made_one_value_or_another_size_is_a_conflict(constraint, universal,
                                                                       found):
    solution = solve([constraint], [Variable(name, "universal") for name in universal.split()])
    if found is None:
        assert solution.ok and solution.bindings == {"A": 2 * N - 1}
        return
    (conflict,) = solution.conflicts
    assert conflict.kind == "universal" and conflict.operands in found
    assert conflict.origins == {at(2)}


def test_a_size_already_used_can_still_be_made_universal_while_nothing_binds_it():
    solver = Solver([Variable("M", "flexible")]).add(AtLeast(N, 2, at(1)))
    solver.add(Equal(M, N + 1, at(2))).make_universal("N")
    assert solver.ok and solver.solution.bindings == {"M": N + 1}
    assert solver.solution.kind("N") == "universal"
    refused = solver.fork().add(Equal(N, 3, at(3)))  # now nothing may make N one size
    assert [(c.kind, c.operands) for c in refused.conflicts] == [("universal", ("N", 3))]
    bound = Solver().add(Equal(K, 4, at(1)))
    with pytest.raises(ng.AxgraphValueError, match="K is bound already"):
        bound.make_universal("K")


def test_a_size_already_used_can_be_marked_to_broadcast_later():
    out = ShapeVar("out")
    solver = Solver().add(AtLeast(N, 1, at(1))).add(Broadcast((N,), (M,), (out,), at(2)))
    assert solver.fork().solution.bindings in ({"N": M}, {"M": N})  # unmarked: one size
    solver.mark_broadcasts("N")
    assert solver.solution.shapes == {"out": (M,)} and solver.solution.bindings == {}
    assert checks(solver.solution) == ["N == 1 or N == M"]
