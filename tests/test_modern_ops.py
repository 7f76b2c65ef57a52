"""gelu, silu, softplus, layer_norm, rms_norm, log_softmax, causal_mask and ng.where in
user code: values against NumPy written here on every engine (fused C and blocked NumPy
kernels included), gradients against float64 central differences, and the errors."""
from __future__ import annotations

import math

import numpy as np
import pytest

import axgraph as ng
from axgraph.testing import ExecutorFactory, check_derivative
from conftest import BACKENDS, ENGINES

_erf = np.vectorize(math.erf, otypes=[np.float64])


# -- NumPy expectations, in float64, written from the definitions ---------------------------

def np_softplus(x):
    return np.array([math.log1p(math.exp(v)) if v < 30 else v + math.log1p(math.exp(-v))
                     for v in x.ravel()]).reshape(x.shape)


def np_silu(x):
    return x / (1 + np.exp(-x))


def np_gelu(x):
    return x * 0.5 * (1 + _erf(x / math.sqrt(2)))


def np_gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def np_layer_norm(x, axis, gain, bias, eps):
    mean = x.mean(axis=axis, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axis, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gain + bias


def np_rms_norm(x, axis, gain, eps):
    return x / np.sqrt((x ** 2).mean(axis=axis, keepdims=True) + eps) * gain


def np_log_softmax(x, axis):
    top = x.max(axis=axis, keepdims=True)
    return x - top - np.log(np.exp(x - top).sum(axis=axis, keepdims=True))


@pytest.fixture(autouse=True)
def private_kernel_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AXGRAPH_CACHE_DIR", str(tmp_path))


def run(engine, outputs, placeholders, values):
    kind, options = ENGINES[engine]
    with ng.make_transformer(kind, **options) as transformer:
        computation = transformer.computation(outputs, *placeholders)
        return computation(*values), (computation.source if kind == "cpu" else "")


# -- activations ------------------------------------------------------------------------------

ACTIVATIONS = {
    "softplus": (ng.softplus, np_softplus),
    "silu": (ng.silu, np_silu),
    "gelu": (ng.gelu, np_gelu),
    "gelu_tanh": (lambda x: ng.gelu(x, approximate="tanh"), np_gelu_tanh),
}


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_activations_match_numpy_on_every_engine(engine, dtype):
    rng = np.random.default_rng(3)
    values = np.concatenate([[0.0, -0.0, 1e-6, -1e-6, 3.0, -3.0, 20.0, -20.0],
                             rng.normal(0, 4, 200)]).astype(dtype)
    A = ng.make_axis(len(values), name="A")
    x = ng.placeholder([A], dtype=dtype)
    got, source = run(engine, [f(x) for f, _ in ACTIVATIONS.values()], [x], [values])
    rtol = 1e-12 if dtype == np.float64 else 2e-6
    # 1 + erf (or tanh) of a negative x cancels: the error is a few ulps of x, not of the value
    atol = 4 * np.finfo(dtype).eps * np.abs(values.astype(np.float64))
    for (label, (_, expect)), result in zip(ACTIVATIONS.items(), got):
        assert result.dtype == dtype, label
        want = expect(values.astype(np.float64))
        error = np.abs(result.astype(np.float64) - want)
        bound = rtol * np.abs(want) + (atol if label.startswith("gelu") else 0.0)
        assert np.all(error <= bound), (label, values[np.argmax(error - bound)])
    if engine.startswith("cpu-fused"):
        # each activation runs as one fused kernel, not op by op
        assert "Fused" in source and "# Log1p " not in source and "# Erf " not in source, source


@pytest.mark.parametrize("engine", list(ENGINES))
def test_softplus_never_overflows(engine):
    values = np.array([-1e30, -1000.0, -85.0, -30.0, 0.0, 30.0, 100.0, 1000.0, 3e38],
                      dtype=np.float32)
    A = ng.make_axis(len(values), name="A")
    x = ng.placeholder([A], dtype=np.float32)
    (got,), _ = run(engine, [ng.softplus(x)], [x], [values])
    assert np.all(np.isfinite(got)), got
    np.testing.assert_array_equal(got[5:], values[5:])  # log1p(exp(-x)) is below half an ulp
    assert got[0] == 0 and got[1] == 0
    np.testing.assert_allclose(got[2:4], np.exp(values[2:4].astype(np.float64)), rtol=1e-6)
    assert got[4] == np.float32(math.log(2))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("label", list(ACTIVATIONS))
def test_activation_gradients_match_finite_differences(backend, label):
    build, _ = ACTIVATIONS[label]
    A = ng.make_axis(7, name="A")
    x = ng.placeholder([A], dtype=np.float64)
    xv = np.array([-6.0, -1.3, -0.2, 0.0, 0.4, 1.7, 5.0])
    with ExecutorFactory(backend):
        check_derivative(build(x), x, 1e-6, xv, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_softplus_gradient_is_sigmoid_even_at_zero(backend):
    A = ng.make_axis(5, name="A")
    x = ng.placeholder([A], dtype=np.float64)
    xv = np.array([-800.0, -2.0, 0.0, 2.0, 800.0])
    with ExecutorFactory(backend) as factory:
        gradient = factory.executor(ng.deriv(ng.sum(ng.softplus(x), out_axes=()), x), x)(xv)
    e = np.exp(-np.abs(xv))
    np.testing.assert_allclose(gradient, np.where(xv >= 0, 1 / (1 + e), e / (1 + e)), rtol=1e-15)


def test_gelu_refuses_an_unknown_form():
    x = ng.placeholder([ng.make_axis(2, name="A")])
    with pytest.raises(ng.AxgraphValueError, match="gelu: approximate must be one of"):
        ng.gelu(x, approximate="fast")


# -- normalizations and log_softmax -------------------------------------------------------------

def _axes():
    return ng.make_axis(3, name="N"), ng.make_axis(5, name="D")


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_normalizations_match_numpy_on_every_engine(engine, dtype):
    N, D = _axes()
    rng = np.random.default_rng(11)
    # x keeps D first: the normalized axis is named, not counted from the end
    xv = (rng.normal(2, 3, (5, 3)) + 1000.0 * np.arange(3)).astype(dtype)
    gv, bv = rng.normal(1, 0.2, 5).astype(dtype), rng.normal(0, 1, 5).astype(dtype)
    x = ng.placeholder([D, N], dtype=dtype)
    gain, bias = ng.placeholder([D], dtype=dtype), ng.placeholder([D], dtype=dtype)
    outputs = [ng.layer_norm(x, D, gain, bias), ng.layer_norm(x, D), ng.rms_norm(x, D, gain),
               ng.log_softmax(x, D), ng.log_softmax(x * 100.0, [D, N])]
    got, _ = run(engine, outputs, [x, gain, bias], [xv, gv, bv])
    x64, g64, b64 = (v.astype(np.float64) for v in (xv, gv, bv))
    wants = [np_layer_norm(x64, 0, g64[:, None], b64[:, None], 1e-5),
             np_layer_norm(x64, 0, 1.0, 0.0, 1e-5),
             np_rms_norm(x64, 0, g64[:, None], 1e-6),
             np_log_softmax(x64, 0), np_log_softmax(x64 * 100.0, (0, 1))]
    rtol, atol = (1e-10, 1e-10) if dtype == np.float64 else (2e-4, 2e-4)
    for index, (result, want) in enumerate(zip(got, wants)):
        assert result.dtype == dtype and result.shape == (5, 3), index
        np.testing.assert_allclose(result, want, rtol=rtol, atol=atol, err_msg=str(index))


@pytest.mark.parametrize("engine", list(ENGINES))
def test_log_softmax_stays_finite_far_below_the_smallest_probability(engine):
    C = ng.make_axis(3, name="C")
    x = ng.placeholder([C], dtype=np.float32)
    values = np.array([0.0, -500.0, 1e4], dtype=np.float32)
    (got,), _ = run(engine, [ng.log_softmax(x, C)], [x], [values])
    np.testing.assert_array_equal(got, values - np.float32(1e4))  # log(1 + tiny) rounds to 0


def _weights(axes, seed):
    return np.random.default_rng(seed).normal(0, 1, [a.length for a in axes])


@pytest.mark.parametrize("backend", BACKENDS)
def test_normalization_gradients_match_finite_differences(backend):
    N, D = _axes()
    x = ng.placeholder([N, D], dtype=np.float64)
    gain = ng.constant(_weights([D], 1) + 1, axes=[D], dtype=np.float64)
    bias = ng.constant(_weights([D], 2), axes=[D], dtype=np.float64)
    xv = _weights([N, D], 3)
    with ExecutorFactory(backend):
        for f in (ng.layer_norm(x, D, gain, bias), ng.rms_norm(x, [D], gain),
                  ng.log_softmax(x, D), ng.log_softmax(x, [N, D])):
            check_derivative(f, x, 1e-6, xv, rtol=1e-6, atol=1e-8)


def test_gradient_reaches_gain_and_bias():
    N, D = _axes()
    xv = _weights([N, D], 4)
    x = ng.constant(xv, axes=[N, D], dtype=np.float64)
    gain = ng.placeholder([D], dtype=np.float64)
    bias = ng.placeholder([D], dtype=np.float64)
    loss = ng.sum(ng.layer_norm(x, D, gain, bias) * 3.0, out_axes=())
    with ExecutorFactory("numpy") as factory:
        g_gain, g_bias = factory.executor([ng.deriv(loss, gain), ng.deriv(loss, bias)],
                                          gain, bias)(np.ones(5), np.zeros(5))
    normalized = np_layer_norm(xv, 1, 1.0, 0.0, 1e-5)
    np.testing.assert_allclose(g_gain, 3.0 * normalized.sum(axis=0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g_bias, np.full(5, 9.0), rtol=1e-14)


@pytest.mark.parametrize("build, message", [
    (lambda x, D, H: ng.layer_norm(x, H), r"layer_norm: axes Axes\(H: 2\) are not axes of"),
    (lambda x, D, H: ng.rms_norm(x, []), "rms_norm: axes must name at least one axis"),
    (lambda x, D, H: ng.log_softmax(x, [D, H]),
     r"log_softmax: normalization_axes Axes\(H: 2\) are not axes of"),
])
def test_bad_axes_name_the_op_and_the_axes(build, message):
    N, D = _axes()
    H = ng.make_axis(2, name="H")
    x = ng.placeholder([N, D])
    with pytest.raises(ng.UnmatchedAxesError, match=message) as caught:
        build(x, D, H)
    assert caught.value.location[0] == __file__


def test_gain_with_a_foreign_axis_and_a_bad_eps_are_refused():
    N, D = _axes()
    H = ng.make_axis(2, name="H")
    x = ng.placeholder([N, D])
    with pytest.raises(ng.IncompatibleAxesError, match=r"layer_norm: gain Axes\(H: 2\) has axes"):
        ng.layer_norm(x, D, gain=ng.placeholder([H]))
    with pytest.raises(ng.IncompatibleAxesError, match=r"rms_norm: gain Axes\(D: 5, H: 2\)"):
        ng.rms_norm(x, D, gain=ng.placeholder([D, H]))
    with pytest.raises(ng.AxgraphValueError, match="layer_norm: eps must be a number >= 0"):
        ng.layer_norm(x, D, eps=-1.0)


# -- causal_mask and ng.where: attention in user code -----------------------------------------

@pytest.mark.parametrize("offset", [0, 2])
def test_causal_mask_values(offset):
    T, K = ng.make_axis(3, name="T"), ng.make_axis(5, name="K")
    with ng.make_transformer("numpy") as transformer:
        got = transformer.computation(ng.causal_mask(T, K, offset=offset))()
    want = np.array([[k <= t + offset for k in range(5)] for t in range(3)])
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("engine", list(ENGINES))
def test_masked_attention_with_where_matches_numpy(engine):
    T, K, E = ng.make_axis(4, name="T"), ng.make_axis(4, name="K"), ng.make_axis(3, name="E")
    rng = np.random.default_rng(8)
    qv, kv, vv = rng.normal(size=(4, 3)), rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    q, k, v = (ng.placeholder(axes, dtype=np.float64) for axes in ([T, E], [K, E], [K, E]))
    scores = ng.dot(q, k) / math.sqrt(3)          # (T, K): E is contracted
    masked = ng.where(ng.causal_mask(T, K), scores, -np.inf)
    weights = ng.softmax(masked, K)
    out = ng.dot(weights, v)
    (got_w, got_o), _ = run(engine, [weights, out], [q, k, v], [qv, kv, vv])
    s = qv @ kv.T / math.sqrt(3)
    s[np.triu_indices(4, 1)] = -np.inf
    w = np.exp(s - s.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got_w, w, rtol=1e-12, atol=1e-15)
    assert np.all(got_w[np.triu_indices(4, 1)] == 0)
    np.testing.assert_allclose(got_o, w @ vv, rtol=1e-12)


def test_causal_mask_refusals():
    T = ng.make_axis(3, name="T")
    with pytest.raises(ng.IncompatibleAxesError, match="causal_mask: query_axis and key_axis"):
        ng.causal_mask(T, T)
    with pytest.raises(ng.AxgraphTypeError, match="causal_mask: key_axis must be an Axis"):
        ng.causal_mask(T, 3)
    with pytest.raises(ng.AxgraphTypeError, match="causal_mask: offset must be an int"):
        ng.causal_mask(T, ng.make_axis(3, name="K"), offset=0.5)
    with pytest.raises(ng.AxisLengthError, match=r"causal_mask: key_axis Axis\(S: S\) needs a "
                                                 "known int length"):
        ng.causal_mask(T, ng.make_axis(ng.dim("S"), name="S"))


def test_the_functions_are_exported_and_documented():
    for name in ("gelu", "silu", "softplus", "layer_norm", "rms_norm", "log_softmax",
                 "causal_mask", "where"):
        function = getattr(ng, name)
        assert name in ng.__all__
        assert "Parameters\n    ----------" in function.__doc__, name
        assert "Returns\n    -------" in function.__doc__, name
