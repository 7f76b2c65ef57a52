"""The C kernels' disk cache loads only undamaged libraries this user alone could have
written, and the build target ($AXGRAPH_MARCH) is part of every kernel's identity.

Opening a shared library runs its code, so a cache another user can change would let them
run code in every axgraph process: the cache directory must be created 0700, and a
directory, link or file that another user owns or could replace is never used. A planted
library whose constructor writes a marker file shows that none runs. A damaged library
(cut short: SIGBUS in every process that maps it) is compiled again; those cases run in a
subprocess, so that a crash fails the test instead of killing pytest.
"""
from __future__ import annotations

import hashlib
import math
import os
import platform
import re
import stat
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from axgraph import core
from axgraph.transformers.cpu import kernel_c, kernel_cache
from axgraph.transformers.cpu.kernel_cache import CompiledKernelWarning
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
    with pytest.warns(CompiledKernelWarning, match=r"not private .*writable by others \(mode 777\)"):
        kernel = _compile(_group(core.Exp))
    assert kernel.path.parent != cache and os.listdir(cache) == []
    kernel_cache.open_directory(kernel.path.parent).close()  # the fallback passes the checks
    _run(kernel, rng, np.exp)


def test_a_cache_below_a_directory_others_can_write_is_not_used(cache, rng):
    cache.parent.mkdir(parents=True)
    os.chmod(cache.parent, 0o777)  # others could rename `kernels` and put theirs instead
    with pytest.warns(CompiledKernelWarning, match="nested is writable by others"):
        kernel = _compile(_group(core.Exp))
    assert kernel.path.parent != cache
    _run(kernel, rng, np.exp)


def test_a_cache_path_that_is_a_file_is_not_used(cache, rng):
    cache.parent.mkdir(parents=True)
    cache.write_text("not a directory")
    with pytest.warns(CompiledKernelWarning, match="kernels is not a directory"):
        kernel = _compile(_group(core.Exp))
    assert kernel.path.parent != cache
    _run(kernel, rng, np.exp)


def test_a_sticky_parent_like_tmp_is_fine(cache):
    cache.parent.mkdir(parents=True)
    os.chmod(cache.parent, 0o1777)
    cache.mkdir(mode=0o700)
    kernel_cache.open_directory(cache).close()


def test_a_cached_library_others_can_write_is_rebuilt(cache, rng):
    """Another kernel's library planted at this kernel's name, writable by others: the
    cache compiles the right one over it instead of loading it."""
    tanh_kernel = _compile(_group(core.Tanh))
    exp_group = _group(core.Exp)
    planted = cache / f"{_key(exp_group)}.so"
    planted.write_bytes(tanh_kernel.path.read_bytes())
    os.chmod(planted, 0o666)
    kernel_c.clear_memory_cache()
    with pytest.warns(CompiledKernelWarning, match=r"writable by others \(mode 666\): compiling"):
        kernel = _compile(exp_group)
    assert kernel.path == planted and _mode(planted) & 0o022 == 0
    _run(kernel, rng, np.exp)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="only root can give a file to another user")
def test_files_and_directories_of_another_user_are_refused(cache):
    kernel = _compile(_group())
    os.chown(kernel.path, 12345, -1)
    with kernel_cache.open_cache() as directory:
        with pytest.raises(kernel_cache.Damaged, match="owned by uid 12345"):
            directory.check(kernel.path.name)
    os.chown(cache, 12345, -1)
    with pytest.raises(kernel_cache.Refused, match="owned by uid 12345"):
        kernel_cache.open_directory(cache)


def test_a_cache_made_writable_by_others_later_is_left(cache):
    kernel = _compile(_group())
    kernel_c.clear_memory_cache()
    os.chmod(cache, 0o775)
    with pytest.warns(CompiledKernelWarning, match=r"writable by others \(mode 775\)"):
        again = _compile(_group())
    assert again.path.parent != cache and kernel.path.parent == cache


def test_a_symlinked_library_is_refused(cache):
    kernel = _compile(_group())
    (cache / "link.so").symlink_to(kernel.path)
    with kernel_cache.open_cache() as directory:
        with pytest.raises(kernel_cache.Damaged, match="not openable as a file"):
            directory.load("link.so")


def test_a_failed_compile_leaves_nothing_behind(cache):
    chain = kernel_c.toolchain()
    with pytest.raises(kernel_c.KernelCompileError, match="failed"):
        kernel_c.build("this is not C;\n", chain)
    assert os.listdir(cache) == []


def test_each_library_ends_with_its_size_and_sha256(cache):
    kernel = _compile(_group())
    data = kernel.path.read_bytes()
    body = data[:-kernel_cache.RECORD.size]
    assert body[:4] == b"\x7fELF"
    assert data[len(body):] == kernel_cache.record_of(body)
    assert kernel_cache.record_problem(data) is None
    assert "cut short" in kernel_cache.record_problem(data[:len(data) // 2])
    assert "too short" in kernel_cache.record_problem(b"")
    flipped = bytes([data[100] ^ 1])
    assert "SHA-256" in kernel_cache.record_problem(data[:100] + flipped + data[101:])


# -- planted libraries never run ---------------------------------------------------------------

PLANTED = r"""
#include <stdint.h>
#include <stdio.h>
__attribute__((constructor)) static void planted(void)
{
    FILE* marker = fopen(MARKER, "w");
    if (marker) { fputs("the planted library ran", marker); fclose(marker); }
}
int axgraph_kernel(int64_t n, int64_t inner, void* const* p)
{
    (void)n; (void)inner; (void)p;
    return 0;
}
"""


def _key(group) -> str:
    chain = kernel_c.toolchain()
    return kernel_c.kernel_key(kernel_c.generate_source(group, frozenset(), chain.vector_math),
                               chain)


def _plant(directory: Path, name: str, marker: Path, record: bool = True) -> Path:
    """A library at directory/name whose constructor writes `marker`: with a valid integrity
    record (what an attacker who knows the format writes), or none."""
    source = directory.parent / f"planted-{directory.name}.c"
    source.write_text(PLANTED)
    target = directory / name
    run = subprocess.run([kernel_c.toolchain().compiler, "-shared", "-fPIC",
                          f'-DMARKER="{marker}"', str(source), "-o", str(target)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    if record:
        target.write_bytes(target.read_bytes() + kernel_cache.record_of(target.read_bytes()))
    os.chmod(target, 0o700)
    return target


def test_the_planted_library_runs_when_loaded(cache, tmp_path):
    """The check below means something: loaded, the planted library writes its marker."""
    marker = tmp_path / "ran"
    cache.mkdir(parents=True)
    _plant(cache, "planted.so", marker)
    with kernel_cache.open_cache() as directory:
        directory.load("planted.so")
    assert marker.read_text() == "the planted library ran"


def test_a_cache_reached_through_a_link_others_could_swap_is_not_used(cache, tmp_path, rng,
                                                                    monkeypatch):
    """AXGRAPH_CACHE_DIR through a symbolic link in a directory everybody may write (not
    sticky): whoever swaps the link chooses the libraries, so the cache is not used, however
    private the link's target looks."""
    public = tmp_path / "public"
    public.mkdir()
    os.chmod(public, 0o777)
    target = tmp_path / "theirs"
    target.mkdir(mode=0o700)
    marker = tmp_path / "ran"
    group = _group(core.Exp)
    _plant(target, f"{_key(group)}.so", marker)
    (public / "kernels").symlink_to(target)
    monkeypatch.setenv("AXGRAPH_CACHE_DIR", str(public / "kernels"))
    with pytest.warns(CompiledKernelWarning, match=r"public is writable by others \(mode 777\)"):
        kernel = _compile(group)
    assert kernel.path.parent not in (target, public / "kernels")
    _run(kernel, rng, np.exp)
    assert not marker.exists()


def test_a_link_of_this_user_in_a_sticky_directory_is_followed(cache, tmp_path, monkeypatch,
                                                                rng):
    """Like ~/.cache linked to /tmp/mine: nobody else may rename or replace this user's link
    in a sticky directory, so it is followed, to a private directory."""
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    target = tmp_path / "mine"
    target.mkdir(mode=0o700)
    (sticky / "kernels").symlink_to(target)
    monkeypatch.setenv("AXGRAPH_CACHE_DIR", str(sticky / "kernels"))
    kernel = _compile(_group(core.Exp))
    assert kernel.path.parent == target
    _run(kernel, rng, np.exp)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="only root can give a link to another user")
def test_a_link_another_user_made_is_not_followed(cache, tmp_path, monkeypatch):
    """The same link, but another user's: they could point it anywhere at any time."""
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    target = tmp_path / "mine"
    target.mkdir(mode=0o700)
    link = sticky / "kernels"
    link.symlink_to(target)
    os.lchown(link, 12345, -1)
    with pytest.raises(kernel_cache.Refused, match="kernels is owned by uid 12345"):
        kernel_cache.open_directory(link)


def test_a_link_others_keep_swapping_never_loads_their_library(cache, tmp_path, rng,
                                                              monkeypatch):
    """The race a path check loses (the link swapped between the check and the load): a
    thread swaps the link between a good cache and a planted one while kernels are built."""
    public = tmp_path / "public"
    public.mkdir()
    os.chmod(public, 0o777)
    good, theirs = tmp_path / "good", tmp_path / "theirs"
    good.mkdir(mode=0o700)
    theirs.mkdir(mode=0o700)
    marker = tmp_path / "ran"
    group = _group(core.Exp)
    _plant(theirs, f"{_key(group)}.so", marker)
    link = public / "kernels"
    link.symlink_to(good)
    monkeypatch.setenv("AXGRAPH_CACHE_DIR", str(link))
    stop = threading.Event()

    def swap():
        spare = public / "spare"
        while not stop.is_set():
            for target in (theirs, good):
                spare.symlink_to(target)
                os.replace(spare, link)

    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CompiledKernelWarning)
            for _ in range(20):
                kernel_c.clear_memory_cache()
                _run(_compile(group), rng, np.exp)
    finally:
        stop.set()
        swapper.join()
    assert not marker.exists()


def test_a_directory_swapped_after_its_check_is_not_what_loads(cache, tmp_path, monkeypatch, rng):
    """Everything after the checks goes through the directory that was opened: a planted
    directory renamed into the cache's place after the check is never read."""
    group = _group(core.Exp)
    _compile(group)
    kernel_c.clear_memory_cache()
    marker = tmp_path / "ran"
    checked = kernel_cache.CacheDirectory.check

    def swap_then_check(directory, name):
        if not (tmp_path / "moved").exists():
            cache.rename(tmp_path / "moved")
            cache.mkdir(mode=0o700)
            _plant(cache, name, marker)
        return checked(directory, name)

    monkeypatch.setattr(kernel_cache.CacheDirectory, "check", swap_then_check)
    kernel = _compile(group)
    _run(kernel, rng, np.exp)
    assert not marker.exists() and (tmp_path / "moved" / kernel.path.name).exists()


def test_a_cache_of_another_user_is_never_loaded_from(cache, tmp_path, monkeypatch, rng):
    """Another user simulated: every file and directory this user made now looks foreign.
    Neither the cache nor a fallback passes, so the C engine is not used at all."""
    group = _group(core.Exp)
    cache.mkdir(parents=True)
    marker = tmp_path / "ran"
    _plant(cache, f"{_key(group)}.so", marker)
    real_user = os.geteuid()
    monkeypatch.setattr(kernel_cache, "this_user", lambda: real_user + 1)
    with pytest.warns(CompiledKernelWarning, match=rf"owned by uid {real_user}, not by this user"):
        with pytest.raises(kernel_c.KernelCompileError, match="no private kernel cache"):
            _compile(group)
    assert not marker.exists()


@pytest.mark.parametrize("record", [True, False], ids=["wrong-hash", "no-record"])
def test_a_library_that_fails_its_hash_is_rebuilt_not_loaded(cache, tmp_path, rng, record):
    group = _group(core.Exp)
    cache.mkdir(parents=True, mode=0o700)
    marker = tmp_path / "ran"
    planted = _plant(cache, f"{_key(group)}.so", marker, record=False)
    if record:  # the right size, the SHA-256 of other bytes
        body = planted.read_bytes()
        planted.write_bytes(body + kernel_cache.RECORD.pack(
            kernel_cache.RECORD_TAG, len(body), hashlib.sha256(b"other bytes").digest()))
    problem = "SHA-256" if record else "does not end with its integrity record"
    with pytest.warns(CompiledKernelWarning, match=f"{planted}.*{problem}.*compiling it again"):
        kernel = _compile(group)
    _run(kernel, rng, np.exp)
    assert kernel.path == planted and kernel_cache.record_problem(planted.read_bytes()) is None
    assert not marker.exists()


# -- damaged libraries and leftovers ---------------------------------------------------------------

DAMAGED_RUN = """
import warnings, numpy as np
from axgraph import core
from axgraph.transformers.cpu.fusion import compile_group, find_fusion_groups
x = core.Parameter(core.f32, core.Shape(1000))
(group,) = find_fusion_groups(core.Function([core.Multiply(core.Exp(x), x)], [x]))
kernel = compile_group(group, {n: tuple(n.shape) for n in group.nodes + group.inputs}, "c")
v = np.linspace(-3, 3, 1000, dtype=np.float32)
out = np.empty_like(v)
kernel(v, out=out)
np.testing.assert_allclose(out, np.exp(v.astype(np.float64)) * v, rtol=2e-6, atol=1e-7)
print(kernel.path)
"""


def _run_in_a_process(cache: Path):
    """DAMAGED_RUN in a fresh process (a SIGBUS there must not kill pytest)."""
    environment = dict(os.environ, AXGRAPH_CACHE_DIR=str(cache))
    return subprocess.run([sys.executable, "-c", DAMAGED_RUN], capture_output=True, text=True,
                          timeout=300, env=environment, cwd=Path(__file__).parents[1])


@pytest.mark.parametrize("kept", [0.0, 0.25, 0.5], ids=["empty", "quarter", "half"])
def test_a_damaged_library_is_rebuilt_with_a_warning(cache, kept):
    """A library cut short (a crash or a full disk while it was copied) used to kill every
    later process with SIGBUS (or raise `file too short`); now it is compiled again."""
    first = _run_in_a_process(cache)
    assert first.returncode == 0, first.stderr
    library = Path(first.stdout.split()[-1])
    size = library.stat().st_size
    os.truncate(library, int(size * kept))
    second = _run_in_a_process(cache)
    assert second.returncode == 0, second.stderr  # -7 was SIGBUS
    assert "CompiledKernelWarning" in second.stderr and "compiling it again" in second.stderr
    assert library.stat().st_size == size
    third = _run_in_a_process(cache)
    assert third.returncode == 0 and "Warning" not in third.stderr, third.stderr


def test_stale_temporaries_of_killed_compiles_are_removed(cache):
    """A compile killed with SIGKILL leaves its hidden temporaries: those older than an hour
    go when a process first opens the cache; younger ones may be a compile still running."""
    cache.mkdir(parents=True, mode=0o700)
    stem = "0123456789abcdef"
    old = [cache / f".{stem}-a1b2c3{suffix}" for suffix in (".c", ".so", ".o")]
    young = cache / f".{stem}-d4e5f6.so"
    kept = cache / ".not-a-temporary.so"
    for path in old + [young, kept]:
        path.write_bytes(b"partial")
    two_hours_ago = time.time() - 7200
    for path in old + [kept]:
        os.utime(path, (two_hours_ago, two_hours_ago))
    with kernel_cache.open_cache():
        pass
    assert sorted(os.listdir(cache)) == sorted([young.name, kept.name])


def test_a_probe_computing_wrong_values_is_reported(cache, monkeypatch):
    """The probe kernel decides the compiler flags; when the OpenMP builds compute wrong
    values the warning names the library, and the flags without OpenMP are used."""
    wrong = kernel_c._PROBE.replace("sqrtf(x[i]);", "sqrtf(x[i])\n#ifdef _OPENMP\n+ 1\n#endif\n;")
    assert wrong != kernel_c._PROBE
    monkeypatch.setattr(kernel_c, "_PROBE", wrong)
    kernel_c._probe.cache_clear()
    try:
        with pytest.warns(CompiledKernelWarning) as caught:
            chain = kernel_c.toolchain()
    finally:
        kernel_c._probe.cache_clear()
    messages = [str(w.message) for w in caught]
    assert len(messages) == 2 and all(
        re.fullmatch(rf"the probe kernel {cache}/[0-9a-f]{{64}}\.so \(built with .*-fopenmp\) "
                     r"computed wrong values: trying other flags", m) for m in messages), messages
    assert chain is not None and not chain.openmp


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
