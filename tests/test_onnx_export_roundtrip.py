"""Trained models out to ONNX: the digits convnet and the char transformer of examples/,
trained briefly, export their inference graphs with the trained values, and onnxruntime's
predictions equal axgraph's."""
import numpy as np
import pytest

import axgraph as ng
from axgraph.frontends.neon import GradientDescentMomentum, ar, inference_mode_on
from examples import char_transformer as ct
from examples import digits_convnet
from examples.text_data import load_help_text

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from axgraph.frontends.onnx import export  # noqa: E402


def run_file(path, arguments):
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, arguments)))


def test_trained_digits_convnet_predicts_the_same(tmp_path):
    pytest.importorskip("sklearn")
    from examples.digits_data import load_digits_split

    (train_x, train_y), (test_x, _) = load_digits_split(0)
    C = ng.make_axis(1, name="C", roles=[ar.Channel])
    H = ng.make_axis(8, name="H", roles=[ar.Height])
    W = ng.make_axis(8, name="W", roles=[ar.Width])
    Y = ng.make_axis(10, name="Y")
    N = ng.make_axis(32, name="N")
    model = digits_convnet.build_model(0, Y)
    images = ng.placeholder([N, C, H, W], name="images")
    labels = ng.placeholder([N], name="labels")
    loss = ng.cross_entropy_multi(model(images), ng.one_hot(labels, axis=Y))
    step = ng.sequential([GradientDescentMomentum(0.05, momentum_coef=0.9)(loss),
                          ng.mean(loss, out_axes=())])
    batch = ng.make_axis(name="N")  # no length: the exported model takes any number of images
    test_images = ng.placeholder([batch, C, H, W], name="test_images")
    with inference_mode_on():
        scores = model(test_images)
    with ng.make_transformer("numpy") as transformer:
        train = transformer.computation(step, images, labels)
        losses = [float(train(train_x[k:k + 32, None], train_y[k:k + 32].astype(np.float32)))
                  for k in range(0, 12 * 32, 32)]
        assert losses[-1] < losses[0]  # it did train
        predict = transformer.computation([scores, ng.argmax(scores, reduction_axes=[Y])],
                                          test_images)
        export(predict, tmp_path / "digits.onnx")
        for chosen in (test_x[:50, None], test_x[50:53, None]):
            chosen = chosen.astype(np.float32)
            got_scores, got_classes = run_file(tmp_path / "digits.onnx", [chosen])
            want_scores, want_classes = predict(chosen)
            np.testing.assert_allclose(got_scores, want_scores, rtol=1e-4, atol=1e-6)
            assert got_classes.tolist() == want_classes.tolist()


def test_trained_char_transformer_predicts_the_same(tmp_path):
    config = ct.Config(layers=1, heads=2, d_model=16, context=8, mlp_width=32, batch=4)
    alphabet, codes = ct.encode(load_help_text())
    inputs, targets = ct.windows(codes, config.context)
    model = ct.CharTransformer(len(alphabet), config, seed=3)
    N = ng.make_axis(config.batch, name="N")
    chars, next_chars = (ng.placeholder([model.T, N], dtype=np.int32) for _ in range(2))
    loss = model.loss(chars, next_chars)
    step = ng.sequential([ct.make_optimizer(model, 6)(loss), loss])
    batch = ng.make_axis(name="N")  # no length: any number of windows
    context = ng.placeholder([model.T, batch], dtype=np.int32, name="context")
    logits = model(context)
    with ng.make_transformer("numpy") as transformer:
        train = transformer.computation(step, chars, next_chars)
        for k in range(6):
            rows = slice(k * config.batch, (k + 1) * config.batch)
            train(inputs[rows].T, targets[rows].T)
        predict = transformer.computation(logits, context)
        export(predict, tmp_path / "chars.onnx")
        windows = inputs[100:103].T.astype(np.int32)  # three windows of 8 characters
        (got,) = run_file(tmp_path / "chars.onnx", [windows])
        want = predict(windows)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    vocabulary = logits.axes.index(next(a for a in logits.axes if a.length == len(alphabet)))
    assert np.array_equal(got.argmax(axis=vocabulary), want.argmax(axis=vocabulary))
