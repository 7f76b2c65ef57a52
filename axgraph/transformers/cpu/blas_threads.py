"""Run a block with NumPy's OpenBLAS on one thread, where it can be told so.

A batched matrix product is many small GEMMs (attention: 64 products of 128 x 32 x 128).
OpenBLAS splits each one over its own threads and joins them again, a hand-off per
product; on a busy machine a descheduled helper thread stalls every one of them (measured
on a loaded 2-core box: 86 ms for what one thread does in 0.9 ms). The cpu backend instead
splits the batch over its own workers, each calling BLAS on one thread.

OpenBLAS is found among the libraries this process has loaded (Linux's /proc/self/maps),
with the symbol names of the builds NumPy ships (scipy-openblas, 64-bit ints) and of
system builds. Where none is found (another BLAS, another system) `single_threaded` does
nothing and BLAS keeps its own threading.
"""
from __future__ import annotations

import ctypes
import functools
import threading
from typing import Callable, ContextManager, Optional, Tuple

_PREFIXES = ("scipy_openblas", "openblas")
_SUFFIXES = ("64_", "")
_lock = threading.Lock()
_depth = 0
_saved = 1


@functools.lru_cache(maxsize=None)
def controls() -> Optional[Tuple[Callable[[], int], Callable[[int], None]]]:
    """(get_num_threads, set_num_threads) of the loaded OpenBLAS, or None."""
    import numpy  # noqa: F401 - NumPy loads its BLAS on import

    try:
        with open("/proc/self/maps") as maps:
            paths = sorted({fields[-1] for fields in map(str.split, maps)
                            if len(fields) >= 6 and "openblas" in fields[-1].lower()
                            and ".so" in fields[-1]})
    except OSError:
        return None
    for path in paths:
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in _PREFIXES:
            for suffix in _SUFFIXES:
                try:
                    get = getattr(library, f"{prefix}_get_num_threads{suffix}")
                    put = getattr(library, f"{prefix}_set_num_threads{suffix}")
                except AttributeError:
                    continue
                get.restype, put.argtypes = ctypes.c_int, [ctypes.c_int]
                return get, put
    return None


def available() -> bool:
    """Whether the BLAS threads can be set here."""
    return controls() is not None


class _OneThread:
    """The block `single_threaded` gives: entered by every BLAS call of a step (a few
    microseconds each for a generator-based context manager, ~8 per transformer
    step), so a plain object, one for all, whose state is this module's."""

    __slots__ = ()

    def __enter__(self) -> None:
        global _depth, _saved
        found = controls()
        if found is None:
            return
        with _lock:
            if _depth == 0:
                _saved = found[0]()
                if _saved != 1:
                    found[1](1)
            _depth += 1

    def __exit__(self, *exception: object) -> None:
        global _depth
        found = controls()
        if found is None:
            return
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved != 1:
                found[1](_saved)


_ONE_THREAD = _OneThread()


def single_threaded() -> ContextManager[None]:
    """BLAS on one thread inside the block (nested and concurrent blocks share one setting;
    the last to leave restores the count found by the first to enter)."""
    return _ONE_THREAD
