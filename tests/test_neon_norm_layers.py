"""LayerNorm and RMSNorm layers, against NumPy written by hand and against PyTorch.

The references below normalize with NumPy in float64 over the axis the test names;
weights are read back from the transformer, so nothing here reuses layer code.
"""
import numpy as np
import pytest

import axgraph as ng
from axgraph.frontends.neon import LayerNorm, RMSNorm, Sequential, inference_mode_on
from axgraph.frontends.neon.layer import LayerAxesError, LayerError
from axgraph.testing import ExecutorFactory, check_derivative


def make_axes(**lengths):
    return [ng.make_axis(length=n, name=name) for name, n in lengths.items()]


def uniform_init(rng, low=0.5, high=1.5):
    return lambda axes: rng.uniform(low, high, axes.lengths)


def ordered(value, op, axes):
    return np.transpose(value, [op.axes.index(a) for a in axes])


def layer_norm_reference(x, gain, bias, eps, axis):
    mean = x.mean(axis=axis, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axis, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gain + bias


def rms_norm_reference(x, gain, eps, axis):
    return x / np.sqrt((x ** 2).mean(axis=axis, keepdims=True) + eps) * gain


def test_layer_norm_normalizes_each_token_over_the_named_axis(transformer, rng):
    T, D, N = make_axes(T=3, D=5, N=2)
    x = ng.placeholder([T, N, D], dtype=np.float64)        # D last: the name decides
    norm = LayerNorm(D, eps=1e-3, init_gain=uniform_init(rng), init_bias=uniform_init(rng),
                     name="ln")
    y = norm(x)
    assert y.axes == x.axes
    assert norm.gain.axes == ng.make_axes([D]) and norm.bias.axes == ng.make_axes([D])
    assert norm.variables() == [norm.gain, norm.bias]
    xv = rng.normal(2.0, 3.0, (3, 2, 5))
    yv, gain, bias = transformer.computation([y, norm.gain, norm.bias], x)(xv)
    np.testing.assert_allclose(yv, layer_norm_reference(xv, gain, bias, 1e-3, axis=2),
                               rtol=1e-10, atol=1e-12)


def test_rms_norm_scales_each_token_by_its_root_mean_square(transformer, rng):
    D, T, N = make_axes(D=4, T=3, N=2)
    x = ng.placeholder([D, T, N], dtype=np.float64)
    norm = RMSNorm(D, eps=1e-4, init_gain=uniform_init(rng), name="rms")
    y = norm(x)
    assert norm.variables() == [norm.gain] and norm.gain.axes == ng.make_axes([D])
    xv = rng.normal(0.5, 2.0, (4, 3, 2))
    yv, gain = transformer.computation([y, norm.gain], x)(xv)
    np.testing.assert_allclose(yv, rms_norm_reference(xv, gain[:, None, None], 1e-4, axis=0),
                               rtol=1e-10, atol=1e-12)


def test_layer_norm_over_two_axes_and_without_bias(transformer, rng):
    C, W, N = make_axes(C=2, W=3, N=4)
    x = ng.placeholder([N, W, C], dtype=np.float64)
    norm = LayerNorm([C, W], init_gain=uniform_init(rng), init_bias=None)
    y = norm(x)
    assert norm.bias is None and norm.variables() == [norm.gain]
    xv = rng.normal(size=(4, 3, 2))
    yv, gain = transformer.computation([y, norm.gain], x)(xv)
    gain_nwc = ordered(gain, norm.gain, [W, C])[np.newaxis]
    np.testing.assert_allclose(yv, layer_norm_reference(xv, gain_nwc, 0.0, 1e-5, axis=(1, 2)),
                               rtol=1e-10, atol=1e-12)


def test_default_axes_is_the_one_feature_axis_and_calls_share_the_variables(transformer, rng):
    D, N = make_axes(D=3, N=2)
    norm = RMSNorm(init_gain=uniform_init(rng))
    x1 = ng.placeholder([D, N], dtype=np.float64)
    x2 = ng.placeholder([N, D], dtype=np.float64)
    y1 = norm(x1)
    with inference_mode_on():
        y2 = norm(x2)                        # the inference graph computes the same thing
    assert norm.axes == ng.make_axes([D]) and len(norm.variables()) == 1
    xv = rng.normal(size=(3, 2))
    v1, v2 = transformer.computation([y1, y2], x1, x2)(xv, xv.T)
    np.testing.assert_allclose(ordered(v2, y2, [D, N]), v1, rtol=1e-12)


def test_norm_layers_in_a_sequential(transformer, rng):
    D, T = make_axes(D=4, T=3)
    x = ng.placeholder([D, T], dtype=np.float64)
    model = Sequential([LayerNorm(D, init_gain=2.0, init_bias=0.0), RMSNorm(D, eps=0.0)])
    xv = rng.normal(size=(4, 3))
    got = transformer.computation(model(x), x)(xv)
    # RMSNorm divides out the gain of 2: the result is the layer-normed vector over its RMS.
    expected = layer_norm_reference(xv, 1.0, 0.0, 1e-5, axis=0)
    expected = expected / np.sqrt((expected ** 2).mean(axis=0, keepdims=True))
    np.testing.assert_allclose(got, expected, rtol=1e-9)


def _ramp(low, high):
    return lambda axes: np.linspace(low, high, axes.lengths[0])


@pytest.mark.parametrize("make", [
    lambda D: LayerNorm(D, init_gain=_ramp(0.5, 2.0), init_bias=_ramp(-1.0, 1.0)),
    lambda D: RMSNorm(D, init_gain=_ramp(0.5, 2.0)),
], ids=["LayerNorm", "RMSNorm"])
def test_gradient_with_respect_to_the_input_matches_finite_differences(backend, rng, make):
    D, T = make_axes(D=4, T=2)
    x = ng.placeholder([D, T], dtype=np.float64)
    y = make(D)(x)
    with ExecutorFactory(backend):
        check_derivative(y, x, 1e-6, rng.normal(size=(4, 2)), rtol=1e-5, atol=1e-8)


# -- against PyTorch -----------------------------------------------------------------------

def _torch_pair(kind, D, rng):
    """The axgraph layer and PyTorch's module over D, both with the same random weights."""
    torch = pytest.importorskip("torch")
    gain, bias = rng.uniform(0.5, 1.5, D.length), rng.normal(size=D.length)
    if kind == "LayerNorm":
        ours = LayerNorm(D, eps=1e-5, init_gain=gain, init_bias=bias)
        theirs = torch.nn.LayerNorm(D.length, eps=1e-5, dtype=torch.float64)
        theirs.bias.data = torch.tensor(bias)
    else:
        ours = RMSNorm(D, eps=1e-6, init_gain=gain)
        theirs = torch.nn.RMSNorm(D.length, eps=1e-6, dtype=torch.float64)
    theirs.weight.data = torch.tensor(gain)
    return torch, ours, theirs


@pytest.mark.parametrize("kind", ["LayerNorm", "RMSNorm"])
def test_values_and_parameter_gradients_match_pytorch(transformer, rng, kind):
    D, T, N = make_axes(D=6, T=3, N=2)
    torch, ours, theirs = _torch_pair(kind, D, rng)
    x = ng.placeholder([D, T, N], dtype=np.float64)
    y = ours(x)
    weights = rng.normal(size=(6, 3, 2))           # a loss that weighs every output differently
    loss = ng.sum(y * ng.constant(weights, axes=[D, T, N], dtype=np.float64), out_axes=())
    grads = [ng.deriv(loss, v) for v in ours.variables()]
    xv = rng.normal(1.0, 2.0, (6, 3, 2))
    values = transformer.computation([y, ng.deriv(loss, x)] + grads, x)(xv)

    x_torch = torch.tensor(xv.transpose(2, 1, 0), requires_grad=True)     # (N, T, D)
    y_torch = theirs(x_torch)
    (y_torch * torch.tensor(weights.transpose(2, 1, 0))).sum().backward()
    np.testing.assert_allclose(values[0], y_torch.detach().numpy().transpose(2, 1, 0),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(values[1], x_torch.grad.numpy().transpose(2, 1, 0),
                               rtol=1e-9, atol=1e-11)
    expected = [theirs.weight.grad] + ([theirs.bias.grad] if kind == "LayerNorm" else [])
    for got, want in zip(values[2:], expected):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-9, atol=1e-11)


# -- errors ---------------------------------------------------------------------------------

def test_ambiguous_default_axes_ask_for_axes_at_the_users_line():
    D, T, N = make_axes(D=4, T=3, N=2)
    norm = LayerNorm(name="ln_block")
    with pytest.raises(LayerAxesError, match=r"LayerNorm ln_block: cannot tell .*D.*T.*give axes=") \
            as caught:
        norm(ng.placeholder([D, T, N]))
    assert caught.value.location[0] == __file__


def test_an_input_without_the_normalized_axis_is_refused():
    D, E, N = make_axes(D=4, E=4, N=2)
    norm = RMSNorm(D, name="rms_block")
    norm(ng.placeholder([D, N]))
    with pytest.raises(LayerAxesError, match=r"RMSNorm rms_block: normalizes over .*D.* lacks") \
            as caught:
        norm(ng.placeholder([E, N]))
    assert caught.value.location[0] == __file__


@pytest.mark.parametrize("kwargs, message", [({"eps": -1.0}, "eps must be a number >= 0"),
                                             ({"eps": "small"}, "eps must be a number >= 0"),
                                             ({"axes": []}, "axes must name at least one axis")])
def test_bad_settings_raise_layer_errors(kwargs, message):
    with pytest.raises(LayerError, match=message) as caught:
        LayerNorm(**kwargs)
    assert caught.value.location[0] == __file__
