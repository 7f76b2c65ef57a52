"""The prover: proved / refuted / unknown for `e >= 0` from the variables' bounds, never an
exception. Verdicts are checked by hand for typical questions and, for random
expressions, against brute force over the bounds (a PROVED or REFUTED verdict must hold
at every point; UNKNOWN is always allowed)."""
import itertools
import random

import pytest

import axgraph as ng
from axgraph.dims import Dim, dim_max, dim_min, evaluate, free_symbols, symbols
from axgraph.shapes import (Verdict, interval, prove_at_least, prove_divides, prove_equal,
                            prove_nonnegative)
from axgraph.shapes.prover import simplify

N, M, H = symbols("N M H")
PROVED, REFUTED, UNKNOWN = Verdict.PROVED, Verdict.REFUTED, Verdict.UNKNOWN


@pytest.mark.parametrize("expr, verdict", [
    (N - 1, PROVED),                    # sizes are >= 1 by default
    (N - 2, UNKNOWN),
    (-N, REFUTED),
    (N - N // 2, PROVED),               # a floor's bound keeps the correlation with N
    (N * M - N, PROVED),                # smallest at M = 1
    ((H + 3) // 4 - 1, PROVED),
    ((H - 3) // 2 + 1 - 1, UNKNOWN),    # a 3-wide window fits only from H = 3 on
    (dim_max(N, 3) - 3, PROVED),
    (dim_min(N, 3) - 4, REFUTED),
    ((H + 3) // 4 - H // 4, PROVED),
    (2 * N - N * N, UNKNOWN),           # 1 at N = 1, negative from N = 3: neither
    (N * M - (M * N) // 2, PROVED),
    (3, PROVED), (-1, REFUTED),
])
def test_verdicts(expr, verdict):
    assert prove_nonnegative(expr) is verdict


def test_bounds_narrow_the_answer():
    assert prove_nonnegative(N - 5, {"N": (5, 10)}) is PROVED
    assert prove_equal(N, 3, {"N": (4, 10)}) is REFUTED
    assert prove_equal(N + N, 2 * N) is PROVED and prove_equal(N, M) is UNKNOWN
    assert prove_at_least(N // 2, 3, {"N": (6, 100)}) is PROVED
    assert interval((H + 3) // 4, {"H": (5, 12)}) == (2, 3)


def test_declared_domains_are_the_default_bounds():
    K = ng.dim("K", min=0)
    assert prove_nonnegative(K - 1) is UNKNOWN   # K may be 0
    assert prove_nonnegative(ng.dim("L", min=4) - 4) is PROVED
    assert prove_nonnegative(10 - ng.dim("S", max=8)) is PROVED


def test_simplify_decides_max_and_min_where_the_bounds_tell():
    assert simplify(dim_max(N - 1, 0)) == N - 1
    assert simplify(dim_min(N, 1)) == 1
    assert simplify(dim_min(N, 3), {"N": (5, 9)}) == 3
    assert simplify(dim_max(N, M)) == dim_max(N, M)  # undecided: kept


def test_the_prover_never_raises_on_expressions_it_cannot_decide():
    for expr in (N * N - 7 * N + 12, dim_max(N * M, H) - N, (N * M + H) // 3 - M):
        assert prove_nonnegative(expr) in (PROVED, REFUTED, UNKNOWN)


def test_random_verdicts_hold_at_every_point():
    chooser = random.Random(5)
    names = ("N", "M")

    def build(depth):
        if depth == 0 or chooser.random() < 0.3:
            return Dim(chooser.choice(names)) if chooser.random() < 0.6 else chooser.randint(-6, 6)
        op = chooser.choice("+-*/xm")
        left, right = build(depth - 1), build(depth - 1)
        if op == "/":
            return left // chooser.randint(1, 4)
        if op == "x":
            return dim_max(left, right)
        if op == "m":
            return dim_min(left, right)
        return left + right if op == "+" else left - right if op == "-" else left * right

    decided = 0
    for _ in range(300):
        expr = build(3)
        low_n, low_m = chooser.randint(0, 3), chooser.randint(1, 3)
        bounds = {"N": (low_n, low_n + 5), "M": (low_m, low_m + 4)}
        verdict = prove_nonnegative(expr, bounds)
        low, high = interval(expr, bounds)
        points = [evaluate(expr, {"N": n, "M": m})
                  for n, m in itertools.product(range(low_n, low_n + 6), range(low_m, low_m + 5))]
        assert all(low <= p <= high for p in points), str(expr)
        if verdict is PROVED:
            assert min(points) >= 0, str(expr)
        elif verdict is REFUTED:
            assert max(points) < 0, str(expr)
        decided += verdict is not UNKNOWN
    assert decided > 100  # the prover decides most of these, not just the trivial ones


@pytest.mark.parametrize("divisor, dividend, verdict", [
    (2, 4 * N + 2, PROVED),
    (2, 2 * N + 1, REFUTED),            # odd for every N
    (4, 2 * N, UNKNOWN),                # divisible only for even N
    (3, 12, PROVED),
    (5, 12, REFUTED),
    (N, N * M + 2 * N, PROVED),         # N is a factor of every term
    (N, M, UNKNOWN),
    (0, 0, PROVED),
])
def test_prove_divides_against_every_small_value(divisor, dividend, verdict):
    assert prove_divides(divisor, dividend) is verdict
    names = sorted(free_symbols(divisor) | free_symbols(dividend))
    outcomes = set()
    for values in itertools.product(range(1, 9), repeat=len(names)):
        env = dict(zip(names, values))
        d, q = evaluate(divisor, env), evaluate(dividend, env)
        outcomes.add(q == 0 if d == 0 else q % d == 0)
    if verdict is PROVED:
        assert outcomes == {True}
    elif verdict is REFUTED:
        assert outcomes == {False}
    else:
        assert outcomes == {True, False}
