"""Sizes known only when data is fed: axes graphs with a batch axis of unknown length (or
of a symbolic length), differentiated and run on every backend against the NumPy
reference, and the one binding path every backend shares."""
import numpy as np
import pytest

import axgraph as ng

COMPILED = ["interpreter", "cpu"]


def _run(backend, results, placeholders, values):
    with ng.make_transformer(backend) as t:
        return t.computation(results, *placeholders)(*values)


@pytest.mark.parametrize("backend", COMPILED)
@pytest.mark.parametrize("batch", [4, 1])
def test_slice_in_a_gradient_with_an_unknown_batch_size(backend, batch, rng):
    # The slice's adjoint pads the gradient back to the sliced axis; with the batch
    # length unknown the padded region's count along N is the size variable N, and
    # lowering once asked `if count:` of it (TypeError: the truth of symbolic dim N).
    N = ng.make_axis(name="N")
    F = ng.make_axis(length=6, name="F")
    x = ng.placeholder([F, N], dtype=np.float64)
    w = ng.variable([F], initial_value=np.linspace(-1, 1, 6), dtype=np.float64)
    cost = ng.sum(ng.tanh(x * w)[1:4, :], out_axes=())
    results = [cost, ng.deriv(cost, x), ng.deriv(cost, w)]
    xv = rng.standard_normal((6, batch))
    got = _run(backend, results, [x], [xv])
    expected = _run("numpy", results, [x], [xv])
    wv = np.linspace(-1, 1, 6)
    # by hand: d/dx tanh(x w) = w (1 - tanh^2), on rows 1..3 only
    inside = np.zeros((6, 1))
    inside[1:4] = 1
    dx = inside * wv[:, None] * (1 - np.tanh(xv * wv[:, None]) ** 2)
    dw = np.sum(inside * xv * (1 - np.tanh(xv * wv[:, None]) ** 2), axis=1)
    np.testing.assert_allclose(expected[1], dx, rtol=1e-12)
    np.testing.assert_allclose(expected[2], dw, rtol=1e-12)
    for value, reference in zip(got, expected):
        np.testing.assert_allclose(value, reference, rtol=1e-12, atol=1e-15)
