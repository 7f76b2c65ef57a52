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


# -- one check of out= for every backend -----------------------------------------------------

def _axpy():
    from axgraph import core

    a = core.Parameter(core.f32, (), name="a")
    x, y = core.Parameter(core.f32, (3,), name="x"), core.Parameter(core.f32, (3,), name="y")
    scaled = core.Multiply(core.Broadcast(a, (3,), (0,)), x)
    return core.Function([core.Add(scaled, y), scaled], [a, x, y], name="axpy")


BAD_OUTS = {  # what is wrong -> (the out= given, the words of the error)
    "count": (lambda x: (np.empty(3, np.float32),), r"out= has 1 array\(s\) for 2 result"),
    "type": (lambda x: (np.empty(3, np.float32), [0, 0, 0]), r"out\[1\] must be a NumPy array"),
    "dtype": (lambda x: (np.empty(3, np.float32), np.empty(3)),
              r"out\[1\] is float64\[3\], but result 1 \(.*\) is float32\[3\]"),
    "shape": (lambda x: (np.empty(4, np.float32), None), r"out\[0\] is float32\[4\]"),
    "argument": (lambda x: (x, None), r"out\[0\] is \(or overlaps\) the array of parameter 1 "
                                      r"\(x: f32\[3\]\)"),
}


@pytest.mark.parametrize("core_backend", ["interpreter", "cpu"])
@pytest.mark.parametrize("bad", sorted(BAD_OUTS))
def test_every_core_backend_checks_out_the_same_way_before_running(core_backend, bad):
    from axgraph import core

    compiled = core.compile(_axpy(), backend=core_backend)
    a, x, y = np.float32(2), np.arange(3, dtype=np.float32), np.ones(3, np.float32)
    make, words = BAD_OUTS[bad]
    before = x.copy()
    with pytest.raises(ng.FeedError, match=words):
        compiled(a, x, y, out=make(x))
    np.testing.assert_array_equal(x, before)  # nothing was written
    shared = np.empty(3, np.float32)
    with pytest.raises(ng.FeedError, match=r"out\[1\] and out\[0\] share memory"):
        compiled(a, x, y, out=(shared, shared))
    readonly = np.empty(3, np.float32)
    readonly.setflags(write=False)
    with pytest.raises(ng.FeedError, match=r"out\[0\] is read-only"):
        compiled(a, x, y, out=(readonly, None))
    first = np.empty(3, np.float32)
    got = compiled(a, x, y, out=(first, None))
    assert got[0] is first and first.tolist() == [1.0, 3.0, 5.0] and got[1].tolist() == [0, 2, 4]


def test_a_transformer_checks_out_with_the_same_words(transformer):
    A = ng.make_axis(3, name="A")
    x = ng.placeholder([A])
    computation = transformer.computation([x * 2.0, x + 1.0], x)
    xv = np.arange(3, dtype=np.float32)
    with pytest.raises(ng.FeedError, match=r"out\[1\] is float64\[3\], but result 1"):
        computation(xv, out=[None, np.empty(3)])
    with pytest.raises(ng.FeedError, match=r"out\[0\] is \(or overlaps\) the array of fed "
                                           r"value 0"):
        computation(xv, out=[xv, None])
