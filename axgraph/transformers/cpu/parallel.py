"""How many threads the kernels use, and the worker pool of the kernels written in Python.

Threads: as many as the cores this process may use (``$AXGRAPH_NUM_THREADS``
overrides), *less the cores other processes keep busy*. A step runs three kinds
of threads: NumPy's OpenBLAS workers (matrix products), the OpenMP team of the
fused C kernels, and the pool below. On a machine whose other core is taken by
another process, the two native teams fight for the one core left: OpenBLAS's
workers spin after each product while an OpenMP kernel waits for its second
thread, and back (measured on 2 cores beside a busy process: the 784-512-512-10
MLP step 100-170 ms with the default teams, 12-15 ms with either team at one
thread). So `govern()`, called once per step, looks at the machine's load at
most every `LOAD_INTERVAL` seconds (Linux's /proc/stat, less this process's own
CPU time) and, while other processes keep cores busy, lowers the OpenMP team's
thread count (and the pool's spans) to the cores left, restoring it when the
load goes. ``$AXGRAPH_NUM_THREADS`` fixes the count: no looking.

The two native teams never run together: once the OpenMP runtime is loaded (the
first C kernel), OpenBLAS runs on the calling thread during a step
(`ONE_NATIVE_TEAM`; `restore` gives it the step's count back for the caller's own
NumPy products). Its workers spin for a long while after each product, so a step
that mixes BLAS products with OpenMP kernels had its team wait on a core a
spinning BLAS worker held, at any load (LeNet's step with 2 threads of each on a
shared 2-core box: 38-43 ms, against 10-11 ms with OpenBLAS on one thread, AVX-512
or AVX2 kernels alike). The products that need threads run on the OpenMP team
instead (gemm.c), or in parts or batches over the pool, each BLAS call on one
thread (gemm.py, runtime.batched_matmul).

The pool: one process-wide pool of workers for the blocked-NumPy kernels (NumPy
releases the GIL). A kernel splits its work into spans of whole blocks, runs
the first span itself and the rest on the pool, and re-raises the first error.
Each span is a fixed part of the output, so the result does not depend on the
number of threads. A process forked from this one starts a pool of its own
(fork copies none of the workers).
"""
from __future__ import annotations

import functools
import math
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, List, Optional, Sequence, Tuple

from . import blas_threads

_POOL: Optional[ThreadPoolExecutor] = None
#: Seconds between looks at the machine's load.
LOAD_INTERVAL = 0.2
#: Cores other processes may keep busy on average before the kernels give one up.
QUIET_CORES = 0.25
#: Whether OpenBLAS runs on one thread once the OpenMP team exists.
ONE_NATIVE_TEAM = True


def thread_count() -> int:
    """Workers to use: $AXGRAPH_NUM_THREADS, else the CPUs this process may run on."""
    return _thread_count(os.environ.get("AXGRAPH_NUM_THREADS"))


@functools.lru_cache(maxsize=None)
def _thread_count(configured: Optional[str]) -> int:
    """Asked once per setting: the affinity query is a system call."""
    if configured:
        try:
            return max(1, int(configured))
        except ValueError:
            raise ValueError(f"AXGRAPH_NUM_THREADS must be a whole number, not {configured!r}") \
                from None
    return cores()


def cores() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class _Governor:
    """The thread count of the next step, from the load other processes put on the machine."""

    def __init__(self):
        self.threads = thread_count()
        self._looked = 0.0
        self._last: Optional[Tuple[float, float, float]] = None  # (wall, machine busy, own)
        self._blas: Optional[Tuple[Callable, int]] = None  # (set_num_threads, its maximum)
        self._blas_found = False
        self._blas_threads = 0
        self._local = threading.local()  # per calling thread: its OpenMP maximum, count set

    def govern(self) -> int:
        """Look at the load if it is time, apply the count; the count."""
        now = time.monotonic()
        if now - self._looked >= LOAD_INTERVAL:
            self._looked = now
            self.threads = self._decide(now)
        self._apply(self.threads)
        return self.threads

    def _decide(self, now: float) -> int:
        configured = thread_count()
        if os.environ.get("AXGRAPH_NUM_THREADS"):
            return configured
        busy, own = machine_busy_seconds(), time.process_time()
        last, self._last = self._last, (now, busy, own) if busy is not None else None
        if busy is None or last is None or now <= last[0]:
            return self.threads
        others = max(0.0, (busy - last[1]) - (own - last[2])) / (now - last[0])
        return threads_beside(others, cores(), configured)

    def _apply(self, threads: int) -> None:
        local = self._local
        if getattr(local, "threads", None) != threads:
            openmp = _openmp()
            if openmp is not None:  # (before the first C kernel loads, no team exists)
                current = openmp.omp_get_max_threads()
                if not hasattr(local, "maximum"):
                    local.maximum = current
                wanted = max(1, min(local.maximum, threads))
                if wanted != current:  # the count found is given back by `restore`
                    if getattr(local, "previous", None) is None:
                        local.previous = current
                    openmp.omp_set_num_threads(wanted)
                local.threads = threads
        # One native team at a time: with the OpenMP runtime loaded, OpenBLAS runs on the
        # calling thread during the step (see the module docstring)
        self._set_blas(1 if ONE_NATIVE_TEAM and _openmp() is not None else threads)

    def _set_blas(self, threads: int) -> None:
        """OpenBLAS's thread count (at most what it had when first found)."""
        if self._blas_threads != threads:
            blas = self._find_blas()
            if blas is not None:
                blas[0](max(1, min(blas[1], threads)))
            self._blas_threads = threads

    def restore(self) -> None:
        """Give the calling thread's OpenMP count back where `govern` changed it: the
        runtime may be another library's too (PyTorch loads the same libgomp, and
        `torch.compile` recompiles when `torch.get_num_threads()` changes); and give
        OpenBLAS the step's count again, which the step kept at one."""
        local = self._local
        previous = getattr(local, "previous", None)
        if previous is not None:
            openmp = _openmp()
            if openmp is not None:
                openmp.omp_set_num_threads(previous)
            local.previous = local.threads = None
        # between steps, NumPy's own products (the caller's) get the step's thread count
        self._set_blas(self.threads)

    def _find_blas(self) -> Optional[Tuple[Callable, int]]:
        """OpenBLAS as NumPy loaded it (its set/get_num_threads), found once."""
        if not self._blas_found:
            self._blas_found = True
            found = blas_threads.controls()
            self._blas = None if found is None else (found[1], max(1, found[0]()))
        return self._blas


def threads_beside(others: float, cores: int, configured: int) -> int:
    """Threads to use while other processes keep `others` cores busy on average: one core
    less for each started core of load past a quarter (a process spinning one of 2 cores
    leaves 1; so does a test run keeping a third of one busy: two teams of threads
    fighting over what is left cost more than a thread gains), at least 1, at most
    `configured`."""
    return max(1, min(configured, cores - max(0, math.ceil(others - QUIET_CORES))))


def machine_busy_seconds() -> Optional[float]:
    """CPU seconds every process has used since boot (Linux's /proc/stat), or None."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _openmp():
    """The OpenMP runtime the C kernels loaded (None before the first one loads)."""
    from . import kernel_c  # (kernel_c imports nothing from here)

    return kernel_c._OPENMP


_GOVERNOR = _Governor()


def govern() -> int:
    """Threads for the step about to run (see the module docstring), applied to OpenBLAS,
    the calling thread's OpenMP team and the pool's spans."""
    return _GOVERNOR.govern()


def restore() -> None:
    """Undo, for the calling thread's OpenMP runtime, what `govern` lowered, and give
    OpenBLAS the step's thread count back (after a step)."""
    _GOVERNOR.restore()


def spans(total: int, block: int, minimum: int) -> List[Tuple[int, int]]:
    """[lo, hi) element ranges of whole blocks, one per worker; [] when `total` is too
    small to be worth splitting (under `minimum` elements, or one worker)."""
    if total < minimum:
        return []
    workers = thread_count() if os.environ.get("AXGRAPH_NUM_THREADS") else \
        min(thread_count(), _GOVERNOR.threads)  # a count the user set is used as it is
    if workers < 2:
        return []
    blocks = -(-total // block)
    per_worker = -(-blocks // min(workers, blocks))
    step = per_worker * block
    return [(lo, min(lo + step, total)) for lo in range(0, total, step)]


def _forget_pool_after_fork() -> None:
    """A forked child has none of the pool's threads (fork copies only the calling one):
    work sent to them would wait forever, so the child starts a pool of its own. The
    forking thread's OpenMP maximum is looked at again (one thread in the child:
    kernel_c's own fork handler)."""
    global _POOL
    _POOL = None
    _GOVERNOR._local = threading.local()


os.register_at_fork(after_in_child=_forget_pool_after_fork)


def share(work: Callable[[int, int, int], None], total: int) -> None:
    """work(worker, lo, hi) over [0, total): split over the workers where `spans` finds it
    worth it (whole items, at least 2), else in one piece on the calling thread."""
    run_spans(work, spans(total, 1, 2) or [(0, total)])


def run_spans(work: Callable[[int, int, int], None], spans: Sequence[Tuple[int, int]]) -> None:
    """work(worker, lo, hi) for every span: the first here, the others on the pool."""
    global _POOL
    if len(spans) == 1:
        work(0, *spans[0])
        return
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=thread_count() - 1,
                                   thread_name_prefix="axgraph-kernel")
    futures = [_POOL.submit(work, worker, lo, hi)
               for worker, (lo, hi) in enumerate(spans[1:], start=1)]
    try:
        work(0, *spans[0])
    finally:
        errors = [f.exception() for f in futures]
    for error in errors:
        if error is not None:
            raise error
