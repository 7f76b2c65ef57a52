"""erf over a million elements on every path that computes it, with its accuracy.

    python -m benchmarks.erf_kernels [--size 1000000] [--rounds 15] [--march x86-64-v3]

Candidates, timed interleaved (one call of each per round), best and median of the
rounds, and the largest error in ulp against math.erf (in the output's type):

  math.erf      the reference: math.erf per element (np.vectorize)
  numpy engine  runtime.erf: the vectorized float64 evaluation the NumPy engines call
  C native      the fused C kernel built for this CPU (float: the kernels' own erff)
  C <target>    the same built for each --march target (this CPU must run it)
  libmvec       float only: a loop calling glibc's vector erff, as the kernels did before
                their own (built natively and for each target)

The C kernels run on all cores (OpenMP); the others on one.
"""
from __future__ import annotations

import argparse
import ctypes
import math
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Sequence

import numpy as np

from axgraph import core
from axgraph.transformers.cpu import fusion, kernel_c, runtime

from . import common

LIBMVEC_LOOP = """\
#include <stdint.h>
#include <math.h>
#pragma omp declare simd notinbranch
extern float erff(float);
void erf_loop(int64_t n, const float* x, float* out)
{
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = erff(x[i]);
}
"""


def max_ulps(got: np.ndarray, exact: np.ndarray) -> float:
    spacing = np.spacing(np.abs(exact).astype(got.dtype)).astype(np.float64)
    return float(np.max(np.abs(got.astype(np.float64) - exact) / spacing))


def c_kernel(dtype, n: int, march: str):
    et = core.f32 if dtype == np.float32 else core.f64
    x = core.Parameter(et, core.Shape(n))
    node = core.Erf(x)
    group = fusion.FusedGroup((node,), (x,), node)
    with common.kernel_march(None if march == "native" else march):
        return fusion.compile_group(group, {node: (n,), x: (n,)}, "c")


def libmvec_loop(march: str, directory: Path):
    """glibc's erff in an OpenMP loop, or None where that does not build here."""
    chain = kernel_c.toolchain()
    if chain is None or not chain.openmp or "erff" not in chain.vector_math:
        return None
    source, library = directory / "erf_loop.c", directory / f"erf_loop-{march}.so"
    source.write_text(LIBMVEC_LOOP)
    flags = [f for f in kernel_c.BASE_FLAGS if not f.startswith("-march")]
    run = subprocess.run([chain.compiler, *flags, f"-march={march}", "-fopenmp", str(source),
                          "-o", str(library), "-lm"], capture_output=True, text=True)
    if run.returncode != 0:
        return None
    loop = ctypes.CDLL(str(library)).erf_loop
    loop.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p]
    return loop


def candidates(dtype, x: np.ndarray, out: np.ndarray, marches: Sequence[str],
               directory: Path) -> Dict[str, Callable[[], None]]:
    found: Dict[str, Callable[[], None]] = {
        "math.erf": lambda: np.copyto(out, np.vectorize(math.erf, otypes=[np.float64])(x)),
        "numpy engine": lambda: runtime.erf(x, out),
    }
    if kernel_c.c_available():
        for march in ("native", *marches):
            kernel = c_kernel(dtype, x.size, march)
            found[f"C {march}"] = lambda kernel=kernel: kernel(x, out=out)
        if dtype == np.float32:
            for march in ("native", *marches):
                loop = libmvec_loop(march, directory)
                if loop is not None:
                    found[f"libmvec {march}"] = lambda loop=loop: loop(
                        x.size, x.ctypes.data, out.ctypes.data)
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--march", default="x86-64-v3",
                        help="comma-separated -march targets besides native")
    args = parser.parse_args(argv)
    marches = [m.strip() for m in args.march.split(",") if m.strip()]
    rng = np.random.default_rng(0)
    print(f"numpy {np.__version__}; engines: {', '.join(fusion.available_engines())}")
    with tempfile.TemporaryDirectory() as folder:
        for dtype in (np.float32, np.float64):
            x = rng.uniform(-4.5, 4.5, args.size).astype(dtype)
            exact = np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))
            out = np.empty_like(x)
            runs = candidates(dtype, x, out, marches, Path(folder))
            errors = {}
            for name, run in runs.items():
                run()  # warm up (and build)
                errors[name] = max_ulps(out, exact)
            times: Dict[str, List[float]] = {name: [] for name in runs}
            for _ in range(args.rounds):
                for name, run in runs.items():
                    started = time.perf_counter()
                    run()
                    times[name].append(time.perf_counter() - started)
            print(f"\n{np.dtype(dtype).name}, {args.size} elements in [-4.5, 4.5]")
            print(f"{'candidate':<20}{'best ms':>9}{'median ms':>11}{'max ulp':>9}")
            for name in runs:
                print(f"{name:<20}{min(times[name]) * 1e3:>9.2f}"
                      f"{statistics.median(times[name]) * 1e3:>11.2f}{errors[name]:>9.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
