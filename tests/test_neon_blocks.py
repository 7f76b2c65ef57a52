"""Layers of your own (add_variable, sub-layers), Residual blocks and Embedding.

Every value is checked against NumPy written here from the weights the transformer
holds; gradients against finite differences (inputs) or hand-derived sums (tables).
"""
import numpy as np
import pytest

import axgraph as ng
from axgraph.frontends.neon import GradientDescentMomentum
from axgraph.frontends.neon import layer as L
from axgraph.testing import ExecutorFactory, check_derivative


def normal_init(rng, scale=0.5):
    return lambda axes: rng.normal(0, scale, axes.lengths)


def evaluate(transformer, results, feeds):
    return transformer.computation(results, *feeds)(*feeds.values())


class Gate(L.Layer):
    """y = x * sigmoid(g): one learned gate per feature, made with add_variable."""

    def __init__(self, init, name=None):
        super().__init__(name)
        self.init = init

    def _build(self, x):
        self.g = self.add_variable("g", x.axes.feature_axes(), self.init, dtype=x.dtype)

    def _forward(self, x):
        return x * ng.sigmoid(self.g)


class TwoLayerBlock(L.Layer):
    """A block holding its parts in attributes: its variables are theirs."""

    def __init__(self, D, rng, name=None):
        super().__init__(name)
        self.up = L.Affine(normal_init(rng), nout=6, activation="tanh", name=f"{self.name}_up")
        self.down = [L.Affine(normal_init(rng), axes=[D], name=f"{self.name}_down")]
        self.norm = {"bn": L.BatchNorm(name=f"{self.name}_bn")}

    def _forward(self, x):
        return self.norm["bn"](self.down[0](self.up(x)))


# -- add_variable ---------------------------------------------------------------------------

def test_add_variable_registers_a_trained_variable(transformer, rng):
    F, N = ng.make_axis(3, name="F"), ng.make_axis(4, name="N")
    x = ng.placeholder([F, N], dtype=np.float64)
    gate = Gate(init=normal_init(rng), name="gate")
    y = gate(x)
    assert gate.variables() == [gate.g] and gate.g.name == "gate_g"
    assert gate.g.axes == ng.make_axes([F]) and gate.g.dtype == np.float64
    cost = ng.sum(y * y, out_axes=())
    optimizer = GradientDescentMomentum(0.1)
    step = transformer.computation([cost, gate.g, optimizer(cost)], x)
    xv = rng.normal(size=(3, 4))
    _, before, _ = step(xv)
    _, after, _ = step(xv)
    s = 1 / (1 + np.exp(-before))
    grad = (2 * (xv * s[:, None]) * xv).sum(axis=1) * s * (1 - s)   # d cost / d g
    np.testing.assert_allclose(after, before - 0.1 * grad, rtol=1e-10)


def test_add_variable_errors_name_the_layer():
    F = ng.make_axis(3, name="F")
    layer = Gate(init=0.0, name="gate")
    layer.add_variable("w", [F], 1.0)
    with pytest.raises(L.LayerError, match="gate: already has a variable w"):
        layer.add_variable("w", [F], 1.0)
    with pytest.raises(L.LayerError, match="gate: no initializer"):
        layer.add_variable("v", [F], None)
    with pytest.raises(ng.AxisLengthError, match="gate.*lengths of axes U"):
        layer.add_variable("u", [ng.make_axis(name="U")], 1.0)
    persistent = layer.add_variable("state", [F], 0.0, trainable=False)
    assert persistent not in layer.variables() and len(layer.variables()) == 1


def test_variables_and_updates_are_collected_from_sub_layers(rng):
    D, N = ng.make_axis(4, name="D"), ng.make_axis(3, name="N")
    block = TwoLayerBlock(D, rng, name="blk")
    block(ng.placeholder([D, N]))
    assert block.sublayers() == [block.up, block.down[0], block.norm["bn"]]
    assert [v.name for v in block.variables()] == [
        "blk_up_W", "blk_down_W", "blk_bn_gamma", "blk_bn_beta"]
    assert len(block.updates) == 2


def test_a_part_holding_its_parent_is_collected_once(rng):
    D, N = ng.make_axis(4, name="D"), ng.make_axis(3, name="N")
    outer = Gate(init=0.5, name="outer")
    inner = Gate(init=0.5, name="inner")
    outer.part, inner.owner = inner, outer               # a cycle of attributes
    outer(inner(ng.placeholder([D, N])))
    assert outer.variables() == [outer.g, inner.g]
    assert inner.variables() == [inner.g, outer.g] and outer.updates == []


# -- Residual and Sequential ------------------------------------------------------------------

def test_residual_is_x_plus_block_of_x(transformer, rng):
    D, N = ng.make_axis(4, name="D"), ng.make_axis(3, name="N")
    x = ng.placeholder([N, D], dtype=np.float64)           # any order: axes pair by identity
    inner = L.Affine(normal_init(rng), axes=[D], bias_init=0.25, activation="tanh")
    y = L.Residual(inner)(x)
    assert y.axes == ng.make_axes([N, D])
    xv = rng.normal(size=(3, 4))
    got, w = evaluate(transformer, [y, inner.W], {x: xv})
    np.testing.assert_allclose(got, xv + np.tanh(xv @ w.T + 0.25), rtol=1e-12)


def test_sequential_of_residual_blocks_collects_variables_and_updates(transformer, rng):
    D, N = ng.make_axis(4, name="D"), ng.make_axis(5, name="N")
    x = ng.placeholder([D, N], dtype=np.float64)
    first = L.Affine(normal_init(rng), axes=[D], activation="relu", name="first")
    bn = L.BatchNorm(name="bn")
    second = L.Affine(normal_init(rng), axes=[D], name="second")
    head = L.Affine(normal_init(rng), nout=2, name="head")
    model = L.Sequential([L.Residual([first, bn, L.Dropout(keep=0.5)]),
                          L.Sequential([L.Residual(second)]), head])
    with L.inference_mode_on():
        y = model(x)
    assert model.variables() == first.variables() + bn.variables() + second.variables() + \
        head.variables()
    xv = rng.normal(size=(4, 5))
    got, w1, w2, w3 = evaluate(transformer, [y, first.W, second.W, head.W], {x: xv})
    h = xv + (np.maximum(w1 @ xv, 0) - 1.0) / np.sqrt(1 + 1e-3)   # BN running stats start at 1
    h = h + w2 @ h
    np.testing.assert_allclose(got, w3 @ h, rtol=1e-10)
    model(x)                                  # a training call builds BatchNorm's updates
    assert len(model.updates) == 2


def test_residual_gradient_with_respect_to_input(backend, rng):
    D, N = ng.make_axis(3, name="D"), ng.make_axis(2, name="N")
    x = ng.placeholder([D, N], dtype=np.float64)
    block = L.Residual([L.Affine(normal_init(rng), nout=5, activation="tanh"),
                        L.Affine(normal_init(rng), axes=[D])])
    y = block(x)
    with ExecutorFactory(backend):
        check_derivative(y, x, 1e-6, rng.normal(size=(3, 2)), rtol=1e-6, atol=1e-8)


def test_residual_errors():
    D, N = ng.make_axis(4, name="D"), ng.make_axis(3, name="N")
    with pytest.raises(L.LayerAxesError, match="res.*input's axes back"):
        L.Residual(L.Affine(0.1, nout=2), name="res")(ng.placeholder([D, N]))
    with pytest.raises(L.LayerError, match="not callable"):
        L.Residual(3)
    with pytest.raises(L.LayerError, match="not callable"):
        L.Residual([L.Dropout(), "relu"])


# -- Embedding ----------------------------------------------------------------------------------

def test_embedding_adds_learned_positions(transformer, rng):
    T = ng.make_axis(4, name="T", recurrent=True)
    N = ng.make_axis(3, name="N")
    tokens = ng.placeholder([N, T], dtype=np.int32)
    embed = L.Embedding(7, 5, init=normal_init(rng), positions=T,
                        position_init=normal_init(rng), name="emb")
    y = embed(tokens)
    E = embed.embed_axis
    assert y.axes == ng.make_axes([E, N, T]) and embed.P.axes == ng.make_axes([T, E])
    assert embed.variables() == [embed.W, embed.P]
    weights = ng.constant(rng.normal(size=(5, 3, 4)), [E, N, T])
    cost = ng.sum(y * weights, out_axes=())
    grads = [ng.deriv(cost, embed.W), ng.deriv(cost, embed.P)]
    idx = rng.integers(0, 7, size=(3, 4)).astype(np.int32)
    got, w, p, grad_w, grad_p = evaluate(transformer, [y, embed.W, embed.P] + grads,
                                         {tokens: idx})
    expected = w[idx] + p[None, :, :]                      # (N, T, E)
    np.testing.assert_allclose(got, np.moveaxis(expected, -1, 0), rtol=1e-6)
    wv = np.moveaxis(evaluate(transformer, weights, {}), 0, -1).astype(np.float32)
    np.testing.assert_allclose(grad_p, wv.sum(axis=0), rtol=1e-5)
    expected_w = np.zeros((7, 5))
    np.add.at(expected_w, idx, wv)                         # each use of a row adds its weight
    np.testing.assert_allclose(grad_w, expected_w, rtol=1e-5, atol=1e-6)


def test_embedding_of_a_slice_of_the_sequence_takes_those_positions(transformer, rng):
    T = ng.make_axis(5, name="T", recurrent=True)
    N = ng.make_axis(2, name="N")
    tokens = ng.placeholder([T, N], dtype=np.int32)
    embed = L.Embedding(6, 3, init=normal_init(rng), positions=T, position_init=normal_init(rng))
    full, window = embed(tokens), embed(tokens[1:4])   # positions 1, 2, 3 (generation)
    assert window.axes[1].parent is T and window.axes[1].length == 3
    idx = rng.integers(0, 6, size=(5, 2)).astype(np.int32)
    got_full, got_window, w, p = evaluate(transformer, [full, window, embed.W, embed.P],
                                          {tokens: idx})
    np.testing.assert_allclose(got_window, got_full[:, 1:4], rtol=1e-6)
    np.testing.assert_allclose(got_window, np.moveaxis(w[idx[1:4]] + p[1:4, None], -1, 0),
                               rtol=1e-6)


def test_embedding_with_a_position_count_makes_a_sequence_axis(transformer, rng):
    embed = L.Embedding(6, 3, init=normal_init(rng), positions=4, name="tok")
    T = embed.position_axis
    assert T.name == "tok_position" and T.length == 4 and T.is_recurrent
    N = ng.make_axis(2, name="N")
    tokens = ng.placeholder([T, N], dtype=np.int32)
    y = embed(tokens)
    # Later defaults leave the positions alone: the head contracts the embedding only.
    head = L.Affine(normal_init(rng), nout=2, name="logits")
    logits = head(y)
    assert logits.axes == ng.make_axes([head.axes[0], T, N])
    assert ng.softmax(logits).axes == logits.axes
    idx = np.array([[0, 5], [1, 1], [2, 3], [4, 0]], dtype=np.int32)
    got, w, p, hw = evaluate(transformer, [logits, embed.W, embed.P, head.W], {tokens: idx})
    vectors = w[idx] + p[:, None, :]                       # (T, N, E)
    np.testing.assert_allclose(got, np.einsum("oe,tne->otn", hw, vectors), rtol=1e-5)


def test_embedding_without_positions_is_a_lookup_table(transformer, rng):
    N = ng.make_axis(3, name="N")
    tokens = ng.placeholder([N], dtype=np.int32)
    embed = L.Embedding(4, 2, init=normal_init(rng), pad_idx=1)
    y = embed(tokens)
    assert embed.P is None and embed.variables() == [embed.W]
    got, w = evaluate(transformer, [y, embed.W], {tokens: np.array([1, 3, 0], np.int32)})
    np.testing.assert_array_equal(w[1], 0)
    np.testing.assert_allclose(got, w[[1, 3, 0]].T, rtol=1e-6)


def test_embedding_errors():
    T = ng.make_axis(4, name="T")                          # not flagged as a sequence
    with pytest.raises(L.LayerError, match="emb: positions axis T is not flagged.*recurrent=True"):
        L.Embedding(5, 2, init=0.1, positions=T, name="emb")
    with pytest.raises(L.LayerError, match="positive int"):
        L.Embedding(5, 2, init=0.1, positions=0)
    with pytest.raises(L.LayerError, match="needs a length"):
        L.Embedding(5, 2, init=0.1, positions=ng.make_axis(name="S", recurrent=True))
    embed = L.Embedding(5, 2, init=0.1, positions=3, name="emb2")
    with pytest.raises(L.LayerAxesError, match="emb2.*lack that axis"):
        embed(ng.placeholder([ng.make_axis(3, name="N")], dtype=np.int32))
