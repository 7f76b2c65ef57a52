"""Round trip: the digits convnet and the char transformer of examples/, trained briefly,
exported with `axgraph.frontends.onnx.export` and imported again, predict what they
predicted before export, on every transformer."""
from __future__ import annotations

import numpy as np
import pytest

import axgraph as ng
import axgraph.frontends.onnx as axgraph_onnx
from axgraph.frontends.neon import GradientDescentMomentum, ar, inference_mode_on

pytest.importorskip("onnx")

from test_onnx_import import TRANSFORMERS  # noqa: E402

export = getattr(axgraph_onnx, "export", None)
pytestmark = pytest.mark.skipif(export is None, reason="needs the ONNX exporter")


def imported_predictions(path, arguments, transformer):
    model = axgraph_onnx.import_model(path)
    with ng.make_transformer(transformer) as t:
        return t.computation(model.outputs, *model.inputs)(*arguments)


def test_trained_digits_convnet_round_trips(tmp_path):
    pytest.importorskip("sklearn")
    from examples import digits_convnet
    from examples.digits_data import load_digits_split

    (train_x, train_y), (test_x, _) = load_digits_split(0)
    C = ng.make_axis(1, name="C", roles=[ar.Channel])
    H = ng.make_axis(8, name="H", roles=[ar.Height])
    W = ng.make_axis(8, name="W", roles=[ar.Width])
    Y, N = ng.make_axis(10, name="Y"), ng.make_axis(32, name="N")
    model = digits_convnet.build_model(0, Y)
    images, labels = ng.placeholder([N, C, H, W]), ng.placeholder([N])
    loss = ng.cross_entropy_multi(model(images), ng.one_hot(labels, axis=Y))
    step = ng.sequential([GradientDescentMomentum(0.05, momentum_coef=0.9)(loss),
                          ng.mean(loss, out_axes=())])
    batch = ng.make_axis(name="N")  # no length: the file takes any number of images
    test_images = ng.placeholder([batch, C, H, W], name="test_images")
    with inference_mode_on():
        scores = model(test_images)
    chosen = test_x[:20, None].astype(np.float32)
    with ng.make_transformer("numpy") as t:
        train = t.computation(step, images, labels)
        for k in range(0, 4 * 32, 32):
            train(train_x[k:k + 32, None], train_y[k:k + 32].astype(np.float32))
        predict = t.computation([scores, ng.argmax(scores, reduction_axes=[Y])], test_images)
        export(predict, tmp_path / "digits.onnx")
        want_scores, want_classes = predict(chosen)
    for transformer in TRANSFORMERS:
        got_scores, got_classes = imported_predictions(tmp_path / "digits.onnx", [chosen],
                                                       transformer)
        np.testing.assert_allclose(got_scores, want_scores, rtol=1e-4, atol=1e-6)
        assert got_classes.tolist() == want_classes.tolist(), transformer


def test_trained_char_transformer_round_trips(tmp_path):
    from examples import char_transformer as ct
    from examples.text_data import load_help_text

    config = ct.Config(layers=1, heads=2, d_model=16, context=8, mlp_width=32, batch=4)
    alphabet, codes = ct.encode(load_help_text())
    inputs, targets = ct.windows(codes, config.context)
    model = ct.CharTransformer(len(alphabet), config, seed=3)
    N = ng.make_axis(config.batch, name="N")
    chars, next_chars = (ng.placeholder([model.T, N], dtype=np.int32) for _ in range(2))
    loss = model.loss(chars, next_chars)  # (builds the layers the optimizer then finds)
    step = ng.sequential([ct.make_optimizer(model, 3)(loss), loss])
    batch = ng.make_axis(name="N")
    context = ng.placeholder([model.T, batch], dtype=np.int32, name="context")
    logits = model(context)
    windows = inputs[100:103].T.astype(np.int32)  # three windows of 8 characters
    with ng.make_transformer("numpy") as t:
        train = t.computation(step, chars, next_chars)
        for k in range(3):
            rows = slice(k * config.batch, (k + 1) * config.batch)
            train(inputs[rows].T, targets[rows].T)
        predict = t.computation(logits, context)
        export(predict, tmp_path / "chars.onnx")
        want = predict(windows)
    vocabulary = logits.axes.index(next(a for a in logits.axes if a.length == len(alphabet)))
    for transformer in TRANSFORMERS:
        (got,) = imported_predictions(tmp_path / "chars.onnx", [windows], transformer)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        assert np.array_equal(got.argmax(axis=vocabulary), want.argmax(axis=vocabulary))
