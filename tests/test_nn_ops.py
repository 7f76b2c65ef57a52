"""NN ops, reductions used by losses, and random tensors, checked against NumPy."""
import math

import numpy as np
import pytest

import axgraph as ng



def _np_softmax(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=axis, keepdims=True)


def _np_log_softmax(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def _np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# -- softmax --------------------------------------------------------------------------

def test_softmax_default_normalizes_over_non_batch_axes(transformer, rng):
    C = ng.make_axis(5, name="C")
    N = ng.make_axis(4, name="N")
    x = ng.placeholder([C, N])
    xv = rng.standard_normal((5, 4)).astype(np.float32)
    s = ng.softmax(x)
    assert s.axes == ng.make_axes([C, N])
    got = transformer.computation(s, x)(xv)
    np.testing.assert_allclose(got.sum(axis=0), np.ones(4), rtol=1e-5)
    np.testing.assert_allclose(got, _np_softmax(xv.astype(np.float64), axis=0), rtol=1e-5)


def test_softmax_over_several_named_axes(transformer, rng):
    C = ng.make_axis(3, name="C")
    H = ng.make_axis(2, name="H")
    N = ng.make_axis(4, name="N")
    x = ng.placeholder([N, C, H])
    xv = rng.standard_normal((4, 3, 2)).astype(np.float32)
    got = transformer.computation(ng.softmax(x, [H, C]), x)(xv)
    flat = xv.reshape(4, 6).astype(np.float64)
    expected = _np_softmax(flat, axis=1).reshape(4, 3, 2)
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    np.testing.assert_allclose(got.sum(axis=(1, 2)), np.ones(4), rtol=1e-5)


def test_softmax_default_excludes_recurrent_axis(transformer, rng):
    C = ng.make_axis(3, name="C")
    REC = ng.make_axis(2, name="REC")
    N = ng.make_axis(4, name="N")
    x = ng.placeholder([C, REC, N])
    xv = rng.standard_normal((3, 2, 4)).astype(np.float32)
    got = transformer.computation(ng.softmax(x), x)(xv)
    np.testing.assert_allclose(got, _np_softmax(xv.astype(np.float64), axis=0), rtol=1e-5)


def test_softmax_normalization_axes(transformer, rng):
    C = ng.make_axis(3, name="C")
    H = ng.make_axis(4, name="H")
    N = ng.make_axis(2, name="N")
    x = ng.placeholder([C, H, N])
    xv = rng.standard_normal((3, 4, 2)).astype(np.float32)
    s = ng.softmax(x, normalization_axes=[H])
    assert s.axes == ng.make_axes([C, H, N])
    got = transformer.computation(s, x)(xv)
    np.testing.assert_allclose(got.sum(axis=1), np.ones((3, 2)), rtol=1e-5)
    np.testing.assert_allclose(got, _np_softmax(xv.astype(np.float64), axis=1), rtol=1e-5)


def test_softmax_large_logits_stay_finite(transformer):
    C = ng.make_axis(3, name="C")
    N = ng.make_axis(2, name="N")
    x = ng.placeholder([C, N])
    xv = np.array([[1000.0, -1000.0], [999.0, -1000.0], [0.0, -1001.0]], np.float32)
    got = transformer.computation(ng.softmax(x), x)(xv)
    assert np.all(np.isfinite(got))
    e1 = math.exp(-1.0)
    np.testing.assert_allclose(got[:, 0], [1 / (1 + e1), e1 / (1 + e1), 0.0], rtol=1e-5, atol=1e-30)
    e = math.exp(-1.0)
    np.testing.assert_allclose(got[:, 1], [1 / (2 + e), 1 / (2 + e), e / (2 + e)], rtol=1e-5)


# -- cross_entropy_multi --------------------------------------------------------------

def test_cross_entropy_multi_on_probabilities(transformer, rng):
    C = ng.make_axis(4, name="C")
    N = ng.make_axis(3, name="N")
    y = ng.placeholder([C, N])
    t = ng.placeholder([C, N])
    yv = rng.uniform(0.05, 1.0, (4, 3))
    yv = (yv / yv.sum(axis=0)).astype(np.float32)
    tv = np.eye(4, dtype=np.float32)[:, [0, 2, 3]]
    ce = ng.cross_entropy_multi(y, t)
    assert ce.axes == ng.make_axes([N])
    got = transformer.computation(ce, y, t)(yv, tv)
    expected = -(tv * np.log(yv.astype(np.float64))).sum(axis=0)
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_cross_entropy_multi_on_softmax(transformer, rng):
    C = ng.make_axis(4, name="C")
    N = ng.make_axis(3, name="N")
    x = ng.placeholder([C, N])
    t = ng.placeholder([C, N])
    xv = rng.standard_normal((4, 3)).astype(np.float32) * 3
    tv = rng.uniform(0, 1, (4, 3))
    tv = (tv / tv.sum(axis=0)).astype(np.float32)  # soft targets
    ce = ng.cross_entropy_multi(ng.softmax(x), t)
    assert ce.axes == ng.make_axes([N])
    got = transformer.computation(ce, x, t)(xv, tv)
    expected = -(tv * _np_log_softmax(xv.astype(np.float64), axis=0)).sum(axis=0)
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_cross_entropy_multi_softmax_path_is_finite_for_huge_logits(transformer):
    C = ng.make_axis(2, name="C")
    N = ng.make_axis(2, name="N")
    x = ng.placeholder([C, N])
    t = ng.placeholder([C, N])
    xv = np.array([[1000.0, 0.0], [0.0, 1000.0]], np.float32)
    tv = np.array([[0.0, 1.0], [1.0, 0.0]], np.float32)  # the improbable class
    # naive NumPy: softmax rounds to exactly 0, so -log gives inf
    with np.errstate(divide="ignore"):
        naive = -(tv * np.log(_np_softmax(xv, axis=0))).sum(axis=0)
    assert np.all(np.isinf(naive))
    got = transformer.computation(ng.cross_entropy_multi(ng.softmax(x), t), x, t)(xv, tv)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, [1000.0, 1000.0], rtol=1e-5)


def test_cross_entropy_multi_usebits(transformer, rng):
    C = ng.make_axis(3, name="C")
    N = ng.make_axis(2, name="N")
    x = ng.placeholder([C, N])
    t = ng.placeholder([C, N])
    xv = rng.standard_normal((3, 2)).astype(np.float32)
    tv = np.eye(3, dtype=np.float32)[:, [1, 2]]
    nats = ng.cross_entropy_multi(ng.softmax(x), t)
    bits = ng.cross_entropy_multi(ng.softmax(x), t, usebits=True)
    got_nats, got_bits = transformer.computation([nats, bits], x, t)(xv, tv)
    expected_nats = -(tv * _np_log_softmax(xv.astype(np.float64), axis=0)).sum(axis=0)
    np.testing.assert_allclose(got_nats, expected_nats, rtol=1e-5)
    np.testing.assert_allclose(got_bits, expected_nats / np.log(2.0), rtol=1e-5)


# -- cross_entropy_binary -------------------------------------------------------------

def test_cross_entropy_binary_sigmoid_and_probability_paths_agree(transformer, rng):
    C = ng.make_axis(3, name="C")
    N = ng.make_axis(4, name="N")
    x = ng.placeholder([C, N])
    p = ng.placeholder([C, N])
    t = ng.placeholder([C, N])
    xv = rng.uniform(-4, 4, (3, 4)).astype(np.float32)
    pv = _np_sigmoid(xv.astype(np.float64)).astype(np.float32)
    tv = rng.uniform(0, 1, (3, 4)).astype(np.float32)

    via_sigmoid = ng.cross_entropy_binary(ng.sigmoid(x), t)
    via_prob = ng.cross_entropy_binary(p, t)
    assert via_sigmoid.axes == ng.make_axes([N])
    assert via_prob.axes == ng.make_axes([N])
    a, b = transformer.computation([via_sigmoid, via_prob], x, p, t)(xv, pv, tv)

    pv64 = _np_sigmoid(xv.astype(np.float64))
    expected = -(tv * np.log(pv64) + (1 - tv) * np.log(1 - pv64)).sum(axis=0)
    np.testing.assert_allclose(a, expected, rtol=1e-4)
    np.testing.assert_allclose(b, expected, rtol=1e-4)
    np.testing.assert_allclose(a, b, rtol=1e-4)


def test_cross_entropy_binary_sigmoid_path_large_logits(transformer):
    N = ng.make_axis(3, name="N")
    x = ng.placeholder([N])
    t = ng.placeholder([N])
    xv = np.array([100.0, -100.0, 30.0], np.float32)
    tv = np.array([0.0, 1.0, 1.0], np.float32)
    inner = ng.cross_entropy_binary_inner(ng.sigmoid(x), t)
    got = transformer.computation(inner, x, t)(xv, tv)
    # -log(1 - sigmoid(100)) = 100 + log1p(exp(-100)); -log(sigmoid(30)) = log1p(exp(-30))
    np.testing.assert_allclose(got, [100.0, 100.0, math.log1p(math.exp(-30.0))], rtol=1e-5,
                               atol=1e-6)


# -- one_hot --------------------------------------------------------------------------

def test_one_hot_values_and_axes(transformer):
    C = ng.make_axis(4, name="C")
    N = ng.make_axis(5, name="N")
    labels = ng.placeholder([N], dtype=np.int32)
    oh = ng.one_hot(labels, axis=C)
    assert oh.axes == ng.make_axes([C, N])
    lv = np.array([3, 0, 2, 2, 1], np.int32)
    got = transformer.computation(oh, labels)(lv)
    expected = np.zeros((4, 5), np.float32)
    for n, label in enumerate(lv):
        expected[label, n] = 1.0
    np.testing.assert_array_equal(got, expected)


def test_one_hot_two_dimensional_labels(transformer):
    C = ng.make_axis(3, name="C")
    N = ng.make_axis(2, name="N")
    T = ng.make_axis(4, name="T")
    labels = ng.placeholder([N, T], dtype=np.int32)
    oh = ng.one_hot(labels, axis=C)
    assert oh.axes == ng.make_axes([C, N, T])
    lv = np.array([[0, 1, 2, 1], [2, 2, 0, 1]], np.int32)
    got = transformer.computation(oh, labels)(lv)
    for c in range(3):
        for n in range(2):
            for t in range(4):
                assert got[c, n, t] == (1.0 if lv[n, t] == c else 0.0)


def test_one_hot_float_labels_and_dtype(transformer):
    C = ng.make_axis(3, name="C")
    N = ng.make_axis(2, name="N")
    labels = ng.placeholder([N])  # float32 labels holding whole numbers
    oh = ng.one_hot(labels, axis=C, dtype=np.int32)
    assert oh.dtype == np.int32
    comp = transformer.computation(oh, labels)
    got = comp(np.array([2.0, 0.0]))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, [[0, 1], [0, 0], [1, 0]])
    with pytest.raises(ng.ExecutionError):
        comp(np.array([1.5, 0.0]))


@pytest.mark.parametrize("bad", [4, -1])
def test_one_hot_out_of_range_raises(transformer, bad):
    C = ng.make_axis(4, name="C")
    N = ng.make_axis(3, name="N")
    labels = ng.placeholder([N], dtype=np.int32)
    comp = transformer.computation(ng.one_hot(labels, axis=C), labels)
    with pytest.raises(ng.ExecutionError):
        comp(np.array([0, bad, 1], np.int32))


# -- squared_L2 and reductions --------------------------------------------------------

def test_squared_L2_all_axes_by_default(transformer, rng):
    C = ng.make_axis(3, name="C")
    N = ng.make_axis(4, name="N")
    x = ng.placeholder([C, N])
    xv = rng.standard_normal((3, 4)).astype(np.float32)
    sq = ng.squared_L2(x)
    assert len(sq.axes) == 0
    got = transformer.computation(sq, x)(xv)
    assert got.shape == ()
    np.testing.assert_allclose(got, (xv.astype(np.float64) ** 2).sum(), rtol=1e-5)


def test_squared_L2_out_axes(transformer, rng):
    C = ng.make_axis(3, name="C")
    N = ng.make_axis(4, name="N")
    x = ng.placeholder([C, N])
    xv = rng.standard_normal((3, 4)).astype(np.float32)
    sq = ng.squared_L2(x, out_axes=[N])
    assert sq.axes == ng.make_axes([N])
    got = transformer.computation(sq, x)(xv)
    np.testing.assert_allclose(got, (xv.astype(np.float64) ** 2).sum(axis=0), rtol=1e-5)


def test_mean_and_variance(transformer, rng):
    C = ng.make_axis(3, name="C")
    H = ng.make_axis(5, name="H")
    N = ng.make_axis(4, name="N")
    x = ng.placeholder([C, H, N])
    xv = rng.standard_normal((3, 5, 4)).astype(np.float32)
    x64 = xv.astype(np.float64)
    m_default = ng.mean(x)
    m_axes = ng.mean(x, reduction_axes=[N])
    m_out = ng.mean(x, out_axes=[H])
    v_default = ng.variance(x)
    v_axes = ng.variance(x, reduction_axes=[C, N])
    assert m_default.axes == ng.make_axes([N])
    assert m_axes.axes == ng.make_axes([C, H])
    assert m_out.axes == ng.make_axes([H])
    assert v_default.axes == ng.make_axes([N])
    assert v_axes.axes == ng.make_axes([H])
    got = transformer.computation([m_default, m_axes, m_out, v_default, v_axes], x)(xv)
    np.testing.assert_allclose(got[0], x64.mean(axis=(0, 1)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], x64.mean(axis=2), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[2], x64.mean(axis=(0, 2)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[3], x64.var(axis=(0, 1)), rtol=1e-5)
    np.testing.assert_allclose(got[4], x64.var(axis=(0, 2)), rtol=1e-5)


def test_tensor_size_and_batch_size(transformer):
    C = ng.make_axis(3, name="C")
    H = ng.make_axis(5, name="H")
    N = ng.make_axis(4, name="N")
    x = ng.placeholder([C, H, N])
    size_all = ng.tensor_size(x)
    size_c = ng.tensor_size(x, reduction_axes=[C])
    size_out = ng.tensor_size(x, out_axes=[C])
    bs = ng.batch_size(x)
    for op in (size_all, size_c, size_out, bs):
        assert len(op.axes) == 0
    got = transformer.computation([size_all, size_c, size_out, bs])()
    assert [float(v) for v in got] == [15.0, 3.0, 20.0, 4.0]  # no axes: one example's size


def test_batch_size_and_mean_with_batch_bound_at_run_time(transformer, rng):
    C = ng.make_axis(3, name="C")
    N = ng.make_axis(name="N")
    x = ng.placeholder([C, N])
    bs = ng.batch_size(x)
    m = ng.mean(x, reduction_axes=[N])
    comp = transformer.computation([bs, m], x)
    for n in (2, 6):
        xv = rng.standard_normal((3, n)).astype(np.float32)
        got_bs, got_m = comp(xv)
        assert float(got_bs) == n
        np.testing.assert_allclose(got_m, xv.astype(np.float64).mean(axis=1), rtol=1e-5, atol=1e-6)


# -- random ---------------------------------------------------------------------------

def test_uniform_shape_range_and_moments(transformer):
    A = ng.make_axis(200, name="A")
    B = ng.make_axis(100, name="B")
    u = ng.uniform([A, B], low=-2.0, high=3.0, seed=11)
    assert u.axes == ng.make_axes([A, B])
    assert u.dtype == np.float32
    got = transformer.computation(u)()
    assert got.shape == (200, 100)
    assert got.dtype == np.float32
    assert got.min() >= -2.0 and got.max() < 3.0
    assert abs(got.mean() - 0.5) < 0.05
    assert abs(got.std() - 5.0 / math.sqrt(12.0)) < 0.05
    # it covers the interval, not a corner of it
    assert got.min() < -1.9 and got.max() > 2.9
    as64 = transformer.computation(ng.uniform([A], dtype=np.float64, seed=3))()
    assert as64.dtype == np.float64 and as64.shape == (200,)


def test_normal_shape_and_moments(transformer):
    A = ng.make_axis(200, name="A")
    B = ng.make_axis(100, name="B")
    r = ng.normal([A, B], loc=1.5, scale=0.5, seed=12)
    assert r.axes == ng.make_axes([A, B])
    got = transformer.computation(r)()
    assert got.shape == (200, 100)
    assert abs(got.mean() - 1.5) < 0.02
    assert abs(got.std() - 0.5) < 0.02


def test_random_same_seed_same_values_in_two_transformers(backend):
    A = ng.make_axis(50, name="A")
    u = ng.uniform([A], seed=7)
    n = ng.normal([A], seed=7)
    u2 = ng.uniform([A], seed=7)
    with ng.make_transformer(backend) as t1, ng.make_transformer(backend) as t2:
        a1, b1 = t1.computation([u, n])()
        a2, b2 = t2.computation([u, n])()
        c2 = t2.computation(u2)()
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(b1, b2)
    np.testing.assert_array_equal(a1, c2)
    assert not np.allclose(a1, b1)


def test_random_draws_change_between_calls_and_ops(transformer):
    A = ng.make_axis(50, name="A")
    u = ng.uniform([A])
    v = ng.uniform([A])
    comp = transformer.computation([u, v])
    first_u, first_v = comp()
    second_u, _ = comp()
    assert not np.array_equal(first_u, second_u)
    assert not np.array_equal(first_u, first_v)
    for values in (first_u, second_u, first_v):
        assert values.min() >= 0.0 and values.max() < 1.0
    other_seed = ng.uniform([A], seed=8)
    same_seed = ng.uniform([A], seed=9)
    assert not np.array_equal(transformer.computation(other_seed)(),
                              transformer.computation(same_seed)())
