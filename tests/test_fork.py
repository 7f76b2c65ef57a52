"""A process forked after multithreaded kernels ran computes correctly instead of hanging.

GNU OpenMP's thread pool does not survive fork(), and neither do the NumPy engine's worker
threads: a child forked after the parent ran a multithreaded kernel used to hang forever
in its first one (multiprocessing forks its workers by default on Linux before Python
3.14). Each case runs in a fresh process group with a timeout, so a hang fails the test
instead of hanging the suite, and is killed with everything it forked.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from axgraph.transformers.cpu import kernel_c

SCRIPT = r"""
import ctypes, multiprocessing, os, sys, threading
import numpy as np
from axgraph import core
from axgraph.transformers.cpu import kernel_c, kernel_blocked_numpy
from axgraph.transformers.cpu.fusion import compile_group, find_fusion_groups

n = 1 << 20  # above both engines' thresholds for running on several threads
assert n >= kernel_c.PARALLEL_MIN and n >= kernel_blocked_numpy.PARALLEL_MIN
x = core.Parameter(core.f32, core.Shape(n))
product = core.Multiply(core.Tanh(x), x)
kernels = []
for outputs in ([product], [core.Sum(product, (0,))]):
    (group,) = find_fusion_groups(core.Function(outputs, [x]))
    shapes = {m: tuple(m.shape) for m in group.nodes + group.inputs}
    for engine in ENGINES:
        kernels.append(compile_group(group, shapes, engine))
v = np.linspace(-3, 3, n, dtype=np.float32)
exact = np.tanh(v.astype(np.float64)) * v


def check(label):
    for kernel in kernels:
        out = np.empty(kernel.out_shape, np.float32)
        kernel(v, out=out)
        want = exact if out.ndim else exact.sum()
        assert np.allclose(out, want, rtol=1e-5, atol=1e-3), (label, kernel)
    return label


def omp_threads():
    return kernel_c._OPENMP.omp_get_max_threads() if kernel_c._OPENMP is not None else None


check("parent")
parent_threads = omp_threads()
assert parent_threads in (None, 2), parent_threads

pid = os.fork()
if pid == 0:
    try:
        check("child")
        # the forking thread runs on one thread; a thread the child starts has its own pool
        seen = {}
        worker = threading.Thread(target=lambda: seen.update(threads=omp_threads(),
                                                             ok=check("child's thread")))
        worker.start()
        worker.join()
        assert seen.get("ok") and seen["threads"] == parent_threads, seen
        assert omp_threads() in (None, 1)
    except BaseException as error:
        print("child failed:", repr(error), flush=True)
        os._exit(1)
    os._exit(0)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status

with multiprocessing.get_context("fork").Pool(2) as pool:
    assert pool.map(check, ["worker 1", "worker 2"]) == ["worker 1", "worker 2"]
print("all computed")
"""


def _run(engines, tmp_path: Path) -> None:
    environment = dict(os.environ, OMP_NUM_THREADS="2", AXGRAPH_NUM_THREADS="2",
                       AXGRAPH_CACHE_DIR=os.environ.get("AXGRAPH_CACHE_DIR", str(tmp_path)))
    script = f"ENGINES = {engines!r}\n" + SCRIPT
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=environment,
                               cwd=Path(__file__).parents[1], start_new_session=True)
    try:
        output, _ = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the script's group: it and its children
        output, _ = process.communicate()
        pytest.fail(f"a forked process hung:\n{output}")
    assert process.returncode == 0 and "all computed" in output, output


def test_a_child_forked_after_numpy_engine_threads_ran_computes(tmp_path):
    _run(["numpy"], tmp_path)


def test_a_child_forked_after_openmp_kernels_ran_computes(tmp_path):
    if kernel_c.toolchain() is None or not kernel_c.toolchain().openmp:
        pytest.skip("no C compiler with OpenMP here")
    _run(["c", "numpy"], tmp_path)
