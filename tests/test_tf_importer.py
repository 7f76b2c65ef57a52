"""TensorFlow import: `TFImporter`'s API (v0.4's), files, state, errors and the examples.

The op-by-op agreement with TF is in test_tf_importer_ops.py; here are the
importer's entry points, variables and their init ops, training written in TF,
the report of unsupported ops, and v0.4's three examples.
"""
from __future__ import annotations

import doctest
import importlib.util
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import axgraph as ng

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TF's start-up logs, in tests only
tf = pytest.importorskip("tensorflow.compat.v1")
tf.disable_v2_behavior()

from axgraph.frontends.tensorflow import (SGDOptimizer, TFImporter,  # noqa: E402
                                          TFImportError, UnsupportedOpError, supported_ops)
from axgraph.frontends.tensorflow import importer as importer_module  # noqa: E402

rng = np.random.default_rng(1)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def small_net():
    """A graph of x @ w + b, its init op, and the feed; built in a fresh TF graph."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, (2, 3), name="x")
        w = tf.Variable(randn(3, 4), name="w")
        b = tf.Variable(tf.ones([4]), name="b")
        y = tf.add(tf.matmul(x, w), b, name="y")
        init = tf.global_variables_initializer()
    return graph, x, w, y, init


def tf_values(graph, fetches, feeds):
    with tf.Session(graph=graph) as session:
        session.run(tf.variables_initializer(graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)))
        return session.run(fetches, feed_dict=feeds)


# --- entry points -------------------------------------------------------------------------

@pytest.mark.parametrize("name, as_text", [("graph.pbtxt", True), ("graph.txt", True),
                                           ("graph.pb", False), ("graph.def", True)])
def test_import_protobuf_files_by_name_as_v04_tests_did(tmp_path, name, as_text):
    graph, x, _, y, init = small_net()
    feed = randn(2, 3)
    expected = tf_values(graph, y, {x: feed})
    tf.train.write_graph(graph.as_graph_def(), str(tmp_path), name, as_text=as_text)
    importer = TFImporter()
    importer.import_protobuf(tmp_path / name)
    y_ng = importer.get_op_handle_by_name("y")
    x_ng = importer.get_op_handle_by_name("x:0")
    with ng.make_transformer("numpy") as transformer:
        transformer.computation(importer.get_op_handle(init))()
        got = transformer.computation(y_ng, x_ng)(feed)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_parse_aliases_are_the_import_methods(tmp_path):
    graph, x, _, y, _ = small_net()
    feed = randn(2, 3)
    expected = tf_values(graph, y, {x: feed})
    tf.train.write_graph(graph.as_graph_def(), str(tmp_path), "g.pbtxt")
    for load in (lambda i: i.parse_graph_def(graph.as_graph_def()),
                 lambda i: i.parse_protobuf(str(tmp_path / "g.pbtxt"))):
        importer = TFImporter()
        load(importer)
        with ng.make_transformer("numpy") as transformer:
            got = transformer.computation(importer.get_op_handle(y),
                                          importer.get_op_handle(x))(feed)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_get_op_handle_of_tensors_ops_variables_and_lists():
    graph, x, w, y, init = small_net()
    importer = TFImporter()
    importer.import_graph_def(graph.as_graph_def())
    x_ng, y_ng = importer.get_op_handle([x, y])
    assert x_ng.is_placeholder and [a.length for a in x_ng.axes] == [2, 3]
    assert [a.length for a in y_ng.axes] == [2, 4]
    assert importer.get_op_handle(y.op) is y_ng
    assert importer.get_op_handle((x, y)) == [x_ng, y_ng]
    w_ng = importer.get_op_handle(w)
    assert w_ng in y_ng.variables()
    assert importer.get_op_handle_by_name("w") is w_ng


def test_ng_make_tf_importer_is_v04s_spelling():
    assert ng.make_tf_importer is TFImporter


def test_the_module_imports_tensorflow_only_when_a_graph_is_imported():
    code = ("import sys, axgraph.frontends.tensorflow as t; "
            "print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.stdout.strip() == "False", out.stderr


def test_the_docstring_example_runs():
    runner = doctest.DocTestRunner()
    for test in doctest.DocTestFinder().find(importer_module.TFImporter, "TFImporter"):
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.attempted > 0 and results.failed == 0


# --- variables, init ops, training written in TF ---------------------------------------

def test_init_op_resets_variables_and_assigns_run_only_when_fetched():
    graph = tf.Graph()
    with graph.as_default():
        w = tf.Variable(tf.zeros([3]), name="w")
        bump = tf.assign_add(w, tf.ones([3]))
        double = tf.assign(w, w * 2.0)
        read = tf.identity(w) + 0.0
        init = tf.global_variables_initializer()
    importer = TFImporter()
    importer.import_graph_def(graph.as_graph_def())
    bump_ng, double_ng, read_ng, init_ng = importer.get_op_handle([bump, double, read, init])
    with tf.Session(graph=graph) as session, ng.make_transformer("numpy") as transformer:
        steps = {"init": (init, transformer.computation(init_ng)),
                 "bump": (bump, transformer.computation(bump_ng)),
                 "double": (double, transformer.computation(double_ng))}
        read_comp = transformer.computation(read_ng)
        for step in ["init", "bump", "bump", "double", "init", "double", "bump"]:
            tf_op, computation = steps[step]
            session.run(tf_op)
            computation()
            np.testing.assert_array_equal(read_comp(), session.run(read))
            np.testing.assert_array_equal(read_comp(), session.run(read))  # reading changes none


def test_variables_hold_their_initial_value_before_the_init_op_runs():
    graph, x, w, y, _ = small_net()
    feed = randn(2, 3)
    importer = TFImporter()
    importer.import_graph_def(graph.as_graph_def())
    with ng.make_transformer("numpy") as transformer:
        got = transformer.computation(importer.get_op_handle(y),
                                      importer.get_op_handle(x))(feed)
    np.testing.assert_allclose(got, tf_values(graph, y, {x: feed}), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("use_resource", [False, True])
def test_a_training_step_written_in_tf_runs_in_axgraph(use_resource):
    # tf.train.GradientDescentOptimizer's step (ApplyGradientDescent) imported with the rest
    graph = tf.Graph()
    xs, ts = randn(6, 4), randn(6, 2)
    with graph.as_default():
        x = tf.placeholder(tf.float32, (6, 4))
        t = tf.placeholder(tf.float32, (6, 2))
        w = tf.get_variable("w", initializer=randn(4, 2), use_resource=use_resource)
        cost = tf.reduce_mean(tf.square(tf.tanh(tf.matmul(x, w)) - t))
        train = tf.train.GradientDescentOptimizer(0.5).minimize(cost)
        init = tf.global_variables_initializer()
    importer = TFImporter()
    importer.import_graph_def(graph.as_graph_def())
    x_ng, t_ng, cost_ng, train_ng, init_ng, w_ng = importer.get_op_handle(
        [x, t, cost, train, init, w])
    with tf.Session(graph=graph) as session, ng.make_transformer("numpy") as transformer:
        session.run(init)
        transformer.computation(init_ng)()
        step = transformer.computation(train_ng, x_ng, t_ng)
        evaluate = transformer.computation([cost_ng, w_ng], x_ng, t_ng)
        for _ in range(4):
            session.run(train, {x: xs, t: ts})
            step(xs, ts)
        want_cost, want_w = session.run([cost, w], {x: xs, t: ts})
        got_cost, got_w = evaluate(xs, ts)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_cost, want_cost, rtol=1e-5)


@pytest.mark.parametrize("use_resource", [False, True])
def test_a_word_embedding_model_trains_with_sparse_updates_as_in_tf(use_resource):
    # GradientDescentOptimizer updates an embedding by its IndexedSlices gradient: ScatterSub
    # (ResourceScatterAdd of the negated step for a resource variable), repeated ids adding up
    words, targets = np.array([[1, 4, 1], [0, 7, 4]], np.int32), np.array([1, 0], np.int32)
    graph = tf.Graph()
    with graph.as_default():
        ids = tf.placeholder(tf.int32, words.shape)
        t = tf.placeholder(tf.int32, (2,))
        start = randn(8, 3)
        table = tf.get_variable("table", initializer=start, use_resource=use_resource)
        w = tf.get_variable("w", initializer=randn(3, 2), use_resource=use_resource)
        logits = tf.matmul(tf.reduce_mean(tf.nn.embedding_lookup(table, ids), axis=1), w)
        cost = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=t,
                                                                             logits=logits))
        train = tf.train.GradientDescentOptimizer(0.5).minimize(cost)
        init = tf.global_variables_initializer()
    assert {"ScatterSub", "ResourceScatterAdd"} & {op.type for op in graph.get_operations()}
    importer = TFImporter()
    importer.import_graph_def(graph.as_graph_def())
    handles = importer.get_op_handle([ids, t, cost, train, init, table, w])
    ids_ng, t_ng, cost_ng, train_ng, init_ng, table_ng, w_ng = handles
    with tf.Session(graph=graph) as session:
        session.run(init)
        for _ in range(4):
            session.run(train, {ids: words, t: targets})
        want = session.run([cost, table, w], {ids: words, t: targets})
    for name in ("numpy", "cpu"):
        with ng.make_transformer(name) as transformer:
            transformer.computation(init_ng)()
            step = transformer.computation(train_ng, ids_ng, t_ng)
            for _ in range(4):
                step(words, targets)
            got = transformer.computation([cost_ng, table_ng, w_ng], ids_ng, t_ng)(words,
                                                                                  targets)
        for g, e in zip(got, want):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    unused, used = [2, 3, 5, 6], [0, 1, 4, 7]
    np.testing.assert_array_equal(want[1][unused], start[unused])  # sparse: only used rows
    assert not np.isclose(want[1][used], start[used]).any()


def test_sgd_optimizer_matches_tf_gradient_descent():
    graph = tf.Graph()
    xs, ts = randn(5, 3), randn(5, 1)
    with graph.as_default():
        x = tf.placeholder(tf.float32, (5, 3))
        t = tf.placeholder(tf.float32, (5, 1))
        w = tf.Variable(randn(3, 1))
        cost = tf.reduce_sum(tf.square(tf.matmul(x, w) - t))
        init = tf.global_variables_initializer()
    importer = TFImporter()
    importer.import_graph_def(graph.as_graph_def())
    x_ng, t_ng, cost_ng, init_ng = importer.get_op_handle([x, t, cost, init])
    got = []
    with ng.make_transformer("numpy") as transformer:
        train = transformer.computation([cost_ng, SGDOptimizer(0.05).minimize(cost_ng)],
                                        x_ng, t_ng)
        transformer.computation(init_ng)()
        got = [float(train(xs, ts)[0]) for _ in range(5)]
    with graph.as_default(), tf.Session() as session:
        step = tf.train.GradientDescentOptimizer(0.05).minimize(cost)
        session.run(init)
        want = [float(session.run([cost, step], {x: xs, t: ts})[0]) for _ in range(5)]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert want[-1] < want[0]


# --- errors ----------------------------------------------------------------------------

def test_an_unsupported_op_is_named_with_its_node_and_the_supported_ones():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, (3,), name="x")
        total = tf.math.cumsum(x, name="running_total")
        after = tf.multiply(total, 2.0, name="doubled")
        fine = tf.square(x)
    importer = TFImporter()
    importer.import_graph_def(graph.as_graph_def())  # the rest of the graph imports
    assert importer.unsupported_ops() == ["Cumsum"]
    with pytest.raises(UnsupportedOpError) as caught:
        importer.get_op_handle(total)
    message = str(caught.value)
    assert message.startswith("TF Cumsum node 'running_total': op type Cumsum is not supported")
    assert "MatMul" in message and "SparseSoftmaxCrossEntropyWithLogits" in message
    assert __file__ in message  # where the user asked for it
    with pytest.raises(UnsupportedOpError, match="'doubled:0' depends on 'running_total'.*"
                                                 "Cumsum is not supported"):
        importer.get_op_handle(after)
    with ng.make_transformer("numpy") as transformer:
        got = transformer.computation(importer.get_op_handle(fine),
                                      importer.get_op_handle(x))(np.arange(3, dtype=np.float32))
    np.testing.assert_array_equal(got, [0, 1, 4])
    assert "Cumsum" not in supported_ops() and "MatMul" in supported_ops()


def test_a_graph_with_a_saver_imports_and_trains():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, (2, 3))
        w = tf.Variable(randn(3, 1))
        cost = tf.reduce_sum(tf.square(tf.matmul(x, w)))
        init = tf.global_variables_initializer()
        tf.train.Saver()
    importer = TFImporter()
    importer.import_graph(graph)
    assert "SaveV2" in importer.unsupported_ops()
    x_ng, cost_ng, init_ng = importer.get_op_handle([x, cost, init])
    feed = randn(2, 3)
    with ng.make_transformer("numpy") as transformer:
        transformer.computation(init_ng)()
        got = transformer.computation(cost_ng, x_ng)(feed)
    np.testing.assert_allclose(got, tf_values(graph, cost, {x: feed}), rtol=1e-5)


def test_a_placeholder_of_unknown_shape_asks_for_a_full_shape():
    graph = tf.Graph()
    with graph.as_default():
        tf.placeholder(tf.float32, (None, 3), name="batch")
    importer = TFImporter()
    importer.import_graph_def(graph.as_graph_def())
    with pytest.raises(UnsupportedOpError, match="batch.*full shapes"):
        importer.get_op_handle_by_name("batch")


def test_bad_inputs_raise_tf_import_errors(tmp_path):
    importer = TFImporter()
    with pytest.raises(TFImportError, match="tf.GraphDef, not str"):
        importer.import_graph_def("graph.pb")
    with pytest.raises(TFImportError, match="no graph imported"):
        importer.get_op_handle_by_name("x")
    junk = tmp_path / "junk.pb"
    junk.write_bytes(b"\xff\x00 this is no graph {")
    with pytest.raises(TFImportError, match="cannot read a TensorFlow GraphDef"):
        importer.import_protobuf(junk)
    with pytest.raises(TFImportError, match="cannot read"):
        importer.import_protobuf(tmp_path / "missing.pb")
    graph, *_ = small_net()
    importer.import_graph_def(graph.as_graph_def())
    with pytest.raises(TFImportError, match="no op named 'nothing'"):
        importer.get_op_handle_by_name("nothing")
    with pytest.raises(TFImportError, match="TF tensors or ops, not int"):
        importer.get_op_handle(3)


def test_an_op_refusing_a_node_names_the_node():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, (4, 5))
        tf.strided_slice(x, [0, 0], [4, 5], [1, 1], new_axis_mask=1, name="odd_slice")
    importer = TFImporter()
    importer.import_graph_def(graph.as_graph_def())
    assert importer.unsupported_ops() == []  # a rule exists: it refuses this node
    with pytest.raises(UnsupportedOpError, match="StridedSlice node 'odd_slice'.*new_axis_mask"):
        importer.get_op_handle_by_name("odd_slice")


# --- v0.4's examples -------------------------------------------------------------------

def test_minimal_example():
    from examples.tensorflow import minimal

    assert minimal.main() == 3.0


def test_logistic_regression_example_trains_as_tf_does():
    from examples.tensorflow import logistic_regression

    ng_costs, tf_costs = logistic_regression.main(max_iter=6)
    np.testing.assert_allclose(ng_costs, tf_costs, rtol=1e-5)
    assert tf_costs[-1] < tf_costs[0]


def test_mnist_mlp_example_cost_curve_matches_tf():
    from examples.tensorflow import mnist_mlp

    ng_costs, tf_costs = mnist_mlp.mnist_mlp(max_iter=8, lrate=0.5, batch_size=64)
    np.testing.assert_allclose(ng_costs, tf_costs, rtol=1e-4)
    assert tf_costs[-1] < tf_costs[0] - 0.05  # it learns


def test_random_initializers_are_drawn_by_tf_once_at_import():
    # with the seeds set, TF's session draws the same values: axgraph starts where TF does
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(7)
        x = tf.placeholder(tf.float32, (3, 5))
        w1 = tf.Variable(tf.random_normal([5, 4], stddev=0.5))
        w2 = tf.Variable(tf.truncated_normal([4, 2]))
        b = tf.Variable(tf.random_uniform([2], -1.0, 1.0))
        y = tf.matmul(tf.tanh(tf.matmul(x, w1)), w2) + b
        init = tf.global_variables_initializer()
    feed = randn(3, 5)
    with tf.Session(graph=graph) as session:
        session.run(init)
        want_y, want_w1 = session.run([y, w1], {x: feed})
    importer = TFImporter()
    importer.import_graph_def(graph.as_graph_def())
    with ng.make_transformer("numpy") as transformer:
        transformer.computation(importer.get_op_handle(init))()
        got_y, got_w1 = transformer.computation(importer.get_op_handle([y, w1]),
                                                importer.get_op_handle(x))(feed)
    np.testing.assert_allclose(got_w1, want_w1)
    np.testing.assert_allclose(got_y, want_y, rtol=1e-5, atol=1e-6)
    assert np.std(want_w1) > 0.2  # really random, not zeros


def test_placeholders_of_unknown_batch_get_their_shapes_at_import(tmp_path):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, (None, 5), name="images")
        t = tf.placeholder(tf.int32, (None,), name="labels")
        w = tf.Variable(randn(5, 3))
        cost = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=t, logits=tf.matmul(x, w)))
        grad = tf.gradients(cost, w)[0]
        scaled = x * tf.cast(tf.shape(x)[0], tf.float32)
    feeds = {x: randn(4, 5), t: np.array([0, 2, 1, 2], np.int32)}
    want = tf_values(graph, [cost, grad, scaled], feeds)
    tf.train.write_graph(graph.as_graph_def(), str(tmp_path), "g.pb", as_text=False)
    importer = TFImporter()
    importer.import_protobuf(tmp_path / "g.pb", shapes={"images": [4, 5], "labels": [4]})
    with ng.make_transformer("numpy") as transformer:
        got = transformer.computation(importer.get_op_handle([cost, grad, scaled]),
                                      *importer.get_op_handle(list(feeds)))(*feeds.values())
    for g, w_ in zip(got, want):
        np.testing.assert_allclose(g, w_, rtol=1e-5, atol=1e-6)
    with pytest.raises(TFImportError, match="no placeholders named \\['image'\\]"):
        TFImporter().import_graph_def(graph.as_graph_def(), shapes={"image": [4, 5]})
    partly = TFImporter()
    partly.import_graph_def(graph.as_graph_def(), shapes={"images": [4, 5]})
    with pytest.raises(UnsupportedOpError, match="'labels'.*shapes="):
        partly.get_op_handle(cost)


def test_a_value_under_a_control_dependency_on_a_write_is_computed_after_it():
    graph = tf.Graph()
    with graph.as_default():
        w = tf.Variable(tf.zeros([3]))
        bump = tf.assign_add(w, tf.ones([3]))
        with tf.control_dependencies([bump]):
            after = tf.identity(w) * 2.0
        init = tf.global_variables_initializer()
    importer = TFImporter()
    importer.import_graph_def(graph.as_graph_def())
    with tf.Session(graph=graph) as session, ng.make_transformer("numpy") as transformer:
        session.run(init)
        transformer.computation(importer.get_op_handle(init))()
        run = transformer.computation(importer.get_op_handle(after))
        for _ in range(3):
            np.testing.assert_array_equal(run(), session.run(after))


def _tf_assertion_text(session, fetch, feeds):
    """TF's own message of the Assert that fails when `fetch` runs: its 'assertion failed'
    line, and the node."""
    with pytest.raises(tf.errors.InvalidArgumentError) as failed:
        session.run(fetch, feeds)
    message = failed.value.message
    line = next(text for text in message.splitlines() if text.startswith("assertion failed:"))
    return line, re.search(r"\{\{node ([^}]+)\}\}", message)[1]


def test_asserts_under_control_dependencies_run_and_fail_with_tfs_message():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, (3,), name="x")
        m = tf.placeholder(tf.float32, (2, 3), name="m")
        checks = [tf.debugging.assert_positive(x),
                  tf.Assert(tf.reduce_all(m < 4.0), ["m small", m, x * 1.2345678], summarize=4,
                            name="bounded"),
                  tf.debugging.assert_equal(tf.reduce_sum(m), tf.reduce_sum(m) + 0.0)]
        with tf.control_dependencies(checks):
            y = tf.identity(x * 2.0) + tf.reduce_sum(m)
    importer = TFImporter()
    importer.import_graph_def(graph.as_graph_def())
    y_ng, x_ng, m_ng = importer.get_op_handle([y, x, m])
    good = {x: np.array([1, 2, 3], np.float32), m: np.ones((2, 3), np.float32)}
    bad_x = {x: np.array([-1, 2.5, 3], np.float32), m: good[m]}
    bad_m = {x: good[x], m: np.arange(6, dtype=np.float32).reshape(2, 3)}
    with tf.Session(graph=graph) as session:
        want = session.run(y, good)
        failures = [_tf_assertion_text(session, y, feeds) for feeds in (bad_x, bad_m)]
    for name in ("numpy", "cpu", "jax"):
        with ng.make_transformer(name) as transformer:
            run = transformer.computation(y_ng, x_ng, m_ng)
            np.testing.assert_allclose(run(good[x], good[m]), want)
            for feeds, (text, node) in zip((bad_x, bad_m), failures):
                with pytest.raises(ng.ExecutionError) as raised:
                    run(feeds[x], feeds[m])
                message = str(raised.value)
                if name == "jax":  # jax's checks show floats to 6 digits (%g), not TF's 9
                    text = text.replace("1.23456776 2.46913552 3.7037034", "1.23457 2.46914 3.7037")
                assert f"TF Assert node '{node}': {text}" in message, (name, message)
                assert __file__ in message  # where the computation was made
    assert failures[1][0] == ("assertion failed: [m small] [[0 1 2][3...]...] "
                              "[1.23456776 2.46913552 3.7037034]")


def test_a_print_under_a_control_dependency_prints_when_the_value_is_computed(capsys):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, (3,))
        shown = tf.print("x is:", x, "and twice:", 2 * x)
        with tf.control_dependencies([shown]):
            y = x + 1.0
        z = x - 1.0  # no dependency: prints nothing
    importer = TFImporter()
    importer.import_graph_def(graph.as_graph_def())
    values = np.array([1, 2, 3], np.float32)
    for name in ("numpy", "cpu"):
        with ng.make_transformer(name) as transformer:
            np.testing.assert_array_equal(
                transformer.computation(importer.get_op_handle(z),
                                        importer.get_op_handle(x))(values), values - 1)
            assert capsys.readouterr().out == ""
            got = transformer.computation(importer.get_op_handle(y),
                                          importer.get_op_handle(x))(values)
        np.testing.assert_array_equal(got, values + 1)
        assert capsys.readouterr().out.splitlines() == ["x is: [1. 2. 3.]",
                                                        "and twice: [2. 4. 6.]"]


def test_a_print_of_text_alone_prints_it_when_the_value_is_computed(capsys):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, (3,))
        shown = tf.print("starting", "now")
        with tf.control_dependencies([shown]):
            y = x * 3.0
    assert {op.type for op in graph.get_operations()} >= {"StringFormat", "PrintV2"}
    importer = TFImporter()
    importer.import_graph_def(graph.as_graph_def())
    values = np.array([1, 2, 3], np.float32)
    backends = ["numpy", "cpu"] + (["jax"] if importlib.util.find_spec("jax") else [])
    for name in backends:  # (ng.PrintOp(..., show_value=False) on each backend)
        with ng.make_transformer(name) as transformer:
            got = transformer.computation(importer.get_op_handle(y),
                                          importer.get_op_handle(x))(values)
        np.testing.assert_array_equal(got, values * 3)
        assert capsys.readouterr().out.splitlines() == ["starting now"]


def test_prints_of_text_and_of_a_placeholder_guarding_chained_values(capsys):
    # y runs after the text; its user runs after the print of x, which reads x: the
    # placeholder is needed before one print and after the other (no false cycle)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, (3,))
        shown = tf.print("x is:", x)
        note = tf.print("starting")
        with tf.control_dependencies([note]):
            y = x * 3.0
        with tf.control_dependencies([shown]):
            z = y + 1.0
    values = np.array([1, 2, 3], np.float32)
    expected = tf_values(graph, z, {x: values})
    importer = TFImporter()
    importer.import_graph_def(graph.as_graph_def())
    backends = ["numpy", "cpu"] + (["jax"] if importlib.util.find_spec("jax") else [])
    for name in backends:
        with ng.make_transformer(name) as transformer:
            got = transformer.computation(importer.get_op_handle(z),
                                          importer.get_op_handle(x))(values)
        np.testing.assert_allclose(got, expected, rtol=1e-6)
        assert sorted(capsys.readouterr().out.splitlines()) == ["starting",
                                                                "x is: [1. 2. 3.]"]


def test_a_cond_reading_a_reference_variable_takes_the_branch_tf_takes():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, (3,))
        v = tf.Variable(randn(3), use_resource=False)
        y = tf.cond(tf.reduce_sum(x) > 0, lambda: v._ref() * x, lambda: x - 1.0)
        written = tf.cond(tf.reduce_sum(x) > 0, lambda: tf.assign(v, x), lambda: x + 0.0)
        init = tf.global_variables_initializer()
    assert "RefSwitch" in {op.type for op in graph.get_operations()}
    importer = TFImporter()
    importer.import_graph_def(graph.as_graph_def())
    cases = [np.array(c, np.float32) for c in ([1, 2, 3], [-4, 1, 2])]
    with tf.Session(graph=graph) as session:
        session.run(init)
        want = [session.run(y, {x: c}) for c in cases]
    for name in ("numpy", "cpu"):
        with ng.make_transformer(name) as transformer:
            transformer.computation(importer.get_op_handle(init))()
            run = transformer.computation(importer.get_op_handle(y), importer.get_op_handle(x))
            for case, expected in zip(cases, want):
                np.testing.assert_allclose(run(case), expected, rtol=1e-6)
    with pytest.raises(UnsupportedOpError, match="Assign inside a branch of tf.cond"):
        importer.get_op_handle(written)


def test_a_cond_of_values_takes_the_branch_tf_takes():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, (3,))
        y = tf.cond(tf.reduce_sum(x) > 3.0, lambda: x * 10.0, lambda: tf.square(x) - 1.0)
    importer = TFImporter()
    importer.import_graph_def(graph.as_graph_def())
    cases = [np.array(v, np.float32) for v in ([1, 2, 3], [1, 0.5, 1], [-4, 1, 2])]
    with tf.Session(graph=graph) as session:
        want = [session.run(y, {x: c}) for c in cases]
    for name in ("numpy", "cpu"):
        with ng.make_transformer(name) as transformer:
            run = transformer.computation(importer.get_op_handle(y), importer.get_op_handle(x))
            for case, expected in zip(cases, want):
                np.testing.assert_allclose(run(case), expected)


def test_a_write_inside_a_cond_is_refused_and_a_dependency_without_a_rule_named():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, (3,))
        w = tf.Variable(tf.zeros([3]), use_resource=True)
        written = tf.cond(tf.reduce_sum(x) > 0, lambda: tf.assign_add(w, x), lambda: w + 0.0)
        total = tf.math.cumsum(x, name="total")
        with tf.control_dependencies([total]):
            after = tf.identity(x, name="after")
    importer = TFImporter()
    importer.import_graph_def(graph.as_graph_def())
    with pytest.raises(UnsupportedOpError, match="inside a branch of tf.cond"):
        importer.get_op_handle(written)
    with pytest.raises(UnsupportedOpError, match="'after:0' depends on 'total'.*Cumsum"):
        importer.get_op_handle(after)


def test_graphs_built_with_v2_behaviour_left_on_import_too():
    # the importer makes its own graph and session: eager mode elsewhere does not matter
    code = """
import os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np
import tensorflow as tf
import axgraph as ng
from axgraph.frontends.tensorflow import TFImporter

@tf.function(input_signature=[tf.TensorSpec([2, 3], tf.float32)])
def f(x):
    return tf.nn.softmax(tf.matmul(x, tf.ones([3, 4])) * 0.5)

graph_def = f.get_concrete_function().graph.as_graph_def()
importer = TFImporter()
importer.import_graph_def(graph_def)
x = np.arange(6, dtype=np.float32).reshape(2, 3) / 6
with ng.make_transformer("numpy") as t:
    got = t.computation(importer.get_op_handle_by_name("Softmax"),
                        importer.get_op_handle_by_name("x"))(x)
np.testing.assert_allclose(got, f(tf.constant(x)).numpy(), rtol=1e-6)
print("ok")
"""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def test_v04_module_paths_lead_to_the_same_names():
    from axgraph.frontends.tensorflow.tf_importer.importer import TFImporter as by_v04_path
    from axgraph.frontends.tensorflow.tf_importer.utils import SGDOptimizer as sgd_by_v04_path

    assert by_v04_path is TFImporter and sgd_by_v04_path is SGDOptimizer


def test_dropout_draws_a_new_mask_on_every_call():
    # its random draw feeds a computation, not an initializer: axgraph draws it each run
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, (50, 40))
        dropped = tf.nn.dropout(x, rate=0.25)
        normal = tf.random_normal([1000], seed=3)
    feed = np.abs(randn(50, 40)) + 1.0
    importer = TFImporter()
    importer.import_graph_def(graph.as_graph_def())
    with ng.make_transformer("numpy") as transformer:
        run = transformer.computation(importer.get_op_handle(dropped), importer.get_op_handle(x))
        first, second = run(feed), run(feed)
        draws = transformer.computation(importer.get_op_handle(normal))()
    for out in (first, second):
        kept = out != 0
        np.testing.assert_allclose(out[kept], feed[kept] / 0.75, rtol=1e-6)  # kept, scaled
        assert 0.65 < kept.mean() < 0.85
    assert (first != second).any()
    assert abs(draws.mean()) < 0.15 and 0.85 < draws.std() < 1.15


def test_a_meta_graph_and_its_checkpoint_restore_the_trained_variables(tmp_path):
    xs, ts = randn(6, 3), randn(6, 1)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, (6, 3), name="x")
        t = tf.placeholder(tf.float32, (6, 1), name="t")
        w = tf.Variable(tf.zeros([3, 1]), name="w")
        cost = tf.reduce_mean(tf.square(tf.matmul(x, w) - t), name="cost")
        tf.add_to_collection("cost", cost)
        step = tf.train.GradientDescentOptimizer(0.3).minimize(cost)
        init = tf.global_variables_initializer()
        saver = tf.train.Saver()
    with tf.Session(graph=graph) as session:
        session.run(init)
        for _ in range(5):
            session.run(step, {x: xs, t: ts})
        trained_cost, trained_w = session.run([cost, w], {x: xs, t: ts})
        checkpoint = saver.save(session, str(tmp_path / "model"))
    importer = TFImporter()
    importer.import_meta_graph(checkpoint + ".meta", checkpoint_path=checkpoint)
    (cost_ng,) = importer.get_collection_handle(["cost"])
    with ng.make_transformer("numpy") as transformer:
        transformer.computation(importer.get_restore_op())()
        got = transformer.computation(cost_ng, importer.get_op_handle_by_name("x"),
                                      importer.get_op_handle_by_name("t"))(xs, ts)
        got_w = transformer.computation(importer.get_op_handle_by_name("w"))()
    np.testing.assert_allclose(got_w, trained_w, rtol=1e-6)
    np.testing.assert_allclose(got, trained_cost, rtol=1e-5)
    assert np.abs(trained_w).sum() > 0  # really trained, not the zeros it started from
    with pytest.raises(TFImportError, match="no collection 'loss'"):
        importer.get_collection_handle(["loss"])
    with pytest.raises(TFImportError, match="no meta graph imported"):
        TFImporter().get_restore_op()
    with pytest.raises(TFImportError, match="cannot read a TensorFlow MetaGraphDef"):
        TFImporter().import_meta_graph(tmp_path / "missing.meta")
