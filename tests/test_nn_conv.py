"""Convolution, deconvolution, pooling, lookup tables, dropout and moments.

Every value is checked against a naive NumPy reference written here with
explicit Python loops over each output position (no im2col, no slicing
tricks), so it shares no approach with the kernels under test. Axes are
found by role (seed 000): roles come from axgraph.frontends.neon.ar, the
batch axis is named N, and user axes are given in shuffled orders.
"""
import itertools

import numpy as np
import pytest

import axgraph as ng
from axgraph.frontends.neon import ar
from axgraph.testing import ExecutorFactory, check_derivative

F64 = np.float64


# -- helpers ---------------------------------------------------------------------------

class Axes3:
    """Fresh image / filter axes with the standard neon roles (lengths per test)."""

    def __init__(self, C=None, D=None, H=None, W=None, N=None, K=None, T=None, R=None, S=None):
        self.C = ng.make_axis(C, name="C", roles=[ar.Channel])
        self.D = ng.make_axis(D, name="D", roles=[ar.Depth])
        self.H = ng.make_axis(H, name="H", roles=[ar.Height])
        self.W = ng.make_axis(W, name="W", roles=[ar.Width])
        self.N = ng.make_axis(N, name="N")
        self.K = ng.make_axis(K, name="K", roles=[ar.Channelout])
        self.T = ng.make_axis(T, name="T", roles=[ar.Depth])
        self.R = ng.make_axis(R, name="R", roles=[ar.Height])
        self.S = ng.make_axis(S, name="S", roles=[ar.Width])


def reorder(value, from_axes, to_axes):
    """`value` laid out in `from_axes` order, transposed to `to_axes` order (by identity)."""
    from_axes, to_axes = list(from_axes), list(to_axes)
    perm = []
    for a in to_axes:
        hits = [i for i, b in enumerate(from_axes) if b is a]
        assert len(hits) == 1, (a, from_axes)
        perm.append(hits[0])
    return np.transpose(value, perm)


def out_len(n, f, pad=0, stride=1, dil=1):
    return (n + 2 * pad - dil * (f - 1) - 1) // stride + 1


def ref_conv(x, w, pad, stride, dil):
    """x (N, C, S...) and w (K, C, R...) -> (N, K, P...), one output position at a time."""
    n_batch, n_chan = x.shape[:2]
    spatial, fshape = x.shape[2:], w.shape[2:]
    n_out = w.shape[0]
    nd = len(spatial)
    out = tuple(out_len(spatial[i], fshape[i], pad[i], stride[i], dil[i]) for i in range(nd))
    y = np.zeros((n_batch, n_out) + out, dtype=F64)
    for n in range(n_batch):
        for k in range(n_out):
            for p in itertools.product(*[range(o) for o in out]):
                acc = 0.0
                for c in range(n_chan):
                    for r in itertools.product(*[range(f) for f in fshape]):
                        pos = tuple(p[i] * stride[i] + r[i] * dil[i] - pad[i] for i in range(nd))
                        if all(0 <= pos[i] < spatial[i] for i in range(nd)):
                            acc += float(x[(n, c) + pos]) * float(w[(k, c) + r])
                y[(n, k) + p] = acc
    return y


def ref_deconv(y, w, in_lengths, pad, stride, dil):
    """y (N, K, P...) and w (K, C, R...) -> (N, C, S...): scatter each output back."""
    n_batch, n_out = y.shape[:2]
    out, fshape = y.shape[2:], w.shape[2:]
    n_chan = w.shape[1]
    nd = len(out)
    x = np.zeros((n_batch, n_chan) + tuple(in_lengths), dtype=F64)
    for n in range(n_batch):
        for k in range(n_out):
            for p in itertools.product(*[range(o) for o in out]):
                for c in range(n_chan):
                    for r in itertools.product(*[range(f) for f in fshape]):
                        pos = tuple(p[i] * stride[i] + r[i] * dil[i] - pad[i] for i in range(nd))
                        if all(0 <= pos[i] < in_lengths[i] for i in range(nd)):
                            x[(n, c) + pos] += y[(n, k) + p] * w[(k, c) + r]
    return x


def ref_pool(x, window, stride, pad, kind):
    """x (N, C, S...) -> (N, C, P...); windows see only real inputs (padding is skipped)."""
    n_batch, n_chan = x.shape[:2]
    spatial = x.shape[2:]
    nd = len(spatial)
    out = tuple(out_len(spatial[i], window[i], pad[i], stride[i]) for i in range(nd))
    y = np.zeros((n_batch, n_chan) + out, dtype=F64)
    for n in range(n_batch):
        for c in range(n_chan):
            for p in itertools.product(*[range(o) for o in out]):
                seen = []
                for r in itertools.product(*[range(f) for f in window]):
                    pos = tuple(p[i] * stride[i] + r[i] - pad[i] for i in range(nd))
                    if all(0 <= pos[i] < spatial[i] for i in range(nd)):
                        seen.append(float(x[(n, c) + pos]))
                assert seen
                y[(n, c) + p] = max(seen) if kind == "max" else sum(seen) / len(seen)
    return y


def geometry_kwargs(form, pad, stride, dil, roles):
    """(params, keywords) expressing the same geometry either as an ngraph dict or keywords."""
    if form == "dict":
        params = {}
        for role, p, s, d in zip(roles, pad, stride, dil):
            params[f"pad_{role}"] = p
            params[f"str_{role}"] = s
            params[f"dil_{role}"] = d
        return params, {}
    return None, dict(padding=tuple(pad), strides=tuple(stride), dilation=tuple(dil))


# -- convolution: values ---------------------------------------------------------------

@pytest.mark.parametrize("form,pad,stride,dil", [
    ("dict", (0,), (1,), (1,)),
    ("dict", (1,), (2,), (2,)),
    ("kw", (2,), (3,), (1,)),
    ("kw", (0,), (1,), (3,)),
])
@pytest.mark.parametrize("x_order,w_order", [("CWN", "CSK"), ("NCW", "KSC")])
def test_convolution_1d(transformer, rng, form, pad, stride, dil, x_order, w_order):
    a = Axes3(C=2, W=9, N=2, K=3, S=3)
    x_axes = [getattr(a, ch) for ch in x_order]
    w_axes = [getattr(a, ch) for ch in w_order]
    x = ng.placeholder(x_axes)
    w = ng.placeholder(w_axes)
    params, kw = geometry_kwargs(form, pad, stride, dil, "w")
    y = ng.convolution(params, x, w, **kw)
    q = out_len(9, 3, pad[0], stride[0], dil[0])
    assert y.axes[0] is a.K and y.axes[-1] is a.N
    assert y.axes.lengths == (3, q, 2)
    assert y.axes[1].name == "Q" and y.axes[1].has_role(ar.Width)
    xv = rng.standard_normal(ng.make_axes(x_axes).lengths).astype(np.float32)
    wv = rng.standard_normal(ng.make_axes(w_axes).lengths).astype(np.float32)
    got = transformer.computation(y, x, w)(xv, wv)
    expected = ref_conv(reorder(xv, x_axes, [a.N, a.C, a.W]), reorder(wv, w_axes, [a.K, a.C, a.S]),
                        pad, stride, dil)
    expected = np.transpose(expected, (1, 2, 0))  # (N, K, Q) -> (K, Q, N)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


CASES_2D = [
    ("dict", (0, 0), (1, 1), (1, 1)),
    ("dict", (1, 2), (2, 1), (1, 2)),
    ("kw", (1, 1), (2, 2), (1, 1)),
    ("kw", (0, 1), (1, 3), (2, 1)),
    ("kw", (2, 0), (3, 2), (2, 2)),
]


@pytest.mark.parametrize("form,pad,stride,dil", CASES_2D)
@pytest.mark.parametrize("x_order,w_order", [("CHWN", "CRSK"), ("NWCH", "KSCR"), ("WHNC", "RKSC")])
def test_convolution_2d(transformer, rng, form, pad, stride, dil, x_order, w_order):
    a = Axes3(C=3, H=7, W=8, N=2, K=4, R=3, S=2)
    x_axes = [getattr(a, ch) for ch in x_order]
    w_axes = [getattr(a, ch) for ch in w_order]
    x = ng.placeholder(x_axes)
    w = ng.placeholder(w_axes)
    params, kw = geometry_kwargs(form, pad, stride, dil, "hw")
    y = ng.convolution(params, x, w, **kw)
    p = out_len(7, 3, pad[0], stride[0], dil[0])
    q = out_len(8, 2, pad[1], stride[1], dil[1])
    assert y.axes[0] is a.K and y.axes[-1] is a.N
    assert y.axes.names == ("K", "P", "Q", "N")
    assert y.axes.lengths == (4, p, q, 2)
    assert y.axes[1].has_role(ar.Height) and y.axes[2].has_role(ar.Width)
    xv = rng.standard_normal(ng.make_axes(x_axes).lengths).astype(np.float32)
    wv = rng.standard_normal(ng.make_axes(w_axes).lengths).astype(np.float32)
    got = transformer.computation(y, x, w)(xv, wv)
    assert got.shape == (4, p, q, 2)
    expected = ref_conv(reorder(xv, x_axes, [a.N, a.C, a.H, a.W]),
                        reorder(wv, w_axes, [a.K, a.C, a.R, a.S]), pad, stride, dil)
    np.testing.assert_allclose(got, np.transpose(expected, (1, 2, 3, 0)), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("form,pad,stride,dil", [
    ("dict", (1, 0, 1), (1, 2, 1), (1, 1, 2)),
    ("kw", (0, 1, 0), (2, 1, 1), (1, 2, 1)),
])
@pytest.mark.parametrize("x_order,w_order", [("CDHWN", "CTRSK"), ("HNDCW", "SKTCR")])
def test_convolution_3d(transformer, rng, form, pad, stride, dil, x_order, w_order):
    a = Axes3(C=2, D=4, H=5, W=4, N=2, K=2, T=2, R=2, S=2)
    x_axes = [getattr(a, ch) for ch in x_order]
    w_axes = [getattr(a, ch) for ch in w_order]
    x = ng.placeholder(x_axes)
    w = ng.placeholder(w_axes)
    params, kw = geometry_kwargs(form, pad, stride, dil, "dhw")
    y = ng.convolution(params, x, w, **kw)
    lengths = tuple(out_len(n, f, *g) for n, f, g in zip((4, 5, 4), (2, 2, 2), zip(pad, stride, dil)))
    assert y.axes.names == ("K", "M", "P", "Q", "N")
    assert y.axes.lengths == (2,) + lengths + (2,)
    assert y.axes[1].has_role(ar.Depth)
    xv = rng.standard_normal(ng.make_axes(x_axes).lengths).astype(np.float32)
    wv = rng.standard_normal(ng.make_axes(w_axes).lengths).astype(np.float32)
    got = transformer.computation(y, x, w)(xv, wv)
    expected = ref_conv(reorder(xv, x_axes, [a.N, a.C, a.D, a.H, a.W]),
                        reorder(wv, w_axes, [a.K, a.C, a.T, a.R, a.S]), pad, stride, dil)
    np.testing.assert_allclose(got, np.transpose(expected, (1, 2, 3, 4, 0)), rtol=1e-4, atol=1e-5)


def test_convolution_params_dict_defaults_and_other_dims_ignored(transformer, rng):
    # Missing keys default (pad 0, stride 1, dilation 1); keys of a depth this 2-d input lacks
    # are ignored.
    a = Axes3(C=2, H=6, W=5, N=1, K=2, R=2, S=3)
    x = ng.placeholder([a.C, a.H, a.W, a.N])
    w = ng.placeholder([a.C, a.R, a.S, a.K])
    y = ng.convolution({"str_h": 2, "pad_d": 3, "dil_d": 2}, x, w)
    assert y.axes.lengths == (2, out_len(6, 2, 0, 2), out_len(5, 3), 1)
    xv = rng.standard_normal((2, 6, 5, 1))
    wv = rng.standard_normal((2, 2, 3, 2))
    got = transformer.computation(y, x, w)(xv, wv)
    expected = ref_conv(xv.transpose(3, 0, 1, 2), wv.transpose(3, 0, 1, 2), (0, 0), (2, 1), (1, 1))
    np.testing.assert_allclose(got, expected.transpose(1, 2, 3, 0), rtol=1e-4, atol=1e-5)


def test_convolution_scalar_keywords_apply_to_every_dim(transformer, rng):
    a = Axes3(C=2, H=7, W=6, N=2, K=3, R=2, S=2)
    x = ng.placeholder([a.C, a.H, a.W, a.N])
    w = ng.placeholder([a.C, a.R, a.S, a.K])
    y = ng.convolution(None, x, w, padding=1, strides=2, dilation=2)
    assert y.axes.lengths == (3, out_len(7, 2, 1, 2, 2), out_len(6, 2, 1, 2, 2), 2)
    xv = rng.standard_normal((2, 7, 6, 2))
    wv = rng.standard_normal((2, 2, 2, 3))
    got = transformer.computation(y, x, w)(xv, wv)
    expected = ref_conv(xv.transpose(3, 0, 1, 2), wv.transpose(3, 0, 1, 2), (1, 1), (2, 2), (2, 2))
    np.testing.assert_allclose(got, expected.transpose(1, 2, 3, 0), rtol=1e-4, atol=1e-5)


def test_convolution_caller_output_axes_in_any_order(transformer, rng):
    a = Axes3(C=2, H=6, W=7, N=2, K=3, R=3, S=2)
    x = ng.placeholder([a.W, a.N, a.C, a.H])
    w = ng.placeholder([a.S, a.K, a.R, a.C])
    p, q = out_len(6, 3, 1, 2), out_len(7, 2, 0, 1)
    P = ng.make_axis(p, name="myP", roles=[ar.Height])
    Q = ng.make_axis(None, name="myQ", roles=[ar.Width])  # length unset: the op sets it
    y = ng.convolution({"pad_h": 1, "str_h": 2}, x, w, axes=[a.N, Q, a.K, P])
    assert list(y.axes) == [a.N, Q, a.K, P]
    assert Q.length == q
    xv = rng.standard_normal((7, 2, 2, 6))
    wv = rng.standard_normal((2, 3, 3, 2))
    got = transformer.computation(y, x, w)(xv, wv)
    expected = ref_conv(reorder(xv, x.axes, [a.N, a.C, a.H, a.W]),
                        reorder(wv, w.axes, [a.K, a.C, a.R, a.S]), (1, 0), (2, 1), (1, 1))
    np.testing.assert_allclose(got, expected.transpose(0, 3, 1, 2), rtol=1e-4, atol=1e-5)


def test_convolution_caller_output_axes_wrong_length_rejected():
    a = Axes3(C=2, H=6, W=7, N=2, K=3, R=3, S=2)
    x = ng.placeholder([a.C, a.H, a.W, a.N])
    w = ng.placeholder([a.C, a.R, a.S, a.K])
    P = ng.make_axis(out_len(6, 3) + 1, name="P", roles=[ar.Height])
    Q = ng.make_axis(out_len(7, 2), name="Q", roles=[ar.Width])
    with pytest.raises(ng.IncompatibleAxesError):
        ng.convolution(None, x, w, axes=[a.K, P, Q, a.N])
    # the right length is accepted
    P = ng.make_axis(out_len(6, 3), name="P", roles=[ar.Height])
    assert ng.convolution(None, x, w, axes=[a.K, P, Q, a.N]).axes.lengths == (3, 4, 6, 2)


def test_convolution_caller_output_axes_wrong_set_rejected():
    a = Axes3(C=2, H=6, W=7, N=2, K=3, R=3, S=2)
    x = ng.placeholder([a.C, a.H, a.W, a.N])
    w = ng.placeholder([a.C, a.R, a.S, a.K])
    P = ng.make_axis(4, name="P", roles=[ar.Height])
    Q = ng.make_axis(6, name="Q", roles=[ar.Width])
    with pytest.raises(ng.IncompatibleAxesError):
        ng.convolution(None, x, w, axes=[a.K, P, a.N])  # a spatial axis missing
    with pytest.raises(ng.IncompatibleAxesError):
        ng.convolution(None, x, w, axes=[a.C, P, Q, a.N])  # C is not the output channel


def test_second_conv_layer_reads_channelout_as_its_channel(transformer, rng):
    a = Axes3(C=2, H=7, W=6, N=2, K=3, R=2, S=2)
    K2 = ng.make_axis(2, name="K2", roles=[ar.Channelout])
    x = ng.placeholder([a.C, a.H, a.W, a.N])
    w1 = ng.placeholder([a.C, a.R, a.S, a.K])
    w2 = ng.placeholder([a.K, a.R, a.S, K2])
    y1 = ng.convolution({"pad_h": 1, "pad_w": 1}, x, w1)
    y2 = ng.convolution({"str_h": 2}, y1, w2)
    p1, q1 = out_len(7, 2, 1), out_len(6, 2, 1)
    assert y1.axes.lengths == (3, p1, q1, 2)
    assert y2.axes[0] is K2 and y2.axes[-1] is a.N
    assert y2.axes.lengths == (2, out_len(p1, 2, 0, 2), out_len(q1, 2), 2)
    xv = rng.standard_normal((2, 7, 6, 2))
    w1v = rng.standard_normal((2, 2, 2, 3))
    w2v = rng.standard_normal((3, 2, 2, 2))
    got = transformer.computation(y2, x, w1, w2)(xv, w1v, w2v)
    h1 = ref_conv(xv.transpose(3, 0, 1, 2), w1v.transpose(3, 0, 1, 2), (1, 1), (1, 1), (1, 1))
    h2 = ref_conv(h1, w2v.transpose(3, 0, 1, 2), (0, 0), (2, 1), (1, 1))
    np.testing.assert_allclose(got, h2.transpose(1, 2, 3, 0), rtol=1e-4, atol=1e-5)


# -- convolution: errors ---------------------------------------------------------------

def test_convolution_input_without_roles_is_unmatched():
    a = Axes3(C=2, H=5, W=5, N=2, K=3, R=2, S=2)
    plainH = ng.make_axis(5, name="plainH")  # no role
    x = ng.placeholder([a.C, plainH, a.W, a.N])
    w = ng.placeholder([a.C, a.R, a.S, a.K])
    with pytest.raises(ng.UnmatchedAxesError) as info:
        ng.convolution(None, x, w)
    message = str(info.value)
    assert "plainH" in message  # names the axis that has no role
    assert "role" in message.lower()


def test_convolution_input_without_channel_or_batch_is_unmatched():
    a = Axes3(C=2, H=5, W=5, N=2, K=3, R=2, S=2)
    w = ng.placeholder([a.C, a.R, a.S, a.K])
    with pytest.raises(ng.UnmatchedAxesError) as info:
        ng.convolution(None, ng.placeholder([a.H, a.W, a.N]), w)
    assert "Channel" in str(info.value)
    with pytest.raises(ng.UnmatchedAxesError) as info:
        ng.convolution(None, ng.placeholder([a.C, a.H, a.W]), w)
    assert "batch" in str(info.value).lower()


def test_convolution_filter_without_channelout_is_unmatched():
    a = Axes3(C=2, H=5, W=5, N=2, K=3, R=2, S=2)
    x = ng.placeholder([a.C, a.H, a.W, a.N])
    plainK = ng.make_axis(3, name="plainK")
    with pytest.raises(ng.UnmatchedAxesError) as info:
        ng.convolution(None, x, ng.placeholder([a.C, a.R, a.S, plainK]))
    assert "Channelout" in str(info.value)


def test_convolution_channel_length_mismatch():
    a = Axes3(C=2, H=5, W=5, N=2, K=3, R=2, S=2)
    C3 = ng.make_axis(3, name="C3", roles=[ar.Channel])
    x = ng.placeholder([a.C, a.H, a.W, a.N])
    w = ng.placeholder([C3, a.R, a.S, a.K])
    with pytest.raises(ng.IncompatibleAxesError):
        ng.convolution(None, x, w)


def test_convolution_filter_larger_than_padded_input():
    a = Axes3(C=2, H=3, W=4, N=2, K=3, R=5, S=2)
    x = ng.placeholder([a.C, a.H, a.W, a.N])
    w = ng.placeholder([a.C, a.R, a.S, a.K])
    with pytest.raises(ng.IncompatibleAxesError):
        ng.convolution(None, x, w)
    with pytest.raises(ng.IncompatibleAxesError):
        ng.convolution(None, x, w, padding=(1, 0), dilation=(2, 1))  # span 9 > 3 + 2
    y = ng.convolution(None, x, w, padding=(1, 0))  # 3 + 2 == 5 fits exactly once
    assert y.axes.lengths == (3, 1, 3, 2)


def test_convolution_invalid_geometry():
    a = Axes3(C=2, H=5, W=5, N=2, K=3, R=2, S=2)
    x = ng.placeholder([a.C, a.H, a.W, a.N])
    w = ng.placeholder([a.C, a.R, a.S, a.K])
    for kw in (dict(strides=0), dict(dilation=(1, 0)), dict(padding=-1)):
        with pytest.raises(ng.IncompatibleAxesError):
            ng.convolution(None, x, w, **kw)


# -- deconvolution ---------------------------------------------------------------------

@pytest.mark.parametrize("pad,stride,dil", [
    ((0, 0), (1, 1), (1, 1)),
    ((1, 0), (2, 1), (1, 2)),
    ((1, 2), (2, 3), (2, 1)),
])
def test_deconvolution_is_the_adjoint_of_convolution(transformer, rng, pad, stride, dil):
    # Input lengths chosen so that every input position is reached: deconv's output lengths
    # (the smallest input giving conv's output) then equal x's.
    R, S = 3, 2
    p, q = 3, 4
    H = (p - 1) * stride[0] - 2 * pad[0] + dil[0] * (R - 1) + 1
    W = (q - 1) * stride[1] - 2 * pad[1] + dil[1] * (S - 1) + 1
    a = Axes3(C=2, H=H, W=W, N=2, K=3, R=R, S=S)
    x = ng.placeholder([a.C, a.H, a.W, a.N], dtype=F64)
    w = ng.placeholder([a.S, a.K, a.C, a.R], dtype=F64)
    y_conv = ng.convolution(None, x, w, padding=pad, strides=stride, dilation=dil)
    assert y_conv.axes.lengths == (3, p, q, 2)
    y = ng.placeholder(y_conv.axes, dtype=F64)
    d = ng.deconvolution(None, y, w, padding=pad, strides=stride, dilation=dil)
    assert d.axes[0] is a.C and d.axes[-1] is a.N
    assert d.axes.lengths == (2, H, W, 2)
    d_given = ng.deconvolution(None, y, w, axes=x.axes, padding=pad, strides=stride, dilation=dil)
    assert d_given.axes == x.axes
    xv = rng.standard_normal((2, H, W, 2))
    wv = rng.standard_normal((S, 3, 2, R))
    yv = rng.standard_normal((3, p, q, 2))
    conv_v, deconv_v, given_v = transformer.computation([y_conv, d, d_given], x, w, y)(xv, wv, yv)
    lhs = float(np.sum(conv_v * yv))
    rhs = float(np.sum(xv * deconv_v))
    assert abs(lhs - rhs) <= 1e-9 * max(1.0, abs(lhs))
    np.testing.assert_allclose(given_v, deconv_v, rtol=1e-12, atol=1e-12)
    # and against a naive scatter
    expected = ref_deconv(yv.transpose(3, 0, 1, 2), reorder(wv, w.axes, [a.K, a.C, a.R, a.S]),
                          (H, W), pad, stride, dil)
    np.testing.assert_allclose(deconv_v, expected.transpose(1, 2, 3, 0), rtol=1e-10, atol=1e-12)


def test_deconvolution_adjoint_when_the_last_inputs_are_unreached(transformer, rng):
    # H = 9 with stride 3: conv never reads the last input row, so deconv's output is shorter
    # (the smallest input with the same conv output) and <conv(x), y> == <x[:L], deconv(y)>.
    a = Axes3(C=2, H=9, W=7, N=1, K=2, R=2, S=3)
    x = ng.placeholder([a.C, a.H, a.W, a.N], dtype=F64)
    w = ng.placeholder([a.C, a.R, a.S, a.K], dtype=F64)
    params = {"str_h": 3, "str_w": 2, "pad_w": 1}
    y_conv = ng.convolution(params, x, w)
    p, q = out_len(9, 2, 0, 3), out_len(7, 3, 1, 2)
    assert y_conv.axes.lengths == (2, p, q, 1)
    y = ng.placeholder(y_conv.axes, dtype=F64)
    d = ng.deconvolution(params, y, w)
    lh = (p - 1) * 3 + 2
    lw = (q - 1) * 2 - 2 + 3
    assert d.axes.lengths == (2, lh, lw, 1)
    assert lh < 9
    xv = rng.standard_normal((2, 9, 7, 1))
    wv = rng.standard_normal((2, 2, 3, 2))
    yv = rng.standard_normal((2, p, q, 1))
    conv_v, deconv_v = transformer.computation([y_conv, d], x, w, y)(xv, wv, yv)
    lhs = float(np.sum(conv_v * yv))
    rhs = float(np.sum(xv[:, :lh, :lw, :] * deconv_v))
    assert abs(lhs - rhs) <= 1e-9 * max(1.0, abs(lhs))


def test_deconvolution_1d_and_3d_adjoint(transformer, rng):
    a = Axes3(C=2, D=4, H=3, W=5, N=2, K=2, T=2, R=2, S=3)
    for spatial, filt, kw in (([a.W], [a.S], dict(strides=2, padding=1)),
                              ([a.D, a.H, a.W], [a.T, a.R, a.S],
                               dict(strides=(2, 1, 1), dilation=(1, 1, 2)))):
        x = ng.placeholder([a.C] + spatial + [a.N], dtype=F64)
        w = ng.placeholder([a.K] + filt + [a.C], dtype=F64)
        y_conv = ng.convolution(None, x, w, **kw)
        y = ng.placeholder(y_conv.axes, dtype=F64)
        d = ng.deconvolution(None, y, w, **kw)
        xv = rng.standard_normal(x.axes.lengths)
        wv = rng.standard_normal(w.axes.lengths)
        yv = rng.standard_normal(y.axes.lengths)
        conv_v, deconv_v = transformer.computation([y_conv, d], x, w, y)(xv, wv, yv)
        crop = (slice(None),) + tuple(slice(0, n) for n in d.axes.lengths[1:-1]) + (slice(None),)
        lhs, rhs = float(np.sum(conv_v * yv)), float(np.sum(xv[crop] * deconv_v))
        assert abs(lhs - rhs) <= 1e-9 * max(1.0, abs(lhs))


def test_deconvolution_channel_length_mismatch_rejected_when_built():
    # As for convolution: an input channel axis (role Channelout) whose length differs from
    # the filter's Channelout axis cannot be transposed-convolved; say so at graph build time.
    a = Axes3(C=2, H=3, W=3, N=2, K=3, R=2, S=2)
    K4 = ng.make_axis(4, name="K4", roles=[ar.Channelout])
    y = ng.placeholder([K4, a.H, a.W, a.N])
    w = ng.placeholder([a.C, a.R, a.S, a.K])
    with pytest.raises(ng.IncompatibleAxesError):
        ng.deconvolution(None, y, w)


def test_convolution_and_deconvolution_with_batch_length_bound_at_run_time(transformer, rng):
    a = Axes3(C=2, H=5, W=4, N=None, K=3, R=2, S=2)
    x = ng.placeholder([a.C, a.H, a.W, a.N], dtype=F64)
    w = ng.placeholder([a.C, a.R, a.S, a.K], dtype=F64)
    y = ng.convolution(None, x, w, strides=(2, 1))
    d = ng.deconvolution(None, ng.placeholder(y.axes, dtype=F64), w, strides=(2, 1))
    comp = transformer.computation(y, x, w)
    wv = rng.standard_normal((2, 2, 2, 3))
    for n in (1, 3):
        xv = rng.standard_normal((2, 5, 4, n))
        got = comp(xv, wv)
        assert got.shape == (3, 2, 3, n)
        expected = ref_conv(xv.transpose(3, 0, 1, 2), wv.transpose(3, 0, 1, 2), (0, 0), (2, 1),
                            (1, 1))
        np.testing.assert_allclose(got, expected.transpose(1, 2, 3, 0), rtol=1e-10, atol=1e-12)
    yv = rng.standard_normal((3, 2, 3, 2))
    got = transformer.computation(d, d.args[0], w)(yv, wv)
    expected = ref_deconv(yv.transpose(3, 0, 1, 2), wv.transpose(3, 0, 1, 2), (4, 4), (0, 0),
                          (2, 1), (1, 1))
    np.testing.assert_allclose(got, expected.transpose(1, 2, 3, 0), rtol=1e-10, atol=1e-12)


# -- pooling ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("window,stride,pad", [
    (2, None, 0),  # default strides = window
    (3, 2, 1),
    (3, 1, 2),
    (2, 3, 1),
])
def test_pooling_1d(transformer, rng, kind, window, stride, pad):
    a = Axes3(C=2, W=9, N=2)
    x = ng.placeholder([a.N, a.W, a.C])
    kw = dict(window=window, padding=pad, pool_type=kind)
    if stride is not None:
        kw["strides"] = stride
    y = ng.pooling(None, x, **kw)
    s = window if stride is None else stride
    q = out_len(9, window, pad, s)
    assert y.axes[0] is a.C and y.axes[-1] is a.N
    assert y.axes.lengths == (2, q, 2)
    assert y.axes[1].has_role(ar.Width)
    xv = rng.standard_normal((2, 9, 2)).astype(np.float32) - 3.0  # all negative: pads are not 0
    got = transformer.computation(y, x)(xv)
    expected = ref_pool(reorder(xv, x.axes, [a.N, a.C, a.W]), (window,), (s,), (pad,), kind)
    np.testing.assert_allclose(got, expected.transpose(1, 2, 0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("form,window,stride,pad", [
    ("dict", (2, 2), None, (0, 0)),
    ("dict", (3, 2), (2, 1), (1, 1)),
    ("kw", (3, 3), (2, 2), (1, 2)),
    ("kw", (2, 3), None, (1, 0)),
])
def test_pooling_2d(transformer, rng, kind, form, window, stride, pad):
    a = Axes3(C=2, H=7, W=6, N=2)
    x = ng.placeholder([a.W, a.C, a.N, a.H])
    if form == "dict":
        params = {"op": kind, "R": window[0], "S": window[1], "pad_h": pad[0], "pad_w": pad[1]}
        if stride is not None:
            params.update(str_h=stride[0], str_w=stride[1])
        y = ng.pooling(params, x)
    else:
        kw = dict(window=window, padding=pad, pool_type=kind)
        if stride is not None:
            kw["strides"] = stride
        y = ng.pooling(None, x, **kw)
    s = window if stride is None else stride
    lengths = (out_len(7, window[0], pad[0], s[0]), out_len(6, window[1], pad[1], s[1]))
    assert y.axes[0] is a.C and y.axes[-1] is a.N
    assert y.axes.lengths == (2,) + lengths + (2,)
    xv = rng.standard_normal((6, 2, 2, 7)).astype(np.float32) - 3.0
    got = transformer.computation(y, x)(xv)
    expected = ref_pool(reorder(xv, x.axes, [a.N, a.C, a.H, a.W]), window, s, pad, kind)
    np.testing.assert_allclose(got, expected.transpose(1, 2, 3, 0), rtol=1e-5, atol=1e-6)


def test_avg_pooling_excludes_padding_from_the_count(transformer):
    a = Axes3(C=1, W=4, N=1)
    x = ng.placeholder([a.C, a.W, a.N])
    y = ng.pooling(None, x, window=3, strides=1, padding=1, pool_type="avg")
    xv = np.array([[[1.0], [2.0], [3.0], [4.0]]], dtype=np.float32)
    got = transformer.computation(y, x)(xv)
    # windows: [pad,1,2] [1,2,3] [2,3,4] [3,4,pad]
    np.testing.assert_allclose(got[0, :, 0], [1.5, 2.0, 3.0, 3.5], rtol=1e-6)


def test_pooling_default_is_max_with_strides_equal_to_window(transformer, rng):
    a = Axes3(C=1, H=4, W=4, N=1)
    x = ng.placeholder([a.C, a.H, a.W, a.N])
    y = ng.pooling({"R": 2, "S": 2}, x)
    assert y.axes.lengths == (1, 2, 2, 1)
    xv = rng.standard_normal((1, 4, 4, 1))
    got = transformer.computation(y, x)(xv)
    expected = xv[0, :, :, 0].reshape(2, 2, 2, 2).max(axis=(1, 3))
    np.testing.assert_allclose(got[0, :, :, 0], expected, rtol=1e-6)


def test_pooling_a_conv_output_keeps_its_channelout_axis(transformer, rng):
    a = Axes3(C=2, H=6, W=5, N=2, K=3, R=2, S=2)
    x = ng.placeholder([a.C, a.H, a.W, a.N], dtype=F64)
    w = ng.placeholder([a.C, a.R, a.S, a.K], dtype=F64)
    y = ng.convolution(None, x, w, padding=1)
    pooled = ng.pooling({"op": "avg", "R": 2, "S": 3, "pad_w": 1}, y)
    assert pooled.axes[0] is a.K and pooled.axes[-1] is a.N
    assert pooled.axes.lengths == (3, out_len(7, 2, 0, 2), out_len(6, 3, 1, 3), 2)
    xv = rng.standard_normal((2, 6, 5, 2))
    wv = rng.standard_normal((2, 2, 2, 3))
    got = transformer.computation(pooled, x, w)(xv, wv)
    h = ref_conv(xv.transpose(3, 0, 1, 2), wv.transpose(3, 0, 1, 2), (1, 1), (1, 1), (1, 1))
    expected = ref_pool(h, (2, 3), (2, 3), (0, 1), "avg")
    np.testing.assert_allclose(got, expected.transpose(1, 2, 3, 0), rtol=1e-10, atol=1e-12)


def test_pooling_bad_arguments():
    a = Axes3(C=1, H=4, W=4, N=1)
    x = ng.placeholder([a.C, a.H, a.W, a.N])
    with pytest.raises(ng.IncompatibleAxesError):
        ng.pooling(None, x, window=2, pool_type="median")
    with pytest.raises(ng.IncompatibleAxesError):
        ng.pooling(None, x, window=2, padding=2)  # padding must be smaller than the window
    with pytest.raises(ng.IncompatibleAxesError):
        ng.pooling(None, x, window=5)  # larger than the input
    with pytest.raises(ng.UnmatchedAxesError):
        ng.pooling(None, ng.placeholder([a.H, a.W, a.N]), window=2)  # no channel


# -- lookuptable -----------------------------------------------------------------------

def test_lookuptable_picks_rows(transformer, rng):
    V = ng.make_axis(6, name="V")
    E = ng.make_axis(3, name="E")
    T = ng.make_axis(4, name="T")
    N = ng.make_axis(2, name="N")
    lut = ng.placeholder([V, E])
    idx = ng.placeholder([T, N], dtype=np.int32)
    y = ng.lookuptable(lut, idx)
    assert list(y.axes) == [E, T, N]
    lutv = rng.standard_normal((6, 3)).astype(np.float32)
    idxv = np.array([[0, 5], [2, 2], [5, 1], [3, 0]], dtype=np.int32)
    got = transformer.computation(y, lut, idx)(lutv, idxv)
    for e in range(3):
        for t in range(4):
            for n in range(2):
                assert got[e, t, n] == lutv[idxv[t, n], e]


def test_lookuptable_table_axes_in_either_order(transformer, rng):
    V = ng.make_axis(5, name="V")
    E = ng.make_axis(3, name="E")
    T = ng.make_axis(4, name="T")
    lut_ve = ng.placeholder([V, E])
    lut_ev = ng.placeholder([E, V])
    idx = ng.placeholder([T], dtype=np.int64)
    y1 = ng.lookuptable(lut_ve, idx)
    y2 = ng.lookuptable(lut_ev, idx, vocab_axis=V)
    assert list(y1.axes) == [E, T] and list(y2.axes) == [E, T]
    lutv = rng.standard_normal((5, 3)).astype(np.float32)
    idxv = np.array([4, 0, 4, 2], dtype=np.int64)
    got1, got2 = transformer.computation([y1, y2], lut_ve, lut_ev, idx)(lutv, lutv.T.copy(), idxv)
    expected = np.empty((3, 4), dtype=np.float32)
    for t in range(4):
        for e in range(3):
            expected[e, t] = lutv[idxv[t], e]
    np.testing.assert_array_equal(got1, expected)
    np.testing.assert_array_equal(got2, expected)


def test_lookuptable_pad_idx_reads_zero(transformer, rng):
    V = ng.make_axis(5, name="V")
    E = ng.make_axis(2, name="E")
    T = ng.make_axis(5, name="T")
    lut = ng.placeholder([E, V])
    idx = ng.placeholder([T], dtype=np.int32)
    y = ng.lookuptable(lut, idx, vocab_axis=V, pad_idx=1)
    lutv = (rng.standard_normal((2, 5)) + 10.0).astype(np.float32)
    idxv = np.array([1, 0, 1, 4, 3], dtype=np.int32)
    got = transformer.computation(y, lut, idx)(lutv, idxv)
    for t in range(5):
        if idxv[t] == 1:
            np.testing.assert_array_equal(got[:, t], [0.0, 0.0])
        else:
            np.testing.assert_array_equal(got[:, t], lutv[:, idxv[t]])


@pytest.mark.parametrize("bad", [5, -1, 100])
def test_lookuptable_out_of_range_raises(transformer, bad):
    V = ng.make_axis(5, name="V")
    E = ng.make_axis(2, name="E")
    T = ng.make_axis(3, name="T")
    lut = ng.placeholder([V, E])
    idx = ng.placeholder([T], dtype=np.int32)
    comp = transformer.computation(ng.lookuptable(lut, idx), lut, idx)
    with pytest.raises(ng.ExecutionError):
        comp(np.zeros((5, 2)), np.array([0, bad, 1], dtype=np.int32))


def test_lookuptable_non_integer_indices_raise():
    V = ng.make_axis(5, name="V")
    E = ng.make_axis(2, name="E")
    T = ng.make_axis(3, name="T")
    lut = ng.placeholder([V, E])
    with pytest.raises(ng.DTypeError):
        ng.lookuptable(lut, ng.placeholder([T], dtype=np.float32))
    with pytest.raises(ng.DTypeError):
        ng.lookuptable(lut, ng.placeholder([T], dtype=np.float64))


# -- gradients -------------------------------------------------------------------------

def _conv_setup(rng, x_order="CHWN", w_order="CRSK"):
    a = Axes3(C=2, H=5, W=4, N=1, K=2, R=2, S=3)
    x = ng.placeholder([getattr(a, ch) for ch in x_order], dtype=F64)
    w = ng.placeholder([getattr(a, ch) for ch in w_order], dtype=F64)
    xv = rng.standard_normal(x.axes.lengths)
    wv = rng.standard_normal(w.axes.lengths)
    return a, x, w, xv, wv


@pytest.mark.parametrize("kw", [
    dict(),
    dict(padding=(1, 1), strides=(2, 1), dilation=(1, 2)),
    dict(padding=(2, 0), strides=(1, 2), dilation=(2, 1)),
])
def test_convolution_gradients(backend, rng, kw):
    _, x, w, xv, wv = _conv_setup(rng, "NWCH", "KSCR")
    y = ng.convolution(None, x, w, **kw)
    with ExecutorFactory(backend):
        check_derivative(y, x, 1e-6, xv, parameters=[w], parameter_values=[wv])
        check_derivative(y, w, 1e-6, wv, parameters=[x], parameter_values=[xv])


def test_convolution_gradient_through_params_dict(backend, rng):
    _, x, w, xv, wv = _conv_setup(rng)
    y = ng.convolution({"pad_h": 1, "str_w": 2, "dil_h": 2}, x, w)
    cost = ng.sum(ng.tanh(y), reduction_axes=y.axes)
    with ExecutorFactory(backend):
        check_derivative(cost, x, 1e-6, xv, parameters=[w], parameter_values=[wv])
        check_derivative(cost, w, 1e-6, wv, parameters=[x], parameter_values=[xv])


@pytest.mark.parametrize("kw", [dict(), dict(padding=(1, 0), strides=(2, 2), dilation=(1, 2))])
def test_deconvolution_gradients(backend, rng, kw):
    a = Axes3(C=2, H=3, W=3, N=1, K=2, R=2, S=2)
    y = ng.placeholder([a.K, a.H, a.W, a.N], dtype=F64)  # K is the filter's Channelout
    w = ng.placeholder([a.R, a.C, a.K, a.S], dtype=F64)
    d = ng.deconvolution(None, y, w, **kw)
    assert d.axes[0] is a.C
    yv = rng.standard_normal(y.axes.lengths)
    wv = rng.standard_normal(w.axes.lengths)
    with ExecutorFactory(backend):
        check_derivative(d, y, 1e-6, yv, parameters=[w], parameter_values=[wv])
        check_derivative(d, w, 1e-6, wv, parameters=[y], parameter_values=[yv])


def test_second_order_gradient_of_deconvolution_wrt_filter(backend, rng):
    a = Axes3(C=2, H=3, W=3, N=1, K=2, R=2, S=2)
    y = ng.placeholder([a.K, a.H, a.W, a.N], dtype=F64)
    w = ng.placeholder([a.C, a.R, a.S, a.K], dtype=F64)
    d = ng.deconvolution(None, y, w, strides=(2, 1), padding=(0, 1))
    cost = ng.sum(ng.sin(d), reduction_axes=d.axes)
    grad = ng.deriv(cost, w)
    assert grad.axes.is_equal_set(w.axes)
    yv = rng.standard_normal(y.axes.lengths)
    wv = rng.standard_normal(w.axes.lengths) * 0.5
    with ExecutorFactory(backend) as ex:
        # first order against finite differences of the cost
        check_derivative(cost, w, 1e-6, wv, parameters=[y], parameter_values=[yv])
        # second order: the Hessian of the cost in the filter
        check_derivative(grad, w, 1e-5, wv, parameters=[y], parameter_values=[yv],
                         rtol=1e-5, atol=1e-7)
        hessian = ex.derivative(grad, w, y)(wv, yv)
    flat = hessian.reshape(wv.size, wv.size)
    np.testing.assert_allclose(flat, flat.T, rtol=1e-8, atol=1e-10)  # a Hessian is symmetric


@pytest.mark.parametrize("kw", [
    dict(window=2),
    dict(window=(3, 2), strides=(1, 2), padding=(1, 1)),
    dict(window=(2, 3), strides=(2, 1), padding=(1, 2)),
])
def test_max_pooling_gradient(backend, rng, kw):
    a = Axes3(C=2, H=4, W=5, N=1)
    x = ng.placeholder([a.H, a.C, a.N, a.W], dtype=F64)
    y = ng.pooling(None, x, pool_type="max", **kw)
    # distinct values spaced far apart compared with the finite-difference step: no ties
    xv = rng.permutation(x.axes.size).reshape(x.axes.lengths).astype(F64) * 0.1 - 1.0
    with ExecutorFactory(backend):
        check_derivative(y, x, 1e-6, xv)


@pytest.mark.parametrize("kw", [
    dict(window=2),
    dict(window=(3, 2), strides=(1, 2), padding=(1, 1)),
    dict(window=(2, 3), strides=(2, 1), padding=(1, 2)),
])
def test_avg_pooling_gradient(backend, rng, kw):
    a = Axes3(C=2, H=4, W=5, N=1)
    x = ng.placeholder([a.W, a.N, a.H, a.C], dtype=F64)
    y = ng.pooling(None, x, pool_type="avg", **kw)
    xv = rng.standard_normal(x.axes.lengths)
    with ExecutorFactory(backend):
        check_derivative(y, x, 1e-6, xv)


def test_pooling_1d_gradients(backend, rng):
    a = Axes3(C=2, W=7, N=2)
    x = ng.placeholder([a.C, a.W, a.N], dtype=F64)
    xv = rng.permutation(28).reshape(2, 7, 2).astype(F64) * 0.1
    with ExecutorFactory(backend):
        for kind in ("max", "avg"):
            y = ng.pooling(None, x, window=3, strides=2, padding=1, pool_type=kind)
            check_derivative(y, x, 1e-6, xv)


def test_lookuptable_gradient(backend, rng):
    V = ng.make_axis(5, name="V")
    E = ng.make_axis(2, name="E")
    T = ng.make_axis(4, name="T")
    lut = ng.placeholder([E, V], dtype=F64)
    idx = ng.placeholder([T], dtype=np.int32)
    y = ng.lookuptable(lut, idx, vocab_axis=V, pad_idx=3)
    lutv = rng.standard_normal((2, 5))
    idxv = np.array([3, 1, 1, 4], dtype=np.int32)  # repeated index: gradients add up
    coeff = ng.constant(rng.standard_normal((2, 4)), [E, T], dtype=F64)
    cost = ng.sum(y * coeff, reduction_axes=[E, T])
    grad = ng.deriv(cost, lut)
    with ExecutorFactory(backend) as ex:
        check_derivative(y, lut, 1e-6, lutv, parameters=[idx], parameter_values=[idxv])
        g = ex.executor(grad, lut, idx)(lutv, idxv)
        cv = ex.executor(coeff)()
    g = reorder(g, grad.axes, [E, V])
    expected = np.zeros((2, 5))
    for t in range(4):
        if idxv[t] != 3:
            expected[:, idxv[t]] += cv[:, t]
    np.testing.assert_allclose(g, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(g[:, 3], 0.0)  # the pad row never trains
    np.testing.assert_array_equal(g[:, 0], 0.0)  # nor a row no index picked


# -- dropout and moments ---------------------------------------------------------------

def test_dropout_keep_fraction_and_scaling(transformer, rng):
    A = ng.make_axis(100, name="A")
    N = ng.make_axis(100, name="N")
    x = ng.placeholder([A, N])
    xv = rng.uniform(1.0, 2.0, (100, 100)).astype(np.float32)
    for keep in (0.8, 0.5, 0.25):
        y = ng.dropout(x, keep=keep, seed=3)
        assert y.axes == x.axes
        got = transformer.computation(y, x)(xv)
        kept = got != 0
        assert abs(kept.mean() - keep) < 0.03
        np.testing.assert_allclose(got[kept], xv[kept] / keep, rtol=1e-6)


def test_dropout_mask_is_drawn_afresh_each_call(transformer):
    A = ng.make_axis(200, name="A")
    x = ng.placeholder([A])
    comp = transformer.computation(ng.dropout(x, keep=0.5, seed=9), x)
    xv = np.ones(200, dtype=np.float32)
    first, second = comp(xv), comp(xv)
    assert not np.array_equal(first != 0, second != 0)
    assert set(np.unique(first)) <= {0.0, 2.0}


def test_dropout_keep_one_is_identity():
    A = ng.make_axis(4, name="A")
    x = ng.placeholder([A])
    assert ng.dropout(x, keep=1.0) is x


def test_dropout_bad_keep():
    A = ng.make_axis(4, name="A")
    x = ng.placeholder([A])
    for keep in (0.0, -0.5, 1.5):
        with pytest.raises(ng.IncompatibleAxesError):
            ng.dropout(x, keep=keep)


def test_dropout_same_seed_reproducible_across_transformers(backend, rng):
    A = ng.make_axis(30, name="A")
    N = ng.make_axis(20, name="N")
    x = ng.placeholder([A, N])
    xv = rng.uniform(1.0, 2.0, (30, 20)).astype(np.float32)
    y = ng.dropout(x, keep=0.5, seed=42)
    with ng.make_transformer(backend) as t1, ng.make_transformer(backend) as t2:
        first = t1.computation(y, x)(xv)
        second = t2.computation(y, x)(xv)
    np.testing.assert_array_equal(first, second)
    assert 0 < np.count_nonzero(first) < first.size


def test_moments_over_batch_axis_by_default(transformer, rng):
    C = ng.make_axis(3, name="C")
    H = ng.make_axis(4, name="H")
    N = ng.make_axis(6, name="N")
    x = ng.placeholder([C, N, H])
    xv = rng.standard_normal((3, 6, 4)) * 2.0 + 1.0
    mean, var = ng.moments(x)
    assert mean.axes.is_equal_set([C, H]) and var.axes.is_equal_set([C, H])
    got_mean, got_var = transformer.computation([mean, var], x)(xv.astype(np.float32))
    np.testing.assert_allclose(reorder(got_mean, mean.axes, [C, H]), xv.mean(axis=1),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(reorder(got_var, var.axes, [C, H]), xv.var(axis=1),
                               rtol=1e-5, atol=1e-5)


def test_moments_reduction_axes(transformer, rng):
    C = ng.make_axis(3, name="C")
    H = ng.make_axis(4, name="H")
    N = ng.make_axis(5, name="N")
    x = ng.placeholder([C, H, N], dtype=F64)
    xv = rng.standard_normal((3, 4, 5))
    mean, var = ng.moments(x, reduction_axes=[H, N], name="bn")
    assert list(mean.axes) == [C] and list(var.axes) == [C]
    got_mean, got_var = transformer.computation([mean, var], x)(xv)
    np.testing.assert_allclose(got_mean, xv.mean(axis=(1, 2)), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_var, xv.var(axis=(1, 2)), rtol=1e-12, atol=1e-12)


def test_moments_default_also_reduces_the_recurrent_axis(transformer, rng):
    C = ng.make_axis(3, name="C")
    REC = ng.make_axis(4, name="REC")
    N = ng.make_axis(5, name="N")
    x = ng.placeholder([N, C, REC], dtype=F64)
    xv = rng.standard_normal((5, 3, 4))
    mean, var = ng.moments(x)
    assert list(mean.axes) == [C] and list(var.axes) == [C]
    got_mean, got_var = transformer.computation([mean, var], x)(xv)
    np.testing.assert_allclose(got_mean, xv.mean(axis=(0, 2)), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_var, xv.var(axis=(0, 2)), rtol=1e-12, atol=1e-12)


# -- extra shapes ----------------------------------------------------------------------

def test_lookuptable_two_embedding_axes_and_2d_indices(backend, rng):
    V = ng.make_axis(4, name="V")
    E1 = ng.make_axis(2, name="E1")
    E2 = ng.make_axis(3, name="E2")
    T = ng.make_axis(3, name="T")
    N = ng.make_axis(2, name="N")
    lut = ng.placeholder([E2, V, E1], dtype=F64)
    idx = ng.placeholder([N, T], dtype=np.int32)
    y = ng.lookuptable(lut, idx, vocab_axis=V, pad_idx=0)
    assert list(y.axes) == [E2, E1, N, T]
    lutv = rng.standard_normal((3, 4, 2))
    idxv = np.array([[0, 3, 1], [2, 2, 0]], dtype=np.int32)
    with ExecutorFactory(backend) as ex:
        got = ex.executor(y, lut, idx)(lutv, idxv)
        check_derivative(y, lut, 1e-6, lutv, parameters=[idx], parameter_values=[idxv])
    for e2, e1, n, t in itertools.product(range(3), range(2), range(2), range(3)):
        want = 0.0 if idxv[n, t] == 0 else lutv[e2, idxv[n, t], e1]
        assert got[e2, e1, n, t] == want


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pooling_3d(transformer, rng, kind):
    a = Axes3(C=2, D=4, H=5, W=3, N=1)
    x = ng.placeholder([a.H, a.N, a.C, a.W, a.D], dtype=F64)
    y = ng.pooling(None, x, window=(2, 3, 2), strides=(2, 1, 1), padding=(1, 1, 0), pool_type=kind)
    assert y.axes.names == ("C", "M", "P", "Q", "N")
    assert y.axes.lengths == (2, out_len(4, 2, 1, 2), out_len(5, 3, 1, 1), out_len(3, 2), 1)
    xv = rng.standard_normal(x.axes.lengths) - 3.0
    got = transformer.computation(y, x)(xv)
    expected = ref_pool(reorder(xv, x.axes, [a.N, a.C, a.D, a.H, a.W]), (2, 3, 2), (2, 1, 1),
                        (1, 1, 0), kind)
    np.testing.assert_allclose(got, expected.transpose(1, 2, 3, 4, 0), rtol=1e-12, atol=1e-12)
