"""ONNX export of axes graphs: models built with ng functions and neon layers, written with
`axgraph.frontends.onnx.export`, pass onnx.checker's full check and compute in
onnxruntime what axgraph computes; symbolic sizes become dim_params, axis names show in
value names, and what ONNX cannot express is a clear error at the user's line."""
import inspect
import sys

import numpy as np
import pytest

import axgraph as ng
from axgraph.frontends.neon import (Affine, Convolution, GlorotUniform, LayerNorm,
                                    MultiHeadAttention, Pooling, Rectlin, Sequential, Softmax,
                                    inference_mode_on)

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from axgraph.frontends.onnx import export  # noqa: E402
from axgraph.frontends.onnx.export_graph import OnnxExportError  # noqa: E402


def run_file(path, arguments):
    """Load the file, check it fully and run it in onnxruntime on the inputs in order."""
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, arguments)))


def uniform(seed, scale=0.5):
    rng = np.random.default_rng(seed)
    return lambda axes: rng.uniform(-scale, scale, axes.lengths)


def line_of(marker):
    """The line of this file holding `marker` (where an op under test is built)."""
    lines = inspect.getsource(inspect.getmodule(line_of)).splitlines()
    return next(i for i, text in enumerate(lines, 1) if marker in text and "line_of" not in text)


@pytest.fixture
def numpy_transformer():
    with ng.make_transformer("numpy") as transformer:
        yield transformer


def test_mlp_with_a_symbolic_batch_runs_at_two_batch_sizes(tmp_path, numpy_transformer):
    F, H, Y = (ng.make_axis(n, name=name) for n, name in ((6, "F"), (5, "H"), (3, "Y")))
    N = ng.make_axis(name="N")  # no length: bound by the fed batch
    x = ng.placeholder([F, N], name="x")
    model = Sequential([Affine(axes=H, weight_init=uniform(1), bias_init=uniform(2),
                               activation=Rectlin(), name="hidden"),
                        Affine(axes=Y, weight_init=uniform(3), bias_init=0.0,
                               activation=Softmax())])
    probabilities = model(x)
    predict = numpy_transformer.computation(probabilities, x)
    path = tmp_path / "mlp.onnx"
    written = export(predict, path)
    (batch,) = [d.dim_param for d in written.graph.input[0].type.tensor_type.shape.dim[1:]]
    assert batch == "N" and written.graph.input[0].name == "x"
    assert [d.dim_value for d in written.graph.input[0].type.tensor_type.shape.dim[:1]] == [6]
    assert any("[H,N]" in name or "[N,H]" in name for node in written.graph.node
               for name in node.output), "axis names in value names"
    rng = np.random.default_rng(0)
    for size in (1, 7):
        value = rng.standard_normal((6, size)).astype(np.float32)
        (got,) = run_file(path, [value])
        np.testing.assert_allclose(got, predict(value), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got.sum(axis=0), 1.0, rtol=1e-5)


def test_stored_values_come_from_the_transformer_or_are_initial(tmp_path, numpy_transformer):
    F, N = ng.make_axis(3, name="F"), ng.make_axis(2, name="N")
    x = ng.placeholder([F, N], name="x")
    w = ng.variable([F], initial_value=np.array([1.0, 2.0, 3.0]), name="w")
    y = ng.sum(x * w, out_axes=[N])
    step = numpy_transformer.computation(ng.assign(w, w * 2.0))
    step()
    value = np.arange(6, dtype=np.float32).reshape(3, 2)
    export(y, tmp_path / "trained.onnx", [x], transformer=numpy_transformer)
    export(y, tmp_path / "initial.onnx", [x])
    (trained,) = run_file(tmp_path / "trained.onnx", [value])
    (initial,) = run_file(tmp_path / "initial.onnx", [value])
    np.testing.assert_allclose(trained, (value * [[2.0], [4.0], [6.0]]).sum(axis=0))
    np.testing.assert_allclose(initial, (value * [[1.0], [2.0], [3.0]]).sum(axis=0))


def test_convnet(tmp_path, numpy_transformer):
    C = ng.make_axis(2, name="C", roles=[ng.frontends.neon.ar.Channel])
    Hh = ng.make_axis(8, name="H", roles=[ng.frontends.neon.ar.Height])
    W = ng.make_axis(8, name="W", roles=[ng.frontends.neon.ar.Width])
    N = ng.make_axis(name="N")
    Y = ng.make_axis(4, name="Y")
    network = Sequential([
        Convolution((3, 3, 5), filter_init=uniform(4), padding=1, strides=1, bias_init=0.1,
                    activation=Rectlin()),
        Pooling(2),
        Convolution((3, 3, 6), filter_init=uniform(5), padding=0, bias_init=0.0,
                    activation=Rectlin()),
        Pooling(2, pool_type="avg"),
        Affine(axes=Y, weight_init=GlorotUniform(seed=6), bias_init=0.0, activation=Softmax()),
    ])
    images = ng.placeholder([C, Hh, W, N], name="images")
    with inference_mode_on():
        scores = network(images)
    predict = numpy_transformer.computation([scores, ng.argmax(scores, reduction_axes=[Y])],
                                            images)
    export(predict, tmp_path / "convnet.onnx")
    value = np.random.default_rng(1).standard_normal((2, 8, 8, 3)).astype(np.float32)
    got = run_file(tmp_path / "convnet.onnx", [value])
    expected = predict(value)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-4, atol=1e-6)
    assert got[1].tolist() == expected[1].tolist()


def test_transformer_block_of_neon_layers(tmp_path, numpy_transformer):
    D, T, N, Hd = (ng.make_axis(n, name=name) for n, name in ((8, "D"), (5, "T"), (None, "N"),
                                                               (16, "Hidden")))
    attention = MultiHeadAttention(D, 2, 4, weight_init=uniform(7), bias_init=uniform(8),
                                   causal=True, name="attn")
    norm1, norm2 = LayerNorm(D, name="ln1"), LayerNorm(D, name="ln2")
    up = Affine(axes=Hd, weight_init=uniform(9), bias_init=0.0, name="up")
    down = Affine(axes=D, weight_init=uniform(10), bias_init=0.0, name="down")
    x = ng.placeholder([D, T, N], name="x")
    h = x + attention(norm1(x))
    y = h + down(ng.gelu(up(norm2(h))))
    forward = numpy_transformer.computation(y, x)
    model = export(forward, tmp_path / "block.onnx")
    lengths = {"D": 8, "T": 5, "N": "N", "Hidden": 16}
    named = 0
    for info in onnx.shape_inference.infer_shapes(model).graph.value_info:
        if "[" in info.name:  # "op[A,B]": its dims are those axes' lengths, in that order
            # (the types of inner values are declared, checked by onnx's full check)
            axes = info.name[info.name.index("[") + 1:-1].split(",")
            dims = [d.dim_param or d.dim_value for d in info.type.tensor_type.shape.dim]
            assert len(dims) == len(axes), info.name
            assert all(dim == lengths[a] for a, dim in zip(axes, dims) if a in lengths)
            named += 1
    assert named > 10
    for size in (1, 3):
        value = np.random.default_rng(size).standard_normal((8, 5, size)).astype(np.float32)
        (got,) = run_file(tmp_path / "block.onnx", [value])
        np.testing.assert_allclose(got, forward(value), rtol=1e-4, atol=1e-5)


def test_softmax_layer_norm_gelu_against_numpy(tmp_path):
    import math

    D, N = ng.make_axis(6, name="D"), ng.make_axis(name="N")
    x = ng.placeholder([N, D], name="x")
    results = [ng.softmax(x, normalization_axes=[D]), ng.layer_norm(x, [D]), ng.gelu(x),
               ng.log_softmax(x, normalization_axes=[D]), ng.mean(x, out_axes=[D])]
    export(results, tmp_path / "f.onnx", [x])
    value = np.random.default_rng(2).standard_normal((4, 6)).astype(np.float32)
    got = run_file(tmp_path / "f.onnx", [value])
    v = value.astype(np.float64)
    e = np.exp(v - v.max(axis=1, keepdims=True))
    erf = np.vectorize(math.erf)
    expected = [e / e.sum(axis=1, keepdims=True),
                (v - v.mean(axis=1, keepdims=True)) / np.sqrt(v.var(axis=1, keepdims=True) + 1e-5),
                v / 2 * (1 + erf(v / np.sqrt(2))),
                np.log(e / e.sum(axis=1, keepdims=True)),
                v.mean(axis=0)]
    for g, want in zip(got, expected):
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5)


def test_batched_dot_and_einsum(tmp_path):
    B, M, K, P = (ng.make_axis(n, name=name) for n, name in ((None, "B"), (3, "M"), (4, "K"),
                                                           (2, "P")))
    a = ng.placeholder([B, M, K], name="a")
    b = ng.placeholder([B, K, P], name="b")
    product = ng.einsum("B M K, B K P -> B M P", a, b)
    export(product, tmp_path / "bmm.onnx", [a, b])
    rng = np.random.default_rng(3)
    av, bv = (rng.standard_normal(s).astype(np.float32) for s in ((5, 3, 4), (5, 4, 2)))
    (got,) = run_file(tmp_path / "bmm.onnx", [av, bv])
    order = [product.axes.index(axis) for axis in (B, M, P)]
    np.testing.assert_allclose(np.transpose(got, order), av @ bv, rtol=1e-5)


def test_declared_size_becomes_its_dim_param(tmp_path):
    S = ng.dim("S")
    T = ng.make_axis(length=S, name="T")
    D = ng.make_axis(4, name="D")
    x = ng.placeholder([T, D], name="x")
    doubled = ng.concat_along_axis([x, x], T)
    model = export(doubled, tmp_path / "c.onnx", [x])
    dims = model.graph.output[0].type.tensor_type.shape.dim
    assert [d.dim_param or d.dim_value for d in dims] == ["2*S", 4]
    value = np.arange(12, dtype=np.float32).reshape(3, 4)
    (got,) = run_file(tmp_path / "c.onnx", [value])
    np.testing.assert_array_equal(got, np.concatenate([value, value]))


def test_training_step_exports_new_values_as_outputs(tmp_path, numpy_transformer):
    F, Y, N = ng.make_axis(4, name="F"), ng.make_axis(3, name="Y"), ng.make_axis(5, name="N")
    x = ng.placeholder([F, N], name="x")
    labels = ng.placeholder([N], name="labels")
    w = ng.variable([Y, F], initial_value=uniform(11), name="W")
    loss = ng.mean(ng.cross_entropy_multi(ng.softmax(ng.dot(w, x)),
                                          ng.one_hot(labels, axis=Y)), out_axes=())
    step = numpy_transformer.computation(
        ng.sequential([ng.assign(w, w - 0.5 * ng.deriv(loss, w)), loss]), x, labels)
    model = export(step, tmp_path / "step.onnx")
    assert [o.name for o in model.graph.output][-1] == "W.new"
    rng = np.random.default_rng(4)
    xv = rng.standard_normal((4, 5)).astype(np.float32)
    yv = rng.integers(0, 3, 5).astype(np.float32)
    before = ng.serialization.get_values(numpy_transformer, [w])[w]
    loss_onnx, w_new = run_file(tmp_path / "step.onnx", [xv, yv])
    np.testing.assert_allclose(loss_onnx, step(xv, yv), rtol=1e-5)
    after = ng.serialization.get_values(numpy_transformer, [w])[w]
    np.testing.assert_allclose(w_new, after, rtol=1e-5, atol=1e-6)
    assert not np.allclose(w_new, before)


def test_gradients_through_convolution_and_pooling(tmp_path, numpy_transformer):
    C = ng.make_axis(2, name="C", roles=[ng.frontends.neon.ar.Channel])
    Hh = ng.make_axis(9, name="H", roles=[ng.frontends.neon.ar.Height])
    W = ng.make_axis(10, name="W", roles=[ng.frontends.neon.ar.Width])
    N = ng.make_axis(name="N")
    network = Sequential([
        Convolution((3, 3, 3), filter_init=uniform(12), padding=1, strides=2, bias_init=0.0,
                    activation=Rectlin()),
        Pooling(2, strides=1, pool_type="avg"),
        Convolution((2, 2, 4), filter_init=uniform(13), padding=0, bias_init=0.0),
        Pooling(2, strides=1, pool_type="max"),
    ])
    images = ng.placeholder([C, Hh, W, N], name="images")
    out = network(images)
    loss = ng.sum(out * out, out_axes=())
    filters = [v for v in loss.variables() if len(v.axes) == 4]
    gradients = [ng.deriv(loss, images)] + [ng.deriv(loss, f) for f in filters]
    compute = numpy_transformer.computation(gradients, images)
    export(compute, tmp_path / "gradients.onnx")
    value = np.random.default_rng(5).standard_normal((2, 9, 10, 3)).astype(np.float32)
    got = run_file(tmp_path / "gradients.onnx", [value])
    for g, want in zip(got, compute(value)):
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5)


def test_what_onnx_cannot_express_is_an_error_at_the_users_line():
    N = ng.make_axis(3, name="N")
    x = ng.placeholder([N], name="x")
    printed = ng.PrintOp(x * 2.0)  # a host call
    with pytest.raises(OnnxExportError, match="Print") as info:
        export(printed, None, [x])
    assert info.value.location == (__file__, line_of("a host call"))


def test_bad_requests_are_clear_errors():
    N = ng.make_axis(2, name="N")
    x, y = ng.placeholder([N], name="x"), ng.placeholder([N], name="y")
    with pytest.raises(OnnxExportError, match="placeholder y"):
        export(x + y, None, [x])
    with pytest.raises(OnnxExportError, match="opset 17 or later"):
        export(x, None, [x], opset=16)
    with pytest.raises(ng.FeedError, match="must be placeholders"):
        export(x * 2.0, None, [x * 2.0])


def test_inputs_stored_tensors_and_constants_as_outputs():
    N, B = ng.make_axis(3, name="N"), ng.make_axis(name="B")
    x = ng.placeholder([N], name="x")
    unread = ng.placeholder([N, B], name="unread")
    w = ng.variable([N], initial_value=np.arange(3.0), name="w")
    c = ng.constant(np.array([1.0, 2.0, 3.0]), [N], name="c")
    default = ng.placeholder([N], initial_value=np.array([5.0, 6.0, 7.0]), name="default")
    results = [x, x, w, c, ng.less(x, w), ng.sum(x + default, out_axes=())]
    model = export(results, None, [x, unread])
    assert [i.name for i in model.graph.input] == ["x", "unread"]
    assert [d.dim_param or d.dim_value for d in
            model.graph.input[1].type.tensor_type.shape.dim] == [3, "B"]
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    value = np.array([0.5, 1.5, 2.5], np.float32)
    got = session.run(None, {"x": value, "unread": np.zeros((3, 2), np.float32)})
    expected = [value, value, [0.0, 1.0, 2.0], [1.0, 2.0, 3.0], [False, False, False],
                (value + [5.0, 6.0, 7.0]).sum()]
    for g, want in zip(got, expected):
        np.testing.assert_allclose(g, want, rtol=1e-6)


def test_bfloat16_values_keep_their_bits():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    N = ng.make_axis(3, name="N")
    h = ng.placeholder([N], dtype=ml_dtypes.bfloat16, name="h")
    w = ng.variable([N], dtype=ml_dtypes.bfloat16, initial_value=np.array([1.0, -2.5, 3.0]),
                    name="w")
    model = export(h * w, None, [h])
    onnx.checker.check_model(model, full_check=True)
    (stored,) = model.graph.initializer
    assert stored.data_type == onnx.TensorProto.BFLOAT16
    bits = np.frombuffer(stored.raw_data, dtype=np.uint16)
    assert bits.tolist() == np.array([1.0, -2.5, 3.0], ml_dtypes.bfloat16).view(
        np.uint16).tolist()


def test_without_onnx_installed_the_error_says_what_to_install(monkeypatch):
    from axgraph.frontends.onnx.export_graph import OnnxNotInstalledError

    N = ng.make_axis(2, name="N")
    x = ng.placeholder([N], name="x")
    monkeypatch.setitem(sys.modules, "onnx", None)  # an import of it fails
    with pytest.raises(OnnxNotInstalledError, match=r"pip install 'axgraph\[onnx\]'"):
        export(x * 2.0, None, [x])
    assert issubclass(OnnxNotInstalledError, ImportError)
