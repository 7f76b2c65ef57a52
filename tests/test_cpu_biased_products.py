"""The cpu backend's dense-layer bias added by the product's kernel (Schedule.biased_products):
`dot(x, w) + b` is one gemm.matmul call whose values are the two ops' own."""
import numpy as np
import pytest

import axgraph as ng
from axgraph.transformers.cpu import blas_threads, gemm


def _axes(*pairs):
    return [ng.make_axis(length, name=name) for length, name in pairs]


@pytest.mark.parametrize("bias_on", ["columns", "rows"])
@pytest.mark.parametrize("shape", [(300, 70, 130), (7, 5, 3)])
def test_a_product_plus_a_bias_is_one_call_with_the_ops_values(bias_on, shape):
    m, k, n = shape
    M, K, N = _axes((m, "M"), (k, "K"), (n, "N"))
    x, w = ng.placeholder([M, K]), ng.placeholder([K, N])
    b = ng.placeholder([N] if bias_on == "columns" else [M])
    rng = np.random.default_rng(m)
    xv, wv = (rng.normal(size=s).astype(np.float32) for s in ((m, k), (k, n)))
    bv = rng.normal(size=n if bias_on == "columns" else m).astype(np.float32)
    with ng.make_transformer("cpu") as t:
        layer = t.computation(ng.dot(x, w) + b, x, w, b)
        got = layer(xv, wv, bv)
        source = layer.source
    assert "addend=" in source and source.count("gemm.matmul(") == 1
    term = bv[None, :] if bias_on == "columns" else bv[:, None]
    # the product as the backend computes it alone (BLAS on one thread, as in a step:
    # OpenBLAS's threads may round otherwise), then np.add: the same bits
    with blas_threads.single_threaded():
        product = gemm.matmul(xv, wv, out=np.empty((m, n), np.float32))
    np.testing.assert_array_equal(got, product + term)
    want = xv.astype(np.float64) @ wv.astype(np.float64) + term
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_operands_stay_alive_until_the_biased_product_runs():
    """The product's operands are read at the Add's step: a value computed in between may
    not take their memory, and a chain of layers agrees with NumPy."""
    B, D, H = _axes((64, "B"), (96, "D"), (128, "H"))
    x = ng.placeholder([B, D])
    w1, w2 = ng.placeholder([D, H]), ng.placeholder([H, D])
    b1, b2 = ng.placeholder([H]), ng.placeholder([D])
    h = ng.tanh(ng.dot(ng.tanh(x), w1) + b1)
    out = ng.dot(h, w2) + b2 + ng.exp(-x)
    rng = np.random.default_rng(3)
    values = [rng.normal(size=s).astype(np.float32) * 0.3
              for s in ((64, 96), (96, 128), (128, 96), (128,), (96,))]
    with ng.make_transformer("cpu") as t:
        got = t.computation(out, x, w1, w2, b1, b2)(*values)
    xv, w1v, w2v, b1v, b2v = (v.astype(np.float64) for v in values)
    want = np.tanh(np.tanh(xv) @ w1v + b1v) @ w2v + b2v + np.exp(-xv)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_product_read_elsewhere_keeps_its_own_line():
    M, K, N = _axes((40, "M"), (30, "K"), (20, "N"))
    x, w, b = ng.placeholder([M, K]), ng.placeholder([K, N]), ng.placeholder([N])
    product = ng.dot(x, w)
    with ng.make_transformer("cpu") as t:
        both = t.computation([product + b, product * 2.0], x, w, b)
        rng = np.random.default_rng(4)
        xv, wv, bv = (rng.normal(size=s).astype(np.float32) for s in ((40, 30), (30, 20), (20,)))
        added, doubled = both(xv, wv, bv)
        assert "addend=" not in both.source
    want = xv.astype(np.float64) @ wv.astype(np.float64)
    np.testing.assert_allclose(added, want + bv, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(doubled, 2 * want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("as_result", [True, False])
@pytest.mark.parametrize("shape", [(300, 70, 130), (7, 5, 3)])
def test_a_relu_of_a_biased_product_is_one_call_with_the_ops_values(as_result, shape):
    """`relu(dot(x, w) + b)`: the product's kernel adds the bias and clamps as it stores,
    writing the ReLU's array (a result, as a training forward hands activations to its
    backward, or a buffer the next layer's product reads); its values are the three
    ops' own, bit for bit, a NaN row kept and -inf clamped."""
    m, k, n = shape
    M, K, N = _axes((m, "M"), (k, "K"), (n, "N"))
    x, w, b = ng.placeholder([M, K]), ng.placeholder([K, N]), ng.placeholder([N])
    v = ng.placeholder([N])
    relu = ng.maximum(ng.dot(x, w) + b, 0.0)
    rng = np.random.default_rng(m + int(as_result))
    xv, wv = (rng.normal(size=s).astype(np.float32) for s in ((m, k), (k, n)))
    bv, vv = (rng.normal(size=n).astype(np.float32) for _ in range(2))
    xv[1, 0] = np.nan
    bv[0] = -np.inf
    with ng.make_transformer("cpu") as t:
        layer = t.computation(relu if as_result else ng.dot(relu, v), x, w, b, v)
        got = layer(xv, wv, bv, vv)
        source = layer.source
    assert "relu=True" in source and source.count("addend=") == 1
    assert "np.maximum" not in source and "bias_relu" not in source
    with blas_threads.single_threaded():
        product = gemm.matmul(xv, wv, out=np.empty((m, n), np.float32))
    want = np.maximum(product + bv[None, :], np.float32(0))
    assert np.isnan(want[1]).all() and (want[:, 0][~np.isnan(want[:, 0])] == 0).all()
    reference = np.maximum(xv.astype(np.float64) @ wv.astype(np.float64) + bv, 0)
    np.testing.assert_allclose(want, reference, rtol=1e-4, atol=1e-4)
    if as_result:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, reference @ vv.astype(np.float64), rtol=1e-4, atol=1e-3)


def test_the_kernel_clamps_as_np_maximum_does_in_every_edge_tile():
    """gemm.matmul(relu=True) against np.maximum of its own unclamped result, on shapes
    that end in partial tiles, with a strided output and without an addend."""
    rng = np.random.default_rng(11)
    for m, k, n in ((129, 300, 517), (64, 33, 40)):
        a, b = rng.normal(size=(m, k)).astype(np.float32), rng.normal(size=(n, k)).astype(np.float32).T
        plain = gemm.matmul(a, b, out=np.empty((m, n), np.float32))
        wide = np.zeros((m, 2 * n), np.float32)
        clamped = gemm.matmul(a, b, out=wide[:, ::2], relu=True)
        np.testing.assert_array_equal(clamped, np.maximum(plain, np.float32(0)))
        assert (wide[:, 1::2] == 0).all()
