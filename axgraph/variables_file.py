"""axgraph's files on disk: a .npz of arrays plus a JSON manifest, written atomically, read warily.

Variables files (checkpoints) are described here; graph files and core function
files (`axgraph.serialization.graphs`, `.functions`) are other `ArchiveKind`s of
the same container: their own manifest schema, bounds and messages, and the same
reading and writing below.

A file is an uncompressed zip (what `np.savez` writes) of ``.npy`` members:
``__manifest__.npy``, a JSON document as a uint8 array, and one member
``<key>.npy`` per entry of its manifest:

    {"format": "axgraph-variables", "version": 1, "variables": [
        {"name": "w", "key": "v0", "dtype": "<f4", "shape": [2, 3], "trainable": true,
         "axes": [{"name": "H", "length": 2, "dual_level": 0, "auto_named": false}, ...]}]}

A manifest may also hold "metadata", a JSON object checked here only for
its size (with the whole manifest's); whoever wrote it checks its contents
on reading (a training checkpoint's iterator and random-number states).

Reading treats the file as untrusted. Nothing is pickled. The manifest is
checked field by field (exact keys and types, dtypes from `DTYPES`, bounded
counts and names) before any array is touched; the zip must hold exactly the
members the manifest lists, each once and uncompressed, and together no
bigger than the file. Each member's ``.npy`` header is parsed here (bounded,
`ast.literal_eval` on at most `MAX_NPY_HEADER_BYTES` ASCII characters) and
must agree with the manifest's dtype and shape and with the member's size
before its array is allocated; the data is then read in bounded chunks and
checked against the zip's CRC. So the memory a file can make a reader
allocate is bounded by the file's size: its arrays at most once, zipfile's
parse of its directory (about ten times the directory's size) and JSON's of
its manifest (at most about 60 MiB for a crafted 4 MiB one). Every way a file
can be wrong ends in a `SerializationError` that names the path.

Writing is atomic: the data goes to an unnamed file in the destination's
directory (Linux ``O_TMPFILE``; elsewhere a hidden temporary beside it),
is flushed to disk, gets a name and is moved over the destination with
`os.replace`. A failed or interrupted save removes its temporary; a killed
one leaves none where ``O_TMPFILE`` is available, because the file has no
name until the instant before the rename. The previous file is untouched
until the new one is complete.
"""
from __future__ import annotations

import ast
import collections
import contextlib
import json
import math
import os
import re
import reprlib
import secrets
import stat
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Tuple

import numpy as np

from .dtypes import bfloat16
from .errors import SerializationError

FORMAT = "axgraph-variables"
VERSION = 1
MANIFEST_KEY = "__manifest__"
MEMBER_SUFFIX = ".npy"

#: The element types a file may hold, by the dtype string written in the manifest and headers.
DTYPES: Dict[str, np.dtype] = {
    np.dtype(t).newbyteorder(order).str: np.dtype(t).newbyteorder(order)
    for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
              np.uint64, np.float16, np.float32, np.float64)
    for order in ("<", ">")}
#: bfloat16, which a .npy header cannot name: its manifest dtype, and the dtype its bits are
#: stored as (read back as ml_dtypes.bfloat16).
BFLOAT16 = "bfloat16"
BFLOAT16_BITS = np.dtype("<u2")


def stored_dtype(manifest_dtype: str) -> np.dtype:
    """The dtype of the .npy member holding a variable of `manifest_dtype` (a checked one)."""
    return BFLOAT16_BITS if manifest_dtype == BFLOAT16 else DTYPES[manifest_dtype]

# Bounds on what a file may declare; save_variables refuses to write beyond them too.
MAX_VARIABLES = 1 << 14
MAX_NAME_LENGTH = 1024
MAX_NDIM = 32
MAX_MANIFEST_BYTES = 1 << 22
#: JSON objects and lists in a manifest (a variable takes 3 plus one per axis); bounds parsing memory.
MAX_MANIFEST_CONTAINERS = 1 << 17
MAX_NPY_HEADER_BYTES = 4096
READ_CHUNK_BYTES = 1 << 20
_MAX_INT = (1 << 63) - 1

_MANIFEST_DTYPE = np.dtype(np.uint8)
_KEY = re.compile(r"v[0-9]{1,9}")
_NPY_MAGIC = b"\x93NUMPY"
_NPY_LENGTH_FORMATS = {(1, 0): "<H", (2, 0): "<I", (3, 0): "<I"}
_NPY_PREFIX_MAX = len(_NPY_MAGIC) + 2 + 4          # magic, version, header length
_NPY_FIELDS = {"descr", "fortran_order", "shape"}

# The schema of the manifest, one dict of field -> type per level.
_MANIFEST_FIELDS = {"format": str, "version": int, "variables": list}
#: Fields a manifest may add: "metadata", a JSON object its writer checks on reading (a
#: training checkpoint keeps its iterator and random states there).
_OPTIONAL_MANIFEST_FIELDS = {"metadata": dict}
_ENTRY_FIELDS = {"name": str, "key": str, "dtype": str, "shape": list, "trainable": bool,
                 "axes": list}
_AXIS_FIELDS = {"name": str, "length": int, "dual_level": int, "auto_named": bool}

# What the zip and I/O layers raise for a file they cannot read or write.
_FILE_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError,
                struct.error, NotImplementedError, RuntimeError, OverflowError)


_BOUNDED_REPR = reprlib.Repr()
_BOUNDED_REPR.maxlevel, _BOUNDED_REPR.maxstring, _BOUNDED_REPR.maxother = 3, 60, 60


class _Invalid(Exception):
    """What is wrong with a file or a manifest; the caller adds the path."""


@contextlib.contextmanager
def _refused_as(prefix: str) -> Iterator[None]:
    """Turn what goes wrong reading or writing a file into one SerializationError."""
    try:
        yield
    except SerializationError:
        raise
    except _Invalid as problem:
        raise SerializationError(f"{prefix}: {problem}") from problem.__cause__
    except _FILE_ERRORS as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        if isinstance(error, EOFError):
            reason = "the file ends early"
        raise SerializationError(f"{prefix}: {type(error).__name__}: {_cut(reason, 200)}") from error


def shown_path(path) -> str:
    """The user's path as given, for messages; anything but a str or PathLike is refused."""
    try:
        shown = os.fspath(path)
    except TypeError:
        shown = None
    if not isinstance(shown, str):
        raise SerializationError(f"a variables file path is a str or os.PathLike, not "
                                 f"{type(path).__name__}")
    return shown


def _listing(names) -> str:
    names = sorted(names)
    shown = ", ".join(repr(name[:80]) for name in names[:5])
    return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")


# -- the manifest ----------------------------------------------------------------------


def _fields(value, schema: Mapping[str, type], what: str,
            optional: Optional[Mapping[str, type]] = None) -> dict:
    """`value` as a dict with exactly the fields of `schema` (and perhaps some of
    `optional`), each of its type."""
    optional = optional or {}
    if not isinstance(value, dict):
        raise _Invalid(f"{what} is a {type(value).__name__}, not an object")
    missing, unknown = set(schema) - set(value), set(value) - set(schema) - set(optional)
    if missing or unknown:
        raise _Invalid(f"{what} has fields {_listing(value)}; expected {_listing(schema)}")
    for field, kind in {**schema, **optional}.items():
        if field not in value:
            continue
        item = value[field]
        if not isinstance(item, kind) or (kind is int and isinstance(item, bool)):
            raise _Invalid(f"{what}: {field} is {type(item).__name__} {_short(item)}, "
                           f"not {kind.__name__}")
    return value


def _short(value) -> str:
    """A bounded repr of a value from a file, which may be huge, deeply nested or unprintable."""
    return _cut(_BOUNDED_REPR.repr(value), 120)


def _cut(text: str, most: int) -> str:
    return text if len(text) <= most else text[:most - 3] + "..."


def _check_name(name: str, what: str) -> None:
    if not 0 < len(name) <= MAX_NAME_LENGTH or not name.isprintable():
        raise _Invalid(f"{what} {_short(name)} is not a name of 1 to {MAX_NAME_LENGTH} "
                       f"printable characters")


def _check_length(length: int, what: str) -> None:
    if not 0 <= length <= _MAX_INT:
        raise _Invalid(f"{what} is {length}, not a length from 0 to 2**63-1")


def _check_entry(entry, index: int) -> None:
    what = f"variable {index}"
    _fields(entry, _ENTRY_FIELDS, what)
    _check_name(entry["name"], f"{what}: its name")
    what = f"variable {entry['name']!r}"
    if not _KEY.fullmatch(entry["key"]):
        raise _Invalid(f"{what}: key {_short(entry['key'])} is not 'v' and a number")
    if entry["dtype"] not in DTYPES and entry["dtype"] != BFLOAT16:
        held = sorted({str(d) for d in DTYPES.values()} | {BFLOAT16})
        raise _Invalid(f"{what}: dtype {_short(entry['dtype'])} is not one a variables file "
                       f"may hold ({', '.join(held)})")
    shape, axes = entry["shape"], entry["axes"]
    if len(shape) > MAX_NDIM or len(axes) != len(shape):
        raise _Invalid(f"{what}: {len(shape)} dimensions and {len(axes)} axes; a variable has "
                       f"one axis per dimension, at most {MAX_NDIM}")
    for dim, (length, axis) in enumerate(zip(shape, axes)):
        if not isinstance(length, int) or isinstance(length, bool):
            raise _Invalid(f"{what}: shape {_short(shape)} holds {_short(length)}, not an int")
        _check_length(length, f"{what}: dimension {dim} of shape {_short(shape)}")
        _fields(axis, _AXIS_FIELDS, f"{what}: axis {dim}")
        _check_name(axis["name"], f"{what}: axis {dim}'s name")
        if axis["length"] != length:
            raise _Invalid(f"{what}: axis {axis['name']} has length {axis['length']} but "
                           f"dimension {dim} of shape {shape} is {length}")
        if abs(axis["dual_level"]) > _MAX_INT:
            raise _Invalid(f"{what}: axis {axis['name']} has dual_level {axis['dual_level']}")


def check_format(manifest, kind: "ArchiveKind") -> None:
    """Raise _Invalid unless `manifest` is a well-formed manifest of `kind` (its format and
    version, then its own schema); a later version is told as one."""
    if not isinstance(manifest, dict) or manifest.get("format") != kind.format:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        other = _KINDS.get(found) if isinstance(found, str) else None
        told = (f"it is an axgraph {other.title}" if isinstance(other, ArchiveKind)
                else f"its manifest is not {kind.format!r}")
        raise _Invalid(f"it is not an axgraph {kind.title} ({told})")
    version = manifest.get("version")
    if version != kind.version or isinstance(version, bool):
        newer = (" (a newer axgraph wrote it: upgrade axgraph to read it)"
                 if isinstance(version, int) and not isinstance(version, bool)
                 and version > kind.version else "")
        raise _Invalid(f"it has format version {_short(version)}; this axgraph reads version "
                       f"{kind.version}{newer}")
    kind.check(manifest)


def _check_variables(manifest: dict) -> None:
    entries = _fields(manifest, _MANIFEST_FIELDS, "the manifest",
                      _OPTIONAL_MANIFEST_FIELDS)["variables"]
    if len(entries) > MAX_VARIABLES:
        raise _Invalid(f"it lists {len(entries)} variables; at most {MAX_VARIABLES} are allowed")
    for index, entry in enumerate(entries):
        _check_entry(entry, index)
    check_unique_entries(entries, "variables")


def check_unique_entries(entries: List[dict], what: str) -> None:
    """Raise _Invalid if two `entries` share a name or a key."""
    for field in ("name", "key"):
        twice = _repeated(entry[field] for entry in entries)
        if twice:
            raise _Invalid(f"two {what} have the same {field}: {_listing(twice)}")


@dataclass(frozen=True)
class ArchiveKind:
    """One kind of file this module reads and writes: a manifest schema over the same container.

    Variables files and graph files are both a .npz of a JSON manifest and arrays,
    read with the same wariness; each kind names its format, version and limits,
    checks its own manifest (`check`, after the format and version), and lists its
    arrays' entries (each with a name, a member key, a dtype and a shape) under
    `entries`.
    """

    title: str
    format: str
    version: int
    check: Callable[[dict], None]
    entries: str
    max_members: int = MAX_VARIABLES
    max_manifest_bytes: int = MAX_MANIFEST_BYTES
    max_manifest_containers: int = MAX_MANIFEST_CONTAINERS
    #: What a failed read or write of this kind says before the path.
    reading: str = "cannot read variables from"
    writing: str = "cannot save variables to"
    #: What one entry of `entries` is called in messages.
    item: str = "variable"

    def __post_init__(self) -> None:
        _KINDS[self.format] = self   # so a file of one kind, read as another, is told which


#: Every kind by its format, for messages.
_KINDS: Dict[str, "ArchiveKind"] = {}


VARIABLES = ArchiveKind("variables file", FORMAT, VERSION, _check_variables, "variables")


def _repeated(values) -> List[str]:
    return [value for value, count in collections.Counter(values).items() if count > 1]


def _unique_fields(pairs: List[Tuple[str, object]]) -> dict:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise _Invalid(f"the manifest repeats a field in one object ({_listing(k for k, _ in pairs)})")
    return result


def _no_constant(name: str):
    raise _Invalid(f"the manifest holds {name}, which is not JSON")


def _encoded_manifest(manifest: dict, kind: ArchiveKind) -> bytes:
    check_format(manifest, kind)
    try:
        text = json.dumps(manifest, separators=(",", ":"), allow_nan=False).encode("ascii")
    except (TypeError, ValueError, RecursionError) as error:
        raise _Invalid(f"its metadata is not JSON (finite numbers, str, bool, None, lists "
                       f"and objects with str keys): {error}") from None
    _check_manifest_size(text, kind)
    return text


def _check_manifest_size(text: bytes, kind: ArchiveKind) -> None:
    containers = text.count(b"{") + text.count(b"[")
    most_bytes, most_containers = kind.max_manifest_bytes, kind.max_manifest_containers
    if len(text) > most_bytes or containers > most_containers:
        raise _Invalid(f"its manifest has {len(text)} bytes and {containers} objects and lists; "
                       f"at most {most_bytes} and {most_containers} are allowed")


def _decoded_manifest(text: bytes, kind: ArchiveKind) -> dict:
    _check_manifest_size(text, kind)
    try:
        manifest = json.loads(text.decode("utf-8"), object_pairs_hook=_unique_fields,
                              parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise _Invalid(f"its manifest is not valid JSON: {error}") from None
    check_format(manifest, kind)
    return manifest


# -- .npy members ----------------------------------------------------------------------


def _read_exactly(member, count: int, what: str) -> bytes:
    data = member.read(count)
    if len(data) != count:
        raise _Invalid(f"{what} ends early ({len(data)} of {count} bytes)")
    return data


def _npy_header(member, name: str) -> Tuple[dict, int]:
    """The parsed header of a .npy member and its size in bytes, checked for form only."""
    prefix = _read_exactly(member, len(_NPY_MAGIC) + 2, f"member {name}")
    version = (prefix[-2], prefix[-1])
    if prefix[:len(_NPY_MAGIC)] != _NPY_MAGIC or version not in _NPY_LENGTH_FORMATS:
        raise _Invalid(f"member {name} is not a .npy array (version 1 to 3)")
    length_format = _NPY_LENGTH_FORMATS[version]
    (length,) = struct.unpack(length_format,
                              _read_exactly(member, struct.calcsize(length_format), name))
    if length > MAX_NPY_HEADER_BYTES:
        raise _Invalid(f"member {name} declares a {length}-byte header; at most "
                       f"{MAX_NPY_HEADER_BYTES} are allowed")
    text = _read_exactly(member, length, f"the header of member {name}")
    try:
        header = ast.literal_eval(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError, SyntaxError, TypeError, MemoryError,
            RecursionError) as error:
        raise _Invalid(f"member {name} has a header that is not a Python literal: "
                       f"{type(error).__name__}") from None
    if not isinstance(header, dict) or set(header) != _NPY_FIELDS:
        raise _Invalid(f"member {name} has header {_short(header)}; expected the fields "
                       f"{_listing(_NPY_FIELDS)}")
    shape = header["shape"]
    if (not isinstance(header["descr"], str) or not isinstance(header["fortran_order"], bool)
            or not isinstance(shape, tuple) or len(shape) > MAX_NDIM
            or not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= _MAX_INT
                       for n in shape)):
        raise _Invalid(f"member {name} has a malformed header {_short(header)}")
    return header, len(prefix) + struct.calcsize(length_format) + length


def _data_bytes(dtype: np.dtype, shape) -> int:
    return dtype.itemsize * math.prod(shape)


def _read_npy(archive: zipfile.ZipFile, info: zipfile.ZipInfo, dtype: np.dtype,
              shape: Optional[Tuple[int, ...]], limit: int) -> np.ndarray:
    """The array of a .npy member that must hold `dtype` in `shape` (any 1-d shape if None).

    Everything the header declares is checked against the caller's expectation
    and the member's size before the array (at most `limit` bytes) is allocated.
    """
    name = info.filename
    with archive.open(info) as member:
        header, header_bytes = _npy_header(member, name)
        found = header["shape"]
        if header["descr"] != dtype.str:
            raise _Invalid(f"member {name} holds {_short(header['descr'])}, not {dtype.str}")
        if (len(found) != 1) if shape is None else (found != shape):
            expected = "one dimension" if shape is None else f"shape {shape}"
            raise _Invalid(f"member {name} has shape {found}; the manifest says {expected}")
        size = _data_bytes(dtype, found)
        if size > limit:
            raise _Invalid(f"member {name} declares {dtype.str} data of shape {found} ({size} "
                           f"bytes); at most {limit} bytes are allowed")
        if header_bytes + size != info.file_size:
            raise _Invalid(f"member {name} declares {dtype.str} data of shape {found} "
                           f"({size} bytes) but holds {info.file_size - header_bytes} bytes")
        flat = np.empty(math.prod(found), dtype)
        _read_into(member, flat.view(np.uint8), name)      # the zip checks its CRC at the end
    return flat.reshape(found, order="F" if header["fortran_order"] else "C")


def _read_into(member, buffer: np.ndarray, name: str) -> None:
    """Fill `buffer` from `member` one bounded chunk at a time."""
    view, filled = buffer.data, 0  # `buffer` is a flat uint8 view
    while filled < len(view):
        chunk = member.read(min(READ_CHUNK_BYTES, len(view) - filled))
        if not chunk:
            raise _Invalid(f"member {name} ends early ({filled} of {len(view)} data bytes)")
        view[filled:filled + len(chunk)] = chunk
        filled += len(chunk)


# -- reading a file --------------------------------------------------------------------


def _open_regular_file(path: str):
    """(file, size) of `path` opened for reading, if it is a non-empty regular file.

    Opened non-blocking and checked after opening, so a FIFO or device put in
    its place can neither block the reader nor be read.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, NotADirectoryError):
        raise _Invalid("no such file") from None
    except IsADirectoryError:
        raise _Invalid("it is a directory, not a file") from None
    status = os.fstat(fd)
    problem = ("it is a directory, not a file" if stat.S_ISDIR(status.st_mode) else
               "it is not a regular file" if not stat.S_ISREG(status.st_mode) else
               "the file is empty (0 bytes)" if status.st_size == 0 else None)
    if problem:
        os.close(fd)
        raise _Invalid(problem)
    if hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    return os.fdopen(fd, "rb"), status.st_size


class VariablesFile:
    """An open variables (or graph) file whose manifest and zip structure have been checked."""

    def __init__(self, path: str, archive: zipfile.ZipFile, file_size: int,
                 kind: ArchiveKind = VARIABLES):
        self.path, self._archive, self.kind = path, archive, kind
        members = self._members(archive, kind)
        manifest_name = MANIFEST_KEY + MEMBER_SUFFIX
        if manifest_name not in members:
            raise _Invalid(f"it is not an axgraph {kind.title} (no {manifest_name} member; it "
                           f"has {_listing(members) or 'none'})")
        self._check_stored(members[manifest_name], file_size)
        raw = _read_npy(archive, members[manifest_name], _MANIFEST_DTYPE, None,
                        kind.max_manifest_bytes)
        self.manifest: dict = _decoded_manifest(raw.tobytes(), kind)
        self.entries: Dict[str, dict] = {e["name"]: e for e in self.manifest[kind.entries]}
        self._infos = self._listed_members(members, manifest_name, file_size)

    @staticmethod
    def _members(archive: zipfile.ZipFile, kind: ArchiveKind) -> Dict[str, zipfile.ZipInfo]:
        infos = archive.infolist()
        if len(infos) > kind.max_members + 1:
            raise _Invalid(f"it has {len(infos)} members; at most {kind.max_members + 1} are "
                           f"allowed")
        twice = _repeated(info.filename for info in infos)
        if twice:
            raise _Invalid(f"it has members more than once: {_listing(twice)}")
        return {info.filename: info for info in infos}

    @staticmethod
    def _check_stored(info: zipfile.ZipInfo, file_size: int) -> None:
        if info.flag_bits & 0x1:
            raise _Invalid(f"member {info.filename} is encrypted")
        if info.compress_type != zipfile.ZIP_STORED:
            raise _Invalid(f"member {info.filename} is compressed (method {info.compress_type}); "
                           f"axgraph's files hold uncompressed members")
        if info.compress_size != info.file_size:
            raise _Invalid(f"member {info.filename} is stored uncompressed but declares "
                           f"{info.compress_size} bytes stored for {info.file_size}")
        if info.file_size > file_size or not 0 <= info.header_offset < file_size - info.file_size:
            raise _Invalid(f"member {info.filename} declares {info.file_size} bytes at offset "
                           f"{info.header_offset} in a file of {file_size}")

    def _listed_members(self, members: Dict[str, zipfile.ZipInfo], manifest_name: str,
                        file_size: int) -> Dict[str, zipfile.ZipInfo]:
        """{key: member} for every manifest entry, each checked against the entry's size."""
        listed = {entry["key"] + MEMBER_SUFFIX: entry for entry in self.entries.values()}
        missing = set(listed) - set(members)
        if missing:
            raise _Invalid(f"the manifest lists members that are not in the file: "
                           f"{_listing(missing)}")
        unexpected = set(members) - set(listed) - {manifest_name}
        if unexpected:
            raise _Invalid(f"it has members its manifest does not list: {_listing(unexpected)}")
        total = members[manifest_name].file_size
        for name, entry in listed.items():
            info = members[name]
            self._check_stored(info, file_size)
            data = _data_bytes(stored_dtype(entry["dtype"]), entry["shape"])
            if not data < info.file_size <= data + _NPY_PREFIX_MAX + MAX_NPY_HEADER_BYTES:
                raise _Invalid(f"member {name} of {self.kind.item} {entry['name']!r} has {info.file_size} "
                               f"bytes, but {entry['dtype']} data of shape "
                               f"{tuple(entry['shape'])} takes {data} bytes and a header")
            total += info.file_size
        if total > file_size:
            raise _Invalid(f"its members declare {total} bytes in a file of {file_size}")
        return {entry["key"]: members[name] for name, entry in listed.items()}

    def read(self, entry: dict) -> np.ndarray:
        """The array of one manifest entry, checked against the entry before it is allocated."""
        with _refused_as(f"{self.kind.reading} {self.path}: {self.kind.item} {entry['name']!r}"):
            info = self._infos[entry["key"]]
            array = _read_npy(self._archive, info, stored_dtype(entry["dtype"]),
                              tuple(entry["shape"]), info.file_size)
        if entry["dtype"] == BFLOAT16:
            return array.astype(np.uint16).view(bfloat16())
        return array


@contextlib.contextmanager
def open_variables_file(path, kind: ArchiveKind = VARIABLES) -> Iterator[VariablesFile]:
    """The checked file at `path`; any problem with it is a SerializationError naming `path`."""
    shown = shown_path(path)
    prefix = f"{kind.reading} {shown}"
    with _refused_as(prefix):
        file, size = _open_regular_file(shown)
    with file:
        with _refused_as(prefix):
            try:
                archive = zipfile.ZipFile(file)
            except zipfile.BadZipFile as error:
                raise _Invalid(f"it is not a readable zip archive (a{'n' if kind.title[0] in 'aeiou' else ''} "
                               f"{kind.title} is a .npz): {_cut(str(error), 200)}") from None
        with archive:
            with _refused_as(prefix):
                opened = VariablesFile(shown, archive, size, kind)
            yield opened


# -- writing a file --------------------------------------------------------------------


def write_variables_file(path, manifest: dict, arrays: Mapping[str, np.ndarray],
                         kind: ArchiveKind = VARIABLES) -> Path:
    """Write `arrays` (key -> array, as the manifest lists them) and `manifest` to `path` atomically."""
    shown = shown_path(path)
    with _refused_as(f"{kind.writing} {shown}"):
        text = _encoded_manifest(manifest, kind)
        target = _destination(Path(shown))
        members = dict(arrays)
        members[MANIFEST_KEY] = np.frombuffer(text, dtype=_MANIFEST_DTYPE)
        with _replacing(target) as file:
            np.savez(file, allow_pickle=False, **members)
    return Path(shown)


def _destination(path: Path) -> Path:
    """The file to replace for `path` (a symlink's target), if its directory exists."""
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    directory = path.parent
    if not directory.is_dir():
        reason = "is not a directory" if directory.exists() else "does not exist"
        raise _Invalid(f"the directory {directory} {reason}")
    if path.is_dir():
        raise _Invalid("it is a directory")
    if path.exists() and not path.is_file():
        raise _Invalid("it exists and is not a regular file")
    return path


@contextlib.contextmanager
def _replacing(target: Path) -> Iterator:
    """A binary file that replaces `target` once the block completes; removed on any failure."""
    mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else None
    fd, temporary = _open_temporary(target)
    try:
        with os.fdopen(fd, "wb") as file:
            yield file
            file.flush()
            if mode is not None and hasattr(os, "fchmod"):
                os.fchmod(file.fileno(), mode)
            os.fsync(file.fileno())
            if temporary is None:
                temporary = _link_unnamed(file.fileno(), target)
        os.replace(temporary, target)
        temporary = None
    finally:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
    _sync_directory(target.parent)


def _temporary_name(target: Path) -> Path:
    return target.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")


def _open_temporary(target: Path) -> Tuple[int, Optional[Path]]:
    """(fd, name) of a new file beside `target`: unnamed (name None) where the system allows."""
    unnamed = getattr(os, "O_TMPFILE", 0)
    if unnamed and os.path.isdir("/proc/self/fd"):
        with contextlib.suppress(OSError):          # not supported by this file system
            return os.open(target.parent, unnamed | os.O_WRONLY | os.O_CLOEXEC, 0o666), None
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(
        os, "O_BINARY", 0) | getattr(os, "O_NOFOLLOW", 0)
    while True:
        name = _temporary_name(target)
        with contextlib.suppress(FileExistsError):
            return os.open(name, flags, 0o666), name


def _link_unnamed(fd: int, target: Path) -> Path:
    """Give the unnamed file `fd` a temporary name beside `target` (just before the rename).

    linkat(AT_SYMLINK_FOLLOW) of /proc/self/fd/N names the file itself (plain
    link() would try to link the /proc symlink); passing a src_dir_fd is what
    makes `os.link` call linkat.
    """
    descriptors = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY)
    try:
        while True:
            name = _temporary_name(target)
            with contextlib.suppress(FileExistsError):
                os.link(str(fd), name, src_dir_fd=descriptors, follow_symlinks=True)
                return name
    finally:
        os.close(descriptors)


def _sync_directory(directory: Path) -> None:
    """Make the rename itself durable where the platform allows it (POSIX)."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
