"""Trained models out to ONNX and back: the digits convnet and the char transformer of
examples/, trained briefly, export their inference graphs with the trained values;
onnxruntime's predictions from the file, and axgraph's from the file imported again on
every transformer, equal the predictions axgraph made before export."""
from __future__ import annotations

import numpy as np
import pytest

import axgraph as ng
from axgraph.frontends.neon import GradientDescentMomentum, ar, inference_mode_on

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from axgraph.frontends.onnx import export, import_model  # noqa: E402
from test_onnx_import import TRANSFORMERS  # noqa: E402


def run_in_onnxruntime(path, arguments):
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, arguments)))


def imported_predictions(path, arguments, transformer):
    model = import_model(path)
    with ng.make_transformer(transformer) as t:
        return t.computation(model.outputs, *model.inputs)(*arguments)


def predictions_from_the_file(path, arguments):
    """{who ran the file: its results}: onnxruntime, then each transformer on the import."""
    found = {"onnxruntime": run_in_onnxruntime(path, arguments)}
    for transformer in TRANSFORMERS:
        found[f"imported on {transformer}"] = imported_predictions(path, arguments, transformer)
    return found


def test_trained_digits_convnet_predicts_the_same(tmp_path):
    pytest.importorskip("sklearn")
    from examples import digits_convnet
    from examples.digits_data import load_digits_split

    (train_x, train_y), (test_x, _) = load_digits_split(0)
    C = ng.make_axis(1, name="C", roles=[ar.Channel])
    H = ng.make_axis(8, name="H", roles=[ar.Height])
    W = ng.make_axis(8, name="W", roles=[ar.Width])
    Y, N = ng.make_axis(10, name="Y"), ng.make_axis(32, name="N")
    model = digits_convnet.build_model(0, Y)
    images, labels = ng.placeholder([N, C, H, W], name="images"), ng.placeholder([N])
    loss = ng.cross_entropy_multi(model(images), ng.one_hot(labels, axis=Y))
    step = ng.sequential([GradientDescentMomentum(0.05, momentum_coef=0.9)(loss),
                          ng.mean(loss, out_axes=())])
    batch = ng.make_axis(name="N")  # no length: the file takes any number of images
    test_images = ng.placeholder([batch, C, H, W], name="test_images")
    with inference_mode_on():
        scores = model(test_images)
    chosen_batches = [test_x[:50, None].astype(np.float32), test_x[50:53, None].astype(np.float32)]
    with ng.make_transformer("numpy") as transformer:
        train = transformer.computation(step, images, labels)
        losses = [float(train(train_x[k:k + 32, None], train_y[k:k + 32].astype(np.float32)))
                  for k in range(0, 8 * 32, 32)]
        assert losses[-1] < losses[0]  # it did train
        predict = transformer.computation([scores, ng.argmax(scores, reduction_axes=[Y])],
                                          test_images)
        export(predict, tmp_path / "digits.onnx")
        wanted = [predict(chosen) for chosen in chosen_batches]
    for chosen, (want_scores, want_classes) in zip(chosen_batches, wanted):
        for who, (got_scores, got_classes) in predictions_from_the_file(
                tmp_path / "digits.onnx", [chosen]).items():
            np.testing.assert_allclose(got_scores, want_scores, rtol=1e-4, atol=1e-6,
                                       err_msg=who)
            assert got_classes.tolist() == want_classes.tolist(), who


def test_trained_char_transformer_predicts_the_same(tmp_path):
    from examples import char_transformer as ct
    from examples.text_data import load_help_text

    config = ct.Config(layers=1, heads=2, d_model=16, context=8, mlp_width=32, batch=4)
    alphabet, codes = ct.encode(load_help_text())
    inputs, targets = ct.windows(codes, config.context)
    model = ct.CharTransformer(len(alphabet), config, seed=3)
    N = ng.make_axis(config.batch, name="N")
    chars, next_chars = (ng.placeholder([model.T, N], dtype=np.int32) for _ in range(2))
    loss = model.loss(chars, next_chars)  # (builds the layers the optimizer then finds)
    step = ng.sequential([ct.make_optimizer(model, 6)(loss), loss])
    batch = ng.make_axis(name="N")  # no length: any number of windows
    context = ng.placeholder([model.T, batch], dtype=np.int32, name="context")
    logits = model(context)
    windows = inputs[100:103].T.astype(np.int32)  # three windows of 8 characters
    with ng.make_transformer("numpy") as transformer:
        train = transformer.computation(step, chars, next_chars)
        for k in range(6):
            rows = slice(k * config.batch, (k + 1) * config.batch)
            train(inputs[rows].T, targets[rows].T)
        predict = transformer.computation(logits, context)
        export(predict, tmp_path / "chars.onnx")
        want = predict(windows)
    vocabulary = logits.axes.index(next(a for a in logits.axes if a.length == len(alphabet)))
    for who, (got,) in predictions_from_the_file(tmp_path / "chars.onnx", [windows]).items():
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=who)
        assert np.array_equal(got.argmax(axis=vocabulary), want.argmax(axis=vocabulary)), who
