"""save_graph / load_graph: whole axes graphs in one .axg file, and what a loaded graph computes.

Each model is built here, run, saved and loaded; the loaded graph runs on the
NumPy and cpu transformers and must compute what the original computes (the
original's own numbers are the reference). The facts of the axes graph (axis
identities, duals, roles, flags, symbolic lengths, names, metadata, source lines)
are compared one by one. test_graph_files_hardening.py feeds load_graph crafted files.
"""
import re

import numpy as np
import pytest

import axgraph as ng
from axgraph.debug_info import SourcePosition, source_position
from axgraph.serialization import LoadedGraph, SerializationError, load_graph, save_graph
from axgraph.testing_graphs import (RandomChoices, UnsuitableGraph, execute, random_graph,
                                    reference_values)
from axgraph.transformers import make_transformer

BACKENDS = ["numpy", "cpu"]


def normalized(listing: str) -> str:
    """A format_graph listing without automatic serial numbers (`Add_12`, `Axis_7`)."""
    return re.sub(r"_\d+\b", "_#", listing)


def test_a_small_graph_round_trips_with_its_values(tmp_path):
    C, N = ng.make_axis(3, name="C"), ng.make_axis(4, name="N")
    x = ng.placeholder([C, N], name="x")
    w = ng.variable([C - 1, C], initial_value=np.arange(9.0).reshape(3, 3), name="w")
    h = ng.tanh(ng.dot(w, x), name="h")
    x_value = np.linspace(-1, 1, 12).reshape(3, 4)
    with ng.NumPyTransformer() as t:
        computation = t.computation([h, ng.sum(h, out_axes=[N])], x)
        expected = computation(x_value)
        path = save_graph(computation, tmp_path / "small.axg")
    assert path == tmp_path / "small.axg"
    graph = load_graph(path)
    assert isinstance(graph, LoadedGraph) and graph.result_kind == "sequence"
    assert [op.name for op in graph.inputs] == ["x"] and graph.op("h") is graph.results[0]
    # independently: tanh of the matrix product, then its sum over C
    by_hand = np.tanh(np.arange(9.0).reshape(3, 3).T @ x_value)
    for backend in BACKENDS:
        with make_transformer(backend) as t:
            got = graph.computation(t)(x_value)
        np.testing.assert_allclose(got[0], by_hand, rtol=1e-5)
        np.testing.assert_allclose(got[1], by_hand.sum(axis=0), rtol=1e-5)
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-6)
    assert normalized(ng.format_graph(graph.results)) == normalized(
        ng.format_graph(computation.results))


def test_axis_identities_duals_roles_and_flags_survive(tmp_path):
    channel = ng.make_axis_role("channel", docstring="feature maps")
    A = ng.make_axis(2, name="C", roles=[channel], docstring="the first C")
    B = ng.make_axis(2, name="C")                       # another axis with the same name
    N = ng.make_axis(3, name="N", batch=False)          # named N, but not a batch axis
    T = ng.make_axis(4, name="time", recurrent=True)
    K = ng.make_axis(3, name="K", batch=True)
    auto = ng.make_axis(2)
    x = ng.placeholder([A, N, T], name="x")
    y = ng.placeholder([B, K, auto], name="y")
    w = ng.variable([A + 1, A], initial_value=1.0, name="w")
    out = [ng.dot(w, x, name="wx"), ng.cast_axes(y, [B, K, auto]), x[0:1], ng.flatten(x),
           ng.pad(y, [(1, 0), 0, 0])]
    save_graph(out + [y], tmp_path / "axes.axg", inputs=[x, y])
    graph = load_graph(tmp_path / "axes.axg")
    lx, ly = graph.inputs
    la, ln, lt = lx.axes
    lb, lk, lauto = ly.axes
    assert la is not lb and la.name == lb.name == "C"          # two axes named C stay two
    assert graph.op("w").axes[1] is la and graph.op("w").axes[0] is la + 1     # one stays one
    assert (la + 1).dual_level == 1 and (la + 1).base is la
    assert [r.name for r in la.roles] == ["channel"] and la.docstring == "the first C"
    assert not ln.is_batch and ln._batch is False and lk.is_batch and lt.is_recurrent
    assert lauto._auto_named and lauto.name != auto.name and lauto.length == 2
    assert (la.location, lt.location) == (A.location, T.location)
    sliced, flat, padded = graph.results[2], graph.results[3], graph.results[4]
    assert sliced.axes[0].parent is la and sliced.axes[0].length == 1
    assert list(flat.axes[0].axes) == [la, ln, lt]
    assert padded.axes[0].parent is lb and padded.axes[0].length == 3
    assert normalized(ng.format_graph(graph.results)) == normalized(ng.format_graph(out + [y]))


def test_names_metadata_locations_and_dtypes_survive(tmp_path):
    bfloat16 = pytest.importorskip("ml_dtypes").bfloat16
    H = ng.make_axis(3, name="H")
    w = ng.variable([H], dtype="bfloat16", initial_value=np.array([1.5, -2.0, 0.25]), name="w",
                    metadata={"layer": ("dense", 1), "scale": np.float32(0.5)})
    counts = ng.constant(np.array([1, 2, 3]), [H], dtype=np.int32, name="counts")
    with source_position(SourcePosition("model.axon", 7, 4, "y = w * 2")):
        y = ng.multiply(w, 2.0)
    z = ng.add(y, counts)
    save_graph([y, z], tmp_path / "facts.axg", metadata={"epoch": 3, "note": "trained"})
    graph = load_graph(tmp_path / "facts.axg")
    lw, ly = graph.op("w"), graph.results[0]
    assert lw.dtype == np.dtype(bfloat16) and lw.metadata == {"layer": ("dense", 1), "scale": 0.5}
    assert type(lw.metadata["scale"]) is np.float32
    assert lw.location == w.location and not ly.has_user_name
    assert isinstance(ly.location, SourcePosition)
    assert (ly.location.column, ly.location.excerpt) == (4, "y = w * 2")
    assert graph.op("counts").dtype == np.int32 and graph.metadata == {"epoch": 3,
                                                                         "note": "trained"}
    for backend in BACKENDS:
        with make_transformer(backend) as t:
            got_y, got_z = graph.computation(t)()
        np.testing.assert_array_equal(np.asarray(got_y, np.float32), [3.0, -4.0, 0.5])
        np.testing.assert_allclose(np.asarray(got_z, np.float64), [4.0, -2.0, 3.5])
        assert got_z.dtype == z.dtype


def test_symbolic_lengths_survive_and_bind_at_two_sizes(tmp_path):
    B = ng.dim("B")
    K = ng.dim("K", min=0, max=8)
    N = ng.make_axis(B, name="N")
    P = ng.make_axis(2 * B + 1, name="P")
    F = ng.make_axis(3, name="F")
    L = ng.make_axis(K, name="L")
    x = ng.placeholder([F, N], name="x")
    v = ng.placeholder([L], name="v")
    w = ng.variable([F], initial_value=np.array([1.0, -1.0, 2.0]), name="w")
    score = ng.sum(x * w, out_axes=[N], name="score")
    total = ng.sum(v, out_axes=(), name="total")
    save_graph([score, total], tmp_path / "symbolic.axg", inputs=[x, v])
    graph = load_graph(tmp_path / "symbolic.axg")
    lx, lv = graph.inputs
    assert lx.axes[1].length == B and lv.axes[0].length.domain == (0, 8)
    assert P.length == 2 * B + 1 and not any(a.name == "P" for op in graph.ops for a in op.axes)
    for backend in BACKENDS:
        with make_transformer(backend) as t:
            computation = graph.computation(t)
            for batch in (2, 5):
                x_value = np.arange(3.0 * batch).reshape(3, batch)
                got_score, got_total = computation(x_value, np.ones(batch))
                np.testing.assert_allclose(got_score, [1.0, -1.0, 2.0] @ x_value)
                assert got_total == batch


def mlp_step(seed: int = 0):
    """A small MLP from the digits example, over random data, and its training step."""
    from axgraph.frontends.neon import ArrayIterator
    from examples import digits_mlp

    rng = np.random.default_rng(seed)
    images, labels = rng.normal(size=(40, 6)).astype(np.float32), rng.integers(0, 10, 40)
    train_set = ArrayIterator({"image": images, "label": labels}, 8, shuffle=False)
    inputs, step, test_images, prediction = digits_mlp.build(train_set, 5, hidden=7,
                                                             learning_rate=0.2, seed=seed)
    batches = [(b["image"], b["label"]) for b in train_set]
    return inputs, step, batches


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_saved_training_step_trains_on_from_where_it_stood(tmp_path, backend):
    inputs, step, batches = mlp_step()
    with ng.NumPyTransformer() as t:
        train = t.computation(step, inputs["image"], inputs["label"])
        for image, label in batches[:2]:
            train(image, label)
        save_graph(train, tmp_path / "mlp.axg")
        expected = [train(image, label) for image, label in batches[2:]]
        trained = {op.name: t.computation(op)() for op in step.variables()}
    graph = load_graph(tmp_path / "mlp.axg")
    assert graph.result_kind == "single" and len(graph.variables) == 4
    with make_transformer(backend) as t:
        loaded_train = graph.computation(t)
        got = [loaded_train(image, label) for image, label in batches[2:]]
        loaded = {op.name: t.computation(op)() for op in graph.variables}
    np.testing.assert_allclose(got, expected, rtol=2e-5)
    assert sorted(loaded) == sorted(trained)
    for name, value in trained.items():              # the momentum's state came along too
        np.testing.assert_allclose(loaded[name], value, rtol=2e-4, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_convnet_predicts_the_same_after_loading(tmp_path, backend):
    from axgraph.frontends.neon import ar
    from examples import digits_convnet

    C = ng.make_axis(1, name="C", roles=[ar.Channel])
    H = ng.make_axis(8, name="H", roles=[ar.Height])
    W = ng.make_axis(8, name="W", roles=[ar.Width])
    Y = ng.make_axis(10, name="Y")
    images = ng.placeholder([C, H, W, ng.make_axis(3, name="N")], name="images")
    probabilities = digits_convnet.build_model(0, Y)(images)
    data = np.random.default_rng(1).normal(size=(1, 8, 8, 3)).astype(np.float32)
    with ng.NumPyTransformer() as t:
        predict = t.computation(probabilities, images)
        expected = predict(data)
        save_graph(predict, tmp_path / "convnet.axg")
    graph = load_graph(tmp_path / "convnet.axg")
    with make_transformer(backend) as t:
        np.testing.assert_allclose(graph.computation(t)(data), expected, rtol=1e-4, atol=1e-6)


def test_a_char_transformer_forward_computes_the_same_after_loading(tmp_path):
    from examples import char_transformer as ct

    config = ct.Config(layers=1, heads=2, d_model=8, context=6, mlp_width=16, batch=2)
    model = ct.CharTransformer(5, config, seed=3)
    N = ng.make_axis(config.batch, name="N")
    chars = ng.placeholder([model.T, N], dtype=np.int32, name="chars")
    logits = model(chars)
    data = np.random.default_rng(2).integers(0, 5, (config.context, config.batch))
    with ng.NumPyTransformer() as t:
        expected = t.computation(logits, chars)(data)
        save_graph(logits, tmp_path / "transformer.axg", inputs=[chars], transformer=t)
    graph = load_graph(tmp_path / "transformer.axg")
    assert graph.inputs[0].axes[0].is_recurrent
    for backend in BACKENDS:
        with make_transformer(backend) as t:
            np.testing.assert_allclose(graph.computation(t)(data), expected, rtol=1e-4,
                                       atol=1e-5)


@pytest.mark.parametrize("seed", [3, 11, 17, 29, 41, 105])
def test_random_graphs_compute_the_same_after_loading(tmp_path, seed):
    graph = random_graph(RandomChoices(seed=seed))
    try:
        expected = reference_values(graph)
    except UnsuitableGraph:
        pytest.skip("the reference's values cannot be compared for this graph")
    count = len(graph.results)
    save_graph(graph.results + graph.assigned, tmp_path / "random.axg",
               inputs=graph.placeholders)
    loaded = load_graph(tmp_path / "random.axg")
    assert normalized(ng.format_graph(loaded.results)) == normalized(
        ng.format_graph(graph.results + graph.assigned))
    graph.results, graph.assigned = list(loaded.results[:count]), list(loaded.results[count:])
    graph.placeholders = list(loaded.inputs)
    with make_transformer("numpy") as t:
        got = execute(graph, t)
    assert sorted(got) == sorted(expected)
    for label, value in expected.items():
        np.testing.assert_allclose(got[label], value, rtol=1e-6, atol=1e-9, err_msg=label)


def test_an_initializer_function_is_saved_as_its_array(tmp_path):
    H = ng.make_axis(4, name="H")
    w = ng.variable([H], initial_value=lambda axes: np.arange(4.0) * 3, name="w")
    save_graph(w * 1.0, tmp_path / "init.axg")
    graph = load_graph(tmp_path / "init.axg")
    with ng.NumPyTransformer() as t:
        np.testing.assert_array_equal(graph.computation(t)(), [0.0, 3.0, 6.0, 9.0])


def test_what_a_graph_file_cannot_hold_is_named(tmp_path):
    H = ng.make_axis(2, name="H")
    w = ng.variable([H], initial_value=0.0, name="w")
    init = ng.init_tensor(w, lambda tensor: np.ones(2), name="fill_w")
    with pytest.raises(SerializationError) as raised:
        save_graph(init, tmp_path / "code.axg")
    message = str(raised.value)
    assert str(tmp_path / "code.axg") in message and "fill_w" in message
    assert "valfun" in message and "Python function" in message
    assert not (tmp_path / "code.axg").exists()
    with pytest.raises(SerializationError, match="not a placeholder"):
        save_graph(w, tmp_path / "bad.axg", inputs=[w])
    with pytest.raises(SerializationError, match="saves a computation, an op"):
        save_graph("w", tmp_path / "bad.axg")
    with pytest.raises(SerializationError, match="directory .* does not exist"):
        save_graph(w, tmp_path / "missing" / "g.axg")
    with ng.NumPyTransformer() as t:
        computation = t.computation(w)
    with pytest.raises(SerializationError, match="closed.axg: this NumPyTransformer is "
                                                 "closed"):
        save_graph(computation, tmp_path / "closed.axg")


def test_a_char_transformer_training_step_keeps_adamw_state(tmp_path):
    from examples import char_transformer as ct

    config = ct.Config(layers=1, heads=2, d_model=8, context=6, mlp_width=16, batch=2)
    model = ct.CharTransformer(5, config, seed=4)
    N = ng.make_axis(config.batch, name="N")
    chars = ng.placeholder([model.T, N], dtype=np.int32, name="chars")
    following = ng.placeholder([model.T, N], dtype=np.int32, name="following")
    loss = model.loss(chars, following)
    step = ng.sequential([ct.make_optimizer(model, 10)(loss), loss])
    rng = np.random.default_rng(5)
    batches = [rng.integers(0, 5, (2, config.context, config.batch)) for _ in range(4)]
    with ng.NumPyTransformer() as t:
        train = t.computation(step, chars, following)
        train(*batches[0])
        train(*batches[1])
        save_graph(train, tmp_path / "step.axg")      # the warmup's step count, AdamW's moments
        expected = [train(*batch) for batch in batches[2:]]
    graph = load_graph(tmp_path / "step.axg")
    with ng.NumPyTransformer() as t:
        loaded_train = graph.computation(t)
        np.testing.assert_allclose([loaded_train(*batch) for batch in batches[2:]], expected,
                                   rtol=1e-6)
