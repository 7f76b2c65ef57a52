"""The canonical form of dims beyond polynomials: nested floors, common factors, max and
min atoms, exact polynomial division, slice lengths and declared domains. Every rewrite
must keep the value for every integer value of the variables: random expressions are
compared with plain Python arithmetic."""
import itertools
import pickle
import random

import pytest

import axgraph as ng
from axgraph.dims import (Dim, dim_max, dim_min, evaluate, exact_quotient, from_terms, parse,
                          slice_length, symbols)

N, M, H, B, T, D = symbols("N M H B T D")


@pytest.mark.parametrize("left, right", [
    (2 * N, N + N),
    (N * (M + 1), N * M + N),
    (((H + 1) // 2 + 1) // 2, (H + 3) // 4),
    (((H - 2) // 2 + 1 - 2) // 2 + 1, H // 4),          # two valid 3-wide windows, stride 2
    ((((H + 1) // 2 + 1) // 2 + 1) // 2, (H + 7) // 8),
    ((2 * H) // 4, H // 2),                               # a common factor comes out
    ((2 * H + 1) // 4, H // 2),
    ((6 * N + 3) // 9, (2 * N + 1) // 3),
    ((2 * ((N + 1) // 3) + 2) // 4, (N + 4) // 6),        # factor out, then collapse
    (dim_max(N, N + 2), N + 2),
    (dim_min(N, N + 2, 7, 9), dim_min(N, 7)),
    (dim_max(dim_max(N, 3), M), dim_max(N, M, 3)),
    (dim_max(3, 5), 5),
])
def test_equal_values_have_one_form(left, right):
    assert left == right and hash(left) == hash(right)


@pytest.mark.parametrize("dim", [3 * N * M - (H + 1) // 2 + 7, N - N, 5 + 0 * N,
                                 dim_max(N, 3) * T - 2 * D])
def test_from_terms_gives_back_any_subset_of_a_dims_terms(dim):
    pairs = dim._terms if isinstance(dim, Dim) else (((), dim),) if dim else ()
    for size in range(len(pairs) + 1):
        for subset in itertools.combinations(pairs, size):
            built = from_terms(subset)
            for values in itertools.product((1, 2, 5), repeat=5):
                env = dict(zip("NMHTD", values))
                expected = sum(coeff * _monomial_value(monomial, env) for monomial, coeff in subset)
                assert evaluate(built, env) == expected


def _monomial_value(monomial, env):
    product = 1
    for atom in monomial:
        product *= evaluate(Dim._from_terms((((atom,), 1),)), env)
    return product


def test_nested_floors_print_collapsed():
    assert str(((H + 1) // 2 + 1) // 2) == "(H + 3)//4"
    assert str(dim_max(N, 3) + 1) == "max(N, 3) + 1"
    assert parse("max(N, 3) + min(M, 2*N)") == dim_max(N, 3) + dim_min(M, 2 * N)


def test_exact_polynomial_division():
    assert (B * T * D) // (B * D) == T
    assert exact_quotient(N * N - 1, N - 1) == N + 1
    assert exact_quotient(6 * N * M + 3 * M, 3 * M) == 2 * N + 1
    assert exact_quotient(N + 1, N) is None
    assert exact_quotient(N * M + 1, M) is None
    assert exact_quotient(6, 4) is None and exact_quotient(8, 4) == 2
    assert (N * M) % M == 0
    with pytest.raises(ng.AxgraphTypeError, match="exact multiple"):
        N // M
    with pytest.raises(ng.AxgraphTypeError, match="Divides"):
        (N + 1) % N


@pytest.mark.parametrize("picked", [
    slice(1, 3), slice(None, None, 2), slice(-3, None), slice(None, None, -1), slice(5, 1, -2),
    slice(-1, -5, -1), slice(2, -2), slice(None, 4, 3), slice(-2, None, -3),
])
def test_slice_length_counts_as_python_slices_do(picked):
    length = slice_length(N, picked)
    for n in range(0, 14):
        assert evaluate(length, {"N": n}) == len(range(n)[picked]), (picked, n)
    assert slice_length(10, picked) == len(range(10)[picked])


def test_declared_domains():
    K = ng.dim("K", min=0, max=8)
    assert K.domain == (0, 8) and ng.dim("B").domain == (1, None)
    assert ng.dim("B") == Dim("B") and K != Dim("K")
    assert str(2 * K) == "2*K" and (2 * K).evaluate({"K": 3}) == 6
    assert pickle.loads(pickle.dumps(2 * K + 1)) == 2 * K + 1
    assert (2 * K).subs({}) == 2 * K  # an unbound variable keeps its domain
    with pytest.raises(ng.AxgraphValueError, match="empty or negative"):
        ng.dim("X", min=3, max=2)
    with pytest.raises(ng.AxgraphTypeError):
        ng.dim("X", min=1.5)
    with pytest.raises(ng.AxgraphValueError):
        ng.dim("not a name")


def test_random_expressions_keep_their_values():
    """Canonical rewrites (nested floors, factors, max/min folding) never change a value,
    for negative values too: compare with Python's own arithmetic."""
    chooser = random.Random(11)
    names = ("N", "M")

    def build(depth):
        if depth == 0 or chooser.random() < 0.25:
            if chooser.random() < 0.6:
                name = chooser.choice(names)
                return Dim(name), (lambda b, name=name: b[name])
            value = chooser.randint(-4, 6)
            return value, (lambda b, value=value: value)
        op = chooser.choice("+-*//mx")
        (left, f), (right, g) = build(depth - 1), build(depth - 1)
        if op == "/":
            k = chooser.randint(1, 5)
            return left // k, (lambda b: f(b) // k)
        if op == "m":
            return dim_min(left, right), (lambda b: min(f(b), g(b)))
        if op == "x":
            return dim_max(left, right), (lambda b: max(f(b), g(b)))
        if op == "+":
            return left + right, (lambda b: f(b) + g(b))
        if op == "-":
            return left - right, (lambda b: f(b) - g(b))
        return left * right, (lambda b: f(b) * g(b))

    for _ in range(400):
        expr, reference = build(4)
        if isinstance(expr, Dim):
            assert parse(str(expr)) == expr, str(expr)
        for n, m in itertools.product(range(-3, 6), range(-1, 5)):
            assert evaluate(expr, {"N": n, "M": m}) == reference({"N": n, "M": m}), str(expr)
