"""The disk cache of compiled kernel libraries: only this user's own, undamaged files load.

Why so careful: opening a shared library runs its code (its constructors), so a
cache another user could change would let them run code in every axgraph
process; and a damaged library (a crash while it was written, a full disk, a
truncated copy) kills every process that maps it with SIGBUS, or makes the
loader raise, run after run.

Trust. The cache directory is reached by walking its path one name at a time
from "/", each directory opened relative to the one before (``openat`` with
``O_NOFOLLOW``) and checked with ``fstat`` on what was opened, so what is
checked is what is used. Every entry on the way, symbolic links included, must
belong to this user or to root, in a directory nobody else may write unless it
is sticky like /tmp (where others cannot rename or remove it); a link is
followed only then. The cache directory itself must be this user's and
writable by nobody else. The walk ends with a descriptor of the directory, and
everything after goes through it: libraries are opened relative to it
(``O_NOFOLLOW``, refused unless a regular file of this user that nobody else
may write) and loaded as ``/proc/self/fd/<directory>/<name>``, where the
kernel resolves ``<name>`` inside the very directory that was checked. (Not as
``/proc/self/fd/<file>``: glibc knows a loaded library by the name it was
opened under, so a later library opened under a reused descriptor number would
be answered with the earlier one.) Nobody but this user can then change what
that name holds, and this user's processes only ever rename whole, sealed
files into place. Without /proc the directory's checked real path is used,
which only this user and root can change either.

Integrity. A library is written to a temporary file, followed by a record of
its size and SHA-256 (the loader ignores bytes past the ELF image), synced,
and renamed into place, so one rename publishes it with its record. Before a
library is loaded its bytes are read through the same descriptor and checked
against the record; a library that fails is reported (`CompiledKernelWarning`)
and compiled again. Checking costs about 0.04 ms per kernel (a 16 KB library opened,
read and hashed), the walk to the directory as much.

Leftovers. A compile killed midway leaves its hidden temporaries
(``.<16 hex digits>-*``); those older than an hour are removed the first time a
process opens the cache.
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import hashlib
import os
import re
import secrets
import shutil
import stat
import struct
import tempfile
import time
import warnings
from pathlib import Path
from typing import Iterator, List, Optional, Set, Tuple

#: The record after each library: a tag, the size of the bytes before it, their SHA-256.
RECORD = struct.Struct("<8sQ32s")
RECORD_TAG = b"axgraph1"
#: Temporaries of a compile (`CacheDirectory.create_temporary`) a crash may leave behind.
TEMPORARY = re.compile(r"\.[0-9a-f]{16}-[0-9a-f]+\.(c|so|o)")
#: A temporary this old belongs to no compile still running.
STALE_SECONDS = 3600
#: Symbolic links followed on the way to the cache, at most (Linux's own limit).
MAX_LINKS = 40
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


class CompiledKernelWarning(RuntimeWarning):
    """A compiled kernel or its cache was refused, rebuilt or misbehaved; axgraph went on
    without it (another directory, a rebuilt library, other compiler flags)."""


class Refused(Exception):
    """A path on the way to the cache could be changed by another user (the reason)."""


class Damaged(Exception):
    """A cached library is not the file that was written (the reason)."""


def cache_dir() -> Path:
    """Where compiled kernels live: $AXGRAPH_CACHE_DIR, else ~/.cache/axgraph/kernels."""
    configured = os.environ.get("AXGRAPH_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "axgraph" / "kernels"


def this_user() -> int:
    """The user whose files may be loaded: the effective uid, which owns what this
    process creates."""
    return os.geteuid()


def _writable_by_others(info: os.stat_result) -> Optional[str]:
    if info.st_mode & _OTHERS_WRITE:
        return f"writable by others (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def _owner_problem(info: os.stat_result, root_too: bool) -> Optional[str]:
    me = this_user()
    if info.st_uid == me or (root_too and info.st_uid == 0):
        return None
    return f"owned by uid {info.st_uid}, not by this user (uid {me}){' or root' * root_too}"


def file_problem(info: os.stat_result) -> Optional[str]:
    """Why an opened library file may hold another user's code; None if it cannot."""
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    return _owner_problem(info, root_too=False) or _writable_by_others(info)


class CacheDirectory:
    """The cache directory, open and checked: every name is opened relative to it."""

    def __init__(self, fd: int, path: Path):
        self.fd = fd
        self.path = path      # its real path, checked: for the compiler and for messages

    def close(self) -> None:
        os.close(self.fd)

    def identity(self) -> Tuple[int, int]:
        info = os.fstat(self.fd)
        return info.st_dev, info.st_ino

    def loader_path(self, name: str) -> str:
        """The path `name` is loaded from: through this descriptor where /proc shows it."""
        through = f"/proc/self/fd/{self.fd}"
        return f"{through}/{name}" if os.path.isdir(through) else str(self.path / name)

    def create_temporary(self, stem: str, suffix: str, contents: bytes = b"") -> str:
        """A new hidden file `.<stem>-<random><suffix>` holding `contents`; its name."""
        while True:
            name = f".{stem[:16]}-{secrets.token_hex(6)}{suffix}"
            try:
                fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | _CLOEXEC, 0o600, dir_fd=self.fd)
            except FileExistsError:
                continue
            try:
                _write_all(fd, contents)
            finally:
                os.close(fd)
            return name

    def seal(self, temporary: str, name: str) -> None:
        """Append the integrity record to `temporary`, sync it and rename it to `name`."""
        fd = os.open(temporary, os.O_RDWR | os.O_NOFOLLOW | _CLOEXEC, dir_fd=self.fd)
        try:
            problem = file_problem(os.fstat(fd))
            if problem:
                raise Damaged(f"{self.path / temporary} is {problem}")
            data = _read_all(fd)
            os.lseek(fd, 0, os.SEEK_END)
            _write_all(fd, record_of(data))
            os.fchmod(fd, 0o755)  # the linker's mode follows the umask, which may be lax
            os.fsync(fd)
        finally:
            os.close(fd)
        self.rename(temporary, name)
        with contextlib.suppress(OSError):  # (some file systems cannot sync a directory)
            os.fsync(self.fd)

    def rename(self, temporary: str, name: str) -> None:
        os.replace(temporary, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def remove(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)

    def check(self, name: str) -> None:
        """Raise FileNotFoundError if `name` is missing, Damaged if it is not a private
        regular file whose bytes match their record."""
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | _CLOEXEC, dir_fd=self.fd)
        except FileNotFoundError:
            raise
        except OSError as error:  # ELOOP: a symbolic link
            raise Damaged(f"not openable as a file ({error.strerror})") from None
        try:
            problem = file_problem(os.fstat(fd)) or record_problem(_read_all(fd))
        finally:
            os.close(fd)
        if problem:
            raise Damaged(problem)

    def load(self, name: str) -> ctypes.CDLL:
        """The library `name`, checked (`check`) and then opened."""
        self.check(name)
        return ctypes.CDLL(self.loader_path(name))

    def remove_stale_temporaries(self, now: Optional[float] = None) -> List[str]:
        """Remove the temporaries of compiles older than STALE_SECONDS; their names."""
        now = time.time() if now is None else now
        removed = []
        with os.scandir(self.fd) as entries:
            for entry in entries:
                if not TEMPORARY.fullmatch(entry.name):
                    continue
                try:
                    old = now - entry.stat(follow_symlinks=False).st_mtime > STALE_SECONDS
                    if old:
                        os.unlink(entry.name, dir_fd=self.fd)
                        removed.append(entry.name)
                except FileNotFoundError:  # another process removed it first
                    continue
        return removed


def record_of(data: bytes) -> bytes:
    """The integrity record appended to a library of these bytes."""
    return RECORD.pack(RECORD_TAG, len(data), hashlib.sha256(data).digest())


def record_problem(data: bytes) -> Optional[str]:
    """Why `data` (a library and its record) is not what was written; None if it is."""
    if len(data) < RECORD.size:
        return f"{len(data)} bytes long, too short for its integrity record"
    tag, size, digest = RECORD.unpack_from(data, len(data) - RECORD.size)
    body = memoryview(data)[:len(data) - RECORD.size]
    if tag != RECORD_TAG:
        return "damaged: it does not end with its integrity record (cut short?)"
    if size != len(body):
        return f"damaged: {len(body)} bytes where {size} were written"
    if hashlib.sha256(body).digest() != digest:
        return "damaged: its SHA-256 is not that of the bytes written"
    return None


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks: List[bytes] = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


# -- reaching the directory --------------------------------------------------------------------

def open_directory(path: Path, create: bool = False) -> CacheDirectory:
    """`path` opened by the walk described above (missing directories made 0700 when
    `create`); raises Refused with the reason when another user could change it."""
    pending = list(reversed(os.path.abspath(path).split("/")))
    chain: List[Tuple[int, os.stat_result, str]] = []
    links = 0

    def where(name: str = "") -> str:
        return "/" + "/".join([n for _, _, n in chain[1:]] + ([name] if name else []))

    try:
        root = os.open("/", _DIRECTORY_FLAGS)
        chain.append((root, os.fstat(root), ""))
        problem = _owner_problem(chain[0][1], root_too=True)
        if problem:
            raise Refused(f"/ is {problem}")
        while pending:
            name = pending.pop()
            if name in ("", "."):
                continue
            if name == "..":
                if len(chain) > 1:
                    os.close(chain.pop()[0])
                continue
            parent_fd, parent, _ = chain[-1]
            created = False
            try:
                info = os.lstat(name, dir_fd=parent_fd)
            except FileNotFoundError:
                if not create:
                    raise Refused(f"{where(name)} does not exist") from None
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o700, dir_fd=parent_fd)
                    created = True
                info = os.lstat(name, dir_fd=parent_fd)
            problem = _owner_problem(info, root_too=True)
            if problem:
                raise Refused(f"{where(name)} is {problem}")
            if parent.st_mode & _OTHERS_WRITE and not parent.st_mode & stat.S_ISVTX:
                raise Refused(f"{where() if len(chain) > 1 else '/'} is "
                              f"{_writable_by_others(parent)}, so others could replace "
                              f"{name} in it")
            if stat.S_ISLNK(info.st_mode):
                links += 1
                if links > MAX_LINKS:
                    raise Refused(f"{path}: more than {MAX_LINKS} symbolic links")
                target = os.readlink(name, dir_fd=parent_fd)
                if target.startswith("/"):
                    while len(chain) > 1:
                        os.close(chain.pop()[0])
                pending.extend(reversed(target.split("/")))
                continue
            if not stat.S_ISDIR(info.st_mode):
                raise Refused(f"{where(name)} is not a directory")
            fd = os.open(name, _DIRECTORY_FLAGS, dir_fd=parent_fd)
            chain.append((fd, os.fstat(fd), name))
            if (chain[-1][1].st_dev, chain[-1][1].st_ino) != (info.st_dev, info.st_ino):
                raise Refused(f"{where()} changed while it was checked")
            if created:  # 0700 whatever the umask
                os.fchmod(fd, 0o700)
                chain[-1] = (fd, os.fstat(fd), name)
        final = chain[-1][1]
        problem = _owner_problem(final, root_too=False) or _writable_by_others(final)
        if problem:
            raise Refused(f"{where()} is {problem}")
        real = Path(where())
        return CacheDirectory(chain.pop()[0], real)
    except OSError as error:
        raise Refused(f"{path}: {error.strerror or error}") from None
    finally:
        for fd, _, _ in chain:
            os.close(fd)


@contextlib.contextmanager
def open_cache() -> Iterator[CacheDirectory]:
    """The cache directory (`cache_dir`, created 0700 where missing), open and checked; if
    another user could change it, a fresh private directory for the rest of this process,
    with one warning. Raises Refused when not even that one can be trusted."""
    configured = cache_dir()
    try:
        directory = open_directory(configured, create=True)
    except Refused as refused:
        directory = open_directory(_fallback_dir(str(configured), str(refused)))
    try:
        identity = directory.identity()
        if identity not in _TIDIED:
            _TIDIED.add(identity)
            directory.remove_stale_temporaries()
        yield directory
    finally:
        directory.close()


#: Directories whose stale temporaries this process has removed.
_TIDIED: Set[Tuple[int, int]] = set()


@functools.lru_cache(maxsize=None)
def _fallback_dir(refused: str, problem: str) -> Path:
    fallback = Path(tempfile.mkdtemp(prefix="axgraph-kernels-"))  # 0700, this user's
    atexit.register(shutil.rmtree, fallback, ignore_errors=True)
    warnings.warn(f"the kernel cache {refused} is not private ({problem}), so a library in it "
                  f"could run another user's code: kernels of this process are compiled into "
                  f"{fallback} instead. Make it yours alone (chmod go-w) or set "
                  f"$AXGRAPH_CACHE_DIR to a directory only you can write.",
                  CompiledKernelWarning, stacklevel=4)
    return fallback
