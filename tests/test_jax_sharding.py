"""Sharding by axis identity on the jax transformer (axgraph/transformers/jax/sharding.py).

The placement rules and their errors are checked here on the one device of the
test process. Runs on several devices go to tests/jax_sharding_worker.py, in
processes started with 8 forced host devices (a device count JAX fixes when it
starts): the digits MLP trained on 4 and 8 devices data-parallel, on 8
tensor-parallel, on 4x2 mixed, and by two processes over 16 devices, must end
with the NumPy reference's weights, and the weights must really be split.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import axgraph as ng
from axgraph.errors import AxgraphError, AxgraphTypeError

jax = pytest.importorskip("jax")

from axgraph.transformers.jax.sharding import AxisSharding, ShardingError  # noqa: E402
from jax_sharding_models import digits_step, reference  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "tests" / "jax_sharding_worker.py"
#: float32 steps reduced in another order (per shard, then across shards)
TOLERANCE = dict(rtol=2e-4, atol=2e-5)


def one_device_mesh():
    return jax.sharding.Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("data", "model"))


# -- placement rules, on one device ------------------------------------------------------------

def test_each_dimension_takes_the_mesh_axis_of_its_axis():
    N, C, H = (ng.make_axis(n, name=name) for n, name in ((8, "N"), (3, "C"), (4, "H")))
    sharding = AxisSharding(one_device_mesh(), {N: "data", H: "model"})
    assert sharding.mesh_axes([C, N]) == [None, "data"]
    assert sharding.mesh_axes([N, C, H]) == ["data", None, "model"]
    assert sharding.mesh_axes([H, N]) == ["model", "data"]
    assert sharding.mesh_axes([]) == []


def test_axes_are_matched_by_identity_not_by_name():
    N = ng.make_axis(8, name="N")
    other_n = ng.make_axis(8, name="N")
    sharding = AxisSharding(one_device_mesh(), {N: "data"})
    assert sharding.mesh_axes([other_n]) == [None]
    assert sharding.mesh_axes([N]) == ["data"]


def test_a_dual_axis_follows_its_base_unless_the_mesh_axis_is_taken():
    H, Y = ng.make_axis(4, name="H"), ng.make_axis(10, name="Y")
    sharding = AxisSharding(one_device_mesh(), {H: "model"})
    assert sharding.mesh_axes([Y, H - 1]) == [None, "model"]       # a second layer's weight
    assert sharding.mesh_axes([H, H - 1]) == ["model", None]       # a recurrent weight
    assert sharding.mesh_axes([H - 1, H]) == [None, "model"]       # the exact match wins


def test_two_axes_mapped_to_one_mesh_axis_cannot_share_a_tensor():
    N, M = ng.make_axis(8, name="N"), ng.make_axis(8, name="M")
    sharding = AxisSharding(one_device_mesh(), {N: "data", M: "data"})
    assert sharding.mesh_axes([N]) == ["data"] and sharding.mesh_axes([M]) == ["data"]
    with pytest.raises(ShardingError, match=r"axes N and M, both mapped to mesh axis 'data'"):
        sharding.mesh_axes([N, M], "stored tensor W")


def test_bad_mappings_raise_naming_what_is_wrong():
    N = ng.make_axis(8, name="N")
    mesh = one_device_mesh()
    with pytest.raises(AxgraphTypeError, match="keys are Axis objects.*'N' is a str"):
        AxisSharding(mesh, {"N": "data"})
    with pytest.raises(ShardingError, match=r"axis N to mesh axis 'batch'.*'data': 1, 'model': 1"):
        AxisSharding(mesh, {N: "batch"})
    with pytest.raises(AxgraphTypeError, match="name of a mesh axis"):
        AxisSharding(mesh, {N: 0})
    with pytest.raises(AxgraphTypeError, match="takes a jax.sharding.Mesh"):
        AxisSharding("mesh", {N: "data"})
    with pytest.raises(AxgraphTypeError, match=r"axis_mapping= takes a dict"):
        AxisSharding(mesh, [(N, "data")])
    assert issubclass(ShardingError, AxgraphError)


def test_the_examples_in_the_docstrings_run_as_written():
    import doctest

    from axgraph.transformers.jax import sharding

    failed, attempted = doctest.testmod(sharding, optionflags=doctest.ELLIPSIS)
    assert attempted > 0 and failed == 0


def test_lowering_orders_each_dimension_as_its_tensor_axes():
    """The placements assume dimension i of a lowered parameter or result is axes[i]: the
    lengths here are all different, so any other order would show."""
    model = digits_step()
    with ng.make_transformer("interpreter") as transformer:
        computation = transformer.computation(model.step, model.image, model.label)
        lowered = transformer.lowered(computation)
    parameters = lowered.function.parameters
    assert len(parameters) == len(lowered.state_inputs) > 4
    for tensor, parameter in zip(lowered.state_inputs, parameters):
        assert tuple(parameter.shape) == tuple(a.length for a in tensor.axes), tensor.name
    count = len(lowered.function.results) - len(lowered.state_outputs)
    for tensor, node in zip(lowered.state_outputs, lowered.function.results[count:]):
        assert tuple(node.shape) == tuple(a.length for a in tensor.axes), tensor.name
    weight = next(t for t in lowered.state_inputs if len(t.axes) == 2 and t.axes[0] is model.H)
    assert [a.length for a in weight.axes] == [48, 64]  # distinct: a transposition would show


# -- the transformer's options, on one device ---------------------------------------------------

def _affine():
    """x (C, N) -> tanh(W x) over (H, N), with W (H, C - 1) stored: a result and a weight."""
    C, N, H = ng.make_axis(3, name="C"), ng.make_axis(4, name="N"), ng.make_axis(2, name="H")
    x = ng.placeholder([C, N])
    weights = np.arange(6, dtype=np.float32).reshape(2, 3) / 10
    W = ng.variable([H, C - 1], initial_value=weights)
    return x, W, ng.tanh(ng.dot(W, x)), weights, N, H


def test_a_mesh_transformer_computes_what_numpy_computes():
    x, W, y, weights, N, H = _affine()
    value = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    with ng.make_transformer("jax", mesh=one_device_mesh(),
                             axis_mapping={N: "data", H: "model"}) as t:
        f = t.computation(y, x)
        result = f(value)
        assert isinstance(result, np.ndarray)
        np.testing.assert_allclose(result, np.tanh(weights @ value), rtol=1e-6)
        on_device = f(value, keep_on_device=True)
        assert isinstance(on_device, jax.Array)
        assert tuple(on_device.sharding.spec) == ("model", "data")
        local = f(value, process_local=True)  # one process: its slice is the whole batch
        np.testing.assert_allclose(local, result, rtol=1e-6)
        assert t.sharding.process_slice(N, 4) == slice(0, 4)
        target = np.empty((2, 4), np.float32)
        assert f(value, out=[target]) is target
        np.testing.assert_allclose(target, result, rtol=1e-6)
        np.testing.assert_array_equal(W.value.get(), weights)


def test_float64_stays_float64_on_a_mesh():
    """Arguments are placed inside the backend's 64-bit scope: float64 is not narrowed."""
    N = ng.make_axis(3, name="N")
    x = ng.placeholder([N], dtype=np.float64)
    total = ng.variable([N], initial_value=np.zeros(3), dtype=np.float64)
    value = np.array([1 + 2.0 ** -40, 1 / 3, -2.5])
    with ng.make_transformer("jax", mesh=one_device_mesh(), axis_mapping={N: "data"}) as t:
        add = t.computation(ng.sequential([ng.assign(total, total + x), total * 1]), x)
        add(value)
        result = add(value)
        local = add(value, process_local=True)  # placed by the process-local path
    assert result.dtype == local.dtype == np.float64
    np.testing.assert_array_equal(result, value + value)
    np.testing.assert_array_equal(local, 3 * value)


def test_axis_mapping_needs_a_mesh_and_a_mesh_is_a_mesh():
    N = ng.make_axis(4, name="N")
    with pytest.raises(AxgraphTypeError, match="give mesh="):
        ng.make_transformer("jax", axis_mapping={N: "data"})
    with pytest.raises(AxgraphTypeError, match="takes a jax.sharding.Mesh"):
        ng.make_transformer("jax", mesh=[0, 1], axis_mapping={N: "data"})
    with ng.make_transformer("jax") as plain:
        assert plain.sharding is None


# -- several devices, in processes of their own --------------------------------------------------

def _worker_env():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
               PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    return env


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """The worker's runs on one process with 8 devices: (report, stored tensors)."""
    out = tmp_path_factory.mktemp("sharded")
    done = subprocess.run([sys.executable, str(WORKER), "single", str(out)], cwd=ROOT,
                          env=_worker_env(), capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads((out / "single.json").read_text()), dict(np.load(out / "single.npz"))


@pytest.fixture(scope="module")
def expected():
    """The NumPy reference's losses and stored tensors after the same steps."""
    return reference()


def _assert_same_training(report, values, run, expected):
    losses, tensors = expected
    assert report[run]["per_example_shape"] == [32]
    assert report[run]["per_example_error"] < 1e-4
    np.testing.assert_allclose(report[run]["losses"], losses, **TOLERANCE)
    for name, value in tensors.items():
        np.testing.assert_allclose(values[f"{run}/{name}"], value, err_msg=f"{run}: {name}",
                                   **TOLERANCE)


@pytest.mark.parametrize("run, devices, specs", [
    ("data4", 4, {"Affine_0_W": [None, None]}),
    ("data8", 8, {"Affine_0_W": [None, None]}),
    ("model8", 8, {"Affine_0_W": ["model", None], "Affine_1_W": [None, "model"],
                   "Affine_0_b": ["model"], "Affine_1_b": [None]}),
    ("mixed4x2", 8, {"Affine_0_W": ["model", None], "Affine_1_W": [None, "model"]}),
])
def test_sharded_training_ends_with_the_reference_weights(single, expected, run, devices, specs):
    report, values = single
    _assert_same_training(report, values, run, expected)
    # the batch: image (F, N) and label (N,) split along N over "data" when N is mapped
    fed = [[None, "data"], ["data"]] if run != "model8" else [[None, None], [None]]
    assert sorted(report[run]["fed"], key=str) == sorted(fed, key=str)
    placed = report[run]["placements"]
    for name, spec in specs.items():
        assert placed[name]["spec"] == spec, name
        assert placed[name]["devices"] == devices, name
    # the weights are really split: H (48) over "model" leaves each device 48 / size rows
    if run == "model8":
        assert placed["Affine_0_W"]["shards"] == [[6, 64]]
        assert placed["Affine_1_W"]["shards"] == [[10, 6]]
    if run == "mixed4x2":
        assert placed["Affine_0_W"]["shards"] == [[24, 64]]


def test_a_mapping_that_cannot_place_a_tensor_is_refused(single):
    errors = single[0]["errors"]
    assert errors["indivisible"]["type"] == "ShardingError"
    assert "axis N of length 32" in errors["indivisible"]["message"]
    assert "mesh axis 'data' of size 3" in errors["indivisible"]["message"]
    assert errors["unknown_mesh_axis"]["type"] == "ShardingError"
    assert "'batch'" in errors["unknown_mesh_axis"]["message"]
    assert errors["not_an_axis"]["type"] == "AxgraphTypeError"
    assert errors["fed_fine"] == [2.0 * i for i in range(8)]
    assert errors["fed_indivisible"]["type"] == "ShardingError"
    assert "axis B of length 6" in errors["fed_indivisible"]["message"]
    assert "mesh axis 'data' of size 4" in errors["fed_indivisible"]["message"]


def test_prints_on_a_mesh_show_each_value_whole_once_in_program_order(single):
    printed = single[0]["errors"]["print"]
    doubled = 2 * np.arange(8.0)
    assert printed["stdout"].splitlines() == [f"doubled: {doubled.astype(np.float32)}",
                                              f"plus one: {(doubled + 1).astype(np.float32)}"]
    assert printed["result"] == (doubled + 1).tolist()


def test_the_char_lstm_example_runs_split_on_its_batch_axis(single):
    from examples import char_lstm

    lstm = single[0]["lstm"]
    reference_run = char_lstm.train(epochs=2, steps=2, seq_len=8, batch=8, hidden=16, embed=8,
                                    backend="numpy", sample_length=0, verbose=False)
    assert len(lstm["losses"]) == 2
    np.testing.assert_allclose(lstm["losses"], reference_run["losses"], **TOLERANCE)
    # the characters and their targets (REC, N) are fed split along N
    assert lstm["fed"] == [[None, "data"], [None, "data"]]
    # weights have no batch axis: replicated on the 4 devices
    assert all(p["devices"] == 4 and set(p["spec"]) == {None} for p in lstm["placements"].values())
    assert lstm["placements"], "the worker found none of the LSTM's weights"


def test_arrays_on_another_device_are_moved_to_the_transformers(single):
    """A jax.Array fed from a device other than the transformer's is moved there, on the
    first call and on the planned calls after it (XLA runs a program on one device)."""
    run = single[0]["other_device"]
    rows = np.asarray(run["rows"], dtype=np.float32)
    expected = 2 * np.cumsum(rows, axis=0)  # the variable after each call, written by hand
    np.testing.assert_allclose(np.asarray(run["stored"]), expected, rtol=0, atol=0)
    assert run["placed"] == [0]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return probe.getsockname()[1]


def test_two_processes_train_as_the_reference(tmp_path, expected):
    """Two processes of 8 devices each, joined by jax.distributed over a local port (gloo
    collectives): data-parallel over 16 devices, 8x2 mixed, 8x2 fed per process, and 8x2
    with the weights' halves in different processes (read back by gathering)."""
    port = str(_free_port())
    workers = [subprocess.Popen([sys.executable, str(WORKER), "multi", str(tmp_path), port,
                                 str(rank)], cwd=ROOT, env=_worker_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for rank in (0, 1)]
    try:
        outcomes = [worker.communicate(timeout=90) for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    for worker, (_, stderr) in zip(workers, outcomes):
        assert worker.returncode == 0, stderr[-4000:]
    for rank in (0, 1):
        report = json.loads((tmp_path / f"multi{rank}.json").read_text())
        values = dict(np.load(tmp_path / f"multi{rank}.npz"))
        assert (report["process"], report["devices"]) == (rank, 16)
        for run in ("data16", "mixed8x2", "local8x2", "across8x2"):
            _assert_same_training(report, values, run, expected)
            assert report[run]["fed"] == [["data"], [None, "data"]]
            weight = report[run]["placements"]["Affine_0_W"]
            assert weight["devices"] == 16
            if run != "data16":
                assert weight["spec"] == ["model", None] and weight["shards"] == [[24, 64]]
        # each process fed its half of the batch, as process_slice said
        assert report["local8x2"]["rows"] == [16 * rank, 16 * rank + 16]
        # "model" within a process: each holds whole weights; across the two: halves only
        mixed, across = (report[run]["placements"]["Affine_0_W"] for run in ("mixed8x2",
                                                                            "across8x2"))
        assert (mixed["parts"], mixed["parts_here"]) == (2, 2)
        assert (across["parts"], across["parts_here"]) == (2, 1)
