"""Fused groups as generated C: one OpenMP loop per group, compiled once, cached on disk.

Why C: a C loop compiled with ``-O3 -march=native -fopenmp`` and glibc's
vector math (libmvec) runs ``tanh(a*b+c)*sigmoid(d)-e`` over 4M f32 and
``sum((x-y)**2)`` over 10M f32 as fast as XLA does, several times faster
than NumPy, on AVX2 and AVX-512 machines alike; numba has no vector
``tanhf`` there. Float tanh and exp are the kernel's own inline code
(`own_math`): libmvec's cost as much as the rest of that chain. C is
optional: without a working compiler this engine reports itself
unavailable and the blocked NumPy engine runs instead.

Every loop must vectorize, on x86-64-v2, v3 (AVX2), v4 (AVX-512) and
aarch64 (tests/test_vectorization.py reads gcc's vectorizer report), so the
generated element code has no branches: a choice is a select between two
values that are both safe to compute (Sigmoid divides once, by ``1 + e``,
a numerator chosen by sign). Without AVX-512's masked instructions gcc
will not if-convert anything that might trap, and one branch leaves the
whole loop scalar (measured on a 2-core AVX2 machine: the chain above took
185 ms scalar, ~10 ms vectorized).

Semantics kept (no ``-ffast-math`` unless asked for): ``-ffp-contract=off``
so ``a*b+c`` rounds twice as NumPy does; Maximum/Minimum and Max/Min
propagate NaN like ``np.maximum``; Sigmoid is computed stably as the
reference does. Two flags change no value: ``-fno-math-errno`` drops the
errno writes (which NumPy never reads either) and is what lets gcc call the
vector variants of ``expf``/``tanhf``/...: glibc's <math.h> declares those
variants only under ``__FAST_MATH__``, so the kernel declares them itself
with ``#pragma omp declare simd``, for the functions this libmvec exports.
``-fno-trapping-math`` lets gcc assume nobody watches the floating-point
exception flags (NumPy clears them before each ufunc it checks, and they
are per thread), which is what vectorizes ``floor`` (SSE4.1/AVX
``round``). A reduction accumulates with the C expression it declares
(`c_accumulate`, from `c_start`). Float sums and products accumulate in
double (their `wide_accumulator`), per fixed block of elements, each block
in `LANES` partial results side by side (independent chains of additions:
one chain was latency-bound, L2 at 2.1x XLA's time on a 16-core AVX-512
Xeon), each lane taking `CHUNK` floats in float before widening (10 % faster
there, at most 15 float roundings per chunk), and blocks are combined in
order, so the result is accurate and depends neither on the number of
threads nor on the vector width.

Each thread of an elementwise kernel takes one contiguous run of whole
cache lines (no two threads write one line; vector loops leave no remainder
at the joins). A call whose traffic (inputs read plus output written)
exceeds the last-level cache streams its output on x86: runs are walked in
tiles of 4 KB, each computed into a stack buffer (in L1) and copied out
with non-temporal stores, which skip the caches and so need no read of the output's lines
first (the output would be evicted before anyone reads it anyway). That is
one of the seven passes over memory of ``tanh(a*b+c)*sigmoid(d)-e`` over 4M
f32 (which ran 0-15 % faster for it on two AVX2 cores, noisily measured). The copy is inline
assembly: ``<immintrin.h>`` alone takes gcc longer to read than a kernel
takes to compile. Other machines store through the caches.

Target: ``-march=native`` unless ``$AXGRAPH_MARCH`` names another target
(``x86-64-v3``: kernels an AVX2 machine would run), which this CPU must be
able to execute (checked from the compiler's feature macros, never by
running foreign code).

Cache: the shared object is named by the sha256 of (source, flags, compiler
version, CPU features), in ``$AXGRAPH_CACHE_DIR`` or
``~/.cache/axgraph/kernels``. Loading a library runs its code, so only a
private cache is trusted, reached and read so that what is checked is what
is loaded, and each library carries its size and SHA-256 so that a damaged
one is rebuilt instead of crashing the process (`kernel_cache`). Loaded
with ctypes (which releases the GIL during the call).
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import re
import shutil
import string
import subprocess
import warnings
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ... import core
from ...core.node import Node
from ...core.traits import c_code, c_quotient
from ...errors import ExecutionError
from ...op_table import OpTable
from . import kernel_cache, own_math
from .group import (FusedGroup, c_accepts, check_call, check_extras, concrete_shape,
                     group_shapes, is_scalar_constant, op_family, prepare_call)

# Elements per reduction block: partial sums are exact-order deterministic per block.
BLOCK = 16384
#: Partial results a reduction block keeps side by side (independent dependency chains):
#: 16 floats are two AVX2 vectors, four of their doubles.
LANES = 16
#: Elements a lane of a float sum (product) takes in float before widening to double.
CHUNK = 16
#: Elements of a row that a multi-pass row kernel sums in the element type before adding
#: the chunk's sum into a double.
ROW_CHUNK = 256
#: Below this many elements a kernel runs on one thread: waking the other costs more
#: than it saves on memory-bound loops over two cores.
PARALLEL_MIN = 1 << 18
#: A kernel whose elements call a costly math function (exp, erf, ...) or that runs rows (a
#: softmax's passes and sums) spends several times a memory-bound element's time on each:
#: it splits over the threads from this many elements (`parallel_min`; measured on 2 cores,
#: the transformer block's softmax over 32 K scores 19 -> 10 us, GELU's gradient over
#: 64 K values 37 -> 19-28 us).
HEAVY_PARALLEL_MIN = 1 << 14
#: Math functions that cost about what an arithmetic operation does (a kernel calling only
#: these is memory-bound): by name, without the float suffix.
CHEAP_MATH = frozenset({"fabs", "sqrt", "floor", "ceil", "trunc", "rint", "round", "fmax",
                        "fmin", "fma", "copysign", "from_i64", "from_u64"})
#: A streaming kernel computes its output in tiles of this many bytes on the stack (in L1)
#: and copies each past the caches with non-temporal stores.
STREAM_TILE_BYTES = 4096
#: The last-level cache size assumed where the system does not say (/sys on Linux).
FALLBACK_CACHE_BYTES = 32 << 20
#: x86 code for the streamed copy: AVX moves 32 bytes a store, SSE2 16; elsewhere (aarch64,
#: ...) AXGRAPH_STREAM stays undefined and every kernel stores through the caches. Written
#: as inline assembly: <immintrin.h> alone takes gcc half a second to read, 4x a kernel.
STREAM_SUPPORT = """\
#if (defined(__x86_64__) || defined(__i386__)) && defined(__SSE2__)
#define AXGRAPH_STREAM 1
#if defined(__AVX__)
typedef long long axgraph_chunk __attribute__((vector_size(32)));
#define AXGRAPH_MOVNT "vmovntdq %1, %0"
#else
typedef long long axgraph_chunk __attribute__((vector_size(16)));
#define AXGRAPH_MOVNT "movntdq %1, %0"
#endif
/* a whole tile to 32-byte aligned `dst` with non-temporal stores (no read for ownership) */
static inline void axgraph_stream(void* dst, const void* tile, int64_t bytes)
{
    for (int64_t k = 0; k < bytes; k += (int64_t)sizeof(axgraph_chunk))
        __asm__ __volatile__(AXGRAPH_MOVNT : "=m"(*(axgraph_chunk*)((char*)dst + k))
                             : "x"(*(const axgraph_chunk*)((const char*)tile + k)));
}
/* orders this thread's streamed stores before what follows (the join) */
static inline void axgraph_fence(void) { __asm__ __volatile__("sfence" ::: "memory"); }
#endif"""
ENTRY = "axgraph_kernel"
#: gcc joins sin(x) and cos(x) of one value into one sincos(x) call, which libmvec has no
#: vector variant of, so the whole loop would stay scalar; without the builtins the two
#: calls stay apart and each is vectorized through its `omp declare simd` declaration.
NO_SINCOS_FLAGS = ("-fno-builtin-sin", "-fno-builtin-sinf", "-fno-builtin-cos",
                   "-fno-builtin-cosf")
BASE_FLAGS = ("-O3", "-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math", "-fPIC",
              "-shared", *NO_SINCOS_FLAGS)
#: Names the -march the kernels are built for (default: native, this CPU).
MARCH_VARIABLE = "AXGRAPH_MARCH"
FAST_MATH_FLAGS = ("-ffast-math",)
CTYPES = {"f32": "float", "f64": "double", "boolean": "uint8_t",
          # integers are only read, and converted at once (`group.c_accepts`)
          "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t",
          "u8": "uint8_t", "u16": "uint16_t", "u32": "uint32_t", "u64": "uint64_t"}
#: Booleans computed inside a kernel are C ints, 0 or 1: a uint8_t between two float
#: operations keeps gcc from vectorizing the loop (measured: 4x slower ReLU gradients).
VALUE_CTYPES = dict(CTYPES, boolean="int")
#: libm functions (double names; float ones end in "f") that glibc's libmvec may have
#: vector variants of: each one a kernel calls is looked up there (`vector_math_symbols`).
MATH_FUNCTIONS = ("acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "cos",
                  "cosh", "erf", "erfc", "exp", "exp10", "exp2", "expm1", "hypot", "log",
                  "log10", "log1p", "log2", "pow", "sin", "sinh", "tan", "tanh")
#: Those of MATH_FUNCTIONS that take two arguments.
TWO_ARGUMENTS = frozenset({"atan2", "hypot", "pow"})
class KernelCompileError(ExecutionError):
    """The C engine cannot build a kernel (no compiler, or the compiler failed)."""


# -- toolchain --------------------------------------------------------------------------------

def find_compiler() -> Optional[str]:
    """Path of the C compiler: $AXGRAPH_CC, $CC, else cc, gcc or clang on PATH; None if absent."""
    for name in (os.environ.get("AXGRAPH_CC"), os.environ.get("CC"), "cc", "gcc", "clang"):
        if name:
            path = shutil.which(name)
            if path:
                return path
    return None


def target_march() -> str:
    """The -march kernels are built for: $AXGRAPH_MARCH, else "native" (this CPU)."""
    return os.environ.get(MARCH_VARIABLE, "").strip() or "native"


@functools.lru_cache(maxsize=None)
def cpu_identity() -> str:
    """The CPU model and feature flags: -march=native code is only valid on such a CPU."""
    try:
        with open("/proc/cpuinfo") as info:
            lines = [line.strip() for line in info if line.startswith(("model name", "flags",
                                                                         "Features"))]
        return platform.machine() + "|" + "|".join(sorted(set(lines)))
    except OSError:
        return platform.machine() + "|" + platform.processor()


@functools.lru_cache(maxsize=None)
def last_level_cache_bytes() -> int:
    """The largest data cache of CPU 0 (from /sys), else FALLBACK_CACHE_BYTES."""
    sizes = []
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip().upper()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:], 1)
        digits = size.rstrip("KMG")
        if kind in ("Data", "Unified") and digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes, default=FALLBACK_CACHE_BYTES)


def stream_min_elements(bytes_per_element: int) -> int:
    """From this many elements on, a kernel moving `bytes_per_element` per element streams
    its output past the caches: the loop's own traffic exceeds the last-level cache, so
    what it wrote would be evicted anyway, and plain stores would first read every output
    line in (one more pass over the output's bytes)."""
    return max(PARALLEL_MIN, -(-last_level_cache_bytes() // bytes_per_element))


@functools.lru_cache(maxsize=None)
def vector_math_symbols() -> FrozenSet[str]:
    """libm functions ("expf", "tanh", ...) that glibc's libmvec has vector variants of.

    Declaring a variant the library lacks (older glibc has no tanhf) would
    leave an undefined symbol and the kernel would fail to load, so each is
    looked up in libmvec first. Empty off glibc or on an unknown ISA.
    """
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        prefix_f, prefix_d = "_ZGVbN4", "_ZGVbN2"
    elif machine in ("aarch64", "arm64"):
        prefix_f, prefix_d = "_ZGVnN4", "_ZGVnN2"
    else:
        return frozenset()
    try:
        libmvec = ctypes.CDLL("libmvec.so.1")
    except OSError:
        return frozenset()
    found = set()
    for name in MATH_FUNCTIONS:
        args = "vv" if name in TWO_ARGUMENTS else "v"
        if hasattr(libmvec, f"{prefix_f}{args}_{name}f"):
            found.add(name + "f")
        if hasattr(libmvec, f"{prefix_d}{args}_{name}"):
            found.add(name)
    return frozenset(found)


@dataclass(frozen=True)
class Toolchain:
    """A compiler that works here, with the flags that worked and what they enable."""

    compiler: str
    version: str
    flags: Tuple[str, ...]          # without -ffast-math
    openmp: bool                    # threads (else the pragmas only vectorize, or nothing)
    vector_math: FrozenSet[str]     # functions declared `omp declare simd`


_PROBE = """\
#include <stdint.h>
#include <math.h>
%s
int axgraph_kernel(int64_t n, int64_t inner, void* const* p)
{
    const float* x = (const float*)p[0];
    float* out = (float*)p[1];
    (void)inner;
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = expf(x[i]) + sqrtf(x[i]);
    return 0;
}
"""


def _declarations(functions: Sequence[str]) -> str:
    """`#pragma omp declare simd` prototypes: gcc then calls libmvec's `_ZGV...` variants."""
    lines = []
    for name in sorted(functions):
        is_float = name not in MATH_FUNCTIONS  # "expf" vs "exp" (and "erff" vs "erf")
        ctype = "float" if is_float else "double"
        base = name[:-1] if is_float else name
        params = f"{ctype}, {ctype}" if base in TWO_ARGUMENTS else ctype
        lines.append("#pragma omp declare simd notinbranch")
        # const: with -fno-math-errno they read and write no memory; said here because the
        # builtins that would say it are off for sin and cos (NO_SINCOS_FLAGS)
        lines.append(f"extern {ctype} {name}({params}) __attribute__((const));")
    return "\n".join(lines)


@functools.lru_cache(maxsize=None)
def _compiler_version(compiler: str) -> Optional[str]:
    try:
        run = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if run.returncode != 0:
        return None
    return run.stdout.strip() or run.stderr.strip()


@functools.lru_cache(maxsize=None)
def feature_macros(compiler: str, march: str) -> Optional[FrozenSet[str]]:
    """The instruction-set macros (`__AVX2__`, `__ARM_FEATURE_SVE`, ...) -march=`march`
    defines; None if the compiler rejects it. Lower-case macros name CPUs, not features."""
    try:
        run = subprocess.run([compiler, f"-march={march}", "-dM", "-E", "-x", "c", os.devnull],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if run.returncode != 0:
        return None
    names = (line.split()[1] for line in run.stdout.splitlines() if line.startswith("#define "))
    return frozenset(name for name in names if name == name.upper())


def _unsupported(compiler: str, march: str) -> Optional[str]:
    """Why code for -march=`march` cannot run on this CPU, or None if it can.

    Compared at compile time (the target's feature macros against native's):
    running code this CPU lacks instructions for would kill the process.
    """
    if march == "native":
        return None
    target = feature_macros(compiler, march)
    if target is None:
        return f"{compiler} does not accept -march={march}"
    native = feature_macros(compiler, "native")
    if native is None:
        return f"{compiler} does not accept -march=native, so -march={march} cannot be checked"
    missing = sorted(target - native)
    if missing:
        return (f"this CPU cannot run code built for -march={march}: it lacks "
                f"{', '.join(name.strip('_') for name in missing)}")
    return None


@functools.lru_cache(maxsize=None)
def _probe(compiler: str, march: str) -> Tuple[Optional[Toolchain], str]:
    """The first flag set with which a small OpenMP/vector-math kernel builds, loads and
    runs, and otherwise why none did."""
    version = _compiler_version(compiler)
    if version is None:
        return None, f"{compiler} --version failed"
    unsupported = _unsupported(compiler, march)
    if unsupported:
        return None, unsupported
    vector = vector_math_symbols()
    target = (f"-march={march}",)
    attempts: List[Tuple[Tuple[str, ...], bool, FrozenSet[str]]] = [
        (target + ("-fopenmp",), True, vector),
        (target + ("-fopenmp",), True, frozenset()),
        (target + ("-fopenmp-simd",), False, frozenset()),
    ]
    if march == "native":  # a compiler without -march=native still builds plain kernels
        attempts.append(((), False, frozenset()))
    failure = "no attempt ran"
    for number, (extra, openmp, functions) in enumerate(attempts, 1):
        toolchain = Toolchain(compiler, version, BASE_FLAGS + extra, openmp, functions)
        source = _PROBE % _declarations(sorted(functions & {"expf"}))
        try:
            library = build(source, toolchain)
            x = np.linspace(0.0, 1.0, 64, dtype=np.float32)
            out = np.empty_like(x)
            pointers = (ctypes.c_void_p * 2)(x.ctypes.data, out.ctypes.data)
            entry(library)(x.size, 1, pointers)
            if np.allclose(out, np.exp(x) + np.sqrt(x), rtol=1e-5):
                return toolchain, ""
            failure = (f"the probe kernel {library.path} (built with {' '.join(extra)}) "
                       f"computed wrong values")
            warnings.warn(failure + (": trying other flags" if number < len(attempts) else
                                     ": the C engine is off"),
                          kernel_cache.CompiledKernelWarning, stacklevel=2)
        except (KernelCompileError, OSError) as error:
            failure = str(error).splitlines()[0]
    return None, failure


def toolchain() -> Optional[Toolchain]:
    """The working toolchain, or None when there is no usable C compiler.

    Raises KernelCompileError when $AXGRAPH_MARCH asks for a target that
    cannot be built or run here (a setting the user chose is not ignored).
    """
    compiler = find_compiler()
    if compiler is None:
        return None
    march = target_march()
    chain, failure = _probe(compiler, march)
    if chain is None and march != "native":
        raise KernelCompileError(f"${MARCH_VARIABLE}={march}: {failure}")
    return chain


def c_available() -> bool:
    """Whether the C engine can run here."""
    return toolchain() is not None


# -- building and loading -----------------------------------------------------------------------

#: Part of every kernel's key: libraries written before their integrity record existed are
#: never looked for (they would all be "damaged").
CACHE_FORMAT = "axgraph kernel cache 2 (library + size and SHA-256 record)"


def compile_flags(chain: Toolchain, fast_math: bool = False) -> Tuple[str, ...]:
    """Command-line flags for a kernel (fast math only when asked for)."""
    return chain.flags + (FAST_MATH_FLAGS if fast_math else ())


def kernel_key(source: str, chain: Toolchain, fast_math: bool = False) -> str:
    """sha256 of everything that determines the shared object's contents."""
    text = "\0".join([CACHE_FORMAT, source, " ".join(compile_flags(chain, fast_math)),
                      chain.version, cpu_identity()])
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Library:
    """A kernel library loaded from the cache: where it lies, and its ctypes handle."""

    path: Path
    handle: ctypes.CDLL


#: Libraries this process loaded, by (configured cache directory, kernel key).
_LOADED: Dict[Tuple[str, str], Library] = {}


def optional_library(source: str) -> Optional[ctypes.CDLL]:
    """The loaded library of a helper's C `source` (built once, then from the disk cache),
    or None where no compiler works or the build fails: the caller then keeps its NumPy
    path. For the backend's fixed helpers (window ops, indexing loops, products)."""
    chain = toolchain()
    if chain is None:
        return None
    try:
        return build(source, chain).handle
    except (KernelCompileError, OSError):
        return None


def build(source: str, chain: Toolchain, fast_math: bool = False) -> Library:
    """The library of `source`, loaded: from the disk cache, or compiled into it first.

    A cached library that fails its checks (see `kernel_cache`) is compiled
    again, with a warning; one that is missing is compiled silently. Raises
    KernelCompileError when the compiler fails or no private cache exists.
    """
    def commands(source_path: str, library_path: str) -> List[List[str]]:
        flags = compile_flags(chain, fast_math)
        if fast_math:
            # gcc < 13 links crtfastmath.o into a -ffast-math library: loading it would
            # switch the whole process to flush denormals to zero. Compiled fast, linked
            # plain.
            object_path = library_path[:-3] + ".o"
            return [[chain.compiler, *flags, "-c", source_path, "-o", object_path],
                    [chain.compiler, *compile_flags(chain), object_path, "-o", library_path,
                     "-lm"]]
        return [[chain.compiler, *flags, source_path, "-o", library_path, "-lm"]]

    library = cached_library(kernel_key(source, chain, fast_math), source, ".c", commands, _load)
    assert library is not None  # (compiled where missing)
    return library


def cached_library(key: str, source: str, suffix: str,
                   commands: Callable[[str, str], List[List[str]]],
                   load: Callable[[kernel_cache.CacheDirectory, str], ctypes.CDLL],
                   compile_missing: bool = True) -> Optional[Library]:
    """The library `key` in the kernel cache, loaded: from the disk cache, or compiled
    into it first (what `build` does for C kernels, for any compiler's commands).

    Parameters
    ----------
    key : str
        The library's name in the cache: a hash of everything its contents depend on.
    source : str
        Its source text, kept beside it as ``<key><suffix>``.
    suffix : str
        The source file's suffix (".c", ".cpp").
    commands : callable
        ``commands(source_path, library_path)``: the command lines that compile the
        source into the library (an object file beside the library may be made).
    load : callable
        ``load(directory, name)``: the checked library opened.
    compile_missing : bool
        Whether to compile it where the cache does not hold it (False: None then; a
        caller that compiles it in the background asks first).

    Returns
    -------
    Library or None
        The loaded library (None: not in the cache, and `compile_missing` False).

    Raises
    ------
    KernelCompileError
        The compiler failed, or no private cache exists.
    """
    remembered = (str(kernel_cache.cache_dir()), key)
    library = _LOADED.get(remembered)
    if library is not None:
        return library
    name = f"{key}.so"
    try:
        with kernel_cache.open_cache() as directory:
            try:
                handle = load(directory, name)
            except FileNotFoundError:
                handle = None
            except kernel_cache.Damaged as damage:
                warnings.warn(f"the cached kernel library {directory.path / name} is {damage}: "
                              f"compiling it again", kernel_cache.CompiledKernelWarning,
                              stacklevel=3)
                handle = None
            if handle is None and not compile_missing:
                return None
            if handle is None:
                _compile_into(directory, key, source, suffix, commands)
                try:
                    handle = load(directory, name)
                except (FileNotFoundError, kernel_cache.Damaged) as error:
                    raise KernelCompileError(f"the kernel library just compiled into "
                                             f"{directory.path / name} is {error}") from None
            library = Library(directory.path / name, handle)
    except kernel_cache.Refused as refused:
        raise KernelCompileError(f"no private kernel cache: {refused}") from None
    _LOADED[remembered] = library
    return library


def _load(directory: kernel_cache.CacheDirectory, name: str) -> ctypes.CDLL:
    """A checked library opened, with OpenMP told how long idle threads spin."""
    _bound_openmp_spinning()
    global _OPENMP
    try:
        library = directory.load(name)
    except OSError as error:
        if isinstance(error, FileNotFoundError):
            raise
        raise KernelCompileError(f"loading the kernel library {directory.path / name} "
                                 f"failed: {error}") from None
    if _OPENMP is None and hasattr(library, "omp_set_num_threads"):
        _OPENMP = library
    return library


#: Spins (about 10 ns each) an idle GNU OpenMP thread waits before it sleeps (`GOMP_SPINCOUNT`).
OPENMP_SPINS = 20000


def _bound_openmp_spinning() -> None:
    """Idle OpenMP threads spin about 0.2 ms after a kernel, then sleep; where the user
    set neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT (the runtime reads them once, when the
    first kernel loads it).

    Why bounded: a team that spins on (libgomp's default is 3 ms) starves BLAS's own
    threads and other processes on a machine with few cores; one that sleeps at once
    (OMP_WAIT_POLICY=PASSIVE alone) is woken through the kernel for every parallel
    region, which took the 784-512-512-10 MLP step from 2.4 to 3.1 ms on 2 cores (beside
    a busy process, where the governor leaves one thread, the step takes the same time
    either way). PASSIVE is still set for OpenMP runtimes other than GNU's, which do not
    read GOMP_SPINCOUNT.
    """
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    os.environ["GOMP_SPINCOUNT"] = str(OPENMP_SPINS)


#: The first loaded kernel library linked with OpenMP (its runtime's functions resolve
#: through it): from then on this process may have a pool of OpenMP threads.
_OPENMP: Optional[ctypes.CDLL] = None


def _one_thread_after_fork() -> None:
    """In a child forked once OpenMP kernels were loaded: the thread that forked (the
    child's only one) runs its kernels on one thread from now on.

    GNU OpenMP's pool of worker threads does not survive fork(): the child's copy of the
    forking thread's pool lists threads that do not exist there, and its next team of
    more than one thread waits for them forever (multiprocessing's default start method
    is fork on Linux before Python 3.14, so data-loader workers hung). A team of one uses
    no pool. Threads the child starts itself get pools of their own and run their kernels
    on all threads again.
    """
    if _OPENMP is not None:
        _OPENMP.omp_set_num_threads(1)


os.register_at_fork(after_in_child=_one_thread_after_fork)


def _compile_into(directory: kernel_cache.CacheDirectory, key: str, source: str, suffix: str,
                  commands: Callable[[str, str], List[List[str]]]) -> None:
    """Compile `source` into temporaries in the cache, then seal the library as
    `<key>.so` (with its integrity record) and keep the source beside it as
    `<key><suffix>`. Processes racing on one kernel each publish a whole file; the last
    rename wins."""
    source_temp = directory.create_temporary(key, suffix, source.encode())
    so_temp = directory.create_temporary(key, ".so")
    o_temp = so_temp[:-3] + ".o"
    source_path, so_path = (str(directory.path / name) for name in (source_temp, so_temp))
    try:
        for command in commands(source_path, so_path):
            try:
                run = subprocess.run(command, capture_output=True, text=True, timeout=600)
            except (OSError, subprocess.SubprocessError) as error:
                raise KernelCompileError(f"running {command[0]} failed: {error}") from None
            if run.returncode != 0:
                raise KernelCompileError(f"{' '.join(command)} failed:\n{run.stderr[-2000:]}")
        directory.seal(so_temp, f"{key}.so")
        directory.rename(source_temp, f"{key}{suffix}")  # kept beside the library for reading
    except kernel_cache.Damaged as error:
        raise KernelCompileError(str(error)) from None
    finally:
        for leftover in (source_temp, so_temp, o_temp):
            directory.remove(leftover)


def entry(library: Library):
    """The kernel entry point of a loaded library."""
    function = getattr(library.handle, ENTRY)
    function.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p)]
    function.restype = ctypes.c_int
    return function


def clear_memory_cache() -> None:
    """Forget loaded libraries (the next kernel build looks at the disk again)."""
    _LOADED.clear()


# -- generating C ---------------------------------------------------------------------------------

def c_literal(value, et: core.ElementType) -> str:
    """An exact C literal for a scalar of element type `et` (hex floats round-trip)."""
    if et.is_boolean:
        return "1" if bool(value) else "0"
    if et.is_integral:
        whole = int(value)
        # (-2^63 has no literal: 2^63 does not fit a long long)
        text = f"({whole + 1}LL - 1)" if whole < -(2 ** 62) else f"{whole}LL"
        return f"(({CTYPES[et.name]}){text if whole < 2 ** 62 else f'{whole}ULL'})"
    number = float(value)
    ctype = CTYPES[et.name]
    if number != number:
        return f"(({ctype})NAN)"
    if number in (float("inf"), float("-inf")):
        return f"(({ctype}){'-' if number < 0 else ''}INFINITY)"
    return f"(({ctype}){number.hex()})"


class CTerms:
    """What an op's C trait (axgraph/core/traits.py) writes its expression with.

    args: the operands' C expressions; ctype: the C type of the value ("float",
    "double", "int" for booleans); one, zero: literals of that type; boolean:
    whether the value is a boolean; math(name): a libm function for the value
    type ("exp" -> "expf" for f32), declared for libmvec where it has one, or
    the kernels' own (`own_math`: "tanhf", "exp_nonpositivef", ...);
    let(expression): a named constant computed first, for a value used twice;
    quotient(i): operand i as C (numerator, denominator) where its op declares
    that form (`c_quotient`) and nothing else in the kernel reads it, else None.
    """

    def __init__(self, emitter: "_Emitter", node: Node, args: Sequence[str], name: str):
        self._emitter, self._node, self._name = emitter, node, name
        self._lets = 0
        self.args = tuple(args)
        self.ctype = VALUE_CTYPES[node.element_type.name]
        self.one, self.zero = f"(({self.ctype})1)", f"(({self.ctype})0)"
        self.boolean = node.element_type.is_boolean

    def math(self, name: str) -> str:
        return self._emitter._math(name, self._node.element_type)

    def quotient(self, i: int) -> Optional[Tuple[str, str]]:
        return self._emitter.quotient(self._node.inputs[i])

    def let(self, expression: str) -> str:
        name = f"e{self._name[1:]}" + (f"_{self._lets}" if self._lets else "")
        self._lets += 1
        self._emitter.body.append(f"const {self.ctype} {name} = {expression};")
        return name


class _FormatNames(Mapping[str, str]):
    """The names of a C format string: one, zero, ctype, else a libm function."""

    def __init__(self, terms: CTerms):
        self._terms = terms

    def __getitem__(self, key: str) -> str:
        if key in ("one", "zero", "ctype"):
            return getattr(self._terms, key)
        return self._terms.math(key)

    def __iter__(self):
        return iter(("one", "zero", "ctype"))

    def __len__(self) -> int:
        return 3


def declared_expression(node: Node, terms: CTerms) -> str:
    """The expression the op's C trait gives: a format string or a function of `terms`."""
    code = c_code(type(node))
    if isinstance(code, str):
        return string.Formatter().vformat(code, terms.args, _FormatNames(terms))
    assert code is not None  # EXPRESSIONS' condition
    return code(terms)


#: The C expression of each op in a fused kernel: `write(node, terms) -> expression`.
EXPRESSIONS: OpTable[Callable[[Node, CTerms], str]] = OpTable("fused C expression")
EXPRESSIONS.register(Node, when=lambda op_class: c_code(op_class) is not None)(
    declared_expression)


@EXPRESSIONS.register(core.Power)
def _power(node: Node, terms: CTerms) -> str:
    """x ** 2 as x * x: exact, and far faster than pow."""
    exponent = node.inputs[1]
    if is_scalar_constant(exponent) and float(exponent.attributes["value"]) == 2.0:
        (a, _) = terms.args
        return f"({a} * {a})"
    return declared_expression(node, terms)


#: How far back `sign` looks through a value's producers.
SIGN_DEPTH = 8


def sign(node: Node, depth: int = SIGN_DEPTH) -> int:
    """1 if `node`'s values are never negative, -1 if never positive, 0 if unknown (NaN
    aside: a NaN stays NaN in any case). From scalar constants and the ops that fix a sign
    (x * x, |x|, e^x, sqrt x, -x, and products of known signs)."""
    if depth == 0:
        return 0
    if is_scalar_constant(node):
        value = float(node.attributes["value"])
        return 1 if value >= 0 else -1 if value <= 0 else 0
    if isinstance(node, core.Broadcast):
        return sign(node.inputs[0], depth - 1)
    if isinstance(node, (core.Abs, core.Exp, core.Sqrt)):
        return 1
    if isinstance(node, core.Negative):
        return -sign(node.inputs[0], depth - 1)
    if isinstance(node, core.Multiply):
        a, b = node.inputs
        if a is b:
            return 1
        return sign(a, depth - 1) * sign(b, depth - 1)
    if isinstance(node, core.Power) and is_scalar_constant(node.inputs[1]):
        exponent = float(node.inputs[1].attributes["value"])
        if exponent % 2 == 0:
            return 1
    return 0


@EXPRESSIONS.register(core.Exp)
def _exp(node: Node, terms: CTerms) -> str:
    """e^x of an argument never positive (GELU's e^(-x^2 / 2)) by exp_nonpositive: the same
    values in fewer instructions (the erf GELU's gradient 10 % faster)."""
    if sign(node.inputs[0]) < 0:
        return f"{terms.math('exp_nonpositive')}({terms.args[0]})"
    return declared_expression(node, terms)


@EXPRESSIONS.register(core.Convert)
def _convert(node: Node, terms: CTerms) -> str:
    """A 64-bit integer to a float by the kernels' own conversion, which vectorizes (a C
    cast does not before AVX-512DQ); anything else as the op declares."""
    source = node.inputs[0].element_type.name
    if node.element_type.is_float and source in ("i64", "u64"):
        return f"{terms.math('from_' + source)}({terms.args[0]})"
    return declared_expression(node, terms)


def has_code(group: FusedGroup) -> bool:
    """Whether the C engine has an expression for every computing member of `group`, and
    its reduction (if any) declares how C accumulates it (`c_accumulate`, `c_start`)."""
    if group.row_dims:  # Sums and Broadcasts are the kernel's own loops and reads
        return all(EXPRESSIONS.lookup(type(node)) is not None for node in group.nodes
                   if op_family(node) not in ("constant", "broadcast")
                   and not isinstance(node, (core.Sum, core.Broadcast)))
    reduction = group.reduction
    if reduction is not None and (type(reduction).c_accumulate is None
                                  or type(reduction).c_start is None):
        return False
    return all(EXPRESSIONS.lookup(type(node)) is not None for node in group.elementwise_nodes
               if op_family(node) not in ("constant", "broadcast"))


#: A statement of an element's code, `const float v3 = ...;`, and the names in C text.
_DEFINITION = re.compile(r"const \w+ (\w+) = ")
_NAME = re.compile(r"[A-Za-z_]\w*")


@dataclass
class _Emitter:
    """Walks a group's members and writes the C statements of one element."""

    group: FusedGroup
    scalar_inputs: FrozenSet[int]        # input positions read as one element (broadcast)
    vector_math: FrozenSet[str]

    def __post_init__(self) -> None:
        indexed = indexed_inputs(self.group)
        self.values: Dict[Node, str] = {}
        self.hoisted: List[str] = []      # before the loop
        self.body: List[str] = []         # per element
        self.pointers: List[str] = []
        self.used_math: set = set()
        for j, node in enumerate(self.group.inputs):
            ctype = CTYPES[node.element_type.name]
            if is_scalar_constant(node):
                self.values[node] = c_literal(node.attributes["value"], node.element_type)
                continue
            self.pointers.append(f"const {ctype}* in{j} = (const {ctype}*)p[{j}];")
            value_type = VALUE_CTYPES[node.element_type.name]
            if j in self.scalar_inputs:
                self.hoisted.append(f"const {value_type} s{j} = in{j}[0];")
                self.values[node] = f"s{j}"
            elif j in indexed:
                self.body.append(f"const {value_type} x{j} = in{j}[i];")
                self.values[node] = f"x{j}"
        self.readers: Dict[Node, int] = {self.group.elementwise_output: 1}
        for node in self.group.elementwise_nodes:
            for x in node.inputs:
                self.readers[x] = self.readers.get(x, 0) + 1
        self.quotients: Dict[Node, Tuple[str, str]] = {}
        for k, node in enumerate(self.group.elementwise_nodes):
            self._member(k, node)
        self._drop_unread()

    def _drop_unread(self) -> None:
        """Drop the statements nothing reads (a value a Multiply took as a quotient), and
        the functions only they called, so the kernel text shows what is computed."""
        needed = set(_NAME.findall(self.values[self.group.elementwise_output]))
        kept: List[str] = []
        for line in reversed(self.body):
            defined = _DEFINITION.match(line)
            if defined is None or defined.group(1) in needed:
                kept.append(line)
                needed.update(_NAME.findall(line[defined.end() if defined else 0:]))
        self.body = kept[::-1]
        called = set(_NAME.findall(" ".join(self.body + self.hoisted)))
        self.used_math = {name for name in self.used_math
                          if name in called or f"axgraph_{name}" in called}

    def _scalar_of(self, x: Node) -> str:
        """One element of a Broadcast's (size-1) input."""
        if is_scalar_constant(x):
            return c_literal(x.attributes["value"], x.element_type)
        j = self.group.inputs.index(x)
        if j not in self.scalar_inputs:
            name = f"b{j}"
            line = f"const {VALUE_CTYPES[x.element_type.name]} {name} = in{j}[0];"
            if line not in self.hoisted:
                self.hoisted.append(line)
            return name
        return f"s{j}"

    def _math(self, name: str, et: core.ElementType) -> str:
        full = name + ("f" if et.name == "f32" else "")
        self.used_math.add(full)
        return f"axgraph_{full}" if full in own_math.OWN_FUNCTIONS else full

    def quotient(self, node: Node) -> Optional[Tuple[str, str]]:
        """`node`'s value as (numerator, denominator), if its op has that form and one
        reader (else the division is shared, and a second one would cost more)."""
        write = c_quotient(type(node))
        if write is None or self.readers.get(node) != 1 or node not in self.group.nodes:
            return None
        if node not in self.quotients:
            name = self.values[node] + "q"
            terms = CTerms(self, node, [self.values[x] for x in node.inputs], name)
            self.quotients[node] = write(terms)
        return self.quotients[node]

    def _member(self, k: int, node: Node) -> None:
        family = op_family(node)
        et = node.element_type
        if family == "constant":
            self.values[node] = c_literal(node.attributes["value"], et)
            return
        if family == "broadcast":
            self.values[node] = self._scalar_of(node.inputs[0])
            return
        write = EXPRESSIONS.lookup(type(node))
        if write is None:
            raise KernelCompileError(f"the C engine has no code for {node.op}")
        name = f"v{k}"
        terms = CTerms(self, node, [self.values[x] for x in node.inputs], name)
        self.body.append(f"const {terms.ctype} {name} = {write(node, terms)};")
        self.values[node] = name

    def declarations(self) -> List[str]:
        """`omp declare simd` for the library functions used that libmvec vectorizes, and
        the code of the functions the kernel brings itself, each under a comment."""
        own, library = own_math.closure(self.used_math)
        declared = _declarations([name for name in library if name in self.vector_math])
        lines = []
        if declared:
            lines += ["/* vector variants from libmvec (glibc declares them only under "
                      "-ffast-math) */", declared, ""]
        if own:
            lines += ["/* the kernels' own math (axgraph/transformers/cpu/own_math.py) */",
                      *(own_math.OWN_FUNCTIONS[name].code for name in own), ""]
        return lines


def parallel_min(emitter: "_Emitter") -> int:
    """The elements from which the kernel `emitter` writes runs on several threads: fewer for a
    row kernel or one calling costly math (`HEAVY_PARALLEL_MIN`), else `PARALLEL_MIN`. Called
    once the kernel's math is known (after its element code and its rows' passes). A
    normalization's passes (`_passes_source`) count as elementwise work: on 2 cores its
    kernel over 16K to 256K floats ran 1.1-2x slower on two threads than on one (the
    other core's thread woken per call; measured while other jobs shared the machine)."""
    costly = any(name.removesuffix("f") not in CHEAP_MATH and name not in CHEAP_MATH
                 for name in emitter.used_math)
    return HEAVY_PARALLEL_MIN if costly or emitter.group.row is not None else PARALLEL_MIN


def indexed_inputs(group: FusedGroup) -> FrozenSet[int]:
    """Positions of the inputs read per element (the rest are literals or Broadcast scalars)."""
    indexed = set()
    for j, x in enumerate(group.inputs):
        if is_scalar_constant(x):
            continue
        if group.final is not None and x is group.elementwise_output:
            indexed.add(j)
        elif group.row is not None and x in group.row.inputs:  # a backprop's y
            indexed.add(j)
        elif any(x in m.inputs for m in group.elementwise_nodes if op_family(m) != "broadcast"):
            indexed.add(j)
    return frozenset(indexed)


def _indent(lines: Sequence[str], depth: int) -> str:
    """Lines indented `depth` levels, but for conditional directives (`#if`), which stay at
    the margin."""
    return "".join(("" if line.startswith(("#if", "#else", "#endif")) else "    " * depth)
                   + line + "\n" for line in lines)


def _elementwise_entry(emitter: "_Emitter", result: str, out_type: str) -> str:
    """The entry of an elementwise group: one contiguous run of the output per thread,
    written straight into out; or, for a call too large to stay in the caches (x86 only),
    walked in tiles that are computed on the stack and streamed out."""
    group = emitter.group
    k = len(group.inputs)
    item = np.dtype(group.output.element_type.dtype).itemsize
    tile = STREAM_TILE_BYTES // item
    traffic = item + sum(np.dtype(group.inputs[j].element_type.dtype).itemsize
                         for j in indexed_inputs(group) if j not in emitter.scalar_inputs)
    start = [
        "#ifdef AXGRAPH_STREAM",
        f"const int stream = n >= {stream_min_elements(traffic)} "
        "&& (uintptr_t)out % sizeof(*out) == 0;",
        "#else",
        "const int stream = 0;",
        "#endif",
        "/* a streamed out: elements before its first 32-byte boundary are a tile of their own */",
        "const int64_t head = stream ? (int64_t)((32 - (uintptr_t)out % 32) % 32 / sizeof(*out))"
        " : 0;",
        f"#pragma omp parallel if(n >= {parallel_min(emitter)})",
        "{",
        "#ifdef _OPENMP",
        "    const int64_t threads = omp_get_num_threads(), me = omp_get_thread_num();",
        "#else",
        "    const int64_t threads = 1, me = 0;",
        "#endif",
        "    /* one contiguous run per thread, of whole tiles (streaming) or whole cache lines */",
        f"    const int64_t grain = stream ? {tile} : 64;",
        "    const int64_t per = (n - head + threads * grain - 1) / (threads * grain) * grain;",
        "    const int64_t start = me == 0 ? 0 : head + me * per;",
        "    const int64_t stop = n - head - me * per > per ? head + (me + 1) * per : n;",
        f"    _Alignas(64) {out_type} tile[{tile}];",
        "    for (int64_t lo = start, hi; lo < stop; lo = hi) {",
        "        hi = lo < head ? head : (stop - lo > grain && stream ? lo + grain : stop);",
        f"        {out_type}* const to = stream ? tile : out;",
        "        const int64_t base = stream ? lo : 0;",
        "        #pragma omp simd",
        "        for (int64_t i = lo; i < hi; ++i) {"]
    end = [
        "        }",
        "#ifdef AXGRAPH_STREAM",
        "        /* whole tiles skip the caches: such stores need no read of out's lines */",
        f"        if (stream && hi - lo == {tile}) axgraph_stream(out + lo, tile, sizeof tile);",
        "        else if (stream) memcpy(out + lo, tile, (size_t)(hi - lo) * sizeof(*out));",
        "#endif",
        "    }",
        "#ifdef AXGRAPH_STREAM",
        "    if (stream) axgraph_fence();",
        "#endif",
        "}",
        "return 0;"]
    return (f"int {ENTRY}(int64_t n, int64_t inner, void* const* p)\n{{\n"
            + _indent(emitter.pointers + [f"{out_type}* out = ({out_type}*)p[{k}];"]
                      + emitter.hoisted + ["(void)inner;"] + start, 1)
            + _indent(emitter.body + [f"to[i - base] = {result};"], 4)
            + _indent(end, 1) + "}\n")


def _row_entry(emitter: "_Emitter", result: str) -> str:
    """The entry of a group ending in a row op: each row of the trailing dims (one per
    thread at a time) computed in three passes over `out`'s row, which stays in cache.

    The elementwise values are computed once, into the row of out, as the first
    pass reduces them (max, or the sum of a backprop); the second pass takes
    exp and sums (softmax) or the last pass writes the result. Sums are in the
    element type, over as many partial sums as the vectors have lanes (a
    double accumulator cost a fifth more on rows of 128 floats). The inputs'
    pointers are read once, before the rows: read in the first pass (through a
    helper taking `p`), gcc reloaded them per element and gathered the
    elements one by one (softmax over 1024 rows of 32 took twice as long).
    """
    group = emitter.group
    row = group.row
    assert row is not None  # called for row groups only
    et = row.element_type
    value, k = CTYPES[et.name], len(group.inputs)
    lines = [*emitter.pointers, *emitter.hoisted, f"{value}* out = ({value}*)p[{k}];"]
    y = y_first = ""
    if isinstance(row, core.SoftmaxBackprop):
        j = group.inputs.index(row.inputs[1])
        lines.append(f"const {value}* yp = (const {value}*)p[{j}];")
        scalar = j in emitter.scalar_inputs
        y, y_first = ("yp[0]", "yp[0]") if scalar else ("yp[base + i]", "yp[i]")

    def first_pass(reduce: str) -> List[str]:
        """The loop computing the row's elementwise values into o (i runs over the whole
        array's positions, as the element code reads them), reducing each by `reduce`."""
        return ["for (int64_t i = base; i < base + inner; ++i) {",
                *("    " + line for line in emitter.body),
                f"    const {value} v = {result};",
                f"    o[i - base] = v; {reduce}",
                "}"]

    if isinstance(row, core.Softmax):
        # x - max(x) <= 0 (or NaN): the cheaper exp of non-positive arguments
        exp_shifted = emitter._math("exp_nonpositive", et)
        if group.guard:  # whether the row has a value other than -inf (a NaN is one)
            passes = [f"{value} m = -INFINITY;", "int live = 0;",
                      "#pragma omp simd reduction(max:m) reduction(|:live)",
                      *first_pass("m = v > m ? v : m; live |= v != -INFINITY;"),
                      f"{value} s = 0;"]
        else:
            passes = [f"{value} m = -INFINITY;", "#pragma omp simd reduction(max:m)",
                      *first_pass("m = v > m ? v : m;"), f"{value} s = 0;"]
        if isinstance(row, core.LogSoftmax):
            log = emitter._math("log", et)
            passes += [
                "#pragma omp simd reduction(+:s)",
                f"for (int64_t i = 0; i < inner; ++i) s += {exp_shifted}(o[i] - m);",
                f"const {value} ls = {log}(s);",
                "#pragma omp simd",
                "for (int64_t i = 0; i < inner; ++i) o[i] = (o[i] - m) - ls;"]
        else:
            passes += [
                "#pragma omp simd reduction(+:s)",
                f"for (int64_t i = 0; i < inner; ++i) {{ const {value} e = {exp_shifted}(o[i] - m); "
                f"o[i] = e; s += e; }}",
                "#pragma omp simd",
                "for (int64_t i = 0; i < inner; ++i) o[i] = o[i] / s;"]
    else:
        of_log = isinstance(row, core.LogSoftmaxBackprop)
        first = "v" if of_log else "v * " + y_first
        last = (f"o[i] - {emitter._math('exp', et)}({y}) * s" if of_log
                else f"{y} * (o[i] - s)")
        passes = [
            f"{value} s = 0;",
            "#pragma omp simd reduction(+:s)",
            *first_pass(f"s += {first};"),
            "#pragma omp simd",
            f"for (int64_t i = 0; i < inner; ++i) o[i] = {last};"]
    fill = group.row_fill
    if fill is not None:  # the guard's Select: a row of nothing but -inf is the fill
        passes += ["if (!live)",
                   f"    for (int64_t i = 0; i < inner; ++i) o[i] = "
                   f"{c_literal(fill.attributes['value'], et)};"]
    lines += [
        f"#pragma omp parallel for schedule(static) if(outer * inner >= "
        f"{parallel_min(emitter)})",
        "for (int64_t r = 0; r < outer; ++r) {",
        "    const int64_t base = r * inner;",
        f"    {value}* const o = out + base;",
        *("    " + line for line in passes),
        "}",
        "return 0;"]
    return f"int {ENTRY}(int64_t outer, int64_t inner, void* const* p)\n{{\n" + _indent(lines, 1) + "}\n"


def generate_source(group: FusedGroup, scalar_inputs: FrozenSet[int] = frozenset(),
                    vector_math: FrozenSet[str] = frozenset()) -> str:
    """The C text of a group's kernel (independent of sizes, which are call arguments).

    The text depends only on the group's structure (ops, types, constants)
    and this machine's last-level cache size (where streaming starts), never
    on node names, so equal kernels share one cache entry across programs
    and processes. `scalar_inputs` marks inputs that are read as a
    single repeated element (broadcast arrays with zero strides).
    """
    if group.row_dims:
        return _passes_source(group, vector_math)
    emitter = _Emitter(group, scalar_inputs, vector_math)
    result = emitter.values[group.elementwise_output]
    k = len(group.inputs)
    ops = " ".join(f"{n.op}:{n.element_type}" for n in group.nodes)
    head = ["/* axgraph fused kernel: " + ops + " */",
            "#include <stdint.h>", "#include <stdlib.h>", "#include <string.h>",
            "#include <math.h>", "#ifdef _OPENMP", "#include <omp.h>", "#endif", ""]
    rows = _row_entry(emitter, result) if group.row is not None else ""  # adds its math
    head += emitter.declarations()
    if group.final is None:
        head += [STREAM_SUPPORT, ""]
    text = "\n".join(head) + "\n"
    if rows:
        return text + rows
    out_type = CTYPES[group.output.element_type.name]
    if group.reduction is None:
        return text + _elementwise_entry(emitter, result, out_type)
    reduction = type(group.reduction)
    step = reduction.c_accumulate  # has_code checked that it declares one
    assert step is not None

    def accumulate(acc: str, x: str) -> str:
        return f"{acc} = {step.format(acc=acc, x=x)};"

    element = CTYPES[group.elementwise_output.element_type.name]
    value = VALUE_CTYPES[group.elementwise_output.element_type.name]
    if reduction.wide_accumulator:
        acc_type, widen, first = "double", "(double)", "chunked"
        start = [
            "double acc[LANES];",
            f"for (int k = 0; k < LANES; ++k) acc[k] = {reduction.c_start};",
            "/* CHUNK elements a lane are accumulated in the element type first (for float",
            "   half the work of widening each to double; 15 roundings of float at most),",
            "   then taken into the lane's double */",
            "const int64_t chunked = lo + (hi - lo) / (LANES * CHUNK) * (LANES * CHUNK);",
            "for (int64_t chunk = lo; chunk < chunked; chunk += LANES * CHUNK) {",
            f"    {value} part[LANES];",
            f"    for (int k = 0; k < LANES; ++k) part[k] = {reduction.c_start};",
            "    for (int64_t i = chunk; i < chunk + LANES * CHUNK; i += LANES) {",
            "        #pragma omp simd",
            f"        for (int k = 0; k < LANES; ++k) {{ const {value} r = "
            f"axgraph_element(i + k, p); {accumulate('part[k]', 'r')} }}",
            "    }",
            "    #pragma omp simd",
            f"    for (int k = 0; k < LANES; ++k) {accumulate('acc[k]', '(double)part[k]')}",
            "}"]
    else:
        acc_type, widen, first = element, "", "lo"
        start = [f"{element} acc[LANES];",
                 f"for (int k = 0; k < LANES; ++k) acc[k] = {reduction.c_start};"]

    def fold(at: str) -> str:
        return (f"{{ const {value} r = axgraph_element({at}, p); "
                f"{accumulate('acc[k]', widen + 'r')} }}")

    pair = accumulate("acc[k]", "acc[k + w]")
    combine = accumulate("acc", "part[b]")
    text += (f"static inline {value} axgraph_element(int64_t i, void* const* p)\n{{\n"
             + _indent(emitter.pointers + emitter.hoisted + emitter.body
                       + [f"return {result};"], 1) + "}\n\n")
    text += (f"#define LANES {LANES}\n#define CHUNK {CHUNK}\n"
             f"static inline {acc_type} block(int64_t lo, int64_t hi, void* const* p)\n{{\n"
             + _indent([
                 "/* LANES partial results side by side: independent chains of vector operations",
                 "   (one chain is latency-bound on wide cores), combined in an order that",
                 "   depends on LANES and CHUNK, not on the target's vector width */",
                 *start,
                 f"const int64_t whole = {first} + (hi - {first}) / LANES * LANES;",
                 f"for (int64_t i = {first}; i < whole; i += LANES) {{",
                 "    #pragma omp simd",
                 "    for (int k = 0; k < LANES; ++k) " + fold("i + k"),
                 "}",
                 "#pragma omp simd",
                 "for (int64_t k = 0; k < hi - whole; ++k) " + fold("whole + k"),
                 "for (int w = LANES / 2; w >= 1; w /= 2)",
                 f"    for (int k = 0; k < w; ++k) {pair}",
                 "return acc[0];"], 1) + "}\n\n")
    text += (f"int {ENTRY}(int64_t outer, int64_t inner, void* const* p)\n{{\n"
             + _indent([
                 f"{out_type}* out = ({out_type}*)p[{k}];",
                 f"if (inner <= {BLOCK}) {{",
                 f"    #pragma omp parallel for schedule(static) if(outer * inner >= "
                 f"{parallel_min(emitter)})",
                 "    for (int64_t r = 0; r < outer; ++r)",
                 f"        out[r] = ({out_type})block(r * inner, r * inner + inner, p);",
                 "    return 0;",
                 "}",
                 "/* long rows: fixed blocks in parallel, combined in order (deterministic) */",
                 f"const int64_t nb = (inner + {BLOCK} - 1) / {BLOCK};",
                 f"{acc_type}* part = ({acc_type}*)malloc((size_t)nb * sizeof({acc_type}));",
                 "if (!part) return -1;",
                 "for (int64_t r = 0; r < outer; ++r) {",
                 "    const int64_t base = r * inner;",
                 "    #pragma omp parallel for schedule(static)",
                 "    for (int64_t b = 0; b < nb; ++b) {",
                 f"        const int64_t lo = base + b * {BLOCK};",
                 f"        const int64_t hi = (b + 1 == nb) ? base + inner : lo + {BLOCK};",
                 "        part[b] = block(lo, hi, p);",
                 "    }",
                 f"    {acc_type} acc = part[0];",
                 f"    for (int64_t b = 1; b < nb; ++b) {combine}",
                 f"    out[r] = ({out_type})acc;",
                 "}",
                 "free(part);",
                 "return 0;"], 1)
             + "}\n")
    return text


# -- multi-pass row groups (normalizations) ------------------------------------------------

def _needed(lines: Sequence[str], expressions: Sequence[str]) -> List[str]:
    """The statements of `lines` that the C `expressions` read, directly or not."""
    needed = set(_NAME.findall(" ".join(expressions)))
    kept: List[str] = []
    for line in reversed(lines):
        defined = _DEFINITION.match(line)
        if defined is None or defined.group(1) in needed:
            kept.append(line)
            needed.update(_NAME.findall(line[defined.end() if defined else 0:]))
    return kept[::-1]


class _PassEmitter(_Emitter):
    """The C statements of a multi-pass row group (`FusedGroup.row_dims`).

    Each member is an element (of the output's shape: statements in `body`, run
    inside a pass over the row) or a row value (statements in `row_code[level]`,
    run once per row between passes). A Sum over the row at level p is made by
    pass p; a row value of level p is computed once pass p is done; an element
    reads the row values it needs (Broadcasts over the row) from variables. The
    inputs are read per element (`in[i]`), per row (`in[r]`) or per column of
    the row (`in[i - base]`), as their readers take them.
    """

    def __post_init__(self) -> None:
        group = self.group
        self.values: Dict[Node, str] = {}
        self.hoisted: List[str] = []
        self.body: List[str] = []
        self.pointers: List[str] = []
        self.used_math: set = set()
        self.quotients: Dict[Node, Tuple[str, str]] = {}
        self.row_code: Dict[int, List[str]] = {0: []}
        self.level: Dict[Node, int] = {}
        self.sums: Dict[int, List[Node]] = {}
        members = set(group.nodes)
        self.readers: Dict[Node, int] = {node: 1 for node in group.outputs}
        for node in group.nodes:
            for x in node.inputs:
                self.readers[x] = self.readers.get(x, 0) + 1
        self._read: Dict[Tuple[int, str], str] = {}
        for j, node in enumerate(group.inputs):
            if is_scalar_constant(node):
                self.values[node] = c_literal(node.attributes["value"], node.element_type)
                self.level[node] = 0
                continue
            ctype = CTYPES[node.element_type.name]
            self.pointers.append(f"const {ctype}* in{j} = (const {ctype}*)p[{j}];")
            self.level[node] = 0
        rank = group.output.rank
        for k, node in enumerate(group.nodes):
            family = op_family(node)
            is_row = node.rank == rank - group.row_dims and node.shape != group.output.shape
            if isinstance(node, core.Sum):
                (x,) = node.inputs
                if x not in members:
                    self.values[x] = self._input(x, "x", "in{j}[i]")
                self.level[node] = self.level[x] + 1
                self.sums.setdefault(self.level[node], []).append(node)
                self.values[node] = f"v{k}"
                self.row_code.setdefault(self.level[node], []).append(
                    f"const {VALUE_CTYPES[node.element_type.name]} v{k} = "
                    f"({VALUE_CTYPES[node.element_type.name]})s{k};")
                continue
            if isinstance(node, core.Broadcast) and not is_scalar_constant(node.inputs[0]):
                (x,) = node.inputs
                self.level[node] = self.level[x]
                if tuple(sorted(node.attributes["axes"]))[0] == 0:  # per column of a row
                    self.values[node] = self._input(x, "c", "in{j}[i - base]")
                else:  # one value a row
                    self.values[node] = self._row_value(x)
                continue
            self.level[node] = max((self.level[x] for x in node.inputs), default=0)
            if family in ("constant", "broadcast"):
                self._member(k, node)
                continue
            for x in node.inputs:  # the inputs it reads, as it reads them
                if x not in members and not is_scalar_constant(x):
                    self.values[x] = (self._row_value(x) if is_row
                                      else self._input(x, "x", "in{j}[i]"))
            if is_row:
                self.body, saved = self.row_code.setdefault(self.level[node], []), self.body
                self._member(k, node)
                self.body = saved
            else:
                self._member(k, node)

    def _input(self, x: Node, prefix: str, index: str) -> str:
        """An input read in the element code: its name, its read put in `body` once."""
        j = self.group.inputs.index(x)
        key = (j, prefix)
        if key not in self._read:
            name = self._read[key] = f"{prefix}{j}"
            self.body.append(f"const {VALUE_CTYPES[x.element_type.name]} {name} = "
                             f"{index.format(j=j)};")
        return self._read[key]

    def _row_value(self, x: Node) -> str:
        """A row value's name: a member's, or an input read once per row."""
        if x in self.group.nodes or is_scalar_constant(x):
            return self.values[x]
        j = self.group.inputs.index(x)
        key = (j, "q")
        if key not in self._read:
            name = self._read[key] = f"q{j}"
            self.row_code[0].append(f"const {VALUE_CTYPES[x.element_type.name]} {name} = "
                                    f"in{j}[r];")
        return self._read[key]


def _passes_source(group: FusedGroup, vector_math: FrozenSet[str]) -> str:
    """The C text of a multi-pass row group: per row (rows spread over the threads), a
    pass over the row for each level of its row Sums, the row values computed between
    passes, and a last pass writing the output; the extras are written per row.

    A row sum adds ROW_CHUNK elements at a time in the element type, across the
    vector's lanes (at most ROW_CHUNK / lanes additions in each: 16 on AVX-512, 32 on
    AVX2), and the chunks' sums in double, rounded to the element type once: another
    order than NumPy's pairwise sum, about as accurate. (Summing in double throughout
    cost a quarter more on a layer norm of rows of 64 floats.)
    """
    emitter = _PassEmitter(group, frozenset(), vector_math)
    k = len(group.inputs)
    et = group.output.element_type
    value = CTYPES[et.name]
    passes: List[str] = []
    for level in range(1, max(emitter.sums) + 1):
        sums = emitter.sums.get(level, [])
        if sums:
            totals = [f"s{emitter.values[node][1:]}" for node in sums]
            parts = [f"t{emitter.values[node][1:]}" for node in sums]
            terms = [emitter.values[node.inputs[0]] for node in sums]
            types = [VALUE_CTYPES[node.element_type.name] for node in sums]
            passes += [*(f"double {total} = 0;" for total in totals),
                       f"for (int64_t lo = base; lo < base + inner; lo += {ROW_CHUNK}) {{",
                       f"    const int64_t hi = base + inner - lo > {ROW_CHUNK} ? "
                       f"lo + {ROW_CHUNK} : base + inner;",
                       *(f"    {ctype} {part} = 0;" for ctype, part in zip(types, parts)),
                       f"    #pragma omp simd reduction(+:{', '.join(parts)})",
                       "    for (int64_t i = lo; i < hi; ++i) {",
                       *("        " + line for line in _needed(emitter.body, terms)),
                       *(f"        {part} += {term};" for part, term in zip(parts, terms)),
                       "    }",
                       *(f"    {total} += {part};" for total, part in zip(totals, parts)),
                       "}"]
        passes += emitter.row_code.get(level, [])
    result = emitter.values[group.output]
    passes += ["#pragma omp simd",
               "for (int64_t i = base; i < base + inner; ++i) {",
               *("    " + line for line in _needed(emitter.body, [result])),
               f"    out[i] = {result};",
               "}"]
    outputs = [f"{value}* out = ({value}*)p[{k}];"]
    for m, extra in enumerate(group.extras, 1):
        ctype = CTYPES[extra.element_type.name]
        outputs.append(f"{ctype}* out{m} = ({ctype}*)p[{k + m}];")
        passes.append(f"out{m}[r] = ({ctype}){emitter.values[extra]};")
    ops = " ".join(f"{n.op}:{n.element_type}" for n in group.nodes)
    head = ["/* axgraph fused kernel (row passes): " + ops + " */",
            "#include <stdint.h>", "#include <math.h>", ""]
    lines = [*emitter.pointers, *emitter.hoisted, *outputs,
             f"#pragma omp parallel for schedule(static) if(outer * inner >= "
             f"{parallel_min(emitter)})",
             "for (int64_t r = 0; r < outer; ++r) {",
             "    const int64_t base = r * inner;",
             *("    " + line for line in emitter.row_code[0] + passes),
             "}",
             "return 0;"]
    head += emitter.declarations()
    return ("\n".join(head) + "\n" + f"int {ENTRY}(int64_t outer, int64_t inner, void* const* p)"
            f"\n{{\n" + _indent(lines, 1) + "}\n")


# -- the kernel ------------------------------------------------------------------------------

def address(array: np.ndarray) -> int:
    """The address of `array`'s first element: through the buffer protocol where the array
    is dense and writeable, or the transpose of such an array (whose first element is the
    dense one's: a product's transposed operand), 0.15 us; else NumPy's way
    (`array.ctypes.data` builds an object of NumPy's for it, 0.7 us, and a kernel call
    takes three or so)."""
    flags = array.flags
    if flags.writeable and array.nbytes:
        if flags.c_contiguous:
            return ctypes.addressof(ctypes.c_char.from_buffer(array.data))
        if flags.f_contiguous:
            return ctypes.addressof(ctypes.c_char.from_buffer(array.T.data))
    return array.ctypes.data


class CKernel:
    """A compiled fused group: `kernel(*inputs, out=array)` writes the output into `out`.

    Inputs may be any layout: C-contiguous arrays are read in place, arrays
    broadcast with all-zero strides are read as one element (a variant
    kernel, built on first use), anything else is copied contiguous first.
    An elementwise group's `out` may be a transposed dense array: every
    operand is then walked in its memory order. `out` may be exactly one of
    the inputs (elementwise groups read each element before writing it);
    partial overlaps are resolved by copying.
    """

    engine = "c"

    def __init__(self, group: FusedGroup, shapes: Mapping[Node, Tuple[int, ...]],
                 fast_math: bool = False, bindings: Optional[Mapping[str, int]] = None):
        if not c_accepts(group):
            raise KernelCompileError(f"the C engine computes f32, f64 and boolean values only "
                                     f"(integers only converted to them): {group!r}")
        if not has_code(group):
            raise KernelCompileError(f"an op of {group!r} declares no C expression")
        chain = toolchain()
        if chain is None:
            raise KernelCompileError("no working C compiler found (set $AXGRAPH_CC or $CC, or "
                                     "install cc/gcc/clang)")
        self.group = group
        self.fast_math = fast_math
        self._chain = chain
        _, self.out_shape, self.outer, self.inner = group_shapes(group, shapes)
        self.in_shapes = [concrete_shape(x, shapes) for x in group.inputs]
        self.extra_shapes = [concrete_shape(x, shapes) for x in group.extras]
        self._bindings = bindings
        #: (shape, dtype) of each input, the output and each extra: a call whose arrays are
        #: all plain arrays of these skips the general checks (`check_call`).
        self._expected = [(tuple(shape), np.dtype(node.element_type.dtype)) for shape, node in
                          zip([*self.in_shapes, self.out_shape, *self.extra_shapes],
                              [*group.inputs, group.output, *group.extras])]
        self._pointers_type = ctypes.c_void_p * len(self._expected)
        #: The last call's arrays (weakly), their addresses, and the outputs' byte spans
        #: (`_call_rows`): an ndarray's data never moves.
        self._seen: List[Callable[[], Optional[np.ndarray]]] = []
        self._addresses: ctypes.Array = self._pointers_type()
        self._spans: List[Tuple[int, int]] = []
        self._indexed = indexed_inputs(group)
        self._variants: Dict[FrozenSet[int], Callable[..., int]] = {}
        self.source = generate_source(group, frozenset(), chain.vector_math)
        self.path = self._build(frozenset(), self.source)

    def _build(self, scalars: FrozenSet[int], source: Optional[str] = None) -> Path:
        source = source or generate_source(self.group, scalars, self._chain.vector_math)
        library = build(source, self._chain, self.fast_math)
        self._variants[scalars] = entry(library)
        return library.path

    def vector_math_calls(self) -> List[str]:
        """Vector-math symbols (`_ZGV...`) the built kernel calls, read with objdump."""
        objdump = shutil.which("objdump")
        if objdump is None:
            return []
        run = subprocess.run([objdump, "-d", str(self.path)], capture_output=True, text=True)
        names = {word.strip("<>@:") for line in run.stdout.splitlines() if "_ZGV" in line
                 for word in line.split() if "_ZGV" in word}
        return sorted({name.split("@")[0] for name in names})

    def _call_rows(self, arrays: Sequence[np.ndarray], out: np.ndarray,
                   extras: Sequence[np.ndarray]) -> np.ndarray:
        """A multi-pass row group's call: every array read in place where C-contiguous and
        apart from the outputs (an input may be `out` itself: each row's elements are
        read before they are written), else copied.

        The checks and addresses cost 5 to 7 us of Python, more than the kernel itself
        on a layer norm of 16K floats; so the kernel remembers the arrays of its last
        call (weakly) and their addresses. The same outputs again, and each input the
        same array or a plain array of its shape and type, C-contiguous and apart from
        the outputs, reuse them (2 us); any other call is checked in full.
        """
        given = (*arrays, out, *extras)
        seen, addresses = self._seen, self._addresses
        if len(given) == len(seen):
            inputs = len(arrays)
            for j in range(inputs, len(given)):  # the outputs: the same arrays
                if seen[j]() is not given[j]:
                    break
            else:
                for j in range(inputs):
                    a = given[j]
                    if seen[j]() is a:
                        continue
                    shape, dtype = self._expected[j]
                    if type(a) is not np.ndarray or a.shape != shape or a.dtype != dtype or \
                            not a.flags.c_contiguous:
                        break
                    start = address(a)
                    end = start + a.nbytes
                    if any(start < hi and lo < end for lo, hi in self._spans):
                        break
                    addresses[j] = start
                    seen[j] = weakref.ref(a)
                else:
                    return self._run_rows(addresses, out)
        return self._call_rows_checked(arrays, out, extras)

    def _run_rows(self, addresses, out: np.ndarray) -> np.ndarray:
        status = self._variants[frozenset()](self.outer, self.inner, addresses)
        if status != 0:
            raise ExecutionError(f"fused C kernel failed (status {status})")
        return out

    def _call_rows_checked(self, arrays: Sequence[np.ndarray], out: np.ndarray,
                           extras: Sequence[np.ndarray]) -> np.ndarray:
        """`_call_rows` with every check; remembers the arrays when all are used in place."""
        group = self.group
        arrays = check_call("fused C kernel", group, self.in_shapes, self.out_shape, arrays, out)
        check_extras("fused C kernel", group, self.extra_shapes, extras)
        if not self.outer * self.inner:  # no elements: the reference's values (NaN means)
            from .rows import PassesNumpyKernel
            return PassesNumpyKernel(group, {}, self._bindings)(*arrays, out=out,
                                                               extras=extras)
        written = [address(a) for a in (out, *extras)]
        spans = [(lo, lo + a.nbytes) for lo, a in zip(written, (out, *extras))]
        pointers: List[int] = []
        keep: List[np.ndarray] = []
        for j, array in enumerate(arrays):
            indexed = j in self._indexed
            if indexed and not array.flags.c_contiguous:
                array = np.ascontiguousarray(array)
            start = address(array)
            if indexed:
                end = start + array.nbytes
                for lo, hi in spans:
                    if start < hi and lo < end:
                        if not (start == written[0] and array.shape == out.shape
                                and array.dtype == out.dtype):
                            array = array.copy()
                            start = address(array)
                        break
            keep.append(array)
            pointers.append(start)
        addresses = self._pointers_type(*pointers, *written)
        if all(a is b for a, b in zip(keep, arrays)):
            self._seen = [weakref.ref(a) for a in (*arrays, out, *extras)]
            self._addresses, self._spans = addresses, spans
        else:
            self._seen = []
        return self._run_rows(addresses, out)

    def __call__(self, *arrays: np.ndarray, out: np.ndarray,
                 extras: Sequence[np.ndarray] = ()) -> np.ndarray:
        if self.group.row_dims:
            return self._call_rows(arrays, out, extras)
        given, group = out, self.group
        walked = prepare_call("fused C kernel", self, arrays, out)
        if walked is None:
            return out
        arrays, out = walked
        scalars = set()
        pointers: List[int] = []
        keep: List[np.ndarray] = []
        out_start = address(out)
        out_end = out_start + out.nbytes
        for j, array in enumerate(arrays):  # prepare_call returned ndarrays
            start = address(array)
            if j in self._indexed and array.size > 1:
                if not any(array.strides):
                    scalars.add(j)
                elif not array.flags.c_contiguous:
                    array = np.ascontiguousarray(array)
                    start = address(array)
                # the bytes it is read from (one element where broadcast) meet out's
                end = start + (array.itemsize if j in scalars else array.nbytes)
                if start < out_end and out_start < end and not (
                        group.final is None and j not in scalars and start == out_start):
                    array = array.copy()
                    start = address(array)
            # other inputs are read at element 0 (the data pointer) or not at all (literals)
            keep.append(array)
            pointers.append(start)
        pointers.append(out_start)
        key = frozenset(scalars)
        function = self._variants.get(key)
        if function is None:
            self._build(key)
            function = self._variants[key]
        status = function(self.outer, self.inner, (ctypes.c_void_p * len(pointers))(*pointers))
        if status != 0:
            raise ExecutionError(f"fused C kernel failed (status {status}): out of memory?")
        return given

    def __repr__(self) -> str:
        return f"<CKernel {self.group!r} {self.path.name}>"
