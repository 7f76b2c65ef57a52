"""Nervana Graph v0.4's behaviour where axgraph's used to differ, checked against values by hand.

(The optimizers' cost rule and positional order are in test_neon_optimizers.py.)
"""
import sys

import numpy as np
import pytest

import axgraph as ng
from axgraph.frontends.neon import (Affine, ArrayIterator, BatchNorm, Bias, Conv2D, ConstantInit,
                                    Convolution, Dropout, GaussianInit, Linear, Normalizer,
                                    NgraphArgparser, Pool2D, Preprocess, Rectlin, Sequential,
                                    Softmax, UniformInit, ar,
                                    loop_eval, loop_train, make_bound_computation,
                                    make_default_callbacks)
from axgraph.frontends.neon.callback_data import CallbackDataError, MemoryGroup

F64 = np.float64


def feature_map_axes(c=2, h=3, w=4, n=5):
    return (ng.make_axis(c, name="C", roles=[ar.Channel]),
            ng.make_axis(h, name="H", roles=[ar.Height]),
            ng.make_axis(w, name="W", roles=[ar.Width]),
            ng.make_axis(n, name="N"))


# -- ng.tensor_size counts one example -------------------------------------------------------

def test_tensor_size_without_axes_is_the_size_of_one_example(transformer):
    C, T, N = ng.make_axis(3, name="C"), ng.make_axis(5, name="REC"), ng.make_axis(4, name="N")
    sizes = [ng.tensor_size(ng.placeholder(axes)) for axes in ([C, T, N], [N], [C])]
    assert [float(v) for v in transformer.computation(sizes)()] == [15.0, 1.0, 3.0]


def test_logistic_regression_walk_through_step_is_not_shrunk_by_the_batch(transformer, rng):
    """The walk-through divides by tensor_size(Y_hat), Y_hat having axes (N,): by 1."""
    C, N = ng.make_axis(3, name="C"), ng.make_axis(8, name="N")
    X, Y = ng.placeholder([C, N], dtype=F64), ng.placeholder([N], dtype=F64)
    w0 = np.array([0.1, -0.2, 0.3])   # (not 0: see the report on sigmoid cross entropy at 0)
    W = ng.variable([C - 1], dtype=F64, initial_value=w0)
    Y_hat = ng.sigmoid(ng.dot(W, X))
    L = ng.cross_entropy_binary(Y_hat, Y, out_axes=()) / ng.batch_size(Y_hat)
    update = ng.assign(W, W - 2.0 * ng.deriv(L, W) / ng.tensor_size(Y_hat))
    x, y = rng.standard_normal((3, 8)), (rng.random(8) > 0.5).astype(F64)
    _, w = transformer.computation([update, W], X, Y)(x, y)
    p = 1 / (1 + np.exp(-w0 @ x))
    np.testing.assert_allclose(w, w0 - 2.0 * x @ (p - y) / 8)   # dL/dW = X (p - y) / N


# -- positional order -----------------------------------------------------------------------

def test_affine_and_linear_take_the_initializer_first():
    x = ng.placeholder([ng.make_axis(4, name="F"), ng.make_axis(2, name="N")])
    affine, linear = Affine(ConstantInit(0.5), 3), Linear(ConstantInit(0.25), 6)
    affine(x), linear(x)
    assert affine.W.axes.lengths == (3, 4) and linear.W.axes.lengths == (6, 4)


# -- BatchNorm statistics per channel; Bias shared per channel --------------------------------

def normalized(x, axes, eps):
    mean, var = x.mean(axis=axes, keepdims=True), x.var(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


@pytest.mark.parametrize("spatial, stat_dims", [(None, (1, 2, 3)), (False, (3,))])
def test_batchnorm_on_feature_maps_takes_statistics_per_channel(transformer, rng, spatial,
                                                                stat_dims):
    axes = feature_map_axes()
    x = ng.placeholder(axes, dtype=F64)
    bn = BatchNorm(eps=1e-3, spatial=spatial)
    y = bn(x)
    assert bn.gamma.axes.lengths == tuple(axes[d].length for d in range(3) if d not in stat_dims)
    xv = rng.standard_normal((2, 3, 4, 5)) * 3 + 1
    np.testing.assert_allclose(transformer.computation(y, x)(xv), normalized(xv, stat_dims, 1e-3),
                               rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("shared, bias_dims", [(True, (0,)), (False, (0, 1, 2))])
def test_shared_bias_is_one_per_channel(transformer, rng, shared, bias_dims):
    axes = feature_map_axes()
    x = ng.placeholder(axes, dtype=F64)
    bias = Bias(UniformInit(-1, 1, seed=3), shared=shared)
    y = bias(x)
    assert bias.b.axes.lengths == tuple(axes[d].length for d in bias_dims)
    xv = rng.standard_normal((2, 3, 4, 5))
    got, b = transformer.computation([y, bias.b], x)(xv)
    np.testing.assert_allclose(got, xv + b.reshape(b.shape + (1,) * (4 - b.ndim)))
    assert Bias(None)(x) is x


# -- crossmap pooling is refused -------------------------------------------------------------

@pytest.mark.parametrize("params", [{"J": 2}, {"str_c": 2}, {"pad_c": 1}])
def test_crossmap_pooling_is_refused_naming_the_params(params):
    x = ng.placeholder(feature_map_axes())
    with pytest.raises(ng.IncompatibleAxesError, match="crossmap") as info:
        ng.pooling(dict(params, R=2, S=2), x)
    assert next(iter(params)) in str(info.value)
    with pytest.raises(ng.IncompatibleAxesError, match="crossmap"):
        Pool2D((2, 1, 2, 2))


def test_neutral_crossmap_params_are_accepted(transformer, rng):
    x = ng.placeholder(feature_map_axes())
    y = ng.pooling({"J": 1, "str_c": 1, "pad_c": 0, "R": 2, "S": 2, "str_h": 1, "str_w": 1}, x)
    xv = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    got = transformer.computation(y, x)(xv)
    windows = np.stack([xv[:, dh:dh + 2, dw:dw + 3] for dh in (0, 1) for dw in (0, 1)])
    np.testing.assert_allclose(got, windows.max(axis=0))


# -- the v0.4 layers ---------------------------------------------------------------------------

def test_conv2d_and_pool2d_take_v04_arguments(transformer, rng):
    C, H, W, N = feature_map_axes(1, 5, 5, 2)
    x = ng.placeholder([C, H, W, N], dtype=F64)
    conv = Conv2D((3, 3, 2), np.ones((2, 1, 3, 3)), 1, 1, Rectlin())   # fshape, init, strides,
    pool = Pool2D(2)                                                    # padding, activation
    y = pool(conv(x))
    xv = rng.standard_normal((1, 5, 5, 2))
    padded = np.pad(xv[0], ((1, 1), (1, 1), (0, 0)))
    box = sum(padded[i:i + 5, j:j + 5] for i in range(3) for j in range(3))  # 3x3 sums, (5, 5, N)
    relu = np.maximum(box, 0)
    pooled = np.max([relu[i:i + 4, j:j + 4] for i in (0, 1) for j in (0, 1)], axis=0)  # stride 1
    got = transformer.computation(y, x)(xv)
    assert got.shape == (2, 4, 4, 2)
    np.testing.assert_allclose(got, np.broadcast_to(pooled, (2, 4, 4, 2)), rtol=1e-9)


def test_convolution_output_may_have_a_fresh_channel_axis(transformer, rng):
    C, H, W, N = feature_map_axes(2, 4, 4, 3)
    x = ng.placeholder([C, H, W, N])
    K = ng.make_axis(3, name="K", roles=[ar.Channelout])
    R, S = ng.make_axis(3, roles=[ar.Height]), ng.make_axis(3, roles=[ar.Width])
    w = ng.placeholder([C, R, S, K])
    default = ng.convolution(None, x, w)
    fresh = [ng.make_axis(roles=[ar.Channel]), ng.make_axis(roles=[ar.Height]),
             ng.make_axis(roles=[ar.Width]), N]
    made = ng.convolution(None, x, w, axes=fresh)
    assert made.axes.lengths == (3, 2, 2, 3)
    pooled = ng.pooling({"R": 2, "S": 2}, made,
                        axes=[ng.make_axis(roles=[ar.Channel]), ng.make_axis(roles=[ar.Height]),
                              ng.make_axis(roles=[ar.Width]), N])
    xv = rng.standard_normal((2, 4, 4, 3)).astype(np.float32)
    wv = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    a, b, p = transformer.computation([default, made, pooled], x, w)(xv, wv)
    np.testing.assert_allclose(a, b)
    np.testing.assert_allclose(p[:, 0, 0], b.max(axis=(1, 2)))
    with pytest.raises(ng.IncompatibleAxesError, match="length"):
        ng.convolution(None, x, w, axes=[ng.make_axis(5), ng.make_axis(roles=[ar.Height]),
                                         ng.make_axis(roles=[ar.Width]), N])


def test_train_and_inference_outputs_choose_the_graph(transformer):
    F, N = ng.make_axis(1000, name="F"), ng.make_axis(1, name="N")
    x = ng.placeholder([F, N], dtype=F64)
    model = Sequential([Preprocess(functor=lambda v: v * 3.0), Normalizer(divisor=3.0),
                        Dropout(keep=0.5, seed=1)])
    inference = transformer.computation(model.inference_outputs(x), x)(np.ones((1000, 1)))
    np.testing.assert_array_equal(inference, 1.0)
    with model.inference_mode_on():
        train = model.train_outputs(x)      # the call's own protocol wins over the mode
    values = transformer.computation(train, x)(np.ones((1000, 1)))
    assert set(np.unique(values)) == {0.0, 2.0} and 400 < (values == 0).sum() < 600


# -- initializers ------------------------------------------------------------------------------

def test_v04_initializers_take_shapes_and_numpy_seed():
    np.random.seed(5)
    drawn = GaussianInit(1.0, 3.0)((4, 250))
    np.random.seed(5)
    np.testing.assert_array_equal(drawn, np.random.normal(1.0, 3.0, (4, 250)))  # var is the std
    np.random.seed(6)
    drawn = UniformInit()((3,))
    np.random.seed(6)
    np.testing.assert_array_equal(drawn, np.random.uniform(-0.01, 0.01, (3,)))
    np.testing.assert_array_equal(ConstantInit(2.5)((2, 2)), np.full((2, 2), 2.5))


def test_a_zero_argument_initial_value_is_called(transformer):
    A = ng.make_axis(3, name="A")
    v = ng.variable([A], initial_value=lambda: np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(transformer.computation(v)(), [1.0, 2.0, 3.0])


# -- the training harness ------------------------------------------------------------------------

def regression(batch_size=4, ndata=10):
    """y = 2 x fitted by w: the cost per example is (w x - y)^2."""
    F, N = ng.make_axis(1, name="F"), ng.make_axis(batch_size, name="N")
    xs = np.linspace(-1, 1, ndata)[:, None]
    train = ArrayIterator({"x": xs, "y": 2 * xs[:, 0]}, batch_size, total_iterations=6)
    inputs = train.make_placeholders(batch_axis=N, axes={"x": [F]})
    w = ng.variable([F - 1], dtype=np.float32, initial_value=0.0, name="w")
    cost = ng.square(ng.dot(w, inputs["x"]) - inputs["y"])
    return train, inputs, w, cost, xs


@pytest.mark.parametrize("h5", [True, False])
def test_loop_train_records_costs_and_eval_losses(transformer, tmp_path, monkeypatch, h5):
    if h5:
        h5py = pytest.importorskip("h5py")
    else:
        monkeypatch.setitem(sys.modules, "h5py", None)        # as if h5py were not installed
    from axgraph.frontends.neon import GradientDescentMomentum

    train, inputs, w, cost, xs = regression()
    step = GradientDescentMomentum(0.1)(cost)
    train_comp = make_bound_computation(transformer, {"batch_cost": ng.mean(cost, out_axes=()),
                                                      "updates": step}, inputs)
    loss_comp = make_bound_computation(transformer, {"sq": cost}, inputs)
    valid = ArrayIterator({"x": xs, "y": 2 * xs[:, 0]}, 4)
    output = str(tmp_path / "history.h5") if h5 else None
    cbs = make_default_callbacks(output, 3, train_comp, 6, eval_set=valid,
                                 loss_computation=loss_comp, use_progress_bar=False)
    loop_train(train, train_comp, cbs)
    # By hand: w steps by -0.1 * mean(2 (w x - y) x) on each batch (batches wrap around).
    w_now, expected_costs = 0.0, []
    order = np.concatenate([np.arange(10)] * 3)[:24].reshape(6, 4)
    for batch in order:
        x, y = xs[batch, 0], 2 * xs[batch, 0]
        expected_costs.append(np.mean((w_now * x - y) ** 2))
        w_now -= 0.1 * np.mean(2 * (w_now * x - y) * x)
    history = cbs.callback_data
    np.testing.assert_allclose(history["cost/train"][:], expected_costs, rtol=1e-5)
    final_sq = np.mean((w_now * xs[:, 0] - 2 * xs[:, 0]) ** 2)       # over the 10 examples once
    np.testing.assert_allclose(history["cost/sq"][1], final_sq, rtol=1e-5)
    assert history["config"].attrs["total_iterations"] == 6
    if h5:
        cbs.close()
        with h5py.File(output, "r") as saved:
            np.testing.assert_allclose(saved["cost/train"][:], expected_costs, rtol=1e-5)
            assert list(saved["cost"]) == ["sq", "train"] and saved["time/loss"].shape == (2,)
    else:
        assert isinstance(history, MemoryGroup)
        with pytest.raises(CallbackDataError, match="h5py"):
            make_default_callbacks("somewhere.h5", 3, train_comp, 6)


def test_loop_eval_counts_each_example_once(transformer):
    N = ng.make_axis(4, name="N")
    label = ng.placeholder([N])
    valid = ArrayIterator({"label": np.arange(10.0)}, 4)      # 3 batches: the last wraps around
    comp = make_bound_computation(transformer, {"value": label * 1.0,
                                                "total": ng.sum(label, out_axes=())},
                                  {"label": label})
    result = loop_eval(valid, comp)
    assert result["value"] == pytest.approx(4.5)             # mean of 0..9, not of 0..9, 0, 1
    assert result["total"] == pytest.approx((6 + 22 + 18) / 3)  # one value per batch


def test_bound_computation_names_missing_inputs(transformer):
    x = ng.placeholder([ng.make_axis(2, name="N")])
    comp = make_bound_computation(transformer, {"y": x + 1}, {"image": x})
    assert comp({"image": np.zeros(2)})["y"].tolist() == [1.0, 1.0]
    with pytest.raises(ng.FeedError, match="image"):
        comp({"label": np.zeros(2)})


def test_argparser_has_the_v04_options(tmp_path):
    config = tmp_path / "neon.cfg"
    config.write_text("batch_size = 16  # from the file\nno_progress_bar = true\n")
    args = NgraphArgparser().parse_args(["-c", str(config), "-t", "7", "--iter_interval", "3",
                                         "-r", "2", "-w", "/data", "-o", "out.h5"])
    assert (args.batch_size, args.num_iterations, args.iter_interval, args.rng_seed) == \
        (16, 7, 3, 2)
    assert (args.data_dir, args.output_file, args.progress_bar) == ("/data", "out.h5", False)
    defaults = NgraphArgparser().parse_args([])
    assert (defaults.batch_size, defaults.num_iterations, defaults.output_file) == \
        (128, 2000, None)
    assert defaults.progress_bar and defaults.backend in ng.transformers.transformer_choices()


def test_argparser_backend_sets_the_default_transformer():
    import axgraph.transformers as ngt

    previous = ngt.get_transformer_factory()
    try:
        NgraphArgparser().parse_args(["-b", "interpreter"])
        with ngt.make_transformer() as t:
            assert t.transformer_name == "interpreter"
    finally:
        ngt.set_transformer_factory(previous)


def test_recurrent_and_lookup_take_v04_arguments():
    from axgraph.frontends.neon import LookupTable, Recurrent, Tanh

    layer = Recurrent(4, ConstantInit(0.1), None, Tanh(), True, False)   # reset_cells, return_seq
    assert layer.reset_cells and not layer.return_sequence
    T, N = ng.make_axis(3, name="REC"), ng.make_axis(2, name="N")
    frozen = LookupTable(5, 2, ConstantInit(0.5), False)                  # update=False
    frozen(ng.placeholder([T, N], dtype=np.int32))
    assert frozen.variables() == [] and not frozen.W.trainable


# -- v0.4's 5-d images (C, D, H, W, N) with 2-d filter and pool shapes -------------------------

def image_axes_5d(c=2, h=6, w=5, n=3):
    return (ng.make_axis(c, name="C", roles=[ar.Channel]),
            ng.make_axis(1, name="D", roles=[ar.Depth]),
            ng.make_axis(h, name="H", roles=[ar.Height]),
            ng.make_axis(w, name="W", roles=[ar.Width]),
            ng.make_axis(n, name="N"))


def conv2d_reference(image, filters, stride, pad):
    """Cross-correlation of image (C, H, W, N) with filters (K, C, R, S), by loops."""
    padded = np.pad(image, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    k_count, _, r, s = filters.shape
    rows = (padded.shape[1] - r) // stride + 1
    cols = (padded.shape[2] - s) // stride + 1
    out = np.zeros((k_count, rows, cols, image.shape[3]))
    for k in range(k_count):
        for p in range(rows):
            for q in range(cols):
                window = padded[:, p * stride:p * stride + r, q * stride:q * stride + s, :]
                out[k, p, q] = np.einsum("crsn,crs->n", window, filters[k])
    return out


def pool2d_reference(image, size, stride, reduce):
    """reduce over size x size windows of image (C, H, W, N) at `stride`."""
    rows = (image.shape[1] - size) // stride + 1
    cols = (image.shape[2] - size) // stride + 1
    out = np.zeros((image.shape[0], rows, cols, image.shape[3]))
    for p in range(rows):
        for q in range(cols):
            window = image[:, p * stride:p * stride + size, q * stride:q * stride + size]
            out[:, p, q] = reduce(window, axis=(1, 2))
    return out


@pytest.mark.parametrize("fshape", [(3, 2, 4), (3, 4)], ids=["RSK", "R=S,K"])
def test_convolution_with_a_2d_filter_shape_on_5d_images(transformer, rng, fshape):
    C, D, H, W, N = image_axes_5d()
    x = ng.placeholder([C, D, H, W, N], dtype=F64)
    r, s = fshape[0], fshape[-2] if len(fshape) == 3 else fshape[0]
    filters = rng.normal(size=(4, 2, 1, r, s))   # (K, C, T, R, S): T = 1
    conv = Convolution(fshape, filter_init=filters, strides=2, padding=1)
    y = conv(x)
    assert conv.W.axes.lengths == (4, 2, 1, r, s)
    # An int padding is for height and width: depth stays 1 (not 1 + 2).
    assert y.axes.lengths == (4, 1, (6 + 2 - r) // 2 + 1, (5 + 2 - s) // 2 + 1, 3)  # K M P Q N
    xv = rng.normal(size=(2, 1, 6, 5, 3))
    got = transformer.computation(y, x)(xv)
    expected = conv2d_reference(xv[:, 0], filters[:, :, 0], stride=2, pad=1)
    np.testing.assert_allclose(got[:, 0], expected, rtol=1e-10, atol=1e-12)
    # ngraph's dicts without a depth entry: depth stride 1, no depth padding.
    by_dict = Convolution(fshape, filter_init=filters, strides={"str_h": 2, "str_w": 2},
                          padding={"pad_h": 1, "pad_w": 1})
    np.testing.assert_allclose(transformer.computation(by_dict(x), x)(xv), got, rtol=1e-12)


@pytest.mark.parametrize("op, reduce", [("max", np.max), ("avg", np.mean)])
def test_pool2d_with_an_int_window_on_5d_images(transformer, rng, op, reduce):
    C, D, H, W, N = image_axes_5d(h=6, w=7)
    x = ng.placeholder([C, D, H, W, N], dtype=F64)
    y = Pool2D(2, strides=2, op=op)(x)
    assert y.axes.lengths == (2, 1, 3, 3, 3)
    xv = rng.normal(size=(2, 1, 6, 7, 3))
    got = transformer.computation(y, x)(xv)
    np.testing.assert_allclose(got[:, 0], pool2d_reference(xv[:, 0], 2, 2, reduce), rtol=1e-12)
    padded = Pool2D((3, 3), strides=1, padding=1)(x)  # int padding: height and width only
    assert padded.axes.lengths == (2, 1, 6, 7, 3)


def test_the_cifar10_conv_model_of_v04_on_5d_images(transformer, rng):
    """v0.4's examples/cifar10/cifar10_conv.py model, on small images: it builds, runs and
    gives a distribution per example."""
    C, H, W = (ng.make_axis(n, name=name, roles=[role]) for n, name, role in
               ((3, "C", ar.Channel), (12, "H", ar.Height), (12, "W", ar.Width)))
    D, N, Y = (ng.make_axis(1, name="D", roles=[ar.Depth]), ng.make_axis(2, name="N"),
               ng.make_axis(10, name="Y"))

    def mean_subtract(x):
        bgr_mean = ng.persistent_tensor(axes=x.axes[0], initial_value=np.array([104., 119., 127.]))
        return ng.expand_dims((x - bgr_mean) / 255., D, 1)

    init = UniformInit(-0.1, 0.1)
    model = Sequential([Preprocess(functor=mean_subtract),
                        Convolution((3, 3, 4), filter_init=init, activation=Rectlin()),
                        Pool2D(2, strides=2),
                        Affine(nout=5, weight_init=init, activation=Rectlin()),
                        Affine(axes=Y, weight_init=init, activation=Softmax())])
    image = ng.placeholder([C, H, W, N])
    probabilities = model.train_outputs(image)
    assert probabilities.axes.lengths == (10, 2)
    got = transformer.computation(probabilities, image)(rng.uniform(0, 255, (3, 12, 12, 2)))
    np.testing.assert_allclose(got.sum(axis=0), 1.0, rtol=1e-5)
    assert (got > 0).all()


# -- BatchNorm's running statistics start where v0.4's did ----------------------------------------

def test_batchnorm_inference_before_training_uses_running_mean_and_variance_of_one(transformer,
                                                                                   rng):
    F, N = ng.make_axis(3, name="F"), ng.make_axis(4, name="N")
    x = ng.placeholder([F, N], dtype=F64)
    bn = BatchNorm(rho=0.9, eps=1e-3)
    bn(x)
    with bn.inference_mode_on():
        y = bn(x)
    xv = rng.normal(size=(3, 4))
    got = transformer.computation(y, x)(xv)
    np.testing.assert_allclose(got, (xv - 1.0) / np.sqrt(1.0 + 1e-3), rtol=1e-12)
    np.testing.assert_array_equal(transformer.computation(bn.gmean)(), np.ones(3))


# -- name scopes name what is stored on them as scope.attr -----------------------------------------

def test_variables_stored_on_a_name_scope_are_named_scope_dot_attr(transformer):
    A = ng.make_axis(3, name="A")
    with ng.name_scope("layer") as layer:
        layer.W = ng.variable([A], initial_value=np.arange(3.0))
        layer.b = ng.variable([A], initial_value=1.0, name="given")  # v0.4 renamed these too
        inner = ng.name_scope("inner")
        inner.c = ng.constant(2.0)
        layer.N = ng.make_axis(4)  # an axis keeps the attribute's name alone
    assert (layer.W.name, layer.b.name) == ("layer.W", "layer.b")
    assert (inner.name, inner.c.name) == ("layer.inner", "layer.inner.c")
    assert layer.N.name == "N" and layer.N.is_batch
    unnamed = ng.make_name_scope()
    unnamed.w = ng.variable([A], initial_value=0.0)
    assert unnamed.w.name == "w"
    total = transformer.computation(layer.W + layer.b * inner.c)()
    np.testing.assert_array_equal(total, np.arange(3.0) + 2.0)
