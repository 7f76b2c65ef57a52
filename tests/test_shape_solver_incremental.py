"""The shape solver told one constraint at a time (`Solver`): the same verdicts as the batch
`solve`, whatever order and batches the constraints come in; `fork` keeps two states
apart; `take_residuals` hands over the undecided checks on some variables."""
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import axgraph as ng
from axgraph.dims import Dim, symbols
from axgraph.shapes import (AtLeast, Broadcast, Divides, Equal, Origin, SameShape, ShapeVar,
                            Solver, Variable, solve)

from test_shape_solver import _NAMES, _holds, _satisfies, _systems

N, M, K = symbols("N M K")


def at(line):
    return Origin("model.py", line, "op")


def test_constraints_added_one_by_one_bind_as_they_come():
    solver = Solver()
    solver.add(Equal(N + M, 5, at(1)))
    assert solver.solution.bindings == {"M": 5 - N}  # linear: solved for one of them
    # M = 5 - N must be a size: a check, and N at most 4
    assert solver.ok and [str(r.constraint) for r in solver.residuals] == ["4 >= N"]
    assert solver.solution.bounds["N"] == (1, 4)
    solver.add(Equal(M, 2, at(2)))
    assert solver.solution.bindings == {"M": 2, "N": 3} and solver.residuals == ()
    assert solver.solution.binding_origins["N"] == {at(1), at(2)}


def test_a_later_constraint_refutes_an_earlier_binding_naming_both_lines():
    solver = Solver().add(Equal(2 * N, 8, at(3)))
    assert solver.solution.bindings == {"N": 4}
    solver.add(Equal(N + 1, 6, at(7)))
    (conflict,) = solver.conflicts
    assert not solver.ok
    assert conflict.origins == {at(3), at(7)}
    assert "model.py:3" in conflict.message and "model.py:7" in conflict.message


def test_a_residual_is_decided_when_a_value_arrives():
    solver = Solver().add(AtLeast(N, 5, at(1))).add(Divides(4, M, at(2)))
    assert sorted(str(r.constraint) for r in solver.residuals) == ["M % 4 == 0", "N >= 5"]
    assert solver.solution.bounds["N"] == (5, float("inf"))
    solver.add(Equal(M, 12, at(3)))
    assert [str(r.constraint) for r in solver.residuals] == ["N >= 5"] and solver.ok
    solver.add(Equal(N, 4, at(4)))
    (conflict,) = solver.conflicts
    assert conflict.origins == {at(1), at(4)}


def test_fork_keeps_the_two_states_apart():
    base = Solver().add(Equal(N * M, 12, at(1)))
    one, two = base.fork(), base.fork()
    one.add(Equal(N, 3, at(2)))
    two.add(Equal(N, 5, at(3)))
    assert one.solution.bindings["M"] == 4 and one.ok
    # N*M == 12 has no whole M for N = 5: only the second fork sees the conflict
    assert not two.ok and {at(1), at(3)} <= two.conflicts[0].origins
    assert base.ok and base.solution.bindings == {}
    assert [str(r.constraint) for r in base.residuals] == ["M*N == 12"]


def test_shape_variables_bind_incrementally():
    b, out = ShapeVar("b"), ShapeVar("out")
    solver = Solver().add(SameShape((b, K), (N, 3, 784), at(1)))
    solver.add(SameShape((out,), (b, 10), at(2)))
    assert solver.solution.shape((out,)) == (N, 3, 10)
    assert solver.solution.bindings == {"K": 784}


def test_take_residuals_removes_only_the_checks_on_the_named_variables():
    solver = Solver().add(AtLeast(N, 3 + M // 2, at(1))).add(Divides(3, K, at(2)))
    taken = solver.take_residuals({"M"})
    assert [str(r.constraint) for r in taken] == ["N >= M//2 + 3"]
    assert taken[0].origins == {at(1)}
    assert [str(r.constraint) for r in solver.residuals] == ["K % 3 == 0"]


def test_a_variable_is_declared_before_it_is_used():
    solver = Solver([Variable("N", "flexible", min=0)]).add(Equal(N + M, 4, at(1)))
    assert solver.solution.bindings == {"N": 4 - M}
    with pytest.raises(ng.AxgraphValueError, match="declare variable M before"):
        solver.declare(Variable("M", "flexible"))
    with pytest.raises(ng.AxgraphTypeError, match="not 3"):
        solver.add(3)


@settings(max_examples=40, deadline=None)
@given(_systems(), st.randoms(use_true_random=False), st.integers(1, 4))
def test_adding_in_any_order_and_batches_gives_the_batch_verdict(constraints, chooser, cuts):
    reference = solve(constraints)
    shuffled = list(constraints)
    chooser.shuffle(shuffled)
    solver = Solver()
    snapshots = []
    for index, constraint in enumerate(shuffled):
        solver.add(constraint)
        if index % cuts == 0:  # read the verdict now and then, as a front end does
            snapshots.append(solver.ok)
    got = solver.solution
    assert got.ok == reference.ok
    # once refuted, always refuted: a verdict read early is never taken back
    assert snapshots == sorted(snapshots, reverse=True)
    if got.ok:
        for values in itertools.product(range(1, 7), repeat=3):
            env = dict(zip(_NAMES, values))
            holds = all(_holds(c, env) for c in constraints)
            assert holds == _satisfies(got, env) == _satisfies(reference, env)
    else:
        blamed = set().union(*(c.origins for c in got.conflicts))
        assert blamed <= {c.origin for c in constraints}


@settings(max_examples=30, deadline=None)
@given(_systems(), st.randoms(use_true_random=False))
def test_a_fork_reaches_the_same_verdict_as_adding_to_the_original(constraints, chooser):
    half = len(constraints) // 2
    shuffled = list(constraints)
    chooser.shuffle(shuffled)
    base = Solver().add_all(shuffled[:half])
    fork = base.fork().add_all(shuffled[half:])
    alone = Solver().add_all(constraints)
    assert fork.ok == alone.ok
    assert base.ok == solve(shuffled[:half]).ok


def test_a_quotient_is_solved_again_when_its_sizes_arrive_later():
    D, L = symbols("D L")
    solver = Solver([Variable("K", "flexible", min=0)]).add(Equal(K * D, L, at(1)))
    (quotient,) = solver.solution.quotients
    assert (quotient.name, quotient.dividend, quotient.divisor) == ("K", L, D)
    solver.add(Equal(D, 4, at(2)))
    solver.add(Equal(L, 12, at(3)))
    # as a batch with D and L known from the start: K is the exact quotient
    assert solver.solution.bindings["K"] == 3 == solve(
        [Equal(K * D, L, at(1)), Equal(D, 4, at(2)), Equal(L, 12, at(3))],
        [Variable("K", "flexible", min=0)]).bindings["K"]
    assert solver.solution.quotients == () and solver.residuals == ()
    assert solver.solution.binding_origins["K"] == {at(1), at(2), at(3)}
    solver.add(Equal(K, 4, at(4)))
    assert not solver.ok and {at(1), at(4)} <= solver.conflicts[0].origins


@st.composite
def _shape_systems(draw):
    """SameShape constraints over shape variables *a, *b and sizes N, M, K that one
    assignment satisfies, plus perhaps one that may contradict it."""
    ranks = {"a": draw(st.integers(0, 2)), "b": draw(st.integers(0, 2))}
    sizes = {name: draw(st.integers(1, 4)) for name in _NAMES}
    values = {var: tuple(draw(st.integers(1, 4)) for _ in range(rank))
              for var, rank in ranks.items()}
    constraints = []
    for line in range(draw(st.integers(1, 5))):
        var = draw(st.sampled_from(["a", "b"]))
        dims = [Dim(draw(st.sampled_from(_NAMES))) for _ in range(draw(st.integers(0, 2)))]
        left = (ShapeVar(var), *dims) if draw(st.booleans()) else (*dims, ShapeVar(var))
        concrete = []
        for item in left:
            concrete.extend(values[var] if isinstance(item, ShapeVar) else
                            (item.evaluate(sizes),))
        right = tuple(concrete)
        if draw(st.booleans()):  # two shape variables: waits until one's rank is known
            other = "b" if var == "a" else "a"
            left, right = left + (ShapeVar(other),), right + values[other]
        if draw(st.integers(0, 5)) == 0 and right:  # now and then, a wrong size
            right = (right[0] + 1 if isinstance(right[0], int) else right[0],) + right[1:]
        constraints.append(SameShape(left, right, at(line + 1)))
    return constraints


def _shape_verdict(solution):
    known = {}
    for var in ("a", "b"):
        shape = solution.shape((ShapeVar(var),))
        if all(isinstance(item, int) for item in shape):
            known[var] = shape
    sizes = {n: v for n, v in solution.bindings.items() if isinstance(v, int)}
    return solution.ok, known if solution.ok else None, sizes if solution.ok else None


@settings(max_examples=40, deadline=None)
@given(_shape_systems(), st.randoms(use_true_random=False))
def test_shapes_added_one_by_one_in_any_order_give_the_batch_verdict(constraints, chooser):
    reference = solve(constraints)
    shuffled = list(constraints)
    chooser.shuffle(shuffled)
    solver = Solver()
    for constraint in shuffled:
        solver.add(constraint)
        solver.ok  # noqa: B018 (settle after each one, as a front end reading verdicts)
    assert _shape_verdict(solver.solution) == _shape_verdict(reference)


# -- broadcasting ----------------------------------------------------------------------------

def test_a_broadcast_pairs_dims_from_the_right_and_only_the_literal_1_broadcasts():
    out = ShapeVar("out")
    solution = solve([Broadcast((N, 1, 3), (4, 3), (out,), at(1))])
    assert solution.shape((out,)) == (N, 4, 3) and solution.ok
    # two sizes facing each other are one size, never "perhaps 1"
    solution = solve([Broadcast((N, 3), (M,), (out,), at(1))])
    assert solution.bindings == {"M": 3} and solution.shape((out,)) == (N, 3)
    (conflict,) = solve([Broadcast((N, 3), (4,), (out,), at(2))]).conflicts
    assert conflict.origins == {at(2)}


def test_a_broadcast_waits_for_the_rank_of_a_shape_variable():
    a, out = ShapeVar("a"), ShapeVar("out")
    solver = Solver().add(Broadcast((a, 3), (4, 3), (out,), at(1)))
    assert [str(r.constraint) for r in solver.residuals] == [
        "[*out] == broadcast([*a, 3], [4, 3])"]
    solver.add(SameShape((a,), (N, 1), at(2)))
    assert solver.solution.shape((out,)) == (N, 4, 3) and solver.residuals == ()
    assert solver.solution.shape_origins["out"] == {at(1), at(2)}
    # the same shape variable on both sides broadcasts with itself
    same = solve([Broadcast((a, 1), (a, K), (out,), at(3))])
    assert same.shape((out,)) == (a, K)


def test_a_broadcast_is_decided_after_the_equations_that_fix_its_dims():
    out = ShapeVar("out")
    # decided first, N against 5 would pin N = 5; the equation N == 1 comes first
    solution = solve([Broadcast((N,), (5,), (out,), at(1)), Equal(N, 1, at(2))])
    assert solution.ok and solution.shape((out,)) == (5,)


@st.composite
def _broadcast_systems(draw):
    """Broadcasts over *a, N, M and literals, with the shapes of *a given by SameShape."""
    constraints = []
    outs = []
    for line in range(draw(st.integers(1, 4))):
        def operand():
            items = [draw(st.sampled_from([1, 3, 4, N, M])) for _ in range(draw(st.integers(0, 2)))]
            if draw(st.booleans()):
                items.insert(0, ShapeVar("a"))
            return tuple(items)
        out = ShapeVar(f"out{line}")
        outs.append(out)
        constraints.append(Broadcast(operand(), operand(), (out,), at(line + 1)))
    if draw(st.booleans()):
        constraints.append(SameShape((ShapeVar("a"),), tuple(
            draw(st.sampled_from([1, 3, N])) for _ in range(draw(st.integers(0, 2)))), at(9)))
    if draw(st.booleans()):
        constraints.append(Equal(N, draw(st.sampled_from([1, 3, 4])), at(10)))
    return constraints, outs


@settings(max_examples=40, deadline=None)
@given(_broadcast_systems(), st.randoms(use_true_random=False))
def test_broadcasts_in_any_order_and_batches_give_the_batch_verdict(system, chooser):
    constraints, outs = system
    reference = solve(constraints)
    shuffled = list(constraints)
    chooser.shuffle(shuffled)
    solver = Solver()
    for constraint in shuffled:
        solver.add(constraint)
        solver.ok  # noqa: B018 (settle after each one)
    got = solver.solution
    assert got.ok == reference.ok
    if got.ok:
        assert got.bindings == reference.bindings
        assert [got.shape((o,)) for o in outs] == [reference.shape((o,)) for o in outs]
