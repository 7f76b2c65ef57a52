"""The C kernels' disk cache loads only libraries this user alone could have written, and the
build target ($AXGRAPH_MARCH) is part of every kernel's identity.

Opening a shared library runs its code, so a cache another user can write to would let
them run code in every axgraph process: the cache directory must be created 0700, and a
directory or file that another user owns or can write is never loaded.
"""
from __future__ import annotations

import math
import os
import platform
import stat
from pathlib import Path

import numpy as np
import pytest

from axgraph import core
from axgraph.transformers.cpu import kernel_c
from axgraph.transformers.cpu.fusion import compile_group, find_fusion_groups

N = 1000


def _group(op=core.Tanh):
    x, y = core.Parameter(core.f32, core.Shape(N)), core.Parameter(core.f32, core.Shape(N))
    (group,) = find_fusion_groups(core.Function([core.Multiply(op(x), y)], [x, y]))
    return group


def _run(kernel, rng, op=np.tanh):
    x, y = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    out = np.empty(N, np.float32)
    kernel(x, y, out=out)
    np.testing.assert_allclose(out, op(x) * y, rtol=2e-6)


def _compile(group):
    return compile_group(group, {n: tuple(n.shape) for n in group.nodes + group.inputs}, "c")


def _mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A kernel cache that does not exist yet, below a private directory; no library of an
    earlier test is remembered."""
    if kernel_c.toolchain() is None:
        pytest.skip("no working C compiler here")
    os.chmod(tmp_path, 0o700)
    path = tmp_path / "nested" / "kernels"
    monkeypatch.setenv("AXGRAPH_CACHE_DIR", str(path))
    kernel_c.clear_memory_cache()
    yield path
    kernel_c.clear_memory_cache()


@pytest.fixture
def rng():
    return np.random.default_rng(5)


def test_the_cache_is_created_private_and_files_are_not_writable_by_others(cache, rng):
    saved = os.umask(0)  # the most permissive umask: nothing may depend on it
    try:
        kernel = _compile(_group())
    finally:
        os.umask(saved)
    assert kernel.path.parent == cache
    assert _mode(cache) == 0o700
    assert _mode(kernel.path) & 0o022 == 0 and os.lstat(kernel.path).st_uid == os.getuid()
    assert not [f for f in os.listdir(cache) if f.startswith(".")]  # no temporary files left
    _run(kernel, rng)


def test_a_cache_others_can_write_is_not_used(cache, rng):
    cache.mkdir(parents=True)
    os.chmod(cache, 0o777)
    with pytest.warns(RuntimeWarning, match=r"not private .*writable by others \(mode 777\)"):
        kernel = _compile(_group(core.Exp))
    assert kernel.path.parent != cache and os.listdir(cache) == []
    assert kernel_c.directory_problem(kernel.path.parent) is None
    _run(kernel, rng, np.exp)


def test_a_cache_below_a_directory_others_can_write_is_not_used(cache, rng):
    cache.parent.mkdir(parents=True)
    os.chmod(cache.parent, 0o777)  # others could rename `kernels` and put theirs instead
    with pytest.warns(RuntimeWarning, match="nested is writable by others"):
        kernel = _compile(_group(core.Exp))
    assert kernel.path.parent != cache
    _run(kernel, rng, np.exp)


def test_a_cache_path_that_is_a_file_is_not_used(cache, rng):
    cache.parent.mkdir(parents=True)
    cache.write_text("not a directory")
    with pytest.warns(RuntimeWarning, match="kernels is not a directory"):
        kernel = _compile(_group(core.Exp))
    assert kernel.path.parent != cache
    _run(kernel, rng, np.exp)


def test_a_sticky_parent_like_tmp_is_fine(cache):
    cache.parent.mkdir(parents=True)
    os.chmod(cache.parent, 0o1777)
    cache.mkdir(mode=0o700)
    assert kernel_c.directory_problem(cache) is None


def test_a_cached_library_others_can_write_is_rebuilt(cache, rng):
    """Another kernel's library planted at this kernel's name, writable by others: the
    cache compiles the right one over it instead of loading it."""
    tanh_kernel = _compile(_group(core.Tanh))
    exp_group = _group(core.Exp)
    planted = kernel_c.library_path(kernel_c.generate_source(exp_group, frozenset(),
                                                             kernel_c.toolchain().vector_math),
                                    kernel_c.toolchain())
    planted.write_bytes(tanh_kernel.path.read_bytes())
    os.chmod(planted, 0o666)
    kernel_c.clear_memory_cache()
    kernel = _compile(exp_group)
    assert kernel.path == planted and _mode(planted) & 0o022 == 0
    _run(kernel, rng, np.exp)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="only root can give a file to another user")
def test_files_and_directories_of_another_user_are_refused(cache):
    kernel = _compile(_group())
    os.chown(kernel.path, 12345, -1)
    kernel_c.clear_memory_cache()
    assert "owned by uid 12345" in kernel_c.why_not_private(kernel.path)
    with pytest.raises(kernel_c.KernelCompileError, match="refusing to load .*owned by uid"):
        kernel_c.load_library(kernel.path)
    os.chown(cache, 12345, -1)
    assert "owned by uid 12345" in kernel_c.directory_problem(cache)


def test_loading_refuses_a_library_in_a_directory_others_can_write(cache):
    kernel = _compile(_group())
    kernel_c.clear_memory_cache()
    os.chmod(cache, 0o775)
    with pytest.raises(kernel_c.KernelCompileError,
                       match=r"refusing to load .*writable by others \(mode 775\)"):
        kernel_c.load_library(kernel.path)


def test_a_symlinked_library_is_refused(cache):
    kernel = _compile(_group())
    link = cache / "link.so"
    link.symlink_to(kernel.path)
    with pytest.raises(kernel_c.KernelCompileError, match="neither a regular file"):
        kernel_c.load_library(link)


def test_a_failed_compile_leaves_nothing_behind(cache):
    chain = kernel_c.toolchain()
    with pytest.raises(kernel_c.KernelCompileError, match="failed"):
        kernel_c.build("this is not C;\n", chain)
    assert os.listdir(cache) == []


# -- the build target -------------------------------------------------------------------------

def test_the_target_is_part_of_the_cache_key(cache, monkeypatch, rng):
    """Kernels built for x86-64-v2 (which this x86 CPU runs) and natively differ in name and
    flags, and both compute the reference's values (libmvec's variants for each vector width
    may differ in the last bit)."""
    group = _group(core.Sigmoid)
    native = _compile(group)
    monkeypatch.setenv(kernel_c.MARCH_VARIABLE, "x86-64-v2" if platform.machine()
                       in ("x86_64", "AMD64") else "armv8-a")
    try:
        chain = kernel_c.toolchain()
    except kernel_c.KernelCompileError as error:
        pytest.skip(str(error))
    assert f"-march={kernel_c.target_march()}" in chain.flags
    assert "-march=native" not in chain.flags
    portable = _compile(group)
    assert portable.path != native.path and portable.source == native.source
    sigmoid = lambda x: 1 / (1 + np.exp(-x.astype(np.float64)))  # noqa: E731
    _run(native, rng, sigmoid)
    _run(portable, rng, sigmoid)


def test_a_sum_adds_in_the_same_order_on_every_target(cache, monkeypatch, rng):
    """A reduction block keeps `LANES` partial sums whatever the vector width, so a sum
    built for x86-64-v2 (SSE) and for this CPU gives the same bits; both are within
    float64 rounding of the exact sum."""
    n = 100_003  # whole blocks, whole lane groups and a remainder
    x, y = core.Parameter(core.f64, core.Shape(n)), core.Parameter(core.f64, core.Shape(n))
    difference = core.Subtract(x, y)
    (group,) = find_fusion_groups(core.Function(
        [core.Sum(core.Multiply(difference, difference), (0,))], [x, y]))
    a, b = rng.standard_normal(n), rng.standard_normal(n)  # double sums show every bit

    def total():
        out = np.empty((), np.float64)
        _compile(group)(a, b, out=out)
        return out

    native = total()
    monkeypatch.setenv(kernel_c.MARCH_VARIABLE, "x86-64-v2" if platform.machine()
                       in ("x86_64", "AMD64") else "armv8-a")
    try:
        kernel_c.toolchain()
    except kernel_c.KernelCompileError as error:
        pytest.skip(str(error))
    assert total().tobytes() == native.tobytes()
    exact = math.fsum((a - b) ** 2)
    assert abs(float(native) - exact) <= 1e-12 * exact


def test_a_float_sum_is_nearly_exact_even_with_cancellation(cache, rng):
    """Each lane adds 16 floats in float, then in double: within 16 float roundings of
    sum(|x|) of the exact sum (NumPy's pairwise float32 sum allows about 20 here), and
    no worse than rounding the exact sum to float where nothing cancels."""
    n = 1_000_003
    x = core.Parameter(core.f32, core.Shape(n))
    (group,) = find_fusion_groups(core.Function([core.Sum(core.Multiply(x, x), (0,))], [x]))
    values = rng.standard_normal(n).astype(np.float32)
    signed = core.Parameter(core.f32, core.Shape(n))
    (signed_group,) = find_fusion_groups(core.Function(
        [core.Sum(core.Multiply(signed, core.Abs(signed)), (0,))], [signed]))
    out = np.empty((), np.float32)
    _compile(group)(values, out=out)
    exact = math.fsum(np.float64(v) ** 2 for v in values)
    assert abs(float(out) - exact) <= np.spacing(np.float32(exact))
    _compile(signed_group)(values, out=out)
    squares = values.astype(np.float64) * np.abs(values.astype(np.float64))
    exact = math.fsum(squares)
    assert abs(float(out) - exact) <= 16 * 2.0 ** -24 * float(np.sum(np.abs(squares)))


def test_a_target_the_compiler_rejects_is_a_clear_error(cache, monkeypatch):
    monkeypatch.setenv(kernel_c.MARCH_VARIABLE, "no-such-cpu")
    with pytest.raises(kernel_c.KernelCompileError,
                       match=r"\$AXGRAPH_MARCH=no-such-cpu: .*does not accept -march=no-such-cpu"):
        kernel_c.toolchain()


def test_a_target_this_cpu_cannot_run_is_refused_before_anything_runs(cache, monkeypatch):
    features = {"native": frozenset({"__SSE2__", "__AVX2__"}),
                "future-cpu": frozenset({"__SSE2__", "__AVX2__", "__AVX512F__"})}
    monkeypatch.setattr(kernel_c, "feature_macros", lambda compiler, march: features[march])
    kernel_c._probe.cache_clear()
    monkeypatch.setenv(kernel_c.MARCH_VARIABLE, "future-cpu")
    try:
        with pytest.raises(kernel_c.KernelCompileError, match=r"it lacks AVX512F$"):
            kernel_c.toolchain()
    finally:
        kernel_c._probe.cache_clear()


def test_the_default_target_is_native(monkeypatch):
    monkeypatch.delenv(kernel_c.MARCH_VARIABLE, raising=False)
    assert kernel_c.target_march() == "native"
    monkeypatch.setenv(kernel_c.MARCH_VARIABLE, " x86-64-v3 ")
    assert kernel_c.target_march() == "x86-64-v3"


def test_feature_macros_name_instruction_sets_not_cpus(cache):
    chain = kernel_c.toolchain()
    macros = kernel_c.feature_macros(chain.compiler, "native")
    if macros is None:
        pytest.skip("the compiler has no -march=native")
    assert macros and all(name == name.upper() for name in macros)
    if platform.machine() in ("x86_64", "AMD64"):
        assert "__SSE2__" in macros


def test_a_fast_math_kernel_leaves_denormals_alone(cache, rng):
    """gcc < 13 links crtfastmath.o into a -ffast-math shared object, and loading it used to
    switch the process to flush-to-zero: every later NumPy result below 1e-38 became 0."""
    tiny = np.float32(1e-44)
    assert np.spacing(tiny) > 0
    group = _group(core.Exp)
    kernel = compile_group(group, {n: tuple(n.shape) for n in group.nodes + group.inputs}, "c",
                           fast_math=True)
    _run(kernel, rng, np.exp)
    assert np.spacing(tiny) > 0 and tiny * np.float32(0.5) > 0
