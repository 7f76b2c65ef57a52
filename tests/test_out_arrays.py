"""Caller-owned result arrays: computation(..., out=...) on every backend."""
import numpy as np
import pytest

import axgraph as ng


@pytest.fixture
def graph():
    H, W = ng.make_axis(2, "H"), ng.make_axis(3, "W")
    x = ng.placeholder([H, W])
    return x, [ng.tanh(x) * 2.0, ng.sum(x, reduction_axes=[W])]


def test_results_are_written_into_the_given_arrays(transformer, graph):
    x, results = graph
    xv = np.arange(6, dtype=np.float32).reshape(2, 3) / 6
    first, second = np.empty((2, 3), np.float32), np.empty(2, np.float32)
    computation = transformer.computation(results, x)
    returned = computation(xv, out=[first, second])
    assert returned[0] is first and returned[1] is second
    np.testing.assert_allclose(first, np.tanh(xv) * 2.0, rtol=1e-6)
    np.testing.assert_allclose(second, xv.sum(axis=1), rtol=1e-6)


def test_none_leaves_a_result_to_a_fresh_array(transformer, graph):
    x, results = graph
    xv = np.ones((2, 3), np.float32)
    first = np.empty((2, 3), np.float32)
    returned = transformer.computation(results, x)(xv, out=[first, None])
    assert returned[0] is first
    np.testing.assert_allclose(returned[1], [3.0, 3.0])


@pytest.mark.parametrize("bad", ["shape", "dtype", "count", "argument"])
def test_bad_out_arrays_are_rejected_before_anything_runs(transformer, graph, bad):
    x, results = graph
    xv = np.ones((2, 3), np.float32)
    w = ng.variable((), initial_value=0.0)
    with ng.Op.saved_user_deps():
        bump = ng.assign(w, w + 1)
    computation = transformer.computation(results + [bump], x)
    out = {"shape": [np.empty((3, 2), np.float32), None, None],
           "dtype": [np.empty((2, 3), np.float64), None, None],
           "count": [None],
           "argument": [xv, None, None]}[bad]
    with pytest.raises(ng.FeedError):
        computation(xv, out=out)
    assert transformer.computation(w)() == 0.0  # the assign did not run
