"""Worker threads for kernels written in Python over NumPy (which releases the GIL).

One process-wide pool, as many workers as the cores this process may use
(``$AXGRAPH_NUM_THREADS`` overrides). A kernel splits its work into spans of
whole blocks, runs the first span itself and the rest on the pool, and
re-raises the first error. Each span is a fixed part of the output, so the
result does not depend on the number of threads. A process forked from this one
starts a pool of its own (fork copies none of the workers).
"""
from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, List, Optional, Sequence, Tuple

_POOL: Optional[ThreadPoolExecutor] = None


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
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def spans(total: int, block: int, minimum: int) -> List[Tuple[int, int]]:
    """[lo, hi) element ranges of whole blocks, one per worker; [] when `total` is too
    small to be worth splitting (under `minimum` elements, or one worker)."""
    if total < minimum:
        return []
    workers = thread_count()
    if workers < 2:
        return []
    blocks = -(-total // block)
    per_worker = -(-blocks // min(workers, blocks))
    step = per_worker * block
    return [(lo, min(lo + step, total)) for lo in range(0, total, step)]


def _forget_pool_after_fork() -> None:
    """A forked child has none of the pool's threads (fork copies only the calling one):
    work sent to them would wait forever, so the child starts a pool of its own."""
    global _POOL
    _POOL = None


os.register_at_fork(after_in_child=_forget_pool_after_fork)


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
