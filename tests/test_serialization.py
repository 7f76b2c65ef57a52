"""save_variables / restore_variables: round trips, checks, atomic writes, no pickle."""
import json
import os
import pickle
import zipfile

import numpy as np
import pytest

import axgraph as ng
from axgraph import serialization
from axgraph.serialization import (SerializationError, get_values, read_manifest,
                                   restore_variables, save_variables, set_values)

W_VALUE = np.arange(6, dtype=np.float32).reshape(2, 3)
B_VALUE = np.array([0.5, -0.5], dtype=np.float64)


def model():
    """Two named variables on named axes, and a value that depends on both."""
    H, F = ng.make_axis(2, name="H"), ng.make_axis(3, name="F")
    w = ng.variable([H, F - 1], initial_value=W_VALUE, name="w")
    b = ng.variable([H], dtype=np.float64, initial_value=B_VALUE, name="b")
    return w, b, ng.sum(w, out_axes=[H]) + b


def test_round_trip_into_a_fresh_transformer(tmp_path):
    w, b, out = model()
    path = tmp_path / "model.npz"
    with ng.NumPyTransformer() as first:
        with ng.Op.saved_user_deps():
            train = ng.doall([ng.assign(w, w * 2), ng.assign(b, b + 1)])
        first.computation(train)()
        assert save_variables(path, [w, b], first) == path
        saved_out = first.computation(out)()
    with ng.NumPyTransformer() as second:
        restored = restore_variables(path, [w, b], second)
        np.testing.assert_array_equal(restored[w], W_VALUE * 2)
        # the restored values are used, not overwritten by the initializers
        np.testing.assert_allclose(second.computation(out)(), saved_out)
        np.testing.assert_array_equal(second.computation(b)(), B_VALUE + 1)


def test_save_forms_and_the_manifest(tmp_path):
    w, b, out = model()
    with ng.NumPyTransformer() as transformer:
        transformer.computation(out)()
        save_variables(tmp_path / "all.npz", transformer)             # every trainable variable
        save_variables(tmp_path / "dict.npz", get_values(transformer, [w]))
        save_variables(tmp_path / "named.npz", {"weights": w}, transformer)
    assert [v["name"] for v in read_manifest(tmp_path / "all.npz")["variables"]] == [w.name, b.name]
    assert read_manifest(tmp_path / "named.npz")["variables"][0]["name"] == "weights"
    (entry,) = read_manifest(tmp_path / "dict.npz")["variables"]
    assert entry["name"] == w.name
    assert entry["dtype"] == "<f4" and entry["shape"] == [2, 3]
    assert [(a["name"], a["length"], a["dual_level"]) for a in entry["axes"]] == [
        ("H", 2, 0), ("F-1", 3, -1)]
    with np.load(tmp_path / "dict.npz", allow_pickle=False) as archive:
        manifest = json.loads(bytes(archive[serialization.MANIFEST_KEY]).decode())
        assert manifest["format"] == serialization.FORMAT
        np.testing.assert_array_equal(archive[entry["key"]], W_VALUE)


def test_no_pickle_is_used(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("pickle was used")

    for name in ("dump", "dumps", "load", "loads"):
        monkeypatch.setattr(pickle, name, refuse)
    w, b, out = model()
    save_variables(tmp_path / "m.npz", {w: W_VALUE, b: B_VALUE})
    restore_variables(tmp_path / "m.npz", [w, b])
    with zipfile.ZipFile(tmp_path / "m.npz") as archive:
        assert all(name.endswith(".npy") for name in archive.namelist())


def test_get_values_initializes_and_set_values_marks_initialized(transformer):
    w, b, out = model()
    np.testing.assert_array_equal(get_values(transformer, [w])[w], W_VALUE)
    other_w, other_b, other_out = model()
    set_values(transformer, {other_w: np.ones((2, 3)), other_b: np.zeros(2)})
    np.testing.assert_allclose(transformer.computation(other_out)(), [3.0, 3.0])
    with pytest.raises(SerializationError, match="constant"):
        set_values(transformer, {ng.constant(1.0): 2.0})
    with pytest.raises(SerializationError, match=r"shape \(3,\)"):
        set_values(transformer, {other_b: np.zeros(3)})
    with pytest.raises(SerializationError, match="float64"):
        set_values(transformer, {ng.variable([], dtype=np.int32, initial_value=0): 1.5})


@pytest.fixture
def saved(tmp_path):
    w, b, _ = model()
    path = tmp_path / "m.npz"
    with ng.NumPyTransformer() as transformer:      # saves the initial values under fixed names
        save_variables(path, {"w": w, "b": b}, transformer)
    return path


def restore_error(path, variables, **kwargs):
    with pytest.raises(SerializationError) as caught:
        restore_variables(path, variables, **kwargs)
    assert isinstance(caught.value, ng.GraphError) and isinstance(caught.value, ng.AxgraphError)
    return str(caught.value)


def test_names_must_match(saved):
    H = ng.make_axis(2, name="H")
    renamed = ng.variable([H], dtype=np.float64, initial_value=0.0, name="bias")
    message = restore_error(saved, [renamed])
    assert f"not in the file: {renamed.name}" in message
    assert "not among the variables: b, w" in message


def test_strict_false_ignores_extra_variables(saved):
    H = ng.make_axis(2, name="H")
    b = ng.variable([H], dtype=np.float64, initial_value=0.0, name="b")
    assert list(restore_variables(saved, {"b": b}, strict=False)) == [b]


def test_shapes_dtypes_and_axis_names_must_match(saved):
    H, F, G = ng.make_axis(2, name="H"), ng.make_axis(4, name="F"), ng.make_axis(3, name="G")
    wide = ng.variable([H, F - 1], initial_value=0.0, name="w")
    b32 = ng.variable([H], initial_value=0.0, name="b")                 # float32, saved float64
    message = restore_error(saved, {"w": wide, "b": b32})
    assert "w: the file has axes (H: 2, F-1: 3)" in message
    assert "b: the file holds float64 but the variable is float32" in message
    other_axis = ng.variable([H, G - 1], initial_value=0.0, name="w")
    message = restore_error(saved, {"w": other_axis}, strict=False)
    assert "axis F-1 is not G-1" in message


def test_axes_pair_by_name_not_position(saved):
    H, F = ng.make_axis(2, name="H"), ng.make_axis(3, name="F")
    transposed = ng.variable([F - 1, H], initial_value=0.0, name="w")
    restored = restore_variables(saved, {"w": transposed}, strict=False)
    np.testing.assert_array_equal(restored[transposed], W_VALUE.T)


def test_a_failed_restore_writes_nothing(saved, transformer):
    H = ng.make_axis(2, name="H")
    b = ng.variable([H], dtype=np.float64, initial_value=0.0, name="b")
    missing = ng.variable([H], initial_value=0.0, name="missing")
    restore_error(saved, {"b": b, "missing": missing}, strict=False, transformer=transformer)
    assert b not in transformer.state


def test_a_failed_save_keeps_the_previous_file(saved, monkeypatch):
    real_savez = np.savez

    def disk_full(file, **arrays):
        real_savez(file, **arrays)
        file.truncate(100)                 # half written...
        raise OSError("No space left on device")

    monkeypatch.setattr(serialization.np, "savez", disk_full)
    w, b, _ = model()
    with pytest.raises(OSError, match="No space"):
        save_variables(saved, {w: np.zeros((2, 3)), b: np.zeros(2)})
    monkeypatch.undo()
    assert os.listdir(saved.parent) == [saved.name]                    # no temporary left behind
    values = restore_variables(saved, {"w": w, "b": b})
    np.testing.assert_array_equal(values[w], W_VALUE)


def test_a_failed_rename_keeps_the_previous_file(saved, monkeypatch):
    def refuse(source, destination):
        raise PermissionError("replace refused")

    monkeypatch.setattr(serialization.os, "replace", refuse)
    w, b, _ = model()
    with pytest.raises(PermissionError):
        save_variables(saved, {w: np.zeros((2, 3)), b: np.zeros(2)})
    monkeypatch.undo()
    assert os.listdir(saved.parent) == [saved.name]
    np.testing.assert_array_equal(restore_variables(saved, {"w": w, "b": b})[w], W_VALUE)


def test_invalid_values_are_refused_before_writing(saved):
    w, b, _ = model()
    with pytest.raises(SerializationError, match="shape"):
        save_variables(saved, {w: np.zeros((3, 2))})
    with pytest.raises(SerializationError, match="transformer="):
        save_variables(saved, [w])
    np.testing.assert_array_equal(restore_variables(saved, {"w": w, "b": b})[w], W_VALUE)


def test_files_that_are_not_checkpoints(tmp_path):
    w, b, _ = model()
    (tmp_path / "junk.npz").write_bytes(b"not a zip file")
    with pytest.raises(SerializationError, match="cannot read"):
        restore_variables(tmp_path / "junk.npz", [w])
    np.savez(tmp_path / "plain.npz", w=W_VALUE)
    with pytest.raises(SerializationError, match="not an axgraph variables file"):
        restore_variables(tmp_path / "plain.npz", [w])
    np.savez(tmp_path / "objects.npz", x=np.array([{"a": 1}], dtype=object))
    with pytest.raises(SerializationError, match="cannot read"):
        restore_variables(tmp_path / "objects.npz", [w])
