"""MultiHeadAttention against attention written by hand in NumPy and against PyTorch.

The NumPy reference reads the weights back from the transformer, puts them in a known
axis order and computes each head with einsum in float64, the way the paper writes it;
nothing here reuses layer code. The key/value cache is checked against the full causal
forward pass: generating token by token must give the same outputs.
"""
import numpy as np
import pytest

import axgraph as ng
from axgraph.frontends.neon import (KeyValueCache, LayerNorm, MultiHeadAttention, Sequential,
                                    inference_mode_on)
from axgraph.frontends.neon.layer import LayerAxesError, LayerError
from axgraph.testing import ExecutorFactory, check_derivative


def make_axes(**lengths):
    return [ng.make_axis(length=n, name=name) for name, n in lengths.items()]


def uniform_init(rng, scale=0.5):
    return lambda axes: rng.uniform(-scale, scale, axes.lengths)


def ordered(value, op, axes):
    return np.transpose(value, [op.axes.index(a) for a in axes])


def read_weights(transformer, layer):
    """Wq, Wk, Wv as (H, E, features), Wo as (features, H, E), biases or zeros."""
    names = ["Wq", "Wk", "Wv", "Wo"] + [b for b in ("bq", "bk", "bv", "bo")
                                        if b in layer._variables]
    ops = [layer._variables[n] for n in names]
    values = dict(zip(names, transformer.computation(ops)()))
    H, E = layer.head_axis, layer.head_size_axis
    weights = {n: ordered(values[n], layer._variables[n],
                          [H, E, layer._variables[n].axes[2]]) for n in ("Wq", "Wk", "Wv")}
    weights["Wo"] = ordered(values["Wo"], layer.Wo, [layer.Wo.axes[0], H - 1, E - 1])
    for b in ("bq", "bk", "bv"):
        weights[b] = (ordered(values[b], layer._variables[b], [H, E]) if b in values
                      else np.zeros((H.length, E.length)))
    weights["bo"] = values.get("bo", np.zeros(layer.Wo.axes[0].length))
    return weights


def attention_reference(w, x, context=None, causal=False):
    """Multi-head attention of x (D, T, N) over context (Dc, S, N), by the formulas."""
    context = x if context is None else context
    q = np.einsum("hed,dtn->hetn", w["Wq"], x) + w["bq"][:, :, None, None]
    k = np.einsum("hed,dsn->hesn", w["Wk"], context) + w["bk"][:, :, None, None]
    v = np.einsum("hed,dsn->hesn", w["Wv"], context) + w["bv"][:, :, None, None]
    scores = np.einsum("hetn,hesn->htsn", q, k) / np.sqrt(q.shape[1])
    if causal:
        t, s = np.arange(x.shape[1])[:, None], np.arange(context.shape[1])[None, :]
        scores = np.where((s <= t)[None, :, :, None], scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=2, keepdims=True))
    weights /= weights.sum(axis=2, keepdims=True)
    attended = np.einsum("htsn,hesn->hetn", weights, v)
    return np.einsum("dhe,hetn->dtn", w["Wo"], attended) + w["bo"][:, None, None]


def self_attention(rng, causal, bias=True, D=6, T=4, N=2, heads=2, head_size=3):
    D, T, N = make_axes(D=D, T=T, N=N)
    layer = MultiHeadAttention(D, heads, head_size, weight_init=uniform_init(rng),
                               bias_init=uniform_init(rng) if bias else None, causal=causal,
                               name="attn")
    x = ng.placeholder([D, T, N], dtype=np.float64)
    return layer, x, (D, T, N)


# -- values ---------------------------------------------------------------------------------

@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_self_attention_matches_numpy(transformer, rng, causal):
    layer, x, (D, T, N) = self_attention(rng, causal)
    y = layer(x)
    assert y.axes == x.axes
    H, E = layer.head_axis, layer.head_size_axis
    assert (H.length, E.length) == (2, 3) and H.name == "attn_heads"
    assert layer.Wq.axes == ng.make_axes([H, E, D - 1])
    assert layer.Wo.axes == ng.make_axes([D, H - 1, E - 1])
    assert len(layer.variables()) == 8
    xv = rng.normal(size=(6, 4, 2))
    got = transformer.computation(y, x)(xv)
    expected = attention_reference(read_weights(transformer, layer), xv, causal=causal)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_axes_in_any_order_and_inference_share_variables_and_key_axis(transformer, rng):
    layer, x, (D, T, N) = self_attention(rng, causal=True, bias=False)
    y = layer(x)
    variables = layer.variables()
    x2 = ng.placeholder([N, T, D], dtype=np.float64)
    with inference_mode_on():
        y2 = layer(x2)
    assert layer.variables() == variables and len(variables) == 4
    assert list(layer._key_axes.values()) == [layer._key_axis(T)]      # one key axis for T
    xv = rng.normal(size=(6, 4, 2))
    v1, v2 = transformer.computation([y, y2], x, x2)(xv, xv.transpose(2, 1, 0))
    np.testing.assert_allclose(ordered(v2, y2, [D, T, N]), v1, rtol=1e-12, atol=1e-14)


def test_cross_attention_over_a_context_with_its_own_axes(transformer, rng):
    D, C, T, S, N = make_axes(D=4, C=5, T=3, S=6, N=2)
    layer = MultiHeadAttention(D, num_heads=3, head_size=2, weight_init=uniform_init(rng),
                               bias_init=uniform_init(rng), context_axes=C, name="cross")
    x = ng.placeholder([D, T, N], dtype=np.float64)
    context = ng.placeholder([S, C, N], dtype=np.float64)
    y = layer(x, context=context)
    assert y.axes == x.axes and layer.Wk.axes == ng.make_axes(
        [layer.head_axis, layer.head_size_axis, C - 1])
    xv, cv = rng.normal(size=(4, 3, 2)), rng.normal(size=(6, 5, 2))
    got = transformer.computation(y, x, context)(xv, cv)
    expected = attention_reference(read_weights(transformer, layer), xv,
                                   context=cv.transpose(1, 0, 2))
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_head_axes_given_as_axes_and_no_batch_axis(transformer, rng):
    D, T, H, E = make_axes(D=4, T=3, heads=2, E=2)
    layer = MultiHeadAttention(D, H, E, weight_init=uniform_init(rng))
    x = ng.placeholder([T, D], dtype=np.float64)
    y = layer(x)
    assert layer.head_axis is H and layer.head_size_axis is E
    xv = rng.normal(size=(3, 4))
    got = ordered(transformer.computation(y, x)(xv), y, [D, T])
    expected = attention_reference(read_weights(transformer, layer), xv.T[:, :, None])
    np.testing.assert_allclose(got, expected[:, :, 0], rtol=1e-10, atol=1e-12)


def test_causal_attention_never_looks_at_later_tokens(transformer, rng):
    layer, x, _ = self_attention(rng, causal=True, T=5)
    run = transformer.computation(layer(x), x)
    xv = rng.normal(size=(6, 5, 2))
    changed = xv.copy()
    changed[:, 3] += 10.0 * rng.normal(size=(6, 2))        # a later token, changed a lot
    before, after = run(xv), run(changed)
    np.testing.assert_allclose(after[:, :3], before[:, :3], rtol=1e-12, atol=1e-14)
    assert np.abs(after[:, 3:] - before[:, 3:]).min() > 1e-6    # tokens 3 on see it


def test_in_a_sequential_with_layer_norm(transformer, rng):
    layer, x, (D, T, N) = self_attention(rng, causal=True, bias=False)
    model = Sequential([LayerNorm(D, init_gain=1.0, init_bias=0.0), layer])
    xv = rng.normal(size=(6, 4, 2))
    got = transformer.computation(model(x), x)(xv)
    normed = (xv - xv.mean(0)) / np.sqrt(xv.var(0) + 1e-5)
    expected = attention_reference(read_weights(transformer, layer), normed, causal=True)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-11)


# -- gradients ------------------------------------------------------------------------------

def test_gradient_with_respect_to_the_input_matches_finite_differences(backend, rng):
    layer, x, _ = self_attention(rng, causal=True, D=3, T=3, N=1, heads=2, head_size=2)
    y = layer(x)
    with ExecutorFactory(backend):
        check_derivative(y, x, 1e-6, rng.normal(size=(3, 3, 1)), rtol=1e-5, atol=1e-8)


def test_weight_gradients_match_finite_differences_of_the_numpy_reference(transformer, rng):
    layer, x, (D, T, N) = self_attention(rng, causal=True, D=3, T=3, N=2, heads=2, head_size=2)
    y = layer(x)
    r = rng.normal(size=(3, 3, 2))
    loss = ng.sum(y * ng.constant(r, axes=[D, T, N], dtype=np.float64), out_axes=())
    names = ["Wq", "Wk", "Wv", "Wo", "bq", "bk", "bv", "bo"]
    grads = [ng.deriv(loss, layer._variables[n]) for n in names]
    xv = rng.normal(size=(3, 3, 2))
    got = transformer.computation(grads, x)(xv)
    weights = read_weights(transformer, layer)
    order = {"Wq": [layer.head_axis, layer.head_size_axis, D - 1],
             "Wk": [layer.head_axis, layer.head_size_axis, D - 1],
             "Wv": [layer.head_axis, layer.head_size_axis, D - 1],
             "Wo": [D, layer.head_axis - 1, layer.head_size_axis - 1],
             "bq": [layer.head_axis, layer.head_size_axis],
             "bk": [layer.head_axis, layer.head_size_axis],
             "bv": [layer.head_axis, layer.head_size_axis], "bo": [D]}
    step = 1e-6
    for name, grad, value in zip(names, grads, got):
        numeric = np.zeros_like(weights[name])
        for index in np.ndindex(numeric.shape):
            moved = []
            for sign in (1.0, -1.0):
                shifted = {k: v.copy() for k, v in weights.items()}
                shifted[name][index] += sign * step
                moved.append((attention_reference(shifted, xv, causal=True) * r).sum())
            numeric[index] = (moved[0] - moved[1]) / (2 * step)
        np.testing.assert_allclose(ordered(value, grad, order[name]), numeric, rtol=1e-6,
                                   atol=1e-8, err_msg=name)


# -- against PyTorch -------------------------------------------------------------------------

@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_values_and_gradients_match_pytorch_scaled_dot_product_attention(transformer, rng,
                                                                         causal):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    layer, x, (D, T, N) = self_attention(rng, causal, D=8, T=5, N=3, heads=2, head_size=4)
    y = layer(x)
    r = rng.normal(size=(8, 5, 3))
    loss = ng.sum(y * ng.constant(r, axes=[D, T, N], dtype=np.float64), out_axes=())
    xv = rng.normal(size=(8, 5, 3))
    names = ["Wq", "Wk", "Wv", "Wo"]
    got = transformer.computation([y, ng.deriv(loss, x)]
                                  + [ng.deriv(loss, layer._variables[n]) for n in names], x)(xv)
    w = read_weights(transformer, layer)

    params = {n: torch.tensor(w[n], requires_grad=True) for n in names}
    xt = torch.tensor(xv.transpose(2, 1, 0), requires_grad=True)                # (N, T, D)

    def heads(projection, bias):     # (N, T, D) -> (N, H, T, E)
        out = torch.einsum("ntd,hed->nhte", xt, projection)
        return out + torch.tensor(bias)[None, :, None, :]

    q, k, v = (heads(params[n], w["b" + n[1]]) for n in ("Wq", "Wk", "Wv"))
    attended = F.scaled_dot_product_attention(q, k, v, is_causal=causal)       # (N, H, T, E)
    yt = torch.einsum("nhte,dhe->ntd", attended, params["Wo"]) + torch.tensor(w["bo"])
    (yt * torch.tensor(r.transpose(2, 1, 0))).sum().backward()
    np.testing.assert_allclose(got[0], yt.detach().numpy().transpose(2, 1, 0), rtol=1e-9,
                               atol=1e-11)
    np.testing.assert_allclose(got[1], xt.grad.numpy().transpose(2, 1, 0), rtol=1e-9,
                               atol=1e-11)
    H, E = layer.head_axis, layer.head_size_axis
    axes_of = {"Wq": [H, E, D - 1], "Wk": [H, E, D - 1], "Wv": [H, E, D - 1],
               "Wo": [D, H - 1, E - 1]}
    for name, value in zip(names, got[2:]):
        grad_op = ng.deriv(loss, layer._variables[name])
        np.testing.assert_allclose(ordered(value, grad_op, axes_of[name]),
                                   params[name].grad.numpy(), rtol=1e-9, atol=1e-11,
                                   err_msg=name)


# -- the key/value cache ---------------------------------------------------------------------

def test_generating_token_by_token_equals_the_full_causal_pass(transformer, rng):
    layer, x, (D, T, N) = self_attention(rng, causal=True, T=6)
    full = layer(x)
    cache = layer.new_cache(T.length)
    assert isinstance(cache, KeyValueCache) and cache.capacity == 6
    Prompt, Step = make_axes(Prompt=2, Step=1)
    prompt = ng.placeholder([D, Prompt, N], dtype=np.float64)
    token = ng.placeholder([N, D, Step], dtype=np.float64)    # any axis order
    y_prompt = layer(prompt, cache=cache)
    prompt_updates = cache.updates
    y_token = layer(token, cache=cache)
    token_updates = cache.updates
    assert len(prompt_updates) == len(token_updates) == 3
    assert cache.keys.axes == ng.make_axes([layer.head_axis, layer.head_size_axis,
                                            cache.position_axis, N])

    xv = rng.normal(size=(6, 6, 2))
    whole = transformer.computation(full, x)(xv)
    run_prompt = transformer.computation([y_prompt] + prompt_updates, prompt)
    run_token = transformer.computation([y_token] + token_updates, token)
    read_length = transformer.computation(cache.length)
    reset = transformer.computation(cache.reset())
    for _ in range(2):                     # a second sequence after reset gives the same
        outputs = [run_prompt(xv[:, :2])[0]]
        for t in range(2, 6):
            step = run_token(xv[:, t:t + 1].transpose(2, 0, 1))[0]
            outputs.append(ordered(step, y_token, [D, Step, N]))
        assert int(read_length()) == 6
        np.testing.assert_allclose(np.concatenate(outputs, axis=1), whole, rtol=1e-10,
                                   atol=1e-12)
        reset()
        assert int(read_length()) == 0


def test_a_cached_step_costs_one_query_row_not_the_whole_square(rng):
    layer, x, (D, T, N) = self_attention(rng, causal=True, T=64)
    cache = layer.new_cache(64)
    Step = ng.make_axis(1, name="Step")
    step = layer(ng.placeholder([D, Step, N], dtype=np.float64), cache=cache)
    sizes = [int(np.prod(op.axes.lengths)) for op in ng.Op.ordered_ops([step])]
    # the largest tensor is a cache (H, E, 64, N) or the scores (H, 1, N, 64): O(T), not T**2
    assert max(sizes) == 2 * 3 * 64 * 2


def test_a_non_causal_cache_attends_over_everything_written(transformer, rng):
    layer, x, (D, T, N) = self_attention(rng, causal=False, T=4)
    full = layer(x)
    cache = layer.new_cache(8)                # more room than used: the rest stays hidden
    y = layer(x, cache=cache)
    xv = rng.normal(size=(6, 4, 2))
    whole = transformer.computation(full, x)(xv)
    got = transformer.computation([y] + cache.updates, x)(xv)[0]
    np.testing.assert_allclose(got, whole, rtol=1e-10, atol=1e-12)


def test_a_step_past_the_capacity_fails_at_run_time(transformer, rng):
    layer, x, (D, T, N) = self_attention(rng, causal=True)
    cache = layer.new_cache(2)
    Step = ng.make_axis(1, name="Step")
    token = ng.placeholder([D, Step, N], dtype=np.float64)
    run = transformer.computation([layer(token, cache=cache)] + cache.updates, token)
    xv = rng.normal(size=(6, 1, 2))
    run(xv)
    run(xv)
    with pytest.raises(ng.ExecutionError, match=r"\[0, 2\)"):
        run(xv)


# -- errors ---------------------------------------------------------------------------------

def _raises_here(error_class, pattern, call):
    with pytest.raises(error_class, match=pattern) as caught:
        call()
    assert caught.value.location[0] == __file__
    return caught.value


def test_inputs_with_axes_that_do_not_fit_are_refused(rng):
    D, E, T, S, N = make_axes(D=4, E=4, T=3, S=3, N=2)
    layer = MultiHeadAttention(D, 2, 2, weight_init=uniform_init(rng), name="attn_err")
    _raises_here(LayerAxesError, r"MultiHeadAttention attn_err: projects feature axes .*D.*"
                                 r"lacks .*D",
                 lambda: layer(ng.placeholder([E, T, N])))
    _raises_here(LayerAxesError, r"attn_err: needs one sequence axis .*found .*T.*S",
                 lambda: layer(ng.placeholder([D, T, S, N])))
    _raises_here(LayerAxesError, r"attn_err: needs one sequence axis .*found none",
                 lambda: layer(ng.placeholder([D, N])))
    M = ng.make_axis(2, name="M", batch=True)
    _raises_here(LayerAxesError, r"attn_err: the context .* has batch axes other than",
                 lambda: layer(ng.placeholder([D, T, N]), context=ng.placeholder([D, S, M])))
    _raises_here(LayerAxesError, r"attn_err: the input .* already has the layer's head axes",
                 lambda: layer(ng.placeholder([D, layer.head_axis, N])))


def test_misused_caches_and_bad_settings_are_refused(rng):
    D, T, N = make_axes(D=4, T=3, N=2)
    layer = MultiHeadAttention(D, 2, 2, weight_init=uniform_init(rng), name="attn_a")
    other = MultiHeadAttention(D, 2, 2, weight_init=uniform_init(rng), name="attn_b")
    x = ng.placeholder([D, T, N])
    _raises_here(LayerError, r"attn_a: was given <KeyValueCache of attn_b",
                 lambda: layer(x, cache=other.new_cache(4)))
    _raises_here(LayerError, r"attn_a: caches the keys of self-attention",
                 lambda: layer(x, context=x, cache=layer.new_cache(4)))
    cache = layer.new_cache(4)
    layer(x, cache=cache)
    M = ng.make_axis(2, name="M", batch=True)
    _raises_here(LayerAxesError, r"attn_a: its cache holds batch axes .*N.* has .*M",
                 lambda: layer(ng.placeholder([D, T, M]), cache=cache))
    Long = ng.make_axis(5, name="Long")
    _raises_here(LayerAxesError, r"attn_a: .* brings 5 new tokens .*more than <KeyValueCache",
                 lambda: layer(ng.placeholder([D, Long, N]), cache=layer.new_cache(4)))
    _raises_here(LayerError, r"needs weight_init=",
                 lambda: MultiHeadAttention(D, 2, 2))
    _raises_here(LayerError, r"num_heads must be a positive int or an Axis, not 0",
                 lambda: MultiHeadAttention(D, 0, 2, weight_init=1.0))
    _raises_here(LayerError, r"head_size must be a positive int or an Axis, not 2.5",
                 lambda: MultiHeadAttention(D, 2, 2.5, weight_init=1.0))
    _raises_here(LayerError, r"capacity must be a positive int",
                 lambda: layer.new_cache(-1))
    _raises_here(LayerError, r"needs feature axes",
                 lambda: MultiHeadAttention([], 2, 2, weight_init=1.0))
