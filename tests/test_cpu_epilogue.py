"""The cpu backend's bias + ReLU in one pass (epilogue.py, Schedule.bias_relus)."""
import numpy as np
import pytest

import axgraph as ng
from axgraph.autodiff import deriv_many
from axgraph.frontends.neon import Affine, Convolution, Rectlin, ar
from axgraph.transformers.cpu import epilogue


def relu_of_sum(x, bias):
    """What the unfused ops compute: np.add, then np.maximum with +0, element by element."""
    total = (x + bias).astype(x.dtype)
    out = np.empty_like(total)
    for index, v in np.ndenumerate(total):
        out[index] = v if (v > 0 or v != v) else 0  # NaN kept, -0 and negatives to +0
    return out


@pytest.mark.parametrize("shape", [(37, 5), (16, 20), (17, 20), (3, 300), (1, 1), (5, 4, 3, 7),
                                   (2, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("use_c", [True, False])
def test_bias_relu_matches_the_unfused_ops(monkeypatch, shape, dtype, use_c):
    if not use_c:
        monkeypatch.setattr(epilogue, "available", lambda: False)
    rng = np.random.default_rng(sum(shape))
    x = rng.normal(size=shape).astype(dtype)
    bias = rng.normal(size=shape[-1]).astype(dtype)
    x.flat[::7] = np.nan
    x.flat[1::11] = -0.0
    bias[0] = -0.0  # -0 + -0 is -0: the ReLU makes it +0
    x.flat[2::13] = np.inf
    x.flat[3::13] = -np.inf
    want = relu_of_sum(x, bias)
    got = epilogue.bias_relu(x, bias.reshape((1,) * (len(shape) - 1) + (-1,)),
                             out=np.full(shape, 7, dtype))
    np.testing.assert_array_equal(got, want)
    assert not np.any(np.signbit(got[got == 0]))
    inplace = x.copy()
    assert epilogue.bias_relu(inplace, bias, out=inplace) is inplace
    np.testing.assert_array_equal(inplace, want)


def test_bias_relu_takes_strided_operands_through_numpy():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(9, 6)).astype(np.float32).T  # not row-major
    bias = rng.normal(size=(1, 9)).astype(np.float32)
    out = np.empty((9, 6), np.float32).T
    np.testing.assert_array_equal(epilogue.bias_relu(x, bias, out=out), relu_of_sum(x, bias))


# -- in a compiled training step -------------------------------------------------------------

def conv_reference(x, w, b, strides, padding):
    """NCHW convolution by loops (float64): (N, C, H, W) x (K, C, R, S) + b."""
    n, c, h, wd = x.shape
    k, _, r, s = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    p = (h + 2 * padding[0] - r) // strides[0] + 1
    q = (wd + 2 * padding[1] - s) // strides[1] + 1
    windows = np.empty((n, p, q, c, r, s))
    for i in range(p):
        for j in range(q):
            windows[:, i, j] = xp[:, :, i * strides[0]:i * strides[0] + r,
                                  j * strides[1]:j * strides[1] + s]
    z = np.einsum("npqcrs,kcrs->nkpq", windows, w) + b[None, :, None, None]
    return z, windows


@pytest.mark.parametrize("batch, channels, side, kernel, strides, padding, filters", [
    (3, 2, (9, 7), (3, 2), (2, 1), (1, 0), 5),
    (4, 1, (12, 12), (5, 5), (1, 1), (0, 0), 20),
    (2, 3, (8, 11), (3, 3), (1, 2), (1, 1), 17),
])
@pytest.mark.parametrize("use_c", [True, False])
def test_conv_relu_layer_trains_as_numpy_computes_it(monkeypatch, batch, channels, side, kernel,
                                                    strides, padding, filters, use_c):
    """A convolution layer with a bias and a ReLU: the step computes bias and ReLU in one
    pass (C, or NumPy without a compiler), and its output and gradients equal the loops'
    (odd sizes, strides, padding)."""
    if not use_c:
        monkeypatch.setattr(epilogue, "available", lambda: False)
    rng = np.random.default_rng(batch * filters)
    w0 = rng.normal(size=(filters, channels) + kernel).astype(np.float32)
    b0 = rng.normal(size=filters).astype(np.float32)
    xv = rng.normal(size=(batch, channels) + side).astype(np.float32)
    N = ng.make_axis(batch, name="N")
    C = ng.make_axis(channels, name="C", roles=[ar.Channel])
    H = ng.make_axis(side[0], name="H", roles=[ar.Height])
    W = ng.make_axis(side[1], name="W", roles=[ar.Width])
    x = ng.placeholder([N, C, H, W])
    layer = Convolution(kernel + (filters,), filter_init=w0, bias_init=b0, strides=strides,
                        padding=padding, activation=Rectlin())
    y = layer(x)
    z, windows = conv_reference(xv.astype(np.float64), w0.astype(np.float64),
                                b0.astype(np.float64), strides, padding)
    g = rng.normal(size=z.shape)  # (N, K, P, Q)
    grad_out = ng.constant(g.transpose(1, 2, 3, 0).astype(np.float32), axes=y.axes)
    loss = ng.sum(y * grad_out, out_axes=())
    weights, bias = layer.variables()
    dw, db = deriv_many(loss, [weights, bias])
    with ng.make_transformer("cpu") as t:
        step = t.computation([loss, dw, db], x)  # (a result would be no arena buffer)
        got_loss, got_dw, got_db = step(xv)
        assert "epilogue.bias_relu(" in step.source
    want_y = np.maximum(z, 0)
    dz = g * (z > 0)
    np.testing.assert_allclose(got_loss, np.sum(want_y * g), rtol=1e-4)
    np.testing.assert_allclose(got_dw, np.einsum("nkpq,npqcrs->kcrs", dz, windows),
                               rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(got_db, dz.sum(axis=(0, 2, 3)), rtol=1e-4, atol=1e-3)


def test_dense_relu_layer_with_its_sum_read_elsewhere_stays_unfused():
    """An Add whose sum another op reads keeps its own line (the pair needs it alone)."""
    rng = np.random.default_rng(5)
    N = ng.make_axis(6, name="N")
    F = ng.make_axis(7, name="F")
    Y = ng.make_axis(5, name="Y")
    x = ng.placeholder([F, N])
    w0, b0 = rng.normal(size=(5, 7)).astype(np.float32), rng.normal(size=5).astype(np.float32)
    layer = Affine(axes=Y, weight_init=w0, bias_init=b0, activation=None)
    z = layer(x)
    out = ng.maximum(z, 0.0) + ng.exp(z * 0.1)
    xv = rng.normal(size=(7, 6)).astype(np.float32)
    with ng.make_transformer("cpu") as t:
        step = t.computation(out, x)
        got = step(xv)
        assert "epilogue.bias_relu(" not in step.source
    zv = w0.astype(np.float64) @ xv + b0[:, None]
    np.testing.assert_allclose(got, np.maximum(zv, 0) + np.exp(zv * 0.1), rtol=1e-5)
