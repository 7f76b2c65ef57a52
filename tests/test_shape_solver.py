"""The shape solver on constraints written by hand: linear equations (one variable, then
systems), non-linear ones kept as residuals (never guessed), floors, divisibility,
domains, shapes with shape variables and appends, provenance in every message, checks
against values fed later, and verdicts that do not depend on the order of constraints."""
import itertools
import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import axgraph as ng
from axgraph.dims import Dim, dim_max, evaluate, symbols
from axgraph.shapes import (AtLeast, Divides, Equal, Origin, SameShape, ShapeVar, Variable,
                            solve)
from axgraph.shapes.monotone import least_solution, non_decreasing
from axgraph.shapes.solver import _Solver, _Work

N, M, K, H, T, D, L = symbols("N M K H T D L")


def at(line, what="op", reason=""):
    return Origin("model.py", line, what, reason)


def residual_texts(solution):
    return sorted(str(r.constraint) for r in solution.residuals)


# -- equations ------------------------------------------------------------------------------

def test_a_linear_equation_in_one_variable_is_solved():
    solution = solve([Equal(2 * N + 1, 7, at(1))])
    assert solution.bindings == {"N": 3} and solution.ok and not solution.residuals
    assert solution.binding_origins["N"] == {at(1)}


def test_a_solution_that_is_not_a_whole_number_is_a_conflict():
    solution = solve([Equal(2 * N + 1, 8, at(4))])
    (conflict,) = solution.conflicts
    assert "N would have to be 7/2" in conflict.message and "model.py:4" in conflict.message
    with pytest.raises(ng.ShapeConflictError, match="7/2"):
        solution.raise_conflicts()


def test_a_size_out_of_its_domain_is_a_conflict():
    (conflict,) = solve([Equal(N + 5, 3, at(2))]).conflicts
    assert "N = -2" in conflict.message and ">= 1" in conflict.message
    K0 = ng.dim("K0", min=0)
    assert solve([Equal(K0 + 5, 5, at(2))]).bindings == {"K0": 0}
    (conflict,) = solve([Equal(ng.dim("S", max=8), 9, at(3))]).conflicts
    assert "S = 9" in conflict.message and "<= 8" in conflict.message


def test_a_small_linear_system_is_solved_by_elimination():
    solution = solve([Equal(N + M, 5, at(1)), Equal(N - M, 1, at(2))])
    assert solution.bindings == {"N": 3, "M": 2}
    assert solution.binding_origins["N"] == {at(1), at(2)}
    three = solve([Equal(N + M + K, 9, at(1)), Equal(N - M, 1, at(2)), Equal(M - K, 1, at(3))])
    assert three.bindings == {"N": 4, "M": 3, "K": 2}


def test_an_underdetermined_system_keeps_its_equations():
    solution = solve([Equal(N + M, 5, at(1)), Equal(2 * N + 2 * M, 10, at(2))])
    assert solution.ok and len(solution.bindings) <= 1
    assert all(not isinstance(v, int) for v in solution.bindings.values())


def test_an_inconsistent_system_names_every_equation():
    # any two of these have a solution (N, M = 3, 2 / 4, 3 / 0, 5); all three have none
    solution = solve([Equal(N + M, 5, at(1)), Equal(N - M, 1, at(2)), Equal(N + 2 * M, 10, at(3))])
    assert not solution.ok
    named = set().union(*(c.origins for c in solution.conflicts))
    assert {at(1), at(2), at(3)} <= named


def test_no_whole_number_solution_by_the_gcd():
    (conflict,) = solve([Equal(2 * N + 4 * M, 7, at(1))]).conflicts
    assert "no whole-number solution" in conflict.message


@pytest.mark.parametrize("equation", [
    Equal(N * M, 6, at(1)),
    Equal(N * N, 16, at(1)),
    Equal(N * M + N, 12, at(1)),
])
def test_non_linear_equations_are_residuals_not_guesses(equation):
    solution = solve([equation])
    assert solution.ok and solution.bindings == {}
    assert residual_texts(solution) == [str(equation)]


def test_a_residual_becomes_solvable_once_a_variable_is_known():
    solution = solve([Equal(N * M, 6, at(1)), Equal(N, 2, at(2))])
    assert solution.bindings == {"N": 2, "M": 3} and not solution.residuals
    assert solution.binding_origins["M"] == {at(1), at(2)}


def test_a_non_linear_equation_that_cannot_hold_is_refuted():
    (conflict,) = solve([Equal(N * M + 1, 0, at(7))]).conflicts  # N*M >= 1
    assert "model.py:7" in conflict.message


def test_a_floor_equation_bounds_its_variable_and_binds_it_when_one_value_fits():
    solution = solve([Equal((H + 3) // 4, 16, at(1))])
    assert solution.bounds["H"] == (61, 64) and "H" not in solution.bindings
    assert residual_texts(solution) == ["(H + 3)//4 == 16"]
    assert solve([Equal(H // 4, 16, at(1)), AtLeast(H, 67, at(2))]).bindings == {"H": 67}
    assert solve([Equal(H // 4, 16, at(1)), AtLeast(H, 68, at(2))]).ok is False
    exact = solve([Equal((2 * H + 1) // 2, 5, at(1))])  # floor(H + 1/2) = H
    assert exact.bindings == {"H": 5}
    (conflict,) = solve([Equal(2 * (H // 3), 5, at(3))]).conflicts
    assert "5/2" in conflict.message


def test_a_variable_times_a_symbolic_size_is_a_quotient_with_a_divisibility_check():
    open_length = [Variable("K", "flexible", min=0)]
    exact = solve([Equal(K * D, 4 * D, at(1))], open_length)
    assert exact.bindings == {"K": 4}
    quotient = solve([Equal(K * D, L, at(2))], open_length)
    (q,) = quotient.quotients
    assert (q.name, q.dividend, q.divisor) == ("K", L, D)
    assert residual_texts(quotient) == ["L % D == 0"]
    checked = quotient.check({"L": 12, "D": 4}, at(9, "fed"))
    assert checked.bindings["K"] == 3
    with pytest.raises(ng.ShapeCheckError, match=r"K would have to be 13/4"):
        quotient.check({"L": 13, "D": 4}, at(9, "fed"))


def test_rigid_and_flexible_variables():
    solution = solve([Equal(N, M, at(1))], [Variable("M", "flexible")])
    assert solution.inferred == {"M": N} and solution.pinned == {}
    pinned = solve([Equal(N, 3, at(2))])
    assert pinned.pinned == {"N": 3}
    assert "pinned N = 3" in str(pinned)


# -- inequalities and divisibility -----------------------------------------------------------------

def test_inequalities_narrow_bounds_and_the_strongest_is_kept():
    solution = solve([AtLeast(H - 2, 1, at(1)), AtLeast(H - 4, 1, at(2)), AtLeast(H // 2, 1, at(3))])
    assert solution.bounds["H"] == (5, math.inf)
    assert residual_texts(solution) == ["H >= 5"]
    assert solve([AtLeast(H, 1, at(1))]).residuals == ()          # proved by the domain


def test_a_check_on_one_size_is_reported_as_its_bound():
    # each check says exactly "H >= its least value" (or "at most"), from the line that set it
    solution = solve([AtLeast((H - 3) // 2, 4, at(1)), AtLeast(20 - 3 * T, 2, at(2)),
                      AtLeast(H - 2 * T, 1, at(3))])
    assert min(h for h in range(1, 40) if (h - 3) // 2 >= 4) == 11
    assert max(t for t in range(1, 40) if 20 - 3 * t >= 2) == 6
    found = {str(r.constraint): r.origins for r in solution.residuals}
    assert found == {"H >= 11": {at(1)}, "6 >= T": {at(2)}, "H - 2*T >= 1": {at(3)}}


def test_a_check_on_several_floors_of_one_size_narrows_to_the_least_size_that_fits():
    # a pooled branch and a strided branch of one input, concatenated: at least 5 long
    both = H // 2 + H // 3
    widest = dim_max(H // 2, 3) + H // 3
    solution = solve([AtLeast(both, 5, at(1)), AtLeast(widest, 6, at(2))])
    least = min(h for h in range(1, 200) if h // 2 + h // 3 >= 5 and max(h // 2, 3) + h // 3 >= 6)
    assert solution.bounds["H"] == (least, math.inf)
    assert solution.narrowed["H"] & {at(1), at(2)}
    too_short = max(h for h in range(1, 200) if h // 2 + h // 3 < 5)
    (conflict,) = solve([AtLeast(both, 5, at(1)), Equal(H, too_short, at(4))]).conflicts
    assert "model.py:1" in conflict.message and "model.py:4" in conflict.message


@pytest.mark.parametrize("expression, monotone", [
    ((H - 3) // 2 - 4, True), (dim_max(H // 2, 3) - 5, True), (3 - H, False),
    (H * H - 9, False), (H - N, False), (7, True)])
def test_least_solution_of_a_monotone_check(expression, monotone):
    assert non_decreasing(expression, "H") is monotone
    if monotone and isinstance(expression, Dim):
        expected = min(h for h in range(1, 100) if evaluate(expression, {"H": h}) >= 0)
        assert least_solution(expression, "H", 1) == expected
        assert least_solution(expression, "H", expected + 3) == expected + 3


def test_an_inequality_that_cannot_hold_is_refuted_with_its_lines():
    solution = solve([Equal(N, 3, at(1)), AtLeast(N, 5, at(2))])
    (conflict,) = solution.conflicts
    assert "model.py:1" in conflict.message and "model.py:2" in conflict.message
    assert not solve([AtLeast(H - 3, 1, at(1)), AtLeast(-H, -2, at(2))]).ok  # H >= 4, H <= 2


def test_divisibility():
    solution = solve([Divides(4, 4 * N + 8, at(1)), Divides(4, N, at(2)), Divides(D, D * T, at(3))])
    assert residual_texts(solution) == ["N % 4 == 0"]
    (conflict,) = solve([Divides(4, 2 * N + 1, at(4))]).conflicts  # odd: never a multiple
    assert "not a multiple of 4" in conflict.message
    assert solve([Divides(4, N, at(1)), Equal(N, 12, at(2))]).residuals == ()
    assert not solve([Divides(4, N, at(1)), Equal(N, 10, at(2))]).ok


# -- shapes ---------------------------------------------------------------------------------------

def test_append_is_split_once_ranks_are_known():
    b = ShapeVar("b")
    solution = solve([SameShape((b, M, K), (2, 3, M, 7), at(5))])
    assert solution.shapes == {"b": (2, 3)} and solution.bindings == {"K": 7}
    assert solution.shape((b, K)) == (2, 3, 7)


def test_shape_variables_chain():
    a, b = ShapeVar("a"), ShapeVar("b")
    solution = solve([SameShape((a,), (b, N), at(1)), SameShape((b,), (4, 5), at(2)),
                      SameShape((a,), (4, 5, 6), at(3))])
    assert solution.shape((a,)) == (4, 5, 6) and solution.bindings == {"N": 6}


def test_an_append_of_unknown_ranks_waits_and_stays_residual():
    a, b, c, d = (ShapeVar(n) for n in "abcd")
    solution = solve([SameShape((a, b), (c, d), at(1))])
    assert solution.ok and len(solution.residuals) == 1
    later = solve([SameShape((a, b), (c, d), at(1)), SameShape((a,), (1,), at(2)),
                   SameShape((c,), (), at(3)), SameShape((d,), (N, 2), at(4))])
    assert later.shape((b,)) == (2,) and later.bindings == {"N": 1}


def test_rank_mismatch_and_occurs_check():
    b = ShapeVar("b")
    (rank,) = solve([SameShape((b, 3), (b, 3, 4), at(6))]).conflicts
    assert "ranks differ" in rank.message
    (rank,) = solve([SameShape((1, 2), (1, 2, 3), at(6))]).conflicts
    assert "ranks differ" in rank.message
    (cycle,) = solve([SameShape((b,), (1, b, 2), at(7))]).conflicts
    assert "contain itself" in cycle.message


# -- provenance ------------------------------------------------------------------------------------

def test_a_contradiction_names_every_line_that_led_to_it():
    solution = solve([Equal(N, 128, Origin("train.py", 12, "cast_axes")),
                      Equal(M, 64, Origin("data.py", 40, "cast_axes")),
                      Equal(N, M, Origin("model.py", 33, "dot"))])
    (conflict,) = solution.conflicts
    assert conflict.message == ("N = 128 from cast_axes at train.py:12, but M = 64 from "
                                "cast_axes at data.py:40, via dot at model.py:33")
    assert conflict.origins == {Origin("train.py", 12, "cast_axes"),
                                Origin("data.py", 40, "cast_axes"),
                                Origin("model.py", 33, "dot")}


def test_a_chain_of_inferences_is_named_in_full():
    solution = solve([Equal(N, 2 * M, at(1)), Equal(M, K + 1, at(2)), Equal(K, 3, at(3)),
                      Equal(N, 9, at(4))])
    (conflict,) = solution.conflicts
    for line in (1, 2, 3, 4):
        assert f"model.py:{line}" in conflict.message


def test_check_reports_the_values_and_both_lines():
    solution = solve([Equal(N, 3, Origin("a.py", 10, "cast_axes"))])
    with pytest.raises(ng.ShapeCheckError) as info:
        solution.check({"N": 4}, Origin("b.py", 20, "x fed"))
    assert "N = 3 from cast_axes at a.py:10, but N = 4 from x fed at b.py:20" in str(info.value)
    assert isinstance(info.value, ng.FeedError)
    assert solution.check({"N": 3}, Origin("b.py", 20)).bindings == {"N": 3}


def test_residuals_are_checked_with_values():
    solution = solve([AtLeast(H - 4, 1, Origin("net.py", 5, "convolution"))])
    with pytest.raises(ng.ShapeCheckError, match=r"H = 4 from x fed at run.py:3, but H must be "
                                                 r">= 5 \(from convolution at net.py:5\)"):
        solution.check({"H": 4}, Origin("run.py", 3, "x fed"))
    solution.check({"H": 5}, Origin("run.py", 3))


def test_solve_refuses_what_is_not_a_constraint():
    with pytest.raises(ng.AxgraphTypeError, match="constraints"):
        solve([(N, 3)])


# -- order does not matter ------------------------------------------------------------------------

def _verdict(solution):
    return (solution.ok, sorted(solution.bindings.items(), key=lambda kv: kv[0]) if solution.ok
            else None)


_NAMES = ("N", "M", "K")


@st.composite
def _systems(draw):
    """A few constraints over N, M, K: linear, non-linear, inequalities, divisibility."""
    values = {name: draw(st.integers(1, 6)) for name in _NAMES}
    constraints = []
    for line in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["lin", "lin", "bare", "prod", "ge", "div", "wrong"]))
        a, b = (Dim(draw(st.sampled_from(_NAMES))) for _ in range(2))
        c = draw(st.integers(1, 3))
        env = {n: values[n] for n in _NAMES}
        origin = Origin("sys.py", line + 1)
        if kind == "lin":
            constraints.append(Equal(c * a + b, (c * a + b).evaluate(env), origin))
        elif kind == "bare":
            constraints.append(Equal(a, a.evaluate(env), origin))
        elif kind == "prod":
            constraints.append(Equal(a * b, (a * b).evaluate(env), origin))
        elif kind == "ge":
            constraints.append(AtLeast(a + c, b, origin))
        elif kind == "div":
            constraints.append(Divides(c, c * a, origin))
        else:
            constraints.append(Equal(a + c, a.evaluate(env) + c + draw(st.integers(-1, 1)), origin))
    return constraints


def _run_in_order(constraints):
    """The solver's worklist in exactly this order (solve() itself sorts its input)."""
    solver = _Solver({})
    works = [_Work(c, frozenset()) for c in constraints]
    for work in works:
        solver._note_atoms(work.constraint)
    import axgraph.shapes.solver as module
    original = module._canonical_key
    order = {id(w): i for i, w in enumerate(works)}
    try:
        module._canonical_key = lambda work: order[id(work)]
        solver.advance(works)
        return solver.finish()
    finally:
        module._canonical_key = original


@settings(max_examples=60, deadline=None)
@given(_systems(), st.randoms(use_true_random=False))
def test_shuffling_the_constraints_never_changes_a_verdict(constraints, chooser):
    reference = solve(constraints)
    shuffled = list(constraints)
    chooser.shuffle(shuffled)
    again = solve(shuffled)
    assert [c.message for c in again.conflicts] == [c.message for c in reference.conflicts]
    assert again.bindings == reference.bindings
    assert residual_texts(again) == residual_texts(reference)
    # and the worklist itself, without the canonical order, reaches the same verdicts
    raw = _run_in_order(shuffled)
    assert raw.ok == reference.ok
    if raw.ok:
        for values in itertools.product(range(1, 7), repeat=3):
            env = dict(zip(_NAMES, values))
            # a point satisfies every constraint exactly when it satisfies both solutions
            holds = all(_holds(c, env) for c in constraints)
            assert holds == _satisfies(raw, env) == _satisfies(reference, env)


def _holds(constraint, env):
    if isinstance(constraint, Equal):
        return _value(constraint.left, env) == _value(constraint.right, env)
    if isinstance(constraint, AtLeast):
        return _value(constraint.value, env) >= _value(constraint.bound, env)
    return _value(constraint.dividend, env) % _value(constraint.divisor, env) == 0


def _value(dim, env):
    return dim if isinstance(dim, int) else dim.evaluate(env)


def _satisfies(solution, env):
    """Whether a point fits a solution: its bindings and residual checks hold there."""
    for name, value in solution.bindings.items():
        if env[name] != _value(value, env):
            return False
    return all(_holds(r.constraint, env) for r in solution.residuals)


def test_a_fresh_quotient_for_a_symbolic_divisor():
    from axgraph.shapes import quotient

    q, constraints, variable = quotient(L, D, at(3, "reshape"))
    solution = solve(constraints, [variable])
    assert variable.kind == "derived" and solution.ok
    (found,) = solution.quotients
    assert (found.name, found.dividend, found.divisor) == (q.name, L, D)
    assert residual_texts(solution) == ["L % D == 0"]
    assert solution.check({"L": 12, "D": 4}, at(9, "fed")).bindings[q.name] == 3
    with pytest.raises(ng.ShapeCheckError, match="model.py:3"):
        solution.check({"L": 14, "D": 4}, at(9, "fed"))
    other, _, _ = quotient(L, D, at(4))
    assert other != q  # each call makes a new variable


def test_one_signature_used_at_two_ranks():
    # `dense : [*b, k] -> [k, n] -> [*b, n]`, instantiated with fresh shape variables at
    # each use (a front end's job): once on a matrix, once on a rank-3 tensor
    def use(tag, x_shape, w_shape, line):
        b, k, n = ShapeVar(f"b{tag}"), Dim(f"k{tag}"), Dim(f"n{tag}")
        out = ShapeVar(f"out{tag}")
        origin = at(line, "dense")
        return [SameShape((b, k), x_shape, origin), SameShape((k, n), w_shape, origin),
                SameShape((out,), (b, n), origin)], out

    first, out1 = use(1, (32, 784), (784, 10), 1)
    second, out2 = use(2, (T, 5, 784), (784, 64), 2)
    solution = solve(first + second)
    assert solution.shape((out1,)) == (32, 10)
    assert solution.shape((out2,)) == (T, 5, 64)
    (conflict,) = solve(use(3, (T, 5, 783), (784, 64), 7)[0]).conflicts
    assert "model.py:7" in conflict.message


def test_origins_print_where_and_why():
    here = Origin.here("dense", "contracts k")  # @here
    assert here.file.endswith("test_shape_solver.py") and here.what == "dense"
    with open(__file__) as source:
        expected = next(i for i, text in enumerate(source, start=1)
                        if text.rstrip().endswith("# @here"))
    assert here.line == expected
    assert str(Origin("m.py", 3, "dot", "contracts D")) == "dot at m.py:3 (contracts D)"
    assert Origin("m.ax", 3, column=7).place == "m.ax:3:7"


def test_every_conflict_is_listed():
    solution = solve([Equal(N, 2, at(1)), Equal(N, 3, at(2)), Equal(M + 1, 0, at(3))])
    assert len(solution.conflicts) == 2
    with pytest.raises(ng.ShapeConflictError) as info:
        solution.raise_conflicts()
    text = str(info.value)
    assert text.count("\n  - ") == 2 and "model.py:3" in text and "model.py:2" in text
    assert "conflict:" in str(solution)


def test_a_length_to_infer_is_a_floor_with_a_divisibility_check_when_division_is_inexact():
    open_length = [Variable("K", "flexible", min=0)]
    solution = solve([Equal(2 * K, 3 * M, at(4, "cast_axes"))], open_length)
    assert solution.inferred == {"K": M + M // 2}
    assert residual_texts(solution) == ["3*M % 2 == 0"]
    for m in range(1, 9):  # the floor is exact where the check passes, by hand
        if 3 * m % 2 == 0:
            assert solution.check({"M": m}, at(9, "fed")).bindings["K"] == 3 * m // 2
        else:
            with pytest.raises(ng.ShapeCheckError, match="model.py:4"):
                solution.check({"M": m}, at(9, "fed"))
    # a declared size is never solved by a floor: the equation stays a check
    declared = solve([Equal(2 * K, 3 * M, at(4))])
    assert declared.bindings == {} and residual_texts(declared) == ["2*K == 3*M"]


# -- conflicts a front end words itself -------------------------------------------------------------

def _kinds_found(constraints, variables=()):
    solution = solve(constraints, variables)
    return [(c.kind, c.operands) for c in solution.conflicts]


@pytest.mark.parametrize("constraints, expected", [
    ([Equal(N, 3, at(1)), Equal(N, 4, at(2))], ("mismatch", (3, 4))),
    ([Equal(2 * N, 3, at(1))], ("fraction", ("N", Fraction(3, 2)))),
    ([Equal(2 * N + 2 * M, 3, at(1))], ("no_whole_solution", (2 * N + 2 * M - 3,))),
    ([Equal(N, -2, at(1))], ("domain", ("N", -2, 1, math.inf, None))),
    ([AtLeast(N, 5, at(1)), Equal(N, 3, at(2))],
     ("domain", ("N", 3, 5, math.inf, AtLeast(N, 5, at(1))))),
    ([Divides(4, N, at(1)), Equal(N, 6, at(2))], ("divides", (4, 6))),
    ([SameShape((N, M), (3,), at(1))], ("rank", ((N, M), (3,)))),
    ([AtLeast(H, 10, at(1)), Equal((H + 3) // 4, 2, at(2))],
     ("bounds", ("H", (5, 8), (10, math.inf)))),
    ([Equal(N * M, 0, at(1))], ("apart", (N * M, 0))),
    ([Equal(2 * N + 3 * M, 8, at(1)), Equal(3 * N + 2 * M, 8, at(2))], ("system", ("M", Fraction(8, 5)))),
])
def test_each_conflict_says_what_it_found_and_on_which_values(constraints, expected):
    # (H + 3)//4 == 2 holds exactly for H in 5..8; 2N + 3M == 3N + 2M == 8 gives N = M = 8/5
    assert [h for h in range(1, 20) if (h + 3) // 4 == 2] == [5, 6, 7, 8]
    found = _kinds_found(constraints)  # (the system makes both N and M 8/5: two conflicts)
    assert found[0] == expected and {kind for kind, _ in found} == {expected[0]}


def test_a_conflict_names_the_values_known_when_it_was_found():
    # the rank conflict shows the shapes with the shape variable's binding spliced in
    b = ShapeVar("b")
    found = _kinds_found([SameShape((b, M), (K, T, 7), at(1)), SameShape((b,), (2,), at(2))])
    assert found == [("rank", ((K, T), (2,)))]
