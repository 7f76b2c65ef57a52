"""Checkpoints of a training run: resuming gives exactly the losses of an unbroken run.

A run is 10 steps straight; the other is 5 steps, a checkpoint, a model built again from
other initial weights (what a new process does), the checkpoint restored and 5 more steps.
The losses must be equal bit for bit: the model, the optimizer's moments and step counter,
the shuffled iterator's position and a host random stream (input noise) all come back.
Crafted and corrupt files are refused with a SerializationError and change nothing.
"""
from __future__ import annotations

import json
import math
import pickle

import numpy as np
import pytest

import axgraph as ng
from axgraph.errors import SerializationError
from axgraph.frontends.neon import (AdamW, ArrayIterator, Checkpoint, GradientDescentMomentum,
                                    SequentialArrayIterator, WarmupCosineSchedule)
from axgraph.serialization import save_variables
from conftest import ENGINES

EXAMPLES, FEATURES, HIDDEN, BATCH = 10, 3, 5, 4


def dataset():
    rng = np.random.default_rng(42)
    x = rng.standard_normal((EXAMPLES, FEATURES)).astype(np.float32)
    return {"x": x, "y": np.sin(x.sum(axis=1)).astype(np.float32)}


OPTIMIZERS = {
    "adamw_schedule_clip": lambda: AdamW(0.05, weight_decay=0.1, gradient_clip_norm=1.0,
                                         schedule=WarmupCosineSchedule(3, 10)),
    "momentum": lambda: GradientDescentMomentum(0.05, momentum_coef=0.9),
    "bfloat16_masters": lambda: AdamW(0.05, master_weights=True),
}


class Run:
    """A small regression model, its training step, shuffled data and an input-noise stream."""

    def __init__(self, transformer, optimizer_name, weight_seed):
        self.data = ArrayIterator(dataset(), BATCH, shuffle=True, seed=3)
        inputs = self.data.make_placeholders()
        dtype = "bfloat16" if optimizer_name == "bfloat16_masters" else np.float32
        F, N = inputs["x"].axes
        H = ng.make_axis(HIDDEN, name="H")
        rng = np.random.default_rng(weight_seed)
        self.variables = {
            "W": ng.variable([F, H], initial_value=rng.standard_normal((FEATURES, HIDDEN)),
                             dtype=dtype),
            "b": ng.variable([H], initial_value=rng.standard_normal(HIDDEN) * 0.1, dtype=dtype),
            "v": ng.variable([H], initial_value=rng.standard_normal(HIDDEN), dtype=dtype),
            "scale": ng.variable((), initial_value=1.0 + weight_seed, dtype=dtype),    # a 0-d one
        }
        W, b, v, scale = self.variables.values()
        x = ng.add(inputs["x"], 0, dtype=dtype)
        hidden = ng.tanh(ng.dot(x, W) + b)
        prediction = ng.add(scale * ng.dot(hidden, v), 0, dtype=np.float32)
        loss = ng.mean(ng.square(prediction - inputs["y"]), out_axes=())
        self.optimizer = OPTIMIZERS[optimizer_name]()
        self.noise = np.random.default_rng(7)
        self.train = transformer.computation(ng.sequential([self.optimizer(loss), loss]),
                                             inputs["x"], inputs["y"])
        self.checkpoint = Checkpoint(self.variables, self.optimizer, self.data,
                                     rngs={"noise": self.noise})
        self._batches = self._forever()

    def _forever(self):
        while True:
            yield from self.data

    def steps(self, count):
        losses = []
        for _ in range(count):
            batch = next(self._batches)
            noisy = batch["x"] + 0.1 * self.noise.standard_normal(batch["x"].shape).astype(
                np.float32)
            losses.append(float(self.train(noisy, batch["y"])))
        return losses


#: Every optimizer on numpy and cpu; jax (slow to compile) with the first one.
RESUME_CASES = [(engine, name) for engine in ("numpy", "cpu") for name in sorted(OPTIMIZERS)] + [
    ("jax", "adamw_schedule_clip")]


@pytest.mark.parametrize("engine, optimizer_name", RESUME_CASES)
def test_resumed_run_gives_the_losses_of_an_unbroken_one(engine, optimizer_name, tmp_path):
    if optimizer_name == "bfloat16_masters":
        pytest.importorskip("ml_dtypes")
    name, options = ENGINES[engine]
    with ng.make_transformer(name, **options) as transformer:
        unbroken = Run(transformer, optimizer_name, weight_seed=0).steps(10)
    path = tmp_path / "run.npz"
    with ng.make_transformer(name, **options) as transformer:
        first = Run(transformer, optimizer_name, weight_seed=0)
        before = first.steps(5)
        first.checkpoint.save(path, transformer, progress={"losses": before})
    with ng.make_transformer(name, **options) as transformer:
        second = Run(transformer, optimizer_name, weight_seed=1)     # other weights, fresh state
        progress = second.checkpoint.restore(path, transformer)
        after = second.steps(5)
        step = transformer.computation(second.optimizer.iteration)()
    assert before + after == unbroken
    assert progress == {"losses": before}
    assert step.shape == () and step.dtype == np.int32 and int(step) == 10
    assert len(set(unbroken)) == 10             # the losses move: equality is not trivial


def test_without_the_optimizer_state_the_losses_differ(tmp_path):
    """The checkpoint's optimizer state matters: a run resumed from the model alone drifts."""
    with ng.make_transformer("numpy") as transformer:
        unbroken = Run(transformer, "momentum", 0).steps(10)
    with ng.make_transformer("numpy") as transformer:
        first = Run(transformer, "momentum", 0)
        first.steps(5)
        Checkpoint(first.variables, data=first.data, rngs={"noise": first.noise}).save(
            tmp_path / "model.npz", transformer)
    with ng.make_transformer("numpy") as transformer:
        second = Run(transformer, "momentum", 1)
        Checkpoint(second.variables, data=second.data, rngs={"noise": second.noise}).restore(
            tmp_path / "model.npz", transformer)
        assert second.steps(5) != unbroken[5:]


def test_scalars_round_trip(tmp_path):
    x = ng.variable((), initial_value=0.1, dtype=np.float64, name="x")
    count = ng.variable((), initial_value=7, dtype=np.int64, name="count")
    progress = {"int": 3, "big": 2 ** 70, "float": 0.1, "negative_zero": -0.0, "nan": math.nan,
                "inf": math.inf, "minus_inf": -math.inf, "bool": True, "none": None, "text": "é",
                "f32": np.float32(0.1), "f16": np.float16(-2.5), "i64": np.int64(-2 ** 40),
                "u8": np.uint8(255), "np_bool": np.bool_(True), "f64_nan": np.float64("nan"),
                "nested": [1, (2.5, [np.int32(3)]), {"k": None}]}
    checkpoint = Checkpoint({"x": x, "count": count})
    with ng.NumPyTransformer() as transformer:
        checkpoint.save(tmp_path / "s.npz", transformer, progress=progress)
    with ng.NumPyTransformer() as transformer:
        transformer.computation([x, count])()
        back = checkpoint.restore(tmp_path / "s.npz", transformer)
        values = transformer.computation([x, count])()
    for key, value in progress.items():
        if key == "nested":
            continue
        assert type(back[key]) is type(value), key
        if isinstance(value, (float, np.floating)) and math.isnan(value):
            assert math.isnan(back[key])
        else:
            assert back[key] == value, key
    assert math.copysign(1.0, back["negative_zero"]) == -1.0
    assert back["nested"] == [1, [2.5, [3]], {"k": None}]
    assert type(back["nested"][1][1][0]) is np.int32
    assert [(v.shape, v.dtype, v.item()) for v in values] == [((), np.float64, 0.1),
                                                            ((), np.int64, 7)]


def test_progress_that_json_cannot_hold_is_refused(tmp_path):
    x = ng.variable((), initial_value=1.0, name="x")
    checkpoint = Checkpoint({"x": x})
    with ng.NumPyTransformer() as transformer:
        for bad, match in [(np.zeros(3), "is a ndarray"), ({1: 2}, "key 1"),
                           ({"$float": "nan"}, "starting with '\\$'"), (object(), "is a object")]:
            with pytest.raises(SerializationError, match=match):
                checkpoint.save(tmp_path / "bad.npz", transformer, progress=bad)
    assert not (tmp_path / "bad.npz").exists()


class _Payload:
    ran = []

    def __reduce__(self):
        return (_Payload.ran.append, ("pickle ran",))


def small_run(seed=0):
    data = ArrayIterator(dataset(), BATCH, shuffle=True, seed=3)
    w = ng.variable([ng.make_axis(2, name="K")], initial_value=float(seed), name="w")
    rng = np.random.default_rng(seed)
    return Checkpoint({"w": w}, data=data, rngs={"r": rng}), w, data, rng


def crafted(path, metadata):
    """A file with the run's variables and the given metadata (as a crafted file would be)."""
    w = ng.variable([ng.make_axis(2, name="K")], initial_value=5.0, name="w")
    with ng.NumPyTransformer() as transformer:
        save_variables(path, {"model/w": w}, transformer, metadata=metadata)


def good_metadata(tmp_path):
    checkpoint, _, _, _ = small_run()
    with ng.NumPyTransformer() as transformer:
        checkpoint.save(tmp_path / "good.npz", transformer)
    from axgraph.serialization import read_manifest
    return read_manifest(tmp_path / "good.npz")["metadata"]


def test_corrupt_and_crafted_files_are_refused_and_change_nothing(tmp_path):
    good = good_metadata(tmp_path)
    with open(tmp_path / "pickled.npz", "wb") as f:
        pickle.dump({"w": _Payload()}, f)
    np.savez(tmp_path / "objects.npz", w=np.array([_Payload()], dtype=object))
    blob = (tmp_path / "good.npz").read_bytes()
    (tmp_path / "truncated.npz").write_bytes(blob[:len(blob) // 2])
    cases = {"pickled.npz": "not a readable zip", "objects.npz": "not an axgraph variables file",
             "truncated.npz": "cannot read variables", "missing.npz": "no such file"}

    def altered(**changes):
        metadata = json.loads(json.dumps(good))
        for dotted, value in changes.items():
            *parents, last = dotted.split("__")
            target = metadata
            for key in parents:
                target = target[key]
            target[last] = value
        return metadata

    for name, metadata, match in [
        ("plain.npz", None, "not a training checkpoint"),
        ("kind.npz", altered(kind="other"), "not a training checkpoint"),
        ("version.npz", altered(version=2), "version 2"),
        ("extra.npz", {**good, "code": "import os"}, "fields"),
        ("rng.npz", altered(rngs__r__state={"bit_generator": "PCG64", "state": "x"}),
         "rng 'r'.*does not fit"),
        ("rng_kind.npz", altered(rngs__r__type="RandomState"), "rng 'r' is a Generator"),
        ("position.npz", altered(data__position=10 ** 9), "position must be an int from 0 up"),
        ("settings.npz", altered(data__settings__batch_size=5), "settings"),
        ("marker.npz", altered(progress={"$eval": "1"}), "unknown marker"),
        ("scalar.npz", altered(progress={"$numpy": ["|O", 1]}), "malformed NumPy scalar"),
        ("overflow.npz", altered(progress={"$numpy": ["|u1", 300]}), "cannot hold"),
        ("parts.npz", altered(data=None), "holds variables, rng 'r'; this Checkpoint has"),
    ]:
        crafted(tmp_path / name, metadata)
        cases[name] = match

    for name, match in cases.items():
        checkpoint, w, data, rng = small_run(seed=1)
        with ng.NumPyTransformer() as transformer:
            next(iter(data))
            position, state = data.get_state(), rng.bit_generator.state
            with pytest.raises(SerializationError, match=match) as error:
                checkpoint.restore(tmp_path / name, transformer)
            assert str(tmp_path / name) in str(error.value), name
            assert transformer.computation(w)().tolist() == [1.0, 1.0], name
            assert data.get_state() == position and rng.bit_generator.state == state, name
    assert _Payload.ran == []


def test_checkpoint_errors_name_the_problem():
    from axgraph.errors import AxgraphValueError
    w = ng.variable((), initial_value=1.0, name="w")
    with pytest.raises(AxgraphValueError, match="has not built a step op"):
        Checkpoint({"w": w}, AdamW())
    with pytest.raises(AxgraphValueError, match="give the variables"):
        Checkpoint()
    with pytest.raises(AxgraphValueError, match="rng 'r' is a int"):
        Checkpoint({"w": w}, rngs={"r": 3})
    u = ng.variable((), initial_value=1.0, name="u")
    optimizer = AdamW()
    optimizer(w * u)
    with pytest.raises(AxgraphValueError, match="trains .*'u'.* not among the variables"):
        Checkpoint({"w": w}, optimizer)
    assert sorted(Checkpoint(optimizer=optimizer).variables) == ["u", "w"]


def test_sequential_iterator_state_round_trips():
    text = {"inp_txt": np.arange(60)}
    a = SequentialArrayIterator(text, time_steps=3, batch_size=2)
    batches = iter(a)
    next(batches)
    state = json.loads(json.dumps(a.get_state()))
    expected = next(batches)["inp_txt"]
    b = SequentialArrayIterator(text, time_steps=3, batch_size=2)
    b.set_state(state)
    np.testing.assert_array_equal(next(iter(b))["inp_txt"], expected)
    from axgraph.errors import AxgraphValueError
    with pytest.raises(AxgraphValueError, match="settings"):
        SequentialArrayIterator(text, time_steps=4, batch_size=2).set_state(state)


def test_variables_file_metadata_must_be_json(tmp_path):
    w = ng.variable((), initial_value=1.0, name="w")
    for bad in ({"a": np.zeros(2)}, {"a": math.nan}):
        with pytest.raises(SerializationError, match="metadata is not JSON"):
            save_variables(tmp_path / "m.npz", {w: np.float32(1.0)}, metadata=bad)
    save_variables(tmp_path / "m.npz", {w: np.float32(1.0)}, metadata={"a": [1, "b"]})
    from axgraph.serialization import read_manifest
    assert read_manifest(tmp_path / "m.npz")["metadata"] == {"a": [1, "b"]}
