"""ng.rename: axes replaced by identity, on every transformer, with its gradient and errors."""
import numpy as np
import pytest

import axgraph as ng
from axgraph.errors import (AxgraphTypeError, DuplicateAxisError, IncompatibleAxesError,
                            UnmatchedAxesError)


def axes():
    return (ng.make_axis(length=4, name="T"), ng.make_axis(length=3, name="D"),
            ng.make_axis(length=4, name="K"))


def test_rename_replaces_the_named_axis_and_keeps_the_others_in_order():
    T, D, K = axes()
    y = ng.rename(ng.placeholder([T, D]), {T: K})
    assert list(y.axes) == [K, D]


def test_a_renamed_axis_pairs_by_its_new_identity_in_a_dot(transformer, rng):
    """q(T, D) . k(T, D) with k's T renamed K: scores over (T, K), as NumPy's q @ k.T."""
    T, D, K = axes()
    q, k = ng.placeholder([T, D]), ng.placeholder([T, D])
    scores = ng.dot(q, ng.rename(k, {T: K}))
    qv = rng.standard_normal((4, 3)).astype(np.float32)
    kv = rng.standard_normal((4, 3)).astype(np.float32)
    got = transformer.computation(scores, q, k)(qv, kv)
    assert list(scores.axes) == [T, K]
    np.testing.assert_allclose(got, qv @ kv.T, rtol=1e-5, atol=1e-6)


def test_the_gradient_flows_back_to_the_original_axes(transformer, rng):
    T, D, K = axes()
    x = ng.placeholder([T, D])
    w = ng.placeholder([K])
    cost = ng.sum(ng.rename(x, {T: K}) * w, out_axes=())
    grad = ng.deriv(cost, x)
    xv = rng.standard_normal((4, 3)).astype(np.float32)
    wv = rng.standard_normal(4).astype(np.float32)
    got = transformer.computation(grad, x, w)(xv, wv)
    assert list(grad.axes) == [T, D]
    np.testing.assert_allclose(got, np.broadcast_to(wv[:, None], (4, 3)), rtol=1e-6)


@pytest.mark.parametrize("case", ["not_an_axis_of_x", "other_length", "duplicate", "not_a_dict"])
def test_bad_mappings_are_clear_errors_at_the_callers_line(case):
    T, D, K = axes()
    B = ng.make_axis(length=5, name="B")
    x = ng.placeholder([T, D, K])
    mapping, error = {"not_an_axis_of_x": ({B: K}, UnmatchedAxesError),
                      "other_length": ({T: B}, IncompatibleAxesError),
                      "duplicate": ({T: K}, DuplicateAxisError),
                      "not_a_dict": ([T], AxgraphTypeError)}[case]
    with pytest.raises(error) as caught:
        ng.rename(x, mapping)
    assert "test_rename.py" in str(caught.value)
