"""save_variables / restore_variables: round trips, checks, atomic writes, no pickle.

The second half feeds restore_variables files built here byte by byte (empty,
truncated, garbage, foreign, crafted headers and manifests, zip tricks) and
checks that each is a SerializationError naming the path and the problem,
without allocating what the file declares.
"""
import json
import os
import pickle
import random
import re
import signal
import stat
import struct
import subprocess
import sys
import tracemalloc
import warnings
import zipfile
import zlib

import numpy as np
import pytest

import axgraph as ng
from axgraph import serialization, variables_file
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
    monkeypatch.setattr(np, "load", refuse)         # headers are parsed by axgraph, not np.load
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
    assert caught.type is ng.SerializationError and isinstance(caught.value, ValueError)
    assert isinstance(caught.value, ng.AxgraphError)
    message = str(caught.value)
    assert os.fspath(path) in message
    return message


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
    # the file's real shape, the variable's axes and shape
    assert ("w: the file has shape (2, 3) (axes H: 2, F-1: 3) but the variable has "
            "Axes(H: 2, F-1: 4), shape (2, 4)") in message
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

    monkeypatch.setattr(variables_file.np, "savez", disk_full)
    w, b, _ = model()
    with pytest.raises(SerializationError, match=re.escape(f"cannot save variables to {saved}: ") + ".*No space") \
            as caught:
        save_variables(saved, {w: np.zeros((2, 3)), b: np.zeros(2)})
    assert isinstance(caught.value.__cause__, OSError)
    monkeypatch.undo()
    assert os.listdir(saved.parent) == [saved.name]                    # no temporary left behind
    values = restore_variables(saved, {"w": w, "b": b})
    np.testing.assert_array_equal(values[w], W_VALUE)


def test_a_failed_rename_keeps_the_previous_file(saved, monkeypatch):
    def refuse(source, destination):
        raise PermissionError("replace refused")

    monkeypatch.setattr(variables_file.os, "replace", refuse)
    w, b, _ = model()
    with pytest.raises(SerializationError, match="replace refused"):
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


# -- saving: paths, interruptions, permissions ----------------------------------------


def test_saving_into_a_missing_directory_names_the_path(tmp_path):
    w, b, _ = model()
    path = tmp_path / "no" / "such" / "m.npz"
    with pytest.raises(SerializationError) as caught:
        save_variables(path, {w: W_VALUE})
    assert str(caught.value) == (f"cannot save variables to {path}: the directory "
                                 f"{tmp_path / 'no' / 'such'} does not exist")
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(SerializationError, match=re.escape(f"{tmp_path / 'file'} is not a directory")):
        save_variables(tmp_path / "file" / "m.npz", {w: W_VALUE})
    with pytest.raises(SerializationError, match=re.escape(f"to {tmp_path}: it is a directory")):
        save_variables(tmp_path, {w: W_VALUE})
    with pytest.raises(SerializationError, match="str or os.PathLike, not int"):
        save_variables(3, {w: W_VALUE})
    assert sorted(os.listdir(tmp_path)) == ["file"]


def unnamed_files_work(directory) -> bool:
    """Whether this system makes unnamed (O_TMPFILE) files in `directory`."""
    try:
        os.close(os.open(directory, os.O_TMPFILE | os.O_WRONLY))
    except (AttributeError, OSError):
        return False
    return os.path.isdir("/proc/self/fd")


@pytest.fixture(params=["unnamed", "named"])
def temporaries(request, tmp_path, monkeypatch):
    """Run a test with each kind of temporary file the writer uses."""
    if request.param == "named":
        monkeypatch.delattr(os, "O_TMPFILE", raising=False)
    elif not unnamed_files_work(tmp_path):
        pytest.skip("no O_TMPFILE here")
    return request.param


def test_an_interrupted_save_leaves_no_temporary(saved, monkeypatch, temporaries):
    real_savez, while_writing = np.savez, []

    def interrupted(file, **arrays):
        real_savez(file, **arrays)
        while_writing.extend(sorted(os.listdir(saved.parent)))
        file.truncate(100)
        raise KeyboardInterrupt                     # ctrl-C in the middle of writing

    monkeypatch.setattr(variables_file.np, "savez", interrupted)
    w, b, _ = model()
    with pytest.raises(KeyboardInterrupt):
        save_variables(saved, {w: np.zeros((2, 3)), b: np.zeros(2)})
    if temporaries == "unnamed":                    # the file being written has no name yet
        assert while_writing == [saved.name]
    else:                                           # a hidden temporary beside the file
        assert len(while_writing) == 2 and while_writing[0].startswith(f".{saved.name}.")
    assert os.listdir(saved.parent) == [saved.name]
    np.testing.assert_array_equal(restore_variables(saved, {"w": w, "b": b})[w], W_VALUE)


def test_an_interrupted_rename_leaves_no_temporary(saved, monkeypatch, temporaries):
    def interrupted(source, destination):
        assert os.path.dirname(source) == os.path.dirname(destination)  # a temporary beside it
        raise KeyboardInterrupt

    monkeypatch.setattr(variables_file.os, "replace", interrupted)
    w, b, _ = model()
    with pytest.raises(KeyboardInterrupt):
        save_variables(saved, {w: np.zeros((2, 3)), b: np.zeros(2)})
    assert os.listdir(saved.parent) == [saved.name]
    np.testing.assert_array_equal(restore_variables(saved, {"w": w, "b": b})[w], W_VALUE)


KILLED_SAVE = """
import os, signal, sys
import numpy as np
from axgraph import serialization, variables_file
import tests.test_serialization as t

def killed(file, **arrays):
    file.write(b"PK" * 100000)
    file.flush()
    os.kill(os.getpid(), signal.SIGKILL)

variables_file.np.savez = killed
w, b, _ = t.model()
serialization.save_variables(sys.argv[1], {w: np.zeros((2, 3)), b: np.zeros(2)})
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="no SIGKILL")
def test_a_killed_save_leaves_no_temporary(saved):
    if not unnamed_files_work(saved.parent):
        pytest.skip("without O_TMPFILE a killed save leaves its hidden temporary")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", KILLED_SAVE, str(saved)], cwd=root,
                          env={**os.environ, "PYTHONPATH": root}, capture_output=True,
                          check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    assert os.listdir(saved.parent) == [saved.name]
    w, b, _ = model()
    np.testing.assert_array_equal(restore_variables(saved, {"w": w, "b": b})[w], W_VALUE)


def test_file_modes_and_symlinks(tmp_path, temporaries):
    w, b, _ = model()
    umask = os.umask(0o022)
    try:
        save_variables(tmp_path / "new.npz", {w: W_VALUE})
    finally:
        os.umask(umask)
    assert stat.S_IMODE(os.stat(tmp_path / "new.npz").st_mode) == 0o644
    os.chmod(tmp_path / "new.npz", 0o600)
    save_variables(tmp_path / "new.npz", {w: W_VALUE * 2})            # keeps the file's mode
    assert stat.S_IMODE(os.stat(tmp_path / "new.npz").st_mode) == 0o600
    os.symlink("new.npz", tmp_path / "link.npz")
    save_variables(tmp_path / "link.npz", {w: W_VALUE * 3})           # writes through the link
    assert os.path.islink(tmp_path / "link.npz")
    np.testing.assert_array_equal(restore_variables(tmp_path / "new.npz", [w])[w], W_VALUE * 3)
    assert sorted(os.listdir(tmp_path)) == ["link.npz", "new.npz"]


def test_save_refuses_what_the_reader_would_refuse(tmp_path):
    H = ng.make_axis(2, name="H")
    v = ng.variable([H], initial_value=0.0)
    with ng.NumPyTransformer() as transformer:
        for name, problem in [("x" * 1025, "1 to 1024 printable characters"),
                              ("a\nb", "printable"), ("", "printable")]:
            with pytest.raises(SerializationError, match=problem):
                save_variables(tmp_path / "m.npz", {name: v}, transformer)
    if hasattr(np, "longdouble") and np.dtype(np.longdouble).itemsize > 8:
        wide = ng.variable([H], dtype=np.longdouble, initial_value=0.0)
        with pytest.raises(SerializationError, match="is not one a variables file may hold"):
            save_variables(tmp_path / "m.npz", {wide: np.zeros(2, np.longdouble)})
    assert os.listdir(tmp_path) == []


# -- round trips ------------------------------------------------------------------------


ROUND_TRIP_DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                     np.uint32, np.uint64, np.float16, np.float32, np.float64]


def test_round_trips_are_exact_for_every_dtype_and_rank(tmp_path):
    rng = np.random.default_rng(0)
    A, B = ng.make_axis(3, name="A"), ng.make_axis(5, name="B")
    values = {}
    for dtype in ROUND_TRIP_DTYPES:
        bits = rng.integers(0, 256, size=3 * 5 * np.dtype(dtype).itemsize, dtype=np.uint8)
        value = bits.view(dtype).reshape(3, 5) if dtype is not np.bool_ else bits.reshape(3, 5) > 99
        values[ng.variable([A, B], dtype=dtype, initial_value=0, name=f"m_{np.dtype(dtype)}")] \
            = value
    values[ng.variable([], dtype=np.float64, initial_value=0.0, name="scalar")] = np.array(-2.5)
    path = save_variables(tmp_path / "all.npz", values)
    restored = restore_variables(path, list(values))
    for op, value in values.items():
        assert restored[op].dtype == op.dtype and restored[op].shape == value.shape
        # bit-exact, NaN payloads and -0.0 included
        assert restored[op].tobytes() == np.ascontiguousarray(value, op.dtype).tobytes()


def test_a_large_variable_is_read_without_a_second_copy(tmp_path):
    N = ng.make_axis(1 << 20, name="N")
    big = ng.variable([N], dtype=np.float64, initial_value=0.0, name="big")
    value = np.arange(1 << 20, dtype=np.float64)
    save_variables(tmp_path / "big.npz", {big: value})
    tracemalloc.start()
    try:
        restored = restore_variables(tmp_path / "big.npz", [big])[big]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(restored, value)
    # the array and a few chunks in flight, not a second copy of the array
    assert peak < value.nbytes + 4 * variables_file.READ_CHUNK_BYTES < 2 * value.nbytes


# -- crafted files ----------------------------------------------------------------------


def npy(descr, shape, data=b"", fortran=False, header=None, version=b"\x01\x00"):
    """A .npy member written by hand: magic, version, header length, header, data."""
    text = (header if header is not None else
            repr({"descr": descr, "fortran_order": fortran, "shape": tuple(shape)})).encode("latin1")
    text += b" " * (63 - (10 + len(text)) % 64) + b"\n"
    length = struct.pack("<H" if version == b"\x01\x00" else "<I", len(text))
    return b"\x93NUMPY" + version + length + text + data


def manifest_npy(manifest) -> bytes:
    text = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
    return npy("|u1", (len(text),), text)


def entry(name="b", key="v0", dtype="<f8", shape=(2,), **changes) -> dict:
    """A manifest entry as save_variables writes it, with `changes` applied."""
    result = {"name": name, "key": key, "dtype": dtype, "shape": list(shape), "trainable": True,
              "axes": [{"name": f"A{i}", "length": n, "dual_level": 0, "auto_named": False}
                       for i, n in enumerate(shape)]}
    result.update(changes)
    return result


def manifest(*entries, **changes) -> dict:
    result = {"format": "axgraph-variables", "version": 1, "variables": list(entries)}
    result.update(changes)
    return result


def stored_zip(members, directory=None) -> bytes:
    """An uncompressed zip written byte by byte.

    `members` are (name, data); `directory` lists the central directory's
    (name, index of the member whose local header it points at, declared size),
    by default one honest entry per member.
    """
    out, locals_ = bytearray(), []
    for name, data in members:
        raw = name.encode()
        locals_.append((len(out), zlib.crc32(data)))
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0, zlib.crc32(data),
                           len(data), len(data), len(raw), 0) + raw + data
    if directory is None:
        directory = [(name, index, len(data)) for index, (name, data) in enumerate(members)]
    start = len(out)
    for name, index, size in directory:
        raw = name.encode()
        offset, crc = locals_[index]
        out += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0, crc, size, size,
                           len(raw), 0, 0, 0, 0, 0, offset) + raw
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(directory), len(directory),
                       len(out) - start, start, 0)
    return bytes(out)


B_NPY = npy("<f8", (2,), B_VALUE.tobytes())


def ours(*members, manifest_=None) -> bytes:
    """A variables file holding b (as save_variables would) and `members`."""
    return stored_zip([("__manifest__.npy", manifest_npy(manifest_ or manifest(entry()))),
                       ("v0.npy", B_NPY), *members])


def b_variable():
    return ng.variable([ng.make_axis(2, name="A0")], dtype=np.float64, initial_value=0.0,
                       name="b")


def test_hand_written_files_are_read_like_saved_ones(tmp_path):
    path = tmp_path / "m.npz"
    path.write_bytes(ours())
    b = b_variable()
    np.testing.assert_array_equal(restore_variables(path, {"b": b})[b], B_VALUE)
    # a big-endian file, and a Fortran-ordered member, read into native arrays
    value = np.arange(6.0).reshape(2, 3)
    path.write_bytes(stored_zip([
        ("__manifest__.npy", manifest_npy(manifest(entry(dtype=">f8"),
                                                   entry("m", "v1", "<f8", (2, 3))))),
        ("v0.npy", npy(">f8", (2,), B_VALUE.astype(">f8").tobytes())),
        ("v1.npy", npy("<f8", (2, 3), value.T.tobytes(), fortran=True))]))
    m = ng.variable([ng.make_axis(2, name="A0"), ng.make_axis(3, name="A1")], dtype=np.float64,
                    initial_value=0.0, name="m")
    restored = restore_variables(path, {"b": b, "m": m})
    assert restored[b].dtype == np.float64
    np.testing.assert_array_equal(restored[b], B_VALUE)
    np.testing.assert_array_equal(restored[m], value)


def huge_header_file(manifest_shape) -> bytes:
    """64 KB of data under a header declaring shape (2**20,)*3 (an exbibyte of float64)."""
    data = bytes(1 << 16)
    entry_ = entry(shape=manifest_shape)
    return stored_zip([("__manifest__.npy", manifest_npy(manifest(entry_))),
                       ("v0.npy", npy("<f8", (1 << 20,) * 3, data))])


@pytest.mark.parametrize("manifest_shape, problem", [
    ((1 << 13,), (r"member v0.npy has shape \(1048576, 1048576, 1048576\); the manifest says "
                  r"shape \(8192,\)")),
    ((1 << 20,) * 3, (r"member v0.npy of variable 'b' has 65664 bytes, but <f8 data of shape "
                      r"\(1048576, 1048576, 1048576\) takes 9223372036854775808 bytes")),
])
def test_a_crafted_header_allocates_nothing(tmp_path, manifest_shape, problem):
    path = tmp_path / "huge.npz"
    path.write_bytes(huge_header_file(manifest_shape))
    assert path.stat().st_size < 70_000
    N = ng.make_axis(1 << 13, name="A0")
    variable = ng.variable([N], dtype=np.float64, initial_value=0.0, name="b")
    tracemalloc.start()
    try:
        with pytest.raises(SerializationError, match=problem):
            restore_variables(path, [variable])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, f"{peak} bytes allocated for a {path.stat().st_size}-byte file"


def refused(tmp_path, data: bytes, problem: str):
    """Restoring a file holding `data` is an error naming the path and the problem.

    read_manifest, which reads no array, refuses it with the same message
    unless the problem is in the array (then the message names its variable).
    """
    path = tmp_path / "bad.npz"
    path.write_bytes(data)
    with pytest.raises(SerializationError) as caught:
        restore_variables(path, [b_variable()])
    message = str(caught.value)
    assert message.startswith(f"cannot read variables from {path}: ")
    assert problem in message, message
    try:
        read_manifest(path)
    except SerializationError as error:
        assert str(error) == message
    else:
        assert message.startswith(f"cannot read variables from {path}: variable 'b': ")


def plain_zip(*members, compression=zipfile.ZIP_STORED) -> bytes:
    import io
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                     # duplicate names on purpose
        with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
            for name, data in members:
                archive.writestr(name, data)
    return buffer.getvalue()


def with_flag_bits(data: bytes, bits: int) -> bytes:
    """`data` (a zip) with general-purpose `bits` set in every local and central header."""
    out = bytearray(data)
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = out.find(signature)
        while at >= 0:
            out[at + offset] |= bits
            at = out.find(signature, at + 1)
    return bytes(out)


def npz(**arrays) -> bytes:
    import io
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


NOT_OURS = "it is not an axgraph variables file"
FILE_CASES = {
    "empty": (b"", "the file is empty (0 bytes)"),
    "garbage": (bytes(range(256)) * 4, "it is not a readable zip archive (a variables file is a .npz): File is not a zip file"),
    "text": (b"not a zip file", "it is not a readable zip archive (a variables file is a .npz): File is not a zip file"),
    "a foreign zip": (plain_zip(("readme.txt", b"hello")),
                      f"{NOT_OURS} (no __manifest__.npy member; it has 'readme.txt')"),
    "a plain npz": (npz(w=W_VALUE), f"{NOT_OURS} (no __manifest__.npy member; it has 'w.npy')"),
    "an object npz": (npz(x=np.array([{"a": 1}], dtype=object)), NOT_OURS),
    "a manifest of another format": (ours(manifest_=manifest(format="other")), NOT_OURS),
    "a manifest that is a list": (ours(manifest_=b"[1, 2]"), NOT_OURS),
    "a newer version": (ours(manifest_=manifest(entry(), version=2)),
                        "format version 2; this axgraph reads version 1"),
    "version true": (ours(manifest_=manifest(entry(), version=True)), "format version True"),
    "version 1.0": (ours(manifest_=manifest(entry(), version=1.0)), "version is float 1.0, not int"),
    "an extra field": (ours(manifest_=manifest(entry(), extra=1)), "the manifest has fields"),
    "a missing field": (ours(manifest_={"format": "axgraph-variables", "version": 1}),
                        "the manifest has fields 'format', 'version'; expected"),
    "variables not a list": (ours(manifest_=manifest(variables={"b": 1})),
                             "variables is dict {'b': 1}, not list"),
    "an entry not an object": (ours(manifest_=manifest([1])), "variable 0 is a list"),
    "a name that is a number": (ours(manifest_=manifest(entry(name=7))),
                                "variable 0: name is int 7, not str"),
    "an empty name": (ours(manifest_=manifest(entry(name=""))), "1 to 1024 printable"),
    "a control character in a name": (ours(manifest_=manifest(entry(name="b\x1b[2J"))),
                                      "printable"),
    "a very long name": (ours(manifest_=manifest(entry(name="b" * 5000))), "1 to 1024"),
    "a shape that is a string": (ours(manifest_=manifest(dict(entry(), shape="2"))),
                                 "shape is str '2', not list"),
    "a float in a shape": (ours(manifest_=manifest(entry(shape=[2.0]))), "holds 2.0, not an int"),
    "a bool in a shape": (ours(manifest_=manifest(entry(shape=[True]))), "holds True, not an int"),
    "a negative length": (ours(manifest_=manifest(entry(shape=(-1,)))),
                          "dimension 0 of shape [-1] is -1, not a length"),
    "a length beyond int64": (ours(manifest_=manifest(entry(shape=(1 << 64,)))),
                              "is 18446744073709551616, not a length"),
    "too many dimensions": (ours(manifest_=manifest(entry(shape=(1,) * 33))),
                            "33 dimensions and 33 axes"),
    "axes that do not match the shape": (
        ours(manifest_=manifest(entry(axes=[{"name": "A0", "length": 3, "dual_level": 0,
                                            "auto_named": False}]))),
        "axis A0 has length 3 but dimension 0 of shape [2] is 2"),
    "fewer axes than dimensions": (ours(manifest_=manifest(entry(axes=[]))), "1 dimensions and 0 axes"),
    "an axis with an int name": (
        ours(manifest_=manifest(entry(axes=[{"name": 0, "length": 2, "dual_level": 0,
                                            "auto_named": False}]))), "name is int 0, not str"),
    "trainable as an int": (ours(manifest_=manifest(entry(trainable=1))), "trainable is int 1, not bool"),
    "a key with a path": (ours(manifest_=manifest(entry(key="../v0"))),
                          "key '../v0' is not 'v' and a number"),
    "two entries with one name": (ours(manifest_=manifest(entry(), entry(key="v1"))),
                                  "two variables have the same name: 'b'"),
    "two entries with one member": (ours(manifest_=manifest(entry(), entry(name="c"))),
                                    "two variables have the same key: 'v0'"),
    "a repeated JSON field": (ours(manifest_=b'{"format": "x", "format": "axgraph-variables"}'),
                              "repeats a field"),
    "NaN in JSON": (ours(manifest_=manifest(entry(shape=[float("nan")]))), "holds NaN, which is not JSON"),
    "deep JSON": (ours(manifest_=b"[" * 100_000 + b"]" * 100_000),
                  "not valid JSON: maximum recursion depth exceeded"),
    "many JSON lists": (ours(manifest_=b"[" + b"[]," * 200_000 + b"[]]"),
                        ("its manifest has 600004 bytes and 200002 objects and lists; at most "
                         "4194304 and 131072")),
    "a manifest that is not UTF-8": (ours(manifest_=b"\xff\xfe"), "not valid JSON"),
    "a manifest that is not JSON": (ours(manifest_=b"{format: 1}"), "not valid JSON"),
    "a huge int in JSON": (ours(manifest_=b"[" + b"9" * 5000 + b"]"), "not valid JSON"),
    "too many variables": (
        ours(manifest_=manifest(*[entry(f"n{i}", f"v{i}", shape=()) for i in range(1 << 14 | 1)])),
        "it lists 16385 variables; at most 16384"),
    "an oversized manifest": (stored_zip([("__manifest__.npy", npy("|u1", (5 << 20,),
                                                                     bytes(5 << 20)))]),
                              ("declares |u1 data of shape (5242880,) (5242880 bytes); at most "
                               "4194304")),
    "a manifest that is not uint8": (stored_zip([("__manifest__.npy", npy("<f8", (1,), bytes(8)))]),
                                     "member __manifest__.npy holds '<f8', not |u1"),
    "a 2-d manifest": (stored_zip([("__manifest__.npy", npy("|u1", (1, 1), b"1"))]),
                       "has shape (1, 1); the manifest says one dimension"),
    # members
    "a missing member": (stored_zip([("__manifest__.npy", manifest_npy(manifest(entry())))]),
                         "the manifest lists members that are not in the file: 'v0.npy'"),
    "an unlisted member": (ours(("evil.npy", b"x")), "members its manifest does not list: 'evil.npy'"),
    "a repeated member": (plain_zip(("__manifest__.npy", manifest_npy(manifest(entry()))),
                                    ("v0.npy", B_NPY), ("v0.npy", B_NPY)),
                          "it has members more than once: 'v0.npy'"),
    "too many members": (stored_zip([("a", b"")], [(str(i), 0, 0) for i in range(1 << 14 | 2)]),
                         "it has 16386 members; at most 16385 are allowed"),
    "a compressed member": (plain_zip(("__manifest__.npy", manifest_npy(manifest(entry()))),
                                      ("v0.npy", B_NPY), compression=zipfile.ZIP_DEFLATED),
                            "is compressed (method 8)"),
    "an encrypted member": (with_flag_bits(ours(), 0x1), "member __manifest__.npy is encrypted"),
    "a member bigger than the file": (
        stored_zip([("__manifest__.npy", manifest_npy(manifest(entry(shape=(1000,)))))]
                   + [("v0.npy", B_NPY)], [("__manifest__.npy", 0, len(manifest_npy(manifest(
                       entry(shape=(1000,)))))), ("v0.npy", 1, 8128)]),
        "member v0.npy declares 8128 bytes at offset"),
    "overlapping members": (
        stored_zip([("__manifest__.npy", manifest_npy(manifest(entry(shape=(100,)),
                                                               entry("c", "v1", shape=(100,))))),
                    ("v0.npy", npy("<f8", (100,), bytes(800)))],
                   [("__manifest__.npy", 0, 504), ("v0.npy", 1, 928), ("v1.npy", 1, 928)]),
        "its members declare 2360 bytes in a file of"),
    "a member of the wrong size": (ours(manifest_=manifest(entry(shape=(1000,)))),
                                   ("member v0.npy of variable 'b' has 144 bytes, but <f8 data "
                                    "of shape (1000,) takes 8000 bytes and a header")),
    # .npy headers
    "bad magic": (ours(manifest_=manifest(entry()))[:0] + stored_zip([
        ("__manifest__.npy", manifest_npy(manifest(entry()))),
        ("v0.npy", b"\x93NUMPX" + B_NPY[6:])]), "member v0.npy is not a .npy array"),
    "an unknown npy version": (stored_zip([
        ("__manifest__.npy", manifest_npy(manifest(entry()))),
        ("v0.npy", B_NPY[:6] + b"\x09\x00" + B_NPY[8:])]), "member v0.npy is not a .npy array"),
    "a huge header length": (stored_zip([
        ("__manifest__.npy", manifest_npy(manifest(entry()))),
        ("v0.npy", npy("<f8", (2,), B_VALUE.tobytes(), version=b"\x02\x00")[:8]
         + struct.pack("<I", 1 << 30) + bytes(100))]),
        "member v0.npy declares a 1073741824-byte header; at most 4096"),
    "a header that runs code": (stored_zip([
        ("__manifest__.npy", manifest_npy(manifest(entry()))),
        ("v0.npy", npy(None, None, B_VALUE.tobytes(), header="__import__('os').system('x')"))]),
        "member v0.npy has a header that is not a Python literal: ValueError"),
    "a header that is not ASCII": (stored_zip([
        ("__manifest__.npy", manifest_npy(manifest(entry()))),
        ("v0.npy", npy(None, None, B_VALUE.tobytes(), header="{'descr': '\xe9'}"))]),
        "not a Python literal: UnicodeDecodeError"),
    "a header with nested brackets": (stored_zip([
        ("__manifest__.npy", manifest_npy(manifest(entry()))),
        ("v0.npy", npy(None, None, B_VALUE.tobytes(), header="(" * 1000 + ")" * 1000))]),
        "not a Python literal"),
    "a header with other fields": (stored_zip([
        ("__manifest__.npy", manifest_npy(manifest(entry()))),
        ("v0.npy", npy(None, None, B_VALUE.tobytes(), header="{'descr': '<f8', 'shape': (2,)}"))]),
        "expected the fields 'descr', 'fortran_order', 'shape'"),
    "a header with a bad fortran_order": (stored_zip([
        ("__manifest__.npy", manifest_npy(manifest(entry()))),
        ("v0.npy", npy(None, None, B_VALUE.tobytes(),
                       header="{'descr': '<f8', 'fortran_order': 0, 'shape': (2,)}"))]),
        "member v0.npy has a malformed header"),
    "a header with a negative shape": (stored_zip([
        ("__manifest__.npy", manifest_npy(manifest(entry()))),
        ("v0.npy", npy("<f8", (-2,), B_VALUE.tobytes()))]), "malformed header"),
    "a header of another dtype": (stored_zip([
        ("__manifest__.npy", manifest_npy(manifest(entry()))),
        ("v0.npy", npy("<i8", (2,), B_VALUE.tobytes()))]), "member v0.npy holds '<i8', not <f8"),
    "a header of another shape": (stored_zip([
        ("__manifest__.npy", manifest_npy(manifest(entry()))),
        ("v0.npy", npy("<f8", (1, 2), B_VALUE.tobytes()))]),
        "member v0.npy has shape (1, 2); the manifest says shape (2,)"),
    "data shorter than the header says": (stored_zip([
        ("__manifest__.npy", manifest_npy(manifest(entry()))), ("v0.npy", B_NPY[:-2])]),
        "member v0.npy declares <f8 data of shape (2,) (16 bytes) but holds 14 bytes"),
    "a corrupted array": (ours().replace(B_VALUE.tobytes(), (B_VALUE * 2).tobytes()),
                          "Bad CRC-32 for file 'v0.npy'"),
}
BAD_DTYPES = ["|O", "|V8", "<U4", "|S4", "<M8[s]", "(1000000000,)<f8", "<f8,<f8", "<c16", "<f16",
              "f8", "float64", "<f1", 8]


@pytest.mark.parametrize("case", FILE_CASES)
def test_bad_files_are_serialization_errors(tmp_path, case):
    data, problem = FILE_CASES[case]
    refused(tmp_path, data, problem)


@pytest.mark.parametrize("dtype", BAD_DTYPES)
def test_only_numeric_dtypes_are_read(tmp_path, dtype):
    problem = ("is not one a variables file may hold" if isinstance(dtype, str)
               else "dtype is int 8, not str")
    refused(tmp_path, ours(manifest_=manifest(entry(dtype=dtype))), problem)


def test_missing_files_directories_and_truncations(tmp_path):
    b = b_variable()
    for path, problem in [(tmp_path / "missing.npz", "no such file"),
                          (tmp_path / "missing" / "m.npz", "no such file"),
                          (tmp_path, "it is a directory, not a file")]:
        with pytest.raises(SerializationError) as caught:
            restore_variables(path, [b])
        assert str(caught.value) == f"cannot read variables from {path}: {problem}"
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo")                       # would block a reader that opened it
        refused_fifo = pytest.raises(SerializationError, match="it is not a regular file")
        with refused_fifo:
            restore_variables(tmp_path / "fifo", [b])
    whole = ours()
    (tmp_path / "whole.npz").write_bytes(whole)
    np.testing.assert_array_equal(restore_variables(tmp_path / "whole.npz", [b])[b], B_VALUE)
    for length in range(0, len(whole), 3):
        path = tmp_path / "cut.npz"
        path.write_bytes(whole[:length])
        with pytest.raises(SerializationError, match=re.escape(f"cannot read variables from {path}: ")):
            restore_variables(path, [b])


def test_random_corruptions_are_serialization_errors_or_exact(tmp_path):
    """Flipped, dropped and inserted bytes: a SerializationError, or (a harmless byte) the values."""
    whole = ours()
    path, rng, b = tmp_path / "fuzz.npz", random.Random(0), b_variable()
    outcomes = {"refused": 0, "read": 0}
    for _ in range(300):
        data = bytearray(whole)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(data))
            kind = rng.choice(["flip", "drop", "insert"])
            if kind == "flip":
                data[at] ^= 1 << rng.randrange(8)
            elif kind == "drop":
                del data[at]
            else:
                data.insert(at, rng.randrange(256))
        path.write_bytes(bytes(data))
        try:
            restored = restore_variables(path, [b])
        except SerializationError as error:
            assert str(path) in str(error)
            outcomes["refused"] += 1
        else:
            np.testing.assert_array_equal(restored[b], B_VALUE)   # CRC guards the data
            outcomes["read"] += 1
    assert outcomes["refused"] > 200 and outcomes["read"] > 0, outcomes


def test_only_the_members_asked_for_are_read(tmp_path, monkeypatch):
    w, b, _ = model()
    path = save_variables(tmp_path / "m.npz", {w: W_VALUE, b: B_VALUE})
    opened = []
    real_open = zipfile.ZipFile.open

    def recording(self, name, *args, **kwargs):
        opened.append(getattr(name, "filename", name))
        return real_open(self, name, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", recording)
    other_b = ng.variable([ng.make_axis(2, name="H")], dtype=np.float64, initial_value=0.0)
    restore_variables(path, {b.name: other_b}, strict=False)
    assert opened == ["__manifest__.npy", "v1.npy"]
    opened.clear()
    wrong = ng.variable([ng.make_axis(5, name="H")], dtype=np.float64, initial_value=0.0)
    restore_error(path, {b.name: wrong}, strict=False)          # a mismatch reads no array
    assert opened == ["__manifest__.npy"]


@pytest.fixture
def default_recursion_limit():
    """Python's default recursion limit for one test, whatever an imported library set
    (TensorFlow sets 3000)."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    yield
    sys.setrecursionlimit(limit)


def test_deeply_nested_manifest_values_are_described_not_recursed(tmp_path,
                                                                  default_recursion_limit):
    path, seen = tmp_path / "deep.npz", set()
    for depth in range(600, 1000, 3):           # up to where json itself gives up
        nested = "[" * depth + "]" * depth
        path.write_bytes(ours(manifest_=json.dumps(manifest(entry(name="N"))).replace(
            '"N"', nested).encode()))
        message = restore_error(path, [b_variable()])
        described = "variable 0: name is list [[[[...]]]], not str" in message
        too_deep = "its manifest is not valid JSON: maximum recursion depth" in message
        assert described or too_deep, message
        seen.add(described)
    assert seen == {True, False}
