"""TensorFlow import, op by op: each family (binary, unary, constant, matmul, nn,
reduction, transform, variable, gradient) runs in axgraph as in TF's own session.

Each case builds a small graph with ``tf.compat.v1``, runs it in a TF session (the
reference), imports the GraphDef and computes the same tensors in axgraph; the
values and shapes must agree to float32 tolerances.
"""
from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

import axgraph as ng

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TF's start-up logs, in tests only
tf = pytest.importorskip("tensorflow.compat.v1")
tf.disable_v2_behavior()

from axgraph.frontends.tensorflow import TFImporter  # noqa: E402

rng = np.random.default_rng(0)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def compare(build, transformers=("numpy",), rtol=1e-5, atol=1e-6):
    """Build a graph with `build()` -> (targets, feed_dict) and check axgraph against TF.

    Variables are initialized by running the imported init op first.
    """
    with tf.Graph().as_default() as graph:
        targets, feeds = build()
        init = tf.global_variables_initializer()
    targets = list(targets) if isinstance(targets, (list, tuple)) else [targets]
    with tf.Session(graph=graph) as session:
        session.run(init)
        expected = session.run(targets, feed_dict=feeds)
    importer = TFImporter()
    importer.import_graph_def(graph.as_graph_def())
    ng_targets = importer.get_op_handle(targets)
    placeholders = importer.get_op_handle(list(feeds))
    for name in transformers:
        with ng.make_transformer(name) as transformer:
            if graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES):
                transformer.computation(importer.get_op_handle(init))()
            results = transformer.computation(ng_targets, *placeholders)(*feeds.values())
        for got, want in zip(results, expected):
            assert np.shape(got) == np.shape(want)
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    return expected


# --- binary ----------------------------------------------------------------------------

BINARY = {
    "add": tf.add, "sub": tf.subtract, "mul": tf.multiply, "div": tf.divide,
    "maximum": tf.maximum, "minimum": tf.minimum, "squared_difference": tf.squared_difference,
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)),
                                    ((3, 4), ())])
def test_binary_ops_broadcast_as_numpy(name, shapes):
    a_shape, b_shape = shapes
    a, b = randn(*a_shape), randn(*b_shape) + (3.0 if name == "div" else 0.0)

    def build():
        x = tf.placeholder(tf.float32, a_shape)
        y = tf.placeholder(tf.float32, b_shape)
        return BINARY[name](x, y), {x: a, y: b}

    compare(build)


def test_binary_op_with_a_constant_operand():
    def build():
        x = tf.placeholder(tf.float32, (2, 3))
        return [x + tf.constant([1.0, 2.0, 3.0]), 2.0 * x - 1.0, x / 4.0], {x: randn(2, 3)}

    compare(build)


def test_comparisons_give_booleans():
    def build():
        x = tf.placeholder(tf.float32, (5,))
        return [tf.greater(x, 0.0), tf.less_equal(x, 0.5), tf.cast(tf.equal(x, x), tf.float32)], \
            {x: randn(5)}

    compare(build)


# --- unary -----------------------------------------------------------------------------

UNARY = {
    "neg": (tf.negative, randn), "square": (tf.square, randn),
    "sqrt": (tf.sqrt, lambda *s: np.abs(randn(*s)) + 0.1),
    "rsqrt": (tf.rsqrt, lambda *s: np.abs(randn(*s)) + 0.1),
    "exp": (tf.exp, randn), "log": (tf.log, lambda *s: np.abs(randn(*s)) + 0.1),
    "tanh": (tf.tanh, randn), "sigmoid": (tf.sigmoid, randn), "relu": (tf.nn.relu, randn),
    "relu6": (tf.nn.relu6, lambda *s: 5 * randn(*s)), "abs": (tf.abs, randn),
    "reciprocal": (tf.reciprocal, lambda *s: np.abs(randn(*s)) + 0.5),
    "leaky_relu": (tf.nn.leaky_relu, randn), "elu": (tf.nn.elu, randn),
    "softplus": (tf.nn.softplus, randn),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_ops(name):
    function, make = UNARY[name]

    def build():
        x = tf.placeholder(tf.float32, (3, 4))
        return function(x), {x: make(3, 4)}

    compare(build)


# --- constant --------------------------------------------------------------------------

def test_constants_and_fills_are_computed_at_import():
    value = randn(2, 3)

    def build():
        return [tf.constant(value), tf.zeros([2, 3]), tf.ones([4]), tf.fill([2, 2], 7.0),
                tf.constant(5.0), tf.range(0, 6, 2)], {}

    compare(build)


def test_random_free_constant_graph_needs_no_feeds():
    def build():
        a = tf.constant(randn(3, 4))
        b = tf.constant(randn(4, 2))
        return tf.matmul(a, b) + 1.0, {}

    compare(build)


# --- matmul ----------------------------------------------------------------------------

@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_matmul_with_transposes(transpose_a, transpose_b):
    a = randn(4, 3) if transpose_a else randn(3, 4)
    b = randn(5, 4) if transpose_b else randn(4, 5)

    def build():
        x = tf.placeholder(tf.float32, a.shape)
        y = tf.placeholder(tf.float32, b.shape)
        return tf.matmul(x, y, transpose_a=transpose_a, transpose_b=transpose_b), {x: a, y: b}

    compare(build, transformers=("numpy", "cpu"))


def test_matmul_of_a_matrix_with_itself_and_batched():
    a, batch = randn(3, 3), randn(2, 3, 4)

    def build():
        x = tf.placeholder(tf.float32, a.shape)
        y = tf.placeholder(tf.float32, batch.shape)
        return [tf.matmul(x, x), tf.matmul(tf.tile(tf.expand_dims(x, 0), [2, 1, 1]), y)], \
            {x: a, y: batch}

    compare(build)


# --- nn --------------------------------------------------------------------------------

def test_softmax_and_log_softmax_over_the_last_dimension():
    def build():
        x = tf.placeholder(tf.float32, (4, 5))
        return [tf.nn.softmax(x), tf.nn.log_softmax(x)], {x: 3 * randn(4, 5)}

    compare(build)


def test_bias_add():
    def build():
        x = tf.placeholder(tf.float32, (2, 3, 4))
        return tf.nn.bias_add(x, tf.constant(randn(4))), {x: randn(2, 3, 4)}

    compare(build)


def test_softmax_cross_entropies_dense_and_sparse():
    labels = rng.integers(0, 5, 6).astype(np.int32)

    def build():
        logits = tf.placeholder(tf.float32, (6, 5))
        dense = tf.placeholder(tf.float32, (6, 5))
        sparse = tf.placeholder(tf.int32, (6,))
        return [tf.nn.softmax_cross_entropy_with_logits_v2(labels=dense, logits=logits),
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=sparse, logits=logits)], \
            {logits: 2 * randn(6, 5), dense: np.eye(5, dtype=np.float32)[labels],
             sparse: labels}

    compare(build)


# --- reduction -------------------------------------------------------------------------

REDUCTIONS = {"sum": tf.reduce_sum, "mean": tf.reduce_mean, "max": tf.reduce_max,
              "min": tf.reduce_min, "prod": tf.reduce_prod}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("indices", [None, [0], [1, 2], [-1]])
@pytest.mark.parametrize("keep_dims", [False, True])
def test_reductions(name, indices, keep_dims):
    def build():
        x = tf.placeholder(tf.float32, (2, 3, 4))
        return REDUCTIONS[name](x, axis=indices, keepdims=keep_dims), {x: randn(2, 3, 4)}

    compare(build)


def test_argmax_and_argmin_as_an_accuracy_computes_them():
    labels = rng.integers(0, 4, 6)

    def build():
        logits = tf.placeholder(tf.float32, (6, 4))
        t = tf.placeholder(tf.float32, (6, 4))
        correct = tf.equal(tf.argmax(logits, 1), tf.argmax(t, 1))
        return [tf.reduce_mean(tf.cast(correct, tf.float32)), tf.argmin(logits, 0),
                tf.argmax(logits, -1, output_type=tf.int32)], \
            {logits: randn(6, 4), t: np.eye(4, dtype=np.float32)[labels]}

    compare(build)


def test_v04_reduction_indices_spelling():
    def build():
        x = tf.placeholder(tf.float32, (3, 4))
        return tf.reduce_sum(x, reduction_indices=[1], keep_dims=True), {x: randn(3, 4)}

    compare(build)


# --- transform -------------------------------------------------------------------------

def test_reshape_transpose_expand_squeeze():
    def build():
        x = tf.placeholder(tf.float32, (2, 3, 4))
        return [tf.reshape(x, [6, 4]), tf.reshape(x, [2, -1]), tf.reshape(x, [4, 3, 2]),
                tf.reshape(x, [24]), tf.transpose(x, [2, 0, 1]), tf.transpose(x),
                tf.expand_dims(x, 1), tf.squeeze(tf.expand_dims(x, -1), [3]),
                tf.reshape(x, [2, 1, 12])], {x: randn(2, 3, 4)}

    compare(build)


def test_concat_pack_tile_and_likes():
    def build():
        x = tf.placeholder(tf.float32, (2, 3))
        y = tf.placeholder(tf.float32, (2, 5))
        return [tf.concat([x, y], 1), tf.concat([x, x], 0), tf.stack([x, x * 2.0]),
                tf.stack([x, x], axis=2), tf.tile(x, [2, 3]), tf.zeros_like(x), tf.ones_like(y),
                tf.identity(x), tf.fill([2, 3], tf.reduce_sum(x))], \
            {x: randn(2, 3), y: randn(2, 5)}

    compare(build)


def test_shape_of_a_tensor_and_cast():
    def build():
        x = tf.placeholder(tf.float32, (2, 3))
        return [tf.shape(x), tf.size(x), tf.cast(x * 3.0, tf.int32), tf.cast(x, tf.float64)], \
            {x: randn(2, 3)}

    compare(build)


def test_strided_slices():
    def build():
        x = tf.placeholder(tf.float32, (4, 5, 3))
        return [x[1], x[1:3], x[:, 2:], x[::2, 1:4, :], x[-1, :, 0], x[:, -2]], \
            {x: randn(4, 5, 3)}

    compare(build)


# --- variable --------------------------------------------------------------------------

@pytest.mark.parametrize("use_resource", [False, True])
def test_variables_are_initialized_by_the_init_op(use_resource):
    start = randn(3, 2)

    def build():
        x = tf.placeholder(tf.float32, (4, 3))
        w = tf.get_variable("w", initializer=start, use_resource=use_resource)
        b = tf.get_variable("b", [2], initializer=tf.ones_initializer(),
                            use_resource=use_resource)
        return [tf.matmul(x, w) + b, w], {x: randn(4, 3)}

    compare(build)


@pytest.mark.parametrize("use_resource", [False, True])
def test_scatter_update_writes_rows_and_keeps_the_last_of_a_repeated_index(use_resource):
    start, rows = randn(5, 3), randn(4, 3)
    graph = tf.Graph()
    with graph.as_default():
        table = tf.get_variable("table", initializer=start, use_resource=use_resource)
        updates = tf.placeholder(tf.float32, (4, 3))
        update = tf.scatter_update(table, [3, 0, 3, 1], updates)  # row 3 twice: the last wins
        init = tf.global_variables_initializer()
    assert {"ScatterUpdate", "ResourceScatterUpdate"} & {op.type for op in graph.get_operations()}
    with tf.Session(graph=graph) as session:
        session.run(init)
        session.run(update, {updates: rows})
        want = session.run(table)
    expected = start.copy()
    expected[[0, 1, 3]] = rows[[1, 3, 2]]
    np.testing.assert_array_equal(want, expected)  # TF's own kernel keeps the last row
    importer = TFImporter()
    importer.import_graph_def(graph.as_graph_def())
    init_ng, update_ng, updates_ng, table_ng = importer.get_op_handle([init, update, updates,
                                                                      table])
    for name in ("numpy", "cpu"):
        with ng.make_transformer(name) as transformer:
            transformer.computation(init_ng)()
            transformer.computation(update_ng, updates_ng)(rows)
            np.testing.assert_array_equal(transformer.computation(table_ng)(), want)


@pytest.mark.parametrize("use_resource, nesterov", [(False, False), (True, False), (False, True),
                                                    (True, True)])
def test_momentum_steps_on_an_embedding_and_a_dense_weight_agree_with_tf(use_resource, nesterov):
    # the sparse step reads TF's Unique-merged rows: the importer sums repeated ids itself
    words = np.array([[1, 4, 1], [5, 4, 4]], np.int32)
    start = randn(7, 3)
    graph = tf.Graph()
    with graph.as_default():
        ids = tf.placeholder(tf.int32, words.shape)
        table = tf.get_variable("table", initializer=start, use_resource=use_resource)
        w = tf.get_variable("w", initializer=randn(3, 2), use_resource=use_resource)
        logits = tf.matmul(tf.reduce_mean(tf.nn.embedding_lookup(table, ids), axis=1), w)
        cost = tf.reduce_sum(tf.square(logits - 1.0))
        train = tf.train.MomentumOptimizer(0.05, 0.9, use_nesterov=nesterov).minimize(cost)
        init = tf.global_variables_initializer()
    types = {op.type for op in graph.get_operations()}
    assert "Unique" in types and types & {"SparseApplyMomentum", "ResourceSparseApplyMomentum"}
    with tf.Session(graph=graph) as session:
        session.run(init)
        for _ in range(3):
            session.run(train, {ids: words})
        want = session.run([cost, table, w], {ids: words})
    importer = TFImporter()
    importer.import_graph_def(graph.as_graph_def())
    assert importer.unsupported_ops() == []
    ids_ng, cost_ng, train_ng, init_ng, table_ng, w_ng = importer.get_op_handle(
        [ids, cost, train, init, table, w])
    for name in ("numpy", "cpu"):
        with ng.make_transformer(name) as transformer:
            transformer.computation(init_ng)()
            step = transformer.computation(train_ng, ids_ng)
            for _ in range(3):
                step(words)
            got = transformer.computation([cost_ng, table_ng, w_ng], ids_ng)(words)
        for g, e in zip(got, want):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    unused = [0, 2, 3, 6]
    np.testing.assert_array_equal(want[1][unused], start[unused])  # rows no id names
    assert not np.isclose(want[1][[1, 4, 5]], start[[1, 4, 5]]).any()


@pytest.mark.parametrize("use_resource", [False, True])
def test_a_sparse_momentum_step_called_directly_agrees_with_tf_or_refuses_repeats(use_resource):
    # without the optimizer's de-duplication TF applies a repeated id's rows one step
    # after another; the import sums by id, so it refuses repeats when the step runs
    start = randn(5, 3)
    distinct, repeated = np.array([3, 1], np.int32), np.array([3, 1, 3], np.int32)
    results = {}
    for ids_value in (distinct, repeated):
        rows = randn(len(ids_value), 3)
        graph = tf.Graph()
        with graph.as_default():
            ids = tf.placeholder(tf.int32, ids_value.shape)
            grads = tf.placeholder(tf.float32, rows.shape)
            var = tf.get_variable("var", initializer=start, use_resource=use_resource)
            accum = tf.get_variable("accum", initializer=np.zeros_like(start),
                                    use_resource=use_resource)
            if use_resource:
                step = tf.raw_ops.ResourceSparseApplyMomentum(
                    var=var.handle, accum=accum.handle, lr=0.1, grad=grads, indices=ids,
                    momentum=0.9)
            else:
                step = tf.raw_ops.SparseApplyMomentum(
                    var=var._ref(), accum=accum._ref(), lr=0.1, grad=grads, indices=ids,
                    momentum=0.9)
            init = tf.global_variables_initializer()
        with tf.Session(graph=graph) as session:
            session.run(init)
            for _ in range(2):
                session.run(step, {ids: ids_value, grads: rows})
            want = session.run(var)
        importer = TFImporter()
        importer.import_graph_def(graph.as_graph_def())
        handles = importer.get_op_handle([ids, grads, step, init, var])
        results[len(ids_value)] = (want, rows, handles)
    for name in ["numpy", "cpu"] + (["jax"] if importlib.util.find_spec("jax") else []):
        want, rows, (ids_ng, grads_ng, step_ng, init_ng, var_ng) = results[len(distinct)]
        with ng.make_transformer(name) as transformer:
            transformer.computation(init_ng)()
            step = transformer.computation(step_ng, ids_ng, grads_ng)
            for _ in range(2):
                step(distinct, rows)
            np.testing.assert_allclose(transformer.computation(var_ng)(), want, rtol=1e-6,
                                       atol=1e-7)
        _, rows, (ids_ng, grads_ng, step_ng, init_ng, var_ng) = results[len(repeated)]
        with ng.make_transformer(name) as transformer:
            transformer.computation(init_ng)()
            with pytest.raises(ng.ExecutionError) as failure:
                transformer.computation(step_ng, ids_ng, grads_ng)(repeated, rows)
            message = str(failure.value)
            assert "SparseApplyMomentum node" in message and "index repeats" in message
            assert message.splitlines()[0].endswith("The most repeated index:] [3]"), message
            assert __file__ in message
            # nothing was written
            np.testing.assert_array_equal(transformer.computation(var_ng)(), start)


# --- gradient --------------------------------------------------------------------------

def test_relu_gradient_of_constants_v04():
    # v0.4's gradient test: d/da of relu(a) @ ones, for random a and for zeros
    for value in (randn(1, 10), np.zeros((1, 10), np.float32)):
        def build(value=value):
            a = tf.constant(value)
            b = tf.constant(np.ones((10, 1), np.float32))
            f = tf.matmul(tf.nn.relu(a), b)
            return tf.gradients(f, a)[0], {}

        compare(build)


ACTIVATIONS = {"relu": tf.nn.relu, "sigmoid": tf.sigmoid, "tanh": tf.tanh, "relu6": tf.nn.relu6,
               "leaky_relu": tf.nn.leaky_relu, "elu": tf.nn.elu, "softplus": tf.nn.softplus}


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_gradients_of_a_two_layer_net(activation):
    function = ACTIVATIONS[activation]
    labels = rng.integers(0, 4, 8).astype(np.int32)

    def build():
        x = tf.placeholder(tf.float32, (8, 5))
        t = tf.placeholder(tf.int32, (8,))
        w1 = tf.Variable(randn(5, 6))
        b1 = tf.Variable(randn(6))
        w2 = tf.Variable(randn(6, 4))
        hidden = function(tf.nn.bias_add(tf.matmul(x, w1), b1))
        logits = tf.matmul(hidden, w2)
        cost = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=t, logits=logits))
        return [cost] + tf.gradients(cost, [w1, b1, w2, x]), {x: randn(8, 5), t: labels}

    compare(build, transformers=("numpy", "cpu", "jax"), atol=1e-5)


def test_gradients_through_broadcasts_reductions_and_shapes():
    def build():
        x = tf.placeholder(tf.float32, (3, 4))
        v = tf.placeholder(tf.float32, (4,))
        y = tf.reduce_sum(tf.square(x - v), reduction_indices=[1], keep_dims=True)
        z = tf.reduce_mean(tf.sqrt(y + 1.0) * tf.exp(-tf.reshape(tf.transpose(x), [2, 6])[0, 0]))
        return tf.gradients(z, [x, v]), {x: randn(3, 4), v: randn(4)}

    compare(build, atol=1e-5)


def test_gradients_of_softmax_log_and_division():
    def build():
        x = tf.placeholder(tf.float32, (4, 3))
        t = tf.placeholder(tf.float32, (4, 3))
        cost = tf.reduce_mean(-tf.reduce_sum(t * tf.log(tf.nn.softmax(x)), reduction_indices=[1]))
        other = tf.reduce_sum(tf.maximum(x, 0.1) / (tf.abs(x) + 1.0))
        return tf.gradients(cost, x) + tf.gradients(other, x), \
            {x: randn(4, 3), t: np.eye(3, dtype=np.float32)[[0, 2, 1, 1]]}

    compare(build, atol=1e-5)


# --- convolution and pooling (NHWC) ----------------------------------------------------

@pytest.mark.parametrize("padding", ["VALID", "SAME"])
@pytest.mark.parametrize("strides", [1, 2])
def test_conv2d(padding, strides):
    images, filters = randn(2, 7, 6, 3), randn(3, 2, 3, 4)

    def build():
        x = tf.placeholder(tf.float32, images.shape)
        w = tf.constant(filters)
        return tf.nn.conv2d(x, w, strides=[1, strides, strides, 1], padding=padding), \
            {x: images}

    compare(build, transformers=("numpy", "cpu"), atol=1e-5)


def test_conv2d_with_dilation_and_a_bias():
    images, filters = randn(1, 8, 8, 2), randn(3, 3, 2, 5)

    def build():
        x = tf.placeholder(tf.float32, images.shape)
        y = tf.nn.conv2d(x, tf.constant(filters), strides=[1, 1, 1, 1], padding="SAME",
                         dilations=[1, 2, 2, 1])
        return tf.nn.relu(tf.nn.bias_add(y, tf.constant(randn(5)))), {x: images}

    compare(build, atol=1e-5)


@pytest.mark.parametrize("pool", ["max", "avg"])
@pytest.mark.parametrize("padding, size", [("VALID", 6), ("SAME", 6), ("SAME", 5)])
def test_pooling(pool, padding, size):
    images = randn(2, size, size, 3)
    function = tf.nn.max_pool if pool == "max" else tf.nn.avg_pool
    window, stride = (2, 2) if size % 2 == 0 else (3, 2)

    def build():
        x = tf.placeholder(tf.float32, images.shape)
        return function(x, ksize=[1, window, window, 1], strides=[1, stride, stride, 1],
                        padding=padding), {x: images}

    compare(build)


@pytest.mark.parametrize("pool", ["max", "avg"])
@pytest.mark.parametrize("size, window, stride", [(7, 2, 2), (7, 3, 2), (6, 3, 2), (6, 2, 1)])
def test_uneven_same_pooling_and_its_gradient(pool, size, window, stride):
    """SAME padding that TF puts at the end only (7x7 with 2x2/2 gives 4x4): the padded
    row never wins a max nor counts in an average, in the values and in MaxPoolGrad's
    and AvgPoolGrad's gradients."""
    images = randn(2, size, size, 3)
    function = tf.nn.max_pool if pool == "max" else tf.nn.avg_pool

    def build():
        x = tf.placeholder(tf.float32, images.shape)
        y = function(x, ksize=[1, window, window, 1], strides=[1, stride, stride, 1],
                     padding="SAME")
        weights = tf.constant(randn(*y.shape.as_list()))
        return [y, tf.gradients(tf.reduce_sum(y * weights), x)[0]], {x: images}

    compare(build, transformers=("numpy", "cpu"), atol=1e-5)


def test_mnist_sized_pooling_chain_28_14_7_4_trains_as_in_tf():
    images, labels = randn(2, 28, 28, 1), np.array([1, 0], np.int32)

    def build():
        x = tf.placeholder(tf.float32, images.shape)
        t = tf.placeholder(tf.int32, (2,))
        w = tf.Variable(randn(3, 3, 1, 2))
        h = tf.nn.relu(tf.nn.conv2d(x, w, strides=[1, 1, 1, 1], padding="SAME"))
        for _ in range(2):
            h = tf.nn.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
        h = tf.nn.avg_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")  # 7x7 -> 4x4
        logits = tf.reshape(h, [2, 32])[:, :3]
        cost = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=t,
                                                                             logits=logits))
        return [h, cost] + tf.gradients(cost, [w, x]), {x: images, t: labels}

    assert compare(build, transformers=("numpy", "cpu", "jax"), atol=1e-5)[0].shape == \
        (2, 4, 4, 2)


@pytest.mark.parametrize("padding", ["VALID", "SAME"])
def test_gradients_of_a_small_convnet(padding):
    images, labels = randn(2, 6, 6, 2), np.array([1, 0], np.int32)

    def build():
        x = tf.placeholder(tf.float32, images.shape)
        t = tf.placeholder(tf.int32, (2,))
        w = tf.Variable(randn(3, 3, 2, 4))
        hidden = tf.nn.relu(tf.nn.conv2d(x, w, strides=[1, 1, 1, 1], padding=padding))
        pooled = tf.nn.avg_pool(tf.nn.max_pool(hidden, [1, 2, 2, 1], [1, 1, 1, 1], "VALID"),
                                [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
        logits = tf.reduce_sum(pooled, reduction_indices=[1, 2])
        cost = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=t,
                                                                             logits=logits))
        return [cost] + tf.gradients(cost, [w, x]), {x: images, t: labels}

    compare(build, transformers=("numpy", "cpu"), atol=1e-5)


# --- gathers and their IndexedSlices gradients --------------------------------------------

@pytest.mark.parametrize("use_resource", [False, True])
def test_embedding_lookup_and_its_gradient_as_indexed_slices_and_dense(use_resource):
    words = np.array([[1, 3, 1], [0, 9, 3]], np.int32)  # repeated ids: their rows add up

    def build():
        ids = tf.placeholder(tf.int32, words.shape)
        table = tf.Variable(randn(10, 4), use_resource=use_resource)
        embedded = tf.nn.embedding_lookup(table, ids)
        cost = tf.reduce_sum(tf.tanh(tf.tensordot(embedded, tf.constant(randn(4, 2)), 1)))
        gradient = tf.gradients(cost, table)[0]  # IndexedSlices
        return [embedded, cost, gradient.values, gradient.indices,
                tf.convert_to_tensor(gradient)], {ids: words}

    results = compare(build, transformers=("numpy", "cpu", "jax"), atol=1e-5)
    assert not results[-1][[2, 4, 5, 6, 7, 8]].any()  # rows of unused ids: zeros


def test_gather_along_an_axis_with_batch_dims_and_their_gradients():
    picks = np.array([9, 0, 3, 3], np.int32)
    per_row = rng.integers(0, 10, (3, 4)).astype(np.int32)

    def build():
        params = tf.placeholder(tf.float32, (3, 10, 2))
        ids = tf.placeholder(tf.int32, picks.shape)
        batched = tf.placeholder(tf.int32, per_row.shape)
        along = tf.gather(params, ids, axis=1)
        each = tf.gather(params, batched, axis=1, batch_dims=1)
        cost = tf.reduce_sum(along ** 2) + tf.reduce_sum(tf.tanh(each))
        return [along, each] + tf.gradients(cost, params), \
            {params: randn(3, 10, 2), ids: picks, batched: per_row}

    compare(build, transformers=("numpy", "cpu"), atol=1e-5)


def test_unsorted_segment_sum_drops_negative_ids():
    def build():
        data = tf.placeholder(tf.float32, (5, 3))
        ids = tf.placeholder(tf.int32, (5,))
        fed = tf.math.unsorted_segment_sum(data, ids, 4)
        known = tf.math.unsorted_segment_sum(data, tf.constant([2, -1, 0, 2, 3]), 4)
        return [fed, known], {data: randn(5, 3), ids: np.array([3, 0, -1, 3, -2], np.int32)}

    fed, known = compare(build, transformers=("numpy", "cpu"))
    assert not fed[[1, 2]].any() and not known[1].any()


# --- the cases of v0.4's op tests not covered above ---------------------------------------

def test_rank_size_shape_and_range_of_v04s_transform_tests():
    shapes = [(1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)]

    def build():
        xs = [tf.placeholder(tf.float32, s) for s in shapes]
        targets = [f(x) for x in xs for f in (tf.rank, tf.size, tf.shape)]
        return targets + [tf.range(1, 2, 10), tf.range(3, 5, 18)], \
            {x: randn(*s) for x, s in zip(xs, shapes)}

    compare(build)


def test_reshapes_of_a_variable_and_every_expand_dims_position():
    start = randn(3, 4, 5, 6)

    def build():
        x = tf.Variable(start)
        c = tf.constant(randn(2, 3, 5))
        return [tf.reshape(x, s) for s in [(360,), (3, 120), (12, 30), (60, 6)]] + \
            [tf.expand_dims(c, d) for d in range(-4, 4)], {}

    compare(build)


@pytest.mark.parametrize("size", [11, 12])
def test_conv_and_max_pool_with_unequal_strides(size):
    images = randn(2, size, size, 2)

    def build():
        x = tf.placeholder(tf.float32, images.shape)
        w = tf.constant(randn(3, 3, 2, 4))
        outputs = [tf.nn.conv2d(x, w, strides=[1, 2, 3, 1], padding=p) for p in ("SAME", "VALID")]
        outputs.append(tf.nn.max_pool(x, [1, 3, 3, 1], [1, 2, 3, 1], "VALID"))
        return outputs, {x: images}

    compare(build, atol=1e-5)


def test_float64_variables_and_the_value_of_an_assignment():
    a0, b0 = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))  # float64, as in v0.4

    def build(assigning):
        a = tf.Variable(tf.constant(a0))
        b = tf.Variable(tf.constant(b0))
        return (tf.assign_add(a, b) if assigning else tf.add(a, b) * 3), {}

    compare(lambda: build(False))
    np.testing.assert_allclose(compare(lambda: build(True))[0], a0 + b0)


def test_pad_split_unpack_and_one_hot():
    labels = np.array([3, 0, 2], np.int32)

    def build():
        x = tf.placeholder(tf.float32, (3, 6))
        t = tf.placeholder(tf.int32, (3,))
        return [tf.pad(x, [[1, 0], [2, 3]]), tf.pad(x, [[0, 1], [1, 1]], constant_values=2.5),
                *tf.split(x, 3, axis=1), *tf.split(x, [1, 2], axis=0), *tf.unstack(x),
                tf.one_hot(t, 4), tf.one_hot(t, 5, on_value=2.0, off_value=-1.0)], \
            {x: randn(3, 6), t: labels}

    compare(build)
