"""One computation called from many threads, and many computations on one transformer."""
import threading

import numpy as np
import pytest

import axgraph as ng

THREADS, CALLS = 8, 50


def _run_in_threads(work):
    """Run work(k) in THREADS threads started together; re-raise the first failure."""
    failures = []
    barrier = threading.Barrier(THREADS)

    def body(k):
        try:
            barrier.wait()
            work(k)
        except BaseException as error:  # noqa: BLE001 - handed to the main thread
            failures.append(error)

    threads = [threading.Thread(target=body, args=(k,)) for k in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


def test_one_computation_from_many_threads_gives_exact_results(transformer):
    N, F = ng.make_axis(name="N"), ng.make_axis(length=20000, name="F")
    x = ng.placeholder([N, F])
    # Large enough that threads switch in the middle of calls (it failed this way).
    w = ng.constant(np.linspace(-1, 1, 20000), [F])
    f = transformer.computation([ng.tanh(x * w) + x, ng.sum(x, out_axes=[N])], x)
    wrong = []

    def work(k):
        rng = np.random.default_rng(k)
        for call in range(CALLS):
            data = rng.standard_normal((1 + (k + call) % 5, 20000)).astype(np.float32)
            got, sums = f(data)
            expected = np.tanh(data * np.linspace(-1, 1, 20000).astype(np.float32)) + data
            # the exact sum: float32 sums of 20000 values differ by up to ~5e-5 with the
            # order of the additions (NumPy's pairwise, XLA's, a fused kernel's)
            if not (np.allclose(got, expected, rtol=1e-5, atol=1e-6)
                    and np.allclose(sums, data.sum(axis=1, dtype=np.float64), rtol=1e-5,
                                    atol=1e-4)):
                wrong.append((k, call))

    _run_in_threads(work)
    assert wrong == []


def test_updates_from_many_threads_are_never_lost(transformer):
    count = ng.variable((), initial_value=0.0)
    x = ng.placeholder(())
    with ng.Op.saved_user_deps():
        step = ng.assign(count, count + x)
    f = transformer.computation(step, x)

    def work(k):
        for _ in range(CALLS):
            f(np.float32(1.0))

    _run_in_threads(work)
    assert float(transformer.computation(count)()) == THREADS * CALLS


def test_threads_with_their_own_computations_on_one_transformer(transformer):
    F = ng.make_axis(length=16, name="F")
    shared = ng.variable([F], initial_value=np.arange(16.0), name="shared")
    results = {}

    def work(k):
        x = ng.placeholder([F])
        f = transformer.computation(shared * x + float(k), x)
        data = np.full(16, k, np.float32)
        results[k] = [f(data) for _ in range(CALLS)]

    _run_in_threads(work)
    for k in range(THREADS):
        expected = np.arange(16.0, dtype=np.float32) * k + k
        for got in results[k]:
            np.testing.assert_array_equal(got, expected)


def test_the_thread_count_is_the_cores_other_processes_leave():
    from axgraph.transformers.cpu.parallel import threads_beside

    assert threads_beside(0.0, cores=2, configured=2) == 2
    assert threads_beside(0.2, cores=2, configured=2) == 2  # a little background load
    assert threads_beside(0.5, cores=2, configured=2) == 1  # teams would fight for a core
    assert threads_beside(1.0, cores=2, configured=2) == 1  # a process spinning a core
    assert threads_beside(1.9, cores=2, configured=2) == 1  # never below one
    assert threads_beside(1.0, cores=16, configured=16) == 15
    assert threads_beside(0.0, cores=16, configured=4) == 4  # never above the setting


def test_the_governor_lowers_and_restores_openmp_threads_and_keeps_openblas_on_one(
        monkeypatch):
    from axgraph.transformers.cpu import blas_threads, kernel_c, parallel

    x = ng.placeholder([ng.make_axis(1 << 19, "F")])
    with ng.make_transformer("cpu") as cpu:  # loads a C kernel (the OpenMP runtime)
        cpu.computation(ng.tanh(x) * 2.0, x)(np.ones(1 << 19, np.float32))
    blas = blas_threads.controls()
    openmp = kernel_c._OPENMP
    if blas is None or openmp is None:
        pytest.skip("NumPy's BLAS is not OpenBLAS, or no C compiler")
    get_blas, set_blas = blas
    blas_before, openmp_before = get_blas(), openmp.omp_get_max_threads()
    set_blas(2)  # the most the governor below gives OpenBLAS (read when it first looks)
    governor = parallel._Governor()
    try:
        governor._apply(1)
        assert get_blas() == 1 and openmp.omp_get_max_threads() == 1
        governor.threads = 2
        governor._apply(2)
        # one native team: with the OpenMP runtime loaded, OpenBLAS stays on one thread
        assert get_blas() == 1
        assert openmp.omp_get_max_threads() == min(openmp_before, 2)
        governor.restore()  # after the step, NumPy's products get the step's count back
        assert get_blas() == 2
        monkeypatch.setattr(parallel, "ONE_NATIVE_TEAM", False)
        governor._apply(1)
        governor._apply(2)
        assert get_blas() == 2  # as before, where both teams may run
    finally:
        set_blas(blas_before)
        openmp.omp_set_num_threads(openmp_before)


def test_a_step_gives_back_the_openmp_count_it_lowered(monkeypatch):
    """Under load the governor lowers the calling thread's OpenMP count for a step, and
    sets it back after: the runtime may be PyTorch's too (one libgomp in the process), and
    `torch.compile` recompiles when `torch.get_num_threads()` changes."""
    from axgraph.transformers.cpu import kernel_c, parallel

    x = ng.placeholder([ng.make_axis(1 << 19, "F")])
    with ng.make_transformer("cpu") as cpu:
        step = cpu.computation(ng.tanh(x) * 2.0, x)
        step(np.ones(1 << 19, np.float32))  # loads a C kernel (the OpenMP runtime)
        openmp = kernel_c._OPENMP
        if openmp is None:
            pytest.skip("no C compiler with OpenMP here")
        before = openmp.omp_get_max_threads()
        if before < 2:
            pytest.skip("one OpenMP thread already: nothing to lower")
        seen = []
        real_apply = parallel._GOVERNOR._apply

        def apply_and_look(threads):
            real_apply(threads)
            seen.append(openmp.omp_get_max_threads())

        monkeypatch.setattr(parallel._GOVERNOR, "_decide", lambda now: 1)
        monkeypatch.setattr(parallel._GOVERNOR, "_looked", 0.0)
        monkeypatch.setattr(parallel._GOVERNOR, "_apply", apply_and_look)
        try:
            result = step(np.full(1 << 19, 0.5, np.float32))
            assert seen == [1]  # the step ran with the lowered count
            assert openmp.omp_get_max_threads() == before  # and gave it back
            np.testing.assert_allclose(result[:3], 2 * np.tanh(0.5), rtol=1e-6)
        finally:
            openmp.omp_set_num_threads(before)
            parallel._GOVERNOR.threads = parallel.thread_count()
