"""Symbolic dims: canonical form, evaluation, substitution, parsing, unification."""
import itertools
import pickle

import pytest

from axgraph.dims import (Dim, bind_shapes, definitely_equal, evaluate, free_symbols, known, parse,
                          solve, subs, symbols, unify)
from axgraph.errors import AxgraphError, ShapeError

N, M, K = symbols("N M K")


def test_variables_compare_by_name():
    assert Dim("N") == N
    assert hash(Dim("N")) == hash(N)
    assert N != M
    assert N.is_symbol and N.name == "N"
    assert not (2 * N).is_symbol


@pytest.mark.parametrize("left, right", [
    (N + N, 2 * N),
    (2 * N + 1 + N, 3 * N + 1),
    (N * M, M * N),
    ((N + 1) * (N - 1), N * N - 1),
    (N + M - M, N),
    (3 * (N + 2), 3 * N + 6),
    ((2 * N + 4) // 2, N + 2),
    ((2 * N + 1) // 2, N),
    (N // 1, N),
    (-(-N), N),
    (N % 1 + N, N),
])
def test_structurally_equal_expressions_are_equal(left, right):
    assert left == right
    assert hash(left) == hash(right)


def test_unequal_expressions():
    assert 2 * N != N
    assert N + 1 != N
    assert N != 3
    assert (N + 1) // 2 != N // 2


def test_constant_expressions_collapse_to_int():
    assert N - N == 0 and type(N - N) is int
    assert type((2 * N) - N - N + 5) is int
    assert (N * 0) == 0


def test_truth_of_symbolic_dim_is_an_error():
    with pytest.raises(TypeError, match="unknown until it is bound"):
        bool(N)


def test_floordiv_needs_positive_int():
    with pytest.raises(TypeError):
        N // M
    with pytest.raises(ValueError):
        N // 0


def test_free_symbols():
    assert (2 * N + M * K).free_symbols == {"N", "M", "K"}
    assert ((N + M) // 2).free_symbols == {"N", "M"}
    assert free_symbols(3) == frozenset()


def test_evaluate_and_subs():
    expr = (2 * N + 1) * M - (N + 3) // 2
    for n, m in itertools.product(range(6), range(4)):
        assert expr.evaluate({"N": n, "M": m}) == (2 * n + 1) * m - (n + 3) // 2
    assert subs(expr, {"N": 1}) == 3 * M - 2
    assert subs(N + 1, {"N": 2 * M}) == 2 * M + 1
    assert evaluate(7, {}) == 7


def test_evaluate_names_unbound_variable():
    with pytest.raises(ShapeError, match="M"):
        (N + M).evaluate({"N": 1})


@pytest.mark.parametrize("expr", [
    2 * N + 1, N - 1, -N + 1, N * M, (N + 1) // 2, 2 * ((N + 1) // 2), -((N + 1) // 2),
    N * ((N + 1) // 2) - 3, (N * M + 1) // 3 - 1, N % 3, ((N + 1) // 2 + 1) // 2,
])
def test_printing_round_trips(expr):
    assert parse(str(expr)) == expr
    assert pickle.loads(pickle.dumps(expr)) == expr


def test_printing_is_readable():
    assert str(2 * N + 1) == "2*N + 1"
    assert str(N - 1) == "N - 1"
    assert str(M * N) == "M*N"
    assert str((N + 1) // 2) == "(N + 1)//2"
    assert repr(N) == "Dim('N')"


def test_parse_rejects_other_syntax():
    with pytest.raises(ValueError):
        parse("N / 2")
    with pytest.raises(ValueError):
        parse("N +")
    assert parse("3") == 3


def test_unify_binds_bare_variable():
    assert unify(N, 4) == {"N": 4}
    assert unify(4, N) == {"N": 4}
    assert unify(N, 2 * M) == {"N": 2 * M}
    assert unify(N, N) == {}


def test_unify_keeps_bindings_solved():
    bindings = unify(N, M + 1)
    bindings = unify(M, 3, bindings)
    assert bindings == {"N": 4, "M": 3}


def test_unify_solves_linear_equation():
    assert unify(2 * N + 1, 7) == {"N": 3}
    assert unify(3 * N, N + 4) == {"N": 2}


def test_unify_mismatch_raises_clear_error():
    with pytest.raises(ShapeError, match="dims differ: 3 vs 4"):
        unify(3, 4)
    with pytest.raises(ShapeError, match="N would have to be 5/2"):
        unify(2 * N + 1, 6)
    with pytest.raises(ShapeError, match="with N"):
        pass_through = unify(N, 5)
        unify(N + 1, 3, pass_through, what="with N")
    with pytest.raises(ShapeError, match="never negative"):
        unify(N + 5, 3)
    with pytest.raises(AxgraphError):
        unify(N, N + 1)  # no solution: the occurs check finds the constant difference


def test_unify_undecidable_returns_none():
    assert unify(N + M, 5) is None
    assert unify(N * N, 4) is None


def test_solve_runs_to_fixpoint():
    bindings, pending = solve([(N + M, 5, "a"), (M * K, 6, "b"), (N, 2, "c"), (K, 2, "d")])
    assert bindings == {"N": 2, "M": 3, "K": 2}
    assert pending == []
    bindings, pending = solve([(N + M, 5, "a")])
    assert bindings == {} and len(pending) == 1


def test_known_gives_ints_and_the_default_for_symbolic_dims():
    assert known(3, None) == 3 and known(N - N, None) == 0
    assert known(N, None) is None and known(2 * N + 1, -1) == -1
    # how a pass asks "is this dim certainly empty?" without the truth of a symbol
    assert [known(d, 1) == 0 for d in (0, 4, N, N - 1)] == [True, False, False, False]


def test_definitely_equal_proves_or_says_no():
    assert definitely_equal(N + 1 - 1, N) and definitely_equal(4, 4)
    assert definitely_equal((2 * N + 2) // 2, N + 1)
    assert not definitely_equal(N, M)  # not proved: they may still be equal at run time
    assert not definitely_equal(N, 3) and not definitely_equal(3, 4)
    with pytest.raises(TypeError):
        definitely_equal(N, 1.5)


def test_bind_shapes_solves_every_dim_against_the_data():
    describe = ["x", "y"].__getitem__
    assert bind_shapes([(N, 3), (2 * N + 1,)], [(4, 3), (9,)], describe) == {"N": 4}
    assert bind_shapes([(2, 3)], [(2, 3)], describe) == {}
    with pytest.raises(ShapeError, match=r"^y: dim 0: dims differ: 2\*N \+ 1 vs 8 \(with N = "
                                         r"4\)$"):
        bind_shapes([(N, 3), (2 * N + 1,)], [(4, 3), (8,)], describe)
    with pytest.raises(ShapeError, match=r"^x: dim 1: dims differ: 3 vs 5$"):
        bind_shapes([(N, 3)], [(4, 5)], describe)
    with pytest.raises(ShapeError, match=r"^x: dim 0: .*N would have to be 7/2"):
        bind_shapes([(2 * N + 1,)], [(8,)], describe)
    with pytest.raises(ShapeError, match=r"^y: rank 1, not 2$"):
        bind_shapes([(N,), (N, M)], [(4,), (4,)], describe)
    with pytest.raises(ShapeError, match=r"^x: dim 0: cannot determine M \+ N == 5"):
        bind_shapes([(N + M,)], [(5,)], describe)


def test_bind_shapes_formats_messages_only_for_errors():
    calls = []

    def describe(index):
        calls.append(index)
        return "x"

    assert bind_shapes([(N, M)], [(2, 3)], describe) == {"N": 2, "M": 3}
    assert calls == []


def test_dims_from_numpy_ints():
    np = pytest.importorskip("numpy")
    assert N + np.int64(2) == N + 2
    assert unify(N, np.int32(3)) == {"N": 3}


def test_random_expressions_evaluate_like_python_ints():
    """Canonical form must not change values: compare with plain int arithmetic."""
    import random

    chooser = random.Random(7)
    names = ("N", "M")

    def build(depth):
        """A random (dim expression, function of the bindings) pair."""
        if depth == 0 or chooser.random() < 0.3:
            if chooser.random() < 0.5:
                name = chooser.choice(names)
                return Dim(name), (lambda b, name=name: b[name])
            value = chooser.randint(-3, 5)
            return value, (lambda b, value=value: value)
        op = chooser.choice("+-*/%")
        (left, f), (right, g) = build(depth - 1), build(depth - 1)
        if op in "/%":
            k = chooser.randint(1, 4)
            if op == "/":
                return (left // k if isinstance(left, Dim) else left // k), (lambda b: f(b) // k)
            return (left % k), (lambda b: f(b) % k)
        if op == "+":
            return left + right, (lambda b: f(b) + g(b))
        if op == "-":
            return left - right, (lambda b: f(b) - g(b))
        return left * right, (lambda b: f(b) * g(b))

    for _ in range(300):
        expr, reference = build(4)
        if isinstance(expr, Dim):
            assert parse(str(expr)) == expr, str(expr)
        for n, m in itertools.product(range(-2, 5), range(0, 4)):
            assert evaluate(expr, {"N": n, "M": m}) == reference({"N": n, "M": m}), str(expr)
