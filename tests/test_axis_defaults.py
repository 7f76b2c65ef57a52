"""Defaults that choose axes read the axes' batch/recurrent flags, and ask when unsure.

softmax, reductions and neon's Affine act on "every axis that is neither batch nor
recurrent" when not told which; a sequence axis made with ``recurrent=True`` is left alone
whatever its name, and softmax refuses to guess between several candidate axes. The
references are NumPy written here, over the same arrays.
"""
import inspect

import numpy as np
import pytest

import axgraph as ng
from axgraph.frontends.neon import layer as L
from axgraph.testing import ExecutorFactory, check_derivative


def np_softmax(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=axis, keepdims=True)


def sequence_axes(flag_t):
    """(V, T, N): classes, a sequence axis named T (flagged or not), the batch."""
    V = ng.make_axis(5, name="V")
    T = ng.make_axis(3, name="T", recurrent=True if flag_t else None)
    N = ng.make_axis(2, name="N")
    return V, T, N


# -- the flags ------------------------------------------------------------------------------

def test_flags_decide_and_names_are_only_v04s_fallback():
    assert ng.make_axis(name="N").is_batch and ng.make_axis(name="REC").is_recurrent
    assert not ng.make_axis(name="N", batch=False).is_batch
    assert ng.make_axis(name="B", batch=True).is_batch
    T = ng.make_axis(4, name="T", recurrent=True)
    D = ng.make_axis(2, name="D")
    assert T.is_recurrent and not ng.make_axis(4, name="T").is_recurrent
    # Axes derived from a sequence axis stay sequence axes.
    assert ng.placeholder([T])[1:3].axes[0].is_recurrent and (T - 1).is_recurrent
    assert ng.make_axes([D, T, ng.make_axis(name="N")]).feature_axes() == ng.make_axes([D])


# -- softmax and log_softmax ----------------------------------------------------------------

@pytest.mark.parametrize("function", [ng.softmax, ng.log_softmax])
def test_softmax_default_with_an_unflagged_sequence_axis_is_an_error(function):
    V, T, N = sequence_axes(flag_t=False)
    logits = ng.placeholder([V, T, N])
    line = inspect.currentframe().f_lineno + 2
    with pytest.raises(ng.AmbiguousAxesError) as caught:
        function(logits)
    error = caught.value
    assert isinstance(error, ng.AxesError)
    assert error.location == (__file__, line)
    assert function.__name__ in error.message
    assert "V: 5" in error.message and "T: 3" in error.message
    assert "normalization_axes" in error.message and "recurrent=True" in error.message


def test_softmax_default_without_a_candidate_axis_is_an_error():
    _, T, N = sequence_axes(flag_t=True)
    with pytest.raises(ng.AmbiguousAxesError, match="softmax.*no axis that is neither"):
        ng.softmax(ng.placeholder([T, N]))


def test_neon_softmax_activation_asks_too():
    from axgraph.frontends.neon import Softmax
    V, T, N = sequence_axes(flag_t=False)
    with pytest.raises(ng.AmbiguousAxesError, match="softmax"):
        Softmax()(ng.placeholder([V, T, N]))


def test_softmax_default_leaves_a_flagged_sequence_axis_alone(transformer, rng):
    V, T, N = sequence_axes(flag_t=True)
    logits = ng.placeholder([T, V, N], dtype=np.float64)
    value = rng.normal(0, 2, (3, 5, 2))
    probs, logs = transformer.computation([ng.softmax(logits), ng.log_softmax(logits)],
                                          logits)(value)
    np.testing.assert_allclose(probs, np_softmax(value, axis=1), rtol=1e-12)
    np.testing.assert_allclose(logs, np.log(np_softmax(value, axis=1)), rtol=1e-12)


def test_log_softmax_default_gradient_over_the_flagged_layout(backend, rng):
    V, T, N = sequence_axes(flag_t=True)
    logits = ng.placeholder([V, T, N], dtype=np.float64)
    weights = ng.constant(rng.normal(size=(5, 3, 2)), [V, T, N], dtype=np.float64)
    cost = ng.sum(ng.log_softmax(logits) * weights, out_axes=())
    with ExecutorFactory(backend):
        check_derivative(cost, logits, 1e-6, rng.normal(size=(5, 3, 2)), rtol=1e-6, atol=1e-8)


# -- reductions ------------------------------------------------------------------------------

def test_reduction_defaults_follow_the_flags(transformer, rng):
    V, T, N = sequence_axes(flag_t=True)
    x = ng.placeholder([V, T, N], dtype=np.float64)
    value = rng.normal(size=(5, 3, 2))
    per_step = ng.sum(x)                            # T is kept like N
    assert per_step.axes == ng.make_axes([T, N])
    mean = ng.mean(x)
    assert mean.axes == ng.make_axes([T, N])
    got_sum, got_mean = transformer.computation([per_step, mean], x)(value)
    np.testing.assert_allclose(got_sum, value.sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(got_mean, value.mean(axis=0), rtol=1e-12)


def test_v04_reduction_defaults_still_hold(transformer, rng):
    # Unflagged axes are features: v0.4 reduced all of them, keeping N; a tensor without a
    # batch or recurrent axis sums to a scalar.
    C, H, N = (ng.make_axis(3, name="C"), ng.make_axis(4, name="H"), ng.make_axis(2, name="N"))
    x = ng.placeholder([C, H, N], dtype=np.float64)
    y = ng.placeholder([C, H], dtype=np.float64)
    value = rng.normal(size=(3, 4, 2))
    per_example, total = ng.sum(x), ng.sum(y)
    assert per_example.axes == ng.make_axes([N]) and total.axes == ng.make_axes([])
    got, got_total = transformer.computation([per_example, total], x, y)(value, value[..., 0])
    np.testing.assert_allclose(got, value.sum(axis=(0, 1)), rtol=1e-12)
    np.testing.assert_allclose(got_total, value[..., 0].sum(), rtol=1e-12)


# -- Affine ------------------------------------------------------------------------------------

def test_affine_default_contracts_only_features_of_a_flagged_sequence(transformer, rng):
    D = ng.make_axis(4, name="D")
    _, T, N = sequence_axes(flag_t=True)
    x = ng.placeholder([D, T, N], dtype=np.float64)
    layer = L.Affine(nout=3, weight_init=lambda axes: rng.normal(size=axes.lengths),
                     bias_init=0.5)
    y = layer(x)
    assert y.axes == ng.make_axes([layer.axes[0], T, N])
    value = rng.normal(size=(4, 3, 2))
    got, w = transformer.computation([y, layer.W], x)(value)
    np.testing.assert_allclose(got, np.einsum("od,dtn->otn", w, value) + 0.5, rtol=1e-12)


def test_affine_input_axes_contracts_exactly_those(transformer, rng):
    D = ng.make_axis(4, name="D")
    _, T, N = sequence_axes(flag_t=False)            # T unflagged: passed through on request
    x = ng.placeholder([T, N, D], dtype=np.float64)
    layer = L.Affine(nout=3, weight_init=lambda axes: rng.normal(size=axes.lengths),
                     bias_init=lambda axes: rng.normal(size=axes.lengths), input_axes=[D],
                     name="proj")
    y = layer(x)
    out = layer.axes[0]
    assert layer.W.axes == ng.make_axes([out, D - 1])
    assert layer.b.axes == ng.make_axes([out])     # no bias per position
    assert y.axes.is_equal_set(ng.make_axes([out, T, N]))
    value = rng.normal(size=(3, 2, 4))
    got, w, b = transformer.computation([y, layer.W, layer.b], x)(value)
    expected = np.einsum("od,tnd->otn", w, value) + b[:, None, None]
    order = [[out, T, N].index(a) for a in y.axes]
    np.testing.assert_allclose(got, np.transpose(expected, order), rtol=1e-12)
    with pytest.raises(L.LayerAxesError, match="proj.*input_axes.*D: 4"):
        layer(ng.placeholder([T, N]))
    with pytest.raises(L.LayerError, match="input_axes is empty"):
        L.Affine(nout=2, weight_init=0.1, input_axes=[])


def test_affine_default_still_flattens_a_feature_map(rng):
    C, H, W, N = (ng.make_axis(2, name="C"), ng.make_axis(3, name="H"),
                  ng.make_axis(3, name="W"), ng.make_axis(2, name="N"))
    layer = L.Affine(nout=4, weight_init=0.1)
    assert layer(ng.placeholder([C, H, W, N])).axes == ng.make_axes([layer.axes[0], N])
    assert layer.W.axes == ng.make_axes([layer.axes[0], C - 1, H - 1, W - 1])


def test_recurrent_layer_refuses_two_sequence_axes():
    F = ng.make_axis(2, name="F")
    T = ng.make_axis(3, name="T", recurrent=True)
    K = ng.make_axis(3, name="K", recurrent=True)
    with pytest.raises(ng.AmbiguousAxesError, match="rnn.*several recurrent"):
        L.Recurrent(2, init=0.1, name="rnn")(ng.placeholder([F, T, K, ng.make_axis(2, name="N")]))
