"""neon layers and activations, each checked against NumPy written by hand.

The NumPy references below do not reuse layer code: weights are read back
from the transformer and put in a known axis order, and the recurrences are
unrolled step by step as the published formulas read.
"""
import numpy as np
import pytest

import axgraph as ng
from axgraph.frontends.neon import activation as act
from axgraph.frontends.neon import ar
from axgraph.frontends.neon import layer as L
from axgraph.testing import ExecutorFactory, check_derivative


# -- helpers ------------------------------------------------------------------------------

def make_axes(**lengths):
    """Fresh axes (named as given) so lengths never leak between tests."""
    return [ng.make_axis(length=n, name=name) for name, n in lengths.items()]


def uniform_init(rng, scale=0.5):
    return lambda axes: rng.uniform(-scale, scale, axes.lengths)


def ordered(value, op, axes):
    """`value` of `op` with its dimensions in the order of `axes`."""
    return np.transpose(value, [op.axes.index(a) for a in axes])


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def evaluate(transformer, results, feeds):
    """Values of `results` with placeholders fed from the dict `feeds`."""
    return transformer.computation(results, *feeds)(*feeds.values())


# -- activations --------------------------------------------------------------------------

ACTIVATION_CASES = [
    (act.Identity(), lambda x: x),
    (act.Rectlin(), lambda x: np.maximum(x, 0)),
    (act.Rectlin(slope=0.1), lambda x: np.where(x > 0, x, 0.1 * x)),
    (act.Tanh(), np.tanh),
    (act.Logistic(), sigmoid),
    (act.Explin(alpha=0.7), lambda x: np.where(x > 0, x, 0.7 * (np.exp(x) - 1))),
    (act.Softmax(), lambda x: np.exp(x) / np.exp(x).sum(axis=0, keepdims=True)),
]


@pytest.mark.parametrize("activation, reference", ACTIVATION_CASES,
                         ids=[repr(a) for a, _ in ACTIVATION_CASES])
def test_activation_values(transformer, rng, activation, reference):
    C, N = make_axes(C=4, N=5)
    x = ng.placeholder([C, N], dtype=np.float64)
    xv = rng.normal(0, 3, (4, 5))
    got = evaluate(transformer, activation(x), {x: xv})
    np.testing.assert_allclose(got, reference(xv), rtol=1e-12, atol=1e-12)


def test_logistic_and_softmax_keep_their_cross_entropy_schemas():
    C, N = make_axes(C=3, N=2)
    x = ng.placeholder([C, N])
    assert act.Logistic()(x).schemas and act.Softmax()(x).schemas


def test_get_activation_by_name_callable_and_default():
    assert isinstance(act.get_activation("relu"), act.Rectlin)
    assert isinstance(act.get_activation(None), act.Identity)
    tanh = act.Tanh()
    assert act.get_activation(None, tanh) is tanh
    assert act.get_activation(ng.tanh) is ng.tanh
    with pytest.raises(act.ActivationError, match="unknown activation 'swishy'"):
        act.get_activation("swishy")


# -- Affine -------------------------------------------------------------------------------

def test_affine_is_w_x_plus_b(transformer, rng):
    F, N = make_axes(F=4, N=3)
    x = ng.placeholder([F, N])
    layer = L.Affine(nout=5, weight_init=uniform_init(rng), bias_init=uniform_init(rng),
                     activation=act.Tanh(), name="fc")
    y = layer(x)
    out = layer.axes[0]
    assert out.name == "fc_out" and out.length == 5
    assert layer.W.axes == ng.make_axes([out, F - 1]) and layer.W.name == "fc_W"
    assert y.axes == ng.make_axes([out, N])
    xv = rng.normal(size=(4, 3)).astype(np.float32)
    yv, wv, bv = evaluate(transformer, [y, layer.W, layer.b], {x: xv})
    np.testing.assert_allclose(yv, np.tanh(wv @ xv + bv[:, None]), rtol=1e-5, atol=1e-6)


def test_affine_infers_axes_in_any_order_and_reuses_variables(transformer, rng):
    C, H, N = make_axes(C=2, H=3, N=4)
    layer = L.Affine(nout=5, weight_init=uniform_init(rng), bias_init=0.25)
    x1 = ng.placeholder([C, H, N])
    x2 = ng.placeholder([N, H, C])
    y1 = layer(x1)
    variables = layer.variables()
    y2 = layer(x2)
    assert len(variables) == 2 and layer.variables() == variables
    assert y1.variables() == y2.variables() == variables
    assert layer.W.axes == ng.make_axes([layer.axes[0], C - 1, H - 1])
    xv = rng.normal(size=(2, 3, 4)).astype(np.float32)
    v1, v2, wv = evaluate(transformer, [y1, y2, layer.W],
                          {x1: xv, x2: np.transpose(xv, (2, 1, 0))})
    expected = np.einsum("och,chn->on", wv, xv) + 0.25
    np.testing.assert_allclose(v1, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ordered(v2, y2, y1.axes), expected, rtol=1e-5, atol=1e-6)


def test_affine_keeps_batch_and_recurrent_axes(transformer, rng):
    F, REC, N = make_axes(F=3, REC=2, N=4)
    x = ng.placeholder([N, F, REC])
    layer = L.Affine(nout=2, weight_init=uniform_init(rng))
    y = layer(x)
    assert y.axes == ng.make_axes([layer.axes[0], N, REC]) and layer.b is None
    xv = rng.normal(size=(4, 3, 2)).astype(np.float32)
    yv, wv = evaluate(transformer, [y, layer.W], {x: xv})
    np.testing.assert_allclose(yv, np.einsum("of,nft->ont", wv, xv), rtol=1e-5, atol=1e-6)


def test_affine_onto_an_axis_of_its_own_input(transformer, rng):
    # Weight (F, F_in - 1): the input's F is renamed so dot is not ambiguous.
    F, N = make_axes(F=3, N=2)
    x = ng.placeholder([F, N])
    layer = L.Affine(axes=F, weight_init=uniform_init(rng))
    y = layer(x)
    assert y.axes == ng.make_axes([F, N])
    xv = rng.normal(size=(3, 2)).astype(np.float32)
    yv, wv = evaluate(transformer, [y, layer.W], {x: xv})
    np.testing.assert_allclose(yv, wv @ xv, rtol=1e-5, atol=1e-6)


def test_affine_errors_name_the_layer_and_axes(rng):
    F, G, N = make_axes(F=3, G=2, N=2)
    with pytest.raises(L.LayerError, match="weight_init"):
        L.Affine(nout=3)
    with pytest.raises(L.LayerError, match="nout"):
        L.Affine(nout=0, weight_init=0.1)
    layer = L.Affine(nout=2, weight_init=0.1, name="dense")
    with pytest.raises(L.LayerAxesError, match="dense.*no feature axes"):
        layer(ng.placeholder([N]))
    layer(ng.placeholder([F, N]))
    with pytest.raises(L.LayerAxesError, match=r"dense.*feature axes Axes\(F: 3\).*G: 2"):
        layer(ng.placeholder([G, N]))
    with pytest.raises(ng.AxgraphError):
        L.Affine(axes=N, weight_init=0.1)


# -- Dropout ------------------------------------------------------------------------------

def test_dropout_mask_statistics_and_inverted_scaling(transformer, rng):
    F, N = make_axes(F=100, N=50)
    x = ng.placeholder([F, N])
    drop = L.Dropout(keep=0.8, seed=3)
    y = drop(x)
    grad = ng.deriv(ng.sum(y, out_axes=()), x)
    compute = transformer.computation([y, grad], x)
    xv = rng.uniform(1, 2, (100, 50)).astype(np.float32)
    y1, g1 = compute(xv)
    kept = y1 != 0
    assert abs(kept.mean() - 0.8) < 0.02
    np.testing.assert_allclose(y1[kept], xv[kept] / 0.8, rtol=1e-6)
    np.testing.assert_allclose(g1, kept / 0.8, rtol=1e-6)  # the same mask in the gradient
    y2, _ = compute(xv)
    assert (y2 != 0).mean() > 0.75 and not np.array_equal(y1 != 0, y2 != 0)  # fresh masks


def test_dropout_inference_is_identity(transformer, rng):
    F, N = make_axes(F=4, N=3)
    x = ng.placeholder([F, N])
    drop = L.Dropout(keep=0.5)
    with L.inference_mode_on():
        assert L.is_inference_mode()
        y = drop(x)
    assert not L.is_inference_mode()
    assert y is x
    assert L.Dropout(keep=1.0)(x) is x
    with pytest.raises(L.LayerError, match="keep"):
        L.Dropout(keep=0.0)


def test_inference_mode_is_restored_after_an_error():
    with pytest.raises(RuntimeError):
        with L.Layer.inference_mode_on():
            raise RuntimeError("boom")
    assert not L.is_inference_mode()


# -- BatchNorm ----------------------------------------------------------------------------

def test_batchnorm_training_and_inference(transformer, rng):
    F, N = make_axes(F=3, N=8)
    x = ng.placeholder([N, F])
    gamma0, beta0 = rng.uniform(0.5, 2, 3), rng.normal(size=3)
    bn = L.BatchNorm(rho=0.9, eps=1e-3, init_gamma=gamma0, init_beta=beta0)
    y = bn(x)
    assert len(bn.updates) == 2 and len(bn.variables()) == 2
    with L.inference_mode_on():
        y_inf = bn(x)
    assert bn.variables() == [bn.gamma, bn.beta]
    train = transformer.computation([y] + bn.updates, x)
    infer = transformer.computation(y_inf, x)
    read_stats = transformer.computation([bn.gmean, bn.gvar])

    gmean, gvar = np.ones(3), np.ones(3)  # where v0.4 started both
    for _ in range(3):
        xv = rng.normal(2.0, 3.0, (8, 3)).astype(np.float32)
        yv = train(xv)[0]
        mean, var = xv.mean(axis=0), xv.var(axis=0)
        expected = (xv - mean) / np.sqrt(var + 1e-3) * gamma0 + beta0
        np.testing.assert_allclose(ordered(yv, y, [N, F]), expected, rtol=1e-4, atol=1e-5)
        gmean, gvar = 0.9 * gmean + 0.1 * mean, 0.9 * gvar + 0.1 * var
    stats = read_stats()
    np.testing.assert_allclose(stats[0], gmean, rtol=1e-5)
    np.testing.assert_allclose(stats[1], gvar, rtol=1e-5)

    xv = rng.normal(size=(8, 3)).astype(np.float32)
    expected = (xv - gmean) / np.sqrt(gvar + 1e-3) * gamma0 + beta0
    np.testing.assert_allclose(ordered(infer(xv), y_inf, [N, F]), expected, rtol=1e-4, atol=1e-5)
    # Neither inference nor a training value without the updates moves the averages.
    transformer.computation(y, x)(xv)
    np.testing.assert_allclose(read_stats()[0], gmean, rtol=1e-5)


def test_batchnorm_takes_statistics_over_batch_and_time(transformer, rng):
    F, REC, N = make_axes(F=2, REC=3, N=4)
    x = ng.placeholder([F, REC, N])
    y = L.BatchNorm()(x)
    xv = rng.normal(size=(2, 3, 4)).astype(np.float32)
    mean = xv.mean(axis=(1, 2), keepdims=True)
    var = xv.var(axis=(1, 2), keepdims=True)
    got = ordered(evaluate(transformer, y, {x: xv}), y, [F, REC, N])
    np.testing.assert_allclose(got, (xv - mean) / np.sqrt(var + 1e-3), rtol=1e-4, atol=1e-5)
    with pytest.raises(L.LayerAxesError, match="no batch axis"):
        L.BatchNorm()(ng.placeholder([F]))


def test_affine_with_batch_norm_drops_the_bias_and_exposes_updates(transformer, rng):
    F, N = make_axes(F=3, N=6)
    x = ng.placeholder([F, N])
    layer = L.Affine(nout=2, weight_init=uniform_init(rng), bias_init=0.0, batch_norm=True,
                     activation="relu")
    y = layer(x)
    assert layer.b is None and len(layer.variables()) == 3 and len(layer.updates) == 2
    xv = rng.normal(size=(3, 6)).astype(np.float32)
    yv, wv = evaluate(transformer, [y, layer.W], {x: xv})
    z = wv @ xv
    normalized = (z - z.mean(1, keepdims=True)) / np.sqrt(z.var(1, keepdims=True) + 1e-3)
    expected = np.maximum(normalized, 0)
    np.testing.assert_allclose(yv, expected, rtol=1e-4, atol=1e-5)


# -- LookupTable --------------------------------------------------------------------------

def test_lookup_table_rows(transformer, rng):
    REC, N = make_axes(REC=3, N=2)
    words = ng.placeholder([REC, N], dtype=np.int32)
    table = L.LookupTable(vocab_size=7, embed_dim=4, init=uniform_init(rng), name="emb")
    y = table(words)
    assert y.axes == ng.make_axes([table.embed_axis, REC, N])
    assert table.W.axes == ng.make_axes([table.vocab_axis, table.embed_axis])
    idx = np.array([[0, 6], [3, 3], [5, 1]], dtype=np.int32)
    yv, wv = evaluate(transformer, [y, table.W], {words: idx})
    np.testing.assert_allclose(yv, np.moveaxis(wv[idx], -1, 0), rtol=1e-6)
    with pytest.raises(ng.ExecutionError, match="must lie in"):
        evaluate(transformer, y, {words: idx + 7})
    with pytest.raises(L.LayerAxesError, match="integer indices"):
        table(ng.placeholder([N]))


def test_lookup_table_pad_index_is_zero_and_gets_no_gradient(transformer, rng):
    (N,) = make_axes(N=5)
    words = ng.placeholder([N], dtype=np.int32)
    table = L.LookupTable(6, 3, init=uniform_init(rng), pad_idx=2)
    y = table(words)
    grad = ng.deriv(ng.sum(y, out_axes=()), table.W)
    idx = np.array([2, 0, 2, 5, 0], dtype=np.int32)
    yv, wv, gv = evaluate(transformer, [y, table.W, grad], {words: idx})
    np.testing.assert_array_equal(wv[2], 0)
    np.testing.assert_array_equal(yv[:, idx == 2], 0)
    np.testing.assert_allclose(yv, wv[idx].T, rtol=1e-6)
    np.testing.assert_allclose(gv[:, 0], [2, 0, 0, 0, 0, 1])  # uses of each row; pad: none


# -- convolution and pooling --------------------------------------------------------------

def image_axes(C=2, H=5, W=4, N=2):
    return (ng.make_axis(C, name="C", roles=[ar.Channel]),
            ng.make_axis(H, name="H", roles=[ar.Height]),
            ng.make_axis(W, name="W", roles=[ar.Width]), ng.make_axis(N, name="N"))


def np_conv2d(x, w, pad, stride):
    """x (C, H, W, N), w (C, R, S, K) -> (K, P, Q, N), one output position at a time."""
    C, H, W, N = x.shape
    _, R, S, K = w.shape
    xp = np.zeros((C, H + 2 * pad, W + 2 * pad, N))
    xp[:, pad:pad + H, pad:pad + W] = x
    P, Q = (H + 2 * pad - R) // stride + 1, (W + 2 * pad - S) // stride + 1
    y = np.zeros((K, P, Q, N))
    for k in range(K):
        for p in range(P):
            for q in range(Q):
                patch = xp[:, p * stride:p * stride + R, q * stride:q * stride + S, :]
                y[k, p, q] = np.einsum("crsn,crs->n", patch, w[:, :, :, k])
    return y


def test_convolution_layer_matches_numpy(transformer, rng):
    C, H, W, N = image_axes()
    x = ng.placeholder([N, W, C, H], dtype=np.float64)  # any order: axes are found by role
    layer = L.Convolution((3, 2, 4), filter_init=uniform_init(rng), padding=1, strides=(2, 1),
                          bias_init=uniform_init(rng), activation="tanh", name="conv")
    y = layer(x)
    K = layer.out_channel
    assert K.name == "conv_K" and layer.W.axes[0] is K and layer.W.axes[1] is C - 1
    assert [a.name for a in layer.W.axes] == ["conv_K", "C-1", "conv_R-1", "conv_S-1"]
    xv = rng.normal(size=(2, 5, 4, 2))  # (C, H, W, N)
    yv, wv, bv = evaluate(transformer, [y, layer.W, layer.b], {x: np.transpose(xv, (3, 2, 0, 1))})
    P, Q = y.axes[1], y.axes[2]
    assert (P.length, Q.length) == (3, 5)
    full = np_conv2d(xv, np.transpose(wv, (1, 2, 3, 0)), pad=1, stride=1)
    expected = np.tanh(full[:, ::2] + bv[:, None, None, None])
    np.testing.assert_allclose(ordered(yv, y, [K, P, Q, N]), expected, rtol=1e-10, atol=1e-12)


def test_feature_map_layers_keep_output_axes_across_calls(transformer, rng):
    C, H, W, N = image_axes(C=1, H=4, W=4, N=3)
    x = ng.placeholder([C, H, W, N])
    model = L.Sequential([L.Convolution({"R": 3, "S": 3, "K": 2}, filter_init=uniform_init(rng),
                                        padding=1, batch_norm=True),
                          L.Pooling(2, pool_type="max"),
                          L.Affine(nout=3, weight_init=uniform_init(rng))])
    train = model(x)
    with L.inference_mode_on():
        infer = model(x)  # the Affine accepts it: the pooled axes are the same objects
    assert train.axes == infer.axes and len(model.updates) == 2
    assert len(model.variables()) == 4  # filter, gamma, beta, affine weight
    assert model.layers[0].batch_norm.in_axes == ng.make_axes([model.layers[0].out_channel])
    xv = rng.normal(size=(1, 4, 4, 3)).astype(np.float32)
    tv, iv = evaluate(transformer, [train, infer], {x: xv})
    assert tv.shape == iv.shape == (3, 3)


@pytest.mark.parametrize("pool_type, reduce", [("max", np.max), ("avg", np.mean)])
def test_pooling_layer_matches_numpy(transformer, rng, pool_type, reduce):
    C, H, W, N = image_axes(C=2, H=4, W=6, N=2)
    x = ng.placeholder([C, H, W, N])
    y = L.Pooling((2, 3), pool_type=pool_type)(x)
    xv = rng.normal(size=(2, 4, 6, 2)).astype(np.float32)
    expected = reduce(xv.reshape(2, 2, 2, 2, 3, 2), axis=(2, 4))
    P, Q = y.axes[1], y.axes[2]
    assert y.axes[0] is C and y.axes[-1] is N and (P.length, Q.length) == (2, 2)
    np.testing.assert_allclose(evaluate(transformer, y, {x: xv}), expected, rtol=1e-6)


def test_feature_map_layer_errors():
    C, H, W, N = image_axes()
    with pytest.raises(L.LayerError, match="filter_shape"):
        L.Convolution((3, 3, 3, 3), filter_init=0.1)(ng.placeholder([C, H, W, N]))
    with pytest.raises(L.LayerError, match="filter_shape"):   # a depth the input lacks
        L.Convolution({"T": 2, "R": 3, "S": 3, "K": 2}, 0.1)(ng.placeholder([C, H, W, N]))
    with pytest.raises(L.LayerAxesError, match="Convolution .*cannot tell"):
        L.Convolution((3, 3, 2), filter_init=0.1)(ng.placeholder([H, W, N]))
    with pytest.raises(L.LayerError, match="pool_type"):
        L.Pooling(2, pool_type="median")


# -- recurrent layers ---------------------------------------------------------------------

def rnn_inputs(rng, order=("F", "REC", "N"), F=2, T=3, B=2, dtype=np.float64):
    axes = dict(zip(("F", "REC", "N"), make_axes(F=F, REC=T, N=B)))
    x = ng.placeholder([axes[name] for name in order], dtype=dtype)
    xv = rng.normal(size=(F, T, B))  # NumPy reference layout (F, T, N)
    fed = np.transpose(xv, [("F", "REC", "N").index(name) for name in order])
    return axes, x, xv, fed


def gate_weights(transformer, layer, gates, F):
    """{gate: (W (H, F), U (H, H), b (H,))} read back in a fixed order."""
    H = layer.hidden_axis
    ops = [op for g in gates for op in (layer.W[g], layer.U[g], layer.b[g])]
    values = transformer.computation(ops)()
    found = {}
    for n, g in enumerate(gates):
        w, u, b = values[3 * n:3 * n + 3]
        u_in = layer.U[g].axes[1]
        found[g] = (ordered(w, layer.W[g], [H, F - 1]), ordered(u, layer.U[g], [H, u_in]), b)
    return found


def np_rnn(xv, p, reverse=False):
    w, u, b = p[""]
    h, out = np.zeros((w.shape[0], xv.shape[2])), {}
    for t in (reversed(range(xv.shape[1])) if reverse else range(xv.shape[1])):
        h = np.tanh(w @ xv[:, t] + u @ h + b[:, None])
        out[t] = h
    return np.stack([out[t] for t in range(xv.shape[1])], axis=1), h


def np_lstm(xv, p):
    def gate(g, x_t, h):
        w, u, b = p[g]
        return w @ x_t + u @ h + b[:, None]
    hidden = p["i"][0].shape[0]
    h = c = np.zeros((hidden, xv.shape[2]))
    outs = []
    for t in range(xv.shape[1]):
        i, f, o = (sigmoid(gate(g, xv[:, t], h)) for g in "ifo")
        g = np.tanh(gate("g", xv[:, t], h))
        c = f * c + i * g
        h = o * np.tanh(c)
        outs.append(h)
    return np.stack(outs, axis=1), h


def np_gru(xv, p):
    hidden = p["r"][0].shape[0]
    h, outs = np.zeros((hidden, xv.shape[2])), []
    for t in range(xv.shape[1]):
        x_t = xv[:, t]
        (wr, ur, br), (wz, uz, bz), (wh, uh, bh) = p["r"], p["z"], p["h"]
        r = sigmoid(wr @ x_t + ur @ h + br[:, None])
        z = sigmoid(wz @ x_t + uz @ h + bz[:, None])
        candidate = np.tanh(wh @ x_t + uh @ (r * h) + bh[:, None])
        h = z * h + (1 - z) * candidate
        outs.append(h)
    return np.stack(outs, axis=1), h


RECURRENT_CASES = [(L.Recurrent, ("",), np_rnn), (L.LSTM, tuple("ifog"), np_lstm),
                   (L.GRU, tuple("rzh"), np_gru)]


@pytest.mark.parametrize("cell, gates, reference", RECURRENT_CASES,
                         ids=[c.__name__ for c, _, _ in RECURRENT_CASES])
def test_recurrent_layers_match_hand_unrolled_numpy(transformer, rng, cell, gates, reference):
    axes, x, xv, fed = rnn_inputs(rng)
    layer = cell(3, init=uniform_init(rng), bias_init=uniform_init(rng), name="rnn")
    seq = layer(x)
    H, REC, N = layer.hidden_axis, axes["REC"], axes["N"]
    assert H.name == "rnn_hidden" and seq.axes == ng.make_axes([H, REC, N])
    assert len(layer.variables()) == 3 * len(gates)
    got = evaluate(transformer, seq, {x: fed})
    params = gate_weights(transformer, layer, gates, axes["F"])
    expected_seq, expected_last = reference(xv, params)
    np.testing.assert_allclose(got, expected_seq, rtol=1e-10, atol=1e-12)
    # return_sequence=False: the final state (a second call reuses the weights).
    layer.return_sequence = False
    final = layer(x)
    assert final.axes == ng.make_axes([H, N])
    np.testing.assert_allclose(evaluate(transformer, final, {x: fed}), expected_last,
                               rtol=1e-10, atol=1e-12)


def test_recurrent_with_any_axis_order_and_reuse(transformer, rng):
    axes, x, xv, _ = rnn_inputs(rng)
    x2 = ng.placeholder([axes["N"], axes["REC"], axes["F"]], dtype=np.float64)
    layer = L.Recurrent(4, init=uniform_init(rng))
    y1 = layer(x)
    variables = layer.variables()
    y2 = layer(x2)
    assert layer.variables() == variables and y2.variables() == variables
    assert y2.axes == ng.make_axes([layer.hidden_axis, axes["N"], axes["REC"]])
    v1, v2 = evaluate(transformer, [y1, y2], {x: xv, x2: np.transpose(xv, (2, 1, 0))})
    np.testing.assert_allclose(ordered(v2, y2, y1.axes), v1, rtol=1e-12)


def test_backward_recurrent_and_birnn(transformer, rng):
    axes, x, xv, fed = rnn_inputs(rng, order=("REC", "N", "F"))
    REC, N = axes["REC"], axes["N"]
    bi = L.BiRNN(3, init=uniform_init(rng), bias_init=uniform_init(rng), name="bi")
    fwd, bwd = bi(x)
    bi.concat_out = True  # later calls reuse the weights: the combinations of the same pair
    cat = bi(x)
    bi.concat_out, bi.sum_out = False, True
    total = bi(x)
    assert len(bi.variables()) == 6
    assert fwd.axes == ng.make_axes([bi.fwd_rnn.hidden_axis, REC, N])
    assert cat.axes[0].name == "bi_hidden" and cat.axes[0].length == 6
    values = evaluate(transformer, [fwd, bwd, cat, total], {x: fed})
    p_fwd = gate_weights(transformer, bi.fwd_rnn, ("",), axes["F"])
    p_bwd = gate_weights(transformer, bi.bwd_rnn, ("",), axes["F"])
    expected_fwd, _ = np_rnn(xv, p_fwd)
    expected_bwd, _ = np_rnn(xv, p_bwd, reverse=True)
    np.testing.assert_allclose(values[0], expected_fwd, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(values[1], expected_bwd, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ordered(values[2], cat, [cat.axes[0], REC, N]),
                               np.concatenate([expected_fwd, expected_bwd]), rtol=1e-10)
    np.testing.assert_allclose(ordered(values[3], total, [total.axes[0], REC, N]),
                               expected_fwd + expected_bwd, rtol=1e-10)


def test_recurrent_errors(rng):
    F, N, REC = make_axes(F=2, N=3, REC=None)
    layer = L.LSTM(3, init=0.1, name="lstm")
    with pytest.raises(L.LayerAxesError, match="lstm.*no recurrent"):
        layer(ng.placeholder([F, N]))
    with pytest.raises(ng.AxisLengthError, match="REC.length"):
        layer(ng.placeholder([F, REC, N]))
    with pytest.raises(L.LayerError, match="sum_out and concat_out"):
        L.BiRNN(2, init=0.1, sum_out=True, concat_out=True)


# -- Sequential ---------------------------------------------------------------------------

def test_sequential_composes_layers_and_callables(transformer, rng):
    F, N = make_axes(F=4, N=5)
    x = ng.placeholder([F, N])
    first = L.Affine(nout=3, weight_init=uniform_init(rng), bias_init=0.5, activation="relu")
    second = L.Affine(nout=2, weight_init=uniform_init(rng), activation=act.Softmax())
    bn = L.BatchNorm()
    model = L.Sequential([first, lambda h: h * 2.0, L.Dropout(keep=0.5), bn, second])
    with L.inference_mode_on():
        y = model(x)
    assert model.variables() == first.variables() + bn.variables() + second.variables()
    assert model.updates == []
    xv = rng.normal(size=(4, 5)).astype(np.float32)
    yv, w1, w2 = evaluate(transformer, [y, first.W, second.W], {x: xv})
    h = (2.0 * np.maximum(w1 @ xv + 0.5, 0) - 1.0) / np.sqrt(1 + 1e-3)  # BN stats start at 1
    logits = w2 @ h
    expected = np.exp(logits) / np.exp(logits).sum(axis=0)
    np.testing.assert_allclose(yv, expected, rtol=1e-4, atol=1e-6)
    model(x)  # a training call builds the BatchNorm updates
    assert len(model.updates) == 2


# -- gradients ----------------------------------------------------------------------------

GRADIENT_CASES = {
    "affine": lambda rng: L.Affine(nout=3, weight_init=uniform_init(rng),
                                   bias_init=uniform_init(rng), activation=act.Tanh()),
    "rnn": lambda rng: L.Recurrent(2, init=uniform_init(rng, 0.8), bias_init=uniform_init(rng)),
    "lstm": lambda rng: L.LSTM(2, init=uniform_init(rng, 0.8), bias_init=uniform_init(rng)),
    "gru": lambda rng: L.GRU(2, init=uniform_init(rng, 0.8), bias_init=uniform_init(rng)),
    "batchnorm": lambda rng: L.BatchNorm(init_gamma=uniform_init(rng), init_beta=0.3),
}


@pytest.mark.parametrize("kind", sorted(GRADIENT_CASES))
def test_layer_gradients_with_respect_to_input(backend, rng, kind):
    _, x, xv, _ = rnn_inputs(rng, F=2, T=3, B=2)
    y = GRADIENT_CASES[kind](rng)(x)
    with ExecutorFactory(backend):
        check_derivative(y, x, 1e-6, xv, rtol=1e-5, atol=1e-8)


def test_convolution_gradient_with_respect_to_input(backend, rng):
    C, H, W, N = image_axes(C=2, H=4, W=3, N=1)
    x = ng.placeholder([C, H, W, N], dtype=np.float64)
    y = L.Convolution((2, 2, 2), filter_init=uniform_init(rng), activation="tanh")(x)
    with ExecutorFactory(backend):
        check_derivative(y, x, 1e-6, rng.normal(size=(2, 4, 3, 1)), rtol=1e-5, atol=1e-8)
