"""save_function / load_function: core IR Functions in a file, and crafted core files refused.

Functions are lowered from axes graphs (a convnet's training step, a graph with a
symbolic batch) or built by hand; the loaded function must print the same and
compute what the original computes on the interpreter and cpu backends.
"""
import json

import numpy as np
import pytest

import axgraph as ng
from axgraph import core
from axgraph.lowering import lower
from axgraph.op_graph.execution_order import schedule
from axgraph.serialization import SerializationError, load_function, load_graph, save_function


def lowered(results, inputs=()):
    return lower(schedule(list(results)), list(results), list(inputs)).function


def arguments(function, seed=0, batch=3):
    rng = np.random.default_rng(seed)
    values = []
    for parameter in function.parameters:
        shape = tuple(d if isinstance(d, int) else batch for d in parameter.shape)
        dtype = parameter.element_type.dtype
        values.append(rng.normal(size=shape).astype(dtype) if dtype.kind == "f"
                      else rng.integers(0, 3, shape).astype(dtype))
    return values


def test_a_hand_built_function_round_trips(tmp_path):
    N = core.Dim("N")
    x = core.Parameter(core.f32, (N, 3), name="x")
    scale = core.Constant(core.f32, (3,), np.array([1.0, -2.0, 0.5], np.float32))
    with core.at_location(("model.py", 12)):
        y = core.Multiply(x, core.Broadcast(scale, (N, 3), (0,)), name="y")
    total = core.Sum(y, axes=(1,))
    function = core.Function([y, core.Convert(total, core.f64)], [x], name="scaled")
    save_function(function, tmp_path / "scaled.axg")
    loaded = load_function(tmp_path / "scaled.axg")
    assert str(loaded) == str(function) and loaded.name == "scaled"
    assert loaded.parameters[0].shape == (N, 3) and loaded.results[0].location == ("model.py", 12)
    for batch in (2, 5):
        x_value = np.arange(3.0 * batch, dtype=np.float32).reshape(batch, 3)
        for backend in ("interpreter", "cpu"):
            got_y, got_total = core.compile(loaded, backend=backend)(x_value)
            np.testing.assert_allclose(got_y, x_value * [1.0, -2.0, 0.5], rtol=1e-6)
            np.testing.assert_allclose(got_total, (x_value * [1.0, -2.0, 0.5]).sum(axis=1))
            assert got_total.dtype == np.float64


def test_a_lowered_convnet_training_step_computes_the_same(tmp_path):
    from axgraph.frontends.neon import GradientDescentMomentum, ar
    from examples import digits_convnet

    C = ng.make_axis(1, name="C", roles=[ar.Channel])
    H = ng.make_axis(8, name="H", roles=[ar.Height])
    W = ng.make_axis(8, name="W", roles=[ar.Width])
    Y = ng.make_axis(10, name="Y")
    N = ng.make_axis(2, name="N")
    images = ng.placeholder([C, H, W, N], name="images")
    labels = ng.placeholder([N], dtype=np.int32, name="labels")
    loss = ng.cross_entropy_multi(digits_convnet.build_model(0, Y)(images),
                                  ng.one_hot(labels, axis=Y))
    step = ng.sequential([GradientDescentMomentum(0.1, momentum_coef=0.9)(loss),
                          ng.mean(loss, out_axes=())])
    function = lowered([step], [images, labels])
    save_function(function, tmp_path / "step.axg")
    loaded = load_function(tmp_path / "step.axg")
    assert str(loaded) == str(function)
    values = arguments(function)
    for backend in ("interpreter", "cpu"):
        expected = core.compile(function, backend=backend)(*values)
        got = core.compile(loaded, backend=backend)(*values)
        for a, b in zip(got, expected):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_a_file_of_the_other_kind_is_told_apart(tmp_path):
    x = core.Parameter(core.f32, (2,), name="x")
    save_function(core.Function([core.Negative(x)], [x]), tmp_path / "core.axg")
    with pytest.raises(SerializationError, match="not an axgraph graph file .it is an axgraph "
                                                 "core function file"):
        load_graph(tmp_path / "core.axg")
    H = ng.make_axis(2, name="H")
    ng.serialization.save_graph(ng.placeholder([H]) * 2, tmp_path / "axes.axg")
    with pytest.raises(SerializationError, match="not an axgraph core function file .it is an "
                                                 "axgraph graph file"):
        load_function(tmp_path / "axes.axg")
    with pytest.raises(SerializationError, match="is not a core.Function"):
        save_function([x], tmp_path / "list.axg")


def crafted(tmp_path, change):
    x = core.Parameter(core.f32, (core.Dim("N"), 2), name="x")
    c = core.Constant(core.f32, (2,), np.ones(2, np.float32))
    y = core.Add(x, core.Broadcast(c, x.shape, (0,)), name="y")
    path = tmp_path / "f.axg"
    save_function(core.Function([y], [x]), path)
    with np.load(path, allow_pickle=False) as archive:
        arrays = {key: archive[key] for key in archive.files}
    manifest = json.loads(bytes(arrays.pop("__manifest__")).decode())
    change(manifest)
    with open(path, "wb") as file:
        np.savez(file, __manifest__=np.frombuffer(json.dumps(manifest).encode(), np.uint8),
                 **arrays)
    return path


def node(manifest, name):
    return next(entry for entry in manifest["nodes"] if entry["name"] == name)


CASES = {
    "os.system as a class": (lambda m: node(m, "y").update({"class": "os.system"}),
                             "class 'os.system' is not a core node class"),
    "a shape of strings": (lambda m: node(m, "x")["attributes"].update(
        shape={"shape": ["__import__('os')"]}), "is not a list of dims"),
    "an element type that is not one": (lambda m: node(m, "x")["attributes"].update(
        element_type={"element_type": "object"}), "'object' is not an element type"),
    "an input out of range": (lambda m: node(m, "y").update(inputs=[0, 9]), "refers to node 9"),
    "another type than it computes": (lambda m: node(m, "y").update(
        shape={"shape": [5, 2]}), "computes f32[N, 2], but the file says f32[5, 2]"),
    "a node its checks refuse": (lambda m: node(m, "y").update(inputs=[0, 1]),
                                 "cannot be built"),
    "a newer version": (lambda m: m.update(version=7), "newer axgraph"),
    "no parameters": (lambda m: m.update(parameters=[]), "the function cannot be made"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_crafted_core_file_is_refused(tmp_path, case):
    change, fragment = CASES[case]
    path = crafted(tmp_path, change)
    with pytest.raises(SerializationError) as raised:
        load_function(path)
    assert str(path) in str(raised.value) and fragment in str(raised.value), str(raised.value)
