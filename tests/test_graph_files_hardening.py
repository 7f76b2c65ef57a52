"""load_graph on crafted and corrupt files: a clear SerializationError, no code run, bounded memory.

A small graph is saved, its manifest taken apart, changed one way per case and
written back as a .npz; loading it must fail with a SerializationError that names
the path and the problem, before anything the file declares is allocated.
"""
import json
import os
import pickle
import tracemalloc
import zipfile

import numpy as np
import pytest

import axgraph as ng
from axgraph.serialization import SerializationError, load_graph, save_graph, save_variables


@pytest.fixture
def saved(tmp_path):
    """A graph file of x (C, N) placeholder, w (C+1, C) variable, a dot, a role and a dim."""
    role = ng.make_axis_role("channel")
    C = ng.make_axis(2, name="C", roles=[role])
    N = ng.make_axis(ng.dim("B"), name="N")
    x = ng.placeholder([C, N], name="x")
    w = ng.variable([C + 1, C], initial_value=np.ones((2, 2)), name="w")
    y = ng.dot(w, x, name="y")
    path = tmp_path / "graph.axg"
    save_graph([y, ng.sum(y, out_axes=[N], name="s")], path, inputs=[x])
    return path


def parts(path):
    """(manifest, {key: array}) of a graph file, read here with NumPy."""
    with np.load(path, allow_pickle=False) as archive:
        arrays = {key: archive[key] for key in archive.files}
    manifest = json.loads(bytes(arrays.pop("__manifest__")).decode())
    return manifest, arrays


def write(path, manifest, arrays):
    text = json.dumps(manifest).encode()
    with open(path, "wb") as file:
        np.savez(file, __manifest__=np.frombuffer(text, np.uint8), **arrays)


def op_entry(manifest, name):
    return next(entry for entry in manifest["ops"] if entry["name"] == name)


def refused(path, *fragments):
    with pytest.raises(SerializationError) as raised:
        load_graph(path)
    message = str(raised.value)
    assert str(path) in message, message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_the_saved_file_loads(saved):
    assert [op.name for op in load_graph(saved).results] == ["y", "s"]


def nested(depth):
    value = 0
    for _ in range(depth):
        value = {"tuple": [value]}
    return value


def dims_product(count):
    """(A0 + 1)*(A1 + 1)*...: each factor a floor that the rebuild expands into two terms."""
    floors = [["f", [[[["v", f"A{i}"]], 2], [[], 2]], 2] for i in range(count)]  # (2*A_i + 2)//2
    return {"dim": [[floors, 1]]}


def set_op(name, field, value):
    def change(m):
        op_entry(m, name)[field] = value
    return change


CASES = {
    "newer version": (lambda m: m.update(version=2),
                      ["format version 2; this axgraph reads version 1", "newer axgraph"]),
    "another format": (lambda m: m.update(format="axgraph-variables"),
                       ["not an axgraph graph file"]),
    "os.system as a class": (set_op("y", "class", "os.system"),
                             ["class 'os.system' is not an op class"]),
    "a module path as a class": (set_op("y", "class", "subprocess.Popen"), ["not an op class"]),
    "a dataclass that is not one": (
        lambda m: op_entry(m, "y")["attributes"].update(
            pairs={"dataclass": ["Popen", {"args": "ls"}]}),
        ["'Popen' is not one of the value classes"]),
    "unknown value kind": (
        lambda m: op_entry(m, "y")["attributes"].update(pairs={"eval": "1+1"}),
        ["not a value a graph file holds"]),
    "arg out of range": (set_op("y", "args", [0, 999]), ["refers to op 999"]),
    "negative arg": (set_op("y", "args", [-1, 0]), ["refers to op -1"]),
    "arg to itself": (lambda m: m["ops"][2].update(args=[2, 0]), ["refers to op 2"]),
    "args of the wrong type": (set_op("y", "args", "0, 1"), ["args is str"]),
    "attributes of the wrong type": (set_op("y", "attributes", ["pairs"]), ["attributes"]),
    "missing attribute": (set_op("y", "attributes", {}), ["the class declares"]),
    "name of the wrong type": (set_op("y", "name", 5), ["name is int 5"]),
    "unknown field": (lambda m: op_entry(m, "y").update(code="import os"), ["expected"]),
    "axis out of range": (set_op("y", "axes", [0, 77]), ["refers to axis 77"]),
    "other axes than the op computes": (set_op("y", "axes", [0]), ["computes", "file says"]),
    "an op its checks refuse": (lambda m: op_entry(m, "y")["attributes"].update(
        pairs={"list": []}), ["cannot be built", "test_graph_files_hardening.py:"]),
    "dtype object": (set_op("y", "dtype", "object"), ["dtype 'object' is not one of"]),
    "cycle": (lambda m: (op_entry(m, "y").update(other_deps=[m["ops"].index(op_entry(m, "s"))]),
                         op_entry(m, "s").update(other_deps=[m["ops"].index(op_entry(m, "y"))])),
              ["cycle"]),
    "input that is not a placeholder": (
        lambda m: m.update(inputs=[m["ops"].index(op_entry(m, "w"))]), ["not a placeholder"]),
    "result out of range": (lambda m: m.update(results=[10 ** 6]), ["refers to op 1000000"]),
    "result kind": (lambda m: m.update(result_kind="single"), ["result kind 'single'"]),
    "bad location": (set_op("y", "location", ["model.py", -1]), ["is not a line number"]),
    "dual level 0": (lambda m: next(a for a in m["axes"] if a["kind"] == "dual").update(level=0),
                     ["a dual at level 0"]),
    "axis of no kind": (lambda m: m["axes"].__setitem__(0, {"kind": "lambda"}),
                        ["not an axis of a kind"]),
    "negative length": (lambda m: m["axes"][0].update(length=-3), ["length -3"]),
    "role out of range": (lambda m: m["axes"][0].update(roles=[5]), ["refers to role 5"]),
    "a float that is code": (lambda m: op_entry(m, "w")["attributes"].update(
        initial_value={"float": "__import__('os')"}), ["not nan, inf or -inf"]),
    "deep nesting": (lambda m: op_entry(m, "w")["metadata"].update(dict=[["k", nested(200)]]),
                     ["nests deeper than"]),
    "a dim that would grow without bound": (
        lambda m: next(a for a in m["axes"] if a.get("name") == "N").update(
            length=dims_product(40)), ["grows beyond 4096 terms"]),
    "a size variable that is not a name": (
        lambda m: next(a for a in m["axes"] if a.get("name") == "N").update(
            length={"dim": [[[["v", "os.system('ls')"]], 1]]}), ["is not an identifier"]),
    "huge int": (lambda m: m["axes"][0].update(length=10 ** 30), ["length", "not an int"]),
    "array key missing": (lambda m: op_entry(m, "w")["attributes"].update(
        initial_value={"array": "a7"}), ["which the file lacks"]),
    "too many ops": (lambda m: m.update(ops=[0] * ((1 << 20) + 1)), ["at most 1048576"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_crafted_manifest_is_refused_with_its_problem(saved, case, monkeypatch):
    change, fragments = CASES[case]
    manifest, arrays = parts(saved)
    change(manifest)
    write(saved, manifest, arrays)
    ran = []
    monkeypatch.setattr(os, "system", lambda *args: ran.append(args))
    refused(saved, *fragments)
    assert not ran


def test_a_huge_declared_array_is_refused_before_it_is_allocated(saved):
    manifest, arrays = parts(saved)
    manifest["arrays"][0]["shape"] = [1 << 40, 1 << 10]
    write(saved, manifest, arrays)
    tracemalloc.start()
    try:
        refused(saved, "array 'a0'")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20


def test_a_huge_axis_length_is_held_not_allocated(saved):
    manifest, arrays = parts(saved)
    next(a for a in manifest["axes"] if a.get("name") == "N")["length"] = 1 << 62
    write(saved, manifest, arrays)
    tracemalloc.start()
    try:
        graph = load_graph(saved)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert graph.inputs[0].axes[1].length == 1 << 62 and peak < 16 << 20


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.9, 0.99])
def test_a_truncated_file_is_refused(saved, keep):
    data = saved.read_bytes()
    saved.write_bytes(data[:int(len(data) * keep)])
    refused(saved, "cannot load a graph from")


def test_files_that_are_not_graph_files(tmp_path):
    refused(tmp_path / "missing.axg", "no such file")
    (tmp_path / "empty.axg").write_bytes(b"")
    refused(tmp_path / "empty.axg", "empty")
    (tmp_path / "text.axg").write_text("ops = [os.system('ls')]")
    refused(tmp_path / "text.axg", "not a readable zip archive (a graph file is a .npz)")
    refused(tmp_path, "directory")
    H = ng.make_axis(2, name="H")
    w = ng.variable([H], initial_value=0.0, name="w")
    save_variables(tmp_path / "w.npz", {w: np.zeros(2)})
    refused(tmp_path / "w.npz", "not an axgraph graph file (it is an axgraph variables file)")
    with open(tmp_path / "pickled.axg", "wb") as file:
        pickle.dump({"ops": []}, file)
    refused(tmp_path / "pickled.axg", "not a readable zip archive")


def test_a_compressed_member_is_refused(saved, tmp_path):
    manifest, arrays = parts(saved)
    with zipfile.ZipFile(tmp_path / "zipped.axg", "w", zipfile.ZIP_DEFLATED) as archive:
        for key, array in arrays.items():
            with archive.open(key + ".npy", "w") as member:
                np.lib.format.write_array(member, array)
        with archive.open("__manifest__.npy", "w") as member:
            np.lib.format.write_array(member, np.frombuffer(json.dumps(manifest).encode(),
                                                            np.uint8))
    refused(tmp_path / "zipped.axg", "compressed")


def test_no_pickle_nor_np_load_is_used(saved, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("pickle was used")

    for name in ("dump", "dumps", "load", "loads"):
        monkeypatch.setattr(pickle, name, refuse)
    monkeypatch.setattr(np, "load", refuse)
    graph = load_graph(saved)
    save_graph(list(graph.results), saved, inputs=graph.inputs)
    assert load_graph(saved).results[0].name == "y"
