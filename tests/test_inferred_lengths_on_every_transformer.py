"""A length that no fed array has, only inferred from fed ones (an axis cast to a fed
one, a concat's joined axis), means the same on every transformer: the NumPy reference
looks it up in the shape solver's solution as the lowering transformers do. Values are
checked against NumPy written by hand; a feed that contradicts an inferred length is a
ShapeCheckError naming the lines behind it."""

import numpy as np
import pytest

import axgraph as ng

BACKENDS = ["numpy", "interpreter", "cpu", "jax"]


def line_of(marker):
    """The line of this file holding `# @marker`."""
    with open(__file__) as source:
        for number, text in enumerate(source, start=1):
            if text.rstrip().endswith(f"# @{marker}"):
                return number
    raise AssertionError(marker)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_axis_cast_from_a_fed_one_takes_its_length(backend, rng):
    # M is never fed: its length is N's, through the cast. The broadcast over M needs
    # that length before any computed value carries M.
    N, M, C = ng.make_axis(name="N"), ng.make_axis(name="M"), ng.make_axis(length=2, name="C")
    x, c = ng.placeholder([N], dtype=np.float64), ng.placeholder([C], dtype=np.float64)
    spread = ng.broadcast(c, [C, M])
    relabelled = ng.cast_axes(x, [M])
    with ng.make_transformer(backend) as t:
        f = t.computation([spread, relabelled * 3.0], x, c)
        for n in (3, 5):
            a, b = rng.standard_normal(n), rng.standard_normal(2)
            got_spread, got_scaled = f(a, b)
            np.testing.assert_allclose(got_spread, np.repeat(b[:, None], n, axis=1))
            np.testing.assert_allclose(got_scaled, a * 3.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_joined_axis_needed_before_its_concat_runs_is_twice_as_long(backend, rng):
    # The joined axis J is 2*N; `sequential` runs the broadcast over J first, so its
    # length comes from the solver, not from the concat's value.
    N, C = ng.make_axis(name="N"), ng.make_axis(length=2, name="C")
    x, c = ng.placeholder([N], dtype=np.float64), ng.placeholder([C], dtype=np.float64)
    joined = ng.concat_along_axis([x, ng.tanh(x)], N)
    spread = ng.broadcast(c, [C, joined.axes[0]])
    result = ng.sequential([spread, spread * joined])
    with ng.make_transformer(backend) as t:
        f = t.computation(result, x, c)
        for n in (4, 1):
            a, b = rng.standard_normal(n), rng.standard_normal(2)
            expected = b[:, None] * np.concatenate([a, np.tanh(a)])[None, :]
            np.testing.assert_allclose(f(a, b), expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_axis_paired_in_a_dot_takes_the_fed_length(backend, rng):
    # K is open and fed nowhere as K: the dot pairs it with the fed axis R (by a cast),
    # and a broadcast of a vector over K needs its length.
    R, K = ng.make_axis(name="R"), ng.make_axis(name="K")
    F = ng.make_axis(length=3, name="F")
    w = ng.placeholder([F, R], dtype=np.float64)
    v = ng.placeholder([F], dtype=np.float64)
    weights = ng.cast_axes(w, [F, K])
    ones = ng.broadcast(v, [F, K])
    total = ng.dot(ones, weights)  # contracts F and K: a scalar
    with ng.make_transformer(backend) as t:
        f = t.computation(total, w, v)
        for n in (2, 6):
            a, b = rng.standard_normal((3, n)), rng.standard_normal(3)
            np.testing.assert_allclose(f(a, b), float((b[:, None] * a).sum()))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_feed_that_contradicts_an_inferred_length_names_the_lines(backend):
    N, M = ng.make_axis(name="N"), ng.make_axis(name="M")
    x, y = ng.placeholder([N], dtype=np.float64), ng.placeholder([M], dtype=np.float64)
    total = ng.cast_axes(x, [M]) + y  # @cast-line
    with ng.make_transformer(backend) as t:
        f = t.computation(total, x, y)
        np.testing.assert_allclose(f(np.arange(3.0), np.ones(3)), np.arange(3.0) + 1)
        with pytest.raises(ng.ShapeCheckError) as info:
            f(np.arange(3.0), np.ones(4))  # @feed-line
    message = str(info.value)
    assert f":{line_of('cast-line')}" in message and f":{line_of('feed-line')}" in message
    assert "cast_axes" in message and "3" in message and "4" in message
